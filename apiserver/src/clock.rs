//! Time as the API server writes it: RFC 3339 timestamps in UTC
//! (`creationTimestamp`, managedFields' `time`) and the short ages of
//! its tables (`5m`, `3h10m`, `2d`). Calendar arithmetic by jiff; the rest pure apart from [`now`].

use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds since the Unix epoch, now.
pub fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0)
}

/// `2026-11-26T15:20:18Z` for `secs` since the epoch.
pub fn rfc3339(secs: i64) -> String {
    match k8s_openapi::jiff::Timestamp::from_second(secs) {
        Ok(t) => t.strftime("%Y-%m-%dT%H:%M:%SZ").to_string(),
        Err(_) => "1970-01-01T00:00:00Z".to_string(),
    }
}

/// Seconds since the epoch of an RFC 3339 timestamp (a fraction
/// ignored); `None` for anything else.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    // RFC 3339 separates date and time with `T` (jiff takes a space too).
    if s.as_bytes().get(10) != Some(&b'T') {
        return None;
    }
    s.parse::<k8s_openapi::jiff::Timestamp>()
        .ok()
        .map(|t| t.as_second())
}

/// An age as the API server's tables print it (Kubernetes'
/// `HumanDuration`): `<invalid>` for a time well in the future.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    let pair = |big: i64, unit: &str, small: i64, unit2: &str| {
        if small == 0 {
            format!("{big}{unit}")
        } else {
            format!("{big}{unit}{small}{unit2}")
        }
    };
    if hours < 8 {
        return pair(hours, "h", minutes % 60, "m");
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        return pair(hours / 24, "d", hours % 24, "h");
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        return pair(hours / 24 / 365, "y", (hours / 24) % 365, "d");
    }
    format!("{}y", hours / 24 / 365)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_round_trip() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(951_782_400), "2000-02-29T00:00:00Z");
        assert_eq!(rfc3339(1_795_706_418), "2026-11-26T15:20:18Z");
        for t in [0, 951_782_400, 1_795_706_418, 4_102_444_799] {
            assert_eq!(parse_rfc3339(&rfc3339(t)), Some(t));
        }
        assert_eq!(
            parse_rfc3339("2026-11-26T15:20:18.123Z"),
            Some(1_795_706_418)
        );
        for bad in [
            "",
            "2026-13-01T00:00:00Z",
            "2026-11-26 15:20:18Z",
            "€€€€€€€€€€€€€€€€€€€€Z",
        ] {
            assert_eq!(parse_rfc3339(bad), None, "{bad}");
        }
    }

    #[test]
    fn ages_read_as_kubectl_prints_them() {
        let cases = [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (600, "10m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 600, "3h10m"),
            (9 * 3600, "9h"),
            (50 * 3600, "2d2h"),
            (10 * 86_400, "10d"),
            (3 * 365 * 86_400 + 86_400, "3y1d"),
            (9 * 365 * 86_400, "9y"),
        ];
        for (s, want) in cases {
            assert_eq!(human_duration(s), want, "{s}");
        }
    }
}
