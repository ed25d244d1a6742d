//! The session state machine of RFC 4271 8 as a pure function: an event
//! (a decoded message, a timer, a connection coming or going, an operator
//! command) goes in, the actions the socket and timer shell must take come
//! out. No sockets, clocks or tasks: the peer task in `peer.rs` and the
//! OPEN exchange in `handshake.rs` only turn I/O into events and carry out
//! the actions.
//!
//! What bgpd does, mapped onto the RFC's machine:
//! - One machine per neighbor for Idle, Connect and Active, and one copy of
//!   it per TCP connection from TcpConnectionConfirmed on (`connection`), as
//!   RFC 4271 6.8 describes for collisions; the copy that reaches
//!   Established becomes the neighbor's machine.
//! - Connect dials (unless passive) and accepts; Active only accepts. A
//!   failed connection leaves the neighbor in Connect or Active (the RFC's
//!   Connect → Active on TcpConnectionFails does not exist: bgpd keeps
//!   dialing every connect-retry time while it accepts).
//! - Idle is entered when a session ends; the neighbor starts again when
//!   the connect-retry time passes, or at once on a connection from the
//!   peer (the RFC's automatic start; there is no IdleHoldTimer).
//! - Collisions are detected when a connection accepts the peer's OPEN
//!   while a connection the other way round is in OpenConfirm (RFC 4271
//!   6.8); once one connection is Established, every other one loses. The
//!   loser gets Cease / Connection Collision Resolution (`collision.rs`).
//! - While Established, a new connection from a peer with graceful restart
//!   runs its OPEN exchange alongside the session, and replaces the session
//!   once the peer's OPEN on it is accepted (RFC 4724 4.2: the peer
//!   restarted; its routes stay as stale). A new connection that stays
//!   silent, fails or closes leaves the session alone. From a peer without
//!   graceful restart the new connection is refused with a Cease 6/7.
//! - Automatic stops are the instance's resets (maximum prefixes, a
//!   filter change the peer cannot refresh): a NOTIFICATION, then Idle and
//!   a new attempt after the connect-retry time. Manual stops end the
//!   neighbor.
//! - There is no DelayOpen and no damping of peer oscillations.
use super::fsm::{LocalParams, Negotiated, State, negotiate};
use crate::model::Family;
use crate::wire::{self, Message, Notification, Open, Update};
use std::fmt;
use std::time::Duration;

/// RFC 4271 8.2.2 suggests a large hold time (4 minutes) until OPEN arrives;
/// bgpd also uses it in OpenConfirm when the negotiated hold time is zero.
pub const OPEN_WAIT: Duration = Duration::from_secs(240);

/// The timers the shell keeps for the machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Timer {
    ConnectRetry,
    Hold,
    Keepalive,
}

/// What happened (RFC 4271 8.1, with bgpd's names).
// An event lives for one call of `handle`; boxing the message would cost
// an allocation per message received.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, PartialEq)]
pub enum Event {
    /// Event 1/4/5: the neighbor is configured (passive or not).
    ManualStart,
    /// Event 2: the neighbor is removed or replaced; send this and end.
    ManualStop(Notification),
    /// Event 8: the instance resets the session with this NOTIFICATION
    /// (maximum prefixes, a filter change) and it starts over later.
    AutomaticStop(Notification),
    /// Event 9.
    ConnectRetryTimerExpires,
    /// Event 10.
    HoldTimerExpires,
    /// Event 11.
    KeepaliveTimerExpires,
    /// Events 16/17: a TCP connection is up (dialed or accepted).
    TcpConnectionConfirmed,
    /// Event 18: the connection failed or the peer closed it; the text
    /// says how.
    TcpConnectionFails(String),
    /// Events 19, 25, 26, 27 and ROUTE-REFRESH: a whole, valid message.
    Message(Message),
    /// Events 21, 22, 28: a message that fails its checks; the
    /// NOTIFICATION the decoder chose.
    BadMessage(Notification),
    /// Event 23: this connection lost the collision (RFC 4271 6.8).
    CollisionLost,
    /// UPDATEs went out, which restarts the KeepaliveTimer (RFC 4271 8.2.2).
    UpdatesSent,
    /// The operator asks the peer to send a family again (RFC 2918).
    RefreshRequest(Family),
    /// A new connection from the peer, started while Established, had the
    /// peer's OPEN accepted: the peer restarted (RFC 4724 4.2).
    NewConnectionOpened,
}

/// A message the machine asks to send (NOTIFICATIONs go with `Close`).
#[derive(Debug, Clone, PartialEq)]
pub enum Outgoing {
    Open(Box<Open>),
    Keepalive,
    RouteRefresh(Family),
}

impl Outgoing {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::new();
        match self {
            Outgoing::Open(o) => out = o.encode(),
            Outgoing::Keepalive => wire::encode_keepalive(&mut out),
            Outgoing::RouteRefresh(f) => wire::encode_route_refresh(*f, &mut out),
        }
        out
    }
}

/// Why a connection ends. Its text is the neighbor's last error.
#[derive(Debug, Clone, PartialEq)]
pub enum Cause {
    /// We send this NOTIFICATION, then close.
    Sent(Notification),
    /// The peer sent this NOTIFICATION.
    Received(Notification),
    /// The transport failed (the shell's description).
    Transport(String),
    /// The peer's OPEN was accepted on a new connection while
    /// Established (a restart).
    Replaced,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Sent(n) => write!(f, "sent NOTIFICATION {n}"),
            Cause::Received(n) => write!(f, "peer sent NOTIFICATION {n}"),
            Cause::Transport(e) => f.write_str(e),
            Cause::Replaced => f.write_str("peer opened a new connection (restart)"),
        }
    }
}

/// What the neighbor does once the connection is closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Then {
    /// Idle, then again after the connect-retry time.
    Retry,
    /// The neighbor is gone.
    Stop,
}

/// What the shell must do, in order.
#[derive(Debug, Clone, PartialEq)]
pub enum Action {
    /// Open a TCP connection to the peer.
    Dial,
    Send(Outgoing),
    /// (Re)start a timer; a zero duration is never set.
    SetTimer(Timer, Duration),
    StopTimer(Timer),
    /// The session is Established: hand it to the instance.
    Established(Box<Negotiated>),
    /// An UPDATE for the instance (routes in, withdrawals, End-of-RIB).
    Routes(Box<Update>),
    /// The peer asks for our routes of this family again.
    RefreshRoutes(Family),
    /// Refuse the peer's new connection with Cease 6/7.
    RejectConnection,
    /// Run the OPEN exchange on the peer's new connection alongside the
    /// session (with a machine from `fresh_connection`); the peer may have
    /// restarted.
    TryNewConnection,
    /// The session that was Established is down; with `graceful` the
    /// peer's routes are kept as stale (RFC 4724 4.2).
    Down {
        graceful: bool,
    },
    /// Close this connection (sending the NOTIFICATION in `cause`).
    Close {
        cause: Cause,
        then: Then,
    },
}

/// One neighbor's (or one connection's) machine.
#[derive(Debug, Clone, PartialEq)]
pub struct Fsm {
    state: State,
    local: LocalParams,
    passive: bool,
    connect_retry: Duration,
    negotiated: Option<Negotiated>,
}

impl Fsm {
    pub fn new(local: LocalParams, passive: bool, connect_retry: Duration) -> Fsm {
        Fsm {
            state: State::Idle,
            local,
            passive,
            connect_retry,
            negotiated: None,
        }
    }

    pub fn state(&self) -> State {
        self.state
    }

    pub fn local(&self) -> &LocalParams {
        &self.local
    }

    /// The session's parameters from OpenConfirm on.
    pub fn negotiated(&self) -> Option<&Negotiated> {
        self.negotiated.as_ref()
    }

    /// A copy for one new TCP connection (RFC 4271 6.8).
    pub fn connection(&self) -> Fsm {
        self.clone()
    }

    /// A copy for a new connection while this one is Established: the
    /// machine as it will be once the session has ended.
    pub fn fresh_connection(&self) -> Fsm {
        Fsm {
            state: State::Idle,
            negotiated: None,
            ..self.clone()
        }
    }

    /// The waiting state: Active when passive, else Connect.
    fn waiting(&self) -> State {
        if self.passive {
            State::Active
        } else {
            State::Connect
        }
    }

    fn start(&mut self) -> Vec<Action> {
        self.state = self.waiting();
        if self.passive {
            vec![]
        } else {
            vec![Action::Dial]
        }
    }

    /// Runs one event; returns the actions, to be done in order.
    pub fn handle(&mut self, event: Event) -> Vec<Action> {
        use Event as E;
        use State as S;
        match (self.state, event) {
            (S::Idle, E::ManualStart | E::ConnectRetryTimerExpires) => self.start(),
            (S::Connect | S::Active, E::ManualStart) => vec![],
            (S::Connect, E::ConnectRetryTimerExpires) => vec![Action::Dial],
            (S::Active, E::ConnectRetryTimerExpires) => vec![],
            (S::Idle | S::Connect | S::Active, E::TcpConnectionConfirmed) => {
                self.state = S::OpenSent;
                vec![
                    Action::Send(Outgoing::Open(Box::new(self.local.open()))),
                    Action::SetTimer(Timer::Hold, OPEN_WAIT),
                ]
            }
            (S::Connect, E::TcpConnectionFails(_)) => {
                vec![Action::SetTimer(Timer::ConnectRetry, self.connect_retry)]
            }
            (S::Idle | S::Connect | S::Active, E::ManualStop(_)) => {
                self.state = S::Idle;
                vec![Action::StopTimer(Timer::ConnectRetry)]
            }
            (S::OpenSent, E::Message(Message::Open(open))) => self.open_received(&open),
            (S::OpenConfirm, E::Message(Message::Keepalive)) => self.keepalive_confirms(),
            (S::OpenSent, E::Message(Message::Notification(n)))
            | (S::OpenConfirm, E::Message(Message::Notification(n))) => {
                self.close(Cause::Received(n), Then::Retry)
            }
            // RFC 6608: unexpected messages.
            (S::OpenSent, E::Message(_)) => self.close(
                Cause::Sent(Notification::unexpected_in_open_sent()),
                Then::Retry,
            ),
            (S::OpenConfirm, E::Message(_)) => self.close(
                Cause::Sent(Notification::unexpected_in_open_confirm()),
                Then::Retry,
            ),
            (S::Established, E::Message(m)) => self.established_message(m),
            (S::OpenSent | S::OpenConfirm | S::Established, E::BadMessage(n)) => {
                self.close(Cause::Sent(n), Then::Retry)
            }
            (S::OpenSent | S::OpenConfirm | S::Established, E::HoldTimerExpires) => {
                self.close(Cause::Sent(Notification::hold_timer_expired()), Then::Retry)
            }
            (S::OpenSent | S::OpenConfirm | S::Established, E::TcpConnectionFails(e)) => {
                self.close(Cause::Transport(e), Then::Retry)
            }
            (S::OpenSent | S::OpenConfirm | S::Established, E::ManualStop(n)) => {
                self.close(Cause::Sent(n), Then::Stop)
            }
            (S::Established, E::AutomaticStop(n)) => self.close(Cause::Sent(n), Then::Retry),
            // Not announced to the instance yet, so no Down.
            (S::OpenSent | S::OpenConfirm | S::Established, E::CollisionLost) => self.leave(
                Cause::Sent(Notification::connection_collision()),
                Then::Retry,
                false,
            ),
            // RFC 4271 8.2.2: OpenConfirm keeps the peer's hold timer fed too.
            (S::OpenConfirm | S::Established, E::KeepaliveTimerExpires) => {
                match self.keepalive_timer() {
                    Some(t) => vec![Action::Send(Outgoing::Keepalive), t],
                    None => vec![],
                }
            }
            (S::Established, E::UpdatesSent) => self.keepalive_timer().into_iter().collect(),
            (S::Established, E::RefreshRequest(f)) => {
                vec![Action::Send(Outgoing::RouteRefresh(f))]
            }
            // RFC 4724 4.2 lets a new connection end the session at once,
            // but one that never sends an OPEN would then hold the
            // neighbor down: the session ends only once the new
            // connection's OPEN is accepted.
            (S::Established, E::TcpConnectionConfirmed) => {
                if self.graceful_restart() {
                    vec![Action::TryNewConnection]
                } else {
                    // RFC 4271 6.8: a new connection while Established is closed.
                    vec![Action::RejectConnection]
                }
            }
            (S::Established, E::NewConnectionOpened) if self.graceful_restart() => {
                self.close(Cause::Replaced, Then::Retry)
            }
            // Everything else changes nothing: commands that only matter
            // while Established, timers of a state already left.
            _ => vec![],
        }
    }

    fn graceful_restart(&self) -> bool {
        self.negotiated
            .as_ref()
            .is_some_and(|n| n.peer_graceful_restart.is_some())
    }

    fn hold_timer(&self) -> Action {
        match self.negotiated.as_ref().map(|n| n.hold_time) {
            Some(h) if !h.is_zero() => Action::SetTimer(Timer::Hold, h),
            _ => Action::StopTimer(Timer::Hold),
        }
    }

    fn keepalive_timer(&self) -> Option<Action> {
        let k = self.negotiated.as_ref()?.keepalive;
        (!k.is_zero()).then_some(Action::SetTimer(Timer::Keepalive, k))
    }

    /// OpenSent + BGPOpen: negotiate (RFC 4271 6.2), then KEEPALIVE, and
    /// the KeepaliveTimer unless the hold time is zero (8.2.2).
    fn open_received(&mut self, open: &Open) -> Vec<Action> {
        match negotiate(&self.local, open) {
            Ok(n) => {
                let hold = if n.hold_time.is_zero() {
                    OPEN_WAIT
                } else {
                    n.hold_time
                };
                self.negotiated = Some(n);
                self.state = State::OpenConfirm;
                let mut a = vec![
                    Action::Send(Outgoing::Keepalive),
                    Action::SetTimer(Timer::Hold, hold),
                ];
                a.extend(self.keepalive_timer());
                a
            }
            Err(n) => self.close(Cause::Sent(n), Then::Retry),
        }
    }

    /// OpenConfirm + KeepAliveMsg: Established.
    fn keepalive_confirms(&mut self) -> Vec<Action> {
        let Some(n) = self.negotiated.clone() else {
            return vec![];
        };
        self.state = State::Established;
        // Our forwarding outlives this session (RFC 4724 3, F bit).
        self.local.forwarding_preserved |= self.local.installs_routes;
        let mut a = vec![Action::Established(Box::new(n)), self.hold_timer()];
        a.extend(self.keepalive_timer());
        a
    }

    fn established_message(&mut self, m: Message) -> Vec<Action> {
        let mut a = vec![self.hold_timer()];
        match m {
            Message::Keepalive => {}
            Message::Update(u) => a.push(Action::Routes(Box::new(u))),
            // RFC 7313 3, 4: only subtype 0 asks for the routes. BoRR (1)
            // and EoRR (2) only mark a refresh of the peer's own, and any
            // other subtype is ignored.
            Message::RouteRefresh {
                family: Some(f),
                subtype: 0,
                ..
            } if self
                .negotiated
                .as_ref()
                .is_some_and(|n| n.families.contains(&f)) =>
            {
                a.push(Action::RefreshRoutes(f));
            }
            // RFC 2918 5: ignore a refresh for a family not negotiated.
            Message::RouteRefresh { .. } => {}
            Message::Notification(n) => return self.close(Cause::Received(n), Then::Retry),
            // RFC 6608: OPEN while Established.
            Message::Open(_) => {
                return self.close(
                    Cause::Sent(Notification::unexpected_in_established()),
                    Then::Retry,
                );
            }
        }
        a
    }

    /// Leaves for Idle. From Established the instance hears of it, and a
    /// transport failure with graceful restart keeps the routes (RFC 4724
    /// 4.2).
    fn close(&mut self, cause: Cause, then: Then) -> Vec<Action> {
        let announced = self.state == State::Established;
        self.leave(cause, then, announced)
    }

    /// Leaves for Idle; `announced`: the instance knows of the session.
    fn leave(&mut self, cause: Cause, then: Then, announced: bool) -> Vec<Action> {
        let mut a = Vec::new();
        if announced {
            let graceful =
                self.graceful_restart() && matches!(cause, Cause::Transport(_) | Cause::Replaced);
            a.push(Action::Down { graceful });
        }
        a.extend([
            Action::StopTimer(Timer::Hold),
            Action::StopTimer(Timer::Keepalive),
        ]);
        a.push(Action::Close { cause, then });
        if then == Then::Retry {
            a.push(Action::SetTimer(Timer::ConnectRetry, self.connect_retry));
        }
        self.state = State::Idle;
        self.negotiated = None;
        a
    }
}

#[cfg(test)]
impl Fsm {
    /// A machine in `state`, with `negotiated` from OpenConfirm on.
    pub(crate) fn in_state(
        local: LocalParams,
        passive: bool,
        connect_retry: Duration,
        state: State,
        negotiated: Option<Negotiated>,
    ) -> Fsm {
        Fsm {
            state,
            local,
            passive,
            connect_retry,
            negotiated,
        }
    }
}
