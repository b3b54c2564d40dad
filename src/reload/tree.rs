//! The hooks directory's fingerprint: one hash over every entry's relative path,
//! type, size, modification time and symlink target, dot-entries included (the
//! kubelet updates a ConfigMap volume by swapping its `..data` symlink, which
//! changes no hook file's own metadata). Symlinks are hashed with what they
//! point at too, but never followed into directories (no loops). The walk is
//! bounded: past [`MAX_ENTRIES`] it stops, and the count is part of the hash.

use crate::fnv::Fnv128;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Most entries one fingerprint looks at.
pub(crate) const MAX_ENTRIES: usize = 20_000;

/// Paths a fingerprint leaves out: the operator's tmp dir, as the walk would
/// meet it (made absolute; nothing if it does not exist).
pub(crate) fn skipped(tmp_dir: &Path) -> Vec<PathBuf> {
    std::fs::canonicalize(tmp_dir).into_iter().collect()
}

/// The fingerprint of the tree under `root` without the entries at `skip` (the
/// operator's tmp dir, should it be inside: hooks' runs write there, and every
/// write would be a change); an error when it cannot be read (for instance
/// while a directory is being replaced).
pub(crate) fn fingerprint(root: &Path, skip: &[PathBuf]) -> std::io::Result<u128> {
    let mut hash = Fnv128::new();
    let mut seen = 0usize;
    walk(root, root, skip, &mut hash, &mut seen)?;
    hash.field(&(seen as u64).to_le_bytes());
    Ok(hash.finish())
}

/// One fingerprint over several trees (addon-operator's modules dirs and
/// global hooks dir); `None` if one cannot be read. A missing tree counts as
/// empty, so creating it is a change.
pub(crate) fn fingerprint_all(roots: &[PathBuf], skip: &[PathBuf]) -> Option<u128> {
    let mut hash = Fnv128::new();
    for root in roots {
        hash.field(root.as_os_str().as_encoded_bytes());
        match fingerprint(root, skip) {
            Ok(fp) => hash.field(&fp.to_le_bytes()),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => hash.field(b"missing"),
            Err(_) => return None,
        }
    }
    Some(hash.finish())
}

fn walk(
    root: &Path,
    dir: &Path,
    skip: &[PathBuf],
    hash: &mut Fnv128,
    seen: &mut usize,
) -> std::io::Result<()> {
    let mut names: Vec<_> = std::fs::read_dir(dir)?
        .map(|e| e.map(|e| e.file_name()))
        .collect::<Result<_, _>>()?;
    names.sort();
    for name in names {
        if *seen >= MAX_ENTRIES {
            return Ok(());
        }
        let path = dir.join(&name);
        if skip.contains(&path) {
            continue;
        }
        *seen += 1;
        let meta = std::fs::symlink_metadata(&path)?;
        let rel = path.strip_prefix(root).unwrap_or(&path);
        hash.field(rel.as_os_str().as_encoded_bytes());
        entry(&path, &meta, hash);
        if meta.is_dir() {
            walk(root, &path, skip, hash, seen)?;
        }
    }
    Ok(())
}

/// Hashes one entry's metadata (and, for a symlink, its target and what the
/// target is now).
fn entry(path: &Path, meta: &std::fs::Metadata, hash: &mut Fnv128) {
    stat(meta, hash);
    if meta.file_type().is_symlink() {
        let target = std::fs::read_link(path).unwrap_or_default();
        hash.field(target.as_os_str().as_encoded_bytes());
        match std::fs::metadata(path) {
            Ok(followed) => stat(&followed, hash),
            Err(_) => hash.field(b"dangling"),
        }
    }
}

fn stat(meta: &std::fs::Metadata, hash: &mut Fnv128) {
    hash.field(&meta.mode().to_le_bytes());
    hash.field(&meta.size().to_le_bytes());
    hash.field(&meta.mtime().to_le_bytes());
    hash.field(&meta.mtime_nsec().to_le_bytes());
    hash.field(&meta.ino().to_le_bytes());
}

#[cfg(test)]
mod tests {
    use super::fingerprint;
    use std::path::PathBuf;

    fn dir(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("so-tree-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    #[test]
    fn a_new_file_and_a_rewritten_file_change_the_fingerprint() {
        let d = dir("files");
        std::fs::write(d.join("a.sh"), "one").expect("write");
        let first = fingerprint(&d, &[]).expect("fp");
        assert_eq!(fingerprint(&d, &[]).expect("fp"), first, "stable");
        std::fs::write(d.join("b.sh"), "two").expect("write");
        let second = fingerprint(&d, &[]).expect("fp");
        assert_ne!(second, first);
        std::fs::write(d.join("a.sh"), "three!").expect("write");
        assert_ne!(fingerprint(&d, &[]).expect("fp"), second);
        let _ = std::fs::remove_dir_all(&d);
    }

    #[test]
    fn writes_under_a_skipped_dir_are_no_change() {
        let d = dir("skip");
        let tmp = d.join("tmp");
        std::fs::create_dir(&tmp).expect("mkdir");
        std::fs::write(d.join("a.sh"), "one").expect("write");
        let skip = super::skipped(&tmp);
        assert_eq!(skip.len(), 1);
        let before = fingerprint(&d, &skip).expect("fp");
        std::fs::write(tmp.join("binding_context.json"), "[]").expect("write");
        assert_eq!(fingerprint(&d, &skip).expect("fp"), before);
        assert_ne!(fingerprint(&d, &[]).expect("fp"), before);
        let _ = std::fs::remove_dir_all(&d);
    }

    /// The kubelet's update: a new `..2026_…` dir, `..data_tmp` pointing at it,
    /// renamed over `..data`; the hook's own symlink never changes.
    #[test]
    fn a_configmap_style_data_swap_changes_the_fingerprint() {
        let d = dir("swap");
        let v1 = d.join("..v1");
        std::fs::create_dir(&v1).expect("mkdir");
        std::fs::write(v1.join("a.sh"), "one").expect("write");
        std::os::unix::fs::symlink("..v1", d.join("..data")).expect("link");
        std::os::unix::fs::symlink("..data/a.sh", d.join("a.sh")).expect("link");
        let before = fingerprint(&d, &[]).expect("fp");
        let v2 = d.join("..v2");
        std::fs::create_dir(&v2).expect("mkdir");
        std::fs::write(v2.join("a.sh"), "two").expect("write");
        std::os::unix::fs::symlink("..v2", d.join("..data_tmp")).expect("link");
        std::fs::rename(d.join("..data_tmp"), d.join("..data")).expect("swap");
        std::fs::remove_dir_all(&v1).expect("old");
        assert_ne!(fingerprint(&d, &[]).expect("fp"), before);
        let _ = std::fs::remove_dir_all(&d);
    }
}
