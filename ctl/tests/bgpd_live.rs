//! The built `tartanctl` against a live tartan-bgpd peering with BIRD in
//! two lab namespaces. Run as root, after tartan-bgpd was built
//! (`cargo test --workspace` builds it; or set `TARTAN_BGPD`).
use anyhow::{Context, Result, ensure};
use serde_json::Value;
use std::net::Ipv4Addr;
use std::process::Command;
use std::time::Duration;
use tartan_lab::Pair;
use tartan_lab::peers::{BgpConfig, Bird, Neighbor, Route, Tartan, TartanOptions, bgpd_binary};

const T: Duration = Duration::from_secs(30);

fn tartanctl(socket: &std::path::Path, args: &[&str]) -> Result<String> {
    let out = Command::new(env!("CARGO_BIN_EXE_tartanctl"))
        .arg("--bgp-socket")
        .arg(socket)
        .args(args)
        .output()?;
    ensure!(
        out.status.success(),
        "tartanctl {args:?}: {}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8(out.stdout)?)
}

/// "Routes:  1 imported, 2 exported, …" of BIRD's session: what it sent.
fn bird_exported(bird: &Bird, protocol: &str) -> Result<u64> {
    let out = bird.birdc(&["show", "protocols", "all", protocol])?;
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("Routes:"))
        .with_context(|| format!("no Routes: line in {out}"))?;
    let n = line
        .split(',')
        .find(|p| p.contains("exported"))
        .and_then(|p| p.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .with_context(|| format!("no export count in {line}"))?;
    Ok(n)
}

#[test]
fn peers_against_a_live_bgpd() -> Result<()> {
    let binary = bgpd_binary();
    ensure!(
        binary.exists(),
        "{} is missing: build it first (cargo build -p tartan-bgpd) or set TARTAN_BGPD",
        binary.display()
    );
    let p = Pair::new("ctl")?;
    let bird_cfg = BgpConfig::new(p.a_v4(), 65002)
        .kernel(false)
        .route(Route::new("10.202.0.0/24"))
        .route(Route::new("10.203.0.0/24"))
        .route(Route::new("10.204.0.0/24"))
        .neighbor(Neighbor::new(p.b_v4().into(), 65001));
    let bird = Bird::start(&p.a, bird_cfg)?;
    let ours = BgpConfig::new(Ipv4Addr::new(192, 0, 2, 1), 65001)
        .kernel(false)
        .route(Route::new("10.201.0.0/24"))
        .neighbor(Neighbor::new(p.a_v4().into(), 65002));
    let tartan = Tartan::start(&p.b, &binary, &ours, &TartanOptions::default())?;
    tartan.wait_established(p.a_v4().into(), T)?;
    bird.wait_established(T)?;
    let protocol = Bird::protocol_name(p.b_v4().into());
    // Wait until tartan holds everything BIRD sent.
    let sent = tartan_lab::netns::wait_for("BIRD's routes at tartan", T, || {
        let sent = bird_exported(&bird, &protocol).ok()?;
        let got = tartan.peer(p.a_v4().into()).ok()?.prefixes.received;
        (sent == 3 && got == sent).then_some(sent)
    })?;

    let json: Value = serde_json::from_str(&tartanctl(
        tartan.socket(),
        &["bgp", "peers", "-o", "json"],
    )?)
    .context("tartanctl -o json is not JSON")?;
    let peers = json.as_array().context("not an array")?;
    ensure!(peers.len() == 1, "{json:#}");
    let peer = &peers[0];
    ensure!(peer["address"] == "10.0.0.1", "{peer:#}");
    ensure!(peer["state"] == "Established", "{peer:#}");
    ensure!(peer["asn"] == 65002, "{peer:#}");
    ensure!(peer["prefixes"]["received"] == sent, "{peer:#}");
    ensure!(peer["prefixes"]["accepted"] == sent, "{peer:#}");
    ensure!(peer["prefixes"]["advertised"] == 1, "{peer:#}");

    let table = tartanctl(tartan.socket(), &["bgp", "peers"])?;
    let row = table
        .lines()
        .find(|l| l.contains("10.0.0.1"))
        .with_context(|| format!("peer missing from the table:\n{table}"))?;
    ensure!(row.contains("Established"), "{table}");
    ensure!(row.contains("65002"), "{table}");
    Ok(())
}
