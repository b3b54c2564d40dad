//! The debug socket: a small HTTP server on a unix socket (`--debug-unix-socket`,
//! optionally also on `--debug-http-addr`) answering flant's debug endpoints, and
//! the client the same binary runs as `shell-operator queue|hook|config|raw ...`.
//!
//! - [`server`]: the listener threads and the routes;
//! - [`queues`]: queue list / main queue in flant's JSON and text shapes;
//! - [`runtime`]: runtime parameters (`log.level`) changed by `config set`;
//! - [`client`]: the CLI side, which talks to the socket.
//!
//! The server reads [`DebugState`]: each queue thread's published view, the hook
//! names, a snapshot callback (filled by the Kubernetes monitors) and the runtime
//! parameters.

pub(crate) mod client;
pub(crate) mod queues;
pub(crate) mod runtime;
pub(crate) mod server;

use crate::queue::worker::{QueueView, SharedView};
use std::sync::Arc;

/// Hook name → `{binding: {...}}` snapshot view; `None` for an unknown hook.
pub(crate) type SnapshotFn = Arc<dyn Fn(&str) -> Option<serde_json::Value> + Send + Sync>;

/// More routes (addon-operator's `/global/...` and `/module/...`): path stem (the
/// path without its `.format`), query and format (`text`, `json`, `yaml`) → `None`
/// for a path it does not serve, else the value (a string is printed as it is in
/// the text format) or an error text.
pub(crate) type ExtraRoutes =
    Arc<dyn Fn(&str, &str, &str) -> Option<Result<serde_json::Value, String>> + Send + Sync>;

/// The current hook names, in load order.
pub(crate) type HookNames = Arc<dyn Fn() -> Vec<String> + Send + Sync>;

/// What the debug endpoints show.
pub(crate) struct DebugState {
    /// Every queue's view, as the queue threads publish it.
    pub(crate) queues: Vec<SharedView>,
    /// Hook names in load order, as they are now (a reload changes them).
    pub(crate) hooks: HookNames,
    pub(crate) snapshots: SnapshotFn,
    pub(crate) config: runtime::RuntimeConfig,
    pub(crate) extra: Option<ExtraRoutes>,
}

impl DebugState {
    /// A consistent copy of every queue's view.
    pub(crate) fn queue_views(&self) -> Vec<QueueView> {
        self.queues
            .iter()
            .map(|v| v.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .collect()
    }
}
