//! Helpers for the webhook integration tests: a test PKI made with `openssl`
//! (CA, server certificate for 127.0.0.1, client CA and client certificate),
//! HTTPS requests with the real `curl`, and an operator started against kube-sim
//! with every webhook flag pointing at that PKI.
#![allow(dead_code)]

use crate::common::{Operator, TempDir, hook};
use kube_sim::certs::openssl;
use serde_json::json;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A PKI directory; files are named `<name>.crt` / `<name>.key`.
pub struct Pki {
    pub dir: TempDir,
}

impl Pki {
    /// CA `ca`, server `server` (signed by `ca`), client CA `client-ca`, client `client`.
    pub fn make() -> Pki {
        let pki = Pki {
            dir: TempDir::new("pki"),
        };
        pki.ca("ca");
        pki.issue(
            "server",
            "ca",
            "subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth",
        );
        pki.ca("client-ca");
        pki.issue("client", "client-ca", "extendedKeyUsage=clientAuth");
        pki
    }

    pub fn path(&self, file: &str) -> PathBuf {
        self.dir.0.join(file)
    }

    pub fn arg(&self, file: &str) -> String {
        self.path(file).display().to_string()
    }

    /// A self-signed EC CA `<name>.crt`/`<name>.key`.
    pub fn ca(&self, name: &str) {
        openssl(
            &self.dir.0,
            &format!("genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out {name}.key"),
        );
        openssl(
            &self.dir.0,
            &format!(
                "req -x509 -new -key {name}.key -subj /CN={name} -days 2 -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign -out {name}.crt"
            ),
        );
    }

    /// A leaf `<name>.crt`/`<name>.key` signed by CA `ca` with extensions `ext`.
    pub fn issue(&self, name: &str, ca: &str, ext: &str) {
        let d = &self.dir.0;
        openssl(
            d,
            &format!("genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out {name}.key"),
        );
        openssl(
            d,
            &format!("req -new -key {name}.key -subj /CN={name} -out {name}.csr"),
        );
        std::fs::write(
            d.join(format!("{name}.ext")),
            format!("basicConstraints=CA:FALSE\n{ext}\n"),
        )
        .expect("ext");
        openssl(
            d,
            &format!(
                "x509 -req -in {name}.csr -CA {ca}.crt -CAkey {ca}.key -CAcreateserial -days 2 -extfile {name}.ext -out {name}.crt"
            ),
        );
    }
}

/// One HTTPS exchange done by curl: HTTP status (0 when the connection or TLS
/// failed), body, curl's stderr.
pub struct Answer {
    pub status: u16,
    pub body: String,
    pub stderr: String,
}

impl Answer {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {:?}", self.body))
    }
}

/// POSTs `body` as JSON to `https://127.0.0.1:<port><path>` trusting `ca`;
/// `extra` goes to curl as is (client certificate, method, headers).
pub fn curl(port: u16, path: &str, body: &str, ca: &Path, extra: &[&str]) -> Answer {
    let mut child = Command::new("curl")
        .args(["-sS", "--max-time", "20", "--cacert"])
        .arg(ca)
        .args([
            "-H",
            "Content-Type: application/json",
            "--data-binary",
            "@-",
        ])
        .args(["-w", "\n%{http_code}"])
        .args(extra)
        .arg(format!("https://127.0.0.1:{port}{path}"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("curl");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(body.as_bytes())
        .expect("write body");
    let out = child.wait_with_output().expect("curl output");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    Answer {
        status: code.trim().parse().unwrap_or(0),
        body: body.to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Flags pointing both webhook servers at `pki` on random loopback ports, the
/// kube client at `kubeconfig`, and the Services at namespace `webhooks`.
pub fn flags(pki: &Pki, kubeconfig: &Path) -> Vec<String> {
    let mut args: Vec<String> = vec!["--kube-config".into(), kubeconfig.display().to_string()];
    args.extend(["--namespace".into(), "webhooks".into()]);
    for kind in ["validating", "conversion"] {
        for (flag, value) in [
            ("server-cert", pki.arg("server.crt")),
            ("server-key", pki.arg("server.key")),
            ("ca", pki.arg("ca.crt")),
            ("listen-address", "127.0.0.1".into()),
            ("listen-port", "0".into()),
        ] {
            args.push(format!("--{kind}-webhook-{flag}"));
            args.push(value);
        }
    }
    args
}

/// Starts the operator on `hooks` against `sim` with [`flags`] plus `extra`.
pub fn start(hooks: &[(&str, String)], sim: &kube_sim::Sim, pki: &Pki, extra: &[&str]) -> Operator {
    let kubeconfig = pki.path("kubeconfig");
    sim.write_kubeconfig(&kubeconfig).expect("kubeconfig");
    let mut args = flags(pki, &kubeconfig);
    args.extend(extra.iter().map(|s| s.to_string()));
    let refs: Vec<&str> = args.iter().map(String::as_str).collect();
    Operator::start(hooks, &refs, &[])
}

/// Rules matching ConfigMap creation, as YAML lines of a binding.
pub const RULES: &str = "  rules:\n  - apiGroups: [\"\"]\n    apiVersions: [\"v1\"]\n    operations: [\"CREATE\"]\n    resources: [\"configmaps\"]\n    scope: Namespaced\n";

/// A validating + mutating hook whose answer depends on the binding.
pub fn admission_hook(validating: &[&str], mutating: &[&str]) -> String {
    let mut config = String::from("configVersion: v1\n");
    let mut list = |key: &str, names: &[&str]| {
        if names.is_empty() {
            return;
        }
        config.push_str(&format!("{key}:\n"));
        for n in names {
            config.push_str(&format!("- name: {n}\n{RULES}"));
            if n.starts_with("slow") {
                config.push_str("  timeoutSeconds: 1\n");
            }
            if n.starts_with("strict") {
                config.push_str("  failurePolicy: Fail\n  labelSelector:\n    matchLabels:\n      checked: \"yes\"\n");
            }
        }
    };
    list("kubernetesValidating", validating);
    list("kubernetesMutating", mutating);
    let body = r#"R="$VALIDATING_RESPONSE_PATH"
case "$(head -c 60 "$BINDING_CONTEXT_PATH")" in
  *'"binding":"allow.example.com"'*|*'"binding":"strict.example.com"'*) echo '{"allowed":true}' > "$R" ;;
  *'"binding":"deny.example.com"'*) echo '{"allowed":false,"message":"configmaps named bad are forbidden"}' > "$R" ;;
  *'"binding":"warn.example.com"'*) echo '{"allowed":true,"warnings":["w1","w2"]}' > "$R" ;;
  *'"binding":"invalid.example.com"'*) echo 'this is not json' > "$R" ;;
  *'"binding":"empty.example.com"'*) : ;;
  *'"binding":"fail.example.com"'*) echo 'boom' >&2; exit 3 ;;
  *'"binding":"slow.example.com"'*) sleep 5; echo '{"allowed":true}' > "$R" ;;
  *'"binding":"mutate.example.com"'*) printf '{"allowed":true,"patch":"%s"}' "$(printf '%s' '[{"op":"add","path":"/data/x","value":"y"}]' | base64 -w0)" > "$R" ;;
esac"#;
    hook("v", &config, body)
}

pub fn review(uid: &str) -> String {
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": {"group": "", "version": "v1", "kind": "ConfigMap"},
            "operation": "CREATE",
            "namespace": "default",
            "object": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bad"}}
        }
    })
    .to_string()
}
