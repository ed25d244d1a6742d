//! The cluster DNS benchmark: tartan-dns beside dnsmasq (the cache kube-dns
//! put in front of itself) and unbound, each answering the same Service
//! names, on this machine in one run.
//!
//! In a fresh network namespace: an etcd holding `services` Services in 50
//! namespaces, each with an EndpointSlice of `endpoints` ready endpoints;
//! tartan-dns reading them; dnsmasq with the same names in a hosts file;
//! unbound with them as `local-data`. External names (`ext-N.example.test`)
//! come from one more dnsmasq, the upstream of all three, and are asked
//! once before measuring so that each server answers them from its cache.
//!
//! Per server and name set, `dnsperf` twice: flat out (100 queries
//! outstanding) for queries per second, and at a fixed rate every server
//! keeps up with, with each answer's latency recorded (`-v`), for the
//! median and 99th percentile. Servers take turns within a round, their
//! order rotating, so that load from elsewhere falls on all of them.

mod model;
mod perf;
mod report;
mod setup;

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use tartan_api::store::etcd::EtcdStore;
use tartan_lab::etcd::EtcdCluster;
use tartan_lab::netns::Netns;
use tartan_lab::process::Daemon;
use tartan_lab::tempdir::TempDir;

use crate::benchkit::{in_ns, status_kib};
pub use model::{DnsBenchOptions, DnsBenchResult, Run};
use model::{
    HEALTH, SERVERS, SETS, UPSTREAM_PORT, cluster_ip, external_ip, external_name, fqdn, port_of,
};
use perf::{dnsperf, measure, stat, version};
pub use report::render_markdown;
use setup::{dnsmasq, fill, hosts, query_file, unbound_conf, wait_loaded};

/// Runs the benchmark (as root: it makes a network namespace).
pub fn run(o: &DnsBenchOptions, log: impl Fn(&str) + Sync) -> Result<DnsBenchResult> {
    for tool in ["dnsperf", "dnsmasq", "unbound"] {
        if Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .map(|o| !o.status.success())
            .unwrap_or(true)
        {
            bail!("{tool} is not installed (Debian packages dnsperf, dnsmasq, unbound)");
        }
    }
    let bin = tartan_lab::cni::tartan_bin_dir().join("tartan-dns");
    if !bin.exists() {
        bail!("{} is not built", bin.display());
    }
    let ns = Netns::new("tdnsb")?;
    let log = &log;
    in_ns(&ns, || {
        let mut r = DnsBenchResult::default();
        r.versions
            .insert("dnsmasq".into(), version("dnsmasq", "--version"));
        r.versions
            .insert("unbound".into(), version("unbound", "-V"));
        r.versions
            .insert("dnsperf".into(), version("dnsperf", "-h"));
        let dir = TempDir::new("dnsbench")?;
        let n = o.services;
        let cluster_q = dir.write("cluster.txt", query_file(fqdn, n))?;
        let external_q = dir.write("external.txt", query_file(external_name, o.external))?;
        let ext_hosts = dir.write("ext.hosts", hosts(external_name, external_ip, o.external))?;
        let cluster_hosts = dir.write("cluster.hosts", hosts(fqdn, cluster_ip, n))?;

        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let etcd = EtcdCluster::single()?;
        let store = Arc::new(rt.block_on(EtcdStore::connect(&etcd.client_endpoints()))?);
        let t = Instant::now();
        fill(&store, &rt, o)?;
        r.fill = t.elapsed();
        log(&format!(
            "{n} Services with {} endpoints each in etcd in {:?}",
            o.endpoints, r.fill
        ));

        let _upstream = dnsmasq(
            "dns-upstream",
            UPSTREAM_PORT,
            &ext_hosts,
            &["--local-ttl=3600".into(), "--cache-size=0".into()],
        )?;
        let t = Instant::now();
        let mut cmd = Command::new(&bin);
        cmd.args([
            "--datastore",
            &etcd.datastore_spec(),
            "--listen",
            &format!("127.0.0.1:{}", port_of("tartan-dns")),
            "--health-address",
            HEALTH,
            "--upstream",
            &format!("127.0.0.1:{UPSTREAM_PORT}"),
            // One source address asks everything here.
            "--client-rate",
            "0",
        ]);
        cmd.env("TARTAN_LOG", "warn");
        let tartan = Daemon::start("tartan-dns", cmd)?;
        wait_loaded(&tartan, o, Duration::from_secs(300))?;
        r.load = t.elapsed();
        std::thread::sleep(Duration::from_secs(1));
        r.tartan_loaded_kib = status_kib(&tartan.pid().to_string(), "VmRSS").unwrap_or(0);
        log(&format!(
            "tartan-dns: all loaded after {:?}, {} KiB resident",
            r.load, r.tartan_loaded_kib
        ));
        let masq = dnsmasq(
            "dnsmasq",
            port_of("dnsmasq"),
            &cluster_hosts,
            &[
                format!("--server=127.0.0.1#{UPSTREAM_PORT}"),
                "--cache-size=10000".into(),
                "--local-ttl=5".into(),
            ],
        )?;
        let conf = unbound_conf(&dir, o)?;
        let unbound = Daemon::start("unbound", {
            let mut c = Command::new("unbound");
            c.arg("-d").arg("-c").arg(&conf);
            c
        })?;
        std::thread::sleep(Duration::from_secs(2));
        for d in [&masq, &unbound] {
            if !d.is_running() {
                bail!("{} exited:\n{}", d.name(), d.log_tail(20));
            }
        }
        // Every server answers every name once, and caches the external ones.
        for s in SERVERS {
            for (set, file) in [("cluster", &cluster_q), ("external", &external_q)] {
                let out = dnsperf(port_of(s), file, &["-n".into(), "1".into()])?;
                let done = stat(&out, "Queries completed:").unwrap_or(0.0);
                let sent = stat(&out, "Queries sent:").unwrap_or(0.0);
                if done < sent || !out.contains("NOERROR") {
                    bail!("{s} did not answer the {set} names:\n{out}");
                }
            }
        }
        for round in 0..o.runs {
            for (si, set) in SETS.iter().enumerate() {
                let file = if si == 0 { &cluster_q } else { &external_q };
                for k in 0..SERVERS.len() {
                    let s = SERVERS[(k + round) % SERVERS.len()];
                    let run = measure(port_of(s), file, o)?;
                    log(&format!(
                        "round {}: {s} {set}: {:.0} q/s, p50 {:.0} µs, p99 {:.0} µs, {:.1} % answered",
                        round + 1,
                        run.qps,
                        run.p50_us,
                        run.p99_us,
                        run.answered * 100.0
                    ));
                    r.runs
                        .entry((s.to_string(), set.to_string()))
                        .or_default()
                        .push(run);
                }
            }
        }
        let kib = |d: &Daemon, f: &str| status_kib(&d.pid().to_string(), f).unwrap_or(0);
        r.tartan_after_kib = kib(&tartan, "VmRSS");
        r.tartan_peak_kib = kib(&tartan, "VmHWM");
        r.dnsmasq_after_kib = kib(&masq, "VmRSS");
        r.unbound_after_kib = kib(&unbound, "VmRSS");
        Ok(r)
    })
}
