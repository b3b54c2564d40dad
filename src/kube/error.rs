//! The one error type of the Kubernetes client. Every variant says where the problem
//! is (kubeconfig file, context and field; request verb and path; hook and binding
//! for discovery misses) so a user can act on the message alone. No variant ever
//! carries a token, a password or a key. Used by every thread that calls the client.

use std::fmt;

/// Everything the client can fail with.
#[derive(Debug)]
#[non_exhaustive]
pub enum KubeError {
    /// A kubeconfig (or in-cluster) setting is missing or invalid.
    Config {
        /// The file the setting came from (or `in-cluster`, `--kube-server`).
        file: String,
        /// The context being used, empty when not known yet.
        context: String,
        /// The field at fault, e.g. `users[admin].client-key-data`.
        field: String,
        message: String,
    },
    /// No kubeconfig was found and the process does not run inside a cluster.
    NoConfig(String),
    /// TLS material could not be used (bad PEM, key not matching the certificate).
    Tls { what: String, message: String },
    /// An exec credential plugin failed or printed something unusable.
    Exec { command: String, message: String },
    /// The request never got an HTTP answer: connection, TLS or timeout failure.
    Transport {
        verb: &'static str,
        path: String,
        message: String,
    },
    /// The server answered with an error status; `message` is the Status message.
    Api {
        verb: &'static str,
        path: String,
        code: u16,
        reason: String,
        message: String,
        /// The server's `Retry-After` (429 and 503 answers may carry one).
        retry_after: Option<std::time::Duration>,
    },
    /// The server's answer could not be decoded.
    Decode { what: String, message: String },
    /// Discovery knows no resource for this kind; `context` names the hook and binding.
    UnknownKind {
        context: String,
        api_version: String,
        kind: String,
    },
    /// A label or field selector is malformed.
    Selector(String),
    /// A call lacked something it needs (a namespace for a namespaced object, a name).
    Invalid(String),
}

impl KubeError {
    /// How long the server asked us to wait before trying again, if it did.
    pub(crate) fn retry_after(&self) -> Option<std::time::Duration> {
        match self {
            KubeError::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }

    /// The HTTP status code of an API error, if this is one.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            KubeError::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    /// 404 from the server.
    pub fn is_not_found(&self) -> bool {
        self.status_code() == Some(404)
    }

    /// 409 from the server (AlreadyExists or Conflict).
    pub fn is_conflict(&self) -> bool {
        self.status_code() == Some(409)
    }

    /// 410 Gone / Expired: the resourceVersion or continue token is too old.
    pub(crate) fn is_gone(&self) -> bool {
        self.status_code() == Some(410)
    }

    pub(crate) fn config(
        file: &str,
        context: &str,
        field: &str,
        message: impl Into<String>,
    ) -> Self {
        KubeError::Config {
            file: file.to_string(),
            context: context.to_string(),
            field: field.to_string(),
            message: message.into(),
        }
    }
}

impl fmt::Display for KubeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KubeError::Config {
                file,
                context,
                field,
                message,
            } => {
                write!(f, "kube config {file}")?;
                if !context.is_empty() {
                    write!(f, ", context '{context}'")?;
                }
                if !field.is_empty() {
                    write!(f, ", field '{field}'")?;
                }
                write!(f, ": {message}")
            }
            KubeError::NoConfig(m) => write!(f, "no Kubernetes configuration found: {m}"),
            KubeError::Tls { what, message } => write!(f, "TLS {what}: {message}"),
            KubeError::Exec { command, message } => {
                write!(f, "exec credential plugin '{command}': {message}")
            }
            KubeError::Transport {
                verb,
                path,
                message,
            } => write!(f, "{verb} {path}: {message}"),
            KubeError::Api {
                verb,
                path,
                code,
                reason,
                message,
                ..
            } => {
                write!(f, "{verb} {path}: {code}")?;
                if !reason.is_empty() {
                    write!(f, " {reason}")?;
                }
                if !message.is_empty() {
                    write!(f, ": {message}")?;
                }
                Ok(())
            }
            KubeError::Decode { what, message } => write!(f, "decoding {what}: {message}"),
            KubeError::UnknownKind {
                context,
                api_version,
                kind,
            } => write!(
                f,
                "{context}: cannot get GroupVersionResource info for apiVersion '{api_version}' \
                 kind '{kind}' from api-server; possibly the CRD is not created before \
                 informers are started"
            ),
            KubeError::Selector(m) => write!(f, "selector: {m}"),
            KubeError::Invalid(m) => write!(f, "{m}"),
        }
    }
}

impl std::error::Error for KubeError {}
