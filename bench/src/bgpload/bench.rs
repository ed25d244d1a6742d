//! Running the benchmark: one device at a time, a fresh daemon per run,
//! the same namespaces throughout.
use super::counter::Counter;
use super::devices::{Device, DeviceKind};
use super::injector::Injector;
use super::peer::{Peer, PeerReport};
use super::prefixes::PrefixPlan;
use super::sink::{PassThrough, Sink};
use super::speaker::SpeakerId;
use super::topology::{DEVICE_AS, SINK_AS, Topology};
use anyhow::{Context, Result, bail};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

#[derive(Debug, Clone)]
pub struct BenchOptions {
    pub peers: u32,
    pub prefixes: u32,
    pub runs: usize,
    /// Fewer (or more) runs for some devices.
    pub runs_per_device: HashMap<DeviceKind, usize>,
    pub devices: Vec<DeviceKind>,
    pub per_update: usize,
    /// Longest wait for a run to complete.
    pub timeout: Duration,
    /// Pause between the last session coming up and the go signal.
    pub settle: Duration,
    /// Hold time the generator offers.
    pub hold_time: u16,
}

impl BenchOptions {
    pub fn runs_for(&self, k: DeviceKind) -> usize {
        self.runs_per_device.get(&k).copied().unwrap_or(self.runs)
    }

    pub fn plan(&self) -> Result<PrefixPlan> {
        PrefixPlan::new(self.peers, self.prefixes)
    }
}

/// One run against one device.
#[derive(Debug, Clone)]
pub struct RunResult {
    /// First UPDATE written to the sink holding everything; None when the
    /// run timed out.
    pub wall: Option<Duration>,
    /// When the injectors had handed their last byte to TCP.
    pub written: Duration,
    pub peak_rss: u64,
    /// Distinct prefixes the sink held at the end.
    pub held: u64,
    /// Prefixes the device announced back to the injectors, in total.
    pub sent_back: u64,
    /// IPv4 routes in every kernel table of the device's namespace at the
    /// end (connected and local routes only, when nothing is installed).
    pub kernel_routes: usize,
}

#[derive(Debug, Clone)]
pub struct DeviceResult {
    pub kind: DeviceKind,
    pub version: String,
    pub runs: Vec<RunResult>,
    pub error: Option<String>,
}

/// The generator against the pass-through receiver.
#[derive(Debug, Clone)]
pub struct GeneratorRate {
    pub runs: usize,
    /// Median time until every injector had written everything.
    pub written: Duration,
    /// Median time until the receiver held everything.
    pub received: Duration,
}

fn injectors(opts: &BenchOptions, plan: PrefixPlan) -> Vec<Injector> {
    (0..opts.peers)
        .map(|i| Injector {
            index: i,
            plan,
            asn: Topology::injector_as(i),
            address: Topology::injector_addr(i),
            device: Topology::device_injector_side(i),
            per_update: opts.per_update,
            hold_time: opts.hold_time,
        })
        .collect()
}

/// Starts every injector and waits for their sessions.
fn start_injectors(topo: &Topology, opts: &BenchOptions, plan: PrefixPlan) -> Result<Vec<Peer>> {
    let setup = Duration::from_secs(60);
    let peers: Vec<Peer> = injectors(opts, plan)
        .iter()
        .zip(&topo.injectors)
        .map(|(inj, ns)| inj.start(ns.clone(), setup))
        .collect::<Result<_>>()?;
    for p in &peers {
        p.wait_ready(setup)?;
    }
    Ok(peers)
}

/// What the injectors did in one run.
struct Released {
    /// When `counter` reached its target.
    done: Option<Instant>,
    reports: Vec<PeerReport>,
    /// Prefixes announced to the injectors, in total.
    sent_back: u64,
}

/// Releases the injectors, waits for `counter`, then stops them. `at_done`
/// runs the moment the counter completes (or times out).
fn release(
    peers: Vec<Peer>,
    counter: &Counter,
    timeout: Duration,
    at_done: impl FnOnce(),
) -> Released {
    for p in &peers {
        p.go();
    }
    let done = counter.wait(timeout);
    at_done();
    let counters: Vec<Arc<Counter>> = peers.iter().map(|p| p.counter.clone()).collect();
    let reports = peers
        .into_iter()
        .map(|p| p.finish().unwrap_or_default())
        .collect();
    Released {
        done,
        reports,
        sent_back: counters.iter().map(|c| c.announced()).sum(),
    }
}

fn first_and_last(reports: &[PeerReport]) -> Result<(Instant, Instant)> {
    let first = reports.iter().filter_map(|r| r.first_write).min();
    let last = reports.iter().filter_map(|r| r.written).max();
    match (first, last) {
        (Some(f), Some(l)) => Ok((f, l)),
        _ => bail!(
            "no injector wrote anything: {:?}",
            reports.iter().map(|r| &r.read_end).collect::<Vec<_>>()
        ),
    }
}

/// One run: a fresh device, sink and injectors; everything stopped after.
pub fn run_device_once(
    topo: &Topology,
    kind: DeviceKind,
    opts: &BenchOptions,
) -> Result<RunResult> {
    let plan = opts.plan()?;
    let device = Device::start(kind, topo)?;
    let counter = Arc::new(Counter::new(plan, plan.total()));
    let sink_id = SpeakerId {
        asn: SINK_AS,
        router_id: Topology::sink_addr(),
        hold_time: opts.hold_time,
    };
    let setup = Duration::from_secs(60);
    let sink = Sink::connect(
        topo.sink.clone(),
        sink_id,
        Topology::device_sink_side(),
        counter.clone(),
        setup,
    )?;
    let ready = sink
        .wait_ready(setup)
        .and_then(|_| start_injectors(topo, opts, plan));
    let peers = ready
        .map_err(|e| anyhow::anyhow!("{e:#}\n{} log:\n{}", kind.name(), device.log_tail(20)))?;
    std::thread::sleep(opts.settle);
    // The high-water mark cannot drop; read it before anything stops.
    // Injectors leaving make the device withdraw: count before they go.
    let (mut peak_rss, mut held, mut kernel_routes) = (0, 0, 0);
    let rel = release(peers, &counter, opts.timeout, || {
        peak_rss = device.peak_rss().unwrap_or(0);
        held = counter.held();
        let routes = topo.device.ip(&["-4", "route", "show", "table", "all"]);
        kernel_routes = routes.map(|r| r.lines().count()).unwrap_or(0);
    });
    let alive = device.is_running();
    let (first, last) = first_and_last(&rel.reports)?;
    let done = rel.done;
    let sink_report = sink.finish()?;
    if !alive {
        bail!(
            "{} exited during the run:\n{}",
            kind.name(),
            device.log_tail(20)
        );
    }
    if done.is_none() {
        eprintln!(
            "{}: timed out with {} of {} prefixes at the sink ({:?})",
            kind.name(),
            held,
            plan.total(),
            sink_report.read_end
        );
    }
    Ok(RunResult {
        wall: done.map(|d| d.saturating_duration_since(first)),
        written: last.saturating_duration_since(first),
        peak_rss,
        held,
        sent_back: rel.sent_back,
        kernel_routes,
    })
}

/// Every run of every device, in order; a device that fails is reported
/// with its error and the others still run.
pub fn run_bench(
    topo: &Topology,
    opts: &BenchOptions,
    mut progress: impl FnMut(&str),
) -> Vec<DeviceResult> {
    let mut out = Vec::new();
    for &kind in &opts.devices {
        let mut r = DeviceResult {
            kind,
            version: kind.version(),
            runs: Vec::new(),
            error: None,
        };
        for n in 0..opts.runs_for(kind) {
            match run_device_once(topo, kind, opts) {
                Ok(run) => {
                    progress(&format!(
                        "{} run {}: wall {:?}, peak RSS {} MiB, sink held {}, sent back {}",
                        kind.name(),
                        n + 1,
                        run.wall,
                        run.peak_rss >> 20,
                        run.held,
                        run.sent_back
                    ));
                    let timed_out = run.wall.is_none();
                    r.runs.push(run);
                    if timed_out {
                        break;
                    }
                }
                Err(e) => {
                    progress(&format!("{} run {} failed: {e:#}", kind.name(), n + 1));
                    r.error = Some(format!("{e:#}"));
                    break;
                }
            }
        }
        out.push(r);
    }
    out
}

/// The generator alone: injectors into a receiver that only counts.
pub fn measure_generator(
    topo: &Topology,
    opts: &BenchOptions,
    runs: usize,
) -> Result<GeneratorRate> {
    let plan = opts.plan()?;
    let mut written = Vec::new();
    let mut received = Vec::new();
    for _ in 0..runs.max(1) {
        let counter = Arc::new(Counter::new(plan, plan.total()));
        let id = SpeakerId {
            asn: DEVICE_AS,
            router_id: Topology::device_sink_side(),
            hold_time: 0,
        };
        let setup = Duration::from_secs(30);
        let pt = PassThrough::start(
            topo.device.clone(),
            id,
            topo.peers() as usize,
            counter.clone(),
            setup,
        )?;
        let peers = start_injectors(topo, opts, plan)?;
        let sessions = pt.sessions()?;
        for s in &sessions {
            s.wait_ready(setup)?;
        }
        let rel = release(peers, &counter, opts.timeout, || {});
        drop(sessions);
        let (first, last) = first_and_last(&rel.reports)?;
        let done = rel
            .done
            .context("the pass-through receiver did not get every prefix")?;
        written.push(last.saturating_duration_since(first));
        received.push(done.saturating_duration_since(first));
    }
    Ok(GeneratorRate {
        runs: written.len(),
        written: median(&mut written),
        received: median(&mut received),
    })
}

/// The median (the lower middle for an even count); zero when empty.
pub fn median<T: Ord + Copy + Default>(v: &mut [T]) -> T {
    v.sort();
    if v.is_empty() {
        return T::default();
    }
    v[(v.len() - 1) / 2]
}
