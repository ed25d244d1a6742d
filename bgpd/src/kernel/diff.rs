//! What to change so that the kernel's Tartan routes equal the desired set.
use super::route::{KernelRoute, Nexthop, canonical};
use ipnet::IpNet;
use std::collections::HashMap;

/// The changes [`diff`] found, each list sorted by prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Diff {
    /// Routes to install or whose next hops changed.
    pub replace: Vec<KernelRoute>,
    /// Prefixes whose Tartan route must go.
    pub delete: Vec<IpNet>,
}

impl Diff {
    pub fn is_empty(&self) -> bool {
        self.replace.is_empty() && self.delete.is_empty()
    }
}

/// Pure: the changes that make `current` (the kernel's proto-201 routes)
/// equal `desired`. A desired prefix with no next hops counts as absent.
/// Next-hop order never matters, and a desired hop without an ifindex
/// matches the same gateway on any device (the kernel always reports one).
pub fn diff(desired: &HashMap<IpNet, Vec<Nexthop>>, current: &[KernelRoute]) -> Diff {
    let installed: HashMap<IpNet, &KernelRoute> =
        current.iter().map(|r| (r.prefix.trunc(), r)).collect();
    let mut wanted: HashMap<IpNet, Vec<Nexthop>> = HashMap::with_capacity(desired.len());
    for (prefix, hops) in desired {
        let hops = canonical(hops.clone());
        if !hops.is_empty() {
            wanted.insert(prefix.trunc(), hops);
        }
    }

    let mut out = Diff::default();
    for (prefix, hops) in &wanted {
        let unchanged = installed
            .get(prefix)
            .is_some_and(|cur| same_nexthops(hops, &cur.nexthops));
        if !unchanged {
            out.replace.push(KernelRoute {
                prefix: *prefix,
                nexthops: hops.clone(),
            });
        }
    }
    for prefix in installed.keys() {
        if !wanted.contains_key(prefix) {
            out.delete.push(*prefix);
        }
    }
    out.replace.sort_unstable_by_key(|r| r.prefix);
    out.delete.sort_unstable();
    out
}

/// Whether the kernel's hops `current` implement the `desired` hops.
/// Hops pinned to an interface are matched first so that an unpinned hop
/// cannot take the device a pinned one needs.
pub(crate) fn same_nexthops(desired: &[Nexthop], current: &[Nexthop]) -> bool {
    if desired.len() != current.len() {
        return false;
    }
    let mut used = vec![false; current.len()];
    let pinned = desired.iter().filter(|d| d.ifindex.is_some());
    let free = desired.iter().filter(|d| d.ifindex.is_none());
    pinned.chain(free).all(|want| {
        let found = current.iter().enumerate().position(|(i, have)| {
            !used[i]
                && have.gateway == want.gateway
                && (want.ifindex.is_none() || want.ifindex == have.ifindex)
        });
        match found {
            Some(i) => {
                used[i] = true;
                true
            }
            None => false,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::IpAddr;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn hop(s: &str) -> Nexthop {
        Nexthop::new(s.parse::<IpAddr>().unwrap())
    }

    fn hop_dev(s: &str, ifindex: u32) -> Nexthop {
        Nexthop::with_ifindex(s.parse::<IpAddr>().unwrap(), ifindex)
    }

    fn desired(routes: &[(&str, Vec<Nexthop>)]) -> HashMap<IpNet, Vec<Nexthop>> {
        routes.iter().map(|(p, h)| (net(p), h.clone())).collect()
    }

    #[test]
    fn adds_missing_routes() {
        let want = desired(&[
            ("10.1.0.0/24", vec![hop("10.0.0.2")]),
            ("fd00:1::/64", vec![hop("fd00::2")]),
        ]);
        let d = diff(&want, &[]);
        assert_eq!(
            d.replace,
            vec![
                KernelRoute::new(net("10.1.0.0/24"), vec![hop("10.0.0.2")]),
                KernelRoute::new(net("fd00:1::/64"), vec![hop("fd00::2")]),
            ]
        );
        assert!(d.delete.is_empty());
    }

    #[test]
    fn replaces_changed_nexthops() {
        let want = desired(&[("10.1.0.0/24", vec![hop("10.0.0.3")])]);
        let cur = [KernelRoute::new(net("10.1.0.0/24"), vec![hop("10.0.0.2")])];
        let d = diff(&want, &cur);
        assert_eq!(
            d.replace,
            vec![KernelRoute::new(net("10.1.0.0/24"), vec![hop("10.0.0.3")])]
        );
        assert!(d.delete.is_empty());

        // From two paths to one is a change too.
        let cur = [KernelRoute::new(
            net("10.1.0.0/24"),
            vec![hop("10.0.0.2"), hop("10.0.0.3")],
        )];
        assert_eq!(diff(&want, &cur).replace.len(), 1);
    }

    #[test]
    fn deletes_routes_no_longer_wanted() {
        let want = desired(&[("10.2.0.0/24", vec![])]);
        let cur = [
            KernelRoute::new(net("10.1.0.0/24"), vec![hop("10.0.0.2")]),
            KernelRoute::new(net("10.2.0.0/24"), vec![hop("10.0.0.2")]),
        ];
        let d = diff(&want, &cur);
        assert!(d.replace.is_empty());
        assert_eq!(d.delete, vec![net("10.1.0.0/24"), net("10.2.0.0/24")]);
    }

    #[test]
    fn ecmp_order_causes_no_churn() {
        let want = desired(&[(
            "10.1.0.0/24",
            vec![hop("10.0.0.3"), hop("10.0.0.2"), hop("10.0.0.3")],
        )]);
        // The kernel reports the device of every hop.
        let cur = [KernelRoute::new(
            net("10.1.0.0/24"),
            vec![hop_dev("10.0.0.2", 7), hop_dev("10.0.0.3", 7)],
        )];
        assert!(diff(&want, &cur).is_empty());
    }

    #[test]
    fn identical_routes_are_untouched() {
        let want = desired(&[
            ("10.1.0.0/24", vec![hop("10.0.0.2")]),
            ("fd00:1::/64", vec![hop_dev("fe80::2", 4)]),
            ("10.3.0.0/24", vec![hop("10.0.0.9")]),
        ]);
        let cur = [
            KernelRoute::new(net("10.1.0.0/24"), vec![hop_dev("10.0.0.2", 3)]),
            KernelRoute::new(net("fd00:1::/64"), vec![hop_dev("fe80::2", 4)]),
        ];
        let d = diff(&want, &cur);
        assert_eq!(
            d.replace,
            vec![KernelRoute::new(net("10.3.0.0/24"), vec![hop("10.0.0.9")])]
        );
        assert!(d.delete.is_empty());
    }

    #[test]
    fn pinned_interface_must_match() {
        let want = desired(&[("fd00:1::/64", vec![hop_dev("fe80::2", 4)])]);
        let cur = [KernelRoute::new(
            net("fd00:1::/64"),
            vec![hop_dev("fe80::2", 5)],
        )];
        assert_eq!(diff(&want, &cur).replace.len(), 1);
    }

    #[test]
    fn pinned_hops_are_matched_before_free_ones() {
        // Same link-local gateway on two links: the free hop must not take
        // the device the pinned one needs.
        let want = [hop("fe80::1"), hop_dev("fe80::1", 2)];
        let cur = [hop_dev("fe80::1", 2), hop_dev("fe80::1", 3)];
        assert!(same_nexthops(&canonical(want.to_vec()), &cur));
    }

    #[test]
    fn host_bits_are_ignored() {
        let want = desired(&[("10.1.0.7/24", vec![hop("10.0.0.2")])]);
        let cur = [KernelRoute::new(net("10.1.0.0/24"), vec![hop("10.0.0.2")])];
        assert!(diff(&want, &cur).is_empty());
    }
}
