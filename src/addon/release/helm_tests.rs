//! Unit tests of the helm client: manifest parsing, the upgrade decision, helm's JSON
//! outputs and the post-renderer arguments (the checksum's are in `chart_sum_tests.rs`).

use super::*;
use std::cell::RefCell;

fn obj(api: &str, kind: &str, ns: Option<&str>, name: &str) -> ObjectRef {
    ObjectRef {
        api_version: api.into(),
        kind: kind.into(),
        namespace: ns.map(String::from),
        name: name.into(),
    }
}

#[test]
fn manifest_objects_skips_empty_and_comment_documents() {
    let m = "---\n# Source: c/templates/empty.yaml\n---\n# Source: c/templates/cm.yaml\n\
             apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\n\n---\n\
             apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\n  namespace: other\n";
    let got = manifest_objects(m).unwrap();
    assert_eq!(
        got,
        vec![
            obj("v1", "ConfigMap", None, "a"),
            obj("apps/v1", "Deployment", Some("other"), "d"),
        ]
    );
    assert_eq!(got[1].to_string(), "other/Deployment/d");
    assert_eq!(got[0].to_string(), "/ConfigMap/a");
}

#[test]
fn manifest_objects_expands_lists() {
    let m = "apiVersion: v1\nkind: ConfigMapList\nitems:\n\
             - apiVersion: v1\n  kind: ConfigMap\n  metadata: {name: x, namespace: n}\n\
             - apiVersion: v1\n  kind: Secret\n  metadata: {name: y}\n";
    assert_eq!(
        manifest_objects(m).unwrap(),
        vec![
            obj("v1", "ConfigMap", Some("n"), "x"),
            obj("v1", "Secret", None, "y"),
        ]
    );
    assert_eq!(manifest_objects("").unwrap(), vec![]);
}

#[test]
fn manifest_objects_errors_name_the_document_and_field() {
    let m = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: a}\n---\nkind: Secret\nmetadata: {name: b}\n";
    let e = manifest_objects(m).unwrap_err().to_string();
    assert!(
        e.contains("manifest document 2") && e.contains("apiVersion"),
        "{e}"
    );
    let e = manifest_objects("- a\n- b\n").unwrap_err().to_string();
    assert!(e.contains("not a mapping"), "{e}");
    let e = manifest_objects("a: [\n").unwrap_err().to_string();
    assert!(e.contains("invalid YAML"), "{e}");
}

fn deployed(sum: Option<&str>) -> Release {
    Release {
        revision: 3,
        status: "deployed".into(),
        checksum: sum.map(String::from),
        ..Release::default()
    }
}

const TWO: &str = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  namespace: ns\n---\n\
                   apiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n  namespace: ns\n";

/// The decision with the `released` manifest and `exists` for objects; also what
/// it asked: "released", then each object's name.
fn decide(
    last: Option<&Release>,
    sum: &str,
    exists: &dyn Fn(&ObjectRef) -> Result<bool, ReleaseError>,
) -> (Result<Option<Upgrade>, ReleaseError>, Vec<String>) {
    let asked = RefCell::new(Vec::new());
    let note = |what: &str| asked.borrow_mut().push(what.to_string());
    let facts = UpgradeFacts {
        released: Box::new(|| {
            note("released");
            Ok(TWO.to_string())
        }),
        exists: Box::new(|o: &ObjectRef| {
            note(&o.name);
            exists(o)
        }),
    };
    let r = upgrade_reason(last, sum, &facts);
    drop(facts);
    (r, asked.into_inner())
}

fn upgrade(reason: &str, unless_same: bool) -> Option<Upgrade> {
    let reason = reason.to_string();
    Some(Upgrade {
        reason,
        unless_same,
    })
}

#[test]
fn upgrade_reason_covers_each_case() {
    let all = |_: &ObjectRef| Ok(true);
    let reason = |last: Option<&Release>, sum: &str| decide(last, sum, &all).0.unwrap();
    assert_eq!(reason(None, "x"), upgrade("release absent", false));
    let failed = Release {
        status: "failed".into(),
        ..deployed(Some("x"))
    };
    assert_eq!(reason(Some(&failed), "x"), upgrade("status failed", false));
    let maintained = Release {
        maintenance: true,
        ..deployed(Some("x"))
    };
    assert_eq!(
        reason(Some(&maintained), "x"),
        upgrade("maintenance ended", false)
    );
    // Another checksum, or none stored: helm renders, and the post-renderer stops
    // it when the objects are the release's.
    let changed = upgrade("values or chart changed", true);
    assert_eq!(reason(Some(&deployed(Some("old"))), "x"), changed);
    assert_eq!(reason(Some(&deployed(None)), "x"), changed);
    assert_eq!(reason(Some(&deployed(Some("x"))), "x"), None);

    let no_secret = |o: &ObjectRef| Ok(o.kind != "Secret");
    let (r, asked) = decide(Some(&deployed(Some("x"))), "x", &no_secret);
    assert_eq!(r.unwrap(), upgrade("resource ns/Secret/b absent", false));
    assert_eq!(
        asked,
        ["released", "a", "b"],
        "same checksum: the release's own objects checked"
    );

    let broken = |_: &ObjectRef| Err(ReleaseError::Record("api down".to_string()));
    let (r, _) = decide(Some(&deployed(Some("x"))), "x", &broken);
    assert_eq!(r.unwrap_err().to_string(), "api down");
}

#[test]
fn upgrade_reason_asks_nothing_when_helm_runs_anyway() {
    let never = |_: &ObjectRef| -> Result<bool, ReleaseError> { panic!("asked the cluster") };
    let (r, asked) = decide(None, "new", &never);
    assert_eq!(r.unwrap(), upgrade("release absent", false));
    assert!(asked.is_empty(), "{asked:?}");
    let (r, asked) = decide(Some(&deployed(Some("old"))), "new", &never);
    assert_eq!(r.unwrap(), upgrade("values or chart changed", true));
    assert!(asked.is_empty(), "a changed module is not read: {asked:?}");
}

/// helm 4 hands its post-renderer each object with the annotation naming its
/// template (and takes it off after): the post-renderer's deduplication compares
/// that input with the release's manifest, which lacks it.
#[test]
fn same_objects_ignores_helm_4_s_post_renderer_annotation() {
    let input = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c1\n  annotations:\n    \
                 postrenderer.helm.sh/postrender-filename: 'c/templates/cm.yaml'\ndata:\n  a: \"1\"\n";
    let released = "---\n# Source: c/templates/cm.yaml\n{\"apiVersion\": \"v1\", \"data\": {\"a\": \"1\"}, \
                    \"kind\": \"ConfigMap\", \"metadata\": {\"labels\": {\"heritage\": \"addon-operator\"}, \"name\": \"c1\"}}\n";
    assert!(same_objects(input, released).unwrap());
    let kept = input.replace("  annotations:\n", "  annotations:\n    keep: me\n");
    assert!(!same_objects(&kept, released).unwrap());
}

#[test]
fn same_objects_ignores_order_comments_and_hooks() {
    let a = "# Source: c/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n";
    let b = "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n---\nkind: ConfigMap\napiVersion: v1\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: t\n  annotations: {helm.sh/hook: test}\n";
    assert!(same_objects(a, b).unwrap());
    let c = a.replace("name: a", "name: z");
    assert!(!same_objects(a, &c).unwrap());
}

/// A release flant's addon-operator v1.5.0 installed lacks the `heritage` label our
/// post-renderer adds; that alone is no reason to upgrade (the compatibility suite's
/// migration test saw a new revision of every release without this).
#[test]
fn same_objects_ignores_only_our_heritage_label() {
    let flant = "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\ndata: {k: v}\n";
    let ours = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"heritage":"addon-operator"}},"data":{"k":"v"}}"#;
    assert!(same_objects(ours, flant).unwrap());
    let other = ours.replace("addon-operator", "someone-else");
    assert!(!same_objects(&other, flant).unwrap());
    let changed = ours.replace(r#""k":"v""#, r#""k":"w""#);
    assert!(!same_objects(&changed, flant).unwrap());
}

#[test]
fn parsers_read_helm_json() {
    assert_eq!(parse_major("v4.1.4+g05fa379\n", "version").unwrap(), 4);
    assert_eq!(parse_major("v3.17.0+gabc", "version").unwrap(), 3);
    assert!(
        parse_major("garbage", "version")
            .unwrap_err()
            .to_string()
            .contains("garbage")
    );
    let h = r#"[{"revision":2,"status":"superseded"},{"revision":3,"status":"deployed"}]"#;
    assert_eq!(
        parse_history(h, "history").unwrap(),
        Some((3, "deployed".into()))
    );
    assert_eq!(parse_history("[]", "history").unwrap(), None);
    assert!(
        parse_history(r#"[{"status":"x"}]"#, "history")
            .unwrap_err()
            .to_string()
            .contains("revision")
    );
    assert_eq!(
        parse_list(r#"[{"name":"b"},{"name":""},{"name":"a"}]"#, "list").unwrap(),
        ["a", "b"]
    );
}

#[test]
fn helper_formats() {
    assert_eq!(go_duration(Duration::from_secs(300)), "300s");
    assert_eq!(go_duration(Duration::from_millis(1500)), "1500ms");
    let long = "é".repeat(10);
    let cut = bounded_text(long.as_bytes(), 5);
    assert!(
        cut.starts_with("éé") && cut.contains("cut at 5 bytes"),
        "{cut}"
    );
    assert_eq!(bounded_text(b"short", 64), "short");
}
