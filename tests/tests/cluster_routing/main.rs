//! Cluster routing: pods reaching pods across nodes over the mesh (and a
//! cut node dropped by BFD), route reflectors, a top-of-rack router, two
//! families, VXLAN and IPIP, the lab's command line, and felix's local
//! routes.
//!
//! One test binary; each module is one former `lab/tests` file. Every test
//! takes `tartan_tests::one_file_at_a_time`, so that two modules' clusters
//! never run at once (see tests/src/gate.rs).

mod cluster_bfd;
mod cluster_ipip;
mod cluster_mesh;
mod cluster_tor;
mod cluster_vxlan;
mod felix_routes;
mod lab_cli;
mod lab_dualstack;
mod lab_rr;
mod lab_tor;
mod metrics_conventions;
mod node_status;
