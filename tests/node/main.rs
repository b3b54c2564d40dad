//! The node tier (issue 37): the operator as its users run it, a Pod from the
//! `Dockerfile.scratch` image started by a real kubelet from `deploy/`'s manifests,
//! on one real single-node Kubernetes (tests/node-support; docs/testing-real-node.md).
//!
//! Its own main (no libtest): one node for every check, and the node is stopped and
//! the host undone after the last check, whether checks passed, failed or panicked.
//! Needs root and the static build (`make static`; `make test-node` does both).

mod addon;
mod chart;
mod ha;
mod memory;
mod shell_operator;
mod support;
mod token;
mod webhooks;

use node_support::Node;
use std::panic::AssertUnwindSafe;
use std::process::ExitCode;
use std::time::Instant;

type Check = fn(&Node) -> Result<(), String>;

const CHECKS: &[(&str, Check)] = &[
    ("versions_are_stamped", support::versions_are_stamped),
    (
        "deploy_kustomize_runs_hooks_with_init_busybox",
        shell_operator::deploy_kustomize,
    ),
    (
        "webhook_through_the_service_with_ca_bundle",
        webhooks::validating_through_the_service,
    ),
    ("ha_leader_handover", ha::leader_handover),
    (
        "pod_deletion_stops_the_running_hook_cleanly",
        shell_operator::pod_deletion,
    ),
    (
        "limit_32mib_5000_configmaps",
        memory::limit_32mib_5000_configmaps,
    ),
    ("addon_operator_from_deploy", addon::addon_operator_deploy),
    (
        "helm_chart_with_helm3_and_helm4",
        chart::chart_with_helm3_and_helm4,
    ),
    (
        "addon_chart_with_helm3_and_helm4",
        chart::addon_chart_with_helm3_and_helm4,
    ),
    (
        "token_replaced_and_revoked_without_restart",
        token::token_replaced_and_revoked,
    ),
];

fn main() -> ExitCode {
    // `cargo test --test node -- FILTER...`: run the checks whose name contains one
    // of the FILTERs (all of them without one).
    let filters: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let started = Instant::now();
    let dir = std::env::temp_dir().join(format!("so-node-test-{}", std::process::id()));
    let node = match Node::start(&dir) {
        Ok(node) => node,
        Err(e) => {
            eprintln!("node tier: the node did not start: {e}");
            return ExitCode::FAILURE;
        }
    };
    for (stage, secs) in &node.timings {
        println!("node: {secs:6.1} s  {stage}");
    }
    let mut failed = Vec::new();
    let mut ran = 0;
    for (name, check) in CHECKS {
        if !filters.is_empty() && !filters.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        ran += 1;
        let t = Instant::now();
        let result = std::panic::catch_unwind(AssertUnwindSafe(|| check(&node)));
        let secs = t.elapsed().as_secs_f64();
        match result {
            Ok(Ok(())) => println!("test {name} ... ok ({secs:.1} s)"),
            Ok(Err(e)) => {
                println!("test {name} ... FAILED ({secs:.1} s)\n{e}\n");
                failed.push(*name);
            }
            Err(_) => {
                println!("test {name} ... FAILED (panicked, {secs:.1} s)");
                failed.push(*name);
            }
        }
    }
    let stop = Instant::now();
    drop(node);
    let host_left = support::host_leftovers(&dir);
    println!(
        "node tier: {ran} checks, {} failed; stopped and undone in {:.1} s; {:.0} s in all",
        failed.len(),
        stop.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64()
    );
    if let Err(e) = &host_left {
        println!("node tier: the host was not restored: {e}");
    }
    if failed.is_empty() && host_left.is_ok() {
        ExitCode::SUCCESS
    } else {
        println!("failed: {failed:?}");
        ExitCode::FAILURE
    }
}
