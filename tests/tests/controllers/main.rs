//! tartan-controllers in the lab (issue 21, acceptance 4): LoadBalancer
//! addresses from a LoadBalancerIPPool announced to a BIRD router and
//! withdrawn, the two replicas' Lease (one acts, the other takes over when
//! it dies), the IPAM records of a deleted Node released, and the default
//! IPPools created from the ConfigMap tartan-config at first start.
//!
//! Every test takes `tartan_tests::one_file_at_a_time`, so that two
//! modules' clusters never run at once (see tests/src/gate.rs).

mod first_start;
mod ipam_gc;
mod lb_pool;
