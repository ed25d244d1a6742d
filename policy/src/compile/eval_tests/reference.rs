//! The reference evaluator: a packet decided from the semantics, directly
//! over the IR.

use crate::compile::Endpoint;
use crate::compile::rules::log_prefix;
use crate::ir::{Addrs, Cond, Policy};
use crate::model::Action;

use super::interp::{Cluster, Outcome, Packet};

fn cond_holds(c: &Cond, p: &Packet, cl: &Cluster) -> bool {
    match c {
        Cond::IpVersion(v) => (*v == 6) == p.v6(),
        Cond::Protocol { number, negate } => (p.proto == *number) != *negate,
        Cond::Icmp {
            v6,
            icmp_type,
            code,
            negate,
        } => {
            let proto = if *v6 { 58 } else { 1 };
            let hit = p.v6() == *v6
                && p.proto == proto
                && p.icmp
                    .is_some_and(|(t, k)| t == *icmp_type && code.is_none_or(|c| c == k));
            hit != *negate
        }
        Cond::Addr {
            side,
            addrs,
            negate,
        } => {
            let a = p.addr(*side);
            let hit = match addrs {
                Addrs::Nets(nets) => nets.iter().any(|n| n.contains(&a)),
                // A pod's address, or one in a network set's networks.
                Addrs::Endpoints(sel) => {
                    cl.endpoints
                        .iter()
                        .any(|e| e.addrs.contains(&a) && sel.matches(e, &cl.namespaces))
                        || cl.net_sets.iter().any(|s| {
                            s.nets.iter().any(|n| n.contains(&a))
                                && sel.matches_set(s, &cl.namespaces)
                        })
                }
            };
            hit != *negate
        }
        Cond::Ports {
            side,
            ranges,
            negate,
        } => {
            let hit = p
                .port(*side)
                .is_some_and(|q| ranges.iter().any(|&(lo, hi)| lo <= q && q <= hi));
            hit != *negate
        }
        Cond::NamedPort { side, name, negate } => {
            // The named port of the endpoint holding that side's address.
            let hit = match (cl.holder(p.addr(*side)), p.port(*side)) {
                (Some(e), Some(q)) => e
                    .ports
                    .iter()
                    .any(|np| np.name == *name && np.protocol == p.proto && np.port == q),
                _ => false,
            };
            hit != *negate
        }
    }
}

/// One direction of one endpoint: `true` when the packet may go on.
fn reference_direction(
    sorted: &[&Policy],
    ep: &Endpoint,
    ingress: bool,
    p: &Packet,
    cl: &Cluster,
    logs: &mut Vec<String>,
) -> bool {
    let list: Vec<&Policy> = sorted
        .iter()
        .copied()
        .filter(|pol| {
            (if ingress { &pol.ingress } else { &pol.egress }).is_some()
                && pol.applies_to.matches(ep, &cl.namespaces)
        })
        .collect();
    if list.is_empty() {
        return true;
    }
    let mut passed = false;
    for pol in &list {
        if passed && !pol.source.is_kubernetes() {
            continue;
        }
        let rules = if ingress { &pol.ingress } else { &pol.egress };
        for r in rules.iter().flatten() {
            if !r.conds.iter().all(|c| cond_holds(c, p, cl)) {
                continue;
            }
            match r.action {
                Action::Allow => return true,
                Action::Deny => return false,
                Action::Log => logs.push(log_prefix(pol, ingress)),
                Action::Pass => {
                    passed = true;
                    break;
                }
            }
        }
    }
    // A Pass with no Kubernetes policy to go on to allows.
    passed && !list.iter().any(|pol| pol.source.is_kubernetes())
}

pub(super) fn reference(policies: &[Policy], cl: &Cluster, p: &Packet) -> Outcome {
    let mut sorted: Vec<&Policy> = policies.iter().collect();
    sorted.sort_by_key(|pol| pol.sort_key());
    let mut logs = Vec::new();
    let mut allowed = true;
    if let Some(ep) = cl.local(p.src) {
        allowed = reference_direction(&sorted, ep, false, p, cl, &mut logs);
    }
    if allowed && let Some(ep) = cl.local(p.dst) {
        allowed = reference_direction(&sorted, ep, true, p, cl, &mut logs);
    }
    Outcome { allowed, logs }
}
