//! Tests of the values library: every pinned example of spec §2.1, §3 and §4.

use super::*;
use serde_json::{Value, json};

fn add(path: &str, value: Value) -> PatchOp {
    PatchOp::Add {
        path: path.into(),
        value,
    }
}

fn remove(path: &str) -> PatchOp {
    PatchOp::Remove { path: path.into() }
}

// ---------------------------------------------------------------- names (§2.1)

#[test]
fn names_round_trip() {
    for (name, key) in [
        ("l2-load-balancer", "l2LoadBalancer"),
        ("module1", "module1"),
        ("module-one01", "moduleOne01"),
        ("prometheus-operator", "prometheusOperator"),
        ("cert-manager-crd", "certManagerCrd"),
        ("2-module-name", "2ModuleName"),
    ] {
        assert_eq!(values_key(name), key, "values_key({name})");
        assert_eq!(module_name_of_key(key), name, "module_name_of_key({key})");
    }
}

#[test]
fn key_with_capital_run_splits_before_last_capital() {
    assert_eq!(module_name_of_key("myHTTPServer"), "my-http-server");
}

#[test]
fn dir_names() {
    assert_eq!(
        parse_dir_name("001-foo").unwrap(),
        (Some(1), "foo".to_string())
    );
    assert_eq!(
        parse_dir_name("000-foo").unwrap(),
        (Some(0), "foo".to_string())
    );
    assert_eq!(parse_dir_name("foo").unwrap(), (None, "foo".to_string()));
    assert_eq!(
        parse_dir_name("20-cert-manager-crd").unwrap(),
        (Some(20), "cert-manager-crd".to_string())
    );
    // 2^31 does not fit the 31-bit order: unnumbered.
    assert_eq!(
        parse_dir_name("2147483648-foo").unwrap(),
        (None, "foo".to_string())
    );
    assert_eq!(
        parse_dir_name("2147483647-foo").unwrap(),
        (Some(2147483647), "foo".into())
    );
}

#[test]
fn dir_names_that_do_not_round_trip_are_rejected() {
    let err = parse_dir_name("module_one").unwrap_err();
    assert!(err.contains("module_one"), "{err}");
    assert!(err.contains("kebab-case"), "{err}");
    assert!(parse_dir_name("010-Foo").unwrap_err().contains("010-Foo"));
    assert!(parse_dir_name("module-1").is_err());
    assert!(parse_dir_name("001-").is_err());
}

// ---------------------------------------------------------------- merge (§3.2)

#[test]
fn merge_maps_deep_and_replaces_the_rest() {
    let mut base = json!({"a": {"b": 1, "c": [1, 2]}, "s": "x", "keep": true});
    merge(
        &mut base,
        &json!({"a": {"c": [3], "d": null}, "s": {"now": "map"}}),
    );
    assert_eq!(
        base,
        json!({"a": {"b": 1, "c": [3], "d": null}, "s": {"now": "map"}, "keep": true})
    );
    let mut scalar = json!({"a": 1});
    merge(&mut scalar, &json!([1]));
    assert_eq!(scalar, json!([1]));
}

#[test]
fn merge_worked_example_of_values_md() {
    let mut global = Scope::new(
        "global",
        json!({"param1": 100, "param2": "Yes"}),
        Schemas::none(),
    );
    global.config = json!({"param1": 200});
    let mut module = Scope::new("someModule", json!({"param1": "String"}), Schemas::none());
    module.config = json!({"param1": "Long string", "param2": "FOO"});

    let config_values = json!({
        "global": global.config_values(),
        "someModule": module.config_values(),
    });
    assert_eq!(
        config_values,
        json!({"global":{"param1":200},"someModule":{"param1":"Long string","param2":"FOO"}})
    );
    let values = json!({
        "global": global.values().unwrap(),
        "someModule": module.values().unwrap(),
    });
    assert_eq!(
        values,
        json!({"global":{"param1":200,"param2":"Yes"},
               "someModule":{"param1":"Long string","param2":"FOO"}})
    );
    // Inputs are not mutated.
    assert_eq!(
        global.static_values,
        json!({"param1": 100, "param2": "Yes"})
    );
}

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
    let err = parse_patch(br#"[{"op":"replace","path":"/a","value":1}]"#).unwrap_err();
    assert!(
        err.contains("unsupported patch operation 'replace'"),
        "{err}"
    );
    let err = parse_patch(b"this is not json").unwrap_err();
    assert!(err.contains("bad JSON"), "{err}");
    let err = parse_patch(b"42").unwrap_err();
    assert!(err.contains("expected an array of operations"), "{err}");
    let err = parse_patch(br#"[{"op":"add","path":"/a"}]"#).unwrap_err();
    assert!(err.contains("'value'"), "{err}");
    let err = parse_patch(br#"{"op":"add","path":"a","value":1}"#).unwrap_err();
    assert!(err.contains("JSON pointer"), "{err}");
}

#[test]
fn parse_bounds_ops_count() {
    let one = r#"{"op":"remove","path":"/a"}"#;
    let text = vec![one; 10_001].join("\n");
    let err = parse_patch(text.as_bytes()).unwrap_err();
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
    let err = apply_strict(&mut doc, &[add("/m/b", json!(2)), remove("/m/zzz")]).unwrap_err();
    assert!(err.contains("operation 1"), "{err}");
    assert!(err.contains("/m/zzz"), "{err}");
    assert_eq!(doc, json!({"m": {"a": 1}}));
}

#[test]
fn strict_add_with_missing_parent_fails() {
    let mut doc = json!({"m": {}});
    let err = apply_strict(&mut doc, &[add("/m/x/y", json!(1))]).unwrap_err();
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
        .unwrap_err();
    assert!(
        err.contains("unacceptable patch operation for path '/bar/a'"),
        "{err}"
    );
    let err = scope
        .try_config_patch(&[add("/fooBar", json!(1))])
        .unwrap_err();
    assert!(err.contains("unacceptable"), "{err}");
}

#[test]
fn failed_config_patch_names_op() {
    let scope = Scope::new("foo", json!({}), Schemas::none());
    let err = scope
        .try_config_patch(&[remove("/foo/missing")])
        .unwrap_err();
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
        .unwrap_err();
    assert_eq!(
        err,
        "my-module: config values are invalid: /a/c: forbidden property"
    );
    let err = s
        .validate(SchemaKind::Config, &json!({"zz": 1}))
        .unwrap_err();
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
        .unwrap_err();
    assert!(err.contains("/list/1/q: forbidden property"), "{err}");
}

#[test]
fn three_unknown_nested_props_are_three_errors() {
    let schema = "type: object\nproperties:\n  a:\n    type: object\n    properties:\n      x: {type: string}\n  b:\n    type: object\n    properties:\n      y:\n        type: object\n        properties:\n          z: {type: string}\n";
    let s = Schemas::from_yaml(Some(schema), None, "global").unwrap();
    let data = json!({"a": {"x": "1", "u1": 1}, "b": {"u2": 2, "y": {"u3": 3}}});
    let err = s.validate(SchemaKind::Config, &data).unwrap_err();
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

const SEED_GLOBAL_CONFIG: &str = "type: object
additionalProperties: false
required:
  - project
  - clusterName
minProperties: 2
properties:
  project:
    type: string
  clusterName:
    type: string
  clusterHostname:
    type: string
  discovery:
    type: object
";

#[test]
fn seed_global_config_example() {
    let schemas = Schemas::from_yaml(Some(SEED_GLOBAL_CONFIG), None, "global").unwrap();
    let mut scope = Scope::new("global", json!({}), schemas);
    let err = scope
        .check_config(&json!({"project": "myProject"}))
        .unwrap_err();
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
        .unwrap_err();
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
        .unwrap_err();
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
        .unwrap_err();
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
    let err = s.validate(SchemaKind::Helm, &a).unwrap_err();
    assert!(err.starts_with("m: helm values are invalid"), "{err}");
    assert!(err.contains("/internal/param3: is required"), "{err}");

    let b = json!({"param1": "a", "internal": {"param1": "a", "param3": "c"}});
    s.validate(SchemaKind::Values, &b).unwrap();
    assert!(
        s.validate(SchemaKind::Helm, &b)
            .unwrap_err()
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
    let err = Schemas::from_yaml(Some("type: [unclosed"), None, "my-mod").unwrap_err();
    assert!(
        err.contains("my-mod") && err.contains("config-values.yaml"),
        "{err}"
    );
    let err = Schemas::from_yaml(None, Some("- a\n- b\n"), "my-mod").unwrap_err();
    assert!(
        err.contains("values.yaml") && err.contains("mapping"),
        "{err}"
    );
    let err = Schemas::from_yaml(Some("type: 12\n"), None, "my-mod").unwrap_err();
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
        .unwrap_err();
    assert!(
        err.starts_with("my-module: values values are invalid"),
        "{err}"
    );
    assert!(err.contains("/internal/cert"), "{err}");
    assert_eq!(scope.patches, before);
    assert_eq!(scope.values().unwrap()["internal"]["cert"], "c1");

    let err = scope
        .try_values_patch(&[add("/myModule/unknown", json!(1))])
        .unwrap_err();
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
        .unwrap_err();
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
    let err = scope.check_helm(&v).unwrap_err();
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
        .unwrap_err();
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
