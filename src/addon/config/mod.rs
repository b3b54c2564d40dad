//! What configures modules: the operator's ConfigMap ([`configmap`]),
//! `ModuleSettings` objects beside it ([`settings`]), and the values store with its
//! schemas and patches ([`values`]). How a change of them reaches the modules is the
//! run's (`run/config_changes.rs`, `run/hook_values.rs`).

pub(crate) mod configmap;
pub(crate) mod settings;
pub(crate) mod values;
