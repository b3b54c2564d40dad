//! addon-operator's reload of an added module on the real API server (issue
//! 39, `src/addon/reload/`): a module dir written while the operator runs is
//! installed as a module present at startup is: its `crds/` applied and
//! Established before helm (helm 4, server-side apply) creates the custom
//! resource its chart holds, with the section of the operator's ConfigMap
//! that was written before the module existed.

use crate::addon::{AddonOperator, crd_yaml, get, releases};
use crate::harness::*;
use serde_json::json;

#[test]
fn a_module_added_by_a_reload_installs_its_crds_and_release() {
    let _api = api_shared();
    let ns = cp().namespace("addon-reload-add");
    let group = format!("{ns}.reload.test");
    apply(&format!(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: addon-operator\n  namespace: {ns}\n\
         data:\n  toys: |\n    color: blue\n  toysEnabled: \"true\"\n"
    ));
    let files = vec![(
        "modules/001-base/Chart.yaml",
        "apiVersion: v2\nname: base\nversion: 0.1.0\n".to_string(),
    )];
    let op = AddonOperator::start_with_env(&ns, 4, &files, &[]);
    op.wait_ready();
    assert!(releases(4, &ns).iter().all(|(name, _, _)| name != "toys"));

    let dir = op.dir().join("modules/002-toys");
    let write = |rel: &str, text: &str| {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(path, text).expect("write");
    };
    write(
        "crds/widgets.yaml",
        &crd_yaml(&group, "widgets", "Widget", &["color"], ""),
    );
    write(
        "templates/widget.yaml",
        &format!(
            "apiVersion: {group}/v1\nkind: Widget\nmetadata:\n  name: w1\nspec:\n  \
             color: {{{{ .Values.toys.color }}}}\n"
        ),
    );
    write("Chart.yaml", "apiVersion: v2\nname: toys\nversion: 0.1.0\n");

    let widget = op.wait("Widget w1", || get(&format!("widgets.{group}"), &ns, "w1"));
    assert_eq!(
        widget["spec"],
        json!({"color": "blue"}),
        "the ConfigMap's section"
    );
    assert_eq!(widget["metadata"]["labels"]["heritage"], "addon-operator");
    let crd = get("crd", "", &format!("widgets.{group}")).expect("the CRD");
    let established = (crd["status"]["conditions"].as_array().into_iter().flatten())
        .any(|c| c["type"] == "Established" && c["status"] == "True");
    assert!(established, "{crd}");
    let toys: Vec<_> = (releases(4, &ns).into_iter())
        .filter(|(name, _, _)| name == "toys")
        .collect();
    assert_eq!(toys.len(), 1, "{toys:?}");
    assert_eq!((toys[0].1.as_str(), toys[0].2.as_str()), ("1", "deployed"));
    let logs = op.logs();
    assert!(
        logs.contains("modules reloaded") && logs.contains("toys"),
        "{logs}"
    );
}
