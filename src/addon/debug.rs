//! addon-operator's debug endpoints on the debug socket (flant's routes):
//! `/global/{list,values,config,patches}` and `/module/list`,
//! `/module/<name>/{values,config,patches}` (`?global=true` wraps a module's section
//! with the global one). The debug server is bound before the engine's state exists,
//! so the routes read it through a slot filled at spawn.

use super::state::Shared;
use super::values::to_json;
use crate::debug::ExtraRoutes;
use serde_json::{Value, json};
use std::sync::{Arc, OnceLock};

/// The engine's state, once spawned.
pub type Slot = Arc<OnceLock<Arc<Shared>>>;

/// The routes, reading `slot`.
pub fn routes(slot: Slot) -> ExtraRoutes {
    Arc::new(move |stem: &str, query: &str| {
        let shared = slot.get();
        let global = query.split('&').any(|kv| kv == "global=true");
        match stem {
            "/global/list" | "/global/values" | "/global/config" | "/global/patches"
            | "/module/list" => Some(
                shared
                    .ok_or("starting up".to_string())
                    .and_then(|s| global_route(s, stem)),
            ),
            _ => {
                let rest = stem.strip_prefix("/module/")?;
                let (module, what) = rest.rsplit_once('/')?;
                if !matches!(what, "values" | "config" | "patches") {
                    return None;
                }
                let shared = match shared {
                    Some(s) => s,
                    None => return Some(Err("starting up".into())),
                };
                Some(module_route(shared, module, what, global))
            }
        }
    })
}

fn global_route(shared: &Shared, stem: &str) -> Result<Value, String> {
    let st = shared.lock();
    Ok(match stem {
        "/global/list" => {
            let mut names: Vec<&str> = shared
                .hooks_of(super::modules::Owner::Global)
                .map(|(_, h)| h.name.as_str())
                .collect();
            names.sort();
            json!({ "globalHooks": names })
        }
        "/global/values" => st.global.values()?,
        "/global/config" => st.global.config_values(),
        "/global/patches" => to_json(&st.global.patches),
        _ => {
            let mut names = st.enabled_names(&shared.layout, None);
            names.sort();
            json!({ "enabledModules": names })
        }
    })
}

fn module_route(shared: &Shared, module: &str, what: &str, global: bool) -> Result<Value, String> {
    let m = shared
        .layout
        .modules
        .iter()
        .position(|m| m.name == module)
        .ok_or_else(|| format!("module not found: {module}"))?;
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
