//! The `start` flags: one table naming every flag, its environment variable, its
//! default and its type, and the typed [`Config`] built from it.
//!
//! Precedence is flag > env > default, as in flant's shell-operator. Every value is
//! validated here, so a bad value stops the program before anything starts, with a
//! message naming the flag (or env var) and what it accepts. `cli.rs` feeds argv and
//! the environment in; everything after startup reads the typed `Config`.

pub(crate) mod addon;

use crate::duration::go_duration;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

/// How a flag's text is checked and converted.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Str,
    Port,
    Int,
    /// A Kubernetes client rate in requests per second (see [`check_qps`]).
    Float,
    Bool,
    Duration,
    /// Repeatable on the command line; comma-separated in the env var.
    List,
    Choice(&'static [&'static str]),
}

/// One flag of `start`.
#[derive(Debug)]
pub struct FlagSpec {
    pub name: &'static str,
    pub env: &'static str,
    pub default: &'static str,
    pub kind: Kind,
    /// Other environment variables read when `env` is unset, in order (addon-operator's
    /// classic names such as `MODULES_DIR` beside `ADDON_OPERATOR_MODULES_DIR`).
    pub aliases: &'static [&'static str],
    /// Hidden flags (flant's `--debug-*`) are accepted but listed only by `debug-options`.
    pub hidden: bool,
    pub help: &'static str,
}

const LOG_LEVELS: &[&str] = &["trace", "debug", "info", "warn", "error", "fatal"];
const LOG_TYPES: &[&str] = &["text", "json", "color"];
const FAILURE_POLICIES: &[&str] = &["Fail", "Ignore"];

macro_rules! flag {
    ($name:expr, $env:expr, $default:expr, $kind:expr, $help:expr) => {
        FlagSpec {
            name: $name,
            env: $env,
            default: $default,
            kind: $kind,
            aliases: &[],
            hidden: false,
            help: $help,
        }
    };
    (aliased $name:expr, $env:expr, [$($alias:expr),*], $default:expr, $kind:expr, $help:expr) => {
        FlagSpec {
            name: $name,
            env: $env,
            default: $default,
            kind: $kind,
            aliases: &[$($alias),*],
            hidden: false,
            help: $help,
        }
    };
    (hidden $name:expr, $env:expr, $default:expr, $kind:expr, $help:expr) => {
        FlagSpec {
            name: $name,
            env: $env,
            default: $default,
            kind: $kind,
            aliases: &[],
            hidden: true,
            help: $help,
        }
    };
}

pub(crate) use flag;

/// Which operator the binary runs as: chosen by argv[0] or the `addon-operator`
/// subcommand. Each has its own flag table, defaults and banner.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Program {
    Shell,
    Addon,
}

impl Program {
    /// The name printed in banners, help and `version`.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Program::Shell => "shell-operator",
            Program::Addon => "addon-operator",
        }
    }

    /// The flags of `start`, in the order `--help` lists them.
    pub fn flags(self) -> Vec<&'static FlagSpec> {
        match self {
            Program::Shell => START_FLAGS.iter().collect(),
            Program::Addon => {
                let own = addon::ADDON_FLAGS;
                let dropped = addon::SHELL_ONLY;
                own.iter()
                    .chain(START_FLAGS.iter().filter(|f| {
                        !own.iter().any(|o| o.name == f.name) && !dropped.contains(&f.name)
                    }))
                    .collect()
            }
        }
    }

    /// Looks a flag of this program up by name.
    pub(crate) fn spec(self, name: &str) -> Option<&'static FlagSpec> {
        self.flags().into_iter().find(|f| f.name == name)
    }
}

/// Every flag of `shell-operator start`, in the order `--help` lists them.
pub(crate) const START_FLAGS: &[FlagSpec] = &[
    flag!(
        "hooks-dir",
        "SHELL_OPERATOR_HOOKS_DIR",
        "hooks",
        Kind::Str,
        "Directory searched recursively for hooks."
    ),
    flag!(
        "tmp-dir",
        "SHELL_OPERATOR_TMP_DIR",
        "/tmp/shell-operator",
        Kind::Str,
        "Directory for binding contexts and other temporary files."
    ),
    flag!(
        "listen-address",
        "SHELL_OPERATOR_LISTEN_ADDRESS",
        "0.0.0.0",
        Kind::Str,
        "Address of the HTTP server for /metrics and /healthz."
    ),
    flag!(
        "listen-port",
        "SHELL_OPERATOR_LISTEN_PORT",
        "9115",
        Kind::Port,
        "Port of the HTTP server for /metrics and /healthz."
    ),
    flag!(
        "prometheus-metrics-prefix",
        "SHELL_OPERATOR_PROMETHEUS_METRICS_PREFIX",
        "shell_operator_",
        Kind::Str,
        "Prefix of every self metric name."
    ),
    flag!(
        "namespace",
        "SHELL_OPERATOR_NAMESPACE",
        "",
        Kind::Str,
        "Namespace of the operator's webhook Services."
    ),
    flag!(
        "hook-run-timeout",
        "SHELL_OPERATOR_HOOK_RUN_TIMEOUT",
        "0s",
        Kind::Duration,
        "Kill a hook run after this long and count it failed (0 = no limit; not in flant)."
    ),
    flag!(
        "shutdown-grace-period",
        "SHELL_OPERATOR_SHUTDOWN_GRACE_PERIOD",
        "10s",
        Kind::Duration,
        "On SIGTERM, time running hooks get after SIGTERM before SIGKILL (not in flant)."
    ),
    flag!(
        "kube-context",
        "KUBE_CONTEXT",
        "",
        Kind::Str,
        "Context of the kubeconfig to use."
    ),
    flag!(
        "kube-config",
        "KUBE_CONFIG",
        "",
        Kind::Str,
        "Path to a kubeconfig file (default: KUBECONFIG, ~/.kube/config, in-cluster)."
    ),
    flag!(
        "kube-server",
        "KUBE_SERVER",
        "",
        Kind::Str,
        "API server URL; overrides the kubeconfig's server."
    ),
    flag!(
        "kube-client-qps",
        "KUBE_CLIENT_QPS",
        "5",
        Kind::Float,
        "Requests per second of the main Kubernetes client."
    ),
    flag!(
        "kube-client-burst",
        "KUBE_CLIENT_BURST",
        "10",
        Kind::Int,
        "Burst of the main Kubernetes client."
    ),
    flag!(
        "object-patcher-kube-client-qps",
        "OBJECT_PATCHER_KUBE_CLIENT_QPS",
        "5",
        Kind::Float,
        "Requests per second of the object patcher's client."
    ),
    flag!(
        "object-patcher-kube-client-burst",
        "OBJECT_PATCHER_KUBE_CLIENT_BURST",
        "10",
        Kind::Int,
        "Burst of the object patcher's client."
    ),
    flag!(
        "object-patcher-kube-client-timeout",
        "OBJECT_PATCHER_KUBE_CLIENT_TIMEOUT",
        "10s",
        Kind::Duration,
        "Request timeout of the object patcher's client."
    ),
    flag!(
        "jq-library-path",
        "JQ_LIBRARY_PATH",
        "",
        Kind::Str,
        "Directory of jq modules for jqFilter."
    ),
    flag!(
        "log-level",
        "LOG_LEVEL",
        "info",
        Kind::Choice(LOG_LEVELS),
        "Logging level."
    ),
    flag!(
        "log-type",
        "LOG_TYPE",
        "text",
        Kind::Choice(LOG_TYPES),
        "Logging format."
    ),
    flag!(
        "log-no-time",
        "LOG_NO_TIME",
        "false",
        Kind::Bool,
        "Leave the time out of log lines."
    ),
    flag!(
        "log-proxy-hook-json",
        "LOG_PROXY_HOOK_JSON",
        "false",
        Kind::Bool,
        "Pass hooks' JSON log lines through as structured records."
    ),
    flag!(
        "validating-webhook-configuration-name",
        "VALIDATING_WEBHOOK_CONFIGURATION_NAME",
        "shell-operator-hooks",
        Kind::Str,
        "Base name of the (Validating|Mutating)WebhookConfiguration."
    ),
    flag!(
        "validating-webhook-service-name",
        "VALIDATING_WEBHOOK_SERVICE_NAME",
        "shell-operator-validating-svc",
        Kind::Str,
        "Service that fronts the admission webhook server."
    ),
    flag!(
        "validating-webhook-server-cert",
        "VALIDATING_WEBHOOK_SERVER_CERT",
        "/validating-certs/tls.crt",
        Kind::Str,
        "Admission webhook server certificate."
    ),
    flag!(
        "validating-webhook-server-key",
        "VALIDATING_WEBHOOK_SERVER_KEY",
        "/validating-certs/tls.key",
        Kind::Str,
        "Admission webhook server key."
    ),
    flag!(
        "validating-webhook-ca",
        "VALIDATING_WEBHOOK_CA",
        "/validating-certs/ca.crt",
        Kind::Str,
        "CA bundle written into the webhook configuration."
    ),
    flag!(
        "validating-webhook-client-ca",
        "VALIDATING_WEBHOOK_CLIENT_CA",
        "",
        Kind::List,
        "CA to verify admission clients (repeatable)."
    ),
    flag!(
        "validating-webhook-failure-policy",
        "VALIDATING_WEBHOOK_FAILURE_POLICY",
        "Fail",
        Kind::Choice(FAILURE_POLICIES),
        "Default failurePolicy of admission webhooks."
    ),
    flag!(
        "validating-webhook-listen-port",
        "VALIDATING_WEBHOOK_LISTEN_PORT",
        "9680",
        Kind::Port,
        "Port of the admission webhook server."
    ),
    flag!(
        "validating-webhook-listen-address",
        "VALIDATING_WEBHOOK_LISTEN_ADDRESS",
        "0.0.0.0",
        Kind::Str,
        "Address of the admission webhook server."
    ),
    flag!(
        "conversion-webhook-service-name",
        "CONVERSION_WEBHOOK_SERVICE_NAME",
        "shell-operator-conversion-svc",
        Kind::Str,
        "Service that fronts the conversion webhook server."
    ),
    flag!(
        "conversion-webhook-server-cert",
        "CONVERSION_WEBHOOK_SERVER_CERT",
        "/conversion-certs/tls.crt",
        Kind::Str,
        "Conversion webhook server certificate."
    ),
    flag!(
        "conversion-webhook-server-key",
        "CONVERSION_WEBHOOK_SERVER_KEY",
        "/conversion-certs/tls.key",
        Kind::Str,
        "Conversion webhook server key."
    ),
    flag!(
        "conversion-webhook-ca",
        "CONVERSION_WEBHOOK_CA",
        "/conversion-certs/ca.crt",
        Kind::Str,
        "CA bundle written into CRDs' conversion config."
    ),
    flag!(
        "conversion-webhook-client-ca",
        "CONVERSION_WEBHOOK_CLIENT_CA",
        "",
        Kind::List,
        "CA to verify conversion clients (repeatable)."
    ),
    flag!(
        "conversion-webhook-listen-port",
        "CONVERSION_WEBHOOK_LISTEN_PORT",
        "9681",
        Kind::Port,
        "Port of the conversion webhook server."
    ),
    flag!(
        "conversion-webhook-listen-address",
        "CONVERSION_WEBHOOK_LISTEN_ADDRESS",
        "0.0.0.0",
        Kind::Str,
        "Address of the conversion webhook server."
    ),
    flag!(
        "ha",
        "SHELL_OPERATOR_HA",
        "false",
        Kind::Bool,
        "Leader election on a Lease: only the holder runs hooks (not in flant)."
    ),
    flag!(
        "ha-lease-name",
        "SHELL_OPERATOR_HA_LEASE_NAME",
        "shell-operator-leader-election",
        Kind::Str,
        "Name of the Lease in --namespace (else the client's namespace)."
    ),
    flag!(
        "ha-lease-duration",
        "SHELL_OPERATOR_HA_LEASE_DURATION",
        "35s",
        Kind::Duration,
        "How long a standby waits on an unchanged Lease before taking it."
    ),
    flag!(
        "ha-renew-deadline",
        "SHELL_OPERATOR_HA_RENEW_DEADLINE",
        "30s",
        Kind::Duration,
        "The leader stops (exit 0) when no renew succeeded for this long."
    ),
    flag!(
        "ha-retry-period",
        "SHELL_OPERATOR_HA_RETRY_PERIOD",
        "10s",
        Kind::Duration,
        "How often the Lease is renewed or, by a standby, read."
    ),
    flag!(hidden "debug-unix-socket", "DEBUG_UNIX_SOCKET", "/var/run/shell-operator/debug.socket", Kind::Str, "Path of the debug unix socket."),
    flag!(hidden "debug-http-addr", "DEBUG_HTTP_SERVER_ADDR", "", Kind::Str, "Also serve the debug endpoints on this plain HTTP address."),
    flag!(hidden "debug-keep-tmp-files", "DEBUG_KEEP_TMP_FILES", "false", Kind::Bool, "Keep hooks' temporary files after runs."),
    flag!(hidden "debug-kubernetes-api", "DEBUG_KUBERNETES_API", "false", Kind::Bool, "Accepted for compatibility; does nothing (see docs/migrating.md)."),
];

/// A bad flag or env value: which one, what was given, what is accepted.
#[derive(Debug, PartialEq)]
pub(crate) struct FlagError(pub String);

impl std::fmt::Display for FlagError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The typed settings of a `start` run.
#[derive(Debug, Clone)]
pub(crate) struct Config {
    pub(crate) program: Program,
    /// shell-operator's hooks dir, or addon-operator's global hooks dir.
    pub(crate) hooks_dir: PathBuf,
    pub(crate) tmp_dir: PathBuf,
    pub(crate) listen_address: String,
    pub(crate) listen_port: u16,
    pub(crate) metrics_prefix: String,
    pub(crate) namespace: String,
    pub(crate) hook_run_timeout: Option<Duration>,
    pub(crate) shutdown_grace: Duration,
    pub(crate) kube: KubeFlags,
    pub(crate) jq_library_path: Option<PathBuf>,
    pub(crate) log: LogFlags,
    pub(crate) validating: WebhookFlags,
    pub(crate) conversion: WebhookFlags,
    pub(crate) debug: DebugFlags,
    /// Leader election (`--ha*`).
    pub(crate) ha: HaFlags,
    /// addon-operator's own settings; `None` for shell-operator.
    pub(crate) addon: Option<addon::AddonFlags>,
}

/// Kubernetes client settings (main client and object patcher).
#[derive(Debug, Clone)]
pub(crate) struct KubeFlags {
    pub(crate) context: String,
    pub(crate) config: String,
    pub(crate) server: String,
    pub(crate) qps: f32,
    pub(crate) burst: u32,
    pub(crate) patcher_qps: f32,
    pub(crate) patcher_burst: u32,
    pub(crate) patcher_timeout: Duration,
}

/// The `--ha*` flags of either program.
#[derive(Debug, Clone)]
pub(crate) struct HaFlags {
    pub(crate) enabled: bool,
    pub(crate) lease_name: String,
    pub(crate) timings: Timings,
}

/// Lease duration, renew deadline and retry period.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timings {
    pub(crate) lease_duration: Duration,
    pub(crate) renew_deadline: Duration,
    pub(crate) retry_period: Duration,
}

impl Timings {
    /// client-go's rule: lease duration > renew deadline > retry period > 0.
    pub(crate) fn check(&self, program: &str) -> Result<(), String> {
        let Timings {
            lease_duration: l,
            renew_deadline: r,
            retry_period: p,
        } = *self;
        if p.is_zero() || r <= p || l <= r {
            return Err(format!(
                "{program} HA: need lease duration ({l:?}) > renew deadline ({r:?}) > retry period ({p:?}) > 0"
            ));
        }
        Ok(())
    }
}

/// Logging settings.
#[derive(Debug, Clone)]
pub(crate) struct LogFlags {
    pub(crate) level: String,
    pub(crate) log_type: String,
    pub(crate) no_time: bool,
    pub(crate) proxy_hook_json: bool,
}

/// One webhook server's settings (admission or conversion).
#[derive(Debug, Clone)]
pub(crate) struct WebhookFlags {
    /// Only admission has a configuration name.
    pub(crate) configuration_name: String,
    pub(crate) service_name: String,
    pub(crate) server_cert: PathBuf,
    pub(crate) server_key: PathBuf,
    pub(crate) ca: PathBuf,
    pub(crate) client_ca: Vec<PathBuf>,
    /// Only admission has a failure policy.
    pub(crate) failure_policy: String,
    pub(crate) listen_port: u16,
    pub(crate) listen_address: String,
}

/// The hidden `--debug-*` settings.
#[derive(Debug, Clone)]
pub(crate) struct DebugFlags {
    pub(crate) unix_socket: PathBuf,
    pub(crate) http_addr: String,
    pub(crate) keep_tmp_files: bool,
}

#[cfg(test)]
/// Looks a shell-operator flag up by name.
pub(crate) fn spec(name: &str) -> Option<&'static FlagSpec> {
    Program::Shell.spec(name)
}

/// Raw values after precedence, keyed by flag name.
#[derive(Debug, Default)]
pub(crate) struct Values(HashMap<&'static str, Vec<String>>);

impl Values {
    /// Applies env vars (from `env`) over defaults, then `flags` (name, value) over both.
    pub(crate) fn resolve(
        program: Program,
        env: &dyn Fn(&str) -> Option<String>,
        flags: &[(&'static FlagSpec, String)],
    ) -> Result<Values, FlagError> {
        let mut values = Values::default();
        for spec in program.flags() {
            let from_env = std::iter::once(spec.env)
                .chain(spec.aliases.iter().copied())
                .find_map(|name| env(name).map(|v| (v, name)));
            let (value, source) = match from_env {
                Some((v, name)) => (v, format!("env {name}")),
                None => (
                    spec.default.to_string(),
                    format!("default of --{}", spec.name),
                ),
            };
            let list = match spec.kind {
                Kind::List => value
                    .split(',')
                    .map(str::trim)
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect(),
                _ => vec![value],
            };
            for v in &list {
                check(spec, v, &source)?;
            }
            values.0.insert(spec.name, list);
        }
        let mut from_flags: HashMap<&str, Vec<String>> = HashMap::new();
        for (spec, v) in flags {
            check(spec, v, &format!("flag --{}", spec.name))?;
            from_flags.entry(spec.name).or_default().push(v.clone());
        }
        for (name, mut list) in from_flags {
            let spec = program
                .spec(name)
                .ok_or_else(|| FlagError(format!("unknown flag --{name}")))?;
            if spec.kind != Kind::List {
                list = list.split_off(list.len() - 1); // the last occurrence wins
            }
            values.0.insert(spec.name, list);
        }
        Ok(values)
    }

    pub(crate) fn str(&self, name: &str) -> String {
        self.0
            .get(name)
            .and_then(|v| v.last())
            .cloned()
            .unwrap_or_default()
    }
    pub(crate) fn list(&self, name: &str) -> Vec<PathBuf> {
        self.0
            .get(name)
            .map(|v| v.iter().map(PathBuf::from).collect())
            .unwrap_or_default()
    }
    pub(crate) fn bool(&self, name: &str) -> bool {
        parse_bool(&self.str(name)).unwrap_or(false)
    }
    pub(crate) fn num<T: std::str::FromStr + Default>(&self, name: &str) -> T {
        self.str(name).trim().parse().unwrap_or_default()
    }
    pub(crate) fn duration(&self, name: &str) -> Duration {
        go_duration(&self.str(name)).unwrap_or_default()
    }

    #[cfg(test)]
    /// Builds the typed config; every value was checked by `resolve`.
    pub(crate) fn into_config(self) -> Config {
        self.into_config_for(Program::Shell)
    }

    /// Builds the typed config of `program`; addon-operator's global hooks dir takes
    /// the place of the hooks dir and `--prometheus-listen-*` of `--listen-*`.
    pub(crate) fn into_config_for(self, program: Program) -> Config {
        let v = &self;
        let timeout = v.duration("hook-run-timeout");
        let addon = (program == Program::Addon).then(|| addon::addon_flags(v));
        let (hooks_dir, listen) = match &addon {
            Some(a) => (a.global_hooks_dir.clone(), "prometheus-listen"),
            None => (PathBuf::from(v.str("hooks-dir")), "listen"),
        };
        Config {
            program,
            hooks_dir,
            tmp_dir: PathBuf::from(v.str("tmp-dir")),
            listen_address: v.str(&format!("{listen}-address")),
            listen_port: v.num(&format!("{listen}-port")),
            metrics_prefix: v.str("prometheus-metrics-prefix"),
            namespace: v.str("namespace"),
            hook_run_timeout: (!timeout.is_zero()).then_some(timeout),
            shutdown_grace: v.duration("shutdown-grace-period"),
            kube: KubeFlags {
                context: v.str("kube-context"),
                config: v.str("kube-config"),
                server: v.str("kube-server"),
                qps: v.num("kube-client-qps"),
                burst: v.num("kube-client-burst"),
                patcher_qps: v.num("object-patcher-kube-client-qps"),
                patcher_burst: v.num("object-patcher-kube-client-burst"),
                patcher_timeout: v.duration("object-patcher-kube-client-timeout"),
            },
            jq_library_path: Some(v.str("jq-library-path"))
                .filter(|s| !s.is_empty())
                .map(PathBuf::from),
            log: LogFlags {
                level: v.str("log-level").to_lowercase(),
                log_type: v.str("log-type").to_lowercase(),
                no_time: v.bool("log-no-time"),
                proxy_hook_json: v.bool("log-proxy-hook-json"),
            },
            validating: webhook(v, "validating"),
            conversion: webhook(v, "conversion"),
            debug: DebugFlags {
                unix_socket: PathBuf::from(v.str("debug-unix-socket")),
                http_addr: v.str("debug-http-addr"),
                keep_tmp_files: v.bool("debug-keep-tmp-files"),
            },
            ha: HaFlags {
                enabled: v.bool("ha"),
                lease_name: v.str("ha-lease-name"),
                timings: Timings {
                    lease_duration: v.duration("ha-lease-duration"),
                    renew_deadline: v.duration("ha-renew-deadline"),
                    retry_period: v.duration("ha-retry-period"),
                },
            },
            addon,
        }
    }
}

fn webhook(v: &Values, kind: &str) -> WebhookFlags {
    let get = |suffix: &str| v.str(&format!("{kind}-webhook-{suffix}"));
    WebhookFlags {
        configuration_name: get("configuration-name"),
        service_name: get("service-name"),
        server_cert: get("server-cert").into(),
        server_key: get("server-key").into(),
        ca: get("ca").into(),
        client_ca: v.list(&format!("{kind}-webhook-client-ca")),
        failure_policy: get("failure-policy"),
        listen_port: get("listen-port").parse().unwrap_or_default(),
        listen_address: get("listen-address"),
    }
}

/// Go's `strconv.ParseBool`.
pub(crate) fn parse_bool(s: &str) -> Option<bool> {
    match s {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Some(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Some(false),
        _ => None,
    }
}

/// Checks one value against its flag's kind; `source` says where it came from.
fn check(spec: &FlagSpec, value: &str, source: &str) -> Result<(), FlagError> {
    let bad = |accepted: &str| {
        Err(FlagError(format!(
            "{source}: invalid value {value:?}: {accepted}"
        )))
    };
    match spec.kind {
        Kind::Str | Kind::List => Ok(()),
        Kind::Port => match value.trim().parse::<u16>() {
            Ok(_) => Ok(()),
            Err(_) => bad("expected a port number 0-65535"),
        },
        Kind::Int => match value.trim().parse::<u32>() {
            Ok(_) => Ok(()),
            Err(_) => bad("expected a non-negative integer"),
        },
        Kind::Float => check_qps(value).or_else(|e| bad(&e)),
        Kind::Bool => match parse_bool(value) {
            Some(_) => Ok(()),
            None => bad("expected a boolean: true, false, 1, 0, t, f"),
        },
        Kind::Duration => match go_duration(value) {
            Ok(_) => Ok(()),
            Err(e) => bad(&format!("expected a duration like 10s, 1m30s ({e})")),
        },
        Kind::Choice(choices) => {
            let ok = choices.iter().any(|c| {
                if spec.name.starts_with("log-") {
                    c.eq_ignore_ascii_case(value)
                } else {
                    *c == value
                }
            });
            if ok {
                Ok(())
            } else {
                bad(&format!("accepted values: {}", choices.join(", ")))
            }
        }
    }
}

/// The slowest client rate that can be honoured: the wait for one token, 1e19 s,
/// still fits a `Duration` (at most about 1.8e19 s).
const MIN_QPS: f64 = 1e-19;

/// Checks a client QPS: 0 (client-go's "the default rate"), a negative number
/// (client-go's "no limit"), or a rate from [`MIN_QPS`] up to the largest `f32`.
fn check_qps(value: &str) -> Result<(), String> {
    // client-go's meanings: 0 is the default rate, a negative rate no limit.
    let q = match value.trim().parse::<f64>() {
        Ok(q) if q.is_finite() => q,
        _ => return Err("expected a number (0 = the default rate, negative = no limit)".into()),
    };
    if (q as f32).is_infinite() {
        return Err(format!(
            "too large, at most {:e} requests per second",
            f32::MAX
        ));
    }
    if q > 0.0 && q < MIN_QPS {
        return Err(format!(
            "too small: the wait for one request would overflow; expected 0 (the default rate) or at least {MIN_QPS:e} requests per second"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn resolve(env: &[(&str, &str)], flags: &[(&str, &str)]) -> Result<Config, FlagError> {
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let flags: Vec<_> = flags
            .iter()
            .map(|(n, v)| (spec(n).expect("known flag"), v.to_string()))
            .collect();
        Values::resolve(Program::Shell, &|k| env.get(k).cloned(), &flags).map(Values::into_config)
    }

    #[test]
    fn defaults_match_flant() {
        let c = resolve(&[], &[]).expect("defaults are valid");
        assert_eq!(c.hooks_dir, PathBuf::from("hooks"));
        assert_eq!(c.tmp_dir, PathBuf::from("/tmp/shell-operator"));
        assert_eq!(
            (c.listen_address.as_str(), c.listen_port),
            ("0.0.0.0", 9115)
        );
        assert_eq!(c.metrics_prefix, "shell_operator_");
        assert_eq!(
            (c.kube.qps, c.kube.burst, c.kube.patcher_timeout),
            (5.0, 10, Duration::from_secs(10))
        );
        assert_eq!(c.validating.configuration_name, "shell-operator-hooks");
        assert_eq!(c.validating.listen_port, 9680);
        assert_eq!(c.validating.failure_policy, "Fail");
        assert_eq!(c.conversion.listen_port, 9681);
        assert_eq!(
            c.conversion.server_cert,
            PathBuf::from("/conversion-certs/tls.crt")
        );
        assert_eq!(
            c.debug.unix_socket,
            PathBuf::from("/var/run/shell-operator/debug.socket")
        );
        assert_eq!(
            (c.log.level.as_str(), c.log.log_type.as_str()),
            ("info", "text")
        );
        assert_eq!(c.hook_run_timeout, None);
    }

    #[test]
    fn flag_beats_env_beats_default() {
        let c = resolve(&[("SHELL_OPERATOR_LISTEN_PORT", "1000")], &[]).expect("valid");
        assert_eq!(c.listen_port, 1000);
        let c = resolve(
            &[("SHELL_OPERATOR_LISTEN_PORT", "1000")],
            &[("listen-port", "2000")],
        )
        .expect("valid");
        assert_eq!(c.listen_port, 2000);
    }

    #[test]
    fn client_ca_list_from_env_is_replaced_by_flags() {
        let env = [("VALIDATING_WEBHOOK_CLIENT_CA", "a.crt, b.crt")];
        assert_eq!(
            resolve(&env, &[]).expect("valid").validating.client_ca,
            vec![PathBuf::from("a.crt"), PathBuf::from("b.crt")]
        );
        let c = resolve(
            &env,
            &[
                ("validating-webhook-client-ca", "c.crt"),
                ("validating-webhook-client-ca", "d.crt"),
            ],
        )
        .expect("valid");
        assert_eq!(
            c.validating.client_ca,
            vec![PathBuf::from("c.crt"), PathBuf::from("d.crt")]
        );
    }

    #[test]
    fn bad_values_name_the_flag_and_accepted_values() {
        let err = resolve(&[], &[("listen-port", "abc")]).unwrap_err().0;
        assert_eq!(
            err,
            "flag --listen-port: invalid value \"abc\": expected a port number 0-65535"
        );
        let err = resolve(&[], &[("log-type", "fancy")]).unwrap_err().0;
        assert_eq!(
            err,
            "flag --log-type: invalid value \"fancy\": accepted values: text, json, color"
        );
        let err = resolve(&[("LOG_NO_TIME", "maybe")], &[]).unwrap_err().0;
        assert!(
            err.starts_with("env LOG_NO_TIME: invalid value \"maybe\""),
            "{err}"
        );
        let err = resolve(&[], &[("validating-webhook-failure-policy", "fail")])
            .unwrap_err()
            .0;
        assert!(err.contains("accepted values: Fail, Ignore"), "{err}");
        let err = resolve(&[], &[("hook-run-timeout", "10 minutes")])
            .unwrap_err()
            .0;
        assert!(
            err.starts_with("flag --hook-run-timeout: invalid value"),
            "{err}"
        );
    }

    #[test]
    fn qps_that_cannot_be_honoured_is_refused_naming_the_variable() {
        for (flag, env) in [
            ("kube-client-qps", "KUBE_CLIENT_QPS"),
            (
                "object-patcher-kube-client-qps",
                "OBJECT_PATCHER_KUBE_CLIENT_QPS",
            ),
        ] {
            // Too small to schedule, too small for f32 (it would read as 0, the
            // default), too big for f32, and not numbers at all.
            for bad in ["1e-30", "1e-50", "1e39", "NaN", "inf", "-inf"] {
                let err = resolve(&[(env, bad)], &[]).unwrap_err().0;
                assert!(
                    err.starts_with(&format!("env {env}: invalid value {bad:?}: ")),
                    "{err}"
                );
                let err = resolve(&[], &[(flag, bad)]).unwrap_err().0;
                assert!(
                    err.starts_with(&format!("flag --{flag}: invalid value {bad:?}: ")),
                    "{err}"
                );
            }
            // Negative means no limit, as in client-go.
            assert!(resolve(&[(env, "-1")], &[]).is_ok(), "{env}=-1");
        }
        let c = resolve(
            &[("KUBE_CLIENT_QPS", "0")],
            &[("object-patcher-kube-client-qps", "0.001")],
        )
        .expect("0 (the default rate) and small rates are fine");
        assert_eq!((c.kube.qps, c.kube.patcher_qps), (0.0, 0.001));
        let c = resolve(&[("KUBE_CLIENT_QPS", "1e-19")], &[]).expect("the smallest rate");
        assert!(c.kube.qps > 0.0);
    }

    #[test]
    fn log_level_is_case_insensitive() {
        let c = resolve(&[("LOG_LEVEL", "DEBUG")], &[]).expect("valid");
        assert_eq!(c.log.level, "debug");
    }
}
