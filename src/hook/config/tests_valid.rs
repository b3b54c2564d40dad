//! Tests: valid configs.
