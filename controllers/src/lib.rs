//! Tartan's cluster controllers: what a control plane does for Tartan's
//! resources beside the agents. Today [`services`] (ClusterIP, NodePort
//! and LoadBalancer address allocation, EndpointSlice upkeep), which the
//! lab calls; the controllers for a real cluster come here too.
pub mod services;
