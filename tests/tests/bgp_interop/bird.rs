//! Two BIRDs peer over a veth pair (run as root).
use anyhow::Result;
use std::net::Ipv4Addr;
use tartan_lab::netns::{Netns, veth};
use tartan_lab::peers::{BgpConfig, Bird, Neighbor, Route};
use tartan_lab::{Family, Pair, wait_kernel_route, wait_ping};

use tartan_tests::peering::{self, PEER_WAIT as T};

#[test]
fn bird_ibgp_ipv4_route_reaches_peer_and_kernel() -> Result<()> {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let p = Pair::new("bi4")?;
    wait_ping(&p.b, p.a_v4().into(), T)?;
    let (_a, b) = peering::ibgp_v4_established::<Bird>(
        &p,
        Route::new("192.0.2.0/24")
            .community(65000, 7)
            .large_community(65000, 1, 2),
    )?;
    let r = b.wait_route("192.0.2.0/24", T)?;
    assert!(r.as_path().is_empty(), "iBGP adds no AS: {}", r.text);
    assert_eq!(r.next_hop(), Some(p.a_v4().into()));
    assert_eq!(r.communities(), vec![(65000, 7)]);
    assert_eq!(r.large_communities(), vec![(65000, 1, 2)]);
    let k = wait_kernel_route(&p.b, "192.0.2.0/24", Some("bird"), T)?;
    assert_eq!(k.gateways, vec![std::net::IpAddr::from(p.a_v4())]);
    assert_eq!(k.dev.as_deref(), Some(p.b_if()));
    Ok(())
}

#[test]
fn bird_ebgp_ipv6_route_reaches_peer_and_kernel() -> Result<()> {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let p = Pair::with_subnet("be6", 6)?;
    let (_a, b) = peering::ebgp_v6_established::<Bird>(&p, "2001:db8:1::/48")?;
    let r = b.wait_route("2001:db8:1::/48", T)?;
    assert_eq!(r.as_path(), vec![65001]);
    let paths = b.routes(Family::V6)?;
    let ours: Vec<_> = paths
        .iter()
        .filter(|r| r.prefix == "2001:db8:1::/48")
        .collect();
    assert_eq!(ours.len(), 1);
    assert!(ours[0].primary);
    let k = wait_kernel_route(&p.b, "2001:db8:1::/48", Some("bird"), T)?;
    assert_eq!(k.gateways.len(), 1);
    assert_eq!(k.dev.as_deref(), Some(p.b_if()));
    Ok(())
}

#[test]
fn bird_route_reflector_sets_originator_and_cluster_list() -> Result<()> {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    // c1 — rr — c2, all AS 65000; c2 reaches c1's subnet through rr.
    let rr = Netns::new("brr")?;
    let c1 = Netns::new("bc1")?;
    let c2 = Netns::new("bc2")?;
    veth(&rr, &["10.0.1.1/24"], &c1, &["10.0.1.2/24"])?;
    veth(&rr, &["10.0.2.1/24"], &c2, &["10.0.2.2/24"])?;
    rr.exec("sysctl", &["-qw", "net.ipv4.ip_forward=1"])?;
    c2.ip(&["route", "add", "10.0.1.0/24", "via", "10.0.2.1"])?;
    let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
    let cluster = Ipv4Addr::new(1, 1, 1, 1);
    let r = Bird::start(
        &rr,
        BgpConfig::new(Ipv4Addr::new(10, 0, 1, 1), 65000)
            .cluster_id(cluster)
            .neighbor(Neighbor::new(ip("10.0.1.2"), 65000).rr_client())
            .neighbor(Neighbor::new(ip("10.0.2.2"), 65000).rr_client()),
    )?;
    let _c1 = Bird::start(
        &c1,
        BgpConfig::new(Ipv4Addr::new(10, 0, 1, 2), 65000)
            .neighbor(Neighbor::new(ip("10.0.1.1"), 65000))
            .route(Route::new("198.51.100.0/24")),
    )?;
    let c2b = Bird::start(
        &c2,
        BgpConfig::new(Ipv4Addr::new(10, 0, 2, 2), 65000)
            .neighbor(Neighbor::new(ip("10.0.2.1"), 65000)),
    )?;
    r.wait_established(T)?;
    let got = c2b.wait_route("198.51.100.0/24", T)?;
    assert_eq!(
        got.originator_id(),
        Some(Ipv4Addr::new(10, 0, 1, 2)),
        "{}",
        got.text
    );
    assert_eq!(got.cluster_list(), vec![cluster]);
    assert_eq!(got.next_hop(), Some(ip("10.0.2.1")), "resolved through rr");
    wait_kernel_route(&c2, "198.51.100.0/24", Some("bird"), T)?;
    Ok(())
}
