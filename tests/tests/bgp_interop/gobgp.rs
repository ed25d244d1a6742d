//! Two GoBGPs peer over a veth pair (run as root). GoBGP installs no
//! kernel routes, so the checks are on its RIB.
use anyhow::Result;
use std::net::IpAddr;
use tartan_lab::Pair;
use tartan_lab::peers::{Gobgp, Route};

use tartan_tests::peering::{self, PEER_WAIT as T};

#[test]
fn gobgp_ibgp_ipv4_route_reaches_peer() -> Result<()> {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let p = Pair::with_subnet("gi4", 7)?;
    let (a, b) =
        peering::ibgp_v4_established::<Gobgp>(&p, Route::new("192.0.2.0/24").community(65000, 7))?;
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
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let p = Pair::with_subnet("ge6", 8)?;
    let (_a, b) = peering::ebgp_v6_established::<Gobgp>(&p, "2001:db8:3::/48")?;
    let r = b.wait_route("2001:db8:3::/48", T)?;
    assert_eq!(r.as_path, vec![65001]);
    assert_eq!(r.next_hop, Some(IpAddr::from(p.a_v6())), "{:?}", r.raw);
    Ok(())
}
