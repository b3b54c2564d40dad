//! The node's images, with no registry: built with `docker build` and moved into the
//! node's containerd with `docker save … | ctr -n k8s.io images import -`.
//!
//! - the pause image: `pause.c`, compiled static, FROM scratch;
//! - busybox: Debian's busybox-static FROM scratch, with `/bin/sh`;
//! - the operator: `Dockerfile.scratch` as shipped, on the static (musl) release build;
//! - addon-operator: that image plus helm, busybox and `examples/addon` (the recipe at
//!   the end of `Dockerfile.scratch`).
//!
//! Docker is the machine's when its daemon answers; else a dockerd of the node's own
//! (its own data root, exec root and socket; no iptables, no bridge, no IP
//! forwarding: it only builds and saves images), stopped with the node.

use crate::config::PAUSE_IMAGE;
use crate::procs::{Procs, run};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The busybox image deploy/'s init container gets in the tier's overlay.
pub const BUSYBOX_IMAGE: &str = "so-node.local/busybox:static";
/// The operator image built from Dockerfile.scratch.
pub const OPERATOR_IMAGE: &str = "so-node.local/shell-operator:test";
/// addon-operator's image as Dockerfile.scratch's recipe makes one: the operator image
/// plus the static helm, busybox (the example modules' hooks are shell scripts) and
/// `examples/addon`'s modules and global hooks.
pub const ADDON_IMAGE: &str = "so-node.local/addon-operator:test";

/// How to reach a docker daemon.
pub struct Docker {
    host: Option<String>,
}

impl Docker {
    /// The machine's docker if it answers, else a dockerd started into `procs`.
    pub(crate) fn start(dir: &Path, procs: &mut Procs) -> Result<Docker, String> {
        let machine = Docker { host: None };
        if machine
            .cmd(&["info"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
        {
            return Ok(machine);
        }
        let d = dir.join("docker");
        std::fs::create_dir_all(&d).map_err(|e| format!("{}: {e}", d.display()))?;
        let sock = d.join("docker.sock");
        let mut cmd = Command::new("dockerd");
        cmd.arg(format!("--data-root={}", d.join("data").display()))
            .arg(format!("--exec-root={}", d.join("exec").display()))
            .arg(format!("--pidfile={}", d.join("dockerd.pid").display()))
            .arg(format!("--host=unix://{}", sock.display()))
            .args([
                "--iptables=false",
                "--ip6tables=false",
                "--ip-forward=false",
                "--ip-masq=false",
                "--bridge=none",
                "--userland-proxy=false",
            ]);
        procs.start("dockerd", cmd, &dir.join("dockerd.log"))?;
        let docker = Docker {
            host: Some(format!("unix://{}", sock.display())),
        };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if docker
                .cmd(&["info"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
            {
                return Ok(docker);
            }
            procs.check("dockerd")?;
            if Instant::now() > deadline {
                return Err("dockerd did not answer in 60 s".into());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    /// A docker command for this daemon (the legacy builder: there is no buildx).
    pub fn cmd(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("docker");
        if let Some(h) = &self.host {
            cmd.arg("--host").arg(h);
        }
        cmd.env("DOCKER_BUILDKIT", "0").args(args);
        cmd
    }

    fn build(&self, context: &Path, dockerfile: &str, tag: &str) -> Result<(), String> {
        let ctx = context.display().to_string();
        run(&mut self.cmd(&["build", "-q", "-f", dockerfile, "-t", tag, &ctx]))
            .map(drop)
            .map_err(|e| format!("docker build of {tag}: {e}"))
    }

    /// Builds the three images; `operator` is the static shell-operator binary.
    pub(crate) fn build_images(&self, dir: &Path, operator: &Path) -> Result<(), String> {
        let root = dir.join("images");
        let ctx = |name: &str| -> Result<PathBuf, String> {
            let p = root.join(name);
            std::fs::create_dir_all(&p).map_err(|e| format!("{}: {e}", p.display()))?;
            Ok(p)
        };
        let write = |p: PathBuf, text: &str| {
            std::fs::write(&p, text).map_err(|e| format!("{}: {e}", p.display()))
        };

        let pause = ctx("pause")?;
        let source = pause.join("pause.c");
        write(source.clone(), include_str!("pause.c"))?;
        run(Command::new("gcc")
            .args(["-static", "-Os", "-s", "-o"])
            .arg(pause.join("pause"))
            .arg(&source))
        .map_err(|e| format!("building the pause program: {e}"))?;
        write(
            pause.join("Dockerfile"),
            "FROM scratch\nCOPY pause /pause\nENTRYPOINT [\"/pause\"]\n",
        )?;
        self.build(
            &pause,
            &pause.join("Dockerfile").display().to_string(),
            PAUSE_IMAGE,
        )?;

        let busybox = ctx("busybox")?;
        let bin = busybox.join("bin");
        std::fs::create_dir_all(&bin).map_err(|e| e.to_string())?;
        std::fs::copy("/bin/busybox", bin.join("busybox"))
            .map_err(|e| format!("/bin/busybox (Debian's busybox-static, install-node.sh): {e}"))?;
        std::fs::hard_link(bin.join("busybox"), bin.join("sh")).map_err(|e| e.to_string())?;
        write(
            busybox.join("Dockerfile"),
            "FROM scratch\nCOPY bin /bin\nENTRYPOINT [\"/bin/sh\"]\n",
        )?;
        self.build(
            &busybox,
            &busybox.join("Dockerfile").display().to_string(),
            BUSYBOX_IMAGE,
        )?;

        // Dockerfile.scratch as shipped, in a context holding only what it copies.
        let op = ctx("operator")?;
        let target = op.join("target/x86_64-unknown-linux-musl/release");
        std::fs::create_dir_all(&target).map_err(|e| e.to_string())?;
        std::fs::copy(operator, target.join("shell-operator"))
            .map_err(|e| format!("{} (make static): {e}", operator.display()))?;
        let dockerfile = control_plane::repo_root().join("Dockerfile.scratch");
        self.build(&op, &dockerfile.display().to_string(), OPERATOR_IMAGE)?;

        let addon = ctx("addon")?;
        let repo = control_plane::repo_root();
        let helm = repo.join(".tools/bin/helm");
        std::fs::copy(&helm, addon.join("helm"))
            .map_err(|e| format!("{} (scripts/install-k8s-clients.sh): {e}", helm.display()))?;
        for dir in ["modules", "global-hooks"] {
            run(Command::new("cp")
                .arg("-a")
                .arg(repo.join("examples/addon").join(dir))
                .arg(addon.join(dir)))?;
        }
        let bin = addon.join("bin");
        std::fs::create_dir_all(&bin).map_err(|e| e.to_string())?;
        std::fs::copy("/bin/busybox", bin.join("busybox")).map_err(|e| e.to_string())?;
        let applets = run(Command::new("/bin/busybox").arg("--list"))?;
        for applet in applets.lines().filter(|a| !a.is_empty() && *a != "busybox") {
            std::os::unix::fs::symlink("busybox", bin.join(applet)).map_err(|e| e.to_string())?;
        }
        write(
            addon.join("Dockerfile"),
            &format!(
                "FROM {OPERATOR_IMAGE}\nCOPY helm /helm\nCOPY bin /bin\nCOPY modules /modules\n\
                 COPY global-hooks /global-hooks\nENV PATH=/bin\n"
            ),
        )?;
        self.build(
            &addon,
            &addon.join("Dockerfile").display().to_string(),
            ADDON_IMAGE,
        )
    }

    /// `docker save IMAGE | ctr -n k8s.io images import -` into the containerd at `sock`.
    pub(crate) fn import(&self, image: &str, sock: &Path) -> Result<(), String> {
        let mut save = self
            .cmd(&["save", image])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("docker save {image}: {e}"))?;
        let stdout = save.stdout.take().ok_or("docker save: no stdout")?;
        let out = Command::new("ctr")
            .arg("--address")
            .arg(sock)
            .args(["-n", "k8s.io", "images", "import", "-"])
            .stdin(stdout)
            .output()
            .map_err(|e| format!("ctr images import: {e}"))?;
        let saved = save.wait_with_output().map_err(|e| e.to_string())?;
        if !saved.status.success() {
            return Err(format!(
                "docker save {image}: {}",
                String::from_utf8_lossy(&saved.stderr).trim()
            ));
        }
        if !out.status.success() {
            return Err(format!(
                "ctr images import of {image}: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok(())
    }
}
