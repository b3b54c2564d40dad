//! Tests: module directory names (spec §2.1) and deep merge (§3.2).

use crate::addon::config::values::*;
use serde_json::json;

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
