//! The checksum a module run compares with the one stored on its release (the
//! `moduleChecksum` label): FNV-1a 128 of the values helm gets and of the chart's
//! files (relative names and contents, sorted by name), so a chart change is seen
//! even when the values are the same.
//!
//! When the chart's templates cannot read `global` ([`crate::addon::release::global_use`]), the
//! `global` section is left out of the hash: a change there then leaves the module's
//! checksum as it was, and the module costs no helm process. A chart that may read
//! `global` hashes all its values, and a change of `global` alone is rendered to see
//! whether it changes objects (`module_run.rs`).

use crate::addon::release::global_use;
use crate::log;
use std::path::{Path, PathBuf};

/// Most bytes of chart files read for one checksum.
const MAX_CHART_BYTES: u64 = 256 * 1024 * 1024;

/// The upgrade decision's checksum of `values` (what helm gets, as a JSON object)
/// with `chart`.
pub(crate) fn decision_checksum(
    values: &serde_json::Value,
    chart: &Path,
) -> Result<String, String> {
    let files = read_chart(chart)?;
    let refs: Vec<(&Path, &[u8])> = files
        .iter()
        .map(|(p, d)| (p.as_path(), d.as_slice()))
        .collect();
    let text = match global_use::chart_ignores_global(&refs) {
        Ok(()) => serde_json::to_string(&without_global(values)),
        Err(why) => {
            log::debug(
                "the chart may read global values",
                &[
                    ("chart", &chart.display().to_string()),
                    ("why", &why.to_string()),
                ],
            );
            serde_json::to_string(values)
        }
    }
    .map_err(|e| format!("checksum: {e}"))?;
    Ok(hash(&text, &files))
}

fn without_global(values: &serde_json::Value) -> serde_json::Value {
    let mut values = values.clone();
    if let Some(map) = values.as_object_mut() {
        map.remove("global");
    }
    values
}

fn hash(values_text: &str, files: &[(PathBuf, Vec<u8>)]) -> String {
    let mut h = crate::fnv::Fnv128::new();
    h.field(values_text.as_bytes());
    for (rel, data) in files {
        h.field(rel.to_string_lossy().as_bytes());
        h.field(data);
    }
    h.hex()
}

/// The chart's files, relative names sorted, with their contents.
fn read_chart(chart: &Path) -> Result<Vec<(PathBuf, Vec<u8>)>, String> {
    let mut names = Vec::new();
    chart_files(chart, Path::new(""), &mut names)?;
    names.sort();
    let mut total: u64 = 0;
    let mut files = Vec::with_capacity(names.len());
    for rel in names {
        let path = chart.join(&rel);
        let data = std::fs::read(&path)
            .map_err(|e| format!("checksum: cannot read chart file {}: {e}", path.display()))?;
        total += data.len() as u64;
        if total > MAX_CHART_BYTES {
            return Err(format!(
                "checksum: chart {} has more than {MAX_CHART_BYTES} bytes of files",
                chart.display()
            ));
        }
        files.push((rel, data));
    }
    Ok(files)
}

/// Relative paths of the regular files under `dir` (symlinks followed).
fn chart_files(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> Result<(), String> {
    let dir = root.join(rel);
    let entries = std::fs::read_dir(&dir)
        .map_err(|e| format!("checksum: cannot list chart dir {}: {e}", dir.display()))?;
    for entry in entries {
        let entry =
            entry.map_err(|e| format!("checksum: cannot list chart dir {}: {e}", dir.display()))?;
        let child = rel.join(entry.file_name());
        let meta = std::fs::metadata(entry.path())
            .map_err(|e| format!("checksum: cannot stat {}: {e}", entry.path().display()))?;
        if meta.is_dir() {
            chart_files(root, &child, out)?;
        } else if meta.is_file() {
            out.push(child);
        }
    }
    Ok(())
}

#[cfg(test)]
#[path = "chart_sum_tests.rs"]
mod tests;
