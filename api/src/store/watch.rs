//! Watch with resume (being written).
