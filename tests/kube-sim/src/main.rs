//! The `kube-sim` binary: serves the in-memory API server for demos and manual tests.
fn main() {
    eprintln!("kube-sim: not built yet");
    std::process::exit(1);
}
