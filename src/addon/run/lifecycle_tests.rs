//! The lifecycle's rules, driven as a pure function: inputs in, task descriptions out.

use super::*;
use std::time::Duration;

fn names(tasks: Vec<Task>) -> Vec<String> {
    tasks.iter().map(|t| t.describe("main")).collect()
}

/// Three modules a, b, c of one order, one run at a time; the startup converge
/// has begun.
fn started() -> (Lifecycle, Instant) {
    started_with([1, 1, 1], 1)
}

/// Modules a, b, c of these orders, with this parallelism; the startup converge
/// has begun.
fn started_with(orders: [u32; 3], parallelism: usize) -> (Lifecycle, Instant) {
    let modules = ["a", "b", "c"].map(String::from).into_iter().zip(orders);
    let mut l = Lifecycle::new(modules, parallelism);
    let now = Instant::now();
    let event = "OperatorStartup".to_string();
    assert!(names(l.step(Input::ConvergeStarted { event, now })).is_empty());
    (l, now)
}

/// The event a ModuleRun task of `m` carries here: its last one, or startup's.
fn event_of(l: &Lifecycle, m: usize) -> String {
    Some(l.activation(m))
        .filter(|e| !e.is_empty())
        .unwrap_or_else(|| "OperatorStartup".into())
}

fn finish(l: &mut Lifecycle, m: usize) -> Vec<String> {
    let event = event_of(l, m);
    l.step(Input::RunStarted { module: m, event });
    if !l.is_started(m) {
        l.step(Input::StartupDone { module: m });
        l.step(Input::RunStarted {
            module: m,
            event: l.activation(m),
        });
    }
    names(l.step(Input::RunFinished {
        module: m,
        again: false,
    }))
}

fn fail(l: &mut Lifecycle, m: usize, now: Instant) {
    let event = event_of(l, m);
    l.step(Input::RunStarted { module: m, event });
    let error = "x is required".to_string();
    l.step(Input::RunFailed {
        module: m,
        error,
        now,
    });
}

#[test]
fn the_first_converge_runs_enabled_modules_and_deletes_inventoried_disabled_ones() {
    let (mut l, _) = started();
    assert!(l.wants_inventory());
    l.step(Input::Inventory {
        modules: vec![0, 2],
    });
    let tasks = names(l.step(Input::Enabled { modules: vec![1] }));
    assert_eq!(
        tasks,
        [
            "ModuleDelete:main:c",
            "ModuleDelete:main:a",
            "ModuleRun:main:b:doStartup:OperatorStartup"
        ]
    );
    assert!(!l.wants_inventory());
    // A later inventory is ignored: only startup's counts.
    l.step(Input::Inventory { modules: vec![0] });
    assert_eq!(
        finish(&mut l, 1),
        ["ConvergeModules:main:AfterAll:OperatorStartup"]
    );
}

#[test]
fn no_enabled_module_goes_straight_to_after_all() {
    let (mut l, _) = started();
    let tasks = names(l.step(Input::Enabled { modules: vec![] }));
    assert_eq!(tasks, ["ConvergeModules:main:AfterAll:OperatorStartup"]);
}

#[test]
fn a_converge_waits_for_a_failed_module_and_a_values_change_replaces_its_retry() {
    let (mut l, now) = started();
    l.step(Input::Enabled {
        modules: vec![0, 1],
    });
    fail(&mut l, 0, now);
    assert_eq!(l.view(0).map(|v| v.state), Some("Failed"));
    assert_eq!(l.next_due(), Some(now + Duration::from_secs(5)));
    // b runs although a failed; the converge still waits for a.
    assert!(finish(&mut l, 1).is_empty());
    // A new ConfigMap section for a runs it at once, not at the retry.
    let event = "KubeConfig-Changed-Modules".to_string();
    let tasks = names(l.step(Input::ValuesChanged { module: 0, event }));
    assert_eq!(
        tasks,
        ["ModuleRun:main:a:doStartup:KubeConfig-Changed-Modules"]
    );
    assert_eq!(l.next_due(), None, "the retry was replaced");
    assert_eq!(
        finish(&mut l, 0),
        ["ConvergeModules:main:AfterAll:OperatorStartup"]
    );
    assert_eq!(l.view(0).map(|v| v.last_error), Some(None));
}

#[test]
fn a_retry_is_queued_when_due_with_the_event_of_the_failed_run() {
    let (mut l, now) = started();
    l.step(Input::Enabled { modules: vec![2] });
    fail(&mut l, 2, now);
    assert!(
        l.step(Input::Tick {
            now: now + Duration::from_secs(4)
        })
        .is_empty()
    );
    let tasks = names(l.step(Input::Tick {
        now: now + Duration::from_secs(5),
    }));
    assert_eq!(tasks, ["ModuleRun:main:c:doStartup:OperatorStartup"]);
    assert!(
        l.step(Input::Tick {
            now: now + Duration::from_secs(60)
        })
        .is_empty()
    );
    // The second failure waits longer (6 s and up to 1 s of jitter).
    fail(&mut l, 2, now);
    let due = l.next_due().expect("retry");
    assert!(due >= now + Duration::from_secs(6) && due < now + Duration::from_secs(7));
    let error = l.view(2).and_then(|v| v.last_error);
    assert_eq!(error.as_deref(), Some("x is required"));
}

#[test]
fn a_converge_stuck_on_a_failed_module_gives_way_to_a_new_one() {
    let (mut l, now) = started();
    l.step(Input::Enabled { modules: vec![0] });
    fail(&mut l, 0, now);
    let event = "KubeConfigChanged".to_string();
    let tasks = names(l.step(Input::ConvergeRequested { event }));
    assert_eq!(tasks, ["ConvergeModules:main:BeforeAll:KubeConfigChanged"]);
    l.step(Input::ConvergeStarted {
        event: "KubeConfigChanged".into(),
        now,
    });
    // Disabled now: deleted at once, its retry dropped.
    let tasks = names(l.step(Input::Enabled { modules: vec![] }));
    assert_eq!(
        tasks,
        [
            "ModuleDelete:main:a",
            "ConvergeModules:main:AfterAll:KubeConfigChanged"
        ]
    );
    assert_eq!(l.next_due(), None);
    assert!(
        l.step(Input::Tick {
            now: now + Duration::from_secs(60)
        })
        .is_empty()
    );
    l.step(Input::DeleteStarted { module: 0 });
    assert_eq!(l.view(0).map(|v| v.state), Some("Deleting"));
    l.step(Input::DeleteFinished { module: 0 });
    assert_eq!(l.view(0).map(|v| v.state), Some("Disabled"));
}

#[test]
fn a_converge_that_is_running_is_asked_again_afterwards() {
    let (mut l, _) = started();
    l.step(Input::Enabled { modules: vec![0] });
    let event = "KubeConfigChanged".to_string();
    assert!(l.step(Input::ConvergeRequested { event }).is_empty());
    finish(&mut l, 0);
    let tasks = names(l.step(Input::ConvergeDone { changed: false }));
    assert_eq!(tasks, ["ConvergeModules:main:BeforeAll:ReloadAllModules"]);
}

#[test]
fn a_failed_enabled_computation_is_retried_and_a_new_request_replaces_the_retry() {
    let (mut l, now) = started();
    let error = "module 'a': enabled script: exit 1".to_string();
    l.step(Input::EnabledFailed { error, now });
    assert_eq!(
        l.enabled_error(),
        Some("module 'a': enabled script: exit 1")
    );
    let tasks = names(l.step(Input::Tick {
        now: now + Duration::from_secs(5),
    }));
    assert_eq!(tasks, ["ConvergeModules:main:Modules:OperatorStartup"]);
    l.step(Input::EnabledFailed {
        error: "again".into(),
        now,
    });
    let event = "KubeConfigChanged".to_string();
    let tasks = names(l.step(Input::ConvergeRequested { event }));
    assert_eq!(tasks, ["ConvergeModules:main:BeforeAll:KubeConfigChanged"]);
    assert_eq!(l.next_due(), None);
}

#[test]
fn values_changes_and_drift_queue_one_run_and_wait_for_the_first_converge() {
    let mut l = Lifecycle::new([("a".to_string(), 1)], 2);
    let change = || Input::ValuesChanged {
        module: 0,
        event: "Kubernetes-Change-ModuleValues".into(),
    };
    assert!(l.step(change()).is_empty(), "before the first converge");
    l.step(Input::ConvergeStarted {
        event: "OperatorStartup".into(),
        now: Instant::now(),
    });
    l.step(Input::Enabled { modules: vec![0] });
    assert!(l.step(change()).is_empty(), "a run is queued already");
    finish(&mut l, 0);
    let drift = || Input::ReleaseDrift {
        module: 0,
        event: "AbsentHelmResourcesDetected".into(),
    };
    assert!(l.step(drift()).is_empty(), "the converge is still on");
    l.step(Input::ConvergeDone { changed: false });
    assert!(l.idle(0));
    assert_eq!(
        names(l.step(drift())),
        ["ModuleRun:main:a:AbsentHelmResourcesDetected"]
    );
    assert!(l.step(drift()).is_empty(), "one problem, one run");
    assert!(l.step(change()).is_empty());
}

#[test]
fn a_failed_drift_correction_is_not_retried_by_the_lifecycle() {
    let (mut l, now) = started();
    l.step(Input::Enabled { modules: vec![0] });
    finish(&mut l, 0);
    l.step(Input::ConvergeDone { changed: false });
    let event = crate::addon::release::drift::EVENT.to_string();
    let queued = names(l.step(Input::ReleaseDrift {
        module: 0,
        event: event.clone(),
    }));
    assert_eq!(queued, ["ModuleRun:main:a:HelmReleaseDriftDetected"]);
    l.step(Input::RunStarted { module: 0, event });
    let error = "field is immutable".to_string();
    l.step(Input::RunFailed {
        module: 0,
        error,
        now,
    });
    assert_eq!(
        l.next_due(),
        None,
        "the drift watcher backs off, not the lifecycle"
    );
    assert!(l.idle(0));
    assert!(
        l.step(Input::Tick {
            now: now + std::time::Duration::from_secs(3600)
        })
        .is_empty()
    );
    // Any other failed run is still retried.
    let event = "AbsentHelmResourcesDetected".to_string();
    l.step(Input::ReleaseDrift {
        module: 0,
        event: event.clone(),
    });
    l.step(Input::RunStarted { module: 0, event });
    let error = "helm failed".to_string();
    l.step(Input::RunFailed {
        module: 0,
        error,
        now,
    });
    assert!(l.next_due().is_some());
}

#[test]
fn a_run_that_fails_with_another_queued_is_retried_by_that_one_only() {
    let (mut l, now) = started();
    l.step(Input::Enabled { modules: vec![0] });
    finish(&mut l, 0);
    l.step(Input::ConvergeDone { changed: false });
    let change = |e: &str| Input::ValuesChanged {
        module: 0,
        event: e.into(),
    };
    assert_eq!(names(l.step(change("first"))).len(), 1);
    l.step(Input::RunStarted {
        module: 0,
        event: "first".into(),
    });
    assert_eq!(
        names(l.step(change("second"))).len(),
        1,
        "queued behind the running one"
    );
    l.step(Input::RunFailed {
        module: 0,
        error: "boom".into(),
        now,
    });
    assert_eq!(l.view(0).map(|v| v.state), Some("Queued"));
    assert_eq!(l.next_due(), None, "the queued run is the retry");
    let later = now + std::time::Duration::from_secs(3600);
    assert!(
        l.step(Input::Tick { now: later }).is_empty(),
        "no second run"
    );
}

#[test]
fn after_helm_changing_values_runs_the_module_again_before_the_converge_goes_on() {
    let (mut l, _) = started();
    l.step(Input::Enabled { modules: vec![0] });
    l.step(Input::RunStarted {
        module: 0,
        event: "OperatorStartup".into(),
    });
    let tasks = names(l.step(Input::StartupDone { module: 0 }));
    assert_eq!(tasks, ["ModuleRun:main:a:OperatorStartup"]);
    assert!(l.kube_enabled(0));
    l.step(Input::RunStarted {
        module: 0,
        event: "OperatorStartup".into(),
    });
    let tasks = names(l.step(Input::RunFinished {
        module: 0,
        again: true,
    }));
    assert_eq!(tasks, ["ModuleRun:main:a:AfterHelm-Hooks-Change-Values"]);
    assert_eq!(
        finish(&mut l, 0),
        ["ConvergeModules:main:AfterAll:OperatorStartup"]
    );
}

#[test]
fn modules_of_one_order_run_as_one_parallel_task_and_the_next_order_waits_for_all() {
    let (mut l, _) = started_with([1, 1, 2], 4);
    let tasks = names(l.step(Input::Enabled {
        modules: vec![0, 1, 2],
    }));
    assert_eq!(tasks, ["ParallelModuleRun:main:a,b:OperatorStartup"]);
    assert_eq!(l.view(2).map(|v| v.state), Some("Queued"));
    assert!(finish(&mut l, 1).is_empty(), "a still runs");
    assert_eq!(
        finish(&mut l, 0),
        ["ModuleRun:main:c:doStartup:OperatorStartup"]
    );
    assert_eq!(
        finish(&mut l, 2),
        ["ConvergeModules:main:AfterAll:OperatorStartup"]
    );
    // The next converge: started modules run without their startup.
    l.step(Input::ConvergeDone { changed: false });
    let event = "ReloadAllModules".to_string();
    l.step(Input::ConvergeRequested {
        event: event.clone(),
    });
    l.step(Input::ConvergeStarted {
        event,
        now: Instant::now(),
    });
    let tasks = l.step(Input::Enabled {
        modules: vec![0, 1, 2],
    });
    let Some(Step::ParallelModuleRun { runs, .. }) = tasks.first().and_then(|t| t.step().cloned())
    else {
        panic!("a parallel run: {tasks:?}");
    };
    assert!(runs.iter().all(|r| !r.do_startup), "{runs:?}");
}

#[test]
fn a_failed_module_holds_back_the_next_order_but_not_its_siblings() {
    let (mut l, now) = started_with([1, 1, 2], 4);
    l.step(Input::Enabled {
        modules: vec![0, 1, 2],
    });
    fail(&mut l, 0, now);
    assert!(finish(&mut l, 1).is_empty(), "c waits for a");
    assert_eq!(l.view(1).map(|v| v.state), Some("Ready"));
    // c's turn has not come: a change of its values or a run queued before the
    // converge does not run it.
    let event = "KubeConfig-Changed-Modules".to_string();
    assert!(l.step(Input::ValuesChanged { module: 2, event }).is_empty());
    l.step(Input::RunStarted {
        module: 2,
        event: "Kubernetes-Change-ModuleValues".into(),
    });
    assert!(!l.may_run(2));
    assert_eq!(l.view(2).map(|v| v.state), Some("Queued"));
    // a's retry succeeds: c runs.
    let tasks = names(l.step(Input::Tick {
        now: now + Duration::from_secs(5),
    }));
    assert_eq!(tasks, ["ModuleRun:main:a:doStartup:OperatorStartup"]);
    assert_eq!(
        finish(&mut l, 0),
        ["ModuleRun:main:c:doStartup:OperatorStartup"]
    );
    assert!(l.may_run(2));
    assert_eq!(
        finish(&mut l, 2),
        ["ConvergeModules:main:AfterAll:OperatorStartup"]
    );
}

#[test]
fn parallelism_1_runs_a_module_run_each_and_still_one_order_at_a_time() {
    let (mut l, _) = started_with([1, 1, 2], 1);
    let tasks = names(l.step(Input::Enabled {
        modules: vec![0, 1, 2],
    }));
    assert_eq!(
        tasks,
        [
            "ModuleRun:main:a:doStartup:OperatorStartup",
            "ModuleRun:main:b:doStartup:OperatorStartup"
        ]
    );
    assert!(finish(&mut l, 0).is_empty());
    assert_eq!(
        finish(&mut l, 1),
        ["ModuleRun:main:c:doStartup:OperatorStartup"]
    );
}

#[test]
fn a_converge_asked_for_while_an_order_is_held_back_starts_over() {
    let (mut l, now) = started_with([1, 2, 3], 4);
    l.step(Input::Enabled {
        modules: vec![0, 1, 2],
    });
    fail(&mut l, 0, now);
    let event = "KubeConfigChanged".to_string();
    let tasks = names(l.step(Input::ConvergeRequested {
        event: event.clone(),
    }));
    assert_eq!(tasks, ["ConvergeModules:main:BeforeAll:KubeConfigChanged"]);
    l.step(Input::ConvergeStarted { event, now });
    // a disabled now: b and c go on, one order after the other.
    let tasks = names(l.step(Input::Enabled {
        modules: vec![1, 2],
    }));
    assert_eq!(
        tasks,
        [
            "ModuleDelete:main:a",
            "ModuleRun:main:b:doStartup:KubeConfigChanged"
        ]
    );
    assert_eq!(
        finish(&mut l, 1),
        ["ModuleRun:main:c:doStartup:KubeConfigChanged"]
    );
}

#[test]
fn a_module_added_by_a_reload_is_disabled_until_a_converge_enables_it() {
    let (mut l, _) = started();
    l.step(Input::Enabled { modules: vec![0] });
    finish(&mut l, 0);
    l.step(Input::ConvergeDone { changed: false });
    let added = vec![("d".to_string(), 1)];
    assert!(names(l.step(Input::ModulesAdded { modules: added })).is_empty());
    assert!(!l.is_enabled(3) && !l.is_started(3));
    let event = "ModulesChanged".to_string();
    let values = Input::ValuesChanged { module: 3, event };
    assert!(names(l.step(values)).is_empty(), "not enabled yet");
    let now = Instant::now();
    let event = "ModulesChanged".to_string();
    l.step(Input::ConvergeStarted { event, now });
    let tasks = names(l.step(Input::Enabled {
        modules: vec![0, 3],
    }));
    assert_eq!(
        tasks,
        [
            "ModuleRun:main:a:ModulesChanged",
            "ModuleRun:main:d:doStartup:ModulesChanged"
        ]
    );
}

#[test]
fn a_started_module_s_new_hooks_are_enabled_then_it_runs_once() {
    let (mut l, _) = started();
    l.step(Input::Enabled { modules: vec![0] });
    finish(&mut l, 0);
    l.step(Input::ConvergeDone { changed: false });
    let enable = vec![Task::enable(
        crate::queue::TaskKind::EnableKubernetesBindings,
        7,
        "a/hooks/new.sh",
    )];
    let event = "ModuleHooksChanged".to_string();
    let tasks = names(l.step(Input::HooksChanged {
        module: 0,
        enable: enable.clone(),
        event: event.clone(),
    }));
    assert_eq!(tasks.len(), 2, "{tasks:?}");
    assert!(tasks[0].contains("a/hooks/new.sh"), "{tasks:?}");
    assert_eq!(tasks[1], "ModuleRun:main:a:ModuleHooksChanged");
    // Queued already: only the new Enable tasks.
    let again = names(l.step(Input::HooksChanged {
        module: 0,
        enable: enable.clone(),
        event: event.clone(),
    }));
    assert_eq!(again.len(), 1, "{again:?}");
    // A module not started (here: never enabled) enables its hooks at startup.
    let idle = Input::HooksChanged {
        module: 1,
        enable,
        event,
    };
    assert!(names(l.step(idle)).is_empty());
}
