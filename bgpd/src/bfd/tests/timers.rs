//! Timer negotiation (RFC 5880 sections 6.8.2–6.8.4) and jitter (6.8.7).

use std::time::{Duration, Instant};

use super::fsm::{config, from_remote, session};
use crate::bfd::packet::State;
use crate::bfd::session::Session;
use crate::bfd::timers::{Jitter, detection_time_us, jittered, transmit_interval_us};

#[test]
fn transmit_interval_is_the_slower_of_the_two() {
    assert_eq!(transmit_interval_us(100_000, 300_000), Some(300_000));
    assert_eq!(transmit_interval_us(300_000, 100_000), Some(300_000));
    assert_eq!(transmit_interval_us(300_000, 0), None, "remote wants none");
}

#[test]
fn detection_time_is_remote_mult_times_the_slower() {
    assert_eq!(detection_time_us(100_000, 50_000, 3), 300_000);
    assert_eq!(detection_time_us(50_000, 200_000, 5), 1_000_000);
}

#[test]
fn one_second_minimum_while_not_up() {
    let t0 = Instant::now();
    let mut s = session(t0);
    let p = s.transmit(t0).expect("first packet");
    assert_eq!(p.desired_min_tx_us, 1_000_000, "advertised while Down");
    assert_eq!(p.required_min_rx_us, 100_000, "RX is not slowed");
    s.receive(&from_remote(State::Down, 50), t0);
    assert_eq!(s.state(), State::Init);
    assert_eq!(s.transmit_interval(), Some(Duration::from_secs(1)));
    let p = s.transmit(t0 + Duration::from_secs(1)).expect("periodic");
    assert_eq!(p.desired_min_tx_us, 1_000_000, "still slow in Init");
}

#[test]
fn negotiated_once_up() {
    let t0 = Instant::now();
    let mut s = Session::new(1, config(100, 3), t0, 1);
    s.receive(&from_remote(State::Init, 300), t0);
    assert_eq!(s.state(), State::Up);
    // We may send at 100 ms, the remote accepts no faster than 300 ms.
    assert_eq!(s.transmit_interval(), Some(Duration::from_millis(300)));
    // The remote sends at 300 ms (its desired TX) × its mult 3.
    assert_eq!(s.detection_time(), Some(Duration::from_millis(900)));
}

#[test]
fn periodic_packets_follow_the_jittered_interval() {
    let t0 = Instant::now();
    let mut s = Session::new(1, config(100, 3), t0, 42);
    s.receive(&from_remote(State::Init, 100), t0);
    let mut at = t0;
    s.transmit(at).expect("due");
    for _ in 0..200 {
        let next = s.next_deadline().expect("a packet is due");
        let gap = next - at;
        assert!(
            gap >= Duration::from_millis(75) && gap <= Duration::from_millis(100),
            "gap {gap:?}"
        );
        // Not before its early window (a tenth of the interval) opens.
        let opens = next - Duration::from_millis(10);
        assert!(s.transmit(opens - Duration::from_micros(1)).is_none());
        assert!(!s.due(opens - Duration::from_micros(1)));
        s.receive(&from_remote(State::Up, 100), next);
        s.transmit(next).expect("due at its deadline");
        at = next;
    }
}

#[test]
fn packets_sent_at_the_start_of_their_window_keep_three_quarters_of_the_interval() {
    let t0 = Instant::now();
    let mut s = Session::new(1, config(100, 3), t0, 7);
    s.receive(&from_remote(State::Init, 100), t0);
    let mut at = t0;
    s.transmit(at).expect("due");
    let mut shortest = Duration::MAX;
    for _ in 0..500 {
        // The first moment anything is due: the window's opening.
        let mut t = at;
        while !s.due(t) {
            t += Duration::from_micros(100);
        }
        s.receive(&from_remote(State::Up, 100), t);
        s.transmit(t).expect("due when its window opens");
        shortest = shortest.min(t - at);
        assert!(t - at <= Duration::from_millis(90), "gap {:?}", t - at);
        at = t;
    }
    assert!(
        shortest >= Duration::from_millis(75),
        "shortest gap {shortest:?}"
    );
    assert!(
        shortest < Duration::from_millis(77),
        "the early window is used"
    );
}

#[test]
fn jitter_stays_within_the_rfc_bounds() {
    let mut rng = Jitter::new(99);
    let (mut lo3, mut hi3, mut hi1) = (u128::MAX, 0, 0);
    for _ in 0..10_000 {
        let r = rng.next_u32();
        let three = jittered(100_000, 3, r).as_micros();
        let one = jittered(100_000, 1, r).as_micros();
        lo3 = lo3.min(three);
        hi3 = hi3.max(three);
        hi1 = hi1.max(one);
        assert!(one >= 85_000);
    }
    // The deadline; the early window (10 %) brings the lower end to 75 %.
    assert_eq!((lo3, hi3), (85_000, 100_000), "85–100 % with mult > 1");
    assert_eq!(hi1, 90_000, "at most 90 % with mult 1");
}

#[test]
fn no_periodic_packets_when_the_remote_requires_none() {
    let t0 = Instant::now();
    let mut s = session(t0);
    let mut p = from_remote(State::Down, 1000);
    p.required_min_rx_us = 0;
    s.receive(&p, t0);
    assert!(s.transmit(t0 + Duration::from_secs(5)).is_none());
    // Only the detection time is pending, not a packet.
    assert_eq!(s.next_deadline(), Some(t0 + Duration::from_secs(3)));
    s.set_admin_down(true);
    assert_eq!(s.next_deadline(), None, "nothing to wait for");
}

/// Section 6.8.7: packets keep at least 75 % of the transmit interval in
/// force between them; when the remote asks for a longer one, the next
/// packet waits for it rather than going at once.
#[test]
fn a_longer_interval_from_the_remote_sends_nothing_early() {
    let t0 = Instant::now();
    let mut s = Session::new(1, config(100, 3), t0, 3);
    s.receive(&from_remote(State::Init, 100), t0);
    let mut f = from_remote(State::Up, 100);
    f.final_ = true;
    s.receive(&f, t0);
    s.transmit(t0).expect("first packet");
    let t1 = t0 + Duration::from_millis(2);
    s.receive(&from_remote(State::Up, 2000), t1);
    assert_eq!(s.transmit_interval(), Some(Duration::from_secs(2)));
    assert!(s.transmit(t1).is_none(), "nothing at once");
    assert!(!s.due(t1));
    let mut t = t1;
    while !s.due(t) {
        t += Duration::from_millis(1);
    }
    let gap = t - t0;
    assert!(
        gap >= Duration::from_millis(1500) && gap <= Duration::from_secs(2),
        "gap {gap:?}"
    );
    s.transmit(t).expect("due when its window opens");
}
