//! Tests: hook patch parsing, strict/lenient apply, compaction (spec §3.3).

use super::*;
use crate::addon::config::values::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------- patch parsing (§3.3)

#[test]
fn parse_array_object_and_stream() {
    let ops =
        parse_patch(br#"[{"op":"add","path":"/a/b","value":1},{"op":"remove","path":"/a/c"}]"#)
            .unwrap();
    assert_eq!(ops, vec![add("/a/b", json!(1)), remove("/a/c")]);

    let ops = parse_patch(br#"{"op":"add","path":"/x","value":null}"#).unwrap();
    assert_eq!(ops, vec![add("/x", Value::Null)]);

    let stream = b"{\"op\":\"add\",\"path\":\"/a\",\"value\":1}\n\n\n[{\"op\":\"remove\",\"path\":\"/b\"}]\n  \n{\"op\":\"add\",\"path\":\"/c\",\"value\":[3]}\n";
    let ops = parse_patch(stream).unwrap();
    assert_eq!(
        ops,
        vec![add("/a", json!(1)), remove("/b"), add("/c", json!([3]))]
    );
}

#[test]
fn parse_empty_is_no_ops() {
    assert!(parse_patch(b"").unwrap().is_empty());
    assert!(parse_patch(b"  \n\t\n").unwrap().is_empty());
    assert!(parse_patch(b"[]").unwrap().is_empty());
}

#[test]
fn parse_rejects_replace_and_garbage() {
    let err = parse_patch(br#"[{"op":"replace","path":"/a","value":1}]"#)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unsupported patch operation 'replace'"),
        "{err}"
    );
    let err = parse_patch(b"this is not json").unwrap_err().to_string();
    assert!(err.contains("bad JSON"), "{err}");
    let err = parse_patch(b"42").unwrap_err().to_string();
    assert!(err.contains("expected an array of operations"), "{err}");
    let err = parse_patch(br#"[{"op":"add","path":"/a"}]"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("'value'"), "{err}");
    let err = parse_patch(br#"{"op":"add","path":"a","value":1}"#)
        .unwrap_err()
        .to_string();
    assert!(err.contains("JSON pointer"), "{err}");
}

#[test]
fn parse_bounds_ops_count() {
    let one = r#"{"op":"remove","path":"/a"}"#;
    let text = vec![one; 10_001].join("\n");
    let err = parse_patch(text.as_bytes()).unwrap_err().to_string();
    assert!(err.contains("more than 10000"), "{err}");
    let text = vec![one; 10_000].join("\n");
    assert_eq!(parse_patch(text.as_bytes()).unwrap().len(), 10_000);
}

#[test]
fn root_of_is_first_segment() {
    assert_eq!(root_of(&add("/global/a", json!(1))), "global");
    assert_eq!(root_of(&remove("/fooEnabled")), "fooEnabled");
    assert_eq!(root_of(&remove("")), "");
}

#[test]
fn to_json_lists_ops() {
    assert_eq!(
        to_json(&[add("/a", json!(1)), remove("/b")]),
        json!([{"op":"add","path":"/a","value":1},{"op":"remove","path":"/b"}])
    );
}

// ---------------------------------------------------------------- patch apply

#[test]
fn strict_remove_of_missing_path_fails_and_leaves_doc_unchanged() {
    let mut doc = json!({"m": {"a": 1}});
    let err = apply_strict(&mut doc, &[add("/m/b", json!(2)), remove("/m/zzz")])
        .unwrap_err()
        .to_string();
    assert!(err.contains("operation 1"), "{err}");
    assert!(err.contains("/m/zzz"), "{err}");
    assert_eq!(doc, json!({"m": {"a": 1}}));
}

#[test]
fn strict_add_with_missing_parent_fails() {
    let mut doc = json!({"m": {}});
    let err = apply_strict(&mut doc, &[add("/m/x/y", json!(1))])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("operation 0") && err.contains("/m/x/y"),
        "{err}"
    );
    assert_eq!(doc, json!({"m": {}}));
}

#[test]
fn array_index_rules() {
    let mut doc = json!({"l": [1, 2]});
    apply_strict(
        &mut doc,
        &[
            add("/l/-", json!(3)),
            add("/l/0", json!(0)),
            add("/l/4", json!(4)),
        ],
    )
    .unwrap();
    assert_eq!(doc, json!({"l": [0, 1, 2, 3, 4]}));
    apply_strict(&mut doc, &[remove("/l/1")]).unwrap();
    assert_eq!(doc, json!({"l": [0, 2, 3, 4]}));
    assert!(apply_strict(&mut doc, &[add("/l/9", json!(9))]).is_err());
    assert!(apply_strict(&mut doc, &[add("/l/01", json!(9))]).is_err());
    assert!(apply_strict(&mut doc, &[remove("/l/4")]).is_err());
    assert!(apply_strict(&mut doc, &[remove("/l/-")]).is_err());
    assert_eq!(doc, json!({"l": [0, 2, 3, 4]}));
}

#[test]
fn pointer_escapes() {
    let mut doc = json!({"m": {}});
    apply_strict(
        &mut doc,
        &[add("/m/a~1b", json!(1)), add("/m/c~0d", json!(2))],
    )
    .unwrap();
    assert_eq!(doc, json!({"m": {"a/b": 1, "c~d": 2}}));
}

#[test]
fn lenient_skips_missing_removes_only() {
    let mut doc = json!({"m": {"a": 1}});
    apply_lenient(
        &mut doc,
        &[remove("/m/zzz"), remove("/m/x/y"), add("/m/b", json!(2))],
    )
    .unwrap();
    assert_eq!(doc, json!({"m": {"a": 1, "b": 2}}));
    assert!(apply_lenient(&mut doc, &[add("/m/x/y", json!(1))]).is_err());
}

#[test]
fn compaction_rules() {
    let stored = vec![
        add("/m/a", json!(1)),
        add("/m/obj/x", json!(1)),
        add("/m/z", json!(1)),
    ];
    let new = vec![
        add("/m/a", json!(2)),
        remove("/m/obj"),
        add("/m/b", json!(3)),
    ];
    assert_eq!(
        compact(&stored, &new),
        vec![
            add("/m/a", json!(2)),
            add("/m/b", json!(3)),
            remove("/m/obj"),
            add("/m/z", json!(1))
        ]
    );
    // A sub-path op after its parent op survives; a sibling sharing a prefix is kept.
    let out = compact(
        &[add("/m/ab", json!(0))],
        &[add("/m/a", json!({})), add("/m/a/c", json!(1))],
    );
    assert_eq!(
        out,
        vec![
            add("/m/a", json!({})),
            add("/m/a/c", json!(1)),
            add("/m/ab", json!(0))
        ]
    );
}

/// A patch far over the op cap is refused after reading the ops below the cap: it
/// used to be built whole first (300,000 ops in 14 MB peaked at 269 MB of RSS;
/// issue 27 item 7). Counted as bytes allocated while parsing (all of them, freed or
/// not: an upper bound on the peak).
#[test]
fn a_patch_over_the_op_cap_is_refused_without_building_it_whole() {
    let op = r#"{"op":"add","path":"/global/a","value":{"k":"v"}},"#;
    let mut text = String::from("[");
    for _ in 0..300_000 {
        text.push_str(op);
    }
    text.pop();
    text.push(']');
    assert!(text.len() < 16 * 1024 * 1024, "under the byte cap");
    let (result, _, bytes) = crate::alloc_count::measure(|| parse_patch(text.as_bytes()));
    assert_eq!(
        result.expect_err("refused").to_string(),
        "values patch: more than 10000 operations"
    );
    // Measured: 21 MB (the first 10,000 ops, with the buffers they grew through);
    // 428 MB before.
    assert!(
        bytes < 48 * 1024 * 1024,
        "allocated {bytes} bytes to refuse a {}-byte patch",
        text.len()
    );
    // The same in a stream of single-op documents.
    let stream = op.trim_end_matches(',').repeat(300_000);
    let (result, _, bytes) = crate::alloc_count::measure(|| parse_patch(stream.as_bytes()));
    assert_eq!(
        result.expect_err("refused").to_string(),
        "values patch: more than 10000 operations"
    );
    assert!(bytes < 48 * 1024 * 1024, "allocated {bytes} bytes");
}
