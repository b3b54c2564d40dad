//! addon-operator: modules, values and Helm releases on top of the shell-operator core.

pub mod helm;
