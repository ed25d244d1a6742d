//! The BFD Control packet (RFC 5880 section 4.1): encoding, and decoding with
//! the packet-only reception checks of section 6.8.6. Never panics on input.

use thiserror::Error;

/// Length of a Control packet without an authentication section.
pub const PACKET_LEN: usize = 24;
/// The protocol version this implementation speaks.
pub const VERSION: u8 = 1;

/// Session state as carried in the Sta field (RFC 5880 section 4.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum State {
    AdminDown,
    Down,
    Init,
    Up,
}

impl State {
    fn from_bits(bits: u8) -> State {
        match bits & 0x3 {
            0 => State::AdminDown,
            1 => State::Down,
            2 => State::Init,
            _ => State::Up,
        }
    }

    fn bits(self) -> u8 {
        match self {
            State::AdminDown => 0,
            State::Down => 1,
            State::Init => 2,
            State::Up => 3,
        }
    }

    /// The lower-case name used in logs, the control API and metrics.
    pub fn name(self) -> &'static str {
        match self {
            State::AdminDown => "admindown",
            State::Down => "down",
            State::Init => "init",
            State::Up => "up",
        }
    }
}

/// Diagnostic codes (RFC 5880 section 4.1). Unknown values are kept as they are.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Diag {
    None,
    ControlDetectionTimeExpired,
    EchoFunctionFailed,
    NeighborSignaledSessionDown,
    ForwardingPlaneReset,
    PathDown,
    ConcatenatedPathDown,
    AdministrativelyDown,
    ReverseConcatenatedPathDown,
    Other(u8),
}

impl Diag {
    /// The diagnostic for a 5-bit code (higher bits ignored).
    pub fn from_code(bits: u8) -> Diag {
        match bits & 0x1f {
            0 => Diag::None,
            1 => Diag::ControlDetectionTimeExpired,
            2 => Diag::EchoFunctionFailed,
            3 => Diag::NeighborSignaledSessionDown,
            4 => Diag::ForwardingPlaneReset,
            5 => Diag::PathDown,
            6 => Diag::ConcatenatedPathDown,
            7 => Diag::AdministrativelyDown,
            8 => Diag::ReverseConcatenatedPathDown,
            other => Diag::Other(other),
        }
    }

    /// The 5-bit wire code.
    pub fn code(self) -> u8 {
        match self {
            Diag::None => 0,
            Diag::ControlDetectionTimeExpired => 1,
            Diag::EchoFunctionFailed => 2,
            Diag::NeighborSignaledSessionDown => 3,
            Diag::ForwardingPlaneReset => 4,
            Diag::PathDown => 5,
            Diag::ConcatenatedPathDown => 6,
            Diag::AdministrativelyDown => 7,
            Diag::ReverseConcatenatedPathDown => 8,
            Diag::Other(v) => v & 0x1f,
        }
    }
}

/// One Control packet. Intervals are in microseconds, as on the wire.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ControlPacket {
    pub diag: Diag,
    pub state: State,
    pub poll: bool,
    pub final_: bool,
    pub control_plane_independent: bool,
    pub demand: bool,
    pub detect_mult: u8,
    pub my_discr: u32,
    pub your_discr: u32,
    pub desired_min_tx_us: u32,
    pub required_min_rx_us: u32,
    pub required_min_echo_rx_us: u32,
}

/// Why a received packet was discarded (RFC 5880 section 6.8.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum DecodeError {
    #[error("packet of {0} bytes is shorter than a BFD Control packet")]
    Truncated(usize),
    #[error("version {0}, only version 1 is spoken")]
    Version(u8),
    #[error("length field {length} is below the minimum {minimum}")]
    LengthTooSmall { length: u8, minimum: u8 },
    #[error("length field {length} exceeds the {payload} bytes received")]
    LengthBeyondPayload { length: u8, payload: usize },
    #[error("detect multiplier is zero")]
    ZeroDetectMult,
    #[error("multipoint bit set")]
    Multipoint,
    #[error("my discriminator is zero")]
    ZeroMyDiscriminator,
    #[error("your discriminator is zero in state {0:?}")]
    ZeroYourDiscriminator(State),
    #[error("authentication present but none is configured")]
    AuthenticationNotConfigured,
}

const FLAG_POLL: u8 = 0x20;
const FLAG_FINAL: u8 = 0x10;
const FLAG_CPI: u8 = 0x08;
const FLAG_AUTH: u8 = 0x04;
const FLAG_DEMAND: u8 = 0x02;
const FLAG_MULTIPOINT: u8 = 0x01;

impl ControlPacket {
    /// The 24-byte wire form (no authentication section).
    pub fn encode(&self) -> [u8; PACKET_LEN] {
        let mut out = [0u8; PACKET_LEN];
        out[0] = (VERSION << 5) | self.diag.code();
        let mut flags = self.state.bits() << 6;
        if self.poll {
            flags |= FLAG_POLL;
        }
        if self.final_ {
            flags |= FLAG_FINAL;
        }
        if self.control_plane_independent {
            flags |= FLAG_CPI;
        }
        if self.demand {
            flags |= FLAG_DEMAND;
        }
        out[1] = flags;
        out[2] = self.detect_mult;
        out[3] = PACKET_LEN as u8;
        out[4..8].copy_from_slice(&self.my_discr.to_be_bytes());
        out[8..12].copy_from_slice(&self.your_discr.to_be_bytes());
        out[12..16].copy_from_slice(&self.desired_min_tx_us.to_be_bytes());
        out[16..20].copy_from_slice(&self.required_min_rx_us.to_be_bytes());
        out[20..24].copy_from_slice(&self.required_min_echo_rx_us.to_be_bytes());
        out
    }

    /// Decode a received UDP payload, applying every check of RFC 5880
    /// section 6.8.6 that needs no session. Authentication is never
    /// configured in Tartan, so a packet with the A bit set is discarded.
    pub fn decode(buf: &[u8]) -> Result<ControlPacket, DecodeError> {
        if buf.len() < PACKET_LEN {
            return Err(DecodeError::Truncated(buf.len()));
        }
        let version = buf[0] >> 5;
        if version != VERSION {
            return Err(DecodeError::Version(version));
        }
        let flags = buf[1];
        let length = buf[3];
        let auth = flags & FLAG_AUTH != 0;
        let minimum: u8 = if auth { 26 } else { PACKET_LEN as u8 };
        if length < minimum {
            return Err(DecodeError::LengthTooSmall { length, minimum });
        }
        if usize::from(length) > buf.len() {
            return Err(DecodeError::LengthBeyondPayload {
                length,
                payload: buf.len(),
            });
        }
        let detect_mult = buf[2];
        if detect_mult == 0 {
            return Err(DecodeError::ZeroDetectMult);
        }
        if flags & FLAG_MULTIPOINT != 0 {
            return Err(DecodeError::Multipoint);
        }
        let word = |at: usize| u32::from_be_bytes([buf[at], buf[at + 1], buf[at + 2], buf[at + 3]]);
        let my_discr = word(4);
        if my_discr == 0 {
            return Err(DecodeError::ZeroMyDiscriminator);
        }
        let state = State::from_bits(flags >> 6);
        let your_discr = word(8);
        if your_discr == 0 && !matches!(state, State::Down | State::AdminDown) {
            return Err(DecodeError::ZeroYourDiscriminator(state));
        }
        if auth {
            return Err(DecodeError::AuthenticationNotConfigured);
        }
        let poll = flags & FLAG_POLL != 0;
        let final_ = flags & FLAG_FINAL != 0;
        // Both set: RFC 5880 forbids sending it (4.1) but gives no rule
        // to discard it (6.8.6), so it is taken as both: our Poll ends,
        // and a Final answers the peer's (as FRR's bfdd takes it).
        Ok(ControlPacket {
            diag: Diag::from_code(buf[0]),
            state,
            poll,
            final_,
            control_plane_independent: flags & FLAG_CPI != 0,
            demand: flags & FLAG_DEMAND != 0,
            detect_mult,
            my_discr,
            your_discr,
            desired_min_tx_us: word(12),
            required_min_rx_us: word(16),
            required_min_echo_rx_us: word(20),
        })
    }
}
