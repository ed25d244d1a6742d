//! ExaBGP sends BIRD a route with an unknown optional transitive attribute
//! (run as root).
use anyhow::Result;
use std::net::IpAddr;
use tartan_lab::netns::wait_for;
use tartan_lab::peers::{BgpConfig, Bird, ExaBgp, Neighbor, Route};
use tartan_lab::{Family, Pair};

use tartan_tests::peering::PEER_WAIT as T;

#[test]
fn exabgp_unknown_transitive_attribute_reaches_bird() -> Result<()> {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let p = Pair::with_subnet("ex", 9)?;
    let a_v4 = IpAddr::from(p.a_v4());
    let bird = Bird::start(
        &p.b,
        BgpConfig::new(p.b_v4(), 65002).neighbor(Neighbor::new(a_v4, 65001).passive()),
    )?;
    let exa = ExaBgp::start(
        &p.a,
        BgpConfig::new(p.a_v4(), 65001)
            .neighbor(Neighbor::new(p.b_v4().into(), 65002).local_address(a_v4))
            .route(Route::new("203.0.113.0/24").community(65001, 1)),
    )?;
    exa.wait_established(T)?;
    bird.wait_established(T)?;
    let stat = bird.wait_route("203.0.113.0/24", T)?;
    assert_eq!(stat.communities(), vec![(65001, 1)]);

    exa.announce_with_attribute("198.18.0.0/24", a_v4, 0xf0, 0xc0, &[1, 2, 3, 4, 5])?;
    let r = bird.wait_route("198.18.0.0/24", T)?;
    assert_eq!(r.attr("BGP.f0 [t]"), Some("01 02 03 04 05"), "{}", r.text);
    assert_eq!(r.as_path(), vec![65001]);

    exa.withdraw(&format!("198.18.0.0/24 next-hop {a_v4}"))?;
    wait_for("withdrawal at BIRD", T, || {
        let left = bird.routes(Family::V4).ok()?;
        (!left.iter().any(|r| r.prefix == "198.18.0.0/24")).then_some(())
    })?;
    Ok(())
}
