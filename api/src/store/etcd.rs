//! etcd backend (being written).
