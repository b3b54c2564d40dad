//! Unit tests of the YAML 1.1 reader and the writer: each form go-yaml v2 and
//! sigs.k8s.io/yaml give a meaning to, as input → the JSON value helm would send,
//! and the writer's output read back to the same value.

use super::*;
use serde_json::json;

/// The value of `v` in the one-document mapping `v: <text>`.
fn v(text: &str) -> Value {
    let docs = documents(&format!("v: {text}\n")).unwrap_or_else(|e| panic!("{text}: {e}"));
    docs[0]["v"].clone()
}

/// The only document of `text`.
fn one(text: &str) -> Value {
    let mut docs = documents(text).unwrap_or_else(|e| panic!("{text}: {e}"));
    assert_eq!(docs.len(), 1, "{text}");
    docs.remove(0)
}

/// The error reading `text`.
fn err(text: &str) -> String {
    documents(text).expect_err(text).to_string()
}

#[test]
fn yaml_1_1_booleans_plain_are_booleans_quoted_are_strings() {
    for t in [
        "y", "Y", "yes", "Yes", "YES", "on", "On", "ON", "true", "True", "TRUE",
    ] {
        assert_eq!(v(t), json!(true), "{t}");
        assert_eq!(v(&format!("\"{t}\"")), json!(t), "\"{t}\"");
        assert_eq!(v(&format!("'{t}'")), json!(t), "'{t}'");
    }
    for t in [
        "n", "N", "no", "No", "NO", "off", "Off", "OFF", "false", "False", "FALSE",
    ] {
        assert_eq!(v(t), json!(false), "{t}");
        assert_eq!(v(&format!("\"{t}\"")), json!(t), "\"{t}\"");
    }
    for t in ["yEs", "oN", "nO", "tRUE", "onn", "yes!"] {
        assert_eq!(v(t), json!(t), "{t} is no boolean");
    }
    // Block scalars are strings too.
    assert_eq!(v("|-\n  off"), json!("off"));
    assert_eq!(v(">-\n  yes"), json!("yes"));
}

#[test]
fn nulls() {
    for t in ["~", "null", "Null", "NULL", ""] {
        assert_eq!(v(t), Value::Null, "{t:?}");
    }
    assert_eq!(v("'~'"), json!("~"));
    assert_eq!(v("\"null\""), json!("null"));
    assert_eq!(v("nULL"), json!("nULL"));
}

#[test]
fn integers_as_go_parse_int_reads_them() {
    let cases: &[(&str, Value)] = &[
        ("0644", json!(420)),
        ("0755", json!(493)),
        ("0o17", json!(15)),
        ("0O17", json!(15)),
        ("0x1F", json!(31)),
        ("0X1f", json!(31)),
        ("-0x1F", json!(-31)),
        ("0b101", json!(5)),
        ("-0b101", json!(-5)),
        ("+12", json!(12)),
        ("-12", json!(-12)),
        ("1_000", json!(1000)),
        ("1__0", json!(10)),
        ("0", json!(0)),
        ("-0", json!(0)),
        ("00", json!(0)),
        ("9223372036854775807", json!(i64::MAX)),
        ("-9223372036854775808", json!(i64::MIN)),
        ("9223372036854775808", json!(9223372036854775808u64)),
        ("18446744073709551615", json!(u64::MAX)),
        ("0xFFFFFFFFFFFFFFFF", json!(u64::MAX)),
    ];
    for (t, want) in cases {
        assert_eq!(&v(t), want, "{t}");
        assert_eq!(v(&format!("'{t}'")), json!(t), "quoted {t}");
    }
}

#[test]
fn numbers_that_are_floats_or_strings() {
    let cases: &[(&str, Value)] = &[
        // Not octal, so a decimal float.
        ("08", json!(8.0)),
        ("09.5", json!(9.5)),
        ("1.5", json!(1.5)),
        ("1e3", json!(1000.0)),
        ("1E3", json!(1000.0)),
        ("1.e3", json!(1000.0)),
        ("1.", json!(1.0)),
        (".5", json!(0.5)),
        ("+.5", json!(0.5)),
        ("-.5", json!(-0.5)),
        ("1_000.5", json!(1000.5)),
        (".5_5", json!(0.55)),
        ("-1.5e-3", json!(-0.0015)),
        // Beyond 64 bits: a float (a sign stops the unsigned reading too).
        ("18446744073709551616", json!(18446744073709551616.0)),
        ("12345678901234567890123", json!(1.2345678901234568e22)),
        ("+9223372036854775808", json!(9223372036854775808.0)),
        ("-9223372036854775809", json!(-9223372036854775809.0)),
        // Strings: no number at all.
        ("0x", json!("0x")),
        ("0xG", json!("0xG")),
        ("0b102", json!("0b102")),
        ("_1", json!("_1")),
        (".5_", json!(".5_")),
        ("._5", json!("._5")),
        ("1e400", json!("1e400")),
        ("1e", json!("1e")),
        (".", json!(".")),
        ("1.2.3", json!("1.2.3")),
        ("1-2", json!("1-2")),
        ("+", json!("+")),
        ("0x1p-2", json!("0x1p-2")),
        ("1,000", json!("1,000")),
        // Sexagesimal numbers are strings to go-yaml v2.
        ("190:20:30", json!("190:20:30")),
        ("-1:30", json!("-1:30")),
        // Go's ParseFloat words are not YAML's.
        ("Infinity", json!("Infinity")),
        ("NaN", json!("NaN")),
        ("inf", json!("inf")),
    ];
    for (t, want) in cases {
        assert_eq!(&v(t), want, "{t}");
    }
    // Negative zero stays a float.
    assert!(
        v("-0.0")
            .as_f64()
            .is_some_and(|f| f == 0.0 && f.is_sign_negative())
    );
}

#[test]
fn infinity_and_nan_have_no_json_form() {
    for t in [
        ".inf", ".Inf", ".INF", "+.inf", "-.inf", "-.INF", ".nan", ".NaN", ".NAN",
    ] {
        let e = err(&format!("a:\n  b: {t}\n"));
        assert!(
            e.contains("document 1") && e.contains("no JSON form"),
            "{t}: {e}"
        );
        assert!(e.contains("a.b: "), "{t}: {e}");
        assert_eq!(v(&format!("\"{t}\"")), json!(t));
    }
    assert_eq!(v(".info"), json!(".info"));
}

#[test]
fn timestamps_stay_the_text_they_were_written_as() {
    for t in [
        "2001-12-14t21:59:43.10-05:00",
        "2001-12-14T21:59:43Z",
        "2001-12-14 21:59:43.10",
        "2002-12-14",
        "2002-1-4",
    ] {
        assert_eq!(v(t), json!(t), "{t}");
        assert_eq!(v(&format!("\"{t}\"")), json!(t), "{t}");
        assert_eq!(v(&format!("!!timestamp {t}")), json!(t), "{t}");
    }
    for t in [
        "2002-13-01",
        "2002-02-30",
        "2001-12-14 21:59:43 +5",
        "2001-12-14T25:00:00Z",
    ] {
        assert_eq!(v(t), json!(t), "{t}");
        assert!(
            err(&format!("v: !!timestamp {t}\n")).contains("as a !!timestamp"),
            "{t}"
        );
    }
    assert_eq!(v("2000-02-29"), json!("2000-02-29"));
    assert!(documents("v: !!timestamp 1900-02-29\n").is_err());
}

#[test]
fn explicit_tags() {
    assert_eq!(v("!!str 0644"), json!("0644"));
    assert_eq!(v("!!str yes"), json!("yes"));
    assert_eq!(v("!!str ~"), json!("~"));
    assert_eq!(v("!!int \"0644\""), json!(420));
    assert_eq!(v("!!bool \"yes\""), json!(true));
    assert_eq!(v("!!float 1"), json!(1.0));
    assert_eq!(v("!!float '2.5'"), json!(2.5));
    assert_eq!(v("!!null ''"), Value::Null);
    assert_eq!(v("!!binary aGVsbG8="), json!("hello"));
    assert_eq!(v("!!binary |\n  aGVs\n  bG8="), json!("hello"));
    // Invalid UTF-8 bytes become U+FFFD one by one, as Go's JSON encoder writes them.
    assert_eq!(v("!!binary 4oI="), json!("\u{FFFD}\u{FFFD}"));
    // Other tags leave the value a string.
    assert_eq!(v("! 0644"), json!("0644"));
    assert_eq!(v("!custom yes"), json!("yes"));
    assert_eq!(v("!<tag:example.com,2000:x> 12"), json!("12"));
    assert_eq!(
        one("%TAG !e! tag:example.com,2000:\n---\nv: !e!x off\n"),
        json!({"v": "off"})
    );
    for (t, want) in [
        ("!!int abc", "cannot decode !!str `abc` as a !!int"),
        ("!!int 1.5", "cannot decode !!float `1.5` as a !!int"),
        ("!!bool 1", "cannot decode !!int `1` as a !!bool"),
        ("!!null x", "cannot decode !!str `x` as a !!null"),
        ("!!float yes", "cannot decode !!bool `yes` as a !!float"),
        (
            "!!binary '%%%'",
            "!!binary value contains invalid base64 data",
        ),
        (
            "!!binary aGVsbG8",
            "!!binary value contains invalid base64 data",
        ),
    ] {
        let e = err(&format!("v: {t}\n"));
        assert!(e.contains(want), "{t}: {e}");
    }
}

#[test]
fn keys_become_strings_as_sigs_k8s_io_yaml_converts_them() {
    assert_eq!(
        one("y: 1\non: 2\nn: 3\n\"y2\": 4\n'on': 5\nOFF: 6\n"),
        json!({"true": 2, "false": 6, "y2": 4, "on": 5})
    );
    assert_eq!(
        one("0644: a\n0x10: b\n-1: c\n~x: d\n2001-01-01: e\n"),
        json!({"420": "a", "16": "b", "-1": "c", "~x": "d", "2001-01-01": "e"})
    );
    // Float keys: Go's FormatFloat(f, 'g', -1, 32).
    assert_eq!(
        one(
            "1.5: a\n0.1: b\n1e6: c\n123456.0: d\n1234567.0: e\n0.0001: f\n0.00001: g\n\
             .inf: h\n-.inf: i\n.nan: j\n1.00000001: k\n-0.0: l\n3.14159265358979: m\n"
        ),
        json!({"1.5": "a", "0.1": "b", "1e+06": "c", "123456": "d", "1.234567e+06": "e",
               "0.0001": "f", "1e-05": "g", ".inf": "h", "-.inf": "i", ".nan": "j",
               "1": "k", "-0": "l", "3.1415927": "m"})
    );
    for (t, want) in [
        ("~: a\n", "null map key"),
        ("?\n: a\n", "null map key"),
        ("18446744073709551615: a\n", "cannot become a JSON key"),
        ("[a]: b\n", "collection cannot be a map key"),
        ("? {a: 1}\n: b\n", "collection cannot be a map key"),
    ] {
        let e = err(t);
        assert!(e.contains(want), "{t}: {e}");
    }
    // A later duplicate key wins.
    assert_eq!(one("a: 1\na: 2\n"), json!({"a": 2}));
    assert_eq!(one("on: 1\ntrue: 2\n"), json!({"true": 2}));
}

#[test]
fn anchors_aliases_and_merges() {
    assert_eq!(
        one("a: &x off\nb: *x\nc: &m {k: 0644}\nd: *m\ne: [*x, *m]\n"),
        json!({"a": false, "b": false, "c": {"k": 420}, "d": {"k": 420}, "e": [false, {"k": 420}]})
    );
    // Merges: explicit keys before or after, the first of a list wins, `!!merge`.
    assert_eq!(
        one("base: &b {a: 1, b: 2}\nmore: &c {b: 3, c: 4}\n\
             m1:\n  <<: *b\n  b: 9\n\
             m2:\n  b: 9\n  <<: *b\n\
             m3:\n  <<: [*c, *b]\n\
             m4:\n  !!merge <<: {x: on}\n\
             m5:\n  '<<': *b\n"),
        json!({
            "base": {"a": 1, "b": 2}, "more": {"b": 3, "c": 4},
            "m1": {"a": 1, "b": 9}, "m2": {"a": 1, "b": 2},
            "m3": {"a": 1, "b": 3, "c": 4}, "m4": {"x": true},
            "m5": {"<<": {"a": 1, "b": 2}}
        })
    );
    // An anchor redefined applies from there on; anchors do not cross documents.
    assert_eq!(
        one("a: &x 1\nb: *x\nc: &x 2\nd: *x\n"),
        json!({"a": 1, "b": 1, "c": 2, "d": 2})
    );
    for (t, want) in [
        ("a: *nope\n", "unknown anchor 'nope' referenced"),
        ("a: &x [1, *x]\n", "anchor 'x' value contains itself"),
        ("a: &x 1\n---\nb: *x\n", "unknown anchor 'x' referenced"),
        ("a:\n  <<: 1\n", "map merge requires map"),
        ("s: &s [{a: 1}]\nm:\n  <<: *s\n", "map merge requires map"),
        ("m:\n  <<: [{a: 1}, 2]\n", "map merge requires map"),
    ] {
        let e = err(t);
        assert!(e.contains(want), "{t}: {e}");
    }
    // A billion laughs stops as go-yaml v2 stops it.
    let mut laughs = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
    for (i, name) in ["b", "c", "d", "e", "f", "g", "h"].iter().enumerate() {
        let prev = ["a", "b", "c", "d", "e", "f", "g"][i];
        laughs.push_str(&format!(
            "{name}: &{name} [{}]\n",
            vec![format!("*{prev}"); 10].join(", ")
        ));
    }
    assert!(err(&laughs).contains("excessive aliasing"));
}

#[test]
fn streams_comments_and_empty_documents() {
    let text = "# a comment\n---\n# only a comment\n---\n\n---\n~\n--- # c\na: 1 # trailing\n...\n\
                ---\n- on\n---\nb: 2\n";
    assert_eq!(
        documents(text).expect("stream"),
        vec![json!({"a": 1}), json!([true]), json!({"b": 2})]
    );
    assert_eq!(documents("").expect("empty"), Vec::<Value>::new());
    assert_eq!(
        documents("# nothing\n").expect("comment"),
        Vec::<Value>::new()
    );
    // Errors name the document and libyaml's position.
    let e = err("a: 1\n---\nb: [1\n");
    assert!(e.starts_with("document 2: invalid YAML: line"), "{e}");
    let e = err("a: 1\n---\nb:\n  c: .nan\n");
    assert!(e.starts_with("document 2: b.c: "), "{e}");
    assert!(err("a:\n- b: \"x\\q\"\n").contains("document 1: invalid YAML"));
    // Directives: %YAML 1.1 only, as go-yaml v2; %TAG handles resolve.
    assert_eq!(one("%YAML 1.1\n---\na: on\n"), json!({"a": true}));
    assert!(err("%YAML 1.2\n---\na: on\n").contains("incompatible YAML document"));
}

#[test]
fn nesting_is_bounded() {
    let limit = crate::yaml_depth::MAX_DEPTH;
    let ok = format!("{}{}", "[".repeat(limit), "]".repeat(limit));
    assert!(documents(&ok).is_ok());
    let deep = format!("{}{}", "[".repeat(limit + 1), "]".repeat(limit + 1));
    assert!(err(&deep).contains("nested deeper"));
    let huge = "[".repeat(100_000);
    let start = std::time::Instant::now();
    assert!(err(&huge).contains("nested deeper"));
    assert!(start.elapsed() < std::time::Duration::from_secs(2));
}

#[test]
fn the_writer_keeps_every_value_and_escapes_what_yaml_reads_differently() {
    let value = json!({
        "s": ["off", "yes", "0644", "~", "", "1e3", "a\"b\\c", "tab\there", "nl\nx",
              "\u{7f}\u{85}\u{9f}", "ls\u{2028} x", "ps\u{2029}", "\u{feff}bom", "\u{fffe}\u{ffff}",
              "\u{1}\u{1f}", "ünï 😀", "---", "...", "# no comment", "key: value", "- item"],
        "n": [0, -1, 420, 9223372036854775807u64, 18446744073709551615u64, 1.5, 1000.0, 1e21, 1e-7, -0.0, 1.2345678901234568e22],
        "b": [true, false, null],
        "e": [{}, []],
        "true": {"nested": {"deeper": [[]]}},
    });
    let text = write(&value);
    assert_eq!(documents(&text).expect("reads back"), vec![value.clone()]);
    assert_eq!(
        serde_json::from_str::<Value>(&text).expect("JSON"),
        value,
        "and it is JSON"
    );
    for raw in [
        '\u{7f}', '\u{85}', '\u{2028}', '\u{2029}', '\u{feff}', '\u{ffff}',
    ] {
        assert!(!text.contains(raw), "{raw:?} escaped");
    }
    assert!(text.contains("\\u0085") && text.contains("\\u2028"));
    // Pretty: one line per entry, indented by two.
    assert_eq!(
        write(&json!({"a": {"b": [1, "x"]}, "c": []})),
        "{\n  \"a\": {\n    \"b\": [\n      1,\n      \"x\"\n    ]\n  },\n  \"c\": []\n}"
    );
}

#[test]
fn a_key_too_long_for_an_implicit_key_is_written_explicitly() {
    let long = "k".repeat(2000);
    let value = json!({"a": 1, long.clone(): {"x": "off"}, "z": 2});
    let text = write(&value);
    assert!(text.contains(&format!("? \"{long}\"\n  : {{")), "{text}");
    assert_eq!(documents(&text).expect("reads back"), vec![value]);
}
