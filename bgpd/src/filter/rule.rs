//! Import and export rules as the speaker applies them: a route's prefix,
//! its length and where it came from decide which rule matches; the first
//! match decides Accept or Reject and may change the route's communities
//! and (on export) its AS path. Pure: no I/O.

use ipnet::IpNet;

use crate::model::{Family, PathAttrs};

/// How a rule's network is compared with a route's prefix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchOp {
    /// The very prefix.
    Equal,
    NotEqual,
    /// The prefix lies within the network (the network itself included).
    In,
    NotIn,
}

/// One rule: every condition given must hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rule {
    pub network: Option<(IpNet, MatchOp)>,
    /// Prefix lengths matched, bounds included. With `In` and `NotIn` they
    /// belong to the network's pattern: `In` matches a prefix within the
    /// network and of such a length, `NotIn` any other prefix (Calico's
    /// meaning); otherwise they are one more condition.
    pub lengths: Option<(u8, u8)>,
    /// Only routes learned from a peer (not this speaker's own).
    pub remote_only: bool,
    pub accept: bool,
    pub add_communities: Vec<u32>,
    pub remove_communities: Vec<u32>,
    pub add_large_communities: Vec<[u32; 3]>,
    pub remove_large_communities: Vec<[u32; 3]>,
    /// Prepended to the AS path on export, first element outermost.
    pub prepend: Vec<u32>,
}

impl Rule {
    /// A rule that accepts or rejects everything and changes nothing.
    pub fn all(accept: bool) -> Rule {
        Rule {
            network: None,
            lengths: None,
            remote_only: false,
            accept,
            add_communities: vec![],
            remove_communities: vec![],
            add_large_communities: vec![],
            remove_large_communities: vec![],
            prepend: vec![],
        }
    }

    pub fn matches(&self, prefix: &IpNet, remote: bool) -> bool {
        if self.remote_only && !remote {
            return false;
        }
        let length_ok = self
            .lengths
            .is_none_or(|(lo, hi)| (lo..=hi).contains(&prefix.prefix_len()));
        match self.network {
            None => length_ok,
            Some((net, op)) => {
                // As Calico (BIRD's `net ~ [cidr{min,max}]`): the lengths are
                // part of the In pattern, and NotIn negates the whole of it.
                let in_pattern = net.contains(prefix) && length_ok;
                match op {
                    MatchOp::Equal => *prefix == net && length_ok,
                    MatchOp::NotEqual => *prefix != net && length_ok,
                    MatchOp::In => in_pattern,
                    MatchOp::NotIn => !in_pattern,
                }
            }
        }
    }

    /// Whether accepting with this rule changes the route's attributes.
    pub fn changes_attributes(&self) -> bool {
        !(self.add_communities.is_empty()
            && self.remove_communities.is_empty()
            && self.add_large_communities.is_empty()
            && self.remove_large_communities.is_empty()
            && self.prepend.is_empty())
    }

    /// The rule's changes applied to `attrs`: communities removed, then
    /// added (no duplicates); the AS path prepended.
    pub fn apply(&self, attrs: &mut PathAttrs) {
        attrs
            .communities
            .retain(|c| !self.remove_communities.contains(c));
        for c in &self.add_communities {
            if !attrs.communities.contains(c) {
                attrs.communities.push(*c);
            }
        }
        attrs
            .large_communities
            .retain(|c| !self.remove_large_communities.contains(c));
        for c in &self.add_large_communities {
            if !attrs.large_communities.contains(c) {
                attrs.large_communities.push(*c);
            }
        }
        for asn in self.prepend.iter().rev() {
            attrs.as_path = attrs.as_path.prepended(*asn);
        }
    }
}

/// What the rules make of a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    Reject,
    /// Accepted; `Some(i)`: rule `i` matched and changes the attributes.
    Accept(Option<u32>),
}

/// The rules of one direction of a session, per family, in the order they
/// are tried (the rules of its filters one after another).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RuleList {
    pub v4: Vec<Rule>,
    pub v6: Vec<Rule>,
}

impl RuleList {
    pub fn is_empty(&self) -> bool {
        self.v4.is_empty() && self.v6.is_empty()
    }

    pub fn of(&self, family: Family) -> &[Rule] {
        match family {
            Family::Ipv4Unicast => &self.v4,
            Family::Ipv6Unicast => &self.v6,
        }
    }

    /// The first rule that matches decides; no match accepts unchanged.
    pub fn verdict(&self, prefix: &IpNet, remote: bool) -> Verdict {
        let family = match prefix {
            IpNet::V4(_) => Family::Ipv4Unicast,
            IpNet::V6(_) => Family::Ipv6Unicast,
        };
        let rules = self.of(family);
        match rules.iter().position(|r| r.matches(prefix, remote)) {
            None => Verdict::Accept(None),
            Some(i) if !rules[i].accept => Verdict::Reject,
            Some(i) if rules[i].changes_attributes() => Verdict::Accept(Some(i as u32)),
            Some(_) => Verdict::Accept(None),
        }
    }

    pub fn rule(&self, family: Family, i: u32) -> Option<&Rule> {
        self.of(family).get(i as usize)
    }
}

/// A session's import and export rules.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PeerFilters {
    pub import: RuleList,
    pub export: RuleList,
}

impl PeerFilters {
    pub fn is_empty(&self) -> bool {
        self.import.is_empty() && self.export.is_empty()
    }
}
