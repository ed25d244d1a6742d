//! Route reflection (RFC 4456) with real peers, all nodes on one shared
//! Ethernet segment so that reflected next hops (the originating client's
//! address) are directly reachable: tartan-bgpd as the reflector for a BIRD
//! and a GoBGP client, and tartan-bgpd as a client of a BIRD reflector.
//! Run as root.
mod support;

use anyhow::{Context, Result};
use std::net::Ipv4Addr;
use support::{Lan, T, start_tartan, wait_tartan_route};
use tartan_lab::netns::wait_for;
use tartan_lab::peers::{BgpConfig, Bird, Gobgp, Neighbor, Route, TartanOptions};
use tartan_lab::wait_kernel_route;

const AS: u32 = 65000;

#[test]
fn tartan_reflects_between_bird_and_gobgp() -> Result<()> {
    // 0: tartan (reflector), 1: BIRD client, 2: GoBGP client.
    let lan = Lan::new("rr", 41, 3)?;
    let cluster = Ipv4Addr::new(10, 99, 99, 99);
    let (bird_net, gobgp_net) = ("10.210.0.0/24", "10.220.0.0/24");

    let tcfg = BgpConfig::new(lan.v4(0), AS)
        .cluster_id(cluster)
        .neighbor(Neighbor::new(lan.addr(1), AS).rr_client())
        .neighbor(Neighbor::new(lan.addr(2), AS).rr_client());
    let t = start_tartan(&lan.nodes[0], &tcfg, &TartanOptions::default())?;
    let bird = Bird::start(
        &lan.nodes[1],
        BgpConfig::new(lan.v4(1), AS)
            .neighbor(Neighbor::new(lan.addr(0), AS))
            .route(Route::new(bird_net)),
    )?;
    let gobgp = Gobgp::start(
        &lan.nodes[2],
        BgpConfig::new(lan.v4(2), AS).neighbor(Neighbor::new(lan.addr(0), AS)),
    )?;
    gobgp.add_route(&Route::new(gobgp_net), Some(lan.addr(2)))?;
    t.wait_established(lan.addr(1), T)?;
    t.wait_established(lan.addr(2), T)?;

    // The reflector itself uses both routes, via the originating clients.
    for (net, origin) in [(bird_net, 1), (gobgp_net, 2)] {
        let k = wait_tartan_route(&lan.nodes[0], net)
            .map_err(|e| e.context(t.daemon().log_tail(40)))?;
        assert_eq!(
            k.gateways,
            vec![lan.addr(origin)],
            "tartan's route to {net}"
        );
    }

    // BIRD learns GoBGP's route, reflected unchanged but for RFC 4456's
    // attributes, and installs it: the next hop is on the shared segment.
    let r = bird
        .wait_route(gobgp_net, T)
        .map_err(|e| e.context(t.daemon().log_tail(40)))?;
    assert_eq!(
        r.next_hop(),
        Some(lan.addr(2)),
        "next hop at BIRD: {}",
        r.text
    );
    assert_eq!(r.originator_id(), Some(lan.v4(2)), "{}", r.text);
    assert_eq!(r.cluster_list(), vec![cluster], "{}", r.text);
    assert!(
        r.as_path().is_empty(),
        "iBGP reflection adds no AS: {}",
        r.text
    );
    let k = wait_kernel_route(&lan.nodes[1], gobgp_net, Some("bird"), T)?;
    assert_eq!(k.gateways, vec![lan.addr(2)]);

    // GoBGP learns BIRD's route the same way.
    let g = gobgp.wait_route(bird_net, T)?;
    assert_eq!(
        g.next_hop,
        Some(lan.addr(1)),
        "next hop at GoBGP: {:?}",
        g.raw
    );
    let originator = g
        .attr(9)
        .and_then(|a| a.get("value"))
        .and_then(|v| v.as_str())
        .and_then(|s| s.parse::<Ipv4Addr>().ok());
    assert_eq!(
        originator,
        Some(lan.v4(1)),
        "ORIGINATOR_ID at GoBGP: {:?}",
        g.raw
    );
    let clusters: Vec<Ipv4Addr> = g
        .attr(10)
        .and_then(|a| a.get("value"))
        .and_then(|v| v.as_array())
        .into_iter()
        .flatten()
        .filter_map(|v| v.as_str()?.parse().ok())
        .collect();
    assert_eq!(
        clusters,
        vec![cluster],
        "CLUSTER_LIST at GoBGP: {:?}",
        g.raw
    );

    // A client's own route is not reflected back to it (or, if it were,
    // the client would see its own ORIGINATOR_ID): BIRD holds its own
    // network only as its static route.
    let own = bird.routes_for(bird_net)?;
    assert!(
        own.iter().all(|r| r.proto == "static4"),
        "BIRD got its own route back: {own:?}"
    );

    // Withdrawal is reflected too.
    gobgp.del_route(&Route::new(gobgp_net))?;
    wait_for(&format!("{gobgp_net} withdrawn at BIRD"), T, || {
        bird.routes_for(gobgp_net)
            .ok()
            .filter(|r| r.is_empty())
            .map(|_| ())
    })?;
    support::wait_no_tartan_route(&lan.nodes[0], gobgp_net)?;
    Ok(())
}

#[test]
fn tartan_as_client_of_bird_reflector() -> Result<()> {
    // 0: BIRD reflector, 1: tartan client, 2: BIRD client. The clients do
    // not peer with each other.
    let lan = Lan::new("rc", 42, 3)?;
    let cluster = Ipv4Addr::new(10, 98, 98, 98);
    let (tartan_net, bird_net) = ("10.230.0.0/24", "10.240.0.0/24");

    let rr = Bird::start(
        &lan.nodes[0],
        BgpConfig::new(lan.v4(0), AS)
            .cluster_id(cluster)
            .kernel(false)
            .neighbor(Neighbor::new(lan.addr(1), AS).rr_client())
            .neighbor(Neighbor::new(lan.addr(2), AS).rr_client()),
    )?;
    let tcfg = BgpConfig::new(lan.v4(1), AS)
        .neighbor(Neighbor::new(lan.addr(0), AS))
        .route(Route::new(tartan_net));
    let t = start_tartan(&lan.nodes[1], &tcfg, &TartanOptions::default())?;
    let client = Bird::start(
        &lan.nodes[2],
        BgpConfig::new(lan.v4(2), AS)
            .neighbor(Neighbor::new(lan.addr(0), AS))
            .route(Route::new(bird_net)),
    )?;
    rr.wait_established(T)?;
    client.wait_established(T)?;
    t.wait_established(lan.addr(0), T)?;

    // The other client's route reaches tartan through the reflector, with
    // the originating client's next hop, and lands in tartan's kernel.
    let k = wait_tartan_route(&lan.nodes[1], bird_net).map_err(|e| {
        e.context(format!(
            "rib: {:?}\nlog:\n{}",
            t.routes("ipv4-unicast").ok(),
            t.daemon().log_tail(40)
        ))
    })?;
    assert_eq!(k.gateways, vec![lan.addr(2)], "tartan's kernel route");
    let routes = t.routes("ipv4-unicast")?;
    let entry = routes
        .iter()
        .find(|r| r.prefix.to_string() == bird_net)
        .context("reflected route in tartan's RIB")?;
    let p = &entry.paths[0];
    assert!(p.best);
    assert_eq!(p.peer, Some(lan.addr(0)), "learned from the reflector");
    assert_eq!(p.next_hop, Some(lan.addr(2)));
    assert_eq!(p.originator_id, Some(lan.v4(2)));
    assert_eq!(p.cluster_list, vec![cluster]);

    // Tartan's route reaches the other client, with RFC 4456 attributes
    // naming tartan as the originator, and is usable there.
    let r = client.wait_route(tartan_net, T)?;
    assert_eq!(r.next_hop(), Some(lan.addr(1)), "{}", r.text);
    assert_eq!(r.originator_id(), Some(lan.v4(1)), "{}", r.text);
    assert_eq!(r.cluster_list(), vec![cluster], "{}", r.text);
    let k = wait_kernel_route(&lan.nodes[2], tartan_net, Some("bird"), T)?;
    assert_eq!(k.gateways, vec![lan.addr(1)]);

    // Dropping the other client withdraws its route from tartan's kernel.
    drop(client);
    support::wait_no_tartan_route(&lan.nodes[1], bird_net)?;
    Ok(())
}
