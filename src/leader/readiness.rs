//! Readiness while a replica waits for leadership, on the metrics port.
//! addon-operator (flant's behaviour, spec §8): `/ready` and `/readyz` ask the
//! leader's `/readyz` (at the pod IP in its identity, this replica's port, 3 s)
//! and answer 200 `HA mode is enabled and waiting for acquiring the lock.` when the
//! leader is ready, else 500 with the reason. shell-operator: `/ready` answers 200
//! `standby: waiting for leadership`, so a webhook Service keeps routing to the
//! standby, whose webhook server answers. Once leading, the usual routes answer.

use super::Status;
use crate::flags::Program;
use crate::http::ExtraRoutes;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// How long the leader's `/readyz` may take.
const PROXY_TIMEOUT: Duration = Duration::from_secs(3);

/// `inner` (the program's own routes) wrapped with the standby answers.
pub(crate) fn routes(
    program: Program,
    status: Arc<Status>,
    port: u16,
    inner: Option<ExtraRoutes>,
) -> ExtraRoutes {
    Arc::new(move |path: &str, query: &str| {
        let own = || inner.as_ref().and_then(|f| f(path, query));
        if status.leading() {
            return own();
        }
        match (program, path) {
            (Program::Addon, "/ready" | "/readyz") => Some(ask_leader(&status.holder(), port)),
            (Program::Shell, "/ready") => Some((200, "standby: waiting for leadership\n".into())),
            _ => own(),
        }
    })
}

/// The pod IP in a flant identity `<pod>.<a-b-c-d>.<namespace>.pod`.
pub(crate) fn identity_ip(identity: &str) -> Option<Ipv4Addr> {
    let dashed = identity.split('.').nth(1)?;
    dashed.replace('-', ".").parse().ok()
}

fn ask_leader(holder: &str, port: u16) -> (u16, String) {
    if holder.is_empty() {
        return (
            500,
            "HA mode is enabled and no replica holds the lock.\n".into(),
        );
    }
    let Some(ip) = identity_ip(holder) else {
        return (
            500,
            format!("HA mode: leader identity {holder:?} has no pod IP.\n"),
        );
    };
    match leader_readyz(SocketAddr::from((ip, port))) {
        Ok(200) => (
            200,
            "HA mode is enabled and waiting for acquiring the lock.\n".into(),
        ),
        Ok(code) => (
            500,
            format!("HA mode: leader {holder} /readyz answered {code}.\n"),
        ),
        Err(e) => (500, format!("HA mode: leader {holder} /readyz: {e}.\n")),
    }
}

/// GET `/readyz` at `addr`: its status code.
fn leader_readyz(addr: SocketAddr) -> std::io::Result<u16> {
    let mut s = TcpStream::connect_timeout(&addr, PROXY_TIMEOUT)?;
    s.set_read_timeout(Some(PROXY_TIMEOUT))?;
    s.set_write_timeout(Some(PROXY_TIMEOUT))?;
    write!(s, "GET /readyz HTTP/1.0\r\nHost: {addr}\r\n\r\n")?;
    let mut head = [0u8; 64];
    let n = s.read(&mut head)?;
    let text = String::from_utf8_lossy(&head[..n]);
    text.split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other("no HTTP status line"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_ip_comes_from_the_identity() {
        assert_eq!(
            identity_ip("addon-0.10-1-2-3.d8-system.pod"),
            Some(Ipv4Addr::new(10, 1, 2, 3))
        );
        assert_eq!(identity_ip("host-a"), None);
    }

    #[test]
    fn a_leader_that_cannot_be_reached_is_500() {
        let (code, text) = ask_leader("a.127-0-0-1.ns.pod", 1);
        assert_eq!(code, 500, "{text}");
        assert_eq!(ask_leader("", 1).0, 500);
    }
}
