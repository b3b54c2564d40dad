//! Binding contexts: what a hook is told about why it runs, written as a JSON array
//! to the file in `$BINDING_CONTEXT_PATH`.
//!
//! A [`BindingContext`] is created when an event becomes a task; snapshots are filled
//! in only when the hook starts (by the queue thread), so they are current at
//! execution time. [`write_file`] streams flant's exact shapes (spec §3): key
//! presence and precedence, v0 shapes for v0 hooks, keys sorted.

mod item;
mod packed;
mod write;

pub(crate) use item::{Item, item_key};
pub(crate) use packed::{Builder, Packed};
pub(crate) use write::write_file;

use super::config::WatchEventType;
use serde_json::{Value, json};
use std::collections::BTreeMap;

/// Which kind of binding produced a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BindingType {
    OnStartup,
    Schedule,
    Kubernetes,
    Validating,
    Mutating,
    Conversion,
    /// addon-operator's lifecycle bindings.
    BeforeAll,
    AfterAll,
    BeforeHelm,
    AfterHelm,
    BeforeDeleteHelm,
    AfterDeleteHelm,
}

impl BindingType {
    /// flant's name for the binding type (log field `event`, task descriptions).
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            BindingType::OnStartup => "onStartup",
            BindingType::Schedule => "schedule",
            BindingType::Kubernetes => "kubernetes",
            BindingType::Validating => "kubernetesValidating",
            BindingType::Mutating => "kubernetesMutating",
            BindingType::Conversion => "kubernetesCustomResourceConversion",
            BindingType::BeforeAll => "beforeAll",
            BindingType::AfterAll => "afterAll",
            BindingType::BeforeHelm => "beforeHelm",
            BindingType::AfterHelm => "afterHelm",
            BindingType::BeforeDeleteHelm => "beforeDeleteHelm",
            BindingType::AfterDeleteHelm => "afterDeleteHelm",
        }
    }
}

/// The event-specific part of a context.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Payload {
    OnStartup,
    /// addon-operator's beforeAll ... afterDeleteHelm: only the binding and snapshots.
    Lifecycle,
    Schedule,
    /// Existing objects of the binding (`kube_binding`), read from its snapshot
    /// when the hook starts ([`Snapshots::sync`]).
    Synchronization,
    /// One watch event: the object at the time of the event (absent for synthetic
    /// events).
    Event {
        watch_event: WatchEventType,
        item: Option<Item>,
    },
    Validating {
        review: Value,
    },
    Mutating {
        review: Value,
    },
    Conversion {
        from_version: String,
        to_version: String,
        review: Value,
    },
}

/// One binding context, before rendering.
#[derive(Debug, Clone, PartialEq)]
pub struct BindingContext {
    pub(crate) binding: String,
    pub(crate) binding_type: BindingType,
    pub(crate) group: Option<String>,
    /// Binding names whose snapshots this context carries (includeSnapshotsFrom,
    /// already merged with the group's kubernetes bindings).
    pub(crate) snapshot_names: Vec<String>,
    /// Index of the kubernetes binding in the hook's config, for kubernetes contexts.
    pub(crate) kube_binding: Option<usize>,
    pub(crate) payload: Payload,
}

impl BindingContext {
    /// `{"binding":"onStartup"}`.
    pub(crate) fn on_startup() -> BindingContext {
        BindingContext {
            binding: "onStartup".into(),
            binding_type: BindingType::OnStartup,
            group: None,
            snapshot_names: Vec::new(),
            kube_binding: None,
            payload: Payload::OnStartup,
        }
    }

    /// An addon-operator lifecycle run (`beforeHelm`, ...): `{"binding": type}` plus
    /// the snapshots of the hook's kubernetes bindings (`snapshot_names`).
    pub(crate) fn lifecycle(
        binding_type: BindingType,
        snapshot_names: Vec<String>,
    ) -> BindingContext {
        BindingContext {
            binding: binding_type.as_str().into(),
            binding_type,
            group: None,
            snapshot_names,
            kube_binding: None,
            payload: Payload::Lifecycle,
        }
    }

    /// A schedule firing of `binding`.
    pub fn schedule(
        binding: &str,
        group: Option<String>,
        snapshot_names: Vec<String>,
    ) -> BindingContext {
        BindingContext {
            binding: binding.into(),
            binding_type: BindingType::Schedule,
            group,
            snapshot_names,
            kube_binding: None,
            payload: Payload::Schedule,
        }
    }
}

/// What a hook run reads from the snapshots when it starts.
#[derive(Debug, Default)]
pub struct Snapshots {
    /// Synchronization objects, by kubernetes binding index.
    pub(crate) sync: BTreeMap<usize, Vec<Item>>,
    /// `includeSnapshotsFrom` / group snapshots, by binding name.
    pub(crate) named: BTreeMap<String, Vec<Item>>,
}

/// Renders a context in the v0 shape: `{"binding"}`, plus the resource fields for
/// kubernetes events.
pub(crate) fn render_v0(ctx: &BindingContext) -> Value {
    let mut map = json!({ "binding": ctx.binding });
    if let Payload::Event { watch_event, item } = &ctx.payload {
        let event = match watch_event {
            WatchEventType::Added => "add",
            WatchEventType::Modified => "update",
            WatchEventType::Deleted => "delete",
        };
        map["resourceEvent"] = event.into();
        // The item knows namespace and name; kind is read off the object's top
        // level. Nothing is parsed back.
        if let Some((item, object)) = item.as_ref().and_then(|i| Some((i, i.object.as_ref()?))) {
            let (namespace, name) = item.namespace_and_name();
            let kind =
                crate::canonical::top_level_str(&object.to_text(), "kind").unwrap_or_default();
            map["resourceNamespace"] = namespace.into();
            map["resourceKind"] = kind.into();
            map["resourceName"] = name.into();
        }
    }
    map
}

#[cfg(test)]
/// The binding context file's content as bytes (tests and small contexts).
pub(crate) fn render_file(contexts: &[BindingContext], v0: bool, snapshots: &Snapshots) -> Vec<u8> {
    let mut bytes = Vec::new();
    // Writing to a Vec cannot fail.
    let _ = write_file(&mut bytes, contexts, v0, snapshots);
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn kube(
        binding: &str,
        payload: Payload,
        group: Option<&str>,
        snaps: &[&str],
    ) -> BindingContext {
        BindingContext {
            binding: binding.into(),
            binding_type: BindingType::Kubernetes,
            group: group.map(String::from),
            snapshot_names: snaps.iter().map(|s| s.to_string()).collect(),
            kube_binding: Some(0),
            payload,
        }
    }

    fn text(ctx: &BindingContext, snapshots: &Snapshots) -> String {
        let file = String::from_utf8(render_file(std::slice::from_ref(ctx), false, snapshots));
        let file = file.expect("utf8");
        file.trim_end()
            .strip_prefix('[')
            .and_then(|t| t.strip_suffix(']'))
            .expect("one context")
            .to_string()
    }

    /// An item whose object text is `object` (already compact and sorted).
    fn item(object: &str, filter: Option<&str>) -> Item {
        Item::new(("ns", "n"), filter, Some(Arc::from(object)), 0)
    }

    #[test]
    fn on_startup_is_only_the_binding() {
        assert_eq!(
            String::from_utf8(render_file(
                &[BindingContext::on_startup()],
                false,
                &Snapshots::default()
            ))
            .expect("utf8"),
            "[{\"binding\":\"onStartup\"}]\n"
        );
    }

    #[test]
    fn schedule_with_and_without_snapshots() {
        let plain = BindingContext::schedule("incremental", None, vec![]);
        assert_eq!(
            text(&plain, &Snapshots::default()),
            r#"{"binding":"incremental","type":"Schedule"}"#
        );
        let with =
            BindingContext::schedule("periodic", None, vec!["pods".into(), "missing".into()]);
        let mut snaps = Snapshots::default();
        snaps
            .named
            .insert("pods".into(), vec![item(r#"{"kind":"Pod"}"#, None)]);
        assert_eq!(
            text(&with, &snaps),
            r#"{"binding":"periodic","snapshots":{"missing":[],"pods":[{"object":{"kind":"Pod"}}]},"type":"Schedule"}"#
        );
    }

    /// flant's lifecycle contexts (beforeAll … afterDeleteHelm) always carry
    /// `snapshots`, `{}` for a hook without kubernetes bindings (found by the
    /// compatibility suite against flant's addon-operator v1.5.0).
    #[test]
    fn lifecycle_contexts_carry_snapshots_even_when_empty() {
        for t in [BindingType::BeforeAll, BindingType::AfterDeleteHelm] {
            let ctx = BindingContext::lifecycle(t, vec![]);
            assert_eq!(
                text(&ctx, &Snapshots::default()),
                format!(r#"{{"binding":"{}","snapshots":{{}}}}"#, t.as_str())
            );
        }
    }

    #[test]
    fn group_wins_over_event_and_schedule() {
        let ev = kube(
            "monitor-pods",
            Payload::Event {
                watch_event: WatchEventType::Added,
                item: Some(item("{}", None)),
            },
            Some("pods"),
            &["monitor-pods"],
        );
        assert_eq!(
            text(&ev, &Snapshots::default()),
            r#"{"binding":"monitor-pods","groupName":"pods","snapshots":{"monitor-pods":[]},"type":"Group"}"#
        );
        let sched = BindingContext::schedule("every", Some("pods".into()), vec![]);
        assert_eq!(
            text(&sched, &Snapshots::default()),
            r#"{"binding":"every","groupName":"pods","type":"Group"}"#
        );
    }

    #[test]
    fn synchronization_and_event_shapes() {
        let sync = kube("kubernetes", Payload::Synchronization, None, &[]);
        assert_eq!(
            text(&sync, &Snapshots::default()),
            r#"{"binding":"kubernetes","objects":[],"type":"Synchronization"}"#
        );
        let ev = kube(
            "pods",
            Payload::Event {
                watch_event: WatchEventType::Modified,
                item: Some(item(r#"{"kind":"Pod"}"#, Some(r#"{"a":1}"#))),
            },
            None,
            &[],
        );
        assert_eq!(
            text(&ev, &Snapshots::default()),
            r#"{"binding":"pods","filterResult":{"a":1},"object":{"kind":"Pod"},"type":"Event","watchEvent":"Modified"}"#
        );
        let synthetic = kube(
            "pods",
            Payload::Event {
                watch_event: WatchEventType::Added,
                item: None,
            },
            None,
            &[],
        );
        assert_eq!(
            text(&synthetic, &Snapshots::default()),
            r#"{"binding":"pods","object":null,"type":"Event","watchEvent":"Added"}"#
        );
    }

    #[test]
    fn webhook_shapes_ignore_group() {
        let mut v = kube(
            "v.example.com",
            Payload::Validating {
                review: json!({"request":{"uid":"1"}}),
            },
            Some("g"),
            &[],
        );
        v.binding_type = BindingType::Validating;
        assert_eq!(
            text(&v, &Snapshots::default()),
            r#"{"binding":"v.example.com","review":{"request":{"uid":"1"}},"type":"Validating"}"#
        );
        let c = kube(
            "conv",
            Payload::Conversion {
                from_version: "a/v1".into(),
                to_version: "a/v2".into(),
                review: json!({}),
            },
            None,
            &[],
        );
        assert_eq!(
            text(&c, &Snapshots::default()),
            r#"{"binding":"conv","fromVersion":"a/v1","review":{},"toVersion":"a/v2","type":"Conversion"}"#
        );
    }

    #[test]
    fn v0_shapes() {
        let obj = r#"{"kind":"Pod","metadata":{"name":"p","namespace":"ns"}}"#;
        let ev = kube(
            "onKubernetesEvent",
            Payload::Event {
                watch_event: WatchEventType::Deleted,
                item: Some(Item::new(("ns", "p"), None, Some(obj.into()), 0)),
            },
            None,
            &[],
        );
        assert_eq!(
            render_v0(&ev).to_string(),
            r#"{"binding":"onKubernetesEvent","resourceEvent":"delete","resourceKind":"Pod","resourceName":"p","resourceNamespace":"ns"}"#
        );
        assert_eq!(
            render_v0(&BindingContext::schedule("s", None, vec![])).to_string(),
            r#"{"binding":"s"}"#
        );
    }

    /// A v0 context's resource fields come from the item, not from parsing the
    /// object's text again.
    #[test]
    fn v0_context_parses_nothing() {
        let obj =
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"v0-parse","namespace":"ns"}}"#;
        let count = crate::parse_count::Counter::new("v0-parse");
        let ev = kube(
            "b",
            Payload::Event {
                watch_event: WatchEventType::Added,
                item: Some(Item::new(("ns", "v0-parse"), None, Some(obj.into()), 1)),
            },
            None,
            &[],
        );
        assert_eq!(
            render_v0(&ev).to_string(),
            r#"{"binding":"b","resourceEvent":"add","resourceKind":"Pod","resourceName":"v0-parse","resourceNamespace":"ns"}"#
        );
        assert_eq!(count.get(), 0);
    }

    /// The streamed file equals the same context built as one value the slow way
    /// (what the operator wrote before streaming), for a large Synchronization with
    /// snapshots, odd strings and numbers.
    #[test]
    fn streamed_synchronization_matches_the_value_built_reference() {
        let objects: Vec<Value> = (0..10_000)
            .map(|i| {
                json!({"apiVersion": "v1", "kind": "Pod",
                    "metadata": {"name": format!("p-{i}"), "namespace": "ns\u{e9}\"q",
                        "labels": {"z": "1", "a": i}},
                    "spec": {"n": 1.5e3, "list": [1, "two", null, {"b": true}]}})
            })
            .collect();
        let items: Vec<Item> = objects
            .iter()
            .map(|o| {
                let filter = o["metadata"]["labels"].to_string();
                Item::new(
                    ("ns", "x"),
                    Some(&filter),
                    Some(Arc::from(o.to_string())),
                    0,
                )
            })
            .collect();
        let mut ctx = kube("pods", Payload::Synchronization, None, &["pods", "cms"]);
        ctx.kube_binding = Some(3);
        let mut snaps = Snapshots::default();
        snaps.sync.insert(3, items.clone());
        snaps.named.insert("pods".into(), items[..2].to_vec());
        let as_values = |objs: &[Value]| -> Vec<Value> {
            objs.iter()
                .map(|o| json!({"object": o, "filterResult": o["metadata"]["labels"]}))
                .collect()
        };
        let reference = json!([{
            "binding": "pods",
            "type": "Synchronization",
            "objects": as_values(&objects),
            "snapshots": {"pods": as_values(&objects[..2]), "cms": []},
        }]);
        let streamed = render_file(&[ctx], false, &snaps);
        assert_eq!(
            String::from_utf8(streamed).expect("utf8"),
            format!("{reference}\n")
        );
    }
}
