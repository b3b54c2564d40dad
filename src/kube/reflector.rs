//! The reflector: keeps a cache of one resource (in one namespace, with optional
//! selectors) in step with the server and tells a consumer what changed, over a
//! crossbeam channel. One OS thread per reflector runs an explicit state machine:
//!
//! ```text
//! Empty ──LIST page──> Listing ──last page──> Listed(rv) ──open watch──> Watching(rv)
//!   ^                                            ^   ^                      │
//!   │                                            │   └── stream ended ──────┤ (resume from rv)
//!   │                                            └──── error, after backoff ┤
//!   └──────────────── Desynced (410 Gone / ERROR Expired) <────────────────┘
//! ```
//!
//! The first complete list is delivered as [`Event::Synced`]. A relist after
//! Desynced is diffed against the cache, so consumers get exactly the
//! Added/Modified/Deleted that happened, none lost and none doubled; with the cache
//! off ([`Cache::Off`]) the relist is delivered whole as [`Event::Relisted`] for the
//! consumer to diff against its own state. Bookmarks advance
//! the resume version; errors back off exponentially with jitter.

mod watch_list;

use super::Client;
use super::backoff::Backoff;
use super::cache::{Cache, Change, Item, Store};
use super::decode::{self, Applied};
use super::discovery::Resource;
use super::http::{Request, Stream};
use super::selector::query_escape;
use crate::canonical::{Meta, canonical_arc};
use crossbeam_channel::{Receiver, Sender};
use serde_json::Value;
use std::io::BufRead;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use ureq::http::Method;

/// What a reflector tells its consumer.
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// The first complete list: the cache now holds exactly these objects, each
    /// decoded once as a watch event's is (canonical text shared with the cache,
    /// metadata read, `apiVersion`/`kind` filled in), so a big list never exists
    /// as one tree of values and is never parsed again.
    Synced(Vec<Object>),
    /// [`Cache::Off`] only: the complete list after a desync (410), to be diffed by
    /// the consumer; events missed while disconnected are only in this list. With
    /// the list's resourceVersion.
    Relisted(Vec<Object>, String),
    Added(Object),
    Modified(Object),
    /// The object's last known state.
    Deleted(Object),
    /// The watch failed or ended; the reflector recovers by itself. For logs and the
    /// `kubernetes_client_watch_errors_total{error_type}` metric.
    WatchError {
        kind: WatchErrorKind,
        message: String,
    },
}

/// A watched object, decoded once: its canonical JSON (compact, keys sorted: see
/// [`canonical`](crate::canonical)) and the metadata read on the way.
#[derive(Debug, Clone, PartialEq)]
pub struct Object {
    pub json: Arc<str>,
    pub meta: Meta,
}

impl Object {
    /// Decodes an object's JSON text; `type_meta` (apiVersion, kind) fills in
    /// what list items come without.
    pub(crate) fn decode(
        text: &str,
        type_meta: Option<(&str, &str)>,
    ) -> Result<Object, crate::canonical::CanonicalError> {
        let (json, meta) = canonical_arc(text, type_meta)?;
        Ok(Object { json, meta })
    }

    /// The object as a value (tests and rare paths; the data path keeps the text).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.json).unwrap_or(Value::Null)
    }
}

/// Why a watch stopped, named as shell-operator's `error_type` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchErrorKind {
    /// 410: the resume version left the server's window; a relist follows.
    Expired,
    /// The server closed the stream normally (timeoutSeconds).
    Eof,
    /// The connection broke or went silent past the read timeout.
    UnexpectedEof,
    /// Any other failure: HTTP error, bad data, ERROR event other than 410.
    Fail,
    /// The server refused the request itself (400 Bad Request, e.g. a field selector
    /// the resource does not support): the same request fails again. Counted as
    /// `fail`; a consumer waiting for the initial list should give up on it.
    Refused,
}

impl WatchErrorKind {
    /// `expired`, `eof`, `unexpected-eof` or `fail`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            WatchErrorKind::Expired => "expired",
            WatchErrorKind::Eof => "eof",
            WatchErrorKind::UnexpectedEof => "unexpected-eof",
            WatchErrorKind::Fail | WatchErrorKind::Refused => "fail",
        }
    }
}

/// What to watch and how.
#[derive(Debug, Clone)]
pub struct WatchParams {
    /// None (or a cluster-scoped resource): all namespaces.
    pub namespace: Option<String>,
    /// Encoded label selector (see `selector::encode_label_selector`), empty for none.
    pub label_selector: String,
    /// Encoded field selector, empty for none.
    pub field_selector: String,
    /// LIST page size (`limit`).
    pub page_size: u32,
    /// Server-side `timeoutSeconds` of each watch request.
    pub watch_timeout: Duration,
    /// First and largest delay between retries after errors.
    pub backoff_base: Duration,
    pub backoff_max: Duration,
    /// Skip the initial list and watch from this resourceVersion with an empty cache.
    pub start_resource_version: Option<String>,
    /// What the cache keeps per object.
    pub cache: Cache,
    /// Get the initial list as one streaming watch (`sendInitialEvents`), falling
    /// back to paged LISTs when the server refuses; false: always page.
    pub watch_list: bool,
}

impl Default for WatchParams {
    fn default() -> Self {
        WatchParams {
            namespace: None,
            label_selector: String::new(),
            field_selector: String::new(),
            page_size: 500,
            watch_timeout: Duration::from_secs(300),
            backoff_base: Duration::from_millis(800),
            backoff_max: Duration::from_secs(30),
            start_resource_version: None,
            cache: Cache::Objects,
            watch_list: true,
        }
    }
}

/// The running reflector: stop it, join it, look at its cache.
pub struct ReflectorHandle {
    /// Dropped to stop: the thread sees the channel disconnected, and keeps seeing it.
    stop: Mutex<Option<Sender<()>>>,
    thread: Option<std::thread::JoinHandle<()>>,
    store: Arc<Mutex<Store>>,
}

impl ReflectorHandle {
    /// Asks the thread to stop. It stops at once when idle or backing off, otherwise
    /// after the next event or read timeout; it never sends after seeing the request.
    /// Dropping the handle stops the thread too.
    pub fn stop(&self) {
        *self.stop.lock().unwrap_or_else(|p| p.into_inner()) = None;
    }

    /// Stops and waits for the thread to end.
    pub fn join(mut self) {
        self.stop();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }

    /// The cache, shared with the reflector thread (lock briefly).
    pub fn store(&self) -> Arc<Mutex<Store>> {
        self.store.clone()
    }
}

/// How a failed LIST or WATCH request counts: refused (400, the request itself is
/// wrong) or an ordinary failure.
fn failure_kind(e: &super::KubeError) -> WatchErrorKind {
    match e.status_code() {
        Some(400) => WatchErrorKind::Refused,
        _ => WatchErrorKind::Fail,
    }
}

/// The states of the list/watch machine.
enum State {
    /// Nothing listed yet: start a LIST.
    Empty,
    /// Paging through a LIST.
    Listing {
        continue_token: String,
        items: Vec<Item>,
        rv: String,
    },
    /// Reading the initial events of a watch-list stream (`watch_list.rs`).
    InitialEvents {
        stream: Stream,
        items: Vec<Item>,
    },
    /// Listed or resumed at `rv`: open a watch from it.
    Listed {
        rv: String,
    },
    /// Streaming events; `rv` follows every event and bookmark.
    Watching {
        rv: String,
        stream: Stream,
    },
    /// The watch window was lost (410): relist and diff against the cache.
    Desynced,
    /// Wait, then go on with `next`.
    Backoff {
        next: Box<State>,
        delay: Duration,
    },
    Stopped,
}

/// The thread's private state.
struct Reflector {
    client: Client,
    resource: Resource,
    params: WatchParams,
    sink: Sink,
    stop: Receiver<()>,
    store: Arc<Mutex<Store>>,
    synced: bool,
    backoff: Backoff,
    line: Vec<u8>,
    /// Whether to try the streaming initial list (cleared when the server refuses).
    watch_list: bool,
    /// The resource's apiVersion, filled into listed objects.
    api_version: String,
}

/// Where a reflector delivers events, called on the reflector's thread; returning
/// false stops the reflector (a channel's receiver is gone).
pub(crate) type Sink = Box<dyn FnMut(Event) -> bool + Send>;

/// Starts a reflector thread for `resource`; events go to `tx`.
pub(crate) fn spawn(
    client: Client,
    resource: Resource,
    params: WatchParams,
    tx: Sender<Event>,
) -> ReflectorHandle {
    spawn_with_sink(
        client,
        resource,
        params,
        Box::new(move |e| tx.send(e).is_ok()),
    )
}

/// Starts a reflector thread that hands each event to `sink` on its own thread (no
/// channel hop: for consumers that process events where they are decoded).
pub(crate) fn spawn_with_sink(
    client: Client,
    resource: Resource,
    params: WatchParams,
    sink: Sink,
) -> ReflectorHandle {
    let (stop_tx, stop_rx) = crossbeam_channel::bounded(1);
    let store = Arc::new(Mutex::new(Store::new(params.cache)));
    let initial = match &params.start_resource_version {
        Some(rv) => State::Listed { rv: rv.clone() },
        None => State::Empty,
    };
    let watch_list = params.watch_list;
    let api_version = resource.api_version();
    // A stop also ends a read waiting on the stream (`kube/interrupt.rs`).
    let reads = stop_rx.clone();
    let mut r = Reflector {
        api_version,
        backoff: Backoff::new(params.backoff_base, params.backoff_max),
        synced: params.start_resource_version.is_some(),
        client,
        resource,
        params,
        sink,
        stop: stop_rx,
        store: store.clone(),
        line: Vec::with_capacity(16 << 10),
        watch_list,
    };
    let name = format!("watch-{}", r.resource.resource);
    // A thread that cannot start delivers nothing; the consumer's wait for the
    // initial list times out and says so.
    let thread = crate::threads::spawn(&name, move || {
        super::interrupt::stop_reads_on(reads);
        r.run(initial)
    })
    .map_err(|e| crate::log::error("cannot start a watch", &[("error", &e)]))
    .ok();
    ReflectorHandle {
        stop: Mutex::new(Some(stop_tx)),
        thread,
        store,
    }
}

impl Reflector {
    fn run(&mut self, mut state: State) {
        loop {
            if !matches!(
                self.stop.try_recv(),
                Err(crossbeam_channel::TryRecvError::Empty)
            ) {
                return;
            }
            state = match state {
                State::Stopped => return,
                s => self.step(s),
            };
        }
    }

    /// One transition.
    fn step(&mut self, state: State) -> State {
        match state {
            State::Empty | State::Desynced if self.watch_list => self.open_watch_list(),
            State::Empty | State::Desynced => State::Listing {
                continue_token: String::new(),
                items: Vec::new(),
                rv: String::new(),
            },
            State::InitialEvents { stream, items } => self.read_initial(stream, items),
            State::Listing {
                continue_token,
                items,
                rv,
            } => self.list_page(continue_token, items, rv),
            State::Listed { rv } => self.open_watch(rv),
            State::Watching { rv, stream } => self.read_event(rv, stream),
            State::Backoff { next, delay } => match self.stop.recv_timeout(delay) {
                Err(crossbeam_channel::RecvTimeoutError::Timeout) => *next,
                _ => State::Stopped,
            },
            State::Stopped => State::Stopped,
        }
    }

    /// The apiVersion and kind that listed objects come without.
    fn type_meta(&self) -> decode::TypeMeta<'_> {
        Some((&self.api_version, &self.resource.kind))
    }

    fn path(&self) -> String {
        self.resource
            .collection_path(self.params.namespace.as_deref())
    }

    fn selectors(&self) -> String {
        let mut q = String::new();
        if !self.params.label_selector.is_empty() {
            q.push_str(&format!(
                "&labelSelector={}",
                query_escape(&self.params.label_selector)
            ));
        }
        if !self.params.field_selector.is_empty() {
            q.push_str(&format!(
                "&fieldSelector={}",
                query_escape(&self.params.field_selector)
            ));
        }
        q
    }

    /// Fetches one LIST page; after the last one, syncs the cache.
    fn list_page(&mut self, token: String, mut items: Vec<Item>, _rv: String) -> State {
        let mut path = format!(
            "{}?limit={}{}",
            self.path(),
            self.params.page_size,
            self.selectors()
        );
        if !token.is_empty() {
            path.push_str(&format!("&continue={}", query_escape(&token)));
        }
        let req = Request {
            verb: "LIST",
            method: Method::GET,
            path: &path,
            body: None,
        };
        let body = match self
            .client
            .transport()
            .send(&req)
            .and_then(|r| r.ok("LIST", &path))
        {
            Ok(body) => body,
            // An expired continue token: start the list over.
            Err(e) if e.is_gone() => return State::Empty,
            Err(e) => return self.fail(failure_kind(&e), &e.to_string(), State::Empty),
        };
        let meta = match decode::list_page(&body, self.type_meta()) {
            Ok((page, meta)) => {
                items.extend(page);
                meta
            }
            Err(m) => return self.fail(WatchErrorKind::Fail, &m, State::Empty),
        };
        let rv = meta.resource_version;
        if !meta.continue_token.is_empty() {
            return State::Listing {
                continue_token: meta.continue_token,
                items,
                rv,
            };
        }
        self.backoff.reset();
        if self.finish_list(items, &rv) {
            State::Listed { rv }
        } else {
            State::Stopped
        }
    }

    /// Installs a complete list: Synced the first time, the diff afterwards.
    fn finish_list(&mut self, items: Vec<Item>, rv: &str) -> bool {
        if !self.synced {
            self.synced = true;
            let objects = self.lock().fill(items);
            return self.send(Event::Synced(objects));
        }
        if self.params.cache == Cache::Off {
            return self.send(Event::Relisted(
                items.into_iter().map(|i| i.object).collect(),
                rv.to_string(),
            ));
        }
        let changes = self.lock().replace(items);
        for c in changes {
            let event = match c {
                Change::Added(o) => Event::Added(o),
                Change::Modified(o) => Event::Modified(o),
                // The cache's last copy of a deleted object, decoded for the event.
                Change::Deleted(json) => match Object::decode(&json, None) {
                    Ok(o) => Event::Deleted(o),
                    Err(_) => continue,
                },
            };
            if !self.send(event) {
                return false;
            }
        }
        true
    }

    /// The server-side timeout of a watch request: the configured one plus up to
    /// 20% jitter, so many reflectors do not reconnect in lockstep.
    fn watch_timeout_secs(&self) -> u64 {
        let base = self.params.watch_timeout.as_secs().max(1);
        base + (base as f64 * 0.2 * super::backoff::random_unit()) as u64
    }

    fn open_watch(&mut self, rv: String) -> State {
        let secs = self.watch_timeout_secs();
        let path = format!(
            "{}?watch=1&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds={secs}{}",
            self.path(),
            query_escape(&rv),
            self.selectors()
        );
        // Silence longer than the server's own timeout means a dead connection.
        let read_timeout = Duration::from_secs(secs + 30);
        match self.client.transport().stream(&path, read_timeout) {
            Ok(stream) => {
                // The server answers again: a later fault starts from the base delay.
                self.backoff.reset();
                State::Watching { rv, stream }
            }
            Err(e) if e.is_gone() => self.desync(&e.to_string()),
            Err(e) => {
                let next = self.fail(failure_kind(&e), &e.to_string(), State::Listed { rv });
                self.wait_as_asked(next, e.retry_after())
            }
        }
    }

    /// Reads and applies one line of the watch stream.
    fn read_event(&mut self, rv: String, mut stream: Stream) -> State {
        self.line.clear();
        match stream.read_until(b'\n', &mut self.line) {
            Ok(0) => {
                let _ = self.send(Event::WatchError {
                    kind: WatchErrorKind::Eof,
                    message: "watch closed by the server".into(),
                });
                return State::Listed { rv };
            }
            Ok(_) => {}
            Err(e) => {
                return self.fail(
                    WatchErrorKind::UnexpectedEof,
                    &e.to_string(),
                    State::Listed { rv },
                );
            }
        }
        crate::latency_trace::mark(crate::latency_trace::Stage::LineRead);
        let line = std::mem::take(&mut self.line);
        let next = self.apply_line(&line, rv, stream);
        self.line = line;
        next
    }

    fn apply_line(&mut self, line: &[u8], rv: String, stream: Stream) -> State {
        let applied = decode::apply_line(&mut self.lock(), line);
        match applied {
            Applied::Blank | Applied::Bookmark(None) => State::Watching { rv, stream },
            Applied::Bookmark(Some(new_rv)) => State::Watching { rv: new_rv, stream },
            Applied::Object { event, rv: new_rv } => {
                self.backoff.reset();
                if let Some(e) = event {
                    crate::latency_trace::mark(crate::latency_trace::Stage::Decoded);
                    if !self.send(e) {
                        return State::Stopped;
                    }
                }
                State::Watching { rv: new_rv, stream }
            }
            Applied::Expired(m) => self.desync(&m),
            Applied::Failed(m) => self.fail(WatchErrorKind::Fail, &m, State::Listed { rv }),
        }
    }

    fn desync(&mut self, message: &str) -> State {
        let _ = self.send(Event::WatchError {
            kind: WatchErrorKind::Expired,
            message: message.to_string(),
        });
        State::Desynced
    }

    /// Reports an error and backs off before `next`.
    fn fail(&mut self, kind: WatchErrorKind, message: &str, next: State) -> State {
        if !self.send(Event::WatchError {
            kind,
            message: message.to_string(),
        }) {
            return State::Stopped;
        }
        State::Backoff {
            next: Box::new(next),
            delay: self.backoff.next_delay(),
        }
    }

    /// A backoff that waits what the server asked for (`Retry-After`, at most the
    /// backoff's cap) instead of the computed delay.
    fn wait_as_asked(&self, state: State, asked: Option<Duration>) -> State {
        match (state, asked) {
            (State::Backoff { next, .. }, Some(asked)) => State::Backoff {
                next,
                delay: asked.min(self.params.backoff_max.max(Duration::from_secs(1))),
            },
            (state, _) => state,
        }
    }

    /// Sends unless stopped or the consumer is gone; false means stop.
    fn send(&mut self, e: Event) -> bool {
        if !matches!(
            self.stop.try_recv(),
            Err(crossbeam_channel::TryRecvError::Empty)
        ) {
            return false;
        }
        (self.sink)(e)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|p| p.into_inner())
    }
}
