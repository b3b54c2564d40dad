//! Decoding watch lines and list items into cache updates and consumer events: the
//! per-event hot path of every reflector thread. Pure functions over a [`Store`];
//! public so benchmarks can drive the exact decoder from memory.

use super::cache::{Item, Store, Stored};
use super::reflector::{Event, Object};
use serde_json::Value;
use serde_json::value::RawValue;
use std::sync::Arc;
use vendor_k8s_types::{EventType, Status};

/// What one watch line did.
#[derive(Debug)]
pub enum Applied {
    /// An empty keep-alive line.
    Blank,
    /// An object event: the event to deliver (None for a duplicate delivery) and the
    /// object's resourceVersion, the new resume point.
    Object { event: Option<Event>, rv: String },
    /// A BOOKMARK, with its resourceVersion when it had one.
    Bookmark(Option<String>),
    /// An ERROR event meaning 410 Gone / Expired: relist.
    Expired(String),
    /// Undecodable line or another ERROR event.
    Failed(String),
}

/// Decodes one watch line and applies it to `store`.
pub fn apply_line(store: &mut Store, line: &[u8]) -> Applied {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Applied::Blank;
    }
    let (t, json) = match decode_event(line) {
        Ok(d) => d,
        Err(m) => return Applied::Failed(m),
    };
    match t {
        EventType::Error => {
            let st: Status = serde_json::from_str(json).unwrap_or_default();
            if st.code == 410 || st.reason == "Expired" || st.reason == "Gone" {
                return Applied::Expired(st.message);
            }
            Applied::Failed(format!(
                "watch ERROR {} {}: {}",
                st.code, st.reason, st.message
            ))
        }
        EventType::Bookmark => Applied::Bookmark(resource_version(json)),
        t => {
            let object = match Object::decode(json, None) {
                Ok(o) => o,
                Err(m) => return Applied::Failed(format!("bad watch object: {m}")),
            };
            let rv = object.meta.resource_version.clone();
            let key = format!("{}/{}", object.meta.namespace, object.meta.name);
            let event = if t == EventType::Deleted {
                store.remove(&key);
                Some(Event::Deleted(object))
            } else {
                match store.put(key, &rv, Arc::clone(&object.json)) {
                    Stored::Same => None,
                    Stored::Untracked if t == EventType::Added => Some(Event::Added(object)),
                    Stored::New if t == EventType::Added => Some(Event::Added(object)),
                    _ => Some(Event::Modified(object)),
                }
            };
            Applied::Object { event, rv }
        }
    }
}

/// Turns a raw list item into a cache item.
/// Only the metadata is decoded here: a list is held as JSON text while paging (far
/// smaller than `Value` trees) and parsed into values when delivered.
pub(crate) fn item_of(raw: &RawValue) -> Result<Item, String> {
    item_of_text(raw.get())
}

/// [`item_of`] for an object's JSON text.
fn item_of_text(text: &str) -> Result<Item, String> {
    let json: Arc<str> = Arc::from(text);
    #[derive(serde::Deserialize)]
    struct Obj {
        #[serde(default)]
        metadata: vendor_k8s_types::ObjectMeta,
    }
    let o: Obj = serde_json::from_str(&json).map_err(|e| format!("bad list item: {e}"))?;
    let key = format!("{}/{}", o.metadata.namespace, o.metadata.name);
    Ok(Item {
        key,
        rv: o.metadata.resource_version,
        json,
    })
}

/// Splits a watch line into its type and the object's JSON text, borrowed from the
/// line. Fast path: API servers write exactly `{"type":"T","object":{...}}`, so the
/// object is the text between those fixed parts when that text is one JSON value
/// (checked without building anything); anything else goes through a general
/// decoder.
fn decode_event(line: &[u8]) -> Result<(EventType, &str), String> {
    let text = std::str::from_utf8(line)
        .map_err(|e| format!("bad watch event: {e}"))?
        .trim_end();
    if let Some(rest) = text.strip_prefix("{\"type\":\"") {
        let fast = rest.split_once("\",\"object\":").and_then(|(t, obj)| {
            let t = match t {
                "ADDED" => EventType::Added,
                "MODIFIED" => EventType::Modified,
                "DELETED" => EventType::Deleted,
                _ => return None,
            };
            let obj = obj.strip_suffix('}')?;
            serde_json::from_str::<serde::de::IgnoredAny>(obj).ok()?;
            Some((t, obj))
        });
        if let Some(found) = fast {
            return Ok(found);
        }
    }
    #[derive(serde::Deserialize)]
    struct Raw<'a> {
        #[serde(rename = "type")]
        t: EventType,
        #[serde(borrow)]
        object: &'a RawValue,
    }
    let raw: Raw<'_> = serde_json::from_str(text).map_err(|e| format!("bad watch event: {e}"))?;
    Ok((raw.t, raw.object.get()))
}

/// One line of a watch-list stream before its initial-events-end bookmark.
#[derive(Debug)]
pub(crate) enum Initial {
    /// An object of the initial state.
    Item(Item),
    /// The bookmark that ends the initial state, with its resourceVersion.
    End(String),
    /// A keep-alive line or an ordinary bookmark.
    Skip,
    /// ERROR 410: start over.
    Expired(String),
    Failed(String),
}

/// Decodes one line of the initial part of a watch-list stream (`sendInitialEvents`):
/// ADDED events up to the BOOKMARK annotated `k8s.io/initial-events-end: "true"`.
pub(crate) fn initial_line(line: &[u8]) -> Initial {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Initial::Skip;
    }
    let (t, json) = match decode_event(line) {
        Ok(d) => d,
        Err(m) => return Initial::Failed(m),
    };
    match t {
        EventType::Added => item_of_text(json).map_or_else(Initial::Failed, Initial::Item),
        EventType::Bookmark => match initial_end(json) {
            Some(rv) => Initial::End(rv),
            None => Initial::Skip,
        },
        EventType::Error => {
            let st: Status = serde_json::from_str(json).unwrap_or_default();
            if st.code == 410 || st.reason == "Expired" || st.reason == "Gone" {
                return Initial::Expired(st.message);
            }
            Initial::Failed(format!(
                "watch ERROR {} {}: {}",
                st.code, st.reason, st.message
            ))
        }
        other => Initial::Failed(format!(
            "{other:?} event before the initial-events-end bookmark"
        )),
    }
}

/// The resourceVersion of a bookmark annotated as the end of the initial events.
fn initial_end(json: &str) -> Option<String> {
    let v: Value = serde_json::from_str(json).ok()?;
    let meta = &v["metadata"];
    if meta["annotations"]["k8s.io/initial-events-end"].as_str() != Some("true") {
        return None;
    }
    meta["resourceVersion"].as_str().map(String::from)
}

fn resource_version(json: &str) -> Option<String> {
    let v: Value = serde_json::from_str(json).ok()?;
    v["metadata"]["resourceVersion"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(String::from)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initial_events_end_at_the_annotated_bookmark() {
        let added = br#"{"type":"ADDED","object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"n","resourceVersion":"5"}}}"#;
        match initial_line(added) {
            Initial::Item(i) => assert_eq!((i.key.as_str(), i.rv.as_str()), ("n/a", "5")),
            other => panic!("{other:?}"),
        }
        let plain = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"6"}}}"#;
        assert!(matches!(initial_line(plain), Initial::Skip));
        let end = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        assert!(matches!(initial_line(end), Initial::End(rv) if rv == "7"));
        let gone = br#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}"#;
        assert!(matches!(initial_line(gone), Initial::Expired(_)));
        let early = br#"{"type":"MODIFIED","object":{"metadata":{"name":"a"}}}"#;
        assert!(matches!(initial_line(early), Initial::Failed(_)));
    }

    #[test]
    fn decode_fast_and_general_paths_agree() {
        let obj =
            r#"{"metadata":{"name":"a","namespace":"n","resourceVersion":"5"},"data":{"k":"}"}}"#;
        let fast = format!("{{\"type\":\"MODIFIED\",\"object\":{obj}}}\n");
        let (t, json) = decode_event(fast.as_bytes()).unwrap();
        assert_eq!(t, EventType::Modified);
        assert_eq!(json, obj);
        // Reordered keys, spaces, extra fields: the general decoder.
        let slow = format!("{{ \"object\": {obj}, \"type\": \"DELETED\", \"x\": 1 }}");
        let (t, json) = decode_event(slow.as_bytes()).unwrap();
        assert_eq!((t, json), (EventType::Deleted, obj));
        // A trailing field after object defeats the fast path's slice; still right.
        let tricky = format!("{{\"type\":\"ADDED\",\"object\":{obj},\"x\":{{}}}}");
        let (t, json) = decode_event(tricky.as_bytes()).unwrap();
        assert_eq!((t, json), (EventType::Added, obj));
        let (t, _) =
            decode_event(br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"9"}}}"#)
                .unwrap();
        assert_eq!(t, EventType::Bookmark);
        assert!(decode_event(b"{not json").is_err());
        assert!(decode_event(br#"{"type":"WHAT","object":{}}"#).is_err());
    }

    #[test]
    fn error_events_and_duplicates() {
        let mut st = Store::default();
        let expired = br#"{"type":"ERROR","object":{"kind":"Status","status":"Failure","message":"too old resource version: 5 (9)","reason":"Expired","code":410}}"#;
        assert!(
            matches!(apply_line(&mut st, expired), Applied::Expired(m) if m.contains("too old"))
        );
        let gone = br#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Gone"}}"#;
        assert!(matches!(apply_line(&mut st, gone), Applied::Expired(_)));
        let other = br#"{"type":"ERROR","object":{"kind":"Status","code":500,"reason":"InternalError","message":"etcd down"}}"#;
        assert!(
            matches!(apply_line(&mut st, other), Applied::Failed(m) if m.contains("500") && m.contains("etcd down"))
        );
        assert!(matches!(apply_line(&mut st, b"  \n"), Applied::Blank));
        let bm = br#"{"type":"BOOKMARK","object":{"kind":"ConfigMap","metadata":{"resourceVersion":"42"}}}"#;
        assert!(matches!(apply_line(&mut st, bm), Applied::Bookmark(Some(rv)) if rv == "42"));
        let add = br#"{"type":"ADDED","object":{"metadata":{"name":"a","namespace":"n","resourceVersion":"7"}}}"#;
        assert!(
            matches!(apply_line(&mut st, add), Applied::Object { event: Some(Event::Added(_)), rv } if rv == "7")
        );
        // The same delivery again is dropped but still advances nothing wrong.
        assert!(
            matches!(apply_line(&mut st, add), Applied::Object { event: None, rv } if rv == "7")
        );
        let del = br#"{"type":"DELETED","object":{"metadata":{"name":"a","namespace":"n","resourceVersion":"8"}}}"#;
        assert!(matches!(
            apply_line(&mut st, del),
            Applied::Object {
                event: Some(Event::Deleted(_)),
                ..
            }
        ));
        assert!(st.is_empty());
    }
}
