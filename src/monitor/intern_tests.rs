//! Tests of the interner: every packed text reads back byte for byte, over real
//! pod shapes and generated objects, and what repeats is held once.

use super::*;

/// A Pod as a real kube-apiserver returns it (defaults and managedFields filled
/// in), canonical text, with `i` varying what differs between pods.
fn real_pod(i: usize) -> Arc<str> {
    let pod = serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {
            "annotations": {"prometheus.io/scrape": "true"},
            "creationTimestamp": format!("2026-11-28T08:31:{:02}Z", i / 400),
            "generation": 1,
            "labels": {"app": format!("app-{}", i % 50), "pod-template-hash": "5d8f9c7b6", "tier": "backend"},
            "managedFields": [{"apiVersion": "v1", "fieldsType": "FieldsV1",
                "fieldsV1": {"f:metadata": {"f:labels": {".": {}, "f:app": {}, "f:tier": {}}},
                    "f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}, "f:image": {}, "f:name": {}}},
                        "f:dnsPolicy": {}, "f:nodeName": {}, "f:restartPolicy": {}}},
                "manager": "bench", "operation": "Update",
                "time": format!("2026-11-28T08:31:{:02}Z", i / 400)}],
            "name": format!("pod-{i:05}"), "namespace": format!("ns-{}", i % 10),
            "resourceVersion": format!("{}", 200 + i),
            "uid": format!("2d89286c-5dc7-4371-b50b-{i:012}")
        },
        "spec": {
            "containers": [{"env": [{"name": "MODE", "value": "production"}],
                "image": "registry.example.com/team/app:1.2.3", "imagePullPolicy": "IfNotPresent",
                "name": "main", "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                "resources": {"limits": {"memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
                "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File"}],
            "dnsPolicy": "ClusterFirst", "nodeName": format!("node-{}", i % 20),
            "tolerations": [
                {"effect": "NoExecute", "key": "node.kubernetes.io/not-ready", "operator": "Exists", "tolerationSeconds": 300},
                {"effect": "NoExecute", "key": "node.kubernetes.io/unreachable", "operator": "Exists", "tolerationSeconds": 300}]
        },
        "status": {"phase": "Pending", "qosClass": "Burstable"}
    });
    Arc::from(crate::canonical::canonical_value(&pod.to_string()).expect("canonical"))
}

#[test]
fn real_pods_read_back_byte_for_byte_and_share_their_repeats() {
    let mut interner = Interner::new();
    let pods: Vec<Arc<str>> = (0..2_000).map(real_pod).collect();
    let packed: Vec<Packed> = pods.iter().map(|p| interner.pack(p)).collect();
    for (text, p) in pods.iter().zip(&packed) {
        assert_eq!(p.to_text(), &**text);
        let mut written = Vec::new();
        p.write_to(&mut written).unwrap();
        assert_eq!(written, text.as_bytes());
    }
    let whole: usize = pods.iter().map(|p| p.len()).sum();
    let own: usize = packed.iter().map(Packed::own_bytes).sum();
    // The containers, tolerations and managedFields are held once: each pod keeps
    // its name, uid, labels' reference and the like.
    assert!(
        own * 3 < whole,
        "own bytes {own} of {whole}: not shared enough"
    );
    assert!(packed[1].shared_pieces() >= 2, "{:?}", packed[1]);
    assert!(
        interner.shared_len() < 200,
        "{} pieces",
        interner.shared_len()
    );
}

#[test]
fn strings_holding_brackets_quotes_and_escapes_are_not_cut_inside() {
    let mut interner = Interner::new();
    let tricky: Arc<str> = Arc::from(
        r#"{"a":{"s":"}]{[\"\\","t":"x\u0000y","n":[1,-2.5e3,true,null,{"k":"]"}],"pad":"0123456789012345678901234567890123456789"},"b":"{\"not\":\"json\"}"}"#,
    );
    for _ in 0..3 {
        let p = interner.pack(&tricky);
        assert_eq!(p.to_text(), &*tricky);
    }
    assert!(interner.pack(&tricky).shared_pieces() >= 1);
}

#[test]
fn malformed_and_odd_texts_are_kept_whole_without_panicking() {
    let mut interner = Interner::new();
    let long = "x".repeat(100);
    for text in [
        "",
        "{",
        "[",
        "\"a string\"",
        "42",
        "{\"a\":[1,2",
        "{\"a\":\"unterminated",
        &format!("{{\"a\":[\"{long}\"],\"b\":[\"{long}\"],\"c\":{{\"d\""),
        "{}",
        "[]",
        &format!("[[\"{long}\"],[\"{long}\"],[\"{long}\"]]"),
    ] {
        let text: Arc<str> = Arc::from(text);
        for _ in 0..2 {
            assert_eq!(interner.pack(&text).to_text(), &*text, "{text:?}");
        }
    }
}

/// A small deterministic generator (no dependency): xorshift.
struct Gen(u64);

impl Gen {
    fn next(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }

    /// A value of at most `depth` levels, drawn from a small vocabulary so that
    /// subtrees repeat across values.
    fn value(&mut self, depth: u32) -> serde_json::Value {
        use serde_json::{Value, json};
        let leaf = |g: &mut Gen| match g.next(6) {
            0 => Value::Null,
            1 => json!(g.next(3) == 0),
            2 => json!(g.next(1000) as f64 / 8.0),
            3 => json!(format!("s{}\"\\{{]", g.next(4))),
            4 => json!("é—\u{1F600}\n"),
            _ => json!(g.next(5)),
        };
        if depth == 0 || self.next(4) == 0 {
            return leaf(self);
        }
        if self.next(3) == 0 {
            // One of a few big subtrees, as real objects repeat theirs.
            let n = self.next(4);
            return json!({"template": n, "pad": "-".repeat(60), "list": [n, {"k": [n]}]});
        }
        if self.next(2) == 0 {
            let n = self.next(5);
            Value::Array((0..n).map(|_| self.value(depth - 1)).collect())
        } else {
            let n = self.next(6);
            let keys = ["a", "bb", "c:d", "e\"f", "", "0"];
            Value::Object(
                (0..n)
                    .map(|_| {
                        let k = keys[self.next(keys.len() as u64) as usize];
                        (k.to_string(), self.value(depth - 1))
                    })
                    .collect(),
            )
        }
    }
}

#[test]
fn generated_objects_read_back_byte_for_byte() {
    let mut interner = Interner::new();
    let mut generator = Gen(0x9e37_79b9_7f4a_7c15);
    let mut shared_any = false;
    for _ in 0..3_000 {
        let value = serde_json::json!({"metadata": {"uid": generator.next(1 << 40)},
            "spec": generator.value(5), "status": generator.value(4)});
        let text: Arc<str> =
            Arc::from(crate::canonical::canonical_value(&value.to_string()).expect("canonical"));
        let p = interner.pack(&text);
        assert_eq!(p.to_text(), &*text);
        let back: serde_json::Value = serde_json::from_str(&p.to_text()).unwrap();
        assert_eq!(back, value);
        shared_any |= p.shared_pieces() > 0;
    }
    assert!(shared_any, "some generated subtree repeated and was shared");
}

#[test]
fn pieces_nobody_holds_are_swept() {
    let mut interner = Interner::new();
    for i in 0..(FIRST_SWEEP * 3) {
        // Every text twice, each with its own big subtree; the packed texts are
        // dropped at once, so their pieces are held by the table alone.
        let text: Arc<str> = Arc::from(format!("{{\"a\":[\"{i:0>80}\"]}}"));
        let _ = interner.pack(&text);
        let _ = interner.pack(&text);
    }
    assert!(
        interner.shared_len() <= FIRST_SWEEP,
        "{} pieces kept",
        interner.shared_len()
    );
}
