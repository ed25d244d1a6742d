//! A small cluster for exercising the CNI plugin: etcd on an underlay
//! bridge, node namespaces on it, an IP pool, and a runtime per node that
//! calls the plugins as a kubelet's container runtime would.

use std::sync::Arc;

use anyhow::{Context, Result};
use serde_json::{Value, json};
use tartan_api::resources::{IpPool, IpPoolSpec};
use tartan_api::store::typed::TypedStore;
use tartan_api::store::{Datastore, connect};

use crate::cni::{Call, Runtime};
use crate::etcd::EtcdCluster;
use crate::netns::Netns;
use crate::process::Daemon;
use crate::tempdir::TempDir;
use crate::underlay::Underlay;

/// The CNI network name the lab's conflists use.
pub const NETWORK: &str = "tartan-lab";

pub struct CniLab {
    pub underlay: Underlay,
    pub etcd: EtcdCluster,
    pub dir: TempDir,
    pub rt: tokio::runtime::Runtime,
    pub store: Arc<dyn Datastore>,
}

impl Drop for CniLab {
    /// The nodes' IPAM lock files and kept block names go with the lab.
    fn drop(&mut self) {
        let spec = self.etcd.datastore_spec();
        for i in 0..self.underlay.nodes.len() {
            tartan_cni::plugin::lock::forget(&Self::node_name(i), &spec);
        }
    }
}

impl CniLab {
    /// `nodes` node namespaces named `node-1`… in the datastore.
    pub fn new(nodes: usize) -> Result<Self> {
        let mut underlay = Underlay::new("cl")?;
        for _ in 0..nodes {
            underlay.add_node("cln")?;
        }
        let etcd = EtcdCluster::single_on(underlay.gateway.into())?;
        let dir = TempDir::new("cnilab")?;
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let spec = etcd.datastore_spec();
        let store = rt.block_on(connect(&spec, Some(std::time::Duration::from_secs(20))))?;
        Ok(CniLab {
            underlay,
            etcd,
            dir,
            rt,
            store,
        })
    }

    /// Create an IPPool.
    pub fn add_pool(&self, name: &str, cidr: &str, block_size: Option<u8>) -> Result<()> {
        let mut spec = IpPoolSpec::new(cidr);
        spec.block_size = block_size;
        self.rt
            .block_on(self.store.create_typed(&IpPool::new(name, spec)))
            .with_context(|| format!("create pool {name}"))?;
        Ok(())
    }

    pub fn node_name(i: usize) -> String {
        format!("node-{}", i + 1)
    }

    /// The `tartan` plugin's entry for node `i`; `ipam` adds keys to the
    /// IPAM section.
    pub fn tartan_entry(&self, i: usize, ipam: Value) -> Value {
        let mut ipam_section = json!({"type": "tartan-ipam", "releaseCooldownSeconds": 0});
        if let (Some(o), Some(extra)) = (ipam_section.as_object_mut(), ipam.as_object()) {
            o.extend(extra.clone());
        }
        json!({
            "type": "tartan",
            "datastore": self.etcd.datastore_spec(),
            "nodename": Self::node_name(i),
            "logFile": self.log_file().display().to_string(),
            "logLevel": "debug",
            "ipam": ipam_section,
        })
    }

    pub fn log_file(&self) -> std::path::PathBuf {
        self.dir.join("cni.log")
    }

    /// A conflist of `plugins` at `version`.
    pub fn conflist(version: &str, plugins: Vec<Value>) -> Value {
        json!({"cniVersion": version, "name": NETWORK, "plugins": plugins})
    }

    /// A runtime on node `i` running `conflist`.
    pub fn runtime(&self, i: usize, conflist: Value) -> Runtime {
        Runtime::new(conflist).in_netns(self.underlay.node(i).netns.name())
    }

    /// The plain conflist (`tartan` alone) for node `i`.
    pub fn plain(&self, i: usize) -> Runtime {
        self.runtime(
            i,
            Self::conflist("1.1.0", vec![self.tartan_entry(i, json!({}))]),
        )
    }

    /// A pod namespace and the call that wires it (container id from the
    /// namespace's name).
    pub fn pod(&self, ns: &str, name: &str) -> Result<(Netns, Call)> {
        let netns = Netns::new("clp")?;
        let id = format!("c{}", netns.name().replace('x', "0"));
        let call = Call::for_pod(&id, netns.name(), ns, name);
        Ok((netns, call))
    }

    /// The Node object of node `i`, with its BGP address annotation.
    pub fn add_node_object(&self, i: usize) -> Result<()> {
        let n: k8s_openapi::api::core::v1::Node = serde_json::from_value(json!({
            "metadata": {
                "name": Self::node_name(i),
                "annotations": {
                    "tartan.dev/bgp-ipv4-address": format!("{}/24", self.underlay.node(i).address)
                }
            }
        }))?;
        self.rt.block_on(self.store.create_typed(&n))?;
        Ok(())
    }

    /// tartan-bgpd (from the datastore, its control socket in `dir`) and
    /// tartan-felix (checking every second) in node `i`.
    pub fn start_node_daemons(&self, i: usize, dir: &TempDir) -> Result<(Daemon, Daemon)> {
        let ns = &self.underlay.node(i).netns;
        let name = Self::node_name(i);
        let store = self.etcd.datastore_spec();
        let bin = crate::cni::tartan_bin_dir();
        let mut bgpd = ns.command(&bin.join("tartan-bgpd").display().to_string());
        bgpd.args(["--datastore", &store, "--node", &name, "--socket"])
            .arg(dir.join(&format!("bgpd-{i}.sock")));
        let mut felix = ns.command(&bin.join("tartan-felix").display().to_string());
        felix.args([
            "--datastore",
            &store,
            "--node",
            &name,
            "--resync-seconds",
            "1",
        ]);
        Ok((
            Daemon::start(&format!("bgpd-{i}"), bgpd)?,
            Daemon::start(&format!("felix-{i}"), felix)?,
        ))
    }

    /// tartan-felix alone in node `i`, checking every second.
    pub fn start_felix(&self, i: usize) -> Result<Daemon> {
        let mut felix = self.underlay.node(i).netns.command(
            &crate::cni::tartan_bin_dir()
                .join("tartan-felix")
                .display()
                .to_string(),
        );
        felix.args([
            "--datastore",
            &self.etcd.datastore_spec(),
            "--node",
            &Self::node_name(i),
            "--resync-seconds",
            "1",
        ]);
        Daemon::start(&format!("felix-{i}"), felix)
    }

    /// A pod named `name` in `default` on node `i`, wired by the plain
    /// conflist; its namespace, call and IPv4 address.
    pub fn add_pod_on(&self, i: usize, name: &str) -> Result<(Netns, Call, String)> {
        let (ns, call) = self.pod("default", name)?;
        let r = self.plain(i).add(&call)?;
        let a = r["ips"][0]["address"]
            .as_str()
            .context("no address in the result")?
            .trim_end_matches("/32")
            .to_string();
        Ok((ns, call, a))
    }

    /// The plugins' log, for failure messages.
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_file()).unwrap_or_default()
    }
}
