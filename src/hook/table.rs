//! The hook table every thread reads hooks from: an `Arc<Vec<Hook>>` behind a
//! lock, swapped whole by a reload (`reload/`). A hook's index is its identity
//! in tasks, snapshots, watches and schedules, so a reload only ever appends:
//! a removed hook's slot keeps its name and loses its bindings
//! ([`Hook::retire`]), an added one gets the next index. Readers take the
//! current list with [`HookTable::load`] and use it for one piece of work.

use super::Hook;
use std::sync::{Arc, RwLock};

/// The shared, swappable list of hooks.
#[derive(Clone, Debug)]
pub struct HookTable {
    current: Arc<RwLock<Arc<Vec<Hook>>>>,
}

impl HookTable {
    /// A table holding the hooks loaded at startup.
    pub fn new(hooks: Arc<Vec<Hook>>) -> HookTable {
        HookTable {
            current: Arc::new(RwLock::new(hooks)),
        }
    }

    /// The hooks as they are now.
    pub fn load(&self) -> Arc<Vec<Hook>> {
        let guard = self.current.read().unwrap_or_else(|p| p.into_inner());
        Arc::clone(&guard)
    }

    /// Replaces the list (a reload; indices of the old list must keep their
    /// meaning).
    pub(crate) fn store(&self, hooks: Arc<Vec<Hook>>) {
        let mut guard = self.current.write().unwrap_or_else(|p| p.into_inner());
        *guard = hooks;
    }
}

impl From<Arc<Vec<Hook>>> for HookTable {
    fn from(hooks: Arc<Vec<Hook>>) -> HookTable {
        HookTable::new(hooks)
    }
}
