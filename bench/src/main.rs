//! `tartan-bench`: Tartan's benchmarks, one subcommand per harness
//! (`tartan-bench bgp …`, `datastore`, `cni`, `cluster`, `policy`,
//! `services`, `conntrack`), each writing its Markdown results
//! (bench/README.md says how to run each).
mod args;

use anyhow::{Context, Result};
use args::*;
use clap::{Parser, Subcommand};
use std::collections::HashMap;
use std::time::Duration;
use tartan_bench::bgpload::{
    BenchOptions, DeviceKind, Environment, Topology, load_average, measure_generator,
    render_markdown, run_bench,
};

#[derive(Parser)]
#[command(about = "Tartan's benchmarks (run as root)")]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// BGP ingest and propagate: injectors → device → sink.
    Bgp(BgpArgs),
    /// Datastore: list of many objects and watch delivery latency on etcd.
    Datastore(DatastoreArgs),
    /// CNI: ADD/DEL latency and many ADDs at once, tartan beside ptp.
    Cni(CniArgs),
    /// Cluster: route convergence at several sizes, pod-to-pod throughput
    /// beside bare routing, daemon memory.
    Cluster(ClusterArgs),
    /// Policy: full sync, one policy change, one pod relabelled, and
    /// connection latency through a large ruleset beside an empty one.
    Policy(PolicyArgs),
    /// Services: full sync, one endpoint change and the drift check at
    /// several sizes, connection latency to a ClusterIP among 10 and
    /// 10,000 Services, tartan-felix's memory at 10,000 Services.
    Services(ServicesArgs),
    /// Stale UDP conntrack cleanup: a Service's endpoints all removed at
    /// once, entries deleted over ctnetlink, unrelated ones counted.
    Conntrack(ConntrackArgs),
    /// BFD: cut-to-withdrawal times against FRR and CPU with many sessions.
    Bfd(BfdArgs),
    /// Service writes: `tartan-lab ctl apply` of Services and
    /// EndpointSlices into an empty store and into a full one.
    ServiceApply(ServiceApplyArgs),
    /// Cluster DNS: tartan-dns beside dnsmasq and unbound under dnsperf,
    /// for cluster names and cached external ones; tartan-dns's memory.
    Dns(DnsArgs),
    /// Scale: one real node in a datastore of 100 to 5,000 simulated
    /// nodes with kubelet heartbeats, peering with two simulated route
    /// reflectors: the agents' CPU and memory, convergence, CNI ADD.
    Scale(ScaleArgs),
}

fn main() -> Result<()> {
    if std::env::var_os("TARTAN_LOG").is_none() {
        // SAFETY: no other thread exists yet. tartan-bgpd's default debug
        // logging would be part of what is measured.
        unsafe { std::env::set_var("TARTAN_LOG", "warn") };
    }
    let a = match Cli::parse().cmd {
        Cmd::Bgp(a) => a,
        Cmd::Datastore(a) => return datastore(a),
        Cmd::Cni(a) => return cni(a),
        Cmd::Cluster(a) => return cluster(a),
        Cmd::Policy(a) => return policy(a),
        Cmd::Services(a) => return services(a),
        Cmd::Conntrack(a) => return conntrack(a),
        Cmd::Dns(a) => return dns(a),
        Cmd::ServiceApply(a) => return service_apply(a),
        Cmd::Bfd(a) => return bfd(a),
        Cmd::Scale(a) => return scale(a),
    };
    let devices = a
        .devices
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(DeviceKind::parse)
        .collect::<Result<Vec<_>>>()?;
    let mut runs_per_device = HashMap::new();
    for kv in a
        .runs_per_device
        .split(',')
        .filter(|s| !s.trim().is_empty())
    {
        let (k, v) = kv
            .split_once('=')
            .context("--runs-per-device wants device=N")?;
        runs_per_device.insert(DeviceKind::parse(k)?, v.trim().parse()?);
    }
    let opts = BenchOptions {
        peers: a.peers,
        prefixes: a.prefixes,
        runs: a.runs,
        runs_per_device,
        devices,
        per_update: a.per_update,
        timeout: Duration::from_secs(a.timeout),
        settle: Duration::from_secs_f64(a.settle.max(0.0)),
        hold_time: 180,
    };
    opts.plan()?;
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut env = Environment::detect(command);
    let topo = Topology::new(opts.peers)?;
    let generator = if a.generator_runs > 0 {
        let g = measure_generator(&topo, &opts, a.generator_runs)?;
        eprintln!(
            "generator: written {:?}, received {:?}",
            g.written, g.received
        );
        Some(g)
    } else {
        None
    };
    let results = run_bench(&topo, &opts, |line| eprintln!("{line}"));
    drop(topo);
    env.load_after = load_average();
    let md = render_markdown(&env, &opts, &results, generator.as_ref());
    write_out(a.out.as_deref(), &md)
}

fn datastore(a: DatastoreArgs) -> Result<()> {
    use tartan_bench::storebench::{StoreBenchOptions, render_markdown, run};
    let opts = StoreBenchOptions {
        objects: a.objects,
        list_runs: a.list_runs.max(1),
        writes: a.writes.max(1),
        pace: Duration::from_millis(a.pace_ms),
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut env = Environment::detect(command);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let r = rt.block_on(run(&opts))?;
    env.load_after = load_average();
    let md = render_markdown(&env, &opts, &r);
    write_out(a.out.as_deref(), &md)
}

fn cni(a: CniArgs) -> Result<()> {
    use tartan_bench::cnibench::{CniBenchOptions, render_markdown, run};
    let opts = CniBenchOptions {
        sequential: a.sequential.max(1),
        parallel: a.parallel.max(1),
        parallel_runs: a.parallel_runs.max(1),
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut env = Environment::detect(command);
    let figs = run(&opts, |line| eprintln!("{line}"))?;
    env.load_after = load_average();
    write_out(a.out.as_deref(), &render_markdown(&env, &opts, &figs))
}

fn cluster(a: ClusterArgs) -> Result<()> {
    use tartan_bench::clusterbench::{ClusterBenchOptions, render_markdown, run};
    let sizes = a
        .sizes
        .split(',')
        .map(|s| s.trim().parse::<usize>().context("--sizes: numbers"))
        .collect::<Result<Vec<_>>>()?;
    let opts = ClusterBenchOptions {
        sizes,
        blocks: a.blocks.max(1),
        throughput_runs: a.runs.max(1),
        seconds: a.seconds.max(1),
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut env = Environment::detect(command);
    let figs = run(&opts, |line| eprintln!("{line}"))?;
    env.load_after = load_average();
    write_out(a.out.as_deref(), &render_markdown(&env, &opts, &figs))
}

fn policy(a: PolicyArgs) -> Result<()> {
    use tartan_bench::policybench::{PolicyBenchOptions, render_markdown, run};
    let opts = PolicyBenchOptions {
        policies: a.policies,
        pods: a.pods,
        namespaces: a.namespaces,
        local_every: a.local_every.max(1),
        runs: a.runs.max(1),
        connections: a.connections,
        seed: a.seed,
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut env = Environment::detect(command);
    let (syn, figs) = run(&opts, |line| eprintln!("{line}"))?;
    env.load_after = load_average();
    write_out(a.out.as_deref(), &render_markdown(&env, &opts, &syn, &figs))
}

fn numbers(s: &str, what: &str) -> Result<Vec<usize>> {
    s.split(',')
        .map(|x| {
            x.trim()
                .parse::<usize>()
                .with_context(|| format!("{what}: numbers"))
        })
        .collect()
}

fn conntrack(a: ConntrackArgs) -> Result<()> {
    use tartan_bench::conntrackbench::{ConntrackBenchOptions, render_markdown, run};
    let opts = ConntrackBenchOptions {
        endpoints: a.endpoints.max(1),
        clients: a.clients.max(1),
        unrelated: a.unrelated.max(3),
        runs: a.runs.max(1),
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let runs = run(&opts, |line| eprintln!("{line}"))?;
    print!("{}", render_markdown(&opts, &runs, &command));
    Ok(())
}

fn dns(a: DnsArgs) -> Result<()> {
    use tartan_bench::dnsbench::{DnsBenchOptions, render_markdown, run};
    let opts = DnsBenchOptions {
        services: a.services.max(1),
        endpoints: a.endpoints.max(1),
        external: a.external.max(1),
        seconds: a.seconds.max(1),
        runs: a.runs.max(1),
        latency_qps: a.latency_qps.max(1),
        ..DnsBenchOptions::default()
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut env = Environment::detect(command);
    let r = run(&opts, |line| eprintln!("{line}"))?;
    env.load_after = load_average();
    write_out(a.out.as_deref(), &render_markdown(&env.render(), &opts, &r))
}

fn service_apply(a: ServiceApplyArgs) -> Result<()> {
    use tartan_bench::svcapply::{ApplyBenchOptions, render_markdown, run};
    let opts = ApplyBenchOptions {
        services: a.services.max(1),
        stored: a.stored,
        runs: a.runs.max(1),
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut env = Environment::detect(command);
    let r = run(&opts, |line| eprintln!("{line}"))?;
    env.load_after = load_average();
    write_out(a.out.as_deref(), &render_markdown(&env.render(), &opts, &r))
}

fn bfd(a: BfdArgs) -> Result<()> {
    use tartan_bench::bfdbench::{BfdBenchOptions, render_markdown, run_bfd};
    let opts = BfdBenchOptions {
        // 0 cuts: the CPU run alone.
        cuts: a.cuts,
        cut_interval_ms: a.cut_interval_ms.max(10),
        sessions: a.sessions.max(1),
        cpu_interval_ms: a.cpu_interval_ms.max(10),
        cpu_seconds: a.cpu_seconds.max(1),
        cpu_runs: a.cpu_runs.max(1),
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut env = Environment::detect(command);
    let r = run_bfd(&opts, |line| eprintln!("{line}"))?;
    env.load_after = load_average();
    write_out(a.out.as_deref(), &render_markdown(&env.render(), &opts, &r))
}

fn services(a: ServicesArgs) -> Result<()> {
    use tartan_bench::servicebench::{ServiceBenchOptions, render_markdown, run};
    let l = numbers(&a.latency_sizes, "--latency-sizes")?;
    let [small, large] = l[..] else {
        anyhow::bail!("--latency-sizes wants two numbers");
    };
    let opts = ServiceBenchOptions {
        sizes: numbers(&a.sizes, "--sizes")?,
        endpoints: a.endpoints.max(1),
        runs: a.runs.max(1),
        connections: a.connections,
        latency_sizes: [small.max(1), large.max(1)],
        felix_services: a.felix_services,
        felix_settle: Duration::from_secs(6),
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut env = Environment::detect(command);
    let figs = run(&opts, |line| eprintln!("{line}"))?;
    env.load_after = load_average();
    write_out(a.out.as_deref(), &render_markdown(&env, &opts, &figs))
}

fn scale(a: ScaleArgs) -> Result<()> {
    use tartan_bench::scalebench::{ScaleBenchOptions, render_markdown, run};
    let opts = ScaleBenchOptions {
        sizes: numbers(&a.nodes, "--nodes")?,
        pods_per_node: a.pods_per_node,
        heartbeat: Duration::from_secs(a.heartbeat_seconds.max(1)),
        window: Duration::from_secs(a.window_seconds.max(1)),
        adds: a.adds,
        new_blocks: a.new_blocks,
        services: a.services,
        endpoints: a.endpoints.max(1),
        policies: a.policies,
        local_pods: a.local_pods,
    };
    let command = std::env::args().collect::<Vec<_>>().join(" ");
    let mut env = Environment::detect(command);
    let figs = run(&opts, |line| eprintln!("{line}"))?;
    env.load_after = load_average();
    write_out(a.out.as_deref(), &render_markdown(&env, &opts, &figs))
}

fn write_out(out: Option<&std::path::Path>, md: &str) -> Result<()> {
    if let Some(p) = out {
        if let Some(dir) = p.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir)?;
        }
        std::fs::write(p, md).with_context(|| format!("write {}", p.display()))?;
    }
    print!("{md}");
    Ok(())
}
