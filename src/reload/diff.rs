//! What a reload changes: the running hooks against the ones just loaded, by
//! name (the path under the hooks dir) and `--config` output (its hash). A pure
//! function, so the rule is tested without threads.

use std::collections::BTreeMap;

/// The hooks a reload keeps, adds, removes and replaces, each list in name order.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct Diff {
    /// Same path, same `--config` output: keeps its watches, snapshots, schedules
    /// and queued tasks.
    pub(crate) unchanged: Vec<String>,
    /// New paths: bound and enabled (onStartup, Synchronization).
    pub(crate) added: Vec<String>,
    /// Gone paths: watches and schedules stopped, webhook entries removed.
    pub(crate) removed: Vec<String>,
    /// Same path, other `--config` output: removed, then added.
    pub(crate) changed: Vec<String>,
}

impl Diff {
    /// True when the reload changes nothing.
    pub(crate) fn is_empty(&self) -> bool {
        self.added.is_empty() && self.removed.is_empty() && self.changed.is_empty()
    }
}

/// Compares `running` with `loaded`, both as (name, config sum) pairs.
pub(crate) fn diff<'a>(
    running: impl IntoIterator<Item = (&'a str, u128)>,
    loaded: impl IntoIterator<Item = (&'a str, u128)>,
) -> Diff {
    let running: BTreeMap<&str, u128> = running.into_iter().collect();
    let loaded: BTreeMap<&str, u128> = loaded.into_iter().collect();
    let mut d = Diff::default();
    for (name, sum) in &loaded {
        match running.get(name) {
            None => d.added.push(name.to_string()),
            Some(old) if old == sum => d.unchanged.push(name.to_string()),
            Some(_) => d.changed.push(name.to_string()),
        }
    }
    d.removed = (running.keys())
        .filter(|n| !loaded.contains_key(*n))
        .map(|n| n.to_string())
        .collect();
    d
}

#[cfg(test)]
mod tests {
    use super::{Diff, diff};

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn hooks_are_matched_by_path_then_by_config_output() {
        let running = [("a.sh", 1), ("b.sh", 2), ("c.sh", 3)];
        let loaded = [("a.sh", 1), ("c.sh", 30), ("d.sh", 4)];
        assert_eq!(
            diff(running, loaded),
            Diff {
                unchanged: names(&["a.sh"]),
                added: names(&["d.sh"]),
                removed: names(&["b.sh"]),
                changed: names(&["c.sh"]),
            }
        );
    }

    #[test]
    fn the_same_hooks_are_an_empty_diff() {
        let hooks = [("x/a.sh", 7), ("y.py", 8)];
        let d = diff(hooks, hooks);
        assert!(d.is_empty());
        assert_eq!(d.unchanged, names(&["x/a.sh", "y.py"]));
    }

    #[test]
    fn everything_removed_and_everything_new() {
        let d = diff([("a", 1)], []);
        assert_eq!(d.removed, names(&["a"]));
        let d = diff([], [("a", 1)]);
        assert_eq!(d.added, names(&["a"]));
    }
}
