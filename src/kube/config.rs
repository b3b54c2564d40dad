//! Where the cluster is and how to talk to it: turns [`KubeSettings`] (the operator's
//! `--kube-*` flags and env) plus the environment into one [`ClusterConfig`].
//! Precedence: `--kube-server` overrides the server of whatever is loaded;
//! `--kube-config`/`KUBE_CONFIG`, else `KUBECONFIG` (a colon list merged as kubectl
//! does), else `~/.kube/config`, with `--kube-context`; else in-cluster. Runs once at
//! startup on the main thread.

use super::error::KubeError;
use super::kubeconfig;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Default service-account directory inside a pod; `KUBE_SERVICE_ACCOUNT_DIR` overrides it
/// (tests point it at a temp dir).
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The knobs the operator's CLI fills from flags and env vars. Empty strings mean
/// "not set".
#[derive(Debug, Clone)]
pub struct KubeSettings {
    /// `--kube-server` / `KUBE_SERVER`: overrides the API server URL.
    pub server: String,
    /// `--kube-config` / `KUBE_CONFIG`: one kubeconfig file; when empty `KUBECONFIG`
    /// and `~/.kube/config` are tried.
    pub kubeconfig: String,
    /// `--kube-context` / `KUBE_CONTEXT`: the context to use instead of current-context.
    pub context: String,
    /// `--kube-client-qps` / `KUBE_CLIENT_QPS` (default 5). 0 means the default; a
    /// negative value disables rate limiting.
    pub qps: f32,
    /// `--kube-client-burst` / `KUBE_CLIENT_BURST` (default 10). 0 means the default.
    pub burst: u32,
    /// Timeout of one non-watch request (default 30 s).
    pub timeout: Duration,
    /// The `component` label of this client's metrics: `main` or `object_patcher`.
    pub component: String,
}

impl KubeSettings {
    /// The main client's settings from the `--kube-*` flags (30 s timeout);
    /// `component` names the client in metrics and logs.
    pub(crate) fn from_flags(flags: &crate::flags::KubeFlags, component: &str) -> KubeSettings {
        KubeSettings {
            server: flags.server.clone(),
            kubeconfig: flags.config.clone(),
            context: flags.context.clone(),
            qps: flags.qps,
            burst: flags.burst,
            component: component.into(),
            ..KubeSettings::default()
        }
    }
}

impl Default for KubeSettings {
    fn default() -> Self {
        KubeSettings {
            server: String::new(),
            kubeconfig: String::new(),
            context: String::new(),
            qps: 5.0,
            burst: 10,
            timeout: Duration::from_secs(30),
            component: "main".to_string(),
        }
    }
}

/// A fully resolved connection: URL, TLS material, credentials, default namespace.
#[derive(Clone)]
pub struct ClusterConfig {
    /// `https://host:port` (or `http://` for a plain test server), no trailing slash.
    pub server: String,
    pub tls: TlsSettings,
    pub auth: AuthSettings,
    /// The context's namespace, or the pod's namespace in-cluster, else `default`.
    pub namespace: String,
    /// Where this came from, for messages: `kubeconfig /x (context y)` or `in-cluster`.
    pub origin: String,
}

/// TLS material as PEM bytes (files already read, `-data` fields already decoded).
#[derive(Clone, Default)]
pub struct TlsSettings {
    pub(crate) ca_pem: Option<Vec<u8>>,
    pub(crate) insecure_skip_verify: bool,
    pub(crate) server_name: Option<String>,
    pub(crate) client_cert_pem: Option<Vec<u8>>,
    pub(crate) client_key_pem: Option<Vec<u8>>,
}

/// How requests authenticate.
#[derive(Clone, Default)]
pub enum AuthSettings {
    /// Nothing, or a client certificate only.
    #[default]
    None,
    /// A fixed bearer token.
    Token(String),
    /// A bearer token read from a file and re-read when the file changes.
    TokenFile(PathBuf),
    /// HTTP basic auth.
    Basic { username: String, password: String },
    /// An exec credential plugin; `dir` resolves a relative command.
    Exec {
        config: vendor_k8s_types::ExecConfig,
        dir: PathBuf,
        cluster: vendor_k8s_types::ExecCluster,
    },
}

impl std::fmt::Debug for ClusterConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let auth = match &self.auth {
            AuthSettings::None => "none",
            AuthSettings::Token(_) => "token",
            AuthSettings::TokenFile(_) => "token file",
            AuthSettings::Basic { .. } => "basic",
            AuthSettings::Exec { .. } => "exec plugin",
        };
        f.debug_struct("ClusterConfig")
            .field("server", &self.server)
            .field("auth", &auth)
            .field("client_cert", &self.tls.client_cert_pem.is_some())
            .field("namespace", &self.namespace)
            .field("origin", &self.origin)
            .finish()
    }
}

/// Reads environment variables; tests pass a map instead of the process env.
pub(crate) type EnvFn<'a> = &'a dyn Fn(&str) -> Option<String>;

/// The process environment, skipping empty values.
pub(crate) fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Resolves settings + environment into a [`ClusterConfig`], following the
/// precedence in the module doc.
pub(crate) fn resolve(settings: &KubeSettings, env: EnvFn<'_>) -> Result<ClusterConfig, KubeError> {
    let mut cfg = match kubeconfig_paths(settings, env)? {
        Some(paths) => kubeconfig::load(&paths, &settings.context)?,
        None => match in_cluster(env)? {
            Some(c) => c,
            None if !settings.server.is_empty() => ClusterConfig {
                server: String::new(),
                tls: TlsSettings::default(),
                auth: AuthSettings::None,
                namespace: "default".to_string(),
                origin: "--kube-server".to_string(),
            },
            None => {
                return Err(KubeError::NoConfig(
                    "no --kube-config/KUBE_CONFIG, KUBECONFIG or ~/.kube/config, and \
                     KUBERNETES_SERVICE_HOST is not set"
                        .to_string(),
                ));
            }
        },
    };
    if !settings.server.is_empty() {
        cfg.server = settings.server.clone();
    }
    cfg.server = normalize_server(&cfg.server, &cfg.origin)?;
    Ok(cfg)
}

/// Which kubeconfig files to load, or None to fall through to in-cluster.
fn kubeconfig_paths(
    settings: &KubeSettings,
    env: EnvFn<'_>,
) -> Result<Option<Vec<PathBuf>>, KubeError> {
    if !settings.kubeconfig.is_empty() {
        let p = PathBuf::from(&settings.kubeconfig);
        if !p.is_file() {
            return Err(KubeError::config(
                &settings.kubeconfig,
                "",
                "",
                "file does not exist",
            ));
        }
        return Ok(Some(vec![p]));
    }
    if let Some(list) = env("KUBECONFIG") {
        // kubectl skips missing entries of the list; an all-missing list falls through.
        let paths: Vec<PathBuf> = list
            .split(':')
            .filter(|s| !s.is_empty())
            .map(PathBuf::from)
            .filter(|p| p.is_file())
            .collect();
        if !paths.is_empty() {
            return Ok(Some(paths));
        }
    }
    if let Some(home) = env("HOME") {
        let p = Path::new(&home).join(".kube").join("config");
        if p.is_file() {
            return Ok(Some(vec![p]));
        }
    }
    Ok(None)
}

/// The in-cluster config from `KUBERNETES_SERVICE_HOST`/`PORT` and the mounted
/// service-account files, or None outside a cluster.
fn in_cluster(env: EnvFn<'_>) -> Result<Option<ClusterConfig>, KubeError> {
    let (Some(host), Some(port)) = (
        env("KUBERNETES_SERVICE_HOST"),
        env("KUBERNETES_SERVICE_PORT"),
    ) else {
        return Ok(None);
    };
    let dir = PathBuf::from(
        env("KUBE_SERVICE_ACCOUNT_DIR").unwrap_or_else(|| SERVICE_ACCOUNT_DIR.into()),
    );
    let origin = format!("in-cluster ({})", dir.display());
    let token = dir.join("token");
    if !token.is_file() {
        return Err(KubeError::config(
            &origin,
            "",
            "token",
            format!("{} does not exist", token.display()),
        ));
    }
    let ca_path = dir.join("ca.crt");
    let ca =
        crate::bounded_read::read(&ca_path, crate::bounded_read::MAX_CONFIG_FILE).map_err(|e| {
            KubeError::config(&origin, "", "ca.crt", format!("{}: {e}", ca_path.display()))
        })?;
    let namespace = crate::bounded_read::read_to_string(&dir.join("namespace"), 4096)
        .map(|s| s.trim().to_string())
        .unwrap_or_default();
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    Ok(Some(ClusterConfig {
        server: format!("https://{host}:{port}"),
        tls: TlsSettings {
            ca_pem: Some(ca),
            ..TlsSettings::default()
        },
        auth: AuthSettings::TokenFile(token),
        namespace: if namespace.is_empty() {
            "default".to_string()
        } else {
            namespace
        },
        origin,
    }))
}

/// Checks the scheme and drops a trailing slash.
fn normalize_server(server: &str, origin: &str) -> Result<String, KubeError> {
    let s = server.trim().trim_end_matches('/');
    if s.is_empty() {
        return Err(KubeError::config(origin, "", "server", "no API server URL"));
    }
    if !(s.starts_with("https://") || s.starts_with("http://")) {
        return Err(KubeError::config(
            origin,
            "",
            "server",
            format!("'{s}' is not an http(s) URL"),
        ));
    }
    Ok(s.to_string())
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env_of(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> + use<> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    #[test]
    fn nothing_configured_is_a_clear_error() {
        let e = resolve(&KubeSettings::default(), &env_of(&[])).unwrap_err();
        assert!(e.to_string().contains("KUBERNETES_SERVICE_HOST"), "{e}");
    }

    #[test]
    fn server_flag_alone_gives_unauthenticated_client() {
        let s = KubeSettings {
            server: "http://127.0.0.1:8080/".into(),
            ..Default::default()
        };
        let c = resolve(&s, &env_of(&[])).unwrap();
        assert_eq!(c.server, "http://127.0.0.1:8080");
        assert!(matches!(c.auth, AuthSettings::None));
    }

    #[test]
    fn in_cluster_reads_service_account_dir() {
        let dir = tempdir("incluster");
        std::fs::write(dir.join("token"), "tok").unwrap();
        std::fs::write(dir.join("ca.crt"), "CA").unwrap();
        std::fs::write(dir.join("namespace"), "ops\n").unwrap();
        let d = dir.to_string_lossy().to_string();
        let env = env_of(&[
            ("KUBERNETES_SERVICE_HOST", "10.0.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
            ("KUBE_SERVICE_ACCOUNT_DIR", &d),
        ]);
        let c = resolve(&KubeSettings::default(), &env).unwrap();
        assert_eq!(c.server, "https://10.0.0.1:443");
        assert_eq!(c.namespace, "ops");
        assert_eq!(c.tls.ca_pem.as_deref(), Some(&b"CA"[..]));
        assert!(matches!(c.auth, AuthSettings::TokenFile(ref p) if p.ends_with("token")));
        // --kube-server wins over in-cluster host.
        let s = KubeSettings {
            server: "https://other:6443".into(),
            ..Default::default()
        };
        assert_eq!(resolve(&s, &env).unwrap().server, "https://other:6443");
    }

    /// Issue 11 (found by fuzzing): a kubeconfig naming `/dev/zero` as its CA file
    /// is an error naming the file, not an unbounded read.
    #[test]
    fn a_device_as_certificate_file_is_refused() {
        let dir = tempdir("devzero");
        let kc = dir.join("config");
        std::fs::write(
            &kc,
            "clusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443\n    certificate-authority: /dev/zero\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\ncurrent-context: x\nusers:\n- name: u\n  user: {token: t}\n",
        )
        .unwrap();
        let s = KubeSettings {
            kubeconfig: kc.to_string_lossy().into_owned(),
            ..Default::default()
        };
        let e = resolve(&s, &env_of(&[])).unwrap_err().to_string();
        assert!(e.contains("/dev/zero: not a regular file"), "{e}");
    }

    #[test]
    fn in_cluster_ipv6_host_is_bracketed() {
        let dir = tempdir("incluster6");
        std::fs::write(dir.join("token"), "tok").unwrap();
        std::fs::write(dir.join("ca.crt"), "CA").unwrap();
        let d = dir.to_string_lossy().to_string();
        let env = env_of(&[
            ("KUBERNETES_SERVICE_HOST", "fd00::1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
            ("KUBE_SERVICE_ACCOUNT_DIR", &d),
        ]);
        let c = resolve(&KubeSettings::default(), &env).unwrap();
        assert_eq!(c.server, "https://[fd00::1]:443");
        assert_eq!(c.namespace, "default");
    }

    #[test]
    fn explicit_kubeconfig_must_exist() {
        let s = KubeSettings {
            kubeconfig: "/nonexistent/kc".into(),
            ..Default::default()
        };
        let e = resolve(&s, &env_of(&[])).unwrap_err().to_string();
        assert!(
            e.contains("/nonexistent/kc") && e.contains("does not exist"),
            "{e}"
        );
    }

    pub(crate) fn tempdir(tag: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("kube-cfg-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }
}
