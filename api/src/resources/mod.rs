//! `tartan.dev/v1` resources (being written).
