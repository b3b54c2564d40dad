//! The generated shell-operator corpus, part four: shrinking a case that differs.
//! Greedily, the first smaller variant (one hook, step, binding, patch operation or
//! object fewer, or a binding with one setting fewer) that still differs replaces
//! the case, until none does; the smallest case is printed with its differences.

use crate::gen_shell::Case;
use crate::gen_shell_run::run_case;

/// Smaller variants of `case`: one hook, step, binding, patch or object fewer, or a
/// binding with one setting fewer.
fn smaller(case: &Case) -> Vec<Case> {
    let mut out = Vec::new();
    let mut push = |f: &dyn Fn(&mut Case)| {
        let mut c = case.clone();
        f(&mut c);
        out.push(c);
    };
    for h in 0..case.hooks.len() {
        if case.hooks.len() > 1 {
            push(&|c| {
                c.hooks.remove(h);
            });
        }
    }
    for s in 0..case.steps.len() {
        push(&|c| {
            c.steps.remove(s);
        });
    }
    for (h, hook) in case.hooks.iter().enumerate() {
        for b in 0..hook.bindings.len() {
            if hook.bindings.len() > 1 || hook.on_startup.is_some() {
                push(&|c| {
                    c.hooks[h].bindings.remove(b);
                });
            }
        }
        for o in 0..hook.ops.len() {
            push(&|c| {
                c.hooks[h].ops.remove(o);
            });
        }
        if hook.on_startup.is_some() && !hook.bindings.is_empty() {
            push(&|c| c.hooks[h].on_startup = None);
        }
        if hook.slow {
            push(&|c| c.hooks[h].slow = false);
        }
    }
    for i in 0..case.initial.len() {
        push(&|c| {
            c.initial.remove(i);
        });
    }
    for (h, hook) in case.hooks.iter().enumerate() {
        for (b, x) in hook.bindings.iter().enumerate() {
            if x.labels.is_some() {
                push(&|c| c.hooks[h].bindings[b].labels = None);
            }
            if x.field.is_some() {
                push(&|c| c.hooks[h].bindings[b].field = None);
            }
            if x.names.is_some() {
                push(&|c| c.hooks[h].bindings[b].names = None);
            }
            if x.jq.is_some() {
                push(&|c| c.hooks[h].bindings[b].jq = None);
            }
            if x.on_event.is_some() {
                push(&|c| c.hooks[h].bindings[b].on_event = None);
            }
            if x.on_sync.is_some() {
                push(&|c| c.hooks[h].bindings[b].on_sync = None);
            }
            if x.keep_full.is_some() {
                push(&|c| c.hooks[h].bindings[b].keep_full = None);
            }
            if x.group.is_some() {
                push(&|c| c.hooks[h].bindings[b].group = None);
            }
            if x.queue.is_some() {
                push(&|c| c.hooks[h].bindings[b].queue = None);
            }
            if !x.include.is_empty() {
                push(&|c| c.hooks[h].bindings[b].include.clear());
            }
        }
    }
    out
}

/// Greedily shrinks a case that differs: the first smaller variant that still
/// differs replaces it, until none does or `GENERATED_SHRINK_RUNS` (default 40)
/// runs were spent. The smallest case and its differences.
pub(crate) fn shrink(case: &Case, diffs: Vec<String>) -> (Case, Vec<String>) {
    let budget: usize = std::env::var("GENERATED_SHRINK_RUNS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(40);
    let (mut best, mut best_diffs, mut runs) = (case.clone(), diffs, 0);
    'outer: loop {
        for candidate in smaller(&best) {
            if runs >= budget {
                break 'outer;
            }
            runs += 1;
            let d = run_case(&candidate);
            if !d.is_empty() {
                eprintln!(
                    "shrinking SEED={}: still differs after {runs} runs",
                    case.seed
                );
                (best, best_diffs) = (candidate, d);
                continue 'outer;
            }
        }
        break;
    }
    (best, best_diffs)
}
