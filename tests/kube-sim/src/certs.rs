//! Test certificates: makes a throw-away CA, a server certificate for
//! 127.0.0.1/localhost and a client certificate (CN `kube-sim-user`, O
//! `system:masters`) by running the `openssl` CLI, so tests of TLS clients
//! need no certificate crate. Keys are EC P-256; files are PEM.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Paths of the generated files (all in one directory).
#[derive(Debug, Clone)]
pub struct TestCerts {
    pub ca_cert: PathBuf,
    pub ca_key: PathBuf,
    pub server_cert: PathBuf,
    pub server_key: PathBuf,
    pub client_cert: PathBuf,
    pub client_key: PathBuf,
}

impl TestCerts {
    /// `TlsFiles` for a server that also accepts client certs from this CA.
    pub fn tls_files(&self) -> crate::TlsFiles {
        crate::TlsFiles {
            cert: self.server_cert.clone(),
            key: self.server_key.clone(),
            client_ca: Some(self.ca_cert.clone()),
        }
    }
}

const SCRIPT: &str = r#"set -e
key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }
key ca.key
openssl req -x509 -new -key ca.key -out ca.crt -days 30 -subj /CN=kube-sim-test-ca \
  -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign 2>/dev/null
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' > server.ext
printf 'extendedKeyUsage=clientAuth\nbasicConstraints=CA:FALSE\n' > client.ext
for who in server client; do
  key $who.key
  subj=/CN=kube-sim; [ $who = client ] && subj=/O=system:masters/CN=kube-sim-user
  openssl req -new -key $who.key -out $who.csr -subj "$subj" 2>/dev/null
  openssl x509 -req -in $who.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out $who.crt -days 30 -extfile $who.ext 2>/dev/null
done
"#;

/// Generates the certificates into `dir` (created if missing) with `openssl`.
pub fn make_test_certs(dir: &Path) -> io::Result<TestCerts> {
    std::fs::create_dir_all(dir)?;
    let status = Command::new("sh")
        .arg("-c")
        .arg(SCRIPT)
        .current_dir(dir)
        .status()?;
    if !status.success() {
        return Err(io::Error::other(format!(
            "openssl failed making test certificates in {}",
            dir.display()
        )));
    }
    let p = |f: &str| dir.join(f);
    Ok(TestCerts {
        ca_cert: p("ca.crt"),
        ca_key: p("ca.key"),
        server_cert: p("server.crt"),
        server_key: p("server.key"),
        client_cert: p("client.crt"),
        client_key: p("client.key"),
    })
}

/// Runs `openssl <args>` in `dir` through the shell (so tests can write certificate
/// recipes as one line each); panics with openssl's stderr when it fails. For tests.
pub fn openssl(dir: &Path, args: &str) {
    let out = Command::new("sh")
        .arg("-c")
        .arg(format!("openssl {args}"))
        .current_dir(dir)
        .output()
        .expect("run openssl");
    assert!(
        out.status.success(),
        "openssl {args}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}
