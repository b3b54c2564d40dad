//! When to reload: a pure state machine over the hooks tree's fingerprints
//! (polled every [`POLL`]) and SIGHUP, with a debounce. A change makes a reload
//! pending; it runs once the tree has been quiet for [`QUIET`], or at the
//! latest [`MAX_WAIT`] after the first change, so a ConfigMap update that
//! touches several files, or a `cp -r` still running, is one reload. SIGHUP is
//! someone saying the files are ready: its reload runs at the next poll, and
//! takes the file changes seen until then with it (signals coming faster than
//! reloads are one reload).
//! A tree that cannot be read (a directory being replaced) counts as still
//! changing. No threads, no clock: the caller passes the time in.

use std::time::{Duration, Instant};

/// How often the hooks tree is fingerprinted.
pub(crate) const POLL: Duration = Duration::from_millis(500);
/// How long the tree must stay unchanged before a pending reload runs.
pub(crate) const QUIET: Duration = Duration::from_secs(2);
/// The longest a pending reload waits for the tree to settle.
pub(crate) const MAX_WAIT: Duration = Duration::from_secs(30);

/// What the reload thread saw.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Input {
    /// A poll: the tree's fingerprint, or `None` when it could not be read.
    Poll { now: Instant, tree: Option<u128> },
    /// SIGHUP.
    Signal { now: Instant },
}

/// Why a reload runs (its log line and metric say it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cause {
    /// The hooks tree changed.
    Files,
    /// SIGHUP (with or without file changes).
    Signal,
}

impl Cause {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Cause::Files => "files",
            Cause::Signal => "signal",
        }
    }
}

/// A reload waiting for the tree to settle.
#[derive(Debug, Clone, Copy)]
struct Pending {
    first: Instant,
    last: Instant,
    cause: Cause,
}

/// The debounce's state: the last fingerprint seen and the pending reload.
#[derive(Debug)]
pub(crate) struct Trigger {
    seen: Option<u128>,
    pending: Option<Pending>,
}

impl Trigger {
    /// Starts from the tree as it was when the hooks were loaded.
    pub(crate) fn new(tree: Option<u128>) -> Trigger {
        Trigger {
            seen: tree,
            pending: None,
        }
    }

    /// One input; `Some(cause)` when a reload is to run now.
    pub(crate) fn step(&mut self, input: Input) -> Option<Cause> {
        match input {
            Input::Signal { now } => {
                self.note(now, Cause::Signal);
                None
            }
            Input::Poll { now, tree } => {
                let changed = tree.is_none() || tree != self.seen;
                if changed {
                    self.note(now, Cause::Files);
                    if tree.is_some() {
                        self.seen = tree;
                    }
                }
                self.due(now)
            }
        }
    }

    /// Records a change at `now`; a signal's cause wins over files.
    fn note(&mut self, now: Instant, cause: Cause) {
        self.pending = Some(match self.pending {
            None => Pending {
                first: now,
                last: now,
                cause,
            },
            Some(p) => Pending {
                last: now,
                cause: if p.cause == Cause::Signal {
                    p.cause
                } else {
                    cause
                },
                ..p
            },
        });
    }

    fn due(&mut self, now: Instant) -> Option<Cause> {
        let p = self.pending?;
        let quiet = now.duration_since(p.last) >= QUIET;
        let overdue = now.duration_since(p.first) >= MAX_WAIT;
        if p.cause == Cause::Signal || quiet || overdue {
            self.pending = None;
            return Some(p.cause);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn poll(t: &mut Trigger, start: Instant, secs: u64, tree: Option<u128>) -> Option<Cause> {
        let now = start + Duration::from_secs(secs);
        t.step(Input::Poll { now, tree })
    }

    #[test]
    fn an_unchanged_tree_never_reloads() {
        let (start, mut t) = (Instant::now(), Trigger::new(Some(1)));
        for s in 0..100 {
            assert_eq!(poll(&mut t, start, s, Some(1)), None);
        }
    }

    #[test]
    fn several_changes_in_a_row_are_one_reload_once_quiet() {
        let (start, mut t) = (Instant::now(), Trigger::new(Some(1)));
        assert_eq!(poll(&mut t, start, 1, Some(2)), None);
        assert_eq!(poll(&mut t, start, 2, Some(3)), None, "still changing");
        assert_eq!(poll(&mut t, start, 3, None), None, "unreadable: changing");
        assert_eq!(poll(&mut t, start, 4, Some(4)), None);
        assert_eq!(poll(&mut t, start, 5, Some(4)), None, "quiet 1 s only");
        assert_eq!(poll(&mut t, start, 6, Some(4)), Some(Cause::Files));
        assert_eq!(poll(&mut t, start, 7, Some(4)), None, "done once");
    }

    #[test]
    fn a_tree_that_never_settles_reloads_after_max_wait() {
        let (start, mut t) = (Instant::now(), Trigger::new(Some(0)));
        let mut fired = Vec::new();
        for s in 1..=40u64 {
            if poll(&mut t, start, s, Some(u128::from(s))).is_some() {
                fired.push(s);
            }
        }
        assert_eq!(fired, [1 + MAX_WAIT.as_secs()]);
    }

    #[test]
    fn a_signal_reloads_at_the_next_poll_with_the_changes_seen() {
        let (start, mut t) = (Instant::now(), Trigger::new(Some(1)));
        assert_eq!(poll(&mut t, start, 1, Some(2)), None, "a change waits");
        t.step(Input::Signal { now: start });
        t.step(Input::Signal { now: start });
        assert_eq!(poll(&mut t, start, 1, Some(3)), Some(Cause::Signal));
        assert_eq!(
            poll(&mut t, start, 2, Some(3)),
            None,
            "two signals, one reload"
        );
        assert_eq!(
            poll(&mut t, start, 9, Some(3)),
            None,
            "the change went with it"
        );
    }
}
