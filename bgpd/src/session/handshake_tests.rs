//! The OPEN exchange over loopback TCP, with a neighbor task that dials a
//! test listener and is handed a second connection "from the peer": the
//! KeepaliveTimer in OpenConfirm (RFC 4271 8.2.2), connection
//! collisions (6.8) and the Cease on a stop in OpenSent or OpenConfirm
//! (8.2.2), as the peer sees them on the wire.
use super::test_lab::{Got, Lab, LabOptions, Raw, WAIT};
use crate::wire::{Capabilities, Message, Notification, Open};
use std::net::Ipv4Addr;
use std::time::Duration;
use tokio::io::AsyncWriteExt;

#[tokio::test]
async fn open_confirm_sends_keepalives_on_the_keepalive_timer() {
    // Hold time 3 s: a KEEPALIVE every second, also in OpenConfirm.
    let lab = Lab::new(Ipv4Addr::new(10, 0, 0, 1), 3).await;
    let mut peer = lab.dialed().await;
    peer.open(3).await;
    peer.expect("KEEPALIVE", |m| *m == Message::Keepalive).await;
    // The peer holds back its KEEPALIVE: bgpd's hold timer runs (3 s), and
    // a second KEEPALIVE must come before it would expire.
    match peer.recv(Duration::from_millis(2500)).await {
        Got::Message(Message::Keepalive) => {}
        other => panic!("expected a second KEEPALIVE in OpenConfirm, got {other:?}"),
    }
}

/// A neighbor with our identifier `router_id`, both connections up:
/// the one it dialed in OpenConfirm (the peer's OPEN answered with a
/// KEEPALIVE), the one the peer made in OpenSent.
async fn colliding(router_id: Ipv4Addr) -> (Lab, Raw, Raw) {
    let lab = Lab::new(router_id, 90).await;
    let mut dialed = lab.dialed().await;
    let accepted = lab.peer_connects().await;
    dialed.open(90).await;
    dialed
        .expect("KEEPALIVE", |m| *m == Message::Keepalive)
        .await;
    (lab, dialed, accepted)
}

#[tokio::test]
async fn the_connection_in_open_confirm_loses_when_the_peers_open_arrives() {
    // The peer's identifier is the higher: its connection stays.
    let (mut lab, mut dialed, mut accepted) = colliding(Ipv4Addr::new(10, 0, 0, 1)).await;
    // The second OPEN decides at once (RFC 4271 6.8), with no KEEPALIVE
    // from the peer on either connection.
    accepted.open(90).await;
    dialed.expect_collision_cease().await;
    accepted
        .expect("KEEPALIVE", |m| *m == Message::Keepalive)
        .await;
    accepted.send_keepalive().await;
    lab.expect_up_on(&accepted).await;
}

#[tokio::test]
async fn the_connection_whose_open_comes_second_loses() {
    // Our identifier is the higher: the connection we dialed stays.
    let (mut lab, mut dialed, mut accepted) = colliding(Ipv4Addr::new(10, 0, 0, 9)).await;
    accepted.open(90).await;
    // No KEEPALIVE on the loser: the Cease comes instead.
    accepted.expect_collision_cease().await;
    dialed.send_keepalive().await;
    lab.expect_up_on(&dialed).await;
}

#[tokio::test]
async fn a_connection_still_in_open_sent_gets_a_cease_when_another_is_established() {
    let mut lab = Lab::new(Ipv4Addr::new(10, 0, 0, 9), 90).await;
    let mut dialed = lab.dialed().await;
    let mut accepted = lab.peer_connects().await;
    // bgpd's OPEN on the connection from the peer, which says nothing yet.
    accepted
        .expect("OPEN", |m| matches!(m, Message::Open(_)))
        .await;
    dialed.open(90).await;
    dialed
        .expect("KEEPALIVE", |m| *m == Message::Keepalive)
        .await;
    dialed.send_keepalive().await;
    lab.expect_up_on(&dialed).await;
    // The other connection is closed with a Cease, not just closed.
    accepted.expect_collision_cease().await;
}

#[tokio::test]
async fn an_open_from_the_wrong_as_with_a_zero_identifier_is_bad_peer_as() {
    // RFC 4271 6.2: My Autonomous System is checked before the identifier.
    let lab = Lab::new(Ipv4Addr::new(10, 0, 0, 1), 90).await;
    let mut peer = lab.dialed().await;
    peer.expect("OPEN", |m| matches!(m, Message::Open(_))).await;
    let open = Open {
        version: 4,
        asn: 65009,
        my_as_field: 65009,
        hold_time: 90,
        router_id: Ipv4Addr::UNSPECIFIED,
        caps: Capabilities::default(),
    };
    peer.stream.write_all(&open.encode()).await.unwrap();
    let n = peer
        .expect("NOTIFICATION", |m| matches!(m, Message::Notification(_)))
        .await;
    assert_eq!(n, Message::Notification(Notification::bad_peer_as(65009)));
}

/// The neighbor is stopped with `n`: the task ends.
async fn stop(lab: &mut Lab, n: Notification) {
    lab.link
        .commands
        .send(crate::session::PeerCommand::Stop(n))
        .await
        .unwrap();
    tokio::time::timeout(WAIT, &mut lab.link.task)
        .await
        .expect("the neighbor task ends on Stop")
        .unwrap();
}

/// `n`, then the end of the stream (KEEPALIVEs before it are fine).
async fn expect_cease(peer: &mut Raw, n: Notification, which: &str) {
    loop {
        match peer.recv(WAIT).await {
            Got::Message(Message::Keepalive) => {}
            Got::Message(Message::Notification(got)) => {
                assert_eq!(got, n, "{which}");
                break;
            }
            other => panic!("{which}: expected NOTIFICATION {n}, got {other:?}"),
        }
    }
    assert!(
        matches!(peer.recv(WAIT).await, Got::Closed),
        "{which}: closed after the NOTIFICATION"
    );
}

#[tokio::test]
async fn a_stop_in_open_sent_sends_the_cease() {
    let mut lab = Lab::new(Ipv4Addr::new(10, 0, 0, 1), 90).await;
    let mut peer = lab.dialed().await;
    peer.expect("OPEN", |m| matches!(m, Message::Open(_))).await;
    // RFC 4271 8.2.2: ManualStop in OpenSent sends a NOTIFICATION (Cease).
    stop(&mut lab, Notification::peer_deconfigured()).await;
    expect_cease(&mut peer, Notification::peer_deconfigured(), "OpenSent").await;
}

#[tokio::test]
async fn a_stop_in_open_confirm_sends_the_cease() {
    let mut lab = Lab::new(Ipv4Addr::new(10, 0, 0, 1), 90).await;
    let mut peer = lab.dialed().await;
    peer.open(90).await;
    peer.expect("KEEPALIVE", |m| *m == Message::Keepalive).await;
    stop(&mut lab, Notification::administrative_shutdown()).await;
    expect_cease(
        &mut peer,
        Notification::administrative_shutdown(),
        "OpenConfirm",
    )
    .await;
}

#[tokio::test]
async fn a_stop_during_a_collision_sends_the_cease_on_both_connections() {
    // The dialed connection in OpenConfirm, the peer's in OpenSent.
    let (mut lab, mut dialed, mut accepted) = colliding(Ipv4Addr::new(10, 0, 0, 1)).await;
    accepted
        .expect("OPEN", |m| matches!(m, Message::Open(_)))
        .await;
    stop(&mut lab, Notification::peer_deconfigured()).await;
    expect_cease(&mut dialed, Notification::peer_deconfigured(), "dialed").await;
    expect_cease(&mut accepted, Notification::peer_deconfigured(), "accepted").await;
}

/// A session with graceful restart (so that a new connection does not end
/// it), and the peer's new connection beside it, in its OPEN exchange.
async fn beside_a_session() -> (Lab, Raw, Raw) {
    let mut lab = Lab::with(LabOptions {
        graceful_restart: true,
        ..Default::default()
    })
    .await;
    let old = lab.established(90).await;
    let mut new = lab.peer_connects().await;
    new.expect("OPEN", |m| matches!(m, Message::Open(_))).await;
    (lab, old, new)
}

#[tokio::test]
async fn a_stop_sends_the_cease_on_a_new_connection_beside_the_session() {
    let (mut lab, mut old, mut new) = beside_a_session().await;
    stop(&mut lab, Notification::peer_deconfigured()).await;
    expect_cease(&mut old, Notification::peer_deconfigured(), "session").await;
    expect_cease(&mut new, Notification::peer_deconfigured(), "new").await;
}

/// As a reload removing the neighbor does (`remove_peer`): the Stop
/// queued, then the instance's handle dropped, with the last sender of
/// connections from the peer; the task ends.
async fn removed(lab: Lab, n: Notification) {
    let crate::session::PeerLink {
        commands,
        incoming,
        counters,
        task,
    } = lab.link;
    commands
        .try_send(crate::session::PeerCommand::Stop(n))
        .unwrap();
    drop((commands, incoming, counters));
    tokio::time::timeout(WAIT, task)
        .await
        .expect("the neighbor task ends on Stop")
        .unwrap();
}

/// The channel of connections from the peer closes with the Stop: the
/// Stop wins, every time (it is a race without a bias to commands).
const RACES: usize = 50;

#[tokio::test]
async fn a_neighbor_removed_in_open_sent_gets_the_cease_every_time() {
    for i in 0..RACES {
        let lab = Lab::new(Ipv4Addr::new(10, 0, 0, 1), 90).await;
        let mut peer = lab.dialed().await;
        peer.expect("OPEN", |m| matches!(m, Message::Open(_))).await;
        removed(lab, Notification::peer_deconfigured()).await;
        let which = format!("OpenSent, round {i}");
        expect_cease(&mut peer, Notification::peer_deconfigured(), &which).await;
    }
}

#[tokio::test]
async fn a_neighbor_removed_while_established_gets_the_cease_every_time() {
    for i in 0..RACES {
        let (lab, mut old, mut new) = beside_a_session().await;
        removed(lab, Notification::other_configuration_change()).await;
        let n = Notification::other_configuration_change();
        expect_cease(&mut old, n.clone(), &format!("session, round {i}")).await;
        expect_cease(&mut new, n, &format!("new, round {i}")).await;
    }
}

#[tokio::test]
async fn a_stop_sends_the_cease_on_a_connection_already_established() {
    use super::attempt::{self, Attempts};
    use super::fsm::LocalParams;
    use super::machine::Fsm;
    use crate::model::Family;
    use crate::net::TtlPolicy;
    use std::sync::Arc;
    // A connection from the peer past its KEEPALIVE exchange, as a
    // session carries it on (`push_opened`) when it ends.
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let stream = tokio::net::TcpStream::connect(l.local_addr().unwrap())
        .await
        .unwrap();
    let (ours, _) = l.accept().await.unwrap();
    let mut peer = Raw::new(stream, false);
    let local = LocalParams {
        asn: super::test_lab::LOCAL_AS,
        router_id: Ipv4Addr::new(10, 0, 0, 1),
        hold_time: 90,
        families: vec![Family::Ipv4Unicast],
        peer_asn: super::test_lab::PEER_AS,
        graceful_restart: None,
        restarting: Default::default(),
        forwarding_preserved: false,
        installs_routes: false,
    };
    let fsm = Fsm::new(local, true, Duration::from_secs(60)).connection();
    let metrics = crate::control::Metrics::new().peer("127.0.0.1".parse().unwrap());
    let counters = Arc::new(super::PeerCounters::new(metrics));
    let mut attempts = Attempts::default();
    let ttl = TtlPolicy::new(1, false);
    let a = attempt::incoming(ours, ttl, fsm, counters.clone(), &attempts.board);
    let (opened, ()) = tokio::join!(a, peer.establish(90));
    let Ok(opened) = opened.1 else {
        panic!("the OPEN exchange failed: {:?}", opened.1.err())
    };
    attempts.push_opened(true, opened);
    // RFC 4271 8.2.2: the Stop's Cease, not a bare close.
    attempts.stop(Notification::peer_deconfigured(), &counters);
    expect_cease(&mut peer, Notification::peer_deconfigured(), "established").await;
}
