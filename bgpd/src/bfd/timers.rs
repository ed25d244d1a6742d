//! BFD timer arithmetic (RFC 5880 sections 6.8.2, 6.8.3, 6.8.4 and 6.8.7):
//! the negotiated transmit interval, the detection time and transmit jitter.
//! Pure functions over microseconds, as the intervals are carried on the wire.

use std::time::Duration;

/// While a session is not Up the advertised Desired Min TX is at least one
/// second (RFC 5880 section 6.8.3).
pub const SLOW_TX_US: u32 = 1_000_000;

/// The interval at which this system sends: the slower of its own Desired Min
/// TX and the remote's Required Min RX. `None` when the remote asked for no
/// periodic packets at all (Required Min RX of zero, section 6.8.7).
pub fn transmit_interval_us(local_desired_tx: u32, remote_required_rx: u32) -> Option<u32> {
    if remote_required_rx == 0 {
        return None;
    }
    Some(local_desired_tx.max(remote_required_rx))
}

/// The asynchronous-mode detection time (section 6.8.4): the remote's Detect
/// Mult times the slower of this system's Required Min RX and the remote's
/// last Desired Min TX.
pub fn detection_time_us(local_required_rx: u32, remote_desired_tx: u32, remote_mult: u8) -> u64 {
    u64::from(remote_mult) * u64::from(local_required_rx.max(remote_desired_tx))
}

/// How early a periodic packet may go, in thousandths of its interval.
/// The jitter below is drawn from what is left of the RFC's range, so a
/// packet sent at the very start of its window still follows the last one
/// by at least 75 % of the interval; the runtime uses the window to send
/// the packets of many sessions in one wakeup.
pub const EARLY_PER_MILLE: u64 = 100;

/// The interval to the next periodic packet's deadline: reduced by a random
/// 0–15 % (85–100 % of the interval), or to 85–90 % when this system's
/// Detect Mult is 1; with the early window of [`early_window`] the interval
/// actually kept is 75–100 % (75–90 %), as section 6.8.7 requires.
/// `random` is any uniformly distributed value.
pub fn jittered(interval_us: u32, detect_mult: u8, random: u32) -> Duration {
    let low = 750 + EARLY_PER_MILLE;
    let high = if detect_mult == 1 { 900 } else { 1000 };
    let per_mille = low + u64::from(random) % (high - low + 1);
    Duration::from_micros(u64::from(interval_us) * per_mille / 1000)
}

/// How long before its deadline a periodic packet may be sent.
pub fn early_window(interval_us: u32) -> Duration {
    Duration::from_micros(u64::from(interval_us) * EARLY_PER_MILLE / 1000)
}

/// A small xorshift generator for jitter: jitter needs no cryptographic
/// quality, and a seed makes the state machine deterministic in tests.
#[derive(Debug, Clone)]
pub struct Jitter(u64);

impl Jitter {
    pub fn new(seed: u64) -> Jitter {
        Jitter(seed | 1)
    }

    pub fn next_u32(&mut self) -> u32 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        (x >> 32) as u32
    }
}
