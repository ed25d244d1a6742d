//! CNI: the plugin as a container runtime calls it, and IPAM under parallel
//! adds.
//!
//! One test binary; each module is one former `lab/tests` file. Every test
//! takes `tartan_tests::one_file_at_a_time`, so that two modules' clusters
//! never run at once (see tests/src/gate.rs).

mod cni_ipam;
mod cni_plugin;
