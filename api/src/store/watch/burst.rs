//! When a consumer of watch events acts on a burst of them: once the
//! events that matter have stopped for a quiet spell, and never later than
//! a limit after the first. Events that change nothing for the consumer (a
//! kubelet's heartbeat) do not move the moment: at 500 of them a second, a
//! quiet spell restarted by each would almost never pass.

use std::time::Duration;

// tokio's clock: the one its consumers wait on (and pause in tests).
use tokio::time::Instant;

#[derive(Debug, Clone)]
pub struct Burst {
    quiet: Duration,
    limit: Duration,
    /// The first and the last event that mattered, since the last act.
    open: Option<(Instant, Instant)>,
}

impl Burst {
    /// Act `quiet` after the last event that mattered, at most `limit`
    /// after the first.
    pub fn new(quiet: Duration, limit: Duration) -> Self {
        Burst {
            quiet,
            limit: limit.max(quiet),
            open: None,
        }
    }

    /// An event that matters arrived at `now`.
    pub fn mark(&mut self, now: Instant) {
        self.open = Some(match self.open {
            None => (now, now),
            Some((first, last)) => (first, last.max(now)),
        });
    }

    /// Whether something waits to be acted on.
    pub fn is_open(&self) -> bool {
        self.open.is_some()
    }

    /// When to act, if something waits.
    pub fn deadline(&self) -> Option<Instant> {
        self.open
            .map(|(first, last)| (last + self.quiet).min(first + self.limit))
    }

    /// The burst was acted on.
    pub fn close(&mut self) {
        self.open = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn nothing_marked_has_no_deadline() {
        let b = Burst::new(5 * MS, 100 * MS);
        assert!(!b.is_open());
        assert_eq!(b.deadline(), None);
    }

    #[test]
    fn the_deadline_is_a_quiet_spell_after_the_last_event_that_mattered() {
        let t0 = Instant::now();
        let mut b = Burst::new(5 * MS, 100 * MS);
        b.mark(t0);
        assert_eq!(b.deadline(), Some(t0 + 5 * MS));
        b.mark(t0 + 3 * MS);
        assert_eq!(b.deadline(), Some(t0 + 8 * MS));
        // An event out of order does not pull the moment back.
        b.mark(t0 + MS);
        assert_eq!(b.deadline(), Some(t0 + 8 * MS));
        b.close();
        assert_eq!(b.deadline(), None);
        b.mark(t0 + 50 * MS);
        assert_eq!(b.deadline(), Some(t0 + 55 * MS), "a new burst after an act");
    }

    #[test]
    fn a_burst_that_never_goes_quiet_is_acted_on_at_its_limit() {
        let t0 = Instant::now();
        let mut b = Burst::new(5 * MS, 100 * MS);
        // An event that matters every 2 ms, for a second.
        for k in 0..500 {
            b.mark(t0 + 2 * k * MS);
        }
        assert_eq!(b.deadline(), Some(t0 + 100 * MS));
    }

    #[test]
    fn a_limit_shorter_than_the_quiet_spell_is_the_quiet_spell() {
        let t0 = Instant::now();
        let mut b = Burst::new(5 * MS, MS);
        b.mark(t0);
        assert_eq!(b.deadline(), Some(t0 + 5 * MS));
    }
}
