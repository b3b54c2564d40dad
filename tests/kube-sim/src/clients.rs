//! Per-client faults: a client is named by its bearer token (write a kubeconfig
//! with [`crate::Sim::write_kubeconfig_for`] to give each process its own), and one
//! client can be paused (its requests hang until resumed) or cut (its connections
//! are closed and every new request of it closes the connection unanswered, until
//! restored) while every other client is served normally; each client's requests
//! are counted. `server` asks
//! [`ClientFaults::admit`] before each request.

use std::collections::{HashMap, HashSet};
use std::net::{Shutdown, TcpStream};
use std::sync::{Condvar, Mutex};
use std::time::Duration;

/// What `server` does with a request after [`ClientFaults::admit`].
#[derive(Debug, PartialEq, Eq)]
pub enum Admission {
    Serve,
    /// Close the connection without an answer.
    Drop,
}

/// Paused and cut clients, and which client each open connection last spoke for.
#[derive(Default)]
pub struct ClientFaults {
    state: Mutex<State>,
    changed: Condvar,
}

#[derive(Default)]
struct State {
    paused: HashSet<String>,
    cut: HashSet<String>,
    /// Connection id → client id, with a clone of the socket to close it.
    conns: HashMap<u64, (String, TcpStream)>,
    /// Requests admitted so far, per client.
    served: HashMap<String, usize>,
}

impl ClientFaults {
    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records that connection `conn` speaks for `client`, then waits while the
    /// client is paused; a cut client (or `shutdown()` turning true) gets `Drop`.
    pub fn admit(
        &self,
        conn: u64,
        client: &str,
        socket: &TcpStream,
        shutdown: &dyn Fn() -> bool,
    ) -> Admission {
        let mut st = self.state();
        let known = st.conns.get(&conn).map(|(who, _)| who.as_str());
        if known != Some(client)
            && let Ok(clone) = socket.try_clone()
        {
            st.conns.insert(conn, (client.to_string(), clone));
        }
        loop {
            if st.cut.contains(client) || shutdown() {
                return Admission::Drop;
            }
            if !st.paused.contains(client) {
                *st.served.entry(client.to_string()).or_default() += 1;
                return Admission::Serve;
            }
            st = match self.changed.wait_timeout(st, Duration::from_millis(250)) {
                Ok((guard, _)) => guard,
                Err(p) => p.into_inner().0,
            };
        }
    }

    /// Forgets a closed connection.
    pub fn closed(&self, conn: u64) {
        self.state().conns.remove(&conn);
    }

    /// Requests of `client` served so far.
    pub fn served(&self, client: &str) -> usize {
        self.state().served.get(client).copied().unwrap_or(0)
    }

    pub fn pause(&self, client: &str) {
        self.state().paused.insert(client.to_string());
    }

    pub fn resume(&self, client: &str) {
        self.state().paused.remove(client);
        self.changed.notify_all();
    }

    /// Closes every open connection of `client` (watches included) and refuses it
    /// until [`restore`](Self::restore).
    pub fn cut(&self, client: &str) {
        let mut st = self.state();
        st.cut.insert(client.to_string());
        for (who, socket) in st.conns.values() {
            if who == client {
                let _ = socket.shutdown(Shutdown::Both);
            }
        }
        self.changed.notify_all();
    }

    pub fn restore(&self, client: &str) {
        self.state().cut.remove(client);
        self.changed.notify_all();
    }
}

/// The client a request speaks for: its bearer token, or "" without one.
pub fn client_of(authorization: Option<&str>) -> &str {
    authorization
        .and_then(|h| h.strip_prefix("Bearer "))
        .map_or("", str::trim)
}
