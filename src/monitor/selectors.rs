//! Turning a binding's selectors into what the API server filters on, and filling in
//! the type fields list items come without. Pure functions used by the monitor.

use crate::hook::config::{FieldOp, KubernetesBinding};
use crate::kube;

/// Encodes a binding's selectors: (label selector, field selector, client-side names).
/// One object name becomes a `metadata.name` field selector; several are filtered here.
pub(crate) fn selectors(
    b: &KubernetesBinding,
) -> Result<(String, String, Option<Vec<String>>), String> {
    let label = match &b.label_selector {
        Some(sel) => {
            kube::selector::encode_label_selector(sel).map_err(|e| format!("labelSelector: {e}"))?
        }
        None => String::new(),
    };
    let mut reqs: Vec<kube::selector::FieldRequirement> = b
        .field_selector
        .iter()
        .map(|r| kube::selector::FieldRequirement {
            field: r.field.clone(),
            operator: if r.operator == FieldOp::Equals {
                "=".into()
            } else {
                "!=".into()
            },
            value: r.value.clone(),
        })
        .collect();
    let names = b.name_selector.clone().filter(|n| !n.is_empty());
    let client_side = match names {
        Some(n) if n.len() == 1 => {
            reqs.push(kube::selector::FieldRequirement {
                field: "metadata.name".into(),
                operator: "=".into(),
                value: n[0].clone(),
            });
            None
        }
        other => other,
    };
    let field =
        kube::selector::encode_field_selector(&reqs).map_err(|e| format!("fieldSelector: {e}"))?;
    Ok((label, field, client_side))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kube::Resource;
    use serde_json::json;

    #[test]
    fn objects_without_type_meta_get_api_version_and_kind() {
        let deployments = Resource {
            group: "apps".into(),
            version: "v1".into(),
            resource: "deployments".into(),
            kind: "Deployment".into(),
            namespaced: true,
        };
        let listed = |text: &str| {
            let bare = crate::kube::Object::decode(text, None).expect("object");
            let o = super::super::with_type_meta(&bare, &deployments).expect("object");
            serde_json::from_str::<serde_json::Value>(&o.json).expect("json")
        };
        assert_eq!(
            listed(r#"{"metadata": {"name": "d"}}"#),
            json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}})
        );
        let typed = json!({"apiVersion": "apps/v1beta2", "kind": "Deployment"});
        assert_eq!(listed(&typed.to_string()), typed, "present fields are kept");
    }

    #[test]
    fn one_name_is_a_field_selector_several_are_filtered_here() {
        let text = "configVersion: v1\nkubernetes:\n- kind: Pod\n  nameSelector:\n    matchNames: [a]\n  fieldSelector:\n    matchExpressions:\n    - {field: status.phase, operator: Equals, value: Running}\n- kind: Pod\n  nameSelector:\n    matchNames: [a, b]\n  labelSelector:\n    matchLabels: {app: x}";
        let config = crate::hook::config::parse("h", text).expect("config");
        let (label, field, names) = selectors(&config.kubernetes[0]).expect("selectors");
        assert_eq!(
            (label.as_str(), field.as_str(), names),
            ("", "status.phase=Running,metadata.name=a", None)
        );
        let (label, field, names) = selectors(&config.kubernetes[1]).expect("selectors");
        assert_eq!((label.as_str(), field.as_str()), ("app=x", ""));
        assert_eq!(names, Some(vec!["a".to_string(), "b".to_string()]));
    }
}
