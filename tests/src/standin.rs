//! The API server stand-in (`tartan-apiserver`) in a network namespace of
//! its own, for running the daemons with `--datastore kubernetes` against
//! it: its listener bound on that namespace's loopback (so felix's
//! nftables and bgpd's port 179 stay in the namespace), a kubeconfig per
//! client with a token of its identity, and the store at hand to seed and
//! to read.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use serde_json::Value;
use tartan_api::store::memory::MemoryStore;
use tartan_api::store::{Datastore, DynamicObject, ObjectKey};
use tartan_apiserver::{ApiServer, Policy, Recorded, Running};
use tartan_lab::netns::Netns;
use tartan_lab::{Daemon, TempDir};

/// Fields drop in order: the server stops before its runtime, the
/// namespace (and anything left in it) goes last.
pub struct StandIn {
    pub running: Running,
    pub rt: tokio::runtime::Runtime,
    pub dir: TempDir,
    pub netns: Netns,
}

impl StandIn {
    /// A stand-in in a new namespace `<prefix>…`, judging requests by
    /// `policy` without refusing any (so that every daemon does all its
    /// work and every request it makes is seen).
    pub fn new(prefix: &str, policy: Policy) -> Result<StandIn> {
        Self::with_server(prefix, ApiServer::new().with_policy(policy, false))
    }

    /// `server` (its policy, token lifetime, …) in a new namespace
    /// `<prefix>…`.
    pub fn with_server(prefix: &str, server: ApiServer) -> Result<StandIn> {
        let netns = Netns::new(prefix)?;
        let listener = std::thread::scope(|s| {
            s.spawn(|| -> Result<std::net::TcpListener> {
                // This thread ends here, in the namespace.
                netns.enter_current_thread()?;
                Ok(std::net::TcpListener::bind("127.0.0.1:0")?)
            })
            .join()
        })
        .map_err(|_| anyhow::anyhow!("the thread binding the listener panicked"))?
        .context("listen inside the namespace")?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let running = rt.block_on(server.start_on(listener))?;
        Ok(StandIn {
            running,
            rt,
            dir: TempDir::new("standin")?,
            netns,
        })
    }

    pub fn store(&self) -> &MemoryStore {
        &self.running.server.store
    }

    /// A kubeconfig file for `client`, authenticating as `user`.
    pub fn kubeconfig(&self, user: &str, client: &str) -> Result<PathBuf> {
        let text = self.running.kubeconfig_for(user, client);
        self.dir.write(&format!("kubeconfig-{client}"), text)
    }

    /// `program ARGS…` in the namespace as `client` of `user`.
    pub fn command(&self, program: &Path, user: &str, client: &str) -> Result<Command> {
        let kubeconfig = self.kubeconfig(user, client)?;
        let mut cmd = self.netns.command(&program.display().to_string());
        cmd.env("KUBECONFIG", kubeconfig);
        for proxy in ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"] {
            cmd.env_remove(proxy);
        }
        Ok(cmd)
    }

    /// A daemon started as [`command`](Self::command) makes it.
    pub fn daemon(
        &self,
        program: &Path,
        args: &[&str],
        user: &str,
        client: &str,
    ) -> Result<Daemon> {
        let mut cmd = self.command(program, user, client)?;
        cmd.args(args);
        Daemon::start(client, cmd)
    }

    /// Store an object given as JSON.
    pub fn create(&self, obj: Value) -> Result<DynamicObject> {
        let o: DynamicObject = serde_json::from_value(obj).context("an object")?;
        let what = format!("{:?}", o.metadata.name);
        self.rt
            .block_on(self.store().create(o))
            .with_context(|| format!("create {what}"))
    }

    pub fn get(&self, key: &ObjectKey) -> Option<DynamicObject> {
        self.rt.block_on(self.store().get(key)).ok()
    }

    /// Rewrite an object through `f` (compare-and-swap, retried).
    pub fn modify(&self, key: &ObjectKey, f: impl Fn(&mut DynamicObject)) -> Result<()> {
        for _ in 0..10 {
            let mut o = self.rt.block_on(self.store().get(key))?;
            f(&mut o);
            if self.rt.block_on(self.store().update(o)).is_ok() {
                return Ok(());
            }
        }
        anyhow::bail!("{key} kept changing under the update")
    }

    pub fn delete(&self, key: &ObjectKey) -> Result<()> {
        Ok(self.rt.block_on(self.store().delete(key, None))?)
    }

    /// Objects of `kind` (cluster-wide).
    pub fn list(&self, kind: tartan_api::kind::Kind) -> Vec<DynamicObject> {
        self.rt
            .block_on(self.store().list(kind, None))
            .map(|l| l.items)
            .unwrap_or_default()
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.running.requests()
    }
}

/// Polls `f` every 100 ms until it holds; fails naming `what` after
/// `limit` (an upper bound for a slow machine, not a measurement).
pub fn wait_until(what: &str, limit: Duration, mut f: impl FnMut() -> bool) -> Result<()> {
    let t = Instant::now();
    while !f() {
        if t.elapsed() > limit {
            anyhow::bail!("{what}: not within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    Ok(())
}
