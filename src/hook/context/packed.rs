//! An object's JSON text as a snapshot keeps it: the text with its repeated
//! subtrees cut out and shared, so 10,000 pods holding the same `managedFields`
//! entry, default `tolerations` or container list keep one copy of each.
//!
//! A [`Packed`] is the text's unshared bytes plus, in order, each shared piece and
//! the offset where it goes back. Written out (context files, the debug socket) the
//! pieces are put back: what a hook reads is the original text byte for byte. Which
//! subtrees are shared is decided by the monitor's interner (`monitor::intern`);
//! this type only holds and restores the result.

use std::borrow::Cow;
use std::fmt;
use std::io::{self, Write};
use std::sync::Arc;

/// Shared pieces and the offsets in the unshared text where they go back.
type Pieces = Arc<[(u32, Arc<str>)]>;

/// A JSON text with shared pieces; a clone shares everything (two reference
/// counts), so a snapshot read copies no text.
#[derive(Clone)]
pub(crate) struct Packed {
    /// The text with every shared piece cut out: the source text itself (no copy)
    /// when nothing is shared.
    rest: Arc<str>,
    /// Each shared piece and the offset in `rest` it goes back at, offsets
    /// ascending; `None` when nothing is shared.
    pieces: Option<Pieces>,
}

impl Packed {
    /// A text with nothing shared.
    pub(crate) fn plain(text: Arc<str>) -> Packed {
        Packed {
            rest: text,
            pieces: None,
        }
    }

    /// Builds a text piece by piece (the interner's output).
    pub(crate) fn builder(source: &Arc<str>) -> Builder<'_> {
        Builder {
            source,
            rest: String::new(),
            pieces: Vec::new(),
            copied_to: 0,
        }
    }

    fn pieces(&self) -> &[(u32, Arc<str>)] {
        self.pieces.as_deref().unwrap_or(&[])
    }

    /// Length of the whole text.
    pub(crate) fn len(&self) -> usize {
        self.rest.len() + self.pieces().iter().map(|(_, p)| p.len()).sum::<usize>()
    }

    /// Bytes this object holds alone: the unshared text and one reference per
    /// shared piece (tests).
    #[cfg(test)]
    pub(crate) fn own_bytes(&self) -> usize {
        self.rest.len() + std::mem::size_of_val(self.pieces())
    }

    /// How many pieces are shared.
    #[cfg(test)]
    pub(crate) fn shared_pieces(&self) -> usize {
        self.pieces().len()
    }

    /// The text's chunks in order: unshared runs and shared pieces.
    pub(crate) fn chunks(&self) -> impl Iterator<Item = &str> {
        let mut at = 0;
        let mut pieces = self.pieces().iter();
        let mut pending: Option<&str> = None;
        std::iter::from_fn(move || {
            if let Some(p) = pending.take() {
                return Some(p);
            }
            match pieces.next() {
                Some((offset, piece)) => {
                    let offset = (*offset as usize).min(self.rest.len());
                    let run = self.rest.get(at..offset).unwrap_or("");
                    at = offset;
                    pending = Some(piece);
                    Some(run)
                }
                None if at <= self.rest.len() => {
                    let run = self.rest.get(at..).unwrap_or("");
                    at = self.rest.len() + 1;
                    Some(run)
                }
                None => None,
            }
        })
        .filter(|c| !c.is_empty())
    }

    /// Writes the whole text.
    pub(crate) fn write_to(&self, w: &mut dyn Write) -> io::Result<()> {
        self.chunks().try_for_each(|c| w.write_all(c.as_bytes()))
    }

    /// The whole text (borrowed when nothing is shared).
    pub(crate) fn to_text(&self) -> Cow<'_, str> {
        if self.pieces.is_none() {
            return Cow::Borrowed(&self.rest);
        }
        let mut text = String::with_capacity(self.len());
        self.chunks().for_each(|c| text.push_str(c));
        Cow::Owned(text)
    }
}

impl PartialEq for Packed {
    /// Equal when the whole texts are, however they are cut.
    fn eq(&self, other: &Packed) -> bool {
        self.len() == other.len() && self.to_text() == other.to_text()
    }
}

impl fmt::Debug for Packed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&*self.to_text(), f)
    }
}

/// A [`Packed`] under construction from its source text.
pub(crate) struct Builder<'a> {
    source: &'a Arc<str>,
    rest: String,
    pieces: Vec<(u32, Arc<str>)>,
    copied_to: usize,
}

impl Builder<'_> {
    /// Cuts `source[start..end]` out and refers to `piece` (the same text, shared)
    /// instead. Ranges must come in order and not overlap; one that does not is
    /// left in the text.
    pub(crate) fn share(&mut self, start: usize, end: usize, piece: Arc<str>) {
        let fits = start >= self.copied_to && end <= self.source.len() && start <= end;
        let (Some(before), true) = (self.source.get(self.copied_to..start), fits) else {
            return;
        };
        let Ok(offset) = u32::try_from(self.rest.len() + before.len()) else {
            return;
        };
        if self.pieces.is_empty() {
            self.rest.reserve(self.source.len() - (end - start));
        }
        self.rest.push_str(before);
        self.pieces.push((offset, piece));
        self.copied_to = end;
    }

    /// The finished text.
    pub(crate) fn finish(mut self) -> Packed {
        if self.pieces.is_empty() {
            return Packed::plain(Arc::clone(self.source));
        }
        self.rest
            .push_str(self.source.get(self.copied_to..).unwrap_or(""));
        Packed {
            rest: Arc::from(self.rest),
            pieces: Some(Arc::from(self.pieces)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pieces_go_back_where_they_were_cut() {
        let text: Arc<str> = Arc::from(r#"{"a":[1,2,3],"b":{"c":"d"},"e":[]}"#);
        let mut b = Packed::builder(&text);
        b.share(5, 12, Arc::from("[1,2,3]"));
        b.share(17, 26, Arc::from(r#"{"c":"d"}"#));
        let p = b.finish();
        assert_eq!(p.to_text(), &*text);
        assert_eq!(p.len(), text.len());
        assert_eq!(p.shared_pieces(), 2);
        let mut out = Vec::new();
        p.write_to(&mut out).unwrap();
        assert_eq!(out, text.as_bytes());
        assert_eq!(p, Packed::plain(text));
    }

    #[test]
    fn a_piece_at_either_end_and_overlaps_refused() {
        let text: Arc<str> = Arc::from("[1][2]");
        let mut b = Packed::builder(&text);
        b.share(0, 3, Arc::from("[1]"));
        b.share(1, 4, Arc::from("xxx")); // overlaps the first: left in
        b.share(3, 6, Arc::from("[2]"));
        let p = b.finish();
        assert_eq!(p.to_text(), &*text);
        assert_eq!(p.shared_pieces(), 2);
        assert_eq!(p.chunks().collect::<Vec<_>>(), ["[1]", "[2]"]);
    }

    #[test]
    fn nothing_shared_keeps_the_source_text_without_a_copy() {
        let text: Arc<str> = Arc::from("{}");
        let p = Packed::builder(&text).finish();
        assert_eq!(Arc::strong_count(&text), 2);
        assert!(matches!(p.to_text(), Cow::Borrowed("{}")));
    }
}
