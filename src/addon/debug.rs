//! addon-operator's debug endpoints on the debug socket (flant's routes):
//! `/global/{list,values,config,patches,snapshots}` and `/module/list` (the enabled
//! modules, then every module with its order, lifecycle state and last error),
//! `/module/<name>/{values,config,patches,snapshots,render}` (`?global=true` wraps a
//! module's section with the global one; `render` is the manifests helm would
//! install with the current values); `POST /module/settings/export?to=resources|configmap`
//! moves the settings between the ConfigMap and ModuleSettings objects
//! (`settings/export.rs`). The debug server is bound before the engine's state exists,
//! so the routes read it through a slot filled at spawn.

use super::state::Shared;
use crate::addon::config::values::ValuesError;
use crate::addon::config::values::to_json;
use crate::addon::modules::Owner;
use crate::addon::release::drift::watcher::DriftReport;
use crate::addon::release::helm_error::HelmError;
use crate::addon::release::resources::WatchedModules;
use crate::debug::ExtraRoutes;
use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};

/// The engine's state, once spawned.
pub(crate) type Slot = Arc<OnceLock<Arc<Shared>>>;

/// The routes, reading `slot` (and `watched`, the resource monitor's view, and
/// `drift`, the drift watcher's).
pub(crate) fn routes(slot: Slot, watched: WatchedModules, drift: DriftReport) -> ExtraRoutes {
    Arc::new(move |stem: &str, query: &str, format: &str| {
        let answer = route(&slot, &watched, &drift, (stem, query, format))?;
        Some(answer.map_err(|e| e.to_string()))
    })
}

/// The answer of the route `stem` with `query` in `format`; `None` for a stem
/// that is no route of addon-operator's.
fn route(
    slot: &Slot,
    watched: &WatchedModules,
    drift: &DriftReport,
    (stem, query, format): (&str, &str, &str),
) -> Option<Result<Value, DebugError>> {
    let shared = slot.get();
    let global = query.split('&').any(|kv| kv == "global=true");
    match stem {
        "POST /module/settings/export" => Some(
            shared
                .ok_or(DebugError::StartingUp)
                .and_then(|s| settings_export(s, query)),
        ),
        "/module/resource-monitor" => Some(
            shared
                .ok_or(DebugError::StartingUp)
                .and_then(|s| resource_monitor(s, watched, query_module(query))),
        ),
        "/module/drift" => Some(
            shared
                .ok_or(DebugError::StartingUp)
                .and_then(|s| drift_route(s, drift, query_module(query))),
        ),
        "/module/list" if format == "text" => Some(
            shared
                .ok_or(DebugError::StartingUp)
                .and_then(|s| global_route(s, stem))
                .map(|list| Value::String(module_list_text(&list))),
        ),
        "/global/list" | "/global/values" | "/global/config" | "/global/patches"
        | "/global/snapshots" | "/module/list" => Some(
            shared
                .ok_or(DebugError::StartingUp)
                .and_then(|s| global_route(s, stem)),
        ),
        _ => {
            let rest = stem.strip_prefix("/module/")?;
            let (module, what) = rest.rsplit_once('/')?;
            if !matches!(
                what,
                "values" | "config" | "patches" | "snapshots" | "render"
            ) {
                return None;
            }
            let shared = match shared {
                Some(s) => s,
                None => return Some(Err(DebugError::StartingUp)),
            };
            Some(module_route(shared, module, what, global))
        }
    }
}

/// `module settings export resources|configmap` (`?to=`).
fn settings_export(shared: &Shared, query: &str) -> Result<Value, DebugError> {
    use crate::addon::config::settings::export::{Direction, export};
    let to = query
        .split('&')
        .find_map(|kv| kv.strip_prefix("to="))
        .and_then(Direction::parse)
        .ok_or(DebugError::ExportTo)?;
    export(shared, to).map_err(DebugError::Export)
}

fn global_route(shared: &Shared, stem: &str) -> Result<Value, DebugError> {
    if stem == "/global/snapshots" {
        return Ok(snapshots_of(shared, Owner::Global));
    }
    let st = shared.lock();
    Ok(match stem {
        "/global/list" => {
            let mut names: Vec<String> = shared
                .hooks_of(Owner::Global)
                .map(|(_, h)| h.name)
                .collect();
            names.sort();
            json!({ "globalHooks": names })
        }
        "/global/values" => st.global.values()?,
        "/global/config" => st.global.config_values(),
        "/global/patches" => to_json(&st.global.patches),
        _ => {
            let mut names = st.enabled_names(&shared.layout(), None);
            names.sort();
            let modules: Vec<Value> = (shared.layout().modules.iter().enumerate())
                .filter_map(|(m, module)| {
                    let view = st.lifecycle.view(m)?;
                    let mut entry = json!({
                        "name": module.name,
                        "order": module.order,
                        "state": view.state,
                    });
                    if let Some(e) = view.last_error {
                        entry["lastError"] = Value::String(e);
                    }
                    Some(entry)
                })
                .collect();
            let mut out = json!({ "enabledModules": names, "modules": modules });
            if let Some(e) = st.lifecycle.enabled_error() {
                out["enabledError"] = Value::String(e.to_string());
            }
            out
        }
    })
}

fn module_route(
    shared: &Shared,
    module: &str,
    what: &str,
    global: bool,
) -> Result<Value, DebugError> {
    let m = shared
        .layout()
        .modules
        .iter()
        .position(|m| m.name == module)
        .ok_or_else(|| DebugError::UnknownModule(module.to_string()))?;
    match what {
        "snapshots" => return Ok(snapshots_of(shared, Owner::Module(m))),
        "render" => return render(shared, m).map(Value::String),
        _ => {}
    }
    let st = shared.lock();
    let scope = &st.modules[m].scope;
    let (section, global_section) = match what {
        "patches" => return Ok(to_json(&scope.patches)),
        "config" => (scope.config_values(), st.global.config_values()),
        _ => (scope.values()?, st.global.values()?),
    };
    if !global {
        return Ok(section);
    }
    let mut out = serde_json::Map::new();
    out.insert("global".into(), global_section);
    out.insert(scope.key.clone(), section);
    Ok(Value::Object(out))
}

/// `{hook: {binding: {"snapshot": [...]}}}` of every kubernetes binding of `owner`'s hooks.
fn snapshots_of(shared: &Shared, owner: Owner) -> Value {
    let mut out = serde_json::Map::new();
    for (i, hook) in shared.hooks_of(owner) {
        let mut bindings = serde_json::Map::new();
        for (bi, b) in hook.config.kubernetes.iter().enumerate() {
            let items: Vec<Value> = shared
                .store
                .as_ref()
                .map(|s| {
                    s.snapshot(i, bi)
                        .iter()
                        .map(|item| item.to_json())
                        .collect()
                })
                .unwrap_or_default();
            bindings
                .entry(b.name.clone())
                .or_insert_with(|| json!({ "snapshot": items }));
        }
        out.insert(hook.name.clone(), Value::Object(bindings));
    }
    Value::Object(out)
}

/// The manifests `helm template` renders with the module's current values; `null`
/// for a module without a chart.
fn render(shared: &Shared, m: usize) -> Result<String, DebugError> {
    let module = &shared.layout().modules[m];
    if !module.has_chart {
        return Ok("null\n".into());
    }
    let values = {
        let st = shared.lock();
        let enabled = st.enabled_names(&shared.layout(), None);
        st.module_files(m, enabled).map_err(DebugError::Values)?.1
    };
    let text = serde_json::to_vec(&values).map_err(DebugError::Encode)?;
    let stem = format!("{}.module-render-values.yaml", module.name);
    let file = crate::executor::ChildFile::create(&shared.tmp_dir, &stem, &text)
        .map_err(DebugError::TempFile)?;
    let rendered = shared.helm.render(&module.name, &module.chart, file.path());
    rendered.map_err(DebugError::Helm)
}

/// `module=<name>` of a query (percent-decoded), if any.
fn query_module(query: &str) -> Option<String> {
    query.split('&').find_map(|kv| {
        let v = kv.strip_prefix("module=")?;
        let bytes = v.as_bytes();
        let mut out = Vec::with_capacity(bytes.len());
        let mut i = 0;
        while i < bytes.len() {
            let hex = (bytes[i] == b'%')
                .then(|| v.get(i + 1..i + 3))
                .flatten()
                .and_then(|h| u8::from_str_radix(h, 16).ok());
            match hex {
                Some(b) => {
                    out.push(b);
                    i += 3;
                }
                None => {
                    out.push(bytes[i]);
                    i += 1;
                }
            }
        }
        Some(String::from_utf8_lossy(&out).into_owned())
    })
}

/// `module list -o text`: the enabled modules, then one line per module (order,
/// name, state, last error), columns aligned.
fn module_list_text(list: &Value) -> String {
    let names: Vec<&str> = list["enabledModules"]
        .as_array()
        .map(|a| a.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut out = format!("Enabled modules: {}\n", names.join(", "));
    if let Some(e) = list["enabledError"].as_str() {
        out.push_str(&format!("Enabled state error: {e}\n"));
    }
    let rows: Vec<[String; 4]> = list["modules"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|m| {
                    let text = |k: &str| match &m[k] {
                        Value::String(s) => s.clone(),
                        Value::Null => String::new(),
                        v => v.to_string(),
                    };
                    [
                        text("order"),
                        text("name"),
                        text("state"),
                        text("lastError"),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    let header = ["ORDER", "MODULE", "STATE", "LAST ERROR"].map(String::from);
    let mut widths = [0usize; 4];
    for row in std::iter::once(&header).chain(&rows) {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    out.push('\n');
    for row in std::iter::once(&header).chain(&rows) {
        let line: Vec<String> = row
            .iter()
            .zip(widths)
            .map(|(cell, w)| format!("{cell:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// `{module: ["ns/Kind/name", ...]}` of what the resource monitor watches; a module
/// with a chart it does not watch (yet) says `"No monitor"`. `only` keeps one
/// module (an unknown name is an error; a disabled one an empty answer).
fn resource_monitor(
    shared: &Shared,
    watched: &WatchedModules,
    only: Option<String>,
) -> Result<Value, DebugError> {
    known_module(shared, only.as_deref())?;
    let watched = watched.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = serde_json::Map::new();
    let st = shared.lock();
    for &m in st.lifecycle.enabled_modules() {
        let module = &shared.layout().modules[m];
        if !module.has_chart || only.as_ref().is_some_and(|n| n != &module.name) {
            continue;
        }
        let view = match watched.get(&module.name) {
            Some(w) => Value::from(
                w.objects
                    .iter()
                    .map(|o| {
                        let ns = o.namespace.as_deref().unwrap_or(&shared.namespace);
                        format!("{ns}/{}/{}", o.kind, o.name)
                    })
                    .collect::<Vec<_>>(),
            ),
            None => Value::from("No monitor"),
        };
        out.insert(module.name.clone(), view);
    }
    Ok(Value::Object(out))
}

/// `{module: [{object, fields: [{path, want, live, setBy}], corrections, refused}]}`
/// of the drift found now; `only` keeps one module (an unknown name is an error).
fn drift_route(
    shared: &Shared,
    report: &DriftReport,
    only: Option<String>,
) -> Result<Value, DebugError> {
    known_module(shared, only.as_deref())?;
    let report = report.lock().unwrap_or_else(|p| p.into_inner());
    let mut out = serde_json::Map::new();
    for (module, objects) in report.iter() {
        if only.as_ref().is_some_and(|n| n != module) {
            continue;
        }
        let objects: Vec<Value> = objects
            .iter()
            .map(|o| {
                let fields: Vec<Value> = o
                    .differences
                    .iter()
                    .zip(&o.managers)
                    .map(|(d, by)| json!({"path": d.path, "want": d.want, "live": d.live, "setBy": by}))
                    .collect();
                json!({"object": o.object, "fields": fields, "corrections": o.corrections, "refused": o.refused})
            })
            .collect();
        out.insert(module.clone(), Value::from(objects));
    }
    Ok(Value::Object(out))
}

/// An error for a module name that no module has.
fn known_module(shared: &Shared, only: Option<&str>) -> Result<(), DebugError> {
    match only {
        Some(name) if !shared.layout().modules.iter().any(|m| m.name == name) => {
            Err(DebugError::UnknownModule(name.to_string()))
        }
        _ => Ok(()),
    }
}

/// Why a debug route could not answer.
#[derive(Debug)]
enum DebugError {
    /// The engine's state does not exist yet.
    StartingUp,
    /// `settings export` without `to=resources` or `to=configmap`.
    ExportTo,
    /// The settings could not be exported.
    Export(crate::addon::config::settings::SettingsError),
    UnknownModule(String),
    /// Values could not be computed (a stored patch no longer applies).
    Values(crate::addon::Error),
    Encode(serde_json::Error),
    /// The values file for `helm template` could not be written.
    TempFile(std::io::Error),
    Helm(HelmError),
}

impl std::fmt::Display for DebugError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DebugError::StartingUp => f.write_str("starting up"),
            DebugError::ExportTo => f.write_str("export to what? 'resources' or 'configmap'"),
            DebugError::Export(e) => e.fmt(f),
            DebugError::UnknownModule(name) => write!(f, "module not found: {name}"),
            DebugError::Values(e) => e.fmt(f),
            DebugError::Encode(e) => e.fmt(f),
            DebugError::TempFile(e) => e.fmt(f),
            DebugError::Helm(e) => e.fmt(f),
        }
    }
}

impl From<ValuesError> for DebugError {
    fn from(e: ValuesError) -> DebugError {
        DebugError::Values(e.into())
    }
}
