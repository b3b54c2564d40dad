//! Logging: one line per record on stdout, as text, JSON or colored text
//! (`LOG_TYPE`), filtered by a level that can change at runtime (`LOG_LEVEL`, the
//! debug socket), with or without the time (`LOG_NO_TIME`).
//!
//! Any thread may log; a line is formatted first and written with one `write_all`
//! under the stdout lock, so lines from different threads never interleave. Hook
//! output arrives here through [`HookOutput`], which the executor feeds line by line.

use crate::flags::LogFlags;
use serde_json::{Map, Value};
use std::io::Write;
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU8, Ordering};

/// Severity, ordered from most to least verbose.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Debug = 1,
    Info = 2,
    Warn = 3,
    Error = 4,
}

impl Level {
    /// Parses flant's level names (trace counts as debug, fatal as error).
    pub(crate) fn parse(name: &str) -> Option<Level> {
        match name.to_ascii_lowercase().as_str() {
            "trace" | "debug" => Some(Level::Debug),
            "info" => Some(Level::Info),
            "warn" | "warning" => Some(Level::Warn),
            "error" | "fatal" => Some(Level::Error),
            _ => None,
        }
    }
    fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Format {
    Text,
    Json,
    Color,
}

struct Settings {
    format: Format,
    no_time: bool,
    proxy_hook_json: bool,
}

static SETTINGS: OnceLock<Settings> = OnceLock::new();
static LEVEL: AtomicU8 = AtomicU8::new(Level::Info as u8);

/// Sets the format and level once at startup; later calls change only the level.
pub(crate) fn init(flags: &LogFlags) {
    let format = match flags.log_type.as_str() {
        "json" => Format::Json,
        "color" => Format::Color,
        _ => Format::Text,
    };
    let _ = SETTINGS.set(Settings {
        format,
        no_time: flags.no_time,
        proxy_hook_json: flags.proxy_hook_json,
    });
    set_level(Level::parse(&flags.level).unwrap_or(Level::Info));
}

/// Changes the level at runtime.
pub fn set_level(level: Level) {
    LEVEL.store(level as u8, Ordering::Relaxed);
}

fn enabled(level: Level) -> bool {
    level as u8 >= LEVEL.load(Ordering::Relaxed)
}

fn settings() -> &'static Settings {
    SETTINGS.get_or_init(|| Settings {
        format: Format::Text,
        no_time: false,
        proxy_hook_json: false,
    })
}

/// Logs `msg` with string fields.
pub(crate) fn log(level: Level, msg: &str, fields: &[(&str, &str)]) {
    if !enabled(level) {
        return;
    }
    let map: Map<String, Value> = fields
        .iter()
        .map(|(k, v)| (k.to_string(), Value::from(*v)))
        .collect();
    write_line(&format_record(level, msg, &map));
}

pub(crate) fn debug(msg: &str, fields: &[(&str, &str)]) {
    log(Level::Debug, msg, fields)
}
pub(crate) fn info(msg: &str, fields: &[(&str, &str)]) {
    log(Level::Info, msg, fields)
}
pub(crate) fn warn(msg: &str, fields: &[(&str, &str)]) {
    log(Level::Warn, msg, fields)
}
pub(crate) fn error(msg: &str, fields: &[(&str, &str)]) {
    log(Level::Error, msg, fields)
}

fn write_line(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(line.as_bytes());
    let _ = out.flush();
}

fn now() -> String {
    chrono::Utc::now().format("%Y-%m-%dT%H:%M:%SZ").to_string()
}

/// Formats one record, ending with a newline. JSON keys: level, msg, the fields
/// sorted by key, then time (flant's order).
fn format_record(level: Level, msg: &str, fields: &Map<String, Value>) -> String {
    let s = settings();
    match s.format {
        Format::Json => {
            let mut line = format!(
                "{{\"level\":\"{}\",\"msg\":{}",
                level.name(),
                Value::from(msg)
            );
            for (k, v) in fields {
                line.push_str(&format!(",{}:{}", Value::from(k.as_str()), v));
            }
            if !s.no_time {
                line.push_str(&format!(",\"time\":\"{}\"", now()));
            }
            line.push_str("}\n");
            line
        }
        Format::Text | Format::Color => {
            let mut line = String::new();
            if !s.no_time {
                line.push_str(&now());
                line.push(' ');
            }
            let tag = format!("{:<5}", level.name().to_uppercase());
            if s.format == Format::Color {
                let color = match level {
                    Level::Debug => "36",
                    Level::Info => "32",
                    Level::Warn => "33",
                    Level::Error => "31",
                };
                line.push_str(&format!("\x1b[{color}m{tag}\x1b[0m {msg}"));
            } else {
                line.push_str(&format!("{tag} {msg}"));
            }
            for (k, v) in fields {
                match v {
                    Value::String(text) if !text.contains(' ') && !text.is_empty() => {
                        line.push_str(&format!(" {k}={text}"))
                    }
                    other => line.push_str(&format!(" {k}={other}")),
                }
            }
            line.push('\n');
            line
        }
    }
}

/// Longest hook output line logged whole; longer ones are cut and marked.
const MAX_LINE: usize = 10_000;
/// Largest multi-line JSON record a hook may write before it is logged as raw lines.
const MAX_JSON_BUFFER: usize = 64 * 1024;

/// Turns one hook output stream into log records carrying the run's labels
/// (hook, binding, queue, task, event) and `output=stdout|stderr`.
pub(crate) struct HookOutput {
    labels: Map<String, Value>,
    pending_json: String,
}

impl HookOutput {
    /// `labels` are added to every record; `stream` is "stdout" or "stderr".
    pub(crate) fn new(labels: &[(&str, &str)], stream: &str) -> HookOutput {
        let mut map: Map<String, Value> = labels
            .iter()
            .map(|(k, v)| (k.to_string(), Value::from(*v)))
            .collect();
        map.insert("output".into(), Value::from(stream));
        HookOutput {
            labels: map,
            pending_json: String::new(),
        }
    }

    /// Handles one line (without its newline). A line starting with `{` may begin a
    /// JSON record spanning several lines; it is buffered until it parses.
    pub(crate) fn line(&mut self, raw: &str) {
        let line = raw.trim();
        if line.is_empty() && self.pending_json.is_empty() {
            return;
        }
        if !self.pending_json.is_empty() || line.starts_with('{') {
            if !self.pending_json.is_empty() {
                self.pending_json.push('\n');
            }
            self.pending_json.push_str(line);
            match serde_json::from_str::<Value>(&self.pending_json) {
                Ok(Value::Object(obj)) => {
                    self.pending_json.clear();
                    return self.json_record(obj);
                }
                Err(e) if e.is_eof() && self.pending_json.len() < MAX_JSON_BUFFER => return,
                _ => return self.flush(),
            }
        }
        self.plain(line);
    }

    /// Logs whatever is still buffered as plain lines (end of stream or bad JSON).
    pub(crate) fn flush(&mut self) {
        let pending = std::mem::take(&mut self.pending_json);
        for l in pending.lines() {
            self.plain(l);
        }
    }

    fn plain(&self, line: &str) {
        if line.is_empty() || !enabled(Level::Info) {
            return;
        }
        let msg = truncate(line);
        write_line(&format_record(Level::Info, &msg, &self.labels));
    }

    /// A JSON object from the hook: merged into our record, never double-encoded.
    fn json_record(&self, mut obj: Map<String, Value>) {
        let level = obj
            .get("level")
            .and_then(Value::as_str)
            .and_then(Level::parse)
            .unwrap_or(Level::Info);
        if !enabled(level) {
            return;
        }
        if settings().proxy_hook_json {
            // Proxy mode: the hook's own JSON line, with our labels added.
            for (k, v) in &self.labels {
                obj.entry(k.clone()).or_insert_with(|| v.clone());
            }
            let mut text = Value::Object(obj).to_string();
            text.push('\n');
            return write_line(&text);
        }
        let msg = obj
            .remove("msg")
            .and_then(|m| m.as_str().map(String::from))
            .unwrap_or_else(|| "hook result".into());
        obj.remove("level");
        obj.remove("time");
        let mut fields = self.labels.clone();
        let extra: Map<String, Value> = obj
            .into_iter()
            .map(|(k, v)| (format!("hook_{k}"), v))
            .collect();
        if Value::Object(extra.clone()).to_string().len() > MAX_LINE {
            let text = truncate(&Value::Object(extra).to_string());
            fields.insert("hook".into(), serde_json::json!({ "truncated": text }));
        } else {
            fields.extend(extra);
        }
        fields.insert("proxyJsonLog".into(), Value::Bool(true));
        write_line(&format_record(level, &msg, &fields));
    }
}

fn truncate(line: &str) -> String {
    if line.len() <= MAX_LINE {
        return line.to_string();
    }
    let mut cut = MAX_LINE;
    while !line.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}:truncated", &line[..cut])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_flant_names() {
        assert_eq!(Level::parse("TRACE"), Some(Level::Debug));
        assert_eq!(Level::parse("fatal"), Some(Level::Error));
        assert_eq!(Level::parse("loud"), None);
    }

    #[test]
    fn truncates_long_lines_on_char_boundaries() {
        let long = "é".repeat(6000);
        let cut = truncate(&long);
        assert!(cut.ends_with(":truncated"));
        assert!(cut.len() <= MAX_LINE + ":truncated".len());
    }
}
