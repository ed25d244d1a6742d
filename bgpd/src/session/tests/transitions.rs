//! One test per RFC 4271 8.2.2 transition bgpd has, written as data: a row
//! of the state, the event, the next state and the actions, in order.
//! Events a state ignores are rows too (no actions, same state).
use super::*;
use crate::session::machine::{OPEN_WAIT, Outgoing};
use crate::wire::{Message, Notification, Update, UpdateError};

fn send_open() -> Action {
    Action::Send(Outgoing::Open(Box::new(local().open())))
}

fn update() -> Update {
    Update {
        withdrawn: vec![],
        reach: vec![],
        attrs: None,
        end_of_rib: Some(Family::Ipv4Unicast),
        treat_as_withdraw: None,
        discarded: vec![],
    }
}

fn refresh(family: Family) -> Message {
    refresh_subtype(family, 0)
}

fn refresh_subtype(family: Family, subtype: u8) -> Message {
    let (afi, safi) = family.afi_safi();
    Message::RouteRefresh {
        family: Some(family),
        afi,
        safi,
        subtype,
    }
}

fn cease() -> Notification {
    Notification::administrative_shutdown()
}

fn sent(n: Notification) -> Cause {
    Cause::Sent(n)
}

const DIALS: bool = false;
const PASSIVE: bool = true;

fn hold_set() -> Action {
    Action::SetTimer(Timer::Hold, HOLD)
}

fn ka_set() -> Action {
    Action::SetTimer(Timer::Keepalive, KEEPALIVE)
}

fn retry_set() -> Action {
    Action::SetTimer(Timer::ConnectRetry, RETRY)
}

fn tcp_fails() -> Event {
    Event::TcpConnectionFails("connection closed by peer".into())
}

fn transport() -> Cause {
    Cause::Transport("connection closed by peer".into())
}

fn bad_update() -> Notification {
    Notification::update_error(UpdateError::MalformedAsPath, vec![])
}

fn bad_header() -> Notification {
    Notification::bad_message_length([0, 18])
}

fn bad_open() -> Notification {
    Notification::unacceptable_hold_time()
}

/// An OPEN from the wrong AS.
fn wrong_as() -> Open {
    let mut o = peer_open(90, false);
    o.asn = 65009;
    o.my_as_field = 65009;
    o
}

/// One test per row, `name: from, setup, event => next, actions;`, run on
/// a machine in `from` (a negotiated session from OpenConfirm on). The
/// rows' starting states are collected in `FROM`.
macro_rules! transitions {
    ($($name:ident: $from:ident, $setup:ident, $event:expr => $next:ident, $actions:expr;)*) => {
        $(
            #[test]
            fn $name() {
                #[allow(unused_imports)]
                use Action as A;
                #[allow(unused_imports)]
                use Event as E;
                check(
                    stringify!($name),
                    fsm(State::$from, $setup, false),
                    $event,
                    State::$next,
                    $actions,
                );
            }
        )*
        const FROM: &[State] = &[$(State::$from),*];
    };
}

transitions! {
    // Idle.
    idle_manual_start: Idle, DIALS, E::ManualStart => Connect, vec![A::Dial];
    idle_manual_start_passive: Idle, PASSIVE, E::ManualStart => Active, vec![];
    idle_connect_retry_timer_expires: Idle, DIALS, E::ConnectRetryTimerExpires => Connect, vec![A::Dial];
    idle_connect_retry_timer_expires_passive: Idle, PASSIVE, E::ConnectRetryTimerExpires => Active, vec![];
    idle_tcp_connection_confirmed_while_waiting: Idle, DIALS, E::TcpConnectionConfirmed => OpenSent, vec![send_open(), A::SetTimer(Timer::Hold, OPEN_WAIT)];
    idle_manual_stop: Idle, DIALS, E::ManualStop(cease()) => Idle, vec![A::StopTimer(Timer::ConnectRetry)];
    idle_hold_timer_expires_ignored: Idle, DIALS, E::HoldTimerExpires => Idle, vec![];
    idle_bgp_open_ignored: Idle, DIALS, E::Message(Message::Open(peer_open(90, false))) => Idle, vec![];
    // Connect.
    connect_manual_start_ignored: Connect, DIALS, E::ManualStart => Connect, vec![];
    connect_connect_retry_timer_expires: Connect, DIALS, E::ConnectRetryTimerExpires => Connect, vec![A::Dial];
    connect_tcp_connection_confirmed: Connect, DIALS, E::TcpConnectionConfirmed => OpenSent, vec![send_open(), A::SetTimer(Timer::Hold, OPEN_WAIT)];
    connect_tcp_connection_fails: Connect, DIALS, tcp_fails() => Connect, vec![retry_set()];
    connect_manual_stop: Connect, DIALS, E::ManualStop(cease()) => Idle, vec![A::StopTimer(Timer::ConnectRetry)];
    connect_automatic_stop_ignored: Connect, DIALS, E::AutomaticStop(cease()) => Connect, vec![];
    connect_keepalive_timer_expires_ignored: Connect, DIALS, E::KeepaliveTimerExpires => Connect, vec![];
    // Active.
    active_connect_retry_timer_expires: Active, PASSIVE, E::ConnectRetryTimerExpires => Active, vec![];
    active_tcp_connection_confirmed: Active, PASSIVE, E::TcpConnectionConfirmed => OpenSent, vec![send_open(), A::SetTimer(Timer::Hold, OPEN_WAIT)];
    active_tcp_connection_fails: Active, PASSIVE, tcp_fails() => Active, vec![];
    active_manual_stop: Active, PASSIVE, E::ManualStop(cease()) => Idle, vec![A::StopTimer(Timer::ConnectRetry)];
    // OpenSent.
    open_sent_bgp_open: OpenSent, DIALS, E::Message(Message::Open(peer_open(30, false))) => OpenConfirm, vec![A::Send(Outgoing::Keepalive), A::SetTimer(Timer::Hold, Duration::from_secs(30)), A::SetTimer(Timer::Keepalive, Duration::from_secs(10))];
    open_sent_bgp_open_hold_time_0: OpenSent, DIALS, E::Message(Message::Open(peer_open(0, false))) => OpenConfirm, vec![A::Send(Outgoing::Keepalive), A::SetTimer(Timer::Hold, OPEN_WAIT)];
    open_sent_bgp_open_bad_peer_as: OpenSent, DIALS, E::Message(Message::Open(wrong_as())) => Idle, closing(None, sent(Notification::bad_peer_as(65009)), Then::Retry);
    open_sent_bgp_header_err: OpenSent, DIALS, E::BadMessage(bad_header()) => Idle, closing(None, sent(bad_header()), Then::Retry);
    open_sent_bgp_open_msg_err: OpenSent, DIALS, E::BadMessage(bad_open()) => Idle, closing(None, sent(bad_open()), Then::Retry);
    open_sent_notif_msg: OpenSent, DIALS, E::Message(Message::Notification(cease())) => Idle, closing(None, Cause::Received(cease()), Then::Retry);
    open_sent_keep_alive_msg: OpenSent, DIALS, E::Message(Message::Keepalive) => Idle, closing(None, sent(Notification::unexpected_in_open_sent()), Then::Retry);
    open_sent_update_msg: OpenSent, DIALS, E::Message(Message::Update(update())) => Idle, closing(None, sent(Notification::unexpected_in_open_sent()), Then::Retry);
    open_sent_hold_timer_expires: OpenSent, DIALS, E::HoldTimerExpires => Idle, closing(None, sent(Notification::hold_timer_expired()), Then::Retry);
    open_sent_tcp_connection_fails: OpenSent, DIALS, tcp_fails() => Idle, closing(None, transport(), Then::Retry);
    open_sent_manual_stop: OpenSent, DIALS, E::ManualStop(cease()) => Idle, closing(None, sent(cease()), Then::Stop);
    open_sent_open_collision_dump: OpenSent, DIALS, E::CollisionLost => Idle, closing(None, sent(Notification::connection_collision()), Then::Retry);
    // OpenConfirm.
    open_confirm_keep_alive_msg: OpenConfirm, DIALS, E::Message(Message::Keepalive) => Established, vec![A::Established(Box::new(negotiated(false))), hold_set(), ka_set()];
    open_confirm_notif_msg: OpenConfirm, DIALS, E::Message(Message::Notification(cease())) => Idle, closing(None, Cause::Received(cease()), Then::Retry);
    open_confirm_bgp_open: OpenConfirm, DIALS, E::Message(Message::Open(peer_open(90, false))) => Idle, closing(None, sent(Notification::unexpected_in_open_confirm()), Then::Retry);
    open_confirm_update_msg: OpenConfirm, DIALS, E::Message(Message::Update(update())) => Idle, closing(None, sent(Notification::unexpected_in_open_confirm()), Then::Retry);
    open_confirm_bgp_header_err: OpenConfirm, DIALS, E::BadMessage(bad_header()) => Idle, closing(None, sent(bad_header()), Then::Retry);
    open_confirm_hold_timer_expires: OpenConfirm, DIALS, E::HoldTimerExpires => Idle, closing(None, sent(Notification::hold_timer_expired()), Then::Retry);
    open_confirm_tcp_connection_fails: OpenConfirm, DIALS, tcp_fails() => Idle, closing(None, transport(), Then::Retry);
    open_confirm_manual_stop: OpenConfirm, DIALS, E::ManualStop(cease()) => Idle, closing(None, sent(cease()), Then::Stop);
    open_confirm_open_collision_dump: OpenConfirm, DIALS, E::CollisionLost => Idle, closing(None, sent(Notification::connection_collision()), Then::Retry);
    // RFC 4271 8.2.2: a KEEPALIVE, and the timer again.
    open_confirm_keepalive_timer_expires: OpenConfirm, DIALS, E::KeepaliveTimerExpires => OpenConfirm, vec![A::Send(Outgoing::Keepalive), ka_set()];
    // Established.
    established_keep_alive_msg: Established, DIALS, E::Message(Message::Keepalive) => Established, vec![hold_set()];
    established_update_msg: Established, DIALS, E::Message(Message::Update(update())) => Established, vec![hold_set(), A::Routes(Box::new(update()))];
    established_route_refresh: Established, DIALS, E::Message(refresh(Family::Ipv4Unicast)) => Established, vec![hold_set(), A::RefreshRoutes(Family::Ipv4Unicast)];
    established_route_refresh_not_negotiated: Established, DIALS, E::Message(refresh(Family::Ipv6Unicast)) => Established, vec![hold_set()];
    // RFC 7313: BoRR and EoRR are markers, not requests; other subtypes are ignored.
    established_route_refresh_borr_ignored: Established, DIALS, E::Message(refresh_subtype(Family::Ipv4Unicast, 1)) => Established, vec![hold_set()];
    established_route_refresh_eorr_ignored: Established, DIALS, E::Message(refresh_subtype(Family::Ipv4Unicast, 2)) => Established, vec![hold_set()];
    established_route_refresh_unknown_subtype_ignored: Established, DIALS, E::Message(refresh_subtype(Family::Ipv4Unicast, 7)) => Established, vec![hold_set()];
    established_keepalive_timer_expires: Established, DIALS, E::KeepaliveTimerExpires => Established, vec![A::Send(Outgoing::Keepalive), ka_set()];
    established_updates_sent: Established, DIALS, E::UpdatesSent => Established, vec![ka_set()];
    established_refresh_request: Established, DIALS, E::RefreshRequest(Family::Ipv4Unicast) => Established, vec![A::Send(Outgoing::RouteRefresh(Family::Ipv4Unicast))];
    established_notif_msg: Established, DIALS, E::Message(Message::Notification(cease())) => Idle, closing(Some(false), Cause::Received(cease()), Then::Retry);
    established_bgp_open: Established, DIALS, E::Message(Message::Open(peer_open(90, false))) => Idle, closing(Some(false), sent(Notification::unexpected_in_established()), Then::Retry);
    established_update_msg_err: Established, DIALS, E::BadMessage(bad_update()) => Idle, closing(Some(false), sent(bad_update()), Then::Retry);
    established_bgp_header_err: Established, DIALS, E::BadMessage(bad_header()) => Idle, closing(Some(false), sent(bad_header()), Then::Retry);
    established_hold_timer_expires: Established, DIALS, E::HoldTimerExpires => Idle, closing(Some(false), sent(Notification::hold_timer_expired()), Then::Retry);
    established_tcp_connection_fails: Established, DIALS, tcp_fails() => Idle, closing(Some(false), transport(), Then::Retry);
    established_manual_stop: Established, DIALS, E::ManualStop(cease()) => Idle, closing(Some(false), sent(cease()), Then::Stop);
    established_automatic_stop: Established, DIALS, E::AutomaticStop(Notification::other_configuration_change()) => Idle, closing(Some(false), sent(Notification::other_configuration_change()), Then::Retry);
    established_new_connection_refused: Established, DIALS, E::TcpConnectionConfirmed => Established, vec![A::RejectConnection];
    established_collision_lost_before_the_instance_heard: Established, DIALS, E::CollisionLost => Idle, closing(None, sent(Notification::connection_collision()), Then::Retry);
    established_connect_retry_timer_expires_ignored: Established, DIALS, E::ConnectRetryTimerExpires => Established, vec![];
}

#[test]
fn the_table_covers_every_state() {
    for s in [
        State::Idle,
        State::Connect,
        State::Active,
        State::OpenSent,
        State::OpenConfirm,
        State::Established,
    ] {
        assert!(FROM.contains(&s), "no row starts in {s}");
    }
}

#[test]
fn zero_hold_time_keeps_no_timers() {
    let mut n = negotiated(false);
    n.hold_time = Duration::ZERO;
    n.keepalive = Duration::ZERO;
    let m = Fsm::in_state(local(), false, RETRY, State::OpenConfirm, Some(n.clone()));
    let m = check(
        "OpenConfirm KeepAliveMsg, hold 0",
        m,
        Event::Message(Message::Keepalive),
        State::Established,
        vec![
            Action::Established(Box::new(n)),
            Action::StopTimer(Timer::Hold),
        ],
    );
    let m = check(
        "Established KeepAliveMsg, hold 0",
        m,
        Event::Message(Message::Keepalive),
        State::Established,
        vec![Action::StopTimer(Timer::Hold)],
    );
    let m = check(
        "Established UPDATEs sent, hold 0",
        m,
        Event::UpdatesSent,
        State::Established,
        vec![],
    );
    check(
        "Established KeepaliveTimer_Expires, hold 0",
        m,
        Event::KeepaliveTimerExpires,
        State::Established,
        vec![],
    );
}

#[test]
fn a_whole_session_from_start_to_stop() {
    let m = Fsm::new(local(), false, RETRY);
    let m = check(
        "start",
        m,
        Event::ManualStart,
        State::Connect,
        vec![Action::Dial],
    );
    // The dialed connection is one copy of the neighbor's machine.
    let c = m.connection();
    let c = check(
        "tcp up",
        c,
        Event::TcpConnectionConfirmed,
        State::OpenSent,
        vec![send_open(), Action::SetTimer(Timer::Hold, OPEN_WAIT)],
    );
    let c = check(
        "open",
        c,
        Event::Message(Message::Open(peer_open(90, false))),
        State::OpenConfirm,
        vec![
            Action::Send(Outgoing::Keepalive),
            Action::SetTimer(Timer::Hold, HOLD),
            Action::SetTimer(Timer::Keepalive, KEEPALIVE),
        ],
    );
    assert_eq!(c.negotiated(), Some(&negotiated(false)));
    let c = check(
        "keepalive",
        c,
        Event::Message(Message::Keepalive),
        State::Established,
        vec![
            Action::Established(Box::new(negotiated(false))),
            Action::SetTimer(Timer::Hold, HOLD),
            Action::SetTimer(Timer::Keepalive, KEEPALIVE),
        ],
    );
    let c = check(
        "stop",
        c,
        Event::ManualStop(Notification::peer_deconfigured()),
        State::Idle,
        closing(
            Some(false),
            Cause::Sent(Notification::peer_deconfigured()),
            Then::Stop,
        ),
    );
    assert_eq!(c.negotiated(), None);
}

#[test]
fn causes_read_as_the_last_error_did() {
    assert_eq!(
        Cause::Sent(Notification::hold_timer_expired()).to_string(),
        "sent NOTIFICATION Hold Timer Expired / Unspecific (4/0)"
    );
    assert_eq!(
        Cause::Received(Notification::administrative_shutdown()).to_string(),
        "peer sent NOTIFICATION Cease / Administrative Shutdown (6/2)"
    );
    assert_eq!(
        Cause::Replaced.to_string(),
        "peer opened a new connection (restart)"
    );
}
