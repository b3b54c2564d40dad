//! The `coordination.k8s.io/v1` Lease that holds leadership: its record (holder,
//! duration, acquire and renew times, transitions) and the three calls the elector
//! makes through our kube client — get, create, and a replace that carries the
//! resourceVersion it read, so two replicas writing at once cannot both win (the
//! loser gets 409 Conflict). Times are written as Kubernetes MicroTime in UTC and
//! never read back for decisions: the elector compares records, not clocks.

use crate::kube::{Client, KubeError, Resource};
use serde_json::{Value, json};

/// The leadership fields of a Lease's spec.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Record {
    /// Empty when nobody holds the lease (released).
    pub(crate) holder: String,
    pub(crate) lease_duration_secs: i64,
    pub(crate) acquire_time: String,
    pub(crate) renew_time: String,
    pub(crate) transitions: i64,
}

impl Record {
    /// The record in a Lease object (missing fields read as empty or 0).
    pub(crate) fn from_lease(lease: &Value) -> Record {
        let spec = &lease["spec"];
        let text = |k: &str| spec[k].as_str().unwrap_or_default().to_string();
        Record {
            holder: text("holderIdentity"),
            lease_duration_secs: spec["leaseDurationSeconds"].as_i64().unwrap_or(0),
            acquire_time: text("acquireTime"),
            renew_time: text("renewTime"),
            transitions: spec["leaseTransitions"].as_i64().unwrap_or(0),
        }
    }

    /// The spec as the API wants it.
    pub(crate) fn spec(&self) -> Value {
        json!({
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_secs,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        })
    }
}

/// The current time as a Kubernetes MicroTime (`2006-01-02T15:04:05.000000Z`).
pub(crate) fn micro_time_now() -> String {
    chrono::Utc::now()
        .format("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string()
}

/// One Lease, read and written through the operator's kube client.
pub(crate) struct LeaseClient {
    client: Client,
    resource: Resource,
    namespace: String,
    pub(crate) name: String,
}

impl LeaseClient {
    pub(crate) fn new(client: Client, namespace: &str, name: &str) -> LeaseClient {
        let resource = Resource {
            group: "coordination.k8s.io".into(),
            version: "v1".into(),
            resource: "leases".into(),
            kind: "Lease".into(),
            namespaced: true,
        };
        LeaseClient {
            client,
            resource,
            namespace: namespace.into(),
            name: name.into(),
        }
    }

    /// `namespace/name`, for logs and errors.
    pub(crate) fn describe(&self) -> String {
        format!("Lease {}/{}", self.namespace, self.name)
    }

    /// The Lease, or `None` when it does not exist.
    pub(crate) fn get(&self) -> Result<Option<Value>, KubeError> {
        let api = self.client.api(&self.resource, Some(&self.namespace));
        match api.get(&self.name) {
            Ok(v) => Ok(Some(v)),
            Err(e) if e.is_not_found() => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Creates the Lease with `record` (409 when another replica created it first).
    pub(crate) fn create(&self, record: &Record) -> Result<Value, KubeError> {
        let obj = json!({
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": self.name, "namespace": self.namespace},
            "spec": record.spec(),
        });
        self.client
            .api(&self.resource, Some(&self.namespace))
            .create(&obj)
    }

    /// Replaces `current` (as last read or written, with its resourceVersion) with
    /// `record`; 409 Conflict when someone wrote it since.
    pub(crate) fn update(&self, current: &Value, record: &Record) -> Result<Value, KubeError> {
        let mut obj = current.clone();
        obj["spec"] = record.spec();
        self.client
            .api(&self.resource, Some(&self.namespace))
            .replace(&self.name, &obj)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_round_trips_through_a_lease_spec() {
        let r = Record {
            holder: "a".into(),
            lease_duration_secs: 35,
            acquire_time: "2026-01-01T00:00:00.000000Z".into(),
            renew_time: "2026-01-01T00:00:01.000000Z".into(),
            transitions: 2,
        };
        let lease = json!({"spec": r.spec()});
        assert_eq!(Record::from_lease(&lease), r);
        assert_eq!(Record::from_lease(&json!({})), Record::default());
    }

    #[test]
    fn micro_time_has_six_fraction_digits_and_utc() {
        let t = micro_time_now();
        assert_eq!(t.len(), "2006-01-02T15:04:05.000000Z".len(), "{t}");
        assert!(t.ends_with('Z'));
    }
}
