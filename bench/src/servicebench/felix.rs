//! The real tartan-felix holding many Services from etcd (in the same
//! namespace, so that nothing is added to the host's network): its memory
//! and how long it takes to write them.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use tartan_api::store::etcd::EtcdStore;
use tartan_felix::services::render::TABLE;

use super::figures::*;
use super::objects::*;
use super::options::*;
use super::sync::*;
use crate::benchkit::{in_ns, status_kib};
use tartan_lab::etcd::EtcdCluster;
use tartan_lab::netns::Netns;
use tartan_lab::process::Daemon;

/// Elements of the map `frontends` in this thread's namespace (None: no
/// table).
pub(super) fn frontends_now() -> Option<usize> {
    let out = Command::new("nft")
        .args(["-j", "list", "map", "ip", TABLE, "frontends"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).ok()?;
    v["nftables"].as_array()?.iter().find_map(|o| {
        o.get("map")
            .map(|m| m["elem"].as_array().map_or(0, Vec::len))
    })
}

/// The last lines of felix's log without its colours.
pub(super) fn tail(felix: &Daemon) -> String {
    let mut out = String::new();
    let mut esc = false;
    for c in felix.log_tail(20).chars() {
        match (esc, c) {
            (false, '\u{1b}') => esc = true,
            (true, 'm') => esc = false,
            (true, _) => {}
            (false, c) => out.push(c),
        }
    }
    out
}

pub(super) fn wait_frontends(felix: &Daemon, want: usize, limit: Duration) -> Result<Duration> {
    let t = Instant::now();
    loop {
        if frontends_now() == Some(want) {
            return Ok(t.elapsed());
        }
        if !felix.is_running() {
            bail!("tartan-felix exited:\n{}", tail(felix));
        }
        if t.elapsed() > limit {
            bail!(
                "tartan-felix did not write {want} frontends in {limit:?} (now {:?}):\n{}",
                frontends_now(),
                tail(felix)
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

pub(super) fn start_felix(ns: &Netns, store: &str) -> Result<Daemon> {
    let bin = tartan_lab::cni::tartan_bin_dir().join("tartan-felix");
    if !bin.exists() {
        bail!("{} is not built", bin.display());
    }
    let mut cmd = ns.command(&bin.display().to_string());
    cmd.args([
        "--datastore",
        store,
        "--node",
        NODE,
        "--health-address",
        "none",
    ]);
    cmd.env("TARTAN_LOG", "warn");
    Daemon::start("felix-svcbench", cmd)
}

pub(super) fn felix_rss(
    o: &ServiceBenchOptions,
    log: &mut dyn FnMut(&str),
) -> Result<FelixFigures> {
    let n = o.felix_services;
    let per = o.endpoints;
    let ns = Netns::new("tsbf")?;
    let ns = &ns;
    let mut lines = Vec::new();
    let r = in_ns(ns, || {
        let mut log = |l: &str| lines.push(l.to_string());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let etcd = EtcdCluster::single()?;
        let store = Arc::new(rt.block_on(EtcdStore::connect(&etcd.client_endpoints()))?);
        let spec = etcd.datastore_spec();
        let rss = |d: &Daemon, f: &str| status_kib(&d.pid().to_string(), f).unwrap_or(0);
        let mut fig = FelixFigures {
            services: n,
            ..Default::default()
        };
        // An empty store first: felix's own footprint.
        let felix = start_felix(ns, &spec)?;
        wait_frontends(&felix, 0, Duration::from_secs(60))?;
        std::thread::sleep(o.felix_settle.min(Duration::from_secs(2)));
        fig.baseline_rss_kib = rss(&felix, "VmRSS");
        log(&format!(
            "felix: {} KiB resident with no Service",
            fig.baseline_rss_kib
        ));
        // The Services arrive while it runs (8 writers).
        let t = Instant::now();
        rt.block_on(crate::benchkit::write_services(&store, n, move |i| {
            Ok((k8s_service(i)?, k8s_slice(i, per)?))
        }))?;
        fig.fill = t.elapsed();
        wait_frontends(&felix, n, Duration::from_secs(300))?;
        log(&format!(
            "felix: {n} Services in etcd in {:?}, all in its table after {:?}",
            fig.fill,
            t.elapsed()
        ));
        // At least one periodic check (every 5 s) after the last change.
        std::thread::sleep(o.felix_settle);
        fig.rss_kib = rss(&felix, "VmRSS");
        fig.hwm_kib = rss(&felix, "VmHWM");
        log(&format!(
            "felix: {} KiB resident with {n} Services ({} KiB peak)",
            fig.rss_kib, fig.hwm_kib
        ));
        felix.stop();
        drop(felix);
        // A restart with the store full: list, index, one whole write.
        delete_table();
        let restart = (|| -> Result<()> {
            let t = Instant::now();
            let felix = start_felix(ns, &spec)?;
            wait_frontends(&felix, n, Duration::from_secs(120))?;
            fig.cold_start = t.elapsed();
            std::thread::sleep(o.felix_settle);
            fig.restart_rss_kib = rss(&felix, "VmRSS");
            fig.restart_hwm_kib = rss(&felix, "VmHWM");
            log(&format!(
                "felix: restarted, {n} Services written after {:?}; {} KiB resident ({} KiB peak)",
                fig.cold_start, fig.restart_rss_kib, fig.restart_hwm_kib
            ));
            Ok(())
        })();
        if let Err(e) = restart {
            fig.restart_error = Some(format!("{e:#}"));
        }
        drop(store);
        drop(etcd);
        Ok(fig)
    });
    for l in lines {
        log(&l);
    }
    r
}
