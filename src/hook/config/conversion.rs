//! `kubernetesCustomResourceConversion` bindings: which CRD the hook converts
//! and between which versions. Name, crdName and at least one
//! `{fromVersion, toVersion}` pair are required.

use serde_json::Value;

use super::types::ConversionBinding;
use super::v1::non_empty;
use super::validate::Checker;

const KEYS: &[&str] = &[
    "name",
    "group",
    "includeSnapshotsFrom",
    "crdName",
    "conversions",
];

/// One conversion binding.
pub(crate) fn parse(c: &mut Checker, item: &Value) -> Option<ConversionBinding> {
    let m = c.as_object("", item)?;
    c.strict("", m, KEYS);
    let name = c.req_non_empty(m, "", "name").unwrap_or_default();
    let crd_name = c.req_non_empty(m, "", "crdName").unwrap_or_default();
    let rules = c
        .required(m, "", "conversions")
        .and_then(|v| c.as_array("conversions", v, 1));
    let mut conversions = Vec::new();
    for (i, rule) in rules.unwrap_or_default().iter().enumerate() {
        conversions.extend(pair(c, &format!("conversions[{i}]"), rule));
    }
    Some(ConversionBinding {
        name,
        crd_name,
        conversions,
        group: non_empty(c, m, "group"),
        include_snapshots_from: c
            .opt_str_list(m, "", "includeSnapshotsFrom", 1)
            .unwrap_or_default(),
    })
}

/// A strict `{fromVersion, toVersion}` object.
fn pair(c: &mut Checker, field: &str, v: &Value) -> Option<(String, String)> {
    let m = c.as_object(field, v)?;
    c.strict(field, m, &["fromVersion", "toVersion"]);
    let from = c.req_non_empty(m, field, "fromVersion");
    let to = c.req_non_empty(m, field, "toVersion");
    Some((from?, to?))
}
