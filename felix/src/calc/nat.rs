//! natOutgoing: traffic from a pool with `natOutgoing` to anywhere outside
//! every pool leaves the node masqueraded. Pure.

use ipnet::IpNet;

use super::state::State;

/// What the NAT table should do: masquerade from `from` unless bound for
/// one of `pools`.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Nat {
    pub from: Vec<IpNet>,
    pub pools: Vec<IpNet>,
}

pub fn desired(state: &State) -> Nat {
    let mut n = Nat::default();
    for p in state.pools.values() {
        let Ok(net) = p.network() else { continue };
        n.pools.push(net);
        if p.nat_outgoing && !p.disabled {
            n.from.push(net);
        }
    }
    n.from.sort();
    n.pools.sort();
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use tartan_api::resources::IpPoolSpec;

    #[test]
    fn only_pools_with_nat_outgoing_masquerade() {
        let mut s = State::default();
        let mut a = IpPoolSpec::new("10.244.0.0/16");
        a.nat_outgoing = true;
        s.pools.insert("a".into(), a);
        s.pools.insert("b".into(), IpPoolSpec::new("10.245.0.0/16"));
        let n = desired(&s);
        assert_eq!(n.from, ["10.244.0.0/16".parse::<IpNet>().unwrap()]);
        assert_eq!(n.pools.len(), 2);
    }
}
