//! The control plane's certificates, made with the `openssl` command: a CA, the
//! API server's serving certificate (127.0.0.1, localhost and the in-cluster names),
//! an admin client certificate (group `system:masters`) and the ServiceAccount token
//! signing key pair.

use std::path::Path;
use std::process::Command;

/// Runs `openssl ARGS` in `dir`; the error carries openssl's stderr.
pub fn openssl(dir: &Path, args: &str) -> Result<(), String> {
    let out = Command::new("openssl")
        .args(args.split_whitespace())
        .current_dir(dir)
        .output()
        .map_err(|e| format!("openssl {args}: {e} (is openssl installed?)"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "openssl {args}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ))
    }
}

/// Signs `name`.csr with the CA into `name`.crt, with extensions `ext`.
fn sign(dir: &Path, name: &str, ext: &str) -> Result<(), String> {
    std::fs::write(dir.join(format!("{name}.ext")), ext).map_err(|e| e.to_string())?;
    openssl(
        dir,
        &format!(
            "x509 -req -in {name}.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 30 \
             -extfile {name}.ext -out {name}.crt"
        ),
    )
}

/// Makes a client key and certificate `name`.{key,crt} for user `cn` in group `org`.
pub fn client_cert(dir: &Path, name: &str, cn: &str, org: &str) -> Result<(), String> {
    openssl(
        dir,
        &format!("genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out {name}.key"),
    )?;
    openssl(
        dir,
        &format!("req -new -key {name}.key -subj /CN={cn}/O={org} -out {name}.csr"),
    )?;
    sign(
        dir,
        name,
        "basicConstraints=CA:FALSE\nextendedKeyUsage=clientAuth\n",
    )
}

/// Makes every file the servers and the admin kubeconfig need in `dir`.
pub fn make(dir: &Path) -> Result<(), String> {
    openssl(
        dir,
        "genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ca.key",
    )?;
    openssl(
        dir,
        "req -x509 -new -key ca.key -subj /CN=control-plane-test-ca -days 30 \
         -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign,cRLSign \
         -out ca.crt",
    )?;
    openssl(
        dir,
        "genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out apiserver.key",
    )?;
    openssl(
        dir,
        "req -new -key apiserver.key -subj /CN=kube-apiserver -out apiserver.csr",
    )?;
    sign(
        dir,
        "apiserver",
        "subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,\
         DNS:kubernetes.default,DNS:kubernetes.default.svc\n\
         basicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )?;
    client_cert(dir, "admin", "admin", "system:masters")?;
    openssl(dir, "genrsa -out sa.key 2048")?;
    openssl(dir, "rsa -in sa.key -pubout -out sa.pub")
}

/// Makes a serving certificate `name`.{key,crt} signed by the CA for `dns` names and
/// `ips` (for the operator's webhook servers in tests).
pub fn server_cert(dir: &Path, name: &str, dns: &[&str], ips: &[&str]) -> Result<(), String> {
    openssl(
        dir,
        &format!("genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out {name}.key"),
    )?;
    openssl(
        dir,
        &format!("req -new -key {name}.key -subj /CN={name} -out {name}.csr"),
    )?;
    let sans: Vec<String> = dns
        .iter()
        .map(|d| format!("DNS:{d}"))
        .chain(ips.iter().map(|i| format!("IP:{i}")))
        .collect();
    sign(
        dir,
        name,
        &format!(
            "subjectAltName={}\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
            sans.join(",")
        ),
    )
}
