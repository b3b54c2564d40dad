//! The operator's wiring, in three steps: **bind** everything the process needs,
//! **spawn** every thread, **run** until a signal, then shut down. Any failure in
//! bind exits 1 before a hook has run (loading hooks runs them only with
//! `--config`). This file starts every long-lived thread and creates the channels
//! between them (`operator/bind.rs` makes the monitor's control and event channels
//! in the bind step; the channels made elsewhere, each where its one use is, are
//! listed in `docs/threads.md`).
//!
//! What differs between shell-operator and addon-operator goes through one seam,
//! `operator/flavor.rs`, called once in bind and once in spawn, as the webhooks go
//! through `webhook::bind` / `serve` / `register`: the program's hooks, metrics and
//! routes; its first tasks, values hook, queue handler, lifecycle inputs for the
//! router, readiness, and the resource monitor's thread body. `operator/bind.rs`
//! holds the bind step's parts, `operator/main_loop.rs` the run step's loop.
//!
//! Threads (`docs/threads.md` has the same list with more words):
//!
//! ```text
//! thread              spawned by              reads                         writes
//! main                -                       signal, election notes        (ticks metrics, expiry), shutdown
//! signals             operator.rs             stop signals (USR1/2 dropped) signal; SIGHUP → reload
//! http                operator.rs             metrics port (poll loop)      whole requests → http-N
//! debug, debug-http   operator.rs             debug socket / HTTP (poll)    whole requests → debug-N …
//! queue-<name> × Q    operator.rs             task[name], stop              schedule control, monitor control,
//!                                                                           kube event (releases); runs hooks
//! router              operator.rs             fire, kube event, forwarded   task[*]
//!                                             tasks, addon lifecycle inputs,
//!                                             stop
//! monitor             operator.rs             monitor control, watch events kube event
//! scheduler           operator.rs             schedule control, stop        fire
//! reload              operator.rs             hooks dir (polled, 0.5 s),    hook table, monitor control,
//!                                             SIGHUP, stop                  schedule control, task[main],
//!                                                                           webhook entries (shell-operator);
//!                                                                           lifecycle inputs (addon-operator)
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
//! hook-config-N       threads::map_parallel   the hooks to load             their --config, parsed (startup only;
//! helm-version        addon::bind             -                             helm's major; scoped, joined in bind)
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

mod bind;
mod flavor;
mod main_loop;
mod start_error;

use crate::debug::server::{DebugServer, Stopper as DebugStopper};
use crate::executor::Executor;
use crate::flags::Config;
use crate::hook::table::HookTable;
use crate::kube::Client;
use crate::leader;
use crate::listen::{Server, Stopper};
use crate::log;
use crate::metrics::Metrics;
use crate::monitor::{Monitor, WatchEvent};
use crate::process;
use crate::queue::Task;
use crate::queue::worker::{Handler, SharedView, Worker};
use crate::reload;
use crate::router::Router;
use crate::runner::Runner;
use crate::schedule::{self, Control, Entry, Fire};
use crate::startup::{MAIN_QUEUE, schedule_entries};
use crate::threads;
use crate::webhook;
use bind::{
    KubeParts, bind_debug_server, bind_election, bind_http, bind_signals, patcher_client,
    prepare_dirs, queue_views, webhook_snapshots,
};
use crossbeam_channel::{Receiver, Sender, bounded, select, unbounded};
use flavor::Flavor;
use main_loop::{End, tick_until_end};
use start_error::StartError;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

/// Runs the operator until SIGTERM/SIGINT; returns the exit code.
pub(crate) fn run(config: Config) -> i32 {
    log::init(&config.log);
    let started = Bound::bind(config).and_then(Bound::spawn);
    match started {
        Ok(running) => {
            running.run();
            0
        }
        Err(e) if process::shutdown_requested() => {
            log::info("stopped during startup", &[("reason", &e.to_string())]);
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
    /// What serves from the start, a standby replica too.
    serving: Serving,
    /// What acts once this replica leads (at once without `--ha`).
    engine: Engine,
    webhooks: webhook::Bound,
    /// With `--ha`: the election's handle and its thread body.
    election: Option<(leader::Handle, ThreadBody)>,
}

/// The servers that run on every replica, and what the main thread's loop reads.
struct Serving {
    signals: signal_hook::iterator::Signals,
    http: Server,
    debug: DebugServer,
    metrics: Arc<Metrics>,
    views: Vec<SharedView>,
    grace: Duration,
    /// Hooks' temp files made ahead for their next runs (removed at the end).
    spares: crate::executor::Spares,
}

/// The hooks and everything their runs need: queues, kube, the scheduler's
/// entries, and what the runner is made of.
struct Engine {
    /// The hooks every thread reads (a reload swaps them).
    table: HookTable,
    /// shell-operator's reload of the hooks dir (`None` for addon-operator).
    reload: Option<ReloadParts>,
    views: BTreeMap<String, SharedView>,
    kube: Option<KubeParts>,
    schedule: Vec<Entry>,
    run: RunParts,
}

/// What the runner and the program's flavor (addon-operator's seam) are made of.
struct RunParts {
    flavor: Flavor,
    executor: Executor,
    metrics: Arc<Metrics>,
    /// The operator's readiness (`/readyz`).
    ready: Arc<AtomicBool>,
    patcher: Result<Client, String>,
    jq_library: Option<std::path::PathBuf>,
}

type ThreadBody = Box<dyn FnOnce() + Send + 'static>;

/// What the `reload` thread is made of, from the bind step.
struct ReloadParts {
    root: std::path::PathBuf,
    timeout: Option<Duration>,
    /// The hooks tree's fingerprint taken before the hooks were loaded.
    tree: Option<u128>,
    /// What the fingerprint leaves out: the tmp dir, should it be inside.
    skip: Vec<std::path::PathBuf>,
    reloads: prometheus::IntCounterVec,
}

impl ReloadParts {
    /// shell-operator's: the hooks dir's fingerprint (taken before the hooks load,
    /// so a change while they load is a reload) and the reload counter.
    fn bind(config: &Config, metrics: &Metrics) -> Result<Option<ReloadParts>, StartError> {
        if config.program != crate::flags::Program::Shell {
            return Ok(None);
        }
        let reloads = reload::register_metric(metrics.registry(), &config.metrics_prefix)?;
        let skip = reload::tree::skipped(&config.tmp_dir);
        Ok(Some(ReloadParts {
            root: config.hooks_dir.clone(),
            timeout: config.hook_run_timeout,
            tree: reload::tree::fingerprint(&config.hooks_dir, &skip).ok(),
            skip,
            reloads,
        }))
    }
}

impl Bound {
    /// Binds every listener and file, loads the hooks and configures the clients.
    fn bind(mut config: Config) -> Result<Bound, StartError> {
        let signals = bind_signals(&config)?;
        let executor = prepare_dirs(&mut config)?;
        let metrics = flavor::metrics(&config)?;
        let reload = ReloadParts::bind(&config, &metrics)?;
        let (flavor, hooks) = Flavor::bind(&config, &metrics)?;
        let hooks = Arc::new(hooks);
        let table = HookTable::new(Arc::clone(&hooks));
        let schedule = schedule_entries(&hooks)?;
        let ready = Arc::new(AtomicBool::new(false));
        let views = queue_views(&hooks);
        let election = bind_election(&config, &metrics)?;
        let main_view = views.get(MAIN_QUEUE).cloned().unwrap_or_default();
        let routes = flavor.http_routes(main_view);
        let routes = match &election {
            Some((h, _)) => Some(leader::readiness::routes(
                config.program,
                Arc::clone(&h.status),
                config.listen_port,
                routes,
            )),
            None => routes,
        };
        let http = bind_http(&config, &metrics, &ready, routes)?;
        let kube = KubeParts::new(&config, &hooks, &metrics)?;
        let extra = flavor.debug_routes();
        let debug = bind_debug_server(&config, &table, kube.as_ref(), &views, extra)?;
        let patcher = patcher_client(&config, &metrics).map_err(|e| e.to_string());
        let webhooks = webhook::bind(webhook::Setup {
            config: &config,
            hooks: &hooks,
            executor: &executor,
            metrics: &metrics,
            client: kube.as_ref().map(|k| k.client.clone()),
            snapshots: webhook_snapshots(kube.as_ref(), &table),
            patcher: patcher.clone().ok(),
            registered_at_start: flavor.webhooks_at_start(),
            builtins: flavor.admission_builtins(),
        })
        .map_err(|e| e.to_string())?;
        Ok(Bound {
            serving: Serving {
                signals,
                http,
                debug,
                metrics: Arc::clone(&metrics),
                views: views.values().cloned().collect(),
                grace: config.shutdown_grace,
                spares: executor.spares.clone(),
            },
            engine: Engine {
                table,
                reload,
                views,
                kube,
                schedule,
                run: RunParts {
                    flavor,
                    executor,
                    metrics,
                    ready,
                    patcher,
                    jq_library: config.jq_library_path.clone(),
                },
            },
            webhooks,
            election,
        })
    }

    /// Step 2: starts the threads that serve (signals, HTTP, debug, webhook
    /// servers); with `--ha` starts the election and waits for the Lease; then
    /// registers the webhooks, queues the startup tasks and starts every other
    /// thread, each with a name.
    fn spawn(self) -> Result<Running, StartError> {
        let Bound {
            serving,
            engine,
            mut webhooks,
            election,
        } = self;
        let mut running = serving.spawn()?;
        let (mut served, server_threads) = webhooks.serve();
        for (name, body) in server_threads {
            running.threads.push(threads::spawn(&name, body)?);
        }
        if let Some((handle, body)) = election {
            let thread = threads::spawn("leader-election", body)?;
            let signal = wait_for_lease(&handle, &running.signal_rx)?;
            running.election = Some((handle, thread));
            if signal.is_some() {
                running.early_signal = signal;
                running.webhooks = Some(served);
                return Ok(running);
            }
        }
        for (name, body) in webhooks.register(&mut served).map_err(|e| e.to_string())? {
            running.threads.push(threads::spawn(&name, body)?);
        }
        running.webhooks = Some(served);
        engine.spawn(&mut running)?;
        Ok(running)
    }
}

impl Serving {
    /// Starts the reaper (PID 1), the signal thread, the metrics server and the
    /// debug servers; the running process that will own and join them.
    fn spawn(self) -> Result<Running, StartError> {
        // Not joined: it reaps for good (hooks' exits during shutdown come through it
        // too), and joining it would keep PID 1 alive after SIGTERM.
        if let Some(reap) = process::reaper() {
            threads::spawn("reaper", reap)?;
        }
        let (signal_tx, signal_rx) = bounded::<i32>(4);
        // One SIGHUP waiting is enough: the reload it asks for is still to come.
        let (hup_tx, hup_rx) = bounded::<()>(1);
        let mut signals = self.signals;
        // Not joined: it waits for signals for good, and the process exit ends it.
        // Only stop signals go on; the ignored ones end here, logged; SIGHUP goes
        // to the reload thread.
        threads::spawn("signals", move || {
            for sig in signals.forever() {
                if IGNORED_SIGNALS.contains(&sig) {
                    log::info("signal ignored", &[("signal", &sig.to_string())]);
                } else if sig == RELOAD_SIGNAL {
                    let _ = hup_tx.try_send(());
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
        let mut threads = vec![threads::spawn("http", move || http.serve())?];
        let debug_stopper = self.debug.stopper();
        let expire = Box::new(self.debug.expirer());
        for (name, body) in self.debug.into_threads() {
            threads.push(threads::spawn(&name, body)?);
        }
        // Dropping `stop_tx` stops the scheduler, router, monitor and every queue.
        let (stop_tx, stop_rx) = bounded::<()>(0);
        Ok(Running {
            metrics: self.metrics,
            views: self.views,
            signal_rx,
            hup_rx,
            stop_tx,
            stop_rx,
            threads,
            grace: self.grace,
            http_stopper,
            debug_stopper,
            expire,
            webhooks: None,
            election: None,
            early_signal: None,
            spares: self.spares,
        })
    }
}

impl Engine {
    /// Queues the startup tasks and starts the queue threads, the router, the
    /// monitor, addon-operator's resource monitor and the scheduler.
    fn spawn(self, running: &mut Running) -> Result<(), StartError> {
        let (schedule_tx, schedule_rx) = unbounded::<Control>();
        let (fire_tx, fire_rx) = unbounded::<Fire>();
        // Synchronization tasks for a binding's own queue, through the router.
        let (forward_tx, forward_rx) = unbounded::<(String, Task)>();
        let queues: BTreeMap<String, (Sender<Task>, Receiver<Task>)> = self
            .views
            .keys()
            .map(|n| (n.clone(), unbounded()))
            .collect();
        let main = queues
            .get(MAIN_QUEUE)
            .ok_or("main queue missing")?
            .0
            .clone();
        let (kube, metrics) = (self.kube.as_ref(), Arc::clone(&self.run.metrics));
        let module_webhooks = (running.webhooks.as_ref())
            .map(webhook::Webhooks::for_modules)
            .unwrap_or_default();
        let reloader = self.reload.map(|parts| reload::Reloader {
            root: parts.root,
            timeout: parts.timeout,
            tree: parts.tree,
            skip: parts.skip,
            reloads: parts.reloads,
            jq_library: self.run.jq_library.clone(),
            table: self.table.clone(),
            queues: self.views.keys().cloned().collect(),
            kube: kube.map(|k| reload::KubeSide {
                store: Arc::clone(&k.store),
                monitor: k.control_tx.clone(),
            }),
            scheduler: schedule_tx.clone(),
            main: main.clone(),
            registrar: module_webhooks.admission.clone(),
            ready: Arc::clone(&self.run.ready),
        });
        let (handler, mut started) = self.run.start(
            &self.table,
            kube,
            schedule_tx,
            forward_tx,
            main,
            module_webhooks,
        )?;
        let (threads, stop) = (&mut running.threads, &running.stop_rx);
        let senders = spawn_queues(threads, queues, &self.views, stop, &handler)?;
        let router = Router {
            hooks: self.table.clone(),
            fires: fire_rx,
            kube_events: kube.map_or_else(crossbeam_channel::never, |k| k.events_rx.clone()),
            stop: stop.clone(),
            queues: senders,
            forward: kube.map_or_else(crossbeam_channel::never, |_| forward_rx),
            addon: started.router_inputs(),
        };
        threads.push(threads::spawn("router", move || router.run())?);
        if let Some(k) = self.kube {
            // One channel carries every reflector's events to the monitor.
            let (watch_tx, watch_rx) = unbounded::<WatchEvent>();
            let monitor = Monitor::new(
                k.client,
                self.table.clone(),
                k.store,
                metrics,
                watch_tx,
                watch_rx,
                k.events_tx,
            );
            let (control, stop) = (k.control_rx, stop.clone());
            threads.push(threads::spawn("monitor", move || {
                monitor.run(control, stop)
            })?);
        }
        if let Some(body) = started.resource_monitor(stop.clone()) {
            threads.push(threads::spawn("addon-resource-monitor", body)?);
        }
        if let Some(body) = started.drift_watcher(stop.clone()) {
            threads.push(threads::spawn("addon-drift", body)?);
        }
        let (entries, stop) = (self.schedule, stop.clone());
        threads.push(threads::spawn("scheduler", move || {
            schedule::run(entries, schedule_rx, stop, fire_tx)
        })?);
        let (hup, stop) = (running.hup_rx.clone(), running.stop_rx.clone());
        let body: Option<ThreadBody> = match (reloader, started.modules_reload()) {
            (Some(hooks), _) => Some(Box::new(move || reload::run(hooks, hup, stop))),
            (None, Some(modules)) => Some(Box::new(move || reload::run(modules, hup, stop))),
            (None, None) => None,
        };
        if let Some(body) = body {
            threads.push(threads::spawn("reload", body)?);
        }
        Ok(())
    }
}

/// Starts one thread per queue, each running its tasks with `handler`; returns
/// the queues' senders, by name.
fn spawn_queues(
    threads: &mut Vec<JoinHandle<()>>,
    queues: BTreeMap<String, (Sender<Task>, Receiver<Task>)>,
    views: &BTreeMap<String, SharedView>,
    stop: &Receiver<()>,
    handler: &Arc<dyn Handler>,
) -> Result<BTreeMap<String, Sender<Task>>, StartError> {
    let mut senders = BTreeMap::new();
    for (name, (tx, rx)) in queues {
        let view = views.get(&name).cloned().unwrap_or_default();
        let worker = Worker::new(&name, rx, stop.clone(), Arc::clone(handler), view);
        threads.push(threads::spawn(&format!("queue-{name}"), move || {
            worker.run()
        })?);
        senders.insert(name, tx);
    }
    Ok(senders)
}

impl RunParts {
    /// The program's part of the spawn step, the runner, and the handler every
    /// queue thread runs tasks with; the startup tasks are queued on `main`
    /// before any queue thread starts, so its first view lists them all.
    fn start(
        self,
        table: &HookTable,
        kube: Option<&KubeParts>,
        scheduler: Sender<Control>,
        forward: Sender<(String, Task)>,
        main: Sender<Task>,
        webhooks: webhook::ModuleWebhooks,
    ) -> Result<(Arc<dyn Handler>, flavor::Started), StartError> {
        let hooks = &table.load();
        let startup = self.flavor.startup_tasks(hooks);
        let started = self.flavor.start(flavor::Setup {
            hooks: table.clone(),
            scheduler: scheduler.clone(),
            ready: self.ready,
            store: kube.map(|k| Arc::clone(&k.store)),
            webhooks,
            main: main.clone(),
            queues: crate::startup::queue_names(hooks).into_iter().collect(),
            monitor: kube.map(|k| k.control_tx.clone()),
            metrics: Arc::clone(&self.metrics),
        });
        let runner = Arc::new(Runner {
            hooks: table.clone(),
            executor: self.executor,
            metrics: self.metrics,
            scheduler,
            startup_left: AtomicUsize::new(startup.len()),
            ready: Arc::clone(&started.startup_ready),
            kube: kube.map(|k| k.runtime(table, forward)),
            patcher: self.patcher,
            jq_library: self.jq_library,
            values: started.values(),
        });
        if startup.is_empty() {
            started.startup_ready.store(true, Ordering::Release);
        }
        for task in startup {
            let _ = main.send(task);
        }
        Ok((started.handler(runner), started))
    }
}

/// Blocks until the election reports the Lease acquired (`Ok(None)`) or a signal
/// arrives first (`Ok(Some(signal))`): a standby serves but acts on nothing.
fn wait_for_lease(
    handle: &leader::Handle,
    signals: &Receiver<i32>,
) -> Result<Option<i32>, StartError> {
    select! {
        recv(handle.notes) -> note => match note {
            Ok(leader::Note::Acquired) => Ok(None),
            Ok(leader::Note::Lost(why)) => Err(format!("leader election: {why}").into()),
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
    /// SIGHUP, for the reload thread (shell-operator).
    hup_rx: Receiver<()>,
    /// Dropped to stop intake: every thread that takes work holds `stop_rx`.
    stop_tx: Sender<()>,
    stop_rx: Receiver<()>,
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

/// Signals that stop the operator as SIGTERM does (hooks get SIGTERM, then SIGKILL
/// after the grace period; exit 0). SIGQUIT would otherwise kill it with its
/// default action and orphan every running hook's process group.
const STOP_SIGNALS: [i32; 3] = [
    signal_hook::consts::SIGTERM,
    signal_hook::consts::SIGINT,
    signal_hook::consts::SIGQUIT,
];

/// SIGHUP reloads the hooks (`reload/`; addon-operator's modules,
/// `addon/reload/`) instead of stopping the operator.
const RELOAD_SIGNAL: i32 = signal_hook::consts::SIGHUP;

/// Signals that are logged and otherwise ignored (their default action kills).
const IGNORED_SIGNALS: [i32; 2] = [signal_hook::consts::SIGUSR1, signal_hook::consts::SIGUSR2];
