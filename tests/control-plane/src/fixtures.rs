//! Objects more than one test tier creates on the real API server.

/// A CRD `crontabs.<group>` (kind CronTab, namespaced) stored as `v1alpha1` and
/// served as `v1` too, with schemas that keep every field: the conversion tests'
/// subject (`spec.cron` as a list in v1alpha1, `spec.cronSpec` as a string in v1).
pub fn crontab_crd(group: &str) -> String {
    let version = |name: &str, storage: bool| {
        format!(
            "  - name: {name}\n    served: true\n    storage: {storage}\n    schema:\n      \
             openAPIV3Schema: {{type: object, x-kubernetes-preserve-unknown-fields: true}}\n"
        )
    };
    format!(
        "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata:\n  \
         name: crontabs.{group}\nspec:\n  group: {group}\n  scope: Namespaced\n  names:\n    \
         plural: crontabs\n    singular: crontab\n    kind: CronTab\n    listKind: CronTabList\n  \
         versions:\n{}{}",
        version("v1alpha1", true),
        version("v1", false)
    )
}
