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
fn a_new_connection_from_a_peer_with_graceful_restart_runs_alongside_the_session() {
    // RFC 4724 4.2 allows ending the session at the new connection, but a
    // connection that never sends an OPEN must not take the session down.
    let m = check(
        "Established TcpConnectionConfirmed, GR",
        fsm(State::Established, false, true),
        Event::TcpConnectionConfirmed,
        State::Established,
        vec![Action::TryNewConnection],
    );
    // The new connection's machine starts as the neighbor's will be once
    // the session has ended.
    let fresh = m.fresh_connection();
    assert_eq!((fresh.state(), fresh.negotiated()), (State::Idle, None));
    assert_eq!(fresh.local(), m.local());
}

#[test]
fn the_session_is_replaced_once_the_new_connections_open_is_accepted() {
    check(
        "Established NewConnectionOpened, GR",
        fsm(State::Established, false, true),
        Event::NewConnectionOpened,
        State::Idle,
        closing(Some(true), Cause::Replaced, Then::Retry),
    );
    // Without graceful restart no new connection runs alongside.
    check(
        "Established NewConnectionOpened, no GR",
        fsm(State::Established, false, false),
        Event::NewConnectionOpened,
        State::Established,
        vec![],
    );
}

#[test]
fn our_open_has_the_r_bit_until_the_restart_is_done() {
    let mut l = local();
    l.restarting = crate::session::RestartFlag::new(true);
    // The instance's handle on the flag every peer task shares.
    let flag = l.restarting.clone();
    let m = Fsm::new(l, false, RETRY);
    let early = m.connection();
    let r_bit = |m: &Fsm| {
        m.local()
            .open()
            .caps
            .graceful_restart
            .map(|g| (g.restarting, g.restart_time))
    };
    assert_eq!(r_bit(&m), Some((true, 120)));
    flag.end();
    assert_eq!(r_bit(&m), Some((false, 120)));
    // Copies for later connections carry it too, also those made before.
    assert_eq!(r_bit(&m.connection()), Some((false, 120)));
    assert_eq!(r_bit(&early), Some((false, 120)));
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

#[test]
fn our_f_bit_says_whether_our_forwarding_was_kept_before_the_session() {
    // Started without routes of a previous run: F clear in the first
    // session's OPEN; routes go to the kernel and stay while we run, so F
    // is set in every later one (RFC 4724 3).
    let mut l = local();
    l.forwarding_preserved = false;
    let f_bits = |m: &Fsm| {
        m.local()
            .open()
            .caps
            .graceful_restart
            .map(|g| g.families.iter().all(|(_, f)| *f))
    };
    let m = Fsm::in_state(
        l.clone(),
        false,
        RETRY,
        State::OpenConfirm,
        Some(negotiated(true)),
    );
    assert_eq!(f_bits(&m), Some(false));
    let m = check(
        "OpenConfirm KeepAliveMsg",
        m,
        Event::Message(Message::Keepalive),
        State::Established,
        vec![
            Action::Established(Box::new(negotiated(true))),
            Action::SetTimer(Timer::Hold, HOLD),
            Action::SetTimer(Timer::Keepalive, KEEPALIVE),
        ],
    );
    assert_eq!(f_bits(&m.fresh_connection()), Some(true));
    // Without the kernel, never.
    l.installs_routes = false;
    let mut m = Fsm::in_state(l, false, RETRY, State::OpenConfirm, Some(negotiated(true)));
    m.handle(Event::Message(Message::Keepalive));
    assert_eq!(f_bits(&m.fresh_connection()), Some(false));
}
