//! Tartan resource and interface types.
