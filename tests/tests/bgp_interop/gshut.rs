//! RFC 8326 graceful shutdown against BIRD (acceptance 4 of issue 19): two
//! tartan-bgpd nodes announce the same prefix (an anycast address on each)
//! to a BIRD iBGP peer. `tartanctl node drain` on the node BIRD prefers
//! moves BIRD's best path to the other node while the drained node's
//! session is still up (its path now has LOCAL_PREF 0 and the
//! GRACEFUL_SHUTDOWN community), then the session closes; a ping from
//! BIRD's side to the anycast address loses no packet throughout. The same
//! on SIGTERM with `--shutdown-drain`.

use std::net::IpAddr;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::Result;
use nix::sys::signal::Signal;
use tartan_lab::netns::{Netns, veth, wait_for};
use tartan_lab::peers::{BgpConfig, Bird, Neighbor, Route, TartanOptions, render_tartan};
use tartan_lab::{Daemon, TempDir};

const AS: u32 = 64512;
const PREFIX: &str = "10.77.0.0/24";
const ANYCAST: &str = "10.77.0.1";
/// `tartanctl node drain --wait`.
const WAIT: u64 = 4;

/// Three namespaces on one bridge: 0 is BIRD, 1 and 2 run tartan-bgpd.
struct Lan {
    nodes: Vec<Netns>,
    _switch: Netns,
}

impl Lan {
    fn new() -> Result<Lan> {
        let switch = Netns::new("gss")?;
        switch.ip(&["link", "add", "br0", "type", "bridge"])?;
        switch.ip(&["link", "set", "br0", "up"])?;
        let mut nodes = Vec::new();
        for i in 0..3 {
            let ns = Netns::new(&format!("gs{i}"))?;
            let addr = format!("{}/24", addr(i));
            let (_, port) = veth(&ns, &[&addr], &switch, &[])?;
            switch.ip(&["link", "set", &port, "master", "br0"])?;
            nodes.push(ns);
        }
        Ok(Lan {
            nodes,
            _switch: switch,
        })
    }
}

fn addr(i: usize) -> IpAddr {
    IpAddr::from([10, 0, 77, i as u8 + 1])
}

fn router_id(i: usize) -> std::net::Ipv4Addr {
    std::net::Ipv4Addr::new(10, 0, 77, i as u8 + 1)
}

/// BIRD's paths for the prefix: (next hop, primary, text).
fn bird_paths(bird: &Bird) -> Vec<(Option<IpAddr>, bool, String)> {
    bird.routes_for(PREFIX)
        .unwrap_or_default()
        .into_iter()
        .map(|r| (r.next_hop(), r.primary, r.text.clone()))
        .collect()
}

/// The lab: BIRD on node 0 peering with tartan-bgpd on nodes 1 and 2,
/// which both announce the prefix; returns once BIRD holds both paths,
/// with the index of the node whose path BIRD prefers.
struct Setup {
    bird: Bird,
    tartans: Vec<Daemon>,
    sockets: Vec<std::path::PathBuf>,
    lan: Lan,
    _dir: TempDir,
}

fn setup(extra: &[&str]) -> Result<(Setup, usize)> {
    let lan = Lan::new()?;
    let bird_cfg = BgpConfig::new(router_id(0), AS)
        .neighbor(Neighbor::new(addr(1), AS))
        .neighbor(Neighbor::new(addr(2), AS));
    let bird = Bird::start(&lan.nodes[0], bird_cfg)?;
    let bgpd = tartan_tests::bins::target_bin("tartan-bgpd");
    let dir = TempDir::new("gshut")?;
    let (mut tartans, mut sockets) = (Vec::new(), Vec::new());
    for i in 1..3 {
        lan.nodes[i].ip(&["addr", "add", &format!("{ANYCAST}/32"), "dev", "lo"])?;
        let cfg = BgpConfig::new(router_id(i), AS)
            .kernel(false)
            .neighbor(Neighbor::new(addr(0), AS))
            .route(Route::new(PREFIX));
        let conf = dir.write(
            &format!("bgpd-{i}.toml"),
            render_tartan(&cfg, &TartanOptions::default()),
        )?;
        let socket = dir.join(&format!("bgpd-{i}.sock"));
        let mut cmd = lan.nodes[i].command(&bgpd.display().to_string());
        cmd.arg("--config").arg(&conf).arg("--socket").arg(&socket);
        cmd.args(extra);
        tartans.push(Daemon::start(&format!("bgpd-{i}"), cmd)?);
        sockets.push(socket);
    }
    bird.wait_established(Duration::from_secs(30))?;
    wait_for("both paths at BIRD", Duration::from_secs(30), || {
        (bird_paths(&bird).len() == 2).then_some(())
    })?;
    let best = bird_paths(&bird)
        .iter()
        .find(|p| p.1)
        .and_then(|p| p.0)
        .expect("a primary path");
    let drained = if best == addr(1) { 1 } else { 2 };
    assert!(lan.nodes[0].exec("ping", &["-c1", "-W1", ANYCAST]).is_ok());
    Ok((
        Setup {
            bird,
            tartans,
            sockets,
            lan,
            _dir: dir,
        },
        drained,
    ))
}

/// Pings every 20 ms from BIRD's node, long enough to cover the drain and
/// the close; the count sent.
fn start_pings(s: &Setup) -> Result<(std::process::Child, String)> {
    let count = ((WAIT + 4) * 50).to_string();
    let ping = Command::new("ip")
        .args([
            "netns",
            "exec",
            s.lan.nodes[0].name(),
            "ping",
            "-q",
            "-i",
            "0.02",
        ])
        .args(["-c", &count, "-W", "1", ANYCAST])
        .stdout(std::process::Stdio::piped())
        .spawn()?;
    std::thread::sleep(Duration::from_millis(500));
    Ok((ping, count))
}

/// After a drain of node `drained` began at `started`: BIRD's best moves
/// to the other node while the drained session is still up, then the
/// session closes with a Cease, and no ping was lost.
fn check_drain(
    s: &Setup,
    drained: usize,
    started: Instant,
    ping: std::process::Child,
    count: &str,
) -> Result<()> {
    let bird = &s.bird;
    let other = 3 - drained;
    let log = || s.tartans[drained - 1].log_tail(20);
    let moved = wait_for(
        "BIRD's best path on the other node",
        Duration::from_secs(WAIT),
        || {
            let p = bird_paths(bird);
            let best_other = p.iter().any(|x| x.1 && x.0 == Some(addr(other)));
            let drained_marked = p.iter().any(|x| {
                x.0 == Some(addr(drained))
                    && x.2.contains("BGP.local_pref: 0")
                    && x.2.contains("(65535,0)")
            });
            (best_other && drained_marked).then_some(p)
        },
    );
    let moved = moved.unwrap_or_else(|e| panic!("{e}\n{:#?}\n{}", bird_paths(bird), log()));
    let after = started.elapsed();
    assert_eq!(
        bird.neighbor_state(addr(drained))?,
        "Established",
        "the session closed before the best path moved"
    );
    eprintln!("BIRD's best path moved {after:?} after the drain began: {moved:#?}");

    // Then the session closes (Cease) and stays down; the path is gone.
    wait_for(
        "the drained session closed",
        Duration::from_secs(WAIT + 5),
        || {
            (bird.neighbor_state(addr(drained)).ok()? != "Established"
                && bird_paths(bird).len() == 1)
                .then_some(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", log()));
    assert!(
        started.elapsed() >= Duration::from_secs(WAIT - 1),
        "closed before the wait"
    );
    let last = bird.birdc(&[
        "show",
        "protocols",
        "all",
        &Bird::protocol_name(addr(drained)),
    ])?;
    assert!(
        last.to_lowercase().contains("administrative shutdown"),
        "BIRD does not show a Cease/Administrative Shutdown:\n{last}"
    );

    let summary = ping.wait_with_output()?;
    let text = String::from_utf8_lossy(&summary.stdout);
    assert!(
        text.contains(&format!("{count} packets transmitted, {count} received")),
        "pings lost during the drain:\n{text}"
    );
    Ok(())
}

#[test]
fn drain_moves_birds_best_path_before_the_session_closes() -> Result<()> {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let (s, drained) = setup(&[])?;
    let (ping, count) = start_pings(&s)?;
    let out = Command::new(tartan_tests::bins::target_bin("tartanctl"))
        .arg("--bgp-socket")
        .arg(&s.sockets[drained - 1])
        .args(["node", "drain", "--wait", &format!("{WAIT}s"), "--no-wait"])
        .output()?;
    assert!(
        out.status.success(),
        "tartanctl node drain: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    check_drain(&s, drained, Instant::now(), ping, &count)
}

#[test]
fn sigterm_with_shutdown_drain_drains_then_stops() -> Result<()> {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let wait = WAIT.to_string();
    let (s, drained) = setup(&["--shutdown-drain", &wait])?;
    let (ping, count) = start_pings(&s)?;
    let d = &s.tartans[drained - 1];
    d.kill(Signal::SIGTERM)?;
    check_drain(&s, drained, Instant::now(), ping, &count)?;
    wait_for("tartan-bgpd to exit", Duration::from_secs(5), || {
        (!d.is_running()).then_some(())
    })
    .unwrap_or_else(|e| panic!("{e}\n{}", d.log_tail(20)));
    Ok(())
}
