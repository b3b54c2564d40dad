//! addon-operator's reload (issue 39, `src/addon/reload/`), against kube-sim
//! with the real helm: a module whose `values.yaml` or chart changed is run
//! again (a new release revision), the other modules are not; a removed module
//! is purged (its release uninstalled) and installed again when it comes back;
//! a module added is installed with its ConfigMap section and its hook's
//! Synchronization; a module's hook added gets its Synchronization and a
//! removed one's watch stops, without an uninstall; a static `<key>Enabled`
//! changed disables and enables the module; a bad new module fails the reload,
//! is counted and changes nothing; SIGHUP reloads and does not stop the
//! operator.

use crate::common::metric;
use crate::harness::*;
use serde_json::json;
use std::path::Path;

/// Writes `content` at `path` atomically (a dot-file renamed over it).
fn put(path: &Path, content: &str) {
    crate::common::put_atomically(path, content, 0o644);
}

/// Writes an executable hook at `path` atomically.
fn put_hook(path: &Path, content: &str) {
    crate::common::put_atomically(path, content, 0o755);
}

fn reloads(addon: &Addon, outcome: &str) -> u64 {
    let series = format!("addon_operator_modules_reloads_total{{outcome=\"{outcome}\"}}");
    metric(&addon.metrics(), &series).unwrap_or(0.0) as u64
}

#[test]
fn a_changed_module_runs_again_and_only_it() {
    let mut files = chart("modules/001-foo", "foo", "foo");
    files.extend(chart("modules/002-bar", "bar", "bar"));
    files.push((
        "modules/values.yaml".into(),
        "fooEnabled: true\nbarEnabled: true\n".into(),
    ));
    files.push((
        "modules/001-foo/values.yaml".into(),
        "foo:\n  x: 1\n".into(),
    ));
    files.push((
        "modules/002-bar/values.yaml".into(),
        "bar:\n  y: 1\n".into(),
    ));
    let addon = Addon::start(&refs(&files), None, 4);
    addon.wait_ready();
    eventually(&addon, "foo rendered", || {
        rendered_values(&addon, "foo") == Some(json!({"x": 1}))
    });
    let (foo, bar) = (addon.revisions("foo"), addon.revisions("bar"));
    assert_eq!((foo.len(), bar.len()), (1, 1), "one revision each");
    let modules = addon.dir.0.join("modules");

    // values.yaml of foo: foo runs again with the new values; bar does not.
    put(&modules.join("001-foo/values.yaml"), "foo:\n  x: 2\n");
    eventually(&addon, "foo upgraded with x: 2", || {
        rendered_values(&addon, "foo") == Some(json!({"x": 2}))
    });
    assert_eq!(addon.revisions("foo").len(), 2);
    assert_eq!(reloads(&addon, "success"), 1);
    let line = addon.wait_log(&["modules reloaded"], std::time::Duration::from_secs(5));
    assert!(line.contains("\"modules\":\"foo\""), "{line}");

    // bar's chart: bar is upgraded, foo is not.
    let template = modules.join("002-bar/templates/cm.yaml");
    let text = std::fs::read_to_string(&template).expect("template");
    put(
        &template,
        &text.replace("  name: bar\n", "  name: bar\n  labels: {v: \"2\"}\n"),
    );
    eventually(&addon, "bar upgraded", || addon.revisions("bar").len() == 2);
    eventually(&addon, "bar's label", || {
        addon
            .object("v1", "ConfigMap", "bar")
            .is_some_and(|o| o["metadata"]["labels"]["v"] == "2")
    });
    assert_eq!(addon.revisions("foo").len(), 2, "foo untouched");

    // A new module whose hook's --config fails: the reload fails, is
    // counted, and nothing is installed.
    let mut baz = chart("modules/003-baz", "baz", "baz");
    baz.push((
        "modules/003-baz/values.yaml".into(),
        "bazEnabled: true\n".into(),
    ));
    for (path, content) in baz {
        put(&addon.dir.0.join(path), &content);
    }
    put_hook(
        &modules.join("003-baz/hooks/broken"),
        "#!/bin/sh\necho 'no config for you' >&2\nexit 1\n",
    );
    eventually(&addon, "the reload failed", || {
        reloads(&addon, "error") == 1
    });
    let line = addon.wait_log(
        &["modules reload failed"],
        std::time::Duration::from_secs(5),
    );
    assert!(line.contains("baz"), "the error names the module: {line}");
    assert!(addon.revisions("baz").is_empty());
    assert!(addon.object("v1", "ConfigMap", "baz").is_none());
    assert_eq!(reloads(&addon, "success"), 2, "nothing applied");

    // SIGHUP: a reload, not a stop.
    std::fs::remove_dir_all(modules.join("003-baz")).expect("rm baz");
    let child = addon.child.as_ref().expect("child").id();
    // SAFETY: kill(2) on our own child's pid.
    unsafe {
        libc::kill(child as i32, libc::SIGHUP);
    }
    eventually(&addon, "a reload after SIGHUP", || {
        reloads(&addon, "unchanged") >= 1
    });
    assert_eq!(http_get_ready(&addon), 200, "still serving");
    assert_eq!(
        (addon.revisions("foo").len(), addon.revisions("bar").len()),
        (2, 2)
    );
}

fn http_get_ready(addon: &Addon) -> u16 {
    crate::common::http_get(addon.port(), "/ready").0
}

/// A module whose directory is removed is purged by the converge the reload
/// asks for (its release and objects gone), as a disabled module would be: the
/// other module's `global.enabledModules` loses it. When the directory comes
/// back, the module is installed again.
#[test]
fn a_removed_module_is_purged_and_comes_back() {
    let mut files = chart("modules/001-foo", "foo", "foo");
    let baz = chart("modules/002-baz", "baz", "baz");
    files.extend(baz.clone());
    files.push((
        "modules/values.yaml".into(),
        "fooEnabled: true\nbazEnabled: true\n".into(),
    ));
    let addon = Addon::start(&refs(&files), None, 4);
    addon.wait_ready();
    let enabled_in_foo = || {
        let cm = addon.object("v1", "ConfigMap", "foo")?;
        cm["data"]["enabledModules"].as_str().map(String::from)
    };
    eventually(&addon, "both installed", || {
        addon.object("v1", "ConfigMap", "baz").is_some()
            && enabled_in_foo().as_deref() == Some("foo,baz")
    });
    assert_eq!(addon.revisions("baz").len(), 1);

    std::fs::remove_dir_all(addon.dir.0.join("modules/002-baz")).expect("rm baz");
    eventually(&addon, "baz purged", || {
        addon.revisions("baz").is_empty() && addon.object("v1", "ConfigMap", "baz").is_none()
    });
    eventually(&addon, "foo sees baz gone", || {
        enabled_in_foo().as_deref() == Some("foo")
    });
    assert_eq!(reloads(&addon, "success"), 1);
    let line = addon.wait_log(&["modules reloaded"], std::time::Duration::from_secs(5));
    assert!(line.contains("\"removed\":\"baz\""), "{line}");

    for (path, content) in baz {
        put(&addon.dir.0.join(path), &content);
    }
    eventually(&addon, "baz back", || {
        addon.object("v1", "ConfigMap", "baz").is_some()
            && enabled_in_foo().as_deref() == Some("foo,baz")
    });
    assert_eq!(reloads(&addon, "success"), 2);
    assert_eq!(reloads(&addon, "error"), 0);
}

/// A hook's config watching the ConfigMap `watched`.
const WATCH: &str = r#"{"configVersion":"v1","kubernetes":[{"name":"cms","kind":"ConfigMap","nameSelector":{"matchNames":["watched"]}}]}"#;

/// The binding contexts hook `tag` received, in order.
fn contexts(addon: &Addon, tag: &str) -> Vec<serde_json::Value> {
    (addon.runs().into_iter())
        .filter(|(t, _)| t == tag)
        .map(|(_, ctx)| ctx)
        .collect()
}

/// The `type` of each binding context hook `tag` received (the binding of a
/// lifecycle context, which has no type).
fn types(addon: &Addon, tag: &str) -> Vec<String> {
    (contexts(addon, tag).iter())
        .flat_map(|c| c.as_array().cloned().unwrap_or_default())
        .map(|c| {
            let t = c["type"].as_str().or(c["binding"].as_str());
            t.unwrap_or_default().to_string()
        })
        .collect()
}

/// A module added by a reload (a new dir under the modules dir) is installed
/// like a module present at startup: its ConfigMap section, written before the
/// module existed and set aside as an unknown key, lands in its release; its
/// `<key>Enabled` from the ConfigMap enables it; its hook gets its
/// Synchronization; the other module's `global.enabledModules` gains it.
#[test]
fn a_module_added_by_a_reload_is_installed_with_its_configmap_section() {
    let mut files = chart("modules/001-foo", "foo", "foo");
    files.push(("modules/values.yaml".into(), "fooEnabled: true\n".into()));
    let data = json!({"baz": "x: 7\n", "bazEnabled": "true"});
    let addon = Addon::start(&refs(&files), Some(data), 4);
    addon.wait_ready();
    let unknown = "addon_operator_config_unknown_module_keys{key=\"baz\"}";
    assert_eq!(metric(&addon.metrics(), unknown), Some(1.0));
    eventually(&addon, "foo installed", || {
        addon.object("v1", "ConfigMap", "foo").is_some()
    });

    let mut baz = chart("modules/002-baz", "baz", "baz");
    baz.push((
        "modules/002-baz/hooks/watch".into(),
        rec("baz-hook", WATCH, ""),
    ));
    for (path, content) in baz {
        crate::common::put_atomically(&addon.dir.0.join(path), &content, 0o755);
    }
    eventually(&addon, "baz installed with its ConfigMap section", || {
        rendered_values(&addon, "baz") == Some(json!({"x": 7}))
    });
    assert_eq!(addon.revisions("baz"), [1]);
    eventually(&addon, "baz's hook synchronized", || {
        types(&addon, "baz-hook") == ["Synchronization"]
    });
    eventually(&addon, "foo sees baz", || {
        let cm = addon.object("v1", "ConfigMap", "foo");
        cm.is_some_and(|c| c["data"]["enabledModules"] == "foo,baz")
    });
    assert_eq!(reloads(&addon, "success"), 1);
    assert_eq!(reloads(&addon, "error"), 0);
    let line = addon.wait_log(&["modules reloaded"], std::time::Duration::from_secs(5));
    assert!(line.contains("\"added\":\"baz\""), "{line}");
    let added = "addon_operator_modules_reload_changes_total{change=\"module_added\"}";
    assert_eq!(metric(&addon.metrics(), added), Some(1.0));
    let hooks = "addon_operator_modules_reload_changes_total{change=\"hook_added\"}";
    assert_eq!(metric(&addon.metrics(), hooks), Some(1.0), "baz's hook");
    assert_eq!(
        metric(&addon.metrics(), unknown).unwrap_or(0.0),
        0.0,
        "baz is a module's key now"
    );
    let metrics = addon.metrics();
    let series = metrics.lines().find(|l| {
        l.contains("kube_snapshot_objects{") && l.contains("hook=\"002-baz/hooks/watch\"")
    });
    assert!(
        series.is_some_and(|l| l.contains("module=\"baz\"")),
        "the added hook's kube_* series name its module: {series:?}"
    );
}

/// A module's hook added by a reload gets its Synchronization and the module
/// runs once, without an uninstall (at most one new revision, the release
/// always there); the kept hook gets no second Synchronization. A hook removed
/// by a reload stops: an object change reaches the kept hook only. A hook whose
/// `--config` changed is replaced: a new Synchronization, with the objects.
#[test]
fn a_module_s_hooks_added_and_removed_by_a_reload() {
    let mut files = chart("modules/001-foo", "foo", "foo");
    files.push(("modules/values.yaml".into(), "fooEnabled: true\n".into()));
    files.push(("modules/001-foo/hooks/a".into(), rec("hook-a", WATCH, "")));
    let addon = Addon::start(&refs(&files), None, 4);
    addon.wait_ready();
    eventually(&addon, "foo installed", || addon.revisions("foo") == [1]);
    assert_eq!(types(&addon, "hook-a"), ["Synchronization"]);
    let hooks = addon.dir.0.join("modules/001-foo/hooks");

    put_hook(&hooks.join("b"), &rec("hook-b", WATCH, ""));
    eventually(&addon, "hook b synchronized", || {
        types(&addon, "hook-b") == ["Synchronization"]
    });
    eventually(&addon, "the reload counted", || {
        reloads(&addon, "success") == 1
    });
    let line = addon.wait_log(&["modules reloaded"], std::time::Duration::from_secs(5));
    assert!(line.contains("+001-foo/hooks/b"), "{line}");
    assert!(
        addon.revisions("foo").len() <= 2,
        "{:?}",
        addon.revisions("foo")
    );
    assert!(!addon.revisions("foo").is_empty());
    assert_eq!(
        types(&addon, "hook-a"),
        ["Synchronization"],
        "a kept its watch"
    );

    std::fs::remove_file(hooks.join("a")).expect("rm a");
    eventually(&addon, "the second reload", || {
        reloads(&addon, "success") == 2
    });
    addon
        .sim
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "watched", "namespace": NS}, "data": {"k": "v"}}))
        .expect("create watched");
    eventually(&addon, "b sees the object", || {
        types(&addon, "hook-b") == ["Synchronization", "Event"]
    });
    // A second change: once b got it, an event of a's (queued with b's first,
    // on the same main queue) would have run.
    let mut watched = addon
        .sim
        .get("v1", "ConfigMap", NS, "watched")
        .expect("watched");
    watched["data"]["k"] = json!("v2");
    addon.sim.update(watched).expect("update watched");
    eventually(&addon, "b sees the update", || {
        types(&addon, "hook-b") == ["Synchronization", "Event", "Event"]
    });
    assert_eq!(
        types(&addon, "hook-a"),
        ["Synchronization"],
        "a's watch stopped"
    );

    // b's --config changes (another binding name): removed then added, so it
    // gets a Synchronization of the new binding, with the object.
    let changed = WATCH.replace("\"cms\"", "\"watched\"");
    put_hook(&hooks.join("b"), &rec("hook-b", &changed, ""));
    eventually(&addon, "b synchronized again", || {
        types(&addon, "hook-b") == ["Synchronization", "Event", "Event", "Synchronization"]
    });
    let last = contexts(&addon, "hook-b").pop().expect("b's last run");
    assert_eq!(last[0]["binding"], "watched", "{last}");
    assert_eq!(
        last[0]["objects"].as_array().map(Vec::len),
        Some(1),
        "{last}"
    );
    let steps = addon.steps();
    assert!(
        !steps.iter().any(|s| s.starts_with("helm:uninstall")),
        "no uninstall for a hook change: {steps:?}"
    );
    assert!(
        addon.revisions("foo").len() <= 4,
        "{:?}",
        addon.revisions("foo")
    );
    assert_eq!(reloads(&addon, "error"), 0);
}

/// A static `<key>Enabled` written by a reload applies: `false` purges the
/// module (release and objects gone), `true` installs it again.
#[test]
fn a_static_enabled_changed_by_a_reload_disables_and_enables_the_module() {
    let mut files = chart("modules/001-foo", "foo", "foo");
    files.extend(chart("modules/002-bar", "bar", "bar"));
    files.push((
        "modules/values.yaml".into(),
        "fooEnabled: true\nbarEnabled: true\n".into(),
    ));
    let addon = Addon::start(&refs(&files), None, 4);
    addon.wait_ready();
    eventually(&addon, "both installed", || {
        addon.object("v1", "ConfigMap", "foo").is_some()
            && addon.object("v1", "ConfigMap", "bar").is_some()
    });
    let values = addon.dir.0.join("modules/values.yaml");

    put(&values, "fooEnabled: false\nbarEnabled: true\n");
    eventually(&addon, "foo purged", || {
        addon.revisions("foo").is_empty() && addon.object("v1", "ConfigMap", "foo").is_none()
    });
    let line = addon.wait_log(&["modules reloaded"], std::time::Duration::from_secs(5));
    assert!(line.contains("\"enabled_changed\":\"foo\""), "{line}");
    assert_eq!(addon.revisions("bar"), [1], "bar untouched");

    put(&values, "fooEnabled: true\nbarEnabled: true\n");
    eventually(&addon, "foo installed again", || {
        addon.object("v1", "ConfigMap", "foo").is_some()
    });
    assert_eq!(reloads(&addon, "success"), 2);
    assert_eq!(reloads(&addon, "error"), 0);
}

/// Global hooks follow the same rule: one added by a reload gets its onStartup
/// run, and the converge the reload asks for runs its afterAll (and the kept
/// global hook's again, as any converge does); one removed runs no more.
#[test]
fn a_global_hook_added_by_a_reload_runs_onstartup_and_in_the_next_converge() {
    let after_all = r#"{"configVersion":"v1","afterAll":1}"#;
    let mut files = chart("modules/001-foo", "foo", "foo");
    files.push(("modules/values.yaml".into(), "fooEnabled: true\n".into()));
    files.push(("global-hooks/kept".into(), rec("kept", after_all, "")));
    let addon = Addon::start(&refs(&files), None, 4);
    addon.wait_ready();
    assert_eq!(types(&addon, "kept"), ["afterAll"]);

    let both = r#"{"configVersion":"v1","onStartup":1,"afterAll":2}"#;
    put_hook(
        &addon.dir.0.join("global-hooks/added"),
        &rec("added", both, ""),
    );
    eventually(&addon, "added ran onStartup then afterAll", || {
        types(&addon, "added") == ["onStartup", "afterAll"]
    });
    eventually(&addon, "kept ran in the converge", || {
        types(&addon, "kept") == ["afterAll", "afterAll"]
    });
    let line = addon.wait_log(&["modules reloaded"], std::time::Duration::from_secs(5));
    assert!(line.contains("+added"), "{line}");

    std::fs::remove_file(addon.dir.0.join("global-hooks/kept")).expect("rm kept");
    eventually(&addon, "the second reload", || {
        reloads(&addon, "success") == 2
    });
    // A converge (the ConfigMap's global section changed) runs afterAll hooks.
    addon.set_config("global", "a: 1\n");
    eventually(&addon, "added ran in that converge", || {
        types(&addon, "added") == ["onStartup", "afterAll", "afterAll"]
    });
    assert_eq!(
        types(&addon, "kept"),
        ["afterAll", "afterAll"],
        "kept removed"
    );
    assert_eq!(reloads(&addon, "error"), 0);
}

/// A module added by a reload whose ConfigMap section (written before it
/// existed) fails its config schema: the reload fails, is counted and names
/// the module; nothing is installed and the key stays unknown. Once the
/// ConfigMap is fixed, SIGHUP reloads and the module is installed with it.
#[test]
fn an_added_module_s_bad_configmap_section_fails_the_reload() {
    let mut files = chart("modules/001-foo", "foo", "foo");
    files.push(("modules/values.yaml".into(), "fooEnabled: true\n".into()));
    let data = json!({"sized": "size: big\n", "sizedEnabled": "true"});
    let addon = Addon::start(&refs(&files), Some(data), 4);
    addon.wait_ready();

    let mut sized = chart("modules/002-sized", "sized", "sized");
    sized.push((
        "modules/002-sized/openapi/config-values.yaml".into(),
        "type: object\nproperties:\n  size:\n    type: integer\n".into(),
    ));
    for (path, content) in sized {
        put(&addon.dir.0.join(path), &content);
    }
    eventually(&addon, "the reload failed", || {
        reloads(&addon, "error") == 1
    });
    let line = addon.wait_log(
        &["modules reload failed"],
        std::time::Duration::from_secs(5),
    );
    assert!(
        line.contains("module 'sized': its ConfigMap section") && line.contains("size"),
        "{line}"
    );
    assert!(addon.revisions("sized").is_empty());
    let unknown = "addon_operator_config_unknown_module_keys{key=\"sized\"}";
    assert_eq!(metric(&addon.metrics(), unknown), Some(1.0));

    addon.set_config("sized", "size: 3\n");
    // SIGHUP until a reload reads the fixed section (the watch may deliver it
    // after the first SIGHUP's reload ran): each failed one is counted.
    let child = addon.child.as_ref().expect("child").id();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while reloads(&addon, "success") == 0 {
        assert!(std::time::Instant::now() < deadline, "{}", addon.logs());
        let errors = reloads(&addon, "error");
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(child as i32, libc::SIGHUP);
        }
        within(
            &addon,
            "a reload after SIGHUP",
            std::time::Duration::from_secs(30),
            || reloads(&addon, "success") == 1 || reloads(&addon, "error") > errors,
        );
    }
    eventually(&addon, "sized installed with size 3", || {
        rendered_values(&addon, "sized") == Some(json!({"size": 3}))
    });
    assert_eq!(reloads(&addon, "success"), 1);
}
