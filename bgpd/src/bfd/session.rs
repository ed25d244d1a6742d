//! One BFD session as a pure state machine (RFC 5880 sections 6.2, 6.5 and
//! 6.8): received packets and the clock go in, packets to send and state
//! transitions come out. No sockets and no runtime here.

use std::time::{Duration, Instant};

use super::packet::{ControlPacket, Diag, State};
use super::timers::{self, Jitter, SLOW_TX_US};

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
    next_tx: Instant,
    detect_deadline: Option<Instant>,
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
            detect_deadline: None,
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
    pub fn config(&self) -> SessionConfig {
        self.config
    }
    pub fn polling(&self) -> bool {
        self.polling
    }
    pub fn remote_demand(&self) -> bool {
        self.remote_demand
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
        match (tx, self.detect_deadline) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn sends_periodically(&self) -> bool {
        self.remote_min_rx_us != 0
    }

    /// How long before its deadline the next periodic packet may go
    /// ([`timers::early_window`]); zero when none is sent.
    pub fn early_window(&self) -> Duration {
        match self.transmit_interval() {
            Some(i) if self.sends_periodically() => timers::early_window(to_us(i)),
            _ => Duration::ZERO,
        }
    }

    /// The first moment the next periodic packet may go.
    fn send_opens(&self) -> Option<Instant> {
        if !self.sends_periodically() {
            return None;
        }
        let early = self.early_window();
        Some(self.next_tx.checked_sub(early).unwrap_or(self.next_tx))
    }

    /// Whether the clock has work for this session at `now`: a packet
    /// whose window has opened, or the detection time passed.
    pub fn due(&self, now: Instant) -> bool {
        self.final_pending
            || self.send_opens().is_some_and(|o| o <= now)
            || self.detect_deadline.is_some_and(|d| d <= now)
    }

    /// A valid packet for this session (RFC 5880 section 6.8.6, from "set
    /// bfd.RemoteDiscr" onwards; the packet-level checks are in `decode` and
    /// the discriminator demultiplexing in the runtime).
    pub fn receive(&mut self, pkt: &ControlPacket, now: Instant) -> Option<Transition> {
        self.remote_discr = pkt.my_discr;
        self.remote_state = pkt.state;
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
            self.reschedule(now);
        }
        if pkt.poll {
            self.final_pending = true;
        }
        if self.state == State::AdminDown {
            return None;
        }
        self.detect_deadline = self.detection_time().map(|d| now + d);
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
        next.map(|(to, diag)| self.go(to, diag, now))
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
        // initial values so that the slow rate applies again.
        self.remote_discr = 0;
        self.remote_state = State::Down;
        self.remote_min_rx_us = 1;
        self.remote_desired_tx_us = 0;
        self.remote_detect_mult = 0;
        match self.state {
            State::Init | State::Up => {
                Some(self.go(State::Down, Diag::ControlDetectionTimeExpired, now))
            }
            _ => None,
        }
    }

    /// The packet to send at `now`, if one is due: a Final answering a Poll
    /// at once, or the next periodic packet once its early window has
    /// opened.
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

    /// Administratively disable (`true`) or re-enable the session (section 6.8.16).
    pub fn set_admin_down(&mut self, down: bool, now: Instant) -> Option<Transition> {
        match (down, self.state) {
            (true, State::AdminDown) | (false, State::Down | State::Init | State::Up) => None,
            (true, _) => {
                self.detect_deadline = None;
                Some(self.go(State::AdminDown, Diag::AdministrativelyDown, now))
            }
            (false, State::AdminDown) => Some(self.go(State::Down, Diag::None, now)),
        }
    }

    /// New configured timers; while Up they are announced with a Poll
    /// Sequence (section 6.8.3).
    pub fn set_config(&mut self, config: SessionConfig, now: Instant) {
        self.config = config;
        self.advertise(now);
    }

    fn go(&mut self, to: State, diag: Diag, now: Instant) -> Transition {
        let from = self.state;
        self.state = to;
        self.local_diag = diag;
        self.advertise(now);
        Transition { from, to, diag }
    }

    /// Recompute the advertised timers from the configuration and the state.
    fn advertise(&mut self, now: Instant) {
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
            self.polling = true;
            self.tx_in_effect_us = self.tx_in_effect_us.min(desired);
            self.rx_in_effect_us = self.rx_in_effect_us.max(required);
            self.next_tx = now;
        } else {
            self.polling = false;
            self.tx_in_effect_us = desired;
            self.rx_in_effect_us = required;
        }
        self.desired_tx_us = desired;
        self.required_rx_us = required;
        if self.transmit_interval() != old_interval {
            self.reschedule(now);
        }
    }

    /// After a change of the transmit interval: send no later than one new
    /// (jittered) interval from now.
    fn reschedule(&mut self, now: Instant) {
        if let Some(interval) = self.transmit_interval() {
            let us = to_us(interval);
            let at = now + timers::jittered(us, self.config.detect_mult, self.jitter.next_u32());
            if at < self.next_tx {
                self.next_tx = at;
            }
        }
    }

    fn schedule_from(&mut self, now: Instant, interval: Duration) {
        let us = to_us(interval);
        self.next_tx = now + timers::jittered(us, self.config.detect_mult, self.jitter.next_u32());
    }

    /// A packet with the current state and no Poll or Final, outside the
    /// schedule (the last word of a session being removed).
    pub fn current_packet(&self) -> ControlPacket {
        self.packet(false, false)
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
