//! The programs `make bench-peers` compares, each started as one process against
//! kube-sim or the real API server: our operator (and flant's, same command line)
//! with a `#!/bin/sh` hook, kopf with an `on.event`
//! handler, and the floor, a plain Python list-then-watch loop. Each appends
//! `<unix ns> <pod name>` to the same kind of out file. Our operator runs twice:
//! once with the hook taking its start time with `date` (after its shell and
//! `date` have started), once with the same hook behind `stamp_exec.c`, which
//! takes the time as the hook process starts.

use crate::cluster::Cluster;
use crate::common;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

/// Which program a trial runs.
#[derive(Clone, Copy, PartialEq)]
pub enum Contender {
    Ours,
    /// The same operator and hook, the start time taken at exec.
    OursAtExec,
    /// flant's shell-operator (scripts/install-flant.sh) with the same hook.
    Flant,
    Kopf,
    Floor,
}

impl Contender {
    pub fn label(self) -> &'static str {
        match self {
            Contender::Ours => "ours",
            Contender::OursAtExec => "ours, stamped at exec",
            Contender::Flant => "flant",
            Contender::Kopf => "kopf",
            Contender::Floor => "floor",
        }
    }
}

/// Where the programs are.
pub struct Programs {
    pub operator: PathBuf,
    /// flant's shell-operator; `None` leaves it out.
    pub flant: Option<PathBuf>,
    pub venv: PathBuf,
    pub scripts: PathBuf,
}

/// The hook: config on `--config`, otherwise its start time and every object name
/// in the binding context (Event items and Synchronization lists alike).
const HOOK: &str = r#"#!/bin/sh
if [ "$1" = --config ]; then cat <<'EOF'
configVersion: v1
kubernetes:
- name: pods
  kind: Pod
EOF
exit 0
fi
t=${HOOK_STARTED_NS:-$(date +%s%N)}
jq -r '.[] | (.object.metadata.name // empty), (.objects[]?.object.metadata.name)' "$BINDING_CONTEXT_PATH" | sed "s/^/$t /" >> "$OUT"
"#;

/// Starts `who` against `sim` in `dir`, appending to `out`.
pub fn start(
    who: Contender,
    programs: &Programs,
    sim: &Cluster,
    dir: &Path,
    out: &Path,
) -> Result<Child, String> {
    let kubeconfig = sim
        .kubeconfig
        .to_str()
        .ok_or("kubeconfig path is not UTF-8")?;
    match who {
        Contender::Ours => {
            let _ = std::fs::remove_dir_all(dir.join("hooks"));
            common::write_exec(&dir.join("hooks/pods.sh"), HOOK);
            let (child, _port) = common::start_operator(
                &programs.operator,
                dir,
                &["--kube-config", kubeconfig],
                &[("OUT", out)],
            )?;
            Ok(child)
        }
        Contender::OursAtExec => {
            let _ = std::fs::remove_dir_all(dir.join("hooks"));
            let body = dir.join("hook-body.sh");
            common::write_exec(&body, HOOK);
            std::fs::create_dir_all(dir.join("hooks")).map_err(|e| e.to_string())?;
            common::compile_static(
                &programs.scripts.join("stamp_exec.c"),
                &dir.join("hooks/pods"),
            )?;
            let (child, _port) = common::start_operator(
                &programs.operator,
                dir,
                &["--kube-config", kubeconfig],
                &[
                    ("OUT", out),
                    ("HOOK_BODY", &body),
                    ("SHELL_OPERATOR_LATENCY_TRACE", &dir.join("trace")),
                ],
            )?;
            Ok(child)
        }
        Contender::Flant => {
            let _ = std::fs::remove_dir_all(dir.join("hooks"));
            common::write_exec(&dir.join("hooks/pods.sh"), HOOK);
            let flant = programs.flant.as_ref().ok_or("no flant binary")?;
            let (child, _port) = common::start_operator(
                flant,
                dir,
                &["--kube-config", kubeconfig, "--log-type", "json"],
                &[("OUT", out)],
            )?;
            Ok(child)
        }
        Contender::Kopf => python(programs, "kopf", out)
            .args(["run", "--standalone", "--all-namespaces"])
            .arg(programs.scripts.join("kopf_handler.py"))
            .env("KUBECONFIG", kubeconfig)
            .spawn()
            .map_err(|e| format!("start kopf from {}: {e}", programs.venv.display())),
        Contender::Floor => python(programs, "python", out)
            .arg(programs.scripts.join("floor_watch.py"))
            .env("KUBE_URL", &sim.url)
            .env("KUBE_TOKEN", sim.token.as_deref().unwrap_or(""))
            .spawn()
            .map_err(|e| format!("start the floor watch loop: {e}")),
    }
}

/// A command for `bin` in the venv, output discarded, `OUT` set.
fn python(programs: &Programs, bin: &str, out: &Path) -> Command {
    let mut cmd = Command::new(programs.venv.join("bin").join(bin));
    cmd.env("OUT", out)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    cmd
}
