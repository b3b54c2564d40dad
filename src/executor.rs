//! The hook executor: runs one hook once, the way flant's hooks expect.
//!
//! For each run it writes the binding context to a fresh temp file (mode 0600, in the
//! 0700 tmp dir), creates the empty output files hooks write to (metrics, object
//! patches, admission and conversion responses), and execs the hook directly (never
//! through a shell) with no arguments, in the hook's own directory, with the operator's
//! environment plus the `*_PATH` variables. The run itself is the one runner's
//! (`process/run.rs`: process group, timeout, shutdown, drain, reaping, the same
//! rules as for helm), with the log sink (`pipes.rs`): output lines are logged as
//! they arrive and the end of stderr is kept. Queue threads and webhook handler
//! threads call [`Executor::run`]; it blocks until the hook ends.
//!
//! Creating a file changes its directory, which on a disk-backed tmp dir can wait
//! for the file system's journal; so once a hook has run, the empty files for its
//! next run are made right away (its "spare" set), and the next event only fills in
//! the binding context (docs/threads.md, "Where an event's time goes").

use crate::pipes::LogSink;
use crate::process::{self, ExitStatus, Rules, Usage};
use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Shared settings of every run.
#[derive(Debug, Clone, Default)]
pub struct Executor {
    pub tmp_dir: PathBuf,
    pub keep_tmp_files: bool,
    pub timeout: Option<Duration>,
    /// Each hook's files for its next run, made after its last one; shared by
    /// every clone, removed when the last clone is dropped.
    pub spares: Spares,
}

/// Empty temp-file sets made ahead, one per hook name at most; `None` once closed.
#[derive(Debug, Clone)]
pub struct Spares(Arc<Mutex<Option<HashMap<String, TempFiles>>>>);

impl Default for Spares {
    fn default() -> Self {
        Spares(Arc::new(Mutex::new(Some(HashMap::new()))))
    }
}

impl Spares {
    /// At shutdown: removes every spare file; none are kept from now on.
    pub(crate) fn close(&self) {
        let closed = self.0.lock().map(|mut m| m.take());
        drop(closed);
    }

    fn take(&self, hook: &str) -> Option<TempFiles> {
        self.0.lock().ok()?.as_mut()?.remove(hook)
    }

    /// Whether a spare set for `hook` would be kept (none yet, not closed).
    fn wanted(&self, hook: &str) -> bool {
        self.0
            .lock()
            .is_ok_and(|m| m.as_ref().is_some_and(|m| !m.contains_key(hook)))
    }

    /// Keeps `files` unless the hook already has a spare or the set is closed
    /// (dropping them removes them).
    fn put(&self, hook: &str, files: TempFiles) {
        if let Ok(mut guard) = self.0.lock() {
            if let Some(map) = guard.as_mut() {
                map.entry(hook.to_string()).or_insert(files);
            }
        }
    }
}

/// Labels that go on every log line of a run (and on its metrics).
#[derive(Debug, Clone, Default)]
pub(crate) struct RunLabels {
    pub(crate) hook: String,
    pub(crate) binding: String,
    pub(crate) queue: String,
    pub(crate) task: String,
    pub(crate) event: String,
}

/// What a run produced.
#[derive(Debug)]
pub(crate) struct RunResult {
    pub(crate) status: ExitStatus,
    pub(crate) usage: Usage,
    pub(crate) duration: Duration,
    /// Captured stderr (its last 64 KiB), for the failure message.
    pub(crate) stderr: String,
    /// Contents of the files the hook may have written.
    pub(crate) metrics: Vec<u8>,
    pub(crate) kubernetes_patch: Vec<u8>,
    pub(crate) validating_response: Vec<u8>,
    pub(crate) conversion_response: Vec<u8>,
    /// Contents of the output files among [`ExtraFile`]s, in their order.
    pub(crate) extra: Vec<Vec<u8>>,
    /// The operator began to stop while the hook ran, so the hook got SIGTERM (and
    /// SIGKILL after the grace period) from the operator itself.
    pub(crate) interrupted: bool,
}

impl RunResult {
    /// Exit code 0.
    pub(crate) fn success(&self) -> bool {
        self.status == ExitStatus::Code(0)
    }

    /// Failed because the operator's shutdown stopped it: not the hook's failure.
    pub(crate) fn stopped_by_shutdown(&self) -> bool {
        self.interrupted && !self.success()
    }

    /// flant's error text: the stderr if any, else the exit status.
    pub(crate) fn error_text(&self) -> String {
        let stderr = self.stderr.trim();
        if stderr.is_empty() {
            format!("cmd run: {}", self.status)
        } else {
            format!("{}: {stderr}", self.status)
        }
    }
}

/// Most an output file (`$METRICS_PATH`, `$KUBERNETES_PATCH_PATH`, the webhook
/// responses, addon-operator's values patches) may hold: 64 MiB. A bigger one fails
/// the run unread (a symlink to a huge file must not fill the operator's memory).
pub(crate) const MAX_OUTPUT_FILE: u64 = 64 << 20;

static UNIQUE: AtomicU64 = AtomicU64::new(0);

/// The temp files of one run; removed on drop unless kept for debugging.
#[derive(Debug)]
struct TempFiles {
    /// The five shell-operator files, then the caller's extra files in order.
    paths: Vec<PathBuf>,
    keep: bool,
}

/// A file beyond shell-operator's five, passed to the hook in `env`: an input with
/// `content`, or (`None`) an output the hook may write.
#[derive(Debug, Clone)]
pub struct ExtraFile {
    pub(crate) env: &'static str,
    pub(crate) content: Option<Vec<u8>>,
}

impl Drop for TempFiles {
    fn drop(&mut self) {
        if !self.keep {
            self.paths
                .iter()
                .for_each(|p| drop(std::fs::remove_file(p)));
        }
    }
}

impl Executor {
    /// Creates the tmp dir (mode 0700) if needed and checks it is ours and no
    /// symlink (see `tmp_dir.rs`).
    pub fn prepare_tmp_dir(&self) -> Result<(), crate::tmp_dir::TmpDirError> {
        crate::tmp_dir::prepare(&self.tmp_dir)
    }

    /// Runs `path` with the binding context that `context` writes (streamed into
    /// the file). An `Err` means the temp files could not be written, the hook could
    /// not be started, or an output file it left cannot be read (see
    /// [`read_output`]; nothing of that run is used).
    pub(crate) fn run(
        &self,
        path: &Path,
        context: &dyn Fn(&mut dyn Write) -> std::io::Result<()>,
        labels: &RunLabels,
    ) -> std::io::Result<RunResult> {
        self.run_with(path, context, labels, &[])
    }

    /// [`run`](Self::run) with more files, each passed in its environment variable:
    /// an input file holds the given bytes; an output file starts empty and its
    /// content comes back in [`RunResult::extra`], in the order of `extra`.
    /// addon-operator passes its values files this way.
    pub(crate) fn run_with(
        &self,
        path: &Path,
        context: &dyn Fn(&mut dyn Write) -> std::io::Result<()>,
        labels: &RunLabels,
        extra: &[ExtraFile],
    ) -> std::io::Result<RunResult> {
        let rules = Rules::new(self.timeout);
        self.run_under(path, context, labels, extra, &rules)
    }

    /// [`run_with`](Self::run_with) under the runner's `rules` (the executor's
    /// timeout and the operator's shutdown flag, or a test's own).
    pub(crate) fn run_under(
        &self,
        path: &Path,
        context: &dyn Fn(&mut dyn Write) -> std::io::Result<()>,
        labels: &RunLabels,
        extra: &[ExtraFile],
        rules: &Rules,
    ) -> std::io::Result<RunResult> {
        let files = self.files_for(&labels.hook, extra, context)?;
        for (file, p) in extra.iter().zip(&files.paths[5..]) {
            let mut f = create_new(p)?;
            if let Some(content) = &file.content {
                f.write_all(content)?;
            }
        }
        let mut cmd = Command::new(path);
        crate::builtin_jq::apply(&mut cmd);
        cmd.current_dir(path.parent().unwrap_or(Path::new("/")))
            .env("BINDING_CONTEXT_PATH", &files.paths[0])
            .env("METRICS_PATH", &files.paths[1])
            .env("KUBERNETES_PATCH_PATH", &files.paths[2])
            .env("VALIDATING_RESPONSE_PATH", &files.paths[3])
            .env("ADMISSION_RESPONSE_PATH", &files.paths[3])
            .env("CONVERSION_RESPONSE_PATH", &files.paths[4]);
        for (file, p) in extra.iter().zip(&files.paths[5..]) {
            cmd.env(file.env, p);
        }
        let fields = [
            ("hook", labels.hook.as_str()),
            ("binding", labels.binding.as_str()),
            ("queue", labels.queue.as_str()),
            ("task", labels.task.as_str()),
            ("event", labels.event.as_str()),
        ];
        let mut sink = LogSink::new(&fields);
        let started = Instant::now();
        crate::latency_trace::mark(crate::latency_trace::Stage::FilesWritten);
        let ended = process::run(&mut cmd, rules, &mut sink)?;
        let stderr = sink.finish();
        let duration = started.elapsed();
        let result = RunResult {
            status: ended.exit.status,
            usage: ended.exit.usage,
            duration,
            stderr,
            metrics: read_output(&files.paths[1], "METRICS_PATH")?,
            kubernetes_patch: read_output(&files.paths[2], "KUBERNETES_PATCH_PATH")?,
            validating_response: read_output(&files.paths[3], "VALIDATING_RESPONSE_PATH")?,
            conversion_response: read_output(&files.paths[4], "CONVERSION_RESPONSE_PATH")?,
            extra: extra
                .iter()
                .zip(&files.paths[5..])
                .filter(|(f, _)| f.content.is_none())
                .map(|(f, p)| read_output(p, f.env))
                .collect::<std::io::Result<_>>()?,
            interrupted: ended.interrupted,
        };
        drop(files);
        self.make_spare(&labels.hook);
        Ok(result)
    }

    /// The run's temp files with the binding context written: the hook's spare set
    /// when it has one, else a new set. The caller's extra files get new names.
    fn files_for(
        &self,
        hook: &str,
        extra: &[ExtraFile],
        context: &dyn Fn(&mut dyn Write) -> std::io::Result<()>,
    ) -> std::io::Result<TempFiles> {
        let spare = self.spares.take(hook).and_then(|files| {
            // Ours, in our 0700 dir: refuse anything but the empty file we made. Not
            // truncated on open: on ext4 that makes close() flush the new data.
            // O_NONBLOCK: a FIFO put in its place must not block this queue's thread
            // (without a reader the open fails; with one, it is no regular file).
            let file = OpenOptions::new()
                .write(true)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
                .open(&files.paths[0])
                .ok()?;
            let untouched = file.metadata().is_ok_and(|m| m.is_file() && m.len() == 0);
            untouched.then_some((files, file))
        });
        let (mut files, file) = match spare {
            Some(found) => found,
            None => {
                let files = self.temp_files(hook);
                let file = create_new(&files.paths[0])?;
                for p in &files.paths[1..5] {
                    create_new(p)?;
                }
                (files, file)
            }
        };
        let mut file = std::io::BufWriter::new(file);
        context(&mut file)?;
        file.flush()?;
        drop(file);
        let id = unique_id();
        let safe = crate::hook::safe_name(hook);
        files.paths.extend(extra.iter().map(|f| {
            let kind = f.env.to_lowercase().replace('_', "-");
            self.tmp_dir.join(format!("hook-{safe}-{kind}-{id}.json"))
        }));
        Ok(files)
    }

    /// After a run: empty files for the hook's next one, unless it has them. A
    /// failure here only means the next run makes its own.
    fn make_spare(&self, hook: &str) {
        if !self.spares.wanted(hook) {
            return;
        }
        let files = self.temp_files(hook);
        if files.paths.iter().all(|p| create_new(p).is_ok()) {
            self.spares.put(hook, files);
        }
    }

    /// Names for shell-operator's five files of one run (not created yet); the
    /// set removes whatever exists of them when dropped.
    fn temp_files(&self, hook: &str) -> TempFiles {
        let safe = crate::hook::safe_name(hook);
        let id = unique_id();
        let name = |kind: &str| self.tmp_dir.join(format!("hook-{safe}-{kind}-{id}.json"));
        let paths = vec![
            name("binding-context"),
            name("metrics"),
            name("kubernetes-patch"),
            name("admission-response"),
            name("conversion-response"),
        ];
        TempFiles {
            paths,
            keep: self.keep_tmp_files,
        }
    }
}

/// A part of temp file names no other run of this process or another one shares.
fn unique_id() -> String {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    format!(
        "{:x}-{:x}-{:08x}",
        std::process::id(),
        UNIQUE.fetch_add(1, Ordering::Relaxed),
        nanos
    )
}

/// Creates `path` empty, 0600, never opening an existing file or following a
/// symlink (`O_CREAT | O_EXCL | O_NOFOLLOW`): the one way the operator makes a file
/// a child process reads or writes.
fn create_new(path: &Path) -> std::io::Result<File> {
    OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .custom_flags(libc::O_NOFOLLOW | libc::O_CLOEXEC)
        .open(path)
}

/// A file the operator hands to a child process that is not a hook run (helm's
/// values file, an `enabled` script's values and result files): made the same way
/// as a hook's files ([`create_new`]: 0600, `O_EXCL`, `O_NOFOLLOW`) under a name
/// no other run shares, in the operator's own tmp dir; removed when dropped.
#[derive(Debug)]
pub(crate) struct ChildFile {
    path: PathBuf,
}

impl ChildFile {
    /// Creates `<dir>/<stem>-<unique id>` holding `content` (empty for a file the
    /// child writes). An error names the path.
    pub(crate) fn create(dir: &Path, stem: &str, content: &[u8]) -> std::io::Result<ChildFile> {
        let path = dir.join(format!("{stem}-{}", unique_id()));
        let named =
            |e: std::io::Error| std::io::Error::new(e.kind(), format!("{}: {e}", path.display()));
        let mut file = create_new(&path).map_err(named)?;
        let made = ChildFile { path: path.clone() };
        file.write_all(content).map_err(named)?;
        Ok(made)
    }

    pub(crate) fn path(&self) -> &Path {
        &self.path
    }

    /// What the child wrote, at most `max` bytes, as [`read_output`] reads a hook's
    /// output file (`var` names it in errors).
    pub(crate) fn read(&self, var: &str, max: u64) -> std::io::Result<Vec<u8>> {
        read_output_max(&self.path, var, max)
    }
}

impl Drop for ChildFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Writes `content` into a new file at `path` (a fixed name in the operator's own
/// tmp dir, such as helm's plugin file), replacing what was there, by
/// [`create_new`].
pub(crate) fn replace_file(path: &Path, content: &[u8]) -> std::io::Result<()> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    create_new(path)?.write_all(content)
}

/// Reads the output file the hook got as `$var`. The operator created it empty
/// before the run, so a file the hook removed means it wrote nothing. Anything else
/// that cannot be read as a regular file (a directory, a FIFO, no permission) is an
/// error naming the variable and the path. The bytes are not decoded here: each
/// reader refuses what is not valid UTF-8 JSON or YAML with its own message.
fn read_output(path: &Path, var: &str) -> std::io::Result<Vec<u8>> {
    read_output_max(path, var, MAX_OUTPUT_FILE)
}

/// [`read_output`] with another cap.
fn read_output_max(path: &Path, var: &str, max: u64) -> std::io::Result<Vec<u8>> {
    match crate::bounded_read::read(path, max) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => {
            let text = format!("${var} file {}: cannot read it: {e}", path.display());
            Err(std::io::Error::new(e.kind(), text))
        }
        ok => ok,
    }
}

#[cfg(test)]
#[allow(unsafe_code)] // mkfifo(3) makes the FIFO a test feeds the executor
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn script(dir: &Path, body: &str) -> PathBuf {
        std::fs::create_dir_all(dir).expect("mkdir");
        let p = dir.join("hook.sh");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).expect("write");
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        p
    }

    fn executor(tag: &str) -> Executor {
        let tmp = std::env::temp_dir().join(format!("so-exec-{tag}-{}", std::process::id()));
        let e = Executor {
            tmp_dir: tmp.join("tmp"),
            keep_tmp_files: false,
            timeout: None,
            ..Default::default()
        };
        e.prepare_tmp_dir().expect("tmp dir");
        e
    }

    #[test]
    fn hook_gets_context_env_and_cwd_and_files_are_removed() {
        let e = executor("env");
        let dir = e.tmp_dir.parent().expect("parent").join("hooks");
        let hook = script(
            &dir,
            r#"cat "$BINDING_CONTEXT_PATH" > "$PWD/seen.json"
stat -c %a "$BINDING_CONTEXT_PATH" > "$PWD/mode"
env | grep "_PATH=$(dirname "$METRICS_PATH")/" | sort > "$PWD/paths"
echo '{"name":"m","action":"set","value":1}' > "$METRICS_PATH"
test "$ADMISSION_RESPONSE_PATH" = "$VALIDATING_RESPONSE_PATH" || exit 9
test -n "$KUBERNETES_PATCH_PATH" -a -n "$CONVERSION_RESPONSE_PATH" || exit 8"#,
        );
        let run = e
            .run(
                &hook,
                &|w| w.write_all(b"[{\"binding\":\"onStartup\"}]\n"),
                &RunLabels::default(),
            )
            .expect("run");
        assert!(run.success(), "{}", run.error_text());
        assert_eq!(
            std::fs::read_to_string(dir.join("seen.json")).expect("seen"),
            "[{\"binding\":\"onStartup\"}]\n"
        );
        assert_eq!(
            std::fs::read_to_string(dir.join("mode"))
                .expect("mode")
                .trim(),
            "600"
        );
        assert_eq!(
            run.metrics,
            b"{\"name\":\"m\",\"action\":\"set\",\"value\":1}\n"
        );
        let paths = std::fs::read_to_string(dir.join("paths")).expect("paths");
        let used: Vec<&str> = paths
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(_, p)| p)
            .collect();
        assert_eq!(used.len(), 6, "{paths}");
        assert!(
            used.iter().all(|p| !Path::new(p).exists()),
            "the run's files removed: {paths}"
        );
        assert_eq!(
            names_in(&e.tmp_dir).len(),
            5,
            "a spare set for the next run"
        );
        let mode = std::fs::metadata(&e.tmp_dir)
            .expect("stat")
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode, 0o700);
        let tmp = e.tmp_dir.clone();
        drop(e);
        assert_eq!(
            names_in(&tmp),
            Vec::<String>::new(),
            "spares removed with the executor"
        );
    }

    fn names_in(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("ls")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    /// The second run of a hook uses the files made after the first (nothing is
    /// created on the way to its start), and a spare someone wrote into is not used.
    #[test]
    fn the_next_run_uses_the_spare_files_unless_they_were_touched() {
        let e = executor("spare");
        let dir = e.tmp_dir.parent().expect("parent").join("hooks");
        let hook = script(&dir, r#"cat "$BINDING_CONTEXT_PATH" >> "$PWD/seen""#);
        let labels = RunLabels {
            hook: "spare.sh".into(),
            ..RunLabels::default()
        };
        let run = |text: &'static [u8]| {
            let r = e.run(&hook, &|w| w.write_all(text), &labels).expect("run");
            assert!(r.success(), "{}", r.error_text());
        };
        run(b"first\n");
        let spare = names_in(&e.tmp_dir);
        assert_eq!(spare.len(), 5, "{spare:?}");
        assert!(
            spare.iter().all(|n| n.starts_with("hook-spare-sh-")),
            "{spare:?}"
        );
        run(b"second\n");
        let after_second = names_in(&e.tmp_dir);
        assert!(
            spare.iter().all(|n| !after_second.contains(n)),
            "the spare set was used up"
        );
        // A spare that is no longer empty is left alone; the run makes fresh files.
        let context = after_second
            .iter()
            .find(|n| n.contains("binding-context"))
            .expect("spare context");
        std::fs::write(
            e.tmp_dir.join(context),
            "stale bytes that are longer than the context",
        )
        .expect("write");
        run(b"third\n");
        assert_eq!(
            std::fs::read_to_string(dir.join("seen")).expect("seen"),
            "first\nsecond\nthird\n"
        );
    }

    /// A spare context file swapped for a FIFO (by a hook's detached child) must not
    /// block the queue thread in open(2): the run falls back to fresh files
    /// (issue 27 item 2).
    #[test]
    fn a_spare_replaced_by_a_fifo_does_not_block_the_next_run() {
        let e = executor("spare-fifo");
        let dir = e.tmp_dir.parent().expect("parent").join("hooks");
        let hook = script(&dir, r#"cat "$BINDING_CONTEXT_PATH" >> "$PWD/seen""#);
        let labels = RunLabels {
            hook: "fifo.sh".into(),
            ..RunLabels::default()
        };
        let r = e
            .run(&hook, &|w| w.write_all(b"first\n"), &labels)
            .expect("run");
        assert!(r.success(), "{}", r.error_text());
        let context = names_in(&e.tmp_dir)
            .into_iter()
            .find(|n| n.contains("binding-context"))
            .expect("spare context");
        let path = e.tmp_dir.join(&context);
        std::fs::remove_file(&path).expect("rm spare");
        let c = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()).expect("path");
        // SAFETY: mkfifo with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
        let (tx, rx) = std::sync::mpsc::channel();
        let (e2, hook2, labels2) = (e.clone(), hook.clone(), labels.clone());
        std::thread::spawn(move || {
            let r = e2.run(&hook2, &|w| w.write_all(b"second\n"), &labels2);
            let _ = tx.send(r.map(|r| r.success()).map_err(|e| e.to_string()));
        });
        let result = rx.recv_timeout(std::time::Duration::from_secs(5));
        if result.is_err() {
            // Unblock the stuck open(2) so the test process can end.
            let _ = std::fs::OpenOptions::new().read(true).open(&path);
        }
        assert_eq!(result.expect("the run blocked on the FIFO"), Ok(true));
        assert_eq!(
            std::fs::read_to_string(dir.join("seen")).expect("seen"),
            "first\nsecond\n"
        );
    }

    /// Files for helm and `enabled` scripts are made as a hook's are: 0600, never
    /// through a symlink planted at their path, never over an existing file
    /// (issue 27 item 4).
    #[test]
    fn child_files_are_0600_and_never_follow_a_planted_symlink() {
        let e = executor("child");
        let f = ChildFile::create(&e.tmp_dir, "m.module-values.yaml", b"{}").expect("made");
        let meta = std::fs::symlink_metadata(f.path()).expect("stat");
        assert!(meta.is_file());
        assert_eq!(meta.permissions().mode() & 0o777, 0o600);
        assert_eq!(f.read("VALUES_PATH", 16).expect("read"), b"{}");
        let path = f.path().to_path_buf();
        drop(f);
        assert!(!path.exists(), "removed when dropped");

        let victim = e.tmp_dir.parent().expect("parent").join("victim");
        std::fs::write(&victim, "precious").expect("write");
        let link = e.tmp_dir.join("helm-plugin.yaml");
        std::os::unix::fs::symlink(&victim, &link).expect("symlink");
        // replace_file removes the link and makes a new file in its place.
        replace_file(&link, b"new").expect("replaced");
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
        assert!(!std::fs::symlink_metadata(&link).expect("stat").is_symlink());
        // create_new itself refuses a planted symlink, dangling or not.
        let planted = e.tmp_dir.join("planted");
        std::os::unix::fs::symlink(&victim, &planted).expect("symlink");
        let err = create_new(&planted).expect_err("a symlink is never opened");
        assert_eq!(err.kind(), std::io::ErrorKind::AlreadyExists);
        std::os::unix::fs::symlink(e.tmp_dir.join("nowhere"), e.tmp_dir.join("dangling"))
            .expect("symlink");
        assert!(create_new(&e.tmp_dir.join("dangling")).is_err());
        assert!(
            !e.tmp_dir.join("nowhere").exists(),
            "not created through the link"
        );
        assert_eq!(std::fs::read_to_string(&victim).expect("read"), "precious");
    }

    #[test]
    fn an_output_file_that_cannot_be_read_fails_the_run() {
        let e = executor("unreadable");
        let dir = e.tmp_dir.parent().expect("parent").join("hooks");
        for var in [
            "METRICS_PATH",
            "KUBERNETES_PATCH_PATH",
            "VALIDATING_RESPONSE_PATH",
            "CONVERSION_RESPONSE_PATH",
        ] {
            let body = format!("echo \"${var}\" > \"$PWD/path\"; rm \"${var}\"; mkdir \"${var}\"");
            let hook = script(&dir.join(var), &body);
            let err = e
                .run(&hook, &|w| w.write_all(b"[]"), &RunLabels::default())
                .expect_err("a directory is no output file");
            let path = std::fs::read_to_string(dir.join(var).join("path")).expect("path");
            let text = err.to_string();
            assert!(
                text.starts_with(&format!("${var} file {}: cannot read it: ", path.trim())),
                "{text}"
            );
            let _ = std::fs::remove_dir(path.trim());
        }
    }

    #[test]
    fn a_fifo_in_place_of_an_output_file_fails_the_run_without_blocking() {
        let e = executor("fifo");
        let dir = e.tmp_dir.parent().expect("parent").join("hooks");
        let hook = script(&dir, r#"rm "$METRICS_PATH"; mkfifo "$METRICS_PATH""#);
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(
                e.run(&hook, &|w| w.write_all(b"[]"), &RunLabels::default())
                    .map(drop),
            );
        });
        let result = rx
            .recv_timeout(Duration::from_secs(10))
            .expect("the run ends although nobody writes the FIFO");
        let err = result.expect_err("a FIFO is no output file").to_string();
        assert!(
            err.starts_with("$METRICS_PATH file ") && err.ends_with(": not a regular file"),
            "{err}"
        );
    }

    #[test]
    fn an_output_file_above_the_cap_fails_the_run_unread() {
        let e = executor("huge");
        let dir = e.tmp_dir.parent().expect("parent").join("hooks");
        // Sparse: 200 MiB long, nothing on disk; reading it whole was the bug.
        let hook = script(&dir, r#"truncate -s 200M "$KUBERNETES_PATCH_PATH""#);
        let err = e
            .run(&hook, &|w| w.write_all(b"[]"), &RunLabels::default())
            .expect_err("too big");
        let text = err.to_string();
        assert!(
            text.starts_with("$KUBERNETES_PATCH_PATH file ")
                && text.ends_with(": cannot read it: larger than 67108864 bytes"),
            "{text}"
        );
    }

    #[test]
    fn an_output_file_the_hook_removed_is_empty() {
        let e = executor("removed");
        let dir = e.tmp_dir.parent().expect("parent").join("hooks");
        let hook = script(&dir, r#"rm "$METRICS_PATH" "$KUBERNETES_PATCH_PATH""#);
        let run = e
            .run(&hook, &|w| w.write_all(b"[]"), &RunLabels::default())
            .expect("run");
        assert!(run.success(), "{}", run.error_text());
        assert!(run.metrics.is_empty() && run.kubernetes_patch.is_empty());
    }

    #[test]
    fn failure_text_is_stderr_or_status() {
        let e = executor("fail");
        let dir = e.tmp_dir.parent().expect("parent").join("hooks");
        let hook = script(&dir, "echo 'bad things' >&2; exit 2");
        let run = e
            .run(&hook, &|w| w.write_all(b"[]"), &RunLabels::default())
            .expect("run");
        assert_eq!(run.status, ExitStatus::Code(2));
        assert_eq!(run.error_text(), "exit status 2: bad things");
        let quiet = script(&dir.join("q"), "exit 1");
        assert_eq!(
            e.run(&quiet, &|w| w.write_all(b"[]"), &RunLabels::default())
                .expect("run")
                .error_text(),
            "cmd run: exit status 1"
        );
    }
}
