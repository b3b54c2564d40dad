//! helm's release record as its storage Secrets hold it (`data.release`: the Secret's
//! base64 of helm's own base64 of gzip of the release JSON; helm also reads records
//! that are not gzipped). The addon engine reads two fields of the latest revision —
//! the manifest helm applied and the values it was given — so deciding "unchanged"
//! and checking drift after a restart spawn no helm process (`module_run.rs`).
//! A release Secret is input from the namespace: the record is decoded with the
//! bounded decoder of `crate::inflate`, and every fault is an error naming the Secret.

use base64::Engine;
use serde::Deserialize;

/// Most bytes a release record may expand to (helm's own Secrets hold 1 MiB at most).
const MAX_RECORD: usize = 64 << 20;

/// A release Secret's name and its `data.release` field, as listed.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct StoredRecord {
    /// `sh.helm.release.v1.<name>.v<N>`.
    pub(crate) secret: String,
    /// The field as the API returns it (base64).
    pub(crate) data: String,
}

/// The fields of a release record the engine uses.
#[derive(Debug, Clone, PartialEq, Default, Deserialize)]
pub(crate) struct Record {
    /// The manifest of the revision (post-rendered; helm hooks are not in it).
    #[serde(default)]
    pub(crate) manifest: String,
    /// The values given to the revision (`--values` and `--set-string`).
    #[serde(default)]
    pub(crate) config: serde_json::Value,
}

impl StoredRecord {
    /// The record, decoded; errors name the Secret.
    pub(crate) fn decode(&self) -> Result<Record, RecordError> {
        decode(&self.data).map_err(|problem| RecordError {
            secret: Some(self.secret.clone()),
            problem,
        })
    }
}

/// Decodes a `data.release` field.
pub(crate) fn decode(field: &str) -> Result<Record, Undecodable> {
    let b64 = base64::engine::general_purpose::STANDARD;
    let helm_text = b64
        .decode(field.trim())
        .map_err(|e| Undecodable::Field(e.to_string()))?;
    let packed = b64
        .decode(helm_text.trim_ascii())
        .map_err(|e| Undecodable::Base64(e.to_string()))?;
    let json = if packed.starts_with(&[0x1f, 0x8b]) {
        crate::inflate::gunzip(&packed, MAX_RECORD).map_err(|e| Undecodable::Gzip(e.to_string()))?
    } else {
        packed
    };
    serde_json::from_slice(&json).map_err(|e| Undecodable::Json(e.to_string()))
}

/// What is wrong with a `data.release` field (each layer's own message).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Undecodable {
    /// The field is not base64.
    Field(String),
    /// helm's record inside it is not base64.
    Base64(String),
    /// The gzip stream is broken or too large.
    Gzip(String),
    /// The record is not JSON of a release.
    Json(String),
}

impl std::fmt::Display for Undecodable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Undecodable::Field(e) => write!(f, "data.release is not base64: {e}"),
            Undecodable::Base64(e) => write!(f, "the release record is not base64: {e}"),
            Undecodable::Gzip(e) => write!(f, "the release record: {e}"),
            Undecodable::Json(e) => write!(f, "the release record is not JSON: {e}"),
        }
    }
}

/// A release record that cannot be read: in which Secret, and why.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct RecordError {
    pub(crate) secret: Option<String>,
    pub(crate) problem: Undecodable,
}

impl std::fmt::Display for RecordError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.secret {
            Some(secret) => write!(f, "release Secret {secret}: {}", self.problem),
            None => self.problem.fmt(f),
        }
    }
}

impl std::error::Error for RecordError {}

#[cfg(test)]
mod tests {
    use super::*;

    const HELM4: &[u8] = include_bytes!("../../testdata/inflate/helm4-release.gz");

    fn field(packed: &[u8]) -> String {
        let b64 = base64::engine::general_purpose::STANDARD;
        b64.encode(b64.encode(packed))
    }

    #[test]
    fn reads_manifest_and_values_of_a_helm_4_record() {
        let record = decode(&field(HELM4)).unwrap();
        assert_eq!(record.config, serde_json::json!({"a": "x"}));
        let objects = crate::addon::release::helm::manifest_objects(&record.manifest).unwrap();
        let kinds: Vec<&str> = objects.iter().map(|o| o.kind.as_str()).collect();
        assert_eq!(kinds, ["ConfigMap", "Service"]);
    }

    #[test]
    fn reads_a_record_that_is_not_gzipped() {
        let record = decode(&field(br#"{"manifest":"m","config":{"b":1}}"#)).unwrap();
        assert_eq!(record.manifest, "m");
        assert_eq!(record.config, serde_json::json!({"b": 1}));
    }

    #[test]
    fn faults_name_the_secret_and_the_layer() {
        let stored = |data: String| StoredRecord {
            secret: "sh.helm.release.v1.x.v1".into(),
            data,
        };
        let e = stored("%%".into()).decode().unwrap_err().to_string();
        assert!(
            e.contains("sh.helm.release.v1.x.v1") && e.contains("not base64"),
            "{e}"
        );
        let mut cut = HELM4.to_vec();
        cut.truncate(100);
        let e = stored(field(&cut)).decode().unwrap_err().to_string();
        assert!(e.contains("truncated"), "{e}");
        let e = stored(field(b"not json")).decode().unwrap_err().to_string();
        assert!(e.contains("not JSON"), "{e}");
    }
}
