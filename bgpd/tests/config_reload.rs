//! The configuration file: `--check` and start-up errors that name
//! file:line and the key, and SIGHUP reloads against live BIRD peers that
//! apply only the difference (added, removed and unchanged neighbors,
//! changed announcements) or, for a bad file, nothing at all.
//! Run as root.
mod support;

use anyhow::{Context, Result, ensure};
use std::net::{IpAddr, Ipv4Addr};
use std::process::Command;
use std::time::Duration;
use support::{T, start_tartan};
use tartan_api::bgp::{PeerStatus, SessionState};
use tartan_lab::TempDir;
use tartan_lab::netns::{Netns, veth, wait_for};
use tartan_lab::peers::{
    BgpConfig, Bird, Neighbor, Route, StateSince, Tartan, TartanOptions, render_tartan,
};

const BGPD: &str = env!("CARGO_BIN_EXE_tartan-bgpd");

/// Runs tartan-bgpd with `args` and returns (exit code, stderr + stdout).
fn bgpd(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(BGPD)
        .args(args)
        // Keep a plain start off any real socket or port.
        .env("TARTAN_BGP_SOCKET", "/nonexistent/tartan-test.sock")
        .output()
        .expect("run tartan-bgpd");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stderr),
        String::from_utf8_lossy(&out.stdout)
    );
    (out.status.code(), text)
}

const HEAD: &str = "router_id = \"192.0.2.1\"\nasn = 65001\n";

/// (file name, text, the line the error must name, words it must contain)
fn bad_files() -> Vec<(&'static str, String, usize, Vec<&'static str>)> {
    vec![
        (
            "unknown-key.toml",
            format!("{HEAD}hold = 30\n"),
            3,
            vec!["hold"],
        ),
        (
            "unknown-neighbor-key.toml",
            format!(
                "{HEAD}\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 65002\nremote_asn = 65003\n"
            ),
            7,
            vec!["remote_asn"],
        ),
        (
            "bad-address.toml",
            format!("{HEAD}\n[[neighbor]]\naddress = \"10.0.0.300\"\nasn = 65002\n"),
            5,
            vec!["address", "10.0.0.300"],
        ),
        (
            "hold-time-2.toml",
            format!("{HEAD}\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 65002\nhold_time = 2\n"),
            7,
            vec!["hold_time"],
        ),
        (
            "bad-prefix.toml",
            format!("{HEAD}\n[[announce]]\nprefix = \"10.1.2.0/33\"\n"),
            5,
            vec!["prefix"],
        ),
    ]
}

#[test]
fn check_and_start_reject_bad_files_naming_file_line_and_key() -> Result<()> {
    let dir = TempDir::new("cfgcheck")?;
    for (name, text, line, words) in bad_files() {
        let path = dir.write(name, &text)?;
        let path = path.to_str().context("path")?;
        let at = format!("{path}:{line}:");
        for args in [vec!["--config", path, "--check"], vec!["--config", path]] {
            let (code, out) = bgpd(&args);
            ensure!(
                code.is_some_and(|c| c != 0),
                "{args:?} exited {code:?} on a bad file:\n{text}\n{out}"
            );
            ensure!(out.contains(&at), "{args:?}: no `{at}` in:\n{out}");
            for w in &words {
                ensure!(out.contains(w), "{args:?}: `{w}` not named in:\n{out}");
            }
        }
    }
    let good = dir.write(
        "good.toml",
        format!(
            "{HEAD}\n[[neighbor]]\naddress = \"10.0.0.2\"\nasn = 65002\nhold_time = 9\n\n\
             [[announce]]\nprefix = \"10.1.2.0/24\"\n"
        ),
    )?;
    let (code, out) = bgpd(&["--config", good.to_str().context("path")?, "--check"]);
    ensure!(code == Some(0), "--check on a good file: {code:?}\n{out}");
    Ok(())
}

#[test]
fn check_rejects_a_missing_file() {
    let (code, out) = bgpd(&["--config", "/nonexistent/bgpd.toml", "--check"]);
    assert!(code.is_some_and(|c| c != 0), "{code:?} {out}");
    assert!(out.contains("/nonexistent/bgpd.toml"), "{out}");
}

const OUR_AS: u32 = 65001;

/// tartan-bgpd in one namespace, joined to three BIRD namespaces: link i
/// is 10.0.i.0/24 with tartan on .1 and BIRD i (AS 65100+i) on .2. Every
/// BIRD is configured to peer with tartan from the start; tartan's file
/// decides which sessions exist.
/// Fields drop in order: the daemons stop before their namespaces go.
struct Star {
    birds: Vec<Bird>,
    tartan: Option<Tartan>,
    _t_ns: Netns,
    _b_ns: Vec<Netns>,
}

fn bird_addr(i: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 0, i, 2)
}

fn bird_ip(i: u8) -> IpAddr {
    bird_addr(i).into()
}

/// tartan's configuration: neighbors `peers` (1-3), announcing `prefixes`.
fn tartan_config(peers: &[u8], prefixes: &[&str]) -> BgpConfig {
    let mut c = BgpConfig::new(Ipv4Addr::new(192, 0, 2, 1), OUR_AS).kernel(false);
    for &i in peers {
        c = c.neighbor(Neighbor::new(bird_ip(i), 65100 + u32::from(i)));
    }
    for p in prefixes {
        c = c.route(Route::new(p));
    }
    c
}

impl Star {
    fn new(prefix: &str, peers: &[u8], prefixes: &[&str]) -> Result<Star> {
        let t_ns = Netns::new(&format!("{prefix}t"))?;
        let mut b_ns = Vec::new();
        let mut birds = Vec::new();
        for i in 1..=3u8 {
            let ns = Netns::new(&format!("{prefix}{i}"))?;
            veth(
                &t_ns,
                &[&format!("10.0.{i}.1/24")],
                &ns,
                &[&format!("10.0.{i}.2/24")],
            )?;
            let c = BgpConfig::new(bird_addr(i), 65100 + u32::from(i))
                .kernel(false)
                .route(Route::new(&format!("10.{}.0.0/24", 100 + i)))
                .neighbor(Neighbor::new(Ipv4Addr::new(10, 0, i, 1).into(), OUR_AS));
            birds.push(Bird::start(&ns, c)?);
            b_ns.push(ns);
        }
        let tartan = start_tartan(
            &t_ns,
            &tartan_config(peers, prefixes),
            &TartanOptions::default(),
        )?;
        Ok(Star {
            birds,
            tartan: Some(tartan),
            _t_ns: t_ns,
            _b_ns: b_ns,
        })
    }

    fn tartan(&self) -> &Tartan {
        self.tartan.as_ref().expect("tartan running")
    }

    fn bird(&self, i: u8) -> &Bird {
        &self.birds[usize::from(i) - 1]
    }

    /// BIRD i's session state with tartan.
    fn bird_state(&self, i: u8) -> String {
        self.bird(i)
            .neighbor_state(Ipv4Addr::new(10, 0, i, 1).into())
            .unwrap_or_default()
    }

    /// The "Since" column of BIRD i's `show protocols` row for tartan: the
    /// time its session last changed state.
    fn bird_since(&self, i: u8) -> Result<StateSince> {
        self.bird(i).state_since(Ipv4Addr::new(10, 0, i, 1).into())
    }

    fn wait_up(&self, i: u8) -> Result<()> {
        self.tartan().wait_established(bird_ip(i), T)?;
        wait_for(&format!("BIRD {i} Established"), T, || {
            (self.bird_state(i) == "Established").then_some(())
        })
    }

    fn peer(&self, i: u8) -> Result<PeerStatus> {
        self.tartan().peer(bird_ip(i))
    }

    fn bird_has(&self, i: u8, prefix: &str) -> bool {
        self.bird(i)
            .routes_for(prefix)
            .map(|r| r.iter().any(|r| r.proto.starts_with("n_")))
            .unwrap_or(false)
    }

    fn wait_bird_route(&self, i: u8, prefix: &str, present: bool) -> Result<()> {
        wait_for(&format!("BIRD {i}: {prefix} present={present}"), T, || {
            (self.bird_has(i, prefix) == present).then_some(())
        })
    }

    /// Writes `text` as tartan's file, sends SIGHUP, and waits for the log
    /// to report the outcome (`needle`).
    fn reload(&self, text: &str, needle: &str) -> Result<()> {
        let before = self.tartan().log().matches(needle).count();
        self.tartan().reload(text)?;
        wait_for(&format!("`{needle}` in tartan's log"), T, || {
            (self.tartan().log().matches(needle).count() > before).then_some(())
        })
        .map_err(|e| e.context(self.tartan().daemon().log_tail(30)))?;
        Ok(())
    }
}

#[test]
fn sighup_applies_only_the_difference() -> Result<()> {
    let s = Star::new("crl", &[1, 2], &["10.91.0.0/24"])?;
    s.wait_up(1)?;
    s.wait_up(2)?;
    s.wait_bird_route(1, "10.91.0.0/24", true)?;
    s.wait_bird_route(2, "10.91.0.0/24", true)?;
    // BIRD 3 keeps trying; tartan does not know it yet.
    ensure!(s.bird_state(3) != "Established");

    let before = s.peer(1)?;
    let since_before = s.bird_since(1)?;
    ensure!(before.state == SessionState::Established);
    // Uptime has whole seconds: let some pass, so growth is visible.
    std::thread::sleep(Duration::from_millis(2100));

    // Add 3, remove 2, keep 1; announce 10.92 instead of 10.91.
    let new = render_tartan(
        &tartan_config(&[1, 3], &["10.92.0.0/24"]),
        &TartanOptions::default(),
    );
    s.reload(&new, "configuration reloaded")?;

    // Added: comes up and gets the current announcement.
    s.wait_up(3)?;
    s.wait_bird_route(3, "10.92.0.0/24", true)?;
    ensure!(!s.bird_has(3, "10.91.0.0/24"), "BIRD 3 got the old route");

    // Removed: BIRD 2 sees its session closed, tartan no longer lists it.
    wait_for("BIRD 2's session to close", T, || {
        (s.bird_state(2) != "Established").then_some(())
    })?;
    wait_for("tartan to forget 10.0.2.2", T, || {
        s.tartan()
            .peers()
            .ok()
            .filter(|p| !p.iter().any(|p| p.address == bird_ip(2)))
    })?;
    s.wait_bird_route(2, "10.91.0.0/24", false)?;

    // Changed announcement: BIRD 1 gets the new route, loses the old one.
    s.wait_bird_route(1, "10.92.0.0/24", true)?;
    s.wait_bird_route(1, "10.91.0.0/24", false)?;

    // Unchanged: the session with BIRD 1 was never reset.
    let after = s.peer(1)?;
    ensure!(
        after.state == SessionState::Established,
        "peer 1: {after:?}"
    );
    ensure!(
        after.messages.received.open == before.messages.received.open
            && after.messages.sent.open == before.messages.sent.open,
        "session with BIRD 1 re-opened: before {:?}, after {:?}",
        before.messages,
        after.messages
    );
    let (up0, up1) = (
        before.uptime_seconds.context("no uptime before")?,
        after.uptime_seconds.context("no uptime after")?,
    );
    ensure!(
        up1 >= up0 + 2,
        "uptime did not keep growing: {up0} -> {up1}"
    );
    ensure!(s.bird_state(1) == "Established");
    ensure!(
        s.bird_since(1)?.same_as(since_before),
        "BIRD 1's session changed state: since {since_before:?} -> {:?}",
        s.bird_since(1)?
    );
    ensure!(
        s.bird(1)
            .birdc(&[
                "show",
                "protocols",
                "all",
                &Bird::protocol_name("10.0.1.1".parse()?)
            ])?
            .contains("Established"),
    );
    Ok(())
}

#[test]
fn sighup_with_a_bad_file_keeps_the_running_configuration() -> Result<()> {
    let s = Star::new("crb", &[1, 2], &["10.93.0.0/24"])?;
    s.wait_up(1)?;
    s.wait_up(2)?;
    s.wait_bird_route(1, "10.93.0.0/24", true)?;
    let before = s.tartan().peers()?;
    let since = [s.bird_since(1)?, s.bird_since(2)?];
    // A reset after the reload must show as a later state change.
    std::thread::sleep(Duration::from_millis(300));

    // Drops neighbor 2 and adds 3, but line 4 is wrong: nothing applies.
    let bad = format!(
        "{}\n\n[[neighbor]]\naddress = \"10.0.1.2\"\nasn = 65101\nhold_time = 2\n\n\
         [[neighbor]]\naddress = \"10.0.3.2\"\nasn = 65103\n",
        "router_id = \"192.0.2.1\"\nasn = 65001\nconnect_retry = 1"
    );
    // Line 8 holds hold_time (lines: 1 router_id, 2 asn, 3 connect_retry,
    // 4 blank, 5 [[neighbor]], 6 address, 7 asn, 8 hold_time).
    s.reload(&bad, "reload failed")?;
    let conf = s.tartan().config_path().display().to_string();
    let log = s.tartan().log();
    let line = log
        .lines()
        .rev()
        .find(|l| l.contains("reload failed"))
        .context("no reload error")?;
    ensure!(
        line.contains(&format!("{conf}:8:")) && line.contains("hold_time"),
        "the error does not name {conf}:8 and hold_time: {line}"
    );

    // Still running, same sessions, nothing re-opened, no new peer.
    std::thread::sleep(Duration::from_secs(3));
    ensure!(s.tartan().daemon().is_running(), "tartan-bgpd exited");
    let after = s.tartan().peers()?;
    ensure!(
        after.len() == before.len(),
        "peers: {before:?} -> {after:?}"
    );
    for (b, a) in before.iter().zip(&after) {
        ensure!(a.address == b.address && a.state == SessionState::Established);
        ensure!(
            a.messages.received.open == b.messages.received.open,
            "session with {} re-opened",
            a.address
        );
    }
    let since_after = [s.bird_since(1)?, s.bird_since(2)?];
    ensure!(
        since_after[0].same_as(since[0]) && since_after[1].same_as(since[1]),
        "BIRD's session start times moved: {since:?} -> {since_after:?}"
    );
    ensure!(s.bird_state(3) != "Established", "BIRD 3 came up");
    ensure!(s.bird_has(1, "10.93.0.0/24"));

    // A good file afterwards still applies.
    let good = render_tartan(
        &tartan_config(&[1, 2, 3], &["10.93.0.0/24"]),
        &TartanOptions::default(),
    );
    s.reload(&good, "configuration reloaded")?;
    s.wait_up(3)?;
    Ok(())
}
