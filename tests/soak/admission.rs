//! Webhook traffic during the soak: a thread POSTs an AdmissionReview over TLS
//! (with the real curl, trusting the test CA) about three times a second and checks
//! each answer: HTTP 200, its own uid echoed, allowed unless the name starts with
//! `bad`. Latencies are kept for the report.

use crate::hooks::WEBHOOK_PATH;
use crate::settings::Rng;
use crate::webhook_common::curl;
use serde_json::json;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

#[derive(Default)]
pub struct Tally {
    pub answered: u64,
    pub failures: Vec<String>,
    pub latencies_ms: Vec<u64>,
}

pub struct Client {
    stop: Arc<AtomicBool>,
    pub tally: Arc<Mutex<Tally>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Client {
    pub fn spawn(port: u16, ca: PathBuf, rng: Rng) -> Client {
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Mutex::new(Tally::default()));
        let (flag, sink) = (Arc::clone(&stop), Arc::clone(&tally));
        let thread = std::thread::spawn(move || run(port, &ca, rng, &flag, &sink));
        Client {
            stop,
            tally,
            thread: Some(thread),
        }
    }

    pub fn stop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn run(port: u16, ca: &std::path::Path, mut rng: Rng, stop: &AtomicBool, tally: &Mutex<Tally>) {
    let mut n = 0u64;
    while !stop.load(Ordering::SeqCst) {
        n += 1;
        let bad = rng.chance(30);
        let name = format!("{}-{n}", if bad { "bad" } else { "ok" });
        let uid = format!("soak-{n}");
        let began = Instant::now();
        let answer = curl(port, WEBHOOK_PATH, &review(&uid, &name), ca, &[]);
        let took = began.elapsed().as_millis() as u64;
        let verdict = check(answer.status, &answer.body, &uid, !bad);
        let mut t = tally.lock().expect("tally lock");
        t.answered += 1;
        t.latencies_ms.push(took);
        if let Err(e) = verdict {
            t.failures.push(format!(
                "review {uid} ({name}): {e}; curl: {}",
                answer.stderr.trim()
            ));
        }
        drop(t);
        std::thread::sleep(Duration::from_millis(300));
    }
}

fn review(uid: &str, name: &str) -> String {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "resource": {"group": "", "version": "v1", "resource": "configmaps"},
            "operation": "CREATE",
            "namespace": "soak",
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "namespace": "soak"}}
        }
    })
    .to_string()
}

fn check(status: u16, body: &str, uid: &str, allowed: bool) -> Result<(), String> {
    if status != 200 {
        return Err(format!("HTTP {status}: {body}"));
    }
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("not JSON ({e}): {body}"))?;
    let response = &v["response"];
    if response["uid"] != uid || response["allowed"] != allowed {
        return Err(format!("want uid {uid} allowed {allowed}, got {body}"));
    }
    Ok(())
}
