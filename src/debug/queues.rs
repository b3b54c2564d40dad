//! The debug server's queue views in flant's shapes: one queue (`queue main`) and
//! the list of every queue with a summary (`queue list`), as JSON values (for json
//! and yaml output) and as flant's text.

use crate::queue::worker::QueueView;
use serde_json::{Value, json};

/// One queue: `{name, tasksCount, status?, tasks?: [{index, description}]}`.
pub(crate) fn queue_json(q: &QueueView) -> Value {
    let mut v = json!({"name": q.name, "tasksCount": q.tasks.len()});
    if let Some(obj) = v.as_object_mut() {
        if !q.status.is_empty() {
            obj.insert("status".into(), Value::from(q.status.clone()));
        }
        if !q.tasks.is_empty() {
            let tasks: Vec<Value> = q
                .tasks
                .iter()
                .enumerate()
                .map(|(i, d)| json!({"index": i + 1, "description": d}))
                .collect();
            obj.insert("tasks".into(), Value::Array(tasks));
        }
    }
    v
}

/// One queue as text: a header line, a blank line, then ` 1. <task>` lines.
pub(crate) fn queue_text(q: &QueueView) -> String {
    let mut out = format!(
        "Queue '{}': length {}, status: '{}'\n\n",
        q.name,
        q.tasks.len(),
        q.status
    );
    for (i, d) in q.tasks.iter().enumerate() {
        out.push_str(&format!("{:2}. {d}\n", i + 1));
    }
    out
}

/// The queues split as flant splits them: `main` first, then by name; a queue with
/// tasks is active; an empty `main` counts as empty but is listed as empty only
/// when other queues exist.
struct Split<'a> {
    active: Vec<&'a QueueView>,
    empty: Vec<&'a QueueView>,
    main_tasks: usize,
    other_active: usize,
    other_empty: usize,
    other_tasks: usize,
}

fn split(queues: &[QueueView]) -> Split<'_> {
    let mut sorted: Vec<&QueueView> = queues.iter().collect();
    sorted.sort_by(|a, b| (a.name != "main", &a.name).cmp(&(b.name != "main", &b.name)));
    let mut s = Split {
        active: vec![],
        empty: vec![],
        main_tasks: 0,
        other_active: 0,
        other_empty: 0,
        other_tasks: 0,
    };
    let others = sorted.iter().filter(|q| q.name != "main").count();
    for q in sorted {
        let is_main = q.name == "main";
        match (is_main, q.tasks.is_empty()) {
            (true, false) => s.active.push(q),
            (true, true) if others > 0 => s.empty.push(q),
            (true, true) => {}
            (false, false) => {
                s.active.push(q);
                s.other_active += 1;
            }
            (false, true) => {
                s.empty.push(q);
                s.other_empty += 1;
            }
        }
        if is_main {
            s.main_tasks = q.tasks.len();
        } else {
            s.other_tasks += q.tasks.len();
        }
    }
    s
}

/// `queue list` as JSON: `{active, empty (if show_empty), summary}`.
pub(crate) fn list_json(queues: &[QueueView], show_empty: bool) -> Value {
    let s = split(queues);
    let mut v = json!({
        "active": s.active.iter().map(|q| queue_json(q)).collect::<Vec<_>>(),
        "summary": {
            "mainQueueTasks": s.main_tasks,
            "otherQueues": {"active": s.other_active, "empty": s.other_empty, "tasks": s.other_tasks},
            "totalTasks": s.main_tasks + s.other_tasks,
        },
    });
    if let (true, Some(obj)) = (show_empty, v.as_object_mut()) {
        let empty: Vec<Value> = s.empty.iter().map(|q| queue_json(q)).collect();
        obj.insert("empty".into(), Value::Array(empty));
    }
    v
}

/// `queue list` as text: active queues, the empty ones (if asked), a summary.
pub(crate) fn list_text(queues: &[QueueView], show_empty: bool) -> String {
    if queues.is_empty() {
        return "Summary:\n  No queues.\n".into();
    }
    let s = split(queues);
    let mut out: Vec<String> = s.active.iter().map(|q| queue_text(q)).collect();
    if show_empty && !s.empty.is_empty() && s.other_active + s.other_empty > 0 {
        let names: String = s.empty.iter().map(|q| format!("- {}\n", q.name)).collect();
        out.push(format!("Empty queues ({}):\n{names}", s.empty.len()));
    }
    out.push(summary_text(&s));
    out.join("\n")
}

fn tasks(n: usize) -> String {
    match n {
        1 => "1 task".into(),
        n => format!("{n} tasks"),
    }
}

fn summary_text(s: &Split) -> String {
    let main = match s.main_tasks {
        0 => "empty".to_string(),
        n => tasks(n),
    };
    let others = s.other_active + s.other_empty;
    let total = s.main_tasks + s.other_tasks;
    let total = match total {
        0 => "- no tasks to handle.".to_string(),
        n => format!("- total {} to handle.", tasks(n)),
    };
    format!(
        "Summary:\n- 'main' queue: {main}.\n- {others} other queue{} ({} active, {} empty): {}.\n{total}\n",
        if others == 1 { "" } else { "s" },
        s.other_active,
        s.other_empty,
        tasks(s.other_tasks)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(name: &str, status: &str, tasks: &[&str]) -> QueueView {
        QueueView {
            name: name.into(),
            status: status.into(),
            tasks: tasks.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn list_text_and_json() {
        let queues = [
            q(
                "slow",
                "run first task",
                &[
                    "HookRun:slow:Schedule:a.sh:s",
                    "HookRun:slow:Schedule:a.sh:s",
                ],
            ),
            q("main", "", &[]),
            q("idle", "", &[]),
        ];
        assert_eq!(
            list_text(&queues, true),
            "Queue 'slow': length 2, status: 'run first task'\n\n \
             1. HookRun:slow:Schedule:a.sh:s\n 2. HookRun:slow:Schedule:a.sh:s\n\n\
             Empty queues (2):\n- main\n- idle\n\n\
             Summary:\n- 'main' queue: empty.\n- 2 other queues (1 active, 1 empty): 2 tasks.\n\
             - total 2 tasks to handle.\n"
        );
        let v = list_json(&queues, false);
        assert_eq!(
            v["summary"],
            json!({"mainQueueTasks": 0, "otherQueues": {"active": 1, "empty": 1, "tasks": 2}, "totalTasks": 2})
        );
        assert!(v.get("empty").is_none());
        assert_eq!(
            v["active"][0]["tasks"][1],
            json!({"index": 2, "description": "HookRun:slow:Schedule:a.sh:s"})
        );
        assert_eq!(list_text(&[], false), "Summary:\n  No queues.\n");
        let lone = list_json(&[q("main", "", &[])], true);
        assert_eq!(lone["empty"], json!([]), "a lone empty main is not listed");
    }
}
