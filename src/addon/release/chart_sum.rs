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
) -> Result<String, ChartError> {
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
    .map_err(ChartError::Encode)?;
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
fn read_chart(chart: &Path) -> Result<Vec<(PathBuf, Vec<u8>)>, ChartError> {
    let mut names = Vec::new();
    chart_files(chart, Path::new(""), &mut names)?;
    names.sort();
    let mut total: u64 = 0;
    let mut files = Vec::with_capacity(names.len());
    for rel in names {
        let path = chart.join(&rel);
        let data = std::fs::read(&path).map_err(|e| ChartError::io("read chart file", &path, e))?;
        total += data.len() as u64;
        if total > MAX_CHART_BYTES {
            return Err(ChartError::TooLarge(chart.to_path_buf()));
        }
        files.push((rel, data));
    }
    Ok(files)
}

/// Relative paths of the regular files under `dir` (symlinks followed).
fn chart_files(root: &Path, rel: &Path, out: &mut Vec<PathBuf>) -> Result<(), ChartError> {
    let dir = root.join(rel);
    let unlisted = |e| ChartError::io("list chart dir", &dir, e);
    for entry in std::fs::read_dir(&dir).map_err(unlisted)? {
        let entry = entry.map_err(unlisted)?;
        let child = rel.join(entry.file_name());
        let meta = std::fs::metadata(entry.path())
            .map_err(|e| ChartError::io("stat", &entry.path(), e))?;
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

/// Why a module's chart could not be checksummed.
#[derive(Debug)]
pub(crate) enum ChartError {
    /// A chart file or directory at `path` could not be read (`what`: `read
    /// chart file`, `list chart dir`, `stat`).
    Io {
        what: &'static str,
        path: PathBuf,
        error: std::io::Error,
    },
    /// The chart's files hold more than [`MAX_CHART_BYTES`].
    TooLarge(PathBuf),
    /// The values could not be serialised.
    Encode(serde_json::Error),
}

impl ChartError {
    fn io(what: &'static str, path: &Path, error: std::io::Error) -> ChartError {
        let path = path.to_path_buf();
        ChartError::Io { what, path, error }
    }
}

impl std::fmt::Display for ChartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("checksum: ")?;
        match self {
            ChartError::Io { what, path, error } => {
                write!(f, "cannot {what} {}: {error}", path.display())
            }
            ChartError::TooLarge(chart) => write!(
                f,
                "chart {} has more than {MAX_CHART_BYTES} bytes of files",
                chart.display()
            ),
            ChartError::Encode(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ChartError {}
