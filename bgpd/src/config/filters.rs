//! `[[filter]]` tables of the TOML file and the neighbors' `import_filters`
//! and `export_filters`: named lists of rules, as BGPFilter objects are in
//! the datastore.

use std::collections::HashMap;
use std::net::IpAddr;

use ipnet::IpNet;
use serde::Deserialize;
use tartan_api::resources::common::check_as_number;
use toml::Spanned;
use tracing::warn;

use crate::filter::{MatchOp, PeerFilters, Rule, RuleList};
use crate::model::community::{parse_community, parse_large_community};

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFilter {
    name: Spanned<String>,
    #[serde(default)]
    rule: Vec<RawRule>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawRule {
    action: Spanned<String>,
    cidr: Option<Spanned<String>>,
    #[serde(rename = "match")]
    match_op: Option<Spanned<String>>,
    prefix_length: Option<Spanned<RawLengths>>,
    source: Option<Spanned<String>>,
    #[serde(default)]
    add_communities: Vec<Spanned<String>>,
    #[serde(default)]
    remove_communities: Vec<Spanned<String>>,
    #[serde(default)]
    as_path_prepend: Vec<Spanned<u32>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawLengths {
    min: Option<u8>,
    max: Option<u8>,
}

/// A problem at a byte offset of the file.
pub(super) type Problem = (usize, String);

/// One filter as read: its rules per family, and where it said to prepend
/// (not allowed in import lists).
pub(super) struct Filter {
    rules: RuleList,
    prepends: Option<usize>,
}

/// The file's filters by name.
pub(super) fn read(raw: Vec<RawFilter>) -> Result<HashMap<String, Filter>, Problem> {
    let mut out = HashMap::new();
    for f in raw {
        let at = f.name.span().start;
        let name = f.name.into_inner();
        let mut rules = RuleList::default();
        let mut prepends = None;
        for r in f.rule {
            if !r.as_path_prepend.is_empty() {
                prepends.get_or_insert(r.action.span().start);
            }
            let (rule, family) = rule(r).map_err(|(o, m)| (o, format!("filter {name}: {m}")))?;
            match family {
                Some(false) => rules.v4.push(rule),
                Some(true) => rules.v6.push(rule),
                None => {
                    rules.v4.push(rule.clone());
                    rules.v6.push(rule);
                }
            }
        }
        if out
            .insert(name.clone(), Filter { rules, prepends })
            .is_some()
        {
            return Err((at, format!("filter {name} is defined twice")));
        }
    }
    Ok(out)
}

/// A neighbor's rules from the filters it names, in order.
pub(super) fn for_neighbor(
    filters: &HashMap<String, Filter>,
    import: &[Spanned<String>],
    export: &[Spanned<String>],
) -> Result<PeerFilters, Problem> {
    let mut out = PeerFilters::default();
    for (names, list, is_import) in [
        (import, &mut out.import, true),
        (export, &mut out.export, false),
    ] {
        for n in names {
            let f = filters
                .get(n.get_ref())
                .ok_or_else(|| (n.span().start, format!("no filter named {:?}", n.get_ref())))?;
            if is_import && let Some(at) = f.prepends {
                return Err((
                    at,
                    format!(
                        "filter {} prepends to the AS path, which only export filters can do",
                        n.get_ref()
                    ),
                ));
            }
            list.v4.extend(f.rules.v4.iter().cloned());
            list.v6.extend(f.rules.v6.iter().cloned());
        }
    }
    Ok(out)
}

/// RFC 8212 on an eBGP neighbor: a direction with no filters named
/// rejects every route, and the log says so each time the file is read.
pub(super) fn require_policy(
    neighbor: IpAddr,
    out: &mut PeerFilters,
    no_import: bool,
    no_export: bool,
) {
    for (missing, list, name, what) in [
        (
            no_import,
            &mut out.import,
            "import",
            "accepts no routes from it",
        ),
        (no_export, &mut out.export, "export", "sends it no routes"),
    ] {
        if missing {
            *list = RuleList {
                v4: vec![Rule::all(false)],
                v6: vec![Rule::all(false)],
            };
            warn!(
                %neighbor,
                "eBGP neighbor without {name} filters: the speaker {what} (RFC 8212); name {name}_filters, or set ebgp_requires_policy = false"
            );
        }
    }
}

/// A rule, and its family (None: both) from its cidr.
fn rule(r: RawRule) -> Result<(Rule, Option<bool>), Problem> {
    let accept = match r.action.get_ref().as_str() {
        "accept" => true,
        "reject" => false,
        other => {
            return Err((
                r.action.span().start,
                format!("action {other:?} is not \"accept\" or \"reject\""),
            ));
        }
    };
    let mut out = Rule::all(accept);
    let network = match (&r.cidr, &r.match_op) {
        (None, None) => None,
        (Some(c), Some(m)) => {
            let net: IpNet = c.get_ref().parse().map_err(|_| {
                (
                    c.span().start,
                    format!("cidr {:?} is not a network", c.get_ref()),
                )
            })?;
            if net.trunc() != net {
                return Err((
                    c.span().start,
                    format!(
                        "cidr {:?} has host bits set; the network is {}",
                        c.get_ref(),
                        net.trunc()
                    ),
                ));
            }
            let op = match m.get_ref().as_str() {
                "equal" => MatchOp::Equal,
                "not-equal" => MatchOp::NotEqual,
                "in" => MatchOp::In,
                "not-in" => MatchOp::NotIn,
                other => {
                    return Err((
                        m.span().start,
                        format!(
                            "match {other:?} is not one of \"equal\", \"not-equal\", \"in\", \"not-in\""
                        ),
                    ));
                }
            };
            Some((net, op))
        }
        (Some(c), None) => {
            return Err((c.span().start, "a rule with cidr needs match".into()));
        }
        (None, Some(m)) => {
            return Err((m.span().start, "match without cidr".into()));
        }
    };
    let family = network.map(|(n, _)| matches!(n, IpNet::V6(_)));
    let family_max = match family {
        Some(false) => 32,
        _ => 128,
    };
    if let Some(pl) = &r.prefix_length {
        let lo = pl
            .get_ref()
            .min
            .unwrap_or_else(|| network.map_or(0, |(n, _)| n.prefix_len()));
        let hi = pl.get_ref().max.unwrap_or(family_max);
        if lo > hi || hi > family_max {
            return Err((
                pl.span().start,
                format!("prefix_length {lo}-{hi} is not a range within 0-{family_max}"),
            ));
        }
        if let Some((n, _)) = network
            && lo < n.prefix_len()
        {
            return Err((
                pl.span().start,
                format!(
                    "prefix_length min {lo} is shorter than the cidr's /{}",
                    n.prefix_len()
                ),
            ));
        }
        out.lengths = Some((lo, hi));
    }
    out.network = network;
    out.remote_only = match r
        .source
        .as_ref()
        .map(|s| (s.span().start, s.get_ref().as_str()))
    {
        None => false,
        Some((_, "remote-peers")) => true,
        Some((at, other)) => {
            return Err((at, format!("source {other:?} is not \"remote-peers\"")));
        }
    };
    let changes = !(r.add_communities.is_empty()
        && r.remove_communities.is_empty()
        && r.as_path_prepend.is_empty());
    if changes && !accept {
        return Err((
            r.action.span().start,
            "only an accept rule can change communities or the AS path".into(),
        ));
    }
    for (list, std, large) in [
        (
            &r.add_communities,
            &mut out.add_communities,
            &mut out.add_large_communities,
        ),
        (
            &r.remove_communities,
            &mut out.remove_communities,
            &mut out.remove_large_communities,
        ),
    ] {
        for c in list {
            let s = c.get_ref();
            if s.matches(':').count() == 2 {
                large.push(parse_large_community(s).map_err(|e| (c.span().start, e))?);
            } else {
                std.push(parse_community(s).map_err(|e| (c.span().start, e))?);
            }
        }
    }
    // The same check as BGPFilter's asPathPrepend: AS 0 must not be
    // originated (RFC 7607) and AS_TRANS stands for no real AS (RFC 6793).
    for asn in &r.as_path_prepend {
        check_as_number(*asn.get_ref())
            .map_err(|e| (asn.span().start, format!("as_path_prepend: {e}")))?;
    }
    out.prepend = r
        .as_path_prepend
        .into_iter()
        .map(Spanned::into_inner)
        .collect();
    Ok((out, family))
}
