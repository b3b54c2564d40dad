//! libyaml's event stream, made safe: the only `unsafe` of the YAML 1.1 reader.
//!
//! libyaml-rs is the Rust port of libyaml that yaml_serde already parses with; go-yaml
//! v2 (what helm and kubectl read YAML with) is a Go port of the same C library, so
//! both split a stream into the same documents, nodes, scalar styles, tags and
//! anchors. [`Parser`] hands out owned [`Event`]s; what the scalars mean is decided by
//! the caller (`resolve.rs`), not here. Runs on the post-renderer's only thread.
// Needs unsafe for libyaml's C API; each block says why it is sound (SAFETY).
#![allow(unsafe_code)]

use super::Problem;
use libyaml_rs as sys;
use std::ffi::CStr;
use std::mem::MaybeUninit;

/// The tag of a node as libyaml gives it: `!!int` arrives as `tag:yaml.org,2002:int`.
pub(crate) type Tag = Option<String>;

/// One parse event, with every string copied out of libyaml's buffers.
#[derive(Debug, PartialEq)]
pub(crate) enum Event {
    StreamStart,
    StreamEnd,
    DocumentStart,
    DocumentEnd,
    Alias(String),
    Scalar(Scalar),
    SequenceStart(Option<String>, Tag),
    SequenceEnd,
    MappingStart(Option<String>, Tag),
    MappingEnd,
}

/// A scalar event.
#[derive(Debug, PartialEq)]
pub(crate) struct Scalar {
    pub(crate) anchor: Option<String>,
    pub(crate) tag: Tag,
    /// The value after unquoting, escapes and folding (bytes: `!!binary` may follow).
    pub(crate) value: String,
    /// Written without quotes and not as a block scalar (`|`, `>`).
    pub(crate) plain: bool,
    /// libyaml's `plain_implicit`: plain without a tag, or with the bare `!` tag.
    pub(crate) plain_implicit: bool,
}

/// A pull parser over one input text.
pub(crate) struct Parser<'a> {
    /// Boxed: libyaml keeps a pointer to the parser inside it, so it must not move.
    sys: Box<sys::yaml_parser_t>,
    /// The input libyaml reads from; borrowed for as long as the parser lives.
    _input: &'a [u8],
    done: bool,
}

impl<'a> Parser<'a> {
    /// A parser reading `input` (UTF-8).
    pub(crate) fn new(input: &'a str) -> Parser<'a> {
        let mut raw = Box::<sys::yaml_parser_t>::new_uninit();
        // SAFETY: yaml_parser_initialize zeroes and fills the whole struct behind the
        // pointer, which is valid for writes; it only fails when allocation fails,
        // which aborts in Rust before returning. The input pointer and length describe
        // `input`, which outlives the parser ('a); libyaml only reads it.
        let sys = unsafe {
            let _ = sys::yaml_parser_initialize(raw.as_mut_ptr());
            let mut sys = raw.assume_init();
            sys::yaml_parser_set_encoding(&mut *sys, sys::YAML_UTF8_ENCODING);
            sys::yaml_parser_set_input_string(&mut *sys, input.as_ptr(), input.len() as u64);
            sys
        };
        Parser {
            sys,
            _input: input.as_bytes(),
            done: false,
        }
    }

    /// The next event, or libyaml's error as `line L column C: problem (context)`.
    pub(crate) fn next_event(&mut self) -> Result<Event, Problem> {
        if self.done {
            return Ok(Event::StreamEnd);
        }
        let mut raw = MaybeUninit::<sys::yaml_event_t>::uninit();
        // SAFETY: the parser is initialised and pinned in its box; yaml_parser_parse
        // zeroes and fills the event. On success the event's pointers are either null
        // or NUL-terminated strings (anchor, tag) and a `length`-byte buffer (value)
        // owned by the event; `convert` copies them before yaml_event_delete frees them.
        unsafe {
            let parser: *mut sys::yaml_parser_t = &mut *self.sys;
            if sys::yaml_parser_parse(parser, raw.as_mut_ptr()).fail {
                self.done = true;
                return Err(parse_error(&*parser));
            }
            let event = raw.as_mut_ptr();
            let converted = convert(&*event);
            sys::yaml_event_delete(event);
            if matches!(converted, Ok(Event::StreamEnd) | Err(_)) {
                self.done = true;
            }
            converted
        }
    }
}

impl Drop for Parser<'_> {
    fn drop(&mut self) {
        // SAFETY: the parser was initialised in `new` and is deleted once, here.
        unsafe { sys::yaml_parser_delete(&mut *self.sys) }
    }
}

/// Copies a NUL-terminated libyaml string; `None` for a null pointer.
///
/// # Safety
/// `ptr` is null or points to a NUL-terminated buffer that stays valid during the call.
unsafe fn c_string(ptr: *const u8) -> Option<String> {
    if ptr.is_null() {
        return None;
    }
    // SAFETY: per this function's contract.
    let bytes = unsafe { CStr::from_ptr(ptr.cast()) }.to_bytes();
    Some(String::from_utf8_lossy(bytes).into_owned())
}

/// Copies what we need out of a libyaml event.
///
/// # Safety
/// `event` was just filled by a successful yaml_parser_parse and not yet deleted.
unsafe fn convert(event: &sys::yaml_event_t) -> Result<Event, Problem> {
    // SAFETY: each union field is read only for the event type that sets it; the
    // pointers inside are valid per this function's contract.
    unsafe {
        Ok(match event.type_ {
            sys::YAML_STREAM_START_EVENT => Event::StreamStart,
            sys::YAML_STREAM_END_EVENT | sys::YAML_NO_EVENT => Event::StreamEnd,
            sys::YAML_DOCUMENT_START_EVENT => {
                // go-yaml v2 takes only `%YAML 1.1`; libyaml also takes 1.2.
                let version = event.data.document_start.version_directive;
                if !version.is_null() && ((*version).major, (*version).minor) != (1, 1) {
                    return Err(Problem::Version);
                }
                Event::DocumentStart
            }
            sys::YAML_DOCUMENT_END_EVENT => Event::DocumentEnd,
            sys::YAML_ALIAS_EVENT => {
                Event::Alias(c_string(event.data.alias.anchor).unwrap_or_default())
            }
            sys::YAML_SCALAR_EVENT => {
                let s = event.data.scalar;
                let value = if s.value.is_null() || s.length == 0 {
                    &[][..]
                } else {
                    std::slice::from_raw_parts(s.value, s.length as usize)
                };
                Event::Scalar(Scalar {
                    anchor: c_string(s.anchor),
                    tag: c_string(s.tag),
                    // The parser was told UTF-8 and checks it, so this never replaces.
                    value: String::from_utf8_lossy(value).into_owned(),
                    plain: s.style == sys::YAML_PLAIN_SCALAR_STYLE,
                    plain_implicit: s.plain_implicit,
                })
            }
            sys::YAML_SEQUENCE_START_EVENT => {
                let s = event.data.sequence_start;
                Event::SequenceStart(c_string(s.anchor), c_string(s.tag))
            }
            sys::YAML_SEQUENCE_END_EVENT => Event::SequenceEnd,
            sys::YAML_MAPPING_START_EVENT => {
                let m = event.data.mapping_start;
                Event::MappingStart(c_string(m.anchor), c_string(m.tag))
            }
            sys::YAML_MAPPING_END_EVENT => Event::MappingEnd,
            _ => return Err(Problem::UnknownEvent),
        })
    }
}

/// libyaml's error: `line L column C: problem (context)`, 1-based.
fn parse_error(parser: &sys::yaml_parser_t) -> Problem {
    // SAFETY: problem and context are null or static NUL-terminated strings.
    let (problem, context) = unsafe {
        (
            c_string(parser.problem.cast()),
            c_string(parser.context.cast()),
        )
    };
    let mark = parser.problem_mark;
    Problem::Syntax {
        line: mark.line as usize + 1,
        column: mark.column as usize + 1,
        problem: problem.unwrap_or_else(|| "unknown problem parsing YAML".to_string()),
        context,
    }
}
