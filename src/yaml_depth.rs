//! A cheap bound on how deeply a YAML (or JSON) text nests, checked before the
//! YAML parser sees it.
//!
//! The YAML parser stops at 128 levels, but only after reading every event of the
//! document, and that costs time quadratic in the depth: 40,000 `[` took 11.8 s to
//! reject. This scan is linear. It counts flow nesting (`[`, `{` outside quoted
//! strings and comments) exactly enough to refuse past [`MAX_DEPTH`], and bounds block
//! nesting by the indentation plus the `- `/`? `/`: ` indicators that open a level on
//! a line; text that could be nested past [`MAX_BLOCK_ESTIMATE`] by that bound is
//! refused too (real documents nest a few dozen levels at most). Documents within
//! the bounds go to the parser, whose own 128-level limit gives the same message.
//! Used on everything YAML that comes from outside: hooks' `--config` output and
//! patch files, addon-operator's ConfigMap.

/// Nesting levels accepted, as serde_json and the YAML parser accept.
pub(crate) const MAX_DEPTH: usize = 128;

/// The block-nesting bound above which a text is refused without parsing.
const MAX_BLOCK_ESTIMATE: usize = 1024;

/// The error for a text nested too deeply.
pub(crate) fn too_deep() -> String {
    format!("nested deeper than {MAX_DEPTH} levels")
}

/// Refuses `text` if it certainly or possibly nests past the limits above.
pub(crate) fn check(text: &str) -> Result<(), String> {
    let mut flow = 0usize;
    for line in text.lines() {
        let block = block_levels(line);
        let (end, deepest) = flow_in(line, flow);
        flow = end;
        if deepest > MAX_DEPTH || block.saturating_add(deepest) > MAX_BLOCK_ESTIMATE {
            return Err(too_deep());
        }
    }
    Ok(())
}

/// Indentation plus the indicators that open a block level at the line's start.
fn block_levels(line: &str) -> usize {
    let rest = line.trim_start_matches(' ');
    let mut levels = line.len() - rest.len();
    let mut rest = rest.as_bytes();
    while let [b'-' | b'?' | b':', b' ', tail @ ..] = rest {
        levels += 1;
        rest = tail;
        while let [b' ', tail @ ..] = rest {
            rest = tail;
        }
    }
    levels
}

/// Flow depth at the end of `line` and the deepest it got within the line, starting
/// at `depth` (a one-line document can nest 50,000 levels and close them again);
/// quoted strings and comments do not count. A quote opens a string only where a
/// scalar may start.
fn flow_in(line: &str, mut depth: usize) -> (usize, usize) {
    let bytes = line.as_bytes();
    let mut deepest = depth;
    let mut i = 0;
    let mut prev = b' ';
    while i < bytes.len() {
        let c = bytes[i];
        match c {
            b'#' if prev == b' ' || prev == b'\t' => break,
            b'"' | b'\'' if matches!(prev, b' ' | b'\t' | b'[' | b'{' | b',' | b':' | b'-') => {
                i = string_end(bytes, i);
            }
            b'[' | b'{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
        prev = c;
        i += 1;
    }
    (depth, deepest)
}

/// The index of the quote closing the string opened at `start` (or the line's end;
/// a multi-line quoted string is rare and only makes the count stricter).
fn string_end(bytes: &[u8], start: usize) -> usize {
    let quote = bytes[start];
    let mut i = start + 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if quote == b'"' => i += 1,
            c if c == quote => return i,
            _ => {}
        }
        i += 1;
    }
    bytes.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, Instant};

    #[test]
    fn ordinary_documents_pass() {
        let yaml = "configVersion: v1\nkubernetes:\n- name: a\n  jqFilter: '.metadata | {name: .name, x: [.a, .b]}'\n  labelSelector:\n    matchExpressions:\n    - {key: \"a[\", operator: In, values: [\"}\", x]}\n# comment with [[[[\nschedule: [{crontab: \"*/5 * * * *\"}]\n";
        assert_eq!(check(yaml), Ok(()));
        let json = serde_json::json!({"a": [[[[{"b": [1, 2, {"c": "[[[["}]}]]]]}).to_string();
        assert_eq!(check(&json), Ok(()));
    }

    #[test]
    fn deep_flow_nesting_is_refused_at_once() {
        for deep in ["[".repeat(40_000), "{a: ".repeat(40_000), "[".repeat(129)] {
            let started = Instant::now();
            assert_eq!(check(&deep), Err(too_deep()));
            assert!(started.elapsed() < Duration::from_millis(200));
        }
        assert_eq!(check(&"[".repeat(128)), Ok(()));
    }

    /// A one-line document whose nesting closes again on the same line used to pass
    /// (only the depth at the end of a line was looked at) and then cost the YAML
    /// scanner seconds (issue 27 item 3).
    #[test]
    fn deep_nesting_within_one_line_is_refused_at_once() {
        let n = 50_000;
        let one_line = format!(
            "{{\"configVersion\":\"v1\",\"x\":{}{}}}",
            "[".repeat(n),
            "]".repeat(n)
        );
        let started = Instant::now();
        assert_eq!(check(&one_line), Err(too_deep()));
        assert!(started.elapsed() < Duration::from_millis(100));
        let flow_yaml = format!("a: {}1{}\n", "{b: ".repeat(200), "}".repeat(200));
        assert_eq!(check(&flow_yaml), Err(too_deep()));
        let ok = format!("a: {}1{}\n", "[".repeat(128), "]".repeat(128));
        assert_eq!(check(&ok), Ok(()));
    }

    #[test]
    fn deep_block_nesting_is_refused_at_once() {
        assert_eq!(check(&format!("{}x", "- ".repeat(40_000))), Err(too_deep()));
        let stairs: String = (0..2000)
            .map(|i| format!("{}k:\n", " ".repeat(i)))
            .collect();
        assert_eq!(check(&stairs), Err(too_deep()));
    }

    #[test]
    fn what_passes_the_scan_is_quick_for_the_parser_too() {
        // The worst the scan lets through, parsed for real: the parser's own limit
        // answers, quickly.
        let started = Instant::now();
        let text = format!("{}x", "- ".repeat(MAX_BLOCK_ESTIMATE - 1));
        assert_eq!(check(&text), Ok(()));
        let parsed: Result<serde_json::Value, _> = serde_yaml::from_str(&text);
        assert!(parsed.is_err());
        assert!(
            started.elapsed() < Duration::from_secs(2),
            "{:?}",
            started.elapsed()
        );
    }
}
