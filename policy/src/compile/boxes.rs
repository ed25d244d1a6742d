//! Address intervals, and the union of many (addresses × second field)
//! boxes cut into disjoint boxes: the elements of an interval set that
//! stands for a run of rules. Pure.
//!
//! The kernel's set for concatenated intervals refuses an element whose
//! first or last point lies in another element, so the union of rules
//! must be written as boxes that do not overlap at all.

use std::net::IpAddr;

/// Sorted, disjoint, non-adjacent inclusive ranges of addresses of one
/// family, as numbers (IPv4 in the low 32 bits).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Intervals(Vec<(u128, u128)>);

pub fn addr_number(a: IpAddr) -> u128 {
    match a {
        IpAddr::V4(a) => u128::from(u32::from(a)),
        IpAddr::V6(a) => u128::from(a),
    }
}

pub fn number_addr(n: u128, v6: bool) -> IpAddr {
    if v6 {
        IpAddr::V6(n.into())
    } else {
        // Only IPv4 numbers are ever made for an IPv4 family.
        IpAddr::V4(u32::try_from(n).unwrap_or(u32::MAX).into())
    }
}

fn top(v6: bool) -> u128 {
    if v6 { u128::MAX } else { u128::from(u32::MAX) }
}

impl Intervals {
    pub fn all(v6: bool) -> Intervals {
        Intervals(vec![(0, top(v6))])
    }

    pub fn ranges(&self) -> &[(u128, u128)] {
        &self.0
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// Any ranges, in any order, overlapping or not.
    pub fn from_ranges(mut r: Vec<(u128, u128)>) -> Intervals {
        r.retain(|(a, b)| a <= b);
        r.sort_unstable();
        let mut out: Vec<(u128, u128)> = Vec::with_capacity(r.len());
        for (a, b) in r {
            match out.last_mut() {
                Some(last) if a <= last.1.saturating_add(1) => last.1 = last.1.max(b),
                _ => out.push((a, b)),
            }
        }
        Intervals(out)
    }

    pub fn from_points(points: impl IntoIterator<Item = u128>) -> Intervals {
        Intervals::from_ranges(points.into_iter().map(|p| (p, p)).collect())
    }

    pub fn union(&self, other: &Intervals) -> Intervals {
        let mut r = self.0.clone();
        r.extend_from_slice(&other.0);
        Intervals::from_ranges(r)
    }

    pub fn intersect(&self, other: &Intervals) -> Intervals {
        let (mut i, mut j) = (0, 0);
        let mut out = Vec::new();
        while i < self.0.len() && j < other.0.len() {
            let (a, b) = self.0[i];
            let (c, d) = other.0[j];
            let (lo, hi) = (a.max(c), b.min(d));
            if lo <= hi {
                out.push((lo, hi));
            }
            if b < d {
                i += 1;
            } else {
                j += 1;
            }
        }
        Intervals(out)
    }

    /// `self` without `other`.
    pub fn subtract(&self, other: &Intervals) -> Intervals {
        let mut out = Vec::new();
        let mut j = 0;
        for &(a, b) in &self.0 {
            let mut lo = a;
            while j < other.0.len() && other.0[j].1 < lo {
                j += 1;
            }
            let mut k = j;
            let mut open = true;
            while k < other.0.len() && other.0[k].0 <= b {
                let (c, d) = other.0[k];
                if c > lo {
                    out.push((lo, c - 1));
                }
                if d >= b {
                    open = false;
                    break;
                }
                lo = d + 1;
                k += 1;
            }
            if open {
                out.push((lo, b));
            }
        }
        Intervals(out)
    }

    pub fn contains(&self, n: u128) -> bool {
        self.0.iter().any(|&(a, b)| a <= n && n <= b)
    }
}

/// An address network as an inclusive range.
pub fn net_range(n: &ipnet::IpNet) -> (u128, u128) {
    (addr_number(n.network()), addr_number(n.broadcast()))
}

/// One disjoint box: an address range and a range of the second field.
pub type Piece = ((u128, u128), (u32, u32));

/// The union of `entries` (each: addresses × ranges of a second field) as
/// disjoint boxes. No second-field range of the result crosses a
/// multiple of `2^split_bits` (so a range over `proto << 16 | port` never
/// spans two protocols); neighbouring second-field ranges with the same
/// addresses are joined otherwise, to keep the set small.
pub fn disjoint(entries: &[(Intervals, Vec<(u32, u32)>)], split_bits: u32) -> Vec<Piece> {
    let mut bounds: Vec<u64> = Vec::new();
    for (_, ranges) in entries {
        for &(a, b) in ranges {
            if a <= b {
                bounds.push(u64::from(a));
                bounds.push(u64::from(b) + 1);
            }
        }
    }
    bounds.sort_unstable();
    bounds.dedup();
    // Each elementary segment [bounds[i], bounds[i+1]) with the addresses
    // of every entry whose ranges cover it.
    let mut segments: Vec<((u32, u32), Intervals)> = Vec::new();
    for w in bounds.windows(2) {
        let (lo, hi) = (w[0], w[1] - 1);
        let mut addrs = Intervals::default();
        for (a, ranges) in entries {
            if ranges
                .iter()
                .any(|&(x, y)| u64::from(x) <= lo && hi <= u64::from(y))
            {
                addrs = addrs.union(a);
            }
        }
        if addrs.is_empty() {
            continue;
        }
        // Bounds come from u32 values and their successors: `lo` and
        // `hi` fit.
        let (lo, hi) = (lo as u32, hi as u32);
        match segments.last_mut() {
            Some(((_, last_hi), last))
                if *last == addrs
                    && u64::from(*last_hi) + 1 == u64::from(lo)
                    && (*last_hi >> split_bits) == (lo >> split_bits) =>
            {
                *last_hi = hi;
            }
            _ => segments.push(((lo, hi), addrs)),
        }
    }
    let mut out = Vec::new();
    for (seg, addrs) in segments {
        for &r in addrs.ranges() {
            out.push((r, seg));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn iv(r: &[(u128, u128)]) -> Intervals {
        Intervals::from_ranges(r.to_vec())
    }

    #[test]
    fn set_operations_on_intervals() {
        let a = iv(&[(0, 9), (20, 29)]);
        let b = iv(&[(5, 24)]);
        assert_eq!(a.union(&b), iv(&[(0, 29)]));
        assert_eq!(a.intersect(&b).ranges(), &[(5, 9), (20, 24)]);
        assert_eq!(a.subtract(&b).ranges(), &[(0, 4), (25, 29)]);
        assert_eq!(b.subtract(&a).ranges(), &[(10, 19)]);
        assert_eq!(
            Intervals::all(false)
                .subtract(&iv(&[(0, 0), (u128::from(u32::MAX), u128::from(u32::MAX))]))
                .ranges(),
            &[(1, u128::from(u32::MAX) - 1)]
        );
        // Adjacent ranges join.
        assert_eq!(iv(&[(0, 4), (5, 9)]).ranges(), &[(0, 9)]);
        assert_eq!(Intervals::all(true).ranges(), &[(0, u128::MAX)]);
    }

    #[test]
    fn ports_of_two_protocols_do_not_share_a_box() {
        let tcp_all = (6 << 16, (6 << 16) | 0xffff);
        let udp_all = (7 << 16, (7 << 16) | 0xffff);
        let a = iv(&[(1, 1)]);
        let got = disjoint(&[(a.clone(), vec![tcp_all]), (a, vec![udp_all])], 16);
        assert_eq!(got, [((1, 1), tcp_all), ((1, 1), udp_all)]);
    }

    fn small_intervals() -> impl Strategy<Value = Intervals> {
        prop::collection::vec((0u128..64, 0u128..8), 0..4)
            .prop_map(|v| Intervals::from_ranges(v.into_iter().map(|(a, l)| (a, a + l)).collect()))
    }

    proptest! {
        #[test]
        fn interval_operations_agree_with_point_sets(a in small_intervals(), b in small_intervals()) {
            for n in 0u128..80 {
                prop_assert_eq!(a.union(&b).contains(n), a.contains(n) || b.contains(n));
                prop_assert_eq!(a.intersect(&b).contains(n), a.contains(n) && b.contains(n));
                prop_assert_eq!(a.subtract(&b).contains(n), a.contains(n) && !b.contains(n));
            }
        }

        /// The boxes cover exactly the union of the entries, and no two
        /// share a point.
        #[test]
        fn disjoint_boxes_cover_the_union_exactly(
            entries in prop::collection::vec(
                (small_intervals(), prop::collection::vec((0u32..40, 0u32..10), 1..3)),
                0..6,
            )
        ) {
            let entries: Vec<(Intervals, Vec<(u32, u32)>)> = entries
                .into_iter()
                // Input ranges stay within a split block, as protocol
                // and port ranges do.
                .map(|(a, r)| (a, r.into_iter().map(|(x, l)| (x, (x + l).min(x | 7))).collect()))
                .collect();
            let boxes = disjoint(&entries, 3);
            for n in 0u128..80 {
                for p in 0u32..55 {
                    let want = entries
                        .iter()
                        .any(|(a, r)| a.contains(n) && r.iter().any(|&(x, y)| x <= p && p <= y));
                    let hits = boxes
                        .iter()
                        .filter(|((a, b), (x, y))| *a <= n && n <= *b && *x <= p && p <= *y)
                        .count();
                    prop_assert_eq!(hits, usize::from(want), "at ({}, {})", n, p);
                }
            }
            for (_, (x, y)) in &boxes {
                prop_assert_eq!(x >> 3, y >> 3, "a box crosses a split");
            }
        }
    }
}
