//! Unit tests of the session state machine: no sockets, no runtime. The
//! fixtures here build a machine in any state; the tests feed it events.

mod bfd;
mod graceful_restart;
mod max_prefix;
mod transitions;

use super::fsm::{LocalParams, Negotiated, State};
use super::machine::{Action, Cause, Event, Fsm, Then, Timer};
use crate::model::Family;
use crate::wire::{GracefulRestartCap, Open};
use std::time::Duration;

pub(super) const RETRY: Duration = Duration::from_secs(5);
pub(super) const HOLD: Duration = Duration::from_secs(90);
pub(super) const KEEPALIVE: Duration = Duration::from_secs(30);

/// Our side: AS 65000, graceful restart on (restart time 120).
pub(super) fn local() -> LocalParams {
    LocalParams {
        asn: 65000,
        router_id: "10.0.0.1".parse().unwrap(),
        hold_time: 90,
        families: vec![Family::Ipv4Unicast],
        peer_asn: 65001,
        graceful_restart: Some(120),
        restarting: Default::default(),
        forwarding_preserved: true,
        installs_routes: true,
    }
}

/// The peer's OPEN: AS 65001, hold time `hold`, with or without graceful
/// restart.
pub(super) fn peer_open(hold: u16, graceful_restart: bool) -> Open {
    let mut p = local();
    p.asn = 65001;
    p.peer_asn = 65000;
    p.router_id = "10.0.0.2".parse().unwrap();
    p.hold_time = hold;
    if !graceful_restart {
        p.graceful_restart = None;
    }
    p.open()
}

/// What negotiating `peer_open(90, gr)` gives.
pub(super) fn negotiated(gr: bool) -> Negotiated {
    Negotiated {
        peer_router_id: "10.0.0.2".parse().unwrap(),
        peer_asn: 65001,
        hold_time: HOLD,
        keepalive: KEEPALIVE,
        families: vec![Family::Ipv4Unicast],
        four_octet_as: true,
        route_refresh: true,
        peer_graceful_restart: gr.then(|| GracefulRestartCap {
            restarting: false,
            notification: false,
            restart_time: 120,
            families: vec![(Family::Ipv4Unicast, true)],
        }),
    }
}

/// A machine in `state`; from OpenConfirm on the session is negotiated
/// (with the peer's graceful restart when `gr`).
pub(super) fn fsm(state: State, passive: bool, gr: bool) -> Fsm {
    let n = matches!(state, State::OpenConfirm | State::Established).then(|| negotiated(gr));
    Fsm::in_state(local(), passive, RETRY, state, n)
}

/// The actions of leaving for Idle after the session (or connection) ends.
pub(super) fn closing(down: Option<bool>, cause: Cause, then: Then) -> Vec<Action> {
    let mut a: Vec<Action> = down
        .map(|graceful| Action::Down { graceful })
        .into_iter()
        .collect();
    a.push(Action::StopTimer(Timer::Hold));
    a.push(Action::StopTimer(Timer::Keepalive));
    a.push(Action::Close { cause, then });
    if then == Then::Retry {
        a.push(Action::SetTimer(Timer::ConnectRetry, RETRY));
    }
    a
}

/// Runs one event and checks the next state and the actions.
pub(super) fn check(
    name: &str,
    mut m: Fsm,
    event: Event,
    next: State,
    actions: Vec<Action>,
) -> Fsm {
    let got = m.handle(event);
    assert_eq!(got, actions, "{name}: actions");
    assert_eq!(m.state(), next, "{name}: next state");
    m
}
