//! Policy: Kubernetes and Tartan network policies as reachability truth
//! tables, and failing closed when a policy cannot be read.
//!
//! One test binary; each module is one former `lab/tests` file. Every test
//! takes `tartan_tests::one_file_at_a_time`, so that two modules' clusters
//! never run at once (see tests/src/gate.rs).

mod netpol_fail_closed;
mod netpol_k8s;
mod netpol_tartan;
