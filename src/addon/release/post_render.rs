//! The post-renderer helm runs on every manifest it installs or renders for a module
//! (our own binary, in `post-renderer` mode): it reads the manifest stream on stdin,
//! sets the label `heritage: addon-operator` on every object (each item of a List),
//! and writes the stream to stdout, as flant's post-renderer does. helm 3 runs it as
//! an executable (`--post-renderer <binary> --post-renderer-args post-renderer`);
//! helm 4 only takes plugins, so [`write_plugin`] makes one that runs the binary.
//!
//! Deduplication (seed 004, "Releases deduplication"): for an upgrade whose values
//! changed, the operator names a file holding the deployed release's manifest in
//! [`RELEASED_ENV`]; when the render makes the same objects, the post-renderer
//! writes [`unchanged_marker`] and fails, so helm stops before it stores a
//! revision, and the operator reads the marker as "nothing to upgrade". One helm
//! process both renders and upgrades; no `helm template` runs first.
//!
//! A manifest must mean the same after it as before, labels aside. helm reads
//! manifests as YAML 1.1 (go-yaml v2: plain `off` is false, `0644` is 420), so the
//! stream is read that way ([`crate::addon::release::yaml11`]) and each document is written as JSON,
//! which has one meaning in every YAML version: `"off"` stays a string, `0644`
//! arrives as 420, as they would without a post-renderer.

use crate::addon::release::yaml11;
use serde_json::{Map, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The label every released object gets.
pub(crate) const HERITAGE: (&str, &str) = ("heritage", "addon-operator");

/// The most a manifest stream may hold.
const MAX_MANIFEST: u64 = 64 << 20;

/// The environment variable naming the deployed manifest to compare with.
pub(crate) const RELEASED_ENV: &str = "ADDON_OPERATOR_RELEASED_MANIFEST";

/// The exit code of a deliberate stop (helm reports it as a failure).
const UNCHANGED_EXIT: i32 = 3;

/// The file the post-renderer creates when it stops an upgrade that would change
/// nothing: `<released>.unchanged`.
pub(crate) fn unchanged_marker(released: &Path) -> PathBuf {
    let mut name = released.as_os_str().to_owned();
    name.push(".unchanged");
    PathBuf::from(name)
}

/// The helm 4 plugin's name.
pub(crate) const PLUGIN_NAME: &str = "addon-operator-post-renderer";

/// Labels every document of `manifest`: each non-empty document becomes a JSON
/// document after `---`; an error names the document.
pub(crate) fn label(manifest: &str) -> Result<String, yaml11::YamlError> {
    let mut out = String::new();
    for mut value in yaml11::documents(manifest)? {
        label_object(&mut value);
        out.push_str("---\n");
        out.push_str(&yaml11::write(&value));
        out.push('\n');
    }
    Ok(out)
}

/// Sets the label on an object, or on each item of a List.
fn label_object(value: &mut Value) {
    let Some(map) = value.as_object_mut() else {
        return;
    };
    let is_list = map
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"));
    if is_list && let Some(Value::Array(items)) = map.get_mut("items") {
        items.iter_mut().for_each(label_object);
        return;
    }
    let metadata = map
        .entry("metadata")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(metadata) = metadata.as_object_mut() else {
        return;
    };
    let labels = metadata
        .entry("labels")
        .or_insert_with(|| Value::Object(Map::new()));
    if !labels.is_object() {
        *labels = Value::Object(Map::new());
    }
    if let Some(labels) = labels.as_object_mut() {
        labels.insert(HERITAGE.0.into(), Value::from(HERITAGE.1));
    }
}

/// The `post-renderer` command: stdin → labelled stdout; returns the exit code.
pub(crate) fn main() -> i32 {
    let mut input = String::new();
    let read = std::io::stdin()
        .take(MAX_MANIFEST + 1)
        .read_to_string(&mut input);
    if let Err(e) = read {
        eprintln!("post-renderer: cannot read the manifest: {e}");
        return 1;
    }
    if input.len() as u64 > MAX_MANIFEST {
        eprintln!("post-renderer: the manifest is larger than {MAX_MANIFEST} bytes");
        return 1;
    }
    let out = match label(&input) {
        Ok(out) => out,
        Err(e) => {
            eprintln!("post-renderer: {e}");
            return 1;
        }
    };
    if let Some(released) = std::env::var_os(RELEASED_ENV).map(PathBuf::from)
        && same_as_released(&out, &released)
    {
        let marker = unchanged_marker(&released);
        if let Err(e) = std::fs::write(&marker, b"") {
            eprintln!("post-renderer: {}: {e}", marker.display());
            return 1;
        }
        eprintln!(
            "post-renderer: the rendered objects are the deployed release's; \
             stopping the upgrade so that no revision is stored (deduplication)"
        );
        return UNCHANGED_EXIT;
    }
    match std::io::stdout().write_all(out.as_bytes()) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("post-renderer: {e}");
            1
        }
    }
}

/// Whether `rendered` holds the objects of the manifest in file `released`; a file
/// that cannot be read or compared is "not the same" (the upgrade goes on).
fn same_as_released(rendered: &str, released: &Path) -> bool {
    let mut text = String::new();
    let read = std::fs::File::open(released)
        .and_then(|f| f.take(MAX_MANIFEST + 1).read_to_string(&mut text));
    if let Err(e) = read {
        eprintln!("post-renderer: {}: {e}", released.display());
        return false;
    }
    match crate::addon::release::helm::same_objects(rendered, &text) {
        Ok(same) => same,
        Err(e) => {
            eprintln!("post-renderer: comparing with the deployed release: {e}");
            false
        }
    }
}

/// Writes the helm 4 post-renderer plugin into `<dir>/<PLUGIN_NAME>/plugin.yaml`,
/// running `binary post-renderer`; returns the plugins dir for `HELM_PLUGINS`.
pub(crate) fn write_plugin(dir: &Path, binary: &Path) -> Result<PathBuf, PluginError> {
    let plugin = dir.join(PLUGIN_NAME);
    let failed = |path: &Path| {
        let path = path.to_path_buf();
        move |error| PluginError::Write { path, error }
    };
    std::fs::create_dir_all(&plugin).map_err(failed(&plugin))?;
    let binary = binary.to_str().ok_or(PluginError::NotUtf8)?;
    let yaml = format!(
        "apiVersion: v1\ntype: postrenderer/v1\nname: {PLUGIN_NAME}\nversion: 0.1.0\n\
         runtime: subprocess\nruntimeConfig:\n  platformCommand:\n  - command: {}\n    args: [\"post-renderer\"]\n",
        serde_json::Value::from(binary)
    );
    let file = plugin.join("plugin.yaml");
    crate::executor::replace_file(&file, yaml.as_bytes()).map_err(failed(&file))?;
    Ok(dir.to_path_buf())
}

/// Why the helm 4 post-renderer plugin could not be written.
#[derive(Debug)]
pub(crate) enum PluginError {
    /// A directory or the plugin file could not be written at `path`.
    Write {
        path: PathBuf,
        error: std::io::Error,
    },
    /// The operator's own path is not UTF-8 (helm's plugin file is YAML).
    NotUtf8,
}

impl std::fmt::Display for PluginError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PluginError::Write { path, error } => write!(f, "{}: {error}", path.display()),
            PluginError::NotUtf8 => f.write_str("the operator's path is not UTF-8"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_object_and_list_item_gets_the_label() {
        let manifest = "# Source: c/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    heritage: helm\n    x: z\n---\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata:\n    name: b\n";
        let out = label(manifest).expect("labelled");
        let docs = yaml11::documents(&out).expect("yaml");
        assert_eq!(docs.len(), 2);
        assert_eq!(
            docs[0]["metadata"]["labels"],
            serde_json::json!({"heritage": "addon-operator", "x": "z"})
        );
        assert_eq!(
            docs[1]["items"][0]["metadata"]["labels"]["heritage"],
            "addon-operator"
        );
        let error = label("a: [1").expect_err("bad yaml").to_string();
        assert!(error.contains("document 1"), "{error}");
    }

    /// The bug the real API server found: yaml_serde re-wrote a quoted "off" plain
    /// (a boolean to helm) and a plain 0644 quoted (a string to helm).
    #[test]
    fn a_manifest_means_the_same_after_the_post_renderer() {
        let manifest = "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: t}\ndata:\n  a: \"off\"\n  \"y\": q\n  on: p\n---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: d\nspec:\n  template:\n    spec:\n      volumes:\n      - name: v\n        secret: {secretName: s, defaultMode: 0644}\n";
        let before = yaml11::documents(manifest).expect("before");
        let out = label(manifest).expect("labelled");
        assert!(out.contains("\"a\": \"off\""), "{out}");
        let mut after = yaml11::documents(&out).expect("after");
        for doc in &mut after {
            let labels = doc["metadata"]["labels"].as_object_mut().expect("labels");
            assert_eq!(
                labels.remove("heritage"),
                Some(Value::from("addon-operator"))
            );
            if labels.is_empty() {
                doc["metadata"]
                    .as_object_mut()
                    .expect("metadata")
                    .remove("labels");
            }
        }
        assert_eq!(after, before);
        assert_eq!(
            after[0]["data"],
            serde_json::json!({"a": "off", "y": "q", "true": "p"})
        );
        assert_eq!(
            after[1]["spec"]["template"]["spec"]["volumes"][0]["secret"]["defaultMode"],
            420
        );
    }
}
