//! Pointing CRDs at the conversion server: for each CRD named by a conversion
//! binding, set `spec.conversion` to strategy `Webhook` with the operator's
//! Service, path `/<crdName>`, the CA bundle and review versions v1 and v1beta1.
//! A CRD that does not exist yet is waited for with backoff (1 s doubling to
//! 15 s), as is an API server that refuses; a CRD already configured (as written,
//! or with the API server's default Service port 443) is left alone. Runs on its own thread ("webhook-crds") so startup does not wait.

use crate::kube::{Client, KubeError};
use crate::log;
use crossbeam_channel::Receiver;
use serde_json::{Value, json};
use std::time::Duration;

const MAX_DELAY: Duration = Duration::from_secs(15);

/// Where the API server reaches the conversion server.
#[derive(Debug, Clone)]
pub(crate) struct Target {
    pub(crate) namespace: String,
    pub(crate) service: String,
    /// Base64 of the `--conversion-webhook-ca` file.
    pub(crate) ca_bundle: String,
}

/// The `spec.conversion` for `crd`.
pub(crate) fn conversion(crd: &str, t: &Target) -> Value {
    json!({
        "strategy": "Webhook",
        "webhook": {
            "clientConfig": {
                "service": {"namespace": t.namespace, "name": t.service, "path": format!("/{crd}")},
                "caBundle": t.ca_bundle,
            },
            "conversionReviewVersions": ["v1", "v1beta1"],
        },
    })
}

/// The thread body: configures every CRD in `crds`, waiting as long as needed,
/// until done or `stop` closes.
pub(crate) fn run(client: Client, crds: Vec<String>, t: Target, stop: Receiver<()>) {
    for crd in crds {
        let mut delay = Duration::from_secs(1);
        loop {
            match configure(&client, &crd, &t) {
                Ok(()) => break,
                Err(e) => log::warn(
                    "cannot configure CRD conversion yet; will retry",
                    &[
                        ("crd", &crd),
                        ("error", &e.to_string()),
                        ("retry_in", &format!("{delay:?}")),
                    ],
                ),
            }
            if !matches!(
                stop.recv_timeout(delay),
                Err(crossbeam_channel::RecvTimeoutError::Timeout)
            ) {
                return;
            }
            delay = (delay * 2).min(MAX_DELAY);
        }
    }
}

/// CRD conversion configured on demand: addon-operator's module run sets it for its
/// hooks' CRDs right after installing the module's CRDs, before helm creates any
/// custom resource (the background thread could come up to 15 s later).
pub(crate) struct Converter {
    pub(crate) client: Client,
    pub(crate) target: Target,
}

impl Converter {
    /// One attempt for `crd`; the error names it.
    pub(crate) fn configure(&self, crd: &str) -> Result<(), String> {
        configure(&self.client, crd, &self.target)
            .map_err(|e| format!("configuring the conversion of CRD {crd}: {e}"))
    }
}

/// One attempt: GET the CRD, PUT it back with the conversion set (if different).
fn configure(client: &Client, crd: &str, t: &Target) -> Result<(), KubeError> {
    let resource = client.resolve(
        "apiextensions.k8s.io/v1",
        "CustomResourceDefinition",
        "conversion webhook",
    )?;
    let api = client.api(&resource, None);
    let mut obj = api.get(crd)?;
    if !obj["spec"].is_object() {
        return Err(KubeError::Invalid(format!("CRD {crd} has no spec object")));
    }
    let want = conversion(crd, t);
    let mut stored_form = want.clone();
    // The API server stores the Service reference with its default port.
    if let Some(service) = stored_form
        .pointer_mut("/webhook/clientConfig/service")
        .and_then(Value::as_object_mut)
    {
        service.insert("port".into(), 443.into());
    }
    if obj["spec"]["conversion"] == want || obj["spec"]["conversion"] == stored_form {
        log::info("CRD conversion is up to date", &[("crd", crd)]);
        return Ok(());
    }
    obj["spec"]["conversion"] = want;
    api.replace(crd, &obj)?;
    log::info("CRD conversion configured", &[("crd", crd)]);
    Ok(())
}
