//! Running flant's operator and ours side by side and comparing what their hooks
//! received: each hook appends `<tag> <binding context>` to `runs.log` and
//! `<tag> <env names>` to `env.log` in its operator's `$OUT_DIR`.

use crate::common::Operator;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// Differences we keep on purpose: (hook tag, what differs, why). Each is in the
/// README's "Differences from flant's operators".
pub const ALLOWED: &[(&str, &str, &str)] = &[(
    "v0-kube",
    "contexts",
    "flant v1.20.2 panics building a v0 onKubernetesEvent context (the v0 monitor drops \
     the object, MapV0 reads its namespace) and retries the task for ever, stopping its \
     main queue; our v0 hooks run (v0.rs asserts flant's panic and our contexts)",
)];

/// Differences inside a binding context we keep on purpose: (the end of the JSON
/// pointer that differs, why). Each is in the README's "Differences from flant's
/// operators".
pub const ALLOWED_PATHS: &[(&str, &str)] = &[
    (
        "/review/apiVersion",
        "flant's binary leaves the AdmissionReview's apiVersion out of the binding \
         context although its docs show it; we follow the docs (a hook can tell a v1 \
         review from a v1beta1 one)",
    ),
    ("/review/kind", "the same for the review's kind"),
];

/// [`json_diff`] without the differences [`ALLOWED_PATHS`] names.
pub fn unexplained_diff(flant: &Value, ours: &Value) -> Vec<String> {
    json_diff(flant, ours)
        .into_iter()
        .filter(|line| {
            let path = line.split(':').next().unwrap_or("");
            !ALLOWED_PATHS.iter().any(|(end, _)| path.ends_with(end))
        })
        .collect()
}

/// flant's shell-operator binary (built once per machine, cached in .tools/flant).
pub fn flant_shell_operator() -> PathBuf {
    static BIN: OnceLock<PathBuf> = OnceLock::new();
    BIN.get_or_init(|| {
        let script = control_plane::repo_root().join("scripts/install-flant.sh");
        let out = std::process::Command::new("bash")
            .arg(&script)
            .stderr(std::process::Stdio::inherit())
            .output()
            .expect("run scripts/install-flant.sh");
        assert!(out.status.success(), "{} failed", script.display());
        let text = String::from_utf8_lossy(&out.stdout);
        PathBuf::from(text.lines().last().unwrap_or_default().trim())
    })
    .clone()
}

/// A hook that prints `config` for `--config` and otherwise records its binding
/// context and the names of its environment variables under `tag`. The context line
/// is appended with one write (`cat` of a file of its own), so hooks running at once
/// in different queues never interleave their lines (dash's printf writes the tag,
/// the context and the newline with three writes; strace shows it).
pub fn recorder(tag: &str, config: &str) -> String {
    format!(
        "#!/bin/sh\nif [ \"$1\" = \"--config\" ]; then\ncat <<'CONFIG'\n{config}\nCONFIG\nexit 0\nfi\n\
         printf '%s %s\\n' '{tag}' \"$(tr -d '\\n' < \"$BINDING_CONTEXT_PATH\")\" > \"$OUT_DIR/.run.$$\"\n\
         cat \"$OUT_DIR/.run.$$\" >> \"$OUT_DIR/runs.log\" && rm -f \"$OUT_DIR/.run.$$\"\n\
         printf '%s %s\\n' '{tag}' \"$(env | grep -E '^[A-Za-z_][A-Za-z0-9_]*=' | cut -d= -f1 | sort | tr '\\n' ' ')\" >> \"$OUT_DIR/env.log\"\n"
    )
}

/// flant's shell-operator on `hooks` with `args` (a metrics port of its own, since
/// it cannot report a port it picked); the operator and that port.
pub fn start_flant(
    hooks: &[(&str, String)],
    args: &[&str],
    env: &[(&str, &str)],
) -> (Operator, u16) {
    let port = crate::common::listen_port();
    let port_text = port.to_string();
    let mut all = args.to_vec();
    all.extend(["--listen-port", port_text.as_str()]);
    (
        Operator::start_program(&flant_shell_operator(), hooks, &all, env),
        port,
    )
}

/// Stops `op` as a pod stop would (SIGTERM) and requires exit 0 within 20 s.
pub fn stop(op: &mut Operator, who: &str) {
    op.signal(libc::SIGTERM);
    assert_eq!(
        op.wait_exit(Duration::from_secs(20)),
        Some(0),
        "{who} stopped with 0"
    );
}

/// One operator's hooks, extra arguments and hook environment.
pub type SideStart<'a> = (
    &'a [(&'a str, String)],
    &'a [&'a str],
    &'a [(&'a str, &'a str)],
);

/// flant's operator and ours on the same hooks, kubeconfig and extra arguments.
pub struct Pair {
    pub flant: Operator,
    pub ours: Operator,
    /// flant's metrics port (ours says its own in the log: `ours.port()`).
    pub flant_port: u16,
}

impl Pair {
    pub fn start(hooks: &[(&str, String)], args: &[&str]) -> Pair {
        Pair::start_with_env(hooks, args, &[], &[])
    }

    /// [`Pair::start`] with environment variables of each's own for the hooks.
    pub fn start_with_env(
        hooks: &[(&str, String)],
        args: &[&str],
        flant_env: &[(&str, &str)],
        ours_env: &[(&str, &str)],
    ) -> Pair {
        Pair::start_each(hooks, (args, flant_env), (args, ours_env))
    }

    /// Each operator with arguments and hook environment of its own.
    pub fn start_each(
        hooks: &[(&str, String)],
        (flant_args, flant_env): (&[&str], &[(&str, &str)]),
        (ours_args, ours_env): (&[&str], &[(&str, &str)]),
    ) -> Pair {
        Pair::start_sides((hooks, flant_args, flant_env), (hooks, ours_args, ours_env))
    }

    /// Each operator with hooks, arguments and hook environment of its own (the
    /// generated corpus gives each its own namespaces, named in the hooks' configs).
    pub fn start_sides(
        (flant_hooks, flant_args, flant_env): SideStart<'_>,
        (ours_hooks, ours_args, ours_env): SideStart<'_>,
    ) -> Pair {
        let (flant, flant_port) = start_flant(flant_hooks, flant_args, flant_env);
        let ours = Operator::start(ours_hooks, ours_args, ours_env);
        Pair {
            flant,
            ours,
            flant_port,
        }
    }

    /// Waits until neither operator's hooks ran for `quiet` (at most 60 s).
    pub fn settle(&self, quiet: Duration) {
        let deadline = Instant::now() + Duration::from_secs(60);
        let counts = || (self.flant.runs().len(), self.ours.runs().len());
        let mut last = counts();
        let mut since = Instant::now();
        while since.elapsed() < quiet {
            assert!(Instant::now() < deadline, "hooks never settled: {last:?}");
            std::thread::sleep(Duration::from_millis(100));
            let now = counts();
            if now != last {
                last = now;
                since = Instant::now();
            }
        }
    }

    /// Waits until both operators' hooks received a context mentioning `needle`.
    pub fn wait_both(&self, needle: &str) {
        for op in [&self.flant, &self.ours] {
            op.wait_runs(Duration::from_secs(30), |r| {
                r.iter().any(|(_, c)| c.to_string().contains(needle))
            });
        }
    }
}

/// Each tag's contexts in order, normalised: lists of objects sorted by
/// namespace/name (their order is the API server's or the cache's, not a contract).
pub fn by_tag(op: &Operator) -> BTreeMap<String, Vec<Value>> {
    let mut map: BTreeMap<String, Vec<Value>> = BTreeMap::new();
    for (tag, ctx) in op.runs() {
        for mut c in ctx.as_array().cloned().unwrap_or_default() {
            normalise(&mut c);
            map.entry(tag.clone()).or_default().push(c);
        }
    }
    map
}

/// Sorts a binding context's lists of objects (`objects` and every snapshot) by
/// namespace/name: their order is the API server's or the cache's, not a contract.
pub fn normalise(ctx: &mut Value) {
    if let Some(objects) = ctx.get_mut("objects").and_then(Value::as_array_mut) {
        objects.sort_by_key(sort_key);
    }
    if let Some(snaps) = ctx.get_mut("snapshots").and_then(Value::as_object_mut) {
        for list in snaps.values_mut().filter_map(Value::as_array_mut) {
            list.sort_by_key(sort_key);
        }
    }
}

fn sort_key(item: &Value) -> String {
    let meta = &item["object"]["metadata"];
    format!(
        "{}/{}/{}",
        meta["namespace"].as_str().unwrap_or(""),
        meta["name"].as_str().unwrap_or(""),
        item["filterResult"]
    )
}

/// The environment variable names each tag's runs had beyond the test process's
/// own (the operator's contract: `BINDING_CONTEXT_PATH`, …), as one set per tag.
pub fn env_by_tag(op: &Operator) -> BTreeMap<String, BTreeSet<String>> {
    let inherited: BTreeSet<String> = std::env::vars().map(|(k, _)| k).collect();
    let text = std::fs::read_to_string(op.dir.0.join("out/env.log")).unwrap_or_default();
    let mut map: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for line in text.lines() {
        let Some((tag, names)) = line.split_once(' ') else {
            continue;
        };
        let set = map.entry(tag.to_string()).or_default();
        for n in names.split_whitespace() {
            if !inherited.contains(n)
                && !["OUT_DIR", "LOG_TYPE", "PWD", "SHLVL", "OLDPWD", "_"].contains(&n)
            {
                set.insert(n.to_string());
            }
        }
    }
    map
}

/// Compares `flant` with `ours` (one map per operator) and returns a report of every
/// difference not in [`ALLOWED`]; empty when they agree.
pub fn differences<T: Comparable>(
    what: &str,
    flant: &BTreeMap<String, T>,
    ours: &BTreeMap<String, T>,
) -> Vec<String> {
    let tags: BTreeSet<&String> = flant.keys().chain(ours.keys()).collect();
    tags.into_iter()
        .filter(|tag| flant.get(*tag) != ours.get(*tag))
        .filter(|tag| !ALLOWED.iter().any(|(t, w, _)| t == tag && *w == what))
        .map(|tag| {
            format!(
                "{what} of hook {tag}: {}",
                T::explain(flant.get(tag), ours.get(tag))
            )
        })
        .collect()
}

/// What [`differences`] compares, and how it says where two differ.
pub trait Comparable: PartialEq {
    fn explain(flant: Option<&Self>, ours: Option<&Self>) -> String;
}

impl Comparable for Vec<String> {
    fn explain(flant: Option<&Self>, ours: Option<&Self>) -> String {
        format!("\n  flant: {flant:?}\n  ours:  {ours:?}")
    }
}

impl Comparable for BTreeSet<String> {
    fn explain(flant: Option<&Self>, ours: Option<&Self>) -> String {
        let (f, o) = (
            flant.cloned().unwrap_or_default(),
            ours.cloned().unwrap_or_default(),
        );
        format!(
            "\n  only flant: {:?}\n  only ours:  {:?}",
            f.difference(&o).collect::<Vec<_>>(),
            o.difference(&f).collect::<Vec<_>>()
        )
    }
}

impl Comparable for Vec<Value> {
    /// The first context that differs (managedFields left out of the print).
    fn explain(flant: Option<&Self>, ours: Option<&Self>) -> String {
        let (f, o) = (
            flant.cloned().unwrap_or_default(),
            ours.cloned().unwrap_or_default(),
        );
        let at = f
            .iter()
            .zip(&o)
            .position(|(a, b)| a != b)
            .unwrap_or(f.len().min(o.len()));
        let show = |v: Option<&Value>| {
            v.map_or("(none)".to_string(), |v| {
                let mut v = v.clone();
                strip_managed_fields(&mut v);
                v.to_string()
            })
        };
        format!(
            "{} contexts from flant, {} from ours; context {at} differs:\n  flant: {}\n  ours:  {}",
            f.len(),
            o.len(),
            show(f.get(at)),
            show(o.get(at))
        )
    }
}

/// The JSON pointers where `a` and `b` differ, with both values (compact).
pub fn json_diff(a: &Value, b: &Value) -> Vec<String> {
    let mut out = Vec::new();
    diff_at("", a, b, &mut out);
    out
}

fn diff_at(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: BTreeSet<&String> = x.keys().chain(y.keys()).collect();
            for k in keys {
                let (va, vb) = (
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                );
                if x.contains_key(k) != y.contains_key(k) {
                    out.push(format!(
                        "{path}/{k}: flant {} / ours {}",
                        shown(x.get(k)),
                        shown(y.get(k))
                    ));
                } else {
                    diff_at(&format!("{path}/{k}"), va, vb, out);
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (va, vb)) in x.iter().zip(y).enumerate() {
                diff_at(&format!("{path}/{i}"), va, vb, out);
            }
        }
        _ if a != b => out.push(format!("{path}: flant {a} / ours {b}")),
        _ => {}
    }
}

fn shown(v: Option<&Value>) -> String {
    v.map_or("(absent)".to_string(), Value::to_string)
}

fn strip_managed_fields(v: &mut Value) {
    match v {
        Value::Object(map) => {
            map.remove("managedFields");
            map.values_mut().for_each(strip_managed_fields);
        }
        Value::Array(items) => items.iter_mut().for_each(strip_managed_fields),
        _ => {}
    }
}
