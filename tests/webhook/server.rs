//! The webhook HTTPS server on its own (library level, real TLS, real curl):
//! a silent client cannot stall it, oversized bodies are refused, chunked
//! bodies are read, keep-alive serves several requests on one connection.

use crate::webhook_common;

use shell_operator::webhook::server::{Handler, Limits, Reply, TlsServer};
use shell_operator::webhook::tls::server_config;
use std::sync::Arc;
use std::time::{Duration, Instant};
use webhook_common::{Pki, curl};

/// Answers with the path and the body length.
struct Echo;

impl Handler for Echo {
    fn handle(&self, path: &str, body: &[u8]) -> Reply {
        Reply::json(format!("{{\"path\":\"{path}\",\"len\":{}}}", body.len()).into_bytes())
    }
}

fn serve(pki: &Pki, limits: Limits) -> u16 {
    let tls = server_config(&pki.path("server.crt"), &pki.path("server.key"), &[]).expect("tls");
    let server =
        TlsServer::bind("test", "127.0.0.1", 0, tls, Arc::new(Echo), limits).expect("bind");
    let port = server.local_addr().expect("addr").port();
    std::thread::spawn(move || server.serve());
    port
}

fn small() -> Limits {
    Limits {
        workers: 1,
        backlog: 4,
        max_body: 1024,
        io_timeout: Duration::from_millis(500),
        keep_alive: true,
    }
}

/// One handler thread, held by a client that connects and says nothing: it is
/// cut off at the request deadline and the next client is served.
#[test]
fn a_silent_client_does_not_stall_the_server() {
    let pki = Pki::make();
    let port = serve(&pki, small());
    let _silent = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    std::thread::sleep(Duration::from_millis(50));
    let t0 = Instant::now();
    let a = curl(port, "/x", "{}", &pki.path("ca.crt"), &[]);
    assert_eq!(
        (a.status, a.body.as_str()),
        (200, r#"{"path":"/x","len":2}"#),
        "{}",
        a.stderr
    );
    assert!(t0.elapsed() < Duration::from_secs(3));
}

#[test]
fn body_limit_chunked_bodies_and_keep_alive() {
    let pki = Pki::make();
    let port = serve(&pki, small());
    let ca = pki.path("ca.crt");
    let big = "x".repeat(2000);
    let a = curl(port, "/big", &big, &ca, &[]);
    assert_eq!((a.status, a.body.as_str()), (413, "request body too large"));
    let a = curl(
        port,
        "/chunked",
        &"y".repeat(700),
        &ca,
        &["-H", "Transfer-Encoding: chunked"],
    );
    assert_eq!(a.body, r#"{"path":"/chunked","len":700}"#);
    // Two URLs in one curl call reuse the connection (curl says so on stderr with -v).
    let a = curl(
        port,
        "/one",
        "{}",
        &ca,
        &["-v", &format!("https://127.0.0.1:{port}/two")],
    );
    assert!(
        a.body.contains(r#""path":"/one""#) && a.body.contains(r#""path":"/two""#),
        "{}",
        a.body
    );
    assert!(
        a.stderr.contains("Re-using existing") || a.stderr.contains("existing connection"),
        "{}",
        a.stderr
    );
}

/// Issue 11 item 3: 150 slowloris clients (a TLS ClientHello trickled a byte at a
/// time) and 1,000 silent connections against the default limits (16 handlers):
/// a legitimate review is still answered at once, because connections wait in
/// the accept thread's poll loop until their request is whole.
#[test]
fn slowloris_and_idle_connections_do_not_delay_a_review() {
    use std::io::Write;
    raise_fd_limit(4096);
    let pki = Pki::make();
    let port = serve(&pki, Limits::default());
    let connect = || std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect");
    let idle: Vec<_> = (0..1000).map(|_| connect()).collect();
    let mut loris: Vec<_> = (0..150).map(|_| connect()).collect();
    // The first bytes of a TLS record header, one per round.
    for byte in [0x16u8, 0x03, 0x01] {
        for s in &mut loris {
            s.write_all(&[byte]).expect("trickle");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let t0 = Instant::now();
    let a = curl(port, "/review", "{}", &pki.path("ca.crt"), &[]);
    let took = t0.elapsed();
    assert_eq!(a.status, 200, "{}", a.stderr);
    assert!(took < Duration::from_secs(1), "answered after {took:?}");
    drop((idle, loris));
}

/// Raises this process's open-file limit to `want` (or the hard limit): the test
/// holds both ends of 1,150 connections, past a default soft limit of 1,024.
fn raise_fd_limit(want: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit only read and write the struct we pass.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) == 0 && lim.rlim_cur < want {
            lim.rlim_cur = want.min(lim.rlim_max);
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
        }
    }
}
