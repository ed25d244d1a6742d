//! What the policy truth-table tests share: the grid with every pair
//! reachable and grids changed from it, and a policy of each kind applied
//! in one step.

use anyhow::Result;
use serde_json::Value;
use tartan_lab::netpol::{
    NetpolCluster, Protocol, Reachability, global_policy, k8s_policy, tartan_policy,
};

/// Every pod reaches every pod.
pub fn all() -> Reachability {
    Reachability::all(true)
}

/// The grid with every pair reachable, then changed by `change` (chained
/// `Reachability::expect…` calls).
pub fn grid(change: impl FnOnce(&mut Reachability) -> &mut Reachability) -> Reachability {
    let mut r = all();
    change(&mut r);
    r
}

/// `want` probed on each port and protocol of `probes`, in turn.
pub fn expect_on(c: &NetpolCluster, probes: &[(u16, Protocol)], want: &Reachability) -> Result<()> {
    for (port, proto) in probes {
        c.expect(*port, *proto, want)?;
    }
    Ok(())
}

/// The Kubernetes NetworkPolicy `ns/name` with `spec`, applied.
pub fn apply_k8s(c: &NetpolCluster, ns: &str, name: &str, spec: Value) -> Result<()> {
    c.apply_k8s_policy(k8s_policy(ns, name, spec))
}

/// The Tartan NetworkPolicy `ns/name` with `spec`, applied.
pub fn apply_tartan(c: &NetpolCluster, ns: &str, name: &str, spec: Value) -> Result<()> {
    c.apply_tartan_policy(tartan_policy(ns, name, spec))
}

/// The GlobalNetworkPolicy `name` with `spec`, applied.
pub fn apply_global(c: &NetpolCluster, name: &str, spec: Value) -> Result<()> {
    c.apply_global_policy(global_policy(name, spec))
}
