//! addon-operator's reload (issue 39, `src/addon/reload.rs`), against kube-sim
//! with the real helm: a module whose `values.yaml` or chart changed is run
//! again (a new release revision), the other modules are not; a removed module
//! is purged (its release uninstalled) and installed again when it comes back;
//! a reload that would add a module fails, is counted and changes nothing;
//! SIGHUP reloads and does not stop the operator.

use crate::common::metric;
use crate::harness::*;
use serde_json::json;
use std::path::Path;

/// Writes `content` at `path` atomically (a dot-file renamed over it).
fn put(path: &Path, content: &str) {
    crate::common::put_atomically(path, content, 0o644);
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

    // A new module: not reloadable yet; counted, nothing installed.
    for (path, content) in chart("modules/003-baz", "baz", "baz") {
        put(&addon.dir.0.join(path), &content);
    }
    eventually(&addon, "the reload failed", || {
        reloads(&addon, "error") == 1
    });
    let line = addon.wait_log(
        &["modules reload failed"],
        std::time::Duration::from_secs(5),
    );
    assert!(line.contains("baz"), "the error names the module: {line}");
    assert!(addon.revisions("baz").is_empty());

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
