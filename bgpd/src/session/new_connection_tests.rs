//! A new connection from the peer while the session is Established, over
//! loopback TCP (RFC 4724 4.2, RFC 4271 6.8): with graceful restart it runs
//! its OPEN exchange alongside the session and replaces it only once the
//! peer's OPEN on it is accepted; a silent or failing one leaves the
//! session alone. Also: a connection taken while Idle does not stop the
//! task from hearing commands, and every accepted socket gets the
//! neighbor's TTL rules (RFC 5082).
use super::events::{PeerCommand, PeerEvent};
use super::test_lab::{Got, Lab, LabOptions, Raw, WAIT};
use crate::wire::{Message, Notification};
use std::os::fd::{AsRawFd, OwnedFd};
use tokio::io::AsyncWriteExt;

/// A neighbor with graceful restart on both sides, Established with the
/// peer's hold time `hold_time`.
async fn gr_session(hold_time: u16) -> (Lab, Raw) {
    let mut lab = Lab::with(LabOptions {
        graceful_restart: true,
        ..LabOptions::default()
    })
    .await;
    let old = lab.established(hold_time).await;
    (lab, old)
}

/// The session is still up: an UPDATE on `old` reaches the instance.
async fn still_up(lab: &mut Lab, old: &mut Raw, prefix: &str) {
    old.send_route(prefix).await;
    match lab.event().await {
        PeerEvent::Update { update, .. } => {
            let got: Vec<String> = update.reach[0]
                .prefixes
                .iter()
                .map(|p| p.to_string())
                .collect();
            assert_eq!(got, vec![prefix.to_string()]);
        }
        e => panic!("expected the UPDATE to go through, got {e:?}"),
    }
}

#[tokio::test]
async fn a_silent_new_connection_leaves_the_established_session_alone() {
    // Hold time 3 s: KEEPALIVEs every second.
    let (mut lab, mut old) = gr_session(3).await;
    let mut silent = lab.peer_connects().await;
    // bgpd runs the OPEN exchange on it alongside the session.
    silent
        .expect("OPEN", |m| matches!(m, Message::Open(_)))
        .await;
    still_up(&mut lab, &mut old, "10.9.1.0/24").await;
    // Past the hold time, the session goes on with its keepalives.
    for _ in 0..4 {
        old.send_keepalive().await;
        old.expect("KEEPALIVE", |m| *m == Message::Keepalive).await;
    }
    assert!(lab.events.try_recv().is_err(), "no session change");
    // The peer gives up on the new connection: still nothing changes.
    drop(silent);
    still_up(&mut lab, &mut old, "10.9.2.0/24").await;
}

#[tokio::test]
async fn past_the_bound_new_connections_get_a_cease_and_the_session_stays() {
    let (mut lab, mut old) = gr_session(90).await;
    let mut silent = Vec::new();
    for _ in 0..super::established::MAX_NEW_CONNECTIONS {
        let mut c = lab.peer_connects().await;
        c.expect("OPEN", |m| matches!(m, Message::Open(_))).await;
        silent.push(c);
    }
    let mut one_more = lab.peer_connects().await;
    one_more.expect_collision_cease().await;
    still_up(&mut lab, &mut old, "10.9.6.0/24").await;
    drop(silent);
}

#[tokio::test]
async fn a_new_connection_with_a_bad_open_leaves_the_session_alone() {
    let (mut lab, mut old) = gr_session(90).await;
    let mut bad = lab.peer_connects().await;
    bad.expect("OPEN", |m| matches!(m, Message::Open(_))).await;
    // From the wrong AS.
    let mut open = bad.open_message(90);
    open.asn = 65009;
    open.my_as_field = 65009;
    open.caps.four_octet_as = Some(65009);
    bad.stream.write_all(&open.encode()).await.unwrap();
    let n = bad
        .expect("NOTIFICATION", |m| matches!(m, Message::Notification(_)))
        .await;
    assert_eq!(n, Message::Notification(Notification::bad_peer_as(65009)));
    still_up(&mut lab, &mut old, "10.9.3.0/24").await;
}

#[tokio::test]
async fn an_open_on_the_new_connection_replaces_the_session() {
    let (mut lab, mut old) = gr_session(90).await;
    let mut new = lab.peer_connects().await;
    new.open(90).await;
    // The old session ends as a restart: routes kept (graceful), and no
    // NOTIFICATION to the peer's old incarnation.
    match lab.event().await {
        PeerEvent::Down { graceful, .. } => assert!(graceful, "the routes are kept as stale"),
        e => panic!("expected the old session down, got {e:?}"),
    }
    loop {
        match old.recv(WAIT).await {
            Got::Closed => break,
            Got::Message(Message::Keepalive) => {}
            other => panic!("expected the old connection closed, got {other:?}"),
        }
    }
    new.expect("KEEPALIVE", |m| *m == Message::Keepalive).await;
    new.send_keepalive().await;
    lab.expect_up_on(&new).await;
    still_up(&mut lab, &mut new, "10.9.4.0/24").await;
}

#[tokio::test]
async fn without_graceful_restart_a_new_connection_gets_a_cease() {
    let mut lab = Lab::with(LabOptions::default()).await;
    let mut old = lab.established(90).await;
    let mut new = lab.peer_connects().await;
    new.expect_collision_cease().await;
    still_up(&mut lab, &mut old, "10.9.5.0/24").await;
}

#[tokio::test]
async fn a_silent_connection_taken_while_idle_does_not_block_a_stop() {
    let mut lab = Lab::with(LabOptions::default()).await;
    let old = lab.established(90).await;
    drop(old);
    assert!(matches!(lab.event().await, PeerEvent::Down { .. }));
    // Idle (the retry time is a minute): the peer connects and says nothing.
    let mut silent = lab.peer_connects().await;
    silent
        .expect("OPEN", |m| matches!(m, Message::Open(_)))
        .await;
    let stop = PeerCommand::Stop(Notification::peer_deconfigured());
    lab.link.commands.send(stop).await.unwrap();
    tokio::time::timeout(WAIT, &mut lab.link.task)
        .await
        .expect("the neighbor task ends on Stop")
        .unwrap();
}

/// (IP_TTL, IP_MINTTL) of a socket.
fn ttls(fd: &OwnedFd) -> (i32, i32) {
    let get = |name| {
        let mut v: libc::c_int = 0;
        let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: v and len are valid for the call; fd is open.
        let rc = unsafe {
            libc::getsockopt(
                fd.as_raw_fd(),
                libc::IPPROTO_IP,
                name,
                &mut v as *mut _ as *mut libc::c_void,
                &mut len,
            )
        };
        assert_eq!(rc, 0, "getsockopt: {}", std::io::Error::last_os_error());
        v
    };
    (get(libc::IP_TTL), get(libc::IP_MINTTL))
}

fn gtsm() -> LabOptions {
    LabOptions {
        graceful_restart: true,
        ttl_security: true,
        multihop: 2,
        ..LabOptions::default()
    }
}

#[tokio::test]
async fn a_new_connection_while_established_gets_the_ttl_rules() {
    let mut lab = Lab::with(gtsm()).await;
    let _old = lab.established(90).await;
    let (mut new, ours) = lab.peer_connects_watched().await;
    new.expect("OPEN", |m| matches!(m, Message::Open(_))).await;
    // RFC 5082 with 2 hops: we send with TTL 255 and take 254 and up.
    assert_eq!(ttls(&ours), (255, 254));
}

#[tokio::test]
async fn a_connection_taken_while_idle_gets_the_ttl_rules() {
    let mut lab = Lab::with(gtsm()).await;
    let old = lab.established(90).await;
    drop(old);
    assert!(matches!(lab.event().await, PeerEvent::Down { .. }));
    let (mut new, ours) = lab.peer_connects_watched().await;
    new.expect("OPEN", |m| matches!(m, Message::Open(_))).await;
    assert_eq!(ttls(&ours), (255, 254));
    // And it becomes the session.
    new.send_open(90).await;
    new.expect("KEEPALIVE", |m| *m == Message::Keepalive).await;
    new.send_keepalive().await;
    lab.expect_up_on(&new).await;
}
