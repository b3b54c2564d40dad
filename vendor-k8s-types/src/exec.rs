//! `client.authentication.k8s.io` ExecCredential, v1 and v1beta1 (same shape): what
//! a credential plugin reads from `KUBERNETES_EXEC_INFO` and prints on stdout.

use serde::{Deserialize, Serialize};

/// The whole document, in both directions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecCredential {
    #[serde(default)]
    pub api_version: String,
    #[serde(default)]
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<ExecCredentialSpec>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<ExecCredentialStatus>,
}

/// What the client tells the plugin.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecCredentialSpec {
    pub interactive: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<ExecCluster>,
}

/// Cluster information passed when the kubeconfig sets `provideClusterInfo`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub struct ExecCluster {
    pub server: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_authority_data: Option<String>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub insecure_skip_tls_verify: bool,
}

/// What the plugin answers: a bearer token or a client certificate, and when it
/// expires (RFC 3339; absent means "until a request is refused").
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExecCredentialStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expiration_timestamp: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_certificate_data: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_key_data: Option<String>,
}
