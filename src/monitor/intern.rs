//! Sharing what watched objects repeat (issue 41): real objects carry the same
//! large subtrees again and again (a Pod's `managedFields` entry, its default
//! `tolerations`, its container list, the owner references and labels of its
//! ReplicaSet), so a snapshot of 10,000 pods on a real API server held twice the
//! bytes of the same pods on kube-sim. The interner turns an object's canonical
//! text into a [`Packed`] whose repeated subtrees point at one shared copy.
//!
//! The rule, per object and a subtree at a time from the top: a subtree (object
//! or array of at least [`MIN_PIECE`] bytes) already shared is referred to; one
//! seen once before becomes shared on this second sight; one never seen is
//! remembered (its hash only) and its children are looked at instead. So a
//! subtree is shared from its second occurrence on, the largest repeated one
//! wins over its parts, and text met once costs a hash in a fixed table. The
//! object's top level is never shared (it holds the uid). Nothing is dropped or
//! rewritten: a packed text written out is the canonical text byte for byte.
//!
//! Shared pieces no object refers to any more are swept when the table has
//! doubled since the last sweep. One interner serves the whole process (every
//! binding of every watch shares its pieces); the monitor thread is the only
//! writer in practice, so its mutex is uncontended.

use crate::canonical::string_end;
use crate::hook::context::Packed;
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, DefaultHasher, Hash, Hasher};
use std::sync::{Arc, Mutex};

/// Smallest subtree worth sharing: a reference costs 24 bytes and the table
/// entry more, so short subtrees stay in the object's own text.
pub(crate) const MIN_PIECE: usize = 64;

/// Slots of the table of subtrees seen once: a fixed 32 kB, no allocation while
/// packing; a newer subtree takes an older one's slot (a subtree that repeats is
/// usually met again soon after, e.g. by the next list item).
const SEEN_SLOTS: usize = 4_096;

/// Pieces kept before the first sweep.
const FIRST_SWEEP: usize = 1_024;

/// The process-wide interner.
static INTERNER: Mutex<Interner> = Mutex::new(Interner::new());

/// Packs `text` (an object's canonical JSON) with the process-wide interner.
pub(crate) fn pack(text: &Arc<str>) -> Packed {
    let mut interner = INTERNER.lock().unwrap_or_else(|p| p.into_inner());
    interner.pack(text)
}

/// A hasher for keys that already are 64-bit hashes.
#[derive(Default)]
struct Identity(u64);

impl Hasher for Identity {
    fn finish(&self) -> u64 {
        self.0
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(*b);
        }
    }
    fn write_u64(&mut self, n: u64) {
        self.0 = n;
    }
}

type ByHash = BuildHasherDefault<Identity>;

/// The table of shared subtrees and the hashes of those seen once.
pub(crate) struct Interner {
    shared: HashMap<u64, Arc<str>, ByHash>,
    /// Hashes of subtrees seen once, each in the slot its hash picks (0: empty).
    seen: [u64; SEEN_SLOTS],
    sweep_at: usize,
}

impl Default for Interner {
    fn default() -> Self {
        Interner::new()
    }
}

impl Interner {
    /// An empty interner.
    pub(crate) const fn new() -> Interner {
        Interner {
            shared: HashMap::with_hasher(BuildHasherDefault::new()),
            seen: [0; SEEN_SLOTS],
            sweep_at: FIRST_SWEEP,
        }
    }

    /// `text` with its repeated subtrees shared. A text that is not a JSON object
    /// or array (never the case for a watched object) is kept whole.
    pub(crate) fn pack(&mut self, text: &Arc<str>) -> Packed {
        let mut out = Packed::builder(text);
        let bytes = text.as_bytes();
        if matches!(bytes.first(), Some(b'{' | b'[')) {
            for (start, end) in Children::new(bytes, 0) {
                self.visit(text, start, end, &mut out);
            }
        }
        self.sweep_if_grown();
        out.finish()
    }

    /// Number of shared pieces in the table.
    #[cfg(test)]
    pub(crate) fn shared_len(&self) -> usize {
        self.shared.len()
    }

    /// Shares `text[start..end]` or looks into it (the rule in the module doc).
    fn visit(
        &mut self,
        text: &str,
        start: usize,
        end: usize,
        out: &mut crate::hook::context::Builder,
    ) {
        let Some(sub) = text.get(start..end) else {
            return;
        };
        if sub.len() < MIN_PIECE || !matches!(sub.as_bytes()[0], b'{' | b'[') {
            return;
        }
        let hash = hash_of(sub).max(1);
        if let Some(piece) = self.shared.get(&hash) {
            if &**piece == sub {
                out.share(start, end, Arc::clone(piece));
            }
            // A hash collision with different text: left in the object's text.
            return;
        }
        let slot = &mut self.seen[(hash % SEEN_SLOTS as u64) as usize];
        if *slot == hash {
            *slot = 0;
            let piece: Arc<str> = Arc::from(sub);
            self.shared.insert(hash, Arc::clone(&piece));
            out.share(start, end, piece);
            return;
        }
        *slot = hash;
        for (s, e) in Children::new(text.as_bytes(), start) {
            self.visit(text, s, e, out);
        }
    }

    /// Drops pieces only the table still holds, once it has doubled.
    fn sweep_if_grown(&mut self) {
        if self.shared.len() < self.sweep_at {
            return;
        }
        self.shared.retain(|_, piece| Arc::strong_count(piece) > 1);
        self.sweep_at = (self.shared.len() * 2).max(FIRST_SWEEP);
    }
}

fn hash_of(text: &str) -> u64 {
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// The byte ranges of the values directly inside the object or array opening at
/// `open` (object values, not keys). Malformed text ends the walk early.
struct Children<'a> {
    bytes: &'a [u8],
    is_object: bool,
    /// Where the next entry starts; `None` once the walk is over.
    pos: Option<usize>,
}

impl Children<'_> {
    fn new(bytes: &[u8], open: usize) -> Children<'_> {
        let empty = matches!(bytes.get(open + 1), Some(b'}' | b']') | None);
        Children {
            bytes,
            is_object: bytes.get(open) == Some(&b'{'),
            pos: (!empty).then_some(open + 1),
        }
    }
}

impl Iterator for Children<'_> {
    type Item = (usize, usize);

    fn next(&mut self) -> Option<(usize, usize)> {
        let mut pos = self.pos.take()?;
        if self.is_object {
            let key_end = value_end(self.bytes, pos)?;
            if self.bytes.get(key_end) != Some(&b':') {
                return None;
            }
            pos = key_end + 1;
        }
        let end = value_end(self.bytes, pos)?;
        if self.bytes.get(end) == Some(&b',') {
            self.pos = Some(end + 1);
        }
        Some((pos, end))
    }
}

/// Just past the compact JSON value starting at `start`.
fn value_end(bytes: &[u8], start: usize) -> Option<usize> {
    match bytes.get(start)? {
        b'"' => string_end(bytes, start),
        b'{' | b'[' => container_end(bytes, start),
        _ => {
            let len = bytes
                .get(start..)?
                .iter()
                .position(|b| matches!(b, b',' | b'}' | b']' | b':'))
                .unwrap_or(bytes.len() - start);
            Some(start + len)
        }
    }
}

/// Just past the object or array opening at `open`.
fn container_end(bytes: &[u8], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    let mut pos = open;
    while pos < bytes.len() {
        match bytes[pos] {
            b'"' => {
                pos = string_end(bytes, pos)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(pos + 1);
                }
            }
            _ => {}
        }
        pos += 1;
    }
    None
}

#[cfg(test)]
#[path = "intern_tests.rs"]
mod tests;
