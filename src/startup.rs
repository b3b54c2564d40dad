//! What the operator derives from the loaded hooks before anything runs: the
//! queue names, the schedule entries, and the "main" queue's first tasks. Pure
//! functions, so `operator.rs` stays about wiring.

use crate::hook::Hook;
use crate::hook::context::BindingContext;
use crate::queue::{Task, TaskKind};
use crate::schedule::{Entry, cron::CronSchedule};

/// The queue every onStartup and Enable task runs on.
pub(crate) const MAIN_QUEUE: &str = "main";

/// The main queue's first tasks: onStartup runs by (ORDER, name), then each hook's
/// Enable tasks in name order.
pub(crate) fn startup_tasks(hooks: &[Hook]) -> Vec<Task> {
    tasks_for(hooks, &(0..hooks.len()).collect::<Vec<_>>())
}

/// [`startup_tasks`] of the hooks at `indices` only (the hooks a reload added,
/// `reload/apply.rs`).
pub(crate) fn tasks_for(hooks: &[Hook], indices: &[usize]) -> Vec<Task> {
    let picked = (indices.iter()).filter_map(|&i| Some((i, hooks.get(i)?)));
    let on_startup = by_order(picked.clone().map(|(i, h)| (i, h.config.on_startup)));
    let mut tasks: Vec<Task> = on_startup
        .into_iter()
        .map(|i| {
            let ctx = BindingContext::on_startup();
            Task::hook_run(i, &hooks[i].name, false, false, ctx)
        })
        .collect();
    for (i, h) in picked {
        if !h.config.kubernetes.is_empty() {
            tasks.push(Task::enable(TaskKind::EnableKubernetesBindings, i, &h.name));
        }
        if !h.config.schedule.is_empty() {
            tasks.push(Task::enable(TaskKind::EnableScheduleBindings, i, &h.name));
        }
    }
    tasks
}

/// Hook indices in flant's run order for onStartup and addon-operator's lifecycle
/// bindings: by ORDER, then by name; `(index, None)` (no such binding) is left out.
/// Hooks are loaded in name order, so the index breaks ties by name.
pub(crate) fn by_order(hooks: impl IntoIterator<Item = (usize, Option<f64>)>) -> Vec<usize> {
    let mut found: Vec<(f64, usize)> = hooks
        .into_iter()
        .filter_map(|(i, order)| order.map(|o| (o, i)))
        .collect();
    found.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    found.into_iter().map(|(_, i)| i).collect()
}

/// "main" plus every queue named by a binding, sorted.
pub(crate) fn queue_names(hooks: &[Hook]) -> Vec<String> {
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
pub(crate) fn schedule_entries(hooks: &[Hook]) -> Result<Vec<Entry>, String> {
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

#[cfg(test)]
mod tests {
    use super::by_order;

    #[test]
    fn hooks_run_by_order_then_name() {
        let hooks = [
            (0, Some(10.0)),
            (1, None),
            (2, Some(-1.5)),
            (3, Some(10.0)),
            (4, Some(2.0)),
        ];
        assert_eq!(by_order(hooks), [2, 4, 0, 3]);
    }
}
