//! The kubeconfig file (`clientcmd/api/v1.Config`), the fields a client connects with.
//! Cluster and user keys are kebab-case except `tokenFile` and the exec block, as in
//! kubectl's files.

use serde::{Deserialize, Serialize};

/// A whole kubeconfig file.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Kubeconfig {
    #[serde(default)]
    pub current_context: String,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub clusters: Vec<NamedCluster>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub contexts: Vec<NamedContext>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub users: Vec<NamedAuthInfo>,
}

/// `{name, cluster}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamedCluster {
    pub name: String,
    #[serde(default)]
    pub cluster: Cluster,
}

/// Where the API server is and how to trust it.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct Cluster {
    #[serde(default)]
    pub server: String,
    #[serde(default)]
    pub certificate_authority: Option<String>,
    #[serde(default)]
    pub certificate_authority_data: Option<String>,
    #[serde(default)]
    pub insecure_skip_tls_verify: bool,
    #[serde(default)]
    pub tls_server_name: Option<String>,
    #[serde(default)]
    pub proxy_url: Option<String>,
}

/// `{name, context}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamedContext {
    pub name: String,
    #[serde(default)]
    pub context: Context,
}

/// A (cluster, user, namespace) triple.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Context {
    #[serde(default)]
    pub cluster: String,
    #[serde(default)]
    pub user: String,
    #[serde(default)]
    pub namespace: Option<String>,
}

/// `{name, user}`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct NamedAuthInfo {
    pub name: String,
    #[serde(default)]
    pub user: AuthInfo,
}

/// How to authenticate. Debug is derived only for tests' sake; the client never
/// prints an AuthInfo.
#[derive(Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct AuthInfo {
    #[serde(default)]
    pub client_certificate: Option<String>,
    #[serde(default)]
    pub client_certificate_data: Option<String>,
    #[serde(default)]
    pub client_key: Option<String>,
    #[serde(default)]
    pub client_key_data: Option<String>,
    #[serde(default)]
    pub token: Option<String>,
    #[serde(default, rename = "tokenFile")]
    pub token_file: Option<String>,
    #[serde(default)]
    pub username: Option<String>,
    #[serde(default)]
    pub password: Option<String>,
    #[serde(default)]
    pub exec: Option<ExecConfig>,
    /// Legacy auth-provider plugins (gcp, azure, oidc) are not supported; kept to
    /// name them in the error.
    #[serde(default)]
    pub auth_provider: Option<serde_json::Value>,
}

impl std::fmt::Debug for AuthInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Secrets are never printed, only whether they are present.
        f.debug_struct("AuthInfo")
            .field("client_certificate", &self.client_certificate)
            .field("client_key", &self.client_key)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("token_file", &self.token_file)
            .field("username", &self.username)
            .field("exec", &self.exec.as_ref().map(|e| &e.command))
            .finish_non_exhaustive()
    }
}

/// An exec credential plugin.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecConfig {
    pub command: String,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub args: Vec<String>,
    #[serde(default, deserialize_with = "null_as_empty")]
    pub env: Vec<ExecEnvVar>,
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub install_hint: Option<String>,
    #[serde(default)]
    pub provide_cluster_info: bool,
    #[serde(default)]
    pub interactive_mode: Option<String>,
}

/// One `{name, value}` of an exec plugin's environment.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ExecEnvVar {
    pub name: String,
    #[serde(default)]
    pub value: String,
}

fn null_as_empty<'de, D, T>(d: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(d)?.unwrap_or_default())
}
