//! BGPFilter objects as rules: a BGPPeer's `filters`, in order, become one
//! rule list per direction and family.

use std::collections::BTreeMap;

use ipnet::IpNet;
use tartan_api::resources::bgpfilter::{
    BgpFilterRule, BgpFilterSpec, FilterAction, MatchOperator, RouteSource,
};
use tartan_api::resources::community::Community;

use super::rule::{MatchOp, PeerFilters, Rule};

/// The rules of the filters `names` (in that order) from `filters` by
/// name. A filter that is missing or does not read is an error: the
/// session it would govern must not run unfiltered.
pub fn peer_filters(
    names: &[String],
    filters: &BTreeMap<String, BgpFilterSpec>,
) -> Result<PeerFilters, String> {
    let mut out = PeerFilters::default();
    for name in names {
        let f = filters
            .get(name)
            .ok_or_else(|| format!("BGPFilter {name} not found"))?;
        let lists = [
            (&f.import_v4, &mut out.import.v4, false, false),
            (&f.import_v6, &mut out.import.v6, true, false),
            (&f.export_v4, &mut out.export.v4, false, true),
            (&f.export_v6, &mut out.export.v6, true, true),
        ];
        for (rules, into, v6, export) in lists {
            for (i, r) in rules.iter().enumerate() {
                into.push(
                    rule(r, v6, export).map_err(|e| format!("BGPFilter {name} rule {i}: {e}"))?,
                );
            }
        }
    }
    Ok(out)
}

fn rule(r: &BgpFilterRule, v6: bool, export: bool) -> Result<Rule, String> {
    // Without its interface condition the rule would match every route.
    if let Some(i) = &r.interface {
        return Err(format!(
            "interface {i:?}: Tartan does not match routes by interface"
        ));
    }
    let max_len = if v6 { 128 } else { 32 };
    let network = match (&r.cidr, r.match_operator) {
        (None, None) => None,
        (Some(c), Some(op)) => {
            let net: IpNet = c
                .trim()
                .parse()
                .map_err(|_| format!("cidr {c:?} is not a network"))?;
            if net.max_prefix_len() != max_len {
                return Err(format!("cidr {c:?} is of the other address family"));
            }
            let op = match op {
                MatchOperator::Equal => MatchOp::Equal,
                MatchOperator::NotEqual => MatchOp::NotEqual,
                MatchOperator::In => MatchOp::In,
                MatchOperator::NotIn => MatchOp::NotIn,
            };
            Some((net.trunc(), op))
        }
        (Some(_), None) => return Err("cidr without matchOperator".into()),
        (None, Some(_)) => return Err("matchOperator without cidr".into()),
    };
    // As Calico: a min shorter than the cidr is the cidr's length.
    // Without a cidr (refused when written now, but stored before that),
    // the lengths alone, as they were read then.
    let lengths = match (&r.prefix_length, network) {
        (None, _) => None,
        (Some(pl), None) => Some((pl.min.unwrap_or(0), pl.max.unwrap_or(max_len))),
        (Some(pl), Some((n, _))) => Some((
            pl.min.unwrap_or(0).max(n.prefix_len()),
            pl.max.unwrap_or(max_len),
        )),
    };
    if let Some((lo, hi)) = lengths
        && (lo > hi || hi > max_len)
    {
        return Err(format!(
            "prefixLength {lo}-{hi} is not a range of 0 to {max_len}"
        ));
    }
    let mut out = Rule::all(r.action == FilterAction::Accept);
    out.network = network;
    out.lengths = lengths;
    out.remote_only = r.source == Some(RouteSource::RemotePeers);
    if let Some(c) = &r.communities {
        for (vals, std, large) in [
            (
                &c.add,
                &mut out.add_communities,
                &mut out.add_large_communities,
            ),
            (
                &c.remove,
                &mut out.remove_communities,
                &mut out.remove_large_communities,
            ),
        ] {
            for v in vals {
                match v.parse::<Community>()? {
                    Community::Standard(s) => std.push(s),
                    Community::Large(a, b, c) => large.push([a, b, c]),
                }
            }
        }
    }
    if !r.as_path_prepend.is_empty() && !export {
        return Err("asPathPrepend in an import list".into());
    }
    out.prepend = r.as_path_prepend.clone();
    Ok(out)
}
