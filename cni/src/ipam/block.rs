//! Pure operations on one IPAM block: which address to hand out next,
//! recording a holder, and giving addresses back. No I/O: the caller reads
//! the block, changes it here and writes it back by compare-and-swap.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;
use tartan_api::resources::{AllocationAttributes, IpamBlockSpec, ReleasedAddress};

/// The `ordinal`-th address of `net`, if the network holds that many.
pub fn address_at(net: &IpNet, ordinal: u32) -> Option<IpAddr> {
    let host_bits = u32::from(net.max_prefix_len() - net.prefix_len());
    if host_bits < 32 && ordinal >= (1u32 << host_bits) {
        return None;
    }
    Some(match net {
        IpNet::V4(n) => IpAddr::V4(Ipv4Addr::from(u32::from(n.network()).checked_add(ordinal)?)),
        IpNet::V6(n) => IpAddr::V6(Ipv6Addr::from(
            u128::from(n.network()).checked_add(u128::from(ordinal))?,
        )),
    })
}

/// The ordinal of `addr` in `net`, if it lies inside.
pub fn ordinal_of(net: &IpNet, addr: IpAddr) -> Option<u32> {
    if !net.contains(&addr) {
        return None;
    }
    let off = match (net, addr) {
        (IpNet::V4(n), IpAddr::V4(a)) => u128::from(u32::from(a) - u32::from(n.network())),
        (IpNet::V6(n), IpAddr::V6(a)) => u128::from(a) - u128::from(n.network()),
        _ => return None,
    };
    u32::try_from(off).ok()
}

/// What keeps an address from being handed out besides being held.
pub struct Exclusions<'a> {
    /// Reserved networks: IPReservations and the pool's edge addresses.
    pub reserved: &'a [IpNet],
    /// Now, in seconds since the Unix epoch.
    pub now: i64,
    /// How long a released address rests before it is reused, in seconds.
    pub cooldown: i64,
}

impl Exclusions<'_> {
    pub fn is_reserved(&self, addr: IpAddr) -> bool {
        self.reserved.iter().any(|r| r.contains(&addr))
    }
}

/// Why a block gave no address.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Shortage {
    /// Free addresses that are still cooling down.
    pub cooling: usize,
    /// Seconds until the first of them is free again.
    pub next_free_in: Option<i64>,
}

/// The next address to hand out: the first unallocated ordinal that is
/// neither reserved nor cooling down. `Err` says what is cooling.
pub fn pick(block: &IpamBlockSpec, net: &IpNet, ex: &Exclusions) -> Result<u32, Shortage> {
    let mut shortage = Shortage::default();
    if block.deleted {
        return Err(shortage);
    }
    for &ordinal in &block.unallocated {
        if !matches!(block.allocations.get(ordinal as usize), Some(None)) {
            continue; // an inconsistent entry; never trust it
        }
        let Some(addr) = address_at(net, ordinal) else {
            continue;
        };
        if ex.is_reserved(addr) {
            continue;
        }
        if let Some(r) = block.released.iter().find(|r| r.ordinal == ordinal) {
            let free_at = r.at.saturating_add(ex.cooldown);
            if free_at > ex.now {
                shortage.cooling += 1;
                let wait = free_at - ex.now;
                shortage.next_free_in = Some(shortage.next_free_in.map_or(wait, |w| w.min(wait)));
                continue;
            }
        }
        return Ok(ordinal);
    }
    Err(shortage)
}

/// Whether any address of `net` could ever be handed out (some are not
/// reserved): a block that is all reservation is not worth claiming.
pub fn has_usable_address(net: &IpNet, reserved: &[IpNet]) -> bool {
    let size = 1u64 << u32::from(net.max_prefix_len() - net.prefix_len()).min(32);
    (0..size.min(u64::from(u32::MAX))).any(|o| {
        address_at(net, o as u32).is_some_and(|a| !reserved.iter().any(|r| r.contains(&a)))
    })
}

/// Give `ordinal` to `handle`; the ordinal must be free (from [`pick`]).
pub fn assign(
    block: &mut IpamBlockSpec,
    ordinal: u32,
    handle: &str,
    secondary: &BTreeMap<String, String>,
) {
    let wanted = AllocationAttributes {
        handle_id: Some(handle.to_string()),
        secondary: secondary.clone(),
    };
    let index = match block.attributes.iter().position(|a| *a == wanted) {
        Some(i) => i,
        None => {
            block.attributes.push(wanted);
            block.attributes.len() - 1
        }
    };
    if let Some(slot) = block.allocations.get_mut(ordinal as usize) {
        *slot = Some(index as u32);
    }
    block.unallocated.retain(|&o| o != ordinal);
    block.released.retain(|r| r.ordinal != ordinal);
}

/// The ordinals `handle` holds in `block`.
pub fn held_by(block: &IpamBlockSpec, handle: &str) -> Vec<u32> {
    block
        .allocations
        .iter()
        .enumerate()
        .filter_map(|(o, a)| {
            let a = (*a)?;
            let attr = block.attributes.get(a as usize)?;
            (attr.handle_id.as_deref() == Some(handle)).then_some(o as u32)
        })
        .collect()
}

/// Release the ordinals `which` picks; they go to the end of the free list
/// with the release time. Attributes no longer referenced are dropped.
/// Returns the released ordinals.
pub fn release_where(
    block: &mut IpamBlockSpec,
    now: i64,
    mut which: impl FnMut(u32, &AllocationAttributes) -> bool,
) -> Vec<u32> {
    let mut released = Vec::new();
    for (o, slot) in block.allocations.iter_mut().enumerate() {
        let Some(a) = *slot else { continue };
        let attr = block
            .attributes
            .get(a as usize)
            .cloned()
            .unwrap_or_default();
        if which(o as u32, &attr) {
            *slot = None;
            released.push(o as u32);
        }
    }
    for &o in &released {
        block.unallocated.retain(|&u| u != o);
        block.unallocated.push(o);
        block.released.retain(|r| r.ordinal != o);
        block.released.push(ReleasedAddress {
            ordinal: o,
            at: now,
        });
    }
    if !released.is_empty() {
        compact_attributes(block);
    }
    released
}

/// Release everything `handle` holds.
pub fn release_handle(block: &mut IpamBlockSpec, handle: &str, now: i64) -> Vec<u32> {
    release_where(block, now, |_, a| a.handle_id.as_deref() == Some(handle))
}

/// Drop attributes no allocation points at and renumber the rest.
fn compact_attributes(block: &mut IpamBlockSpec) {
    let mut used = vec![false; block.attributes.len()];
    for a in block.allocations.iter().flatten() {
        if let Some(u) = used.get_mut(*a as usize) {
            *u = true;
        }
    }
    let mut new_index = Vec::with_capacity(used.len());
    let mut next = 0u32;
    for &u in &used {
        new_index.push(next);
        if u {
            next += 1;
        }
    }
    for a in block.allocations.iter_mut().flatten() {
        if let Some(&n) = new_index.get(*a as usize) {
            *a = n;
        }
    }
    let mut i = 0;
    block.attributes.retain(|_| {
        let keep = used.get(i).copied().unwrap_or(false);
        i += 1;
        keep
    });
}

/// Addresses in use in `block`.
pub fn in_use(block: &IpamBlockSpec) -> usize {
    block.allocations.iter().filter(|a| a.is_some()).count()
}

/// The handles holding addresses in `block`, each with its addresses.
pub fn holders(block: &IpamBlockSpec, net: &IpNet) -> BTreeMap<String, Vec<IpAddr>> {
    let mut out: BTreeMap<String, Vec<IpAddr>> = BTreeMap::new();
    for (o, a) in block.allocations.iter().enumerate() {
        let Some(a) = a else { continue };
        let handle = block
            .attributes
            .get(*a as usize)
            .and_then(|x| x.handle_id.clone())
            .unwrap_or_default();
        if let Some(addr) = address_at(net, o as u32) {
            out.entry(handle).or_default().push(addr);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn net(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    fn ex(reserved: &[IpNet]) -> Exclusions<'_> {
        Exclusions {
            reserved,
            now: 1000,
            cooldown: 10,
        }
    }

    #[test]
    fn addresses_and_ordinals() {
        let n = net("10.0.0.64/26");
        assert_eq!(address_at(&n, 0), Some("10.0.0.64".parse().unwrap()));
        assert_eq!(address_at(&n, 63), Some("10.0.0.127".parse().unwrap()));
        assert_eq!(address_at(&n, 64), None);
        assert_eq!(ordinal_of(&n, "10.0.0.70".parse().unwrap()), Some(6));
        assert_eq!(ordinal_of(&n, "10.0.0.128".parse().unwrap()), None);
        let n6 = net("fd00::40/122");
        assert_eq!(address_at(&n6, 1), Some("fd00::41".parse().unwrap()));
        assert_eq!(ordinal_of(&n6, "fd00::7f".parse().unwrap()), Some(63));
        assert_eq!(ordinal_of(&n6, "10.0.0.1".parse().unwrap()), None);
    }

    #[test]
    fn picks_lowest_free_skipping_reserved() {
        let n = net("10.0.0.0/29");
        let mut b = IpamBlockSpec::empty(&n);
        let reserved = [net("10.0.0.0/32"), net("10.0.0.2/31")];
        let e = ex(&reserved);
        assert_eq!(pick(&b, &n, &e), Ok(1));
        assign(&mut b, 1, "h1", &BTreeMap::new());
        assert_eq!(pick(&b, &n, &e), Ok(4));
        assert!(b.check().is_empty(), "{:?}", b.check());
    }

    #[test]
    fn released_addresses_cool_down_then_come_last() {
        let n = net("10.0.0.0/30");
        let mut b = IpamBlockSpec::empty(&n);
        let e = ex(&[]);
        for (o, h) in [(0, "a"), (1, "b"), (2, "c"), (3, "d")] {
            assert_eq!(pick(&b, &n, &e), Ok(o));
            assign(&mut b, o, h, &BTreeMap::new());
        }
        assert_eq!(release_handle(&mut b, "b", 995), vec![1]);
        // Released 5 s ago with a 10 s cool-down: not yet.
        assert_eq!(
            pick(&b, &n, &e),
            Err(Shortage {
                cooling: 1,
                next_free_in: Some(5)
            })
        );
        let later = Exclusions {
            now: 1005,
            ..ex(&[])
        };
        assert_eq!(pick(&b, &n, &later), Ok(1));
        assign(&mut b, 1, "e", &BTreeMap::new());
        assert!(b.released.is_empty());
        assert!(b.check().is_empty(), "{:?}", b.check());
    }

    #[test]
    fn release_compacts_attributes() {
        let n = net("10.0.0.0/29");
        let mut b = IpamBlockSpec::empty(&n);
        let e = ex(&[]);
        for h in ["a", "b", "c"] {
            let o = pick(&b, &n, &e).unwrap();
            assign(&mut b, o, h, &BTreeMap::new());
        }
        release_handle(&mut b, "a", 0);
        assert_eq!(b.attributes.len(), 2);
        assert_eq!(held_by(&b, "b"), vec![1]);
        assert_eq!(held_by(&b, "c"), vec![2]);
        assert!(b.check().is_empty(), "{:?}", b.check());
        assert_eq!(in_use(&b), 2);
    }

    proptest! {
        /// Any sequence of assigns and releases keeps the block valid and
        /// never gives one address to two holders.
        #[test]
        fn never_twice(ops in proptest::collection::vec((0u8..6, any::<bool>()), 1..80)) {
            let n = net("10.1.0.0/29");
            let reserved = [net("10.1.0.0/32")];
            let mut b = IpamBlockSpec::empty(&n);
            let mut now = 0;
            for (h, add) in ops {
                now += 3;
                let handle = format!("h{h}");
                let e = Exclusions { reserved: &reserved, now, cooldown: 5 };
                if add {
                    if let Ok(o) = pick(&b, &n, &e) {
                        prop_assert!(b.allocations[o as usize].is_none());
                        prop_assert!(o != 0, "reserved address handed out");
                        assign(&mut b, o, &handle, &BTreeMap::new());
                    }
                } else {
                    release_handle(&mut b, &handle, now);
                }
                prop_assert!(b.check().is_empty(), "{:?}", b.check());
                let free = b.unallocated.len();
                prop_assert_eq!(free + in_use(&b), 8);
            }
        }
    }
}
