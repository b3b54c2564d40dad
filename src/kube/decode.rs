//! Decoding watch lines, initial events and LIST pages into cache updates and
//! consumer events: the per-event hot path of every reflector thread. Each object
//! is parsed once, here, into its canonical text and metadata ([`Object`]); what
//! the consumer gets is that, never text to parse again. Pure functions over a
//! [`Store`]; public so benchmarks can drive the exact decoder from memory.

use super::cache::{Item, Store, Stored};
use super::reflector::{Event, Object};
use serde_json::Value;
use serde_json::value::RawValue;
use vendor_k8s_types::{EventType, ListMeta, Status};

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
    let decoded = decode_line(line, |json| {
        Object::decode(json, None).map_err(|m| format!("bad watch object: {m}"))
    });
    match decoded {
        Err(m) => Applied::Failed(m),
        Ok(Line::Other(EventType::Error, json)) => {
            watch_error(json).map_or_else(Applied::Failed, Applied::Expired)
        }
        Ok(Line::Other(t, json)) => match t {
            EventType::Bookmark => Applied::Bookmark(resource_version(json)),
            other => Applied::Failed(format!("watch event {other:?} without an object")),
        },
        Ok(Line::Object(t, object)) => {
            let rv = object.meta.resource_version.clone();
            let stored = match store.tracks() {
                false => Stored::Untracked,
                true => {
                    let key = format!("{}/{}", object.meta.namespace, object.meta.name);
                    match t {
                        EventType::Deleted => {
                            store.remove(&key);
                            Stored::Untracked
                        }
                        _ => store.put(key, &object),
                    }
                }
            };
            let event = match (t, stored) {
                (EventType::Deleted, _) => Some(Event::Deleted(object)),
                (_, Stored::Same) => None,
                (EventType::Added, Stored::New | Stored::Untracked) => Some(Event::Added(object)),
                _ => Some(Event::Modified(object)),
            };
            Applied::Object { event, rv }
        }
    }
}

/// The type meta (apiVersion, kind) list items come without.
pub(crate) type TypeMeta<'a> = Option<(&'a str, &'a str)>;

/// Decodes one object of a list (a LIST page's item or an initial event) into a
/// cache item: parsed once, into the canonical text and metadata the consumer
/// gets as it is, with `type_meta` filled in where the object lacks it.
fn item_of(text: &str, type_meta: TypeMeta<'_>) -> Result<Item, String> {
    let object = Object::decode(text, type_meta).map_err(|e| format!("bad list item: {e}"))?;
    let key = format!("{}/{}", object.meta.namespace, object.meta.name);
    Ok(Item { key, object })
}

/// A decoded LIST page: its items and the list metadata (resourceVersion and the
/// continue token).
pub(crate) fn list_page(
    body: &[u8],
    type_meta: TypeMeta<'_>,
) -> Result<(Vec<Item>, ListMeta), String> {
    let text = std::str::from_utf8(body).map_err(|e| format!("bad list: {e}"))?;
    let parts = crate::canonical::split_list(text).map_err(|e| e.to_string())?;
    let meta = match parts.metadata {
        Some(m) => serde_json::from_str(m).map_err(|e| format!("bad list metadata: {e}"))?,
        None => ListMeta::default(),
    };
    let items = parts
        .items
        .into_iter()
        .map(|t| item_of(t, type_meta))
        .collect::<Result<_, _>>()?;
    Ok((items, meta))
}

/// An ERROR event's Status: `Ok(message)` when it means 410 Gone / Expired (the
/// watch must relist), else `Err` with the code, reason and message.
fn watch_error(json: &str) -> Result<String, String> {
    let st: Status = serde_json::from_str(json).unwrap_or_default();
    if st.code == 410 || st.reason == "Expired" || st.reason == "Gone" {
        return Ok(st.message);
    }
    Err(format!(
        "watch ERROR {} {}: {}",
        st.code, st.reason, st.message
    ))
}

/// One decoded watch line: an object event with its object decoded by the
/// caller's decoder, or another type (BOOKMARK, ERROR) with its object's text.
enum Line<'a, O> {
    Object(EventType, O),
    Other(EventType, &'a str),
}

/// Decodes a watch line, its object with `decode`. Fast path: API servers write
/// exactly `{"type":"T","object":{...}}`, so for ADDED, MODIFIED and DELETED the
/// object is the text between those fixed parts, handed to `decode` as it is:
/// `decode` parses it whole and refuses trailing text, so that one pass both
/// validates and decodes it. When the slice is not one object (fields after
/// `object`, another key order) the general decoder reads the line.
fn decode_line<O>(
    line: &[u8],
    decode: impl Fn(&str) -> Result<O, String>,
) -> Result<Line<'_, O>, String> {
    if let Some((t, obj)) = fast_split(line) {
        if let Ok(o) = decode(obj) {
            return Ok(Line::Object(t, o));
        }
    }
    let (t, json) = decode_event(line)?;
    match t {
        EventType::Added | EventType::Modified | EventType::Deleted => {
            decode(json).map(|o| Line::Object(t, o))
        }
        t => Ok(Line::Other(t, json)),
    }
}

/// The type and object text of an object event written in the API server's exact
/// form; `None` for anything else. Nothing is validated here.
fn fast_split(line: &[u8]) -> Option<(EventType, &str)> {
    let text = std::str::from_utf8(line).ok()?.trim_end();
    let rest = text.strip_prefix("{\"type\":\"")?;
    let (t, obj) = rest.split_once("\",\"object\":")?;
    let t = match t {
        "ADDED" => EventType::Added,
        "MODIFIED" => EventType::Modified,
        "DELETED" => EventType::Deleted,
        _ => return None,
    };
    Some((t, obj.strip_suffix('}')?))
}

/// Splits a watch line into its type and the object's JSON text, borrowed from the
/// line, with a general JSON decoder (any key order, extra fields).
fn decode_event(line: &[u8]) -> Result<(EventType, &str), String> {
    let text = std::str::from_utf8(line)
        .map_err(|e| format!("bad watch event: {e}"))?
        .trim_end();
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
pub(crate) fn initial_line(line: &[u8], type_meta: TypeMeta<'_>) -> Initial {
    if line.iter().all(u8::is_ascii_whitespace) {
        return Initial::Skip;
    }
    match decode_line(line, |text| item_of(text, type_meta)) {
        Err(m) => Initial::Failed(m),
        Ok(Line::Object(EventType::Added, item)) => Initial::Item(item),
        Ok(Line::Object(other, _)) => Initial::Failed(format!(
            "{other:?} event before the initial-events-end bookmark"
        )),
        Ok(Line::Other(EventType::Bookmark, json)) => match initial_end(json) {
            Some(rv) => Initial::End(rv),
            None => Initial::Skip,
        },
        Ok(Line::Other(EventType::Error, json)) => {
            watch_error(json).map_or_else(Initial::Failed, Initial::Expired)
        }
        Ok(Line::Other(other, _)) => Initial::Failed(format!(
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
        match initial_line(added, None) {
            Initial::Item(i) => {
                assert_eq!(
                    (i.key.as_str(), i.object.meta.resource_version.as_str()),
                    ("n/a", "5")
                )
            }
            other => panic!("{other:?}"),
        }
        let plain = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"6"}}}"#;
        assert!(matches!(initial_line(plain, None), Initial::Skip));
        let end = br#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"7","annotations":{"k8s.io/initial-events-end":"true"}}}}"#;
        assert!(matches!(initial_line(end, None), Initial::End(rv) if rv == "7"));
        let gone = br#"{"type":"ERROR","object":{"kind":"Status","code":410,"reason":"Expired","message":"too old"}}"#;
        assert!(matches!(initial_line(gone, None), Initial::Expired(_)));
        let early = br#"{"type":"MODIFIED","object":{"metadata":{"name":"a"}}}"#;
        assert!(matches!(initial_line(early, None), Initial::Failed(_)));
    }

    /// A LIST page is split and each item decoded once, into canonical text with
    /// the type meta filled in; the page is accepted or refused as serde_json
    /// would read it as a list.
    #[test]
    fn list_pages_decode_like_serde_json_reads_them() {
        let page = br#"{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"9","continue":"c1"},"items":[{"metadata":{"name":"a","namespace":"n","resourceVersion":"5","uid":"u"},"data":{"k":"]}"}},{"metadata":{"namespace":"n","name":"b"}}]}"#;
        let (items, meta) = list_page(page, Some(("v1", "ConfigMap"))).expect("page");
        assert_eq!(
            (meta.resource_version.as_str(), meta.continue_token.as_str()),
            ("9", "c1")
        );
        let keys: Vec<&str> = items.iter().map(|i| i.key.as_str()).collect();
        assert_eq!(keys, ["n/a", "n/b"]);
        assert_eq!(
            &*items[0].object.json,
            r#"{"apiVersion":"v1","data":{"k":"]}"},"kind":"ConfigMap","metadata":{"name":"a","namespace":"n","resourceVersion":"5","uid":"u"}}"#
        );
        for (page, items) in [
            (r#"{"items":null,"metadata":{}}"#, Some(0)),
            (r#"{"items":[],"extra":[1,{"x":null}]}"#, Some(0)),
            (
                r#" { "metadata" : {"resourceVersion":"1"} , "items" : [ {"a":1} ] } "#,
                Some(1),
            ),
            (r#"{"items":[{"a":1} {"b":2}]}"#, None),
            (r#"{"items":[{"a":01}]}"#, None),
            (r#"{"items":[{"a":1}],"x":tru}"#, None),
            (r#"{"items":[{"a":1}]"#, None),
            (r#"{"items":[{"a":1}]}x"#, None),
            (r#"{"items":[1]}"#, None),
            (r#"{"items":[{"a":"x}]}"#, None),
            (r#"{"metadata":{"resourceVersion":7},"items":[]}"#, None),
        ] {
            let ours = list_page(page.as_bytes(), None).map(|(i, _)| i.len()).ok();
            assert_eq!(ours, items, "{page}");
            let theirs = serde_json::from_str::<
                vendor_k8s_types::ObjectList<serde_json::Map<String, Value>>,
            >(page);
            assert_eq!(
                theirs.map(|l| l.items.len()).ok(),
                items,
                "serde_json on {page}"
            );
        }
    }

    #[test]
    fn decode_fast_and_general_paths_agree() {
        let obj =
            r#"{"metadata":{"name":"a","namespace":"n","resourceVersion":"5"},"data":{"k":"}"}}"#;
        let fast = format!("{{\"type\":\"MODIFIED\",\"object\":{obj}}}\n");
        let (t, json) = decode_event(fast.as_bytes()).unwrap();
        assert_eq!(t, EventType::Modified);
        assert_eq!(json, obj);
        assert_eq!(
            fast_split(fast.as_bytes()),
            Some((EventType::Modified, obj))
        );
        // The fast slice is handed on unchecked; the object decoder refuses it when
        // it is not one object, and the general decoder reads the line instead.
        let tricky = format!("{{\"type\":\"ADDED\",\"object\":{obj},\"x\":{{\"y\":1}}}}");
        let sliced = fast_split(tricky.as_bytes()).expect("fast slice");
        assert_ne!(sliced.1, obj);
        let canonical = |text: &str| {
            Object::decode(text, None)
                .map(|o| o.json.to_string())
                .map_err(|e| e.to_string())
        };
        assert!(canonical(sliced.1).is_err());
        match decode_line(tricky.as_bytes(), canonical) {
            Ok(Line::Object(EventType::Added, json)) => {
                assert_eq!(json, canonical(obj).unwrap());
            }
            _ => panic!("tricky line not decoded"),
        }
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
