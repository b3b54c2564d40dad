//! What a scalar means to helm: go-yaml v2's YAML 1.1 resolution into a Go
//! `interface{}`, then sigs.k8s.io/yaml's turning of map keys into JSON strings.
//!
//! The rules, as read in go-yaml v2's `resolve.go`/`decode.go` and sigs.k8s.io/yaml's
//! `yaml.go` (our own code):
//! - quoted and block scalars are strings, unless an explicit tag says otherwise;
//! - plain `y Y yes Yes YES on On ON true True TRUE` are true, `n N no No NO off Off
//!   OFF false False FALSE` false, `~ null Null NULL` and the empty scalar null,
//!   `.inf .Inf .INF` (signed too) and `.nan .NaN .NAN` floats;
//! - a plain scalar starting with a digit or sign is, with every `_` removed, an
//!   integer as Go's `strconv.ParseInt(s, 0, 64)` reads it (`0x1F`, `0o17`, `0b101`,
//!   and a leading `0` means octal: `0644` is 420), else an unsigned 64-bit one, else
//!   a decimal float (`[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`), else a
//!   string; one starting with `.` is a float as `strconv.ParseFloat` reads it;
//! - timestamps stay the string they were written as; sexagesimal `190:20:30` is a
//!   string (go-yaml v2 dropped base-60 numbers);
//! - tags: `!!str`, `!!int`, `!!float` (an integer becomes a float), `!!bool`,
//!   `!!null`, `!!timestamp` must fit the value; `!!binary` is base64 decoded; any
//!   other tag leaves the value a string;
//! - map keys become strings: integers in decimal, floats as Go's
//!   `FormatFloat(f, 'g', -1, 32)`, booleans `true`/`false`; a null or an unsigned
//!   64-bit key cannot be converted.

use super::Problem;
use base64::Engine;

pub(crate) const STR: &str = "tag:yaml.org,2002:str";
pub(crate) const MERGE: &str = "tag:yaml.org,2002:merge";
const BOOL: &str = "tag:yaml.org,2002:bool";
const INT: &str = "tag:yaml.org,2002:int";
const FLOAT: &str = "tag:yaml.org,2002:float";
const NULL: &str = "tag:yaml.org,2002:null";
const TIMESTAMP: &str = "tag:yaml.org,2002:timestamp";
const BINARY: &str = "tag:yaml.org,2002:binary";

/// A scalar as go-yaml v2 decodes it into an `interface{}`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Scalar {
    Null,
    Bool(bool),
    /// Go `int`: everything that fits 64 signed bits.
    Int(i64),
    /// Go `uint64`: only above `i64::MAX`.
    Uint(u64),
    Float(f64),
    Str(String),
}

/// Resolves a scalar. `tag` is `None` when none was written; `quoted` is true for
/// every style but plain. Errors as go-yaml v2 words them.
pub(crate) fn scalar(value: &str, tag: Option<&str>, quoted: bool) -> Result<Scalar, Problem> {
    let tag = match tag {
        None if quoted => return Ok(Scalar::Str(value.to_string())),
        None => "",
        Some(t) => t,
    };
    if tag == BINARY {
        return binary(value);
    }
    if !matches!(tag, "" | STR | BOOL | INT | FLOAT | NULL | TIMESTAMP) || tag == STR {
        return Ok(Scalar::Str(value.to_string()));
    }
    let (kind, resolved) = plain(value, tag.is_empty() || tag == TIMESTAMP);
    if tag.is_empty() || kind == tag {
        return Ok(resolved);
    }
    match (tag, resolved) {
        (FLOAT, Scalar::Int(i)) => Ok(Scalar::Float(i as f64)),
        _ => Err(Problem::Tag {
            found: short(kind),
            value: value.to_string(),
            tag: short(tag),
        }),
    }
}

/// `tag:yaml.org,2002:int` → `!!int`.
fn short(tag: &str) -> String {
    match tag.strip_prefix("tag:yaml.org,2002:") {
        Some(rest) => format!("!!{rest}"),
        None => tag.to_string(),
    }
}

/// `!!binary`: standard base64 (padding required, line breaks ignored, as Go's
/// `base64.StdEncoding`), the bytes taken as a string (invalid UTF-8 bytes become
/// U+FFFD one by one, as Go's JSON encoder writes them).
fn binary(value: &str) -> Result<Scalar, Problem> {
    use base64::engine::{DecodePaddingMode, GeneralPurpose, GeneralPurposeConfig};
    const GO_STD: GeneralPurpose = GeneralPurpose::new(
        &base64::alphabet::STANDARD,
        GeneralPurposeConfig::new()
            .with_decode_allow_trailing_bits(true)
            .with_decode_padding_mode(DecodePaddingMode::RequireCanonical),
    );
    let text: String = value
        .chars()
        .filter(|c| !matches!(c, '\r' | '\n'))
        .collect();
    let bytes = GO_STD.decode(text).map_err(|_| Problem::Binary)?;
    Ok(Scalar::Str(lossy_per_byte(&bytes)))
}

/// UTF-8 with each byte that does not start a valid sequence replaced by U+FFFD.
fn lossy_per_byte(mut bytes: &[u8]) -> String {
    let mut out = String::new();
    loop {
        match std::str::from_utf8(bytes) {
            Ok(s) => {
                out.push_str(s);
                return out;
            }
            Err(e) => {
                let (good, rest) = bytes.split_at(e.valid_up_to());
                out.push_str(std::str::from_utf8(good).unwrap_or_default());
                out.push('\u{FFFD}');
                bytes = rest.get(1..).unwrap_or_default();
            }
        }
    }
}

/// Resolves a plain (or tagged) scalar: (the tag it resolves to, its value).
fn plain(value: &str, try_timestamp: bool) -> (&'static str, Scalar) {
    let Some(&first) = value.as_bytes().first() else {
        return (NULL, Scalar::Null);
    };
    let hint = match first {
        b'+' | b'-' | b'0'..=b'9' => b'D',
        b'y' | b'Y' | b'n' | b'N' | b't' | b'T' | b'f' | b'F' | b'o' | b'O' | b'~' => b'M',
        b'.' => b'.',
        _ => return (STR, Scalar::Str(value.to_string())),
    };
    if let Some(known) = known_word(value) {
        return known;
    }
    match hint {
        b'.' => {
            if let Some(f) = go_parse_float(value) {
                return (FLOAT, Scalar::Float(f));
            }
        }
        b'D' => {
            if try_timestamp && is_timestamp(value) {
                return (TIMESTAMP, Scalar::Str(value.to_string()));
            }
            let digits = value.replace('_', "");
            if let Some(i) = go_parse_int(&digits) {
                return (INT, Scalar::Int(i));
            }
            if let Some(u) = go_parse_uint(&digits) {
                return (INT, Scalar::Uint(u));
            }
            if is_yaml_float(&digits)
                && let Some(f) = go_parse_float(&digits)
            {
                return (FLOAT, Scalar::Float(f));
            }
        }
        _ => {}
    }
    (STR, Scalar::Str(value.to_string()))
}

/// The words go-yaml v2 looks up before anything else.
fn known_word(value: &str) -> Option<(&'static str, Scalar)> {
    Some(match value {
        "y" | "Y" | "yes" | "Yes" | "YES" | "true" | "True" | "TRUE" | "on" | "On" | "ON" => {
            (BOOL, Scalar::Bool(true))
        }
        "n" | "N" | "no" | "No" | "NO" | "false" | "False" | "FALSE" | "off" | "Off" | "OFF" => {
            (BOOL, Scalar::Bool(false))
        }
        "~" | "null" | "Null" | "NULL" => (NULL, Scalar::Null),
        ".nan" | ".NaN" | ".NAN" => (FLOAT, Scalar::Float(f64::NAN)),
        ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF" => {
            (FLOAT, Scalar::Float(f64::INFINITY))
        }
        "-.inf" | "-.Inf" | "-.INF" => (FLOAT, Scalar::Float(f64::NEG_INFINITY)),
        _ => return None,
    })
}

/// Go's `strconv.ParseUint(s, 0, 64)`: no sign; `0b`/`0o`/`0x` (either case) need a
/// digit after them; otherwise a leading `0` means octal (`0` alone is zero).
fn go_parse_uint(s: &str) -> Option<u64> {
    let b = s.as_bytes();
    let (radix, digits) = match b {
        [] => return None,
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'b') => (2, &s[2..]),
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'o') => (8, &s[2..]),
        [b'0', p, _, ..] if p.eq_ignore_ascii_case(&b'x') => (16, &s[2..]),
        [b'0', ..] => (8, &s[1..]),
        _ => (10, s),
    };
    if digits.is_empty() {
        return Some(0);
    }
    if !digits.bytes().all(|c| (c as char).is_digit(radix)) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

/// Go's `strconv.ParseInt(s, 0, 64)`: an optional sign, then [`go_parse_uint`].
fn go_parse_int(s: &str) -> Option<i64> {
    let (negative, rest) = match s.as_bytes().first() {
        Some(b'+') => (false, &s[1..]),
        Some(b'-') => (true, &s[1..]),
        _ => (false, s),
    };
    if rest.is_empty() {
        return None;
    }
    let magnitude = go_parse_uint(rest)?;
    if negative {
        0i64.checked_sub_unsigned(magnitude)
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// go-yaml v2's float pattern: `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`.
fn is_yaml_float(s: &str) -> bool {
    let b = s.strip_prefix(['+', '-']).unwrap_or(s).as_bytes();
    let digits = |b: &[u8]| b.iter().take_while(|c| c.is_ascii_digit()).count();
    let mut i = digits(b);
    if i == 0 {
        if b.first() != Some(&b'.') || digits(&b[1..]) == 0 {
            return false;
        }
        i = 1 + digits(&b[1..]);
    } else if b.get(i) == Some(&b'.') {
        i += 1 + digits(&b[i + 1..]);
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let exp = digits(&b[i..]);
        if exp == 0 {
            return false;
        }
        i += exp;
    }
    i == b.len()
}

/// Go's `strconv.ParseFloat(s, 64)` on a decimal float: `_` allowed between digits,
/// out of range (±Inf from finite digits) is an error. Non-decimal forms (hex
/// floats, `Inf`, `NaN`) never reach it: every caller has a `.`, digit or sign first
/// and a pattern or word check before.
fn go_parse_float(s: &str) -> Option<f64> {
    let cleaned;
    let text = if s.contains('_') {
        if !underscores_between_digits(s) {
            return None;
        }
        cleaned = s.replace('_', "");
        cleaned.as_str()
    } else {
        s
    };
    let body = text.strip_prefix(['+', '-']).unwrap_or(text);
    if !body.starts_with(|c: char| c.is_ascii_digit() || c == '.') {
        return None;
    }
    let f: f64 = text.parse().ok()?;
    f.is_finite().then_some(f)
}

/// Go's rule for `_` in numbers: only between two digits.
fn underscores_between_digits(s: &str) -> bool {
    let b = s.as_bytes();
    b.iter().enumerate().all(|(i, &c)| {
        c != b'_'
            || (i > 0 && b[i - 1].is_ascii_digit() && b.get(i + 1).is_some_and(u8::is_ascii_digit))
    })
}

/// Whether go-yaml v2 takes `s` as a timestamp (only matters for `!!timestamp`, since
/// a timestamp decodes to its text anyway): Go's `time.Parse` with one of
/// `2006-1-2T15:4:5.999999999Z07:00` (`T` or `t`), `2006-1-2 15:4:5.999999999`,
/// `2006-1-2`.
fn is_timestamp(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() < 5 || !b[..4].iter().all(u8::is_ascii_digit) || b[4] != b'-' {
        return false;
    }
    let year: u32 = s[..4].parse().unwrap_or(0);
    let mut rest = &b[5..];
    let Some(month) = number(&mut rest, 1, 12) else {
        return false;
    };
    if !eat(&mut rest, b'-') {
        return false;
    }
    let leap = year % 4 == 0 && (year % 100 != 0 || year % 400 == 0);
    let days = match month {
        2 if leap => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    if number(&mut rest, 1, days).is_none() {
        return false;
    }
    let Some((&sep, mut time)) = rest.split_first() else {
        return true;
    };
    if !matches!(sep, b'T' | b't' | b' ') {
        return false;
    }
    let clock = number(&mut time, 0, 23).is_some()
        && eat(&mut time, b':')
        && number(&mut time, 0, 59).is_some()
        && eat(&mut time, b':')
        && number(&mut time, 0, 59).is_some();
    if !clock {
        return false;
    }
    if time.len() >= 2 && matches!(time[0], b'.' | b',') && time[1].is_ascii_digit() {
        let n = time[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        time = &time[1 + n..];
    }
    match (sep, time) {
        (b' ', rest) => rest.is_empty(),
        (_, [b'Z']) => true,
        (_, [sign, h1, h2, b':', m1, m2]) => {
            matches!(sign, b'+' | b'-')
                && [h1, h2, m1, m2].iter().all(|c| c.is_ascii_digit())
                && (h1 - b'0') * 10 + (h2 - b'0') <= 24
                && (m1 - b'0') * 10 + (m2 - b'0') <= 60
        }
        _ => false,
    }
}

/// One or two digits within `min..=max`, consumed from `rest`.
fn number(rest: &mut &[u8], min: u32, max: u32) -> Option<u32> {
    let n = rest
        .iter()
        .take(2)
        .take_while(|c| c.is_ascii_digit())
        .count();
    if n == 0 {
        return None;
    }
    let v = rest[..n]
        .iter()
        .fold(0, |v, c| v * 10 + u32::from(c - b'0'));
    *rest = &rest[n..];
    (min..=max).contains(&v).then_some(v)
}

/// Consumes `c` from `rest` if it comes next.
fn eat(rest: &mut &[u8], c: u8) -> bool {
    match rest.split_first() {
        Some((&first, tail)) if first == c => {
            *rest = tail;
            true
        }
        _ => false,
    }
}

/// A map key as sigs.k8s.io/yaml turns it into a JSON object key.
pub(crate) fn key(k: &Scalar) -> Result<String, Problem> {
    Ok(match k {
        Scalar::Str(s) => s.clone(),
        Scalar::Bool(b) => b.to_string(),
        Scalar::Int(i) => i.to_string(),
        Scalar::Float(f) => go_format_g32(*f),
        Scalar::Null => return Err(Problem::Key(None)),
        Scalar::Uint(u) => return Err(Problem::Key(Some(*u))),
    })
}

/// Go's `strconv.FormatFloat(f, 'g', -1, 32)` with go-yaml's names for the
/// non-finite values: the shortest digits of the float32, exponent form when the
/// decimal exponent is below -4 or at least 6 (`1e+06`, `1.5e-05`).
fn go_format_g32(f: f64) -> String {
    let f = f as f32;
    if f.is_nan() {
        return ".nan".into();
    }
    if f.is_infinite() {
        return if f > 0.0 { ".inf" } else { "-.inf" }.into();
    }
    let sign = if f.is_sign_negative() { "-" } else { "" };
    if f == 0.0 {
        return format!("{sign}0");
    }
    // `{:e}` gives the shortest round-trip digits: `1.2345e6`, `5e-7`.
    let text = format!("{:e}", f.abs());
    let (mantissa, exp) = text.split_once('e').unwrap_or((&text, "0"));
    let exp: i32 = exp.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    if !(-4..6).contains(&exp) {
        let (first, more) = digits.split_at(1);
        let dot = if more.is_empty() { "" } else { "." };
        let esign = if exp < 0 { '-' } else { '+' };
        return format!("{sign}{first}{dot}{more}e{esign}{:02}", exp.abs());
    }
    let point = exp + 1;
    if point <= 0 {
        let zeros = "0".repeat(point.unsigned_abs() as usize);
        return format!("{sign}0.{zeros}{digits}");
    }
    let point = point as usize;
    if digits.len() <= point {
        format!("{sign}{digits}{}", "0".repeat(point - digits.len()))
    } else {
        format!("{sign}{}.{}", &digits[..point], &digits[point..])
    }
}
