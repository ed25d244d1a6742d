//! Running dnsperf against one server and reading its figures: queries per
//! second flat out, and every answer's latency at a paced rate.

use std::process::Command;

use anyhow::{Context, Result, bail};

use super::model::{DnsBenchOptions, Run};

pub(super) fn dnsperf(port: u16, file: &std::path::Path, args: &[String]) -> Result<String> {
    let out = Command::new("dnsperf")
        .args(["-s", "127.0.0.1", "-p", &port.to_string(), "-d"])
        .arg(file)
        .args(args)
        .output()
        .context("run dnsperf (Debian package dnsperf)")?;
    if !out.status.success() {
        bail!("dnsperf: {}", String::from_utf8_lossy(&out.stderr));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

pub(super) fn stat(out: &str, label: &str) -> Option<f64> {
    out.lines()
        .find_map(|l| l.trim().strip_prefix(label))
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
}

/// Per-query lines of `dnsperf -v`: `> NOERROR name A 0.000123`, or
/// `> T name A` for one that timed out. The latencies (µs) of those
/// answered, how many were NOERROR, and how many were asked.
pub(super) fn latencies(out: &str) -> (Vec<f64>, usize, usize) {
    let mut lat = Vec::new();
    let mut ok = 0;
    let mut asked = 0;
    for l in out.lines().filter_map(|l| l.strip_prefix("> ")) {
        asked += 1;
        let f: Vec<&str> = l.split_whitespace().collect();
        if f.first() == Some(&"NOERROR") {
            ok += 1;
        }
        if let Some(v) = f.last().and_then(|v| v.parse::<f64>().ok()) {
            lat.push(v * 1e6);
        }
    }
    (lat, ok, asked)
}

pub(super) fn percentile(v: &mut [f64], q: f64) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    let rank = ((q * v.len() as f64).ceil() as usize).clamp(1, v.len());
    v[rank - 1]
}

pub(super) fn measure(port: u16, file: &std::path::Path, o: &DnsBenchOptions) -> Result<Run> {
    let secs = o.seconds.to_string();
    let flat = dnsperf(
        port,
        file,
        &[
            "-l".into(),
            secs.clone(),
            "-c".into(),
            o.clients.to_string(),
            "-q".into(),
            "100".into(),
        ],
    )?;
    let qps = stat(&flat, "Queries per second:").context("dnsperf printed no rate")?;
    let sent = stat(&flat, "Queries sent:").unwrap_or(0.0);
    let done = stat(&flat, "Queries completed:").unwrap_or(0.0);
    let paced = dnsperf(
        port,
        file,
        &[
            "-l".into(),
            secs,
            "-c".into(),
            o.clients.to_string(),
            "-Q".into(),
            o.latency_qps.to_string(),
            "-v".into(),
        ],
    )?;
    let (mut lat, ok, asked) = latencies(&paced);
    let answered = ok as f64 / asked.max(1) as f64;
    Ok(Run {
        qps,
        answered: answered.min(if sent > 0.0 { done / sent } else { 0.0 }),
        p50_us: percentile(&mut lat, 0.50),
        p99_us: percentile(&mut lat, 0.99),
    })
}

pub(super) fn version(cmd: &str, arg: &str) -> String {
    Command::new(cmd)
        .arg(arg)
        .output()
        .map(|o| {
            let t = format!(
                "{}{}",
                String::from_utf8_lossy(&o.stdout),
                String::from_utf8_lossy(&o.stderr)
            );
            t.lines()
                .find(|l| l.contains("ersion"))
                .unwrap_or("")
                .trim()
                .to_string()
        })
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dnsperf_verbose_lines_give_latencies_and_rcodes() {
        let out =
            "> NOERROR a.example.test A 0.000169\n> NXDOMAIN b A 0.000070\n> T c A\n[Status] x\n";
        let (mut lat, ok, asked) = latencies(out);
        assert_eq!((ok, asked), (1, 3));
        assert_eq!(lat.len(), 2);
        assert_eq!(percentile(&mut lat, 0.99), 169.0);
        assert_eq!(
            stat("  Queries per second:   1234.5\n", "Queries per second:"),
            Some(1234.5)
        );
    }
}
