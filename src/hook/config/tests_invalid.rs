//! Tests: invalid configs. Each row is a config and the exact error text it
//! must produce: the hook name, the binding (type, index, name), the field,
//! then what is wrong and what is accepted, keeping flant's phrases.

use super::*;

const HOOK: &str = "002-hooks/a.sh";

#[rustfmt::skip]
const CASES: &[(&str, &str, &str)] = &[
    ("unsupported_version", "configVersion: v2\nonStartup: 1\n",
     "hook '002-hooks/a.sh': field 'configVersion': 'configVersion' value 'v2' is unsupported; accepted: v1 (or v0)"),
    ("empty_version", "configVersion: ''\nonStartup: 1\n",
     "hook '002-hooks/a.sh': field 'configVersion': 'configVersion' value '' is unsupported; accepted: v1 (or v0)"),
    ("numeric_version", "configVersion: 1\nonStartup: 1\n",
     "hook '002-hooks/a.sh': field 'configVersion': string value is expected for key 'configVersion', got \"number\""),
    ("null_version", "configVersion:\nonStartup: 1\n",
     "hook '002-hooks/a.sh': field 'configVersion': missing 'configVersion' value; accepted: v1 (or v0)"),
    ("v1_without_bindings", "configVersion: v1\n",
     "hook '002-hooks/a.sh': config has nothing besides 'configVersion': add at least one binding (onStartup, schedule, kubernetes, kubernetesValidating, kubernetesMutating, kubernetesCustomResourceConversion) or settings"),
    ("v0_without_bindings", "{}",
     "hook '002-hooks/a.sh': config has no bindings: expected onStartup, schedule or onKubernetesEvent (v0), or configVersion: v1"),
    ("empty_output", "",
     "hook '002-hooks/a.sh': --config output is empty: expected a YAML or JSON object"),
    ("not_an_object", "- a\n- b\n",
     "hook '002-hooks/a.sh': config must be an object, got \"array\""),
    ("broken_yaml", "configVersion: v1\nkubernetes: [\n",
     "hook '002-hooks/a.sh': cannot read --config output as YAML or JSON: did not find expected node content at line 3 column 1, while parsing a flow node"),
    ("on_startup_string", "configVersion: v1\nonStartup: '10'\n",
     "hook '002-hooks/a.sh': onStartup: must be of type integer: \"string\""),
    ("on_startup_fraction", "configVersion: v1\nonStartup: 1.5\n",
     "hook '002-hooks/a.sh': onStartup: must be of type integer: \"number\" (1.5)"),
    ("unknown_top_key", "configVersion: v1\nonStart: 1\n",
     "hook '002-hooks/a.sh': field 'onStart': onStart is a forbidden property; accepted properties: configVersion, onStartup, schedule, kubernetes, kubernetesValidating, kubernetesMutating, kubernetesCustomResourceConversion, settings"),
    ("empty_schedule_list", "configVersion: v1\nschedule: []\n",
     "hook '002-hooks/a.sh': field 'schedule': must have at least 1 item(s), got 0"),
    ("bad_crontab", "configVersion: v1\nschedule:\n- name: every-min\n  crontab: '*/5 * *'\n",
     "hook '002-hooks/a.sh': schedule[0] \"every-min\": field 'crontab': \"*/5 * *\" is invalid: expected 5 or 6 fields, got 3"),
    ("crontab_out_of_range", "configVersion: v1\nschedule:\n- name: s\n  crontab: '0 0 * * 8'\n",
     "hook '002-hooks/a.sh': schedule[0] \"s\": field 'crontab': \"0 0 * * 8\" is invalid: day of week: 8 in \"8\" is out of range 0-7"),
    ("bad_allow_failure", "configVersion: v1\nschedule:\n- crontab: '* * * * *'\n  allowFailure: maybe\n",
     "hook '002-hooks/a.sh': schedule[0]: field 'allowFailure': must be of type boolean: \"string\" (\"maybe\"); accepted: true or false"),
    ("missing_crontab", "configVersion: v1\nschedule:\n- name: x\n",
     "hook '002-hooks/a.sh': schedule[0] \"x\": field 'crontab': is required"),
    ("schedule_name_not_string", "configVersion: v1\nschedule:\n- name: 5\n  crontab: '@daily'\n",
     "hook '002-hooks/a.sh': schedule[0]: field 'name': must be of type string: \"number\""),
    ("snapshot_name_not_found", "configVersion: v1\nschedule:\n- crontab: '* * * * *'\n  includeSnapshotsFrom: [pods]\nkubernetes:\n- {name: nodes, kind: Node}\n",
     "hook '002-hooks/a.sh': schedule[0]: field 'includeSnapshotsFrom[0]': 'pods' binding name not found; kubernetes binding names: nodes"),
    ("snapshot_name_ambiguous", "configVersion: v1\nschedule:\n- crontab: '* * * * *'\n  includeSnapshotsFrom: [kubernetes]\nkubernetes:\n- kind: Pod\n- kind: Secret\n",
     "hook '002-hooks/a.sh': schedule[0]: field 'includeSnapshotsFrom[0]': there are 2 'kubernetes' binding names; give those kubernetes bindings distinct names"),
    ("watch_event_not_array", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  watchEvent: Added\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'watchEvent': must be of type array: \"string\""),
    ("unknown_event", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  executeHookOnEvent: [Added, Created]\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'executeHookOnEvent[1]': \"Created\" should be one of [Added, Modified, Deleted]"),
    ("match_names_number", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  nameSelector:\n    matchNames: [20]\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'nameSelector.matchNames[0]': must be of type string: \"number\""),
    ("mode_is_forbidden", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  mode: v0\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'mode': mode is a forbidden property; accepted properties: name, apiVersion, kind, executeHookOnEvent, watchEvent, executeHookOnSynchronization, waitForSynchronization, keepFullObjectsInMemory, resynchronizationPeriod, nameSelector, labelSelector, fieldSelector, namespace, jqFilter, allowFailure, includeSnapshotsFrom, queue, group"),
    ("missing_kind", "configVersion: v1\nkubernetes:\n- name: pods\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'kind': is required"),
    ("empty_kind", "configVersion: v1\nkubernetes:\n- kind: ''\n",
     "hook '002-hooks/a.sh': kubernetes[0]: field 'kind': must not be empty"),
    ("bad_api_version", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  apiVersion: v1/12/wqe\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'apiVersion': \"v1/12/wqe\" is invalid: unexpected GroupVersion string: expected \"version\" or \"group/version\", like \"v1\" or \"apps/v1\""),
    ("sync_flag_not_bool", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  executeHookOnSynchronization: ok\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'executeHookOnSynchronization': must be of type boolean: \"string\" (\"ok\"); accepted: true or false"),
    ("empty_label_selector", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  labelSelector: {}\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'labelSelector': must have at least one of the properties matchLabels, matchExpressions"),
    ("label_operator_enum", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  labelSelector:\n    matchExpressions:\n    - key: app\n      operator: Equals\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'labelSelector.matchExpressions[0].operator': \"Equals\" should be one of [In, NotIn, Exists, DoesNotExist]"),
    ("in_without_values", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  labelSelector:\n    matchExpressions:\n    - key: app\n      operator: In\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'labelSelector.matchExpressions[0].values': operator In needs at least one value"),
    ("exists_with_values", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  labelSelector:\n    matchExpressions:\n    - {key: app, operator: Exists, values: [a]}\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'labelSelector.matchExpressions[0].values': operator Exists takes no values, got 1"),
    ("bad_label_key", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  labelSelector:\n    matchLabels: {'bad key!': x}\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'labelSelector.matchLabels.bad key!': \"bad key!\" is not a valid label key: expected [prefix/]name where name has 1-63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit"),
    ("bad_label_value", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  labelSelector:\n    matchLabels: {app: '-x-'}\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'labelSelector.matchLabels.app': \"-x-\" is not a valid label value: expected at most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit (or empty)"),
    ("field_expression_without_value", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  fieldSelector:\n    matchExpressions:\n    - field: status.phase\n      operator: Equals\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'fieldSelector.matchExpressions[0].value': is required: each expression needs exactly field, operator and value"),
    ("field_operator_enum", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  fieldSelector:\n    matchExpressions:\n    - {field: status.phase, operator: Like, value: Running}\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'fieldSelector.matchExpressions[0].operator': \"Like\" should be one of [=, ==, Equals, !=, NotEquals]"),
    ("field_name_vs_name_selector", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  fieldSelector:\n    matchExpressions:\n    - field: metadata.name\n      operator: '='\n      value: x\n  nameSelector:\n    matchNames: [y]\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'fieldSelector': fieldSelector 'metadata.name' and nameSelector.matchNames are mutually exclusive; use only one of them"),
    ("empty_namespace", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  namespace: {}\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'namespace': must have at least one of the properties nameSelector, labelSelector"),
    ("name_selector_as_array", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  namespace:\n    nameSelector: [default]\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'namespace.nameSelector': must be of type object: \"array\"; write nameSelector: {matchNames: [...]}"),
    ("empty_include_snapshots", "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  includeSnapshotsFrom: []\n",
     "hook '002-hooks/a.sh': kubernetes[0] \"pods\": field 'includeSnapshotsFrom': must have at least 1 item(s), got 0"),
    ("validating_name_not_fqdn", "configVersion: v1\nkubernetesValidating:\n- name: snapshots\n",
     "hook '002-hooks/a.sh': kubernetesValidating[0] \"snapshots\": field 'name': \"snapshots\" is invalid: must be a fully qualified domain name with at least three dot-separated segments, like \"check.example.com\""),
    ("validating_timeout_and_duplicate", "configVersion: v1\nkubernetesValidating:\n- name: a.b.c\n  timeoutSeconds: 32\n- name: a.b.c\n",
     "hook '002-hooks/a.sh': kubernetesValidating[0] \"a.b.c\": field 'timeoutSeconds': 32 is invalid: must be between 1 and 30 seconds\nhook '002-hooks/a.sh': kubernetesValidating[1] \"a.b.c\": field 'name': duplicate name \"a.b.c\": kubernetesValidating[0] \"a.b.c\" already uses it"),
    ("validating_missing_name", "configVersion: v1\nkubernetesValidating:\n- rules: []\n",
     "hook '002-hooks/a.sh': kubernetesValidating[0]: field 'name': is required\nhook '002-hooks/a.sh': kubernetesValidating[0]: field 'rules': must have at least 1 item(s), got 0"),
    ("rule_wildcards", "configVersion: v1\nkubernetesValidating:\n- name: a.b.c\n  rules:\n  - apiGroups: ['*', apps]\n    apiVersions: ['']\n    operations: [CREATE, '*', PATCH]\n    resources: ['*', pods, '*/*']\n    scope: Global\n",
     "hook '002-hooks/a.sh': kubernetesValidating[0] \"a.b.c\": field 'rules[0].scope': \"Global\" should be one of [Cluster, Namespaced, *]\nhook '002-hooks/a.sh': kubernetesValidating[0] \"a.b.c\": field 'rules[0].apiGroups': '*' must be the only API group when present\nhook '002-hooks/a.sh': kubernetesValidating[0] \"a.b.c\": field 'rules[0].apiVersions[0]': must not be empty\nhook '002-hooks/a.sh': kubernetesValidating[0] \"a.b.c\": field 'rules[0].operations': '*' must be the only operation when present\nhook '002-hooks/a.sh': kubernetesValidating[0] \"a.b.c\": field 'rules[0].operations[2]': \"PATCH\" should be one of [CREATE, UPDATE, DELETE, CONNECT, *]\nhook '002-hooks/a.sh': kubernetesValidating[0] \"a.b.c\": field 'rules[0].resources': '*/*' must be the only resource when present\nhook '002-hooks/a.sh': kubernetesValidating[0] \"a.b.c\": field 'rules[0].resources': '*' must not be combined with resources without a subresource"),
    ("rule_subresource_overlap", "configVersion: v1\nkubernetesValidating:\n- name: a.b.c\n  rules:\n  - apiGroups: [apps]\n    apiVersions: [v1]\n    operations: [CREATE]\n    resources: [deployments/*, deployments/scale, '*/status', pods/status]\n",
     "hook '002-hooks/a.sh': kubernetesValidating[0] \"a.b.c\": field 'rules[0].resources[1]': \"deployments/scale\" is already covered by 'deployments/*'\nhook '002-hooks/a.sh': kubernetesValidating[0] \"a.b.c\": field 'rules[0].resources[3]': \"pods/status\" is already covered by '*/status'"),
    ("mutating_rule_missing_resources", "configVersion: v1\nkubernetesMutating:\n- name: a.b.c\n  rules:\n  - apiGroups: [apps]\n    apiVersions: [v1]\n    operations: [CREATE]\n",
     "hook '002-hooks/a.sh': kubernetesMutating[0] \"a.b.c\": field 'rules[0].resources': is required"),
    ("mutating_policies_and_namespace", "configVersion: v1\nkubernetesMutating:\n- name: a.b.c\n  namespace: {}\n  failurePolicy: Maybe\n  sideEffects: Some\n",
     "hook '002-hooks/a.sh': kubernetesMutating[0] \"a.b.c\": field 'failurePolicy': \"Maybe\" should be one of [Ignore, Fail]\nhook '002-hooks/a.sh': kubernetesMutating[0] \"a.b.c\": field 'sideEffects': \"Some\" should be one of [None, NoneOnDryRun]\nhook '002-hooks/a.sh': kubernetesMutating[0] \"a.b.c\": field 'namespace.labelSelector': is required"),
    ("match_condition_without_expression", "configVersion: v1\nkubernetesValidating:\n- name: a.b.c\n  matchConditions:\n  - name: x\n",
     "hook '002-hooks/a.sh': kubernetesValidating[0] \"a.b.c\": field 'matchConditions[0].expression': is required"),
    ("conversion_missing_fields", "configVersion: v1\nkubernetesCustomResourceConversion:\n- name: conv\n",
     "hook '002-hooks/a.sh': kubernetesCustomResourceConversion[0] \"conv\": field 'crdName': is required\nhook '002-hooks/a.sh': kubernetesCustomResourceConversion[0] \"conv\": field 'conversions': is required"),
    ("conversion_pair_incomplete", "configVersion: v1\nkubernetesCustomResourceConversion:\n- name: conv\n  crdName: a.b\n  conversions:\n  - fromVersion: v1\n",
     "hook '002-hooks/a.sh': kubernetesCustomResourceConversion[0] \"conv\": field 'conversions[0].toVersion': is required"),
    ("settings_bad_values", "configVersion: v1\nsettings:\n  executionMinInterval: 30ks\n  executionBurst: -1\n",
     "hook '002-hooks/a.sh': settings: field 'executionMinInterval': invalid duration \"30ks\": unknown unit \"ks\" (accepted: ns, us, µs, ms, s, m, h)\nhook '002-hooks/a.sh': settings: field 'executionBurst': -1 is invalid: expected an integer from 0 to 4294967295"),
    ("settings_unknown_key", "configVersion: v1\nsettings:\n  executionMinInterval: 30s\n  burst: 1\n",
     "hook '002-hooks/a.sh': settings: field 'burst': burst is a forbidden property; accepted properties: executionMinInterval, executionBurst"),
    ("v0_unknown_event", "onKubernetesEvent:\n- kind: Pod\n  event: [add, modify]\n",
     "hook '002-hooks/a.sh': onKubernetesEvent[0]: field 'event[1]': event 'modify' is unsupported; accepted: add, update, delete"),
    ("v0_with_v1_key", "onStartup: 1\nkubernetes: []\n",
     "hook '002-hooks/a.sh': field 'kubernetes': kubernetes is a forbidden property in config v0; add 'configVersion: v1' to use it"),
    ("v0_unknown_top_key", "onStartup: 1\nfoo: 2\n",
     "hook '002-hooks/a.sh': field 'foo': foo is a forbidden property; accepted properties: onStartup, schedule, onKubernetesEvent"),
    ("explicit_v0_with_v1_key", "configVersion: v0\nsettings: {}\n",
     "hook '002-hooks/a.sh': field 'settings': settings is a forbidden property in config v0; add 'configVersion: v1' to use it\nhook '002-hooks/a.sh': config has no bindings: expected onStartup, schedule or onKubernetesEvent (v0), or configVersion: v1"),
    ("v0_bad_crontab", "schedule:\n- name: s\n  crontab: '61 * * * *'\n",
     "hook '002-hooks/a.sh': schedule[0] \"s\": field 'crontab': \"61 * * * *\" is invalid: minute: 61 in \"61\" is out of range 0-59"),
    ("v0_event_not_array", "onKubernetesEvent:\n- name: e\n  event: add\n",
     "hook '002-hooks/a.sh': onKubernetesEvent[0] \"e\": field 'event': must be of type array: \"string\""),
    ("json_binding_not_object", "{\"configVersion\":\"v1\",\"schedule\":[\"* * * * *\"]}",
     "hook '002-hooks/a.sh': schedule[0]: must be of type object: \"string\""),
];

#[test]
fn invalid_configs_report_exact_messages() {
    assert!(CASES.len() >= 15);
    for (name, text, want) in CASES {
        let err = match parse(HOOK, text) {
            Ok(_) => panic!("case {name}: parsed, expected an error"),
            Err(e) => e,
        };
        assert_eq!(err.to_string(), *want, "case {name}");
        assert_eq!(err.hook(), HOOK);
    }
}

/// Every problem is reported, not only the first, in config order.
#[test]
fn all_problems_are_collected() {
    let text = r#"
configVersion: v1
onStartup: x
schedule:
- {name: a, crontab: "* * *"}
- {name: b, crontab: "* * * * *", queue: 7}
kubernetes:
- {name: k, kind: Pod, includeSnapshotsFrom: [nope]}
settings: {executionBurst: "3"}
"#;
    let err = parse(HOOK, text).unwrap_err();
    let got: Vec<(String, String)> = err
        .problems()
        .iter()
        .map(|p| (p.at.clone(), p.field.clone()))
        .collect();
    let want = [
        ("onStartup", ""),
        ("settings", "executionBurst"),
        ("kubernetes[0] \"k\"", "includeSnapshotsFrom[0]"),
        ("schedule[0] \"a\"", "crontab"),
        ("schedule[1] \"b\"", "queue"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(a, f)| (a.to_string(), f.to_string()))
        .collect();
    assert_eq!(got, want);
    assert_eq!(err.to_string().lines().count(), 5);
    assert!(
        err.to_string()
            .lines()
            .all(|l| l.starts_with("hook '002-hooks/a.sh': "))
    );
}

#[test]
fn config_error_is_a_std_error() {
    let err: Box<dyn std::error::Error> = Box::new(parse(HOOK, "").unwrap_err());
    assert_eq!(
        err.to_string(),
        "hook '002-hooks/a.sh': --config output is empty: expected a YAML or JSON object"
    );
}

/// Schema problems in nested selectors of several bindings are all reported.
#[test]
fn nested_selector_problems_in_several_bindings() {
    let text = r#"{"configVersion": "v1", "kubernetes": [
      {"kind": "Pod", "nameSelector": {"matchNames": [20]},
       "labelSelector": {"matchLabels": {"foo": 28},
                         "matchExpressions": [{"key": "foo", "operand": "notin"}]}},
      {"kind": "Pod", "namespace": {"nameSelector": {"matchNames": {"asd": "QWE"}}}},
      {"kind": "Pod", "namespace": {"labelSelector":
                         {"matchExpressions": [{"key": "foo", "operator": "IsNotin"}]}}},
      {"kind": "Pod", "fieldSelector":
                         {"matchExpressions": [{"field": "foo", "operator": "IsNotin", "value": 2989}]}},
      {"kind": "Pod", "executeHookOnEvent": ["Added", "updated"]}
    ]}"#;
    let err = parse(HOOK, text).unwrap_err();
    let got: Vec<String> = err.problems().iter().map(|p| p.to_string()).collect();
    let want = [
        "kubernetes[0]: field 'nameSelector.matchNames[0]': must be of type string: \"number\"",
        "kubernetes[0]: field 'labelSelector.matchLabels.foo': must be of type string: \"number\"",
        "kubernetes[0]: field 'labelSelector.matchExpressions[0].operand': operand is a forbidden property; accepted properties: key, operator, values",
        "kubernetes[0]: field 'labelSelector.matchExpressions[0].operator': is required",
        "kubernetes[1]: field 'namespace.nameSelector.matchNames': must be of type array: \"object\"",
        "kubernetes[2]: field 'namespace.labelSelector.matchExpressions[0].operator': \"IsNotin\" should be one of [In, NotIn, Exists, DoesNotExist]",
        "kubernetes[3]: field 'fieldSelector.matchExpressions[0].operator': \"IsNotin\" should be one of [=, ==, Equals, !=, NotEquals]",
        "kubernetes[3]: field 'fieldSelector.matchExpressions[0].value': must be of type string: \"number\"",
        "kubernetes[4]: field 'executeHookOnEvent[1]': \"updated\" should be one of [Added, Modified, Deleted]",
    ];
    assert_eq!(got, want);
}
