//! Cluster benchmark on `tartan-lab` clusters:
//! - convergence: from a new block's creation in the datastore (an
//!   allocation) to its route in the kernel of every other node, timed by
//!   `ip -ts monitor route` in each node, at several cluster sizes;
//! - pod-to-pod TCP throughput across nodes (iperf3), beside the same path
//!   routed by hand between two namespaces without Tartan;
//! - resident memory of tartan-bgpd and tartan-felix.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{Context, Result, bail};
use ipnet::Ipv4Net;
use tartan_api::resources::{IpamBlock, IpamBlockSpec, block_name};
use tartan_api::store::connect;
use tartan_api::store::typed::TypedStore;

use crate::bgpload::Environment;
use crate::storebench::quantile;
use tartan_lab::cluster::{LabState, down, pod, up};
use tartan_lab::netns::ip;

pub struct ClusterBenchOptions {
    pub sizes: Vec<usize>,
    /// New blocks timed per cluster size.
    pub blocks: usize,
    /// iperf3 runs per path (median reported).
    pub throughput_runs: usize,
    pub seconds: u64,
}

#[derive(Debug, Default)]
pub struct SizeFigures {
    pub nodes: usize,
    /// One per (block, receiving node).
    pub latencies: Vec<Duration>,
    pub bgpd_rss_kib: Vec<u64>,
    pub felix_rss_kib: Vec<u64>,
}

#[derive(Debug, Default)]
pub struct Figures {
    pub sizes: Vec<SizeFigures>,
    pub native_gbps: Vec<f64>,
    pub bare_gbps: Vec<f64>,
    /// The same pods with the pool switched to vxlanMode Always.
    pub vxlan_gbps: Vec<f64>,
    /// The bare path again, run beside each VXLAN run.
    pub bare_vxlan_gbps: Vec<f64>,
}

/// Seconds since midnight UTC.
fn day_seconds(t: SystemTime) -> f64 {
    let s = t
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .as_secs_f64();
    s % 86_400.0
}

/// `[2026-11-23T01:26:29.974114] …` → seconds since midnight.
fn parse_stamp(line: &str) -> Option<f64> {
    let t = line.strip_prefix('[')?.split(']').next()?;
    let time = t.split('T').nth(1)?;
    let mut parts = time.split(':');
    let h: f64 = parts.next()?.parse().ok()?;
    let m: f64 = parts.next()?.parse().ok()?;
    let s: f64 = parts.next()?.parse().ok()?;
    Some(h * 3600.0 + m * 60.0 + s)
}

/// A route monitor in one namespace, sending (stamp, line) for each event.
fn monitor(netns: &str, tx: mpsc::Sender<(usize, f64, String)>, index: usize) -> Result<Child> {
    let mut child = Command::new("ip")
        .args(["-n", netns, "-ts", "monitor", "route"])
        .env("TZ", "UTC")
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let out = child.stdout.take().context("monitor stdout")?;
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines().map_while(Result::ok) {
            if let Some(ts) = parse_stamp(&line)
                && tx.send((index, ts, line)).is_err()
            {
                return;
            }
        }
    });
    Ok(child)
}

fn rss_kib(pid: u32) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// The child of `ip netns exec …` is the daemon itself (exec), so the
/// recorded pid is the daemon's.
fn daemon_rss(st: &LabState) -> (Vec<u64>, Vec<u64>) {
    let b = st
        .nodes
        .iter()
        .filter_map(|n| rss_kib(n.bgpd.as_ref()?.pid))
        .collect();
    let f = st
        .nodes
        .iter()
        .filter_map(|n| rss_kib(n.felix.as_ref()?.pid))
        .collect();
    (b, f)
}

fn convergence(
    name: &str,
    nodes: usize,
    blocks: usize,
    log: &mut dyn FnMut(&str),
) -> Result<SizeFigures> {
    let st = up::up(
        &up::UpOptions {
            name: name.to_string(),
            nodes,
            topology: "mesh".into(),
            vxlan_mode: Default::default(),
            ipip_mode: Default::default(),
            dual_stack: false,
            service_cidr: None,
            service_cidr6: None,
            lb_cidr: None,
            datastore: Default::default(),
        },
        &mut |l| log(l),
    )?;
    let rt = up::runtime()?;
    let store = rt.block_on(connect(&st.datastore, Some(Duration::from_secs(10))))?;
    let (tx, rx) = mpsc::channel();
    let mut monitors = Vec::new();
    for (i, n) in st.nodes.iter().enumerate() {
        monitors.push(monitor(&n.netns, tx.clone(), i)?);
    }
    std::thread::sleep(Duration::from_millis(300));
    let mut fig = SizeFigures {
        nodes,
        ..Default::default()
    };
    // Blocks from the top of the pool, away from any pod's.
    let base: Ipv4Net = "10.244.200.0/26".parse()?;
    for k in 0..blocks {
        let owner = k % nodes;
        let net = Ipv4Net::new(
            std::net::Ipv4Addr::from(u32::from(base.network()) + (k as u32) * 64),
            26,
        )?;
        let prefix = net.to_string();
        let mut spec = IpamBlockSpec::empty(&net.into());
        spec.affinity = Some(format!("host:{}", st.nodes[owner].name));
        while rx.try_recv().is_ok() {}
        let t0 = day_seconds(SystemTime::now());
        rt.block_on(store.create_typed(&IpamBlock::new(&block_name(&net.into()), spec)))?;
        let mut seen = vec![false; nodes];
        seen[owner] = true;
        let deadline = Instant::now() + Duration::from_secs(30);
        while seen.iter().any(|s| !s) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                bail!("{prefix} did not reach every node within 30 s: {seen:?}");
            }
            let Ok((i, ts, line)) = rx.recv_timeout(left) else {
                continue;
            };
            if !seen[i]
                && line.contains(&prefix)
                && !line.starts_with("Deleted")
                && line.contains(" via ")
            {
                seen[i] = true;
                let mut d = ts - t0;
                if d < 0.0 {
                    d += 86_400.0;
                }
                fig.latencies.push(Duration::from_secs_f64(d.max(0.0)));
            }
        }
    }
    let (b, f) = daemon_rss(&st);
    fig.bgpd_rss_kib = b;
    fig.felix_rss_kib = f;
    for mut m in monitors {
        let _ = m.kill();
        let _ = m.wait();
    }
    log(&format!(
        "{nodes} nodes: convergence p50 {:?}, p99 {:?} over {} (block, node) pairs",
        quantile(&fig.latencies, 0.5),
        quantile(&fig.latencies, 0.99),
        fig.latencies.len()
    ));
    Ok(fig)
}

fn iperf(from_netns: &str, to: &str, seconds: u64) -> Result<f64> {
    let out = Command::new("ip")
        .args(["netns", "exec", from_netns, "iperf3", "-J", "-c", to, "-t"])
        .arg(seconds.to_string())
        .output()?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .with_context(|| format!("iperf3 output: {}", String::from_utf8_lossy(&out.stderr)))?;
    v["end"]["sum_received"]["bits_per_second"]
        .as_f64()
        .map(|b| b / 1e9)
        .with_context(|| format!("iperf3: {v}"))
}

fn throughput(
    name: &str,
    o: &ClusterBenchOptions,
    fig: &mut Figures,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    let st = up::up(
        &up::UpOptions {
            name: name.to_string(),
            nodes: 2,
            topology: "mesh".into(),
            vxlan_mode: Default::default(),
            ipip_mode: Default::default(),
            dual_stack: false,
            service_cidr: None,
            service_cidr6: None,
            lb_cidr: None,
            datastore: Default::default(),
        },
        &mut |l| log(l),
    )?;
    pod::add(name, "default/client", "node-1", "")?;
    let server = pod::add(name, "default/server", "node-2", "")?;
    let server_ip = server.address().context("server address")?;
    // The same path without Tartan: a namespace behind each node on a veth,
    // with routes written by hand.
    let (n1, n2) = (&st.nodes[0], &st.nodes[1]);
    let bare = [format!("{name}-pod-bare-a"), format!("{name}-pod-bare-b")];
    for (k, (ns, node, net, other)) in [
        (&bare[0], n1, "10.250.1", (n2.address, "10.250.2.0/24")),
        (&bare[1], n2, "10.250.2", (n1.address, "10.250.1.0/24")),
    ]
    .into_iter()
    .enumerate()
    {
        ip(&["netns", "add", ns])?;
        let host_end = format!("{name}-bare{k}");
        ip(&[
            "-n",
            &node.netns,
            "link",
            "add",
            &host_end,
            "type",
            "veth",
            "peer",
            "name",
            "eth0",
            "netns",
            ns,
        ])?;
        ip(&[
            "-n",
            &node.netns,
            "addr",
            "add",
            &format!("{net}.1/24"),
            "dev",
            &host_end,
        ])?;
        ip(&["-n", &node.netns, "link", "set", &host_end, "up"])?;
        ip(&[
            "-n",
            ns,
            "addr",
            "add",
            &format!("{net}.2/24"),
            "dev",
            "eth0",
        ])?;
        ip(&["-n", ns, "link", "set", "eth0", "up"])?;
        ip(&["-n", ns, "link", "set", "lo", "up"])?;
        ip(&[
            "-n",
            ns,
            "route",
            "add",
            "default",
            "via",
            &format!("{net}.1"),
        ])?;
        ip(&[
            "-n",
            &node.netns,
            "route",
            "add",
            other.1,
            "via",
            &other.0.to_string(),
        ])?;
    }
    let servers: Vec<Child> = [pod::load(name, "default", "server")?.netns, bare[1].clone()]
        .iter()
        .map(|ns| {
            Command::new("ip")
                .args(["netns", "exec", ns, "iperf3", "-s"])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
        })
        .collect::<std::io::Result<_>>()?;
    std::thread::sleep(Duration::from_millis(500));
    let client_ns = pod::load(name, "default", "client")?.netns;
    for r in 0..o.throughput_runs {
        let t = iperf(&client_ns, &server_ip, o.seconds)?;
        let b = iperf(&bare[0], "10.250.2.2", o.seconds)?;
        log(&format!(
            "run {r}: pod to pod {t:.2} Gbit/s, bare {b:.2} Gbit/s"
        ));
        fig.native_gbps.push(t);
        fig.bare_gbps.push(b);
    }
    // The pool switched to VXLAN everywhere: felix moves the route to the
    // tunnel device; the pods keep their MTU of 1500 and learn the
    // tunnel's 1450 by path MTU discovery, as pods made before a switch do.
    let r = vxlan_runs(name, &st, &client_ns, &server_ip, &bare[0], o, fig, log);
    for mut s in servers {
        let _ = s.kill();
        let _ = s.wait();
    }
    r
}

#[allow(clippy::too_many_arguments)]
fn vxlan_runs(
    name: &str,
    st: &tartan_lab::cluster::LabState,
    client_ns: &str,
    server_ip: &str,
    bare: &str,
    o: &ClusterBenchOptions,
    fig: &mut Figures,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    use tartan_api::resources::IpPool;
    use tartan_api::resources::ippool::EncapMode;
    use tartan_api::store::typed::TypedStore;
    let rt = up::runtime()?;
    let store = rt.block_on(connect(&st.datastore, Some(Duration::from_secs(10))))?;
    let mut pool: IpPool = rt.block_on(store.get_typed(None, "default-ipv4"))?;
    pool.spec.vxlan_mode = EncapMode::Always;
    rt.block_on(store.update_typed(&pool))?;
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    loop {
        let r = ip(&[
            "-n",
            &st.nodes[0].netns,
            "route",
            "show",
            "dev",
            "tartan.vxlan",
        ])
        .unwrap_or_default();
        if r.contains("onlink") {
            break;
        }
        if std::time::Instant::now() > deadline {
            anyhow::bail!("{name}: no route through tartan.vxlan on node-1 after 30 s");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    for r in 0..o.throughput_runs {
        let t = iperf(client_ns, server_ip, o.seconds)?;
        let b = iperf(bare, "10.250.2.2", o.seconds)?;
        log(&format!(
            "run {r}: pod to pod over VXLAN {t:.2} Gbit/s, bare {b:.2} Gbit/s"
        ));
        fig.vxlan_gbps.push(t);
        fig.bare_vxlan_gbps.push(b);
    }
    Ok(())
}

pub fn run(o: &ClusterBenchOptions, mut log: impl FnMut(&str)) -> Result<Figures> {
    let mut fig = Figures::default();
    for &n in &o.sizes {
        let name = "benchconv";
        let _ = down::down(name, &mut |_| {});
        let r = convergence(name, n, o.blocks, &mut log);
        down::down(name, &mut |_| {})?;
        fig.sizes.push(r?);
    }
    let name = "benchtput";
    let _ = down::down(name, &mut |_| {});
    let r = throughput(name, o, &mut fig, &mut log);
    down::down(name, &mut |_| {})?;
    r?;
    Ok(fig)
}

fn median_f(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s.get(s.len() / 2).copied().unwrap_or(0.0)
}

/// The median of `t[i] / b[i]` over runs done back to back.
fn paired_ratio(t: &[f64], b: &[f64]) -> f64 {
    let r: Vec<f64> = t.iter().zip(b).map(|(t, b)| t / b.max(1e-9)).collect();
    median_f(&r)
}

fn median_u(v: &[u64]) -> u64 {
    let mut s = v.to_vec();
    s.sort();
    s.get(s.len() / 2).copied().unwrap_or(0)
}

pub fn render_markdown(env: &Environment, o: &ClusterBenchOptions, f: &Figures) -> String {
    let mut md = String::from("# Cluster benchmark: convergence, throughput, memory\n\n");
    md.push_str(&env.render());
    let _ = writeln!(
        md,
        "\n## Convergence\n\nA new IPAMBlock written to etcd (an allocation) until its route is in the kernel of every other node (`ip -ts monitor route` in each node). {} blocks per size, owners in turn; every (block, node) pair is one sample.\n",
        o.blocks
    );
    let _ = writeln!(
        md,
        "| nodes | samples | p50 | p99 | max | bgpd RSS (median) | felix RSS (median) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|---|");
    let ms = |d: Duration| format!("{:.1} ms", d.as_secs_f64() * 1e3);
    for s in &f.sizes {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} KiB | {} KiB |",
            s.nodes,
            s.latencies.len(),
            ms(quantile(&s.latencies, 0.5)),
            ms(quantile(&s.latencies, 0.99)),
            ms(quantile(&s.latencies, 1.0)),
            median_u(&s.bgpd_rss_kib),
            median_u(&s.felix_rss_kib),
        );
    }
    let runs = |v: &[f64]| v.iter().map(|x| format!("{x:.2}")).collect::<Vec<_>>();
    let _ = writeln!(
        md,
        "\n## Throughput\n\niperf3 TCP, {} s per run, {} runs per path. Pod on node-1 to pod on node-2 (Tartan: BGP-learned route, pod /32 on a veth); each Tartan run is followed at once by a run between two namespaces behind the same nodes with routes written by hand (bare veth routing, no Tartan). Then the pool is switched to vxlanMode Always (felix moves the route to tartan.vxlan; the pods keep MTU 1500 and learn the tunnel's 1450 by path MTU discovery) and the pairs run again. The ratio is the median of the per-pair ratios, which cancels most of the drift of a shared machine.\n",
        o.seconds, o.throughput_runs
    );
    let _ = writeln!(
        md,
        "| path | Gbit/s (median) | runs | bare beside it (median) | runs | ratio to bare (median of pairs) |"
    );
    let _ = writeln!(md, "|---|---|---|---|---|---|");
    for (label, t, b) in [
        (
            "pod to pod across nodes, native",
            &f.native_gbps,
            &f.bare_gbps,
        ),
        (
            "pod to pod across nodes, VXLAN",
            &f.vxlan_gbps,
            &f.bare_vxlan_gbps,
        ),
    ] {
        let _ = writeln!(
            md,
            "| {label} | {:.2} | {:?} | {:.2} | {:?} | {:.3} |",
            median_f(t),
            runs(t),
            median_f(b),
            runs(b),
            paired_ratio(t, b)
        );
    }
    let _ = writeln!(
        md,
        "\nNative / bare: {:.3} (goal ≥ 0.95). VXLAN / bare: {:.3} (no goal; the price of encapsulation).",
        paired_ratio(&f.native_gbps, &f.bare_gbps),
        paired_ratio(&f.vxlan_gbps, &f.bare_vxlan_gbps)
    );
    let _ = writeln!(
        md,
        "\nGoals (issue 5): convergence p99 under 100 ms at 10 and 20 nodes; native throughput at least 95% of bare."
    );
    md
}
