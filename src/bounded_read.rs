//! Reading a file the operator does not own (a kubeconfig and the certificate, key
//! and token files it names, the in-cluster service account files, webhook
//! certificates, the output files hooks write) without trusting it: only a regular
//! file (a symlink to one is fine, as Kubernetes mounts Secrets), opened without
//! blocking (a FIFO in its place cannot hang us), and at most a given size, checked
//! before and while reading. `certificate-authority: /dev/zero` is then a clear
//! error, not an out-of-memory kill.

use std::io::Read;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// Most a configuration file may hold: 4 MiB (kubeconfigs and PEM files are KiBs).
pub(crate) const MAX_CONFIG_FILE: u64 = 4 << 20;

/// The file's bytes, if it is a regular file of at most `max` bytes.
pub(crate) fn read(path: &Path, max: u64) -> std::io::Result<Vec<u8>> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    let refuse = |why: String| Err(std::io::Error::new(std::io::ErrorKind::InvalidData, why));
    if !meta.is_file() {
        return refuse("not a regular file".into());
    }
    if meta.len() > max {
        return refuse(format!("larger than {max} bytes"));
    }
    let mut bytes = Vec::new();
    file.take(max + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > max {
        return refuse(format!("larger than {max} bytes"));
    }
    Ok(bytes)
}

/// [`read`] as UTF-8 text.
pub(crate) fn read_to_string(path: &Path, max: u64) -> std::io::Result<String> {
    String::from_utf8(read(path, max)?)
        .map_err(|_| std::io::Error::new(std::io::ErrorKind::InvalidData, "not UTF-8 text"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn devices_and_oversized_files_are_refused() {
        let err = read(Path::new("/dev/zero"), MAX_CONFIG_FILE).expect_err("a device");
        assert_eq!(err.to_string(), "not a regular file");
        let dir = std::env::temp_dir().join(format!("so-bounded-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("mkdir");
        let big = dir.join("big");
        std::fs::write(&big, vec![b'a'; 11]).expect("write");
        assert_eq!(
            read(&big, 10).expect_err("big").to_string(),
            "larger than 10 bytes"
        );
        assert_eq!(read(&big, 11).expect("fits").len(), 11);
        let _ = std::fs::remove_dir_all(&dir);
    }
}
