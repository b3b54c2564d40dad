//! RBAC: the operator as deploy/rbac.yaml's least-privilege ServiceAccount
//! (`cp().operator_kubeconfig()`). What the manifest grants works (a Pod binding
//! with Synchronization and events, a `namespace.labelSelector` binding, the Lease
//! of `--ha`); what it does not grant (creating a ConfigMap from a patch, a binding
//! on ConfigMaps) is a 403 in the log naming the verb and the resource, retried at
//! the documented pace, and the operator stays up and stops promptly on SIGTERM.

use crate::common::{Operator, hook};
use crate::harness::*;
use serde_json::Value;
use std::time::{Duration, Instant};

/// The ServiceAccount's user name, as the server writes it in a 403.
const SA_USER: &str = "system:serviceaccount:shell-operator:shell-operator";

/// The operator as the ServiceAccount of deploy/rbac.yaml.
fn sa_operator(hooks: &[(&str, String)], args: &[&str], env: &[(&str, &str)]) -> Operator {
    operator(hooks, &cp().operator_kubeconfig(), args, env)
}

/// A pending pod (no scheduler here) named `name` in `ns`.
fn create_pod(ns: &str, name: &str) {
    kubectl_retry(&[
        "-n",
        ns,
        "run",
        name,
        "--image=registry.invalid/none",
        "--restart=Never",
    ]);
}

/// `(type, watchEvent, names)` of each context; names sorted for Synchronization.
fn summary(ctx: &[Value]) -> Vec<(String, String, String)> {
    ctx.iter()
        .map(|c| {
            let name = match c["objects"].as_array() {
                Some(objects) => {
                    let mut names: Vec<String> = objects
                        .iter()
                        .map(|o| {
                            let m = &o["object"]["metadata"];
                            format!(
                                "{}/{}",
                                m["namespace"].as_str().unwrap_or(""),
                                m["name"].as_str().unwrap_or("")
                            )
                        })
                        .collect();
                    names.sort();
                    names.join(",")
                }
                None => {
                    let m = &c["object"]["metadata"];
                    format!(
                        "{}/{}",
                        m["namespace"].as_str().unwrap_or(""),
                        m["name"].as_str().unwrap_or("")
                    )
                }
            };
            (
                c["type"].as_str().unwrap_or("").to_string(),
                c["watchEvent"].as_str().unwrap_or("").to_string(),
                name,
            )
        })
        .collect()
}

fn ev(t: &str, w: &str, n: &str) -> (String, String, String) {
    (t.into(), w.into(), n.into())
}

/// Records when each log line containing `needle` arrives, for `window`.
fn arrivals(op: &Operator, needle: &str, window: Duration) -> Vec<Duration> {
    let start = Instant::now();
    let mut seen = 0;
    let mut times = Vec::new();
    while start.elapsed() < window {
        let lines = op.stdout.lock().expect("lock").clone();
        for line in &lines[seen..] {
            if line.contains(needle) {
                times.push(start.elapsed());
            }
        }
        seen = lines.len();
        std::thread::sleep(Duration::from_millis(10));
    }
    times
}

/// A Pod binding as the ServiceAccount (list + watch on pods): Synchronization with
/// the pods that exist, then Added / Modified / Deleted events.
#[test]
fn pod_binding_works_with_the_least_privilege_account() {
    let _api = api_shared();
    let ns = namespace_retry("rbac-pods");
    create_pod(&ns, "p1");
    let config = format!(
        "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  namespace:\n    nameSelector:\n      matchNames: [{ns}]\n"
    );
    let op = sa_operator(&[("pods.sh", hook("pods", &config, ""))], &[], &[]);
    let ctx = wait_contexts(&op, 1);
    let p1 = format!("{ns}/p1");
    assert_eq!(summary(&ctx), vec![ev("Synchronization", "", &p1)]);
    assert_eq!(
        ctx[0]["objects"][0]["object"],
        get_retry("pod", &ns, "p1").expect("p1"),
        "the hook got the pod as the server stores it"
    );

    create_pod(&ns, "p2");
    kubectl_retry(&["-n", &ns, "label", "pod", "p1", "seen=yes"]);
    kubectl_retry(&[
        "-n",
        &ns,
        "delete",
        "pod",
        "p2",
        "--grace-period=0",
        "--force",
    ]);
    let p2 = format!("{ns}/p2");
    let deleted = ev("Event", "Deleted", &p2);
    let ctx = wait_for("p2's Deleted event", || {
        let ctx = contexts(&op);
        summary(&ctx).contains(&deleted).then_some(ctx)
    });
    let got = summary(&ctx);
    assert_eq!(
        got[..3],
        [
            ev("Synchronization", "", &p1),
            ev("Event", "Added", &p2),
            ev("Event", "Modified", &p1)
        ]
    );
    assert_eq!(got.last(), Some(&deleted), "{got:#?}");
    assert_eq!(ctx[2]["object"]["metadata"]["labels"]["seen"], "yes");
}

/// A `namespace.labelSelector` binding as the ServiceAccount (list + watch on
/// namespaces and pods): pods of a namespace that matches are in the
/// Synchronization; a namespace that starts matching brings its pods as Added.
#[test]
fn namespace_label_selector_works_with_the_least_privilege_account() {
    let _api = api_shared();
    let ns1 = namespace_retry("rbac-nsl");
    let ns2 = namespace_retry("rbac-nsl");
    // A label unique to this test, so other tests' namespaces never match.
    let label = format!("rbac-test={ns1}");
    kubectl_retry(&["label", "namespace", &ns1, &label]);
    create_pod(&ns1, "a");
    create_pod(&ns2, "b");
    let config = format!(
        "configVersion: v1\nkubernetes:\n- name: pods\n  kind: Pod\n  namespace:\n    labelSelector:\n      matchLabels:\n        rbac-test: {ns1}\n"
    );
    let op = sa_operator(&[("nsl.sh", hook("nsl", &config, ""))], &[], &[]);
    let ctx = wait_contexts(&op, 1);
    assert_eq!(
        summary(&ctx),
        vec![ev("Synchronization", "", &format!("{ns1}/a"))]
    );

    kubectl_retry(&["label", "namespace", &ns2, &label]);
    let ctx = wait_contexts(&op, 2);
    assert_eq!(summary(&ctx)[1], ev("Event", "Added", &format!("{ns2}/b")));
    create_pod(&ns2, "c");
    let ctx = wait_contexts(&op, 3);
    assert_eq!(summary(&ctx)[2], ev("Event", "Added", &format!("{ns2}/c")));
}

/// `--ha` as the ServiceAccount (get, create, update on leases): the replica creates
/// the Lease in its namespace, holds it, runs its hooks, and on SIGTERM releases it
/// (an update), exiting 0.
#[test]
fn ha_lease_works_with_the_least_privilege_account() {
    let _api = api_shared();
    let ns = namespace_retry("rbac-ha");
    let hooks = [(
        "start.sh",
        hook("start", "configVersion: v1\nonStartup: 1", ""),
    )];
    let args = [
        "--ha",
        "--namespace",
        &ns,
        "--ha-lease-duration",
        "10s",
        "--ha-renew-deadline",
        "8s",
        "--ha-retry-period",
        "1s",
    ];
    let mut op = sa_operator(&hooks, &args, &[("SHELL_OPERATOR_POD", "rbac-replica")]);
    op.wait_log("leadership acquired", WAIT);
    wait_contexts(&op, 1);
    let lease =
        get_retry("lease", &ns, "shell-operator-leader-election").expect("the Lease exists");
    assert_eq!(lease["spec"]["holderIdentity"], "rbac-replica", "{lease:#}");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 10, "{lease:#}");
    // A renew is an update: the renewTime moves on.
    let first = lease["spec"]["renewTime"].clone();
    wait_for("a renew", || {
        let l = get_retry("lease", &ns, "shell-operator-leader-election")?;
        (l["spec"]["renewTime"] != first).then_some(())
    });

    op.signal(libc::SIGTERM);
    assert_eq!(op.wait_exit(WAIT), Some(0), "{}", op.logs());
    let lease = get_retry("lease", &ns, "shell-operator-leader-election").expect("the Lease stays");
    let holder = lease["spec"]["holderIdentity"].as_str().unwrap_or("");
    assert_eq!(holder, "", "released: {lease:#}");
    assert_eq!(lease["spec"]["leaseDurationSeconds"], 1, "{lease:#}");
}

/// A patch creating a ConfigMap, which deploy/rbac.yaml does not grant: the run
/// fails with the server's 403 (verb, resource, namespace, user) in the log, nothing
/// lands, and the run is retried at the queue's backoff (5 s, then 6–7 s), not in a
/// hot loop.
#[test]
fn a_forbidden_patch_is_a_403_in_the_log_retried_with_backoff() {
    let _api = api_shared();
    let ns = namespace_retry("rbac-patch");
    let body = format!(
        "cat > \"$KUBERNETES_PATCH_PATH\" <<'PATCH'\n\
         {{\"operation\": \"Create\", \"object\": {{\"apiVersion\": \"v1\", \"kind\": \"ConfigMap\",\n\
         \"metadata\": {{\"name\": \"made\", \"namespace\": \"{ns}\"}}, \"data\": {{\"k\": \"v\"}}}}}}\nPATCH"
    );
    let hooks = [(
        "make.sh",
        hook("make", "configVersion: v1\nonStartup: 1", &body),
    )];
    let op = sa_operator(&hooks, &[], &[]);
    let times = arrivals(&op, "Hook failed, will retry", Duration::from_secs(14));
    let expected = format!(
        "Create object v1/ConfigMap/{ns}/made: POST /api/v1/namespaces/{ns}/configmaps: 403 Forbidden: \
         configmaps is forbidden: User \\\"{SA_USER}\\\" cannot create resource \\\"configmaps\\\" \
         in API group \\\"\\\" in the namespace \\\"{ns}\\\""
    );
    // The first failure may be an outage of the API server (another test restarts it).
    let line = op.wait_log(&expected, WAIT);
    assert!(line.contains("Hook failed, will retry"), "{line}");
    assert!(
        get_retry("configmap", &ns, "made").is_none(),
        "nothing lands"
    );
    // Attempts at 0, ~5 s and ~11-12 s (flant's backoff: 5 s, then 5 s + 2^(n-1) s
    // + jitter < 1 s): three in 14 s, spaced as documented.
    assert_eq!(
        times.len(),
        3,
        "attempts in 14 s at {times:?}\n{}",
        op.logs()
    );
    let gaps: Vec<f64> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    assert!((4.5..6.0).contains(&gaps[0]), "first retry after {gaps:?}");
    assert!((5.5..7.5).contains(&gaps[1]), "second retry after {gaps:?}");
    assert_eq!(op.runs().len(), 3, "one hook run per attempt");
}

/// A binding on ConfigMaps, which the ServiceAccount cannot list or watch: each
/// attempt is a warning carrying the server's 403 (verb list, resource configmaps),
/// attempts back off (0.8 s doubling, jittered to [d/2, d)), the hook never runs, the
/// operator stays healthy, and SIGTERM still stops it at once (it used to wait for
/// the 60 s initial-list timeout first).
#[test]
fn a_forbidden_binding_is_a_403_retried_with_backoff_and_sigterm_still_stops() {
    let _api = api_shared();
    let ns = namespace_retry("rbac-cm");
    let config = format!(
        "configVersion: v1\nkubernetes:\n- name: cms\n  kind: ConfigMap\n  namespace:\n    nameSelector:\n      matchNames: [{ns}]\n"
    );
    let mut op = sa_operator(&[("cms.sh", hook("cms", &config, ""))], &[], &[]);
    let times = arrivals(&op, "initial list failed, retrying", Duration::from_secs(7));
    let expected = format!(
        "LIST /api/v1/namespaces/{ns}/configmaps: 403 Forbidden: configmaps is forbidden: \
         User \\\"{SA_USER}\\\" cannot list resource \\\"configmaps\\\" in API group \\\"\\\" \
         in the namespace \\\"{ns}\\\""
    );
    let line = op.wait_log(&expected, WAIT);
    assert!(line.contains("initial list failed, retrying"), "{line}");
    assert!(line.contains("hook 'cms.sh', binding 'cms'"), "{line}");
    // Delays in [0.4, 0.8), [0.8, 1.6), [1.6, 3.2), [3.2, 6.4): 4 or 5 attempts in
    // the first 7 s, never two within 0.35 s of each other.
    assert!(
        (3..=6).contains(&times.len()),
        "attempts in 7 s at {times:?}"
    );
    let gaps: Vec<f64> = times
        .windows(2)
        .map(|w| (w[1] - w[0]).as_secs_f64())
        .collect();
    assert!(
        gaps.iter().all(|g| *g >= 0.35),
        "retries too close: {gaps:?}"
    );
    assert!(gaps.last() > gaps.first(), "no growth: {gaps:?}");
    assert_eq!(op.http_get("/healthz").0, 200);
    assert!(
        op.runs().is_empty(),
        "the hook ran without its binding: {:?}",
        op.runs()
    );

    op.signal(libc::SIGTERM);
    let asked = Instant::now();
    let code = op.wait_exit(Duration::from_secs(20));
    assert_eq!(code, Some(0), "after {:?}:\n{}", asked.elapsed(), op.logs());
    assert!(
        asked.elapsed() < Duration::from_secs(5),
        "SIGTERM took {:?}:\n{}",
        asked.elapsed(),
        op.logs()
    );
}
