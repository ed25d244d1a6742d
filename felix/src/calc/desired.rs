//! The dataplane a pass writes, computed from the state only when the state
//! changed: the periodic check compares the kernel with the last result
//! rather than computing it again from the whole cluster. Pure.

use std::collections::BTreeSet;
use std::net::IpAddr;

use tartan_policy::compile::{CompileCache, Ruleset};

use super::encap::{self, Tunnels};
use super::nat::{self, Nat};
use super::routes::{self, Routes};
use super::state::State;

/// What this node should have, as last computed.
#[derive(Debug, Clone, PartialEq)]
pub struct Desired {
    pub nat: Nat,
    /// `None` until the policy watches have all synced.
    pub policy: Option<Ruleset>,
    /// This node's pods' addresses, IPv4 and IPv6 (for the service
    /// proxy's hairpin).
    pub local_pods: BTreeSet<IpAddr>,
    /// Blackholes for this node's blocks and its pods' routes.
    pub local: Routes,
    pub tunnels: Tunnels,
    /// Every route: `local`, and those to other nodes' pods in
    /// encapsulated pools (a local pod's route wins over a stale record
    /// of its address elsewhere).
    pub routes: Routes,
    /// Whether `tunnels` and `routes` assumed an IPIP device can be made.
    pub ipip_available: bool,
}

/// The calculation kept from one pass to the next.
#[derive(Debug, Default)]
pub struct Calc {
    cache: CompileCache,
    last: Option<Desired>,
    recomputes: u64,
}

impl Calc {
    /// What `node` should have. Computed from `state` when `changed` (a
    /// watch event changed what felix keeps) or when nothing computed so
    /// far fits (first pass, policy newly synced); otherwise the last
    /// result as it is, but for the routes to other nodes when the IPIP
    /// availability learnt from the kernel differs.
    pub fn desired(
        &mut self,
        node: &str,
        state: &State,
        changed: bool,
        policy_synced: bool,
        ipip_available: bool,
    ) -> &Desired {
        let stale = match &self.last {
            None => true,
            Some(d) => changed || (policy_synced && d.policy.is_none()),
        };
        if stale {
            self.last = None;
        }
        let (cache, recomputes) = (&mut self.cache, &mut self.recomputes);
        let d = self.last.get_or_insert_with(|| {
            *recomputes += 1;
            Desired {
                nat: nat::desired(state),
                policy: policy_synced.then(|| super::policy::desired_cached(node, state, cache)),
                local_pods: super::services::local_pods(node, state),
                local: routes::desired(node, state),
                tunnels: Tunnels::default(),
                routes: Routes::new(),
                ipip_available,
            }
        });
        if stale || d.ipip_available != ipip_available {
            let (remote, tunnels) = encap::remote(node, state, ipip_available);
            let mut all = d.local.clone();
            for (dst, t) in remote {
                all.entry(dst).or_insert(t);
            }
            d.routes = all;
            d.tunnels = tunnels;
            d.ipip_available = ipip_available;
        }
        d
    }

    /// How many times the desired state was computed from the state.
    pub fn recomputes(&self) -> u64 {
        self.recomputes
    }
}
