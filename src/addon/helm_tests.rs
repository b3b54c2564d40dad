//! Unit tests of the helm client: manifest parsing, the upgrade decision, checksums,
//! helm's JSON outputs and the post-renderer arguments.

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
    let e = manifest_objects(m).unwrap_err();
    assert!(
        e.contains("manifest document 2") && e.contains("apiVersion"),
        "{e}"
    );
    let e = manifest_objects("- a\n- b\n").unwrap_err();
    assert!(e.contains("not a mapping"), "{e}");
    let e = manifest_objects("a: [\n").unwrap_err();
    assert!(e.contains("invalid YAML"), "{e}");
}

fn deployed(sum: Option<&str>) -> Release {
    Release {
        revision: 3,
        status: "deployed".into(),
        checksum: sum.map(String::from),
    }
}

#[test]
fn upgrade_reason_covers_each_case() {
    let objs = vec![
        obj("v1", "ConfigMap", Some("ns"), "a"),
        obj("v1", "Secret", Some("ns"), "b"),
    ];
    let all = |_: &ObjectRef| Ok(true);
    let reason = |last: Option<&Release>, sum: &str| upgrade_reason(last, sum, &objs, &all);
    assert_eq!(
        reason(None, "x").unwrap().as_deref(),
        Some("release absent")
    );
    let failed = Release {
        status: "failed".into(),
        ..deployed(Some("x"))
    };
    assert_eq!(
        reason(Some(&failed), "x").unwrap().as_deref(),
        Some("status failed")
    );
    assert_eq!(
        reason(Some(&deployed(Some("old"))), "x")
            .unwrap()
            .as_deref(),
        Some("checksum changed")
    );
    assert_eq!(
        reason(Some(&deployed(None)), "x").unwrap().as_deref(),
        Some("checksum changed")
    );
    assert_eq!(reason(Some(&deployed(Some("x"))), "x").unwrap(), None);

    let asked = RefCell::new(Vec::new());
    let no_secret = |o: &ObjectRef| {
        asked.borrow_mut().push(o.name.clone());
        Ok(o.kind != "Secret")
    };
    let r = upgrade_reason(Some(&deployed(Some("x"))), "x", &objs, &no_secret).unwrap();
    assert_eq!(r.as_deref(), Some("resource ns/Secret/b absent"));
    assert_eq!(*asked.borrow(), ["a", "b"]);

    let broken = |_: &ObjectRef| Err("api down".to_string());
    let e = upgrade_reason(Some(&deployed(Some("x"))), "x", &objs, &broken).unwrap_err();
    assert_eq!(e, "api down");
}

#[test]
fn upgrade_reason_does_not_ask_the_cluster_when_the_release_must_change() {
    let objs = vec![obj("v1", "ConfigMap", None, "a")];
    let never = |_: &ObjectRef| -> Result<bool, String> { panic!("asked the cluster") };
    let r = upgrade_reason(Some(&deployed(Some("old"))), "new", &objs, &never).unwrap();
    assert_eq!(r.as_deref(), Some("checksum changed"));
}

#[test]
fn same_objects_ignores_order_comments_and_hooks() {
    let a = "# Source: c/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n---\napiVersion: v1\nkind: Secret\nmetadata: {name: b}\n";
    let b = "---\napiVersion: v1\nkind: Secret\nmetadata:\n  name: b\n---\nkind: ConfigMap\napiVersion: v1\nmetadata: {name: a}\n---\napiVersion: v1\nkind: Pod\nmetadata:\n  name: t\n  annotations: {helm.sh/hook: test}\n";
    assert!(same_objects(a, b).unwrap());
    let c = a.replace("name: a", "name: z");
    assert!(!same_objects(a, &c).unwrap());
}

#[test]
fn parsers_read_helm_json() {
    assert_eq!(parse_major("v4.1.4+g05fa379\n").unwrap(), 4);
    assert_eq!(parse_major("v3.17.0+gabc").unwrap(), 3);
    assert!(parse_major("garbage").unwrap_err().contains("garbage"));
    let h = r#"[{"revision":2,"status":"superseded"},{"revision":3,"status":"deployed"}]"#;
    assert_eq!(parse_history(h).unwrap(), Some((3, "deployed".into())));
    assert_eq!(parse_history("[]").unwrap(), None);
    assert!(
        parse_history(r#"[{"status":"x"}]"#)
            .unwrap_err()
            .contains("revision")
    );
    assert_eq!(
        parse_checksum_value(r#"{"_addonOperatorModuleChecksum":"ab","x":1}"#).unwrap(),
        Some("ab".into())
    );
    assert_eq!(parse_checksum_value("null").unwrap(), None);
    assert_eq!(
        parse_list(r#"[{"name":"b"},{"name":""},{"name":"a"}]"#).unwrap(),
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

#[test]
fn checksum_follows_manifest_and_chart_files() {
    let dir = std::env::temp_dir().join(format!("helm-checksum-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("templates")).unwrap();
    std::fs::write(dir.join("Chart.yaml"), "name: c\n").unwrap();
    std::fs::write(dir.join("templates/cm.yaml"), "kind: ConfigMap\n").unwrap();
    let a = checksum("m", &dir).unwrap();
    assert_eq!(a.len(), 32);
    assert_eq!(a, checksum("m", &dir).unwrap());
    assert_ne!(a, checksum("m2", &dir).unwrap());
    std::fs::write(dir.join("templates/cm.yaml"), "kind: ConfigMap # x\n").unwrap();
    let b = checksum("m", &dir).unwrap();
    assert_ne!(a, b);
    std::fs::write(dir.join("templates/new.txt"), "").unwrap();
    assert_ne!(b, checksum("m", &dir).unwrap());
    let e = checksum("m", &dir.join("missing")).unwrap_err();
    assert!(e.contains("missing"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn fnv128_matches_the_reference_vector() {
    let mut h = Fnv128::new();
    h.bytes(b"a");
    // FNV-1a 128 of "a" from the reference implementation.
    assert_eq!(format!("{:032x}", h.0), "d228cb696f1a8caf78912b704e4a8964");
}
