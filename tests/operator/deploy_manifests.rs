//! What we ship besides the binary: `deploy/` manifests and `Dockerfile.scratch`.
//! The manifests must hold the properties the README promises (probes, read-only
//! root, non-root, emptyDirs, a comment on every RBAC rule, names that match), and
//! the ConfigMap's example hook must really run under the operator, with `jq`
//! being the operator binary itself.

use crate::common;

use common::{Operator, TempDir, metric};
use serde::Deserialize;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

fn docs(file: &str) -> Vec<Value> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("deploy")
        .join(file);
    let text = std::fs::read_to_string(&path).expect("manifest");
    serde_yaml::Deserializer::from_str(&text)
        .map(|d| Value::deserialize(d).expect("YAML document"))
        .collect()
}

fn find(file: &str, kind: &str) -> Value {
    docs(file)
        .into_iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in {file}"))
}

#[test]
fn deployment_is_locked_down_and_probed() {
    let d = find("deployment.yaml", "Deployment");
    let pod = &d["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    assert_eq!(c["securityContext"]["readOnlyRootFilesystem"], true);
    assert_eq!(c["securityContext"]["allowPrivilegeEscalation"], false);
    assert_eq!(c["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(c["readinessProbe"]["httpGet"]["path"], "/ready");
    let mounts: Vec<(&str, &str)> = c["volumeMounts"]
        .as_array()
        .expect("mounts")
        .iter()
        .map(|m| {
            (
                m["mountPath"].as_str().unwrap_or(""),
                m["name"].as_str().unwrap_or(""),
            )
        })
        .collect();
    let volume = |name: &str| {
        pod["volumes"]
            .as_array()
            .and_then(|v| v.iter().find(|v| v["name"] == name))
            .cloned()
            .unwrap_or(Value::Null)
    };
    for path in ["/tmp", "/var/run/shell-operator"] {
        let (_, name) = mounts.iter().find(|(p, _)| *p == path).expect(path);
        assert!(
            volume(name)["emptyDir"].is_object(),
            "{path} is an emptyDir"
        );
    }
    let (_, hooks) = mounts.iter().find(|(p, _)| *p == "/hooks").expect("/hooks");
    let cm = find("hooks-configmap.yaml", "ConfigMap");
    assert_eq!(volume(hooks)["configMap"]["name"], cm["metadata"]["name"]);
    let sa = find("rbac.yaml", "ServiceAccount");
    assert_eq!(pod["serviceAccountName"], sa["metadata"]["name"]);
    let binding = find("rbac.yaml", "ClusterRoleBinding");
    assert_eq!(binding["subjects"][0]["name"], sa["metadata"]["name"]);
    assert_eq!(
        binding["subjects"][0]["namespace"],
        d["metadata"]["namespace"]
    );
    for svc in docs("service.yaml") {
        assert_eq!(
            svc["spec"]["selector"],
            d["spec"]["selector"]["matchLabels"]
        );
    }
}

#[test]
fn every_rbac_rule_has_a_comment() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/rbac.yaml");
    let text = std::fs::read_to_string(path).expect("rbac.yaml");
    let rules = find("rbac.yaml", "ClusterRole")["rules"]
        .as_array()
        .map_or(0, Vec::len);
    common::assert_rules_commented(&text, rules);
}

#[test]
fn dockerfile_ships_only_the_binary_as_non_root() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("Dockerfile.scratch");
    let text = std::fs::read_to_string(path).expect("Dockerfile.scratch");
    let instructions: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .collect();
    assert_eq!(
        instructions
            .iter()
            .filter(|l| l.starts_with("FROM "))
            .count(),
        1
    );
    assert!(instructions.contains(&"FROM scratch"));
    let copies: Vec<&&str> = instructions
        .iter()
        .filter(|l| l.starts_with("COPY ") || l.starts_with("ADD "))
        .collect();
    assert_eq!(
        copies,
        [&"COPY target/${ARCH}-unknown-linux-musl/release/shell-operator /shell-operator"]
    );
    // The default architecture keeps `docker build -f Dockerfile.scratch .` on x86_64.
    assert!(instructions.contains(&"ARG ARCH=x86_64"));
    let user = instructions
        .iter()
        .find_map(|l| l.strip_prefix("USER "))
        .expect("USER");
    let uid: u32 = user
        .split(':')
        .next()
        .and_then(|u| u.parse().ok())
        .expect("numeric uid");
    assert_ne!(uid, 0);
}

#[test]
fn configmap_example_hook_runs_with_the_builtin_jq() {
    let cm = find("hooks-configmap.yaml", "ConfigMap");
    let script = cm["data"]["hello.sh"]
        .as_str()
        .expect("hello.sh")
        .to_string();
    // The image's PATH: tools, but no jq (the operator provides it).
    let bin = TempDir::new("no-jq-bin");
    for entry in std::fs::read_dir("/usr/bin")
        .expect("ls /usr/bin")
        .flatten()
    {
        if entry.file_name() != "jq" {
            let _ = std::os::unix::fs::symlink(entry.path(), bin.0.join(entry.file_name()));
        }
    }
    let path = bin.0.display().to_string();
    let op = Operator::start(&[("hello.sh", script)], &[], &[("PATH", path.as_str())]);
    let series = "example_hook_runs_total{binding=\"onStartup\",hook=\"hello.sh\"}";
    let deadline = Instant::now() + Duration::from_secs(10);
    let body = loop {
        let (_, body) = op.http_get("/metrics");
        if body.contains(series) || Instant::now() > deadline {
            break body;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(metric(&body, series), Some(1.0), "{body}\n{}", op.logs());
    assert!(op.logs().contains("hello from onStartup"), "{}", op.logs());
}

/// Issue 37: Debian's busybox-static lists `busybox` itself in `busybox --list`; the
/// init container's loop once linked `/tools/busybox` to itself, and every `#!/bin/sh`
/// hook then failed with "Symbolic link loop". The shipped command runs here with
/// `/tools` a temp dir and a stand-in busybox that lists itself.
#[test]
fn init_container_keeps_a_busybox_that_lists_itself() {
    let d = find("deployment.yaml", "Deployment");
    let init = &d["spec"]["template"]["spec"]["initContainers"][0];
    let script = init["command"][2].as_str().expect("init script");
    let dir = TempDir::new("busybox-init");
    let fake = dir.0.join("busybox-image");
    std::fs::write(
        &fake,
        "#!/bin/sh\n[ \"$1\" = --list ] && printf 'cat\\nbusybox\\nsh\\n'\n",
    )
    .expect("fake busybox");
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755))
        .expect("chmod");
    let tools = dir.0.join("tools");
    std::fs::create_dir(&tools).expect("tools dir");
    let script = script
        .replace("/bin/busybox", &fake.display().to_string())
        .replace("/tools", &tools.display().to_string());
    let out = std::process::Command::new("/bin/sh")
        .args(["-c", &script])
        .output()
        .expect("run the init script");
    assert!(out.status.success(), "{script}: {out:?}");
    let copied = std::fs::symlink_metadata(tools.join("busybox")).expect("tools/busybox");
    assert!(
        copied.file_type().is_file(),
        "/tools/busybox must stay the copied binary, not a link: {script}"
    );
    for applet in ["cat", "sh"] {
        let target = std::fs::read_link(tools.join(applet)).expect(applet);
        assert_eq!(target, Path::new("busybox"), "{applet}");
    }
}
