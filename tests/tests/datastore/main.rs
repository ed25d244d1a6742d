//! Datastore: the etcd backend against real etcd servers.
//!
//! One test binary; each module is one former `lab/tests` file.

mod datastore_etcd;
