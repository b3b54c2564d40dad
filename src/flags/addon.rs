//! addon-operator's `start` flags: the flags it has beside (or instead of) shell-operator's,
//! with flant's environment variables. The classic names the seeds use (`MODULES_DIR`,
//! `GLOBAL_HOOKS_DIR`, ...) are accepted as aliases of the newer `ADDON_OPERATOR_*`
//! names; when both are set the `ADDON_OPERATOR_*` one wins, as in flant.
//!
//! `flags.rs` merges this table with shell-operator's (minus [`SHELL_ONLY`]) and calls
//! [`addon_flags`] to build the typed settings.

use crate::flags::{FlagSpec, Kind, Values, flag};
use std::path::PathBuf;
use std::time::Duration;

/// shell-operator flags addon-operator does not have (it has its own names for them).
pub(crate) const SHELL_ONLY: &[&str] = &["hooks-dir", "listen-address", "listen-port"];

/// addon-operator's own flags, listed first by `--help`.
pub(crate) const ADDON_FLAGS: &[FlagSpec] = &[
    flag!(aliased "modules-dir", "ADDON_OPERATOR_MODULES_DIR", ["MODULES_DIR"], "modules", Kind::Str,
        "Directories of modules, separated by ':'."),
    flag!(aliased "global-hooks-dir", "ADDON_OPERATOR_GLOBAL_HOOKS_DIR", ["GLOBAL_HOOKS_DIR"], "global-hooks", Kind::Str,
        "Directory of global hooks (its 'hooks' subdirectory when there is one)."),
    flag!(aliased "unnumbered-modules-order", "ADDON_OPERATOR_UNNUMBERED_MODULES_ORDER",
        ["UNNUMBERED_MODULES_ORDER", "UNNUMBERED_MODULE_ORDER"], "1", Kind::Int,
        "Order of modules whose directory has no number prefix."),
    flag!(aliased "tmp-dir", "ADDON_OPERATOR_TMP_DIR", ["SHELL_OPERATOR_TMP_DIR"], "/tmp/addon-operator", Kind::Str,
        "Directory for binding contexts, values files and other temporary files."),
    flag!(aliased "namespace", "ADDON_OPERATOR_NAMESPACE", ["SHELL_OPERATOR_NAMESPACE"], "", Kind::Str,
        "Namespace of the ConfigMap and of every module's Helm release."),
    flag!(aliased "prometheus-listen-address", "ADDON_OPERATOR_LISTEN_ADDRESS", ["SHELL_OPERATOR_LISTEN_ADDRESS"],
        "0.0.0.0", Kind::Str, "Address of the HTTP server for /metrics, /healthz and /ready."),
    flag!(aliased "prometheus-listen-port", "ADDON_OPERATOR_LISTEN_PORT", ["SHELL_OPERATOR_LISTEN_PORT"],
        "9650", Kind::Port, "Port of the HTTP server for /metrics, /healthz and /ready."),
    flag!(aliased "prometheus-metrics-prefix", "ADDON_OPERATOR_PROMETHEUS_METRICS_PREFIX",
        ["SHELL_OPERATOR_PROMETHEUS_METRICS_PREFIX"], "addon_operator_", Kind::Str,
        "Prefix of every self metric name."),
    flag!(
        "config-map",
        "ADDON_OPERATOR_CONFIG_MAP",
        "addon-operator",
        Kind::Str,
        "Name of the ConfigMap that holds the configuration values."
    ),
    flag!(aliased "strict-check-values-mode-enabled", "ADDON_OPERATOR_STRICT_CHECK_VALUES_MODE_ENABLED",
        ["STRICT_CHECK_VALUES_MODE_ENABLED"], "false", Kind::Bool,
        "Require a values.yaml in every modules directory and every module."),
    flag!(
        "helm-bin-path",
        "HELM_BIN_PATH",
        "helm",
        Kind::Str,
        "The helm binary."
    ),
    flag!(
        "helm-history-max",
        "HELM_HISTORY_MAX",
        "10",
        Kind::Int,
        "Revisions helm keeps per release (--history-max)."
    ),
    flag!(
        "helm-timeout",
        "HELM_TIMEOUT",
        "5m",
        Kind::Duration,
        "How long one helm operation may take (--timeout)."
    ),
    flag!(
        "helm-ignore-release",
        "HELM_IGNORE_RELEASE",
        "",
        Kind::Str,
        "A release in the namespace that is never purged (the operator's own)."
    ),
    flag!(
        "helm-monitor-kube-client-qps",
        "HELM_MONITOR_KUBE_CLIENT_QPS",
        "5",
        Kind::Float,
        "Requests per second of the resource monitor's client."
    ),
    flag!(
        "helm-monitor-kube-client-burst",
        "HELM_MONITOR_KUBE_CLIENT_BURST",
        "10",
        Kind::Int,
        "Burst of the resource monitor's client."
    ),
    flag!(
        "resources-check-period",
        "ADDON_OPERATOR_RESOURCES_CHECK_PERIOD",
        "4m30s",
        Kind::Duration,
        "How often the resource monitor checks releases and their objects (plus 0-59 s from 1m up)."
    ),
    flag!(
        "drift-mode",
        "ADDON_OPERATOR_DRIFT_MODE",
        "warn",
        Kind::Choice(&["off", "warn", "correct"]),
        "What to do when a release's object no longer matches its manifest: off, warn (log and count) or correct (a helm upgrade of the release); a module's drift.yaml may say otherwise."
    ),
    flag!(
        "flant-checksum",
        "ADDON_OPERATOR_FLANT_CHECKSUM",
        "false",
        Kind::Bool,
        "Store flant v1.5's checksum with each release (one more helm template per upgrade), so that flant's operator can take the releases back without upgrading them."
    ),
    flag!(
        "module-settings-resources",
        "ADDON_OPERATOR_MODULE_SETTINGS_RESOURCES",
        "false",
        Kind::Bool,
        "Module settings as ModuleSettings custom resources (addon-operator-rs.io) beside the ConfigMap: the operator installs the CRD, validates them with its own webhook and writes their status (docs/module-settings.md)."
    ),
    flag!(
        "module-run-parallelism",
        "ADDON_OPERATOR_MODULE_RUN_PARALLELISM",
        "0",
        Kind::Int,
        "How many modules of one order run at once in a converge; 0: the number of CPUs (at least 2); 1: one at a time."
    ),
    flag!(
        "ha",
        "ADDON_OPERATOR_HA",
        "false",
        Kind::Bool,
        "Leader election on a Lease; needs ADDON_OPERATOR_POD, the listen address (pod IP) and the namespace."
    ),
    flag!(
        "ha-lease-name",
        "ADDON_OPERATOR_HA_LEASE_NAME",
        "addon-operator-leader-election",
        Kind::Str,
        "Name of the Lease in the namespace."
    ),
    flag!(
        "ha-lease-duration",
        "ADDON_OPERATOR_HA_LEASE_DURATION",
        "35s",
        Kind::Duration,
        "How long a standby waits on an unchanged Lease before taking it."
    ),
    flag!(
        "ha-renew-deadline",
        "ADDON_OPERATOR_HA_RENEW_DEADLINE",
        "30s",
        Kind::Duration,
        "The leader stops (exit 0) when no renew succeeded for this long."
    ),
    flag!(
        "ha-retry-period",
        "ADDON_OPERATOR_HA_RETRY_PERIOD",
        "10s",
        Kind::Duration,
        "How often the Lease is renewed or, by a standby, read."
    ),
    flag!(hidden "debug-unix-socket", "DEBUG_UNIX_SOCKET", "/var/run/addon-operator/debug.socket", Kind::Str,
        "Path of the debug unix socket."),
    // flant's newer settings, accepted so deployments written for it start; a value
    // other than the default is logged as having no effect (see NO_EFFECT).
    flag!(
        "hook-metrics-listen-port",
        "ADDON_OPERATOR_HOOK_METRICS_LISTEN_PORT",
        "",
        Kind::Str,
        "Accepted; hook metrics are served on the main port (/metrics and /metrics/hooks)."
    ),
    flag!(
        "shell-chroot-dir",
        "ADDON_OPERATOR_SHELL_CHROOT_DIR",
        "",
        Kind::Str,
        "Accepted; has no effect yet."
    ),
    flag!(
        "applied-module-extenders",
        "ADDON_OPERATOR_APPLIED_MODULE_EXTENDERS",
        "",
        Kind::Str,
        "Accepted; the enabled state always uses values.yaml, ConfigMap, dynamic flags, enabled scripts."
    ),
    flag!(
        "crd-extra-labels",
        "ADDON_OPERATOR_CRD_EXTRA_LABELS",
        "heritage=addon-operator",
        Kind::Str,
        "Labels (k=v,...) written on every CRD installed from a module's crds/ (plus heritage=addon-operator unless a heritage label is given)."
    ),
    flag!(
        "crd-filters",
        "ADDON_OPERATOR_CRD_FILTER_PREFIXES",
        "doc-,_",
        Kind::Str,
        "Comma-separated prefixes: files in a module's crds/ whose name starts with one are not installed."
    ),
    flag!(
        "admission-server-enabled",
        "ADDON_OPERATOR_ADMISSION_SERVER_ENABLED",
        "false",
        Kind::Bool,
        "Accepted; has no effect (flant's admission server serves only library users)."
    ),
    flag!(
        "admission-server-listen-port",
        "ADDON_OPERATOR_ADMISSION_SERVER_LISTEN_PORT",
        "9651",
        Kind::Port,
        "Accepted; has no effect."
    ),
    flag!(
        "admission-server-certs-dir",
        "ADDON_OPERATOR_ADMISSION_SERVER_CERTS_DIR",
        "",
        Kind::Str,
        "Accepted; has no effect."
    ),
];

/// Flags accepted for compatibility that do nothing here.
pub(crate) const NO_EFFECT: &[&str] = &[
    "hook-metrics-listen-port",
    "shell-chroot-dir",
    "applied-module-extenders",
    "admission-server-enabled",
    "admission-server-listen-port",
    "admission-server-certs-dir",
];

/// addon-operator's typed settings.
#[derive(Debug, Clone)]
pub(crate) struct AddonFlags {
    /// Every modules directory, in the order given (empty entries dropped).
    pub(crate) modules_dirs: Vec<PathBuf>,
    /// As given; hooks are searched in its `hooks` subdirectory when it exists.
    pub(crate) global_hooks_dir: PathBuf,
    pub(crate) unnumbered_order: u32,
    pub(crate) config_map: String,
    pub(crate) strict_values: bool,
    pub(crate) helm_bin: PathBuf,
    pub(crate) helm_history_max: u32,
    /// `--flant-checksum`: write flant v1.5's MD5 as `_addonOperatorModuleChecksum`.
    pub(crate) flant_checksum: bool,
    /// `--module-settings-resources`: ModuleSettings custom resources beside the
    /// ConfigMap (`addon/settings/`).
    pub(crate) settings_resources: bool,
    pub(crate) helm_timeout: Duration,
    pub(crate) helm_ignore_release: String,
    pub(crate) resources_check_period: Duration,
    pub(crate) monitor_qps: f32,
    pub(crate) monitor_burst: u32,
    /// `--drift-mode` (off, warn, correct), for modules whose `drift.yaml` names none.
    pub(crate) drift_mode: String,
    /// How many modules of one order run at once (`0` resolved: CPUs, at least 2).
    pub(crate) module_run_parallelism: usize,
    /// `--crd-extra-labels` and `--crd-filters` as given (parsed by `crds.rs` at bind).
    pub(crate) crd_extra_labels: String,
    pub(crate) crd_filters: String,
    /// Compatibility flags set to something other than their default (logged at start).
    pub(crate) ignored: Vec<String>,
}

/// Builds the typed settings; every value was checked by `Values::resolve`.
pub(crate) fn addon_flags(v: &Values) -> AddonFlags {
    AddonFlags {
        modules_dirs: v
            .str("modules-dir")
            .split(':')
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .collect(),
        global_hooks_dir: PathBuf::from(v.str("global-hooks-dir")),
        unnumbered_order: v.num("unnumbered-modules-order"),
        config_map: v.str("config-map"),
        strict_values: v.bool("strict-check-values-mode-enabled"),
        helm_bin: PathBuf::from(v.str("helm-bin-path")),
        helm_history_max: v.num("helm-history-max"),
        flant_checksum: v.bool("flant-checksum"),
        settings_resources: v.bool("module-settings-resources"),
        helm_timeout: v.duration("helm-timeout"),
        helm_ignore_release: v.str("helm-ignore-release"),
        resources_check_period: v.duration("resources-check-period"),
        monitor_qps: v.num("helm-monitor-kube-client-qps"),
        monitor_burst: v.num("helm-monitor-kube-client-burst"),
        drift_mode: v.str("drift-mode"),
        module_run_parallelism: parallelism(v.num("module-run-parallelism")),
        crd_extra_labels: v.str("crd-extra-labels"),
        crd_filters: v.str("crd-filters"),
        ignored: NO_EFFECT
            .iter()
            .filter(|name| {
                let default = ADDON_FLAGS
                    .iter()
                    .find(|f| f.name == **name)
                    .map(|f| f.default);
                default.is_some_and(|d| v.str(name) != d)
            })
            .map(|name| format!("--{name}={}", v.str(name)))
            .collect(),
    }
}

/// `--module-run-parallelism`: as given, or for 0 the number of CPUs, at least 2.
fn parallelism(given: usize) -> usize {
    match given {
        0 => std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(2)
            .max(2),
        n => n,
    }
}

/// flant refuses to start when any Helm 2 setting is present; so do we.
pub(crate) fn check_no_helm2(env: &dyn Fn(&str) -> Option<String>) -> Result<(), String> {
    const HELM2: &[&str] = &[
        "HELM2",
        "TILLER_MAX_HISTORY",
        "TILLER_BIN_PATH",
        "ADDON_OPERATOR_TILLER_LISTEN_PORT",
        "ADDON_OPERATOR_TILLER_PROBE_LISTEN_PORT",
    ];
    match HELM2.iter().find(|n| env(n).is_some_and(|v| !v.is_empty())) {
        Some(name) => Err(format!(
            "env {name}: Helm2 support is deprecated in Addon-operator v1.1+; use helm 3 or 4"
        )),
        None => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flags::Program;

    fn config(env: &[(&str, &str)], flags: &[(&str, &str)]) -> crate::flags::Config {
        let env: std::collections::HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let flags: Vec<_> = flags
            .iter()
            .map(|(n, v)| (Program::Addon.spec(n).expect("known flag"), v.to_string()))
            .collect();
        Values::resolve(Program::Addon, &|k| env.get(k).cloned(), &flags)
            .expect("valid")
            .into_config_for(Program::Addon)
    }

    #[test]
    fn defaults_match_flant_classic() {
        let c = config(&[], &[]);
        let a = c.addon.as_ref().expect("addon settings");
        assert_eq!(c.listen_port, 9650);
        assert_eq!(c.listen_address, "0.0.0.0");
        assert_eq!(c.metrics_prefix, "addon_operator_");
        assert_eq!(c.tmp_dir, PathBuf::from("/tmp/addon-operator"));
        assert_eq!(
            c.debug.unix_socket,
            PathBuf::from("/var/run/addon-operator/debug.socket")
        );
        assert_eq!(a.config_map, "addon-operator");
        assert_eq!(a.helm_bin, PathBuf::from("helm"));
        assert_eq!(a.helm_history_max, 10);
        assert!(!a.flant_checksum, "flant's checksum is opt-in");
        assert_eq!(a.helm_timeout, Duration::from_secs(300));
        assert_eq!(a.modules_dirs, vec![PathBuf::from("modules")]);
        assert_eq!(c.hooks_dir, PathBuf::from("global-hooks"));
        assert_eq!(a.unnumbered_order, 1);
        assert!(a.module_run_parallelism >= 2, "CPUs, at least 2");
        let c = config(&[("ADDON_OPERATOR_MODULE_RUN_PARALLELISM", "1")], &[]);
        let a = c.addon.as_ref().expect("addon settings");
        assert_eq!(a.module_run_parallelism, 1, "1 turns it off");
    }

    #[test]
    fn classic_names_are_aliases_and_new_names_win() {
        let c = config(
            &[("MODULES_DIR", "/a::/b"), ("GLOBAL_HOOKS_DIR", "/g")],
            &[],
        );
        let a = c.addon.as_ref().expect("addon");
        assert_eq!(
            a.modules_dirs,
            vec![PathBuf::from("/a"), PathBuf::from("/b")]
        );
        assert_eq!(c.hooks_dir, PathBuf::from("/g"));
        let c = config(
            &[
                ("MODULES_DIR", "/old"),
                ("ADDON_OPERATOR_MODULES_DIR", "/new"),
                ("ADDON_OPERATOR_FLANT_CHECKSUM", "true"),
            ],
            &[("helm-history-max", "3")],
        );
        let a = c.addon.as_ref().expect("addon");
        assert_eq!(a.modules_dirs, vec![PathBuf::from("/new")]);
        assert_eq!(a.helm_history_max, 3);
        assert!(a.flant_checksum);
    }

    #[test]
    fn a_bad_value_names_the_variable() {
        let err = Values::resolve(
            Program::Addon,
            &|k| (k == "ADDON_OPERATOR_LISTEN_PORT").then(|| "x".to_string()),
            &[],
        )
        .expect_err("bad port");
        assert!(err.0.contains("ADDON_OPERATOR_LISTEN_PORT"), "{}", err.0);
        let helm2 = check_no_helm2(&|k| (k == "HELM2").then(|| "yes".to_string()));
        assert!(helm2.expect_err("helm2").contains("HELM2"));
    }
}
