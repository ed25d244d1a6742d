//! Which pools a node draws from, what in them is never handed out, and
//! the candidate blocks they hold. Pure.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use ipnet::IpNet;
use tartan_api::resources::{IpPool, IpReservation};
use tartan_api::selector::Selector;

use super::block;

/// An address family.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    V4,
    V6,
}

impl Family {
    pub fn of(net: &IpNet) -> Family {
        match net {
            IpNet::V4(_) => Family::V4,
            IpNet::V6(_) => Family::V6,
        }
    }

    pub fn of_addr(a: &IpAddr) -> Family {
        if a.is_ipv4() { Family::V4 } else { Family::V6 }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Family::V4 => "IPv4",
            Family::V6 => "IPv6",
        })
    }
}

/// A pool as IPAM uses it.
#[derive(Debug, Clone, PartialEq)]
pub struct Pool {
    pub name: String,
    pub net: IpNet,
    pub block_size: u8,
}

impl Pool {
    /// `name (cidr)`, for messages.
    pub fn describe(&self) -> String {
        format!("{} ({})", self.name, self.net)
    }
}

/// Why a pool was passed over, for the log.
#[derive(Debug, Clone, PartialEq)]
pub struct Skipped {
    pub pool: String,
    pub why: String,
}

/// Whether some pool selects nodes by label (then the node's labels must
/// be read).
pub fn any_node_selector(pools: &[IpPool]) -> bool {
    pools.iter().any(|p| {
        let s = p.spec.node_selector.trim();
        !(s.is_empty() || s == "all()")
    })
}

/// The pools of `family` this node may draw from: enabled, valid, matching
/// `wanted` (pool names or CIDRs; empty = every pool), and whose
/// `nodeSelector` selects the node's labels. A selector that does not parse
/// passes the pool over (and says why), never guesses.
pub fn eligible(
    pools: &[IpPool],
    family: Family,
    wanted: &[String],
    node_labels: &BTreeMap<String, String>,
) -> (Vec<Pool>, Vec<Skipped>) {
    let mut out = Vec::new();
    let mut skipped = Vec::new();
    for p in pools {
        let name = p.metadata.name.clone().unwrap_or_default();
        let Ok(net) = p.spec.network() else {
            skipped.push(Skipped {
                pool: name,
                why: format!("its cidr {:?} does not parse", p.spec.cidr),
            });
            continue;
        };
        if Family::of(&net) != family {
            continue;
        }
        if !wanted.is_empty()
            && !wanted
                .iter()
                .any(|w| *w == name || w.parse::<IpNet>().ok() == Some(net))
        {
            continue;
        }
        if p.spec.disabled {
            skipped.push(Skipped {
                pool: name,
                why: "it is disabled".into(),
            });
            continue;
        }
        match Selector::parse(&p.spec.node_selector) {
            Ok(sel) if sel.matches(node_labels) => {}
            Ok(_) => {
                skipped.push(Skipped {
                    pool: name,
                    why: format!(
                        "its nodeSelector {:?} does not select this node",
                        p.spec.node_selector
                    ),
                });
                continue;
            }
            Err(e) => {
                skipped.push(Skipped {
                    pool: name,
                    why: format!("its nodeSelector does not parse: {e}"),
                });
                continue;
            }
        }
        let Some(block_size) = p.spec.effective_block_size() else {
            continue;
        };
        if block_size < net.prefix_len() || block_size > net.max_prefix_len() {
            skipped.push(Skipped {
                pool: name,
                why: format!("blockSize {block_size} does not fit {net}"),
            });
            continue;
        }
        out.push(Pool {
            name,
            net,
            block_size,
        });
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    (out, skipped)
}

/// Addresses never handed out from `pool`: the reservations that overlap
/// it, and its first and last address (network- and broadcast-like),
/// where it has more than two: a pool of one address (an IPv4 /32, an
/// IPv6 /128) or two (a /31 or /127, point-to-point as in RFC 3021) has
/// neither, and gives every address it has.
pub fn reserved_in(pool: &Pool, reservations: &[IpReservation]) -> Vec<IpNet> {
    let mut out: Vec<IpNet> = reservations
        .iter()
        .flat_map(|r| r.spec.networks())
        .filter(|r| pool.net.contains(r) || r.contains(&pool.net))
        .collect();
    if pool.net.max_prefix_len() - pool.net.prefix_len() >= 2 {
        let host = |a: IpAddr| IpNet::from(a);
        out.push(host(pool.net.network()));
        out.push(host(pool.net.broadcast()));
    }
    out
}

/// The networks of the blocks that exist, of every pool and size.
#[derive(Debug, Default)]
pub struct Taken(BTreeSet<IpNet>);

impl FromIterator<IpNet> for Taken {
    fn from_iter<I: IntoIterator<Item = IpNet>>(nets: I) -> Taken {
        Taken(nets.into_iter().map(|n| n.trunc()).collect())
    }
}

impl Taken {
    /// Whether `net` shares an address with a block that exists: the same
    /// block, one inside it, or one around it. Pools that overlap (written
    /// past tartanctl's check) have blocks of other sizes over the same
    /// addresses, and a block claimed over them would hand out an address
    /// twice.
    pub fn overlaps(&self, net: &IpNet) -> bool {
        let net = net.trunc();
        let first = IpNet::new(net.network(), 0).unwrap_or(net);
        let last = IpNet::new(net.broadcast(), net.max_prefix_len()).unwrap_or(net);
        // Blocks are kept in (address, length) order: any that starts
        // inside `net` is inside it.
        self.0.range(first..=last).next().is_some()
            || (0..net.prefix_len()).any(|len| {
                IpNet::new(net.network(), len).is_ok_and(|around| self.0.contains(&around.trunc()))
            })
    }
}

/// The pool's blocks that overlap none `taken`, lowest first, that hold
/// at least one address that is not reserved. Lazy: a large IPv6 pool
/// has more blocks than could ever be listed.
pub fn free_blocks<'a>(
    pool: &'a Pool,
    taken: &'a Taken,
    reserved: &'a [IpNet],
) -> impl Iterator<Item = IpNet> + 'a {
    pool.net
        .subnets(pool.block_size)
        .into_iter()
        .flatten()
        .filter(move |b| !taken.overlaps(b) && block::has_usable_address(b, reserved))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tartan_api::resources::{IpPoolSpec, IpReservationSpec};

    fn pool(name: &str, cidr: &str, f: impl FnOnce(&mut IpPoolSpec)) -> IpPool {
        let mut spec = IpPoolSpec::new(cidr);
        f(&mut spec);
        IpPool::new(name, spec)
    }

    #[test]
    fn eligibility() {
        let pools = [
            pool("b", "10.1.0.0/16", |_| {}),
            pool("a", "10.2.0.0/16", |s| s.block_size = Some(28)),
            pool("off", "10.3.0.0/16", |s| s.disabled = true),
            pool("sel", "10.4.0.0/16", |s| {
                s.node_selector = "zone == 'a'".into()
            }),
            pool("bad", "10.5.0.0/16", |s| {
                s.node_selector = "zone = 'a'".into()
            }),
            pool("v6", "fd00::/64", |_| {}),
        ];
        let none = BTreeMap::new();
        let (v4, skipped) = eligible(&pools, Family::V4, &[], &none);
        let names: Vec<_> = v4.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "b"]);
        assert_eq!(v4[0].block_size, 28);
        assert_eq!(v4[1].block_size, 26);
        assert_eq!(skipped.len(), 3);
        assert!(
            skipped[1].why.contains("does not select this node"),
            "{skipped:?}"
        );
        assert!(skipped[2].why.contains("does not parse"), "{skipped:?}");
        let zone_a = BTreeMap::from([("zone".to_string(), "a".to_string())]);
        let (v4, _) = eligible(&pools, Family::V4, &[], &zone_a);
        let names: Vec<_> = v4.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(names, ["a", "b", "sel"]);
        assert!(any_node_selector(&pools));
        assert!(!any_node_selector(&pools[..2]));
        let (v6, _) = eligible(&pools, Family::V6, &[], &none);
        assert_eq!(v6[0].block_size, 122);
        let (only, _) = eligible(&pools, Family::V4, &["10.1.0.0/16".into()], &none);
        assert_eq!(only.len(), 1);
        assert_eq!(only[0].name, "b");
    }

    #[test]
    fn edges_and_reservations_and_free_blocks() {
        let p = Pool {
            name: "p".into(),
            net: "10.0.0.0/29".parse().unwrap(),
            block_size: 31,
        };
        let r = IpReservation::new(
            "r",
            IpReservationSpec {
                reserved_cidrs: vec!["10.0.0.2/31".into(), "192.168.0.1".into()],
            },
        );
        let reserved = reserved_in(&p, &[r]);
        assert_eq!(reserved.len(), 3);
        let taken: Taken = ["10.0.0.4/31".parse().unwrap()].into_iter().collect();
        let free: Vec<String> = free_blocks(&p, &taken, &reserved)
            .map(|b| b.to_string())
            .collect();
        // .0/31 keeps .1; .2/31 is all reserved; .4/31 is taken; .6/31
        // keeps .6.
        assert_eq!(free, ["10.0.0.0/31", "10.0.0.6/31"]);
    }

    #[test]
    fn pools_of_one_or_two_addresses_keep_no_edges() {
        let p = |net: &str, block_size| Pool {
            name: "p".into(),
            net: net.parse().unwrap(),
            block_size,
        };
        for (net, block, blocks) in [
            ("10.245.0.0/32", 32, vec!["10.245.0.0/32"]),
            ("10.245.0.0/31", 32, vec!["10.245.0.0/32", "10.245.0.1/32"]),
            ("10.245.0.0/31", 31, vec!["10.245.0.0/31"]),
            ("fd00::5/128", 128, vec!["fd00::5/128"]),
        ] {
            let pool = p(net, block);
            let reserved = reserved_in(&pool, &[]);
            assert!(reserved.is_empty(), "{net}: {reserved:?}");
            let free: Vec<String> = free_blocks(&pool, &Taken::default(), &reserved)
                .map(|b| b.to_string())
                .collect();
            assert_eq!(free, blocks, "{net} in /{block}");
        }
        // From four addresses on, the first and last are kept.
        let four = p("10.245.0.0/30", 32);
        let reserved = reserved_in(&four, &[]);
        let free: Vec<String> = free_blocks(&four, &Taken::default(), &reserved)
            .map(|b| b.to_string())
            .collect();
        assert_eq!(free, ["10.245.0.1/32", "10.245.0.2/32"]);
    }
}
