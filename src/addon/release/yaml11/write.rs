//! JSON that every YAML reader takes to mean the same value: indented JSON, with
//! the characters YAML refuses raw (DEL, C1 controls, U+FFFE/U+FFFF) or reads as line
//! breaks or a byte-order mark (U+0085, U+2028, U+2029, U+FEFF) written as `\u`
//! escapes, which YAML's double-quoted strings read as JSON does. A key longer than a
//! YAML implicit key may be (1024 characters) is written as an explicit `? key`.

use serde_json::Value;
use std::fmt::Write as _;

/// Longest written key (quotes included) kept as an implicit `"key": value`.
const MAX_IMPLICIT_KEY: usize = 1000;

/// `value` as indented JSON (YAML-safe, see the module doc), without a final newline.
pub(crate) fn write(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value, 0);
    out
}

fn write_value(out: &mut String, value: &Value, indent: usize) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        // Integers as digits; floats as their shortest round-trip form (`1.5`, `1e21`,
        // `100.0`), which YAML 1.1 and 1.2 both read as that same float.
        Value::Number(n) => {
            let _ = write!(out, "{n}");
        }
        Value::String(s) => write_string(out, s),
        Value::Array(items) if items.is_empty() => out.push_str("[]"),
        Value::Object(map) if map.is_empty() => out.push_str("{}"),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                pad(out, indent + 2);
                write_value(out, item, indent + 2);
            }
            out.push('\n');
            pad(out, indent);
            out.push(']');
        }
        Value::Object(map) => {
            out.push('{');
            for (i, (k, v)) in map.iter().enumerate() {
                out.push_str(if i == 0 { "\n" } else { ",\n" });
                pad(out, indent + 2);
                let start = out.len();
                write_string(out, k);
                if out[start..].chars().count() > MAX_IMPLICIT_KEY {
                    out.insert_str(start, "? ");
                    out.push('\n');
                    pad(out, indent + 2);
                }
                out.push_str(": ");
                write_value(out, v, indent + 2);
            }
            out.push('\n');
            pad(out, indent);
            out.push('}');
        }
    }
}

fn pad(out: &mut String, n: usize) {
    out.extend(std::iter::repeat_n(' ', n));
}

/// A double-quoted string: JSON's escapes plus the YAML-unsafe characters above.
fn write_string(out: &mut String, s: &str) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\0'..='\u{1f}'
            | '\u{7f}'..='\u{9f}'
            | '\u{2028}'
            | '\u{2029}'
            | '\u{feff}'
            | '\u{fffe}'
            | '\u{ffff}' => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}
