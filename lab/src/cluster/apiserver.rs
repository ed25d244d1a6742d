//! The lab on the Kubernetes datastore: the API server stand-in
//! (`tartan-apiserver`) runs where etcd would, judging every request by
//! the RBAC of deploy/ and refusing (403) what its roles do not grant.
//! Each program of the lab gets the kubeconfig of the identity deploy/
//! gives it: the node's daemons the node agent's service account, the CNI
//! plugin a token of its own that felix renews, tartan-controllers and
//! tartan-dns their own, and the
//! operator's tools (`tartan-lab ctl`, and the lab itself where it plays
//! kubelet and the API server's own controllers) the cluster admin.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

use super::detached;
use super::state::{ApiServerState, LabState};
use crate::cni::tartan_bin_dir;

/// How long the lab's tokens live: an hour, as the API server's default
/// TokenRequest; their files are rewritten every third of it.
const TOKEN_LIFETIME_SECONDS: u64 = 3600;

/// Who a program of the lab is to the API server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity {
    /// tartan-bgpd and tartan-felix (the DaemonSet's service account).
    Node,
    /// tartan-controllers.
    Controllers,
    /// tartan-dns.
    Dns,
    /// The operator (tartanctl), and the lab where it stands in for the
    /// kubelet and the control plane.
    Admin,
}

impl Identity {
    /// The kubeconfig's file name in the stand-in's directory.
    pub fn file(self) -> &'static str {
        match self {
            Identity::Node => "kubeconfig-tartan-system.tartan-node",
            Identity::Controllers => "kubeconfig-tartan-system.tartan-controllers",
            Identity::Dns => "kubeconfig-kube-system.tartan-dns",
            Identity::Admin => "kubeconfig-admin",
        }
    }
}

/// The kubeconfig of `who` in lab `st`; None on etcd.
pub fn kubeconfig(st: &LabState, who: Identity) -> Option<PathBuf> {
    st.apiserver.as_ref().map(|a| a.dir.join(who.file()))
}

/// The kubeconfig the CNI plugin of `node` reads; None on etcd. As in
/// deploy/, felix writes it: a token of the `tartan-cni` service account
/// (TokenRequest), renewed before it expires (docs/install.md).
pub fn cni_kubeconfig(st: &LabState, node: &str) -> Option<PathBuf> {
    st.apiserver
        .as_ref()
        .map(|a| a.dir.join(format!("cni-kubeconfig-{node}")))
}

/// Waits until felix of every node has written its CNI plugin's
/// kubeconfig and then installed the conflist (nothing to wait for on
/// etcd).
pub fn wait_cni_kubeconfigs(st: &LabState, limit: Duration) -> Result<()> {
    let deadline = Instant::now() + limit;
    for n in &st.nodes {
        let Some(kubeconfig) = cni_kubeconfig(st, &n.name) else {
            continue;
        };
        for (path, what) in [
            (&kubeconfig, "wrote no CNI kubeconfig"),
            (&n.conflist, "installed no conflist"),
        ] {
            while !path.exists() {
                if Instant::now() > deadline {
                    bail!(
                        "felix on {} {what} ({}) in {limit:?}; see its log",
                        n.name,
                        path.display()
                    );
                }
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    Ok(())
}

/// Gives `cmd` (a program run with `--datastore <st.datastore>`) the
/// kubeconfig of `who` on the Kubernetes datastore, and no proxy between
/// it and the stand-in.
pub fn datastore_env(cmd: &mut Command, st: &LabState, who: Identity) {
    if let Some(k) = kubeconfig(st, who) {
        cmd.env("KUBECONFIG", k);
        for proxy in [
            "HTTPS_PROXY",
            "https_proxy",
            "HTTP_PROXY",
            "http_proxy",
            "ALL_PROXY",
            "all_proxy",
        ] {
            cmd.env_remove(proxy);
        }
    }
}

/// deploy/, whose RBAC the stand-in enforces: `TARTAN_LAB_DEPLOY`, else
/// the source tree's.
pub fn deploy_dir() -> PathBuf {
    std::env::var_os("TARTAN_LAB_DEPLOY")
        .map(PathBuf::from)
        .unwrap_or_else(|| Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy"))
}

/// Starts the stand-in on `host` (a free port), its kubeconfigs in
/// `dir`; waits until it has written every one the lab hands out.
pub fn start(host: Ipv4Addr, dir: &Path, log: &Path) -> Result<ApiServerState> {
    let bin = tartan_bin_dir().join("tartan-apiserver");
    if !bin.is_file() {
        bail!(
            "{} is not built (cargo build --workspace --bins)",
            bin.display()
        );
    }
    let deploy = deploy_dir();
    if !deploy.is_dir() {
        bail!(
            "{} is missing: the stand-in enforces deploy/'s RBAC; set TARTAN_LAB_DEPLOY to the folder",
            deploy.display()
        );
    }
    std::fs::create_dir_all(dir).with_context(|| format!("create {}", dir.display()))?;
    let mut cmd = Command::new(&bin);
    cmd.arg("--listen")
        .arg(format!("{host}:0"))
        .arg("--dir")
        .arg(dir)
        .arg("--rbac")
        .arg(&deploy)
        .arg("--enforce")
        // kubectl sends no token to a plain-HTTP server: what comes
        // without one is the operator's (the daemons always send theirs).
        .arg("--insecure-admin")
        // Tokens that expire, rotated in their files as a kubelet rotates
        // projected tokens (each kubeconfig reads its token from a file).
        .arg("--token-lifetime")
        .arg(TOKEN_LIFETIME_SECONDS.to_string());
    let proc = detached::spawn(cmd, log)?;
    // The URL is written after the kubeconfigs: with it, all are there.
    let url_file = dir.join("url");
    let deadline = Instant::now() + Duration::from_secs(30);
    let url = loop {
        if let Ok(url) = std::fs::read_to_string(&url_file)
            && !url.trim().is_empty()
        {
            break url.trim().to_string();
        }
        if !detached::alive(&proc) {
            bail!("tartan-apiserver exited; see {}", log.display());
        }
        if Instant::now() > deadline {
            detached::stop(&proc, Duration::from_secs(3));
            bail!(
                "tartan-apiserver wrote no URL in 30 s; see {}",
                log.display()
            );
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    for who in [
        Identity::Node,
        Identity::Controllers,
        Identity::Dns,
        Identity::Admin,
    ] {
        let k = dir.join(who.file());
        if !k.is_file() {
            detached::stop(&proc, Duration::from_secs(3));
            bail!(
                "tartan-apiserver wrote no {}: does {} still have that service account?",
                k.display(),
                deploy.display()
            );
        }
    }
    Ok(ApiServerState {
        proc,
        url,
        dir: dir.to_path_buf(),
    })
}
