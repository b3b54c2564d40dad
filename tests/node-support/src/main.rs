//! `node`: runs the node tier's single-node Kubernetes in the foreground for people
//! (`make node`): prints the admin kubeconfig, and on Ctrl-C (SIGINT) or SIGTERM stops
//! everything and undoes its host changes. Needs root.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp/so-node"));
    let node = match node_support::Node::start(&dir) {
        Ok(node) => node,
        Err(e) => {
            eprintln!("node: {e}");
            return ExitCode::FAILURE;
        }
    };
    for (stage, secs) in &node.timings {
        println!("{secs:6.1} s  {stage}");
    }
    println!("kube-apiserver ready at {}", node.url());
    println!("export KUBECONFIG={}", node.kubeconfig().display());
    println!(
        "images: {} and {} (imagePullPolicy: Never)",
        node_support::OPERATOR_IMAGE,
        node_support::BUSYBOX_IMAGE
    );
    println!(
        "logs: {}/*.log; Ctrl-C stops the node and undoes its host changes",
        dir.display()
    );
    control_plane::wait_for_stop_signal();
    drop(node);
    ExitCode::SUCCESS
}
