//! Stale conntrack cleanup benchmark (issue 24): a UDP Service with many
//! endpoints loses them all at once; felix's service index computes the
//! stale flows and `dataplane::conntrack::Conntrack::clean` lists the
//! table and deletes their entries over ctnetlink, in a fresh network
//! namespace. The table is filled over ctnetlink (no traffic needed) with
//! the stale entries and unrelated ones: another UDP Service's entries
//! (its endpoints stay), TCP entries to the same frontend and endpoints,
//! and UDP pod-to-pod entries without NAT. After the cleanup exactly the
//! unrelated entries must be left.

use std::collections::BTreeSet;
use std::net::Ipv4Addr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tartan_felix::dataplane::conntrack::Conntrack;
use tartan_felix::services::index::ServiceIndex;
use tartan_felix::services::stale::{Entry, Tuple};
use tartan_felix::services::{EndpointInfo, PortInfo, ServiceInfo, SliceInfo, TCP, UDP};

use tartan_lab::netns::Netns;

pub struct ConntrackBenchOptions {
    /// Endpoints of the Service that loses them all.
    pub endpoints: usize,
    /// Entries per endpoint (clients pinned to one port each).
    pub clients: usize,
    /// Unrelated entries (at least three; split over three kinds).
    pub unrelated: usize,
    pub runs: usize,
}

/// One run's figures.
#[derive(Debug, Clone)]
pub struct Run {
    pub flows: usize,
    pub before: usize,
    pub deleted: usize,
    pub after: usize,
    pub unrelated_kept: bool,
    pub index: Duration,
    pub clean: Duration,
}

const STALE_VIP: Ipv4Addr = Ipv4Addr::new(10, 97, 0, 1);
const OTHER_VIP: Ipv4Addr = Ipv4Addr::new(10, 97, 0, 2);
const PORT: u16 = 53;
const TARGET: u16 = 5353;

fn addr(base: [u8; 2], i: usize) -> Ipv4Addr {
    Ipv4Addr::new(base[0], base[1], (i >> 8) as u8, i as u8)
}

fn service(vip: Ipv4Addr) -> ServiceInfo {
    ServiceInfo {
        cluster_ips: vec![vip],
        external: vec![],
        source_ranges: None,
        lb_ips: vec![],
        ports: vec![PortInfo {
            name: "dns".into(),
            protocol: UDP,
            port: PORT,
            node_port: None,
        }],
        affinity: None,
        external_local: false,
        internal_local: false,
        health_port: None,
    }
}

fn slice(svc: &str, base: [u8; 2], n: usize) -> SliceInfo {
    SliceInfo {
        service: svc.into(),
        ports: [("dns".to_string(), (UDP, TARGET))].into(),
        endpoints: (0..n)
            .map(|i| EndpointInfo {
                addr: addr(base, i),
                local: false,
                ready: true,
                serving: true,
                terminating: false,
                zones: Box::default(),
                node_hint: tartan_felix::services::NodeHint::None,
            })
            .collect(),
    }
}

/// An entry from `client:sport` to `dst:dport`, answered by `by`.
fn entry(
    proto: u8,
    client: Ipv4Addr,
    sport: u16,
    dst: Ipv4Addr,
    dport: u16,
    by: (Ipv4Addr, u16),
) -> Entry {
    Entry {
        orig: Tuple {
            src: client,
            dst,
            proto,
            src_port: sport,
            dst_port: dport,
        },
        reply: Tuple {
            src: by.0,
            dst: client,
            proto,
            src_port: by.1,
            dst_port: sport,
        },
        zone: None,
        id: None,
    }
}

/// The stale entries and the unrelated ones.
fn entries(o: &ConntrackBenchOptions) -> (Vec<Entry>, Vec<Entry>) {
    let client = |c: usize| Ipv4Addr::new(10, 244, 0, 1 + c as u8);
    let mut stale = Vec::new();
    for i in 0..o.endpoints {
        for c in 0..o.clients {
            let ep = (addr([10, 128], i), TARGET);
            stale.push(entry(
                UDP,
                client(c),
                20_000 + i as u16,
                STALE_VIP,
                PORT,
                ep,
            ));
        }
    }
    let third = o.unrelated / 3;
    let mut other = Vec::new();
    for i in 0..third {
        // The other Service, whose endpoints stay.
        let ep = (addr([10, 129], i % o.endpoints.max(1)), TARGET);
        other.push(entry(
            UDP,
            client(100),
            10_000 + i as u16,
            OTHER_VIP,
            PORT,
            ep,
        ));
        // TCP to the same frontend and endpoints.
        let ep = (addr([10, 128], i % o.endpoints.max(1)), TARGET);
        other.push(entry(
            TCP,
            client(101),
            10_000 + i as u16,
            STALE_VIP,
            PORT,
            ep,
        ));
        // Pod to pod, no NAT, to the stale endpoints' port.
        let to = addr([10, 130], i);
        other.push(entry(
            UDP,
            client(102),
            10_000 + i as u16,
            to,
            TARGET,
            (to, TARGET),
        ));
    }
    (stale, other)
}

fn origs(v: &[Entry]) -> BTreeSet<(Ipv4Addr, Ipv4Addr, u8, u16, u16)> {
    v.iter()
        .map(|e| {
            (
                e.orig.src,
                e.orig.dst,
                e.orig.proto,
                e.orig.src_port,
                e.orig.dst_port,
            )
        })
        .collect()
}

fn one_run(o: &ConntrackBenchOptions, ct: &mut Conntrack) -> Result<Run> {
    // Empty the namespace's table, then fill it.
    let left = ct.list()?;
    ct.delete(&left)?;
    let (stale, other) = entries(o);
    let (made, _) = ct.create(&stale, 600).context("create the stale entries")?;
    let (made_other, _) = ct
        .create(&other, 600)
        .context("create the unrelated entries")?;
    if made != stale.len() || made_other != other.len() {
        bail!(
            "made {made} + {made_other} entries of {} + {}",
            stale.len(),
            other.len()
        );
    }
    let mut index = ServiceIndex::new("node-1");
    index.set_service("b/stale", Some(service(STALE_VIP)));
    index.set_service("b/other", Some(service(OTHER_VIP)));
    index.set_slice("b/stale-1", Some(slice("b/stale", [10, 128], o.endpoints)));
    index.set_slice("b/other-1", Some(slice("b/other", [10, 129], o.endpoints)));
    index.update();
    let _ = index.take_stale();
    let before = ct.list()?.len();

    // Every endpoint of b/stale goes at once.
    let t = Instant::now();
    index.set_slice("b/stale-1", Some(slice("b/stale", [10, 128], 0)));
    index.update();
    let flows = index.take_stale();
    let index_took = t.elapsed();
    let c = ct.clean(&flows)?;
    let after = ct.list()?;
    Ok(Run {
        flows: flows.len(),
        before,
        deleted: c.deleted,
        after: after.len(),
        unrelated_kept: origs(&after) == origs(&other),
        index: index_took,
        clean: c.took,
    })
}

/// Run the benchmark in a fresh namespace.
pub fn run(o: &ConntrackBenchOptions, log: impl Fn(&str) + Sync) -> Result<Vec<Run>> {
    if o.endpoints > 65_000 || o.unrelated / 3 > 65_000 || o.clients > 90 {
        bail!("at most 65,000 endpoints, 195,000 unrelated entries, 90 clients");
    }
    let ns = Netns::new("ctb")?;
    // The kernel makes entries in a namespace only once something there
    // uses conntrack: a table with a `ct state` rule (as felix's has).
    ns.exec("nft", &["add", "table", "ip", "ctb"])?;
    ns.exec(
        "nft",
        &["add chain ip ctb c { type filter hook prerouting priority 0; }"],
    )?;
    ns.exec(
        "nft",
        &[
            "add", "rule", "ip", "ctb", "c", "ct", "state", "new", "accept",
        ],
    )?;
    let name = ns.name().to_string();
    let runs = o.runs;
    let opts = o;
    let out = std::thread::scope(|s| {
        s.spawn(|| -> Result<Vec<Run>> {
            ns.enter_current_thread()?;
            let mut ct = Conntrack::open().context("ctnetlink socket")?;
            let mut out = Vec::new();
            for i in 0..runs {
                let r = one_run(opts, &mut ct)?;
                log(&format!("run {} in {name}: {r:?}", i + 1));
                out.push(r);
            }
            Ok(out)
        })
        .join()
        .map_err(|_| anyhow::anyhow!("the benchmark thread panicked"))?
    })?;
    Ok(out)
}

/// The figures as a Markdown section.
pub fn render_markdown(o: &ConntrackBenchOptions, runs: &[Run], command: &str) -> String {
    let mut clean: Vec<f64> = runs.iter().map(|r| r.clean.as_secs_f64() * 1e3).collect();
    clean.sort_by(f64::total_cmp);
    let mut index: Vec<f64> = runs.iter().map(|r| r.index.as_secs_f64() * 1e3).collect();
    index.sort_by(f64::total_cmp);
    let med = |v: &[f64]| v.get(v.len() / 2).copied().unwrap_or(0.0);
    let max = |v: &[f64]| v.last().copied().unwrap_or(0.0);
    let first = runs.first();
    let all_kept = runs.iter().all(|r| r.unrelated_kept);
    format!(
        "## Stale conntrack cleanup\n\n\
         Command: `{command}`\n\n\
         A UDP Service (ClusterIP {STALE_VIP}:{PORT}) loses all its {e} endpoints at once; \
         {c} entries per endpoint (clients pinned to one port), beside {u} unrelated entries \
         (another UDP Service's, TCP to the same frontend and endpoints, UDP pod to pod without NAT), \
         made over ctnetlink in a fresh namespace. *index* is felix's `set_slice` + `update` + \
         `take_stale` (pure); *cleanup* is `Conntrack::clean`: one listing of the table, the \
         matches picked in memory, deletes batched {b} to a datagram. {n} runs.\n\n\
         | endpoints removed | stale flows | entries before | deleted | entries after | unrelated untouched | index (median) | cleanup (median) | cleanup (max) | goal |\n\
         |---|---|---|---|---|---|---|---|---|---|\n\
         | {e} | {f} | {before} | {del} | {after} | {kept} | {im:.1} ms | **{cm:.1} ms** | {cx:.1} ms | < 100 ms |\n",
        e = o.endpoints,
        c = o.clients,
        u = o.unrelated / 3 * 3,
        b = 128,
        n = runs.len(),
        f = first.map_or(0, |r| r.flows),
        before = first.map_or(0, |r| r.before),
        del = first.map_or(0, |r| r.deleted),
        after = first.map_or(0, |r| r.after),
        kept = if all_kept { "yes (every run)" } else { "NO" },
        im = med(&index),
        cm = med(&clean),
        cx = max(&clean),
    )
}
