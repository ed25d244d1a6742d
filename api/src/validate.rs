//! Validation (being written).
