//! Invalid patch files and their exact errors: nothing is applied, and the
//! message names the document (counted from 1), the operation and the field.
//! Also the valid and invalid shapes of flant's oracle files, restated.

use crate::common;

use shell_operator::patch::parse;
use std::time::Duration;

/// (name, file, expected error).
const CASES: &[(&str, &str, &str)] = &[
    (
        "delete_missing_kind_lowercase_key",
        r#"operation: Delete
kind: Pod
name: a
---
operation: Delete
apiversion: v1
name: b
"#,
        "patch document 2 (Delete), field 'apiversion': unknown field (did you mean 'apiVersion'?)",
    ),
    (
        "delete_missing_kind",
        r#"operation: Delete
kind: Pod
name: a
---
operation: DeleteInBackground
name: b
"#,
        "patch document 2 (DeleteInBackground), field 'kind': is required for DeleteInBackground operations",
    ),
    (
        "delete_missing_name",
        r#"{"operation": "DeleteNonCascading", "kind": "Pod"}"#,
        "patch document 1 (DeleteNonCascading), field 'name': is required for DeleteNonCascading operations",
    ),
    (
        "operation_jsonPatch",
        r#"operation: jsonPatch
kind: Pod
name: a
jsonPatch: []
"#,
        "patch document 1, field 'operation': 'jsonPatch' is not an operation (names are case-sensitive: did you mean 'JSONPatch'?); use one of Create, CreateOrUpdate, CreateIfNotExists, Delete, DeleteInBackground, DeleteNonCascading, JQPatch, MergePatch, JSONPatch",
    ),
    (
        "operation_unknown",
        r#"{"operation": "Patch", "kind": "Pod", "name": "a"}"#,
        "patch document 1, field 'operation': 'Patch' is not an operation; use one of Create, CreateOrUpdate, CreateIfNotExists, Delete, DeleteInBackground, DeleteNonCascading, JQPatch, MergePatch, JSONPatch",
    ),
    (
        "operation_missing",
        r#"{"kind": "Pod", "name": "a"}"#,
        "patch document 1, field 'operation': is required, one of Create, CreateOrUpdate, CreateIfNotExists, Delete, DeleteInBackground, DeleteNonCascading, JQPatch, MergePatch, JSONPatch",
    ),
    (
        "operation_not_string",
        r#"{"operation": 1}"#,
        "patch document 1, field 'operation': must be a string, got a number",
    ),
    (
        "unknown_key",
        r#"{"operation": "MergePatch", "kind": "Pod", "name": "a", "mergePatch": {"a": 1}, "ignoreMissingObjects": true}"#,
        "patch document 1 (MergePatch), field 'ignoreMissingObjects': unknown field (did you mean 'ignoreMissingObject'?)",
    ),
    (
        "object_null",
        r#"operation: Create
object: null
"#,
        "patch document 1 (Create), field 'object': must be an object or a string holding one, got null",
    ),
    (
        "object_missing",
        r#"operation: CreateOrUpdate
"#,
        "patch document 1 (CreateOrUpdate), field 'object': is required for CreateOrUpdate operations",
    ),
    (
        "object_without_name",
        r#"{"operation": "Create", "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"namespace": "x"}}}"#,
        "patch document 1 (Create), field 'object.metadata.name': must be a non-empty string",
    ),
    (
        "object_without_kind",
        r#"{"operation": "CreateIfNotExists", "object": {"apiVersion": "v1", "metadata": {"name": "x"}}}"#,
        "patch document 1 (CreateIfNotExists), field 'object.kind': must be a non-empty string",
    ),
    (
        "object_string_not_yaml",
        r#"{"operation": "Create", "object": "kind: [ConfigMap"}"#,
        "patch document 1 (Create), field 'object': the string is not valid YAML or JSON: did not find expected ',' or ']' at line 2 column 1, while parsing a flow sequence at line 1 column 7",
    ),
    (
        "object_array",
        r#"{"operation": "Create", "object": [1]}"#,
        "patch document 1 (Create), field 'object': must be an object or a string holding one, got an array",
    ),
    (
        "name_differs_from_object",
        r#"{"operation": "Create", "name": "other", "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}}"#,
        "patch document 1 (Create), field 'name': 'other' differs from the object's 'x'",
    ),
    (
        "json_patch_second_op_without_value",
        r#"{"operation": "JSONPatch", "kind": "Pod", "name": "a", "jsonPatch": [{"op": "remove", "path": "/a"}, {"op": "add", "path": "/b"}]}"#,
        "patch document 1 (JSONPatch), field 'jsonPatch[1].value': is required for op 'add'",
    ),
    (
        "json_patch_bad_op",
        r#"{"operation": "JSONPatch", "kind": "Pod", "name": "a", "jsonPatch": [{"op": "delete", "path": "/a"}]}"#,
        "patch document 1 (JSONPatch), field 'jsonPatch[0].op': 'delete' is not one of add, remove, replace, move, copy, test",
    ),
    (
        "json_patch_bad_path",
        r#"{"operation": "JSONPatch", "kind": "Pod", "name": "a", "jsonPatch": [{"op": "remove", "path": "a"}]}"#,
        "patch document 1 (JSONPatch), field 'jsonPatch[0].path': 'a' is not a JSON pointer (must start with '/')",
    ),
    (
        "json_patch_move_without_from",
        r#"{"operation": "JSONPatch", "kind": "Pod", "name": "a", "jsonPatch": "[{\"op\": \"move\", \"path\": \"/a\"}]"}"#,
        "patch document 1 (JSONPatch), field 'jsonPatch[0].from': is required",
    ),
    (
        "json_patch_empty",
        r#"{"operation": "JSONPatch", "kind": "Pod", "name": "a", "jsonPatch": []}"#,
        "patch document 1 (JSONPatch), field 'jsonPatch': must not be empty",
    ),
    (
        "json_patch_object",
        r#"{"operation": "JSONPatch", "kind": "Pod", "name": "a", "jsonPatch": {"op": "add"}}"#,
        "patch document 1 (JSONPatch), field 'jsonPatch': must be an array of operations or a string holding one, got an object",
    ),
    (
        "jq_filter_bad",
        r#"{"operation": "JQPatch", "kind": "Pod", "name": "a", "jqFilter": ".foo |"}"#,
        "patch document 1 (JQPatch), field 'jqFilter': cannot parse jq filter: expected term at end of input",
    ),
    (
        "jq_filter_undefined",
        r#"{"operation": "JQPatch", "kind": "Pod", "name": "a", "jqFilter": "nosuchfn(1)"}"#,
        "patch document 1 (JQPatch), field 'jqFilter': cannot compile jq filter: undefined nosuchfn (Filter(1))",
    ),
    (
        "jq_filter_missing",
        r#"operation: JQPatch
kind: Pod
name: a
"#,
        "patch document 1 (JQPatch), field 'jqFilter': is required for JQPatch operations",
    ),
    (
        "merge_patch_missing",
        r#"operation: MergePatch
kind: Pod
name: a
"#,
        "patch document 1 (MergePatch), field 'mergePatch': is required for MergePatch operations",
    ),
    (
        "merge_patch_array",
        r#"{"operation": "MergePatch", "kind": "Pod", "name": "a", "mergePatch": [1, 2]}"#,
        "patch document 1 (MergePatch), field 'mergePatch': must be an object or a string holding one, got an array",
    ),
    (
        "merge_patch_number_string",
        r#"{"operation": "MergePatch", "kind": "Pod", "name": "a", "mergePatch": "42"}"#,
        "patch document 1 (MergePatch), field 'mergePatch': must be an object or a string holding one, got a number",
    ),
    (
        "merge_patch_empty",
        r#"{"operation": "MergePatch", "kind": "Pod", "name": "a", "mergePatch": {}}"#,
        "patch document 1 (MergePatch), field 'mergePatch': must not be empty",
    ),
    (
        "field_of_another_operation",
        r#"{"operation": "MergePatch", "kind": "Pod", "name": "a", "mergePatch": {"a": 1}, "jqFilter": "."}"#,
        "patch document 1 (MergePatch), field 'jqFilter': is not used by MergePatch operations",
    ),
    (
        "boolean_as_string",
        r#"operation: Delete
kind: Pod
name: a
ignoreHookError: "yes"
"#,
        "patch document 1 (Delete), field 'ignoreHookError': must be true or false, got a string",
    ),
    (
        "namespace_number",
        r#"{"operation": "Delete", "kind": "Pod", "name": "a", "namespace": 5}"#,
        "patch document 1 (Delete), field 'namespace': must be a string, got a number",
    ),
    (
        "document_not_mapping",
        r#"- operation: Delete
  kind: Pod
  name: a
"#,
        "patch document 1: must be a mapping of operation fields, got an array (write one document per operation, not a list)",
    ),
    (
        "invalid_yaml",
        r#"operation: Delete
kind: [Pod
"#,
        "patch file: document 1 is not valid YAML: did not find expected ',' or ']' at line 3 column 1, while parsing a flow sequence at line 2 column 7",
    ),
    (
        "invalid_json_stream",
        r#"{"operation": "Delete", "kind": "Pod", "name": "a"}
{"operation": "Delete", "kind": "Pod" "name": "b"}"#,
        "patch file: document 2 is not valid JSON: expected `,` or `}` at line 2 column 39",
    ),
];

#[test]
fn invalid_files_and_their_errors() {
    let mut wrong = Vec::new();
    for (name, text, want) in CASES {
        match parse(text.as_bytes()) {
            Ok(ops) => wrong.push(format!("{name}: accepted ({} ops)", ops.len())),
            Err(e) if e.to_string() != *want => {
                wrong.push(format!("{name}:\n  want: {want}\n  got:  {e}"))
            }
            Err(e) => assert!(e.is_invalid_file(), "{name}"),
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

/// flant's valid oracle shapes, restated: creates with an object map, the three
/// deletes with every coordinate, and the three patch kinds.
#[test]
fn valid_oracle_shapes_parse() {
    let text = r#"
operation: Create
object: {apiVersion: v1, kind: ConfigMap, metadata: {name: a, namespace: ns}}
---
operation: CreateOrUpdate
object: {apiVersion: v1, kind: ConfigMap, metadata: {name: b, namespace: ns}, data: {k: v}}
---
operation: Delete
apiVersion: v1
kind: Pod
namespace: ns
name: p
subresource: status
---
{operation: DeleteInBackground, kind: Pod, namespace: ns, name: p}
---
{operation: DeleteNonCascading, kind: Pod, namespace: ns, name: p}
---
{operation: JQPatch, kind: Pod, namespace: ns, name: p, jqFilter: '.metadata.labels.a = "b"'}
---
{operation: MergePatch, kind: Pod, namespace: ns, name: p, mergePatch: {metadata: {labels: {a: b}}}}
---
{operation: JSONPatch, kind: Pod, namespace: ns, name: p, jsonPatch: [{op: remove, path: /metadata/labels/a}]}
"#;
    let ops = parse(text.as_bytes()).expect("valid");
    let got: Vec<String> = ops.iter().map(|o| o.description()).collect();
    assert_eq!(
        got,
        [
            "Create object v1/ConfigMap/ns/a",
            "Create object v1/ConfigMap/ns/b",
            "Delete object v1/Pod/ns/p",
            "Delete object /Pod/ns/p",
            "Delete object /Pod/ns/p",
            "Filter object /Pod/ns/p",
            "Patch object /Pod/ns/p",
            "Patch object /Pod/ns/p",
        ]
    );
    assert_eq!(
        ops[7].patch().map(|p| format!("{p:?}")).as_deref(),
        Some(
            r#"Json(Array [Object {"op": String("remove"), "path": String("/metadata/labels/a")}])"#
        )
    );
}

/// One invalid document fails the whole file, so nothing is applied, even the
/// valid operations before it: the real operator runs a hook whose patch file
/// creates a ConfigMap and then has a misspelt field. The fence is the run's
/// failure in the log (written after the patch file was handled); by then a
/// patcher that applied the valid part would have created the ConfigMap.
#[test]
fn invalid_file_applies_nothing() {
    let sim = kube_sim::Sim::start();
    let dir = common::TempDir::new("patch-invalid");
    let kubeconfig = dir.0.join("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let body = r#"cat > "$KUBERNETES_PATCH_PATH" <<'EOF'
{"operation": "Create", "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "first", "namespace": "default"}}}
{"operation": "Delete", "kind": "ConfigMap", "name": "x", "namspace": "default"}
EOF"#;
    let op = common::Operator::start(
        &[(
            "patch.sh",
            common::hook("patch", "configVersion: v1\nonStartup: 1", body),
        )],
        &["--kube-config", kubeconfig.to_str().expect("utf8")],
        &[],
    );
    let log = op.wait_log("Hook failed, will retry", Duration::from_secs(20));
    assert!(
        log.contains("patch document 2 (Delete), field 'namspace'"),
        "{log}"
    );
    assert_eq!(sim.get("v1", "ConfigMap", "default", "first"), None);
    // The same file parsed directly names the same document and field.
    let text = body.lines().skip(1).take(2).collect::<Vec<_>>().join("\n");
    let err = parse(text.as_bytes()).unwrap_err();
    assert_eq!((err.document(), err.field()), (Some(2), Some("namspace")));
}

/// The patcher examples of docs/hooks.md parse, and its error examples are real.
#[test]
fn readme_examples_are_true() {
    let readme = include_str!("../../docs/hooks.md");
    let section = readme
        .split("## Changing objects from hooks")
        .nth(1)
        .and_then(|s| s.split("\n## ").next())
        .expect("README section");
    let between = |from: &str, to: &str| {
        let rest = section.split(from).nth(1).expect(from);
        rest.split(to).next().expect(to).to_string()
    };
    let json = between("<<'PATCH'\n", "\nPATCH");
    assert_eq!(parse(json.as_bytes()).expect("README JSON").len(), 2);
    let yaml = between("```yaml\n", "```");
    assert_eq!(parse(yaml.as_bytes()).expect("README YAML").len(), 2);
    let shown = section
        .lines()
        .filter(|l| l.starts_with("patch document "))
        .count();
    let real = CASES
        .iter()
        .filter(|(_, _, want)| section.contains(want))
        .count();
    assert_eq!(shown, real, "every README error example is a tested error");
}
