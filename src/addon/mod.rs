//! addon-operator: the module/values side of the operator (values storage, schemas, ...).
pub mod values;
