//! Graceful restart (RFC 4724) against BIRD 2, with traffic crossing the
//! routes the session carries: no ping may be lost while tartan-bgpd is
//! killed and started again (BIRD helps), nor while BIRD is (we help).
//! Run as root.
//!
//! ```text
//!  host-a ---- tartan ---------- bird ---- host-b
//!  10.61.S.2   .1  10.0.S.1    10.0.S.2  .1   10.62.S.2
//! ```
//! Tartan announces host-a's 10.61.S.0/24, BIRD announces host-b's
//! 10.62.S.0/24; the hosts default-route to their router, so a ping from
//! host-a to host-b goes out over the route tartan learned and comes back
//! over the route BIRD learned from tartan.
mod support;

use anyhow::{Context, Result, bail};
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use support::{T, start_tartan, tartan_proto_routes, wait_no_tartan_route, wait_tartan_route};
use tartan_lab::netns::{Netns, veth, wait_for};
use tartan_lab::peers::{BgpConfig, Bird, Neighbor, Route, Tartan, TartanOptions, render_tartan};
use tartan_lab::{Daemon, Family, wait_kernel_route};

const TARTAN_AS: u32 = 65001;
const BIRD_AS: u32 = 65002;
/// Restart and stale times on both sides: far longer than any wait below,
/// so that whatever is flushed within them was flushed by End-of-RIB.
const RESTART_TIME: u16 = 120;

/// Four namespaces in a line, routers forwarding.
struct Line {
    host_a: Netns,
    tartan: Netns,
    bird: Netns,
    host_b: Netns,
    s: u8,
}

impl Line {
    fn new(s: u8) -> Result<Line> {
        let l = Line {
            host_a: Netns::new("grha")?,
            tartan: Netns::new("grt")?,
            bird: Netns::new("grb")?,
            host_b: Netns::new("grhb")?,
            s,
        };
        veth(
            &l.tartan,
            &[&format!("10.0.{s}.1/24")],
            &l.bird,
            &[&format!("10.0.{s}.2/24")],
        )?;
        veth(
            &l.host_a,
            &[&format!("10.61.{s}.2/24")],
            &l.tartan,
            &[&format!("10.61.{s}.1/24")],
        )?;
        veth(
            &l.bird,
            &[&format!("10.62.{s}.1/30")],
            &l.host_b,
            &[&format!("10.62.{s}.2/30")],
        )?;
        l.host_a
            .ip(&["route", "add", "default", "via", &format!("10.61.{s}.1")])?;
        l.host_b
            .ip(&["route", "add", "default", "via", &format!("10.62.{s}.1")])?;
        for ns in [&l.tartan, &l.bird] {
            ns.exec("sysctl", &["-q", "-w", "net.ipv4.ip_forward=1"])?;
        }
        Ok(l)
    }

    fn tartan_addr(&self) -> IpAddr {
        Ipv4Addr::new(10, 0, self.s, 1).into()
    }

    fn bird_addr(&self) -> IpAddr {
        Ipv4Addr::new(10, 0, self.s, 2).into()
    }

    fn host_b(&self) -> IpAddr {
        Ipv4Addr::new(10, 62, self.s, 2).into()
    }

    /// host-a's subnet, announced by tartan.
    fn net_a(&self) -> String {
        format!("10.61.{}.0/24", self.s)
    }

    /// host-b's subnet, announced by BIRD (the link to host-b is a /30 in
    /// it, so that BIRD's own direct route does not shadow the static one).
    fn net_b(&self) -> String {
        format!("10.62.{}.0/24", self.s)
    }

    fn tartan_config(&self, routes: &[String]) -> BgpConfig {
        let mut c = BgpConfig::new(Ipv4Addr::new(10, 0, self.s, 1), TARTAN_AS)
            .neighbor(Neighbor::new(self.bird_addr(), BIRD_AS).graceful_restart(RESTART_TIME));
        for r in routes {
            c = c.route(Route::new(r));
        }
        c
    }

    fn bird_config(&self, routes: &[String]) -> BgpConfig {
        let mut c = BgpConfig::new(Ipv4Addr::new(10, 0, self.s, 2), BIRD_AS)
            .neighbor(Neighbor::new(self.tartan_addr(), TARTAN_AS).graceful_restart(RESTART_TIME));
        for r in routes {
            c = c.route(Route::new(r));
        }
        c
    }
}

fn tartan_options() -> TartanOptions {
    TartanOptions {
        restart_time: Some(RESTART_TIME),
        stale_routes_time: Some(RESTART_TIME.into()),
        ..TartanOptions::default()
    }
}

/// A `ping -i 0.05` running in the background; replies are counted by
/// sequence number, so that a packet still in flight when it is stopped
/// is not mistaken for a lost one.
struct PingStream {
    daemon: Daemon,
}

struct PingReport {
    replies: BTreeSet<u32>,
    /// Sequence numbers below the highest answered one with no reply.
    lost: Vec<u32>,
}

impl PingStream {
    fn start(ns: &Netns, to: IpAddr) -> Result<PingStream> {
        let daemon = Daemon::spawn(ns, "ping", "ping", &["-n", "-i", "0.05", &to.to_string()])?;
        Ok(PingStream { daemon })
    }

    fn replies(&self) -> BTreeSet<u32> {
        parse_replies(&self.daemon.log())
    }

    /// Waits until `n` more replies than now have come back.
    fn wait_more(&self, n: usize, what: &str) -> Result<()> {
        let start = self.replies().len();
        wait_for(&format!("{n} ping replies {what}"), T, || {
            (self.replies().len() >= start + n).then_some(())
        })
        .map_err(|e| e.context(self.daemon.log_tail(10)))
    }

    fn finish(self) -> Result<PingReport> {
        self.daemon.kill(nix::sys::signal::Signal::SIGINT)?;
        wait_for("ping to exit", T, || {
            (!self.daemon.is_running()).then_some(())
        })?;
        let log = self.daemon.log();
        let replies = parse_replies(&log);
        let Some(&last) = replies.last() else {
            bail!("no ping reply at all:\n{}", self.daemon.log_tail(10));
        };
        let lost = (1..last).filter(|s| !replies.contains(s)).collect();
        Ok(PingReport { replies, lost })
    }
}

/// icmp_seq of every "64 bytes from …: icmp_seq=N …" line.
fn parse_replies(log: &str) -> BTreeSet<u32> {
    log.lines()
        .filter(|l| l.contains("bytes from"))
        .filter_map(|l| {
            l.split_whitespace()
                .find_map(|w| w.strip_prefix("icmp_seq="))
                .and_then(|n| n.parse().ok())
        })
        .collect()
}

fn assert_no_loss(report: &PingReport, what: &str) {
    eprintln!(
        "{what}: {} replies, lost {:?}",
        report.replies.len(),
        report.lost
    );
    assert!(
        report.lost.is_empty(),
        "{what}: {} ping(s) lost (icmp_seq {:?}) of {}",
        report.lost.len(),
        report.lost,
        report.replies.last().copied().unwrap_or(0)
    );
}

/// Both sessions up, and both routes in both kernels; the ping goes through.
fn converge(l: &Line, t: &Tartan, bird: &Bird) -> Result<()> {
    bird.wait_established(T)?;
    t.wait_established(l.bird_addr(), T)?;
    wait_tartan_route(&l.tartan, &l.net_b()).map_err(|e| {
        e.context(format!(
            "RIB: {:?}\nBIRD: {:?}\nkernel: {}",
            t.get("/v1/routes").ok(),
            bird.birdc(&["show", "route", "all"]).ok(),
            l.tartan.ip(&["route"]).unwrap_or_default()
        ))
    })?;
    wait_kernel_route(&l.bird, &l.net_a(), Some("bird"), T)?;
    tartan_lab::wait_ping(&l.host_a, l.host_b(), T)
        .context("host-a cannot ping host-b across the learned routes")?;
    Ok(())
}

/// BIRD's arguments (`-f -c CONF -s SOCK -P PIDFILE`), read from its
/// command line while it runs.
fn bird_args(bird: &Bird) -> Result<Vec<String>> {
    let raw = std::fs::read(format!("/proc/{}/cmdline", bird.daemon().pid()))
        .context("BIRD's command line")?;
    let args: Vec<String> = raw
        .split(|c| *c == 0)
        .filter(|a| !a.is_empty())
        .map(|a| String::from_utf8_lossy(a).into_owned())
        .collect();
    let start = args
        .iter()
        .position(|a| a == "-f")
        .context("no -f in BIRD's command line")?;
    Ok(args[start..].to_vec())
}

/// Starts BIRD again after [`Bird::crash`] as a restarting router that
/// preserved forwarding: `bird -R` (graceful restart recovery), with
/// `graceful restart on` in its kernel protocols so that it does not prune
/// its kernel routes before it has relearned them, and with the F bit set
/// in its capability. `args` are from [`bird_args`]: same configuration
/// file, control socket and pid file, so `bird`'s queries keep working.
/// The returned guard must be dropped before `bird`.
fn restart_bird_recovering(ns: &Netns, bird: &Bird, args: &[String]) -> Result<Daemon> {
    let conf = args
        .windows(2)
        .find(|w| w[0] == "-c")
        .map(|w| w[1].clone())
        .context("no -c in BIRD's command line")?;
    let text = bird
        .config_text()
        .replace(
            "protocol kernel kernel4 {",
            "protocol kernel kernel4 { graceful restart on;",
        )
        .replace(
            "protocol kernel kernel6 {",
            "protocol kernel kernel6 { graceful restart on;",
        );
    std::fs::write(&conf, text)?;
    let mut full = vec!["-R"];
    full.extend(args.iter().map(String::as_str));
    let d = Daemon::spawn(ns, "bird-recovering", "bird", &full)?;
    wait_for("BIRD to answer again", T, || {
        bird.birdc(&["show", "status"]).ok()
    })
    .map_err(|e| e.context(d.log_tail(20)))?;
    Ok(d)
}

/// The "Neighbor capabilities" part of `birdc show protocols all`: what
/// our OPEN said.
fn neighbor_caps(show: &str) -> String {
    show.split("Neighbor capabilities")
        .nth(1)
        .and_then(|r| r.split("Session:").next())
        .unwrap_or_default()
        .to_string()
}

fn stale_in_rib(t: &Tartan, prefix: &str) -> Option<bool> {
    let routes = t.routes("ipv4-unicast").ok()?;
    let r = routes.iter().find(|r| r.prefix.to_string() == prefix)?;
    Some(r.paths.first()?.stale)
}

/// Tartan restarts (kill -9); BIRD is the helper.
#[test]
fn tartan_killed_and_restarted_loses_no_ping() -> Result<()> {
    let l = Line::new(71)?;
    let s = l.s;
    // A second prefix each way, withdrawn while tartan is down: it must be
    // flushed as stale after the restart, on each side.
    let bird_gone = format!("10.63.{s}.0/24");
    let ours_gone = format!("10.64.{s}.0/24");
    let opts = tartan_options();
    let mut t = start_tartan(
        &l.tartan,
        &l.tartan_config(&[l.net_a(), ours_gone.clone()]),
        &opts,
    )?;
    let mut bird = Bird::start(&l.bird, l.bird_config(&[l.net_b(), bird_gone.clone()]))?;
    converge(&l, &t, &bird)?;
    wait_tartan_route(&l.tartan, &bird_gone)?;
    wait_kernel_route(&l.bird, &ours_gone, Some("bird"), T)?;

    let ping = PingStream::start(&l.host_a, l.host_b())?;
    ping.wait_more(10, "before the kill")?;

    t.kill9();
    // Our kernel keeps forwarding over what we learned.
    let kept: Vec<String> = tartan_proto_routes(&l.tartan, Family::V4)
        .into_iter()
        .map(|r| r.dst)
        .collect();
    assert!(
        kept.contains(&l.net_b()) && kept.contains(&bird_gone),
        "tartan's kernel routes after kill -9: {kept:?}"
    );
    // BIRD notices, and keeps our routes as the helper.
    let proto = Bird::protocol_name(l.tartan_addr());
    wait_for("BIRD to notice the restart", T, || {
        (bird.neighbor_state(l.tartan_addr()).ok()? != "Established").then_some(())
    })?;
    eprintln!(
        "BIRD while tartan is down:\n{}",
        bird.birdc(&["show", "protocols", "all", &proto])?
    );
    // While tartan is down: BIRD stops announcing one prefix and we lose
    // one from our configuration.
    bird.reconfigure(l.bird_config(&[l.net_b()]))?;
    std::fs::write(
        t.config_path(),
        render_tartan(&l.tartan_config(&[l.net_a()]), &opts),
    )?;
    // Traffic still flows both ways while tartan is down.
    ping.wait_more(40, "while tartan-bgpd is down")?;
    wait_kernel_route(&l.bird, &l.net_a(), Some("bird"), T)?;
    wait_kernel_route(&l.bird, &ours_gone, Some("bird"), T)?;

    t.restart(&l.tartan)?;
    t.wait_established(l.bird_addr(), T)?;
    bird.wait_established(T)?;
    // BIRD's End-of-RIB reached us: what it no longer announces leaves our
    // kernel (long before the stale-routes time), the rest stays.
    wait_no_tartan_route(&l.tartan, &bird_gone).map_err(|e| e.context(t.log()))?;
    let after: Vec<String> = tartan_proto_routes(&l.tartan, Family::V4)
        .into_iter()
        .map(|r| r.dst)
        .collect();
    assert_eq!(after, vec![l.net_b()], "tartan's kernel after the restart");
    assert_eq!(stale_in_rib(&t, &l.net_b()), Some(false));
    // Ours reached BIRD: what we no longer announce leaves its table.
    wait_for(&format!("{ours_gone} flushed at BIRD"), T, || {
        bird.routes_for(&ours_gone).ok()?.is_empty().then_some(())
    })
    .map_err(|e| {
        e.context(
            bird.birdc(&["show", "protocols", "all", &proto])
                .unwrap_or_default(),
        )
    })?;
    wait_kernel_route(&l.bird, &l.net_a(), Some("bird"), T)?;
    let bird_proto = bird.birdc(&["show", "protocols", "all", &proto])?;
    eprintln!("BIRD after the restart:\n{bird_proto}");
    // Our OPEN after the restart had the R bit and the F bit for IPv4.
    let caps = neighbor_caps(&bird_proto);
    assert!(
        caps.contains("Restart recovery") && caps.contains("AF preserved: ipv4"),
        "our graceful restart capability after the restart, as BIRD saw it:\n{caps}"
    );
    let log = t.log();
    assert!(
        log.contains("End-of-RIB received"),
        "tartan did not log BIRD's End-of-RIB:\n{log}"
    );

    ping.wait_more(10, "after the restart")?;
    let report = ping.finish()?;
    assert_no_loss(&report, "tartan-bgpd kill -9 and restart");

    // The restart is over: a later session must not claim one (R bit).
    bird.birdc(&["restart", &proto])?;
    wait_for("the session to come back after a reset", T, || {
        let out = bird.birdc(&["show", "protocols", "all", &proto]).ok()?;
        (bird.neighbor_state(l.tartan_addr()).ok()? == "Established"
            && t.peer(l.bird_addr()).ok()?.uptime_seconds.is_some())
        .then_some(out)
    })?;
    t.wait_established(l.bird_addr(), T)?;
    let caps = neighbor_caps(&bird.birdc(&["show", "protocols", "all", &proto])?);
    assert!(
        !caps.contains("Restart recovery"),
        "R bit still set in a session after the restart had completed:\n{caps}"
    );
    Ok(())
}

/// BIRD restarts (crash); tartan is the helper and keeps its routes.
#[test]
fn bird_crashed_and_restarted_loses_no_ping() -> Result<()> {
    let l = Line::new(72)?;
    let t = start_tartan(&l.tartan, &l.tartan_config(&[l.net_a()]), &tartan_options())?;
    let bird = Bird::start(&l.bird, l.bird_config(&[l.net_b()]))?;
    converge(&l, &t, &bird)?;
    assert_eq!(stale_in_rib(&t, &l.net_b()), Some(false));

    let ping = PingStream::start(&l.host_a, l.host_b())?;
    ping.wait_more(10, "before the crash")?;

    let args = bird_args(&bird)?;
    bird.crash()?;
    // We notice, and keep BIRD's route, stale, in the RIB and the kernel.
    wait_for("BIRD's route to turn stale", T, || {
        stale_in_rib(&t, &l.net_b())?.then_some(())
    })
    .map_err(|e| e.context(t.log()))?;
    wait_tartan_route(&l.tartan, &l.net_b())?;
    ping.wait_more(40, "while BIRD is down")?;

    // BIRD comes back in graceful-restart recovery: it keeps its own kernel
    // routes until it has converged, and says it kept forwarding (F bit),
    // so that we keep its routes until its End-of-RIB (RFC 4724 4.2).
    let _recovering = restart_bird_recovering(&l.bird, &bird, &args)?;
    bird.wait_established(T)?;
    t.wait_established(l.bird_addr(), T)?;
    // BIRD's End-of-RIB: the route is fresh again.
    wait_for("BIRD's route to be fresh again", T, || {
        (!stale_in_rib(&t, &l.net_b())?).then_some(())
    })
    .map_err(|e| e.context(t.log()))?;
    let gr = t
        .peer(l.bird_addr())?
        .graceful_restart
        .context("graceful restart status after BIRD's restart")?;
    assert_eq!(gr.stale_routes, 0, "stale routes after BIRD's End-of-RIB");
    assert!(gr.peer_restarting, "BIRD's R bit after its restart");
    assert_eq!(gr.preserved_families, vec!["ipv4-unicast".to_string()]);
    wait_tartan_route(&l.tartan, &l.net_b())?;

    ping.wait_more(10, "after BIRD's restart")?;
    let report = ping.finish()?;
    assert_no_loss(&report, "BIRD crash and restart");
    Ok(())
}

#[test]
fn parses_ping_replies() {
    let log = "PING 10.62.71.2 (10.62.71.2) 56(84) bytes of data.\n\
               64 bytes from 10.62.71.2: icmp_seq=1 ttl=62 time=0.1 ms\n\
               From 10.61.71.1 icmp_seq=2 Destination Net Unreachable\n\
               64 bytes from 10.62.71.2: icmp_seq=3 ttl=62 time=0.1 ms\n";
    assert_eq!(parse_replies(log), BTreeSet::from([1, 3]));
}

/// Tartan restarts (kill -9) with a second graceful-restart neighbor that
/// never comes: BIRD's End-of-RIB does not end the restart, so the kernel
/// route of the previous run that BIRD no longer announces stays until
/// the selection deferral time (half the stale-routes time) is over, then
/// goes (RFC 4724 4.1).
#[test]
fn kernel_routes_of_the_previous_run_wait_for_the_selection_deferral_time() -> Result<()> {
    let l = Line::new(73)?;
    let gone = format!("10.63.{}.0/24", l.s);
    // 10.0.S.9 answers nobody: a neighbor that never comes back.
    let absent: IpAddr = Ipv4Addr::new(10, 0, l.s, 9).into();
    let config = l
        .tartan_config(&[l.net_a()])
        .neighbor(Neighbor::new(absent, BIRD_AS + 1).graceful_restart(RESTART_TIME));
    let opts = TartanOptions {
        restart_time: Some(RESTART_TIME),
        stale_routes_time: Some(12),
        ..TartanOptions::default()
    };
    let mut t = start_tartan(&l.tartan, &config, &opts)?;
    let mut bird = Bird::start(&l.bird, l.bird_config(&[l.net_b(), gone.clone()]))?;
    converge(&l, &t, &bird)?;
    wait_tartan_route(&l.tartan, &gone)?;
    t.kill9();
    bird.reconfigure(l.bird_config(&[l.net_b()]))?;
    // Before the start: the daemon's deferral ends 6 s after it at least.
    let restarted = std::time::Instant::now();
    t.restart(&l.tartan)?;
    t.wait_established(l.bird_addr(), T)?;
    wait_for("BIRD's End-of-RIB", T, || {
        t.log().contains("End-of-RIB received").then_some(())
    })?;
    // Selection still waits for the absent neighbor: the route stays.
    let kept: Vec<String> = tartan_proto_routes(&l.tartan, Family::V4)
        .into_iter()
        .map(|r| r.dst)
        .collect();
    let early = restarted.elapsed();
    if early < std::time::Duration::from_secs(5) {
        assert!(
            kept.contains(&gone),
            "{gone} left the kernel {early:?} after the restart, before the deferral time: {kept:?}"
        );
    }
    wait_no_tartan_route(&l.tartan, &gone).map_err(|e| e.context(t.log()))?;
    let waited = restarted.elapsed();
    assert!(
        waited >= std::time::Duration::from_secs(6),
        "{gone} left the kernel {waited:?} after the restart, before the deferral time"
    );
    // Whatever the machine's pace: the routes went because the deferral
    // time was over, not on BIRD's End-of-RIB.
    let log = t.log();
    let flushed: Vec<&str> = log
        .lines()
        .filter(|l| l.contains("restart over: removing kernel routes of the previous run"))
        .collect();
    assert!(
        matches!(flushed[..], [l] if l.contains("selection deferral time over")),
        "the kernel routes of the previous run did not go with the selection deferral time:\n{log}"
    );
    assert!(
        tartan_proto_routes(&l.tartan, Family::V4)
            .iter()
            .any(|r| r.dst == l.net_b()),
        "BIRD's route left the kernel too"
    );
    Ok(())
}
