//! Faults: felix and bgpd restarted or killed during traffic (plain
//! pod-to-pod, through policy, through a Service) lose no packet and cut no
//! connection.
//!
//! One test binary; each module is one former `lab/tests` file. Every test
//! takes `tartan_tests::one_file_at_a_time`, so that two modules' clusters
//! never run at once (see tests/src/gate.rs).

mod lab_restart;
mod netpol_restart;
mod services_restart;
