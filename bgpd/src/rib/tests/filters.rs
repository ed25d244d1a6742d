//! Import and export rules in the RIB: what a peer's routes become on the
//! way in, what another peer is sent, and a change of rules taken over
//! without a reset.

use super::*;
use crate::filter::{MatchOp, PeerFilters, Rule, RuleList};

fn reject_in(cidr: &str, op: MatchOp) -> Rule {
    let mut r = Rule::all(false);
    r.network = Some((net(cidr), op));
    r
}

fn with(export: Vec<Rule>, import: Vec<Rule>) -> Arc<PeerFilters> {
    Arc::new(PeerFilters {
        import: RuleList {
            v4: import,
            v6: vec![],
        },
        export: RuleList {
            v4: export,
            v6: vec![],
        },
    })
}

fn filtered(cfg: PeerConfig, f: Arc<PeerFilters>) -> PeerConfig {
    PeerConfig { filters: f, ..cfg }
}

#[test]
fn rejected_imports_are_not_installed_and_replace_an_earlier_path() {
    let mut r = rib();
    let f = with(vec![], vec![reject_in("10.1.0.0/16", MatchOp::In)]);
    r.peer_up(filtered(ebgp(2), f));
    let a = attrs(&[65002], [10, 0, 0, 2]);
    let c = r
        .announce(2, a.clone(), &[net("10.1.1.0/24"), net("10.2.0.0/24")])
        .unwrap();
    let kernel: Vec<IpNet> = c.kernel.iter().map(|(p, _)| *p).collect();
    assert_eq!(kernel, vec![net("10.2.0.0/24")]);
    assert_eq!(best_peer(&r, "10.1.1.0/24"), None);
    assert_eq!(r.counts(2).filtered, 1);
    // Accepted first under no rules, then re-sent under a rejecting rule:
    // the earlier path goes.
    let mut r = rib();
    r.peer_up(ebgp(2));
    r.announce(2, a.clone(), &[net("10.1.1.0/24")]).unwrap();
    assert_eq!(best_peer(&r, "10.1.1.0/24"), Some(2));
    r.set_filters(
        2,
        with(vec![], vec![reject_in("10.1.1.0/24", MatchOp::Equal)]),
    );
    r.announce(2, a, &[net("10.1.1.0/24")]).unwrap();
    assert_eq!(best_peer(&r, "10.1.1.0/24"), None);
}

#[test]
fn import_rules_change_communities_per_matching_prefix() {
    let mut tag = Rule::all(true);
    tag.network = Some((net("10.1.0.0/16"), MatchOp::In));
    tag.add_communities = vec![(65000 << 16) | 1];
    let mut r = rib();
    r.peer_up(filtered(ebgp(2), with(vec![], vec![tag])));
    r.peer_up(ibgp(3));
    r.announce(
        2,
        attrs(&[65002], [10, 0, 0, 2]),
        &[net("10.1.1.0/24"), net("10.2.0.0/24")],
    )
    .unwrap();
    let sent = drained(&mut r, 3);
    assert_eq!(
        sent.0[&net("10.1.1.0/24")].communities,
        vec![(65000 << 16) | 1]
    );
    assert!(sent.0[&net("10.2.0.0/24")].communities.is_empty());
}

#[test]
fn export_rules_decide_per_prefix_and_prepend_before_our_as() {
    let mut prepend = Rule::all(true);
    prepend.network = Some((net("10.2.0.0/24"), MatchOp::Equal));
    prepend.prepend = vec![64999];
    prepend.remove_communities = vec![7];
    let f = with(vec![reject_in("10.1.0.0/16", MatchOp::In), prepend], vec![]);
    let mut r = rib();
    r.peer_up(ibgp(2));
    r.peer_up(filtered(ebgp(3), f));
    let mut a = attrs(&[], [10, 0, 0, 2]);
    a.communities = vec![7, 8];
    r.announce(
        2,
        a,
        &[net("10.1.1.0/24"), net("10.2.0.0/24"), net("10.3.0.0/24")],
    )
    .unwrap();
    let sent = drained(&mut r, 3);
    assert!(!sent.0.contains_key(&net("10.1.1.0/24")));
    let p = &sent.0[&net("10.2.0.0/24")];
    assert_eq!(
        p.as_path.segments,
        vec![AsSegment::Sequence(vec![OUR_AS, 64999])]
    );
    assert_eq!(p.communities, vec![8]);
    let q = &sent.0[&net("10.3.0.0/24")];
    assert_eq!(q.as_path.segments, vec![AsSegment::Sequence(vec![OUR_AS])]);
    assert_eq!(q.communities, vec![7, 8]);
}

#[test]
fn new_export_rules_withdraw_and_announce_without_a_reset() {
    let mut r = rib();
    r.peer_up(ibgp(2));
    r.peer_up(ebgp(3));
    r.announce(
        2,
        attrs(&[], [10, 0, 0, 2]),
        &[net("10.1.1.0/24"), net("10.2.0.0/24")],
    )
    .unwrap();
    let mut held = drained(&mut r, 3);
    assert_eq!(held.0.len(), 2);
    // Reject one: it is withdrawn.
    let c = r.set_filters(
        3,
        with(vec![reject_in("10.1.1.0/24", MatchOp::Equal)], vec![]),
    );
    assert_eq!(c.peers_with_output, vec![3]);
    held.drain(&mut r, 3, 100);
    let mut now: Vec<IpNet> = held.0.keys().copied().collect();
    now.sort();
    assert_eq!(now, vec![net("10.2.0.0/24")]);
    // A rule that now adds a community: the same prefix is sent again,
    // changed (the cached rewrite of the old rules is not reused).
    let mut tag = Rule::all(true);
    tag.add_communities = vec![42];
    r.set_filters(3, with(vec![tag], vec![]));
    held.drain(&mut r, 3, 100);
    assert_eq!(held.0.len(), 2);
    assert!(held.0.values().all(|a| a.communities == vec![42]));
    // The own routes of a RemotePeers rule stay out of it.
    let mut remote = Rule::all(false);
    remote.remote_only = true;
    r.set_filters(3, with(vec![remote], vec![]));
    let mut own = attrs(&[], [0; 4]);
    own.next_hop = NextHop::None;
    r.originate(own, net("10.9.0.0/24"));
    held.drain(&mut r, 3, 100);
    let now: Vec<IpNet> = held.0.keys().copied().collect();
    assert_eq!(now, vec![net("10.9.0.0/24")]);
}
