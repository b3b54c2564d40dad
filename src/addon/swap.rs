//! A value the queue threads read and a reload replaces whole: addon-operator's
//! module layout and the owner of each hook index (`state.rs`). Readers take
//! the current `Arc` for one piece of work, so a reload never waits for a hook
//! or helm run and no lock is held across one. A reload only appends (a module
//! or hook index keeps its meaning for as long as the operator runs).

use std::sync::{Arc, RwLock};

/// The shared, swappable value.
#[derive(Debug)]
pub(crate) struct Swap<T> {
    current: RwLock<Arc<T>>,
}

impl<T> Swap<T> {
    pub(crate) fn new(value: T) -> Swap<T> {
        Swap {
            current: RwLock::new(Arc::new(value)),
        }
    }

    /// The value as it is now; a poisoned lock still yields it.
    pub(crate) fn load(&self) -> Arc<T> {
        let guard = self.current.read().unwrap_or_else(|p| p.into_inner());
        Arc::clone(&guard)
    }

    /// Replaces the value (a reload).
    pub(crate) fn store(&self, value: T) {
        let mut guard = self.current.write().unwrap_or_else(|p| p.into_inner());
        *guard = Arc::new(value);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_keeps_the_value_it_took_across_a_store() {
        let swap = Swap::new(vec![1]);
        let before = swap.load();
        swap.store(vec![1, 2]);
        assert_eq!(
            (before.as_slice(), swap.load().as_slice()),
            (&[1][..], &[1, 2][..])
        );
    }
}
