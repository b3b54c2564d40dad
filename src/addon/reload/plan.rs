//! What an addon-operator reload changes, decided before anything changes and
//! without threads or I/O: where each running module is in the layout just
//! discovered (and which modules are new), and the next hook table (the hooks
//! of removed and changed hooks retired, those of added and changed hooks
//! appended, as shell-operator's reload does in `reload/plan.rs`) with the
//! owner of every slot and the modules whose hooks changed.

use super::ReloadError;
use crate::addon::modules::{Layout, Module, Owner};
use crate::hook::Hook;
use crate::reload::diff::{Diff, diff};
use std::collections::{BTreeMap, BTreeSet};

/// Where the running modules are in a new layout.
#[derive(Debug, PartialEq)]
pub(super) struct Matched {
    /// By running index: its index in the new layout (`None`: gone).
    pub(super) found: Vec<Option<usize>>,
    /// New-layout indices of the modules the running layout has not, in the
    /// new layout's order; they get the running indices after the last one.
    pub(super) added: Vec<usize>,
}

impl Matched {
    /// The running index of each module of the new layout.
    pub(super) fn running_index(&self, new_len: usize) -> Vec<usize> {
        let mut index = vec![usize::MAX; new_len];
        for (m, n) in self.found.iter().enumerate() {
            if let Some(n) = *n {
                index[n] = m;
            }
        }
        for (k, &n) in self.added.iter().enumerate() {
            index[n] = self.found.len() + k;
        }
        index
    }
}

/// Matches modules by name and path; a module found under another path than
/// it runs from is refused (its release would belong to two modules).
pub(super) fn match_modules(running: &[Module], new: &[Module]) -> Result<Matched, ReloadError> {
    let same = |a: &Module, b: &Module| a.name == b.name && a.path == b.path;
    let moved: Vec<String> = (new.iter())
        .filter(|m| running.iter().any(|r| r.name == m.name && r.path != m.path))
        .map(|m| m.name.clone())
        .collect();
    if !moved.is_empty() {
        return Err(ReloadError::Moved(moved));
    }
    let found = (running.iter())
        .map(|r| new.iter().position(|m| same(r, m)))
        .collect();
    let added = (new.iter().enumerate())
        .filter(|(_, m)| !running.iter().any(|r| same(r, m)))
        .map(|(n, _)| n)
        .collect();
    Ok(Matched { found, added })
}

/// The modules whose static `<key>Enabled` changed, by running index.
pub(super) fn enabled_changed(running: &Layout, new: &Layout, matched: &Matched) -> Vec<usize> {
    (matched.found.iter().enumerate())
        .filter_map(|(m, n)| Some((m, (*n)?)))
        .filter(|&(m, n)| running.modules[m].static_enabled != new.modules[n].static_enabled)
        .map(|(m, _)| m)
        .collect()
}

/// What the running operator can take.
pub(super) struct Limits<'a> {
    /// The queues started at startup.
    pub(super) queues: &'a BTreeSet<String>,
}

/// The next hook table and what changes in it.
#[derive(Debug)]
pub(super) struct HookPlan {
    /// The whole table: the old slots (retired ones emptied), then the new hooks.
    pub(super) hooks: Vec<Hook>,
    /// The owner of each slot of `hooks`.
    pub(super) owners: Vec<Owner>,
    /// Slots retired (removed and changed hooks).
    pub(super) retired: Vec<usize>,
    /// Slots appended (added and changed hooks).
    pub(super) added: Vec<usize>,
    /// Retired slots whose hooks had validating or mutating bindings.
    pub(super) admission: Vec<usize>,
    /// Modules (running index) that existed before and whose hooks changed.
    pub(super) modules: BTreeSet<usize>,
    /// Global hooks were added, removed or changed.
    pub(super) global: bool,
    /// The diff by hook name, for the log line.
    pub(super) diff: Diff,
}

/// Compares the running hooks of modules still there (and the global hooks)
/// with `loaded`, whose owners are already running module indices; `kept`
/// says which running owners are still there.
pub(super) fn plan_hooks(
    current: &[Hook],
    owners: &[Owner],
    kept: impl Fn(&Owner) -> bool,
    loaded: Vec<(Hook, Owner)>,
    limits: &Limits,
) -> Result<HookPlan, ReloadError> {
    let live: BTreeMap<&str, usize> = (current.iter().enumerate())
        .filter(|(i, h)| !h.retired && owners.get(*i).is_some_and(&kept))
        .map(|(i, h)| (h.name.as_str(), i))
        .collect();
    let d = diff(
        live.iter().map(|(n, &i)| (*n, current[i].config_sum)),
        loaded.iter().map(|(h, _)| (h.name.as_str(), h.config_sum)),
    );
    let gone: BTreeSet<&String> = d.removed.iter().chain(&d.changed).collect();
    let retired: Vec<usize> = gone
        .iter()
        .filter_map(|n| live.get(n.as_str()))
        .copied()
        .collect();
    if let Some(&i) = retired
        .iter()
        .find(|&&i| !current[i].config.conversion.is_empty())
    {
        return Err(ReloadError::Conversion(current[i].name.clone()));
    }
    let new: BTreeSet<&String> = d.added.iter().chain(&d.changed).collect();
    let appended: Vec<(Hook, Owner)> = (loaded.into_iter())
        .filter(|(h, _)| new.contains(&h.name))
        .collect();
    appended.iter().try_for_each(|(h, _)| check(h, limits))?;
    let mut hooks: Vec<Hook> = (current.iter().enumerate())
        .map(|(i, h)| {
            if retired.contains(&i) {
                h.retire()
            } else {
                h.clone()
            }
        })
        .collect();
    let mut next_owners = owners.to_vec();
    let added: Vec<usize> = (hooks.len()..hooks.len() + appended.len()).collect();
    let changed_owners: Vec<Owner> = (retired.iter().map(|&i| owners[i]))
        .chain(appended.iter().map(|(_, o)| *o))
        .collect();
    for (h, o) in appended {
        hooks.push(h);
        next_owners.push(o);
    }
    let admission = (retired.iter().copied())
        .filter(|&i| {
            let c = &current[i].config;
            !c.validating.is_empty() || !c.mutating.is_empty()
        })
        .collect();
    let existed = |m: usize| owners.contains(&Owner::Module(m));
    Ok(HookPlan {
        hooks,
        owners: next_owners,
        retired,
        added,
        admission,
        modules: (changed_owners.iter())
            .filter_map(|o| match o {
                Owner::Module(m) if existed(*m) => Some(*m),
                _ => None,
            })
            .collect(),
        global: changed_owners.contains(&Owner::Global),
        diff: d,
    })
}

/// Refuses a hook the running operator cannot add: webhook bindings (their
/// servers and routes are bound at startup) and queues it did not start with.
fn check(h: &Hook, limits: &Limits) -> Result<(), ReloadError> {
    let c = &h.config;
    if !(c.validating.is_empty() && c.mutating.is_empty() && c.conversion.is_empty()) {
        return Err(ReloadError::Webhooks(h.name.clone()));
    }
    let queues = (c.kubernetes.iter().map(|b| &b.queue)).chain(c.schedule.iter().map(|b| &b.queue));
    for q in queues {
        if !limits.queues.contains(q) {
            let (hook, queue) = (h.name.clone(), q.clone());
            return Err(ReloadError::NewQueue { hook, queue });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addon::config::values::Schemas;
    use crate::hook::config::{HookKind, parse_as};
    use std::sync::{Arc, Mutex};

    fn module(name: &str, path: &str) -> Module {
        Module {
            name: name.into(),
            key: name.into(),
            order: 1,
            path: path.into(),
            has_chart: false,
            chart: path.into(),
            enabled_script: None,
            static_values: serde_json::json!({}),
            static_enabled: None,
            schemas: Schemas::none(),
            drift: Default::default(),
        }
    }

    fn hook(name: &str, config: &str, sum: u128) -> Hook {
        let config = parse_as(name, config, HookKind::Module).expect("config");
        Hook {
            name: name.into(),
            path: format!("/modules/{name}").into(),
            limiter: Arc::new(Mutex::new(
                crate::hook::limiter::TokenBucket::from_settings(&config.settings),
            )),
            jq_filters: vec![None; config.kubernetes.len()],
            config_sum: sum,
            retired: false,
            config,
        }
    }

    const KUBE: &str = r#"{"configVersion":"v1","kubernetes":[{"kind":"Pod"}]}"#;
    const ON_QUEUE: &str = r#"{"configVersion":"v1","kubernetes":[{"kind":"Pod","queue":"pods"}]}"#;
    const STARTUP: &str = r#"{"configVersion":"v1","onStartup":1}"#;

    #[test]
    fn added_modules_get_the_indices_after_the_running_ones() {
        let running = [module("a", "/m/a"), module("c", "/m/c")];
        let new = [
            module("a", "/m/a"),
            module("b", "/m/b"),
            module("d", "/m/d"),
        ];
        let m = match_modules(&running, &new).expect("matched");
        assert_eq!(m.found, [Some(0), None]);
        assert_eq!(m.added, [1, 2]);
        assert_eq!(m.running_index(3), [0, 2, 3]);
    }

    #[test]
    fn a_module_under_another_path_is_refused() {
        let running = [module("a", "/m/a")];
        let new = [module("a", "/other/a")];
        let e = match_modules(&running, &new).expect_err("moved");
        assert!(e.to_string().contains("another path: a:"), "{e}");
    }

    #[test]
    fn a_changed_static_enabled_is_found_by_running_index() {
        let layout = |on: Option<bool>| Layout {
            modules: vec![module("a", "/m/a"), {
                let mut b = module("b", "/m/b");
                b.static_enabled = on;
                b
            }],
            global_static: serde_json::json!({}),
            global_schemas: Schemas::none(),
            global_hooks_root: "/g".into(),
        };
        let (running, new) = (layout(Some(true)), layout(Some(false)));
        let m = match_modules(&running.modules, &new.modules).expect("matched");
        assert_eq!(enabled_changed(&running, &new, &m), [1]);
        assert!(enabled_changed(&running, &running, &m).is_empty());
    }

    #[test]
    fn a_module_s_added_changed_and_removed_hooks_are_planned_by_owner() {
        let current = vec![
            hook("g.sh", STARTUP, 1),
            hook("a/keep.sh", KUBE, 2),
            hook("a/change.sh", KUBE, 3),
            hook("a/drop.sh", KUBE, 4),
            hook("gone/x.sh", KUBE, 5),
        ];
        let owners = [
            Owner::Global,
            Owner::Module(0),
            Owner::Module(0),
            Owner::Module(0),
            Owner::Module(1),
        ];
        let loaded = vec![
            (hook("g.sh", STARTUP, 1), Owner::Global),
            (hook("a/keep.sh", KUBE, 2), Owner::Module(0)),
            (hook("a/change.sh", KUBE, 30), Owner::Module(0)),
            (hook("a/new.sh", KUBE, 6), Owner::Module(0)),
            (hook("b/first.sh", KUBE, 7), Owner::Module(2)),
        ];
        let queues = BTreeSet::from(["main".to_string()]);
        let kept = |o: &Owner| *o != Owner::Module(1);
        let p =
            plan_hooks(&current, &owners, kept, loaded, &Limits { queues: &queues }).expect("plan");
        assert_eq!(p.retired, [2, 3], "the changed and the removed hook");
        assert_eq!(p.added, [5, 6, 7]);
        let names: Vec<&str> = p.added.iter().map(|&i| p.hooks[i].name.as_str()).collect();
        assert_eq!(names, ["a/change.sh", "a/new.sh", "b/first.sh"]);
        assert_eq!(
            &p.owners[5..],
            [Owner::Module(0), Owner::Module(0), Owner::Module(2)]
        );
        assert!(p.hooks[3].retired && p.hooks[3].config.kubernetes.is_empty());
        assert!(
            !p.hooks[4].retired,
            "a removed module's hooks stay for its purge"
        );
        assert_eq!(
            p.modules,
            BTreeSet::from([0]),
            "module 2 is new: no hooks changed"
        );
        assert!(!p.global);
    }

    #[test]
    fn an_added_hook_on_a_queue_not_started_is_refused() {
        let queues = BTreeSet::from(["main".to_string()]);
        let loaded = vec![(hook("a/q.sh", ON_QUEUE, 1), Owner::Module(0))];
        let e = plan_hooks(&[], &[], |_| true, loaded, &Limits { queues: &queues })
            .expect_err("refused");
        assert!(
            matches!(&e, ReloadError::NewQueue { queue, .. } if queue == "pods"),
            "{e}"
        );
    }
}
