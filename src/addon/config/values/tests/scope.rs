//! Tests: one values scope (spec §3.2/§3.3 pinned examples) and the checksum.

use super::*;
use crate::addon::config::values::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------- 000-update-kube-module-config

fn update_kube_module_config_patch() -> Vec<PatchOp> {
    vec![
        add("/updateKubeModuleConfig/a", json!(2)),
        remove("/updateKubeModuleConfig/b"),
        add("/updateKubeModuleConfig/c", json!([3])),
    ]
}

#[test]
fn config_patch_example() {
    let mut scope = Scope::new("updateKubeModuleConfig", json!({}), Schemas::none());
    scope.config = json!({"b": "should-be-deleted"});
    let new = scope
        .try_config_patch(&update_kube_module_config_patch())
        .unwrap();
    assert_eq!(new, json!({"a": 2, "c": [3]}));
    assert_eq!(
        scope.config,
        json!({"b": "should-be-deleted"}),
        "scope unchanged"
    );

    scope.config = json!({"a": 1, "b": 2, "x": "123"});
    let new = scope
        .try_config_patch(&update_kube_module_config_patch())
        .unwrap();
    assert_eq!(new, json!({"a": 2, "c": [3], "x": "123"}));
}

#[test]
fn values_patch_example() {
    let key = "updateKubeModuleConfig";
    let mut scope = Scope::new(key, json!({}), Schemas::none());
    scope.patches = vec![
        add("/updateKubeModuleConfig/a", json!(123)),
        add("/updateKubeModuleConfig/x", json!(10)),
    ];
    let ops = vec![
        add("/updateKubeModuleConfig/a", json!(9)),
        add("/updateKubeModuleConfig/c", json!("10")),
    ];
    let patches = scope.try_values_patch(&ops).unwrap();
    scope.patches = patches;
    assert_eq!(scope.values().unwrap(), json!({"a": 9, "c": "10", "x": 10}));
    assert_eq!(scope.patches.len(), 3);
}

#[test]
fn patch_outside_scope_is_unacceptable() {
    let scope = Scope::new("foo", json!({}), Schemas::none());
    let err = scope
        .try_values_patch(&[add("/bar/a", json!(1))])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("unacceptable patch operation for path '/bar/a'")
            && err.ends_with("(a hook of 'foo' may only patch paths under /foo)"),
        "{err}"
    );
    let typed = scope.try_values_patch(&[add("/bar/a", json!(1))]);
    assert!(
        matches!(&typed, Err(ValuesError::ForeignPath { scope, path }) if scope == "foo" && path == "/bar/a"),
        "{typed:?}"
    );
    let err = scope
        .try_config_patch(&[add("/fooBar", json!(1))])
        .unwrap_err()
        .to_string();
    assert!(err.contains("unacceptable"), "{err}");
}

#[test]
fn failed_config_patch_names_op() {
    let scope = Scope::new("foo", json!({}), Schemas::none());
    let err = scope
        .try_config_patch(&[remove("/foo/missing")])
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("/foo/missing") && err.contains("operation 0"),
        "{err}"
    );
}

#[test]
fn stored_remove_of_config_key_is_lenient_on_recalculation() {
    let mut scope = Scope::new("foo", json!({"s": 1}), Schemas::none());
    scope.config = json!({"c": 1});
    scope.patches = scope.try_values_patch(&[remove("/foo/c")]).unwrap();
    assert_eq!(scope.values().unwrap(), json!({"s": 1}));
    // The user later removes `c` from the ConfigMap: re-applying the stored remove is fine.
    scope.config = json!({});
    assert_eq!(scope.values().unwrap(), json!({"s": 1}));
}

// ---------------------------------------------------------------- scope + schemas

fn module_scope() -> Scope {
    let config = "type: object\nproperties:\n  replicas:\n    type: integer\n    default: 2\n";
    let values = "x-extend:\n  schema: config-values.yaml\ntype: object\nproperties:\n  internal:\n    type: object\n    default: {}\n    properties:\n      cert: {type: string}\n";
    let schemas = Schemas::from_yaml(Some(config), Some(values), "my-module").unwrap();
    Scope::new("myModule", json!({"replicas": 1}), schemas)
}

#[test]
fn scope_values_apply_defaults_in_order() {
    let mut scope = Scope::new("myModule", json!({}), module_scope().schemas);
    assert_eq!(
        scope.values().unwrap(),
        json!({"replicas": 2, "internal": {}})
    );
    scope.static_values = json!({"replicas": 1});
    assert_eq!(
        scope.values().unwrap(),
        json!({"replicas": 1, "internal": {}})
    );
    scope.config = json!({"replicas": 5});
    assert_eq!(
        scope.values().unwrap(),
        json!({"replicas": 5, "internal": {}})
    );
    assert_eq!(scope.config_values(), json!({"replicas": 5}));
}

#[test]
fn values_patch_breaking_schema_is_refused() {
    let mut scope = module_scope();
    scope.patches = vec![add("/myModule/internal/cert", json!("c1"))];
    let before = scope.patches.clone();
    let err = scope
        .try_values_patch(&[add("/myModule/internal/cert", json!(42))])
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("my-module: values values are invalid"),
        "{err}"
    );
    let typed = scope.try_values_patch(&[add("/myModule/internal/cert", json!(42))]);
    assert!(
        typed.as_ref().is_err_and(ValuesError::is_schema_violation),
        "{typed:?}"
    );
    assert!(err.contains("/internal/cert"), "{err}");
    assert_eq!(scope.patches, before);
    assert_eq!(scope.values().unwrap()["internal"]["cert"], "c1");

    let err = scope
        .try_values_patch(&[add("/myModule/unknown", json!(1))])
        .unwrap_err()
        .to_string();
    assert!(err.contains("/unknown: forbidden property"), "{err}");

    let ok = scope
        .try_values_patch(&[add("/myModule/internal/cert", json!("c2"))])
        .unwrap();
    assert_eq!(ok, vec![add("/myModule/internal/cert", json!("c2"))]);
}

#[test]
fn error_texts_for_review() {
    let s = Schemas::from_yaml(Some(SEED_GLOBAL_CONFIG), None, "global").unwrap();
    let err = s
        .validate(SchemaKind::Config, &json!({"project": 1, "x": 2}))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "global: config values are invalid: 3 errors occurred: /clusterName: is required; \
         /project: 1 is not of type \"string\"; /x: forbidden property"
    );
}

#[test]
fn helm_check_uses_helm_schema() {
    let values = "type: object\nx-required-for-helm: [a]\nproperties:\n  a: {type: string}\n";
    let scope = Scope::new(
        "m",
        json!({}),
        Schemas::from_yaml(None, Some(values), "m").unwrap(),
    );
    let v = scope.values().unwrap();
    scope.schemas.validate(SchemaKind::Values, &v).unwrap();
    let err = scope.check_helm(&v).unwrap_err().to_string();
    assert!(
        err.contains("helm values are invalid") && err.contains("/a: is required"),
        "{err}"
    );
}

#[test]
fn removing_whole_section_leaves_empty_object() {
    let mut scope = Scope::new("foo", json!({}), Schemas::none());
    scope.config = json!({"a": 1});
    assert_eq!(
        scope.try_config_patch(&[remove("/foo")]).unwrap(),
        json!({})
    );
    let err = scope
        .try_config_patch(&[add("/foo", json!(3))])
        .unwrap_err()
        .to_string();
    assert!(err.contains("must be an object"), "{err}");
}

// ---------------------------------------------------------------- checksum

#[test]
fn checksum_is_stable_and_order_independent() {
    let a: Value = serde_json::from_str(r#"{"b":1,"a":{"y":2,"x":[1,2]}}"#).unwrap();
    let b: Value = serde_json::from_str(r#"{"a":{"x":[1,2],"y":2},"b":1}"#).unwrap();
    assert_eq!(checksum(&a), checksum(&b));
    assert_eq!(checksum(&a).len(), 32);
    assert_ne!(
        checksum(&a),
        checksum(&json!({"b": 1, "a": {"y": 2, "x": [2, 1]}}))
    );
    // FNV-1a 128 of the text "{}" (computed independently).
    assert_eq!(checksum(&json!({})), "0880955dd2ab1be95aa0733055c655b5");
    assert_ne!(checksum(&json!({})), checksum(&json!([])));
}
