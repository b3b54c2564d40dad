//! The helm binary client of addon-operator (spec §5): each module's chart is
//! installed as a Helm release named after the module, in the operator's namespace,
//! by running the real `helm` (`HELM_BIN_PATH`), helm 3 or helm 4.
//!
//! - [`Helm`] runs `helm template|history|get values|upgrade|uninstall|list` through
//!   [`crate::process::run_captured`] (own process group, killed on timeout). Output
//!   above 64 MiB is refused; helm's stderr reaches every error text (cut at 64 KiB).
//! - [`manifest_objects`] lists the objects of a rendered manifest stream.
//! - [`checksum`] hashes the rendered manifest and the chart's files (FNV-1a 128).
//! - [`upgrade_reason`] is the decision of §5.3: why an upgrade must run, or
//!   `None` to skip it; the module run answers its "is the object still there"
//!   question from [`object_names`] (one list per kind and namespace).
//! - [`Helm::upgrade_with`] deduplicates: given the deployed manifest, our
//!   post-renderer stops helm before it stores a revision when the render makes
//!   the same objects ([`same_objects`]).
//!
//! The module run (`module_run.rs`) calls checksum → last release → upgrade_reason
//! (which reads the release's manifest only when it must) → upgrade.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use std::time::Duration;

pub use crate::addon::release::helm_error::HelmError;
use crate::addon::release::post_render;
use crate::addon::release::record::StoredRecord;
pub use crate::addon::release::release_error::ReleaseError;
use crate::process::{ExitStatus, run_captured};

/// Most helm output we accept on stdout (a rendered manifest can be large).
const MAX_OUTPUT: usize = 64 * 1024 * 1024;
/// Most of helm's stderr quoted in an error.
const MAX_STDERR: usize = 64 * 1024;
/// Extra time the helm process gets beyond its own `--timeout`.
const PROCESS_GRACE: Duration = Duration::from_secs(60);
/// The release value that carries the checksum of the last upgrade.
pub(crate) const CHECKSUM_VALUE: &str = "_addonOperatorModuleChecksum";

/// How to run helm for the releases of one operator.
#[derive(Debug)]
pub struct Helm {
    /// `HELM_BIN_PATH` (default `helm`).
    pub(crate) bin: PathBuf,
    /// `ADDON_OPERATOR_NAMESPACE`: every release command gets `--namespace`.
    pub(crate) namespace: String,
    /// Write flant v1.5's checksum (the MD5 of [`Self::render_plain`]) as the release
    /// value `_addonOperatorModuleChecksum` instead of ours (`--flant-checksum`).
    pub(crate) flant_checksum: bool,
    /// `HELM_HISTORY_MAX` (default 10).
    pub(crate) history_max: u32,
    /// `HELM_TIMEOUT` (default 5m): helm's `--timeout`; the process gets 60 s more.
    pub timeout: Duration,
    /// Passed as `--kubeconfig` when set.
    pub kubeconfig: Option<PathBuf>,
    /// Passed as `--kube-context` when set.
    pub(crate) kube_context: Option<String>,
    /// Where helm's cache/config/data dirs go (`<work_dir>/helm/{cache,config,data}`)
    /// when the environment names none; also `HOME` when that is unset.
    pub work_dir: Option<PathBuf>,
    /// The major version, asked once (helm 3 and 4 differ in `list`).
    major: OnceLock<u32>,
    /// Our own binary as helm's post-renderer (the `heritage` label), and the dir
    /// holding its helm 4 plugin; `None` runs helm without one.
    pub(crate) post_renderer: Option<(PathBuf, PathBuf)>,
    /// Go runtime settings for each helm process (`helm_go_env.rs`).
    pub(crate) go_env: Vec<(&'static str, String)>,
}

/// The latest revision of a release.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Release {
    pub revision: u64,
    /// `deployed`, `failed`, `pending-upgrade`, …
    pub status: String,
    /// The `_addonOperatorModuleChecksum` value of the release (asked only when deployed).
    pub checksum: Option<String>,
    /// The revision's storage Secret and record, when read from helm's Secrets.
    pub stored: Option<StoredRecord>,
    /// Installed or upgraded while its module was in maintenance (the release label
    /// [`MAINTENANCE_LABEL`] is `"true"`, as flant's newer releases write it).
    pub maintenance: bool,
}

/// One `helm upgrade --install` of a module's release ([`Helm::upgrade_with`]).
pub struct UpgradeArgs<'a> {
    pub(crate) release: &'a str,
    pub(crate) chart: &'a Path,
    pub(crate) values_file: &'a Path,
    /// Ours: the release label `moduleChecksum`.
    pub(crate) checksum: &'a str,
    /// flant's: the release value `_addonOperatorModuleChecksum`.
    pub(crate) flant_checksum: &'a str,
    /// The module is in maintenance: the release label [`MAINTENANCE_LABEL`] says so.
    pub(crate) maintenance: bool,
    /// A file with the deployed release's manifest: stop without a revision when
    /// the render makes the same objects (needs our post-renderer).
    pub(crate) unless_same_as: Option<&'a Path>,
    /// A drift correction: helm 4's server-side apply takes back the fields another
    /// manager set (`--force-conflicts`); helm 3's three-way merge needs nothing.
    pub(crate) force_conflicts: bool,
}

/// What an upgrade did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Upgraded {
    /// helm stored a new revision.
    Done,
    /// The render makes the deployed release's objects: helm was stopped before it
    /// stored a revision.
    Unchanged,
}

/// One object of a rendered manifest.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct ObjectRef {
    pub api_version: String,
    pub kind: String,
    /// `metadata.namespace` as rendered; `None` means the release namespace (or cluster scope).
    pub namespace: Option<String>,
    pub name: String,
}

impl std::fmt::Display for ObjectRef {
    /// `<ns>/<kind>/<name>` (ns empty when not rendered), as in the absent-resource metric.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ns = self.namespace.as_deref().unwrap_or("");
        write!(f, "{ns}/{}/{}", self.kind, self.name)
    }
}

impl Helm {
    /// A client for `bin` with the defaults: history 10, timeout 5m, no kubeconfig,
    /// context or work dir.
    pub fn new(bin: impl Into<PathBuf>, namespace: &str) -> Helm {
        Helm {
            bin: bin.into(),
            namespace: namespace.to_string(),
            history_max: 10,
            flant_checksum: false,
            timeout: Duration::from_secs(300),
            kubeconfig: None,
            kube_context: None,
            work_dir: None,
            major: OnceLock::new(),
            post_renderer: None,
            go_env: crate::addon::release::helm_go_env::helm_go_env(1),
        }
    }

    /// `helm version --short` → major version (3 or 4); error names the binary and stderr.
    pub fn major_version(&self) -> Result<u32, HelmError> {
        if let Some(m) = self.major.get() {
            return Ok(*m);
        }
        let out = self.run("version", &["version", "--short"], false)?;
        let major = parse_major(&out, &format!("version ({})", self.bin.display()))?;
        let _ = self.major.set(major);
        Ok(major)
    }

    /// `helm template <release> <chart> --namespace ns --values <file>`: the rendered
    /// manifests, through our post-renderer.
    pub fn render(
        &self,
        release: &str,
        chart: &Path,
        values_file: &Path,
    ) -> Result<String, HelmError> {
        self.template(release, chart, values_file, &self.post_renderer_args()?)
    }

    /// `helm template` with `extra` arguments after the chart and values.
    fn template(
        &self,
        release: &str,
        chart: &Path,
        values_file: &Path,
        extra: &[String],
    ) -> Result<String, HelmError> {
        let chart = path_arg(chart)?;
        let values = path_arg(values_file)?;
        let mut args = vec!["template", release, chart, "--values", values];
        args.extend(extra.iter().map(String::as_str));
        self.run(&format!("template {release}"), &args, true)
    }

    /// The post-renderer arguments for this helm's major version: helm 3 runs our
    /// binary (`--post-renderer <bin> --post-renderer-args post-renderer`), helm 4
    /// only plugins (`--post-renderer <plugin>`, found through `HELM_PLUGINS`).
    fn post_renderer_args(&self) -> Result<Vec<String>, HelmError> {
        let Some((binary, _)) = &self.post_renderer else {
            return Ok(Vec::new());
        };
        let binary = path_arg(binary)?.to_string();
        Ok(match self.major_version()? {
            3 => vec![
                "--post-renderer".into(),
                binary,
                "--post-renderer-args".into(),
                "post-renderer".into(),
            ],
            _ => vec![
                "--post-renderer".into(),
                crate::addon::release::post_render::PLUGIN_NAME.into(),
            ],
        })
    }

    /// `helm get manifest <release>`: the manifest of the deployed revision.
    pub fn manifest(&self, release: &str) -> Result<String, HelmError> {
        let args = ["get", "manifest", release];
        self.run(&format!("get manifest {release}"), &args, true)
    }

    /// Latest revision via `helm history <release> --max 1 --output json`; `Ok(None)`
    /// when the release does not exist.
    pub fn last_release(&self, release: &str) -> Result<Option<Release>, HelmError> {
        let what = format!("history {release}");
        let args = ["history", release, "--max", "1", "--output", "json"];
        let out = match self.run(&what, &args, true) {
            Ok(out) => out,
            Err(e) if e.is_release_not_found() => return Ok(None),
            Err(e) => return Err(e),
        };
        let Some((revision, status)) = parse_history(&out, &what)? else {
            return Ok(None);
        };
        // Our checksum is the storage Secret's `moduleChecksum` label, which helm's
        // commands do not show; the release value `_addonOperatorModuleChecksum` is
        // flant's (an MD5 of the plain render), never ours. So no checksum: the
        // decision renders and compares the objects.
        Ok(Some(Release {
            revision,
            status,
            ..Release::default()
        }))
    }

    /// `helm template <release> <chart> --namespace ns --values <file>` without our
    /// post-renderer: the text flant's addon-operator v1.5.0 hashes (MD5) into
    /// `_addonOperatorModuleChecksum`.
    pub(crate) fn render_plain(
        &self,
        release: &str,
        chart: &Path,
        values_file: &Path,
    ) -> Result<String, HelmError> {
        self.template(release, chart, values_file, &[])
    }

    /// [`Self::upgrade_with`] out of maintenance, with no deduplication.
    pub fn upgrade(
        &self,
        release: &str,
        chart: &Path,
        values_file: &Path,
        checksum: &str,
        flant_checksum: &str,
    ) -> Result<(), HelmError> {
        let args = UpgradeArgs {
            release,
            chart,
            values_file,
            checksum,
            flant_checksum,
            maintenance: false,
            unless_same_as: None,
            force_conflicts: false,
        };
        self.upgrade_with(&args).map(drop)
    }

    /// `helm upgrade <release> <chart> --install --namespace ns --history-max N --timeout T
    /// --skip-crds --values <file> --set-string _addonOperatorModuleChecksum=<flant_checksum>
    /// --labels moduleChecksum=<checksum>,<MAINTENANCE_LABEL>=<maintenance>`: the label
    /// carries our checksum (what we decide on), the value flant's (the MD5 of
    /// [`Self::render_plain`]), so that flant's operator taking the release back finds
    /// it up to date. With `unless_same_as`, our post-renderer compares the render
    /// with that manifest and stops helm before it stores a revision when they hold
    /// the same objects: [`Upgraded::Unchanged`].
    pub fn upgrade_with(&self, a: &UpgradeArgs) -> Result<Upgraded, HelmError> {
        let chart = path_arg(a.chart)?;
        let values = path_arg(a.values_file)?;
        let history = self.history_max.to_string();
        let timeout = go_duration(self.timeout);
        let set = format!("{CHECKSUM_VALUE}={}", a.flant_checksum);
        let label = format!(
            "{CHECKSUM_LABEL}={},{MAINTENANCE_LABEL}={}",
            a.checksum, a.maintenance
        );
        let mut args = vec![
            "upgrade",
            a.release,
            chart,
            "--install",
            "--history-max",
            &history,
            "--timeout",
            &timeout,
            "--skip-crds",
            "--values",
            values,
            "--set-string",
            &set,
            "--labels",
            &label,
        ];
        if a.force_conflicts && self.major_version()? >= 4 {
            args.push("--force-conflicts");
        }
        let post = self.post_renderer_args()?;
        args.extend(post.iter().map(String::as_str));
        let what = format!("upgrade {}", a.release);
        let Some(released) = a.unless_same_as.filter(|_| self.post_renderer.is_some()) else {
            return self.run(&what, &args, true).map(|_| Upgraded::Done);
        };
        let marker = post_render::unchanged_marker(released);
        let _ = std::fs::remove_file(&marker);
        let env = [(post_render::RELEASED_ENV, released.as_os_str())];
        let result = self.run_with_env(&what, &args, &env);
        let unchanged = std::fs::remove_file(&marker).is_ok();
        match result {
            Err(_) if unchanged => Ok(Upgraded::Unchanged),
            other => other.map(|_| Upgraded::Done),
        }
    }

    /// `helm uninstall <release> --namespace ns`; `Ok(false)` when it did not exist.
    pub fn uninstall(&self, release: &str) -> Result<bool, HelmError> {
        let timeout = go_duration(self.timeout);
        let args = ["uninstall", release, "--timeout", &timeout];
        match self.run(&format!("uninstall {release}"), &args, true) {
            Ok(_) => Ok(true),
            Err(e) if e.is_release_not_found() => Ok(false),
            Err(e) => Err(e),
        }
    }

    /// `helm list --all --namespace ns --output json` (helm 4 lists every status by
    /// default and has no `--all`): release names sorted, empty names dropped.
    pub fn list(&self) -> Result<Vec<String>, HelmError> {
        let mut args = vec!["list", "--output", "json", "--max", "0"];
        if self.major_version()? < 4 {
            args.push("--all");
        }
        let out = self.run("list", &args, true)?;
        parse_list(&out, "list")
    }

    /// The plugins dir for `HELM_PLUGINS`, given only to a helm known to be 4 or
    /// later: helm 3 reads every plugin.yaml it finds there and prefixes each error
    /// with its refusal of the helm 4 plugin format (it gets our binary directly, see
    /// [`Self::post_renderer_args`]); `helm version` itself, run before the major is
    /// known, needs no plugin.
    fn plugins_dir(&self) -> Option<&Path> {
        let (_, plugins) = self.post_renderer.as_ref()?;
        matches!(self.major.get(), Some(m) if *m >= 4).then_some(plugins.as_path())
    }

    /// The command with the global flags and helm's home dirs.
    fn command(&self, args: &[&str], namespaced: bool) -> Command {
        let mut cmd = Command::new(&self.bin);
        cmd.args(args);
        // Only a deduplicating upgrade hands its post-renderer a manifest.
        cmd.env_remove(post_render::RELEASED_ENV);
        if namespaced {
            cmd.arg("--namespace").arg(&self.namespace);
            if let Some(k) = &self.kubeconfig {
                cmd.arg("--kubeconfig").arg(k);
            }
            if let Some(c) = &self.kube_context {
                cmd.arg("--kube-context").arg(c);
            }
        }
        if let Some(plugins) = self.plugins_dir() {
            cmd.env("HELM_PLUGINS", plugins);
        }
        for (var, value) in &self.go_env {
            cmd.env(var, value);
        }
        if let Some(dir) = &self.work_dir {
            for (var, sub) in [
                ("HELM_CACHE_HOME", "cache"),
                ("HELM_CONFIG_HOME", "config"),
                ("HELM_DATA_HOME", "data"),
            ] {
                if std::env::var_os(var).is_none() {
                    cmd.env(var, dir.join("helm").join(sub));
                }
            }
            if std::env::var_os("HOME").is_none() {
                cmd.env("HOME", dir);
            }
        }
        cmd
    }

    /// Runs helm; stdout on success, else an error with the status and stderr.
    /// `what` names the operation in errors (`upgrade demo`).
    fn run(&self, what: &str, args: &[&str], namespaced: bool) -> Result<String, HelmError> {
        self.run_command(what, self.command(args, namespaced))
    }

    /// [`Self::run`] of a namespaced command with `env` added (for its post-renderer).
    fn run_with_env(
        &self,
        what: &str,
        args: &[&str],
        env: &[(&str, &std::ffi::OsStr)],
    ) -> Result<String, HelmError> {
        let mut cmd = self.command(args, true);
        cmd.envs(env.iter().copied());
        self.run_command(what, cmd)
    }

    fn run_command(&self, what: &str, mut cmd: Command) -> Result<String, HelmError> {
        let limit = self.timeout.saturating_add(PROCESS_GRACE);
        let bin = self.bin.display().to_string();
        let out = run_captured(&mut cmd, Some(limit), MAX_OUTPUT).map_err(|error| {
            let (what, bin) = (what.to_string(), bin.clone());
            HelmError::Run { what, bin, error }
        })?;
        if out.status != ExitStatus::Code(0) {
            let stderr = bounded_text(&out.stderr, MAX_STDERR);
            return Err(HelmError::Failed {
                what: what.to_string(),
                bin,
                status: out.status.to_string(),
                stderr: stderr.trim_end().to_string(),
            });
        }
        log_stderr(what, &out.stderr);
        String::from_utf8(out.stdout).map_err(|e| HelmError::Output {
            what: format!("{what} ({bin})"),
            detail: format!("output is not UTF-8: {e}"),
        })
    }
}

/// Logs what a helm that succeeded wrote to stderr (warnings, deprecations) at
/// debug level, with the module (the release named last in `what`, `upgrade demo`)
/// and the command.
fn log_stderr(what: &str, stderr: &[u8]) {
    let release = what.rsplit_once(' ').map_or("", |(_, r)| r);
    for line in String::from_utf8_lossy(stderr).lines() {
        let line = line.trim_end();
        if !line.is_empty() {
            let fields = [
                ("module", release),
                ("output", "helm"),
                ("stream", "stderr"),
                ("helm", what),
            ];
            crate::log::debug(line, &fields);
        }
    }
}

/// Text of at most `max` bytes (cut on a char boundary, marked).
fn bounded_text(bytes: &[u8], max: usize) -> String {
    let text = String::from_utf8_lossy(bytes);
    if text.len() <= max {
        return text.into_owned();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… [cut at {max} bytes]", &text[..end])
}

/// A path as a helm argument (helm takes UTF-8 paths).
fn path_arg(p: &Path) -> Result<&str, HelmError> {
    p.to_str()
        .ok_or_else(|| HelmError::Path(format!("helm: path {} is not UTF-8", p.display())))
}

/// A Go duration for `--timeout`: whole seconds as `300s`, else milliseconds.
fn go_duration(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

/// The major version from `helm version --short` (`v4.1.4+g05fa379`, `v3.17.0+g…`).
fn parse_major(out: &str, what: &str) -> Result<u32, HelmError> {
    let line = out.trim();
    let digits: String = line
        .trim_start_matches('v')
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect();
    digits.parse().map_err(|_| {
        let detail = format!("cannot read a version from `version --short` output {line:?}");
        output_error(what, detail)
    })
}

/// helm's output `what` could not be read: `detail` says why.
fn output_error(what: &str, detail: String) -> HelmError {
    HelmError::Output {
        what: what.to_string(),
        detail,
    }
}

/// (revision, status) of the newest entry of `helm history --output json`; `None`
/// for an empty history.
fn parse_history(out: &str, what: &str) -> Result<Option<(u64, String)>, HelmError> {
    let bad = |detail: String| output_error(what, detail);
    let entries: Vec<serde_json::Value> = serde_json::from_str(out)
        .map_err(|e| bad(format!("history output is not a JSON array: {e}")))?;
    let mut newest: Option<(u64, String)> = None;
    for (i, e) in entries.iter().enumerate() {
        let revision = e["revision"]
            .as_u64()
            .ok_or_else(|| bad(format!("history entry {i}: no numeric `revision`")))?;
        let status = e["status"]
            .as_str()
            .ok_or_else(|| bad(format!("history entry {i}: no `status` string")))?;
        if newest.as_ref().is_none_or(|(r, _)| revision > *r) {
            newest = Some((revision, status.to_string()));
        }
    }
    Ok(newest)
}

/// Sorted release names from `helm list --output json`.
fn parse_list(out: &str, what: &str) -> Result<Vec<String>, HelmError> {
    let bad = |detail: String| output_error(what, detail);
    let entries: Vec<serde_json::Value> = serde_json::from_str(out)
        .map_err(|e| bad(format!("list output is not a JSON array: {e}")))?;
    let mut names = Vec::with_capacity(entries.len());
    for (i, e) in entries.iter().enumerate() {
        let name = e["name"]
            .as_str()
            .ok_or_else(|| bad(format!("list entry {i}: no `name` string")))?;
        if !name.is_empty() {
            names.push(name.to_string());
        }
    }
    names.sort();
    names.dedup();
    Ok(names)
}

/// The rendered objects of a manifest stream: (apiVersion, kind, namespace-or-None,
/// name) per non-empty YAML document; empty documents and comment-only ones
/// (`# Source:`) are skipped, `…List` kinds expanded into their items.
pub fn manifest_objects(manifest: &str) -> Result<Vec<ObjectRef>, ReleaseError> {
    use serde::Deserialize;
    let mut objects = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(manifest).enumerate() {
        let value = serde_json::Value::deserialize(doc).map_err(|e| invalid_yaml(i, e))?;
        if value.is_null() {
            continue;
        }
        collect_objects(
            &value,
            &format!("manifest document {}", i + 1),
            &mut objects,
        )?;
    }
    Ok(objects)
}

/// Whether two manifest streams hold the same objects, whatever their order, comments
/// and formatting; helm hooks (`helm.sh/hook` annotation), which `helm template`
/// prints but a release's manifest does not hold, are left out of both, and so is
/// our post-renderer's `heritage: addon-operator` label (a release installed by
/// flant's v1.5.0 lacks it; that alone is no reason for a new revision).
pub(crate) fn same_objects(a: &str, b: &str) -> Result<bool, ReleaseError> {
    Ok(object_docs(a)? == object_docs(b)?)
}

/// Document `i` (0-based) of a manifest is not YAML.
fn invalid_yaml(i: usize, e: impl std::fmt::Display) -> ReleaseError {
    ReleaseError::Manifest {
        at: format!("manifest document {}", i + 1),
        problem: format!("invalid YAML: {e}"),
    }
}

fn object_docs(manifest: &str) -> Result<Vec<String>, ReleaseError> {
    use serde::Deserialize;
    let mut docs = Vec::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(manifest).enumerate() {
        let mut value = serde_json::Value::deserialize(doc).map_err(|e| invalid_yaml(i, e))?;
        without_our_heritage(&mut value);
        without_helm_annotation(&mut value);
        let hook = &value["metadata"]["annotations"]["helm.sh/hook"];
        if value.is_null() || !hook.is_null() {
            continue;
        }
        docs.push(value.to_string());
    }
    docs.sort();
    Ok(docs)
}

/// The annotation helm 4 puts on each document it hands a post-renderer (and takes
/// off again after): the template file it came from.
const POSTRENDER_FILENAME: &str = "postrenderer.helm.sh/postrender-filename";

/// Removes [`POSTRENDER_FILENAME`] from `value` and the items of a List, and the
/// annotations map if that empties it, so a post-renderer's input compares equal
/// to the release's manifest.
fn without_helm_annotation(value: &mut serde_json::Value) {
    if let Some(items) = value.get_mut("items").and_then(|i| i.as_array_mut()) {
        items.iter_mut().for_each(without_helm_annotation);
    }
    let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) else {
        return;
    };
    let Some(notes) = meta.get_mut("annotations").and_then(|a| a.as_object_mut()) else {
        return;
    };
    if notes.remove(POSTRENDER_FILENAME).is_some() && notes.is_empty() {
        meta.remove("annotations");
    }
}

/// Removes `heritage: addon-operator` (what our post-renderer writes) from the labels
/// of `value` and of the items of a List, and the labels map if that empties it.
fn without_our_heritage(value: &mut serde_json::Value) {
    if let Some(items) = value.get_mut("items").and_then(|i| i.as_array_mut()) {
        items.iter_mut().for_each(without_our_heritage);
    }
    let (key, ours) = crate::addon::release::post_render::HERITAGE;
    let Some(meta) = value.get_mut("metadata").and_then(|m| m.as_object_mut()) else {
        return;
    };
    let Some(labels) = meta.get_mut("labels").and_then(|l| l.as_object_mut()) else {
        return;
    };
    if labels.get(key).and_then(|v| v.as_str()) == Some(ours) {
        labels.remove(key);
        if labels.is_empty() {
            meta.remove("labels");
        }
    }
}

/// Adds `value` (an object or a List of objects) to `out`; `at` names it in errors.
fn collect_objects(
    value: &serde_json::Value,
    at: &str,
    out: &mut Vec<ObjectRef>,
) -> Result<(), ReleaseError> {
    let kind = value["kind"].as_str().unwrap_or_default();
    if kind.ends_with("List")
        && let Some(items) = value["items"].as_array()
    {
        for (j, item) in items.iter().enumerate() {
            collect_objects(item, &format!("{at} items[{j}]"), out)?;
        }
        return Ok(());
    }
    out.push(object_ref(value, at)?);
    Ok(())
}

/// The identity of one rendered object.
fn object_ref(value: &serde_json::Value, at: &str) -> Result<ObjectRef, ReleaseError> {
    let bad = |problem: String| ReleaseError::Manifest {
        at: at.to_string(),
        problem,
    };
    if !value.is_object() {
        return Err(bad("not a mapping".to_string()));
    }
    let field = |v: &serde_json::Value, name: &str| -> Result<String, ReleaseError> {
        match v.as_str() {
            Some(s) if !s.is_empty() => Ok(s.to_string()),
            _ => Err(bad(format!("missing or empty `{name}`"))),
        }
    };
    let namespace = value["metadata"]["namespace"]
        .as_str()
        .filter(|s| !s.is_empty())
        .map(String::from);
    Ok(ObjectRef {
        api_version: field(&value["apiVersion"], "apiVersion")?,
        kind: field(&value["kind"], "kind")?,
        namespace,
        name: field(&value["metadata"]["name"], "metadata.name")?,
    })
}

/// What the upgrade decision asks outside itself, each only when it needs it.
pub struct UpgradeFacts<'a> {
    /// The manifest of the release's last revision.
    pub released: Box<dyn Fn() -> Result<String, ReleaseError> + 'a>,
    /// Whether an object is in the cluster.
    pub exists: Box<ExistsFn<'a>>,
}

/// Whether an object is in the cluster (an [`UpgradeFacts`] question).
pub type ExistsFn<'a> = dyn Fn(&ObjectRef) -> Result<bool, ReleaseError> + 'a;

/// An upgrade the decision calls for.
#[derive(Debug, Clone, PartialEq)]
pub struct Upgrade {
    /// Why, for the log: see [`upgrade_reason`].
    pub reason: String,
    /// Only the values or the chart changed: helm renders them and our
    /// post-renderer stops the upgrade before helm stores a revision when the
    /// rendered objects are the release's (the documented deduplication).
    pub(crate) unless_same: bool,
}

impl Upgrade {
    fn always(reason: String) -> Option<Upgrade> {
        let unless_same = false;
        Some(Upgrade {
            reason,
            unless_same,
        })
    }
}

/// The upgrade decision of spec §5.3, the one production runs: `Some` when helm
/// must run — `release absent`, `status <s>` (anything but deployed),
/// `maintenance ended` (the release is labelled as installed in maintenance, and
/// the module no longer is), `values or chart changed` (the checksum differs:
/// helm runs, but stops without a revision when the render makes the release's
/// objects, [`Upgrade::unless_same`]), `resource <ns>/<kind>/<name> absent` (an
/// object of the release's manifest is gone); `None` = skip. So an unchanged
/// module asks only for the release's manifest and the cluster's objects, and a
/// changed one asks nothing: one helm process decides and upgrades. Errors of
/// `facts` are returned.
pub fn upgrade_reason(
    last: Option<&Release>,
    checksum: &str,
    facts: &UpgradeFacts,
) -> Result<Option<Upgrade>, ReleaseError> {
    let Some(last) = last else {
        return Ok(Upgrade::always("release absent".to_string()));
    };
    if last.status != "deployed" {
        return Ok(Upgrade::always(format!("status {}", last.status)));
    }
    if last.maintenance {
        return Ok(Upgrade::always("maintenance ended".to_string()));
    }
    if last.checksum.as_deref() != Some(checksum) {
        return Ok(Some(Upgrade {
            reason: "values or chart changed".to_string(),
            unless_same: true,
        }));
    }
    Ok(absent_object(facts)?.and_then(|obj| Upgrade::always(format!("resource {obj} absent"))))
}

/// The first object of the release's manifest that is not in the cluster.
pub fn absent_object(facts: &UpgradeFacts) -> Result<Option<ObjectRef>, ReleaseError> {
    for obj in manifest_objects(&(facts.released)()?)? {
        if !(facts.exists)(&obj)? {
            return Ok(Some(obj));
        }
    }
    Ok(None)
}

/// Moves the checksum label of a release's latest storage Secret to `checksum`, once
/// a render showed the new values make the release's objects: later converges then
/// find the module unchanged without rendering it again.
pub(crate) fn record_checksum(
    client: &crate::kube::Client,
    namespace: &str,
    secret: &str,
    checksum: &str,
) -> Result<(), ReleaseError> {
    let patch = serde_json::json!({"metadata": {"labels": {CHECKSUM_LABEL: checksum}}});
    client
        .api(&secrets_resource(), Some(namespace))
        .patch(
            secret,
            &crate::kube::Patch::Merge(patch),
            &Default::default(),
        )
        .map(|_| ())
        .map_err(|e| {
            let context = format!("labelling release Secret {secret} with the checksum");
            ReleaseError::kube(context, e)
        })
}

/// The release label that carries the checksum (flant's newer name).
pub(crate) const CHECKSUM_LABEL: &str = "moduleChecksum";

/// The release label that says a module was in maintenance at its last upgrade
/// (`"true"`; `"false"` otherwise), flant's newer name.
pub(crate) const MAINTENANCE_LABEL: &str = "maintenance.deckhouse.io/no-resource-reconciliation";

/// Secrets, where helm stores releases (`sh.helm.release.v1.<name>.v<N>`).
pub(crate) fn secrets_resource() -> crate::kube::Resource {
    crate::kube::Resource {
        group: String::new(),
        version: "v1".into(),
        resource: "secrets".into(),
        kind: "Secret".into(),
        namespaced: true,
    }
}

/// The latest revision of `release` read from helm's storage Secrets
/// (`owner=helm,name=<release>` labels: `version`, `status`, `moduleChecksum`) with
/// our kube client: no helm process. `None` when there is no revision.
pub(crate) fn release_from_secrets(
    client: &crate::kube::Client,
    namespace: &str,
    release: &str,
) -> Result<Option<Release>, ReleaseError> {
    let mut all = releases_from_secrets(client, namespace, &format!(",name={release}"))
        .map_err(|e| e.within(&format!("helm release {release}")))?;
    Ok(all.remove(release))
}

/// Every release in `namespace` with its latest revision, from one list of helm's
/// storage Secrets; `selector` narrows the `owner=helm` label selector (`,name=x`).
pub(crate) fn releases_from_secrets(
    client: &crate::kube::Client,
    namespace: &str,
    selector: &str,
) -> Result<std::collections::BTreeMap<String, Release>, ReleaseError> {
    let secrets = secrets_resource();
    let params = crate::kube::ListParams {
        label_selector: format!("owner=helm{selector}"),
        ..Default::default()
    };
    let list = client
        .api(&secrets, Some(namespace))
        .list_all(&params)
        .map_err(|e| ReleaseError::kube("listing helm's release Secrets", e))?;
    let mut out: std::collections::BTreeMap<String, Release> = Default::default();
    for secret in &list.items {
        let Some(labels) = secret.get("metadata").and_then(|m| m.get("labels")) else {
            continue;
        };
        let label = |k: &str| labels.get(k).and_then(|v| v.as_str());
        let (Some(name), Some(revision)) =
            (label("name"), label("version").and_then(|v| v.parse().ok()))
        else {
            continue;
        };
        if out.get(name).is_some_and(|r| r.revision >= revision) {
            continue;
        }
        let data = secret.get("data").and_then(|d| d.get("release"));
        let secret_name = secret.get("metadata").and_then(|m| m.get("name"));
        let stored = match (
            secret_name.and_then(|n| n.as_str()),
            data.and_then(|d| d.as_str()),
        ) {
            (Some(secret), Some(data)) => Some(StoredRecord {
                secret: secret.to_string(),
                data: data.to_string(),
            }),
            _ => None,
        };
        let release = Release {
            revision,
            status: label("status").unwrap_or("").to_string(),
            checksum: label(CHECKSUM_LABEL).map(String::from),
            stored,
            maintenance: label(MAINTENANCE_LABEL) == Some("true"),
        };
        out.insert(name.to_string(), release);
    }
    Ok(out)
}

/// Like [`object_exists`], with the namespace for objects that render none (the
/// release namespace).
pub fn object_exists_in(
    client: &crate::kube::Client,
    obj: &ObjectRef,
    default_namespace: &str,
) -> Result<bool, ReleaseError> {
    let context = format!("helm resource {obj}");
    let resource = client
        .resolve(&obj.api_version, &obj.kind, &context)
        .map_err(|e| ReleaseError::kube("", e))?;
    let ns = obj.namespace.as_deref().unwrap_or(default_namespace);
    match client.api(&resource, Some(ns)).get(&obj.name) {
        Ok(_) => Ok(true),
        Err(e) if e.is_not_found() => Ok(false),
        Err(e) => Err(ReleaseError::kube(context, e)),
    }
}

/// Where objects are listed: apiVersion, kind and namespace.
pub(crate) type ListKey = (String, String, Option<String>);

/// The names of the objects of one kind in `ns` (cluster-wide when the kind is
/// cluster-scoped): one list, whatever the number of objects asked about.
pub(crate) fn object_names(
    client: &crate::kube::Client,
    api_version: &str,
    kind: &str,
    ns: Option<&str>,
    context: &str,
) -> Result<std::collections::BTreeSet<String>, ReleaseError> {
    let resource = client
        .resolve(api_version, kind, context)
        .map_err(|e| ReleaseError::kube("", e))?;
    let ns = ns.filter(|_| resource.namespaced);
    let list = client
        .api(&resource, ns)
        .list_all(&crate::kube::ListParams::default())
        .map_err(|e| ReleaseError::kube(context, e))?;
    Ok(list
        .items
        .iter()
        .filter_map(|o| o.get("metadata")?.get("name")?.as_str())
        .map(str::to_string)
        .collect())
}

#[cfg(test)]
#[path = "helm_tests.rs"]
mod tests;
