//! Watch streams: the state machine for one `?watch=true` request. It opens a
//! store subscription, sends initial state or replays history from the given
//! resourceVersion, then streams live events as chunked NDJSON, applying the
//! request's namespace and selectors with transitions (an object that stops
//! matching is DELETED for this watch, one that starts matching is ADDED). It
//! sends periodic BOOKMARKs when asked, ends on `timeoutSeconds`, on
//! `Sim::drop_watches` and on server shutdown, and reports an expired
//! resourceVersion as an in-stream ERROR event carrying a 410 Status.

use crate::http;
use crate::registry::ResourceType;
use crate::selector::Filter;
use crate::server::{Shared, peer_closed};
use crate::status::ApiError;
use crate::store::{Event, EventType, WatchMsg};
use crossbeam_channel::RecvTimeoutError;
use serde_json::{Value, json};
use std::io::{self, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Where a watch starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Start {
    /// RV unset or "0": synthetic ADDED for current state, then changes.
    State,
    /// `sendInitialEvents=false` without an RV: only changes from now on.
    Now,
    /// `sendInitialEvents=true`: current state, then the initial-events-end bookmark.
    InitialEvents,
    /// Right after this resourceVersion (replayed from history).
    After(u64),
}

/// Everything a watch request asked for.
#[derive(Debug, Clone)]
pub struct WatchPlan {
    pub rt: ResourceType,
    pub version: String,
    pub filter: Filter,
    pub start: Start,
    pub bookmarks: bool,
    pub timeout: Duration,
    /// `Some(includeObject)` when events carry Tables (kubectl get -w).
    pub table: Option<String>,
}

/// Sets apiVersion/kind for the version the client asked for.
pub fn present(rt: &ResourceType, version: &str, mut obj: Value) -> Value {
    obj["apiVersion"] = json!(rt.api_version(version));
    obj["kind"] = json!(rt.kind);
    obj
}

/// Lines buffered beyond this are written out even if more events are queued.
const BATCH_BYTES: usize = 256 << 10;

/// One NDJSON line of a watch stream.
#[derive(serde::Serialize)]
struct Line<'a> {
    #[serde(rename = "type")]
    etype: &'a str,
    object: &'a Value,
}

/// Per-stream state: the plan, the output, events not yet written, what was sent.
/// Events queued together are written as one chunk (one syscall), which keeps
/// replay of long histories fast.
struct Watcher<'a, W: Write> {
    shared: &'a Shared,
    plan: &'a WatchPlan,
    out: &'a mut W,
    buf: Vec<u8>,
    last_rv: u64,
}

impl<W: Write> Watcher<'_, W> {
    /// Buffers one event line. The stored object is serialized in place when it
    /// already carries the requested apiVersion and kind (the common case).
    fn send(&mut self, etype: &str, obj: &Value) -> io::Result<()> {
        let (rt, version) = (&self.plan.rt, &self.plan.version);
        let owned;
        let object = match (&self.plan.table, etype) {
            (Some(inc), "ADDED" | "MODIFIED" | "DELETED") => {
                let obj = self.converted(obj)?;
                let meta = json!({"resourceVersion": obj["metadata"]["resourceVersion"].clone()});
                owned = crate::table::table(rt, &[obj], meta, inc);
                &owned
            }
            (_, "ERROR") => obj,
            // A bookmark carries only metadata: it is typed, never converted.
            (_, "BOOKMARK") => {
                owned = present(rt, version, obj.clone());
                &owned
            }
            _ if obj["apiVersion"] == rt.api_version(version).as_str()
                && obj["kind"] == rt.kind.as_str() =>
            {
                obj
            }
            _ => {
                owned = self.converted(obj)?;
                &owned
            }
        };
        serde_json::to_writer(&mut self.buf, &Line { etype, object }).map_err(io::Error::other)?;
        self.buf.push(b'\n');
        if self.buf.len() >= BATCH_BYTES {
            self.flush()?;
        }
        Ok(())
    }

    /// The object in the watched version (through the CRD's conversion webhook when it
    /// has one). A failed conversion is sent as an ERROR event and ends the stream.
    fn converted(&mut self, obj: &Value) -> io::Result<Value> {
        let (rt, version) = (&self.plan.rt, &self.plan.version);
        match crate::conversion::to_version(self.shared, rt, version, obj.clone()) {
            Ok(o) => Ok(o),
            Err(e) => {
                let line = Line {
                    etype: "ERROR",
                    object: &e.to_status(),
                };
                serde_json::to_writer(&mut self.buf, &line).map_err(io::Error::other)?;
                self.buf.push(b'\n');
                self.flush()?;
                Err(io::Error::other(e.message))
            }
        }
    }

    /// Writes buffered events as one chunk.
    fn flush(&mut self) -> io::Result<()> {
        let r = http::write_chunk(self.out, &self.buf);
        self.buf.clear();
        r
    }

    /// Sends an event after applying the filter with transitions.
    fn deliver(&mut self, ev: &Event) -> io::Result<()> {
        self.last_rv = self.last_rv.max(ev.rv);
        let f = &self.plan.filter;
        let now = f.matches(&ev.obj);
        let before = ev.old.as_ref().is_some_and(|o| f.matches(o));
        let etype = match ev.etype {
            EventType::Added if now => "ADDED",
            EventType::Modified if now && before => "MODIFIED",
            EventType::Modified if now => "ADDED",
            EventType::Modified if before => {
                // As kube-apiserver's watch cache: an object that stops matching is
                // DELETED as it was (the last state the watcher was allowed to see),
                // at the event's resourceVersion.
                let mut last = ev.old.as_deref().cloned().unwrap_or(Value::Null);
                last["metadata"]["resourceVersion"] = json!(ev.rv.to_string());
                return self.send("DELETED", &last);
            }
            EventType::Deleted if now => "DELETED",
            _ => return Ok(()),
        };
        self.send(etype, &ev.obj)
    }

    fn bookmark(&mut self, rv: u64, initial_end: bool) -> io::Result<()> {
        let mut meta = json!({"resourceVersion": rv.to_string(), "creationTimestamp": null});
        if initial_end {
            meta["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        self.send("BOOKMARK", &json!({"metadata": meta}))
    }
}

/// Serves one watch on `out`. Returns whether the connection may be reused.
pub fn stream<W: Write>(
    shared: &Shared,
    plan: WatchPlan,
    out: &mut W,
    probe: &TcpStream,
) -> io::Result<bool> {
    let key = plan.rt.key();
    let opened = {
        let mut st = shared.store();
        let from = match plan.start {
            Start::After(rv) => Some(rv),
            _ => None,
        };
        st.subscribe(&key, from).map(|sub| {
            // Only what the watch selects is copied (under the store's lock).
            let initial = if matches!(plan.start, Start::State | Start::InitialEvents) {
                st.list_matching(&plan.rt, |o| plan.filter.matches(o))
            } else {
                Vec::new()
            };
            (sub.id, sub.replay, sub.rx, initial, st.rv())
        })
    };
    http::start_chunked(out, "application/json")?;
    let (id, replay, rx, initial, rv_now) = match opened {
        Ok(x) => x,
        Err(e) => return expired(shared, &plan, out, e),
    };
    let mut w = Watcher {
        shared,
        plan: &plan,
        out,
        buf: Vec::new(),
        last_rv: rv_now,
    };
    let result = run(shared, &mut w, replay, initial, &rx, rv_now, probe);
    shared.store().unsubscribe(id);
    match result {
        Ok(reuse) => {
            // Events still buffered (e.g. queued just before a Close) go out first.
            if w.flush().is_err() || http::end_chunked(w.out).is_err() {
                return Ok(false);
            }
            Ok(reuse)
        }
        Err(_) => Ok(false),
    }
}

fn expired<W: Write>(
    shared: &Shared,
    plan: &WatchPlan,
    out: &mut W,
    e: ApiError,
) -> io::Result<bool> {
    let mut w = Watcher {
        shared,
        plan,
        out,
        buf: Vec::new(),
        last_rv: 0,
    };
    w.send("ERROR", &e.to_status())?;
    w.flush()?;
    http::end_chunked(out)?;
    Ok(true)
}

/// Initial state, replay, then the live loop. Ok(true) = ended cleanly (timeout).
fn run<W: Write>(
    shared: &Shared,
    w: &mut Watcher<'_, W>,
    replay: Vec<std::sync::Arc<Event>>,
    initial: Vec<Value>,
    rx: &crossbeam_channel::Receiver<WatchMsg>,
    rv_now: u64,
    probe: &TcpStream,
) -> io::Result<bool> {
    for obj in initial {
        w.send("ADDED", &obj)?;
    }
    if w.plan.start == Start::InitialEvents {
        w.bookmark(rv_now, true)?;
    }
    for ev in replay {
        w.deliver(&ev)?;
    }
    w.flush()?;
    let deadline = Instant::now() + w.plan.timeout;
    let tick = shared.bookmark_interval().min(Duration::from_millis(500));
    let mut last_bookmark = Instant::now();
    loop {
        if shared.shutdown.load(Ordering::SeqCst) {
            return Ok(false);
        }
        let now = Instant::now();
        if now >= deadline {
            if w.plan.bookmarks {
                let rv = safe_bookmark_rv(shared, rx, w.last_rv);
                w.bookmark(rv, false)?;
                w.flush()?;
            }
            return Ok(true);
        }
        match rx.recv_timeout(tick.min(deadline - now)) {
            Ok(WatchMsg::Event(ev)) => {
                w.deliver(&ev)?;
                if rx.is_empty() {
                    w.flush()?;
                }
            }
            // A cleanly ended chunked stream leaves the connection reusable,
            // as clients (Go, ureq) assume; only shutdown closes it.
            Ok(WatchMsg::Close) => return Ok(!shared.shutdown.load(Ordering::SeqCst)),
            Err(RecvTimeoutError::Disconnected) => return Ok(false),
            Err(RecvTimeoutError::Timeout) => {
                if peer_closed(probe) {
                    return Ok(false);
                }
                if w.plan.bookmarks && last_bookmark.elapsed() >= shared.bookmark_interval() {
                    let rv = safe_bookmark_rv(shared, rx, w.last_rv);
                    w.bookmark(rv, false)?;
                    w.flush()?;
                    last_bookmark = Instant::now();
                }
            }
        }
    }
}

/// The store's RV if nothing is queued for this watch (so no event is skipped), else `fallback`.
fn safe_bookmark_rv(
    shared: &Shared,
    rx: &crossbeam_channel::Receiver<WatchMsg>,
    fallback: u64,
) -> u64 {
    let st = shared.store();
    if rx.is_empty() { st.rv() } else { fallback }
}
