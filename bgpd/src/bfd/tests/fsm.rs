//! One test per transition of the RFC 5880 section 6.2 state diagram (and the
//! administrative ones of section 6.8.16), driven through `Session` with a
//! synthetic clock.

use std::time::{Duration, Instant};

use crate::bfd::packet::{ControlPacket, Diag, State};
use crate::bfd::session::{Session, SessionConfig, Transition};

pub(super) const LOCAL: u32 = 0x1111;
pub(in crate::bfd) const REMOTE: u32 = 0x2222;

pub(super) fn config(ms: u64, mult: u8) -> SessionConfig {
    SessionConfig {
        desired_min_tx: Duration::from_millis(ms),
        required_min_rx: Duration::from_millis(ms),
        detect_mult: mult,
    }
}

/// A packet from the remote in `state`, with its timers at `ms`.
pub(in crate::bfd) fn from_remote(state: State, ms: u32) -> ControlPacket {
    ControlPacket {
        diag: Diag::None,
        state,
        poll: false,
        final_: false,
        control_plane_independent: false,
        demand: false,
        detect_mult: 3,
        my_discr: REMOTE,
        your_discr: if state == State::Down { 0 } else { LOCAL },
        desired_min_tx_us: ms * 1000,
        required_min_rx_us: ms * 1000,
        required_min_echo_rx_us: 0,
    }
}

pub(super) fn session(t0: Instant) -> Session {
    Session::new(LOCAL, config(100, 3), t0, 7)
}

fn in_state(state: State, t0: Instant) -> Session {
    let mut s = session(t0);
    match state {
        State::Down => {}
        State::Init => {
            s.receive(&from_remote(State::Down, 1000), t0);
        }
        State::Up => {
            s.receive(&from_remote(State::Init, 1000), t0);
        }
        State::AdminDown => {
            s.set_admin_down(true);
        }
    }
    assert_eq!(s.state(), state);
    s
}

fn moved(from: State, to: State, diag: Diag) -> Option<Transition> {
    Some(Transition { from, to, diag })
}

#[test]
fn down_to_init_on_remote_down() {
    let t0 = Instant::now();
    let mut s = in_state(State::Down, t0);
    let t = s.receive(&from_remote(State::Down, 1000), t0);
    assert_eq!(t, moved(State::Down, State::Init, Diag::None));
    assert_eq!(s.remote_discr(), REMOTE);
}

#[test]
fn down_to_up_on_remote_init() {
    let t0 = Instant::now();
    let mut s = in_state(State::Down, t0);
    let t = s.receive(&from_remote(State::Init, 1000), t0);
    assert_eq!(t, moved(State::Down, State::Up, Diag::None));
}

#[test]
fn down_stays_on_remote_up() {
    let t0 = Instant::now();
    let mut s = in_state(State::Down, t0);
    assert_eq!(s.receive(&from_remote(State::Up, 1000), t0), None);
    assert_eq!(s.state(), State::Down);
}

#[test]
fn down_stays_on_remote_admin_down() {
    let t0 = Instant::now();
    let mut s = in_state(State::Down, t0);
    assert_eq!(s.receive(&from_remote(State::AdminDown, 1000), t0), None);
    assert_eq!(s.state(), State::Down);
}

#[test]
fn down_stays_on_timer_and_forgets_the_remote() {
    let t0 = Instant::now();
    let mut s = in_state(State::Down, t0);
    s.receive(&from_remote(State::Up, 1000), t0);
    assert_eq!(s.remote_discr(), REMOTE);
    assert_eq!(s.expire(t0 + Duration::from_millis(3001)), None);
    assert_eq!(s.state(), State::Down);
    assert_eq!(s.remote_discr(), 0, "bfd.RemoteDiscr reset (6.8.1)");
}

#[test]
fn init_to_up_on_remote_init() {
    let t0 = Instant::now();
    let mut s = in_state(State::Init, t0);
    let t = s.receive(&from_remote(State::Init, 1000), t0);
    assert_eq!(t, moved(State::Init, State::Up, Diag::None));
}

#[test]
fn init_to_up_on_remote_up() {
    let t0 = Instant::now();
    let mut s = in_state(State::Init, t0);
    let t = s.receive(&from_remote(State::Up, 1000), t0);
    assert_eq!(t, moved(State::Init, State::Up, Diag::None));
}

#[test]
fn init_stays_on_remote_down() {
    let t0 = Instant::now();
    let mut s = in_state(State::Init, t0);
    assert_eq!(s.receive(&from_remote(State::Down, 1000), t0), None);
    assert_eq!(s.state(), State::Init);
}

#[test]
fn init_to_down_on_remote_admin_down() {
    let t0 = Instant::now();
    let mut s = in_state(State::Init, t0);
    let t = s.receive(&from_remote(State::AdminDown, 1000), t0);
    assert_eq!(
        t,
        moved(State::Init, State::Down, Diag::NeighborSignaledSessionDown)
    );
}

#[test]
fn init_to_down_on_timer() {
    let t0 = Instant::now();
    let mut s = in_state(State::Init, t0);
    // Detection time: remote mult 3 × max(our 100 ms RX, its 1 s TX) = 3 s.
    assert_eq!(s.expire(t0 + Duration::from_millis(2999)), None);
    let t = s.expire(t0 + Duration::from_millis(3000));
    assert_eq!(
        t,
        moved(State::Init, State::Down, Diag::ControlDetectionTimeExpired)
    );
}

#[test]
fn up_stays_on_remote_init_and_up() {
    let t0 = Instant::now();
    let mut s = in_state(State::Up, t0);
    assert_eq!(s.receive(&from_remote(State::Init, 1000), t0), None);
    assert_eq!(s.receive(&from_remote(State::Up, 1000), t0), None);
    assert_eq!(s.state(), State::Up);
}

#[test]
fn up_to_down_on_remote_down() {
    let t0 = Instant::now();
    let mut s = in_state(State::Up, t0);
    let t = s.receive(&from_remote(State::Down, 1000), t0);
    assert_eq!(
        t,
        moved(State::Up, State::Down, Diag::NeighborSignaledSessionDown)
    );
}

#[test]
fn up_to_down_on_remote_admin_down() {
    let t0 = Instant::now();
    let mut s = in_state(State::Up, t0);
    let t = s.receive(&from_remote(State::AdminDown, 1000), t0);
    assert_eq!(
        t,
        moved(State::Up, State::Down, Diag::NeighborSignaledSessionDown)
    );
}

#[test]
fn up_to_down_on_timer() {
    let t0 = Instant::now();
    let mut s = in_state(State::Up, t0);
    s.receive(&from_remote(State::Up, 100), t0);
    // 3 × max(100 ms, 100 ms)
    assert_eq!(s.expire(t0 + Duration::from_millis(299)), None);
    let t = s.expire(t0 + Duration::from_millis(300));
    assert_eq!(
        t,
        moved(State::Up, State::Down, Diag::ControlDetectionTimeExpired)
    );
    assert_eq!(s.remote_discr(), 0);
}

#[test]
fn any_state_to_admin_down_and_back_to_down() {
    let t0 = Instant::now();
    for state in [State::Down, State::Init, State::Up] {
        let mut s = in_state(state, t0);
        let t = s.set_admin_down(true);
        assert_eq!(
            t,
            moved(state, State::AdminDown, Diag::AdministrativelyDown)
        );
        // Packets are ignored in AdminDown, and no detection runs.
        assert_eq!(s.receive(&from_remote(State::Init, 1000), t0), None);
        assert_eq!(s.expire(t0 + Duration::from_secs(10)), None);
        let pkt = s
            .transmit(t0 + Duration::from_secs(10))
            .expect("keeps sending");
        assert_eq!(pkt.state, State::AdminDown);
        assert_eq!(pkt.diag, Diag::AdministrativelyDown);
        let t = s.set_admin_down(false);
        assert_eq!(t, moved(State::AdminDown, State::Down, Diag::None));
    }
}

#[test]
fn sent_packets_carry_the_state_and_discriminators() {
    let t0 = Instant::now();
    let mut s = session(t0);
    let first = s.transmit(t0).expect("first packet at once");
    assert_eq!(
        (first.state, first.my_discr, first.your_discr),
        (State::Down, LOCAL, 0)
    );
    s.receive(&from_remote(State::Down, 1000), t0);
    let next = s.transmit(t0 + Duration::from_secs(1)).expect("periodic");
    assert_eq!(
        (next.state, next.my_discr, next.your_discr),
        (State::Init, LOCAL, REMOTE)
    );
}

/// Section 6.8.6: a packet is discarded in AdminDown before its Poll is
/// answered.
#[test]
fn admin_down_answers_no_poll() {
    let t0 = Instant::now();
    let mut s = in_state(State::Up, t0);
    s.transmit(t0).expect("first packet");
    s.set_admin_down(true);
    let mut poll = from_remote(State::Up, 1000);
    poll.poll = true;
    let at = t0 + Duration::from_millis(1);
    assert_eq!(s.receive(&poll, at), None);
    assert!(s.transmit(at).is_none(), "no Final from AdminDown");
}

/// RFC 5882 section 3.2: Down on the remote's AdminDown is told apart
/// from a failure, and stays so while the remote is silent after it.
#[test]
fn a_remote_admin_down_is_told_apart_from_a_failure() {
    let t0 = Instant::now();
    let mut s = in_state(State::Up, t0);
    let t = s.receive(&from_remote(State::AdminDown, 1000), t0);
    assert_eq!(
        t,
        moved(State::Up, State::Down, Diag::NeighborSignaledSessionDown)
    );
    assert!(s.remote_admin_down());
    assert_eq!(s.expire(t0 + Duration::from_secs(10)), None);
    assert!(
        s.remote_admin_down(),
        "silence after AdminDown is no failure"
    );
    // The remote is back: an ordinary session again.
    let t = s.receive(
        &from_remote(State::Down, 1000),
        t0 + Duration::from_secs(10),
    );
    assert_eq!(t.map(|t| t.to), Some(State::Init));
    assert!(!s.remote_admin_down());
    // Down all along, then the remote AdminDown: no failure either.
    let mut s = in_state(State::Down, t0);
    s.receive(&from_remote(State::AdminDown, 1000), t0);
    assert!(s.remote_admin_down());

    // Failures are not flagged: the remote Down, the detection time.
    let mut s = in_state(State::Up, t0);
    s.receive(&from_remote(State::Down, 1000), t0);
    assert_eq!(s.state(), State::Down);
    assert!(!s.remote_admin_down());
    let mut s = in_state(State::Up, t0);
    s.expire(t0 + Duration::from_secs(3));
    assert_eq!(s.local_diag(), Diag::ControlDetectionTimeExpired);
    assert!(!s.remote_admin_down());
}

#[test]
fn the_peers_diagnostic_is_kept_and_shown() {
    let t0 = Instant::now();
    let mut s = in_state(State::Up, t0);
    assert_eq!(s.remote_diag(), Diag::None);
    // The peer went down because its detection time expired.
    let mut down = from_remote(State::Down, 1000);
    down.diag = Diag::ControlDetectionTimeExpired;
    s.receive(&down, t0);
    assert_eq!(s.remote_diag(), Diag::ControlDetectionTimeExpired);
    let status = crate::bfd::BfdStatus::of(&s, 1, false);
    assert_eq!(status.remote_diag, Diag::ControlDetectionTimeExpired);
    // It comes back: its next packet says no diagnostic.
    s.receive(&from_remote(State::Down, 1000), t0);
    assert_eq!(s.remote_diag(), Diag::None);
}
