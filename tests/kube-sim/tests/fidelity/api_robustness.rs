//! kube-sim's edges over real HTTP: fault injection (fail_next, set_delay,
//! request log), bearer-token auth, protobuf request bodies, malformed and odd
//! input on every write path, `Expect: 100-continue`, and stopping on drop.

use crate::common;

use common::{Client, cm, names};
use kube_sim::{Sim, SimOptions};
use serde_json::json;
use std::time::{Duration, Instant};

/// fail_next answers N requests with a Status (429 with Retry-After), then recovers.
#[test]
fn fail_next_delay_and_request_log() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    sim.fail_next(2, 429);
    let a = c.get("/api/v1/configmaps");
    assert_eq!(
        (a.code, a.retry_after.as_deref(), a.body["reason"].clone()),
        (429, Some("1"), json!("TooManyRequests"))
    );
    assert_eq!(c.get("/api/v1/configmaps").code, 429);
    assert_eq!(c.get("/api/v1/configmaps").code, 200);
    sim.fail_next(1, 500);
    let e = c.get("/api/v1/pods");
    assert_eq!(
        (e.code, e.body["reason"].clone(), e.retry_after),
        (500, json!("InternalError"), None)
    );
    assert_eq!(sim.request_count(), 4);
    assert_eq!(sim.requests()[3], "GET /api/v1/pods");
    sim.set_delay(Duration::from_millis(300));
    let t = Instant::now();
    assert_eq!(c.get("/api/v1/configmaps?labelSelector=x").code, 200);
    assert!(t.elapsed() >= Duration::from_millis(300));
    sim.set_delay(Duration::ZERO);
    assert_eq!(
        sim.requests().last().unwrap(),
        "GET /api/v1/configmaps?labelSelector=x"
    );
}

/// fail_matching fails only the requests that match, the given number of times.
#[test]
fn fail_matching_targets_requests() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    sim.create(cm("default", "x", json!({}))).unwrap();
    sim.fail_matching("PATCH /api/v1/namespaces/default/configmaps/x", 2, 409);
    let p = "/api/v1/namespaces/default/configmaps/x";
    assert_eq!(c.get(p).code, 200);
    let r = c.patch(p, "application/merge-patch+json", "{}");
    assert_eq!((r.code, r.body["reason"].clone()), (409, json!("Conflict")));
    assert_eq!(c.patch(p, "application/merge-patch+json", "{}").code, 409);
    assert_eq!(c.patch(p, "application/merge-patch+json", "{}").code, 200);
}

/// With require_token, requests need the bearer token.
#[test]
fn bearer_token_required() {
    let sim = Sim::start_with(SimOptions {
        require_token: Some("s3cret".into()),
        ..Default::default()
    })
    .unwrap();
    let c = Client::new(&sim.url());
    let r = c.get("/api/v1/namespaces");
    assert_eq!(
        (r.code, r.body["reason"].clone()),
        (401, json!("Unauthorized"))
    );
    assert_eq!(
        c.get_with("/api/v1/namespaces", ("Authorization", "Bearer wrong"))
            .code,
        401
    );
    let ok = c.get_with("/api/v1/namespaces", ("Authorization", "Bearer s3cret"));
    assert_eq!(ok.code, 200);
    assert!(names(&ok.body).contains(&"default".to_string()));
}

/// A ConfigMap sent as a Kubernetes protobuf body is decoded and stored.
#[test]
fn protobuf_configmap_body() {
    use kube_sim::protobuf::encode::*;
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    let mut meta = Vec::new();
    bytes_field(1, b"pb", &mut meta);
    bytes_field(3, b"default", &mut meta);
    map_entry(11, "from", b"proto", &mut meta);
    map_entry(12, "note", b"hi", &mut meta);
    let mut msg = Vec::new();
    bytes_field(1, &meta, &mut msg);
    map_entry(2, "key", b"value", &mut msg);
    map_entry(3, "bin", b"\x01\x02", &mut msg);
    varint_field(4, 1, &mut msg);
    let body = envelope("v1", "ConfigMap", &msg);
    let r = c.send(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/vnd.kubernetes.protobuf",
        &body,
    );
    assert_eq!(r.code, 201, "{:?}", r.body);
    let got = sim.get("v1", "ConfigMap", "default", "pb").unwrap();
    assert_eq!(got["data"], json!({"key": "value"}));
    assert_eq!(got["binaryData"], json!({"bin": "AQI="}));
    assert_eq!(got["immutable"], true);
    assert_eq!(got["metadata"]["labels"], json!({"from": "proto"}));
    assert_eq!(got["metadata"]["annotations"], json!({"note": "hi"}));
    let bad = c.send(
        "POST",
        "/api/v1/namespaces/default/configmaps",
        "application/vnd.kubernetes.protobuf",
        b"k8s\x00\x0a\xff",
    );
    assert!(bad.code == 415 || bad.code == 400, "{}", bad.code);
}

/// Malformed requests get a 400 Status and never take the server down.
#[test]
fn garbage_input_is_rejected() {
    use std::io::{Read, Write};
    let sim = Sim::start();
    let addr = sim.url().trim_start_matches("http://").to_string();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    s.write_all(b"GARBAGE\r\n\r\n").unwrap();
    let mut out = String::new();
    let _ = s.read_to_string(&mut out);
    assert!(out.starts_with("HTTP/1.1 400"), "{out}");
    let c = Client::new(&sim.url());
    assert_eq!(
        c.send(
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
            b"{not json"
        )
        .code,
        400
    );
    assert_eq!(c.get("/api/v1/configmaps").code, 200);
}

/// `Expect: 100-continue` (curl's habit for large bodies) gets an interim 100 before the body is sent.
#[test]
fn expect_continue_is_answered() {
    use std::io::{BufRead, BufReader, Read, Write};
    let sim = Sim::start();
    let addr = sim.url().trim_start_matches("http://").to_string();
    let mut s = std::net::TcpStream::connect(&addr).unwrap();
    let body = cm("default", "big", json!({})).to_string();
    let head = format!(
        "POST /api/v1/namespaces/default/configmaps HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: {}\r\nExpect: 100-continue\r\nConnection: close\r\n\r\n",
        body.len()
    );
    s.write_all(head.as_bytes()).unwrap();
    let mut r = BufReader::new(s.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    assert_eq!(line, "HTTP/1.1 100 Continue\r\n");
    s.write_all(body.as_bytes()).unwrap();
    let mut rest = String::new();
    r.read_to_string(&mut rest).unwrap();
    assert!(rest.contains("HTTP/1.1 201 Created"), "{rest}");
    assert!(sim.get("v1", "ConfigMap", "default", "big").is_some());
}

/// Dropping the Sim stops the server: the port no longer answers.
#[test]
fn drop_stops_server() {
    let sim = Sim::start();
    let url = sim.url();
    let c = Client::new(&url);
    assert_eq!(c.get("/version").code, 200);
    drop(sim);
    std::thread::sleep(Duration::from_millis(100));
    let addr = url.trim_start_matches("http://").to_string();
    assert!(
        std::net::TcpStream::connect(addr).is_err(),
        "port still accepting after drop"
    );
}

/// Odd bodies on every write path get 4xx Statuses; the server keeps serving.
#[test]
fn odd_bodies_never_crash() {
    let sim = Sim::start();
    let c = Client::new(&sim.url());
    sim.create(cm("default", "x", json!({}))).unwrap();
    sim.create(common::deployment("default", "d", 1)).unwrap();
    let bodies: [&[u8]; 9] = [
        b"[]",
        b"\"str\"",
        b"null",
        b"{\"metadata\":\"oops\"}",
        b"{\"metadata\":{\"name\":7}}",
        b"{\"spec\":\"x\"}",
        b"k8s\x00",
        b"\xff\xfe",
        b"{\"metadata\":{\"labels\":[1]}}",
    ];
    let targets = [
        (
            "POST",
            "/api/v1/namespaces/default/configmaps",
            "application/json",
        ),
        (
            "PUT",
            "/api/v1/namespaces/default/configmaps/x",
            "application/json",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/x",
            "application/merge-patch+json",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/x",
            "application/json-patch+json",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/x",
            "application/strategic-merge-patch+json",
        ),
        (
            "PATCH",
            "/api/v1/namespaces/default/configmaps/new",
            "application/apply-patch+yaml",
        ),
        (
            "PUT",
            "/apis/apps/v1/namespaces/default/deployments/d/scale",
            "application/json",
        ),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/d/scale",
            "application/merge-patch+json",
        ),
        (
            "PATCH",
            "/apis/apps/v1/namespaces/default/deployments/d/status",
            "application/merge-patch+json",
        ),
        (
            "DELETE",
            "/api/v1/namespaces/default/configmaps/nothere",
            "application/json",
        ),
        (
            "POST",
            "/api/v1/namespaces",
            "application/vnd.kubernetes.protobuf",
        ),
    ];
    for (method, path, ct) in targets {
        for body in bodies {
            let r = c.send(method, path, ct, body);
            assert!(
                r.code < 500,
                "{method} {path} [{ct}] {body:?} -> {} {:?}",
                r.code,
                r.body
            );
            if r.code >= 400 {
                assert_eq!(r.body["kind"], "Status", "{method} {path} {body:?}");
            }
        }
    }
    assert_eq!(c.get("/version").code, 200);
    assert_eq!(c.get("/api/v1/namespaces/default/configmaps").code, 200);
}
