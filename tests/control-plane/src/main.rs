//! `control-plane`: runs a real etcd + kube-apiserver in the foreground for people
//! (`make cluster`), with the same setup as the cluster test tier. Prints the admin
//! kubeconfig path and stops both servers on Ctrl-C (SIGINT) or SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

fn main() -> ExitCode {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| control_plane::repo_root().join(".tools/cluster"));
    let cp = match control_plane::ControlPlane::start(&dir) {
        Ok(cp) => cp,
        Err(e) => {
            eprintln!("control-plane: {e}");
            return ExitCode::FAILURE;
        }
    };
    println!("kube-apiserver ready at {}", cp.url());
    println!("export KUBECONFIG={}", cp.admin_kubeconfig().display());
    println!(
        "ServiceAccount shell-operator/shell-operator (deploy/rbac.yaml): {}",
        cp.operator_kubeconfig().display()
    );
    println!(
        "logs: {}/{{etcd,apiserver}}.log; Ctrl-C stops both",
        dir.display()
    );
    control_plane::wait_for_stop_signal();
    drop(cp);
    ExitCode::SUCCESS
}
