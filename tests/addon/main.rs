//! addon-operator pieces end to end: the helm client (`shell_operator::addon::helm`)
//! driving the real helm 4 and helm 3 binaries against kube-sim.
//!
//! One test binary for the area (one binary per file costs CI link time); each
//! file is a module. Helpers shared by the modules live here.

mod helm;

use std::path::{Path, PathBuf};

/// The repository root (the main package's manifest dir).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// A helm binary: `$env_var` or `<repo>/.tools/bin/<name>`; panics with what to do
/// when it is absent, so a missing tool fails the test instead of skipping it.
pub fn tool(name: &str, env_var: &str) -> PathBuf {
    if let Some(p) = std::env::var_os(env_var) {
        let p = PathBuf::from(p);
        assert!(p.is_file(), "{env_var}={} does not exist", p.display());
        return p;
    }
    let p = repo_root().join(".tools/bin").join(name);
    assert!(
        p.is_file(),
        "{name} not found at {} and {env_var} is not set: run scripts/install-k8s-clients.sh \
         (or point {env_var} at the binary)",
        p.display()
    );
    p
}

/// A temp directory removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> TempDir {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("addon-it-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
