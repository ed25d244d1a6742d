//! TCP MD5 signatures (RFC 2385) with BIRD and FRR: the session comes up
//! and carries routes when both sides share the password, and never forms
//! when the passwords differ or only one side has one (the kernels drop the
//! segments; the TcpExt MD5 counters say so). Run as root.
mod support;

use anyhow::Result;
use std::net::IpAddr;
use std::time::{Duration, Instant};
use support::{T, start_tartan, tcp_ext_counter, wait_tartan_route};
use tartan_api::bgp::SessionState;
use tartan_lab::peers::{BgpConfig, Bird, Frr, Neighbor, Route, Tartan, TartanOptions};
use tartan_lab::{Family, Pair, wait_kernel_route};

/// How long a session with mismatched keys is watched for.
const WATCH: Duration = Duration::from_secs(10);

#[derive(Clone, Copy)]
enum Impl {
    Bird,
    Frr,
}

enum Peer {
    Bird(Bird),
    Frr(Frr),
}

impl Peer {
    fn state(&self, addr: IpAddr) -> String {
        match self {
            Peer::Bird(p) => p.neighbor_state(addr),
            Peer::Frr(p) => p.neighbor_state(addr),
        }
        .unwrap_or_default()
    }
}

struct Lab {
    p: Pair,
    t: Tartan,
    peer: Peer,
}

const OURS: &str = "10.201.0.0/24";
const THEIRS: &str = "10.202.0.0/24";

/// tartan-bgpd (a, AS 65001) and `kind` (b, AS 65002) with the given
/// passwords on each side.
fn start(kind: Impl, subnet: u8, ours: Option<&str>, theirs: Option<&str>) -> Result<Lab> {
    let p = Pair::with_subnet("md", subnet)?;
    let mut tn = Neighbor::new(p.b_addr(Family::V4), 65002);
    if let Some(pw) = ours {
        tn = tn.password(pw);
    }
    let tcfg = BgpConfig::new(p.a_v4(), 65001)
        .neighbor(tn)
        .route(Route::new(OURS));
    let t = start_tartan(&p.a, &tcfg, &TartanOptions::default())?;
    let mut pn = Neighbor::new(p.a_addr(Family::V4), 65001);
    if let Some(pw) = theirs {
        pn = pn.password(pw);
    }
    let pcfg = BgpConfig::new(p.b_v4(), 65002)
        .neighbor(pn)
        .route(Route::new(THEIRS));
    let peer = match kind {
        Impl::Bird => Peer::Bird(Bird::start(&p.b, pcfg)?),
        Impl::Frr => Peer::Frr(Frr::start(&p.b, pcfg)?),
    };
    Ok(Lab { p, t, peer })
}

/// Both passwords equal: Established on both sides, routes both ways.
fn comes_up(kind: Impl, subnet: u8, password: &str) -> Result<()> {
    let l = start(kind, subnet, Some(password), Some(password))?;
    let (a, b) = (l.p.a_addr(Family::V4), l.p.b_addr(Family::V4));
    l.t.wait_established(b, T)?;
    tartan_lab::netns::wait_for("peer side Established", T, || {
        (l.peer.state(a) == "Established").then_some(())
    })?;
    let k = wait_tartan_route(&l.p.a, THEIRS)?;
    assert_eq!(k.gateways, vec![b]);
    let proto = match kind {
        Impl::Bird => "bird",
        Impl::Frr => "bgp",
    };
    let k = wait_kernel_route(&l.p.b, OURS, Some(proto), T)?;
    assert_eq!(k.gateways, vec![a]);
    // The segments really were signed and checked: no MD5 failures.
    for ns in [&l.p.a, &l.p.b] {
        assert_eq!(tcp_ext_counter(ns, "TcpExtTCPMD5Failure"), 0);
        assert_eq!(tcp_ext_counter(ns, "TcpExtTCPMD5NotFound"), 0);
        assert_eq!(tcp_ext_counter(ns, "TcpExtTCPMD5Unexpected"), 0);
    }
    Ok(())
}

/// Keys that do not match: for WATCH, neither side reaches Established and
/// no route crosses; the kernels count the segments they dropped.
fn stays_down(kind: Impl, subnet: u8, ours: Option<&str>, theirs: Option<&str>) -> Result<()> {
    let l = start(kind, subnet, ours, theirs)?;
    let (a, b) = (l.p.a_addr(Family::V4), l.p.b_addr(Family::V4));
    let start = Instant::now();
    while start.elapsed() < WATCH {
        let ts = l.t.peer(b)?.state;
        assert_ne!(
            ts,
            SessionState::Established,
            "tartan Established with mismatched MD5 keys\n{}",
            l.t.daemon().log_tail(40)
        );
        let ps = l.peer.state(a);
        assert_ne!(ps, "Established", "peer Established with mismatched keys");
        std::thread::sleep(Duration::from_millis(200));
    }
    assert!(
        support::tartan_proto_routes(&l.p.a, Family::V4).is_empty(),
        "tartan installed routes without a session"
    );
    assert_eq!(
        l.t.peer(b)?.messages.received.open,
        0,
        "an OPEN got through"
    );
    // The kernels dropped the connection attempts of the other side.
    let counters = [
        "TcpExtTCPMD5Failure",
        "TcpExtTCPMD5NotFound",
        "TcpExtTCPMD5Unexpected",
    ];
    let dropped: u64 = [&l.p.a, &l.p.b]
        .iter()
        .flat_map(|ns| counters.iter().map(|c| tcp_ext_counter(ns, c)))
        .sum();
    assert!(dropped > 0, "no MD5 drops counted by either kernel");
    Ok(())
}

#[test]
fn bird_right_password() -> Result<()> {
    comes_up(Impl::Bird, 51, "s3cret-bird")
}

#[test]
fn bird_wrong_password() -> Result<()> {
    stays_down(Impl::Bird, 52, Some("s3cret-bird"), Some("not-the-same"))
}

#[test]
fn bird_without_password() -> Result<()> {
    stays_down(Impl::Bird, 53, Some("s3cret-bird"), None)
}

#[test]
fn frr_right_password() -> Result<()> {
    comes_up(Impl::Frr, 54, "s3cret-frr")
}

#[test]
fn frr_wrong_password() -> Result<()> {
    stays_down(Impl::Frr, 55, Some("s3cret-frr"), Some("not-the-same"))
}
