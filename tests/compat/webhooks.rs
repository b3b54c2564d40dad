//! Admission webhooks through both operators on the same real API server.
//!
//! Side by side: each registers its own ValidatingWebhookConfiguration for the same
//! hook, so the API server calls both for every request and both hooks must receive
//! the same AdmissionReview; the two configurations must be the same but for their
//! names and Services.
//!
//! Migration (README, "Migrating from flant's shell-operator"): flant's operator
//! registers its configuration and stops; ours starts with the same flags and takes
//! it over (one configuration, not two, and it keeps working); then the way back.

use crate::common::Operator;
use crate::oracle::{Pair, recorder, start_flant, stop};
use control_plane::{ControlPlane, WebhookEndpoint};
use serde_json::Value;
use std::time::{Duration, Instant};

/// A hook with one validating binding on ConfigMap creation in `ns`: refuses a
/// ConfigMap with a `password` key, with a message naming it.
fn validating_hook(ns: &str) -> String {
    let config = format!(
        "configVersion: v1\nkubernetesValidating:\n- name: policy.example.com\n  \
         namespace:\n    labelSelector:\n      matchLabels: {{kubernetes.io/metadata.name: {ns}}}\n  \
         rules:\n  - apiGroups: [\"\"]\n    apiVersions: [v1]\n    operations: [CREATE]\n    \
         resources: [configmaps]\n    scope: Namespaced"
    );
    recorder("val", &config)
        + r#"
ctx="$BINDING_CONTEXT_PATH"
name=$(jq -r '.[0].review.request.object.metadata.name' "$ctx")
if jq -e '.[0].review.request.object.data | has("password")' "$ctx" >/dev/null 2>&1; then
  jq -n --arg m "ConfigMap $name holds a password" '{allowed: false, message: $m}' > "$VALIDATING_RESPONSE_PATH"
else
  echo '{"allowed": true}' > "$VALIDATING_RESPONSE_PATH"
fi
"#
}

/// The flags of an operator serving `ep` under configuration name `name`.
pub(crate) fn flags(cp: &ControlPlane, ns: &str, ep: &WebhookEndpoint, name: &str) -> Vec<String> {
    let mut args = vec![
        "--kube-config".to_string(),
        cp.admin_kubeconfig().display().to_string(),
        "--namespace".into(),
        ns.into(),
        "--validating-webhook-configuration-name".into(),
        name.into(),
    ];
    args.extend(ep.flags("validating"));
    args
}

pub(crate) fn strs(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// `kubectl create configmap` in `ns`: (admitted, stderr).
fn create(cp: &ControlPlane, ns: &str, name: &str, literal: &str) -> (bool, String) {
    match cp.kubectl(&[
        "-n",
        ns,
        "create",
        "configmap",
        name,
        &format!("--from-literal={literal}"),
    ]) {
        Ok(_) => (true, String::new()),
        Err(e) => (false, e),
    }
}

/// Waits until the API server sends dry-run reviews to every operator in `ops`
/// (it learns of new configurations through informers).
pub(crate) fn wait_called(cp: &ControlPlane, ns: &str, ops: &[&Operator]) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let _ = cp.kubectl(&["-n", ns, "create", "configmap", "probe", "--dry-run=server"]);
        if ops.iter().all(|op| !reviews(op, true).is_empty()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "the API server never called every webhook"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The reviews `op`'s hook received, dry runs or real requests. The request's uid
/// is the API server's per call (each webhook gets its own), so it is blanked.
pub(crate) fn reviews(op: &Operator, dry_run: bool) -> Vec<Value> {
    op.runs()
        .into_iter()
        .flat_map(|(_, c)| c.as_array().cloned().unwrap_or_default())
        .filter(|c| (c["review"]["request"]["dryRun"] == true) == dry_run)
        .map(|mut c| {
            if c["review"]["request"]["uid"].is_string() {
                c["review"]["request"]["uid"] = Value::from("<uid>");
            }
            c
        })
        .collect()
}

/// A configuration as stored, without what names it or the server decides.
fn normalised_configuration(cp: &ControlPlane, name: &str) -> Value {
    let text = cp
        .kubectl(&["get", "validatingwebhookconfiguration", name, "-o", "json"])
        .unwrap_or_else(|e| panic!("{e}"));
    let mut cfg: Value = serde_json::from_str(&text).expect("json");
    cfg.as_object_mut().expect("object").remove("metadata");
    for hook in cfg["webhooks"].as_array_mut().expect("webhooks") {
        hook["clientConfig"]["service"]["name"] = Value::Null;
    }
    cfg
}

fn configurations_named(cp: &ControlPlane, prefix: &str) -> Vec<(String, String)> {
    let text = cp
        .kubectl(&["get", "validatingwebhookconfigurations", "-o", "json"])
        .unwrap_or_else(|e| panic!("{e}"));
    let list: Value = serde_json::from_str(&text).expect("json");
    list["items"]
        .as_array()
        .cloned()
        .unwrap_or_default()
        .iter()
        .filter_map(|c| {
            let name = c["metadata"]["name"].as_str()?;
            let rv = c["metadata"]["resourceVersion"].as_str()?;
            name.starts_with(prefix)
                .then(|| (name.to_string(), rv.to_string()))
        })
        .collect()
}

#[test]
fn both_operators_receive_the_same_admission_reviews() {
    let cp = control_plane::shared();
    let ns = cp.namespace("compat-wh");
    let ep_flant = cp.webhook_endpoint(&ns, "flant-hooks").expect("endpoint");
    let ep_ours = cp.webhook_endpoint(&ns, "ours-hooks").expect("endpoint");
    let (cfg_flant, cfg_ours) = (format!("f-{ns}"), format!("o-{ns}"));
    let (fa, oa) = (
        flags(cp, &ns, &ep_flant, &cfg_flant),
        flags(cp, &ns, &ep_ours, &cfg_ours),
    );
    let hooks = [("val.sh", validating_hook(&ns))];
    let pair = Pair::start_each(&hooks, (&strs(&fa), &[]), (&strs(&oa), &[]));
    wait_called(cp, &ns, &[&pair.flant, &pair.ours]);

    assert!(
        create(cp, &ns, "ok1", "a=1").0,
        "an ordinary ConfigMap is admitted"
    );
    let (admitted, err) = create(cp, &ns, "db", "password=x");
    assert!(
        !admitted && err.contains("ConfigMap db holds a password"),
        "{err}"
    );
    pair.settle(Duration::from_millis(1500));

    let (flant, ours) = (reviews(&pair.flant, false), reviews(&pair.ours, false));
    assert_eq!(flant.len(), 2, "flant's hook saw both requests: {flant:#?}");
    assert_eq!(ours.len(), 2, "our hook saw both requests: {ours:#?}");
    let diff = crate::oracle::unexplained_diff(&Value::Array(flant), &Value::Array(ours));
    assert!(
        diff.is_empty(),
        "the binding contexts of the same two requests differ:\n{}",
        diff.join("\n")
    );
    assert_eq!(
        normalised_configuration(cp, &format!("{cfg_flant}-hooks")),
        normalised_configuration(cp, &format!("{cfg_ours}-hooks")),
        "the configurations, names and Services aside"
    );
}

#[test]
fn webhook_configurations_are_taken_over_both_ways() {
    let cp = control_plane::shared();
    let ns = cp.namespace("compat-mig");
    let ep = cp.webhook_endpoint(&ns, "hooks").expect("endpoint");
    let name = format!("m-{ns}");
    let args = flags(cp, &ns, &ep, &name);
    let hooks = [("val.sh", validating_hook(&ns))];
    let object = format!("{name}-hooks");

    let (mut flant, _) = start_flant(&hooks, &strs(&args), &[]);
    wait_called(cp, &ns, &[&flant]);
    let before = configurations_named(cp, &name);
    assert_eq!(
        before.len(),
        1,
        "flant registered one configuration: {before:?}"
    );
    assert_eq!(before[0].0, object, "flant's object name is ours too");
    stop(&mut flant, "flant");

    let ours = Operator::start(&hooks, &strs(&args), &[]);
    ours.wait_log(
        "webhook configuration is up to date",
        Duration::from_secs(30),
    );
    wait_called(cp, &ns, &[&ours]);
    let taken = configurations_named(cp, &name);
    assert_eq!(
        taken.len(),
        1,
        "one configuration after ours took over: {taken:?}"
    );
    assert_eq!(
        taken, before,
        "ours found flant's configuration up to date: 0 writes"
    );
    let (admitted, err) = create(cp, &ns, "db", "password=x");
    assert!(
        !admitted && err.contains("ConfigMap db holds a password"),
        "{err}"
    );
    let mut ours = ours;
    stop(&mut ours, "ours");

    let (flant, _) = start_flant(&hooks, &strs(&args), &[]);
    wait_called(cp, &ns, &[&flant]);
    let back = configurations_named(cp, &name);
    assert_eq!(
        back.len(),
        1,
        "one configuration after flant took it back: {back:?}"
    );
    let (admitted, err) = create(cp, &ns, "db2", "password=x");
    assert!(
        !admitted && err.contains("ConfigMap db2 holds a password"),
        "{err}"
    );
    assert!(create(cp, &ns, "ok", "a=1").0);
}

/// Records its context and converts CronTabs between the two versions.
fn converting_hook(group: &str) -> String {
    let config = format!(
        "configVersion: v1\nkubernetesCustomResourceConversion:\n- name: crontab-versions\n  \
         crdName: crontabs.{group}\n  conversions:\n  - fromVersion: {group}/v1alpha1\n    \
         toVersion: {group}/v1\n  - fromVersion: {group}/v1\n    toVersion: {group}/v1alpha1"
    );
    recorder("conv", &config)
        + r#"
jq -c '.[0] as $c | {convertedObjects: [$c.review.request.objects[] | .apiVersion = $c.toVersion
  | if ($c.toVersion | endswith("/v1")) then .spec.cronSpec = (.spec.cron | join(" ")) | del(.spec.cron)
    else .spec.cron = (.spec.cronSpec | split(" ")) | del(.spec.cronSpec) end]}' \
  "$BINDING_CONTEXT_PATH" > "$CONVERSION_RESPONSE_PATH"
"#
}

/// Creates CronTab `name` as v1alpha1 and reads it as v1 until the conversion
/// webhook answered; returns the v1 object.
fn create_and_read_converted(cp: &ControlPlane, group: &str, ns: &str, name: &str) -> Value {
    cp.apply(&format!(
        "apiVersion: {group}/v1alpha1\nkind: CronTab\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         spec: {{cron: ['*/5', '*', '*', '*', '*']}}\n"
    ))
    .unwrap_or_else(|e| panic!("{e}"));
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        if let Ok(text) = cp.kubectl(&[
            "-n",
            ns,
            "get",
            &format!("crontabs.v1.{group}"),
            name,
            "-o",
            "json",
        ]) {
            let obj: Value = serde_json::from_str(&text).expect("json");
            if obj["spec"]["cronSpec"].is_string() {
                return obj;
            }
        }
        assert!(
            Instant::now() < deadline,
            "CronTab {name} never read back converted"
        );
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// The conversion contexts `op`'s hook got, without what names the objects.
fn conversions(op: &Operator) -> Vec<Value> {
    op.runs()
        .into_iter()
        .flat_map(|(_, c)| c.as_array().cloned().unwrap_or_default())
        .map(|mut c| {
            c["review"]["request"]["uid"] = Value::from("<uid>");
            for o in c["review"]["request"]["objects"]
                .as_array_mut()
                .into_iter()
                .flatten()
            {
                o["metadata"] = Value::from("<metadata>");
            }
            c
        })
        .collect()
}

#[test]
fn crd_conversion_is_the_same_and_taken_over_both_ways() {
    let cp = control_plane::shared();
    let ns = cp.namespace("compat-conv");
    let group = format!("{ns}.example.com");
    cp.apply(&control_plane::fixtures::crontab_crd(&group))
        .unwrap_or_else(|e| panic!("{e}"));
    cp.kubectl(&[
        "wait",
        "--for=condition=Established",
        &format!("crd/crontabs.{group}"),
        "--timeout=60s",
    ])
    .unwrap_or_else(|e| panic!("{e}"));
    let ep = cp.webhook_endpoint(&ns, "conv-svc").expect("endpoint");
    let mut args = vec![
        "--kube-config".to_string(),
        cp.admin_kubeconfig().display().to_string(),
        "--namespace".into(),
        ns.clone(),
    ];
    args.extend(ep.flags("conversion"));
    let hooks = [("conv.sh", converting_hook(&group))];
    let crd_version = || {
        let crd = cp
            .kubectl(&["get", "crd", &format!("crontabs.{group}"), "-o", "json"])
            .unwrap_or_else(|e| panic!("{e}"));
        let crd: Value = serde_json::from_str(&crd).expect("json");
        (
            crd["metadata"]["resourceVersion"].clone(),
            crd["spec"]["conversion"].clone(),
        )
    };

    let (mut flant, _) = start_flant(&hooks, &strs(&args), &[]);
    let from_flant = create_and_read_converted(cp, &group, &ns, "a");
    let flant_contexts = conversions(&flant);
    let after_flant = crd_version();
    stop(&mut flant, "flant");

    let mut ours = Operator::start(&hooks, &strs(&args), &[]);
    ours.wait_log("CRD conversion is up to date", Duration::from_secs(30));
    let from_ours = create_and_read_converted(cp, &group, &ns, "b");
    let our_contexts = conversions(&ours);
    assert_eq!(
        crd_version(),
        after_flant,
        "ours took flant's CRD conversion over with 0 writes"
    );
    assert_eq!(
        from_flant["spec"], from_ours["spec"],
        "the same conversion result"
    );
    assert!(!flant_contexts.is_empty(), "flant's hook converted");
    let (f, o) = (&flant_contexts[0], &our_contexts[0]);
    let diff = crate::oracle::unexplained_diff(f, o);
    assert!(
        diff.is_empty(),
        "the first conversion context differs:\n{}",
        diff.join("\n")
    );
    stop(&mut ours, "ours");

    let (flant, _) = start_flant(&hooks, &strs(&args), &[]);
    create_and_read_converted(cp, &group, &ns, "c");
    assert!(
        !conversions(&flant).is_empty(),
        "flant converts again after ours"
    );
    assert_eq!(
        crd_version().1,
        after_flant.1,
        "the conversion settings are unchanged"
    );
}
