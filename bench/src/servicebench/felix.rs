//! The real tartan-felix holding many Services from etcd (in the same
//! namespace, so that nothing is added to the host's network): its memory
//! and how long it takes to write them.

use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail, ensure};
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

/// An `nft` in front of the real one for felix's children: it runs the
/// real `nft` and appends the child's peak resident memory (KiB) and its
/// first arguments to `peaks`, one line per call.
const NFT_WRAPPER: &str = r#"#!/usr/bin/python3
import os, resource, subprocess, sys
code = subprocess.call(["/usr/sbin/nft"] + sys.argv[1:])
kib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
with open(os.environ["TARTAN_BENCH_NFT_PEAKS"], "a") as f:
    f.write("%d %s\n" % (kib, " ".join(sys.argv[1:4])))
sys.exit(code)
"#;

/// Where felix's `nft` children report their peaks.
pub(super) struct NftPeaks {
    dir: tartan_lab::TempDir,
}

impl NftPeaks {
    pub(super) fn new() -> Result<NftPeaks> {
        let dir = tartan_lab::TempDir::new("svcbench-nft")?;
        let path = dir.write("nft", NFT_WRAPPER)?;
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755))?;
        Ok(NftPeaks { dir })
    }

    fn file(&self) -> std::path::PathBuf {
        self.dir.join("peaks")
    }

    /// (calls, largest peak in KiB, that call's arguments).
    pub(super) fn largest(&self) -> (usize, u64, String) {
        let text = std::fs::read_to_string(self.file()).unwrap_or_default();
        let mut best = (0, 0, String::new());
        for line in text.lines() {
            best.0 += 1;
            let (kib, args) = line.split_once(' ').unwrap_or((line, ""));
            let kib = kib.parse().unwrap_or(0);
            if kib > best.1 {
                best.1 = kib;
                best.2 = args.to_string();
            }
        }
        best
    }
}

pub(super) fn start_felix(ns: &Netns, store: &str, nft: &NftPeaks, log: &str) -> Result<Daemon> {
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
    cmd.env("TARTAN_LOG", log);
    let path = std::env::var("PATH").unwrap_or_default();
    cmd.env("PATH", format!("{}:{path}", nft.dir.path().display()));
    cmd.env("TARTAN_BENCH_NFT_PEAKS", nft.file());
    Daemon::start("felix-svcbench", cmd)
}

/// Felix's log filter: warnings, and the service table's writes (to see
/// a restart's whole write over a table already in the kernel).
const FELIX_LOG: &str = "warn,tartan_felix::daemon::apply=info";

/// Waits for felix to log a whole service table of `want` frontends.
fn wait_whole_write(felix: &Daemon, want: usize, limit: Duration) -> Result<Duration> {
    let t = Instant::now();
    let mark = format!("frontends={want}");
    loop {
        if felix
            .log()
            .lines()
            .any(|l| l.contains("service table written") && l.contains(&mark))
        {
            return Ok(t.elapsed());
        }
        if !felix.is_running() {
            bail!("tartan-felix exited:\n{}", tail(felix));
        }
        if t.elapsed() > limit {
            bail!(
                "tartan-felix did not log a whole table of {want} frontends in {limit:?}:\n{}",
                tail(felix)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
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
        let nft = NftPeaks::new()?;
        let felix = start_felix(ns, &spec, &nft, FELIX_LOG)?;
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
            let felix = start_felix(ns, &spec, &nft, FELIX_LOG)?;
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
        // A restart over the table it left (the usual restart): the old
        // elements serve until one transaction replaces them.
        let in_place = (|| -> Result<()> {
            ensure!(
                frontends_now() == Some(n),
                "no full table left to restart over"
            );
            let t = Instant::now();
            let felix = start_felix(ns, &spec, &nft, FELIX_LOG)?;
            wait_whole_write(&felix, n, Duration::from_secs(120))?;
            fig.in_place_start = t.elapsed();
            ensure!(frontends_now() == Some(n), "the table lost frontends");
            std::thread::sleep(o.felix_settle);
            fig.in_place_rss_kib = rss(&felix, "VmRSS");
            fig.in_place_hwm_kib = rss(&felix, "VmHWM");
            log(&format!(
                "felix: restarted over its table, rewritten after {:?}; {} KiB resident ({} KiB peak)",
                fig.in_place_start, fig.in_place_rss_kib, fig.in_place_hwm_kib
            ));
            Ok(())
        })();
        if let Err(e) = in_place {
            fig.in_place_error = Some(format!("{e:#}"));
        }
        (fig.nft_calls, fig.nft_peak_kib, fig.nft_peak_args) = nft.largest();
        log(&format!(
            "felix's nft children: {} calls, largest peak {} KiB ({})",
            fig.nft_calls, fig.nft_peak_kib, fig.nft_peak_args
        ));
        drop(store);
        drop(etcd);
        Ok(fig)
    });
    for l in lines {
        log(&l);
    }
    r
}
