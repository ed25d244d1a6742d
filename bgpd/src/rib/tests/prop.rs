//! Random sequences of announcements, withdrawals, session flaps and
//! partial drains against a naive model that recomputes everything from
//! scratch: best paths and what every peer holds must match it.

use super::*;
use crate::model::well_known::NO_EXPORT;
use proptest::prelude::*;

/// Peers 1, 2: eBGP; 3: iBGP route-reflector client; 4: iBGP non-client
/// that only listens.
fn peers() -> Vec<PeerConfig> {
    vec![
        ebgp(1),
        PeerConfig {
            router_id: Ipv4Addr::new(10, 9, 9, 200),
            ..ebgp(2)
        },
        client(3),
        ibgp(4),
    ]
}

fn attr_universe(k: u8, peer: PeerId) -> PathAttrs {
    let nbr = if peer == 3 { 65100 } else { 65000 + peer };
    let mut a = match k % 4 {
        0 => attrs(&[nbr], [10, 0, peer as u8, 1]),
        1 => attrs(&[nbr, 7], [10, 0, peer as u8, 2]),
        2 => attrs(&[nbr], [10, 0, peer as u8, 3]),
        _ => attrs(&[nbr, 7, 8], [10, 0, peer as u8, 1]),
    };
    if peer == 3 {
        a.as_path.segments.clear();
    }
    if k & 4 != 0 {
        a.med = Some(u32::from(k));
    }
    if k & 8 != 0 {
        a.local_pref = Some(150);
    }
    if k == 13 {
        a.communities = vec![NO_EXPORT];
    }
    a
}

const PREFIXES: usize = 6;
fn prefix(i: usize) -> IpNet {
    net(&format!("10.{i}.0.0/16"))
}

#[derive(Debug, Clone)]
enum Op {
    Announce(PeerId, u8, Vec<usize>),
    Withdraw(PeerId, Vec<usize>),
    Drain(PeerId, usize),
    Flap(PeerId),
}

fn op() -> impl Strategy<Value = Op> {
    let peer = 1u32..=3;
    let set = proptest::collection::vec(0..PREFIXES, 1..4);
    prop_oneof![
        4 => (peer.clone(), 0u8..16, set.clone()).prop_map(|(p, k, s)| Op::Announce(p, k, s)),
        2 => (peer.clone(), set).prop_map(|(p, s)| Op::Withdraw(p, s)),
        3 => (1u32..=4, 1usize..4).prop_map(|(p, m)| Op::Drain(p, m)),
        1 => peer.prop_map(Op::Flap),
    ]
}

/// The model: each peer's paths as it sent them, after import rewriting.
#[derive(Default)]
struct Model {
    paths: HashMap<(PeerId, usize), PathAttrs>,
}

impl Model {
    fn best(&self, cfgs: &[PeerConfig], p: usize) -> Option<(PeerId, PathAttrs)> {
        let mut c: Vec<(&PeerConfig, &PathAttrs)> = cfgs
            .iter()
            .filter_map(|cfg| self.paths.get(&(cfg.id, p)).map(|a| (cfg, a)))
            .collect();
        let lp = |a: &PathAttrs| a.local_pref.unwrap_or(100);
        let keep_max = |c: &mut Vec<(&PeerConfig, &PathAttrs)>, f: &dyn Fn(&PathAttrs) -> i64| {
            let m = c.iter().map(|(_, a)| f(a)).max();
            c.retain(|(_, a)| Some(f(a)) == m);
        };
        keep_max(&mut c, &|a| i64::from(lp(a)));
        keep_max(&mut c, &|a| -(a.as_path.len_for_decision() as i64));
        keep_max(&mut c, &|a| -(a.origin as i64));
        let all = c.clone();
        c.retain(|(_, a)| {
            !all.iter().any(|(_, b)| {
                b.as_path.first_as() == a.as_path.first_as()
                    && b.med.unwrap_or(0) < a.med.unwrap_or(0)
            })
        });
        if c.iter().any(|(p, _)| !p.ibgp) {
            c.retain(|(p, _)| !p.ibgp);
        }
        c.into_iter()
            .min_by_key(|(p, a)| {
                (
                    a.originator_id.unwrap_or(p.router_id),
                    a.cluster_list.len(),
                    p.address,
                )
            })
            .map(|(p, a)| (p.id, a.clone()))
    }

    /// What `dst` should hold for a best path from `src`.
    fn export(src: &PeerConfig, a: &PathAttrs, dst: &PeerConfig) -> Option<PathAttrs> {
        if src.id == dst.id {
            return None;
        }
        if a.communities.contains(&NO_EXPORT) && !dst.ibgp {
            return None;
        }
        if src.ibgp && dst.ibgp && !src.rr_client && !dst.rr_client {
            return None;
        }
        let mut o = a.clone();
        if dst.ibgp {
            o.local_pref = Some(a.local_pref.unwrap_or(100));
            if src.ibgp {
                o.originator_id = Some(a.originator_id.unwrap_or(src.router_id));
                o.cluster_list.insert(0, local().cluster_id);
            }
        } else {
            o.as_path = a.as_path.prepended(OUR_AS);
            o.next_hop = NextHop::V4(dst.local_v4?);
            o.local_pref = None;
            o.med = None;
            o.originator_id = None;
            o.cluster_list.clear();
        }
        Some(o)
    }
}

fn run(ops: Vec<Op>) {
    let cfgs = peers();
    let cfg = |id: PeerId| cfgs.iter().find(|c| c.id == id).unwrap().clone();
    let mut r = rib();
    let mut m = Model::default();
    let mut sent: HashMap<PeerId, Sent> = HashMap::new();
    for c in &cfgs {
        r.peer_up(c.clone());
    }
    for op in ops {
        match op {
            Op::Announce(p, k, set) => {
                let mut a = attr_universe(k, p);
                let nets: Vec<IpNet> = set.iter().map(|&i| prefix(i)).collect();
                r.announce(p, a.clone(), &nets).unwrap();
                if !cfg(p).ibgp {
                    a.local_pref = None;
                }
                for i in set {
                    m.paths.insert((p, i), a.clone());
                }
            }
            Op::Withdraw(p, set) => {
                let nets: Vec<IpNet> = set.iter().map(|&i| prefix(i)).collect();
                r.withdraw(p, &nets);
                for i in set {
                    m.paths.remove(&(p, i));
                }
            }
            Op::Drain(p, max) => {
                if let Some(b) = r.take_output(p, max) {
                    sent.entry(p).or_default().apply(&b);
                }
            }
            Op::Flap(p) => {
                r.peer_down(p);
                m.paths.retain(|(q, _), _| *q != p);
                sent.remove(&p);
                r.peer_up(cfg(p));
            }
        }
    }
    for i in 0..PREFIXES {
        let want = m.best(&cfgs, i);
        let got = r.best(&prefix(i));
        assert_eq!(
            got.as_ref().map(|b| (b.peer, (*b.attrs).clone())),
            want,
            "best of {}",
            prefix(i)
        );
    }
    for dst in &cfgs {
        let s = sent.entry(dst.id).or_default();
        s.drain(&mut r, dst.id, 1000);
        let want: HashMap<IpNet, PathAttrs> = (0..PREFIXES)
            .filter_map(|i| {
                let (src, a) = m.best(&cfgs, i)?;
                Some((prefix(i), Model::export(&cfg(src), &a, dst)?))
            })
            .collect();
        let got: HashMap<IpNet, PathAttrs> = s.0.iter().map(|(k, v)| (*k, (**v).clone())).collect();
        assert_eq!(got, want, "what peer {} holds", dst.id);
        assert_eq!(r.counts(dst.id).advertised, want.len() as u64);
        assert_eq!(r.pending(dst.id), 0);
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn matches_the_naive_model(ops in proptest::collection::vec(op(), 1..60)) {
        run(ops);
    }
}
