//! HA on the node: `deploy/`'s Deployment at two replicas with `SHELL_OPERATOR_HA`
//! (short timings: lease 6 s, renew deadline 4 s, retry 1 s). Deleting the leader's
//! pod hands the Lease to another replica (the standby, or the Deployment's
//! replacement pod), which then runs the hooks; the standby ran none before; the old
//! leader released the Lease and its last hook line comes before the new leader's
//! first. The takeover time is printed.

use crate::support::{http_get, json, patch, wait_for};
use node_support::Node;
use serde_json::Value;
use std::time::Instant;

const NS: &str = "shell-operator";
const LEASE: &str = "shell-operator-leader-election";

fn running_pods(node: &Node) -> Result<Vec<Value>, String> {
    let list = json(node, &["-n", NS, "get", "pods", "-l", "app=shell-operator"])?;
    Ok(list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .into_iter()
        .filter(|p| {
            p["status"]["phase"] == "Running" && p["metadata"]["deletionTimestamp"].is_null()
        })
        .collect())
}

fn holder(node: &Node) -> Result<String, String> {
    let lease = json(node, &["-n", NS, "get", "lease", LEASE])?;
    Ok(lease["spec"]["holderIdentity"]
        .as_str()
        .unwrap_or("")
        .to_string())
}

/// The `time` of the first line of `log` containing `needle` (and the line).
fn first_time(log: &str, needle: &str) -> Option<String> {
    log.lines()
        .find(|l| l.contains(needle))
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .and_then(|v| v["time"].as_str().map(String::from))
}

fn last_time(log: &str, needle: &str) -> Option<String> {
    log.lines()
        .rev()
        .find(|l| l.contains(needle))
        .and_then(|l| serde_json::from_str::<Value>(l).ok())
        .and_then(|v| v["time"].as_str().map(String::from))
}

pub(crate) fn leader_handover(node: &Node) -> Result<(), String> {
    crate::shell_operator::ensure_deployed(node)?;
    let env = |name: &str, value: &str| {
        serde_json::json!({"op": "add", "path": "/spec/template/spec/containers/0/env/-",
                           "value": {"name": name, "value": value}})
    };
    let ha = serde_json::json!([
        {"op": "replace", "path": "/spec/replicas", "value": 2},
        env("SHELL_OPERATOR_HA", "true"),
        env("SHELL_OPERATOR_HA_LEASE_DURATION", "6s"),
        env("SHELL_OPERATOR_HA_RENEW_DEADLINE", "4s"),
        env("SHELL_OPERATOR_HA_RETRY_PERIOD", "1s"),
    ]);
    patch(node, NS, "deployment/shell-operator", "json", &ha)?;
    // Two replicas of the new template, one of them holding the Lease.
    let (leader, standby) = wait_for("two HA replicas, one leading", 120, || {
        let pods = running_pods(node)?;
        let ha: Vec<String> = pods
            .iter()
            .filter(|p| {
                p["spec"]["containers"][0]["env"]
                    .as_array()
                    .is_some_and(|e| e.iter().any(|v| v["name"] == "SHELL_OPERATOR_HA"))
            })
            .filter_map(|p| p["metadata"]["name"].as_str().map(String::from))
            .collect();
        if ha.len() != 2 {
            return Ok(None);
        }
        let h = holder(node).unwrap_or_default();
        let Some(leader) = ha.iter().find(|n| **n == h).cloned() else {
            return Ok(None);
        };
        let standby = ha.into_iter().find(|n| *n != leader).unwrap_or_default();
        let led = node.kubectl(&["-n", NS, "logs", &leader])?;
        Ok(led
            .contains("hello from onStartup")
            .then_some((leader, standby)))
    })?;
    let standby_log = node.kubectl(&["-n", NS, "logs", &standby])?;
    if standby_log.contains("Execute hook") {
        return Err(format!(
            "the standby ran a hook before leading:\n{standby_log}"
        ));
    }
    // Delete the leader; the standby takes over.
    let old_log_file = node.dir().join("ha-old-leader.log");
    let mut follow = crate::shell_operator::kubectl_to_file(
        node,
        &["-n", NS, "logs", "-f", &leader],
        &old_log_file,
    )?;
    std::thread::sleep(std::time::Duration::from_millis(300));
    let t = Instant::now();
    node.kubectl(&["-n", NS, "delete", "pod", &leader, "--wait=false"])?;
    // The Lease goes to another replica: the standby, or the pod the Deployment
    // starts in the deleted one's place (whichever reads the released Lease first).
    let new = wait_for("another replica to acquire the Lease", 30, || {
        let h = holder(node)?;
        if h.is_empty() || h == leader {
            return Ok(None);
        }
        let log = node.kubectl(&["-n", NS, "logs", &h])?;
        Ok(log.contains("leadership acquired").then_some(h))
    })
    .map_err(|e| {
        let log = node
            .kubectl(&["-n", NS, "logs", &standby])
            .unwrap_or_else(|e| e);
        let lease = node
            .kubectl(&["-n", NS, "get", "lease", LEASE, "-o", "yaml"])
            .unwrap_or_else(|e| e);
        format!("{e}\nstandby {standby}:\n{log}\n{lease}")
    })?;
    let takeover = t.elapsed();
    let who = if new == standby {
        "the standby"
    } else {
        "the replacement pod"
    };
    println!(
        "  HA takeover: {who} acquired the Lease {:.1} s after kubectl delete of the leader",
        takeover.as_secs_f64()
    );
    let new_log = wait_for("the new leader's onStartup hook", 30, || {
        let log = node.kubectl(&["-n", NS, "logs", &new])?;
        Ok(log.contains("hello from onStartup").then_some(log))
    })?;
    crate::shell_operator::wait_child(&mut follow, std::time::Duration::from_secs(20));
    let old_log = std::fs::read_to_string(&old_log_file).map_err(|e| e.to_string())?;
    if !old_log.contains("leadership released") {
        return Err(format!(
            "the old leader did not release the Lease:\n{old_log}"
        ));
    }
    // No overlap: the old leader's last hook line is not after the new one's first
    // (RFC 3339 UTC times of the same format compare as strings).
    let old_last = last_time(&old_log, "\"hook\":").unwrap_or_default();
    let new_first = first_time(&new_log, "Execute hook").unwrap_or_default();
    if new_first.is_empty() || old_last > new_first {
        return Err(format!(
            "hook runs overlap: old leader's last hook line {old_last}, new leader's first {new_first}"
        ));
    }
    let pod = json(node, &["-n", NS, "get", "pod", &new])?;
    let ip = pod["status"]["podIP"].as_str().unwrap_or("");
    let (_, metrics) = http_get(ip, 9115, "/metrics")?;
    if !metrics
        .lines()
        .any(|l| l == "shell_operator_ha_is_leader 1")
    {
        return Err("the new leader's shell_operator_ha_is_leader is not 1".into());
    }
    if takeover.as_secs() > 15 {
        return Err(format!("takeover took {takeover:?}"));
    }
    Ok(())
}
