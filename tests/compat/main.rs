//! The compatibility suite (`make test-compat`): flant's own shell-operator, built
//! from its released Go module by scripts/install-flant.sh, and ours run the same
//! hooks against the same real kube-apiserver (tests/control-plane) through the same
//! scripted API changes; every hook records what it received, and the records are
//! compared. A difference fails the suite unless `oracle::ALLOWED` names it with a
//! reason (each such entry is also in the README's "Differences from flant's
//! operators").

#[path = "../common/mod.rs"]
mod common;

mod oracle;

mod addon;
mod addon_compare;
mod addon_migration;
mod addon_oracle;
mod burst;
mod gen_addon;
mod gen_addon_files;
mod gen_addon_run;
mod mutating;
mod patcher;
mod queues;
mod shell;
mod v0;
mod webhooks;
