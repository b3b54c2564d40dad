//! The post-renderer helm runs on every manifest it installs or renders for a module
//! (our own binary, in `post-renderer` mode): it reads the manifest stream on stdin,
//! sets the label `heritage: addon-operator` on every object (each item of a List),
//! and writes the stream to stdout, as flant's post-renderer does. helm 3 runs it as
//! an executable (`--post-renderer <binary> --post-renderer-args post-renderer`);
//! helm 4 only takes plugins, so [`write_plugin`] makes one that runs the binary.

use serde::Deserialize;
use serde_yaml::{Mapping, Value};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};

/// The label every released object gets.
pub const HERITAGE: (&str, &str) = ("heritage", "addon-operator");

/// The most a manifest stream may hold.
const MAX_MANIFEST: u64 = 64 << 20;

/// The helm 4 plugin's name.
pub const PLUGIN_NAME: &str = "addon-operator-post-renderer";

/// Labels every document of `manifest`; an error names the document.
pub fn label(manifest: &str) -> Result<String, String> {
    let mut out = String::new();
    for (i, doc) in serde_yaml::Deserializer::from_str(manifest).enumerate() {
        let mut value = Value::deserialize(doc)
            .map_err(|e| format!("document {}: invalid YAML: {e}", i + 1))?;
        if value.is_null() {
            continue;
        }
        label_object(&mut value);
        let text = serde_yaml::to_string(&value).map_err(|e| format!("document {}: {e}", i + 1))?;
        out.push_str("---\n");
        out.push_str(&text);
    }
    Ok(out)
}

/// Sets the label on an object, or on each item of a List.
fn label_object(value: &mut Value) {
    let Some(map) = value.as_mapping_mut() else {
        return;
    };
    let is_list = map
        .get("kind")
        .and_then(Value::as_str)
        .is_some_and(|k| k.ends_with("List"));
    if is_list && let Some(Value::Sequence(items)) = map.get_mut("items") {
        items.iter_mut().for_each(label_object);
        return;
    }
    let metadata = map
        .entry(Value::from("metadata"))
        .or_insert_with(|| Value::Mapping(Mapping::new()));
    let Some(metadata) = metadata.as_mapping_mut() else {
        return;
    };
    let labels = metadata
        .entry(Value::from("labels"))
        .or_insert_with(|| Value::Mapping(Mapping::new()));
    if !labels.is_mapping() {
        *labels = Value::Mapping(Mapping::new());
    }
    if let Some(labels) = labels.as_mapping_mut() {
        labels.insert(Value::from(HERITAGE.0), Value::from(HERITAGE.1));
    }
}

/// The `post-renderer` command: stdin → labelled stdout; returns the exit code.
pub fn main() -> i32 {
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
    match label(&input) {
        Ok(out) => match std::io::stdout().write_all(out.as_bytes()) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("post-renderer: {e}");
                1
            }
        },
        Err(e) => {
            eprintln!("post-renderer: {e}");
            1
        }
    }
}

/// Writes the helm 4 post-renderer plugin into `<dir>/<PLUGIN_NAME>/plugin.yaml`,
/// running `binary post-renderer`; returns the plugins dir for `HELM_PLUGINS`.
pub fn write_plugin(dir: &Path, binary: &Path) -> Result<PathBuf, String> {
    let plugin = dir.join(PLUGIN_NAME);
    std::fs::create_dir_all(&plugin).map_err(|e| format!("{}: {e}", plugin.display()))?;
    let binary = binary.to_str().ok_or("the operator's path is not UTF-8")?;
    let yaml = format!(
        "apiVersion: v1\ntype: postrenderer/v1\nname: {PLUGIN_NAME}\nversion: 0.1.0\n\
         runtime: subprocess\nruntimeConfig:\n  platformCommand:\n  - command: {}\n    args: [\"post-renderer\"]\n",
        serde_json::to_string(binary).map_err(|e| e.to_string())?
    );
    let file = plugin.join("plugin.yaml");
    std::fs::write(&file, yaml).map_err(|e| format!("{}: {e}", file.display()))?;
    Ok(dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_object_and_list_item_gets_the_label() {
        let manifest = "# Source: c/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: a\n  labels:\n    heritage: helm\n    x: y\n---\n---\napiVersion: v1\nkind: List\nitems:\n- apiVersion: v1\n  kind: Secret\n  metadata:\n    name: b\n";
        let out = label(manifest).expect("labelled");
        let docs: Vec<serde_json::Value> = serde_yaml::Deserializer::from_str(&out)
            .map(|d| serde_json::Value::deserialize(d).expect("yaml"))
            .collect();
        assert_eq!(docs.len(), 2);
        assert_eq!(
            docs[0]["metadata"]["labels"],
            serde_json::json!({"heritage": "addon-operator", "x": "y"})
        );
        assert_eq!(
            docs[1]["items"][0]["metadata"]["labels"]["heritage"],
            "addon-operator"
        );
        assert!(label("a: [1").expect_err("bad yaml").contains("document 1"));
    }
}
