//! Entry points for fuzzing: one `pub fn <target>(data: &[u8])` per parser that reads
//! outside input (hook `--config` output, files hooks write, request bodies, kubeconfig,
//! watch lines, ConfigMaps). Each calls the parser the operator itself uses and drops
//! the result; only panics, hangs and runaway memory matter. The cargo-fuzz targets
//! in `fuzz/` and the corpus replay test (`tests/fuzz_corpus.rs`) both call [`TARGETS`].
//! Not part of the supported API.

use crate::addon::config::configmap::KubeConfig;
use crate::addon::config::values;
use crate::hook::config::{self, HookKind};
use crate::kube::{Cache, Store};
use crate::webhook::response::AdmissionAnswer;
use serde_json::{Value, json};
use std::io::{BufReader, Cursor, Write};

/// One fuzz target: its name (the `fuzz/fuzz_targets/<name>.rs` and
/// `fuzz/corpus/<name>/` it goes with) and its entry point.
pub type Target = (&'static str, fn(&[u8]));

/// Every target, in the order `make fuzz` runs them.
pub const TARGETS: &[Target] = &[
    ("hook_config", hook_config),
    ("crontab", crontab),
    ("label_selector", label_selector),
    ("field_selector", field_selector),
    ("object_patch", object_patch),
    ("hook_metrics", hook_metrics),
    ("admission_response", admission_response),
    ("conversion_response", conversion_response),
    ("admission_review", admission_review),
    ("conversion_review", conversion_review),
    ("kubeconfig", kubeconfig),
    ("exec_credential", exec_credential),
    ("watch_events", watch_events),
    ("http1_request", http1_request),
    ("jq_compile", jq_compile),
    ("addon_configmap", addon_configmap),
    ("values_patch", values_patch),
    ("values_schema", values_schema),
    ("release_record", release_record),
    ("chart_template", chart_template),
    ("post_render_yaml", post_render_yaml),
];

/// The input as text; parsers that take `&str` get lossy UTF-8 like a pipe read would.
fn text(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

/// A JSON (or else YAML) value from the input, `None` when it is neither.
fn value(data: &[u8]) -> Option<Value> {
    serde_json::from_slice(data)
        .ok()
        .or_else(|| serde_yaml::from_str(&text(data)).ok())
}

/// `--config` output, as shell-operator and addon-operator (global, module) read it.
pub fn hook_config(data: &[u8]) {
    let text = text(data);
    for kind in [HookKind::Shell, HookKind::Global, HookKind::Module] {
        let _ = config::parse_as("fuzz", &text, kind);
    }
}

/// A schedule binding's `crontab`, parsed and asked for its next firing.
pub fn crontab(data: &[u8]) {
    if let Ok(s) = crate::schedule::cron::CronSchedule::parse(&text(data)) {
        let start = chrono::DateTime::from_timestamp(1_700_000_000, 0).unwrap_or_default();
        let _ = s.next_after_in(&start);
    }
}

/// A kubernetes binding built around `selector` as the key `field`, encoded for the
/// API server as the monitor does.
fn encode_binding(field: &str, selector: Value) {
    let doc = json!({
        "configVersion": "v1",
        "kubernetes": [{"apiVersion": "v1", "kind": "Pod", field: selector}],
    });
    if let Ok(c) = config::parse("fuzz", &doc.to_string()) {
        for b in &c.kubernetes {
            let _ = crate::monitor::selectors::selectors(b);
        }
    }
}

/// A label selector: the string form, and a binding's `labelSelector` value.
pub fn label_selector(data: &[u8]) {
    use crate::kube::selector;
    if let Ok(sel) = selector::parse_label_selector(&text(data)) {
        let _ = selector::encode_label_selector(&sel);
        let labels = [("app".to_string(), "x".to_string())].into();
        let _ = selector::matches(&sel, &labels);
    }
    if let Some(v) = value(data) {
        encode_binding("labelSelector", v);
    }
}

/// A binding's `fieldSelector` value.
pub fn field_selector(data: &[u8]) {
    if let Some(v) = value(data) {
        encode_binding("fieldSelector", v);
    }
}

/// A `$KUBERNETES_PATCH_PATH` file.
pub fn object_patch(data: &[u8]) {
    let _ = crate::patch::parse(data);
}

/// A `$METRICS_PATH` file.
pub fn hook_metrics(data: &[u8]) {
    let _ = crate::hook_metrics::parse::parse(data);
}

/// A `$VALIDATING_RESPONSE_PATH` / `$ADMISSION_RESPONSE_PATH` file.
pub fn admission_response(data: &[u8]) {
    let _ = crate::webhook::response::admission(data);
}

/// A `$CONVERSION_RESPONSE_PATH` file.
pub fn conversion_response(data: &[u8]) {
    let _ = crate::webhook::response::conversion(data);
}

/// An AdmissionReview body: the checks the handler makes before running a hook, the
/// hook's context payload and the answer built around the review.
pub fn admission_review(data: &[u8]) {
    use crate::webhook::admission as adm;
    let Ok(review) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    if !review.get("request").is_some_and(Value::is_object) {
        return;
    }
    let _ = adm::context_payload(true, &review);
    let _ = adm::context_payload(false, &review);
    let answer = AdmissionAnswer {
        allowed: true,
        patch: Some("W10=".into()),
        ..AdmissionAnswer::default()
    };
    let _ = adm::admission_review(&review, Ok(answer)).to_string();
}

/// A ConversionReview body: grouping the objects by version and building the answer.
pub fn conversion_review(data: &[u8]) {
    use crate::webhook::conversion as conv;
    let Ok(review) = serde_json::from_slice::<Value>(data) else {
        return;
    };
    let Some(request) = review.get("request").filter(|r| r.is_object()) else {
        return;
    };
    let desired = request["desiredAPIVersion"].as_str().unwrap_or_default();
    let objects = request["objects"].as_array().cloned().unwrap_or_default();
    let _ = conv::by_version(&objects, desired);
    let _ = conv::conversion_review(&review, Ok(objects)).to_string();
    let _ = conv::conversion_review(&review, Err("no".into())).to_string();
}

/// A kubeconfig file, loaded as `--kubeconfig` would (written to a private temp dir;
/// paths in it resolve against that dir).
pub fn kubeconfig(data: &[u8]) {
    let dir = std::env::temp_dir().join(format!("shell-operator-fuzz-{}", std::process::id()));
    if std::fs::create_dir_all(&dir).is_err() {
        return;
    }
    let path = dir.join("kubeconfig");
    let written = std::fs::File::create(&path).and_then(|mut f| f.write_all(data));
    if written.is_ok() {
        let _ = crate::kube::kubeconfig::load(&[path], "");
    }
}

/// An exec credential plugin's stdout.
pub fn exec_credential(data: &[u8]) {
    let _ = crate::kube::auth::parse_credential(data, "client.authentication.k8s.io/v1");
}

/// A watch stream: each line applied in turn to one cache, in every cache mode.
/// Each line is also canonicalised whole and checked against serde_json: both
/// accept it and write the same text, or both refuse it. The whole input is also
/// read as a LIST page.
pub fn watch_events(data: &[u8]) {
    let _ = crate::kube::decode::list_page(data, Some(("v1", "Pod")));
    for mode in [Cache::Objects, Cache::Keys, Cache::Off] {
        let mut store = Store::new(mode);
        for line in data.split(|b| *b == b'\n') {
            let _ = crate::kube::decode::apply_line(&mut store, line);
        }
    }
    for line in data
        .split(|b| *b == b'\n')
        .filter_map(|l| std::str::from_utf8(l).ok())
    {
        let ours = crate::canonical::canonical_value(line);
        let theirs = serde_json::from_str::<serde_json::Value>(line).map(|v| v.to_string());
        match (ours, theirs) {
            (Ok(o), Ok(t)) => assert_eq!(o, t, "canonical text differs for {line:?}"),
            (Err(_), Err(_)) => {}
            (o, t) => panic!("{line:?}: canonical {o:?}, serde_json {t:?}"),
        }
    }
}

/// Bytes on a listener's connection: requests read one after another as the
/// keep-alive loop does, until the reader gives up.
pub fn http1_request(data: &[u8]) {
    use crate::listen::http1;
    let mut reader = BufReader::new(Cursor::new(data));
    for _ in 0..64 {
        let Ok(head) = http1::read_head(&mut reader) else {
            return;
        };
        if http1::read_body(&mut reader, &head, 64 * 1024).is_err() {
            return;
        }
    }
}

/// A `jqFilter` (or `jq` patch filter) compiled.
pub fn jq_compile(data: &[u8]) {
    let _ = crate::jq::JqFilter::compile(&text(data), None, &[]);
}

/// addon-operator's ConfigMap: a whole object (JSON or YAML with `data`), or else
/// the text as the `global` section, a module section and a module's enabled flag.
pub fn addon_configmap(data: &[u8]) {
    let object = match value(data) {
        Some(v) if v.get("data").is_some() => v,
        _ => {
            let t = text(data);
            json!({"data": {"global": t, "myModule": t, "otherModuleEnabled": t}})
        }
    };
    let _ = KubeConfig::from_object(Some(&object), &["myModule", "otherModule"]);
}

/// A values patch (`$VALUES_JSON_PATCH_PATH` / `$CONFIG_VALUES_JSON_PATCH_PATH`),
/// applied strictly and leniently to a small document and compacted.
pub fn values_patch(data: &[u8]) {
    let Ok(ops) = values::parse_patch(data) else {
        return;
    };
    let mut doc = json!({"global": {"a": [1, 2], "b": {"c": "d"}}, "myModule": {}});
    let _ = values::apply_strict(&mut doc.clone(), &ops);
    let _ = values::apply_lenient(&mut doc, &ops);
    let _ = values::to_json(&values::compact(&ops, &ops));
}

/// A module's `openapi/` schemas: `config-values.yaml` and `values.yaml` separated
/// by a line `===` (the whole input is `values.yaml` without one), compiled, with
/// defaults applied and an empty section validated.
pub fn values_schema(data: &[u8]) {
    use values::SchemaKind;
    let t = text(data);
    let (config, vals) = match t.split_once("\n===\n") {
        Some((c, v)) => (Some(c), Some(v)),
        None => (None, Some(t.as_str())),
    };
    let Ok(schemas) = values::Schemas::from_yaml(config, vals, "fuzz") else {
        return;
    };
    for kind in [SchemaKind::Config, SchemaKind::Values, SchemaKind::Helm] {
        let mut section = json!({});
        schemas.apply_defaults(kind, &mut section);
        let _ = schemas.validate(kind, &section);
    }
}

/// A helm release record: the input as a gzip stream, as raw DEFLATE, and as the
/// `data.release` field of a release Secret (decoded, gunzipped with a 1 MiB cap
/// for the first two, the operator's own cap for the field, then parsed as JSON).
pub fn release_record(data: &[u8]) {
    let _ = crate::inflate::gunzip(data, 1 << 20);
    let _ = crate::inflate::inflate(data, 1 << 20);
    let _ = crate::addon::release::record::decode(&text(data));
}

/// A chart template read for whether it can reach `global` values.
pub fn chart_template(data: &[u8]) {
    let _ = crate::addon::release::global_use::template_ignores_global(&text(data));
}

/// A rendered manifest as helm hands it to the post-renderer: read by our YAML 1.1
/// reader, labelled and written back (the post-renderer's whole path), then read
/// again as the drift watcher reads a release's manifest.
pub fn post_render_yaml(data: &[u8]) {
    let manifest = text(data);
    if let Ok(out) = crate::addon::release::post_render::label(&manifest) {
        let _ = crate::addon::release::yaml11::documents(&out);
    }
}
