//! Conversions from the RIB's model types to the API's views, for the
//! daemon's [`super::ControlSource`] implementation.
use crate::model::{Origin, PathAttrs};
use std::net::IpAddr;
use tartan_api::bgp::{PathView, format_community, format_large_community};

/// How the decision process marked a path.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PathFlags {
    pub best: bool,
    pub multipath: bool,
    pub stale: bool,
}

pub fn origin_name(origin: Origin) -> &'static str {
    match origin {
        Origin::Igp => "igp",
        Origin::Egp => "egp",
        Origin::Incomplete => "incomplete",
    }
}

/// The API view of one path learned from `peer` (`None` = local).
pub fn path_view(attrs: &PathAttrs, peer: Option<IpAddr>, flags: PathFlags) -> PathView {
    PathView {
        best: flags.best,
        multipath: flags.multipath,
        stale: flags.stale,
        peer,
        next_hop: attrs.next_hop.addr(),
        as_path: attrs.as_path.to_string(),
        origin: origin_name(attrs.origin).to_string(),
        med: attrs.med,
        local_pref: attrs.local_pref,
        communities: attrs
            .communities
            .iter()
            .map(|&c| format_community(c))
            .collect(),
        large_communities: attrs
            .large_communities
            .iter()
            .map(|&c| format_large_community(c))
            .collect(),
        originator_id: attrs.originator_id,
        cluster_list: attrs.cluster_list.clone(),
    }
}
