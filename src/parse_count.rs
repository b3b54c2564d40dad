//! How many times an object's JSON text is parsed, counted in tests: "decode once"
//! (`docs/threads.md`, "Life of an event") is a claim the tests check. Every
//! place that reads an object's text into something (the canonical decoder, jaq's
//! input, a LIST page) calls [`parsed`]; outside tests it compiles to nothing.
//!
//! Tests run in parallel threads and the reflector decodes on its own thread, so
//! counts are kept per marker, not per thread: a test registers a string only its
//! objects contain (a unique namespace, say) and reads how many parses of texts
//! holding it happened.

/// Notes one parse of `text` (an object's JSON, or a page holding objects).
#[inline(always)]
pub(crate) fn parsed(text: &str) {
    #[cfg(test)]
    counting::note(text);
    #[cfg(not(test))]
    let _ = text;
}

#[cfg(test)]
pub(crate) use counting::Counter;

#[cfg(test)]
mod counting {
    use std::sync::Mutex;

    /// Markers being counted, with their counts.
    static MARKERS: Mutex<Vec<(String, usize)>> = Mutex::new(Vec::new());

    pub(super) fn note(text: &str) {
        let mut markers = MARKERS.lock().unwrap_or_else(|p| p.into_inner());
        for (marker, count) in markers.iter_mut() {
            *count += text.matches(marker.as_str()).count();
        }
    }

    /// Counts parses of texts that contain a marker, from creation until dropped.
    /// A page holding several marked objects counts once per object in it.
    pub(crate) struct Counter(String);

    impl Counter {
        pub(crate) fn new(marker: &str) -> Counter {
            let mut markers = MARKERS.lock().unwrap_or_else(|p| p.into_inner());
            markers.push((marker.to_string(), 0));
            Counter(marker.to_string())
        }

        /// Parses counted so far.
        pub(crate) fn get(&self) -> usize {
            let markers = MARKERS.lock().unwrap_or_else(|p| p.into_inner());
            markers
                .iter()
                .find(|(m, _)| *m == self.0)
                .map_or(0, |(_, c)| *c)
        }
    }

    impl Drop for Counter {
        fn drop(&mut self) {
            let mut markers = MARKERS.lock().unwrap_or_else(|p| p.into_inner());
            markers.retain(|(m, _)| *m != self.0);
        }
    }
}
