//! Services: ClusterIP, NodePort, LoadBalancer and external IPs with real
//! traffic, their addresses over BGP, UDP conntrack, and the lab's safety
//! around them.
//!
//! One test binary; each module is one former `lab/tests` file. Every test
//! takes `tartan_tests::one_file_at_a_time`, so that two modules' clusters
//! never run at once (see tests/src/gate.rs).

mod bgp_services;
mod dns;
mod services_bgp;
mod services_cluster;
mod services_dual_stack;
mod services_external;
mod services_kube_e2e;
mod services_lab_safety;
mod services_udp_conntrack;
