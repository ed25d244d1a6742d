//! The CNI plugin (being written).
