//! The end of route selection after our own restart (RFC 4724 4.1): new
//! sessions hear of no restart any more (no Restart State bit in our
//! OPEN). Against the whole instance over loopback TCP, with the peers of
//! `deferral_tests.rs`. The kernel routes of the previous run have their
//! own condition: `kernel_stale_tests.rs`.
use super::deferral_tests::{A, B, P, Q, X, a_resent, connect, instance, set, table, up};
use crate::session::test_lab::{Got, Raw, WAIT};
use crate::wire::Message;
use std::net::Ipv4Addr;
use tokio::io::AsyncWriteExt;

/// The peer closes its end (after what it sent) and waits for bgpd to
/// close the session: whatever it sent has been taken in.
pub(super) async fn hang_up(mut r: Raw) {
    r.stream.shutdown().await.unwrap();
    loop {
        match r.recv(WAIT).await {
            Got::Closed => return,
            Got::Message(_) => {}
            Got::TimedOut => panic!("bgpd did not close the session"),
        }
    }
}

/// A new session from `from`, established; whether bgpd's OPEN had the
/// Restart State bit.
async fn reconnect(port: u16, from: Ipv4Addr) -> (Raw, bool) {
    let mut r = connect(port, from, true).await;
    let Message::Open(open) = r.expect("OPEN", |m| matches!(m, Message::Open(_))).await else {
        unreachable!()
    };
    let restarting = (open.caps.graceful_restart.as_ref()).is_some_and(|g| g.restarting);
    r.send_open(90).await;
    r.expect("KEEPALIVE", |m| *m == Message::Keepalive).await;
    r.send_keepalive().await;
    (r, restarting)
}

/// The session of `r` (from `from`) goes down and comes back: bgpd's new
/// OPEN must claim no restart any more (`why`: what held it).
async fn restart_is_over(port: u16, r: Raw, from: Ipv4Addr, why: &str) -> Raw {
    hang_up(r).await;
    let (r, restarting) = reconnect(port, from).await;
    assert!(!restarting, "the Restart State bit {why}");
    r
}

#[tokio::test]
async fn a_peer_without_graceful_restart_does_not_hold_the_restart() {
    let i = instance(true, "").await;
    // B, without the capability, never sends End-of-RIB.
    let _b = up(i.port, B, false).await;
    let mut a = a_resent(i.port).await;
    assert_eq!(table(&mut a, "A").await, set(&[X]));
    // Selection was done on A's End-of-RIB: so is the restart.
    restart_is_over(i.port, a, A, "waits for a peer without graceful restart").await;
}

#[tokio::test]
async fn a_neighbor_that_never_comes_holds_the_restart_only_for_the_deferral_time() {
    let i = instance(
        true,
        "[graceful_restart]\nstale_routes_time = 60\nselection_deferral_time = 1\n",
    )
    .await;
    // B never comes: A's table goes when the deferral time is over.
    let mut a = a_resent(i.port).await;
    assert_eq!(table(&mut a, "A").await, set(&[X]));
    restart_is_over(i.port, a, A, "outlasts the selection deferral time").await;
}

#[tokio::test]
async fn an_end_of_rib_counts_after_its_session_is_reset() {
    let i = instance(true, "").await;
    // A sends its table and End-of-RIB; its session then goes down and
    // comes back, and A sends nothing more.
    hang_up(a_resent(i.port).await).await;
    let (mut a, _) = reconnect(i.port, A).await;
    let mut b = up(i.port, B, true).await;
    b.send_route(Q).await;
    b.send_end_of_rib().await;
    // B's End-of-RIB is the last one waited for: selection is done. A's
    // route, kept as stale over its session's reset, is part of it.
    assert_eq!(table(&mut b, "B").await, set(&[P, X]));
    assert_eq!(table(&mut a, "A").await, set(&[Q, X]));
    let why = "waits again for A's End-of-RIB, sent before its session was reset";
    restart_is_over(i.port, b, B, why).await;
}
