use super::*;
use serde_json::json;

fn deployment() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web", "labels": {"app": "web"}},
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{
                    "name": "web", "image": "web:1", "args": ["--port", "80"],
                    "env": [{"name": "A", "value": ""}, {"name": "B", "value": "b"}],
                    "resources": {"limits": {"cpu": 0.5, "memory": "1Gi"}},
                    "ports": [{"containerPort": 80}]
                }]}
            }
        }
    })
}

/// What the API server returns for [`deployment`]: defaults, status, managedFields,
/// a sidecar a webhook injected, normalised quantities, and `value: ""` dropped.
fn served() -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {
            "name": "web", "namespace": "default", "uid": "u-1", "resourceVersion": "42",
            "generation": 3, "creationTimestamp": "2026-11-28T05:00:00Z",
            "labels": {"app": "web", "extra": "added-by-someone"},
            "annotations": {"deployment.kubernetes.io/revision": "1", "meta.helm.sh/release-name": "m"},
            "managedFields": [{"manager": "helm", "operation": "Update", "fieldsV1": {}}]
        },
        "spec": {
            "replicas": 2, "revisionHistoryLimit": 10, "progressDeadlineSeconds": 600,
            "selector": {"matchLabels": {"app": "web"}},
            "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxSurge": "25%", "maxUnavailable": "25%"}},
            "template": {
                "metadata": {"labels": {"app": "web"}, "creationTimestamp": null},
                "spec": {
                    "containers": [
                        {"name": "istio-proxy", "image": "proxy:9"},
                        {"name": "web", "image": "web:1", "args": ["--port", "80"],
                         "env": [{"name": "A"}, {"name": "B", "value": "b"}],
                         "resources": {"limits": {"cpu": "500m", "memory": "1Gi"}},
                         "ports": [{"containerPort": 80, "protocol": "TCP"}],
                         "imagePullPolicy": "IfNotPresent", "terminationMessagePath": "/dev/termination-log"}
                    ],
                    "restartPolicy": "Always", "dnsPolicy": "ClusterFirst", "schedulerName": "default-scheduler",
                    "securityContext": {}, "terminationGracePeriodSeconds": 30
                }
            }
        },
        "status": {"replicas": 2, "readyReplicas": 2}
    })
}

fn paths(d: &[Difference]) -> Vec<&str> {
    d.iter().map(|d| d.path.as_str()).collect()
}

#[test]
fn defaults_status_metadata_sidecars_and_quantities_are_not_drift() {
    assert_eq!(differences(&deployment(), &served(), &[]), []);
}

#[test]
fn an_edited_field_is_drift_with_its_path_and_both_values() {
    let mut live = served();
    live["spec"]["replicas"] = json!(5);
    live["spec"]["template"]["spec"]["containers"][1]["image"] = json!("web:evil");
    let d = differences(&deployment(), &live, &[]);
    assert_eq!(
        paths(&d),
        [
            "/spec/replicas",
            "/spec/template/spec/containers/name=web/image"
        ]
    );
    assert_eq!((d[0].want.clone(), d[0].live.clone()), (json!(2), json!(5)));
}

#[test]
fn removed_list_elements_labels_and_changed_args_are_drift() {
    let mut live = served();
    let web = &mut live["spec"]["template"]["spec"]["containers"][1];
    web["env"] = json!([{"name": "A"}]);
    web["args"] = json!(["--port", "81"]);
    live["metadata"]["labels"] = json!({"extra": "x"});
    let d = differences(&deployment(), &live, &[]);
    assert_eq!(
        paths(&d),
        [
            "/metadata/labels/app",
            "/spec/template/spec/containers/name=web/args",
            "/spec/template/spec/containers/name=web/env/name=B",
        ]
    );
    assert_eq!(d[2].live, Value::Null);
}

#[test]
fn a_changed_quantity_is_drift_and_an_equal_one_in_other_units_is_not() {
    let mut live = served();
    let limits = &mut live["spec"]["template"]["spec"]["containers"][1]["resources"]["limits"];
    limits["memory"] = json!("1024Mi");
    assert_eq!(differences(&deployment(), &live, &[]), []);
    let limits = &mut live["spec"]["template"]["spec"]["containers"][1]["resources"]["limits"];
    limits["cpu"] = json!("1");
    let d = differences(&deployment(), &live, &[]);
    assert_eq!(
        paths(&d),
        ["/spec/template/spec/containers/name=web/resources/limits/cpu"]
    );
}

#[test]
fn ignore_rules_cover_a_path_and_what_is_under_it_with_wildcards() {
    let mut live = served();
    live["spec"]["replicas"] = json!(7);
    live["spec"]["template"]["spec"]["containers"][1]["image"] = json!("web:2");
    let ignore = ["/spec/replicas".to_string()];
    assert_eq!(differences(&deployment(), &live, &ignore).len(), 1);
    let ignore = [
        "/spec/replicas".to_string(),
        "/spec/template/spec/containers/*/image".to_string(),
    ];
    assert_eq!(differences(&deployment(), &live, &ignore), []);
    assert!(!covers("/spec/replicas", "/spec"));
    assert!(covers("/spec", "/spec/replicas"));
}

#[test]
fn a_secret_string_data_compares_as_its_data() {
    let want = json!({"kind": "Secret", "stringData": {"password": "s3cret"}, "type": "Opaque"});
    let live = json!({"kind": "Secret", "data": {"password": "czNjcmV0"}, "type": "Opaque"});
    assert_eq!(differences(&want, &live, &[]), []);
    let changed = json!({"kind": "Secret", "data": {"password": "b3RoZXI="}, "type": "Opaque"});
    assert_eq!(
        paths(&differences(&want, &changed, &[])),
        ["/data/password"]
    );
}

#[test]
fn lists_without_names_match_by_position_and_a_type_change_is_drift() {
    let want = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080}]}});
    let live = json!({"spec": {"ports": [{"port": 80, "targetPort": 8080, "protocol": "TCP"}]}});
    assert_eq!(differences(&want, &live, &[]), []);
    let live = json!({"spec": {"ports": [{"port": 80, "targetPort": "http"}]}});
    assert_eq!(
        paths(&differences(&want, &live, &[])),
        ["/spec/ports/0/targetPort"]
    );
    let live = json!({"spec": {"ports": {"port": 80}}});
    assert_eq!(paths(&differences(&want, &live, &[])), ["/spec/ports"]);
}

#[test]
fn odd_strings_are_not_quantities() {
    for (a, b) in [("1e3", "1k"), ("0.1", "100m")] {
        assert!(scalars_match(&json!(a), &json!(b)), "{a} {b}");
    }
    for (a, b) in [("inf", "Infinity"), ("web", "web2"), ("", "0"), ("1x", "1")] {
        assert!(!scalars_match(&json!(a), &json!(b)), "{a} {b}");
    }
}
