//! `tartan-lab down`: stop the daemons and remove the namespaces, the
//! bridge and the state; also when the state is gone or half-written
//! (a crash), by the names a lab's parts always have.

use std::time::Duration;

use anyhow::Result;

use super::detached;
use super::state::{self, LabState, Proc};
use crate::netns::ip;

/// Processes whose command line mentions the lab's state directory (its
/// daemons all do: sockets, logs, etcd's data).
fn stray_processes(name: &str) -> Vec<Proc> {
    let needle = state::dir(name).display().to_string() + "/";
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in entries.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if pid == std::process::id() {
            continue;
        }
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains(&needle)
            && let Some(s) = detached::stat(pid)
        {
            // Its start time, read now, names it when it is signalled.
            out.push(Proc {
                pid,
                start: Some(s.start),
                log: Default::default(),
            });
        }
    }
    out
}

/// Whether process `pid` is in the named network namespace.
fn in_netns(pid: u32, ns: &str) -> bool {
    use std::os::unix::fs::MetadataExt;
    let (Ok(a), Ok(b)) = (
        std::fs::metadata(format!("/proc/{pid}/ns/net")),
        std::fs::metadata(format!("/run/netns/{ns}")),
    ) else {
        return false;
    };
    a.dev() == b.dev() && a.ino() == b.ino()
}

pub fn down(name: &str, say: &mut dyn FnMut(&str)) -> Result<()> {
    state::check_name(name)?;
    let st = LabState::load(name).ok();
    // Daemons first, so nothing re-creates what is being removed.
    let mut procs: Vec<Proc> = Vec::new();
    if let Some(st) = &st {
        for n in &st.nodes {
            procs.extend(n.bgpd.clone());
            procs.extend(n.felix.clone());
        }
        procs.extend(st.tor.clone());
        procs.extend(st.dns.clone());
        procs.extend(st.controllers.iter().cloned());
    }
    procs.extend(stray_processes(name));
    let mut seen = std::collections::HashSet::new();
    procs.retain(|p| seen.insert(p.pid));
    // The datastore last: etcd, or the API server stand-in.
    let etcd = st.as_ref().and_then(|s| {
        s.etcd
            .clone()
            .or_else(|| s.apiserver.as_ref().map(|a| a.proc.clone()))
    });
    if let Some(e) = &etcd {
        procs.retain(|p| p.pid != e.pid);
    }
    for p in procs.iter().filter(|p| detached::alive(p)) {
        detached::stop(p, Duration::from_secs(3));
    }
    if let Some(p) = &etcd
        && detached::alive(p)
    {
        detached::stop(p, Duration::from_secs(3));
    }
    // Each node's IPAM lock and the block names its plugin keeps.
    if let Some(st) = &st {
        for n in &st.nodes {
            let kubeconfig = super::apiserver::cni_kubeconfig(st, &n.name);
            let store = tartan_cni::plugin::lock::store_identity(
                &st.datastore,
                kubeconfig.as_deref().and_then(|k| k.to_str()),
            );
            tartan_cni::plugin::lock::forget(&n.name, &store);
        }
    }
    let mut removed = 0;
    let list = ip(&["netns", "list"]).unwrap_or_default();
    let node_prefix = format!("{name}-node-");
    let pod_prefix = format!("{name}-pod-");
    for line in list.lines() {
        let ns = line.split_whitespace().next().unwrap_or("");
        let ours = ns.starts_with(&pod_prefix)
            || ns == state::router_netns(name)
            || ns == state::tor_netns(name)
            || ns
                .strip_prefix(&node_prefix)
                .is_some_and(|rest| !rest.is_empty() && rest.chars().all(|c| c.is_ascii_digit()));
        if !ours {
            continue;
        }
        // Whatever still runs inside (a command started with `exec`): each
        // named by its start time as listed, so that a pid given to
        // another process since is not signalled.
        let listed: Vec<(u32, u64)> = ip(&["netns", "pids", ns])
            .unwrap_or_default()
            .split_whitespace()
            .filter_map(|pid| pid.parse::<u32>().ok())
            .filter_map(|pid| detached::stat(pid).map(|s| (pid, s.start)))
            .filter(|&(pid, _)| in_netns(pid, ns))
            .collect();
        for (pid, start) in listed {
            detached::signal_verified(pid, start, None, nix::sys::signal::Signal::SIGKILL);
        }
        if ip(&["netns", "del", ns]).is_ok() {
            removed += 1;
        }
    }
    // The pods' resolv.conf ([`super::dns`]), also of pods whose
    // namespace is already gone.
    if let Ok(dirs) = std::fs::read_dir("/etc/netns") {
        for d in dirs.flatten() {
            let n = d.file_name().to_string_lossy().into_owned();
            if n.starts_with(&pod_prefix) {
                super::dns::remove_pod_resolv(&n);
            }
        }
    }
    for bridge in [state::bridge_name(name), state::bridge2_name(name)] {
        if ip(&["link", "show", &bridge]).is_ok() {
            ip(&["link", "del", &bridge])?;
        }
    }
    let dir = state::dir(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir)?;
    }
    say(&format!(
        "lab {name} removed ({removed} namespaces, {} processes)",
        procs.len() + usize::from(etcd.is_some())
    ));
    Ok(())
}
