//! From a diff to the next hook table: which slots retire, which hooks are
//! appended, and their schedule entries; and the refusals, checked before
//! anything changes (what a running operator cannot take without a restart).
//! Pure: no threads, no I/O.

use super::ReloadError;
use super::diff::Diff;
use crate::hook::Hook;
use crate::schedule::Entry;
use std::collections::{BTreeMap, BTreeSet};

/// What the running operator can take.
pub(super) struct Limits<'a> {
    /// The queues started at startup.
    pub(super) queues: &'a BTreeSet<String>,
    /// Whether it has a Kubernetes client and a monitor.
    pub(super) kube: bool,
}

/// The next hook table and what changes in it.
#[derive(Debug)]
pub(super) struct Plan {
    /// The whole table: the old slots (retired ones emptied) then the new hooks.
    pub(super) next: Vec<Hook>,
    /// Indices retired (removed and changed hooks).
    pub(super) retired: Vec<usize>,
    /// Indices appended (added and changed hooks).
    pub(super) added: Vec<usize>,
    /// The schedule entries of the appended hooks.
    pub(super) entries: Vec<Entry>,
}

/// Builds the plan for `diff` from the running table and the hooks just loaded.
pub(super) fn plan(
    current: &[Hook],
    loaded: Vec<Hook>,
    diff: &Diff,
    limits: &Limits,
) -> Result<Plan, ReloadError> {
    let live: BTreeMap<&str, usize> = (current.iter().enumerate())
        .filter(|(_, h)| !h.retired)
        .map(|(i, h)| (h.name.as_str(), i))
        .collect();
    let gone: BTreeSet<&String> = diff.removed.iter().chain(&diff.changed).collect();
    let retired: Vec<usize> = gone
        .iter()
        .filter_map(|n| live.get(n.as_str()).copied())
        .collect();
    for &i in &retired {
        if !current[i].config.conversion.is_empty() {
            let hook = current[i].name.clone();
            return Err(ReloadError::Conversion { hook });
        }
    }
    let new: BTreeSet<&String> = diff.added.iter().chain(&diff.changed).collect();
    let appended: Vec<Hook> = (loaded.into_iter())
        .filter(|h| new.contains(&h.name))
        .collect();
    appended.iter().try_for_each(|h| check(h, limits))?;
    let mut next: Vec<Hook> = (current.iter().enumerate())
        .map(|(i, h)| match retired.contains(&i) {
            true => h.retire(),
            false => h.clone(),
        })
        .collect();
    let added: Vec<usize> = (next.len()..next.len() + appended.len()).collect();
    next.extend(appended);
    let entries = crate::startup::schedule_entries(&next)
        .map_err(ReloadError::Schedule)?
        .into_iter()
        .filter(|e| added.contains(&e.hook))
        .collect();
    Ok(Plan {
        next,
        retired,
        added,
        entries,
    })
}

/// Refuses a hook the running operator cannot add.
fn check(h: &Hook, limits: &Limits) -> Result<(), ReloadError> {
    let c = &h.config;
    let hook = || h.name.clone();
    if !(c.validating.is_empty() && c.mutating.is_empty() && c.conversion.is_empty()) {
        return Err(ReloadError::Webhooks { hook: hook() });
    }
    if !c.kubernetes.is_empty() && !limits.kube {
        return Err(ReloadError::NoKubernetes { hook: hook() });
    }
    let queues = (c.kubernetes.iter().map(|b| &b.queue)).chain(c.schedule.iter().map(|b| &b.queue));
    for q in queues {
        if !limits.queues.contains(q) {
            let queue = q.clone();
            return Err(ReloadError::NewQueue {
                hook: hook(),
                queue,
            });
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::reload::diff::diff;
    use std::sync::{Arc, Mutex};

    fn hook(name: &str, config: &str, sum: u128) -> Hook {
        let config = crate::hook::config::parse(name, config).expect("config");
        Hook {
            name: name.into(),
            path: format!("/hooks/{name}").into(),
            limiter: Arc::new(Mutex::new(
                crate::hook::limiter::TokenBucket::from_settings(&config.settings),
            )),
            jq_filters: vec![None; config.kubernetes.len()],
            config_sum: sum,
            retired: false,
            config,
        }
    }

    const SCHEDULE: &str = "configVersion: v1\nschedule:\n- crontab: '* * * * *'\n";
    const KUBE: &str = "configVersion: v1\nkubernetes:\n- kind: Pod\n  queue: pods\n";

    fn sums(hooks: &[Hook]) -> Vec<(&str, u128)> {
        (hooks.iter().filter(|h| !h.retired))
            .map(|h| (h.name.as_str(), h.config_sum))
            .collect()
    }

    #[test]
    fn removed_and_changed_slots_retire_and_new_hooks_are_appended() {
        let current = vec![hook("a.sh", SCHEDULE, 1), hook("b.sh", SCHEDULE, 2)];
        let loaded = vec![hook("b.sh", SCHEDULE, 20), hook("c.sh", SCHEDULE, 3)];
        let d = diff(sums(&current), sums(&loaded));
        let queues = BTreeSet::from(["main".to_string()]);
        let limits = Limits {
            queues: &queues,
            kube: false,
        };
        let p = plan(&current, loaded, &d, &limits).expect("plan");
        let names: Vec<(&str, bool)> = (p.next.iter())
            .map(|h| (h.name.as_str(), h.retired))
            .collect();
        assert_eq!(
            names,
            [
                ("a.sh", true),
                ("b.sh", true),
                ("b.sh", false),
                ("c.sh", false)
            ]
        );
        assert_eq!((p.retired, p.added), (vec![0, 1], vec![2, 3]));
        let hooks: Vec<usize> = p.entries.iter().map(|e| e.hook).collect();
        assert_eq!(hooks, [2, 3], "only the new hooks' schedules");
        assert!(
            p.next[0].config.schedule.is_empty(),
            "a retired slot has no bindings"
        );
    }

    #[test]
    fn a_second_reload_finds_only_live_slots() {
        let mut current = vec![
            hook("a.sh", SCHEDULE, 1).retire(),
            hook("a.sh", SCHEDULE, 2),
        ];
        current[0].retired = true;
        let loaded = vec![hook("a.sh", SCHEDULE, 2)];
        let d = diff(sums(&current), sums(&loaded));
        assert!(d.is_empty(), "{d:?}");
    }

    #[test]
    fn a_new_queue_or_kubernetes_without_a_client_is_refused() {
        let queues = BTreeSet::from(["main".to_string()]);
        let loaded = vec![hook("k.sh", KUBE, 1)];
        let d = diff([], sums(&loaded));
        let no_kube = Limits {
            queues: &queues,
            kube: false,
        };
        let e = plan(&[], loaded, &d, &no_kube).expect_err("refused");
        assert!(
            matches!(&e, ReloadError::NoKubernetes { hook } if hook == "k.sh"),
            "{e}"
        );
        let loaded = vec![hook("k.sh", KUBE, 1)];
        let kube = Limits {
            queues: &queues,
            kube: true,
        };
        let e = plan(&[], loaded, &d, &kube).expect_err("refused");
        assert_eq!(
            e.to_string(),
            "hook 'k.sh': queue 'pods' did not exist at startup; restart the operator to add a queue"
        );
    }
}
