//! Tartan's cluster controllers: what a control plane does for Tartan's
//! resources beside the agents. [`services`] (ClusterIP and NodePort
//! allocation, EndpointSlice upkeep), which the lab
//! calls; and the `tartan-controllers` daemon's parts: [`lease`] (leader
//! election), [`firststart`] (the default IPPools from the ConfigMap
//! `tartan-config`), [`ipamgc`] (the IPAM records of deleted Nodes) and
//! [`lbpool`] (LoadBalancer addresses from LoadBalancerIPPools).
pub mod daemon;
pub mod firststart;
pub mod ipamgc;
pub mod lbpool;
pub mod lease;
pub mod metrics;
pub mod services;
