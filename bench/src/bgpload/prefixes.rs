//! Which prefixes each injector announces, and their UPDATEs, encoded
//! before the clock starts.
use anyhow::{Result, bail};
use ipnet::{IpNet, Ipv4Net};
use std::net::Ipv4Addr;
use tartan_bgpd::model::{AsPath, AsSegment, Family, NextHop, Origin, PathAttrs};
use tartan_bgpd::wire::{EncodeOptions, encode_announce, encode_end_of_rib};

/// The first /24 handed out: 11.0.0.0 (10/8 holds the link addresses).
const FIRST: u32 = 11 << 24;
/// One past the last /24 usable: 100.0.0.0 (about 5.8 million /24s).
const END: u32 = 100 << 24;

/// Prefix j (0 ≤ j < peers × per_peer) is the /24 at FIRST + j·256;
/// injector i owns j in [i·per_peer, (i+1)·per_peer), so injectors never
/// overlap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PrefixPlan {
    pub peers: u32,
    pub per_peer: u32,
}

impl PrefixPlan {
    pub fn new(peers: u32, per_peer: u32) -> Result<PrefixPlan> {
        let total = u64::from(peers) * u64::from(per_peer);
        if total == 0 {
            bail!("need at least one peer and one prefix");
        }
        if total > u64::from((END - FIRST) >> 8) {
            bail!("{total} /24s do not fit between 11.0.0.0 and 100.0.0.0");
        }
        Ok(PrefixPlan { peers, per_peer })
    }

    pub fn total(&self) -> u64 {
        u64::from(self.peers) * u64::from(self.per_peer)
    }

    /// The index of a /24 given as its top three octets, if it is ours.
    pub fn index_of(&self, top24: u32) -> Option<u64> {
        let j = u64::from(top24).checked_sub(u64::from(FIRST >> 8))?;
        (j < self.total()).then_some(j)
    }

    /// The prefixes injector `i` announces.
    pub fn prefixes(&self, i: u32) -> Vec<IpNet> {
        let start = i * self.per_peer;
        (start..start + self.per_peer)
            .map(|j| {
                let a = Ipv4Addr::from(FIRST + (j << 8));
                IpNet::V4(Ipv4Net::new_assert(a, 24))
            })
            .collect()
    }
}

/// Every UPDATE injector `i` sends, `per_update` prefixes each (fewer if
/// they do not fit 4096 bytes), then End-of-RIB; all with ORIGIN IGP,
/// AS_PATH [asn], NEXT_HOP next_hop. Returns the bytes and the number of
/// UPDATEs carrying prefixes.
pub fn encode_updates(
    plan: &PrefixPlan,
    i: u32,
    asn: u32,
    next_hop: Ipv4Addr,
    per_update: usize,
) -> Result<(Vec<u8>, usize)> {
    let attrs = PathAttrs {
        origin: Origin::Igp,
        as_path: AsPath {
            segments: vec![AsSegment::Sequence(vec![asn])],
        },
        next_hop: NextHop::V4(next_hop),
        ..PathAttrs::default()
    };
    let prefixes = plan.prefixes(i);
    let mut out = Vec::with_capacity(prefixes.len() * 4 + prefixes.len() / 10 + 64);
    let opts = EncodeOptions::default();
    let mut messages = 0;
    for chunk in prefixes.chunks(per_update.max(1)) {
        let before = out.len();
        encode_announce(&attrs, Family::Ipv4Unicast, chunk, &opts, &mut out)?;
        messages += count_messages(&out[before..]);
    }
    encode_end_of_rib(Family::Ipv4Unicast, &mut out);
    Ok((out, messages))
}

/// Messages in a buffer of whole messages.
fn count_messages(mut buf: &[u8]) -> usize {
    let mut n = 0;
    while buf.len() >= 19 {
        let len = usize::from(u16::from_be_bytes([buf[16], buf[17]]));
        if len < 19 || len > buf.len() {
            break;
        }
        buf = &buf[len..];
        n += 1;
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn injectors_are_disjoint_and_indexed() {
        let p = PrefixPlan::new(3, 1000).unwrap();
        let a = p.prefixes(0);
        let c = p.prefixes(2);
        assert_eq!(a[0].to_string(), "11.0.0.0/24");
        assert_eq!(c[999].to_string(), "11.11.183.0/24");
        let top = |n: &IpNet| match n {
            IpNet::V4(v) => u32::from(v.addr()) >> 8,
            IpNet::V6(_) => 0,
        };
        assert_eq!(p.index_of(top(&c[999])), Some(2999));
        assert_eq!(p.index_of(top(&a[0]) - 1), None);
        assert_eq!(p.index_of(top(&c[999]) + 1), None);
    }

    #[test]
    fn too_many_prefixes_is_an_error() {
        assert!(PrefixPlan::new(100, 100_000).is_err());
        assert!(PrefixPlan::new(0, 1).is_err());
    }

    #[test]
    fn updates_pack_a_thousand() {
        let p = PrefixPlan::new(1, 2500).unwrap();
        let (buf, n) = encode_updates(&p, 0, 65001, Ipv4Addr::new(10, 1, 0, 2), 1000).unwrap();
        assert_eq!(n, 3);
        assert_eq!(count_messages(&buf), 4, "three UPDATEs and End-of-RIB");
    }
}
