//! BFD: how fast a cut path takes a peer's routes out of the kernel
//! (tartan-bgpd with BFD against FRR's bfdd + bgpd, many cuts, p50/p99),
//! and tartan-bgpd's CPU with many BFD sessions at a fast rate (two
//! tartan-bgpd speakers with one session per address pair).
use anyhow::{Context, Result, bail};
use std::fmt::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};
use tartan_lab::netns::{Netns, run, wait_for};
use tartan_lab::peers::{BgpConfig, Frr, Neighbor, Route, Tartan, TartanOptions, bgpd_binary};
use tartan_lab::{Family, Pair, kernel_routes, wait_kernel_route};

const PREFIX: &str = "198.51.100.0/24";
const WAIT: Duration = Duration::from_secs(60);

#[derive(Debug, Clone)]
pub struct BfdBenchOptions {
    pub cuts: usize,
    /// BFD interval of the detection runs (both sides, multiplier 3).
    pub cut_interval_ms: u32,
    pub sessions: usize,
    /// BFD interval of the CPU run (both sides, multiplier 3).
    pub cpu_interval_ms: u32,
    pub cpu_seconds: u64,
    /// Consecutive CPU windows of `cpu_seconds` on the same speakers (the
    /// median is the figure).
    pub cpu_runs: usize,
}

#[derive(Debug, Clone)]
pub struct BfdBenchResults {
    /// Cut → route gone from the kernel, one per cut.
    pub detection: Vec<Duration>,
    /// CPU of the measured tartan-bgpd, percent of one core, one per window.
    pub cpu_percent: Vec<f64>,
    /// Its threads' voluntary context switches (sleeps, i.e. wakeups) a
    /// second, one per window.
    pub wakeups: Vec<f64>,
}

/// One window of the CPU run.
struct Sample {
    ticks: u64,
    switches: u64,
    at: Instant,
}

/// User + system ticks of the process and the voluntary context switches
/// of all its threads.
fn sample(pid: u32) -> Result<Sample> {
    let at = Instant::now();
    let ticks = cpu_ticks(pid)?;
    let mut switches = 0;
    for t in std::fs::read_dir(format!("/proc/{pid}/task"))? {
        let status = std::fs::read_to_string(t?.path().join("status")).unwrap_or_default();
        switches += status
            .lines()
            .find_map(|l| l.strip_prefix("voluntary_ctxt_switches:"))
            .and_then(|v| v.trim().parse::<u64>().ok())
            .unwrap_or(0);
    }
    Ok(Sample {
        ticks,
        switches,
        at,
    })
}

/// Drop every packet in and out of `ns` (`on`), or stop dropping; the
/// link stays up, so the kernel itself removes no route.
fn cut_path(ns: &Netns, on: bool) -> Result<()> {
    let script = if on {
        "table inet tartan-bench-cut {\n chain in { type filter hook input priority -300; policy drop; }\n chain out { type filter hook output priority -300; policy drop; }\n}\n"
    } else {
        "delete table inet tartan-bench-cut\n"
    };
    let path = std::env::temp_dir().join(format!("tartan-bench-cut-{}.nft", std::process::id()));
    std::fs::write(&path, script)?;
    let r = run(ns.command("nft").arg("-f").arg(&path));
    let _ = std::fs::remove_file(&path);
    r.map(|_| ())
}

fn route_present(ns: &Netns) -> bool {
    kernel_routes(ns, Family::V4, None)
        .map(|r| r.iter().any(|r| r.dst == PREFIX))
        .unwrap_or(true)
}

fn detection(o: &BfdBenchOptions, log: &impl Fn(&str)) -> Result<Vec<Duration>> {
    let p = Pair::with_subnet("bfdb", 44)?;
    let (a, b): (IpAddr, IpAddr) = (p.a_v4().into(), p.b_v4().into());
    let i = o.cut_interval_ms;
    let frr = Frr::start(
        &p.b,
        BgpConfig::new(p.b_v4(), 65002)
            .neighbor(Neighbor::new(a, 65001).local_address(b).bfd(i, i, 3))
            .route(Route::new(PREFIX)),
    )?;
    let tartan = Tartan::start(
        &p.a,
        &bgpd_binary(),
        &BgpConfig::new(p.a_v4(), 65001)
            .neighbor(Neighbor::new(b, 65002).local_address(a).bfd(i, i, 3)),
        &TartanOptions {
            hold_time: Some(90),
            ..Default::default()
        },
    )?;
    let mut out = Vec::with_capacity(o.cuts);
    for n in 0..o.cuts {
        tartan.wait_established(b, WAIT)?;
        wait_kernel_route(&p.a, PREFIX, None, WAIT)?;
        // Let the fast timers settle after the Poll Sequence.
        std::thread::sleep(Duration::from_millis(500));
        // Timed from before the nft command: the figure includes its
        // start-up (a few ms) rather than miss part of the detection.
        let t0 = Instant::now();
        cut_path(&p.a, true)?;
        while route_present(&p.a) {
            if t0.elapsed() > Duration::from_secs(30) {
                cut_path(&p.a, false)?;
                bail!("route still present 30 s after cut {n}");
            }
            std::thread::sleep(Duration::from_millis(2));
        }
        let d = t0.elapsed();
        log(&format!("cut {n}: route gone after {d:?}"));
        out.push(d);
        cut_path(&p.a, false)?;
    }
    drop(frr);
    Ok(out)
}

fn add_addresses(ns: &Netns, dev: &str, base: u8, n: usize, subnet: u8) -> Result<Vec<Ipv4Addr>> {
    let mut v = Vec::with_capacity(n);
    for k in 0..n {
        let addr = Ipv4Addr::new(
            10,
            subnet,
            base.wrapping_add((k / 250) as u8),
            (k % 250 + 2) as u8,
        );
        run(ns
            .command("ip")
            .args(["addr", "add", &format!("{addr}/16"), "dev", dev]))?;
        v.push(addr);
    }
    Ok(v)
}

fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    let after = stat.rsplit_once(')').context("stat")?.1;
    let f: Vec<&str> = after.split_whitespace().collect();
    let utime: u64 = f.get(11).context("utime")?.parse()?;
    let stime: u64 = f.get(12).context("stime")?.parse()?;
    Ok(utime + stime)
}

fn cpu(o: &BfdBenchOptions, log: &impl Fn(&str)) -> Result<(Vec<f64>, Vec<f64>)> {
    let p = Pair::with_subnet("bfdc", 45)?;
    let subnet = 77;
    let a_addrs = add_addresses(&p.a, p.a_if(), 0, o.sessions, subnet)?;
    let b_addrs = add_addresses(&p.b, p.b_if(), 100, o.sessions, subnet)?;
    let i = o.cpu_interval_ms;
    let side = |me: &[Ipv4Addr], them: &[Ipv4Addr], router: Ipv4Addr, asn, peer_as| {
        me.iter()
            .zip(them)
            .fold(BgpConfig::new(router, asn), |c, (m, t)| {
                c.neighbor(
                    Neighbor::new(IpAddr::V4(*t), peer_as)
                        .local_address(IpAddr::V4(*m))
                        .bfd(i, i, 3),
                )
            })
    };
    let opts = TartanOptions {
        hold_time: Some(90),
        ..Default::default()
    };
    let ta = Tartan::start(
        &p.a,
        &bgpd_binary(),
        &side(&a_addrs, &b_addrs, p.a_v4(), 65001, 65002),
        &opts,
    )?;
    let _tb = Tartan::start(
        &p.b,
        &bgpd_binary(),
        &side(&b_addrs, &a_addrs, p.b_v4(), 65002, 65001),
        &opts,
    )?;
    let up = |t: &Tartan| {
        t.peers()
            .map(|ps| {
                ps.iter()
                    .filter(|p| {
                        p.bfd.as_ref().is_some_and(|b| {
                            b.state == "up" && b.tx_interval_ms == Some(u64::from(i))
                        })
                    })
                    .count()
            })
            .unwrap_or(0)
    };
    wait_for(
        "every BFD session up at the fast rate",
        Duration::from_secs(120),
        || (up(&ta) == o.sessions).then_some(()),
    )
    .with_context(|| format!("{} of {} up", up(&ta), o.sessions))?;
    log(&format!("{} BFD sessions up at {i} ms", o.sessions));
    std::thread::sleep(Duration::from_secs(2));
    let pid = ta.daemon().pid();
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
    let (mut cpu, mut wakeups) = (Vec::new(), Vec::new());
    let mut s0 = sample(pid)?;
    for _ in 0..o.cpu_runs {
        std::thread::sleep(Duration::from_secs(o.cpu_seconds));
        let s1 = sample(pid)?;
        let secs = (s1.at - s0.at).as_secs_f64();
        let still = up(&ta);
        if still != o.sessions {
            let log = ta.log();
            let changes: Vec<&str> = log
                .lines()
                .filter(|l| l.contains("BFD session state changed"))
                .collect();
            bail!(
                "only {still} of {} sessions stayed up during the measurement; the last changes:\n{}",
                o.sessions,
                changes[changes.len().saturating_sub(10)..].join("\n")
            );
        }
        let c = (s1.ticks - s0.ticks) as f64 / hz / secs * 100.0;
        let w = (s1.switches - s0.switches) as f64 / secs;
        log(&format!("CPU {c:.1} % of a core, {w:.0} wakeups/s"));
        cpu.push(c);
        wakeups.push(w);
        s0 = s1;
    }
    Ok((cpu, wakeups))
}

pub fn run_bfd(o: &BfdBenchOptions, log: impl Fn(&str)) -> Result<BfdBenchResults> {
    let detection = if o.cuts == 0 {
        Vec::new()
    } else {
        detection(o, &log)?
    };
    let (cpu_percent, wakeups) = cpu(o, &log)?;
    Ok(BfdBenchResults {
        detection,
        cpu_percent,
        wakeups,
    })
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let idx = ((sorted.len() as f64 * p).ceil() as usize).clamp(1, sorted.len()) - 1;
    sorted[idx]
}

/// The median of `v` (the mean of the middle two for an even count).
fn median(v: &[f64]) -> f64 {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => 0.0,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

pub fn render_markdown(env: &str, o: &BfdBenchOptions, r: &BfdBenchResults) -> String {
    let mut d = r.detection.clone();
    d.sort();
    let ms = |x: Duration| format!("{:.0} ms", x.as_secs_f64() * 1000.0);
    let bound = Duration::from_millis(u64::from(o.cut_interval_ms) * 3 + 100);
    let mut s = String::from("# BFD: failure detection and CPU\n\n");
    s.push_str(env);
    if !d.is_empty() {
        let _ = writeln!(
            s,
            "\n## Cut path → route out of the kernel\n\n\
             tartan-bgpd with BFD at {i} ms × 3 against FRR (bgpd + bfdd, same timers); \
             hold time 90 s, so only BFD can explain a fast removal. Each cut drops every \
             packet in and out of tartan-bgpd's namespace (nftables); the time is from \
             the start of the `nft` command that cuts (its few milliseconds included) to the route's absence from `ip route` (polled every 2 ms). The detection time runs from the last packet received, which came 0–{i} ms before the cut, so the expected range is {lo}–{hi} ms plus the withdrawal.\n\n\
             | cuts | min | p50 | p99 | max | goal (3 × interval + 100 ms) |\n|---|---|---|---|---|---|\n\
             | {n} | {min} | {p50} | {p99} | {max} | {goal} |",
            i = o.cut_interval_ms,
            lo = o.cut_interval_ms * 2,
            hi = o.cut_interval_ms * 3,
            n = d.len(),
            min = ms(d.first().copied().unwrap_or_default()),
            p50 = ms(percentile(&d, 0.5)),
            p99 = ms(percentile(&d, 0.99)),
            max = ms(d.last().copied().unwrap_or_default()),
            goal = ms(bound),
        );
        let all: Vec<String> = r.detection.iter().map(|x| ms(*x)).collect();
        let _ = writeln!(s, "\nEach cut in order: {}.", all.join(", "));
    }
    let runs: Vec<String> = r
        .cpu_percent
        .iter()
        .zip(&r.wakeups)
        .map(|(c, w)| format!("{c:.1} % ({w:.0}/s)"))
        .collect();
    let _ = writeln!(
        s,
        "\n## CPU with {n} sessions at {i} ms × 3\n\n\
         Two tartan-bgpd speakers, {n} neighbors each (one address pair per session), \
         BFD at {i} ms both ways; CPU of one speaker from /proc (user + system) in \
         {k} consecutive windows of {t} s after every session was Up at the fast rate, \
         and its threads' voluntary context switches (wakeups) a second.\n\n\
         | sessions | interval | CPU (% of one core), median | wakeups/s, median | goal |\n|---|---|---|---|---|\n\
         | {n} | {i} ms | {cpu:.1} % | {w:.0} | < 5 % |\n\n\
         Each window: {runs}.",
        n = o.sessions,
        i = o.cpu_interval_ms,
        k = r.cpu_percent.len(),
        t = o.cpu_seconds,
        cpu = median(&r.cpu_percent),
        w = median(&r.wakeups),
        runs = runs.join(", "),
    );
    s
}
