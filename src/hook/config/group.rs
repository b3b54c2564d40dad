//! Cross-binding snapshot rules: every `includeSnapshotsFrom` name must be the
//! name of exactly one kubernetes binding of the hook (a binding may include
//! itself), and the group merge: a binding with `group: g` also receives the
//! snapshots of every kubernetes binding in group `g`.

use std::collections::HashSet;

use super::error::Problem;
use super::types::HookConfig;
use super::validate::Checker;

/// Record a problem for each name that matches zero or several kubernetes
/// binding names (flant's `'<n>' binding name not found` /
/// `there are N '<n>' binding names`).
pub(crate) fn check_snapshot_names(
    probs: &mut Vec<Problem>,
    at: &str,
    names: &[String],
    kube_names: &[String],
) {
    let mut c = Checker::new(probs, at);
    for (i, name) in names.iter().enumerate() {
        let count = kube_names.iter().filter(|k| *k == name).count();
        let field = format!("includeSnapshotsFrom[{i}]");
        if count == 0 {
            let known = if kube_names.is_empty() {
                "the hook has no kubernetes bindings".to_owned()
            } else {
                format!("kubernetes binding names: {}", kube_names.join(", "))
            };
            c.err(&field, format!("'{name}' binding name not found; {known}"));
        } else if count > 1 {
            let msg = format!(
                "there are {count} '{name}' binding names; give those kubernetes bindings \
                 distinct names"
            );
            c.err(&field, msg);
        }
    }
}

/// `own` followed by the entries of `extra` it lacks, without duplicates.
pub(crate) fn merge_unique(own: &[String], extra: &[String]) -> Vec<String> {
    let mut seen = HashSet::new();
    let all = own.iter().chain(extra);
    all.filter(|n| seen.insert(n.as_str())).cloned().collect()
}

/// For each group, the kubernetes binding names in it, in config order.
fn group_members(config: &HookConfig) -> Vec<(String, Vec<String>)> {
    let mut groups: Vec<(String, Vec<String>)> = Vec::new();
    for b in &config.kubernetes {
        let Some(g) = &b.group else { continue };
        match groups.iter_mut().find(|(name, _)| name == g) {
            Some((_, members)) => members.push(b.name.clone()),
            None => groups.push((g.clone(), vec![b.name.clone()])),
        }
    }
    groups
}

/// Apply the group merge to every binding type.
pub(crate) fn merge(config: &mut HookConfig) {
    let groups = group_members(config);
    let apply = |group: &Option<String>, list: &mut Vec<String>| {
        let members = groups.iter().find(|(g, _)| Some(g) == group.as_ref());
        if let Some((_, members)) = members {
            *list = merge_unique(list, members);
        }
    };
    for b in &mut config.kubernetes {
        apply(&b.group, &mut b.include_snapshots_from);
    }
    for b in &mut config.schedule {
        apply(&b.group, &mut b.include_snapshots_from);
    }
    for b in config
        .validating
        .iter_mut()
        .chain(config.mutating.iter_mut())
    {
        apply(&b.group, &mut b.include_snapshots_from);
    }
    for b in &mut config.conversion {
        apply(&b.group, &mut b.include_snapshots_from);
    }
}

#[cfg(test)]
mod tests {
    use super::merge_unique;

    #[test]
    fn merge_keeps_own_order_then_new_group_names() {
        let s = |v: &[&str]| v.iter().map(|x| x.to_string()).collect::<Vec<_>>();
        let merged = merge_unique(&s(&["s3", "s2", "s1"]), &s(&["s1", "s4", "s3"]));
        assert_eq!(merged, s(&["s3", "s2", "s1", "s4"]));
    }
}
