//! tartan-bgpd against BIRD 2, FRR and GoBGP from Debian: iBGP and eBGP,
//! IPv4 and IPv6; routes both ways, into both kernels, and withdrawn.
//! Run as root.
mod support;

use anyhow::Result;
use std::net::IpAddr;
use support::{T, start_tartan, wait_no_tartan_route, wait_tartan_route};
use tartan_lab::Pair;
use tartan_lab::netns::wait_for;
use tartan_lab::peers::{BgpConfig, Bird, Frr, Gobgp, Neighbor, Route, Tartan, TartanOptions};
use tartan_lab::{Family, wait_kernel_route};

#[derive(Clone, Copy, PartialEq)]
enum Impl {
    Bird,
    Frr,
    Gobgp,
}

enum Peer {
    Bird(Bird),
    Frr(Frr),
    Gobgp(Gobgp),
}

impl Peer {
    fn start(kind: Impl, ns: &tartan_lab::netns::Netns, c: BgpConfig) -> Result<Peer> {
        Ok(match kind {
            Impl::Bird => Peer::Bird(Bird::start(ns, c)?),
            Impl::Frr => Peer::Frr(Frr::start(ns, c)?),
            Impl::Gobgp => Peer::Gobgp(Gobgp::start(ns, c)?),
        })
    }
    fn wait_established(&self) -> Result<()> {
        match self {
            Peer::Bird(p) => p.wait_established(T),
            Peer::Frr(p) => p.wait_established(T),
            Peer::Gobgp(p) => p.wait_established(T),
        }
    }
    /// The next hop the peer holds for `prefix`, once it has it.
    fn wait_route(&self, prefix: &str) -> Result<Option<IpAddr>> {
        Ok(match self {
            Peer::Bird(p) => p.wait_route(prefix, T)?.next_hop(),
            Peer::Frr(p) => p.wait_route(prefix, T)?.next_hops.first().copied(),
            Peer::Gobgp(p) => p.wait_route(prefix, T)?.next_hop,
        })
    }
    fn has_route(&self, prefix: &str, family: Family) -> bool {
        match self {
            Peer::Bird(p) => p.routes_for(prefix).map(|r| !r.is_empty()).unwrap_or(false),
            Peer::Frr(p) => p
                .routes(family)
                .map(|r| r.iter().any(|x| x.prefix == prefix))
                .unwrap_or(false),
            Peer::Gobgp(p) => p
                .routes(family)
                .map(|r| r.iter().any(|x| x.prefix == prefix))
                .unwrap_or(false),
        }
    }
    /// The kernel protocol the peer installs learned routes with, if it does.
    fn kernel_proto(&self) -> Option<&'static str> {
        match self {
            Peer::Bird(_) => Some("bird"),
            Peer::Frr(_) => Some("bgp"),
            Peer::Gobgp(_) => None,
        }
    }
}

fn exchange(kind: Impl, ibgp: bool, family: Family, subnet: u8) -> Result<()> {
    let p = Pair::with_subnet("ix", subnet)?;
    let (ours, theirs) = match family {
        Family::V4 => ("10.201.0.0/24", "10.202.0.0/24"),
        Family::V6 => ("fd01:201::/48", "fd01:202::/48"),
    };
    let (our_as, their_as) = if ibgp { (65001, 65001) } else { (65001, 65002) };
    let v4 = family == Family::V4;
    let tcfg = BgpConfig::new(p.a_v4(), our_as)
        .neighbor(Neighbor::new(p.b_addr(family), their_as).families(v4, !v4))
        .route(
            Route::new(ours)
                .community(65001, 100)
                .large_community(65001, 1, 2),
        );
    let mut t: Tartan = start_tartan(&p.a, &tcfg, &TartanOptions::default())?;
    let mut pcfg = BgpConfig::new(p.b_v4(), their_as)
        .neighbor(Neighbor::new(p.a_addr(family), our_as).families(v4, !v4));
    if kind != Impl::Gobgp {
        pcfg = pcfg.route(Route::new(theirs));
    }
    let peer = Peer::start(kind, &p.b, pcfg)?;
    if let Peer::Gobgp(g) = &peer {
        g.add_route(&Route::new(theirs), Some(p.b_addr(family)))?;
    }
    peer.wait_established()?;
    t.wait_established(p.b_addr(family), T)?;

    // Ours at the peer, with our address as next hop, and in its kernel.
    let nh = peer.wait_route(ours)?;
    assert_eq!(nh, Some(p.a_addr(family)), "next hop of {ours} at the peer");
    if let Some(proto) = peer.kernel_proto() {
        let k = wait_kernel_route(&p.b, ours, Some(proto), T)?;
        assert_eq!(k.gateways, vec![p.a_addr(family)]);
    }
    // Theirs in our RIB and our kernel, with Tartan's protocol.
    let k = wait_tartan_route(&p.a, theirs).map_err(|e| {
        anyhow::anyhow!(
            "{e}\nkernel: {}\nrib: {:?}\nlog:\n{}",
            tartan_lab::netns::ip(&["-n", p.a.name(), "route"]).unwrap_or_default(),
            t.get("/v1/routes").ok(),
            t.log()
        )
    })?;
    assert_eq!(
        k.gateways,
        vec![p.b_addr(family)],
        "our kernel route to {theirs}"
    );
    let routes = t.routes(if v4 { "ipv4-unicast" } else { "ipv6-unicast" })?;
    let r = routes
        .iter()
        .find(|r| r.prefix.to_string() == theirs)
        .expect("route in RIB");
    assert!(r.paths[0].best);
    assert_eq!(
        r.paths[0].as_path,
        if ibgp {
            String::new()
        } else {
            "65002".to_string()
        }
    );

    // Withdraw ours: gone from the peer.
    let mut no_routes = tcfg.clone();
    no_routes.routes.clear();
    t.reload(&tartan_lab::peers::render_tartan(
        &no_routes,
        &TartanOptions::default(),
    ))?;
    wait_for(&format!("{ours} withdrawn at the peer"), T, || {
        (!peer.has_route(ours, family)).then_some(())
    })?;
    // Withdraw theirs: gone from our kernel.
    match &peer {
        Peer::Bird(_) | Peer::Frr(_) => {
            // Closing the session withdraws everything it carried.
            drop(peer);
        }
        Peer::Gobgp(g) => g.del_route(&Route::new(theirs))?,
    }
    wait_no_tartan_route(&p.a, theirs)?;
    // The reload did not reset the session where the peer still runs.
    let _ = &mut t;
    Ok(())
}

#[test]
fn bird_ibgp_ipv4() -> Result<()> {
    exchange(Impl::Bird, true, Family::V4, 11)
}
#[test]
fn bird_ebgp_ipv4() -> Result<()> {
    exchange(Impl::Bird, false, Family::V4, 12)
}
#[test]
fn bird_ibgp_ipv6() -> Result<()> {
    exchange(Impl::Bird, true, Family::V6, 13)
}
#[test]
fn bird_ebgp_ipv6() -> Result<()> {
    exchange(Impl::Bird, false, Family::V6, 14)
}
#[test]
fn frr_ibgp_ipv4() -> Result<()> {
    exchange(Impl::Frr, true, Family::V4, 21)
}
#[test]
fn frr_ebgp_ipv6() -> Result<()> {
    exchange(Impl::Frr, false, Family::V6, 22)
}
#[test]
fn frr_ebgp_ipv4() -> Result<()> {
    exchange(Impl::Frr, false, Family::V4, 23)
}
#[test]
fn gobgp_ibgp_ipv4() -> Result<()> {
    exchange(Impl::Gobgp, true, Family::V4, 31)
}
#[test]
fn gobgp_ebgp_ipv6() -> Result<()> {
    exchange(Impl::Gobgp, false, Family::V6, 32)
}
