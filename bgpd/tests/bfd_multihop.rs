//! Multihop BFD (RFC 5883) against FRR's bfdd two hops away: tartan-bgpd
//! in one namespace, a router namespace in between, FRR (bgpd + bfdd) in a
//! third; an eBGP multihop session with BFD. BFD must come Up on both sides
//! (single-hop BFD never would: the peer's packets arrive with TTL 254 and
//! FRR speaks multihop on port 4784), the BGP session reach Established with
//! routes both ways, and a cut in the router must take BFD and the BGP
//! session down long before the hold time. The same against BIRD's BFD.
//! Run as root.
mod support;

use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};
use support::{T, start_tartan};
use tartan_lab::netns::{Netns, run, veth, wait_for};
use tartan_lab::peers::{BgpConfig, Bird, Frr, Neighbor, Route, Tartan, TartanOptions};

const OURS: &str = "203.0.113.0/24";
const THEIRS: &str = "198.51.100.0/24";

/// tartan (10.61.1.1) — router (10.61.1.2 | 10.61.2.2) — FRR (10.61.2.1).
const TARTAN: Ipv4Addr = Ipv4Addr::new(10, 61, 1, 1);
const ROUTER_T: Ipv4Addr = Ipv4Addr::new(10, 61, 1, 2);
const ROUTER_P: Ipv4Addr = Ipv4Addr::new(10, 61, 2, 2);
const PEER: Ipv4Addr = Ipv4Addr::new(10, 61, 2, 1);

/// The three namespaces (removed, with their links and every process
/// left in them, when dropped).
struct TwoHops {
    tartan: Netns,
    router: Netns,
    peer: Netns,
}

impl TwoHops {
    fn new() -> Result<TwoHops> {
        let tartan = Netns::new("bmt")?;
        let router = Netns::new("bmr")?;
        let peer = Netns::new("bmp")?;
        veth(
            &tartan,
            &[&format!("{TARTAN}/24")],
            &router,
            &[&format!("{ROUTER_T}/24")],
        )?;
        veth(
            &router,
            &[&format!("{ROUTER_P}/24")],
            &peer,
            &[&format!("{PEER}/24")],
        )?;
        router.exec("sysctl", &["-qw", "net.ipv4.ip_forward=1"])?;
        tartan.ip(&["route", "add", "10.61.2.0/24", "via", &ROUTER_T.to_string()])?;
        peer.ip(&["route", "add", "10.61.1.0/24", "via", &ROUTER_P.to_string()])?;
        Ok(TwoHops {
            tartan,
            router,
            peer,
        })
    }
}

/// Why the test cannot run here, if it cannot.
fn missing() -> Option<String> {
    if !std::path::Path::new("/usr/lib/frr/bfdd").exists() {
        return Some("/usr/lib/frr/bfdd is not installed (Debian package frr)".into());
    }
    if run(std::process::Command::new("nft").arg("--version")).is_err() {
        return Some("nft is not installed (Debian package nftables)".into());
    }
    // SAFETY: geteuid has no preconditions and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("needs root for network namespaces".into());
    }
    None
}

/// Drop everything the router forwards (`on`), or stop dropping: the path
/// breaks while both ends keep their links up.
fn cut_router(router: &Netns, on: bool) -> Result<()> {
    let script = if on {
        "table inet tartan-test-mhcut {\n chain cut { type filter hook forward priority -300; policy drop; }\n}\n"
    } else {
        "delete table inet tartan-test-mhcut\n"
    };
    // One file per router: the tests here run at once.
    let path = std::env::temp_dir().join(format!("tartan-test-mhcut-{}.nft", router.name()));
    std::fs::write(&path, script)?;
    let r = run(router.command("nft").arg("-f").arg(&path));
    let _ = std::fs::remove_file(&path);
    r.map(|_| ())
}

/// The peer's configuration and Tartan's: eBGP multihop 2 between their
/// own addresses with BFD at 100 ms × 3 (so the peer's BGP asks its BFD
/// for a multihop session), a route each way.
fn two_hop_configs() -> (BgpConfig, BgpConfig) {
    let (t_addr, p_addr): (IpAddr, IpAddr) = (TARTAN.into(), PEER.into());
    let side = |me: Ipv4Addr, asn: u32, peer: IpAddr, peer_asn: u32, local: IpAddr, route: &str| {
        BgpConfig::new(me, asn)
            .neighbor(
                Neighbor::new(peer, peer_asn)
                    .multihop(2)
                    .local_address(local)
                    .bfd(100, 100, 3),
            )
            .route(Route::new(route))
    };
    (
        side(PEER, 65002, t_addr, 65001, p_addr, THEIRS),
        side(TARTAN, 65001, p_addr, 65002, t_addr, OURS),
    )
}

/// Tartan from its configuration, with a hold time of 90 s: only BFD can
/// take the session down quickly.
fn start_tartan_two_hops(net: &TwoHops, config: &BgpConfig) -> Result<Tartan> {
    let opts = TartanOptions {
        hold_time: Some(90),
        ..Default::default()
    };
    start_tartan(&net.tartan, config, &opts)
}

/// Cut the path in the router: BGP must go down within 5 s (BFD detects
/// it in 300 ms; the hold time would take 90 s).
fn cut_takes_bgp_down(
    net: &TwoHops,
    tartan: &Tartan,
    fail: &dyn Fn(&str) -> String,
) -> Result<tartan_api::bgp::PeerStatus> {
    let p_addr: IpAddr = PEER.into();
    cut_router(&net.router, true)?;
    let cut = Instant::now();
    let down = wait_for("tartan BGP session down", Duration::from_secs(10), || {
        let p = tartan.peer(p_addr).ok()?;
        (p.state.to_string() != "Established").then_some(p)
    })
    .with_context(|| fail("BGP still up after the cut"))?;
    let took = cut.elapsed();
    eprintln!("BGP session down {took:?} after the cut");
    if took > Duration::from_secs(5) {
        bail!("{}", fail(&format!("BGP went down only after {took:?}")));
    }
    Ok(down)
}

/// Tartan's BGP session with the peer Established, its BFD session Up
/// and shown as multihop.
fn tartan_up_multihop(tartan: &Tartan, fail: &dyn Fn(&str) -> String) -> Result<()> {
    let p_addr: IpAddr = PEER.into();
    tartan
        .wait_established(p_addr, T)
        .with_context(|| fail("tartan BGP not Established"))?;
    let ours = tartan.peer(p_addr)?.bfd.context("tartan shows no BFD")?;
    assert_eq!(ours.state, "up", "{ours:?}");
    assert!(ours.multihop, "tartan shows the mode: {ours:?}");
    Ok(())
}

/// Mend the cut: BFD and then BGP come back.
fn mend_brings_bgp_back(
    net: &TwoHops,
    tartan: &Tartan,
    fail: &dyn Fn(&str) -> String,
) -> Result<()> {
    cut_router(&net.router, false)?;
    tartan
        .wait_established(PEER.into(), T)
        .with_context(|| fail("BGP not back after the cut"))?;
    Ok(())
}

#[test]
fn frr_multihop_bfd_two_hops_away_comes_up_and_a_cut_takes_bgp_down() -> Result<()> {
    if let Some(why) = missing() {
        eprintln!("skipped: {why}");
        return Ok(());
    }
    let net = TwoHops::new()?;
    let t_addr: IpAddr = TARTAN.into();
    let (theirs, ours) = two_hop_configs();
    let frr = Frr::start(&net.peer, theirs)?;
    let tartan = start_tartan_two_hops(&net, &ours)?;
    let fail = |what: &str| {
        format!(
            "{what}\nFRR bfd: {:?}\nFRR bgp: {:?}\nFRR neighbor: {:?}\nbfdd log:\n{}\ntartan log:\n{}",
            frr.vtysh("show bfd peers").ok(),
            frr.vtysh("show bgp summary").ok(),
            frr.vtysh(&format!("show bgp neighbors {t_addr}")).ok(),
            frr.bfdd().map(|d| d.log_tail(30)).unwrap_or_default(),
            tartan.log()
        )
    };

    // Up on both sides; BGP follows BFD.
    tartan_up_multihop(&tartan, &fail)?;
    let theirs = wait_for("FRR BFD up", T, || {
        frr.bfd_peer(t_addr)
            .filter(|v| v.get("status").and_then(Value::as_str) == Some("up"))
    })
    .with_context(|| fail("FRR BFD not up"))?;
    assert_eq!(
        theirs.get("multihop").and_then(Value::as_bool),
        Some(true),
        "FRR runs it as multihop: {theirs}"
    );
    let log = tartan.log();
    assert!(
        log.lines()
            .any(|l| l.contains("BFD mode chosen") && l.contains("multihop")),
        "tartan logs the multihop mode:\n{log}"
    );
    frr.wait_established(T)?;

    // Routes both ways.
    let r = frr.wait_route(OURS, T)?;
    assert_eq!(r.next_hops.first().copied(), Some(t_addr), "{r:?}");
    wait_for("FRR's route in tartan's RIB", T, || {
        let routes = tartan.routes("ipv4-unicast").ok()?;
        routes
            .iter()
            .any(|r| r.prefix.to_string() == THEIRS)
            .then_some(())
    })
    .with_context(|| fail("no route from FRR"))?;

    let down = cut_takes_bgp_down(&net, &tartan, &fail)?;
    let bfd = down.bfd.context("tartan shows no BFD")?;
    assert_eq!(bfd.state, "down", "{bfd:?}");
    assert_eq!(bfd.diagnostic, "ControlDetectionTimeExpired", "{bfd:?}");
    wait_for("FRR BFD down", Duration::from_secs(5), || {
        frr.bfd_peer(t_addr)
            .filter(|v| v.get("status").and_then(Value::as_str) == Some("down"))
    })
    .with_context(|| fail("FRR BFD still up"))?;
    wait_for(
        "FRR's route gone from tartan's RIB",
        Duration::from_secs(5),
        || {
            let routes = tartan.routes("ipv4-unicast").ok()?;
            (!routes.iter().any(|r| r.prefix.to_string() == THEIRS)).then_some(())
        },
    )?;

    mend_brings_bgp_back(&net, &tartan, &fail)?;
    drop(frr);
    drop(tartan);
    drop(net);
    Ok(())
}

#[test]
fn bird_multihop_bfd_two_hops_away_comes_up_and_a_cut_takes_bgp_down() -> Result<()> {
    if let Some(why) = missing() {
        eprintln!("skipped: {why}");
        return Ok(());
    }
    if !std::path::Path::new("/usr/sbin/bird").exists() {
        eprintln!("skipped: /usr/sbin/bird is not installed (Debian package bird2)");
        return Ok(());
    }
    let net = TwoHops::new()?;
    let t_addr: IpAddr = TARTAN.into();
    let (theirs, ours) = two_hop_configs();
    let bird = Bird::start(&net.peer, theirs)?;
    let tartan = start_tartan_two_hops(&net, &ours)?;
    let fail = |what: &str| {
        format!(
            "{what}\nBIRD bfd: {:?}\nBIRD log:\n{}\ntartan log:\n{}",
            bird.birdc(&["show", "bfd", "sessions"]).ok(),
            bird.daemon().log_tail(30),
            tartan.log()
        )
    };
    tartan_up_multihop(&tartan, &fail)?;
    wait_for("BIRD BFD up", T, || {
        bird.bfd_session(t_addr)
            .filter(|w| w.get(2).map(String::as_str) == Some("Up"))
    })
    .with_context(|| fail("BIRD BFD not up"))?;
    bird.wait_route(OURS, T)?;

    cut_takes_bgp_down(&net, &tartan, &fail)?;
    mend_brings_bgp_back(&net, &tartan, &fail)?;
    drop(bird);
    drop(tartan);
    drop(net);
    Ok(())
}
