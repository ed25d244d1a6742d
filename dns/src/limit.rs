//! A per-client rate limit: a token bucket per source address, so a client
//! that floods uses up its own budget and no one else's. Queries over the
//! budget are dropped before they are parsed (a UDP client retries; a
//! flood costs one hash lookup per packet).
//!
//! The table is bounded: when it holds `max_clients`, buckets that are full
//! again (clients idle long enough) are forgotten first; if none are, the
//! new client is refused until some are.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::Instant;

#[derive(Clone, Copy, Debug)]
pub struct LimitConfig {
    /// Queries per second a client may send, sustained (0: no limit).
    pub rate: f64,
    /// Queries a client may send at once.
    pub burst: f64,
    pub max_clients: usize,
}

pub struct Limiter {
    cfg: LimitConfig,
    buckets: Mutex<HashMap<IpAddr, (f64, Instant)>>,
}

impl Limiter {
    pub fn new(cfg: LimitConfig) -> Limiter {
        Limiter {
            cfg,
            buckets: Mutex::new(HashMap::new()),
        }
    }

    /// Whether `client` may send a query at `now`; takes a token if so.
    pub fn allow(&self, client: IpAddr, now: Instant) -> bool {
        if self.cfg.rate <= 0.0 {
            return true;
        }
        let mut b = self.buckets.lock().unwrap_or_else(|e| e.into_inner());
        let (rate, burst) = (self.cfg.rate, self.cfg.burst.max(1.0));
        let refill = |(tokens, last): (f64, Instant)| {
            let dt = now.saturating_duration_since(last).as_secs_f64();
            (tokens + dt * rate).min(burst)
        };
        if !b.contains_key(&client) && b.len() >= self.cfg.max_clients {
            b.retain(|_, v| refill(*v) < burst);
            if b.len() >= self.cfg.max_clients {
                return false;
            }
        }
        let slot = b.entry(client).or_insert((burst, now));
        let tokens = refill(*slot);
        if tokens >= 1.0 {
            *slot = (tokens - 1.0, now);
            true
        } else {
            *slot = (tokens, now);
            false
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn a_flooding_client_spends_only_its_own_budget() {
        let l = Limiter::new(LimitConfig {
            rate: 100.0,
            burst: 50.0,
            max_clients: 10,
        });
        let t0 = Instant::now();
        let allowed = (0..10_000).filter(|_| l.allow(ip("10.0.0.1"), t0)).count();
        assert_eq!(allowed, 50);
        // Another client is untouched by the flood.
        assert!(l.allow(ip("10.0.0.2"), t0));
        // The flooder earns tokens back at its rate: 100/s → 10 in 100 ms.
        let t1 = t0 + Duration::from_millis(100);
        let again = (0..1000).filter(|_| l.allow(ip("10.0.0.1"), t1)).count();
        assert_eq!(again, 10);
    }

    #[test]
    fn the_client_table_is_bounded_and_idle_clients_make_room() {
        let l = Limiter::new(LimitConfig {
            rate: 10.0,
            burst: 5.0,
            max_clients: 2,
        });
        let t0 = Instant::now();
        assert!(l.allow(ip("10.0.0.1"), t0));
        assert!(l.allow(ip("10.0.0.2"), t0));
        // Both are still owed tokens: no room for a third.
        assert!(!l.allow(ip("10.0.0.3"), t0));
        // A second later both buckets are full again: forgotten.
        assert!(l.allow(ip("10.0.0.3"), t0 + Duration::from_secs(1)));
    }

    #[test]
    fn zero_rate_means_no_limit() {
        let l = Limiter::new(LimitConfig {
            rate: 0.0,
            burst: 0.0,
            max_clients: 0,
        });
        assert!((0..1000).all(|_| l.allow(ip("10.0.0.1"), Instant::now())));
    }
}
