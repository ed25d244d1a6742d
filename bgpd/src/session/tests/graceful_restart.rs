//! RFC 4724 on the session side: which ends keep the peer's routes as
//! stale, a peer's new connection replacing the session, and the R bit of
//! our own restart. (Stale routes, their timer and End-of-RIB on the
//! instance side are tested in `daemon/restart.rs`.)
use super::*;
use crate::wire::{Message, Notification};

#[test]
fn a_transport_failure_keeps_the_routes_when_the_peer_has_graceful_restart() {
    check(
        "Established TcpConnectionFails, GR",
        fsm(State::Established, false, true),
        Event::TcpConnectionFails("read failed: reset".into()),
        State::Idle,
        closing(
            Some(true),
            Cause::Transport("read failed: reset".into()),
            Then::Retry,
        ),
    );
}

#[test]
fn a_notification_either_way_removes_the_routes() {
    let n = Notification::administrative_shutdown();
    check(
        "Established NotifMsg, GR",
        fsm(State::Established, false, true),
        Event::Message(Message::Notification(n.clone())),
        State::Idle,
        closing(Some(false), Cause::Received(n), Then::Retry),
    );
    check(
        "Established HoldTimer_Expires, GR",
        fsm(State::Established, false, true),
        Event::HoldTimerExpires,
        State::Idle,
        closing(
            Some(false),
            Cause::Sent(Notification::hold_timer_expired()),
            Then::Retry,
        ),
    );
}

#[test]
fn a_new_connection_from_a_restarting_peer_replaces_the_session() {
    check(
        "Established TcpConnectionConfirmed, GR",
        fsm(State::Established, false, true),
        Event::TcpConnectionConfirmed,
        State::Idle,
        closing(Some(true), Cause::Replaced, Then::Reconnect),
    );
}

#[test]
fn our_open_has_the_r_bit_until_the_restart_is_done() {
    let mut l = local();
    l.restarting = true;
    let mut m = Fsm::new(l, false, RETRY);
    let r_bit = |m: &Fsm| {
        m.local()
            .open()
            .caps
            .graceful_restart
            .map(|g| (g.restarting, g.restart_time))
    };
    assert_eq!(r_bit(&m), Some((true, 120)));
    assert_eq!(m.handle(Event::RestartDone), vec![]);
    assert_eq!(r_bit(&m), Some((false, 120)));
    // Copies for later connections carry it too.
    assert_eq!(r_bit(&m.connection()), Some((false, 120)));
}

#[test]
fn the_peers_capability_is_kept_only_when_both_sides_have_it() {
    let mut c = fsm(State::OpenSent, false, false);
    c.handle(Event::Message(Message::Open(peer_open(90, true))));
    assert_eq!(
        c.negotiated().and_then(|n| n.peer_graceful_restart.clone()),
        negotiated(true).peer_graceful_restart
    );
    let mut l = local();
    l.graceful_restart = None;
    let mut c = Fsm::in_state(l, false, RETRY, State::OpenSent, None);
    c.handle(Event::Message(Message::Open(peer_open(90, true))));
    assert_eq!(
        c.negotiated().map(|n| n.peer_graceful_restart.is_none()),
        Some(true)
    );
}
