//! The scheduler thread: fires `schedule` bindings on their crontabs.
//!
//! It holds every schedule binding of every hook, but a hook's entries only start
//! firing once its `EnableScheduleBindings` task has run (after all onStartup hooks,
//! as in flant). It sleeps until the earliest next fire time, waking early for
//! control messages or shutdown, and sends a [`Fire`] per due binding, in hook-name
//! then config order (flant's order within a hook is random).

pub(crate) mod cron;

use chrono::{DateTime, Local};
use cron::CronSchedule;
use crossbeam_channel::{Receiver, Sender, select};
use std::time::Duration;

/// One schedule binding.
#[derive(Debug, Clone)]
pub struct Entry {
    pub(crate) hook: usize,
    pub(crate) binding: usize,
    pub(crate) schedule: CronSchedule,
}

/// Messages to the scheduler.
#[derive(Debug, Clone)]
pub enum Control {
    /// Start firing the bindings of this hook.
    Enable(usize),
    /// Stop firing them (addon-operator, when a module is disabled).
    Disable(usize),
    /// Hold these entries too, not firing until enabled (a hook a reload added).
    Add(Vec<Entry>),
    /// Forget every entry of this hook (a hook a reload removed).
    Remove(usize),
}

/// A due schedule binding: hook index and binding index within its config.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Fire {
    pub(crate) hook: usize,
    pub(crate) binding: usize,
}

/// Longest sleep between checks, so a changed wall clock is noticed.
const MAX_SLEEP: Duration = Duration::from_secs(60);

/// The thread body. Ends when `stop`'s sender is dropped.
pub(crate) fn run(
    mut entries: Vec<Entry>,
    control: Receiver<Control>,
    stop: Receiver<()>,
    fires: Sender<Fire>,
) {
    let mut next: Vec<Option<DateTime<Local>>> = vec![None; entries.len()];
    loop {
        let now = Local::now();
        for (i, e) in entries.iter().enumerate() {
            if next[i].is_some_and(|t| t <= now) {
                if fires
                    .send(Fire {
                        hook: e.hook,
                        binding: e.binding,
                    })
                    .is_err()
                {
                    return;
                }
                next[i] = e.schedule.next_after(now);
            }
        }
        let sleep = next
            .iter()
            .flatten()
            .min()
            .map(|t| (*t - Local::now()).to_std().unwrap_or(Duration::ZERO))
            .unwrap_or(MAX_SLEEP)
            .min(MAX_SLEEP);
        select! {
            recv(control) -> msg => match msg {
                Ok(c) => apply(c, &mut entries, &mut next),
                Err(_) => return,
            },
            recv(stop) -> _ => return,
            default(sleep) => {}
        }
    }
}

/// Applies a control message to the entries and their next fire times (same
/// index in both).
fn apply(c: Control, entries: &mut Vec<Entry>, next: &mut Vec<Option<DateTime<Local>>>) {
    match c {
        Control::Enable(hook) => {
            let now = Local::now();
            for (i, e) in entries.iter().enumerate().filter(|(_, e)| e.hook == hook) {
                next[i] = e.schedule.next_after(now);
            }
        }
        Control::Disable(hook) => {
            for (i, _) in entries.iter().enumerate().filter(|(_, e)| e.hook == hook) {
                next[i] = None;
            }
        }
        Control::Add(added) => {
            next.extend(added.iter().map(|_| None));
            entries.extend(added);
        }
        Control::Remove(hook) => {
            let mut i = 0;
            while i < entries.len() {
                if entries[i].hook == hook {
                    entries.remove(i);
                    next.remove(i);
                } else {
                    i += 1;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(hook: usize, binding: usize) -> Entry {
        let schedule = CronSchedule::parse("* * * * *").expect("crontab");
        Entry {
            hook,
            binding,
            schedule,
        }
    }

    fn keys(entries: &[Entry]) -> Vec<(usize, usize)> {
        entries.iter().map(|e| (e.hook, e.binding)).collect()
    }

    /// A reload adds a hook's entries (not firing until enabled) and removes
    /// another's; the next fire times stay with their entries.
    #[test]
    fn added_entries_wait_for_enable_and_removed_ones_go_with_their_times() {
        let mut entries = vec![entry(0, 0), entry(1, 0), entry(0, 1)];
        let mut next = vec![None; 3];
        apply(Control::Enable(0), &mut entries, &mut next);
        apply(Control::Add(vec![entry(2, 0)]), &mut entries, &mut next);
        assert_eq!(
            next.iter().map(Option::is_some).collect::<Vec<_>>(),
            [true, false, true, false]
        );
        apply(Control::Remove(0), &mut entries, &mut next);
        assert_eq!(keys(&entries), [(1, 0), (2, 0)]);
        assert_eq!(next, [None, None]);
        apply(Control::Enable(2), &mut entries, &mut next);
        assert!(next[1].is_some() && next[0].is_none());
    }
}
