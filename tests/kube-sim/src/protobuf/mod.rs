//! Decoding of Kubernetes protobuf request bodies
//! (`application/vnd.kubernetes.protobuf`): the `k8s\0` magic, the
//! `runtime.Unknown` envelope, and the few message types typed clients (kubectl
//! create, helm's release Secrets, leader election) send without a JSON
//! fallback: ConfigMap, Secret, Namespace, ServiceAccount, Lease and
//! DeleteOptions. Output is the JSON form the rest of kube-sim works on.
//! Layout: `wire` (field reader and table-driven decoding), `messages` (the
//! message tables), `encode` (builders for tests).

pub mod encode;
mod messages;
mod wire;

use serde_json::{Value, json};
use wire::{Decoder, Kind, bytes, each, simple};

const MAGIC: &[u8] = b"k8s\x00";

/// Whether a body carries the protobuf magic prefix.
pub fn is_protobuf(body: &[u8]) -> bool {
    body.starts_with(MAGIC)
}

/// Decodes an enveloped protobuf body to JSON (with apiVersion and kind set).
pub fn decode(body: &[u8]) -> Result<Value, String> {
    let inner = body
        .strip_prefix(MAGIC)
        .ok_or("missing k8s protobuf magic prefix")?;
    let (mut type_meta, mut raw): (Value, &[u8]) = (json!({}), &[]);
    each(inner, |n, f| {
        match n {
            1 => {
                type_meta = simple(
                    bytes(&f)?,
                    &[(1, "apiVersion", Kind::Str), (2, "kind", Kind::Str)],
                )?
            }
            2 => raw = bytes(&f)?,
            _ => {}
        }
        Ok(())
    })?;
    let api_version = type_meta["apiVersion"].as_str().unwrap_or("").to_string();
    let kind = type_meta["kind"].as_str().unwrap_or("").to_string();
    let decoder: Decoder = match kind.as_str() {
        "ConfigMap" => messages::config_map,
        "Secret" => messages::secret,
        "Namespace" => messages::namespace,
        "ServiceAccount" => messages::service_account,
        "Lease" => messages::lease,
        "DeleteOptions" => messages::delete_options,
        other => {
            return Err(format!(
                "protobuf decoding of kind {other:?} ({api_version}) is not supported by kube-sim"
            ));
        }
    };
    let mut obj = decoder(raw)?;
    obj["apiVersion"] = json!(if api_version.is_empty() {
        "v1".to_string()
    } else {
        api_version
    });
    obj["kind"] = json!(kind);
    Ok(obj)
}

#[cfg(test)]
mod tests {
    use super::decode;
    use super::encode::*;

    #[test]
    fn decodes_secret_and_delete_options() {
        let mut meta = Vec::new();
        bytes_field(1, b"s1", &mut meta);
        map_entry(11, "owner", b"helm", &mut meta);
        let mut msg = Vec::new();
        bytes_field(1, &meta, &mut msg);
        map_entry(2, "release", b"\x00\x01", &mut msg);
        bytes_field(3, b"helm.sh/release.v1", &mut msg);
        let v = decode(&envelope("v1", "Secret", &msg)).unwrap();
        assert_eq!(v["metadata"]["labels"]["owner"], "helm");
        assert_eq!(v["data"]["release"], "AAE=");
        assert_eq!(v["type"], "helm.sh/release.v1");

        let mut d = Vec::new();
        varint_field(1, 0, &mut d);
        bytes_field(4, b"Foreground", &mut d);
        let v = decode(&envelope("meta.k8s.io/v1", "DeleteOptions", &d)).unwrap();
        assert_eq!(v["propagationPolicy"], "Foreground");
        assert_eq!(v["gracePeriodSeconds"], 0);
    }

    #[test]
    fn rejects_truncated() {
        assert!(decode(b"k8s\x00\x0a\x05ab").is_err());
        assert!(decode(b"{}").is_err());
    }

    #[test]
    fn decodes_lease_with_micro_time() {
        let mut t = Vec::new();
        varint_field(1, 1_800_000_000, &mut t);
        varint_field(2, 123_456_000, &mut t);
        let mut spec = Vec::new();
        bytes_field(1, b"pod-a", &mut spec);
        varint_field(2, 15, &mut spec);
        bytes_field(4, &t, &mut spec);
        let mut meta = Vec::new();
        bytes_field(1, b"leader", &mut meta);
        bytes_field(3, b"kube-system", &mut meta);
        let mut msg = Vec::new();
        bytes_field(1, &meta, &mut msg);
        bytes_field(2, &spec, &mut msg);
        let v = decode(&envelope("coordination.k8s.io/v1", "Lease", &msg)).unwrap();
        assert_eq!(v["apiVersion"], "coordination.k8s.io/v1");
        assert_eq!(v["spec"]["holderIdentity"], "pod-a");
        assert_eq!(v["spec"]["leaseDurationSeconds"], 15);
        assert_eq!(v["spec"]["renewTime"], "2027-01-15T08:00:00.123456Z");
        assert_eq!(v["metadata"]["namespace"], "kube-system");
    }
}
