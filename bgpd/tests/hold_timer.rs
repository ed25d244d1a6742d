//! The hold timer (RFC 4271 4.4, 6.5): with a 3 s hold time, a peer that
//! goes silent (its packets dropped by nftables, links left up so that no
//! carrier change gives it away) is declared down within the hold time and
//! its routes leave the kernel, also when graceful restart was negotiated
//! (a hold timer expiry sends a NOTIFICATION, which ends graceful restart
//! without the RFC 8538 N bit). Run as root.
mod support;

use anyhow::Result;
use std::time::{Duration, Instant};
use support::{T, start_tartan, wait_no_tartan_route, wait_tartan_route};
use tartan_api::bgp::SessionState;
use tartan_lab::netns::wait_for;
use tartan_lab::peers::{BgpConfig, Bird, Neighbor, Route, TartanOptions};
use tartan_lab::{Family, Pair};

const HOLD: u16 = 3;
/// Allowed on top of the hold time: polling, scheduling.
const SLACK: Duration = Duration::from_secs(2);
const THEIRS: &str = "10.202.0.0/24";

fn silent_peer(subnet: u8, graceful_restart: bool) -> Result<()> {
    let p = Pair::with_subnet("ht", subnet)?;
    let (a, b) = (p.a_addr(Family::V4), p.b_addr(Family::V4));
    let mut tn = Neighbor::new(b, 65002);
    let mut bn = Neighbor::new(a, 65001);
    if graceful_restart {
        tn = tn.graceful_restart(120);
        bn = bn.graceful_restart(120);
    }
    let options = TartanOptions {
        hold_time: Some(HOLD),
        restart_time: graceful_restart.then_some(120),
        ..TartanOptions::default()
    };
    let t = start_tartan(
        &p.a,
        &BgpConfig::new(p.a_v4(), 65001).neighbor(tn),
        &options,
    )?;
    // BIRD offers its default 240 s; the session uses the smaller offer.
    let bird = Bird::start(
        &p.b,
        BgpConfig::new(p.b_v4(), 65002)
            .neighbor(bn)
            .route(Route::new(THEIRS)),
    )?;
    bird.wait_established(T)?;
    t.wait_established(b, T)?;
    let status = t.peer(b)?;
    assert_eq!(status.hold_time, Some(HOLD), "negotiated hold time");
    assert_eq!(
        status.graceful_restart.is_some(),
        graceful_restart,
        "graceful restart negotiated: {:?}",
        status.graceful_restart
    );
    let k = wait_tartan_route(&p.a, THEIRS)?;
    assert_eq!(k.gateways, vec![b]);

    // Silence BIRD: drop everything on its veth, both ways.
    let dev = p.b_if();
    p.b.exec("nft", &["add table inet cut"])?;
    for (chain, hook, dir) in [("in", "input", "iifname"), ("out", "output", "oifname")] {
        p.b.exec(
            "nft",
            &[&format!(
                "add chain inet cut {chain} {{ type filter hook {hook} priority 0; }}"
            )],
        )?;
        p.b.exec(
            "nft",
            &[&format!("add rule inet cut {chain} {dir} \"{dev}\" drop")],
        )?;
    }
    let cut = Instant::now();

    let limit = Duration::from_secs(HOLD.into()) + SLACK;
    wait_for("tartan to declare the silent peer down", limit, || {
        t.peer(b)
            .ok()
            .filter(|s| s.state != SessionState::Established)
    })
    .map_err(|e| e.context(t.daemon().log_tail(40)))?;
    let down = cut.elapsed();
    wait_no_tartan_route(&p.a, THEIRS)?;
    let gone = cut.elapsed();
    eprintln!("session down after {down:?}, route gone after {gone:?} (hold {HOLD} s)");
    assert!(
        gone <= limit,
        "route left the kernel {gone:?} after the cut; limit {limit:?}"
    );
    // The keepalives stopped at most one keepalive interval (hold / 3)
    // before the cut, so the hold timer cannot expire much sooner than
    // hold - hold / 3 after it: an earlier drop would have another cause.
    let earliest = Duration::from_secs(u64::from(HOLD - HOLD / 3)) - Duration::from_millis(500);
    assert!(down >= earliest, "down after only {down:?}");
    let err = t.peer(b)?.last_error.unwrap_or_default();
    assert!(
        err.contains("Hold Timer Expired"),
        "last error: {err:?}\n{}",
        t.daemon().log_tail(20)
    );
    let rib = t.routes("ipv4-unicast")?;
    assert!(
        rib.iter().all(|r| r.prefix.to_string() != THEIRS),
        "route still in the RIB: {rib:?}"
    );
    Ok(())
}

#[test]
fn silent_bird_is_dropped_after_hold_time() -> Result<()> {
    silent_peer(61, false)
}

#[test]
fn hold_timer_expiry_removes_routes_despite_graceful_restart() -> Result<()> {
    silent_peer(62, true)
}
