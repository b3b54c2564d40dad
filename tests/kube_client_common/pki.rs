//! Test PKI made with the `openssl` command: an EC P-256 CA, a server certificate
//! for 127.0.0.1/localhost, an RSA (PKCS#1, as kubeadm writes) client certificate,
//! and a stray key that matches nothing.

use kube_sim::certs::openssl;
use std::path::PathBuf;

pub struct Pki {
    pub dir: PathBuf,
}

impl Pki {
    pub fn path(&self, f: &str) -> PathBuf {
        self.dir.join(f)
    }

    pub fn read(&self, f: &str) -> Vec<u8> {
        std::fs::read(self.path(f)).expect("pki file")
    }
}

/// Makes a fresh PKI in a temp dir named by `tag`.
pub fn make(tag: &str) -> Pki {
    let dir = std::env::temp_dir().join(format!("kube-pki-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    openssl(
        &dir,
        "genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key",
    );
    openssl(
        &dir,
        "req -x509 -new -key ca.key -subj /CN=test-ca -days 2 -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign -out ca.crt",
    );
    openssl(
        &dir,
        "genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out server.key",
    );
    openssl(
        &dir,
        "req -new -key server.key -subj /CN=kube-sim -out server.csr",
    );
    std::fs::write(dir.join("server.ext"), "subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n").unwrap();
    openssl(
        &dir,
        "x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile server.ext -out server.crt",
    );
    openssl(&dir, "genrsa -traditional -out client.key 2048");
    openssl(
        &dir,
        "req -new -key client.key -subj /CN=kubernetes-admin/O=system:masters -out client.csr",
    );
    std::fs::write(
        dir.join("client.ext"),
        "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
    )
    .unwrap();
    openssl(
        &dir,
        "x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -extfile client.ext -out client.crt",
    );
    openssl(&dir, "genrsa -traditional -out other.key 2048");
    // A second, unrelated CA for the wrong-CA case.
    openssl(
        &dir,
        "genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out wrong-ca.key",
    );
    openssl(
        &dir,
        "req -x509 -new -key wrong-ca.key -subj /CN=wrong-ca -days 2 -addext basicConstraints=critical,CA:TRUE -out wrong-ca.crt",
    );
    assert!(
        std::fs::read_to_string(dir.join("client.key"))
            .unwrap()
            .contains("BEGIN RSA PRIVATE KEY")
    );
    Pki { dir }
}
