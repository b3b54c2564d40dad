//! Tests: invalid configs.
