//! The per-node daemons (tartan-bgpd, tartan-felix): started detached in a
//! node's namespace, logging into the lab's directory, and restarted.

use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result, bail};

use super::detached;
use super::state::{self, LabState};
use crate::cni::tartan_bin_dir;

/// The per-node daemons.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Daemon {
    Bgpd,
    Felix,
}

impl Daemon {
    pub fn parse(s: &str) -> Result<Daemon> {
        match s {
            "bgpd" => Ok(Daemon::Bgpd),
            "felix" => Ok(Daemon::Felix),
            other => bail!("daemon {other:?}: bgpd or felix"),
        }
    }
}

/// Start node `i`'s `which`, detached, logging into the lab's directory.
pub fn start_daemon(st: &LabState, i: usize, which: Daemon) -> Result<state::Proc> {
    let n = &st.nodes[i];
    let bin = tartan_bin_dir();
    let dir = state::dir(&st.name);
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &n.netns]);
    let log = match which {
        Daemon::Bgpd => {
            cmd.arg(bin.join("tartan-bgpd"))
                .args(["--datastore", &st.datastore, "--node", &n.name, "--socket"])
                .arg(&n.bgp_socket);
            dir.join(format!("bgpd-{}.log", n.name))
        }
        Daemon::Felix => {
            cmd.arg(bin.join("tartan-felix")).args([
                "--datastore",
                &st.datastore,
                "--node",
                &n.name,
            ]);
            // felix keeps the CNI plugin's token, and installs the
            // conflist once it has one, as in deploy/.
            if let Some(k) = super::apiserver::cni_kubeconfig(st, &n.name) {
                cmd.arg("--cni-kubeconfig").arg(k);
                cmd.arg("--cni-conflist").arg(&n.conflist);
            }
            dir.join(format!("felix-{}.log", n.name))
        }
    };
    super::apiserver::datastore_env(&mut cmd, st, super::apiserver::Identity::Node);
    // Append: a restarted daemon's log follows its predecessor's.
    detached::spawn_appending(cmd, &log)
}

/// Stop node `node`'s `which` (SIGTERM, or SIGKILL when `kill`) and start
/// it again.
pub fn restart(name: &str, node: &str, which: Daemon, kill: bool) -> Result<()> {
    let mut st = LabState::load(name)?;
    let i = st
        .nodes
        .iter()
        .position(|n| n.name == node)
        .with_context(|| format!("lab {name} has no node {node}"))?;
    let old = match which {
        Daemon::Bgpd => st.nodes[i].bgpd.clone(),
        Daemon::Felix => st.nodes[i].felix.clone(),
    };
    if let Some(p) = old {
        if kill {
            detached::stop(&p, Duration::ZERO);
        } else {
            detached::stop(&p, Duration::from_secs(5));
        }
    }
    let p = start_daemon(&st, i, which)?;
    match which {
        Daemon::Bgpd => st.nodes[i].bgpd = Some(p),
        Daemon::Felix => st.nodes[i].felix = Some(p),
    }
    st.save()
}
