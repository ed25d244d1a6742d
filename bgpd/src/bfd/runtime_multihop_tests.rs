//! Multihop sessions in the runtime (RFC 5883): packets are matched by Your
//! Discriminator or by the source and destination addresses, only on the
//! multihop port, with the TTL rule of the session's hop count; single-hop
//! sessions keep theirs. Driven through `Runtime::packet` with synthetic
//! arrivals, the peer a UDP socket on the loopback.
use std::net::{IpAddr, Ipv4Addr, UdpSocket};
use std::time::{Duration, Instant};

use tokio::sync::watch;

use super::{Arrival, Command, Runtime, RuntimeOptions};
use crate::bfd::handle::BfdStatus;
use crate::bfd::hops::Hops;
use crate::bfd::packet::{ControlPacket, State};
use crate::bfd::session::{Session, SessionConfig};
use crate::bfd::tests::fsm::from_remote;

const PEER: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);
const OURS: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 1));
const OTHER: IpAddr = IpAddr::V4(Ipv4Addr::new(127, 0, 0, 9));

fn config() -> SessionConfig {
    SessionConfig {
        desired_min_tx: Duration::from_millis(300),
        required_min_rx: Duration::from_millis(300),
        detect_mult: 3,
    }
}

/// A runtime sending single-hop packets to `single` and multihop ones to
/// `multi` (two sockets standing for the peer's two ports).
struct Setup {
    rt: Runtime,
    single: UdpSocket,
    multi: UdpSocket,
}

fn setup() -> Setup {
    let bind = || {
        let s = UdpSocket::bind((PEER, 0)).unwrap();
        s.set_read_timeout(Some(Duration::from_millis(500)))
            .unwrap();
        s
    };
    let (single, multi) = (bind(), bind());
    let rt = Runtime {
        sessions: Default::default(),
        by_peer: Default::default(),
        seed: 3,
        options: RuntimeOptions {
            port: single.local_addr().unwrap().port(),
            multihop_port: multi.local_addr().unwrap().port(),
        },
        metrics: None,
    };
    Setup { rt, single, multi }
}

fn add(rt: &mut Runtime, hops: Hops, local: Option<IpAddr>) -> (u32, watch::Receiver<BfdStatus>) {
    // The runtime's status replaces this one (the mode the opposite).
    let initial = BfdStatus::of(
        &Session::new(1, config(), Instant::now(), 1),
        0,
        !hops.is_multihop(),
    );
    let (status, rx) = watch::channel(initial);
    rt.command(Command::Add {
        client: 1,
        peer: PEER,
        local,
        hops,
        config: config(),
        status,
    });
    let discr = *rt
        .by_peer
        .get(&(PEER, hops.is_multihop()))
        .expect("session added");
    (discr, rx)
}

/// The peer's packet in `state`, naming our discriminator `your`.
fn peer_packet(state: State, your: u32) -> Vec<u8> {
    ControlPacket {
        your_discr: your,
        ..from_remote(state, 300)
    }
    .encode()
    .to_vec()
}

fn arrival(multihop: bool, ttl: u8, to: IpAddr) -> Arrival {
    Arrival {
        from: PEER,
        to: Some(to),
        ttl: Some(ttl),
        multihop,
    }
}

fn state(rt: &Runtime, discr: u32) -> State {
    rt.sessions[&discr].session.state()
}

#[test]
fn a_multihop_session_is_found_by_its_addresses_on_the_multihop_port() {
    let Setup { mut rt, .. } = setup();
    let (discr, status) = add(&mut rt, Hops::Multi { min_ttl: 254 }, Some(OURS));
    // Your Discriminator zero: matched by source and destination
    // (RFC 5883 section 4); TTL 254 is one router away.
    rt.packet(&peer_packet(State::Down, 0), arrival(true, 254, OURS));
    assert_eq!(state(&rt, discr), State::Init);
    rt.packet(&peer_packet(State::Init, discr), arrival(true, 254, OURS));
    assert_eq!(state(&rt, discr), State::Up);
    assert_eq!(status.borrow().state, State::Up);
}

#[test]
fn a_multihop_session_ignores_the_single_hop_port() {
    let Setup { mut rt, .. } = setup();
    let (discr, _status) = add(&mut rt, Hops::Multi { min_ttl: 1 }, None);
    // Not by address, and not by its discriminator either, even at TTL 255.
    rt.packet(&peer_packet(State::Down, 0), arrival(false, 255, OURS));
    assert_eq!(state(&rt, discr), State::Down);
    rt.packet(&peer_packet(State::Init, discr), arrival(false, 255, OURS));
    assert_eq!(state(&rt, discr), State::Down);
}

#[test]
fn a_single_hop_session_ignores_the_multihop_port() {
    let Setup { mut rt, .. } = setup();
    let (discr, _status) = add(&mut rt, Hops::Single, None);
    rt.packet(&peer_packet(State::Down, 0), arrival(true, 255, OURS));
    assert_eq!(state(&rt, discr), State::Down);
    rt.packet(&peer_packet(State::Init, discr), arrival(true, 255, OURS));
    assert_eq!(state(&rt, discr), State::Down);
    // Its own port still works as before.
    rt.packet(&peer_packet(State::Down, 0), arrival(false, 255, OURS));
    assert_eq!(state(&rt, discr), State::Init);
}

#[test]
fn a_multihop_packet_below_the_minimum_ttl_is_dropped() {
    let Setup { mut rt, .. } = setup();
    // eBGP multihop 2: at least 254.
    let (discr, _status) = add(&mut rt, Hops::Multi { min_ttl: 254 }, None);
    rt.packet(&peer_packet(State::Down, 0), arrival(true, 253, OURS));
    assert_eq!(state(&rt, discr), State::Down, "three hops away");
    let unknown = Arrival {
        ttl: None,
        ..arrival(true, 0, OURS)
    };
    rt.packet(&peer_packet(State::Down, 0), unknown);
    assert_eq!(state(&rt, discr), State::Down, "TTL not reported");
    rt.packet(&peer_packet(State::Down, 0), arrival(true, 254, OURS));
    assert_eq!(state(&rt, discr), State::Init);
}

#[test]
fn a_multihop_session_without_a_hop_count_takes_any_ttl() {
    let Setup { mut rt, .. } = setup();
    // iBGP (TTL 255): no minimum (RFC 5883 section 5 checks none).
    let (discr, _status) = add(&mut rt, Hops::Multi { min_ttl: 1 }, None);
    rt.packet(&peer_packet(State::Down, 0), arrival(true, 3, OURS));
    assert_eq!(state(&rt, discr), State::Init);
}

#[test]
fn a_multihop_packet_to_another_local_address_is_dropped() {
    let Setup { mut rt, .. } = setup();
    let (discr, _status) = add(&mut rt, Hops::Multi { min_ttl: 1 }, Some(OURS));
    rt.packet(&peer_packet(State::Down, 0), arrival(true, 255, OTHER));
    assert_eq!(state(&rt, discr), State::Down);
    rt.packet(&peer_packet(State::Down, 0), arrival(true, 255, OURS));
    assert_eq!(state(&rt, discr), State::Init);
}

#[test]
fn multihop_packets_go_to_the_multihop_port() {
    let Setup {
        mut rt,
        single,
        multi,
    } = setup();
    let (discr, _status) = add(&mut rt, Hops::Multi { min_ttl: 1 }, None);
    rt.tick(Instant::now() + Duration::from_millis(1));
    let mut buf = [0u8; 64];
    let n = multi
        .recv(&mut buf)
        .expect("first packet on the multihop port");
    let p = ControlPacket::decode(&buf[..n]).unwrap();
    assert_eq!((p.my_discr, p.state), (discr, State::Down));
    assert!(
        single.recv(&mut buf).is_err(),
        "nothing on the single-hop port"
    );
}

#[test]
fn one_peer_can_have_a_single_hop_and_a_multihop_session() {
    let Setup { mut rt, .. } = setup();
    let (one, _a) = add(&mut rt, Hops::Single, None);
    let (multi, _b) = add(&mut rt, Hops::Multi { min_ttl: 1 }, None);
    assert_ne!(one, multi);
    rt.packet(&peer_packet(State::Down, 0), arrival(true, 255, OURS));
    assert_eq!(
        (state(&rt, one), state(&rt, multi)),
        (State::Down, State::Init)
    );
}

#[test]
fn the_mode_is_in_the_status_and_the_metric() {
    for (hops, mode) in [(Hops::Multi { min_ttl: 254 }, 1), (Hops::Single, 0)] {
        let Setup { mut rt, .. } = setup();
        let metrics = std::sync::Arc::new(crate::control::Metrics::new());
        rt.metrics = Some(metrics.clone());
        let (_, status) = add(&mut rt, hops, Some(OURS));
        assert_eq!(status.borrow().multihop, mode == 1, "{hops:?}");
        let text = metrics.encode();
        let line = format!("tartan_bfd_session_multihop{{peer=\"{PEER}\"}} {mode}");
        assert!(text.lines().any(|l| l == line), "{line} not in\n{text}");
    }
}

#[test]
fn an_up_multihop_session_takes_a_down_only_with_its_discriminator() {
    let Setup { mut rt, .. } = setup();
    let (discr, status) = add(&mut rt, Hops::Multi { min_ttl: 1 }, Some(OURS));
    rt.packet(&peer_packet(State::Down, 0), arrival(true, 64, OURS));
    rt.packet(&peer_packet(State::Init, discr), arrival(true, 64, OURS));
    assert_eq!(state(&rt, discr), State::Up);
    // A Down matched by addresses alone (could be forged): dropped.
    rt.packet(&peer_packet(State::Down, 0), arrival(true, 64, OURS));
    assert_eq!(state(&rt, discr), State::Up);
    assert_eq!(status.borrow().state, State::Up);
    // The peer's own Down names the session: taken.
    rt.packet(&peer_packet(State::Down, discr), arrival(true, 64, OURS));
    assert_eq!(state(&rt, discr), State::Down);
}

#[test]
fn an_up_single_hop_session_takes_a_down_without_its_discriminator() {
    // TTL 255 keeps forgers off the link: the RFC's matching stands.
    let Setup { mut rt, .. } = setup();
    let (discr, _status) = add(&mut rt, Hops::Single, None);
    rt.packet(&peer_packet(State::Down, 0), arrival(false, 255, OURS));
    rt.packet(&peer_packet(State::Init, discr), arrival(false, 255, OURS));
    assert_eq!(state(&rt, discr), State::Up);
    rt.packet(&peer_packet(State::Down, 0), arrival(false, 255, OURS));
    assert_eq!(state(&rt, discr), State::Down);
}

#[test]
fn discriminators_are_unique_nonzero_and_do_not_follow_one_another() {
    let Setup { mut rt, .. } = setup();
    let ds: Vec<u32> = (0..200).map(|_| rt.allocate_discr()).collect();
    assert!(ds.iter().all(|&d| d != 0));
    let distinct: std::collections::BTreeSet<u32> = ds.iter().copied().collect();
    assert_eq!(distinct.len(), ds.len());
    let steps_of_one = ds
        .windows(2)
        .filter(|w| w[1] == w[0].wrapping_add(1))
        .count();
    assert_eq!(steps_of_one, 0, "{:?}", &ds[..10]);
}

#[test]
fn a_multihop_session_readded_with_another_source_takes_packets_to_it() {
    let Setup { mut rt, multi, .. } = setup();
    let (discr, _status) = add(&mut rt, Hops::Multi { min_ttl: 1 }, Some(OURS));
    // A reload that changes the source: removed (retiring), then added
    // again with the new one.
    rt.command(Command::Remove { client: 1 });
    let (again, _status) = add(&mut rt, Hops::Multi { min_ttl: 1 }, Some(OTHER));
    assert_eq!(again, discr, "the retiring session is kept");
    rt.packet(&peer_packet(State::Down, 0), arrival(true, 64, OURS));
    assert_eq!(state(&rt, discr), State::Down, "to the old source");
    rt.packet(&peer_packet(State::Down, 0), arrival(true, 64, OTHER));
    assert_eq!(state(&rt, discr), State::Init, "to the new source");
    // And it sends from the new one (its next packet, a second on).
    rt.tick(Instant::now() + Duration::from_secs(2));
    let mut buf = [0u8; 64];
    let mut from = None;
    while let Ok((_, a)) = multi.recv_from(&mut buf) {
        from = Some(a.ip());
    }
    assert_eq!(from, Some(OTHER));
}
