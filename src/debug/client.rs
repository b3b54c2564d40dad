//! The debug CLI: `shell-operator queue list|main`, `hook list|snapshot <hook>`,
//! `config list|set <name> <value> [duration]` and `raw <path>`, each a request to
//! a running operator's debug socket, printing the answer as it comes;
//! `queue list -w [-t 1s]` redraws the list until Ctrl-C.
//!
//! The socket is `--debug-unix-socket`, else `$DEBUG_UNIX_SOCKET`, else flant's
//! default. A missing or dead socket is a one-line error naming the path, exit 1.

use crate::hook::config::go_duration;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::Duration;

const DEFAULT_SOCKET: &str = "/var/run/shell-operator/debug.socket";

/// Parsed command line of a debug command.
#[derive(Debug, PartialEq)]
struct Args {
    words: Vec<String>,
    output: String,
    show_empty: bool,
    /// `queue list -w`: redraw every `interval` until Ctrl-C.
    watch: Option<Duration>,
    socket: PathBuf,
    /// `-o` was given (addon-operator's commands default to yaml otherwise).
    output_given: bool,
    /// `module values|config -g`: include the global section.
    global: bool,
}

/// Runs a debug command (`args` starts at the command word); returns the exit code.
/// `addon`: run as addon-operator (its commands and socket in `--help`).
pub(crate) fn main(args: &[String], env: &dyn Fn(&str) -> Option<String>, addon: bool) -> i32 {
    if args.iter().any(|a| a == "-h" || a == "--help") {
        print!("{}", help(addon));
        return 0;
    }
    let parsed = parse(args, env);
    if let Ok(a) = &parsed {
        if a.watch.is_some() && a.words == ["queue", "list"] {
            return watch(a);
        }
    }
    let result = parsed.and_then(|a| request(&a).map(|r| (a, r)));
    match result {
        Ok((_, (200, body))) => {
            print!("{body}");
            let _ = std::io::stdout().flush();
            0
        }
        Ok((_, (_, body))) => {
            eprintln!("Error: {}", body.trim_end());
            1
        }
        Err(e) => {
            eprintln!("Error: {e}");
            1
        }
    }
}

/// `queue list -w`: the terminal's alternate screen, an RFC3339 timestamp and the
/// list, redrawn every interval; Ctrl-C restores the screen and exits 0.
fn watch(a: &Args) -> i32 {
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let _ = signal_hook::flag::register(signal_hook::consts::SIGINT, stop.clone());
    let interval = a.watch.unwrap_or(Duration::from_secs(1));
    let mut out = std::io::stdout();
    let _ = write!(out, "\x1b[?1049h");
    let code = loop {
        if stop.load(std::sync::atomic::Ordering::Relaxed) {
            break 0;
        }
        let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
        match request(a) {
            Ok((200, body)) => drop(write!(out, "\x1b[H\x1b[2J{now}\n\n{body}")),
            Ok((_, body)) => drop(write!(out, "\x1b[H\x1b[2J{now}\n\nError: {body}")),
            Err(e) => {
                let _ = write!(out, "\x1b[?1049l");
                eprintln!("Error: {e}");
                return 1;
            }
        }
        let _ = out.flush();
        let deadline = std::time::Instant::now() + interval;
        while std::time::Instant::now() < deadline
            && !stop.load(std::sync::atomic::Ordering::Relaxed)
        {
            std::thread::sleep(Duration::from_millis(20));
        }
    };
    let _ = write!(out, "\x1b[?1049l");
    let _ = out.flush();
    code
}

/// addon-operator's debug socket when neither the flag nor the env var names one.
pub(crate) const ADDON_DEFAULT_SOCKET: &str = "/var/run/addon-operator/debug.socket";

/// `--help` of the debug commands: shell-operator's, or addon-operator's (its own
/// `global`/`module` commands and its default socket).
fn help(addon: bool) -> String {
    let (name, socket) = match addon {
        true => ("addon-operator", ADDON_DEFAULT_SOCKET),
        false => ("shell-operator", DEFAULT_SOCKET),
    };
    let mut out = format!(
        "Query a running operator through its debug socket.\n\nUsage:\n  \
{name} queue list [-o text|json|yaml] [-e|--show-empty] [-w [-t 1s]]\n  \
{name} queue main [-o text|json|yaml]\n  {name} hook list [-o ...]\n  \
{name} hook snapshot <hook> [-o ...]\n  {name} config list [-o ...]\n  \
{name} config set <name> <value> [duration]\n  {name} raw <url path>\n"
    );
    if addon {
        out.push_str(
            "\nModules and global hooks (output yaml unless -o says otherwise):\n  \
addon-operator global list|values|config|patches|snapshots\n  \
addon-operator module list [-o text|json|yaml]\n  \
addon-operator module values|config <module> [-g|--global]\n  \
addon-operator module patches|snapshots|render <module>\n  \
addon-operator module resource-monitor [<module>]\n  \
addon-operator module settings export resources|configmap\n  \
addon-operator module drift [<module>]\n",
        );
    }
    out.push_str(&format!(
        "\nEvery command takes --debug-unix-socket <path> (env DEBUG_UNIX_SOCKET, default \
{socket}).\n"
    ));
    out
}

fn parse(args: &[String], env: &dyn Fn(&str) -> Option<String>) -> Result<Args, ClientError> {
    let mut a = Args {
        words: vec![],
        output: "text".into(),
        show_empty: false,
        watch: None,
        output_given: false,
        global: false,
        socket: PathBuf::from(env("DEBUG_UNIX_SOCKET").unwrap_or_else(|| DEFAULT_SOCKET.into())),
    };
    let mut i = 0;
    while i < args.len() {
        let (flag, inline) = match args[i].split_once('=') {
            Some((f, v)) if f.starts_with('-') => (f, Some(v.to_string())),
            _ => (args[i].as_str(), None),
        };
        let mut value = || -> Result<String, ClientError> {
            if let Some(v) = inline.clone() {
                return Ok(v);
            }
            i += 1;
            args.get(i)
                .cloned()
                .ok_or_else(|| ClientError::from(format!("flag needs an argument: {flag}")))
        };
        match flag {
            "-o" | "--output" => {
                a.output = value()?;
                a.output_given = true;
            }
            "-g" | "--global" => a.global = true,
            "--debug-unix-socket" => a.socket = PathBuf::from(value()?),
            "-e" | "--show-empty" => a.show_empty = true,
            "-w" | "--watch" => a.watch = Some(a.watch.unwrap_or(Duration::from_secs(1))),
            "-t" | "--watchInterval" => {
                let text = value()?;
                let d = go_duration(&text).unwrap_or_else(|e| {
                    eprintln!("invalid --watchInterval {text:?} ({e}), using 1s");
                    Duration::from_secs(1)
                });
                if a.watch.is_some() || args.iter().any(|x| x == "-w" || x == "--watch") {
                    a.watch = Some(d);
                }
            }
            f if f.starts_with('-') && f.len() > 1 => {
                return Err(format!("unknown flag: {f}").into());
            }
            word => a.words.push(word.to_string()),
        }
        i += 1;
    }
    if !matches!(a.output.as_str(), "text" | "json" | "yaml") {
        return Err(format!("invalid output format {:?}: text, json or yaml", a.output).into());
    }
    Ok(a)
}

/// The request a command makes: (method, path, form body).
fn plan(a: &Args) -> Result<(&'static str, String, String), ClientError> {
    let fmt = &a.output;
    let words: Vec<&str> = a.words.iter().map(String::as_str).collect();
    let get = |p: String| Ok(("GET", p, String::new()));
    match words.as_slice() {
        ["queue", "list"] => get(format!("/queue/list.{fmt}?showEmpty={}", a.show_empty)),
        ["queue", "main"] => get(format!("/queue/main.{fmt}")),
        ["hook", "list"] => get(format!("/hook/list.{fmt}")),
        ["hook", "snapshot", hook] => get(format!("/hook/{}/snapshots.{fmt}", encode(hook))),
        ["config", "list"] => get(format!("/config/list.{fmt}")),
        ["config", "set", name, value, rest @ ..] if rest.len() <= 1 => {
            let mut form = format!("name={}&value={}", encode(name), encode(value));
            if let Some(d) = rest.first() {
                go_duration(d)
                    .map_err(|e| ClientError::from(format!("invalid duration {d:?}: {e}")))?;
                form.push_str(&format!("&duration={}", encode(d)));
            }
            Ok(("POST", "/config/set".into(), form))
        }
        ["raw", path] => get(path.to_string()),
        // addon-operator's (default output yaml; patches always JSON).
        [
            "global",
            what @ ("list" | "values" | "config" | "patches" | "snapshots"),
        ] => get(format!("/global/{what}.{}", addon_format(a, what))),
        ["module", "list"] => get(format!("/module/list.{}", addon_format(a, "list"))),
        ["module", "resource-monitor"] => get(format!(
            "/module/resource-monitor.{}",
            addon_format(a, "resource-monitor")
        )),
        ["module", "resource-monitor", module] => get(format!(
            "/module/resource-monitor.{}?module={}",
            addon_format(a, "resource-monitor"),
            encode(module)
        )),
        ["module", "drift"] => get(format!("/module/drift.{}", addon_format(a, "drift"))),
        ["module", "drift", module] => get(format!(
            "/module/drift.{}?module={}",
            addon_format(a, "drift"),
            encode(module)
        )),
        ["module", "render", module] => get(format!("/module/{}/render", encode(module))),
        [
            "module",
            "settings",
            "export",
            to @ ("resources" | "configmap"),
        ] => Ok((
            "POST",
            format!("/module/settings/export?to={to}"),
            String::new(),
        )),
        [
            "module",
            what @ ("values" | "config" | "patches" | "snapshots"),
            module,
        ] => get(format!(
            "/module/{}/{what}.{}?global={}",
            encode(module),
            addon_format(a, what),
            a.global
        )),
        _ => Err(format!(
            "unknown or incomplete command {:?}; see 'shell-operator queue --help'",
            a.words.join(" ")
        )
        .into()),
    }
}

/// addon-operator's commands print YAML unless `-o` says otherwise; patches are JSON.
fn addon_format(a: &Args, what: &str) -> &'static str {
    match (what, a.output_given.then_some(a.output.as_str())) {
        ("patches", _) | (_, Some("json")) => "json",
        (_, Some("text")) if what == "list" => "text",
        _ => "yaml",
    }
}

/// Sends the command's request over the socket; returns (status, body).
fn request(a: &Args) -> Result<(u16, String), ClientError> {
    let (method, path, form) = plan(a)?;
    let socket = a.socket.display();
    if !a.socket.exists() {
        return Err(format!("debug socket '{socket}' does not exist").into());
    }
    let mut stream = UnixStream::connect(&a.socket).map_err(|e| {
        ClientError::from(format!("cannot connect to debug socket '{socket}': {e}"))
    })?;
    // The settings export waits for the operator's own watches (up to 60 s).
    let wait = match path.starts_with("/module/settings/export") {
        true => 90,
        false => 10,
    };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(wait)));
    let head = format!(
        "{method} {path} HTTP/1.0\r\nHost: unix\r\nContent-Type: application/x-www-form-urlencoded\r\nContent-Length: {}\r\n\r\n{form}",
        form.len()
    );
    let mut text = Vec::new();
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.read_to_end(&mut text))
        .map_err(|e| ClientError::from(format!("debug socket '{socket}': {e}")))?;
    let text = String::from_utf8_lossy(&text);
    let (head, body) = text.split_once("\r\n\r\n").unwrap_or((&text, ""));
    let status = head.split_whitespace().nth(1).and_then(|c| c.parse().ok());
    let status = status.ok_or_else(|| format!("debug socket '{socket}': not an HTTP answer"))?;
    Ok((status, body.to_string()))
}

/// Percent-encodes everything but unreserved characters and `/`.
fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Why the debug CLI could not ask the operator: a bad command line, a missing socket or a failed request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ClientError {
    problem: String,
}

impl From<String> for ClientError {
    fn from(problem: String) -> ClientError {
        ClientError { problem }
    }
}

impl From<&str> for ClientError {
    fn from(problem: &str) -> ClientError {
        ClientError::from(problem.to_string())
    }
}

impl std::fmt::Display for ClientError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for ClientError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str], env: Option<&str>) -> Result<Args, ClientError> {
        let list: Vec<String> = list.iter().map(|s| s.to_string()).collect();
        parse(&list, &|_| env.map(String::from))
    }

    #[test]
    fn the_settings_export_is_a_post_of_its_direction() {
        let plan_of = |to: &str| {
            let a = args(&["module", "settings", "export", to], None).expect("parse");
            plan(&a)
        };
        assert_eq!(
            plan_of("resources").expect("plan"),
            (
                "POST",
                "/module/settings/export?to=resources".into(),
                String::new()
            )
        );
        assert_eq!(
            plan_of("configmap").expect("plan").1,
            "/module/settings/export?to=configmap"
        );
        assert!(plan_of("elsewhere").is_err());
    }

    #[test]
    fn flags_env_and_plans() {
        let a = args(&["queue", "list", "-o", "json", "-e"], Some("/env.sock")).expect("parse");
        assert_eq!(a.socket, PathBuf::from("/env.sock"));
        assert_eq!(plan(&a).expect("plan").1, "/queue/list.json?showEmpty=true");
        let a = args(
            &["hook", "snapshot", "dir/a b.sh", "--debug-unix-socket=/s"],
            Some("/env"),
        )
        .expect("parse");
        assert_eq!(a.socket, PathBuf::from("/s"));
        assert_eq!(
            plan(&a).expect("plan").1,
            "/hook/dir/a%20b.sh/snapshots.text"
        );
        let a = args(&["config", "set", "log.level", "debug", "5m"], None).expect("parse");
        assert_eq!(a.socket, PathBuf::from(DEFAULT_SOCKET));
        assert_eq!(
            plan(&a).expect("plan").2,
            "name=log.level&value=debug&duration=5m"
        );
        let a = args(&["config", "set", "log.level", "debug", "5x"], None).expect("parse");
        assert!(
            plan(&a)
                .expect_err("bad duration")
                .to_string()
                .starts_with("invalid duration \"5x\"")
        );
        assert!(args(&["queue", "list", "-o", "xml"], None).is_err());
        assert!(plan(&args(&["queue"], None).expect("parse")).is_err());
    }
}
