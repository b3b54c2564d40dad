//! Runtime parameters that `config set` may change while the operator runs. Only
//! `log.level` exists (as in flant): its default is `--log-level`; setting `debug`
//! without a duration sets it for 30 minutes; a temporary value goes back to the
//! default once it expires (checked by the debug server thread every second).

use crate::log;
use serde_json::{Value, json};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

/// How long `log.level=debug` lasts when no duration is given.
const DEBUG_DEFAULT_DURATION: Duration = Duration::from_secs(30 * 60);
const LOG_LEVEL: &str = "log.level";

#[derive(Debug)]
struct Param {
    default: String,
    value: String,
    expire_at: Option<SystemTime>,
}

/// The runtime parameters, shared by the debug server threads.
#[derive(Debug)]
pub(crate) struct RuntimeConfig {
    log_level: Mutex<Param>,
}

/// A rejected `config set`: the message is sent back with status 400.
#[derive(Debug, PartialEq)]
pub(crate) struct BadRequest(pub String);

impl RuntimeConfig {
    /// The parameters with `--log-level` as the level's default.
    pub(crate) fn new(log_level: &str) -> RuntimeConfig {
        RuntimeConfig {
            log_level: Mutex::new(Param {
                default: log_level.to_lowercase(),
                value: log_level.to_lowercase(),
                expire_at: None,
            }),
        }
    }

    /// Sets `name` to `value`, for `duration` if given.
    pub(crate) fn set(
        &self,
        name: &str,
        value: &str,
        duration: Option<Duration>,
    ) -> Result<(), BadRequest> {
        if name.is_empty() {
            return Err(BadRequest("'name' parameter is required".into()));
        }
        if name != LOG_LEVEL {
            return Err(BadRequest(format!("unknown runtime parameter {name:?}")));
        }
        if value.is_empty() {
            return Err(BadRequest("'value' parameter is required".into()));
        }
        let level = log::Level::parse(value).ok_or_else(|| {
            BadRequest(format!(
                "'value' parameter is invalid: unknown log level {value:?} (trace, debug, info, warn, error, fatal)"
            ))
        })?;
        let value = value.to_lowercase();
        let duration = duration.or((value == "debug").then_some(DEBUG_DEFAULT_DURATION));
        let mut p = self.log_level.lock().unwrap_or_else(|e| e.into_inner());
        p.expire_at = duration.map(|d| SystemTime::now() + d);
        log::set_level(level);
        log::info(
            "runtime parameter changed",
            &[("name", LOG_LEVEL), ("value", &value)],
        );
        p.value = value;
        Ok(())
    }

    /// Puts expired temporary values back to their defaults.
    pub(crate) fn expire(&self, now: SystemTime) {
        let mut p = self.log_level.lock().unwrap_or_else(|e| e.into_inner());
        if p.expire_at.is_some_and(|at| at <= now) {
            p.expire_at = None;
            p.value = p.default.clone();
            log::set_level(log::Level::parse(&p.value).unwrap_or(log::Level::Info));
            log::info(
                "runtime parameter expired",
                &[("name", LOG_LEVEL), ("value", &p.value)],
            );
        }
    }

    /// `config list` as JSON: `[{name, description, default, value, expireAt?}]`.
    pub(crate) fn list(&self) -> Value {
        let p = self.log_level.lock().unwrap_or_else(|e| e.into_inner());
        let mut item = json!({
            "name": LOG_LEVEL,
            "description": "Global log level",
            "default": p.default,
            "value": p.value,
        });
        if let (Some(at), Some(obj)) = (p.expire_at, item.as_object_mut()) {
            obj.insert("expireAt".into(), Value::from(rfc3339(at)));
        }
        json!([item])
    }
}

/// `config list` as flant's text table.
pub(crate) fn list_text(list: &Value) -> String {
    let row = |a: &str, b: &str, c: &str, d: &str| format!("{a:<30} {b:<20} {c:<20} {d:<40}\n");
    let mut out = row("NAME", "VALUE", "EXPIRE AT", "DESCRIPTION");
    for p in list.as_array().into_iter().flatten() {
        let f = |k: &str| p.get(k).and_then(Value::as_str).unwrap_or("").to_string();
        out.push_str(&row(
            &f("name"),
            &f("value"),
            &f("expireAt"),
            &f("description"),
        ));
    }
    out
}

fn rfc3339(t: SystemTime) -> String {
    chrono::DateTime::<chrono::Utc>::from(t).to_rfc3339_opts(chrono::SecondsFormat::Secs, true)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn set_validates_and_expires() {
        let c = RuntimeConfig::new("INFO");
        assert_eq!(
            c.set("", "x", None),
            Err(BadRequest("'name' parameter is required".into()))
        );
        assert_eq!(
            c.set("log.color", "x", None),
            Err(BadRequest("unknown runtime parameter \"log.color\"".into()))
        );
        assert_eq!(
            c.set("log.level", "", None),
            Err(BadRequest("'value' parameter is required".into()))
        );
        assert!(c.set("log.level", "loud", None).is_err());
        c.set("log.level", "debug", None).expect("set");
        let list = c.list();
        assert_eq!(list[0]["value"], "debug");
        assert_eq!(list[0]["default"], "info");
        assert!(
            list[0]["expireAt"]
                .as_str()
                .is_some_and(|s| s.ends_with('Z'))
        );
        c.expire(SystemTime::now() + Duration::from_secs(31 * 60));
        assert_eq!(c.list()[0]["value"], "info");
        assert!(c.list()[0].get("expireAt").is_none());
        assert!(list_text(&c.list()).starts_with("NAME                           VALUE"));
    }
}
