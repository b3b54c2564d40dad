//! The debug socket and CLI against a running operator whose main queue is held in
//! a known state: an onStartup hook that blocks until the test releases it, with an
//! EnableScheduleBindings task behind it and an empty "slow" queue. Every client
//! subcommand is checked in every output format, plus the error paths (unknown hook,
//! missing socket, bad duration) and `config set` changing the live log level.

use crate::common;

use common::{Operator, hook, run_binary};
use serde_json::{Value, json};
use std::time::{Duration, Instant};

const BLOCK: &str = r#"while [ ! -f "$OUT_DIR/release" ]; do sleep 0.05; done"#;

fn start() -> Operator {
    let blocker = hook("a", "configVersion: v1\nonStartup: 1", BLOCK);
    let sched =
        "configVersion: v1\nschedule:\n- name: yearly\n  crontab: \"0 0 1 1 *\"\n  queue: slow";
    let op = Operator::start(
        &[("a.sh", blocker), ("dir/b.sh", hook("b", sched, ""))],
        &[],
        &[],
    );
    op.wait_runs(Duration::from_secs(10), |r| !r.is_empty());
    op
}

/// Runs `shell-operator <args> --debug-unix-socket <op's socket>`.
fn cli(op: &Operator, args: &[&str]) -> (i32, String, String) {
    let socket = op.debug_socket();
    let mut all: Vec<&str> = args.to_vec();
    all.extend(["--debug-unix-socket", socket.to_str().expect("utf8 path")]);
    run_binary(&all, &[])
}

/// stdout of a successful command.
fn ok(op: &Operator, args: &[&str]) -> String {
    let (code, out, err) = cli(op, args);
    assert_eq!(code, 0, "{args:?}: {err}");
    out
}

fn yaml(text: &str) -> Value {
    serde_yaml::from_str(text).expect("yaml output")
}

const MAIN_TASKS: [&str; 2] = [
    "HookRun::onStartup:a.sh",
    "EnableScheduleBindings:main::dir/b.sh:EnableScheduleBindings",
];

#[test]
fn queue_commands_in_every_format() {
    let op = start();
    let main_text = format!(
        "Queue 'main': length 2, status: 'run first task'\n\n 1. {}\n 2. {}\n",
        MAIN_TASKS[0], MAIN_TASKS[1]
    );
    assert_eq!(ok(&op, &["queue", "main"]), main_text);
    let main_json = json!({"name": "main", "tasksCount": 2, "status": "run first task",
        "tasks": [{"index": 1, "description": MAIN_TASKS[0]}, {"index": 2, "description": MAIN_TASKS[1]}]});
    let out = ok(&op, &["queue", "main", "-o", "json"]);
    assert_eq!(
        serde_json::from_str::<Value>(&out).expect("json"),
        main_json
    );
    assert_eq!(yaml(&ok(&op, &["queue", "main", "-o", "yaml"])), main_json);

    let summary = "Summary:\n- 'main' queue: 2 tasks.\n- 1 other queue (0 active, 1 empty): 0 tasks.\n- total 2 tasks to handle.\n";
    assert_eq!(
        ok(&op, &["queue", "list"]),
        format!("{main_text}\n{summary}")
    );
    assert_eq!(
        ok(&op, &["queue", "list", "--show-empty"]),
        format!("{main_text}\nEmpty queues (1):\n- slow\n\n{summary}")
    );
    let list = json!({"active": [main_json],
        "summary": {"mainQueueTasks": 2, "otherQueues": {"active": 0, "empty": 1, "tasks": 0}, "totalTasks": 2}});
    let out = ok(&op, &["queue", "list", "-o", "json"]);
    assert_eq!(serde_json::from_str::<Value>(&out).expect("json"), list);
    let mut with_empty = list.clone();
    with_empty["empty"] = json!([{"name": "slow", "tasksCount": 0}]);
    assert_eq!(
        yaml(&ok(&op, &["queue", "list", "-o", "yaml", "-e"])),
        with_empty
    );
}

#[test]
fn hook_and_config_commands_in_every_format() {
    let op = start();
    let names = json!(["a.sh", "dir/b.sh"]);
    assert_eq!(ok(&op, &["hook", "list"]), "[\"a.sh\",\"dir/b.sh\"]\n");
    assert_eq!(
        ok(&op, &["hook", "list", "-o", "json"]),
        "[\"a.sh\",\"dir/b.sh\"]\n"
    );
    assert_eq!(yaml(&ok(&op, &["hook", "list", "-o", "yaml"])), names);
    for format in ["text", "json", "yaml"] {
        let out = ok(&op, &["hook", "snapshot", "dir/b.sh", "-o", format]);
        assert_eq!(yaml(&out), json!({}), "{format}: {out}");
    }
    let (code, out, err) = cli(&op, &["hook", "snapshot", "nope.sh"]);
    assert_eq!(
        (code, out.as_str(), err.as_str()),
        (1, "", "Error: hook 'nope.sh' is not exist\n")
    );

    let header = format!(
        "{:<30} {:<20} {:<20} {:<40}\n",
        "NAME", "VALUE", "EXPIRE AT", "DESCRIPTION"
    );
    let row = format!(
        "{:<30} {:<20} {:<20} {:<40}\n",
        "log.level", "info", "", "Global log level"
    );
    assert_eq!(ok(&op, &["config", "list"]), format!("{header}{row}"));
    let list = json!([{"name": "log.level", "description": "Global log level", "default": "info", "value": "info"}]);
    let out = ok(&op, &["config", "list", "-o", "json"]);
    assert_eq!(serde_json::from_str::<Value>(&out).expect("json"), list);
    assert_eq!(yaml(&ok(&op, &["config", "list", "-o", "yaml"])), list);
}

#[test]
fn config_set_changes_the_live_log_level() {
    let op = start();
    assert!(!op.logs().contains("\"level\":\"debug\""));
    assert_eq!(ok(&op, &["config", "set", "log.level", "debug", "10m"]), "");
    let out = ok(&op, &["config", "list", "-o", "json"]);
    let v: Value = serde_json::from_str(&out).expect("json");
    assert_eq!(v[0]["value"], "debug");
    let expire_at = v[0]["expireAt"].as_str().expect("expireAt");
    let at = chrono::DateTime::parse_from_rfc3339(expire_at).expect("rfc3339");
    let left = at.timestamp() - chrono::Utc::now().timestamp();
    assert!((590..=600).contains(&left), "{expire_at}");
    // The debug server logs each request at debug level: visible now.
    ok(&op, &["queue", "main"]);
    op.wait_log("\"msg\":\"complete\"", Duration::from_secs(5));

    let (code, _, err) = cli(&op, &["config", "set", "log.level", "loud"]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with("Error: 'value' parameter is invalid: unknown log level \"loud\""),
        "{err}"
    );
    let (code, _, err) = cli(&op, &["config", "set", "log.level", "debug", "soon"]);
    assert_eq!(code, 1);
    assert!(err.starts_with("Error: invalid duration \"soon\""), "{err}");
    let (code, _, err) = cli(&op, &["config", "set", "nope", "x"]);
    assert_eq!(
        (code, err.as_str()),
        (1, "Error: unknown runtime parameter \"nope\"\n")
    );
}

#[test]
fn socket_from_env_raw_and_missing_socket_errors() {
    let op = start();
    let socket = op.debug_socket();
    let path = socket.to_str().expect("utf8");
    let (code, out, _) = run_binary(&["hook", "list"], &[("DEBUG_UNIX_SOCKET", path)]);
    assert_eq!((code, out.as_str()), (0, "[\"a.sh\",\"dir/b.sh\"]\n"));
    let (code, out, _) = run_binary(&["raw", "/", "--debug-unix-socket", path], &[]);
    assert_eq!((code, out.as_str()), (0, "debug endpoint is alive"));
    let mode = std::os::unix::fs::PermissionsExt::mode(
        &std::fs::metadata(&socket).expect("socket").permissions(),
    );
    assert_eq!(mode & 0o777, 0o600);

    let missing = op.dir.0.join("nothing/here.socket");
    let missing = missing.to_str().expect("utf8");
    let (code, out, err) = run_binary(&["queue", "list", "--debug-unix-socket", missing], &[]);
    assert_eq!((code, out.as_str()), (1, ""));
    assert_eq!(
        err,
        format!("Error: debug socket '{missing}' does not exist\n")
    );

    // A dead socket (operator stopped; the file left behind by hand) names the path too.
    let dead = op.dir.0.join("dead.socket");
    drop(std::os::unix::net::UnixListener::bind(&dead).expect("bind"));
    let dead = dead.to_str().expect("utf8");
    let (code, _, err) = run_binary(&["hook", "list", "--debug-unix-socket", dead], &[]);
    assert_eq!(code, 1);
    assert!(
        err.starts_with(&format!("Error: cannot connect to debug socket '{dead}'")),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1);
}

#[test]
fn socket_is_removed_on_shutdown_and_unbindable_socket_fails_startup() {
    let mut op = start();
    let socket = op.debug_socket();
    assert!(socket.exists());
    std::fs::write(op.dir.0.join("out/release"), "").expect("release");
    op.signal(libc::SIGTERM);
    assert_eq!(op.wait_exit(Duration::from_secs(10)), Some(0));
    assert!(!socket.exists(), "socket removed on shutdown");

    // A regular file where the socket should be: startup fails with exit 1.
    let dir = common::TempDir::new("dbg");
    let blocker = dir.0.join("debug.socket");
    std::fs::write(&blocker, "not a socket").expect("file");
    std::fs::create_dir_all(dir.0.join("hooks")).expect("hooks");
    let started = Instant::now();
    let (code, out) = start_on_socket(&dir, &blocker);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("exists and is not a socket"), "{out}");
    assert!(started.elapsed() < Duration::from_secs(10));
}

/// Runs `start` with empty hooks in `dir` and the debug socket at `socket`;
/// returns the exit code and output.
fn start_on_socket(dir: &common::TempDir, socket: &std::path::Path) -> (i32, String) {
    let (code, out, _) = run_binary(
        &[
            "start",
            "--hooks-dir",
            dir.0.join("hooks").to_str().expect("utf8"),
            "--tmp-dir",
            dir.0.join("tmp").to_str().expect("utf8"),
            "--listen-port",
            "0",
            "--debug-unix-socket",
            socket.to_str().expect("utf8"),
        ],
        &[],
    );
    (code, out)
}

#[test]
fn a_live_socket_is_never_stolen() {
    let op = start();
    let socket = op.debug_socket();
    let dir = common::TempDir::new("dbg2");
    std::fs::create_dir_all(dir.0.join("hooks")).expect("hooks");
    let (code, out) = start_on_socket(&dir, &socket);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("another process is listening on it"), "{out}");
    assert_eq!(ok(&op, &["hook", "list"]), "[\"a.sh\",\"dir/b.sh\"]\n");
}

#[test]
fn debug_http_addr_serves_the_same_endpoints() {
    let port = crate::common::listen_port();
    let addr = format!("127.0.0.1:{port}");
    let blocker = hook("a", "configVersion: v1\nonStartup: 1", BLOCK);
    let op = Operator::start(&[("a.sh", blocker)], &["--debug-http-addr", &addr], &[]);
    op.wait_runs(Duration::from_secs(10), |r| !r.is_empty());
    let (code, body) = common::http_get(port, "/hook/list.json");
    assert_eq!((code, body.as_str()), (200, "[\"a.sh\"]\n"));
    let (code, body) = common::http_get(port, "/debug/queue/main.text");
    assert_eq!(code, 200);
    assert!(
        body.starts_with(
            "Queue 'main': length 1, status: 'run first task'\n\n 1. HookRun::onStartup:a.sh\n"
        ),
        "{body}"
    );
    let (code, body) = common::http_get(port, "/nope");
    assert_eq!((code, body.as_str()), (404, "404 page not found\n"));
}

#[test]
fn queue_list_watch_redraws_until_ctrl_c() {
    let op = start();
    let socket = op.debug_socket();
    let child = std::process::Command::new(common::binary())
        .args(["queue", "list", "-w", "-t", "100ms", "--debug-unix-socket"])
        .arg(&socket)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn watch");
    std::thread::sleep(Duration::from_millis(800));
    // SAFETY: kill(2) on our own child's pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = child.wait_with_output().expect("wait");
    assert_eq!(out.status.code(), Some(0));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("\x1b[?1049h\x1b[H\x1b[2J20"), "{text:?}");
    assert!(text.ends_with("\x1b[?1049l"), "{text:?}");
    assert!(
        text.matches("Summary:\n- 'main' queue: 2 tasks.").count() >= 3,
        "{text:?}"
    );
}
