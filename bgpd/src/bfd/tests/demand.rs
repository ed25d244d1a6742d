//! Demand mode of the remote (RFC 5880 sections 6.6, 6.8.6 and 6.8.7):
//! this system never asks for Demand mode itself, but stops its periodic
//! packets while the remote does.

use std::time::{Duration, Instant};

use super::fsm::{config, from_remote};
use crate::bfd::packet::{Diag, State};
use crate::bfd::session::Session;

fn demand(state: State) -> crate::bfd::ControlPacket {
    let mut p = from_remote(state, 100);
    p.demand = true;
    p
}

/// Up at 100 ms, the first packet sent at `t0`, then the remote in Demand
/// mode.
fn up_with_remote_demand(t0: Instant) -> Session {
    let mut s = Session::new(1, config(100, 3), t0, 5);
    s.receive(&from_remote(State::Init, 100), t0);
    let mut f = from_remote(State::Up, 100);
    f.final_ = true;
    s.receive(&f, t0);
    s.transmit(t0).expect("first packet");
    s.receive(&demand(State::Up), t0);
    assert!(s.remote_demand());
    s
}

#[test]
fn the_remote_in_demand_mode_stops_periodic_packets() {
    let t0 = Instant::now();
    let mut s = up_with_remote_demand(t0);
    assert!(s.transmit(t0 + Duration::from_secs(1)).is_none());
    assert!(!s.due(t0 + Duration::from_millis(200)));
    assert_eq!(s.early_window(), Duration::ZERO);
    // Only the detection time is pending: the remote keeps sending to us.
    assert_eq!(s.next_deadline(), Some(t0 + Duration::from_millis(300)));
}

#[test]
fn the_remote_in_demand_mode_is_still_answered_and_timed() {
    let t0 = Instant::now();
    let mut s = up_with_remote_demand(t0);
    let at = t0 + Duration::from_millis(50);
    let mut poll = demand(State::Up);
    poll.poll = true;
    s.receive(&poll, at);
    let f = s.transmit(at).expect("a Poll is answered");
    assert!(f.final_ && !f.poll);
    assert!(s.transmit(at).is_none(), "and nothing periodic");
    // Demand mode is not active here (this system never sets D), so the
    // remote's periodic packets are timed as ever (section 6.8.4).
    let t = s.expire(at + Duration::from_millis(300));
    assert_eq!(
        t.map(|t| (t.to, t.diag)),
        Some((State::Down, Diag::ControlDetectionTimeExpired))
    );
    assert!(
        s.transmit(at + Duration::from_secs(1)).is_some(),
        "Down: periodic again"
    );
}

#[test]
fn periodic_packets_resume_when_the_remote_leaves_demand_mode() {
    let t0 = Instant::now();
    let mut s = up_with_remote_demand(t0);
    let at = t0 + Duration::from_secs(1);
    s.receive(&from_remote(State::Up, 100), at);
    assert!(s.transmit(at).is_some());
}

#[test]
fn our_poll_is_sent_periodically_while_the_remote_is_in_demand_mode() {
    let t0 = Instant::now();
    let mut s = up_with_remote_demand(t0);
    let mut slower = config(100, 3);
    slower.desired_min_tx = Duration::from_millis(200);
    s.set_config(slower);
    let at = t0 + Duration::from_secs(1);
    let p = s
        .transmit(at)
        .expect("Poll packets go periodically (6.8.7)");
    assert!(p.poll);
    let mut f = demand(State::Up);
    f.final_ = true;
    s.receive(&f, at + Duration::from_millis(1));
    assert!(!s.polling());
    assert!(s.transmit(at + Duration::from_secs(1)).is_none());
}
