//! The operator's wiring, in three steps: **bind** everything the process needs,
//! **spawn** every thread, **run** until a signal, then shut down. Any failure in
//! bind exits 1 before a hook has run (loading hooks runs them only with
//! `--config`); this file starts every long-lived thread and owns every channel.
//!
//! Threads (`docs/threads.md` has the same list with more words):
//!
//! ```text
//! thread              spawned by              reads                         writes
//! main                -                       signal, election notes        (ticks metrics, expiry), shutdown
//! signals             operator.rs             stop signals (USR1/2 dropped) signal
//! http                operator.rs             metrics port (poll loop)      whole requests → http-N
//! debug, debug-http   operator.rs             debug socket / HTTP (poll)    whole requests → debug-N …
//! queue-<name> × Q    operator.rs             task[name], stop              schedule control, monitor control,
//!                                                                           kube event (releases); runs hooks
//! router              operator.rs             fire, kube event, forwarded   task[*]
//!                                             tasks, addon lifecycle inputs,
//!                                             stop
//! monitor             operator.rs             monitor control, watch events kube event
//! scheduler           operator.rs             schedule control, stop        fire
//! addon-resource-     operator.rs             stop (a check every period)   release drift to router
//!   monitor           (addon-operator only)   helm, API lists
//! webhook-<server>    operator.rs             webhook port (TLS, poll)      whole requests → its handlers
//! webhook-crds        operator.rs             webhook stop                  CRD conversion config
//! reaper              operator.rs (PID 1;     child exits                   exit per child
//!                     not joined)
//! leader-election     operator.rs (--ha)      its stop; the Lease (API)     notes (acquired, lost); the Lease
//! watch-<resource>×W  kube/reflector.rs       API watch stream              watch events (one channel shared by every watch)
//!                     (asked by monitor)
//! <server>-N          listen/mod.rs           whole requests                replies; keep-alive conns back
//!                     (started by each accept thread: http-N, debug-N, webhook-admission-N …)
//! module-run-N        addon/parallel.rs       a ParallelModuleRun's modules runs them (as queue-main would);
//!                     (scoped, by queue-main; joined before the task ends)
//! ```
//!
//! Shutdown flows the other way: the signal stops intake (the `stop` channel is
//! closed, so the scheduler, router, monitor and queues stop taking work), running
//! hooks get SIGTERM and, after the grace period, SIGKILL; listeners are unblocked,
//! threads joined, the Lease released (with `--ha`), and the process exits 0.
//!
//! With `--ha` the spawn step starts only what serves (signals, HTTP, debug,
//! webhook servers) and the election, then waits for the Lease before it
//! registers webhooks and starts anything that acts. Losing the Lease (or missing
//! the renew deadline) stops intake, kills running hooks within
//! `min(grace, lease duration − renew deadline)` and exits 0 without waiting for
//! the other threads.

use crate::debug::DebugState;
use crate::debug::runtime::RuntimeConfig;
use crate::debug::server::{DebugServer, Stopper as DebugStopper};
use crate::executor::Executor;
use crate::flags::{Config, Program};
use crate::hook::context::BindingContext;
use crate::hook::{self, Hook};
use crate::http;
use crate::kube::{Client, KubeSettings};
use crate::leader;
use crate::listen::{Server, Stopper};
use crate::log;
use crate::metrics::Metrics;
use crate::monitor::runtime::KubeRuntime;
use crate::monitor::store::{KubeEvent, SnapshotStore};
use crate::monitor::{self, Monitor, WatchEvent};
use crate::process;
use crate::queue::Task;
use crate::queue::worker::{Handler, QueueView, SharedView, Worker};
use crate::router::Router;
use crate::runner::Runner;
use crate::schedule::{self, Control, Entry, Fire};
use crate::startup::{MAIN_QUEUE, queue_names, schedule_entries, startup_tasks};
use crate::threads;
use crate::webhook;
use crossbeam_channel::{Receiver, Sender, bounded, select, tick, unbounded};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// Runs the operator until SIGTERM/SIGINT; returns the exit code.
pub fn run(config: Config) -> i32 {
    log::init(&config.log);
    let started = Bound::bind(config).and_then(Bound::spawn);
    match started {
        Ok(running) => {
            running.run();
            0
        }
        Err(e) if process::shutdown_requested() => {
            log::info("stopped during startup", &[("reason", &e)]);
            0
        }
        Err(e) => {
            log::error(&format!("startup failed: {e}"), &[]);
            1
        }
    }
}

/// Step 1: everything bound and loaded, nothing running.
struct Bound {
    config: Config,
    hooks: Arc<Vec<Hook>>,
    executor: Executor,
    metrics: Arc<Metrics>,
    ready: Arc<AtomicBool>,
    signals: signal_hook::iterator::Signals,
    http: Server,
    debug: DebugServer,
    views: BTreeMap<String, SharedView>,
    kube: Option<KubeParts>,
    patcher: Result<Client, String>,
    webhooks: webhook::Bound,
    schedule: Vec<Entry>,
    /// addon-operator's modules, values and helm; `None` for shell-operator.
    addon: Option<crate::addon::Bound>,
    /// With `--ha`: the election's handle and its thread body.
    election: Option<(leader::Handle, ThreadBody)>,
}

type ThreadBody = Box<dyn FnOnce() + Send + 'static>;

impl Bound {
    /// Binds every listener and file, loads the hooks and configures the clients.
    fn bind(mut config: Config) -> Result<Bound, String> {
        // Signals first, so a SIGTERM during a slow startup is not lost: the flag
        // stops a hook's `--config` still running (process/run.rs), the
        // iterator reaches the main loop once it runs.
        for sig in STOP_SIGNALS {
            signal_hook::flag::register(sig, process::shutdown_flag())
                .map_err(|e| format!("cannot handle signal {sig}: {e}"))?;
        }
        process::set_shutdown_grace(config.shutdown_grace);
        let handled = STOP_SIGNALS.iter().chain(IGNORED_SIGNALS.iter());
        let signals = signal_hook::iterator::Signals::new(handled)
            .map_err(|e| format!("cannot handle signals: {e}"))?;
        config.hooks_dir = std::fs::canonicalize(&config.hooks_dir)
            .map_err(|e| format!("hooks dir '{}': {e}", config.hooks_dir.display()))?;
        if config.tmp_dir.as_os_str().is_empty() {
            let name = config.program.name();
            config.tmp_dir = std::env::temp_dir().join(format!("{name}-{}", std::process::id()));
        }
        let executor = Executor {
            tmp_dir: config.tmp_dir.clone(),
            keep_tmp_files: config.debug.keep_tmp_files,
            timeout: config.hook_run_timeout,
            ..Default::default()
        };
        executor
            .prepare_tmp_dir()
            .map_err(|e| format!("tmp dir '{}': {e}", config.tmp_dir.display()))?;
        if let Some(link) = crate::builtin_jq::install(&config.tmp_dir)? {
            log::info(
                "no jq on PATH: hooks get the built-in one",
                &[("path", &link.display().to_string())],
            );
        }
        // QUEUE_ACTIONS_METRICS=no switches the queue action histogram off (as in flant).
        let queue_actions = std::env::var("QUEUE_ACTIONS_METRICS").map_or(true, |v| v != "no");
        let metrics = match config.program {
            Program::Addon => Metrics::for_addon(&config.metrics_prefix, queue_actions),
            Program::Shell => Metrics::with_options(&config.metrics_prefix, queue_actions),
        };
        let metrics = Arc::new(metrics.map_err(|e| e.to_string())?);
        let (addon, hooks) = match config.program {
            Program::Addon => {
                let (addon, hooks) = crate::addon::bind(&config, &metrics)?;
                (Some(addon), hooks)
            }
            Program::Shell => (None, load_hooks(&config)?),
        };
        let hooks = Arc::new(hooks);
        let schedule = schedule_entries(&hooks)?;
        let ready = Arc::new(AtomicBool::new(false));
        let views: BTreeMap<String, SharedView> = queue_names(&hooks)
            .into_iter()
            .map(|name| {
                let view = QueueView {
                    name: name.clone(),
                    ..QueueView::default()
                };
                (name, Arc::new(Mutex::new(view)))
            })
            .collect();
        let http_routes = addon
            .as_ref()
            .map(|a| a.http_routes(views.get(MAIN_QUEUE).cloned().unwrap_or_default()));
        let election = match leader::settings(&config, &|k| std::env::var(k).ok())? {
            Some(s) => {
                let (handle, body) = leader::elector(&config, &s, &metrics)?.start();
                Some((handle, Box::new(body) as ThreadBody))
            }
            None => None,
        };
        let http_routes = match &election {
            Some((h, _)) => Some(leader::readiness::routes(
                config.program,
                Arc::clone(&h.status),
                config.listen_port,
                http_routes,
            )),
            None => http_routes,
        };
        let http = http::bind(
            &config.listen_address,
            config.listen_port,
            Arc::clone(&metrics),
            Arc::clone(&ready),
            http_routes,
        )?;
        let port = http.local_addr().map_or(0, |a| a.port());
        let address = format!("{}:{port}", config.listen_address);
        log::info("HTTP server listening", &[("address", &address)]);
        let kube = KubeParts::new(&config, &hooks, &metrics)?;
        let extra = addon.as_ref().map(crate::addon::Bound::debug_routes);
        let debug = bind_debug_server(&config, &hooks, kube.as_ref(), &views, extra)?;
        let patcher = patcher_client(&config);
        let webhooks = webhook::bind(webhook::Setup {
            config: &config,
            hooks: &hooks,
            executor: &executor,
            metrics: &metrics,
            client: kube.as_ref().map(|k| k.client.clone()),
            // Webhook handlers only read snapshots: nothing is ever forwarded.
            snapshots: webhook_snapshots(
                kube.as_ref()
                    .map(|k| k.runtime(&hooks, crossbeam_channel::unbounded().0)),
            ),
            patcher: patcher.clone().ok(),
        })?;
        Ok(Bound {
            config,
            hooks,
            executor,
            metrics,
            ready,
            signals,
            http,
            debug,
            views,
            kube,
            patcher,
            webhooks,
            schedule,
            addon,
            election,
        })
    }

    /// Step 2: starts the threads that serve (signals, HTTP, debug, webhook
    /// servers); with `--ha` starts the election and waits for the Lease; then
    /// registers the webhooks, queues the startup tasks and starts every other
    /// thread, each with a name.
    fn spawn(mut self) -> Result<Running, String> {
        let mut threads: Vec<JoinHandle<()>> = Vec::new();
        // Not joined: it reaps for good (hooks' exits during shutdown come through it
        // too), and joining it would keep PID 1 alive after SIGTERM.
        if let Some(reap) = process::reaper() {
            threads::spawn("reaper", reap)?;
        }
        // Dropping `stop_tx` stops the scheduler, router, monitor and every queue.
        let (stop_tx, stop_rx) = bounded::<()>(0);
        let (signal_tx, signal_rx) = bounded::<i32>(4);
        let mut signals = self.signals;
        // Not joined: it waits for signals for good, and the process exit ends it.
        // Only stop signals go on; the ignored ones end here, logged.
        threads::spawn("signals", move || {
            for sig in signals.forever() {
                if IGNORED_SIGNALS.contains(&sig) {
                    log::info("signal ignored", &[("signal", &sig.to_string())]);
                } else {
                    let _ = signal_tx.send(sig);
                }
            }
        })?;
        let http_stopper = self
            .http
            .stopper()
            .ok_or("the metrics server has no address")?;
        let http = self.http;
        threads.push(threads::spawn("http", move || http.serve())?);
        let debug_stopper = self.debug.stopper();
        let expire = Box::new(self.debug.expirer());
        for (name, body) in self.debug.into_threads() {
            threads.push(threads::spawn(&name, body)?);
        }
        let (mut webhooks, server_threads) = self.webhooks.serve();
        for (name, body) in server_threads {
            threads.push(threads::spawn(&name, body)?);
        }
        let mut running = Running {
            metrics: Arc::clone(&self.metrics),
            views: self.views.values().cloned().collect(),
            signal_rx,
            stop_tx,
            threads,
            grace: self.config.shutdown_grace,
            http_stopper,
            debug_stopper,
            expire,
            webhooks: None,
            election: None,
            early_signal: None,
            spares: self.executor.spares.clone(),
        };
        if let Some((handle, body)) = self.election.take() {
            let thread = threads::spawn("leader-election", body)?;
            let signal = wait_for_lease(&handle, &running.signal_rx)?;
            running.election = Some((handle, thread));
            if signal.is_some() {
                running.early_signal = signal;
                running.webhooks = Some(webhooks);
                return Ok(running);
            }
        }
        for (name, body) in self.webhooks.register(&mut webhooks)? {
            running.threads.push(threads::spawn(&name, body)?);
        }
        running.webhooks = Some(webhooks);
        let (schedule_tx, schedule_rx) = unbounded::<Control>();
        let (fire_tx, fire_rx) = unbounded::<Fire>();
        let queues: BTreeMap<String, (Sender<Task>, Receiver<Task>)> = self
            .views
            .keys()
            .map(|n| (n.clone(), unbounded()))
            .collect();
        let startup = match &self.addon {
            Some(addon) => addon.startup_tasks(&self.hooks),
            None => startup_tasks(&self.hooks),
        };
        // Synchronization tasks for a binding's own queue, through the router.
        let (forward_tx, forward_rx) = unbounded::<(String, Task)>();
        let mut addon = match self.addon {
            Some(addon) => Some(addon.start(
                Arc::clone(&self.hooks),
                schedule_tx.clone(),
                Arc::clone(&self.ready),
                self.kube.as_ref().map(|k| Arc::clone(&k.store)),
            )?),
            None => None,
        };
        // addon-operator is ready after its first converge, not after the hooks' startup.
        let startup_ready = match addon {
            Some(_) => Arc::new(AtomicBool::new(false)),
            None => Arc::clone(&self.ready),
        };
        let runner = Arc::new(Runner {
            hooks: Arc::clone(&self.hooks),
            executor: self.executor,
            metrics: Arc::clone(&self.metrics),
            scheduler: schedule_tx,
            startup_left: AtomicUsize::new(startup.len()),
            ready: Arc::clone(&startup_ready),
            kube: self
                .kube
                .as_ref()
                .map(|k| k.runtime(&self.hooks, forward_tx)),
            patcher: self.patcher,
            jq_library: self.config.jq_library_path.clone(),
            values: addon.as_ref().map(|a| Arc::clone(&a.values)),
        });
        if startup.is_empty() {
            startup_ready.store(true, Ordering::Release);
        }
        let handler: Arc<dyn Handler> = match &addon {
            Some(addon) => addon.handler(Arc::clone(&runner)),
            None => runner.clone(),
        };
        // Queued before the queue threads start, so "main"'s first view lists them all.
        let main = queues.get(MAIN_QUEUE).ok_or("main queue missing")?;
        for task in startup {
            let _ = main.0.send(task);
        }
        let threads = &mut running.threads;
        let mut senders: BTreeMap<String, Sender<Task>> = BTreeMap::new();
        for (name, (tx, rx)) in queues {
            let view = self.views.get(&name).cloned().unwrap_or_default();
            let worker = Worker::new(&name, rx, stop_rx.clone(), handler.clone(), view);
            threads.push(threads::spawn(&format!("queue-{name}"), move || {
                worker.run()
            })?);
            senders.insert(name, tx);
        }
        let router = Router {
            hooks: Arc::clone(&self.hooks),
            fires: fire_rx,
            kube_events: self
                .kube
                .as_ref()
                .map_or_else(crossbeam_channel::never, |k| k.events_rx.clone()),
            stop: stop_rx.clone(),
            queues: senders,
            forward: match &self.kube {
                Some(_) => forward_rx,
                None => crossbeam_channel::never(),
            },
            addon: addon.as_mut().and_then(|a| a.inputs()),
        };
        threads.push(threads::spawn("router", move || router.run())?);
        if let Some(k) = self.kube {
            // One channel carries every reflector's events to the monitor.
            let (watch_tx, watch_rx) = unbounded::<WatchEvent>();
            let monitor = Monitor::new(
                k.client,
                Arc::clone(&self.hooks),
                k.store,
                Arc::clone(&self.metrics),
                watch_tx,
                watch_rx,
                k.events_tx,
            );
            let (control, stop) = (k.control_rx, stop_rx.clone());
            threads.push(threads::spawn("monitor", move || {
                monitor.run(control, stop)
            })?);
        }
        if let Some(body) = addon
            .as_mut()
            .and_then(|a| a.resource_monitor(stop_rx.clone()))
        {
            threads.push(threads::spawn("addon-resource-monitor", body)?);
        }
        let (entries, stop) = (self.schedule, stop_rx);
        threads.push(threads::spawn("scheduler", move || {
            schedule::run(entries, schedule_rx, stop, fire_tx)
        })?);
        Ok(running)
    }
}

/// Blocks until the election reports the Lease acquired (`Ok(None)`) or a signal
/// arrives first (`Ok(Some(signal))`): a standby serves but acts on nothing.
fn wait_for_lease(handle: &leader::Handle, signals: &Receiver<i32>) -> Result<Option<i32>, String> {
    select! {
        recv(handle.notes) -> note => match note {
            Ok(leader::Note::Acquired) => Ok(None),
            Ok(leader::Note::Lost(why)) => Err(format!("leader election: {why}")),
            Err(_) => Err("leader election thread ended".into()),
        },
        recv(signals) -> sig => Ok(Some(sig.unwrap_or(0))),
    }
}

/// Step 3: the running process.
struct Running {
    metrics: Arc<Metrics>,
    views: Vec<SharedView>,
    signal_rx: Receiver<i32>,
    stop_tx: Sender<()>,
    threads: Vec<JoinHandle<()>>,
    grace: Duration,
    http_stopper: Stopper,
    debug_stopper: DebugStopper,
    /// Expires the debug socket's temporary runtime parameters.
    expire: Box<dyn Fn() + Send>,
    webhooks: Option<webhook::Webhooks>,
    /// With `--ha`: the election and its thread, joined after the release.
    election: Option<(leader::Handle, JoinHandle<()>)>,
    /// A signal that came while waiting for the Lease: shut down at once.
    early_signal: Option<i32>,
    /// Hooks' temp files made ahead for their next runs (removed at the end).
    spares: crate::executor::Spares,
}

/// Why the main loop ended.
enum End {
    Signal(i32),
    /// The Lease was lost (or not renewed within the renew deadline).
    Lost(String),
}

impl Running {
    /// Ticks metrics until a signal (or, with `--ha`, the Lease is lost), then
    /// shuts down in order.
    fn run(self) {
        let end = match self.early_signal {
            Some(sig) => End::Signal(sig),
            None => tick_until_end(
                &self.metrics,
                &self.views,
                &self.signal_rx,
                &self.expire,
                self.election.as_ref().map(|(h, _)| h),
            ),
        };
        match end {
            End::Signal(signal) => self.shut_down(signal),
            End::Lost(why) => self.give_up(&why),
        }
    }

    fn shut_down(self, signal: i32) {
        log::info("shutting down", &[("signal", &signal.to_string())]);
        drop(self.stop_tx);
        process::terminate_all(self.grace);
        self.http_stopper.stop();
        if let Some(w) = self.webhooks {
            w.stop();
        }
        self.debug_stopper.stop();
        for t in self.threads {
            let _ = t.join();
        }
        self.spares.close();
        // Released only now: no hook of ours runs any more.
        if let Some((handle, thread)) = self.election {
            handle.release();
            let _ = thread.join();
        }
        log::info("stopped", &[]);
    }

    /// Lost the Lease: stop intake, kill running hooks before another replica can
    /// take the Lease, and return without joining (threads may be stuck on the API).
    fn give_up(self, why: &str) {
        log::error("leadership lost: stopping", &[("reason", why)]);
        drop(self.stop_tx);
        let grace = self.election.as_ref().map_or(self.grace, |(h, _)| {
            let t = h.timings;
            self.grace
                .min(t.lease_duration.saturating_sub(t.renew_deadline) / 2)
        });
        process::terminate_all(grace);
        self.spares.close();
        log::info("stopped", &[]);
    }
}

fn load_hooks(config: &Config) -> Result<Vec<Hook>, String> {
    let dir = config.hooks_dir.display().to_string();
    log::info("loading hooks", &[("dir", &dir)]);
    let hooks = hook::load_all(
        &config.hooks_dir,
        config.hook_run_timeout,
        config.jq_library_path.as_deref(),
    )
    .map_err(|e| e.to_string())?;
    for h in &hooks {
        log::info("hook loaded", &[("hook", &h.name)]);
    }
    Ok(hooks)
}

/// Binds the debug socket; `hook snapshot` shows each kubernetes binding's current
/// snapshot from the store.
fn bind_debug_server(
    config: &Config,
    hooks: &Arc<Vec<Hook>>,
    kube: Option<&KubeParts>,
    views: &BTreeMap<String, SharedView>,
    extra: Option<crate::debug::ExtraRoutes>,
) -> Result<DebugServer, String> {
    // The addon-operator's internal ConfigMap watch is no hook of the user's.
    let names: Vec<String> = hooks
        .iter()
        .filter(|h| !h.is_internal())
        .map(|h| h.name.clone())
        .collect();
    let all = Arc::clone(hooks);
    let store = kube.map(|k| Arc::clone(&k.store));
    let state = Arc::new(DebugState {
        queues: views.values().cloned().collect(),
        hooks: names,
        snapshots: Arc::new(move |name: &str| {
            let index = all.iter().position(|h| h.name == name)?;
            let mut view = serde_json::Map::new();
            for (bi, b) in all[index].config.kubernetes.iter().enumerate() {
                let items: Vec<serde_json::Value> = store
                    .as_ref()
                    .map(|s| s.snapshot(index, bi).iter().map(|i| i.to_json()).collect())
                    .unwrap_or_default();
                view.entry(b.name.clone())
                    .or_insert_with(|| serde_json::json!({ "snapshot": items }));
            }
            Some(serde_json::Value::Object(view))
        }),
        config: RuntimeConfig::new(&config.log.level),
        extra,
    });
    let server = DebugServer::bind(&config.debug.unix_socket, &config.debug.http_addr, state)?;
    let socket = config.debug.unix_socket.display().to_string();
    log::info("debug server listening", &[("socket", &socket)]);
    Ok(server)
}

/// Signals that stop the operator as SIGTERM does (hooks get SIGTERM, then SIGKILL
/// after the grace period; exit 0). SIGHUP and SIGQUIT would otherwise kill it with
/// their default action and orphan every running hook's process group.
const STOP_SIGNALS: [i32; 4] = [
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGHUP,
    signal_hook::consts::SIGQUIT,
];

/// Signals that are logged and otherwise ignored (their default action kills).
const IGNORED_SIGNALS: [i32; 2] = [signal_hook::consts::SIGUSR1, signal_hook::consts::SIGUSR2];

/// The main thread's loop until a stop signal or a lost Lease: every second
/// `expire` (the debug socket's temporary parameters), queue lengths every 5 s, live
/// ticks every 10 s; with `--ha` the election's notes, and every 100 ms the renew
/// deadline (checked here too, so a renew hanging on the API cannot delay it).
fn tick_until_end(
    metrics: &Metrics,
    views: &[SharedView],
    signals: &Receiver<i32>,
    expire: &dyn Fn(),
    election: Option<&leader::Handle>,
) -> End {
    let ticker = tick(Duration::from_secs(1));
    let notes = election.map_or_else(crossbeam_channel::never, |h| h.notes.clone());
    let watchdog = election.map_or_else(crossbeam_channel::never, |_| {
        tick(Duration::from_millis(100))
    });
    let mut ticks = 0u64;
    metrics.live_ticks.inc();
    update_queue_lengths(metrics, views);
    loop {
        select! {
            recv(signals) -> sig => return End::Signal(sig.unwrap_or(0)),
            recv(notes) -> note => return End::Lost(match note {
                Ok(leader::Note::Lost(why)) => why,
                Ok(other) => format!("unexpected election note {other:?}"),
                Err(_) => "the election thread ended".into(),
            }),
            recv(watchdog) -> _ => {
                if let Some(h) = election.filter(|h| h.status.overdue(h.timings.renew_deadline)) {
                    let deadline = h.timings.renew_deadline;
                    return End::Lost(format!("no renew succeeded within {deadline:?}"));
                }
            }
            recv(ticker) -> _ => {
                ticks += 1;
                expire();
                if ticks % 5 == 0 {
                    update_queue_lengths(metrics, views);
                }
                if ticks % 10 == 0 {
                    metrics.live_ticks.inc();
                }
            }
        }
    }
}

fn update_queue_lengths(metrics: &Metrics, views: &[SharedView]) {
    for view in views {
        let v = view.lock().unwrap_or_else(|p| p.into_inner());
        metrics
            .tasks_queue_length
            .with_label_values(&[v.name.as_str()])
            .set(v.tasks.len() as f64);
    }
}

/// The object patcher's own client (its QPS, burst and timeout). Not having a
/// cluster is not an error until a hook writes a patch.
fn patcher_client(config: &Config) -> Result<Client, String> {
    let settings = KubeSettings {
        server: config.kube.server.clone(),
        kubeconfig: config.kube.config.clone(),
        context: config.kube.context.clone(),
        qps: config.kube.patcher_qps,
        burst: config.kube.patcher_burst,
        timeout: config.kube.patcher_timeout,
        component: "object_patcher".into(),
    };
    Client::from_config(&settings)
        .map_err(|e| format!("no Kubernetes client for the object patcher: {e}"))
}

/// Snapshots for webhook runs, read from the monitors' store when the hook starts.
fn webhook_snapshots(rt: Option<KubeRuntime>) -> webhook::SnapshotSource {
    Arc::new(move |hook: &str, names: &[String]| {
        let Some(rt) = &rt else {
            return Default::default();
        };
        let Some(index) = rt.hooks.iter().position(|h| h.name == hook) else {
            return Default::default();
        };
        let probe = BindingContext::schedule("webhook", None, names.to_vec());
        rt.prepare(index, &[probe])
    })
}

/// The Kubernetes side, present when some hook has kubernetes bindings: the client,
/// the snapshots, and the channels of the monitor thread.
struct KubeParts {
    client: Client,
    store: Arc<SnapshotStore>,
    control_tx: Sender<monitor::Control>,
    control_rx: Receiver<monitor::Control>,
    events_tx: Sender<KubeEvent>,
    events_rx: Receiver<KubeEvent>,
}

impl KubeParts {
    fn new(
        config: &Config,
        hooks: &[Hook],
        metrics: &Metrics,
    ) -> Result<Option<KubeParts>, String> {
        if !hooks.iter().any(Hook::has_kube_bindings) {
            return Ok(None);
        }
        let settings = crate::kube::KubeSettings::from_flags(&config.kube, "main");
        let client_metrics = crate::kube::ClientMetrics::new(&config.metrics_prefix, "main");
        client_metrics
            .register(metrics.registry())
            .map_err(|e| format!("kubernetes client metrics: {e}"))?;
        let client = Client::from_config_with_metrics(&settings, client_metrics)
            .map_err(|e| format!("kubernetes client: {e}"))?;
        log::info(
            "kubernetes client configured",
            &[("source", client.origin())],
        );
        let counts = hooks
            .iter()
            .enumerate()
            .map(|(i, h)| (i, h.config.kubernetes.len()));
        let (control_tx, control_rx) = unbounded();
        let (events_tx, events_rx) = unbounded();
        Ok(Some(KubeParts {
            client,
            store: Arc::new(SnapshotStore::new(counts)),
            control_tx,
            control_rx,
            events_tx,
            events_rx,
        }))
    }

    fn runtime(&self, hooks: &Arc<Vec<Hook>>, forward: Sender<(String, Task)>) -> KubeRuntime {
        KubeRuntime {
            hooks: Arc::clone(hooks),
            store: Arc::clone(&self.store),
            monitor: self.control_tx.clone(),
            events: self.events_tx.clone(),
            forward,
        }
    }
}
