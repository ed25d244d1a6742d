//! What this node originates from its configuration (`announce`): the
//! attributes of an announced prefix, and what a new configuration changes
//! (the reload diff the instance applies to the RIB).
use crate::config::Announce;
use crate::model::{NextHop, Origin, PathAttrs};
use ipnet::IpNet;
use std::collections::HashMap;

/// The attributes of a prefix this node announces.
pub(super) fn announce_attrs(a: &Announce) -> PathAttrs {
    PathAttrs {
        origin: Origin::Igp,
        next_hop: a.next_hop.map(NextHop::from_addr).unwrap_or_default(),
        communities: a.communities.clone(),
        large_communities: a.large_communities.clone(),
        ..Default::default()
    }
}

/// The announcements a new configuration changes, each by prefix.
#[derive(Debug, Default, PartialEq)]
pub(super) struct OriginDiff {
    /// No longer announced.
    pub removed: Vec<IpNet>,
    /// New, or announced with other attributes.
    pub changed: Vec<(IpNet, PathAttrs)>,
}

/// What changes from announcing `old` to announcing `new` (the last entry
/// for a prefix counts).
pub(super) fn origin_diff(old: &[Announce], new: &[Announce]) -> OriginDiff {
    let old_a: HashMap<_, _> = old.iter().map(|a| (a.prefix, a)).collect();
    let new_a: HashMap<_, _> = new.iter().map(|a| (a.prefix, a)).collect();
    let mut removed: Vec<IpNet> = old_a
        .keys()
        .filter(|p| !new_a.contains_key(p))
        .copied()
        .collect();
    let mut changed: Vec<(IpNet, PathAttrs)> = new_a
        .iter()
        .filter(|(p, a)| old_a.get(p) != Some(a))
        .map(|(p, a)| (*p, announce_attrs(a)))
        .collect();
    removed.sort();
    changed.sort_by_key(|(p, _)| *p);
    OriginDiff { removed, changed }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn announce(prefix: &str, communities: &[u32]) -> Announce {
        Announce {
            prefix: prefix.parse().unwrap(),
            communities: communities.to_vec(),
            large_communities: vec![],
            next_hop: None,
        }
    }

    #[test]
    fn an_announcement_is_igp_with_its_communities_and_next_hop() {
        let mut a = announce("10.1.0.0/16", &[65000 << 16 | 1]);
        a.next_hop = Some("192.0.2.1".parse().unwrap());
        let attrs = announce_attrs(&a);
        assert_eq!(attrs.origin, Origin::Igp);
        assert_eq!(attrs.communities, vec![65000 << 16 | 1]);
        assert_eq!(attrs.next_hop, NextHop::V4("192.0.2.1".parse().unwrap()));
        assert_eq!(
            announce_attrs(&announce("10.1.0.0/16", &[])).next_hop,
            NextHop::None
        );
    }

    #[test]
    fn the_diff_has_what_went_and_what_came_or_changed() {
        let old = [
            announce("10.1.0.0/16", &[]),
            announce("10.2.0.0/16", &[1]),
            announce("10.3.0.0/16", &[]),
        ];
        let new = [
            announce("10.1.0.0/16", &[]),
            announce("10.2.0.0/16", &[2]),
            announce("10.4.0.0/16", &[]),
        ];
        let d = origin_diff(&old, &new);
        assert_eq!(d.removed, vec!["10.3.0.0/16".parse::<IpNet>().unwrap()]);
        let changed: Vec<String> = d.changed.iter().map(|(p, _)| p.to_string()).collect();
        assert_eq!(changed, ["10.2.0.0/16", "10.4.0.0/16"]);
        assert_eq!(d.changed[0].1.communities, vec![2]);
        assert_eq!(origin_diff(&new, &new), OriginDiff::default());
    }
}
