//! When a BIRD protocol last changed state: the `since` column of
//! `show protocols`, used by tests to tell that a session was not reset.
//!
//! BIRD keeps that moment on its monotonic clock and converts it to wall
//! time each time it prints it, so two listings of an unchanged session can
//! differ by a millisecond. Compare with [`StateSince::same_as`], never `==`
//! on the text.
use anyhow::{Context, Result, bail};

/// Milliseconds since midnight of the `since` column (BIRD's default
/// `timeformat protocol`, `HH:MM:SS.mmm` for the last 20 hours).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StateSince(u32);

/// Larger than BIRD's print jitter, far below any reset a test provokes
/// (callers let more than this pass before the action they check).
const JITTER_MS: u32 = 50;
const DAY_MS: u32 = 86_400_000;

impl StateSince {
    /// Reads the `since` column from the `show protocols` row of `name`.
    pub fn from_listing(listing: &str, name: &str) -> Result<StateSince> {
        let row = listing
            .lines()
            .find(|l| l.split_whitespace().next() == Some(name))
            .with_context(|| format!("no protocol {name} in:\n{listing}"))?;
        // name proto table state since info…
        let since = row
            .split_whitespace()
            .nth(4)
            .with_context(|| format!("short row: {row}"))?;
        StateSince::parse(since).with_context(|| format!("row: {row}"))
    }

    /// Parses `HH:MM:SS[.fff]`.
    pub fn parse(text: &str) -> Result<StateSince> {
        let (hms, frac) = text.split_once('.').unwrap_or((text, "0"));
        let parts: Vec<&str> = hms.split(':').collect();
        let [h, m, s] = parts.as_slice() else {
            bail!("not HH:MM:SS[.fff]: {text:?}");
        };
        let num = |v: &str, max: u32| -> Result<u32> {
            let n: u32 = v.parse().with_context(|| format!("{v:?} in {text:?}"))?;
            if n > max {
                bail!("{n} out of range in {text:?}");
            }
            Ok(n)
        };
        // Fractions of any length: the first three digits are milliseconds.
        let ms_digits: String = frac.chars().chain("000".chars()).take(3).collect();
        let ms = num(&ms_digits, 999)?;
        Ok(StateSince(
            ((num(h, 23)? * 60 + num(m, 59)?) * 60 + num(s, 60)?) * 1000 + ms,
        ))
    }

    /// The same state change, allowing for BIRD's print jitter (and for
    /// the two readings straddling midnight).
    pub fn same_as(self, other: StateSince) -> bool {
        let d = self.0.abs_diff(other.0);
        d.min(DAY_MS - d.min(DAY_MS)) <= JITTER_MS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_column_and_tolerates_print_jitter() {
        let a = StateSince::parse("11:49:15.711").unwrap();
        let b = StateSince::parse("11:49:15.712").unwrap();
        assert!(a.same_as(b) && b.same_as(a));
        assert!(!a.same_as(StateSince::parse("11:49:15.900").unwrap()));
        assert!(!a.same_as(StateSince::parse("11:49:16").unwrap()));
        let late = StateSince::parse("23:59:59.990").unwrap();
        assert!(late.same_as(StateSince::parse("00:00:00.010").unwrap()));
        assert_eq!(StateSince::parse("00:00:01.5").unwrap(), StateSince(1500));
        for bad in ["", "11:49", "24:00:00", "11:60:00", "a:b:c", "11:49:15.x"] {
            assert!(StateSince::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn reads_the_row_of_the_named_protocol() {
        let listing = "Name       Proto      Table      State  Since         Info\n\
                       bgp_10_0_1_2 BGP        ---        up     11:49:15.711  Established\n\
                       static1    Static     master4    up     11:49:14.001";
        let s = StateSince::from_listing(listing, "bgp_10_0_1_2").unwrap();
        assert_eq!(s, StateSince::parse("11:49:15.711").unwrap());
        assert!(StateSince::from_listing(listing, "bgp_10_0_9_9").is_err());
    }
}
