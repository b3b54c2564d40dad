//! The debug HTTP server: flant's debug endpoints on a unix socket (and, if asked,
//! on a plain TCP address). Each listener has its own thread; requests only read
//! shared state ([`DebugState`]) except `POST /config/set`.
//!
//! Routes (an optional `/debug` prefix is accepted; `{fmt}` is `text`, `json` or
//! `yaml`, taken from the path's extension, text when there is none):
//! `GET /`, `/queue/main.{fmt}`, `/queue/list.{fmt}?showEmpty=bool`,
//! `/hook/list.{fmt}`, `/hook/<name>/snapshots.{fmt}`, `/config/list.{fmt}`,
//! `POST /config/set` (form: `name`, `value`, `duration`).

use super::{DebugState, queues, runtime};
use crate::hook::config::go_duration;
use crate::listen::{self, Limits, Reply, Request, Server, Service};
use crate::log;
use serde_json::Value;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// The bound listeners, ready to be served on their threads.
pub(crate) struct DebugServer {
    servers: Vec<Server>,
    socket: PathBuf,
    state: Arc<DebugState>,
}

/// A handle that stops every listener and removes the socket file.
pub(crate) struct Stopper {
    stoppers: Vec<listen::Stopper>,
    socket: PathBuf,
}

impl Stopper {
    /// Stops the listeners and unlinks the socket.
    pub(crate) fn stop(&self) {
        self.stoppers.iter().for_each(listen::Stopper::stop);
        let _ = std::fs::remove_file(&self.socket);
    }
}

/// What a handler returns: a body already in its final text, or a value to format.
enum Output {
    Text(String),
    Value(Value),
}

/// An error answer: status and message.
struct Fail(u16, String);

impl DebugServer {
    /// Binds the unix socket (parent dir created 0700, a stale socket removed, the
    /// socket made 0600) and, if `http_addr` is not empty, a TCP listener.
    pub(crate) fn bind(
        socket: &Path,
        http_addr: &str,
        state: Arc<DebugState>,
    ) -> Result<DebugServer, String> {
        let err = |e: &dyn std::fmt::Display| format!("debug socket '{}': {e}", socket.display());
        prepare_socket_path(socket).map_err(|e| err(&e))?;
        let unix = UnixListener::bind(socket).map_err(|e| err(&e))?;
        std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
            .map_err(|e| err(&e))?;
        let service: Arc<dyn Service> = Arc::new(Debug(Arc::clone(&state)));
        let limits = Limits::small();
        let path = socket.to_path_buf();
        let mut servers = vec![Server::on_unix(
            "debug",
            unix,
            path,
            Arc::clone(&service),
            limits,
        )];
        if !http_addr.is_empty() {
            let (host, port) = http_addr
                .rsplit_once(':')
                .and_then(|(h, p)| Some((h, p.parse::<u16>().ok()?)))
                .ok_or_else(|| format!("debug HTTP address {http_addr}: expected host:port"))?;
            let tcp = Server::bind_tcp("debug-http", host, port, None, service, limits)
                .map_err(|e| format!("debug HTTP address {http_addr}: {e}"))?;
            servers.push(tcp);
        }
        Ok(DebugServer {
            servers,
            socket: socket.to_path_buf(),
            state,
        })
    }

    /// The handle that stops the threads started from [`into_threads`](Self::into_threads).
    pub(crate) fn stopper(&self) -> Stopper {
        Stopper {
            stoppers: self.servers.iter().filter_map(Server::stopper).collect(),
            socket: self.socket.clone(),
        }
    }

    /// Expires temporary runtime parameters (`config set ... duration`); the main
    /// thread calls it every second.
    pub(crate) fn expirer(&self) -> impl Fn() + Send + 'static {
        let state = Arc::clone(&self.state);
        move || state.config.expire(SystemTime::now())
    }

    /// The accept threads' (name, body): one per listener.
    pub(crate) fn into_threads(self) -> Vec<(String, Box<dyn FnOnce() + Send + 'static>)> {
        self.servers
            .into_iter()
            .map(|server| {
                let name = server.name().to_string();
                let body: Box<dyn FnOnce() + Send> = Box::new(move || server.serve());
                (name, body)
            })
            .collect()
    }
}

/// Creates the parent dir (0700 if we create it) and removes a stale socket; a
/// socket someone still listens on is an error, never stolen.
fn prepare_socket_path(socket: &Path) -> std::io::Result<()> {
    if let Some(parent) = socket.parent().filter(|p| !p.as_os_str().is_empty()) {
        if !parent.exists() {
            std::fs::create_dir_all(parent)?;
            std::fs::set_permissions(parent, std::fs::Permissions::from_mode(0o700))?;
        }
    }
    match std::fs::symlink_metadata(socket) {
        Ok(m) if m.file_type().is_socket() => match UnixStream::connect(socket) {
            Ok(_) => Err(std::io::Error::other(
                "another process is listening on it (is another operator running?)",
            )),
            Err(_) => std::fs::remove_file(socket), // stale: nobody listens
        },
        Ok(_) => Err(std::io::Error::other("exists and is not a socket")),
        Err(_) => Ok(()),
    }
}

/// The debug endpoints as a listener service.
struct Debug(Arc<DebugState>);

impl Service for Debug {
    fn serve(&self, req: &Request) -> Reply {
        let started = Instant::now();
        let body = String::from_utf8_lossy(&req.body);
        let (status, content_type, text) = match route(req, &body, &self.0) {
            Ok((format, out)) => match render(&format, out) {
                Ok((ct, text)) => (200, ct, text),
                Err(Fail(code, msg)) => (code, "text/plain; charset=utf-8", msg),
            },
            Err(Fail(code, msg)) => (code, "text/plain; charset=utf-8", msg),
        };
        log::debug(
            "complete",
            &[
                ("http_method", &req.method),
                ("uri", &req.path),
                ("resp_status", &status.to_string()),
                ("resp_bytes_length", &text.len().to_string()),
                (
                    "resp_elapsed_ms",
                    &format!("{:.3}", started.elapsed().as_secs_f64() * 1e3),
                ),
            ],
        );
        Reply {
            status,
            content_type,
            body: text.into_bytes(),
        }
    }
}

/// Finds the handler for a request; returns the output format and the output.
fn route(req: &Request, body: &str, state: &DebugState) -> Result<(String, Output), Fail> {
    let (method, query) = (req.method.as_str(), req.query.as_str());
    let path = percent_decode(&req.path);
    let path = path
        .strip_prefix("/debug")
        .filter(|p| p.is_empty() || p.starts_with('/'))
        .unwrap_or(&path);
    let path = if path.is_empty() { "/" } else { path };
    if method == "POST" && path == "/config/set" {
        return config_set(body, state).map(|()| ("text".to_string(), Output::Text(String::new())));
    }
    if method == "POST" {
        return post_extra(path, query, state);
    }
    if method != "GET" {
        return Err(Fail(405, format!("method {method} not allowed\n")));
    }
    if path == "/" {
        return Ok((
            "text".into(),
            Output::Text("debug endpoint is alive".into()),
        ));
    }
    let (stem, format) = match path.rsplit_once('/').map(|(_, last)| last.rsplit_once('.')) {
        Some(Some((_, ext))) => (&path[..path.len() - ext.len() - 1], ext.to_string()),
        _ => (path, "text".to_string()),
    };
    let out = match stem {
        "/queue/main" => queue_main(state, &format),
        "/queue/list" => queue_list(state, &format, query_flag(query, "showEmpty")),
        "/hook/list" => Output::Value(Value::from((state.hooks)())),
        "/config/list" if format == "text" => {
            Output::Text(runtime::list_text(&state.config.list()))
        }
        "/config/list" => Output::Value(state.config.list()),
        _ => match path
            .strip_prefix("/hook/")
            .and_then(|p| p.rsplit_once("/snapshots"))
        {
            Some((hook, _)) => hook_snapshots(state, hook)?,
            None => match state.extra.as_ref().and_then(|f| f(stem, query, &format)) {
                Some(Ok(Value::String(text))) if format == "text" => Output::Text(text),
                Some(Ok(v)) => Output::Value(v),
                Some(Err(e)) => return Err(Fail(404, format!("{e}\n"))),
                None => return Err(Fail(404, "404 page not found\n".into())),
            },
        },
    };
    Ok((format, out))
}

/// A POST to the program's own routes (addon-operator's settings export): the
/// route sees the stem prefixed with `POST `, so no GET reaches it.
fn post_extra(path: &str, query: &str, state: &DebugState) -> Result<(String, Output), Fail> {
    let stem = format!("POST {path}");
    match state.extra.as_ref().and_then(|f| f(&stem, query, "json")) {
        Some(Ok(v)) => Ok(("json".into(), Output::Value(v))),
        Some(Err(e)) => Err(Fail(500, format!("{e}\n"))),
        None => Err(Fail(405, "method POST not allowed\n".into())),
    }
}

fn queue_main(state: &DebugState, format: &str) -> Output {
    let views = state.queue_views();
    let main = views
        .iter()
        .find(|q| q.name == "main")
        .cloned()
        .unwrap_or_default();
    match format {
        "text" => Output::Text(queues::queue_text(&main)),
        _ => Output::Value(queues::queue_json(&main)),
    }
}

fn queue_list(state: &DebugState, format: &str, show_empty: bool) -> Output {
    let views = state.queue_views();
    match format {
        "text" => Output::Text(queues::list_text(&views, show_empty)),
        _ => Output::Value(queues::list_json(&views, show_empty)),
    }
}

fn hook_snapshots(state: &DebugState, hook: &str) -> Result<Output, Fail> {
    if !(state.hooks)().iter().any(|h| h == hook) {
        return Err(Fail(400, format!("hook '{hook}' is not exist\n")));
    }
    (state.snapshots)(hook)
        .map(Output::Value)
        .ok_or_else(|| Fail(400, format!("hook '{hook}' is not exist\n")))
}

fn config_set(body: &str, state: &DebugState) -> Result<(), Fail> {
    let form = parse_form(body);
    let get = |k: &str| {
        form.iter()
            .find(|(n, _)| n == k)
            .map(|(_, v)| v.as_str())
            .unwrap_or("")
    };
    let duration = match get("duration") {
        "" => None,
        d => Some(go_duration(d).map_err(|e| Fail(400, format!("parse duration {d:?}: {e}\n")))?),
    };
    state
        .config
        .set(get("name"), get("value"), duration)
        .map_err(|runtime::BadRequest(m)| Fail(400, format!("{m}\n")))
}

/// Formats an output as text, json or yaml: (content type, body).
fn render(format: &str, out: Output) -> Result<(&'static str, String), Fail> {
    let json = |v: &Value| {
        serde_json::to_string(v)
            .map(|s| s + "\n")
            .map_err(|e| Fail(500, e.to_string()))
    };
    match (format, out) {
        ("text", Output::Text(t)) => Ok(("text/plain; charset=utf-8", t)),
        ("text", Output::Value(v)) => Ok(("text/plain; charset=utf-8", json(&v)?)),
        ("json", Output::Value(v)) => Ok(("application/json", json(&v)?)),
        ("yaml", Output::Value(v)) => serde_yaml::to_string(&v)
            .map(|y| ("application/yaml", y))
            .map_err(|e| Fail(500, e.to_string())),
        ("json" | "yaml", Output::Text(t)) => Ok(("text/plain; charset=utf-8", t)),
        (other, _) => Err(Fail(
            400,
            format!("unknown output format {other:?}: text, json or yaml\n"),
        )),
    }
}

fn query_flag(query: &str, name: &str) -> bool {
    parse_form(query)
        .iter()
        .any(|(k, v)| k == name && crate::flags::parse_bool(v) == Some(true))
}

/// `a=1&b=x%20y` into pairs.
fn parse_form(text: &str) -> Vec<(String, String)> {
    text.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (
                percent_decode(&k.replace('+', " ")),
                percent_decode(&v.replace('+', " ")),
            )
        })
        .collect()
}

/// Decodes `%XX` escapes; invalid escapes are kept as they are.
pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(b)) => {
                out.push(b);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
