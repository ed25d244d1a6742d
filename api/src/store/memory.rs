//! In-memory backend (being written).
