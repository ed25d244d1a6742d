//! The Poll Sequence (RFC 5880 section 6.5) and the delayed application of
//! timer changes while Up (section 6.8.3).

use std::time::{Duration, Instant};

use super::fsm::{config, from_remote};
use crate::bfd::packet::State;
use crate::bfd::session::Session;

fn up(t0: Instant) -> Session {
    let mut s = Session::new(1, config(100, 3), t0, 3);
    s.receive(&from_remote(State::Init, 100), t0);
    assert_eq!(s.state(), State::Up);
    s
}

fn finish_poll(s: &mut Session, at: Instant) {
    let mut f = from_remote(State::Up, 100);
    f.final_ = true;
    s.receive(&f, at);
    assert!(!s.polling());
}

#[test]
fn going_up_polls_the_faster_timers() {
    let t0 = Instant::now();
    let mut s = up(t0);
    assert!(s.polling());
    let p = s.transmit(t0).expect("sent at once");
    assert!(p.poll && !p.final_);
    assert_eq!(p.desired_min_tx_us, 100_000);
    // A decrease of the transmit interval applies at once.
    assert_eq!(s.transmit_interval(), Some(Duration::from_millis(100)));
    // Poll keeps being set until the Final.
    let p = s
        .transmit(t0 + Duration::from_millis(100))
        .expect("periodic");
    assert!(p.poll);
    finish_poll(&mut s, t0 + Duration::from_millis(150));
    let p = s
        .transmit(t0 + Duration::from_millis(250))
        .expect("periodic");
    assert!(!p.poll && !p.final_);
}

#[test]
fn answers_a_poll_with_a_final_at_once_and_never_both() {
    let t0 = Instant::now();
    let mut s = up(t0);
    assert!(s.polling(), "our own poll is running");
    let mut poll = from_remote(State::Up, 50);
    poll.poll = true;
    s.receive(&poll, t0 + Duration::from_millis(1));
    let f = s
        .transmit(t0 + Duration::from_millis(1))
        .expect("final at once");
    assert!(f.final_ && !f.poll);
    // The remote's new TX applies to detection at once: 3 × max(100, 50).
    assert_eq!(s.detection_time(), Some(Duration::from_millis(300)));
}

#[test]
fn a_poll_with_the_final_bit_too_ends_our_poll_and_is_answered() {
    let t0 = Instant::now();
    let mut s = up(t0);
    assert!(s.polling(), "our own poll is running");
    let mut both = from_remote(State::Up, 50);
    both.poll = true;
    both.final_ = true;
    s.receive(&both, t0 + Duration::from_millis(1));
    assert!(!s.polling(), "the Final ended our Poll");
    let f = s
        .transmit(t0 + Duration::from_millis(1))
        .expect("final at once");
    assert!(f.final_ && !f.poll, "answered with a Final alone");
}

#[test]
fn a_slower_transmit_waits_for_the_final() {
    let t0 = Instant::now();
    let mut s = up(t0);
    finish_poll(&mut s, t0);
    assert!(!s.transmit(t0).expect("first packet").poll);
    let next = s.next_deadline().expect("the next packet is scheduled");
    let mut slower = config(100, 3);
    slower.desired_min_tx = Duration::from_millis(500);
    s.set_config(slower);
    assert!(s.polling());
    // Section 6.5: the Poll rides on the next scheduled packet; no packet
    // is added for it, and the schedule does not move.
    let soon = t0 + Duration::from_millis(10);
    assert!(s.transmit(soon).is_none(), "no extra packet for the Poll");
    assert_eq!(s.next_deadline(), Some(next));
    let p = s.transmit(next).expect("the scheduled packet");
    assert!(p.poll && !p.final_);
    assert_eq!(p.desired_min_tx_us, 500_000, "advertised at once");
    assert_eq!(
        s.transmit_interval(),
        Some(Duration::from_millis(100)),
        "old interval until the Final"
    );
    finish_poll(&mut s, next + Duration::from_millis(5));
    assert_eq!(s.transmit_interval(), Some(Duration::from_millis(500)));
}

#[test]
fn a_final_goes_at_once_without_moving_the_schedule() {
    let t0 = Instant::now();
    let mut s = up(t0);
    finish_poll(&mut s, t0);
    s.transmit(t0).expect("first packet");
    let next = s.next_deadline().unwrap();
    let mut poll = from_remote(State::Up, 100);
    poll.poll = true;
    let at = t0 + Duration::from_millis(3);
    s.receive(&poll, at);
    let f = s.transmit(at).expect("Final at once (section 6.8.7)");
    assert!(f.final_ && !f.poll);
    assert!(s.transmit(at).is_none());
    assert_eq!(s.next_deadline(), Some(next));
}

#[test]
fn a_faster_receive_keeps_the_old_detection_until_the_final() {
    let t0 = Instant::now();
    let mut s = Session::new(1, config(300, 3), t0, 3);
    s.receive(&from_remote(State::Init, 50), t0);
    finish_poll(&mut s, t0);
    let mut f = from_remote(State::Up, 50);
    f.final_ = false;
    s.receive(&f, t0);
    assert_eq!(s.detection_time(), Some(Duration::from_millis(900)));
    let mut faster = config(300, 3);
    faster.required_min_rx = Duration::from_millis(50);
    s.set_config(faster);
    let p = s.transmit(t0).expect("poll");
    assert_eq!((p.poll, p.required_min_rx_us), (true, 50_000));
    s.receive(&from_remote(State::Up, 50), t0);
    assert_eq!(
        s.detection_time(),
        Some(Duration::from_millis(900)),
        "old RX until the Final"
    );
    let mut f = from_remote(State::Up, 50);
    f.final_ = true;
    s.receive(&f, t0);
    assert_eq!(s.detection_time(), Some(Duration::from_millis(150)));
}

#[test]
fn going_down_returns_to_the_slow_rate_without_a_poll() {
    let t0 = Instant::now();
    let mut s = up(t0);
    finish_poll(&mut s, t0);
    s.receive(&from_remote(State::Down, 100), t0);
    assert_eq!(s.state(), State::Down);
    assert!(!s.polling());
    let p = s.transmit(t0 + Duration::from_secs(1)).expect("periodic");
    assert_eq!(p.desired_min_tx_us, 1_000_000);
    assert!(!p.poll);
}
