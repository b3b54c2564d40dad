//! The `kube-sim` binary: serves the in-memory API server for demos and manual
//! tests.
//!
//! `kube-sim --port 0 --seed DIR [--tls-cert F --tls-key F [--client-ca F]]
//! [--token T] [--history N] [--kubeconfig-out FILE] [--auto-ready]
//! [--strict-namespaces]`
//!
//! The first stdout line is `listening on http://127.0.0.1:PORT` (https with
//! TLS); it then serves until killed.

use kube_sim::{Sim, SimOptions, TlsFiles};
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;

const USAGE: &str = "usage: kube-sim [--port N] [--seed DIR] [--tls-cert FILE --tls-key FILE [--client-ca FILE]] \
                     [--token TOKEN] [--history N] [--kubeconfig-out FILE] [--auto-ready] [--strict-namespaces]";

/// Parsed command line.
#[derive(Default)]
struct Args {
    opts: SimOptions,
    port: u16,
    cert: Option<PathBuf>,
    key: Option<PathBuf>,
    client_ca: Option<PathBuf>,
    kubeconfig_out: Option<PathBuf>,
    auto_ready: bool,
    strict_namespaces: bool,
}

fn parse(mut argv: impl Iterator<Item = String>) -> Result<Args, String> {
    let mut a = Args::default();
    while let Some(flag) = argv.next() {
        if flag == "-h" || flag == "--help" {
            return Err(USAGE.to_string());
        }
        let (name, inline) = match flag.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (flag.clone(), None),
        };
        let mut value = || {
            inline
                .clone()
                .or_else(|| argv.next())
                .ok_or(format!("{name} needs a value\n{USAGE}"))
        };
        match name.as_str() {
            "--port" => {
                a.port = value()?
                    .parse()
                    .map_err(|_| "--port: not a port number".to_string())?
            }
            "--seed" => a.opts.seed_dir = Some(value()?.into()),
            "--tls-cert" => a.cert = Some(value()?.into()),
            "--tls-key" => a.key = Some(value()?.into()),
            "--client-ca" => a.client_ca = Some(value()?.into()),
            "--token" => a.opts.require_token = Some(value()?),
            "--history" => {
                a.opts.history_limit = value()?
                    .parse()
                    .map_err(|_| "--history: not a number".to_string())?
            }
            "--kubeconfig-out" => a.kubeconfig_out = Some(value()?.into()),
            "--auto-ready" => a.auto_ready = true,
            "--strict-namespaces" => a.strict_namespaces = true,
            other => return Err(format!("unknown flag {other}\n{USAGE}")),
        }
    }
    a.opts.tls = match (a.cert.take(), a.key.take()) {
        (Some(cert), Some(key)) => Some(TlsFiles {
            cert,
            key,
            client_ca: a.client_ca.take(),
        }),
        (None, None) => None,
        _ => return Err("--tls-cert and --tls-key go together".into()),
    };
    Ok(a)
}

fn main() -> ExitCode {
    let args = match parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(msg) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    let sim = match Sim::start_on(args.port, args.opts) {
        Ok(s) => s,
        Err(e) => {
            eprintln!("kube-sim: {e}");
            return ExitCode::from(1);
        }
    };
    sim.set_auto_ready(args.auto_ready);
    sim.set_strict_namespaces(args.strict_namespaces);
    if let Some(path) = &args.kubeconfig_out {
        if let Err(e) = sim.write_kubeconfig(path) {
            eprintln!("kube-sim: writing {}: {e}", path.display());
            return ExitCode::from(1);
        }
    }
    println!("listening on {}", sim.url());
    let _ = std::io::stdout().flush();
    loop {
        std::thread::park();
    }
}
