//! The OPEN exchange over loopback TCP, with a neighbor task that dials a
//! test listener and is handed a second connection "from the peer": the
//! KeepaliveTimer in OpenConfirm (RFC 4271 8.2.2) and connection
//! collisions (6.8), as the peer sees them on the wire.
use super::test_lab::{Got, Lab, Raw};
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
