//! `make bench` (webhooks): the admission round trip over TLS on loopback with a
//! trivial hook, against the same hook run bare (fork/exec with the same files,
//! no HTTP, no TLS) measured in the same run.
//!
//! 1. Sequential requests on one keep-alive connection: per-request latency
//!    p50/p99 of both (alternating one by one), and the operator's overhead:
//!    percentiles of the paired differences (webhook − bare).
//! 2. Requests/s with 1, 4 and 16 concurrent clients (one connection each).
//!
//! The server is the real `TlsServer` + `Admission` handler + executor, in
//! process; the client is ureq (rustls). Logging is at error level, as in the
//! dispatch bench. Needs `openssl` for the test certificate.

mod common;

use shell_operator::executor::Executor;
use shell_operator::hook::Hook;
use shell_operator::hook::limiter::TokenBucket;
use shell_operator::metrics::Metrics;
use shell_operator::webhook::admission::{self, Admission};
use shell_operator::webhook::metrics::WebhookMetrics;
use shell_operator::webhook::run::HookRunner;
use shell_operator::webhook::server::{Limits, TlsServer};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const SEQUENTIAL: usize = 400;
const PER_CLIENT: usize = 100;
const HOOK: &str = "#!/bin/sh\necho '{\"allowed\":true}' > \"$VALIDATING_RESPONSE_PATH\"\n";

fn main() {
    let work = std::env::temp_dir().join(format!("so-bench-webhook-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(work.join("hooks")).expect("mkdir");
    shell_operator::log::set_level(shell_operator::log::Level::Error);
    let hook_path = work.join("hooks/allow.sh");
    std::fs::write(&hook_path, HOOK).expect("hook");
    std::fs::set_permissions(&hook_path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    common::make_cert(&work, "IP:127.0.0.1");
    let port = start_server(&hook_path, &work);
    let url = format!("https://127.0.0.1:{port}/hooks/bench-example-com");
    let agent = agent(&work.join("ca.crt"));

    // Warm up, then measure both, alternating request by request so that both
    // see the same machine; the overhead is the median of the paired differences.
    let _ = webhook_latencies(&agent, &url, 20);
    let _ = bare_latencies(&hook_path, &work.join("bare"), 20);
    let (mut hook, mut bare, mut diff) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..SEQUENTIAL {
        let h = webhook_latencies(&agent, &url, 1)[0];
        let b = bare_latencies(&hook_path, &work.join("bare"), 1)[0];
        diff.push(h.as_secs_f64() - b.as_secs_f64());
        hook.push(h);
        bare.push(b);
    }
    diff.sort_by(f64::total_cmp);
    let (h50, h99) = (percentile(&mut hook, 0.50), percentile(&mut hook, 0.99));
    let (b50, b99) = (percentile(&mut bare, 0.50), percentile(&mut bare, 0.99));
    println!("admission round trip over TLS ({SEQUENTIAL} sequential requests, keep-alive):");
    println!(
        "  bare hook run          : p50 {:>7.2} ms   p99 {:>7.2} ms",
        ms(b50),
        ms(b99)
    );
    println!(
        "  webhook request        : p50 {:>7.2} ms   p99 {:>7.2} ms",
        ms(h50),
        ms(h99)
    );
    println!(
        "  operator overhead      : p50 {:>7.2} ms   p99 {:>7.2} ms  (paired; target ≤ 2 ms p50)",
        diff[diff.len() / 2] * 1e3,
        diff[(diff.len() - 1) * 99 / 100] * 1e3
    );
    for clients in [1, 4, 16] {
        let rps = throughput(&work.join("ca.crt"), &url, clients);
        println!("  {clients:>2} concurrent clients  : {rps:>7.0} requests/s");
    }
    under_siege(port, &agent, &url, &work.join("ca.crt"));
    let _ = std::fs::remove_dir_all(&work);
}

/// Issue 11's figure: a legitimate review's latency while 1,000 idle and 100
/// slowloris connections (a TLS record header trickled a byte every 100 ms) are
/// held, against the same requests with none held, measured back to back; plus the
/// process's threads and RSS while they are held.
fn under_siege(port: u16, agent: &ureq::Agent, url: &str, ca: &Path) {
    use std::io::Write;
    const N: usize = 200;
    common::raise_fd_limit(4096);
    let fresh = |n| -> Vec<Duration> {
        (0..n)
            .map(|_| {
                let t = Instant::now();
                request(&self::agent(ca), url);
                t.elapsed()
            })
            .collect()
    };
    let (mut calm, mut calm_new) = (webhook_latencies(agent, url, N), fresh(N / 2));
    let threads_before = proc_status("Threads:");
    let connect = || std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let idle: Vec<_> = (0..1000).map(|_| connect()).collect();
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let trickler = {
        let stop = Arc::clone(&stop);
        let mut loris: Vec<_> = (0..100).map(|_| connect()).collect();
        std::thread::spawn(move || {
            let record = [0x16u8, 0x03, 0x01, 0x02, 0x00];
            for byte in record.iter().cycle() {
                if stop.load(std::sync::atomic::Ordering::SeqCst) {
                    break;
                }
                loris.iter_mut().for_each(|s| drop(s.write_all(&[*byte])));
                std::thread::sleep(Duration::from_millis(100));
            }
        })
    };
    std::thread::sleep(Duration::from_millis(300));
    let (mut siege, mut siege_new) = (webhook_latencies(agent, url, N), fresh(N / 2));
    let (threads, rss) = (proc_status("Threads:"), proc_status("VmRSS:"));
    stop.store(true, std::sync::atomic::Ordering::SeqCst);
    let _ = trickler.join();
    drop(idle);
    println!("legitimate reviews while 1,000 idle + 100 slowloris connections are held:");
    for (what, calm, siege) in [
        ("keep-alive connection", &mut calm, &mut siege),
        ("new TLS connection each", &mut calm_new, &mut siege_new),
    ] {
        let (c99, s99) = (percentile(calm, 0.99), percentile(siege, 0.99));
        println!(
            "  {what:<24}: p50 {:>6.2} → {:>6.2} ms   p99 {:>6.2} → {:>6.2} ms   p99 added {:>6.2} ms (target ≤ 50)",
            ms(percentile(calm, 0.5)),
            ms(percentile(siege, 0.5)),
            ms(c99),
            ms(s99),
            ms(s99) - ms(c99)
        );
    }
    println!(
        "  process threads {threads_before} before, {threads} held (1,100 connections); VmRSS {rss} kB held"
    );
}

/// A field of /proc/self/status (its first number).
fn proc_status(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn percentile(v: &mut [Duration], q: f64) -> Duration {
    v.sort();
    let i = ((v.len() as f64 - 1.0) * q).round() as usize;
    v.get(i).copied().unwrap_or_default()
}

/// The admission server with one validating binding `bench.example.com`.
fn start_server(hook_path: &Path, work: &Path) -> u16 {
    let text = "configVersion: v1\nkubernetesValidating:\n- name: bench.example.com\n  sideEffects: None\n  timeoutSeconds: 10\n";
    let config = shell_operator::hook::config::parse("allow.sh", text).expect("config");
    let hook = Hook {
        name: "allow.sh".into(),
        path: hook_path.to_path_buf(),
        limiter: std::sync::Arc::new(Mutex::new(TokenBucket::from_settings(&config.settings))),
        config_sum: 0,
        retired: false,
        jq_filters: vec![],
        config,
    };
    let hooks = Arc::new(vec![hook]);
    let executor = Executor {
        tmp_dir: work.join("tmp"),
        keep_tmp_files: false,
        timeout: None,
        ..Default::default()
    };
    executor.prepare_tmp_dir().expect("tmp");
    let metrics = Arc::new(Metrics::new("bench_").expect("metrics"));
    let handler = Admission {
        routes: admission::routes(&hooks).expect("routes"),
        runner: Arc::new(HookRunner::new(
            Arc::clone(&hooks),
            executor,
            Arc::clone(&metrics),
            Arc::new(|_: &str, _: &[String]| Default::default()),
        )),
        metrics: Arc::new(WebhookMetrics::register("bench_", &metrics).expect("metrics")),
        builtins: Default::default(),
    };
    let tls = shell_operator::webhook::tls::server_config(
        &work.join("tls.crt"),
        &work.join("tls.key"),
        &[],
    )
    .expect("tls");
    let server = TlsServer::bind(
        "admission",
        "127.0.0.1",
        0,
        tls,
        Arc::new(handler),
        Limits::default(),
    )
    .expect("bind");
    let port = server.local_addr().expect("addr").port();
    std::thread::spawn(move || server.serve());
    port
}

fn agent(ca: &Path) -> ureq::Agent {
    use ureq::tls::{PemItem, RootCerts, TlsConfig};
    let pem = std::fs::read(ca).expect("ca");
    let certs: Vec<_> = ureq::tls::parse_pem(&pem)
        .filter_map(|i| match i {
            Ok(PemItem::Certificate(c)) => Some(c),
            _ => None,
        })
        .collect();
    let tls = TlsConfig::builder()
        .unversioned_rustls_crypto_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .root_certs(RootCerts::new_with_certs(&certs))
        .build();
    let config = ureq::Agent::config_builder()
        .tls_config(tls)
        .http_status_as_error(false)
        .build();
    ureq::Agent::new_with_config(config)
}

const REVIEW: &str = r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"bench","operation":"CREATE","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"}}}}"#;

fn request(agent: &ureq::Agent, url: &str) {
    let mut resp = agent
        .post(url)
        .header("Content-Type", "application/json")
        .send(REVIEW)
        .expect("request");
    let body = resp.body_mut().read_to_string().expect("body");
    assert!(body.contains(r#""allowed":true"#), "{body}");
}

fn webhook_latencies(agent: &ureq::Agent, url: &str, n: usize) -> Vec<Duration> {
    (0..n)
        .map(|_| {
            let t = Instant::now();
            request(agent, url);
            t.elapsed()
        })
        .collect()
}

/// Requests/s with `clients` threads, each with its own agent (connection).
fn throughput(ca: &Path, url: &str, clients: usize) -> f64 {
    let started = Instant::now();
    let threads: Vec<_> = (0..clients)
        .map(|_| {
            let (agent, url) = (agent(ca), url.to_string());
            std::thread::spawn(move || (0..PER_CLIENT).for_each(|_| request(&agent, &url)))
        })
        .collect();
    threads.into_iter().for_each(|t| t.join().expect("client"));
    (clients * PER_CLIENT) as f64 / started.elapsed().as_secs_f64()
}

/// The baseline: context file written, response file created, the hook
/// fork/exec'd with the same environment, the response read back.
fn bare_latencies(hook: &Path, tmp: &Path, n: usize) -> Vec<Duration> {
    std::fs::create_dir_all(tmp).expect("tmp");
    (0..n)
        .map(|i| {
            let t = Instant::now();
            common::bare_run(hook, tmp, i, REVIEW.as_bytes());
            t.elapsed()
        })
        .collect()
}
