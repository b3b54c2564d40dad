//! The built-in jq, as `shell-operator jq ...` and as a binary named `jq` (a
//! symlink to the operator): flags hooks use, input streams, files, and jq's exit
//! codes.

use crate::common;

use common::{TempDir, binary};
use std::io::Write;
use std::process::{Command, Stdio};

/// Runs `program args` with `stdin`: (exit code, stdout, stderr).
fn jq_with(program: &std::path::Path, args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut child = Command::new(program)
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn");
    if let Some(mut input) = child.stdin.take() {
        input.write_all(stdin.as_bytes()).expect("stdin");
    }
    let out = child.wait_with_output().expect("wait");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn jq(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut all = vec!["jq"];
    all.extend(args);
    jq_with(std::path::Path::new(binary()), &all, stdin)
}

#[test]
fn common_flags() {
    let input = "{\"a\":\"x\",\"n\":[1,2]} {\"a\":\"y\",\"n\":[]}";
    assert_eq!(jq(&["-r", ".a"], input).1, "x\ny\n");
    assert_eq!(jq(&[".a"], input).1, "\"x\"\n\"y\"\n");
    assert_eq!(
        jq(&["-c", "."], input).1,
        "{\"a\":\"x\",\"n\":[1,2]}\n{\"a\":\"y\",\"n\":[]}\n"
    );
    assert_eq!(jq(&[".n"], "{\"n\":[1]}").1, "[\n  1\n]\n");
    assert_eq!(
        jq(&["-c", "--slurp", "map(.a)"], input).1,
        "[\"x\",\"y\"]\n"
    );
    assert_eq!(jq(&["-sc", "length"], input).1, "2\n");
    assert_eq!(jq(&["-n", "1 + 1"], "ignored").1, "2\n");
    assert_eq!(
        jq(
            &[
                "-nc",
                "--arg",
                "name",
                "cm",
                "--argjson",
                "n",
                "{\"k\":3}",
                "{name: $name, k: $n.k}"
            ],
            ""
        )
        .1,
        "{\"k\":3,\"name\":\"cm\"}\n"
    );
    assert_eq!(
        jq(&["-rn", "$ENV.JQ_TEST_VAR // \"unset\""], "").1,
        "unset\n"
    );
}

#[test]
fn exit_codes_like_jq() {
    assert_eq!(jq(&["-e", ".a"], "{\"a\":true}").0, 0);
    assert_eq!(jq(&["-e", ".a"], "{\"a\":false}").0, 1);
    assert_eq!(jq(&["-e", ".a"], "{}").0, 1);
    assert_eq!(jq(&["-e", "empty"], "{}").0, 4);
    let (code, _, err) = jq(&[".a |"], "{}");
    assert_eq!(code, 3, "{err}");
    assert!(err.contains("compile error"), "{err}");
    let (code, out, err) = jq(&[".[] | error(\"boom\")"], "[1]");
    assert_eq!((code, out.as_str()), (5, ""));
    assert!(err.contains("boom"), "{err}");
    assert_eq!(jq(&[".", "{not json"], "").0, 2, "a missing file");
    assert_eq!(jq(&["."], "{not json").0, 2);
    assert_eq!(jq(&["--frobnicate", "."], "").0, 2);
    assert_eq!(jq(&[], "").0, 2);
}

#[test]
fn files_and_argv0_jq() {
    let dir = TempDir::new("jq");
    let f1 = dir.0.join("a.json");
    let f2 = dir.0.join("b.json");
    std::fs::write(&f1, "{\"v\":1}").expect("write");
    std::fs::write(&f2, "{\"v\":2}\n{\"v\":3}").expect("write");
    let (code, out, _) = jq(
        &[".v", f1.to_str().expect("utf8"), f2.to_str().expect("utf8")],
        "",
    );
    assert_eq!((code, out.as_str()), (0, "1\n2\n3\n"));
    let link = dir.0.join("jq");
    std::os::unix::fs::symlink(binary(), &link).expect("symlink");
    let (code, out, _) = jq_with(
        &link,
        &["-r", ".items[].name"],
        "{\"items\":[{\"name\":\"a\"},{\"name\":\"b\"}]}",
    );
    assert_eq!((code, out.as_str()), (0, "a\nb\n"));
}

/// jq 1.6's other command-line options hooks use: `--version`, `-j`, `--tab`,
/// `--indent`, `-S`, `--slurpfile`, `--rawfile`.
#[test]
fn jq_16_options() {
    let (code, out, _) = jq(&["--version"], "");
    assert_eq!((code, out.as_str()), (0, "jq-1.6\n"));
    assert_eq!(jq(&["-j", ".a"], "{\"a\":\"x\"} {\"a\":\"y\"}").1, "xy");
    assert_eq!(jq(&["--tab", "."], "{\"a\":1}").1, "{\n\t\"a\": 1\n}\n");
    assert_eq!(
        jq(&["--indent", "1", "."], "{\"a\":1}").1,
        "{\n \"a\": 1\n}\n"
    );
    assert_eq!(
        jq(&["-S", "-c", "."], "{\"b\":1,\"a\":2}").1,
        "{\"a\":2,\"b\":1}\n"
    );
    let dir = TempDir::new("jq-files");
    std::fs::write(dir.0.join("v.json"), "1 2").expect("file");
    std::fs::write(dir.0.join("t.txt"), "text\n").expect("file");
    let slurp = dir.0.join("v.json").display().to_string();
    let raw = dir.0.join("t.txt").display().to_string();
    let out = jq(
        &[
            "-n",
            "-c",
            "--slurpfile",
            "v",
            &slurp,
            "--rawfile",
            "t",
            &raw,
            "[$v, $t]",
        ],
        "",
    );
    assert_eq!(out.1, "[[1,2],\"text\\n\"]\n", "{}", out.2);
}

/// Issue 12: with no jq on PATH (a scratch image), hooks and their `--config` still
/// find `jq`: the operator's own binary, linked in its tmp dir and put first on
/// the hooks' PATH. With a jq on PATH, hooks keep that one.
#[test]
fn hooks_get_the_built_in_jq_when_path_has_none() {
    let tools = TempDir::new("jq-less-path");
    std::os::unix::fs::symlink("/usr/bin/tr", tools.0.join("tr")).expect("link tr");
    let config = "configVersion: v1\nonStartup: 1";
    let hook = format!(
        "#!/bin/sh\nif [ \"$1\" = \"--config\" ]; then jq -n '{{}}' >/dev/null || exit 3; echo '{config}'; exit 0; fi\n\
         printf '%s %s\\n' a \"$(tr -d '\\n' < \"$BINDING_CONTEXT_PATH\")\" >> \"$OUT_DIR/runs.log\"\n\
         command -v jq > \"$OUT_DIR/which\"\njq -r '.[0].binding' \"$BINDING_CONTEXT_PATH\" > \"$OUT_DIR/binding\"\n"
    );
    let path = tools.0.display().to_string();
    let op = common::Operator::start(&[("a.sh", hook.clone())], &[], &[("PATH", &path)]);
    op.wait_runs(std::time::Duration::from_secs(20), |r| !r.is_empty());
    let out = op.dir.0.join("out");
    let read = |f: &str| std::fs::read_to_string(out.join(f)).unwrap_or_default();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while read("binding").is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    assert_eq!(read("binding"), "onStartup\n", "logs:\n{}", op.logs());
    let tmp = op.dir.0.join("tmp").display().to_string();
    assert_eq!(read("which").trim(), format!("{tmp}/bin/jq"));
    op.wait_log(
        "no jq on PATH: hooks get the built-in one",
        std::time::Duration::from_secs(5),
    );
    drop(op);

    // With the system's jq on PATH, nothing is linked.
    let op = common::Operator::start(&[("a.sh", hook)], &[], &[]);
    op.wait_runs(std::time::Duration::from_secs(20), |r| !r.is_empty());
    let out = op.dir.0.join("out");
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while std::fs::read_to_string(out.join("which"))
        .unwrap_or_default()
        .is_empty()
        && std::time::Instant::now() < deadline
    {
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let which = std::fs::read_to_string(out.join("which")).unwrap_or_default();
    assert!(
        !which.contains("/tmp/bin/jq") && which.trim().ends_with("/jq"),
        "{which}"
    );
}
