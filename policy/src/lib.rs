//! Tartan's policy model, pure (no I/O). So far: the selector language
//! that picks endpoints, nodes and pools by their labels.

pub mod selector;

pub use selector::{Selector, SelectorError};
