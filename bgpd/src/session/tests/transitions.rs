//! One row per RFC 4271 8.2.2 transition bgpd has, written as data: the
//! state, the event, the next state and the actions, in order. Events a
//! state ignores are rows too (no actions, same state).
use super::*;
use crate::session::machine::{OPEN_WAIT, Outgoing};
use crate::wire::{Message, Notification, Update, UpdateError};

/// How the row's machine is set up.
#[derive(Clone, Copy)]
enum Setup {
    /// Dials and accepts.
    Active,
    /// Only accepts (a passive neighbor).
    Passive,
}

struct Row {
    name: &'static str,
    from: State,
    setup: Setup,
    event: Event,
    next: State,
    actions: Vec<Action>,
}

fn row(
    name: &'static str,
    from: State,
    setup: Setup,
    event: Event,
    next: State,
    actions: Vec<Action>,
) -> Row {
    Row {
        name,
        from,
        setup,
        event,
        next,
        actions,
    }
}

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
    let (afi, safi) = family.afi_safi();
    Message::RouteRefresh {
        family: Some(family),
        afi,
        safi,
        subtype: 0,
    }
}

fn cease() -> Notification {
    Notification::administrative_shutdown()
}

fn sent(n: Notification) -> Cause {
    Cause::Sent(n)
}

fn rows() -> Vec<Row> {
    use Action as A;
    use Event as E;
    use Setup::{Active as Dials, Passive};
    use State::*;
    let hold_set = A::SetTimer(Timer::Hold, HOLD);
    let ka_set = A::SetTimer(Timer::Keepalive, KEEPALIVE);
    let retry_set = A::SetTimer(Timer::ConnectRetry, RETRY);
    let tcp_fails = || E::TcpConnectionFails("connection closed by peer".into());
    let transport = || Cause::Transport("connection closed by peer".into());
    let bad_update = Notification::update_error(UpdateError::MalformedAsPath, vec![]);
    let bad_header = Notification::bad_message_length([0, 18]);
    let bad_open = Notification::unacceptable_hold_time();
    let mut wrong_as = peer_open(90, false);
    wrong_as.asn = 65009;
    wrong_as.my_as_field = 65009;
    let retry = Then::Retry;
    vec![
        // Idle.
        row(
            "Idle ManualStart",
            Idle,
            Dials,
            E::ManualStart,
            Connect,
            vec![A::Dial],
        ),
        row(
            "Idle ManualStart passive",
            Idle,
            Passive,
            E::ManualStart,
            Active,
            vec![],
        ),
        row(
            "Idle ConnectRetryTimer_Expires",
            Idle,
            Dials,
            E::ConnectRetryTimerExpires,
            Connect,
            vec![A::Dial],
        ),
        row(
            "Idle ConnectRetryTimer_Expires passive",
            Idle,
            Passive,
            E::ConnectRetryTimerExpires,
            Active,
            vec![],
        ),
        row(
            "Idle TcpConnectionConfirmed (peer's connection while waiting)",
            Idle,
            Dials,
            E::TcpConnectionConfirmed,
            OpenSent,
            vec![send_open(), A::SetTimer(Timer::Hold, OPEN_WAIT)],
        ),
        row(
            "Idle ManualStop",
            Idle,
            Dials,
            E::ManualStop(cease()),
            Idle,
            vec![A::StopTimer(Timer::ConnectRetry)],
        ),
        row(
            "Idle HoldTimer_Expires ignored",
            Idle,
            Dials,
            E::HoldTimerExpires,
            Idle,
            vec![],
        ),
        row(
            "Idle BGPOpen ignored",
            Idle,
            Dials,
            E::Message(Message::Open(peer_open(90, false))),
            Idle,
            vec![],
        ),
        // Connect.
        row(
            "Connect ManualStart ignored",
            Connect,
            Dials,
            E::ManualStart,
            Connect,
            vec![],
        ),
        row(
            "Connect ConnectRetryTimer_Expires",
            Connect,
            Dials,
            E::ConnectRetryTimerExpires,
            Connect,
            vec![A::Dial],
        ),
        row(
            "Connect TcpConnectionConfirmed",
            Connect,
            Dials,
            E::TcpConnectionConfirmed,
            OpenSent,
            vec![send_open(), A::SetTimer(Timer::Hold, OPEN_WAIT)],
        ),
        row(
            "Connect TcpConnectionFails",
            Connect,
            Dials,
            tcp_fails(),
            Connect,
            vec![retry_set.clone()],
        ),
        row(
            "Connect ManualStop",
            Connect,
            Dials,
            E::ManualStop(cease()),
            Idle,
            vec![A::StopTimer(Timer::ConnectRetry)],
        ),
        row(
            "Connect AutomaticStop ignored",
            Connect,
            Dials,
            E::AutomaticStop(cease()),
            Connect,
            vec![],
        ),
        row(
            "Connect KeepaliveTimer_Expires ignored",
            Connect,
            Dials,
            E::KeepaliveTimerExpires,
            Connect,
            vec![],
        ),
        // Active.
        row(
            "Active ConnectRetryTimer_Expires",
            Active,
            Passive,
            E::ConnectRetryTimerExpires,
            Active,
            vec![],
        ),
        row(
            "Active TcpConnectionConfirmed",
            Active,
            Passive,
            E::TcpConnectionConfirmed,
            OpenSent,
            vec![send_open(), A::SetTimer(Timer::Hold, OPEN_WAIT)],
        ),
        row(
            "Active TcpConnectionFails",
            Active,
            Passive,
            tcp_fails(),
            Active,
            vec![],
        ),
        row(
            "Active ManualStop",
            Active,
            Passive,
            E::ManualStop(cease()),
            Idle,
            vec![A::StopTimer(Timer::ConnectRetry)],
        ),
        // OpenSent.
        row(
            "OpenSent BGPOpen",
            OpenSent,
            Dials,
            E::Message(Message::Open(peer_open(30, false))),
            OpenConfirm,
            vec![
                A::Send(Outgoing::Keepalive),
                A::SetTimer(Timer::Hold, Duration::from_secs(30)),
            ],
        ),
        row(
            "OpenSent BGPOpen hold time 0",
            OpenSent,
            Dials,
            E::Message(Message::Open(peer_open(0, false))),
            OpenConfirm,
            vec![
                A::Send(Outgoing::Keepalive),
                A::SetTimer(Timer::Hold, OPEN_WAIT),
            ],
        ),
        row(
            "OpenSent BGPOpen bad peer AS",
            OpenSent,
            Dials,
            E::Message(Message::Open(wrong_as)),
            Idle,
            closing(None, sent(Notification::bad_peer_as(65009)), retry),
        ),
        row(
            "OpenSent BGPHeaderErr",
            OpenSent,
            Dials,
            E::BadMessage(bad_header.clone()),
            Idle,
            closing(None, sent(bad_header.clone()), retry),
        ),
        row(
            "OpenSent BGPOpenMsgErr",
            OpenSent,
            Dials,
            E::BadMessage(bad_open.clone()),
            Idle,
            closing(None, sent(bad_open.clone()), retry),
        ),
        row(
            "OpenSent NotifMsg",
            OpenSent,
            Dials,
            E::Message(Message::Notification(cease())),
            Idle,
            closing(None, Cause::Received(cease()), retry),
        ),
        row(
            "OpenSent KeepAliveMsg",
            OpenSent,
            Dials,
            E::Message(Message::Keepalive),
            Idle,
            closing(None, sent(Notification::unexpected_in_open_sent()), retry),
        ),
        row(
            "OpenSent UpdateMsg",
            OpenSent,
            Dials,
            E::Message(Message::Update(update())),
            Idle,
            closing(None, sent(Notification::unexpected_in_open_sent()), retry),
        ),
        row(
            "OpenSent HoldTimer_Expires",
            OpenSent,
            Dials,
            E::HoldTimerExpires,
            Idle,
            closing(None, sent(Notification::hold_timer_expired()), retry),
        ),
        row(
            "OpenSent TcpConnectionFails",
            OpenSent,
            Dials,
            tcp_fails(),
            Idle,
            closing(None, transport(), retry),
        ),
        row(
            "OpenSent ManualStop",
            OpenSent,
            Dials,
            E::ManualStop(cease()),
            Idle,
            closing(None, sent(cease()), Then::Stop),
        ),
        row(
            "OpenSent OpenCollisionDump",
            OpenSent,
            Dials,
            E::CollisionLost,
            Idle,
            closing(None, sent(Notification::connection_collision()), retry),
        ),
        // OpenConfirm.
        row(
            "OpenConfirm KeepAliveMsg",
            OpenConfirm,
            Dials,
            E::Message(Message::Keepalive),
            Established,
            vec![
                A::Established(Box::new(negotiated(false))),
                hold_set.clone(),
                ka_set.clone(),
            ],
        ),
        row(
            "OpenConfirm NotifMsg",
            OpenConfirm,
            Dials,
            E::Message(Message::Notification(cease())),
            Idle,
            closing(None, Cause::Received(cease()), retry),
        ),
        row(
            "OpenConfirm BGPOpen",
            OpenConfirm,
            Dials,
            E::Message(Message::Open(peer_open(90, false))),
            Idle,
            closing(
                None,
                sent(Notification::unexpected_in_open_confirm()),
                retry,
            ),
        ),
        row(
            "OpenConfirm UpdateMsg",
            OpenConfirm,
            Dials,
            E::Message(Message::Update(update())),
            Idle,
            closing(
                None,
                sent(Notification::unexpected_in_open_confirm()),
                retry,
            ),
        ),
        row(
            "OpenConfirm BGPHeaderErr",
            OpenConfirm,
            Dials,
            E::BadMessage(bad_header.clone()),
            Idle,
            closing(None, sent(bad_header.clone()), retry),
        ),
        row(
            "OpenConfirm HoldTimer_Expires",
            OpenConfirm,
            Dials,
            E::HoldTimerExpires,
            Idle,
            closing(None, sent(Notification::hold_timer_expired()), retry),
        ),
        row(
            "OpenConfirm TcpConnectionFails",
            OpenConfirm,
            Dials,
            tcp_fails(),
            Idle,
            closing(None, transport(), retry),
        ),
        row(
            "OpenConfirm ManualStop",
            OpenConfirm,
            Dials,
            E::ManualStop(cease()),
            Idle,
            closing(None, sent(cease()), Then::Stop),
        ),
        row(
            "OpenConfirm OpenCollisionDump",
            OpenConfirm,
            Dials,
            E::CollisionLost,
            Idle,
            closing(None, sent(Notification::connection_collision()), retry),
        ),
        row(
            "OpenConfirm KeepaliveTimer_Expires ignored",
            OpenConfirm,
            Dials,
            E::KeepaliveTimerExpires,
            OpenConfirm,
            vec![],
        ),
        // Established.
        row(
            "Established KeepAliveMsg",
            Established,
            Dials,
            E::Message(Message::Keepalive),
            Established,
            vec![hold_set.clone()],
        ),
        row(
            "Established UpdateMsg",
            Established,
            Dials,
            E::Message(Message::Update(update())),
            Established,
            vec![hold_set.clone(), A::Routes(Box::new(update()))],
        ),
        row(
            "Established ROUTE-REFRESH",
            Established,
            Dials,
            E::Message(refresh(Family::Ipv4Unicast)),
            Established,
            vec![hold_set.clone(), A::RefreshRoutes(Family::Ipv4Unicast)],
        ),
        row(
            "Established ROUTE-REFRESH not negotiated",
            Established,
            Dials,
            E::Message(refresh(Family::Ipv6Unicast)),
            Established,
            vec![hold_set.clone()],
        ),
        row(
            "Established KeepaliveTimer_Expires",
            Established,
            Dials,
            E::KeepaliveTimerExpires,
            Established,
            vec![A::Send(Outgoing::Keepalive), ka_set.clone()],
        ),
        row(
            "Established UPDATEs sent",
            Established,
            Dials,
            E::UpdatesSent,
            Established,
            vec![ka_set.clone()],
        ),
        row(
            "Established refresh request",
            Established,
            Dials,
            E::RefreshRequest(Family::Ipv4Unicast),
            Established,
            vec![A::Send(Outgoing::RouteRefresh(Family::Ipv4Unicast))],
        ),
        row(
            "Established NotifMsg",
            Established,
            Dials,
            E::Message(Message::Notification(cease())),
            Idle,
            closing(Some(false), Cause::Received(cease()), retry),
        ),
        row(
            "Established BGPOpen",
            Established,
            Dials,
            E::Message(Message::Open(peer_open(90, false))),
            Idle,
            closing(
                Some(false),
                sent(Notification::unexpected_in_established()),
                retry,
            ),
        ),
        row(
            "Established UpdateMsgErr",
            Established,
            Dials,
            E::BadMessage(bad_update.clone()),
            Idle,
            closing(Some(false), sent(bad_update.clone()), retry),
        ),
        row(
            "Established BGPHeaderErr",
            Established,
            Dials,
            E::BadMessage(bad_header.clone()),
            Idle,
            closing(Some(false), sent(bad_header.clone()), retry),
        ),
        row(
            "Established HoldTimer_Expires",
            Established,
            Dials,
            E::HoldTimerExpires,
            Idle,
            closing(Some(false), sent(Notification::hold_timer_expired()), retry),
        ),
        row(
            "Established TcpConnectionFails",
            Established,
            Dials,
            tcp_fails(),
            Idle,
            closing(Some(false), transport(), retry),
        ),
        row(
            "Established ManualStop",
            Established,
            Dials,
            E::ManualStop(cease()),
            Idle,
            closing(Some(false), sent(cease()), Then::Stop),
        ),
        row(
            "Established AutomaticStop",
            Established,
            Dials,
            E::AutomaticStop(Notification::other_configuration_change()),
            Idle,
            closing(
                Some(false),
                sent(Notification::other_configuration_change()),
                retry,
            ),
        ),
        row(
            "Established new connection refused",
            Established,
            Dials,
            E::TcpConnectionConfirmed,
            Established,
            vec![A::RejectConnection],
        ),
        row(
            "Established collision lost before the instance heard",
            Established,
            Dials,
            E::CollisionLost,
            Idle,
            closing(None, sent(Notification::connection_collision()), retry),
        ),
        row(
            "Established ConnectRetryTimer_Expires ignored",
            Established,
            Dials,
            E::ConnectRetryTimerExpires,
            Established,
            vec![],
        ),
    ]
}

#[test]
fn every_rfc_4271_transition_bgpd_has() {
    let rows = rows();
    for r in rows {
        let m = fsm(r.from, matches!(r.setup, Setup::Passive), false);
        check(r.name, m, r.event, r.next, r.actions);
    }
}

#[test]
fn the_table_covers_every_state() {
    let from: Vec<State> = rows().iter().map(|r| r.from).collect();
    for s in [
        State::Idle,
        State::Connect,
        State::Active,
        State::OpenSent,
        State::OpenConfirm,
        State::Established,
    ] {
        assert!(from.contains(&s), "no row starts in {s}");
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
    check(
        "Established UPDATEs sent, hold 0",
        m,
        Event::UpdatesSent,
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
