//! The tmp dir, where each hook run's binding context and output files live.
//!
//! Whoever can write to that directory can swap a binding context between our
//! write and the hook's read, or plant a `$KUBERNETES_PATCH_PATH` file the operator
//! then applies with its service account. So, as ssh-agent and tmux do with their
//! socket directories, the operator only uses a directory that is its own:
//! - it is created 0700 if missing (parents as needed);
//! - it is opened with `O_NOFOLLOW | O_DIRECTORY`: a symlink is refused, never
//!   followed (and its target never chmodded);
//! - the opened directory must belong to our effective uid, and its parent to us or
//!   root (another user owning the parent could rename ours away). A parent that
//!   others may write to is accepted: `/tmp` has the sticky bit, and a pod's
//!   emptyDir (mode 0777, no sticky bit) is shared only by the pod's own containers;
//!   the README says so;
//! - it is then set to 0700 through the open descriptor.
//!
//! Files inside are created with `O_CREAT | O_EXCL` (executor.rs), which never
//! follows a planted symlink.
// Needs unsafe for geteuid(2); each block says why it is sound (SAFETY).
#![allow(unsafe_code)]

use std::fs::{DirBuilder, File, OpenOptions};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

/// Creates or checks `dir` as described above. The error says what is wrong
/// (the caller adds the path).
pub(crate) fn prepare(dir: &Path) -> Result<(), TmpDirError> {
    // SAFETY: geteuid has no preconditions.
    prepare_as(dir, unsafe { libc::geteuid() })
}

/// [`prepare`] for the user `uid` (tests check the ownership rule with it).
fn prepare_as(dir: &Path, uid: u32) -> Result<(), TmpDirError> {
    if let Some(parent) = dir.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent)
            .map_err(|e| TmpDirError::from(format!("cannot create its parent: {e}")))?;
        check_parent(parent, uid)?;
    }
    match DirBuilder::new().mode(0o700).create(dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(format!("cannot create it: {e}").into()),
    }
    let opened = open_no_follow(dir)?;
    let meta = opened
        .metadata()
        .map_err(|e| TmpDirError::from(format!("cannot stat it: {e}")))?;
    if meta.uid() != uid {
        return Err(format!("owned by uid {}, not by us (uid {uid})", meta.uid()).into());
    }
    opened
        .set_permissions(std::fs::Permissions::from_mode(0o700))
        .map_err(|e| TmpDirError::from(format!("cannot set mode 0700: {e}")))
}

/// Opens the directory itself, refusing a symlink or a non-directory.
fn open_no_follow(dir: &Path) -> Result<File, TmpDirError> {
    let opened = OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_DIRECTORY | libc::O_CLOEXEC)
        .open(dir);
    // With O_DIRECTORY, Linux reports a symlink as ENOTDIR; lstat tells them apart.
    let is_link = || std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink());
    opened
        .map_err(|e| match e.raw_os_error() {
            Some(libc::ELOOP | libc::ENOTDIR) if is_link() => {
                "is a symbolic link; give the real directory".to_string()
            }
            Some(libc::ENOTDIR) => "is not a directory".to_string(),
            _ => format!("cannot open it: {e}"),
        })
        .map_err(TmpDirError::from)
}

/// The owner of the parent can rename our directory and put theirs in its place:
/// it must be us or root.
fn check_parent(parent: &Path, uid: u32) -> Result<(), TmpDirError> {
    let meta = std::fs::metadata(parent)
        .map_err(|e| TmpDirError::from(format!("cannot stat its parent: {e}")))?;
    parent_owner_ok(meta.uid(), uid)
        .map_err(|e| TmpDirError::from(format!("its parent {}: {e}", parent.display())))
}

fn parent_owner_ok(owner: u32, uid: u32) -> Result<(), TmpDirError> {
    match owner == uid || owner == 0 {
        true => Ok(()),
        false => Err(format!(
            "owned by uid {owner}, who could replace the tmp dir (want uid {uid} or root)"
        )
        .into()),
    }
}

/// Why the tmp dir cannot be used (the caller names the directory).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TmpDirError {
    problem: String,
}

impl From<String> for TmpDirError {
    fn from(problem: String) -> TmpDirError {
        TmpDirError { problem }
    }
}

impl From<&str> for TmpDirError {
    fn from(problem: &str) -> TmpDirError {
        TmpDirError::from(problem.to_string())
    }
}

impl std::fmt::Display for TmpDirError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for TmpDirError {}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> std::path::PathBuf {
        let d = std::env::temp_dir().join(format!("so-tmpdir-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).expect("mkdir");
        d
    }

    fn mode(p: &Path) -> u32 {
        std::fs::symlink_metadata(p).expect("stat").mode() & 0o7777
    }

    #[test]
    fn a_missing_dir_is_created_0700_and_an_existing_one_set_to_0700() {
        let base = scratch("create");
        let dir = base.join("a/b");
        prepare(&dir).expect("created");
        assert_eq!(mode(&dir), 0o700);
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        prepare(&dir).expect("checked");
        assert_eq!(mode(&dir), 0o700);
    }

    #[test]
    fn a_dir_of_another_user_is_refused_untouched() {
        let base = scratch("owner");
        let dir = base.join("t");
        std::fs::create_dir(&dir).expect("mkdir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        let mine = std::fs::metadata(&dir).expect("stat").uid();
        let err = prepare_as(&dir, mine + 1).expect_err("not ours");
        assert_eq!(
            err.to_string(),
            format!("owned by uid {mine}, not by us (uid {})", mine + 1)
        );
        assert_eq!(mode(&dir), 0o777);
    }

    #[test]
    fn a_symlink_and_a_file_are_refused() {
        let base = scratch("link");
        let target = base.join("target");
        std::fs::create_dir(&target).expect("mkdir");
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        let link = base.join("link");
        std::os::unix::fs::symlink(&target, &link).expect("symlink");
        let err = prepare(&link).expect_err("a link");
        assert_eq!(
            err.to_string(),
            "is a symbolic link; give the real directory"
        );
        assert_eq!(mode(&target), 0o755);
        std::fs::write(base.join("file"), "").expect("write");
        assert_eq!(
            prepare(&base.join("file")).expect_err("a file").to_string(),
            "is not a directory"
        );
    }

    #[test]
    fn a_parent_of_another_user_is_refused_and_an_open_one_accepted() {
        assert_eq!(parent_owner_ok(7, 7), Ok(()));
        assert_eq!(parent_owner_ok(0, 7), Ok(()));
        assert_eq!(
            parent_owner_ok(8, 7),
            Err("owned by uid 8, who could replace the tmp dir (want uid 7 or root)".into())
        );
        // An emptyDir-like parent (0777, no sticky bit) of ours or root's is fine.
        let base = scratch("parent");
        let open = base.join("open");
        std::fs::create_dir(&open).expect("mkdir");
        std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).expect("chmod");
        prepare(&open.join("t")).expect("an open parent we own");
        assert_eq!(mode(&open.join("t")), 0o700);
    }
}
