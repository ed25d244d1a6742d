//! What BFD means to the BGP session (RFC 5882 sections 3.2 and 4.3): a
//! failure ends the session and keeps it from coming back until BFD is Up;
//! the remote's AdminDown is no failure and does neither. The statuses come
//! from a real BFD state machine.

use std::pin::pin;
use std::time::{Duration, Instant};

use futures::FutureExt;
use tokio::sync::watch;

use crate::bfd::{BfdStatus, ControlPacket, Diag, Session, SessionConfig, State};
use crate::session::established::{bfd_down, bfd_up};

const LOCAL: u32 = 0x10;
const REMOTE: u32 = 0x20;

fn from_remote(state: State) -> ControlPacket {
    ControlPacket {
        diag: Diag::None,
        state,
        poll: false,
        final_: false,
        control_plane_independent: false,
        demand: false,
        detect_mult: 3,
        my_discr: REMOTE,
        your_discr: LOCAL,
        desired_min_tx_us: 100_000,
        required_min_rx_us: 100_000,
        required_min_echo_rx_us: 0,
    }
}

fn up(t0: Instant) -> Session {
    let config = SessionConfig {
        desired_min_tx: Duration::from_millis(100),
        required_min_rx: Duration::from_millis(100),
        detect_mult: 3,
    };
    let mut s = Session::new(LOCAL, config, t0, 1);
    s.receive(&from_remote(State::Init), t0);
    assert_eq!(s.state(), State::Up);
    s
}

fn status(s: &Session) -> BfdStatus {
    BfdStatus::of(s, 0, false)
}

#[test]
fn a_remote_admin_down_does_not_end_the_bgp_session() {
    let t0 = Instant::now();
    let mut s = up(t0);
    let (tx, mut rx) = watch::channel(status(&s));
    let mut down = pin!(bfd_down(Some(&mut rx)));
    assert!(down.as_mut().now_or_never().is_none(), "Up");
    s.receive(&from_remote(State::AdminDown), t0);
    assert_eq!(s.local_diag(), Diag::NeighborSignaledSessionDown);
    tx.send_replace(status(&s));
    assert!(down.as_mut().now_or_never().is_none(), "remote AdminDown");
    // The remote falls silent after it, then comes back: Init, Up.
    let t1 = t0 + Duration::from_secs(5);
    s.expire(t1);
    tx.send_replace(status(&s));
    assert!(down.as_mut().now_or_never().is_none(), "silent remote");
    s.receive(&from_remote(State::Down), t1);
    assert_eq!(s.state(), State::Init);
    tx.send_replace(status(&s));
    assert!(down.as_mut().now_or_never().is_none(), "on the way back");
    s.receive(&from_remote(State::Up), t1);
    assert_eq!(s.state(), State::Up);
    tx.send_replace(status(&s));
    assert!(down.as_mut().now_or_never().is_none(), "Up again");
    // From Up again, a failure counts.
    s.expire(t1 + Duration::from_secs(1));
    assert_eq!(s.local_diag(), Diag::ControlDetectionTimeExpired);
    tx.send_replace(status(&s));
    assert!(down.as_mut().now_or_never().is_some(), "detection time");
}

#[test]
fn a_real_down_ends_the_bgp_session() {
    let t0 = Instant::now();
    for fail in [
        |s: &mut Session, t0| {
            s.receive(&from_remote(State::Down), t0);
        },
        |s: &mut Session, t0: Instant| {
            s.expire(t0 + Duration::from_secs(1));
        },
    ] {
        let mut s = up(t0);
        let (tx, mut rx) = watch::channel(status(&s));
        let mut down = pin!(bfd_down(Some(&mut rx)));
        assert!(down.as_mut().now_or_never().is_none());
        fail(&mut s, t0);
        assert_eq!(s.state(), State::Down);
        tx.send_replace(status(&s));
        assert!(down.as_mut().now_or_never().is_some());
    }
}

#[test]
fn a_remote_admin_down_does_not_gate_reconnecting_a_real_down_does() {
    let t0 = Instant::now();
    let mut s = up(t0);
    s.receive(&from_remote(State::AdminDown), t0);
    let (_tx, mut rx) = watch::channel(status(&s));
    assert!(rx.borrow().allows_session());
    assert!(bfd_up(Some(&mut rx)).now_or_never().is_some());

    let mut s = up(t0);
    s.receive(&from_remote(State::Down), t0);
    let (_tx, mut rx) = watch::channel(status(&s));
    assert!(!rx.borrow().allows_session());
    assert!(bfd_up(Some(&mut rx)).now_or_never().is_none());

    let mut s = up(t0);
    s.expire(t0 + Duration::from_secs(1));
    let (_tx, mut rx) = watch::channel(status(&s));
    assert!(bfd_up(Some(&mut rx)).now_or_never().is_none());
}
