//! The Service write benchmark (issue 22, acceptance 4): how long
//! `tartan-lab ctl apply` of one file of Services and EndpointSlices
//! takes, and the peak memory of it, into an empty store and into one
//! already holding many objects (written by earlier applies of the same
//! kind of file). Each case gets a fresh single-member etcd and a lab
//! state naming it (no nodes: the apply's cost is the control plane's);
//! the real `tartan-lab` binary (beside this one) runs the apply.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use anyhow::{Context, Result, bail};
use serde_json::json;
use tartan_lab::cluster::state::{self, LabState};
use tartan_lab::etcd::EtcdCluster;

/// What to run.
#[derive(Debug, Clone)]
pub struct ApplyBenchOptions {
    /// Services in one file (each with one EndpointSlice beside it).
    pub services: usize,
    /// Objects already stored in the full case (a multiple of a file's).
    pub stored: usize,
    pub runs: usize,
}

impl Default for ApplyBenchOptions {
    fn default() -> Self {
        ApplyBenchOptions {
            services: 1000,
            stored: 18_000,
            runs: 5,
        }
    }
}

/// One measured apply.
#[derive(Debug, Clone, Copy)]
pub struct Sample {
    pub seconds: f64,
    /// Peak resident memory of the apply, MiB (the larger of `tartan-lab`
    /// and its `tartanctl` child).
    pub peak_mib: f64,
}

/// Every run's samples of both cases.
#[derive(Debug, Default)]
pub struct ApplyBenchResult {
    pub empty: Vec<Sample>,
    pub full: Vec<Sample>,
    /// The fill applies of the full case, in order (every run's).
    pub fill: Vec<Vec<Sample>>,
}

/// The file number `file`: `n` Services `s<file>-<i>` (ClusterIP,
/// allocated) and an EndpointSlice each with 10 endpoints, in 50
/// namespaces.
fn file_text(file: usize, n: usize) -> String {
    let mut items = vec![];
    for i in 0..n {
        let ns = format!("ns{}", i % 50);
        let name = format!("s{file}-{i}");
        items.push(json!({"apiVersion": "v1", "kind": "Service",
            "metadata": {"name": name, "namespace": ns},
            "spec": {"type": "ClusterIP",
                     "ports": [{"name": "http", "port": 80, "targetPort": 8080}]}}));
        let endpoints: Vec<_> = (0..10)
            .map(|e| {
                let a = 0x0a80_0000u32 + ((file * n + i) as u32) * 10 + e;
                json!({"addresses": [std::net::Ipv4Addr::from(a).to_string()],
                       "nodeName": format!("node-{}", 2 + e % 9),
                       "conditions": {"ready": true, "serving": true, "terminating": false}})
            })
            .collect();
        items.push(
            json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": format!("{name}-bench"), "namespace": ns,
                         "labels": {"kubernetes.io/service-name": name}},
            "addressType": "IPv4", "endpoints": endpoints,
            "ports": [{"name": "http", "port": 8080, "protocol": "TCP"}]}),
        );
    }
    serde_json::to_string(&json!({"apiVersion": "v1", "kind": "List", "items": items}))
        .unwrap_or_default()
}

/// `tartan-lab --name LAB ctl apply -f FILE`, timed, with its peak memory.
fn apply(lab_bin: &Path, lab: &str, file: &Path) -> Result<Sample> {
    let t = Instant::now();
    let child = Command::new(lab_bin)
        .args(["--name", lab, "ctl", "apply", "-f"])
        .arg(file)
        .stdout(std::process::Stdio::null())
        .spawn()
        .with_context(|| format!("run {}", lab_bin.display()))?;
    let pid = i32::try_from(child.id())?;
    let mut status = 0;
    // SAFETY: rusage is plain data, filled by wait4 for our own child.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: waits for the child spawned above, once.
    let r = unsafe { libc::wait4(pid, &mut status, 0, &mut usage) };
    let seconds = t.elapsed().as_secs_f64();
    if r != pid {
        bail!("wait for the apply: {}", std::io::Error::last_os_error());
    }
    if !libc::WIFEXITED(status) || libc::WEXITSTATUS(status) != 0 {
        bail!("ctl apply -f {} failed (status {status})", file.display());
    }
    Ok(Sample {
        seconds,
        peak_mib: usage.ru_maxrss as f64 / 1024.0,
    })
}

/// Removes the lab's state directory when dropped.
struct StateGuard(String);

impl Drop for StateGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(state::dir(&self.0));
    }
}

/// One case: a fresh etcd, `fill` files applied first, then the measured
/// file; the fill samples and the measured one.
fn case(
    lab_bin: &Path,
    files: &[PathBuf],
    fill: usize,
    tag: &str,
) -> Result<(Vec<Sample>, Sample)> {
    let etcd = EtcdCluster::single()?;
    let lab = format!("sa{}{tag}", std::process::id() % 100_000);
    let _guard = StateGuard(lab.clone());
    LabState {
        name: lab.clone(),
        subnet: "198.51.100.0/24".into(),
        gateway: "198.51.100.1".parse()?,
        bridge: state::bridge_name(&lab),
        etcd: None,
        datastore: etcd.datastore_spec(),
        nodes: vec![],
        topology: "mesh".into(),
        subnet2: None,
        tor: None,
        service_cidr: "10.96.0.0/16".into(),
        service_cidr6: None,
        lb_cidr: state::DEFAULT_LB_CIDR.into(),
        lb_cidr6: None,
        dns: None,
        controllers: vec![],
        apiserver: None,
    }
    .save()?;
    let mut filled = vec![];
    for f in &files[1..=fill] {
        filled.push(apply(lab_bin, &lab, f)?);
    }
    let measured = apply(lab_bin, &lab, &files[0])?;
    Ok((filled, measured))
}

/// Runs both cases `runs` times, alternating which goes first.
pub fn run(opts: &ApplyBenchOptions, log: impl Fn(&str)) -> Result<ApplyBenchResult> {
    let lab_bin = std::env::current_exe()?
        .parent()
        .map(|d| d.join("tartan-lab"))
        .filter(|p| p.exists())
        .context("tartan-lab is not beside tartan-bench: cargo build --release --bins")?;
    let per_file = opts.services * 2;
    let fill = opts.stored / per_file.max(1);
    let dir = tempfile_dir()?;
    let files: Vec<PathBuf> = (0..=fill)
        .map(|f| {
            let p = dir.0.join(format!("file{f}.json"));
            std::fs::write(&p, file_text(f, opts.services)).map(|_| p)
        })
        .collect::<std::io::Result<_>>()?;
    let mut r = ApplyBenchResult::default();
    for run in 0..opts.runs {
        let order: [bool; 2] = if run % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for full in order {
            let (filled, s) = case(
                &lab_bin,
                &files,
                if full { fill } else { 0 },
                if full { "f" } else { "e" },
            )?;
            log(&format!(
                "run {run} {}: {:.2} s, {:.1} MiB",
                if full { "full" } else { "empty" },
                s.seconds,
                s.peak_mib
            ));
            if full {
                r.full.push(s);
                r.fill.push(filled);
            } else {
                r.empty.push(s);
            }
        }
    }
    Ok(r)
}

/// A directory removed when dropped.
struct TempDir(PathBuf);

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn tempfile_dir() -> Result<TempDir> {
    let p = std::env::temp_dir().join(format!("tartan-svcapply-{}", std::process::id()));
    std::fs::create_dir_all(&p)?;
    Ok(TempDir(p))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The results as a Markdown section.
pub fn render_markdown(env: &str, opts: &ApplyBenchOptions, r: &ApplyBenchResult) -> String {
    let per_file = opts.services * 2;
    let t = |v: &[Sample]| median(v.iter().map(|s| s.seconds).collect());
    let m = |v: &[Sample]| median(v.iter().map(|s| s.peak_mib).collect());
    let list = |v: &[Sample], f: fn(&Sample) -> f64| {
        v.iter()
            .map(|s| format!("{:.2}", f(s)))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut md = String::new();
    md.push_str("## Writes: `tartan-lab ctl apply` into an empty and a full store (issue 22, acceptance 4)\n\n");
    md.push_str(env);
    md.push_str(&format!(
        "\n\nOne file of {per_file} documents: {} ClusterIP Services (ClusterIP allocated, in 50 namespaces) and an EndpointSlice each (10 endpoints), applied with the real `tartan-lab ctl apply -f` (its `tartanctl` child writes; `bench/src/svcapply.rs`). Each case has a fresh single-member etcd and a lab state naming it, no nodes. **Empty**: the file into the empty store. **Full**: {} such files applied first ({} objects stored), then the measured file. Time is the whole command; memory the peak resident set (`ru_maxrss` from `wait4`: the larger of `tartan-lab` and `tartanctl`). {} runs, the two cases alternating which goes first; medians.\n\n",
        opts.services,
        opts.stored / per_file.max(1),
        opts.stored / per_file.max(1) * per_file,
        opts.runs
    ));
    md.push_str("| store | time (median) | peak RSS (median) | times, s | peaks, MiB |\n|---|---|---|---|---|\n");
    for (name, v) in [("empty", &r.empty), ("full", &r.full)] {
        md.push_str(&format!(
            "| {name} | {:.2} s | {:.1} MiB | {} | {} |\n",
            t(v),
            m(v),
            list(v, |s| s.seconds),
            list(v, |s| s.peak_mib)
        ));
    }
    md.push_str(&format!(
        "\nFull / empty: time **{:.2}×**, memory **{:.2}×** (goal: within 1.5× in both).\n",
        t(&r.full) / t(&r.empty),
        m(&r.full) / m(&r.empty)
    ));
    if let Some(first) = r.fill.first() {
        md.push_str(&format!(
            "\nThe fill applies of the first full run, in order (s / MiB): {}.\n",
            first
                .iter()
                .map(|s| format!("{:.2}/{:.1}", s.seconds, s.peak_mib))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    md
}
