//! How modules run: the lifecycle's step function ([`lifecycle`]), the converge
//! cycle's phases ([`converge`]), one module's run and delete ([`module_run`]),
//! the side-by-side runs of one order ([`parallel`]), and what reaches them from
//! outside a run: a ConfigMap or settings change ([`config_changes`]) and hooks'
//! values and config patches after each hook run ([`hook_values`]); and the status
//! and settings written to ModuleSettings objects after runs ([`settings_report`]).

pub(crate) mod config_changes;
pub(crate) mod converge;
pub(crate) mod hook_values;
pub(crate) mod lifecycle;
pub(crate) mod module_run;
pub(crate) mod parallel;
pub(crate) mod settings_report;
