//! BFD (RFC 5880/5881/5882) between tartan-bgpd and FRR's bfdd, and BIRD's
//! BFD: the session
//! comes up with the configured timers negotiated as RFC 5880 6.8.2–6.8.4
//! say, and a cut path (every packet dropped) brings the BGP session down and
//! the peer's route out of the kernel long before the 90 s hold time.
use anyhow::{Result, bail};
use serde_json::Value;
use std::net::IpAddr;
use std::time::{Duration, Instant};
use tartan_lab::netns::{Netns, run, wait_for};
use tartan_lab::peers::{
    BgpConfig, Bird, Frr, Neighbor, Route, Tartan, TartanOptions, bgpd_binary, render_tartan,
};
use tartan_lab::{Family, Pair, kernel_routes, wait_kernel_route};

use tartan_tests::peering::PEER_WAIT as T;

const PREFIX: &str = "198.51.100.0/24";

fn num(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64)
}

/// Load the nft `script` in `ns` (through a file, as `nft -f` wants).
fn nft_script(ns: &Netns, name: &str, script: &str) -> Result<()> {
    let path = std::env::temp_dir().join(format!("{name}-{}.nft", std::process::id()));
    std::fs::write(&path, script)?;
    let r = run(ns.command("nft").arg("-f").arg(&path));
    let _ = std::fs::remove_file(&path);
    r.map(|_| ())
}

/// Drop every packet in and out of `ns` (`on`), or stop dropping.
fn cut_path(ns: &Netns, on: bool) -> Result<()> {
    let script = if on {
        "table inet tartan-test-cut {\n chain in { type filter hook input priority -300; policy drop; }\n chain out { type filter hook output priority -300; policy drop; }\n}\n"
    } else {
        "delete table inet tartan-test-cut\n"
    };
    nft_script(ns, "tartan-test-cut", script)
}

/// True (and says why) when FRR's bfdd is not installed.
fn no_bfdd() -> bool {
    let missing = !std::path::Path::new("/usr/lib/frr/bfdd").exists();
    if missing {
        eprintln!("skipped: /usr/lib/frr/bfdd is not installed (Debian package frr)");
    }
    missing
}

/// BFD timers of one side: required min receive, desired min transmit
/// (ms), detect multiplier.
type Timers = (u32, u32, u8);

/// A peer started by `start` on `p.b` announcing `prefix`, and
/// tartan-bgpd on `p.a`, each with BFD at its timers, over the addresses
/// `(a, b)`; returned once the BGP session is Established. With `slow`,
/// both keep routes for graceful restart (120 s) and Tartan's hold time is
/// 90 s, so that only BFD can take the route away quickly.
fn start_both<P>(
    p: &Pair,
    (a, b): (IpAddr, IpAddr),
    (ours, theirs): (Timers, Timers),
    prefix: &str,
    slow: bool,
    start: impl FnOnce(&Netns, BgpConfig) -> Result<P>,
) -> Result<(P, Tartan)> {
    let neighbor = |addr: IpAddr, asn, local: IpAddr, (rx, tx, mult): Timers| {
        let n = Neighbor::new(addr, asn)
            .local_address(local)
            .bfd(rx, tx, mult);
        if slow { n.graceful_restart(120) } else { n }
    };
    let peer = start(
        &p.b,
        BgpConfig::new(p.b_v4(), 65002)
            .neighbor(neighbor(a, 65001, b, theirs))
            .route(Route::new(prefix)),
    )?;
    let opts = TartanOptions {
        hold_time: slow.then_some(90),
        ..Default::default()
    };
    let tartan = Tartan::start(
        &p.a,
        &bgpd_binary(),
        &BgpConfig::new(p.a_v4(), 65001).neighbor(neighbor(b, 65002, a, ours)),
        &opts,
    )?;
    tartan.wait_established(b, T)?;
    Ok((peer, tartan))
}

#[test]
fn frr_bfd_negotiates_and_a_cut_link_withdraws_at_once() -> Result<()> {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    if no_bfdd() {
        return Ok(());
    }
    let p = Pair::with_subnet("bfd", 41)?;
    let (a, b): (IpAddr, IpAddr) = (p.a_v4().into(), p.b_v4().into());
    // Tartan: send every 100 ms, accept every 100 ms, multiplier 3.
    // FRR: accept no faster than 200 ms, send every 150 ms, multiplier 4.
    let timers = ((100, 100, 3), (200, 150, 4));
    let (frr, tartan) = start_both(&p, (a, b), timers, PREFIX, true, Frr::start)?;
    let bfd = wait_for("tartan BFD up", T, || {
        tartan.peer(b).ok()?.bfd.filter(|s| s.state == "up")
    })?;
    assert!(
        !bfd.multihop,
        "a directly connected peer is single hop: {bfd:?}"
    );
    // Our transmit interval: the slower of our 100 ms and FRR's 200 ms
    // receive; detection: FRR's multiplier 4 × max(our 100 ms receive, its
    // 150 ms transmit).
    let negotiated = wait_for("tartan BFD timers negotiated", T, || {
        let s = tartan.peer(b).ok()?.bfd?;
        (s.tx_interval_ms == Some(200) && s.detection_time_ms == Some(600)).then_some(s)
    });
    if negotiated.is_err() {
        bail!("timers not negotiated: {bfd:?}\n{}", tartan.log());
    }
    let theirs = wait_for("FRR BFD peer up", T, || {
        frr.bfd_peer(a)
            .filter(|v| v.get("status").and_then(Value::as_str) == Some("up"))
    })?;
    assert_eq!(
        num(&theirs, "remote-receive-interval"),
        Some(100),
        "{theirs}"
    );
    assert_eq!(
        num(&theirs, "remote-transmit-interval"),
        Some(100),
        "{theirs}"
    );
    assert_eq!(
        num(&theirs, "remote-detect-multiplier"),
        Some(3),
        "{theirs}"
    );
    assert_eq!(num(&theirs, "receive-interval"), Some(200), "{theirs}");
    assert_eq!(num(&theirs, "transmit-interval"), Some(150), "{theirs}");
    wait_kernel_route(&p.a, PREFIX, None, T)?;

    cut_and_restore(&p, &tartan, b)
}

/// Cuts the path on Tartan's side: the BGP session must go down and the
/// peer's route leave the kernel (well before the hold time); then BFD and
/// BGP must come back with the route.
fn cut_and_restore(p: &Pair, tartan: &Tartan, b: IpAddr) -> Result<()> {
    cut_and_restore_prefix(p, tartan, b, PREFIX)
}

fn cut_and_restore_prefix(p: &Pair, tartan: &Tartan, b: IpAddr, prefix: &str) -> Result<()> {
    let family = if prefix.contains(':') {
        Family::V6
    } else {
        Family::V4
    };
    // Cut the path both ways on Tartan's side (this kernel may lack netem;
    // an nftables drop is the same cut and leaves the link up, so that the
    // kernel itself removes nothing).
    cut_path(&p.a, true)?;
    let cut = Instant::now();
    wait_for(
        "route gone from the kernel",
        Duration::from_secs(10),
        || {
            let routes = kernel_routes(&p.a, family, None).ok()?;
            (!routes.iter().any(|r| r.dst == prefix)).then_some(())
        },
    )?;
    let gone = cut.elapsed();
    // Detection is 600 ms; the hold time (90 s) and graceful restart
    // (120 s, RFC 5882 4.3 says not to keep routes) would take far longer.
    assert!(gone < Duration::from_secs(5), "route left after {gone:?}");
    let peer = tartan.peer(b)?;
    assert_ne!(peer.state.to_string(), "Established");
    assert_eq!(peer.bfd.as_ref().map(|s| s.state.as_str()), Some("down"));
    assert_eq!(
        peer.bfd.as_ref().map(|s| s.diagnostic.as_str()),
        Some("ControlDetectionTimeExpired")
    );
    eprintln!("route withdrawn {gone:?} after the cut");

    // Restore: BFD and then BGP come back, and the route with them.
    cut_path(&p.a, false)?;
    tartan.wait_established(b, T)?;
    wait_kernel_route(&p.a, prefix, None, T)?;
    assert_eq!(tartan.peer(b)?.bfd.map(|s| s.state), Some("up".to_string()));
    Ok(())
}

#[test]
fn bird_bfd_negotiates_and_a_cut_link_withdraws_at_once() -> Result<()> {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let p = Pair::with_subnet("bfe", 42)?;
    let (a, b): (IpAddr, IpAddr) = (p.a_v4().into(), p.b_v4().into());
    let timers = ((100, 100, 3), (200, 150, 4));
    let (bird, tartan) = start_both(&p, (a, b), timers, PREFIX, true, Bird::start)?;
    let negotiated = wait_for("tartan BFD up with negotiated timers", T, || {
        let s = tartan.peer(b).ok()?.bfd?;
        (s.state == "up" && s.tx_interval_ms == Some(200) && s.detection_time_ms == Some(600))
            .then_some(s)
    });
    if let Err(e) = negotiated {
        bail!("{e}: {:?}\n{}", tartan.peer(b)?.bfd, tartan.log());
    }
    // BIRD sends at max(its 150 ms, our 100 ms receive) and times out after
    // our multiplier 3 × max(its 200 ms receive, our 100 ms transmit).
    let line = wait_for("BIRD BFD session up", T, || {
        bird.bfd_session(a)
            .filter(|w| w.get(2).map(String::as_str) == Some("Up"))
    })?;
    let n = line.len();
    assert!(n >= 6, "{line:?}");
    assert_eq!(line[n - 2], "0.150", "interval: {line:?}");
    assert_eq!(line[n - 1], "0.600", "timeout: {line:?}");
    wait_kernel_route(&p.a, PREFIX, None, T)?;
    cut_and_restore(&p, &tartan, b)
}

/// Open file descriptors of a process.
fn fd_count(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd"))
        .map(|d| d.count())
        .unwrap_or(0)
}

/// Drop a random 30 % of the packets in and out of `ns` (`on`), or stop.
fn lossy_path(ns: &Netns, on: bool) -> Result<()> {
    let script = if on {
        "table inet tartan-test-loss {\n chain in { type filter hook input priority -300; numgen random mod 100 < 30 drop; }\n chain out { type filter hook output priority -300; numgen random mod 100 < 30 drop; }\n}\n"
    } else {
        "delete table inet tartan-test-loss\n"
    };
    nft_script(ns, "tartan-test-loss", script)
}

#[test]
fn bfd_flapping_under_loss_neither_crashes_nor_leaks() -> Result<()> {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    if no_bfdd() {
        return Ok(());
    }
    let p = Pair::with_subnet("bff", 43)?;
    let (a, b): (IpAddr, IpAddr) = (p.a_v4().into(), p.b_v4().into());
    // Multiplier 2 at 50 ms: with 30 % loss the session flaps often.
    let timers = ((50, 50, 2), (50, 50, 2));
    let (frr, tartan) = start_both(&p, (a, b), timers, PREFIX, false, Frr::start)?;
    let pid = tartan.daemon().pid();
    let fds_before = fd_count(pid);
    let transitions_before = tartan.peer(b)?.bfd.map_or(0, |s| s.transitions);
    lossy_path(&p.a, true)?;
    std::thread::sleep(Duration::from_secs(8));
    lossy_path(&p.a, false)?;
    assert!(tartan.daemon().is_running(), "{}", tartan.log());
    let flaps = tartan.peer(b)?.bfd.map_or(0, |s| s.transitions) - transitions_before;
    eprintln!("{flaps} BFD transitions under 30 % loss");
    assert!(flaps >= 2, "the session should have flapped: {flaps}");
    // Back to normal: BFD, BGP and the route return; no descriptor leaked
    // (one sending socket per BFD session, BGP connections replaced).
    tartan.wait_established(b, T)?;
    if let Err(e) = wait_kernel_route(&p.a, PREFIX, None, T) {
        bail!("{e}: {:?}\n{}", tartan.peer(b)?, tartan.log());
    }
    // Closed connections linger until the peer closes its side, at most
    // ten seconds (bgpd's LINGER).
    let settled = wait_for("descriptors back", Duration::from_secs(15), || {
        (fd_count(pid) <= fds_before + 2).then_some(())
    });
    if settled.is_err() {
        bail!("descriptors {fds_before} → {}", fd_count(pid));
    }
    drop(frr);
    Ok(())
}

#[test]
fn frr_bfd_over_ipv6_comes_up_and_a_cut_withdraws() -> Result<()> {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    if no_bfdd() {
        return Ok(());
    }
    const V6: &str = "2001:db8:100::/48";
    let p = Pair::with_subnet("bf6", 46)?;
    let (a, b): (IpAddr, IpAddr) = (p.a_v6().into(), p.b_v6().into());
    let timers = ((100, 100, 3), (100, 100, 3));
    let (frr, tartan) = start_both(&p, (a, b), timers, V6, true, Frr::start)?;
    wait_for("tartan BFD up over IPv6", T, || {
        tartan.peer(b).ok()?.bfd.filter(|s| s.state == "up")
    })?;
    wait_for("FRR BFD peer up over IPv6", T, || {
        frr.bfd_peer(a)
            .filter(|v| v.get("status").and_then(Value::as_str) == Some("up"))
    })?;
    wait_kernel_route(&p.a, V6, None, T)?;
    cut_and_restore_prefix(&p, &tartan, b, V6)
}

/// New BFD timers in tartan's file (SIGHUP) go to the running BFD session
/// as a Poll sequence (RFC 5880 section 6.8.3): FRR sees them, and neither
/// the BFD session nor the BGP session it guards goes down.
#[test]
fn new_bfd_timers_apply_without_a_reset() -> Result<()> {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    if no_bfdd() {
        return Ok(());
    }
    let p = Pair::with_subnet("bft", 47)?;
    let (a, b): (IpAddr, IpAddr) = (p.a_v4().into(), p.b_v4().into());
    let timers = ((100, 100, 3), (100, 100, 3));
    let (frr, tartan) = start_both(&p, (a, b), timers, PREFIX, false, Frr::start)?;
    wait_for("FRR BFD peer up", T, || {
        frr.bfd_peer(a)
            .filter(|v| v.get("status").and_then(Value::as_str) == Some("up"))
    })?;
    let before = tartan.peer(b)?;
    let bfd_before = before.bfd.clone().expect("BFD status");
    assert_eq!(bfd_before.state, "up");
    let frr_up = |v: &Value| num(v, "uptime");
    let frr_before = frr.bfd_peer(a).and_then(|v| frr_up(&v));
    // Uptimes count whole seconds: let some pass, so a reset shows.
    std::thread::sleep(Duration::from_millis(2100));

    let changed = BgpConfig::new(p.a_v4(), 65001)
        .neighbor(Neighbor::new(b, 65002).local_address(a).bfd(300, 250, 5));
    tartan.reload(&render_tartan(&changed, &TartanOptions::default()))?;
    let theirs = wait_for("FRR to see the new timers", T, || {
        frr.bfd_peer(a).filter(|v| {
            num(v, "remote-receive-interval") == Some(300)
                && num(v, "remote-transmit-interval") == Some(250)
                && num(v, "remote-detect-multiplier") == Some(5)
        })
    })
    .map_err(|e| e.context(tartan.log()))?;
    assert_eq!(
        theirs.get("status").and_then(Value::as_str),
        Some("up"),
        "{theirs}"
    );
    // Our side: the new timers in force, the session never left Up.
    let after = wait_for("tartan's detection time from the new timers", T, || {
        tartan
            .peer(b)
            .ok()
            .filter(|s| s.bfd.as_ref().and_then(|x| x.tx_interval_ms) == Some(250))
    })?;
    let bfd_after = after.bfd.clone().expect("BFD status");
    assert_eq!(bfd_after.state, "up");
    assert_eq!(
        bfd_after.transitions, bfd_before.transitions,
        "the BFD session changed state: {bfd_before:?} -> {bfd_after:?}"
    );
    assert_eq!(
        (
            after.messages.received.open,
            after.messages.sent.open,
            &after.state
        ),
        (
            before.messages.received.open,
            before.messages.sent.open,
            &before.state
        ),
        "the BGP session was reset"
    );
    let (up0, up1) = (
        before.uptime_seconds.unwrap_or(0),
        after.uptime_seconds.unwrap_or(0),
    );
    assert!(up1 >= up0 + 2, "BGP uptime {up0} s -> {up1} s: reset");
    let frr_after = frr_up(&theirs);
    assert!(
        frr_before.is_some() && frr_after >= frr_before.map(|t| t + 2),
        "FRR's BFD uptime {frr_before:?} -> {frr_after:?}: reset\n{theirs}"
    );
    Ok(())
}
