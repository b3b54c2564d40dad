//! What the operator derives from the loaded hooks before anything runs: the
//! queue names, the schedule entries, and the "main" queue's first tasks. Pure
//! functions, so `operator.rs` stays about wiring.

use crate::hook::Hook;
use crate::hook::context::BindingContext;
use crate::queue::{Task, TaskKind};
use crate::schedule::{Entry, cron::CronSchedule};

/// The queue every onStartup and Enable task runs on.
pub const MAIN_QUEUE: &str = "main";

/// The main queue's first tasks: onStartup runs by (ORDER, name), then each hook's
/// Enable tasks in name order.
pub fn startup_tasks(hooks: &[Hook]) -> Vec<Task> {
    let mut on_startup: Vec<(f64, usize)> = hooks
        .iter()
        .enumerate()
        .filter_map(|(i, h)| h.config.on_startup.map(|o| (o, i)))
        .collect();
    // Hooks are already in name order, so the index breaks ties by name.
    on_startup.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut tasks: Vec<Task> = on_startup
        .into_iter()
        .map(|(_, i)| {
            let ctx = BindingContext::on_startup();
            Task::hook_run(i, &hooks[i].name, false, false, ctx)
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

/// "main" plus every queue named by a binding, sorted.
pub fn queue_names(hooks: &[Hook]) -> Vec<String> {
    let mut names: Vec<String> = vec![MAIN_QUEUE.to_string()];
    for h in hooks {
        names.extend(h.config.schedule.iter().map(|b| b.queue.clone()));
        names.extend(h.config.kubernetes.iter().map(|b| b.queue.clone()));
    }
    names.sort();
    names.dedup();
    names
}

/// Every schedule binding's parsed crontab; an error names hook, binding and field.
pub fn schedule_entries(hooks: &[Hook]) -> Result<Vec<Entry>, String> {
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
