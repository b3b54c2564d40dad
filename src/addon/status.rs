//! addon-operator's readiness and converge status on the metrics port (flant's
//! texts): `/ready` and `/readyz` answer 500 `Startup converge in progress` until the
//! first converge finished, then 200 `Startup converge done.`; `/status/converge`
//! tells where converges are, as text lines or, with `?output=json`, an object.

use super::debug::Slot;
use crate::http::ExtraRoutes;
use crate::queue::worker::SharedView;
use serde_json::json;
use std::sync::Arc;

/// Task descriptions that belong to a converge (flant counts these).
const CONVERGE_TASKS: &[&str] = &[
    "ConvergeModules:",
    "ModuleRun:",
    "ParallelModuleRun:",
    "ModuleDelete:",
    "ModulePurge:",
    "EnableKubernetesBindings:",
    "EnableScheduleBindings:",
    "HookRun:main:beforeAll:",
    "HookRun:main:afterAll:",
];

/// The routes; `main` is the main queue's view, `slot` the engine's state.
pub(crate) fn routes(slot: Slot, main: SharedView) -> ExtraRoutes {
    Arc::new(move |path: &str, query: &str| {
        let (started, done, active) = match slot.get() {
            Some(shared) => shared.lock().lifecycle.converge_status(),
            None => (false, false, false),
        };
        match path {
            "/ready" | "/readyz" if done => Some((200, "Startup converge done.\n".into())),
            "/ready" | "/readyz" => Some((500, "Startup converge in progress\n".into())),
            "/status/converge" => {
                let tasks = converge_tasks(&main);
                let json = query.split('&').any(|kv| kv == "output=json");
                Some((200, status_text(started, done, active, tasks, json)))
            }
            _ => None,
        }
    })
}

fn converge_tasks(main: &SharedView) -> usize {
    let view = main.lock().unwrap_or_else(|p| p.into_inner());
    view.tasks
        .iter()
        .filter(|t| CONVERGE_TASKS.iter().any(|p| t.starts_with(p)))
        .count()
}

fn status_text(started: bool, done: bool, active: bool, tasks: usize, json: bool) -> String {
    if json {
        let value = json!({
            "STARTUP_CONVERGE_NOT_STARTED": !started,
            "STARTUP_CONVERGE_IN_PROGRESS": if started && !done { tasks } else { 0 },
            "STARTUP_CONVERGE_DONE": done,
            "CONVERGE_IN_PROGRESS": if done && active { tasks } else { 0 },
            "CONVERGE_WAIT_TASK": done && !active,
        });
        return format!("{value}\n");
    }
    match (started, done) {
        (false, _) => "STARTUP_CONVERGE_NOT_STARTED\n".into(),
        (true, false) => format!("STARTUP_CONVERGE_IN_PROGRESS: {tasks} tasks\n"),
        (true, true) if active => {
            format!("STARTUP_CONVERGE_DONE\nCONVERGE_IN_PROGRESS: {tasks} tasks\n")
        }
        (true, true) => "STARTUP_CONVERGE_DONE\nCONVERGE_WAIT_TASK\n".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn status_lines_follow_flant() {
        assert_eq!(
            status_text(false, false, false, 3, false),
            "STARTUP_CONVERGE_NOT_STARTED\n"
        );
        assert_eq!(
            status_text(true, false, true, 4, false),
            "STARTUP_CONVERGE_IN_PROGRESS: 4 tasks\n"
        );
        assert_eq!(
            status_text(true, true, true, 2, false),
            "STARTUP_CONVERGE_DONE\nCONVERGE_IN_PROGRESS: 2 tasks\n"
        );
        assert_eq!(
            status_text(true, true, false, 0, false),
            "STARTUP_CONVERGE_DONE\nCONVERGE_WAIT_TASK\n"
        );
        let v: serde_json::Value =
            serde_json::from_str(&status_text(true, false, true, 5, true)).expect("json");
        assert_eq!(
            v,
            json!({"STARTUP_CONVERGE_NOT_STARTED": false, "STARTUP_CONVERGE_IN_PROGRESS": 5,
                   "STARTUP_CONVERGE_DONE": false, "CONVERGE_IN_PROGRESS": 0, "CONVERGE_WAIT_TASK": false})
        );
    }
}
