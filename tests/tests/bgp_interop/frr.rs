//! Two FRRs (zebra + bgpd each) peer over a veth pair (run as root).
use anyhow::Result;
use std::net::IpAddr;
use tartan_lab::peers::{Frr, Route};
use tartan_lab::{Family, Pair, wait_kernel_route};

use tartan_tests::peering::{self, PEER_WAIT as T};

#[test]
fn frr_ibgp_ipv4_route_reaches_peer_and_kernel() -> Result<()> {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let p = Pair::with_subnet("fi4", 4)?;
    let (_a, b) =
        peering::ibgp_v4_established::<Frr>(&p, Route::new("192.0.2.0/24").community(65000, 7))?;
    let r = b.wait_best_route("192.0.2.0/24", T)?;
    assert!(r.as_path.is_empty(), "{:?}", r.raw);
    assert_eq!(r.next_hops, vec![IpAddr::from(p.a_v4())]);
    assert!(r.best && r.valid, "{:?}", r.raw);
    let detail = b.route_detail("192.0.2.0/24")?;
    assert!(detail.to_string().contains("65000:7"), "{detail}");
    let k = wait_kernel_route(&p.b, "192.0.2.0/24", Some("bgp"), T)?;
    assert_eq!(k.gateways, vec![IpAddr::from(p.a_v4())]);
    assert_eq!(
        b.summary()?
            .pointer("/ipv4Unicast/as")
            .and_then(|v| v.as_u64()),
        Some(65000)
    );
    Ok(())
}

#[test]
fn frr_ebgp_ipv6_route_reaches_peer_and_kernel() -> Result<()> {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let p = Pair::with_subnet("fe6", 5)?;
    let (_a, b) = peering::ebgp_v6_established::<Frr>(&p, "2001:db8:2::/48")?;
    let r = b.wait_best_route("2001:db8:2::/48", T)?;
    assert_eq!(r.as_path, vec![65001]);
    assert!(
        b.routes(Family::V6)?
            .iter()
            .any(|r| r.prefix == "2001:db8:2::/48" && r.best)
    );
    let k = wait_kernel_route(&p.b, "2001:db8:2::/48", Some("bgp"), T)?;
    assert_eq!(k.gateways.len(), 1);
    assert_eq!(k.dev.as_deref(), Some(p.b_if()));
    Ok(())
}
