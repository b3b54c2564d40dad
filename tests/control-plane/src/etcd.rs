//! Direct access to etcd's v3 JSON gateway, for what tests do behind the API
//! server's back: change stored objects while kube-apiserver is down, and compact
//! the history so that an old resourceVersion answers 410 Expired.
//!
//! The API server stores objects as JSON here (`--storage-media-type`), under
//! `/registry/<resource>/<namespace>/<name>` for core resources.

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A client for one etcd member's gateway at `127.0.0.1:port`.
#[derive(Clone, Debug)]
pub struct Etcd {
    pub port: u16,
}

impl Etcd {
    /// POSTs `body` to `path` and returns the JSON answer.
    fn post(&self, path: &str, body: &Value) -> Result<Value, String> {
        let body = body.to_string();
        let mut conn = TcpStream::connect(("127.0.0.1", self.port))
            .map_err(|e| format!("etcd 127.0.0.1:{}: {e}", self.port))?;
        conn.set_read_timeout(Some(Duration::from_secs(10))).ok();
        let request = format!(
            "POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
            body.len()
        );
        conn.write_all(request.as_bytes())
            .map_err(|e| format!("etcd {path}: {e}"))?;
        let mut answer = String::new();
        conn.read_to_string(&mut answer)
            .map_err(|e| format!("etcd {path}: {e}"))?;
        let (head, text) = answer
            .split_once("\r\n\r\n")
            .ok_or_else(|| format!("etcd {path}: no HTTP answer"))?;
        if !head.starts_with("HTTP/1.1 200") {
            return Err(format!("etcd {path}: {head} {text}"));
        }
        serde_json::from_str(text).map_err(|e| format!("etcd {path}: {e}: {text}"))
    }

    /// The current revision of the store.
    pub fn revision(&self) -> Result<i64, String> {
        let answer = self.post("/v3/kv/range", &json!({"key": B64.encode("/")}))?;
        answer["header"]["revision"]
            .as_str()
            .and_then(|r| r.parse().ok())
            .ok_or_else(|| format!("etcd: no revision in {answer}"))
    }

    /// Writes `value` under `key`.
    pub fn put(&self, key: &str, value: &str) -> Result<(), String> {
        self.post(
            "/v3/kv/put",
            &json!({"key": B64.encode(key), "value": B64.encode(value)}),
        )
        .map(|_| ())
    }

    /// Reads the value under `key`, if any.
    pub fn get(&self, key: &str) -> Result<Option<String>, String> {
        let answer = self.post("/v3/kv/range", &json!({"key": B64.encode(key)}))?;
        let Some(kv) = answer["kvs"].get(0) else {
            return Ok(None);
        };
        let raw = B64
            .decode(kv["value"].as_str().unwrap_or_default())
            .map_err(|e| format!("etcd {key}: {e}"))?;
        Ok(Some(String::from_utf8_lossy(&raw).into_owned()))
    }

    /// Deletes `key`.
    pub fn delete(&self, key: &str) -> Result<(), String> {
        self.post("/v3/kv/deleterange", &json!({"key": B64.encode(key)}))
            .map(|_| ())
    }

    /// Compacts the history up to the current revision and returns it: every older
    /// revision is gone, so a watch from an older resourceVersion gets 410.
    pub fn compact(&self) -> Result<i64, String> {
        let revision = self.revision()?;
        self.post(
            "/v3/kv/compaction",
            &json!({"revision": revision.to_string(), "physical": true}),
        )?;
        Ok(revision)
    }
}
