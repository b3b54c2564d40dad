//! Webhooks: hooks with `kubernetesValidating`, `kubernetesMutating` and
//! `kubernetesCustomResourceConversion` bindings answer the API server
//! synchronously over HTTPS.
//!
//! # Layout
//! - [`bind`] (this file): reads the certificate and CA files and binds the two
//!   servers (the operator's bind step); [`Bound::serve`] hands the operator the
//!   servers' thread bodies and [`Bound::register`] registers them with the
//!   cluster (with HA, once leading) and hands over the CRD thread.
//! - `server`, `tls`: the webhooks' routing on the shared listener core
//!   (`listen/`, TLS), certificate reload and optional client-certificate
//!   verification.
//! - `admission`, `conversion`: request → binding context → hook → response.
//! - `run`: running a hook directly (rate limit, snapshots, metrics);
//!   `response`: the hook's response files; `chain`: conversion paths.
//! - `register`, `crd`: the webhook configuration objects and CRD conversion.
//! - `names`: SafeURLString and path splitting; `metrics`: request metrics.
//!
//! Threads (spawned by `operator.rs` from the bodies [`Bound::serve`] and
//! [`Bound::register`] return):
//! `webhook-admission` and `webhook-conversion` accept connections and start their
//! handler threads; `webhook-crds` configures CRDs in the background. Admission
//! registration runs on the main thread before the queues start, as in flant.

pub mod admission;
pub(crate) mod chain;
pub(crate) mod conversion;
pub(crate) mod crd;
pub mod metrics;
pub(crate) mod names;
pub(crate) mod register;
pub(crate) mod response;
pub mod run;
pub mod server;
pub mod tls;

pub(crate) use run::SnapshotSource;

use crate::executor::Executor;
use crate::flags::{Config, WebhookFlags};
use crate::hook::Hook;
use crate::kube::Client;
use crate::log;
use crate::metrics::Metrics;
use base64::Engine;
use crossbeam_channel::{Sender, bounded};
use server::{Handler, Limits, Stopper, TlsServer};
use std::sync::Arc;

/// What [`start`] needs from the operator.
pub(crate) struct Setup<'a> {
    pub(crate) config: &'a Config,
    pub(crate) hooks: &'a Arc<Vec<Hook>>,
    pub(crate) executor: &'a Executor,
    pub(crate) metrics: &'a Arc<Metrics>,
    /// The operator's main client when it has one (else one is made from the flags).
    pub(crate) client: Option<Client>,
    pub(crate) snapshots: SnapshotSource,
    /// The object patcher's client, for hooks that write `$KUBERNETES_PATCH_PATH`.
    pub(crate) patcher: Option<Client>,
    /// Which hooks' admission entries are registered at startup (`None`: all;
    /// addon-operator: not those of modules, which their runs register).
    pub(crate) registered_at_start: Option<Vec<bool>>,
    /// Admission bindings the operator answers itself, by hook index.
    pub(crate) builtins: admission::Builtins,
}

/// Stops the running webhook threads ([`Webhooks::stop`]); the operator joins them.
#[derive(Default)]
pub(crate) struct Webhooks {
    stoppers: Vec<Stopper>,
    /// Dropping it stops the CRD thread's waits.
    stop: Option<Sender<()>>,
    /// What module runs follow, once registered.
    modules: ModuleWebhooks,
}

/// The registrations addon-operator's module runs follow: admission entries
/// added and removed with their module, CRD conversion set before their helm run.
#[derive(Clone, Default)]
pub(crate) struct ModuleWebhooks {
    pub(crate) admission: Option<Arc<register::Registrar>>,
    pub(crate) conversion: Option<Arc<crd::Converter>>,
}

impl Webhooks {
    /// The registrations the addon engine's module runs follow.
    pub(crate) fn for_modules(&self) -> ModuleWebhooks {
        self.modules.clone()
    }

    /// Stops accepting requests and ends the CRD thread's waits.
    pub(crate) fn stop(mut self) {
        drop(self.stop.take());
        self.stoppers.iter().for_each(Stopper::stop);
    }
}

/// A thread the operator spawns: its name and body.
pub(crate) type ThreadBody = (String, Box<dyn FnOnce() + Send + 'static>);

/// The bound servers and what registering them needs.
#[derive(Default)]
pub(crate) struct Bound {
    servers: Vec<TlsServer>,
    admission: Option<register::Registrar>,
    crds: Option<(Client, Vec<String>, crd::Target)>,
}

impl Bound {
    /// Hands the operator each server's accept thread (every replica serves, a
    /// standby too) and the handle that stops them; registration comes later.
    pub(crate) fn serve(&mut self) -> (Webhooks, Vec<ThreadBody>) {
        let mut out = Webhooks::default();
        let mut threads: Vec<ThreadBody> = Vec::new();
        for server in std::mem::take(&mut self.servers) {
            out.stoppers.extend(server.stopper());
            let name = server.name().to_string();
            threads.push((name, Box::new(move || server.serve())));
        }
        (out, threads)
    }

    /// Registers the admission webhooks (before any queue starts, as in flant; with
    /// HA only on the leader) and returns the CRD configuration thread, whose stop
    /// goes into `webhooks`.
    pub(crate) fn register(self, webhooks: &mut Webhooks) -> Result<Vec<ThreadBody>, SetupError> {
        if let Some(registrar) = self.admission {
            (registrar.register(&register::RETRY_DELAYS))
                .map_err(|e| SetupError::from(e.to_string()))?;
            webhooks.modules.admission = Some(Arc::new(registrar));
        }
        let mut threads: Vec<ThreadBody> = Vec::new();
        if let Some((client, names, target)) = self.crds {
            webhooks.modules.conversion = Some(Arc::new(crd::Converter {
                client: client.clone(),
                target: target.clone(),
            }));
            let (tx, rx) = bounded::<()>(0);
            webhooks.stop = Some(tx);
            threads.push((
                "webhook-crds".into(),
                Box::new(move || crd::run(client, names, target, rx)),
            ));
        }
        Ok(threads)
    }
}

/// True if some hook has an admission binding / a conversion binding.
fn kinds(hooks: &[Hook]) -> (bool, bool) {
    let admission = hooks
        .iter()
        .any(|h| !h.config.validating.is_empty() || !h.config.mutating.is_empty());
    let conversion = hooks.iter().any(|h| !h.config.conversion.is_empty());
    (admission, conversion)
}

/// Binds the servers the hooks need (none: nothing happens) and reads every file
/// they need; nothing is registered or served yet.
pub(crate) fn bind(s: Setup<'_>) -> Result<Bound, SetupError> {
    let (admission, conversion) = kinds(s.hooks);
    let mut out = Bound::default();
    if !admission && !conversion {
        return Ok(out);
    }
    let c = s.config;
    let client = match s.client {
        Some(client) => client,
        None => kube_client(c)?,
    };
    let namespace = if c.namespace.is_empty() {
        let ns = client.default_namespace().to_string();
        log::warn(
            "--namespace is not set; webhooks point at Services in the client's namespace",
            &[("namespace", &ns)],
        );
        ns
    } else {
        c.namespace.clone()
    };
    let wm = Arc::new(
        metrics::WebhookMetrics::register(&c.metrics_prefix, s.metrics)
            .map_err(|e| e.to_string())?,
    );
    let runner = Arc::new(run::HookRunner {
        hooks: Arc::clone(s.hooks),
        executor: s.executor.clone(),
        metrics: Arc::clone(s.metrics),
        snapshots: s.snapshots,
        patcher: s.patcher,
        jq_library: c.jq_library_path.clone(),
    });
    if admission {
        let handler = admission::Admission {
            routes: admission::routes(s.hooks)?,
            runner: Arc::clone(&runner),
            metrics: Arc::clone(&wm),
            builtins: s.builtins,
        };
        out.servers
            .push(bind_server("admission", &c.validating, Arc::new(handler))?);
        let target = register::Target {
            name: register::Target::object_name(&c.validating.configuration_name),
            namespace: namespace.clone(),
            service: c.validating.service_name.clone(),
            ca_bundle: ca_bundle(&c.validating, "validating")?,
            failure_policy: c.validating.failure_policy.clone(),
        };
        let (hooks, active) = (Arc::clone(s.hooks), s.registered_at_start);
        out.admission = Some(register::Registrar::new(
            client.clone(),
            target,
            hooks,
            active,
        ));
    }
    if conversion {
        let crds = conversion::rules_by_crd(s.hooks);
        let names: Vec<String> = crds.keys().cloned().collect();
        let handler = conversion::Conversion {
            crds,
            runner,
            metrics: wm,
        };
        out.servers
            .push(bind_server("conversion", &c.conversion, Arc::new(handler))?);
        let target = crd::Target {
            namespace,
            service: c.conversion.service_name.clone(),
            ca_bundle: ca_bundle(&c.conversion, "conversion")?,
        };
        out.crds = Some((client, names, target));
    }
    Ok(out)
}

/// The main client, from the `--kube-*` flags.
fn kube_client(c: &Config) -> Result<Client, SetupError> {
    let settings = crate::kube::KubeSettings::from_flags(&c.kube, "main");
    Client::from_config(&settings)
        .map_err(|e| SetupError::from(format!("kubernetes client for webhooks: {e}")))
}

/// The CA file's bytes, base64-encoded for `caBundle`.
fn ca_bundle(f: &WebhookFlags, kind: &str) -> Result<String, SetupError> {
    let pem = std::fs::read(&f.ca)
        .map_err(|e| SetupError::from(format!("--{kind}-webhook-ca '{}': {e}", f.ca.display())))?;
    Ok(base64::engine::general_purpose::STANDARD.encode(pem))
}

/// Binds one server.
fn bind_server(
    name: &'static str,
    f: &WebhookFlags,
    handler: Arc<dyn Handler>,
) -> Result<TlsServer, SetupError> {
    let kind = if name == "admission" {
        "validating"
    } else {
        "conversion"
    };
    let tls = tls::server_config(&f.server_cert, &f.server_key, &f.client_ca).map_err(|e| {
        SetupError::from(format!("--{kind}-webhook-server-cert/-key/-client-ca: {e}"))
    })?;
    let server = TlsServer::bind(
        name,
        &f.listen_address,
        f.listen_port,
        tls,
        handler,
        Limits::default(),
    )?;
    let addr = server
        .local_addr()
        .map(|a| a.to_string())
        .unwrap_or_default();
    log::info(
        &format!("{name} webhook server listening"),
        &[("address", &addr)],
    );
    Ok(server)
}

/// Why the webhook servers could not be set up: a client, a certificate bundle, a listener, a registration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SetupError {
    problem: String,
}

impl From<String> for SetupError {
    fn from(problem: String) -> SetupError {
        SetupError { problem }
    }
}

impl From<&str> for SetupError {
    fn from(problem: &str) -> SetupError {
        SetupError::from(problem.to_string())
    }
}

impl std::fmt::Display for SetupError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.problem)
    }
}

impl std::error::Error for SetupError {}
