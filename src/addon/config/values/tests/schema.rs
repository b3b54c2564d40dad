//! Tests: OpenAPI schemas (spec §4): transforms, x-extend, x-required-for-helm, defaults.

use super::*;
use crate::addon::config::values::*;
use serde_json::{Value, json};

// ---------------------------------------------------------------- schemas (§4)

#[test]
fn schema_kind_display() {
    assert_eq!(SchemaKind::Config.to_string(), "config");
    assert_eq!(SchemaKind::Values.to_string(), "values");
    assert_eq!(SchemaKind::Helm.to_string(), "helm");
}

#[test]
fn no_schemas_validate_nothing() {
    let s = Schemas::none();
    for kind in [SchemaKind::Config, SchemaKind::Values, SchemaKind::Helm] {
        s.validate(kind, &json!({"anything": [1, {"x": null}]}))
            .unwrap();
    }
}

#[test]
fn additional_properties_false_by_default() {
    let config = "type: object\nproperties:\n  a:\n    type: object\n    properties:\n      b: {type: string}\n  free:\n    type: object\n    additionalProperties: true\n    properties:\n      inner: {type: object}\n";
    let s = Schemas::from_yaml(Some(config), None, "my-module").unwrap();
    s.validate(SchemaKind::Config, &json!({"a": {"b": "x"}}))
        .unwrap();
    let err = s
        .validate(SchemaKind::Config, &json!({"a": {"c": 1}}))
        .unwrap_err()
        .to_string();
    assert_eq!(
        err,
        "my-module: config values are invalid: /a/c: forbidden property"
    );
    let err = s
        .validate(SchemaKind::Config, &json!({"zz": 1}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("/zz: forbidden property"), "{err}");
    // Recursion stops below a property that sets additionalProperties explicitly.
    s.validate(
        SchemaKind::Config,
        &json!({"free": {"x": 1, "inner": {"y": 2}}}),
    )
    .unwrap();
}

#[test]
fn additional_properties_through_items() {
    let config = "type: object\nproperties:\n  list:\n    type: array\n    items:\n      type: object\n      properties:\n        n: {type: integer}\n";
    let s = Schemas::from_yaml(Some(config), None, "m").unwrap();
    s.validate(SchemaKind::Config, &json!({"list": [{"n": 1}]}))
        .unwrap();
    let err = s
        .validate(SchemaKind::Config, &json!({"list": [{"n": 1}, {"q": 1}]}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("/list/1/q: forbidden property"), "{err}");
}

#[test]
fn three_unknown_nested_props_are_three_errors() {
    let schema = "type: object\nproperties:\n  a:\n    type: object\n    properties:\n      x: {type: string}\n  b:\n    type: object\n    properties:\n      y:\n        type: object\n        properties:\n          z: {type: string}\n";
    let s = Schemas::from_yaml(Some(schema), None, "global").unwrap();
    let data = json!({"a": {"x": "1", "u1": 1}, "b": {"u2": 2, "y": {"u3": 3}}});
    let err = s
        .validate(SchemaKind::Config, &data)
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("global: config values are invalid: "),
        "{err}"
    );
    assert!(err.contains("3 errors occurred"), "{err}");
    assert!(err.contains("forbidden property"), "{err}");
    for path in ["/a/u1", "/b/u2", "/b/y/u3"] {
        assert!(err.contains(path), "{path} in {err}");
    }
}

#[test]
fn sampling_multiple_of_is_valid() {
    let schema = "type: object\nproperties:\n  sampling:\n    type: number\n    minimum: 0.01\n    maximum: 100\n    multipleOf: 0.01\n";
    let s = Schemas::from_yaml(Some(schema), None, "m").unwrap();
    s.validate(SchemaKind::Config, &json!({"sampling": 100}))
        .unwrap();
    s.validate(SchemaKind::Config, &json!({"sampling": 0.07}))
        .unwrap();
    assert!(
        s.validate(SchemaKind::Config, &json!({"sampling": 0.005}))
            .is_err()
    );
}

#[test]
fn seed_global_config_example() {
    let schemas = Schemas::from_yaml(Some(SEED_GLOBAL_CONFIG), None, "global").unwrap();
    let mut scope = Scope::new("global", json!({}), schemas);
    let err = scope
        .check_config(&json!({"project": "myProject"}))
        .unwrap_err()
        .to_string();
    assert!(
        err.starts_with("global: config values are invalid"),
        "{err}"
    );
    assert!(err.contains("/clusterName: is required"), "{err}");

    let valid = json!({"project": "myProject", "clusterName": "main"});
    scope.check_config(&valid).unwrap();
    scope.config = valid.clone();
    let err = scope
        .try_config_patch(&[add("/global/clusterHostname", json!({}))])
        .unwrap_err()
        .to_string();
    assert!(err.contains("/clusterHostname"), "{err}");
    assert!(err.contains("config values are invalid"), "{err}");
    assert_eq!(scope.config, valid);
    let ok = scope
        .try_config_patch(&[add("/global/clusterHostname", json!("h.example"))])
        .unwrap();
    assert_eq!(ok["clusterHostname"], "h.example");
}

#[test]
fn x_extend_pinned_example() {
    let config = "type: object\nrequired: [param1]\nproperties:\n  param1:\n    type: string\n    enum: [val1]\n  param2:\n    type: string\n";
    let values = "x-extend:\n  schema: config-values.yaml\ntype: object\nrequired: [memParam]\nproperties:\n  memParam:\n    type: string\n";
    let s = Schemas::from_yaml(Some(config), Some(values), "m").unwrap();
    let err = s
        .validate(
            SchemaKind::Values,
            &json!({"param1": "val1", "param2": "val2"}),
        )
        .unwrap_err()
        .to_string();
    assert!(err.contains("/memParam: is required"), "{err}");
    assert!(
        !err.contains("forbidden"),
        "param2 is allowed via x-extend: {err}"
    );
    s.validate(
        SchemaKind::Values,
        &json!({"param1": "val1", "memParam": "val1"}),
    )
    .unwrap();
    // Required from the parent comes first, then the child's own.
    let raw = s.raw(SchemaKind::Values).unwrap();
    assert_eq!(raw["required"], json!(["param1", "memParam"]));
    // The parent's enum still applies.
    assert!(
        s.validate(SchemaKind::Values, &json!({"param1": "x", "memParam": "v"}))
            .is_err()
    );
}

#[test]
fn x_extend_doc_example_effective_schema() {
    let config = "type: object\nadditionalProperties: false\nrequired: [project, clusterName]\nproperties:\n  project: {type: string}\n  clusterName: {type: string}\n  clusterHostname: {type: string}\n";
    let values = "x-extend:\n  schema: config-values.yaml\ntype: object\nadditionalProperties: false\nrequired: [discovery, param1]\nproperties:\n  discovery: {type: object}\n  param1: {type: string}\n";
    let s = Schemas::from_yaml(Some(config), Some(values), "global").unwrap();
    let raw = s.raw(SchemaKind::Values).unwrap();
    assert_eq!(
        raw["required"],
        json!(["project", "clusterName", "discovery", "param1"])
    );
    let props: Vec<&String> = raw["properties"].as_object().unwrap().keys().collect();
    assert_eq!(props.len(), 5);
}

#[test]
fn without_x_extend_values_schema_stands_alone() {
    let config = "type: object\nproperties:\n  param1: {type: string}\n";
    let values = "type: object\nproperties:\n  memParam: {type: string}\n";
    let s = Schemas::from_yaml(Some(config), Some(values), "m").unwrap();
    let err = s
        .validate(SchemaKind::Values, &json!({"param1": "a"}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("/param1: forbidden property"), "{err}");
}

#[test]
fn x_required_for_helm_pinned_example() {
    let values = "type: object
x-required-for-helm: [internal]
properties:
  param1: {type: string}
  internal:
    type: object
    required: [param1]
    x-required-for-helm: [param2, param3]
    properties:
      param1: {type: string}
      param2: {type: string}
      param3: {type: string}
";
    let s = Schemas::from_yaml(None, Some(values), "m").unwrap();
    let a = json!({"param1": "a", "internal": {"param1": "a", "param2": "b"}});
    s.validate(SchemaKind::Values, &a).unwrap();
    let err = s.validate(SchemaKind::Helm, &a).unwrap_err().to_string();
    assert!(err.starts_with("m: helm values are invalid"), "{err}");
    assert!(err.contains("/internal/param3: is required"), "{err}");

    let b = json!({"param1": "a", "internal": {"param1": "a", "param3": "c"}});
    s.validate(SchemaKind::Values, &b).unwrap();
    assert!(
        s.validate(SchemaKind::Helm, &b)
            .unwrap_err()
            .to_string()
            .contains("/internal/param2")
    );

    let c = json!({"param1": "a", "internal": {"param1": "a", "param2": "b", "param3": "c"}});
    s.validate(SchemaKind::Values, &c).unwrap();
    s.validate(SchemaKind::Helm, &c).unwrap();

    // Root x-required-for-helm: `internal` missing is values-valid, helm-invalid.
    s.validate(SchemaKind::Values, &json!({"param1": "a"}))
        .unwrap();
    assert!(
        s.validate(SchemaKind::Helm, &json!({"param1": "a"}))
            .unwrap_err()
            .to_string()
            .contains("/internal")
    );
    assert_eq!(s.raw(SchemaKind::Helm).unwrap()["internal"], Value::Null);
    assert_eq!(
        s.raw(SchemaKind::Helm).unwrap()["properties"]["internal"]["required"],
        json!(["param1", "param2", "param3"])
    );
}

#[test]
fn x_required_for_helm_as_string() {
    let values =
        "type: object\nx-required-for-helm: param1\nproperties:\n  param1: {type: string}\n";
    let s = Schemas::from_yaml(None, Some(values), "m").unwrap();
    s.validate(SchemaKind::Values, &json!({})).unwrap();
    assert!(s.validate(SchemaKind::Helm, &json!({})).is_err());
}

#[test]
fn defaults_including_defaults_of_defaults() {
    let values = "type: object
properties:
  discovery:
    type: object
    default: {}
  paramObjDeep:
    type: object
    default: {}
    properties:
      param1:
        type: string
        default: randomvalue
  list:
    type: array
    items:
      type: object
      properties:
        n: {type: integer, default: 7}
  keep:
    type: string
    nullable: true
    default: dflt
";
    let s = Schemas::from_yaml(None, Some(values), "m").unwrap();
    let mut data = json!({"list": [{}, {"n": 1}], "keep": null});
    s.apply_defaults(SchemaKind::Values, &mut data);
    assert_eq!(
        data,
        json!({"discovery": {}, "paramObjDeep": {"param1": "randomvalue"},
               "list": [{"n": 7}, {"n": 1}], "keep": null})
    );
    s.validate(SchemaKind::Values, &data).unwrap();
    // Config kind uses the (absent) config schema: nothing inserted.
    let mut other = json!({});
    s.apply_defaults(SchemaKind::Config, &mut other);
    assert_eq!(other, json!({}));
}

#[test]
fn long_messages_are_clipped() {
    let s = Schemas::from_yaml(
        Some("type: object\nproperties:\n  a: {type: string}\n"),
        None,
        "m",
    )
    .unwrap();
    let big: Vec<Value> = (0..2000).map(Value::from).collect();
    let err = s
        .validate(SchemaKind::Config, &json!({"a": big}))
        .unwrap_err()
        .to_string();
    assert!(err.len() < 400, "{} chars", err.len());
    assert!(err.contains("/a: [0,1,2") && err.ends_with("..."), "{err}");
}

#[test]
fn in_document_refs_resolve() {
    let config = "type: object
definitions:
  port: {type: integer, minimum: 1}
properties:
  http: {$ref: '#/definitions/port'}
";
    let s = Schemas::from_yaml(Some(config), None, "m").unwrap();
    s.validate(SchemaKind::Config, &json!({"http": 80}))
        .unwrap();
    let err = s
        .validate(SchemaKind::Config, &json!({"http": 0}))
        .unwrap_err()
        .to_string();
    assert!(err.contains("/http"), "{err}");
}

#[test]
fn nullable_allows_null_only_when_set() {
    let config =
        "type: object\nproperties:\n  a: {type: string, nullable: true}\n  b: {type: string}\n";
    let s = Schemas::from_yaml(Some(config), None, "m").unwrap();
    s.validate(SchemaKind::Config, &json!({"a": null})).unwrap();
    assert!(s.validate(SchemaKind::Config, &json!({"b": null})).is_err());
}

#[test]
fn yaml_anchors_and_merge_keys() {
    let config = "type: object
definitions:
  base: &base
    type: string
    enum: [x, y]
properties:
  a: *base
  b:
    <<: *base
    enum: [z]
";
    let s = Schemas::from_yaml(Some(config), None, "m").unwrap();
    s.validate(SchemaKind::Config, &json!({"a": "x", "b": "z"}))
        .unwrap();
    assert!(s.validate(SchemaKind::Config, &json!({"a": "z"})).is_err());
    assert!(s.validate(SchemaKind::Config, &json!({"b": 1})).is_err());
}

#[test]
fn bad_schemas_are_load_errors() {
    let err = Schemas::from_yaml(Some("type: [unclosed"), None, "my-mod")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("my-mod") && err.contains("config-values.yaml"),
        "{err}"
    );
    let err = Schemas::from_yaml(None, Some("- a\n- b\n"), "my-mod")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("values.yaml") && err.contains("mapping"),
        "{err}"
    );
    let err = Schemas::from_yaml(Some("type: 12\n"), None, "my-mod")
        .unwrap_err()
        .to_string();
    assert!(err.contains("my-mod: config schema"), "{err}");
    // An empty document means no schema.
    let s = Schemas::from_yaml(Some("# nothing\n"), None, "m").unwrap();
    s.validate(SchemaKind::Config, &json!({"x": 1})).unwrap();
}

#[test]
fn load_from_directory() {
    let dir = std::env::temp_dir().join(format!("addon-values-schema-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("config-values.yaml"), SEED_GLOBAL_CONFIG).unwrap();
    let s = Schemas::load(&dir, "global").unwrap();
    assert!(
        s.validate(SchemaKind::Config, &json!({"project": "p"}))
            .is_err()
    );
    s.validate(SchemaKind::Values, &json!({"whatever": 1}))
        .unwrap();
    std::fs::remove_dir_all(&dir).unwrap();
    // No directory at all: no schemas.
    let s = Schemas::load(&dir, "global").unwrap();
    s.validate(SchemaKind::Config, &json!({"x": 1})).unwrap();
}
