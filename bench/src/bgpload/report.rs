//! The results file: a Markdown table with the machine, versions and
//! parameters beside the figures.
use super::bench::{BenchOptions, DeviceResult, GeneratorRate, median};
use super::devices::DeviceKind;
use std::fmt::Write;
use std::time::Duration;

/// Where and how the benchmark ran.
#[derive(Debug, Clone)]
pub struct Environment {
    pub date: String,
    pub nproc: usize,
    pub kernel: String,
    pub memory: String,
    pub cpu: String,
    pub command: String,
    /// /proc/loadavg when the run began, and when it ended.
    pub load_before: String,
    pub load_after: String,
}

impl Environment {
    /// Where and when a benchmark ran, and how, as Markdown paragraphs.
    pub fn render(&self) -> String {
        format!(
            "Measured {} on {} cores ({}), {}, kernel {}; load average {} before, {} after (other work on the machine slows every column alike; compare the ratios).\n\nCommand: `{}`\n",
            self.date,
            self.nproc,
            self.cpu,
            self.memory,
            self.kernel,
            self.load_before,
            self.load_after,
            self.command
        )
    }

    /// Reads the machine's description from /proc and `date`.
    pub fn detect(command: String) -> Environment {
        let read = |p: &str| std::fs::read_to_string(p).unwrap_or_default();
        let date = std::process::Command::new("date")
            .args(["-u", "+%Y-%m-%d %H:%M UTC"])
            .output()
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
            .unwrap_or_default();
        let field = |text: &str, key: &str| {
            text.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
                .unwrap_or_default()
        };
        let mem_kb: u64 = field(&read("/proc/meminfo"), "MemTotal")
            .split_whitespace()
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0);
        Environment {
            date,
            nproc: std::thread::available_parallelism().map_or(1, |n| n.get()),
            kernel: read("/proc/sys/kernel/osrelease").trim().to_string(),
            memory: format!("{:.1} GiB", mem_kb as f64 / (1u64 << 20) as f64),
            cpu: field(&read("/proc/cpuinfo"), "model name"),
            command,
            load_before: load_average(),
            load_after: String::new(),
        }
    }
}

/// The 1, 5 and 15 minute load averages.
pub fn load_average() -> String {
    let s = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    s.split_whitespace().take(3).collect::<Vec<_>>().join(" ")
}

fn secs(d: Duration) -> String {
    format!("{:.3} s", d.as_secs_f64())
}

fn mib(b: u64) -> String {
    format!("{:.0} MiB", b as f64 / (1u64 << 20) as f64)
}

/// Median wall and median peak RSS of a device's completed runs.
fn medians(r: &DeviceResult) -> Option<(Duration, u64)> {
    let mut walls: Vec<Duration> = r.runs.iter().filter_map(|x| x.wall).collect();
    let mut rss: Vec<u64> = r
        .runs
        .iter()
        .filter(|x| x.wall.is_some())
        .map(|x| x.peak_rss)
        .collect();
    (!walls.is_empty()).then(|| (median(&mut walls), median(&mut rss)))
}

pub fn render_markdown(
    env: &Environment,
    opts: &BenchOptions,
    results: &[DeviceResult],
    generator: Option<&GeneratorRate>,
) -> String {
    let total = u64::from(opts.peers) * u64::from(opts.prefixes);
    let mut s = String::from("# BGP ingest and propagate\n\n");
    let _ = writeln!(
        s,
        "Measured {} on {} cores ({}), {}, kernel {}; load average {} before, {} after \
         (other work on the machine slows every device alike; compare the ratios).\n\n\
         Command: `{}`\n",
        env.date,
        env.nproc,
        env.cpu,
        env.memory,
        env.kernel,
        env.load_before,
        env.load_after,
        env.command
    );
    let _ = writeln!(
        s,
        "Load: {} injectors (eBGP, AS 65001–{}), each {} unique IPv4 /24s, {} per UPDATE, \
         one attribute set (ORIGIN IGP, AS_PATH [own AS], NEXT_HOP own address), then \
         End-of-RIB; device AS 64512, sink AS 64999; {} paths in all. Wall time: first \
         UPDATE written → the sink holds all {} prefixes. Peak RSS: VmHWM of the device's \
         processes at that moment. Bytes per path: peak RSS / {}. Medians over the runs; \
         a fresh daemon per run.\n",
        opts.peers,
        65000 + opts.peers,
        opts.prefixes,
        opts.per_update,
        total,
        total,
        total
    );
    s.push_str("| device | runs | median wall | min / max | median peak RSS | bytes per path | time ÷ BIRD | RSS ÷ BIRD | sent back to injectors |\n");
    s.push_str("|---|---|---|---|---|---|---|---|---|\n");
    let bird = results
        .iter()
        .find(|r| r.kind == DeviceKind::Bird)
        .and_then(medians);
    for r in results {
        let ok: Vec<Duration> = r.runs.iter().filter_map(|x| x.wall).collect();
        let Some((wall, rss)) = medians(r) else {
            let why = r.error.clone().unwrap_or_else(|| match r.runs.first() {
                Some(x) => format!(
                    "timed out after {:?} with {} of {total} prefixes",
                    opts.timeout, x.held
                ),
                None => "no runs".into(),
            });
            let why = one_line(&why);
            let _ = writeln!(s, "| {} | 0 | — | — | — | — | — | — | {why} |", r.version);
            continue;
        };
        let (lo, hi) = (
            ok.iter().min().copied().unwrap_or_default(),
            ok.iter().max().copied().unwrap_or_default(),
        );
        let (tr, rr) = match bird {
            Some((bw, brss)) if bw.as_secs_f64() > 0.0 && brss > 0 => (
                format!("{:.2}", wall.as_secs_f64() / bw.as_secs_f64()),
                format!("{:.2}", rss as f64 / brss as f64),
            ),
            _ => ("—".into(), "—".into()),
        };
        let back = r.runs.iter().map(|x| x.sent_back).max().unwrap_or(0);
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} / {} | {} | {} | {tr} | {rr} | {back} |",
            r.version,
            ok.len(),
            secs(wall),
            secs(lo),
            secs(hi),
            mib(rss),
            rss / total.max(1),
        );
    }
    if let Some(g) = generator {
        let _ = writeln!(
            s,
            "\nThe generator alone (injectors straight into a receiver in the device's namespace \
             that only completes the handshake, reads and counts; median of {}): all {} paths \
             written into TCP after {}, all held by the receiver after {}.",
            g.runs,
            total,
            secs(g.written),
            secs(g.received)
        );
    }
    s.push_str(
        "\n## Per run\n\n| device | run | wall | injectors done writing | peak RSS | sink held \
         | kernel IPv4 routes in the device's namespace |\n|---|---|---|---|---|---|---|\n",
    );
    for r in results {
        for (i, x) in r.runs.iter().enumerate() {
            let wall = x.wall.map_or("timed out".into(), secs);
            let _ = writeln!(
                s,
                "| {} | {} | {wall} | {} | {} | {} | {} |",
                r.kind.name(),
                i + 1,
                secs(x.written),
                mib(x.peak_rss),
                x.held,
                x.kernel_routes
            );
        }
    }
    s.push_str(
        "\nNotes: bytes per path is peak RSS ÷ paths, the daemon's baseline included. \
         GoBGP sends one prefix per UPDATE towards the sink. Injector sessions offer hold \
         time 180 and send KEEPALIVEs at a third of the negotiated time.\n",
    );
    s.push_str("\n## Configuration\n\nTopology: one namespace for the device, one per injector (10.1.i.2/24, device 10.1.i.1), one for the sink (10.2.0.2/24, device 10.2.0.1); a veth per peer. The generator connects; every device neighbor is passive. No device writes routes to the kernel.\n\n");
    for r in results {
        let _ = writeln!(
            s,
            "- **{}** ({}): {}",
            r.kind.name(),
            r.version,
            r.kind.config_note()
        );
        if let Some(e) = &r.error {
            let _ = writeln!(s, "  - failed: {}", one_line(e));
        }
    }
    s
}

/// An error as one table-safe line: its non-empty lines joined, cut short.
fn one_line(e: &str) -> String {
    let joined: Vec<&str> = e.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    let mut t = joined.join(" / ").replace(['|', '`'], "'");
    if t.len() > 240 {
        let mut cut = 240;
        while !t.is_char_boundary(cut) {
            cut -= 1;
        }
        t.truncate(cut);
        t.push('…');
    }
    t
}
