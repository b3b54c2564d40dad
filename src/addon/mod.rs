//! addon-operator: modules (a Helm chart, hooks and values), global hooks, the values
//! store, the ConfigMap and the converge cycle, built on the shell-operator engine
//! (queues, runner, executor, monitors, scheduler, kube client).

pub mod flags;
