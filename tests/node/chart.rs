//! The Helm chart `deploy/helm/shell-operator`, installed with helm 3 and helm 4
//! (`.tools/bin/helm3`, `.tools/bin/helm`) into a namespace each, with values for the
//! local images: each release passes the checks the kustomize manifests pass
//! ([`check_operator_pod`]).

use crate::shell_operator::check_operator_pod;
use crate::support::{json, wait_for};
use node_support::{BUSYBOX_IMAGE, Node, OPERATOR_IMAGE};
use std::process::Command;
use std::time::Instant;

fn helm(node: &Node, helm: &str, args: &[&str]) -> Result<String, String> {
    let bin = control_plane::repo_root().join(".tools/bin").join(helm);
    let out = Command::new(&bin)
        .arg("--kubeconfig")
        .arg(node.kubeconfig())
        .args(args)
        .env("HOME", node.dir().join(format!("home-{helm}")))
        .output()
        .map_err(|e| format!("{}: {e} (scripts/install-k8s-clients.sh)", bin.display()))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{helm} {}: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

pub(crate) fn chart_with_helm3_and_helm4(node: &Node) -> Result<(), String> {
    let chart = control_plane::repo_root().join("deploy/helm/shell-operator");
    let chart = chart.display().to_string();
    let (repo, tag) = OPERATOR_IMAGE.rsplit_once(':').ok_or("operator tag")?;
    for (bin, ns) in [("helm3", "chart-helm3"), ("helm", "chart-helm4")] {
        let version = helm(node, bin, &["version", "--short"])?;
        let t = Instant::now();
        helm(
            node,
            bin,
            &[
                "install",
                "so",
                &chart,
                "--namespace",
                ns,
                "--create-namespace",
                "--set",
                &format!("image.repository={repo}"),
                "--set",
                &format!("image.tag={tag}"),
                "--set",
                "image.pullPolicy=Never",
                "--set",
                &format!("busybox.image={BUSYBOX_IMAGE}"),
                "--set",
                "busybox.pullPolicy=Never",
                "--wait",
                "--timeout=120s",
            ],
        )?;
        println!(
            "  {} ({}): installed and Ready in {:.1} s",
            bin,
            version.trim(),
            t.elapsed().as_secs_f64()
        );
        let pod = wait_for("the chart's pod", 30, || {
            let list = json(node, &["-n", ns, "get", "pods", "-l", "app=so"])?;
            Ok(list["items"].as_array().and_then(|i| i.first().cloned()))
        })?;
        check_operator_pod(node, ns, &pod).map_err(|e| format!("installed with {bin}: {e}"))?;
    }
    Ok(())
}
