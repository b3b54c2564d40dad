//! Writing binding contexts: the JSON array in `$BINDING_CONTEXT_PATH`, streamed
//! straight into the file. Objects and filter results are already JSON text in
//! their [`Item`]s (keys sorted, as flant writes them), so they are copied, never
//! parsed back or built into one big value: a Synchronization of 10,000 objects
//! costs the file's bytes, not a tree of them. Keys of every context object come
//! out sorted, which is what serde_json's map gives the same context as a value.

use super::{BindingContext, BindingType, Item, Packed, Payload, Snapshots, render_v0};
use serde_json::Value;
use std::io::{self, Write};

/// Writes the context file's content: a JSON array plus a newline.
pub(crate) fn write_file(
    w: &mut dyn Write,
    contexts: &[BindingContext],
    v0: bool,
    snapshots: &Snapshots,
) -> io::Result<()> {
    w.write_all(b"[")?;
    for (i, ctx) in contexts.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        if v0 {
            serde_json::to_writer(&mut *w, &render_v0(ctx))?;
        } else {
            write_v1(w, ctx, snapshots)?;
        }
    }
    w.write_all(b"]\n")
}

/// One value of a context object, borrowed from the context or the snapshots.
enum Part<'a> {
    Str(&'a str),
    /// JSON text written as it is.
    Raw(&'a str),
    /// An object's JSON text, its shared pieces put back.
    Packed(&'a Packed),
    Value(&'a Value),
    Items(&'a [Item]),
    Snapshots(&'a [String], &'a Snapshots),
}

/// Writes one context in the v1 shape (spec §3, `MapV1`).
fn write_v1(w: &mut dyn Write, ctx: &BindingContext, snapshots: &Snapshots) -> io::Result<()> {
    let mut parts: Vec<(&str, Part)> = vec![("binding", Part::Str(&ctx.binding))];
    if ctx.binding_type != BindingType::OnStartup {
        // addon-operator's lifecycle contexts always carry `snapshots` (`{}` when
        // the hook has no kubernetes bindings), as flant's do.
        if !ctx.snapshot_names.is_empty() || matches!(ctx.payload, Payload::Lifecycle) {
            parts.push(("snapshots", Part::Snapshots(&ctx.snapshot_names, snapshots)));
        }
        payload_parts(ctx, snapshots, &mut parts);
    }
    parts.sort_by(|a, b| a.0.cmp(b.0));
    write_object(w, &parts)
}

/// The payload's keys. A group hides the event; webhooks ignore the group.
fn payload_parts<'a>(
    ctx: &'a BindingContext,
    snapshots: &'a Snapshots,
    parts: &mut Vec<(&'static str, Part<'a>)>,
) {
    match &ctx.payload {
        Payload::Validating { review } => {
            parts.push(("type", Part::Str("Validating")));
            parts.push(("review", Part::Value(review)));
        }
        Payload::Mutating { review } => {
            parts.push(("type", Part::Str("Mutating")));
            parts.push(("review", Part::Value(review)));
        }
        Payload::Conversion {
            from_version,
            to_version,
            review,
        } => {
            parts.push(("type", Part::Str("Conversion")));
            parts.push(("fromVersion", Part::Str(from_version)));
            parts.push(("toVersion", Part::Str(to_version)));
            parts.push(("review", Part::Value(review)));
        }
        _ if ctx.group.is_some() => {
            parts.push(("type", Part::Str("Group")));
            parts.push(("groupName", Part::Str(ctx.group.as_deref().unwrap_or(""))));
        }
        Payload::Schedule => parts.push(("type", Part::Str("Schedule"))),
        Payload::OnStartup | Payload::Lifecycle => {}
        Payload::Synchronization => {
            parts.push(("type", Part::Str("Synchronization")));
            let objects = ctx.kube_binding.and_then(|b| snapshots.sync.get(&b));
            parts.push(("objects", Part::Items(objects.map_or(&[], Vec::as_slice))));
        }
        Payload::Event { watch_event, item } => {
            parts.push(("type", Part::Str("Event")));
            parts.push(("watchEvent", Part::Str(watch_event.as_str())));
            match item {
                Some(item) => {
                    if let Some(o) = &item.object {
                        parts.push(("object", Part::Packed(o)));
                    }
                    if let Some(f) = item.filter_result() {
                        parts.push(("filterResult", Part::Raw(f)));
                    }
                }
                None => parts.push(("object", Part::Raw("null"))),
            }
        }
    }
}

fn write_object(w: &mut dyn Write, parts: &[(&str, Part)]) -> io::Result<()> {
    w.write_all(b"{")?;
    for (i, (key, part)) in parts.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        serde_json::to_writer(&mut *w, key)?;
        w.write_all(b":")?;
        write_part(w, part)?;
    }
    w.write_all(b"}")
}

fn write_part(w: &mut dyn Write, part: &Part) -> io::Result<()> {
    match part {
        Part::Str(s) => Ok(serde_json::to_writer(&mut *w, s)?),
        Part::Raw(text) => w.write_all(text.as_bytes()),
        Part::Packed(text) => text.write_to(w),
        Part::Value(v) => Ok(serde_json::to_writer(&mut *w, v)?),
        Part::Items(items) => write_items(w, items),
        Part::Snapshots(names, snapshots) => {
            let mut names: Vec<&String> = names.iter().collect();
            names.sort();
            names.dedup();
            w.write_all(b"{")?;
            for (i, name) in names.into_iter().enumerate() {
                if i > 0 {
                    w.write_all(b",")?;
                }
                serde_json::to_writer(&mut *w, name)?;
                w.write_all(b":")?;
                let items = snapshots.named.get(name).map_or(&[][..], Vec::as_slice);
                write_items(w, items)?;
            }
            w.write_all(b"}")
        }
    }
}

/// `[{"filterResult":…,"object":…},…]`, each key only when the item has it.
fn write_items(w: &mut dyn Write, items: &[Item]) -> io::Result<()> {
    w.write_all(b"[")?;
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            w.write_all(b",")?;
        }
        w.write_all(b"{")?;
        if let Some(f) = item.filter_result() {
            w.write_all(b"\"filterResult\":")?;
            w.write_all(f.as_bytes())?;
        }
        if let Some(o) = &item.object {
            if item.filter_result().is_some() {
                w.write_all(b",")?;
            }
            w.write_all(b"\"object\":")?;
            o.write_to(w)?;
        }
        w.write_all(b"}")?;
    }
    w.write_all(b"]")
}
