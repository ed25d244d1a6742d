//! One BFD session as a pure state machine (RFC 5880 sections 6.2, 6.5 and
//! 6.8): received packets and the clock go in, packets to send and state
//! transitions come out. No sockets and no runtime here.

use std::time::{Duration, Instant};

use super::packet::{ControlPacket, Diag, State};
use super::timers::{self, Jitter, SLOW_TX_US};

/// The longest a removed session keeps sending AdminDown (section 6.8.16
/// asks for at least one Detection Time of the remote, which slow timers
/// and a large Detect Mult could stretch to hours).
pub const RETIRE_MAX: Duration = Duration::from_secs(30);

/// The configured timers of a session (RFC 5880 bfd.DesiredMinTxInterval,
/// bfd.RequiredMinRxInterval, bfd.DetectMult).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionConfig {
    pub desired_min_tx: Duration,
    pub required_min_rx: Duration,
    pub detect_mult: u8,
}

impl SessionConfig {
    fn tx_us(&self) -> u32 {
        to_us(self.desired_min_tx).max(1)
    }
    fn rx_us(&self) -> u32 {
        to_us(self.required_min_rx)
    }
}

fn to_us(d: Duration) -> u32 {
    u32::try_from(d.as_micros()).unwrap_or(u32::MAX)
}

/// A change of session state, with the diagnostic that explains it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transition {
    pub from: State,
    pub to: State,
    pub diag: Diag,
}

/// The state variables of RFC 5880 section 6.8.1 plus the timers.
#[derive(Debug, Clone)]
pub struct Session {
    config: SessionConfig,
    state: State,
    remote_state: State,
    local_discr: u32,
    remote_discr: u32,
    local_diag: Diag,
    /// The diagnostic in the peer's last packet (why its side went down).
    remote_diag: Diag,
    /// Advertised bfd.DesiredMinTxInterval and bfd.RequiredMinRxInterval.
    desired_tx_us: u32,
    required_rx_us: u32,
    /// The values the timers use; they lag the advertised ones while a Poll
    /// Sequence runs (section 6.8.3).
    tx_in_effect_us: u32,
    rx_in_effect_us: u32,
    remote_min_rx_us: u32,
    remote_desired_tx_us: u32,
    remote_detect_mult: u8,
    remote_demand: bool,
    polling: bool,
    final_pending: bool,
    /// The next periodic packet's deadline, how long before it the packet
    /// may go (from the interval the deadline was computed with), and when
    /// the last periodic packet went.
    next_tx: Instant,
    tx_window: Duration,
    last_tx: Option<Instant>,
    detect_deadline: Option<Instant>,
    /// The last packet received said AdminDown (RFC 5882 section 3.2: then
    /// this session being Down says nothing of the path).
    remote_signalled_admin_down: bool,
    /// While the session is being removed: until when it sends AdminDown.
    retire_at: Option<Instant>,
    jitter: Jitter,
}

impl Session {
    /// A session in Down, sending its first packet at `now`.
    pub fn new(local_discr: u32, config: SessionConfig, now: Instant, seed: u64) -> Session {
        let desired = config.tx_us().max(SLOW_TX_US);
        Session {
            config,
            state: State::Down,
            remote_state: State::Down,
            local_discr,
            remote_discr: 0,
            local_diag: Diag::None,
            remote_diag: Diag::None,
            desired_tx_us: desired,
            required_rx_us: config.rx_us(),
            tx_in_effect_us: desired,
            rx_in_effect_us: config.rx_us(),
            remote_min_rx_us: 1,
            remote_desired_tx_us: 0,
            remote_detect_mult: 0,
            remote_demand: false,
            polling: false,
            final_pending: false,
            next_tx: now,
            tx_window: Duration::ZERO,
            last_tx: None,
            detect_deadline: None,
            remote_signalled_admin_down: false,
            retire_at: None,
            jitter: Jitter::new(seed),
        }
    }

    pub fn state(&self) -> State {
        self.state
    }
    pub fn remote_state(&self) -> State {
        self.remote_state
    }
    pub fn local_discr(&self) -> u32 {
        self.local_discr
    }
    pub fn remote_discr(&self) -> u32 {
        self.remote_discr
    }
    pub fn local_diag(&self) -> Diag {
        self.local_diag
    }
    pub fn remote_diag(&self) -> Diag {
        self.remote_diag
    }
    pub fn config(&self) -> SessionConfig {
        self.config
    }
    pub fn polling(&self) -> bool {
        self.polling
    }
    pub fn remote_demand(&self) -> bool {
        self.remote_demand
    }

    /// Down because the remote is administratively down (it went Down on,
    /// or stays Down with, a received AdminDown): not a path failure, so
    /// clients must not act on it (RFC 5882 section 3.2). It lasts until
    /// the remote sends another state, even if it then falls silent.
    pub fn remote_admin_down(&self) -> bool {
        self.state == State::Down && self.remote_signalled_admin_down
    }

    /// The interval this system sends at now (without jitter), if it sends.
    pub fn transmit_interval(&self) -> Option<Duration> {
        timers::transmit_interval_us(self.tx_in_effect_us, self.remote_min_rx_us)
            .map(|us| Duration::from_micros(u64::from(us)))
    }

    /// The detection time in force, once the remote has been heard.
    pub fn detection_time(&self) -> Option<Duration> {
        if self.remote_detect_mult == 0 {
            return None;
        }
        Some(Duration::from_micros(timers::detection_time_us(
            self.rx_in_effect_us,
            self.remote_desired_tx_us,
            self.remote_detect_mult,
        )))
    }

    /// The remote's last advertised Required Min RX and Desired Min TX.
    pub fn remote_timers(&self) -> (Duration, Duration) {
        (
            Duration::from_micros(u64::from(self.remote_min_rx_us)),
            Duration::from_micros(u64::from(self.remote_desired_tx_us)),
        )
    }

    /// When the session next needs the clock: the next packet or the end of
    /// the detection time; None when neither is pending (the remote asked
    /// for no packets and is not being timed).
    pub fn next_deadline(&self) -> Option<Instant> {
        // A pending Final is sent by the caller right after `receive`.
        let tx = self.sends_periodically().then_some(self.next_tx);
        [tx, self.detect_deadline, self.retire_at]
            .into_iter()
            .flatten()
            .min()
    }

    /// Section 6.8.7: no periodic packets when the remote asks for none
    /// (Required Min RX of zero), nor while Demand mode is active on the
    /// remote (its D bit, both sides Up) unless a Poll Sequence of ours
    /// runs.
    fn sends_periodically(&self) -> bool {
        let remote_demand_active =
            self.remote_demand && self.state == State::Up && self.remote_state == State::Up;
        self.remote_min_rx_us != 0 && (!remote_demand_active || self.polling)
    }

    /// How long before its deadline the next periodic packet may go
    /// ([`timers::early_window`] of the interval it was scheduled with);
    /// zero when none is sent.
    pub fn early_window(&self) -> Duration {
        if self.sends_periodically() {
            self.tx_window
        } else {
            Duration::ZERO
        }
    }

    /// The first moment the next periodic packet may go.
    fn send_opens(&self) -> Option<Instant> {
        if !self.sends_periodically() {
            return None;
        }
        Some(
            self.next_tx
                .checked_sub(self.tx_window)
                .unwrap_or(self.next_tx),
        )
    }

    /// Whether the clock has work for this session at `now`: a packet
    /// whose window has opened, the detection time passed, or the end of
    /// a removal.
    pub fn due(&self, now: Instant) -> bool {
        self.final_pending
            || self.send_opens().is_some_and(|o| o <= now)
            || self.detect_deadline.is_some_and(|d| d <= now)
            || self.retired(now)
    }

    /// A valid packet for this session (RFC 5880 section 6.8.6, from "set
    /// bfd.RemoteDiscr" onwards; the packet-level checks are in `decode` and
    /// the discriminator demultiplexing in the runtime).
    pub fn receive(&mut self, pkt: &ControlPacket, now: Instant) -> Option<Transition> {
        self.remote_discr = pkt.my_discr;
        self.remote_state = pkt.state;
        self.remote_diag = pkt.diag;
        self.remote_demand = pkt.demand;
        let old_interval = self.transmit_interval();
        self.remote_min_rx_us = pkt.required_min_rx_us;
        self.remote_desired_tx_us = pkt.desired_min_tx_us;
        self.remote_detect_mult = pkt.detect_mult;
        if pkt.final_ && self.polling {
            self.polling = false;
            self.tx_in_effect_us = self.desired_tx_us;
            self.rx_in_effect_us = self.required_rx_us;
        }
        if self.transmit_interval() != old_interval {
            self.reschedule();
        }
        // Section 6.8.6: in AdminDown the packet is discarded here, before
        // a Poll in it is answered.
        if self.state == State::AdminDown {
            return None;
        }
        if pkt.poll {
            self.final_pending = true;
        }
        self.detect_deadline = self.detection_time().map(|d| now + d);
        self.remote_signalled_admin_down = pkt.state == State::AdminDown;
        let next = match (self.state, pkt.state) {
            (State::Down | State::Init | State::Up, State::AdminDown) => {
                if self.state == State::Down {
                    None
                } else {
                    Some((State::Down, Diag::NeighborSignaledSessionDown))
                }
            }
            (State::Down, State::Down) => Some((State::Init, self.local_diag)),
            (State::Down, State::Init) => Some((State::Up, Diag::None)),
            (State::Init, State::Init | State::Up) => Some((State::Up, Diag::None)),
            (State::Up, State::Down) => Some((State::Down, Diag::NeighborSignaledSessionDown)),
            _ => None,
        };
        next.map(|(to, diag)| self.go(to, diag))
    }

    /// The detection time passed without a packet (section 6.8.4).
    pub fn expire(&mut self, now: Instant) -> Option<Transition> {
        let deadline = self.detect_deadline?;
        if now < deadline {
            return None;
        }
        self.detect_deadline = None;
        // Section 6.8.1: bfd.RemoteDiscr is zeroed once a Detection Time
        // passes without a packet; the remote's timers go back to their
        // initial values so that the slow rate applies again. A remote
        // AdminDown stays known: a remote that stops sending after it is
        // no sign of a failed path.
        let old_interval = self.transmit_interval();
        self.remote_discr = 0;
        self.remote_state = State::Down;
        self.remote_min_rx_us = 1;
        self.remote_desired_tx_us = 0;
        self.remote_detect_mult = 0;
        self.remote_demand = false;
        if self.transmit_interval() != old_interval {
            self.reschedule();
        }
        match self.state {
            State::Init | State::Up => {
                Some(self.go(State::Down, Diag::ControlDetectionTimeExpired))
            }
            _ => None,
        }
    }

    /// The packet to send at `now`, if one is due: a Final answering a Poll
    /// at once (section 6.8.7 lets it go regardless of the schedule, and it
    /// does not move the schedule), or the next periodic packet once its
    /// early window has opened; a Poll Sequence rides on those (section
    /// 6.5), it adds no packets.
    pub fn transmit(&mut self, now: Instant) -> Option<ControlPacket> {
        if self.final_pending {
            self.final_pending = false;
            // Section 6.8.7: never both P and F in one packet.
            return Some(self.packet(false, true));
        }
        if self.send_opens().is_none_or(|o| now < o) {
            return None;
        }
        let interval = self.transmit_interval()?;
        self.schedule_from(now, interval);
        Some(self.packet(self.polling, false))
    }

    /// A packet with the current state sent at `now` outside the schedule,
    /// which then counts from it: the first AdminDown of a session being
    /// removed, so that the remote hears of it before its detection time,
    /// still computed from the faster rate, passes.
    pub fn send_now(&mut self, now: Instant) -> ControlPacket {
        if let Some(interval) = self.transmit_interval() {
            self.schedule_from(now, interval);
        }
        self.packet(false, false)
    }

    /// Administratively disable (`true`) or re-enable the session (section
    /// 6.8.16). Re-enabling ends a removal.
    pub fn set_admin_down(&mut self, down: bool) -> Option<Transition> {
        match (down, self.state) {
            (true, State::AdminDown) | (false, State::Down | State::Init | State::Up) => None,
            (true, _) => {
                self.detect_deadline = None;
                self.remote_signalled_admin_down = false;
                Some(self.go(State::AdminDown, Diag::AdministrativelyDown))
            }
            (false, State::AdminDown) => {
                self.retire_at = None;
                Some(self.go(State::Down, Diag::None))
            }
        }
    }

    /// Begin removing the session: AdminDown, sent on at the periodic rate
    /// for one Detection Time of the remote (this system's Detect Mult
    /// times the transmit interval, at most [`RETIRE_MAX`]) so that the
    /// remote learns of it (section 6.8.16); then [`Session::retired`].
    pub fn retire(&mut self, now: Instant) -> Option<Transition> {
        let t = self.set_admin_down(true);
        // Once AdminDown the slow rate is advertised and in effect.
        let interval = self
            .transmit_interval()
            .unwrap_or(Duration::from_micros(u64::from(self.desired_tx_us)));
        let hold = interval
            .saturating_mul(u32::from(self.config.detect_mult))
            .min(RETIRE_MAX);
        self.retire_at = Some(now + hold);
        t
    }

    /// Being removed (see [`Session::retire`]).
    pub fn retiring(&self) -> bool {
        self.retire_at.is_some()
    }

    /// Removed for good: the AdminDown time is over.
    pub fn retired(&self, now: Instant) -> bool {
        self.retire_at.is_some_and(|t| t <= now)
    }

    /// New configured timers; while Up they are announced with a Poll
    /// Sequence (section 6.8.3).
    pub fn set_config(&mut self, config: SessionConfig) {
        self.config = config;
        self.advertise();
    }

    fn go(&mut self, to: State, diag: Diag) -> Transition {
        let from = self.state;
        self.state = to;
        self.local_diag = diag;
        self.advertise();
        Transition { from, to, diag }
    }

    /// Recompute the advertised timers from the configuration and the state.
    fn advertise(&mut self) {
        let up = self.state == State::Up;
        let desired = if up {
            self.config.tx_us()
        } else {
            self.config.tx_us().max(SLOW_TX_US)
        };
        let required = self.config.rx_us();
        if desired == self.desired_tx_us && required == self.required_rx_us {
            return;
        }
        let old_interval = self.transmit_interval();
        if up {
            // A Poll Sequence announces the change; an increase of the
            // transmit interval and a decrease of the receive interval wait
            // for its Final (section 6.8.3).
            // The P bit rides on the next scheduled packet (section 6.5).
            self.polling = true;
            self.tx_in_effect_us = self.tx_in_effect_us.min(desired);
            self.rx_in_effect_us = self.rx_in_effect_us.max(required);
        } else {
            self.polling = false;
            self.tx_in_effect_us = desired;
            self.rx_in_effect_us = required;
        }
        self.desired_tx_us = desired;
        self.required_rx_us = required;
        if self.transmit_interval() != old_interval {
            self.reschedule();
        }
    }

    /// After a change of the transmit interval: the next packet follows the
    /// last one by a new jittered interval, with the new interval's early
    /// window, so that a longer interval is kept from the last packet on
    /// (section 6.8.7) and a shorter one applies at once (section 6.8.3).
    /// Before the first packet nothing changes: it is due already.
    fn reschedule(&mut self) {
        let Some(interval) = self.transmit_interval() else {
            return;
        };
        if let Some(last) = self.last_tx {
            self.set_next(last, interval);
        }
    }

    /// A periodic packet went at `now`: the next one is an interval later.
    fn schedule_from(&mut self, now: Instant, interval: Duration) {
        self.last_tx = Some(now);
        self.set_next(now, interval);
    }

    fn set_next(&mut self, from: Instant, interval: Duration) {
        let us = to_us(interval);
        self.next_tx = from + timers::jittered(us, self.config.detect_mult, self.jitter.next_u32());
        self.tx_window = timers::early_window(us);
    }

    fn packet(&self, poll: bool, final_: bool) -> ControlPacket {
        ControlPacket {
            diag: self.local_diag,
            state: self.state,
            poll,
            final_,
            control_plane_independent: false,
            demand: false,
            detect_mult: self.config.detect_mult,
            my_discr: self.local_discr,
            your_discr: self.remote_discr,
            desired_min_tx_us: self.desired_tx_us,
            required_min_rx_us: self.required_rx_us,
            required_min_echo_rx_us: 0,
        }
    }
}
