//! Human forms of numbers: in tables, and durations typed on the command
//! line.

use std::time::Duration;

/// `45s`, `3m12s`, `2h5m`, `4d3h`: the two largest units, like kubectl.
pub fn duration(seconds: u64) -> String {
    const MIN: u64 = 60;
    const HOUR: u64 = 60 * MIN;
    const DAY: u64 = 24 * HOUR;
    match seconds {
        s if s < MIN => format!("{s}s"),
        s if s < HOUR => format!("{}m{}s", s / MIN, s % MIN),
        s if s < DAY => format!("{}h{}m", s / HOUR, s % HOUR / MIN),
        s => format!("{}d{}h", s / DAY, s % DAY / HOUR),
    }
}

/// Cuts `s` to at most `max` characters, marking the cut with `…`.
pub fn truncate(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `value` or `-` when absent.
pub fn or_dash<T: ToString>(value: Option<T>) -> String {
    value.map_or_else(|| "-".to_string(), |v| v.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(duration(0), "0s");
        assert_eq!(duration(59), "59s");
        assert_eq!(duration(192), "3m12s");
        assert_eq!(duration(2 * 3600 + 5 * 60 + 59), "2h5m");
        assert_eq!(duration(4 * 86400 + 3 * 3600 + 7), "4d3h");
    }

    #[test]
    fn truncation() {
        assert_eq!(truncate("short", 10), "short");
        assert_eq!(truncate("hold timer expired", 8), "hold ti…");
        assert_eq!(or_dash(None::<u16>), "-");
        assert_eq!(or_dash(Some(90)), "90");
    }
}

/// `--wait`: a duration (`30s`, `1m`) or whole seconds.
pub fn parse_wait(s: &str) -> Result<Duration, String> {
    let d = match s.parse::<u64>() {
        Ok(n) => Duration::from_secs(n),
        Err(_) => tartan_api::resources::common::parse_duration(s)?,
    };
    if d > Duration::from_secs(3600) {
        return Err(format!("{s} is more than an hour"));
    }
    Ok(Duration::from_secs(d.as_secs()))
}

#[cfg(test)]
mod wait_tests {
    use super::*;

    #[test]
    fn waits() {
        assert_eq!(parse_wait("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse_wait("45"), Ok(Duration::from_secs(45)));
        assert_eq!(parse_wait("1m30s"), Ok(Duration::from_secs(90)));
        assert!(parse_wait("2h").is_err());
        assert!(parse_wait("soon").is_err());
    }
}
