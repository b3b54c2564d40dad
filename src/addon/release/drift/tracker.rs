//! The drift lifecycle of each watched object, as a pure state machine the watcher
//! ([`super::watcher`]) steps with what it saw; it answers with [`Action`]s and
//! never blocks, so its rules are tested without threads or a server:
//!
//! ```text
//! clean ──drift seen──> drifted (Report) ──correct mode──> correcting (Correct)
//!   ^                      │   ^                               │
//!   └──── drift gone ──────┘   └── back within FIGHT_WINDOW ───┘ (Fighting: waits
//!                                  10 s, 20 s, 40 s … 10 min before the next try)
//! ```
//!
//! One correction per module is in flight at a time. A correction the server
//! refuses in its dry run (an immutable field) is `refused`: not tried again until
//! the object's differences change, so a module never loops on it. A correction
//! whose helm run failed backs off as a fight does.

use super::Mode;
use super::compare::Difference;
use std::collections::{BTreeMap, BTreeSet};
use std::time::{Duration, Instant};

/// Drift that comes back sooner than this after a correction is a fight.
pub(crate) const FIGHT_WINDOW: Duration = Duration::from_secs(600);
const FIRST_BACKOFF: Duration = Duration::from_secs(10);
const MAX_BACKOFF: Duration = Duration::from_secs(600);

/// What the watcher does after a step.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Action {
    /// New or changed drift of `key`: log it, count it.
    Report { key: String, module: usize },
    /// Correct module `module` (dry-run `key` first).
    Correct { key: String, module: usize },
    /// `key` drifted again after `corrections` corrections: no new one before `until`.
    Fighting {
        key: String,
        module: usize,
        corrections: u32,
        until: Instant,
    },
    /// `key` matches its manifest again.
    Cleared { key: String, module: usize },
}

/// One object's drift.
#[derive(Debug, Clone)]
pub(crate) struct Entry {
    pub(crate) module: usize,
    pub(crate) differences: Vec<Difference>,
    pub(crate) corrections: u32,
    last_correction: Option<Instant>,
    hold_until: Option<Instant>,
    /// The server refused a correction of these differences (its message).
    pub(crate) refused: Option<String>,
}

/// Every watched object's drift, by `ns/Kind/name`.
#[derive(Debug, Default)]
pub(crate) struct Tracker {
    entries: BTreeMap<String, Entry>,
    /// Modules with a correction asked for and not finished.
    correcting: BTreeSet<usize>,
}

impl Tracker {
    /// What the watcher saw of `key` (module `module`'s object) at `now`.
    pub(crate) fn observe(
        &mut self,
        key: &str,
        module: usize,
        mode: Mode,
        found: Vec<Difference>,
        now: Instant,
    ) -> Vec<Action> {
        let key = key.to_string();
        if found.is_empty() || mode == Mode::Off {
            return self.clean(key, now);
        }
        let entry = self.entries.entry(key.clone()).or_insert(Entry {
            module,
            differences: Vec::new(),
            corrections: 0,
            last_correction: None,
            hold_until: None,
            refused: None,
        });
        entry.module = module;
        let mut actions = Vec::new();
        if entry.differences != found {
            entry.differences = found;
            entry.refused = None;
            actions.push(Action::Report {
                key: key.clone(),
                module,
            });
        }
        let waiting = entry.hold_until.is_some_and(|t| t > now);
        if mode != Mode::Correct
            || entry.refused.is_some()
            || waiting
            || self.correcting.contains(&module)
        {
            return actions;
        }
        let fought = entry
            .last_correction
            .is_some_and(|t| now.duration_since(t) < FIGHT_WINDOW);
        if fought && entry.hold_until.is_none() {
            let until = now + backoff(entry.corrections);
            entry.hold_until = Some(until);
            actions.push(Action::Fighting {
                key,
                module,
                corrections: entry.corrections,
                until,
            });
            return actions;
        }
        entry.hold_until = None;
        entry.corrections += 1;
        entry.last_correction = Some(now);
        self.correcting.insert(module);
        actions.push(Action::Correct { key, module });
        actions
    }

    fn clean(&mut self, key: String, now: Instant) -> Vec<Action> {
        let Some(entry) = self.entries.get_mut(&key) else {
            return Vec::new();
        };
        let module = entry.module;
        let was_drifted = !entry.differences.is_empty();
        entry.differences.clear();
        entry.refused = None;
        entry.hold_until = None;
        // Kept while a returning drift would still count as a fight.
        if entry
            .last_correction
            .is_none_or(|t| now.duration_since(t) >= FIGHT_WINDOW)
        {
            self.entries.remove(&key);
        }
        match was_drifted {
            true => vec![Action::Cleared { key, module }],
            false => Vec::new(),
        }
    }

    /// The server refused the correction of `key` in a dry run.
    pub(crate) fn refused(&mut self, key: &str, module: usize, message: String) {
        self.correcting.remove(&module);
        if let Some(entry) = self.entries.get_mut(key) {
            entry.refused = Some(message);
        }
    }

    /// Module `module`'s run ended; `ok`: its helm upgrade went through. A failed
    /// correction holds the module's drifted objects as a fight does. Returns the
    /// keys of a failed correction's drifted objects.
    pub(crate) fn run_done(&mut self, module: usize, ok: bool, now: Instant) -> Vec<String> {
        if !self.correcting.remove(&module) || ok {
            return Vec::new();
        }
        let mut held = Vec::new();
        for (key, entry) in self.entries.iter_mut().filter(|(_, e)| e.module == module) {
            entry.hold_until = Some(now + backoff(entry.corrections));
            held.push(key.clone());
        }
        held
    }

    /// Drops every entry of `module` (disabled, or its release gone).
    pub(crate) fn forget(&mut self, module: usize) {
        self.entries.retain(|_, e| e.module != module);
        self.correcting.remove(&module);
    }

    /// Drifted objects whose wait ended by `now`: to be looked at again.
    pub(crate) fn due(&mut self, now: Instant) -> Vec<String> {
        let mut due = Vec::new();
        for (key, entry) in &mut self.entries {
            if entry.hold_until.is_some_and(|t| t <= now) && !entry.differences.is_empty() {
                due.push(key.clone());
            }
        }
        due
    }

    /// When the next wait ends.
    pub(crate) fn next_due(&self) -> Option<Instant> {
        self.entries.values().filter_map(|e| e.hold_until).min()
    }

    /// The drifted objects and their entries.
    pub(crate) fn drifted(&self) -> impl Iterator<Item = (&String, &Entry)> {
        self.entries
            .iter()
            .filter(|(_, e)| !e.differences.is_empty())
    }
}

/// The wait before correction number `done + 1`: 10 s doubling, at most 10 min.
fn backoff(done: u32) -> Duration {
    let factor = 1u32 << done.saturating_sub(1).min(6);
    (FIRST_BACKOFF * factor).min(MAX_BACKOFF)
}

#[cfg(test)]
#[path = "tracker_tests.rs"]
mod tests;
