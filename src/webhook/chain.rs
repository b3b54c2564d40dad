//! Conversion chains: how to get a custom resource from one version to another
//! through the `conversions` rules hooks declared for its CRD, possibly across
//! several rules and several hooks (the seed's example converts
//! `unstable.crontab.io/v1beta1` to `stable.example.com/v1` in three steps).
//! Built once at startup; searched by the conversion handler threads.

use std::collections::VecDeque;

/// One declared `{fromVersion, toVersion}` rule and the binding that implements it.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Rule {
    pub(crate) from: String,
    pub(crate) to: String,
    /// Index of the hook in the operator's hook list.
    pub(crate) hook: usize,
    /// Index of the binding in the hook's `kubernetesCustomResourceConversion`.
    pub(crate) binding: usize,
}

/// flant's `VersionsMatched`: equal strings, or exactly one of them has a group
/// and its version part equals the other (`a/v1beta1` ~ `v1beta1`, but
/// `b/v1beta1` ≁ `a/v1beta1`).
pub(crate) fn versions_matched(a: &str, b: &str) -> bool {
    if a == b {
        return true;
    }
    match (a.split_once('/'), b.split_once('/')) {
        (Some((_, va)), None) => va == b,
        (None, Some((_, vb))) => vb == a,
        _ => false,
    }
}

/// The shortest sequence of rules (indices into `rules`) that converts `from` to
/// `to`, at least one step long (as in flant, `v1beta1`→`v1beta1` still needs a
/// rule). Ties go to the rule declared first. `None` when no chain exists.
pub(crate) fn find_chain(rules: &[Rule], from: &str, to: &str) -> Option<Vec<usize>> {
    let mut queue: VecDeque<Vec<usize>> = VecDeque::new();
    let mut used = vec![false; rules.len()];
    for (i, r) in rules.iter().enumerate() {
        if versions_matched(from, &r.from) {
            used[i] = true;
            queue.push_back(vec![i]);
        }
    }
    while let Some(path) = queue.pop_front() {
        let last = &rules[*path.last()?];
        if versions_matched(&last.to, to) {
            return Some(path);
        }
        for (i, r) in rules.iter().enumerate() {
            if !used[i] && versions_matched(&last.to, &r.from) {
                used[i] = true;
                let mut next = path.clone();
                next.push(i);
                queue.push_back(next);
            }
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(pairs: &[(&str, &str)]) -> Vec<Rule> {
        pairs
            .iter()
            .enumerate()
            .map(|(i, (f, t))| Rule {
                from: f.to_string(),
                to: t.to_string(),
                hook: 0,
                binding: i,
            })
            .collect()
    }

    fn steps(rules: &[Rule], from: &str, to: &str) -> Option<Vec<String>> {
        find_chain(rules, from, to).map(|c| {
            c.iter()
                .map(|&i| format!("{}->{}", rules[i].from, rules[i].to))
                .collect()
        })
    }

    #[test]
    fn versions_match_with_or_without_group() {
        assert!(versions_matched("a/v1beta1", "v1beta1"));
        assert!(versions_matched("v1beta1", "a/v1beta1"));
        assert!(versions_matched("a/v1", "a/v1"));
        assert!(!versions_matched("b/v1beta1", "a/v1beta1"));
        assert!(!versions_matched("v1", "v2"));
    }

    /// flant's hook_manager_test oracle: alpha→beta→gamma→delta and back.
    #[test]
    fn chains_in_both_directions() {
        let r = rules(&[
            ("alpha", "beta"),
            ("beta", "gamma"),
            ("gamma", "delta"),
            ("delta", "gamma"),
            ("gamma", "beta"),
            ("beta", "alpha"),
        ]);
        assert_eq!(find_chain(&r, "alpha", "delta").map(|c| c.len()), Some(3));
        assert_eq!(find_chain(&r, "gamma", "alpha").map(|c| c.len()), Some(2));
        assert_eq!(find_chain(&r, "alpha", "omega"), None);
        assert_eq!(find_chain(&r, "omega", "alpha"), None);
    }

    /// flant's full-group oracle: versions with and without groups chain up.
    #[test]
    fn chains_across_groups() {
        let r = rules(&[
            ("group.io/alpha", "beta"),
            ("unstable.example.com/beta", "gamma"),
            ("stable.example.com/gamma", "next.io/delta"),
        ]);
        assert_eq!(
            steps(&r, "group.io/alpha", "delta").expect("chain"),
            [
                "group.io/alpha->beta",
                "unstable.example.com/beta->gamma",
                "stable.example.com/gamma->next.io/delta"
            ]
        );
        let other = rules(&[("alpha.example.com/v1beta1", "alpha.example.io/v1beta1")]);
        assert_eq!(
            steps(&other, "v1beta1", "v1beta1").expect("chain"),
            ["alpha.example.com/v1beta1->alpha.example.io/v1beta1"]
        );
    }

    /// The seed's example: unstable.crontab.io/v1beta1 reaches stable.example.com/v1.
    #[test]
    fn seed_example_chain() {
        let r = rules(&[
            ("unstable.crontab.io/v1beta1", "stable.example.com/v1beta1"),
            ("stable.example.com/v1beta1", "stable.example.com/v1beta2"),
            ("v1beta2", "v1"),
        ]);
        assert_eq!(
            find_chain(&r, "unstable.crontab.io/v1beta1", "stable.example.com/v1"),
            Some(vec![0, 1, 2])
        );
        assert_eq!(
            find_chain(&r, "stable.example.com/v1beta2", "stable.example.com/v1"),
            Some(vec![2])
        );
    }

    #[test]
    fn shortest_chain_wins_and_cycles_end() {
        let r = rules(&[("a", "b"), ("b", "a"), ("b", "c"), ("a", "c")]);
        assert_eq!(find_chain(&r, "a", "c"), Some(vec![3]));
        assert_eq!(find_chain(&r, "c", "a"), None);
    }
}
