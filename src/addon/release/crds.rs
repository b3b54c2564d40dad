//! The CustomResourceDefinitions of a module's `crds/` directory, installed before
//! the module's first run after it is enabled (before its onStartup hooks and its
//! release), as flant's addon-operator does in its `ModuleEnsureCRDs` task. helm
//! itself runs with `--skip-crds`: it would install a CRD once and never update it.
//!
//! - Files: every `*.yaml` under `<module>/crds/` (subdirectories too), sorted by
//!   path, except those whose file name starts with one of the prefixes of
//!   `ADDON_OPERATOR_CRD_FILTER_PREFIXES` (default `doc-,_`). Read once at startup.
//! - Documents: each non-empty document of a file must be an
//!   `apiextensions.k8s.io/v1` `CustomResourceDefinition`; read as YAML 1.1, as
//!   kubectl and helm read them ([`crate::addon::release::yaml11`]).
//! - Labels: `ADDON_OPERATOR_CRD_EXTRA_LABELS` (`k=v,k2=v2`, default
//!   `heritage=addon-operator`; `heritage=addon-operator` is added when it names no
//!   `heritage`) are written over the document's own labels.
//! - Create or update: an absent CRD is created; an existing one keeps its labels
//!   and annotations (the document's are written over them), its `spec.conversion`
//!   (set by a conversion webhook at run time, never by the file) and its other
//!   metadata; its spec becomes the document's. `status.storedVersions` loses the
//!   versions the document no longer has (else the server refuses the update). An
//!   unchanged CRD is not written; a conflict retries from the read.
//! - Then the operator waits until each CRD is `Established` (flant does not wait;
//!   a chart with a custom resource of a CRD the server does not serve yet fails).
//!
//! Every document is tried; the errors of all of them are reported together, each
//! naming its file and CRD, and fail the module run (retried with backoff).
//!
//! Runs on a queue thread, inside a module's startup run.

use super::crd_error::CrdError;
use crate::addon::release::yaml11;
use crate::kube::{Client, Resource};
use crate::log;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The default of `ADDON_OPERATOR_CRD_EXTRA_LABELS`.
pub(crate) const DEFAULT_EXTRA_LABELS: &str = "heritage=addon-operator";
/// The default of `ADDON_OPERATOR_CRD_FILTER_PREFIXES`.
pub(crate) const DEFAULT_FILTERS: &str = "doc-,_";
/// How long the operator waits for its CRDs to be `Established`.
const ESTABLISH_TIMEOUT: Duration = Duration::from_secs(60);
/// Largest CRD file read.
const MAX_FILE: u64 = 16 << 20;
/// Deepest directory under `crds/` searched.
const MAX_DEPTH: usize = 16;

/// The CRD settings: labels written on every CRD and the file-name prefixes skipped.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct CrdSettings {
    pub(crate) extra_labels: BTreeMap<String, String>,
    pub(crate) filters: Vec<String>,
}

impl Default for CrdSettings {
    fn default() -> CrdSettings {
        CrdSettings {
            extra_labels: parse_extra_labels(DEFAULT_EXTRA_LABELS).unwrap_or_default(),
            filters: parse_filters(DEFAULT_FILTERS),
        }
    }
}

/// `k=v,k2=v2` (or `k==v`) → labels, plus `heritage=addon-operator` when no
/// `heritage` is given. Other selector forms (`k!=v`, `k in (..)`, `k`) are not
/// labels and are refused.
pub(crate) fn parse_extra_labels(text: &str) -> Result<BTreeMap<String, String>, CrdError> {
    let bad = |why: String| CrdError::ExtraLabels {
        text: text.to_string(),
        why,
    };
    let selector =
        crate::kube::selector::parse_label_selector(text).map_err(|e| bad(e.to_string()))?;
    if let Some(expr) = selector.match_expressions.first() {
        return Err(bad(format!(
            "only key=value labels are allowed, not the {} expression on '{}'",
            expr.operator, expr.key
        )));
    }
    let mut labels = selector.match_labels;
    labels
        .entry("heritage".to_string())
        .or_insert_with(|| "addon-operator".to_string());
    Ok(labels)
}

/// `doc-,_` → the prefixes, trimmed; empty entries are dropped (in flant an empty
/// entry matches every file, so `ADDON_OPERATOR_CRD_FILTER_PREFIXES=""` would skip
/// every CRD there).
pub(crate) fn parse_filters(text: &str) -> Vec<String> {
    text.split(',')
        .map(str::trim)
        .filter(|p| !p.is_empty())
        .map(String::from)
        .collect()
}

/// Whether a CRD file is read: its name ends in `.yaml` and starts with no filter prefix.
pub(crate) fn is_crd_file(file_name: &str, filters: &[String]) -> bool {
    file_name.ends_with(".yaml")
        && file_name.len() > ".yaml".len()
        && !filters.iter().any(|p| file_name.starts_with(p.as_str()))
}

/// The CRD files of a module: `<module>/crds/**/*.yaml` minus the filtered ones,
/// sorted by path; none when there is no `crds/` directory.
pub(crate) fn crd_files(module_dir: &Path, filters: &[String]) -> Result<Vec<PathBuf>, CrdError> {
    let root = module_dir.join("crds");
    if !root.is_dir() {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    walk(&root, filters, 0, &mut out)?;
    out.sort();
    Ok(out)
}

fn walk(
    dir: &Path,
    filters: &[String],
    depth: usize,
    out: &mut Vec<PathBuf>,
) -> Result<(), CrdError> {
    if depth > MAX_DEPTH {
        let problem = format!("more than {MAX_DEPTH} directory levels");
        return Err(CrdError::file(dir.display(), problem));
    }
    let entries = std::fs::read_dir(dir).map_err(|e| CrdError::file(dir.display(), e))?;
    for entry in entries {
        let entry = entry.map_err(|e| CrdError::file(dir.display(), e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let meta = std::fs::metadata(&path).map_err(|e| CrdError::file(path.display(), e))?;
        if meta.is_dir() {
            walk(&path, filters, depth + 1, out)?;
        } else if meta.is_file() && is_crd_file(&name, filters) {
            out.push(path);
        }
    }
    Ok(())
}

/// The CRD documents of one file (empty and comment-only documents skipped); an
/// error names the file and the document.
pub(crate) fn read_crds(path: &Path) -> Result<Vec<Value>, CrdError> {
    let at = path.display();
    let size = std::fs::metadata(path)
        .map_err(|e| CrdError::file(&at, e))?
        .len();
    if size > MAX_FILE {
        let problem = format!("{size} bytes; at most {MAX_FILE} are read");
        return Err(CrdError::file(&at, problem));
    }
    let text = std::fs::read_to_string(path).map_err(|e| CrdError::file(&at, e))?;
    let docs = yaml11::documents(&text).map_err(|e| CrdError::file(&at, e))?;
    let mut out = Vec::new();
    for (i, doc) in docs.into_iter().enumerate() {
        if doc.is_null() || doc.as_object().is_some_and(Map::is_empty) {
            continue;
        }
        let at = format!("{at}, document {}", i + 1);
        let (api_version, kind) = (doc["apiVersion"].as_str(), doc["kind"].as_str());
        if api_version != Some("apiextensions.k8s.io/v1")
            || kind != Some("CustomResourceDefinition")
        {
            let problem = format!(
                "not an apiextensions.k8s.io/v1 CustomResourceDefinition (apiVersion {}, kind {})",
                api_version.unwrap_or("?"),
                kind.unwrap_or("?")
            );
            return Err(CrdError::file(at, problem));
        }
        if doc["metadata"]["name"].as_str().is_none_or(str::is_empty) {
            return Err(CrdError::file(at, "no metadata.name"));
        }
        out.push(doc);
    }
    Ok(out)
}

/// `over`'s keys written over `base` (a map of strings, or absent).
fn overlay(base: &Value, over: &BTreeMap<String, String>) -> Value {
    let mut out = base.as_object().cloned().unwrap_or_default();
    for (k, v) in over {
        out.insert(k.clone(), Value::String(v.clone()));
    }
    Value::Object(out)
}

/// The document as it is to be sent: the extra labels written over its own.
pub(crate) fn with_labels(mut doc: Value, extra: &BTreeMap<String, String>) -> Value {
    if extra.is_empty() {
        return doc;
    }
    let labels = overlay(&doc["metadata"]["labels"], extra);
    if let Some(meta) = doc.get_mut("metadata").and_then(Value::as_object_mut) {
        meta.insert("labels".into(), labels);
    }
    doc
}

/// What [`apply`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Applied {
    Created,
    Updated,
    Unchanged,
}

/// The CRD resource.
pub(crate) fn crd_resource() -> Resource {
    Resource {
        group: "apiextensions.k8s.io".into(),
        version: "v1".into(),
        resource: "customresourcedefinitions".into(),
        kind: "CustomResourceDefinition".into(),
        namespaced: false,
    }
}

/// Fields the server fills in when a document leaves them out (so an unchanged CRD
/// compares equal): `names.singular`, `names.listKind`.
fn server_defaults(spec: &mut Value) {
    let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) else {
        return;
    };
    let kind = names
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or("")
        .to_string();
    if kind.is_empty() {
        return;
    }
    names
        .entry("singular")
        .or_insert_with(|| Value::String(kind.to_lowercase()));
    names
        .entry("listKind")
        .or_insert_with(|| Value::String(format!("{kind}List")));
}

/// Creates the CRD `desired` (labels already applied) or updates the existing one
/// (module doc above); a conflict retries from the read (5 tries).
pub(crate) fn apply(client: &Client, desired: &Value) -> Result<Applied, CrdError> {
    let name = desired["metadata"]["name"].as_str().unwrap_or_default();
    let crds = crd_resource();
    let api = client.api(&crds, None);
    let mut last = String::new();
    for _ in 0..5 {
        let mut existing = match api.get(name) {
            Ok(v) => v,
            Err(e) if e.is_not_found() => match api.create(desired) {
                Ok(_) => return Ok(Applied::Created),
                Err(e) if e.status_code() == Some(409) => {
                    last = e.to_string();
                    continue;
                }
                Err(e) => return Err(CrdError::kube("creating", e)),
            },
            Err(e) => return Err(CrdError::kube("reading", e)),
        };
        let mut spec = desired.get("spec").cloned().unwrap_or(Value::Null);
        server_defaults(&mut spec);
        if let Some(conversion) = existing["spec"].get("conversion")
            && let Some(s) = spec.as_object_mut()
        {
            s.insert("conversion".into(), conversion.clone());
        }
        if let Some(updated) = prune_stored_versions(&existing, &spec) {
            match api.replace_subresource("status", name, &updated) {
                Ok(v) => {
                    existing["metadata"]["resourceVersion"] =
                        v["metadata"]["resourceVersion"].clone()
                }
                Err(e) if e.is_conflict() => {
                    last = e.to_string();
                    continue;
                }
                Err(e) => return Err(CrdError::kube("updating status.storedVersions", e)),
            }
        }
        let labels = merged_map(
            &existing["metadata"]["labels"],
            &desired["metadata"]["labels"],
        );
        let annotations = merged_map(
            &existing["metadata"]["annotations"],
            &desired["metadata"]["annotations"],
        );
        if existing["spec"] == spec
            && existing["metadata"]["labels"] == labels
            && existing["metadata"]["annotations"] == annotations
        {
            return Ok(Applied::Unchanged);
        }
        existing["spec"] = spec;
        if let Some(meta) = existing["metadata"].as_object_mut() {
            for (key, value) in [("labels", labels), ("annotations", annotations)] {
                if value.is_null() {
                    meta.remove(key);
                } else {
                    meta.insert(key.into(), value);
                }
            }
        }
        match api.replace(name, &existing) {
            Ok(_) => return Ok(Applied::Updated),
            Err(e) if e.is_conflict() => last = e.to_string(),
            Err(e) => return Err(CrdError::kube("updating", e)),
        }
    }
    Err(CrdError::Conflict { last })
}

/// `over`'s string keys written over `base`'s; `null` when both are absent/empty.
fn merged_map(base: &Value, over: &Value) -> Value {
    let mut out = base.as_object().cloned().unwrap_or_default();
    if let Some(over) = over.as_object() {
        for (k, v) in over {
            out.insert(k.clone(), v.clone());
        }
    }
    if out.is_empty() {
        Value::Null
    } else {
        Value::Object(out)
    }
}

/// The existing CRD with `status.storedVersions` cut to the versions `spec` keeps,
/// or `None` when nothing is cut.
fn prune_stored_versions(existing: &Value, spec: &Value) -> Option<Value> {
    let stored = existing["status"]["storedVersions"].as_array()?;
    let versions: Vec<&str> = spec["versions"]
        .as_array()
        .map(|v| v.iter().filter_map(|v| v["name"].as_str()).collect())
        .unwrap_or_default();
    let kept: Vec<Value> = stored
        .iter()
        .filter(|v| v.as_str().is_some_and(|s| versions.contains(&s)))
        .cloned()
        .collect();
    if kept.len() == stored.len() {
        return None;
    }
    let mut updated = existing.clone();
    updated["status"]["storedVersions"] = Value::Array(kept);
    Some(updated)
}

/// The CRD's condition `kind` (`Established`, `NamesAccepted`): (status, message).
fn condition<'a>(crd: &'a Value, kind: &str) -> Option<(&'a str, &'a str)> {
    crd["status"]["conditions"]
        .as_array()?
        .iter()
        .find(|c| c["type"] == kind)
        .map(|c| {
            (
                c["status"].as_str().unwrap_or(""),
                c["message"].as_str().unwrap_or(""),
            )
        })
}

/// Waits until every CRD of `names` is `Established`; `NamesAccepted: False` fails
/// at once with the server's message.
pub(crate) fn wait_established(
    client: &Client,
    names: &[String],
    timeout: Duration,
) -> Result<(), CrdError> {
    let crds = crd_resource();
    let api = client.api(&crds, None);
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(50);
    let mut pending: Vec<&String> = names.iter().collect();
    while !pending.is_empty() {
        let mut still = Vec::new();
        for name in pending {
            let crd = api
                .get(name)
                .map_err(|e| CrdError::kube(format!("CRD {name}"), e))?;
            if let Some(("False", message)) = condition(&crd, "NamesAccepted") {
                let (name, message) = (name.to_string(), message.to_string());
                return Err(CrdError::NotAccepted { name, message });
            }
            if !matches!(condition(&crd, "Established"), Some(("True", _))) {
                still.push(name);
            }
        }
        pending = still;
        if pending.is_empty() {
            break;
        }
        if Instant::now() >= deadline {
            let names = pending.iter().map(|s| s.to_string()).collect();
            let after_secs = timeout.as_secs();
            return Err(CrdError::NotEstablished { after_secs, names });
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_secs(1));
    }
    Ok(())
}

/// A module's `crds/` dir could not be read.
#[derive(Debug)]
pub(crate) struct CrdFilesError {
    pub(crate) module: String,
    pub(crate) error: CrdError,
}

impl std::fmt::Display for CrdFilesError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "module '{}': crds: {}", self.module, self.error)
    }
}

/// A module's CRD files (logged when it has some).
fn find(
    m: &crate::addon::modules::Module,
    filters: &[String],
) -> Result<Vec<PathBuf>, CrdFilesError> {
    let found = crd_files(&m.path, filters).map_err(|error| CrdFilesError {
        module: m.name.clone(),
        error,
    })?;
    if !found.is_empty() {
        log::info(
            "module CRD files found",
            &[("module", &m.name), ("files", &found.len().to_string())],
        );
    }
    Ok(found)
}

/// Every module's CRD files and the labels written on them.
#[derive(Debug, Default)]
pub(crate) struct ModuleCrds {
    pub(crate) extra_labels: BTreeMap<String, String>,
    /// Same index as `Layout::modules`; a reload appends the added modules'.
    files: std::sync::RwLock<Vec<Vec<PathBuf>>>,
    /// `--crd-filters`: which files of `crds/` are not CRDs.
    filters: Vec<String>,
}

impl ModuleCrds {
    /// Finds each module's CRD files (startup).
    pub(crate) fn discover(
        modules: &[crate::addon::modules::Module],
        settings: &CrdSettings,
    ) -> Result<ModuleCrds, CrdError> {
        let mut files = Vec::with_capacity(modules.len());
        for m in modules {
            files.push(find(m, &settings.filters).map_err(|e| CrdError::Module {
                module: e.module,
                error: Box::new(e.error),
            })?);
        }
        Ok(ModuleCrds {
            extra_labels: settings.extra_labels.clone(),
            files: std::sync::RwLock::new(files),
            filters: settings.filters.clone(),
        })
    }

    /// The CRD files of a module a reload added (not yet appended).
    pub(crate) fn find(
        &self,
        module: &crate::addon::modules::Module,
    ) -> Result<Vec<PathBuf>, CrdFilesError> {
        find(module, &self.filters)
    }

    /// Appends the CRD files of the next module index (a reload's added module).
    pub(crate) fn append(&self, files: Vec<PathBuf>) {
        let mut all = self.files.write().unwrap_or_else(|p| p.into_inner());
        all.push(files);
    }

    /// Installs the CRDs of `files` (every document tried; all errors joined), then
    /// waits until they are Established. Returns (created, updated, unchanged).
    pub(crate) fn install(
        &self,
        client: &Client,
        files: &[PathBuf],
    ) -> Result<[usize; 3], CrdError> {
        let mut errors = Vec::new();
        let mut counts = [0; 3];
        let mut names = Vec::new();
        for file in files {
            let docs = match read_crds(file) {
                Ok(docs) => docs,
                Err(e) => {
                    errors.push(e);
                    continue;
                }
            };
            for doc in docs {
                let name = doc["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string();
                match apply(client, &with_labels(doc, &self.extra_labels)) {
                    Ok(applied) => {
                        counts[applied as usize] += 1;
                        names.push(name);
                    }
                    Err(e) => errors.push(CrdError::InFile {
                        file: file.display().to_string(),
                        name,
                        error: Box::new(e),
                    }),
                }
            }
        }
        if let Err(e) = wait_established(client, &names, ESTABLISH_TIMEOUT) {
            errors.push(e);
        }
        match errors.len() {
            0 => Ok(counts),
            1 => Err(errors.remove(0)),
            _ => Err(CrdError::Several(errors)),
        }
    }
}

impl ModuleCrds {
    /// Installs module `m`'s CRDs (none: nothing to do); a failure fails the run.
    pub(crate) fn install_module(
        &self,
        client: &Client,
        m: usize,
        name: &str,
    ) -> Result<(), CrdError> {
        let all = self.files.read().unwrap_or_else(|p| p.into_inner());
        let Some(files) = all.get(m).filter(|f| !f.is_empty()).cloned() else {
            return Ok(());
        };
        drop(all);
        let [created, updated, unchanged] = self
            .install(client, &files)
            .map_err(|e| CrdError::Installing(Box::new(e)))?;
        log::info(
            "module CRDs installed",
            &[
                ("module", name),
                ("created", &created.to_string()),
                ("updated", &updated.to_string()),
                ("unchanged", &unchanged.to_string()),
            ],
        );
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn temp(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("ao-crds-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    }

    #[test]
    fn extra_labels_parse_and_always_carry_heritage() {
        let labels = parse_extra_labels("team=core, tier==infra").expect("labels");
        let want: BTreeMap<String, String> = [
            ("heritage", "addon-operator"),
            ("team", "core"),
            ("tier", "infra"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
        assert_eq!(labels, want);
        let own = parse_extra_labels("heritage=deckhouse").expect("labels");
        assert_eq!(own.get("heritage").map(String::as_str), Some("deckhouse"));
        assert_eq!(own.len(), 1);
        assert_eq!(
            parse_extra_labels("")
                .expect("empty")
                .get("heritage")
                .map(String::as_str),
            Some("addon-operator")
        );
        let err = parse_extra_labels("a!=b")
            .expect_err("not a label")
            .to_string();
        assert!(
            err.contains("ADDON_OPERATOR_CRD_EXTRA_LABELS") && err.contains("NotIn"),
            "{err}"
        );
        assert_eq!(CrdSettings::default().extra_labels.len(), 1);
    }

    #[test]
    fn filters_skip_files_by_name_prefix_and_only_yaml_is_read() {
        let filters = parse_filters(" doc-, _ ,,");
        assert_eq!(filters, vec!["doc-".to_string(), "_".to_string()]);
        assert!(is_crd_file("widgets.yaml", &filters));
        assert!(!is_crd_file("doc-widgets.yaml", &filters));
        assert!(!is_crd_file("_draft.yaml", &filters));
        assert!(
            !is_crd_file("widgets.yml", &filters),
            "flant reads .yaml only"
        );
        assert!(!is_crd_file("README.md", &filters));
        assert!(is_crd_file("doc-widgets.yaml", &parse_filters("")));

        let d = temp("files");
        let m = d.join("001-mod");
        for f in [
            "crds/b.yaml",
            "crds/a.yaml",
            "crds/doc-a.yaml",
            "crds/_x.yaml",
            "crds/sub/c.yaml",
            "crds/sub/doc-c.yaml",
            "crds/notes.txt",
            "templates/crd.yaml",
        ] {
            write(&m.join(f), "");
        }
        let found = crd_files(&m, &filters).expect("files");
        let rel: Vec<String> = found
            .iter()
            .map(|p| p.strip_prefix(&m).expect("under").display().to_string())
            .collect();
        assert_eq!(rel, vec!["crds/a.yaml", "crds/b.yaml", "crds/sub/c.yaml"]);
        let custom = crd_files(&m, &parse_filters("b")).expect("files");
        assert_eq!(custom.len(), 5, "{custom:?}");
        assert!(
            crd_files(&d.join("none"), &filters)
                .expect("none")
                .is_empty()
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn documents_are_checked_and_labels_overlaid() {
        let d = temp("docs");
        let file = d.join("crds.yaml");
        write(
            &file,
            "# leading comment\n---\napiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n\
             metadata:\n  name: a.example.com\n  labels: {heritage: mine, app: x}\nspec: {group: example.com}\n---\n---\n\
             apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: b.example.com}\n",
        );
        let docs = read_crds(&file).expect("docs");
        assert_eq!(docs.len(), 2);
        let extra = parse_extra_labels("team=core").expect("labels");
        let a = with_labels(docs[0].clone(), &extra);
        assert_eq!(
            a["metadata"]["labels"],
            json!({"app": "x", "heritage": "addon-operator", "team": "core"})
        );
        let b = with_labels(docs[1].clone(), &extra);
        assert_eq!(
            b["metadata"]["labels"],
            json!({"heritage": "addon-operator", "team": "core"})
        );
        write(
            &file,
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n",
        );
        let err = read_crds(&file).expect_err("not a CRD").to_string();
        assert!(
            err.contains("crds.yaml, document 1") && err.contains("ConfigMap"),
            "{err}"
        );
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn stored_versions_keep_only_the_versions_of_the_new_spec() {
        let existing = json!({"status": {"storedVersions": ["v1alpha1", "v1"]}});
        let spec = json!({"versions": [{"name": "v1"}, {"name": "v2"}]});
        let updated = prune_stored_versions(&existing, &spec).expect("cut");
        assert_eq!(updated["status"]["storedVersions"], json!(["v1"]));
        let same = json!({"versions": [{"name": "v1"}, {"name": "v1alpha1"}]});
        assert!(prune_stored_versions(&existing, &same).is_none());
        let mut spec = json!({"names": {"kind": "Widget", "plural": "widgets"}});
        server_defaults(&mut spec);
        assert_eq!(
            spec["names"],
            json!({"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"})
        );
        assert_eq!(
            merged_map(&json!({"a": "1", "b": "1"}), &json!({"b": "2"})),
            json!({"a": "1", "b": "2"})
        );
        assert_eq!(merged_map(&Value::Null, &Value::Null), Value::Null);
    }
}
