//! High availability: Lease leader election for both operators. With HA on, every
//! replica binds as usual and serves `/metrics`, `/healthz` and its webhook
//! servers, but acts (hooks, webhook registration, ConfigMap writes, helm) only
//! once it holds the Lease; it stops and exits 0 when it loses it.
//!
//! # Layout
//! - [`settings`] (this file): the flags, the identity and the namespace, per program.
//! - `lease`: the Lease record and its resourceVersion-guarded writes.
//! - `elector`: the acquire / renew / release state machine and its thread.
//! - `readiness`: `/ready` while waiting (flant's proxy to the leader for addon-operator).
//!
//! `operator.rs` spawns the `leader-election` thread, waits for [`Note::Acquired`]
//! before its spawn step goes on, and watches for [`Note::Lost`] (and the renew
//! deadline itself) while it runs.

mod elector;
mod lease;
pub(crate) mod readiness;

pub(crate) use crate::flags::Timings;
pub(crate) use elector::{Elector, Handle, Note, Status};
pub(crate) use lease::LeaseClient;

use crate::flags::{Config, Program};
use crate::kube::{Client, KubeSettings, RetryPolicy};
use std::time::Duration;

/// Where the lease is and who this replica is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Settings {
    pub(crate) lease_name: String,
    /// Empty: the kube client's namespace (context or in-cluster file).
    pub(crate) namespace: String,
    pub(crate) identity: String,
    pub(crate) timings: Timings,
}

/// HA settings of `config` (`None` with HA off); `env` reads the environment.
/// shell-operator: identity from `SHELL_OPERATOR_POD`, else the hostname;
/// addon-operator: flant's `<pod>.<ip with - for .>.<namespace>.pod`, which needs
/// `ADDON_OPERATOR_POD`, the listen address (pod IP) and the namespace.
pub(crate) fn settings(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Settings>, LeaderError> {
    let ha = &config.ha;
    if !ha.enabled {
        return Ok(None);
    }
    let program = config.program.name();
    ha.timings.check(program)?;
    let identity = match config.program {
        Program::Shell => env("SHELL_OPERATOR_POD")
            .filter(|p| !p.is_empty())
            .or_else(hostname)
            .ok_or("shell-operator HA: SHELL_OPERATOR_POD is empty and the hostname unknown")?,
        Program::Addon => addon_identity(config, env)?,
    };
    Ok(Some(Settings {
        lease_name: ha.lease_name.clone(),
        namespace: config.namespace.clone(),
        identity,
        timings: ha.timings,
    }))
}

fn addon_identity(
    config: &Config,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<String, LeaderError> {
    let pod = env("ADDON_OPERATOR_POD")
        .filter(|p| !p.is_empty())
        .ok_or("addon-operator HA: ADDON_OPERATOR_POD env not set or empty")?;
    let ip = config.listen_address.as_str();
    if ip.is_empty() || ip == "0.0.0.0" {
        return Err(format!(
            "addon-operator HA: ADDON_OPERATOR_LISTEN_ADDRESS must be the pod IP, not {ip:?}"
        )
        .into());
    }
    if config.namespace.is_empty() {
        return Err("addon-operator HA: ADDON_OPERATOR_NAMESPACE env not set or empty".into());
    }
    Ok(format!(
        "{pod}.{}.{}.pod",
        ip.replace('.', "-"),
        config.namespace
    ))
}

/// The kernel's hostname (a pod's name inside Kubernetes).
fn hostname() -> Option<String> {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .or_else(|| std::env::var("HOSTNAME").ok())
        .map(|h| h.trim().to_string())
        .filter(|h| !h.is_empty())
}

/// The `<prefix>ha_is_leader` gauge (1 leading, 0 waiting), registered in `metrics`.
pub(crate) fn gauge(
    prefix: &str,
    metrics: &crate::metrics::Metrics,
) -> Result<prometheus::IntGauge, LeaderError> {
    let gauge = prometheus::IntGauge::new(
        format!("{prefix}ha_is_leader"),
        "1 while this replica holds the leader-election Lease, 0 while it waits.",
    )
    .map_err(|e| LeaderError::from(format!("metric {prefix}ha_is_leader: {e}")))?;
    metrics
        .register(Box::new(gauge.clone()))
        .map_err(|e| LeaderError::from(format!("metric {prefix}ha_is_leader: {e}")))?;
    Ok(gauge)
}

/// The elector for `settings`: its own kube client (no retries, a timeout of one
/// renew deadline), the namespace resolved, ready to start.
pub(crate) fn elector(
    config: &Config,
    settings: &Settings,
    metrics: &crate::metrics::Metrics,
) -> Result<Elector, LeaderError> {
    let t = settings.timings;
    let kube = KubeSettings {
        component: "leader_election".into(),
        timeout: t.renew_deadline,
        ..crate::kube::KubeSettings::from_flags(&config.kube, "leader_election")
    };
    let client = Client::from_config(&kube)
        .map_err(|e| LeaderError::from(format!("kubernetes client for leader election: {e}")))?
        .with_retry(RetryPolicy {
            max_retries: 0,
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(100),
        });
    let namespace = match settings.namespace.as_str() {
        "" => client.default_namespace().to_string(),
        ns => ns.to_string(),
    };
    crate::log::info(
        "HA mode: leader election",
        &[
            ("lease", &format!("{namespace}/{}", settings.lease_name)),
            ("identity", &settings.identity),
        ],
    );
    Ok(Elector {
        lease: LeaseClient::new(client, &namespace, &settings.lease_name),
        identity: settings.identity.clone(),
        timings: t,
        gauge: gauge(&config.metrics_prefix, metrics)?,
    })
}

/// Why leader election could not be set up: a missing setting, a metric, the Lease client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LeaderError {
    problem: String,
}

impl From<String> for LeaderError {
    fn from(problem: String) -> LeaderError {
        LeaderError { problem }
    }
}

impl From<&str> for LeaderError {
    fn from(problem: &str) -> LeaderError {
        LeaderError::from(problem.to_string())
    }
}

impl std::fmt::Display for LeaderError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for LeaderError {}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flags::Values;

    fn config(program: Program, env: &[(&str, &str)]) -> Config {
        let lookup = |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        };
        Values::resolve(program, &lookup, &[])
            .unwrap()
            .into_config_for(program)
    }

    fn env_of<'a>(env: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k: &str| {
            env.iter()
                .find(|(n, _)| *n == k)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn addon_identity_is_flants() {
        let env = [
            ("ADDON_OPERATOR_HA", "true"),
            ("ADDON_OPERATOR_POD", "addon-0"),
            ("ADDON_OPERATOR_LISTEN_ADDRESS", "10.1.2.3"),
            ("ADDON_OPERATOR_NAMESPACE", "d8"),
        ];
        let s = settings(&config(Program::Addon, &env), &env_of(&env))
            .unwrap()
            .unwrap();
        assert_eq!(s.identity, "addon-0.10-1-2-3.d8.pod");
        assert_eq!(s.lease_name, "addon-operator-leader-election");
        assert_eq!(s.timings.lease_duration, Duration::from_secs(35));
        assert_eq!(s.timings.renew_deadline, Duration::from_secs(30));
        assert_eq!(s.timings.retry_period, Duration::from_secs(10));
        let no_pod = &env[..1];
        let err = settings(&config(Program::Addon, &env), &env_of(no_pod))
            .unwrap_err()
            .to_string();
        assert!(err.contains("ADDON_OPERATOR_POD"), "{err}");
    }

    #[test]
    fn shell_identity_is_the_pod_name_and_ha_is_off_by_default() {
        let env = [
            ("SHELL_OPERATOR_HA", "true"),
            ("SHELL_OPERATOR_POD", "so-1"),
        ];
        let s = settings(&config(Program::Shell, &env), &env_of(&env))
            .unwrap()
            .unwrap();
        assert_eq!(s.identity, "so-1");
        assert_eq!(s.lease_name, "shell-operator-leader-election");
        assert_eq!(
            settings(&config(Program::Shell, &[]), &env_of(&[])),
            Ok(None)
        );
    }
}
