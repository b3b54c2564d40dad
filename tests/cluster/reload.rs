//! Reloading hooks without a restart (issue 39), against the real API server:
//! what each hook received (no second Synchronization for a hook the reload
//! kept), which watches the API server holds (its `apiserver_longrunning_requests`
//! gauge for WATCH, per resource), the admission entries in the server, and a
//! 100-reload loop that leaks no threads, descriptors, watches or memory.
//!
//! The watch counts are the API server's, shared by every test of this binary:
//! the hooks here watch kinds no other cluster test watches (LimitRange,
//! PodTemplate, ResourceQuota), and these tests run one at a time (`SERIAL`),
//! with addon-operator's reload loop (`addon_reload.rs`), which watches them too.

use crate::common::{Operator, hook};
use crate::harness::*;
use serde_json::Value;
use std::path::Path;
use std::time::{Duration, Instant};

/// One reload test at a time: they count the API server's watches per resource.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

pub(crate) fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The API server's open WATCH requests for `resource` (all scopes).
pub(crate) fn watches(resource: &str) -> u64 {
    let text = kubectl(&["get", "--raw", "/metrics"]);
    let needle = format!("resource=\"{resource}\"");
    text.lines()
        .filter(|l| l.starts_with("apiserver_longrunning_requests{"))
        .filter(|l| l.contains(&needle) && l.contains("verb=\"WATCH\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum::<f64>() as u64
}

/// How long a stopped watch may keep its connection: its reflector's read is
/// interrupted within half a second (`src/kube/interrupt.rs`; before that it
/// ended at the stream's next line, a bookmark about once a minute).
const WATCH_GONE: Duration = Duration::from_secs(30);

/// Waits until the API server holds `want` watches of `resource`; returns how
/// long that took.
pub(crate) fn wait_watches(resource: &str, want: u64) -> Duration {
    let started = Instant::now();
    loop {
        let now = watches(resource);
        if now == want {
            return started.elapsed();
        }
        assert!(
            started.elapsed() < WATCH_GONE,
            "{now} watches of {resource}, want {want}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The operator's `shell_operator_hooks_reloads_total{outcome}`.
fn reloads(op: &Operator, outcome: &str) -> u64 {
    let (_, body) = op.http_get("/metrics");
    let series = format!("shell_operator_hooks_reloads_total{{outcome=\"{outcome}\"}}");
    crate::common::metric(&body, &series).unwrap_or(0.0) as u64
}

fn wait_reloads(op: &Operator, outcome: &str, n: u64) {
    wait_for(&format!("{n} reloads with outcome {outcome}"), || {
        (reloads(op, outcome) >= n).then_some(())
    });
}

/// Writes an executable file atomically (a dot-file renamed over it), as a
/// deploy tool would; creates the parent directories.
fn put(path: &Path, content: &str) {
    crate::common::put_atomically(path, content, 0o755);
}

/// A hook watching `kind` in `ns` under binding `binding`.
fn watching(tag: &str, kind: &str, binding: &str, ns: &str) -> String {
    let config = format!(
        "configVersion: v1\nkubernetes:\n- name: {binding}\n  kind: {kind}\n  namespace:\n    nameSelector:\n      matchNames: [{ns}]\n"
    );
    hook(tag, &config, "")
}

/// (type, binding) of every context `tag`'s runs received, in order.
fn received(op: &Operator, tag: &str) -> Vec<(String, String)> {
    let runs = op.runs();
    let contexts = (runs.iter().filter(|(t, _)| t == tag))
        .flat_map(|(_, c)| c.as_array().cloned().unwrap_or_default());
    contexts
        .map(|c: Value| {
            let s = |k: &str| c[k].as_str().unwrap_or_default().to_string();
            (s("type"), s("binding"))
        })
        .collect()
}

fn wait_received(op: &Operator, tag: &str, want: &[(&str, &str)]) {
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(t, b)| (t.to_string(), b.to_string()))
        .collect();
    op.wait_runs(WAIT, |_| received(op, tag) == want);
}

fn limit_range(ns: &str, name: &str) -> String {
    format!(
        "apiVersion: v1\nkind: LimitRange\nmetadata: {{name: {name}, namespace: {ns}}}\n\
         spec:\n  limits:\n  - type: Container\n    default: {{cpu: 100m}}\n"
    )
}

const SYNC: &str = "Synchronization";
const EVENT: &str = "Event";

/// Added, removed and changed hooks: the kept hook's watch is the same one
/// (no second Synchronization, its events still come), the removed hook's watch
/// is gone from the API server, the added hook has its watch and its
/// Synchronization, and a changed hook is a new watch and a new Synchronization.
#[test]
fn reload_adds_removes_and_changes_hooks_and_keeps_the_others() {
    let _api = api_shared();
    let _one = serial();
    let ns = cp().namespace("reload");
    let base = |r| watches(r);
    let (lr, pt, rq) = (
        base("limitranges"),
        base("podtemplates"),
        base("resourcequotas"),
    );
    let op = admin_operator(&[
        ("keep.sh", watching("keep", "LimitRange", "limits", &ns)),
        ("gone.sh", watching("gone", "PodTemplate", "templates", &ns)),
    ]);
    let hooks = op.dir.0.join("hooks");
    wait_received(&op, "keep", &[(SYNC, "limits")]);
    wait_received(&op, "gone", &[(SYNC, "templates")]);
    wait_watches("limitranges", lr + 1);
    wait_watches("podtemplates", pt + 1);

    // Remove gone.sh and add new.sh together: one reload.
    std::fs::remove_file(hooks.join("gone.sh")).expect("rm");
    put(
        &hooks.join("sub/new.sh"),
        &watching("new", "ResourceQuota", "quotas", &ns),
    );
    wait_reloads(&op, "success", 1);
    wait_received(&op, "new", &[(SYNC, "quotas")]);
    wait_watches("podtemplates", pt);
    wait_watches("resourcequotas", rq + 1);
    wait_watches("limitranges", lr + 1);
    let line = op.wait_log("hooks reloaded", WAIT);
    let logged: Value = serde_json::from_str(&line).expect("json log");
    assert_eq!(logged["added"], "sub/new.sh", "{line}");
    assert_eq!(logged["removed"], "gone.sh", "{line}");
    assert_eq!(logged["unchanged"], "1", "{line}");

    // The kept hook still has its watch: an event, and no second Synchronization.
    apply(&limit_range(&ns, "lr-1"));
    wait_received(&op, "keep", &[(SYNC, "limits"), (EVENT, "limits")]);
    assert_eq!(received(&op, "gone"), [(SYNC.into(), "templates".into())]);

    // Change keep.sh's config: a new watch and a new Synchronization with it.
    put(
        &hooks.join("keep.sh"),
        &watching("keep", "LimitRange", "limits-v2", &ns),
    );
    wait_reloads(&op, "success", 2);
    wait_received(
        &op,
        "keep",
        &[(SYNC, "limits"), (EVENT, "limits"), (SYNC, "limits-v2")],
    );
    wait_watches("limitranges", lr + 1);
    apply(&limit_range(&ns, "lr-2"));
    wait_received(
        &op,
        "keep",
        &[
            (SYNC, "limits"),
            (EVENT, "limits"),
            (SYNC, "limits-v2"),
            (EVENT, "limits-v2"),
        ],
    );
    // new.sh was untouched by the second reload.
    assert_eq!(received(&op, "new"), [(SYNC.into(), "quotas".into())]);
    assert_eq!(reloads(&op, "error"), 0);
}

/// A hook whose `--config` fails makes the reload fail: nothing changes, the
/// error names the hook, the operator keeps running and counts it; SIGHUP
/// reloads (and does not stop the operator).
#[test]
fn a_bad_reload_keeps_the_running_hooks_and_sighup_reloads() {
    let _api = api_shared();
    let _one = serial();
    let ns = cp().namespace("reload-bad");
    let lr = watches("limitranges");
    let op = admin_operator(&[("keep.sh", watching("keep", "LimitRange", "limits", &ns))]);
    let hooks = op.dir.0.join("hooks");
    wait_received(&op, "keep", &[(SYNC, "limits")]);
    wait_watches("limitranges", lr + 1);

    put(
        &hooks.join("bad.sh"),
        "#!/bin/sh\necho 'configVersion: v1\nkubernetes: {nope'\n",
    );
    wait_reloads(&op, "error", 1);
    let line = op.wait_log("hooks reload failed", WAIT);
    assert!(line.contains("bad.sh"), "the error names the hook: {line}");
    assert_eq!(op.http_get("/healthz").0, 200, "still serving");
    apply(&limit_range(&ns, "lr-1"));
    wait_received(&op, "keep", &[(SYNC, "limits"), (EVENT, "limits")]);
    wait_watches("limitranges", lr + 1);

    // Repaired: the next reload adds it.
    put(
        &hooks.join("bad.sh"),
        &hook("bad", "configVersion: v1\nonStartup: 1", ""),
    );
    wait_reloads(&op, "success", 1);
    // An onStartup context has a binding and no type.
    wait_received(&op, "bad", &[("", "onStartup")]);

    // SIGHUP with nothing changed: a reload that changes nothing, no stop.
    op.signal(libc::SIGHUP);
    wait_reloads(&op, "unchanged", 1);
    assert_eq!(op.http_get("/healthz").0, 200, "SIGHUP does not stop it");
    let line = op.wait_log("\"cause\":\"signal\"", WAIT);
    assert!(line.contains("\"outcome\":\"unchanged\""), "{line}");
    assert_eq!(reloads(&op, "error"), 1);
    assert_eq!(received(&op, "keep").len(), 2, "one Synchronization only");
}

/// The kubelet's ConfigMap volume update: files in a `..<timestamp>` dir,
/// `..data` pointing at it, each key a symlink through `..data`; an update
/// writes a new dir and renames a new `..data` over the old one.
#[test]
fn a_configmap_volume_swap_is_one_reload() {
    let _api = api_shared();
    let _one = serial();
    let ns = cp().namespace("reload-cm");
    let pt = watches("podtemplates");
    let cm_v1 = watching("cm-v1", "PodTemplate", "templates", &ns);
    let op = admin_operator(&[
        ("anchor.sh", watching("anchor", "LimitRange", "limits", &ns)),
        ("..v1/cm.sh", cm_v1.clone()),
    ]);
    let hooks = op.dir.0.join("hooks");
    wait_received(&op, "anchor", &[(SYNC, "limits")]);
    assert!(received(&op, "cm-v1").is_empty(), "dot dirs hold no hooks");

    // The volume appears: ..data and the key's symlink.
    std::os::unix::fs::symlink("..v1", hooks.join("..data")).expect("link");
    std::os::unix::fs::symlink("..data/cm.sh", hooks.join("cm.sh")).expect("link");
    wait_reloads(&op, "success", 1);
    wait_received(&op, "cm-v1", &[(SYNC, "templates")]);
    wait_watches("podtemplates", pt + 1);

    // An update that changes the script but not its --config: the same watch,
    // no Synchronization, and the next event runs the new script.
    let swap = |version: &str, content: &str| {
        let dir = hooks.join(format!("..{version}"));
        put(&dir.join("cm.sh"), content);
        let tmp = hooks.join("..data_tmp");
        std::os::unix::fs::symlink(format!("..{version}"), &tmp).expect("link");
        std::fs::rename(&tmp, hooks.join("..data")).expect("swap ..data");
    };
    let cm_v2 = watching("cm-v2", "PodTemplate", "templates", &ns);
    swap("v2", &cm_v2);
    std::fs::remove_dir_all(hooks.join("..v1")).expect("old dir");
    wait_reloads(&op, "unchanged", 1);
    let template = format!(
        "apiVersion: v1\nkind: PodTemplate\nmetadata: {{name: t1, namespace: {ns}}}\n\
         template:\n  spec:\n    containers:\n    - {{name: c, image: busybox}}\n"
    );
    apply(&template);
    wait_received(&op, "cm-v2", &[(EVENT, "templates")]);
    wait_watches("podtemplates", pt + 1);

    // An update that changes its --config: removed then added.
    let cm_v3 = watching("cm-v3", "PodTemplate", "templates-v3", &ns);
    swap("v3", &cm_v3);
    wait_reloads(&op, "success", 2);
    wait_received(&op, "cm-v3", &[(SYNC, "templates-v3")]);
    wait_watches("podtemplates", pt + 1);
    assert_eq!(received(&op, "anchor"), [(SYNC.into(), "limits".into())]);
    assert_eq!(reloads(&op, "error"), 0);
}

/// A removed hook's admission entries leave the API server's
/// ValidatingWebhookConfiguration; the other hook's entry stays.
#[test]
fn a_removed_hooks_webhook_entries_are_removed() {
    let _api = api_shared();
    let _one = serial();
    let ns = cp().namespace("reload-wh");
    let ep = cp()
        .webhook_endpoint(&ns, "hooks-svc")
        .unwrap_or_else(|e| panic!("webhook endpoint: {e}"));
    let mut args = ep.flags("validating");
    args.extend(["--validating-webhook-configuration-name".into(), ns.clone()]);
    let mut all: Vec<&str> = vec!["--namespace", &ns];
    all.extend(args.iter().map(String::as_str));
    let admission = |name: &str| {
        let config = format!(
            "configVersion: v1\nkubernetesValidating:\n- name: {name}\n  namespace:\n    \
             labelSelector:\n      matchLabels:\n        kubernetes.io/metadata.name: {ns}\n  \
             rules:\n  - apiGroups: [\"\"]\n    apiVersions: [\"v1\"]\n    operations: [\"CREATE\"]\n    \
             resources: [\"configmaps\"]\n    scope: Namespaced\n"
        );
        hook(
            name,
            &config,
            "echo '{\"allowed\":true}' > \"$VALIDATING_RESPONSE_PATH\"",
        )
    };
    let op = operator(
        &[
            ("a.sh", admission("a.example.com")),
            ("b.sh", admission("b.example.com")),
        ],
        &cp().operator_kubeconfig(),
        &all,
        &[],
    );
    let name = format!("{ns}-hooks");
    let entries = || -> Option<Vec<String>> {
        let text = kubectl(&[
            "get",
            "validatingwebhookconfiguration",
            &name,
            "-o",
            "json",
            "--ignore-not-found",
        ]);
        let v: Value = serde_json::from_str(&text).ok()?;
        let list = v["webhooks"].as_array()?;
        Some(
            list.iter()
                .filter_map(|w| w["name"].as_str().map(String::from))
                .collect(),
        )
    };
    let both = vec!["a.example.com".to_string(), "b.example.com".to_string()];
    wait_for("both entries", || entries().filter(|e| *e == both));
    std::fs::remove_file(op.dir.0.join("hooks/b.sh")).expect("rm");
    wait_reloads(&op, "success", 1);
    let only_a = vec!["a.example.com".to_string()];
    wait_for("b's entry removed", || entries().filter(|e| *e == only_a));
    assert_eq!(reloads(&op, "error"), 0);
}

/// What /proc says about a process: threads, open descriptors, RSS in KiB.
pub(crate) fn usage(pid: u32) -> (usize, usize, u64) {
    let count = |d: &str| std::fs::read_dir(format!("/proc/{pid}/{d}")).map_or(0, |r| r.count());
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0);
    (count("task"), count("fd"), rss)
}

/// 100 reloads, each changing a hook (a watch stopped and started, a
/// Synchronization run) and SIGHUP asking for it: the operator's threads,
/// descriptors and memory, and the API server's watches, end where they began.
#[test]
fn a_hundred_reloads_leak_no_threads_descriptors_watches_or_memory() {
    let _api = api_shared();
    let _one = serial();
    let ns = cp().namespace("reload-loop");
    let (lr, pt) = (watches("limitranges"), watches("podtemplates"));
    // The label selector makes each round's binding a watch of its own (the
    // operator shares one watch among bindings of the same kind, namespace and
    // selectors), so a retired hook's watch left running shows in the count.
    let flip = |i: u64| {
        let t = format!("t{}", i % 2);
        let config = format!(
            "configVersion: v1\nkubernetes:\n- name: {t}\n  kind: PodTemplate\n  namespace:\n    \
             nameSelector:\n      matchNames: [{ns}]\n  labelSelector:\n    matchLabels: {{round: {t}}}\n"
        );
        hook("flip", &config, "")
    };
    let op = admin_operator(&[
        ("anchor.sh", watching("anchor", "LimitRange", "limits", &ns)),
        ("flip.sh", flip(0)),
    ]);
    let hooks = op.dir.0.join("hooks");
    wait_received(&op, "flip", &[(SYNC, "t0")]);
    let flip_syncs = |n: usize| {
        op.wait_runs(WAIT, |_| received(&op, "flip").len() >= n);
    };
    let reload = |i: u64| {
        put(&hooks.join("flip.sh"), &flip(i));
        op.signal(libc::SIGHUP);
        wait_reloads(&op, "success", i);
        flip_syncs(i as usize + 1);
    };
    for i in 1..=5 {
        reload(i);
    }
    wait_watches("podtemplates", pt + 1);
    let pid = op.child.id();
    let before = usage(pid);
    let started = std::time::Instant::now();
    for i in 6..=55 {
        reload(i);
    }
    let mid = usage(pid);
    for i in 56..=105 {
        reload(i);
    }
    let took = started.elapsed();
    wait_watches("podtemplates", pt + 1);
    wait_watches("limitranges", lr + 1);
    // A stopped watch's thread ends on its own: give the last ones a moment.
    let after = wait_for("threads back to their number", || {
        let now = usage(pid);
        (now.0 <= before.0 + 1).then_some(now)
    });
    eprintln!(
        "100 reloads in {took:?}: threads {} -> {}, fds {} -> {}, \
         RSS {} KiB -> {} KiB ({} KiB after 50)",
        before.0, after.0, before.1, after.1, before.2, after.2, mid.2
    );
    assert!(
        after.1 <= before.1 + 2,
        "descriptors: {before:?} -> {after:?}"
    );
    assert!(
        after.2 <= before.2 + 8192,
        "RSS grew more than 8 MiB: {before:?} -> {after:?}"
    );
    assert_eq!(received(&op, "anchor"), [(SYNC.into(), "limits".into())]);
    assert_eq!(reloads(&op, "error"), 0);
}
