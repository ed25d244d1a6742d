//! The whole machine's CPU over a stretch of the run: the share of all
//! cores that was busy (/proc/stat) and the share of the time in which
//! some runnable task waited for a core (`some` in /proc/pressure/cpu).
//! The simulated cluster (etcd, the kubelets' writers) shares the cores
//! with the real node; these say how much it crowded them while an ADD
//! ran, which the agents' own CPU does not.

use std::time::Instant;

/// The counters at one moment.
#[derive(Debug, Clone, Copy)]
pub struct CpuMark {
    at: Instant,
    /// All cores' time and their idle time, in ticks.
    ticks: Option<(u64, u64)>,
    /// Microseconds some task waited for a core, since boot.
    waited_us: Option<u64>,
}

/// Shares between two marks; `None` where the kernel does not say.
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct MachineCpu {
    /// Of all cores' time, the busy part.
    pub busy: Option<f64>,
    /// Of the wall time, the part in which some task waited for a core.
    pub waited: Option<f64>,
}

impl CpuMark {
    pub fn now() -> Self {
        let read = |p: &str| std::fs::read_to_string(p).ok();
        CpuMark {
            at: Instant::now(),
            ticks: read("/proc/stat").as_deref().and_then(parse_stat),
            waited_us: read("/proc/pressure/cpu")
                .as_deref()
                .and_then(parse_pressure),
        }
    }

    /// What happened from `self` to `later`.
    pub fn until(&self, later: &CpuMark) -> MachineCpu {
        let busy = match (self.ticks, later.ticks) {
            (Some((t0, i0)), Some((t1, i1))) if t1 > t0 && i1 >= i0 => {
                Some(1.0 - (i1 - i0) as f64 / (t1 - t0) as f64)
            }
            _ => None,
        };
        let wall = later.at.saturating_duration_since(self.at).as_micros() as f64;
        let waited = match (self.waited_us, later.waited_us) {
            (Some(w0), Some(w1)) if w1 >= w0 && wall > 0.0 => Some((w1 - w0) as f64 / wall),
            _ => None,
        };
        MachineCpu { busy, waited }
    }
}

/// A share as a whole percentage, or "—" when not known.
pub fn share(x: Option<f64>) -> String {
    match x {
        Some(v) if v.is_finite() => format!("{:.0} %", v * 100.0),
        _ => "—".to_string(),
    }
}

/// All cores' ticks and their idle ticks (idle and iowait) from the
/// `cpu` line of /proc/stat.
fn parse_stat(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    // guest and guest_nice (9th, 10th) are already counted in user time;
    // steal (8th) counts as busy: the cores were not this machine's then.
    let total = v.iter().take(8).sum();
    Some((total, idle))
}

/// `total=` of the `some` line of /proc/pressure/cpu, in microseconds.
fn parse_pressure(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("some "))?;
    line.split_whitespace()
        .find_map(|f| f.strip_prefix("total="))?
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn stat_counts_idle_and_iowait_as_idle_and_leaves_guests_out() {
        let t = "cpu  100 5 50 800 40 0 5 0 30 0\ncpu0 50 2 25 400 20 0 3 0 15 0\n";
        assert_eq!(parse_stat(t), Some((1000, 840)));
        assert_eq!(parse_stat("cpu0 1 2 3 4\n"), None);
        assert_eq!(parse_stat("cpu  1 2 x 4 5\n"), None);
        assert_eq!(parse_stat("cpu  1 2 3\n"), None);
    }

    #[test]
    fn pressure_is_the_some_lines_total() {
        let t = "some avg10=0.04 avg60=0.73 avg300=5.20 total=4547381376\nfull avg10=0.00 avg60=0.00 avg300=0.00 total=9\n";
        assert_eq!(parse_pressure(t), Some(4_547_381_376));
        assert_eq!(parse_pressure("full total=3\n"), None);
        assert_eq!(parse_pressure("some avg10=1\n"), None);
    }

    #[test]
    fn shares_between_two_marks() {
        let t0 = Instant::now();
        let a = CpuMark {
            at: t0,
            ticks: Some((1000, 800)),
            waited_us: Some(5_000),
        };
        let b = CpuMark {
            at: t0 + Duration::from_secs(1),
            ticks: Some((1200, 850)),
            waited_us: Some(255_000),
        };
        let m = a.until(&b);
        assert!((m.busy.unwrap() - 0.75).abs() < 1e-9, "{m:?}");
        assert!((m.waited.unwrap() - 0.25).abs() < 1e-9, "{m:?}");
        // A kernel without PSI, or counters that went back: not said.
        let c = CpuMark {
            at: t0 + Duration::from_secs(2),
            ticks: Some((900, 700)),
            waited_us: None,
        };
        assert_eq!(b.until(&c), MachineCpu::default());
    }
}
