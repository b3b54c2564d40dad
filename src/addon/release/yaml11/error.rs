//! Why a manifest cannot be read as YAML 1.1 or turned into JSON: a
//! [`Problem`] found in a document, and the [`YamlError`] that names the
//! document (1-based, counting every document) and the path inside it. Pure
//! data, built by the reader in `mod.rs`, `events.rs` and `resolve.rs`; the
//! messages are go-yaml v2's where helm would fail the same way.

use std::fmt;

/// What is wrong, without where.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Problem {
    /// libyaml refused the text at `line`:`column` (1-based).
    Syntax {
        line: usize,
        column: usize,
        problem: String,
        context: Option<String>,
    },
    /// A `%YAML` directive other than 1.1.
    Version,
    /// An event libyaml has but the reader does not know.
    UnknownEvent,
    /// A collection end with no open collection.
    Unbalanced,
    /// A mapping ended after a key.
    KeyWithoutValue,
    /// An alias used inside the node its anchor names.
    RecursiveAnchor(String),
    /// An alias of an anchor not defined before it.
    UnknownAnchor(String),
    /// A `<<` whose value is not a mapping nor a sequence of mappings.
    MergeWantsMap,
    /// More aliasing than go-yaml v2 allows.
    ExcessiveAliasing,
    /// Collections nested past the limit.
    TooDeep,
    /// A sequence or mapping used as a key.
    CollectionKey,
    /// A null key, or an unsigned 64-bit one above `i64::MAX`.
    Key(Option<u64>),
    /// `.inf`, `-.inf` or `.nan`, which JSON cannot hold.
    NoJsonForm(&'static str),
    /// A tagged scalar that does not decode as its tag (`cannot decode !!str
    /// `x` as a !!int`).
    Tag {
        found: String,
        value: String,
        tag: String,
    },
    /// A `!!binary` scalar that is not base64.
    Binary,
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Problem::Syntax {
                line,
                column,
                problem,
                context,
            } => {
                write!(f, "line {line} column {column}: {problem}")?;
                match context {
                    Some(c) => write!(f, " ({c})"),
                    None => Ok(()),
                }
            }
            Problem::Version => f.write_str("found incompatible YAML document (only %YAML 1.1)"),
            Problem::UnknownEvent => f.write_str("unknown libyaml event"),
            Problem::Unbalanced => f.write_str("unbalanced collection end"),
            Problem::KeyWithoutValue => f.write_str("a mapping ended without a value"),
            Problem::RecursiveAnchor(name) => write!(f, "anchor '{name}' value contains itself"),
            Problem::UnknownAnchor(name) => write!(f, "unknown anchor '{name}' referenced"),
            Problem::MergeWantsMap => {
                f.write_str("map merge requires map or sequence of maps as the value")
            }
            Problem::ExcessiveAliasing => f.write_str("document contains excessive aliasing"),
            Problem::TooDeep => f.write_str(&crate::yaml_depth::too_deep()),
            Problem::CollectionKey => f.write_str("a collection cannot be a map key"),
            Problem::Key(None) => f.write_str("a null map key cannot become a JSON key"),
            Problem::Key(Some(u)) => write!(
                f,
                "the map key {u} (above 64-bit signed) cannot become a JSON key"
            ),
            Problem::NoJsonForm(name) => {
                write!(f, "{name} has no JSON form (helm cannot send it either)")
            }
            Problem::Tag { found, value, tag } => {
                write!(f, "cannot decode {found} `{value}` as a {tag}")
            }
            Problem::Binary => f.write_str("!!binary value contains invalid base64 data"),
        }
    }
}

/// A [`Problem`] in document `document` at `path` (`metadata.labels: `, with
/// its separator, or empty).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct YamlError {
    pub(crate) document: usize,
    pub(crate) path: String,
    pub(crate) problem: Problem,
}

impl fmt::Display for YamlError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let YamlError {
            document,
            path,
            problem,
        } = self;
        match problem {
            Problem::Syntax { .. } | Problem::Version | Problem::UnknownEvent => {
                write!(f, "document {document}: invalid YAML: {problem}")
            }
            _ => write!(f, "document {document}: {path}{problem}"),
        }
    }
}

impl std::error::Error for YamlError {}
