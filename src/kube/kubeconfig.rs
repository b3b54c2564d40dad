//! Loading kubeconfig files: parse each YAML file, merge a list as kubectl does (the
//! first file that defines a cluster, context or user name wins, and the first
//! current-context wins), pick the context, then read certificate files (relative
//! paths are relative to the file that named them) and decode `-data` fields.
//! Startup only, main thread.

use super::config::{AuthSettings, ClusterConfig, TlsSettings};
use super::error::KubeError;
use base64::Engine;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use vendor_k8s_types::{AuthInfo, Cluster, Context, ExecCluster, Kubeconfig};

/// An entry plus the file it came from.
struct Origin<T> {
    value: T,
    file: PathBuf,
}

/// The merged view of several kubeconfig files.
#[derive(Default)]
struct Merged {
    current_context: Option<String>,
    clusters: BTreeMap<String, Origin<Cluster>>,
    contexts: BTreeMap<String, Origin<Context>>,
    users: BTreeMap<String, Origin<AuthInfo>>,
}

/// Loads and merges `paths`, then resolves `context` (or current-context).
pub(crate) fn load(paths: &[PathBuf], context: &str) -> Result<ClusterConfig, KubeError> {
    let mut merged = Merged::default();
    for p in paths {
        merge(&mut merged, parse_file(p)?, p);
    }
    let files = paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    let ctx_name = if context.is_empty() {
        merged.current_context.clone().unwrap_or_default()
    } else {
        context.to_string()
    };
    if ctx_name.is_empty() {
        return Err(KubeError::config(
            &files,
            "",
            "current-context",
            "no current-context set; pass --kube-context",
        ));
    }
    let Some(ctx) = merged.contexts.get(&ctx_name) else {
        return Err(KubeError::config(
            &files,
            &ctx_name,
            "contexts",
            "no such context",
        ));
    };
    let ctx_file = ctx.file.display().to_string();
    let Some(cluster) = merged.clusters.get(&ctx.value.cluster) else {
        let field = format!("contexts[{ctx_name}].cluster");
        return Err(KubeError::config(
            &ctx_file,
            &ctx_name,
            &field,
            format!("no cluster named '{}'", ctx.value.cluster),
        ));
    };
    let user = match ctx.value.user.as_str() {
        "" => None,
        name => match merged.users.get(name) {
            Some(u) => Some(u),
            None => {
                let field = format!("contexts[{ctx_name}].user");
                return Err(KubeError::config(
                    &ctx_file,
                    &ctx_name,
                    &field,
                    format!("no user named '{name}'"),
                ));
            }
        },
    };
    let mut tls = cluster_tls(cluster, &ctx.value.cluster, &ctx_name)?;
    let auth = match user {
        Some(u) => user_auth(u, &ctx.value.user, &ctx_name, &mut tls, cluster)?,
        None => AuthSettings::None,
    };
    Ok(ClusterConfig {
        server: cluster.value.server.clone(),
        tls,
        auth,
        namespace: ctx
            .value
            .namespace
            .clone()
            .filter(|n| !n.is_empty())
            .unwrap_or_else(|| "default".into()),
        origin: format!("{files} (context {ctx_name})"),
    })
}

fn parse_file(p: &Path) -> Result<Kubeconfig, KubeError> {
    let f = p.display().to_string();
    let text = crate::bounded_read::read_to_string(p, crate::bounded_read::MAX_CONFIG_FILE)
        .map_err(|e| KubeError::config(&f, "", "", e.to_string()))?;
    if text.trim().is_empty() {
        return Ok(Kubeconfig::default());
    }
    crate::yaml_depth::check(&text).map_err(|e| KubeError::config(&f, "", "", e))?;
    serde_yaml::from_str(&text)
        .map_err(|e| KubeError::config(&f, "", "", format!("invalid kubeconfig: {e}")))
}

fn merge(m: &mut Merged, kc: Kubeconfig, file: &Path) {
    if m.current_context.is_none() && !kc.current_context.is_empty() {
        m.current_context = Some(kc.current_context);
    }
    let o = |value| Origin {
        value,
        file: file.to_path_buf(),
    };
    for c in kc.clusters {
        m.clusters.entry(c.name).or_insert_with(|| o(c.cluster));
    }
    let o = |value| Origin {
        value,
        file: file.to_path_buf(),
    };
    for c in kc.contexts {
        m.contexts.entry(c.name).or_insert_with(|| o(c.context));
    }
    let o = |value| Origin {
        value,
        file: file.to_path_buf(),
    };
    for u in kc.users {
        m.users.entry(u.name).or_insert_with(|| o(u.user));
    }
}

/// Reads `data` (base64) or `path` (relative to the kubeconfig's directory).
fn data_or_file(
    data: &Option<String>,
    path: &Option<String>,
    file: &Path,
    ctx: &str,
    field: &str,
) -> Result<Option<Vec<u8>>, KubeError> {
    let f = file.display().to_string();
    if let Some(d) = data.as_deref().filter(|d| !d.is_empty()) {
        let clean: String = d.split_whitespace().collect();
        return base64::engine::general_purpose::STANDARD
            .decode(clean.as_bytes())
            .map(Some)
            .map_err(|e| {
                KubeError::config(
                    &f,
                    ctx,
                    &format!("{field}-data"),
                    format!("invalid base64: {e}"),
                )
            });
    }
    match path.as_deref().filter(|p| !p.is_empty()) {
        None => Ok(None),
        Some(p) => {
            let full = relative_to(file, p);
            crate::bounded_read::read(&full, crate::bounded_read::MAX_CONFIG_FILE)
                .map(Some)
                .map_err(|e| KubeError::config(&f, ctx, field, format!("{}: {e}", full.display())))
        }
    }
}

/// Resolves `p` against the directory of the kubeconfig `file`.
pub(crate) fn relative_to(file: &Path, p: &str) -> PathBuf {
    let path = Path::new(p);
    if path.is_absolute() {
        return path.to_path_buf();
    }
    file.parent().unwrap_or(Path::new(".")).join(path)
}

fn cluster_tls(c: &Origin<Cluster>, name: &str, ctx: &str) -> Result<TlsSettings, KubeError> {
    let field = format!("clusters[{name}].certificate-authority");
    let ca = data_or_file(
        &c.value.certificate_authority_data,
        &c.value.certificate_authority,
        &c.file,
        ctx,
        &field,
    )?;
    if c.value.server.is_empty() {
        let f = c.file.display().to_string();
        return Err(KubeError::config(
            &f,
            ctx,
            &format!("clusters[{name}].server"),
            "missing",
        ));
    }
    Ok(TlsSettings {
        ca_pem: ca,
        insecure_skip_verify: c.value.insecure_skip_tls_verify,
        server_name: c.value.tls_server_name.clone().filter(|s| !s.is_empty()),
        client_cert_pem: None,
        client_key_pem: None,
    })
}

fn user_auth(
    u: &Origin<AuthInfo>,
    name: &str,
    ctx: &str,
    tls: &mut TlsSettings,
    cluster: &Origin<Cluster>,
) -> Result<AuthSettings, KubeError> {
    let f = u.file.display().to_string();
    let a = &u.value;
    let cert_field = format!("users[{name}].client-certificate");
    let key_field = format!("users[{name}].client-key");
    tls.client_cert_pem = data_or_file(
        &a.client_certificate_data,
        &a.client_certificate,
        &u.file,
        ctx,
        &cert_field,
    )?;
    tls.client_key_pem = data_or_file(&a.client_key_data, &a.client_key, &u.file, ctx, &key_field)?;
    match (&tls.client_cert_pem, &tls.client_key_pem) {
        (Some(_), None) => {
            return Err(KubeError::config(
                &f,
                ctx,
                &key_field,
                "client certificate given without a key",
            ));
        }
        (None, Some(_)) => {
            return Err(KubeError::config(
                &f,
                ctx,
                &cert_field,
                "client key given without a certificate",
            ));
        }
        _ => {}
    }
    if a.auth_provider.is_some() {
        let field = format!("users[{name}].auth-provider");
        return Err(KubeError::config(
            &f,
            ctx,
            &field,
            "auth-provider plugins are not supported; use an exec plugin",
        ));
    }
    if let Some(t) = a.token.as_deref().filter(|t| !t.is_empty()) {
        return Ok(AuthSettings::Token(t.trim().to_string()));
    }
    if let Some(p) = a.token_file.as_deref().filter(|t| !t.is_empty()) {
        let full = relative_to(&u.file, p);
        if !full.is_file() {
            let field = format!("users[{name}].tokenFile");
            return Err(KubeError::config(
                &f,
                ctx,
                &field,
                format!("{} does not exist", full.display()),
            ));
        }
        return Ok(AuthSettings::TokenFile(full));
    }
    if let Some(exec) = &a.exec {
        if exec.command.is_empty() {
            return Err(KubeError::config(
                &f,
                ctx,
                &format!("users[{name}].exec.command"),
                "empty",
            ));
        }
        let api = exec.api_version.as_str();
        if api != "client.authentication.k8s.io/v1" && api != "client.authentication.k8s.io/v1beta1"
        {
            let field = format!("users[{name}].exec.apiVersion");
            return Err(KubeError::config(
                &f,
                ctx,
                &field,
                format!("'{api}' is not supported (v1 or v1beta1)"),
            ));
        }
        let ca_data = tls
            .ca_pem
            .as_ref()
            .map(|c| base64::engine::general_purpose::STANDARD.encode(c));
        return Ok(AuthSettings::Exec {
            config: exec.clone(),
            dir: u.file.parent().unwrap_or(Path::new(".")).to_path_buf(),
            cluster: ExecCluster {
                server: cluster.value.server.clone(),
                certificate_authority_data: ca_data,
                insecure_skip_tls_verify: cluster.value.insecure_skip_tls_verify,
            },
        });
    }
    match (&a.username, &a.password) {
        (Some(user), Some(pass)) if !user.is_empty() => Ok(AuthSettings::Basic {
            username: user.clone(),
            password: pass.clone(),
        }),
        _ => Ok(AuthSettings::None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::config::tests::tempdir;

    const A: &str = r#"
apiVersion: v1
kind: Config
current-context: a
clusters:
- name: c1
  cluster:
    server: https://one:6443
    certificate-authority-data: Q0EtT05F
contexts:
- name: a
  context: {cluster: c1, user: u1, namespace: team-a}
- name: shared
  context: {cluster: c1, user: u1}
users:
- name: u1
  user:
    token: secret-one
"#;
    const B: &str = r#"
current-context: b
clusters:
- name: c1
  cluster: {server: "https://ignored:1"}
- name: c2
  cluster:
    server: https://two:6443
    certificate-authority: ca.pem
    insecure-skip-tls-verify: true
contexts:
- name: b
  context: {cluster: c2, user: u2}
- name: shared
  context: {cluster: c2, user: u2}
users:
- name: u2
  user: {tokenFile: tok}
- name: exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./plugin.sh
      args: [a]
"#;

    fn setup(tag: &str) -> (PathBuf, PathBuf) {
        let d = tempdir(tag);
        std::fs::write(d.join("a.yaml"), A).unwrap();
        std::fs::write(d.join("b.yaml"), B).unwrap();
        std::fs::write(d.join("ca.pem"), "CA-TWO").unwrap();
        std::fs::write(d.join("tok"), "t").unwrap();
        (d.join("a.yaml"), d.join("b.yaml"))
    }

    #[test]
    fn merge_first_file_wins() {
        let (a, b) = setup("kc1");
        let c = load(&[a.clone(), b.clone()], "").unwrap();
        assert_eq!(c.server, "https://one:6443");
        assert_eq!(c.namespace, "team-a");
        assert_eq!(c.tls.ca_pem.as_deref(), Some(&b"CA-ONE"[..]));
        assert!(matches!(c.auth, AuthSettings::Token(ref t) if t == "secret-one"));
        // "shared" is defined in both files: a.yaml's definition wins.
        let c = load(&[a.clone(), b.clone()], "shared").unwrap();
        assert_eq!(c.server, "https://one:6443");
        // Reversed order: b's current-context, b's c1 is ignored only when a comes first.
        let c = load(&[b.clone(), a.clone()], "").unwrap();
        assert_eq!(c.server, "https://two:6443");
        assert!(c.tls.insecure_skip_verify);
        assert_eq!(c.tls.ca_pem.as_deref(), Some(&b"CA-TWO"[..]));
        assert!(matches!(c.auth, AuthSettings::TokenFile(ref p) if p.ends_with("tok")));
        assert_eq!(c.namespace, "default");
    }

    #[test]
    fn errors_name_file_context_and_field() {
        let (a, b) = setup("kc2");
        let e = load(std::slice::from_ref(&a), "nope")
            .unwrap_err()
            .to_string();
        assert!(e.contains("a.yaml") && e.contains("'nope'"), "{e}");
        let d = a.parent().unwrap();
        std::fs::write(d.join("bad.yaml"), A.replace("Q0EtT05F", "not%base64")).unwrap();
        let e = load(&[d.join("bad.yaml")], "").unwrap_err().to_string();
        assert!(e.contains("bad.yaml") && e.contains("context 'a'"), "{e}");
        assert!(e.contains("clusters[c1].certificate-authority-data"), "{e}");
        std::fs::write(
            d.join("nouser.yaml"),
            A.replace("user: u1, namespace", "user: ghost, namespace"),
        )
        .unwrap();
        let e = load(&[d.join("nouser.yaml")], "").unwrap_err().to_string();
        assert!(e.contains("contexts[a].user") && e.contains("ghost"), "{e}");
        let _ = b;
    }

    #[test]
    fn token_never_in_errors_or_debug() {
        let (a, _) = setup("kc3");
        let c = load(&[a], "").unwrap();
        assert!(!format!("{c:?}").contains("secret-one"));
    }

    #[test]
    fn exec_user_keeps_dir_for_relative_command() {
        let (a, b) = setup("kc4");
        let d = a.parent().unwrap();
        let x = B.replace(
            "- name: b\n  context: {cluster: c2, user: u2}",
            "- name: b\n  context: {cluster: c2, user: exec}",
        );
        std::fs::write(d.join("x.yaml"), x).unwrap();
        let c = load(&[d.join("x.yaml")], "").unwrap();
        match c.auth {
            AuthSettings::Exec {
                config,
                dir,
                cluster,
            } => {
                assert_eq!(config.command, "./plugin.sh");
                assert_eq!(dir, d);
                assert_eq!(cluster.server, "https://two:6443");
            }
            _ => panic!("expected exec auth"),
        }
        let _ = b;
    }
}
