//! Binding contexts: what a hook is told about why it runs, written as a JSON array
//! to the file in `$BINDING_CONTEXT_PATH`.
//!
//! A [`BindingContext`] is created when an event becomes a task; snapshots are filled
//! in only when the hook starts (by the queue thread), so they are current at
//! execution time. [`render`] produces flant's exact shapes (spec §3): key presence
//! and precedence, v0 shapes for v0 hooks, keys sorted.

use super::config::WatchEventType;
use serde_json::{Map, Value, json};
use std::collections::BTreeMap;

/// Which kind of binding produced a context.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BindingType {
    OnStartup,
    Schedule,
    Kubernetes,
    Validating,
    Mutating,
    Conversion,
}

impl BindingType {
    /// flant's name for the binding type (log field `event`, task descriptions).
    pub fn as_str(self) -> &'static str {
        match self {
            BindingType::OnStartup => "onStartup",
            BindingType::Schedule => "schedule",
            BindingType::Kubernetes => "kubernetes",
            BindingType::Validating => "kubernetesValidating",
            BindingType::Mutating => "kubernetesMutating",
            BindingType::Conversion => "kubernetesCustomResourceConversion",
        }
    }
}

/// The event-specific part of a context.
#[derive(Debug, Clone, PartialEq)]
pub enum Payload {
    OnStartup,
    Schedule,
    /// Existing objects at startup; items are `{object?, filterResult?}`.
    Synchronization {
        objects: Vec<Value>,
    },
    /// One watch event; `item` is `{object?, filterResult?}` (absent for synthetic events).
    Event {
        watch_event: WatchEventType,
        item: Option<Value>,
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
    pub binding: String,
    pub binding_type: BindingType,
    pub group: Option<String>,
    /// Binding names whose snapshots this context carries (includeSnapshotsFrom,
    /// already merged with the group's kubernetes bindings).
    pub snapshot_names: Vec<String>,
    /// Index of the kubernetes binding in the hook's config, for kubernetes contexts.
    pub kube_binding: Option<usize>,
    pub payload: Payload,
}

impl BindingContext {
    /// `{"binding":"onStartup"}`.
    pub fn on_startup() -> BindingContext {
        BindingContext {
            binding: "onStartup".into(),
            binding_type: BindingType::OnStartup,
            group: None,
            snapshot_names: Vec::new(),
            kube_binding: None,
            payload: Payload::OnStartup,
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

/// Snapshot items per binding name, read when the hook starts.
pub type Snapshots = BTreeMap<String, Vec<Value>>;

/// Renders a context in the v1 shape (spec §3, `MapV1`), taking snapshots from `snapshots`.
pub fn render_v1(ctx: &BindingContext, snapshots: &Snapshots) -> Value {
    let mut map = Map::new();
    map.insert("binding".into(), Value::from(ctx.binding.as_str()));
    if ctx.binding_type == BindingType::OnStartup {
        return Value::Object(map);
    }
    if !ctx.snapshot_names.is_empty() {
        let snaps: Map<String, Value> = ctx
            .snapshot_names
            .iter()
            .map(|name| {
                (
                    name.clone(),
                    Value::Array(snapshots.get(name).cloned().unwrap_or_default()),
                )
            })
            .collect();
        map.insert("snapshots".into(), Value::Object(snaps));
    }
    let set = |map: &mut Map<String, Value>, k: &str, v: Value| {
        map.insert(k.to_string(), v);
    };
    match &ctx.payload {
        Payload::Validating { review } => {
            set(&mut map, "type", "Validating".into());
            set(&mut map, "review", review.clone());
        }
        Payload::Mutating { review } => {
            set(&mut map, "type", "Mutating".into());
            set(&mut map, "review", review.clone());
        }
        Payload::Conversion {
            from_version,
            to_version,
            review,
        } => {
            set(&mut map, "type", "Conversion".into());
            set(&mut map, "fromVersion", from_version.as_str().into());
            set(&mut map, "toVersion", to_version.as_str().into());
            set(&mut map, "review", review.clone());
        }
        _ if ctx.group.is_some() => {
            set(&mut map, "type", "Group".into());
            set(
                &mut map,
                "groupName",
                ctx.group.clone().unwrap_or_default().into(),
            );
        }
        Payload::Schedule => set(&mut map, "type", "Schedule".into()),
        Payload::OnStartup => {}
        Payload::Synchronization { objects } => {
            set(&mut map, "type", "Synchronization".into());
            set(&mut map, "objects", Value::Array(objects.clone()));
        }
        Payload::Event { watch_event, item } => {
            set(&mut map, "type", "Event".into());
            set(&mut map, "watchEvent", format!("{watch_event:?}").into());
            match item {
                Some(Value::Object(fields)) => map.extend(fields.clone()),
                _ => set(&mut map, "object", Value::Null),
            }
        }
    }
    Value::Object(map)
}

/// Renders a context in the v0 shape: `{"binding"}`, plus the resource fields for
/// kubernetes events.
pub fn render_v0(ctx: &BindingContext) -> Value {
    let mut map = json!({ "binding": ctx.binding });
    if let Payload::Event { watch_event, item } = &ctx.payload {
        let event = match watch_event {
            WatchEventType::Added => "add",
            WatchEventType::Modified => "update",
            WatchEventType::Deleted => "delete",
        };
        map["resourceEvent"] = event.into();
        if let Some(obj) = item.as_ref().and_then(|i| i.get("object")) {
            let meta = &obj["metadata"];
            map["resourceNamespace"] = meta["namespace"].as_str().unwrap_or_default().into();
            map["resourceKind"] = obj["kind"].as_str().unwrap_or_default().into();
            map["resourceName"] = meta["name"].as_str().unwrap_or_default().into();
        }
    }
    map
}

/// The binding context file's content: a JSON array plus a newline, keys sorted.
pub fn render_file(contexts: &[BindingContext], v0: bool, snapshots: &Snapshots) -> Vec<u8> {
    let array: Vec<Value> = contexts
        .iter()
        .map(|c| {
            if v0 {
                render_v0(c)
            } else {
                render_v1(c, snapshots)
            }
        })
        .collect();
    let mut bytes = serde_json::to_vec(&array).unwrap_or_else(|_| b"[]".to_vec());
    bytes.push(b'\n');
    bytes
}

#[cfg(test)]
mod tests {
    use super::*;

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
        render_v1(ctx, snapshots).to_string()
    }

    #[test]
    fn on_startup_is_only_the_binding() {
        assert_eq!(
            String::from_utf8(render_file(
                &[BindingContext::on_startup()],
                false,
                &Snapshots::new()
            ))
            .expect("utf8"),
            "[{\"binding\":\"onStartup\"}]\n"
        );
    }

    #[test]
    fn schedule_with_and_without_snapshots() {
        let plain = BindingContext::schedule("incremental", None, vec![]);
        assert_eq!(
            text(&plain, &Snapshots::new()),
            r#"{"binding":"incremental","type":"Schedule"}"#
        );
        let with =
            BindingContext::schedule("periodic", None, vec!["pods".into(), "missing".into()]);
        let snaps = Snapshots::from([("pods".to_string(), vec![json!({"object":{"kind":"Pod"}})])]);
        assert_eq!(
            text(&with, &snaps),
            r#"{"binding":"periodic","snapshots":{"missing":[],"pods":[{"object":{"kind":"Pod"}}]},"type":"Schedule"}"#
        );
    }

    #[test]
    fn group_wins_over_event_and_schedule() {
        let ev = kube(
            "monitor-pods",
            Payload::Event {
                watch_event: WatchEventType::Added,
                item: Some(json!({"object":{}})),
            },
            Some("pods"),
            &["monitor-pods"],
        );
        assert_eq!(
            text(&ev, &Snapshots::new()),
            r#"{"binding":"monitor-pods","groupName":"pods","snapshots":{"monitor-pods":[]},"type":"Group"}"#
        );
        let sched = BindingContext::schedule("every", Some("pods".into()), vec![]);
        assert_eq!(
            text(&sched, &Snapshots::new()),
            r#"{"binding":"every","groupName":"pods","type":"Group"}"#
        );
    }

    #[test]
    fn synchronization_and_event_shapes() {
        let sync = kube(
            "kubernetes",
            Payload::Synchronization { objects: vec![] },
            None,
            &[],
        );
        assert_eq!(
            text(&sync, &Snapshots::new()),
            r#"{"binding":"kubernetes","objects":[],"type":"Synchronization"}"#
        );
        let item = json!({"object":{"kind":"Pod"},"filterResult":{"a":1}});
        let ev = kube(
            "pods",
            Payload::Event {
                watch_event: WatchEventType::Modified,
                item: Some(item),
            },
            None,
            &[],
        );
        assert_eq!(
            text(&ev, &Snapshots::new()),
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
            text(&synthetic, &Snapshots::new()),
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
            text(&v, &Snapshots::new()),
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
            text(&c, &Snapshots::new()),
            r#"{"binding":"conv","fromVersion":"a/v1","review":{},"toVersion":"a/v2","type":"Conversion"}"#
        );
    }

    #[test]
    fn v0_shapes() {
        let obj = json!({"object":{"kind":"Pod","metadata":{"name":"p","namespace":"ns"}}});
        let ev = kube(
            "onKubernetesEvent",
            Payload::Event {
                watch_event: WatchEventType::Deleted,
                item: Some(obj),
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
}
