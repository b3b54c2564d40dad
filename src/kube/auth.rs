//! Request credentials: the `Authorization` header for every request. Static tokens
//! and basic auth are fixed; a token file is re-read whenever its mtime or size
//! changes (bound service-account tokens rotate); an exec plugin's token is cached
//! until its expirationTimestamp and refreshed by running the plugin again. After a
//! 401 the HTTP layer calls [`Auth::invalidate`] so the next request fetches fresh
//! credentials. Shared by every thread that sends requests (behind `Arc`); the
//! caches are behind mutexes. Tokens never leave this file except as header values.

use super::config::AuthSettings;
use super::error::KubeError;
use crate::process::{Captured, ExitStatus};
use base64::Engine;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::{Duration, SystemTime};
use vendor_k8s_types::{ExecCluster, ExecConfig, ExecCredential, ExecCredentialSpec};

/// An exec plugin that has not answered by then is killed.
const EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// Most an exec plugin may print (an ExecCredential is a few KiB).
const MAX_PLUGIN_OUTPUT: usize = 1 << 20;

/// Credentials are refreshed this long before they expire.
const EXPIRY_SKEW: Duration = Duration::from_secs(10);

/// Produces the Authorization header for requests.
pub(crate) struct Auth {
    kind: Kind,
}

enum Kind {
    None,
    /// A ready header value: `Bearer ...` or `Basic ...`.
    Static(String),
    TokenFile {
        path: PathBuf,
        cache: Mutex<Option<FileToken>>,
    },
    Exec(Box<ExecPlugin>),
}

struct FileToken {
    modified: Option<SystemTime>,
    len: u64,
    token: String,
}

struct ExecPlugin {
    config: ExecConfig,
    /// How long one run may take.
    timeout: Duration,
    dir: PathBuf,
    cluster: ExecCluster,
    cache: Mutex<Option<ExecToken>>,
}

pub(crate) struct ExecToken {
    token: String,
    expires: Option<SystemTime>,
}

impl Auth {
    /// Builds the credential source described by `settings`.
    pub(crate) fn new(settings: &AuthSettings) -> Auth {
        let kind = match settings {
            AuthSettings::None => Kind::None,
            AuthSettings::Token(t) => Kind::Static(format!("Bearer {t}")),
            AuthSettings::Basic { username, password } => {
                let raw = format!("{username}:{password}");
                Kind::Static(format!(
                    "Basic {}",
                    base64::engine::general_purpose::STANDARD.encode(raw)
                ))
            }
            AuthSettings::TokenFile(path) => Kind::TokenFile {
                path: path.clone(),
                cache: Mutex::new(None),
            },
            AuthSettings::Exec {
                config,
                dir,
                cluster,
            } => Kind::Exec(Box::new(ExecPlugin {
                config: config.clone(),
                timeout: EXEC_TIMEOUT,
                dir: dir.clone(),
                cluster: cluster.clone(),
                cache: Mutex::new(None),
            })),
        };
        Auth { kind }
    }

    /// The Authorization header value, or None for anonymous / client-cert auth.
    pub(crate) fn header(&self) -> Result<Option<String>, KubeError> {
        match &self.kind {
            Kind::None => Ok(None),
            Kind::Static(h) => Ok(Some(h.clone())),
            Kind::TokenFile { path, cache } => {
                file_token(path, cache).map(|t| Some(format!("Bearer {t}")))
            }
            Kind::Exec(p) => p.token().map(|t| Some(format!("Bearer {t}"))),
        }
    }

    /// Whether new credentials could appear after a 401 (so a retry makes sense).
    pub(crate) fn refreshable(&self) -> bool {
        matches!(self.kind, Kind::TokenFile { .. } | Kind::Exec(_))
    }

    /// Forgets cached credentials; the next [`Auth::header`] reads or runs again.
    pub(crate) fn invalidate(&self) {
        match &self.kind {
            Kind::TokenFile { cache, .. } => *lock(cache) = None,
            Kind::Exec(p) => *lock(&p.cache) = None,
            _ => {}
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Returns the cached token unless the file changed since it was read.
fn file_token(path: &PathBuf, cache: &Mutex<Option<FileToken>>) -> Result<String, KubeError> {
    let meta = std::fs::metadata(path);
    let (modified, len) = match &meta {
        Ok(m) => (m.modified().ok(), m.len()),
        Err(_) => (None, 0),
    };
    let mut c = lock(cache);
    if let Some(t) = c.as_ref() {
        if meta.is_ok() && t.modified == modified && t.len == len {
            return Ok(t.token.clone());
        }
    }
    let f = path.display().to_string();
    let token = crate::bounded_read::read_to_string(path, crate::bounded_read::MAX_CONFIG_FILE)
        .map_err(|e| KubeError::config(&f, "", "tokenFile", e.to_string()))?
        .trim()
        .to_string();
    if token.is_empty() {
        return Err(KubeError::config(
            &f,
            "",
            "tokenFile",
            "the token file is empty",
        ));
    }
    *c = Some(FileToken {
        modified,
        len,
        token: token.clone(),
    });
    Ok(token)
}

impl ExecPlugin {
    /// A valid token: cached, or fresh from running the plugin.
    fn token(&self) -> Result<String, KubeError> {
        let mut c = lock(&self.cache);
        if let Some(t) = c.as_ref() {
            let fresh = t
                .expires
                .is_none_or(|e| SystemTime::now() + EXPIRY_SKEW < e);
            if fresh {
                return Ok(t.token.clone());
            }
        }
        let t = self.run()?;
        let token = t.token.clone();
        *c = Some(t);
        Ok(token)
    }

    fn command_path(&self) -> PathBuf {
        let cmd = &self.config.command;
        // A command with a slash but no leading `/` is relative to the kubeconfig's
        // directory (as client-go does); a bare name is looked up in PATH.
        if cmd.contains('/') {
            super::kubeconfig::relative_to(&self.dir.join("x"), cmd)
        } else {
            PathBuf::from(cmd)
        }
    }

    /// Runs the plugin once and decodes its ExecCredential.
    fn run(&self) -> Result<ExecToken, KubeError> {
        let err = |m: String| KubeError::Exec {
            command: self.config.command.clone(),
            message: m,
        };
        let info = ExecCredential {
            api_version: self.config.api_version.clone(),
            kind: "ExecCredential".into(),
            spec: Some(ExecCredentialSpec {
                interactive: false,
                cluster: self
                    .config
                    .provide_cluster_info
                    .then(|| self.cluster.clone()),
            }),
            status: None,
        };
        let info = serde_json::to_string(&info).map_err(|e| err(e.to_string()))?;
        let mut cmd = Command::new(self.command_path());
        cmd.args(&self.config.args)
            .env("KUBERNETES_EXEC_INFO", info)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        for e in &self.config.env {
            cmd.env(&e.name, &e.value);
        }
        let out = run_plugin(&mut cmd, self.timeout).map_err(|e| {
            let hint = self
                .config
                .install_hint
                .as_deref()
                .map(|h| format!("; {h}"))
                .unwrap_or_default();
            err(format!("cannot run: {e}{hint}"))
        })?;
        if out.status != ExitStatus::Code(0) {
            // stderr is the plugin's message to the user ("run aws sso login"); stdout may
            // hold a credential and is never quoted.
            let stderr = String::from_utf8_lossy(&out.stderr);
            let tail: String = stderr.trim().chars().take(500).collect();
            return Err(err(format!("exited with {}: {tail}", out.status)));
        }
        parse_credential(&out.stdout, &self.config.api_version).map_err(err)
    }
}

/// Runs `cmd` to completion, killing its process group after `timeout` (a plugin
/// waiting for a browser login would otherwise block every request). It goes through
/// `process.rs` like every child of the operator, so the PID-1 reaper never takes its
/// exit status. Spawning is retried briefly on ETXTBSY: a plugin script just
/// rewritten may still be open for writing in a child that another thread forked and
/// has not yet exec'd.
fn run_plugin(cmd: &mut Command, timeout: Duration) -> std::io::Result<Captured> {
    let mut tries = 0;
    let run = loop {
        match crate::process::run_captured(cmd, Some(timeout), MAX_PLUGIN_OUTPUT) {
            Err(e) if e.raw_os_error() == Some(libc::ETXTBSY) && tries < 5 => {
                tries += 1;
                std::thread::sleep(Duration::from_millis(20));
            }
            r => break r?,
        }
    };
    if let ExitStatus::TimedOut(_) = run.status {
        return Err(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer within {timeout:?}; killed"),
        ));
    }
    Ok(run)
}

/// Decodes and checks a plugin's stdout.
pub(crate) fn parse_credential(stdout: &[u8], want_api: &str) -> Result<ExecToken, String> {
    let cred: ExecCredential = serde_json::from_slice(stdout)
        .map_err(|e| format!("stdout is not an ExecCredential: {e}"))?;
    if cred.kind != "ExecCredential" {
        return Err(format!(
            "stdout has kind '{}', want ExecCredential",
            cred.kind
        ));
    }
    if cred.api_version != want_api {
        return Err(format!(
            "stdout has apiVersion '{}', the kubeconfig asks for '{want_api}'",
            cred.api_version
        ));
    }
    let status = cred.status.ok_or("stdout has no status")?;
    let token = status.token.filter(|t| !t.is_empty()).ok_or_else(|| {
        if status.client_certificate_data.is_some() {
            "client certificates from exec plugins are not supported; status.token is required"
                .to_string()
        } else {
            "status.token is empty".to_string()
        }
    })?;
    let expires = match status
        .expiration_timestamp
        .as_deref()
        .filter(|s| !s.is_empty())
    {
        None => None,
        Some(ts) => {
            let t = chrono::DateTime::parse_from_rfc3339(ts)
                .map_err(|e| format!("status.expirationTimestamp '{ts}': {e}"))?;
            Some(SystemTime::from(t))
        }
    };
    Ok(ExecToken { token, expires })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::config::tests::tempdir;
    use std::os::unix::fs::PermissionsExt;

    fn plugin(dir: &std::path::Path, body: &str) -> PathBuf {
        let p = dir.join("plugin.sh");
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
        p
    }

    fn exec_auth(dir: &std::path::Path, api: &str) -> Auth {
        let config = ExecConfig {
            command: "./plugin.sh".into(),
            args: vec![dir.join("count").to_string_lossy().into()],
            api_version: api.into(),
            env: vec![vendor_k8s_types::ExecEnvVar {
                name: "TOKEN_PREFIX".into(),
                value: "tok".into(),
            }],
            ..Default::default()
        };
        Auth::new(&AuthSettings::Exec {
            config,
            dir: dir.to_path_buf(),
            cluster: ExecCluster::default(),
        })
    }

    /// Each run appends to a counter file and prints a token numbered by the count.
    const COUNTING: &str = r#"echo x >> "$1"; n=$(wc -l < "$1" | tr -d ' ')
case "$KUBERNETES_EXEC_INFO" in *'"interactive":false'*) ;; *) echo bad-info >&2; exit 3;; esac
echo "{\"apiVersion\":\"client.authentication.k8s.io/$API\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"$TOKEN_PREFIX-$n\",\"expirationTimestamp\":\"$EXP\"}}""#;

    #[test]
    fn exec_plugin_token_cached_until_expiry() {
        for api in ["v1", "v1beta1"] {
            let d = tempdir(&format!("exec-{api}"));
            let far = "2999-01-01T00:00:00Z";
            plugin(&d, &format!("API={api} EXP={far}\n{COUNTING}"));
            let a = exec_auth(&d, &format!("client.authentication.k8s.io/{api}"));
            assert_eq!(a.header().unwrap().as_deref(), Some("Bearer tok-1"));
            assert_eq!(a.header().unwrap().as_deref(), Some("Bearer tok-1"));
            a.invalidate();
            assert_eq!(a.header().unwrap().as_deref(), Some("Bearer tok-2"));
        }
    }

    #[test]
    fn exec_plugin_expired_token_is_refreshed() {
        let d = tempdir("exec-expired");
        plugin(&d, &format!("API=v1 EXP=2000-01-01T00:00:00Z\n{COUNTING}"));
        let a = exec_auth(&d, "client.authentication.k8s.io/v1");
        assert_eq!(a.header().unwrap().as_deref(), Some("Bearer tok-1"));
        assert_eq!(a.header().unwrap().as_deref(), Some("Bearer tok-2"));
    }

    #[test]
    fn exec_plugin_failures_are_clear_and_secret_free() {
        let d = tempdir("exec-fail");
        plugin(
            &d,
            "echo '{\"status\":{\"token\":\"leak\"}}'; echo 'please log in' >&2; exit 1",
        );
        let e = exec_auth(&d, "client.authentication.k8s.io/v1")
            .header()
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("please log in") && e.contains("./plugin.sh") && !e.contains("leak"),
            "{e}"
        );
        plugin(
            &d,
            "echo '{\"apiVersion\":\"client.authentication.k8s.io/v1beta1\",\"kind\":\"ExecCredential\",\"status\":{\"token\":\"x\"}}'",
        );
        let e = exec_auth(&d, "client.authentication.k8s.io/v1")
            .header()
            .unwrap_err()
            .to_string();
        assert!(e.contains("apiVersion"), "{e}");
    }

    #[test]
    fn exec_plugin_that_hangs_is_killed() {
        let d = tempdir("exec-hang");
        plugin(&d, "sleep 30");
        let p = ExecPlugin {
            config: ExecConfig {
                command: "./plugin.sh".into(),
                api_version: "client.authentication.k8s.io/v1".into(),
                ..Default::default()
            },
            timeout: Duration::from_millis(300),
            dir: d.clone(),
            cluster: ExecCluster::default(),
            cache: Mutex::new(None),
        };
        let t0 = std::time::Instant::now();
        let e = p.token().unwrap_err().to_string();
        assert!(e.contains("killed"), "{e}");
        assert!(t0.elapsed() < Duration::from_secs(5), "{:?}", t0.elapsed());
    }

    #[test]
    fn token_file_is_reread_when_it_changes() {
        let d = tempdir("tokfile");
        let p = d.join("token");
        std::fs::write(&p, "first\n").unwrap();
        let a = Auth::new(&AuthSettings::TokenFile(p.clone()));
        assert_eq!(a.header().unwrap().as_deref(), Some("Bearer first"));
        std::fs::write(&p, "second-rotated\n").unwrap();
        assert_eq!(
            a.header().unwrap().as_deref(),
            Some("Bearer second-rotated")
        );
        assert!(a.refreshable());
    }

    #[test]
    fn basic_auth_header() {
        let a = Auth::new(&AuthSettings::Basic {
            username: "u".into(),
            password: "p".into(),
        });
        assert_eq!(a.header().unwrap().as_deref(), Some("Basic dTpw"));
        assert!(!a.refreshable());
    }
}
