//! Two GoBGPs peer over a veth pair (run as root). GoBGP installs no
//! kernel routes, so the checks are on its RIB.
use anyhow::Result;
use std::net::IpAddr;
use std::time::Duration;
use tartan_lab::Pair;
use tartan_lab::peers::{BgpConfig, Gobgp, Neighbor, Route};

const T: Duration = Duration::from_secs(30);

#[test]
fn gobgp_ibgp_ipv4_route_reaches_peer() -> Result<()> {
    let p = Pair::with_subnet("gi4", 7)?;
    let a = Gobgp::start(
        &p.a,
        BgpConfig::new(p.a_v4(), 65000)
            .neighbor(Neighbor::new(p.b_v4().into(), 65000))
            .route(Route::new("192.0.2.0/24").community(65000, 7)),
    )?;
    let b = Gobgp::start(
        &p.b,
        BgpConfig::new(p.b_v4(), 65000).neighbor(Neighbor::new(p.a_v4().into(), 65000)),
    )?;
    a.wait_established(T)?;
    b.wait_established(T)?;
    let r = b.wait_route("192.0.2.0/24", T)?;
    assert!(r.as_path.is_empty(), "{:?}", r.raw);
    assert_eq!(r.next_hop, Some(IpAddr::from(p.a_v4())), "{:?}", r.raw);
    assert_eq!(r.communities(), vec![(65000, 7)]);
    // Routes can be added and removed while running.
    let extra = Route::new("198.51.100.0/24");
    a.add_route(&extra, None)?;
    b.wait_route("198.51.100.0/24", T)?;
    a.del_route(&extra)?;
    tartan_lab::netns::wait_for("withdrawal", T, || {
        let gone = !b
            .routes(tartan_lab::Family::V4)
            .ok()?
            .iter()
            .any(|r| r.prefix == "198.51.100.0/24");
        gone.then_some(())
    })?;
    Ok(())
}

#[test]
fn gobgp_ebgp_ipv6_route_reaches_peer() -> Result<()> {
    let p = Pair::with_subnet("ge6", 8)?;
    let _a = Gobgp::start(
        &p.a,
        BgpConfig::new(p.a_v4(), 65001)
            .neighbor(Neighbor::new(p.b_v6().into(), 65002))
            .route(Route::new("2001:db8:3::/48")),
    )?;
    let b = Gobgp::start(
        &p.b,
        BgpConfig::new(p.b_v4(), 65002).neighbor(Neighbor::new(p.a_v6().into(), 65001)),
    )?;
    b.wait_established(T)?;
    let r = b.wait_route("2001:db8:3::/48", T)?;
    assert_eq!(r.as_path, vec![65001]);
    assert_eq!(r.next_hop, Some(IpAddr::from(p.a_v6())), "{:?}", r.raw);
    Ok(())
}
