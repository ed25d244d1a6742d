//! Removing a session (RFC 5880 section 6.8.16): AdminDown is sent on for
//! a Detection Time of the remote, then the session is gone.

use std::time::{Duration, Instant};

use super::fsm::{REMOTE, config, from_remote};
use crate::bfd::packet::{Diag, State};
use crate::bfd::session::{RETIRE_MAX, Session};

fn up(t0: Instant, remote_ms: u32) -> Session {
    let mut s = Session::new(1, config(100, 3), t0, 11);
    s.receive(&from_remote(State::Init, remote_ms), t0);
    let mut f = from_remote(State::Up, remote_ms);
    f.final_ = true;
    s.receive(&f, t0);
    s.transmit(t0).expect("first packet");
    s
}

#[test]
fn a_removed_session_sends_admin_down_for_a_detection_time() {
    let t0 = Instant::now();
    let mut s = up(t0, 100);
    let start = t0 + Duration::from_millis(20);
    let t = s.retire(start).expect("a transition");
    assert_eq!(
        (t.to, t.diag),
        (State::AdminDown, Diag::AdministrativelyDown)
    );
    assert!(s.retiring() && !s.retired(start));
    let first = s.send_now(start);
    assert_eq!((first.state, first.your_discr), (State::AdminDown, REMOTE));
    // Not Up: the 1 s slow rate, times Detect Mult 3.
    assert_eq!(s.transmit_interval(), Some(Duration::from_secs(1)));
    let end = start + Duration::from_secs(3);
    assert!(s.next_deadline().is_some_and(|d| d <= end));
    let mut sent = vec![start];
    let mut now = start;
    while !s.retired(now) {
        if s.due(now)
            && let Some(p) = s.transmit(now)
        {
            assert_eq!(p.state, State::AdminDown);
            sent.push(now);
        }
        now += Duration::from_millis(5);
    }
    assert!(
        now >= end && now < end + Duration::from_millis(5),
        "{now:?}"
    );
    assert!(s.due(now), "the runtime is woken to remove it");
    assert!(sent.len() >= 3, "sent {sent:?}");
    for w in sent.windows(2) {
        assert!(w[1] - w[0] >= Duration::from_millis(750), "{sent:?}");
    }
}

#[test]
fn the_admin_down_time_is_bounded() {
    let t0 = Instant::now();
    // The remote accepts a packet a minute: 3 minutes of AdminDown.
    let mut s = up(t0, 60_000);
    s.retire(t0);
    assert!(!s.retired(t0 + RETIRE_MAX - Duration::from_millis(1)));
    assert!(s.retired(t0 + RETIRE_MAX));
}

#[test]
fn re_enabling_ends_a_removal() {
    let t0 = Instant::now();
    let mut s = up(t0, 100);
    s.retire(t0);
    let t = s.set_admin_down(false).expect("a transition");
    assert_eq!(t.to, State::Down);
    assert!(!s.retiring());
    assert!(!s.retired(t0 + Duration::from_secs(3600)));
}
