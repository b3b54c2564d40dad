//! Admission and conversion webhooks: the TLS server, handlers, registration (with HA: by the leader only), flant's examples.
//!
//! One test binary for the area (linking one binary per file cost CI most of its
//! time); each former file is a module.

#[path = "../common/mod.rs"]
mod common;
#[path = "../webhook_common/mod.rs"]
mod webhook_common;

mod admission;
mod conversion;
mod example;
mod ha;
mod kubectl_e2e;
mod registration;
mod server;
mod tls;
