//! One cluster size: the store populated, the real node's agents started
//! beside two reflectors, then each figure read in turn.

use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use ipnet::Ipv4Net;
use serde_json::{Value, json};
use tartan_api::store::etcd::EtcdStore;
use tartan_api::store::{Datastore, ObjectKey};
use tartan_lab::cni::Call;
use tartan_lab::cnilab::CniLab;
use tartan_lab::netns::Netns;
use tartan_lab::process::Daemon;
use tartan_lab::tempdir::TempDir;

use super::figures::SizeFigures;
use super::machine::{CpuMark, share};
use super::objects::*;
use super::options::ScaleBenchOptions;
use super::probe;
use super::reflector::Reflector;
use super::sample::*;
use super::writer::{Heartbeats, create_indexed, now};
use crate::benchkit::status_kib;
use crate::storebench::quantile;

/// Writers filling the store.
const WRITERS: usize = 16;

pub fn measure(
    n: usize,
    o: &ScaleBenchOptions,
    f: &mut SizeFigures,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    // Namespace 0 is the real node, 1 and 2 the reflectors.
    let lab = CniLab::new(3)?;
    f.etcd_storage = lab.etcd.data_filesystem();
    log(&format!("{n} nodes: etcd's data on {}", f.etcd_storage));
    let (rt, store) = (&lab.rt, &lab.store);
    let me = CniLab::node_name(0);
    let node_ns = lab.underlay.node(0).netns.name().to_string();
    let node_addr = lab.underlay.node(0).address;
    let rr: [Ipv4Addr; 2] = [lab.underlay.node(1).address, lab.underlay.node(2).address];
    let prefix = lab.underlay.subnet.prefix_len();
    lab.add_pool("default", POOL, Some(26))?;

    let sims = n - 1;
    let ppn = o.pods_per_node;
    let t = Instant::now();
    let stamp = now();
    let settings = bgp_settings(rr);
    let count = settings.len();
    rt.block_on(create_indexed(store, count, 1, move |i| {
        settings[i].clone()
    }))?;
    let real = node(&me, node_addr, prefix, &stamp);
    rt.block_on(create_indexed(store, 1, 1, move |_| real.clone()))?;
    let s = stamp.clone();
    rt.block_on(create_indexed(store, sims, WRITERS, move |i| {
        node(&sim_name(i + 1), sim_address(i + 1), 12, &s)
    }))?;
    rt.block_on(create_indexed(store, 2 * sims, WRITERS, |i| {
        let k = i / 2 + 1;
        let [b, a] = block_and_affinity(&sim_name(k), block_net(k));
        if i % 2 == 0 { b } else { a }
    }))?;
    rt.block_on(create_indexed(store, sims * ppn, WRITERS, move |i| {
        workload(i / ppn.max(1) + 1, i % ppn.max(1))
    }))?;
    let per = o.endpoints;
    rt.block_on(create_indexed(store, 2 * o.services, WRITERS, move |i| {
        let svc = i / 2;
        let v = if i % 2 == 0 {
            crate::servicebench::k8s_service(svc)
                .map(|s| serde_json::to_value(s).unwrap_or_default())
        } else {
            crate::servicebench::k8s_slice(svc, per)
                .map(|s| serde_json::to_value(s).unwrap_or_default())
        };
        v.unwrap_or(Value::Null)
    }))?;
    rt.block_on(create_indexed(store, o.policies, WRITERS, policy))?;
    f.workloads = sims * ppn;
    f.objects = count + 1 + sims * (3 + ppn) + 2 * o.services + o.policies;
    f.populate = t.elapsed();
    log(&format!(
        "{n} nodes: {} objects written in {:?}",
        f.objects, f.populate
    ));

    // The CNI plugin on the real node, logging as it does by default.
    let mut entry = lab.tartan_entry(0, json!({}));
    if let Some(e) = entry.as_object_mut() {
        e.remove("logLevel");
    }
    let cni = lab.runtime(0, CniLab::conflist("1.1.0", vec![entry]));
    // The first ADD claims the node's block (reading every block): not
    // timed. The local pods stay for the run.
    let mut kept: Vec<(Netns, Call)> = Vec::new();
    let mut own: Vec<Ipv4Addr> = Vec::new();
    for i in 0..o.local_pods.max(1) {
        let pod = local_pod(&me, i);
        rt.block_on(create_indexed(store, 1, 1, move |_| pod.clone()))?;
        let (ns, call) = lab.pod("default", &format!("local-{i}"))?;
        let r = cni
            .add(&call)
            .with_context(|| format!("ADD of local-{i}"))?;
        own.extend(addresses(&r));
        kept.push((ns, call));
    }
    // New blocks come after the cluster's, passing over any the real
    // node claimed.
    let fresh: Vec<usize> = (n..)
        .filter(|k| !own.iter().any(|a| block_net(*k).contains(a)))
        .take(o.new_blocks)
        .collect();
    log(&format!(
        "{n} nodes: {} pods wired on the real node",
        kept.len()
    ));

    // The agents, then the reflectors.
    let dir = TempDir::new("scalebench")?;
    let t = Instant::now();
    let (bgpd, felix) = start_agents(&lab, &me, &dir)?;
    let routes: Vec<(Ipv4Net, Ipv4Addr)> = (1..n).map(|k| (block_net(k), sim_address(k))).collect();
    let r1 = Reflector::start(
        lab.underlay.node(1).netns.name(),
        rr[0],
        rr[0],
        node_addr,
        routes.clone(),
        Duration::from_secs(60),
    )?;
    let _r2 = Reflector::start(
        lab.underlay.node(2).netns.name(),
        rr[1],
        rr[0],
        node_addr,
        routes,
        Duration::from_secs(60),
    )?;
    f.routes_in = wait_routes(&node_ns, sims, Duration::from_secs(600), || {
        bgpd.is_running()
    })
    .map(|_| t.elapsed())?;
    let pids = [bgpd.pid(), felix.pid()];
    // Agents that never go quiet are a finding, not a failure: the
    // windows below measure them as they are.
    if let Err(e) = wait_quiet(&pids, Duration::from_secs(300)) {
        log(&format!("{n} nodes: {e:#}; measuring anyway"));
        f.never_quiet = true;
    }
    f.settled = t.elapsed();
    log(&format!(
        "{n} nodes: {sims} routes in the kernel after {:?}, agents quiet after {:?}",
        f.routes_in, f.settled
    ));

    // CPU with no change in the store.
    f.cpu_idle = cpu_pair(&pids, o.window)?;
    // CPU with every kubelet posting.
    let nodes = rt.block_on(current_nodes(&lab, n))?;
    let kubelets = kubelets_store(&lab, n)?;
    let beats = Heartbeats::start(rt, &kubelets, nodes, o.heartbeat);
    std::thread::sleep(Duration::from_secs(2));
    let w0 = beats.writes.load(std::sync::atomic::Ordering::Relaxed);
    let reads0 = lab.etcd.handled("Range")?;
    let t = Instant::now();
    f.cpu_beats = cpu_pair(&pids, o.window)?;
    let w1 = beats.writes.load(std::sync::atomic::Ordering::Relaxed);
    let reads1 = lab.etcd.handled("Range")?;
    f.beat_rate = (w1 - w0) as f64 / t.elapsed().as_secs_f64();
    f.beat_reads = reads1.saturating_sub(reads0) as f64 / (w1 - w0).max(1) as f64;
    log(&format!(
        "{n} nodes: CPU of a core, bgpd {:.2} % → {:.2} %, felix {:.2} % → {:.2} % with {:.0} Node updates/s ({:.2} etcd reads each)",
        f.cpu_idle[0] * 100.0,
        f.cpu_beats[0] * 100.0,
        f.cpu_idle[1] * 100.0,
        f.cpu_beats[1] * 100.0,
        f.beat_rate,
        f.beat_reads
    ));

    // New blocks from a reflector, heartbeats still running.
    let mon = RouteMonitor::start(&node_ns)?;
    for &k in &fresh {
        mon.drain();
        let sent = r1.announce(block_net(k), sim_address(k))?;
        let at = mon.added(&block_net(k).to_string(), Duration::from_secs(10))?;
        f.convergence.push(at.saturating_duration_since(sent));
        std::thread::sleep(Duration::from_millis(100));
    }
    drop(mon);
    if !f.convergence.is_empty() {
        log(&format!(
            "{n} nodes: new block to the kernel p50 {:?}, p99 {:?}",
            quantile(&f.convergence, 0.5),
            quantile(&f.convergence, 0.99)
        ));
    }

    // CNI ADDs (and DELs), heartbeats still running; what the agents and
    // etcd spend on each.
    let watched = [
        bgpd.pid(),
        felix.pid(),
        lab.etcd.pid(0).context("etcd is not running")?,
    ];
    let cpu_at = || watched.map(|p| cpu_seconds(p).unwrap_or(0.0));
    let cpu0 = cpu_at();
    let machine0 = CpuMark::now();
    let first = Instant::now();
    for i in 0..o.adds {
        let pod = json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("add-{i}"), "namespace": "default", "labels": {"app": "timed"}},
            "spec": {"nodeName": me, "containers": [{"name": "c", "image": "none"}]}});
        rt.block_on(create_indexed(store, 1, 1, move |_| pod.clone()))?;
        let (_ns, call) = lab.pod("default", &format!("add-{i}"))?;
        let t = Instant::now();
        let r = cni.add(&call).with_context(|| format!("timed ADD {i}"))?;
        f.adds.push(t.elapsed());
        f.add_starts.push(t - first);
        let t = Instant::now();
        cni.del(&call, Some(&r))?;
        f.dels.push(t.elapsed());
    }
    let cpu1 = cpu_at();
    f.add_machine = machine0.until(&CpuMark::now());
    for (k, c) in f.add_cpu.iter_mut().enumerate() {
        *c = (cpu1[k] - cpu0[k]) / o.adds.max(1) as f64;
    }
    if !f.adds.is_empty() {
        log(&format!(
            "{n} nodes: CNI ADD p50 {:?}, p99 {:?}, max {:?}; CPU per ADD and DEL: bgpd {:.1} ms, felix {:.1} ms, etcd {:.1} ms",
            quantile(&f.adds, 0.5),
            quantile(&f.adds, 0.99),
            f.adds.iter().max().copied().unwrap_or_default(),
            f.add_cpu[0] * 1e3,
            f.add_cpu[1] * 1e3,
            f.add_cpu[2] * 1e3,
        ));
        log(&format!(
            "{n} nodes: while the ADDs ran, the machine's cores were {} busy and some task waited for one {} of the time",
            share(f.add_machine.busy),
            share(f.add_machine.waited),
        ));
        log(&format!(
            "{n} nodes: slowest ADDs: {}",
            slowest(&f.adds, &f.add_starts, 8)
        ));
    }
    // The datastore's own round trips, heartbeats still running.
    let timed = probe::run(
        rt,
        &lab.etcd.datastore_spec(),
        ObjectKey::new(tartan_api::Kind::Node, None, &me),
        PROBE_SPAN,
    )?;
    log(&format!(
        "{n} nodes: datastore round trips, heartbeats running: read p50 {:?}, p99 {:?}; write p50 {:?}, p99 {:?}",
        quantile(&timed.reads, 0.5),
        quantile(&timed.reads, 0.99),
        quantile(&timed.writes, 0.5),
        quantile(&timed.writes, 0.99),
    ));
    (f.store_reads, f.store_writes, f.store_failures) = (timed.reads, timed.writes, timed.failed);
    f.beat_failures = beats.failures.load(std::sync::atomic::Ordering::Relaxed);
    beats.stop(rt);
    for (i, p) in pids.iter().enumerate() {
        f.rss_kib[i] = status_kib(&p.to_string(), "VmRSS").unwrap_or(0);
        f.hwm_kib[i] = status_kib(&p.to_string(), "VmHWM").unwrap_or(0);
    }
    log(&format!(
        "{n} nodes: resident bgpd {} KiB (peak {}), felix {} KiB (peak {})",
        f.rss_kib[0], f.hwm_kib[0], f.rss_kib[1], f.hwm_kib[1]
    ));
    if !bgpd.is_running() || !felix.is_running() {
        bail!("an agent exited during the run");
    }
    for (_, call) in &kept {
        let _ = cni.del(call, None);
    }
    Ok(())
}

/// The `k` longest of `times`, each with when it started.
fn slowest(times: &[Duration], starts: &[Duration], k: usize) -> String {
    let mut order: Vec<usize> = (0..times.len().min(starts.len())).collect();
    order.sort_by(|a, b| times[*b].cmp(&times[*a]));
    order
        .iter()
        .take(k)
        .map(|&i| {
            format!(
                "{:.1} ms at +{:.2} s",
                times[i].as_secs_f64() * 1e3,
                starts[i].as_secs_f64()
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

/// The IPv4 addresses of a CNI result.
fn addresses(r: &Value) -> Vec<Ipv4Addr> {
    r["ips"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|ip| ip["address"].as_str()?.split('/').next()?.parse().ok())
        .collect()
}

/// How long the datastore's round trips are timed.
const PROBE_SPAN: Duration = Duration::from_secs(10);

/// bgpd and felix on node 0 with their production settings (felix's
/// periodic check every 5 s), logging warnings.
fn start_agents(lab: &CniLab, node: &str, dir: &TempDir) -> Result<(Daemon, Daemon)> {
    let ns = &lab.underlay.node(0).netns;
    let store = lab.etcd.datastore_spec();
    let bin = tartan_lab::cni::tartan_bin_dir();
    for b in ["tartan-bgpd", "tartan-felix"] {
        if !bin.join(b).exists() {
            bail!("{} is not built", bin.join(b).display());
        }
    }
    let mut bgpd = ns.command(&bin.join("tartan-bgpd").display().to_string());
    bgpd.args(["--datastore", &store, "--node", node, "--socket"])
        .arg(dir.join("bgpd.sock"))
        .env("TARTAN_LOG", "warn");
    let mut felix = ns.command(&bin.join("tartan-felix").display().to_string());
    felix
        .args(["--datastore", &store, "--node", node])
        .env("TARTAN_LOG", "warn");
    Ok((
        Daemon::start("bgpd-scale", bgpd)?,
        Daemon::start("felix-scale", felix)?,
    ))
}

/// CPU share of a core of each pid over one window, read side by side.
fn cpu_pair(pids: &[u32; 2], window: Duration) -> Result<[f64; 2]> {
    let a = [cpu_seconds(pids[0]), cpu_seconds(pids[1])];
    let t = Instant::now();
    std::thread::sleep(window);
    let b = [cpu_seconds(pids[0]), cpu_seconds(pids[1])];
    let secs = t.elapsed().as_secs_f64();
    let share = |i: usize| -> Result<f64> {
        match (a[i], b[i]) {
            (Some(x), Some(y)) => Ok((y - x) / secs),
            _ => bail!("an agent exited"),
        }
    };
    Ok([share(0)?, share(1)?])
}

/// The kubelets' way to the store: as through an API server, whose watch
/// cache holds every Node, so that a status post is one etcd transaction
/// from the value last written (a kept value for each Node), not a read
/// and a transaction.
fn kubelets_store(lab: &CniLab, n: usize) -> Result<std::sync::Arc<dyn Datastore>> {
    let store = lab
        .rt
        .block_on(EtcdStore::connect(&lab.etcd.client_endpoints()))?
        .keeping(n + 64, (n + 64) * 4096);
    Ok(std::sync::Arc::new(store))
}

/// Every Node as stored now (the agents may have annotated the real one).
async fn current_nodes(lab: &CniLab, n: usize) -> Result<Vec<kube::api::DynamicObject>> {
    let listing = lab.store.list(tartan_api::Kind::Node, None).await?;
    if listing.items.len() != n {
        bail!("{} Nodes stored, {n} written", listing.items.len());
    }
    Ok(listing.items)
}
