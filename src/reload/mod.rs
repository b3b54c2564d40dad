//! Reloading shell-operator's hooks without a restart (issue 39).
//!
//! The `reload` thread (started by `operator.rs`) polls the hooks tree's
//! fingerprint (`tree.rs`) every half second and takes SIGHUP; `trigger.rs` debounces
//! both into one reload. A reload runs every hook's `--config` again
//! (`hook::load_all`), compares by path and `--config` output (`diff.rs`), checks
//! what a running operator cannot take (`plan.rs`), then applies it
//! (`apply.rs`): unchanged hooks keep everything; removed ones lose their
//! watches, snapshots, schedules, queued tasks and webhook entries; added ones
//! are appended to the hook table and get their onStartup, Enable and
//! Synchronization tasks on the main queue; changed ones are both.
//!
//! A reload that fails (a bad `--config`, something only a restart can do)
//! changes nothing: the old hooks keep running, the error is logged with the
//! hook it names and counted in `<prefix>hooks_reloads_total{outcome="error"}`.

mod apply;
pub(crate) mod diff;
mod plan;
pub(crate) mod tree;
pub(crate) mod trigger;

pub(crate) use apply::{KubeSide, Reloader, register_metric};

use crossbeam_channel::{Receiver, select, tick};
use std::time::Instant;
use trigger::{Input, POLL, Trigger};

/// Why a reload changed nothing.
#[derive(Debug)]
pub(crate) enum ReloadError {
    /// Discovery or a hook's `--config` failed (the message names the hook).
    Load(String),
    /// A hook names a queue the operator did not start with.
    NewQueue { hook: String, queue: String },
    /// A hook has kubernetes bindings, but no hook had any at startup (so the
    /// operator has no Kubernetes client and no monitor).
    NoKubernetes { hook: String },
    /// A hook to add or change has admission or conversion bindings, which are
    /// served and registered from startup only.
    Webhooks { hook: String },
    /// A hook to remove has conversion bindings (its CRDs' conversion settings
    /// are the operator's until it stops).
    Conversion { hook: String },
    /// A schedule binding's crontab does not parse.
    Schedule(String),
    /// A thread the reload needs has stopped (the operator is shutting down).
    Stopped(&'static str),
}

impl std::fmt::Display for ReloadError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReloadError::Load(e) | ReloadError::Schedule(e) => f.write_str(e),
            ReloadError::NewQueue { hook, queue } => write!(
                f,
                "hook '{hook}': queue '{queue}' did not exist at startup; restart the operator to add a queue"
            ),
            ReloadError::NoKubernetes { hook } => write!(
                f,
                "hook '{hook}': kubernetes bindings, but the operator started without any; restart it"
            ),
            ReloadError::Webhooks { hook } => write!(
                f,
                "hook '{hook}': validating, mutating and conversion bindings are bound at startup only; restart the operator"
            ),
            ReloadError::Conversion { hook } => write!(
                f,
                "hook '{hook}': a hook with conversion bindings cannot be removed without a restart"
            ),
            ReloadError::Stopped(what) => write!(f, "the {what} is not running"),
        }
    }
}

/// What the `reload` thread reloads: shell-operator's hooks ([`Reloader`]) or
/// addon-operator's modules (`addon/reload/`).
pub(crate) trait Reload: Send {
    /// The watched trees' fingerprint when what runs now was loaded.
    fn loaded_tree(&self) -> Option<u128>;
    /// The watched trees' fingerprint now (`None`: unreadable).
    fn tree(&self) -> Option<u128>;
    /// True once startup is done (no reload runs before).
    fn ready(&self) -> bool;
    /// One reload: logs what changed (or why nothing did) and counts it.
    fn reload(&mut self, cause: trigger::Cause);
}

impl Reload for Reloader {
    fn loaded_tree(&self) -> Option<u128> {
        self.tree
    }

    fn tree(&self) -> Option<u128> {
        tree::fingerprint(self.root(), &self.skip).ok()
    }

    fn ready(&self) -> bool {
        Reloader::ready(self)
    }

    fn reload(&mut self, cause: trigger::Cause) {
        Reloader::reload(self, cause)
    }
}

/// The `reload` thread's body: polls the tree, takes SIGHUP from `hup`, and
/// reloads when the trigger says so, until `stop` closes.
pub(crate) fn run(mut reloader: impl Reload, hup: Receiver<()>, stop: Receiver<()>) {
    let mut trigger = Trigger::new(reloader.loaded_tree());
    let ticker = tick(POLL);
    let mut hup = hup;
    loop {
        let input = select! {
            recv(stop) -> _ => return,
            recv(hup) -> h => match h {
                Ok(()) => Input::Signal { now: Instant::now() },
                Err(_) => {
                    hup = crossbeam_channel::never();
                    continue;
                }
            },
            recv(ticker) -> _ => Input::Poll {
                now: Instant::now(),
                tree: reloader.tree(),
            },
        };
        if let Input::Signal { .. } = input {
            crate::log::info("SIGHUP: reload asked", &[]);
        }
        // Until startup is done, changes wait: the tree is compared again after.
        if matches!(input, Input::Poll { .. }) && !reloader.ready() {
            continue;
        }
        if let Some(cause) = trigger.step(input) {
            reloader.reload(cause);
        }
    }
}
