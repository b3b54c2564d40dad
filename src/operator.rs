//! The operator's wiring: the startup sequence, every thread and every channel, and
//! shutdown. Reading this file shows the whole topology:
//!
//! ```text
//! signal thread ──signal──> main thread (ticker: live_ticks, queue lengths)
//! scheduler thread ──Fire──────┐
//! watch thread × W ──Event──> monitor thread ──KubeEvent──┴─> router thread ──Task──> queue thread × Q ──> executor (child process)
//!                              (snapshots, jq, checksums)                                  │  ├─ object patcher (kube client)
//!                                                                                          │  └─ hook metrics
//! main thread (startup) ──onStartup / Enable tasks──> "main" queue
//! "main" queue ──Control::Enable──> scheduler thread; ──monitor::Control::Enable──> monitor thread
//! HTTP thread: /metrics /healthz /ready          reaper thread (only as PID 1): every child's exit
//! webhook-admission / webhook-conversion threads (TLS) ──> handler threads ──> executor
//! debug threads: unix socket (+ --debug-http-addr), reading queue views and hooks
//! ```
//!
//! Shutdown flows the other way: the signal stops intake (the `stop` channel is
//! closed, so the scheduler, router and queues stop taking work), running hooks get
//! SIGTERM and, after the grace period, SIGKILL; then threads are joined and the
//! process exits 0.

use crate::debug::DebugState;
use crate::debug::runtime::RuntimeConfig;
use crate::debug::server::{DebugServer, Stopper as DebugStopper};
use crate::executor::Executor;
use crate::flags::Config;
use crate::hook::context::{BindingContext, BindingType, Payload};
use crate::hook::{self, Hook};
use crate::http::HttpServer;
use crate::kube::{Client, KubeSettings};
use crate::log;
use crate::metrics::Metrics;
use crate::monitor::runtime::KubeRuntime;
use crate::monitor::store::{KubeEvent, SnapshotStore};
use crate::monitor::{self, Monitor};
use crate::process;
use crate::queue::worker::{QueueView, SharedView, Worker};
use crate::queue::{Task, TaskKind};
use crate::runner::Runner;
use crate::schedule::{self, Control, Entry, Fire, cron::CronSchedule};
use crossbeam_channel::{Receiver, Sender, bounded, select, tick, unbounded};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

const MAIN_QUEUE: &str = "main";

/// Runs the operator until SIGTERM/SIGINT; returns the exit code.
pub fn run(config: Config) -> i32 {
    log::init(&config.log);
    match start(config) {
        Ok(()) => 0,
        Err(e) => {
            log::error(&format!("startup failed: {e}"), &[]);
            1
        }
    }
}

fn start(mut config: Config) -> Result<(), String> {
    config.hooks_dir = std::fs::canonicalize(&config.hooks_dir)
        .map_err(|e| format!("hooks dir '{}': {e}", config.hooks_dir.display()))?;
    if config.tmp_dir.as_os_str().is_empty() {
        config.tmp_dir =
            std::env::temp_dir().join(format!("shell-operator-{}", std::process::id()));
    }
    let executor = Executor {
        tmp_dir: config.tmp_dir.clone(),
        keep_tmp_files: config.debug.keep_tmp_files,
        timeout: config.hook_run_timeout,
    };
    executor
        .prepare_tmp_dir()
        .map_err(|e| format!("tmp dir '{}': {e}", config.tmp_dir.display()))?;
    process::init_reaper();

    log::info(
        "loading hooks",
        &[("dir", &config.hooks_dir.display().to_string())],
    );
    let hooks = hook::load_all(
        &config.hooks_dir,
        config.hook_run_timeout,
        config.jq_library_path.as_deref(),
    )
    .map_err(|e| e.to_string())?;
    for h in &hooks {
        log::info("hook loaded", &[("hook", &h.name)]);
    }
    let schedule_entries = schedule_entries(&hooks)?;
    let hooks = Arc::new(hooks);

    // QUEUE_ACTIONS_METRICS=no switches the queue action histogram off (as in flant).
    let queue_actions = std::env::var("QUEUE_ACTIONS_METRICS").map_or(true, |v| v != "no");
    let metrics = Arc::new(
        Metrics::with_options(&config.metrics_prefix, queue_actions).map_err(|e| e.to_string())?,
    );
    let ready = Arc::new(AtomicBool::new(false));
    let http = HttpServer::bind(
        &config.listen_address,
        config.listen_port,
        Arc::clone(&metrics),
        Arc::clone(&ready),
    )?;
    log::info(
        "HTTP server listening",
        &[(
            "address",
            &format!("{}:{}", config.listen_address, http.port()),
        )],
    );
    let http_stopper = http.stopper();
    let kube = KubeParts::new(&config, &hooks, &metrics)?;

    let patcher = patcher_client(&config);

    // Webhook servers (admission, conversion) and their registration; before any
    // queue starts, as in flant. Snapshots come from the monitors' store.
    let webhooks = crate::webhook::start(crate::webhook::Setup {
        config: &config,
        hooks: &hooks,
        executor: &executor,
        metrics: &metrics,
        client: kube.as_ref().map(|k| k.client.clone()),
        snapshots: match &kube {
            Some(k) => webhook_snapshots(k.runtime(&hooks)),
            None => Arc::new(|_hook: &str, _names: &[String]| Default::default()),
        },
        patcher: patcher.clone().ok(),
    })?;

    // Channels. Dropping `stop_tx` stops the scheduler, the router and every queue.
    let (stop_tx, stop_rx) = bounded::<()>(0);
    let (signal_tx, signal_rx) = bounded::<i32>(4);
    let (control_tx, control_rx) = unbounded::<Control>();
    let (fire_tx, fire_rx) = unbounded::<Fire>();
    let queue_names = queue_names(&hooks);
    let queues: BTreeMap<String, (Sender<Task>, Receiver<Task>)> = queue_names
        .iter()
        .map(|n| (n.clone(), unbounded()))
        .collect();
    let senders: BTreeMap<String, Sender<Task>> = queues
        .iter()
        .map(|(n, (tx, _))| (n.clone(), tx.clone()))
        .collect();

    let startup = startup_tasks(&hooks);
    let runner = Arc::new(Runner {
        hooks: Arc::clone(&hooks),
        executor,
        metrics: Arc::clone(&metrics),
        scheduler: control_tx,
        startup_left: AtomicUsize::new(startup.len()),
        ready: Arc::clone(&ready),
        kube: kube.as_ref().map(|k| k.runtime(&hooks)),
        patcher,
        jq_library: config.jq_library_path.clone(),
    });
    if startup.is_empty() {
        ready.store(true, std::sync::atomic::Ordering::Release);
    }

    // Threads.
    let mut threads: Vec<JoinHandle<()>> = Vec::new();
    spawn_signal_thread(signal_tx)?;
    threads.push(spawn("http", move || http.serve())?);
    // The startup tasks are queued before the queue threads start, so "main" sees
    // them all at once (its first view lists every one).
    let main_queue = senders
        .get(MAIN_QUEUE)
        .cloned()
        .ok_or("main queue missing")?;
    for task in startup {
        let _ = main_queue.send(task);
    }
    let mut views: Vec<SharedView> = Vec::new();
    for (name, (_, rx)) in queues {
        let view: SharedView = Arc::new(Mutex::new(QueueView {
            name: name.clone(),
            ..QueueView::default()
        }));
        views.push(Arc::clone(&view));
        let worker = Worker::new(&name, rx, stop_rx.clone(), runner.clone(), view);
        threads.push(spawn(&format!("queue-{name}"), move || worker.run())?);
    }
    let debug_stopper = start_debug_server(
        &config,
        &hooks,
        kube.as_ref().map(|k| Arc::clone(&k.store)),
        &views,
        &mut threads,
    )?;
    let (router_hooks, router_stop) = (Arc::clone(&hooks), stop_rx.clone());
    let kube_events = kube
        .as_ref()
        .map(|k| k.events_rx.clone())
        .unwrap_or_else(crossbeam_channel::never);
    threads.push(spawn("router", move || {
        route(router_hooks, fire_rx, kube_events, router_stop, senders)
    })?);
    if let Some(k) = kube {
        let monitor = Monitor::new(
            k.client,
            Arc::clone(&hooks),
            k.store,
            k.events_tx,
            Arc::clone(&metrics),
        );
        let (control, monitor_stop) = (k.control_rx, stop_rx.clone());
        threads.push(spawn("monitor", move || {
            monitor.run(control, monitor_stop)
        })?);
    }
    let scheduler_stop = stop_rx.clone();
    threads.push(spawn("scheduler", move || {
        schedule::run(schedule_entries, control_rx, scheduler_stop, fire_tx)
    })?);

    let signal = tick_until_signal(&metrics, &views, &signal_rx);
    log::info("shutting down", &[("signal", &signal.to_string())]);
    drop(stop_tx);
    process::terminate_all(config.shutdown_grace);
    http_stopper.unblock();
    webhooks.stop();
    debug_stopper.stop();
    for t in threads {
        let _ = t.join();
    }
    log::info("stopped", &[]);
    Ok(())
}

/// Binds the debug socket (a failure stops startup) and starts its threads.
/// `hook snapshot` shows each kubernetes binding's current snapshot from `store`.
fn start_debug_server(
    config: &Config,
    hooks: &Arc<Vec<Hook>>,
    store: Option<Arc<SnapshotStore>>,
    views: &[SharedView],
    threads: &mut Vec<JoinHandle<()>>,
) -> Result<DebugStopper, String> {
    let names: Vec<String> = hooks.iter().map(|h| h.name.clone()).collect();
    let all = Arc::clone(hooks);
    let state = Arc::new(DebugState {
        queues: views.to_vec(),
        hooks: names,
        snapshots: Arc::new(move |name: &str| {
            let index = all.iter().position(|h| h.name == name)?;
            let mut view = serde_json::Map::new();
            for (bi, b) in all[index].config.kubernetes.iter().enumerate() {
                let items = store
                    .as_ref()
                    .map(|s| s.snapshot(index, bi))
                    .unwrap_or_default();
                view.entry(b.name.clone())
                    .or_insert_with(|| serde_json::json!({ "snapshot": items }));
            }
            Some(serde_json::Value::Object(view))
        }),
        config: RuntimeConfig::new(&config.log.level),
    });
    let server = DebugServer::bind(&config.debug.unix_socket, &config.debug.http_addr, state)?;
    let stopper = server.stopper();
    log::info(
        "debug server listening",
        &[("socket", &config.debug.unix_socket.display().to_string())],
    );
    for (i, body) in server.into_threads().into_iter().enumerate() {
        threads.push(spawn(&format!("debug-{i}"), body)?);
    }
    Ok(stopper)
}

fn spawn(name: &str, body: impl FnOnce() + Send + 'static) -> Result<JoinHandle<()>, String> {
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn(body)
        .map_err(|e| format!("cannot start thread {name}: {e}"))
}

fn spawn_signal_thread(signals_out: Sender<i32>) -> Result<(), String> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    let mut signals = signal_hook::iterator::Signals::new([SIGTERM, SIGINT])
        .map_err(|e| format!("cannot handle signals: {e}"))?;
    spawn("signals", move || {
        for sig in signals.forever() {
            let _ = signals_out.send(sig);
        }
    })
    .map(drop)
}

/// The main thread's loop: live ticks every 10 s, queue lengths every 5 s, until a signal.
fn tick_until_signal(metrics: &Metrics, views: &[SharedView], signals: &Receiver<i32>) -> i32 {
    let ticker = tick(Duration::from_secs(5));
    let mut ticks = 0u64;
    metrics.live_ticks.inc();
    update_queue_lengths(metrics, views);
    loop {
        select! {
            recv(signals) -> sig => return sig.unwrap_or(0),
            recv(ticker) -> _ => {
                ticks += 1;
                if ticks % 2 == 0 {
                    metrics.live_ticks.inc();
                }
                update_queue_lengths(metrics, views);
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

/// The router thread: turns schedule fires and kubernetes events into HookRun tasks
/// on their binding's queue.
fn route(
    hooks: Arc<Vec<Hook>>,
    fires: Receiver<Fire>,
    kube_events: Receiver<KubeEvent>,
    stop: Receiver<()>,
    queues: BTreeMap<String, Sender<Task>>,
) {
    loop {
        let task = select! {
            recv(fires) -> f => match f { Ok(f) => schedule_task(&hooks, f), Err(_) => return },
            recv(kube_events) -> e => match e { Ok(e) => kube_task(&hooks, e), Err(_) => return },
            recv(stop) -> _ => return,
        };
        let Some((queue, task)) = task else { continue };
        match queues.get(&queue) {
            Some(q) => drop(q.send(task)),
            None => log::error(
                "no such queue",
                &[("queue", &queue), ("hook", &task.hook_name)],
            ),
        }
    }
}

fn schedule_task(hooks: &[Hook], fire: Fire) -> Option<(String, Task)> {
    let hook = hooks.get(fire.hook)?;
    let b = hook.config.schedule.get(fire.binding)?;
    let ctx = BindingContext::schedule(&b.name, b.group.clone(), b.include_snapshots_from.clone());
    Some((
        b.queue.clone(),
        Task::hook_run(fire.hook, &hook.name, !hook.is_v0(), b.allow_failure, ctx),
    ))
}

fn kube_task(hooks: &[Hook], event: KubeEvent) -> Option<(String, Task)> {
    let hook = hooks.get(event.hook)?;
    let b = hook.config.kubernetes.get(event.binding)?;
    let ctx = BindingContext {
        binding: b.name.clone(),
        binding_type: BindingType::Kubernetes,
        group: b.group.clone(),
        snapshot_names: b.include_snapshots_from.clone(),
        kube_binding: Some(event.binding),
        payload: Payload::Event {
            watch_event: event.watch_event,
            item: Some(event.item),
        },
    };
    Some((
        b.queue.clone(),
        Task::hook_run(event.hook, &hook.name, !hook.is_v0(), b.allow_failure, ctx),
    ))
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
fn webhook_snapshots(rt: crate::monitor::runtime::KubeRuntime) -> crate::webhook::SnapshotSource {
    Arc::new(move |hook: &str, names: &[String]| {
        let Some(index) = rt.hooks.iter().position(|h| h.name == hook) else {
            return Default::default();
        };
        let probe = BindingContext::schedule("webhook", None, names.to_vec());
        rt.prepare(index, &[probe]).1
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
        let settings = KubeSettings {
            server: config.kube.server.clone(),
            kubeconfig: config.kube.config.clone(),
            context: config.kube.context.clone(),
            qps: config.kube.qps,
            burst: config.kube.burst,
            component: "main".into(),
            ..KubeSettings::default()
        };
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
        let store = Arc::new(SnapshotStore::new(
            hooks
                .iter()
                .enumerate()
                .map(|(i, h)| (i, h.config.kubernetes.len())),
        ));
        let (control_tx, control_rx) = unbounded();
        let (events_tx, events_rx) = unbounded();
        Ok(Some(KubeParts {
            client,
            store,
            control_tx,
            control_rx,
            events_tx,
            events_rx,
        }))
    }

    fn runtime(&self, hooks: &Arc<Vec<Hook>>) -> KubeRuntime {
        KubeRuntime {
            hooks: Arc::clone(hooks),
            store: Arc::clone(&self.store),
            monitor: self.control_tx.clone(),
            events: self.events_tx.clone(),
        }
    }
}

/// The main queue's first tasks: onStartup runs by (ORDER, name), then each hook's
/// Enable tasks in name order.
fn startup_tasks(hooks: &[Hook]) -> Vec<Task> {
    let mut on_startup: Vec<(f64, usize)> = hooks
        .iter()
        .enumerate()
        .filter_map(|(i, h)| h.config.on_startup.map(|o| (o, i)))
        .collect();
    on_startup.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1))); // hooks are already in name order
    let mut tasks: Vec<Task> = on_startup
        .into_iter()
        .map(|(_, i)| {
            Task::hook_run(
                i,
                &hooks[i].name,
                false,
                false,
                BindingContext::on_startup(),
            )
        })
        .collect();
    for (i, h) in hooks.iter().enumerate() {
        if !h.config.kubernetes.is_empty() {
            tasks.push(Task::enable(TaskKind::EnableKubernetesBindings, i, &h.name));
        }
        if !h.config.schedule.is_empty() {
            tasks.push(Task::enable(TaskKind::EnableScheduleBindings, i, &h.name));
        }
    }
    tasks
}

/// "main" plus every queue named by a binding.
fn queue_names(hooks: &[Hook]) -> Vec<String> {
    let mut names: Vec<String> = vec![MAIN_QUEUE.to_string()];
    for h in hooks {
        names.extend(h.config.schedule.iter().map(|b| b.queue.clone()));
        names.extend(h.config.kubernetes.iter().map(|b| b.queue.clone()));
    }
    names.sort();
    names.dedup();
    names
}

fn schedule_entries(hooks: &[Hook]) -> Result<Vec<Entry>, String> {
    let mut entries = Vec::new();
    for (hi, h) in hooks.iter().enumerate() {
        for (bi, b) in h.config.schedule.iter().enumerate() {
            let schedule = CronSchedule::parse(&b.crontab).map_err(|e| {
                format!(
                    "hook '{}': schedule[{bi}] \"{}\": field 'crontab': {e}",
                    h.name, b.name
                )
            })?;
            entries.push(Entry {
                hook: hi,
                binding: bi,
                schedule,
            });
        }
    }
    Ok(entries)
}
