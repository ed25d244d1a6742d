//! Kubernetes backend (being written).
