//! What a lab is made of, saved as JSON so that later commands (and
//! `down` after a crash) find it.

use std::net::{Ipv4Addr, Ipv6Addr};
use std::path::{Path, PathBuf};

use anyhow::{Context, Result, bail};
use serde::{Deserialize, Serialize};

/// Where labs keep their state.
pub const STATE_ROOT: &str = "/run/tartan-lab";

/// The default IPPool a lab applies.
pub const DEFAULT_POOL: &str = "10.244.0.0/16";

/// The IPv6 pool of a `--dual-stack` lab.
pub const DEFAULT_POOL6: &str = "fd00:10:244::/56";

/// Where a lab's ClusterIPs come from (kubeadm's default).
pub const DEFAULT_SERVICE_CIDR: &str = "10.96.0.0/16";

/// Where a lab's LoadBalancer ingress IPs come from: TEST-NET-1 (RFC
/// 5737), which no real network uses, so that it cannot shadow one.
pub const DEFAULT_LB_CIDR: &str = "192.0.2.0/24";

fn default_service_cidr() -> String {
    DEFAULT_SERVICE_CIDR.into()
}

fn default_lb_cidr() -> String {
    DEFAULT_LB_CIDR.into()
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Proc {
    pub pid: u32,
    /// The process's start time (clock ticks after boot, field 22 of
    /// `/proc/PID/stat`): with the pid, it names the process; a pid alone
    /// may since have been given to another one. None in a state written
    /// before it was recorded: such a process is never signalled.
    #[serde(default)]
    pub start: Option<u64>,
    pub log: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct NodeState {
    pub name: String,
    pub netns: String,
    pub address: Ipv4Addr,
    /// A dual-stack lab's: the node's IPv6 underlay address.
    #[serde(default)]
    pub address6: Option<Ipv6Addr>,
    pub bgpd: Option<Proc>,
    pub felix: Option<Proc>,
    pub bgp_socket: PathBuf,
    pub conflist: PathBuf,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct LabState {
    pub name: String,
    pub subnet: String,
    pub gateway: Ipv4Addr,
    pub bridge: String,
    pub etcd: Option<Proc>,
    /// The `--datastore` value for tartanctl and the daemons.
    pub datastore: String,
    pub nodes: Vec<NodeState>,
    pub topology: String,
    /// two-subnets: the subnet behind the router.
    #[serde(default)]
    pub subnet2: Option<String>,
    /// tor: the BIRD router.
    #[serde(default)]
    pub tor: Option<Proc>,
    /// ClusterIPs are allocated from here.
    #[serde(default = "default_service_cidr")]
    pub service_cidr: String,
    /// A dual-stack lab's IPv6 service range (the second family's):
    /// IPv6 ClusterIPs are allocated from here ([`super::ranges6`]).
    #[serde(default)]
    pub service_cidr6: Option<String>,
    /// LoadBalancer ingress IPs come from here: the LoadBalancerIPPool
    /// `lab-lb` of it, which tartan-controllers give from.
    #[serde(default = "default_lb_cidr")]
    pub lb_cidr: String,
    /// A dual-stack lab's IPv6 network of the LoadBalancerIPPool `lab-lb`.
    #[serde(default)]
    pub lb_cidr6: Option<String>,
    /// tartan-dns, in node-1's namespace ([`super::dns`]).
    #[serde(default)]
    pub dns: Option<Proc>,
    /// tartan-controllers' replicas ([`super::controllers`]).
    #[serde(default)]
    pub controllers: Vec<Proc>,
    /// On the Kubernetes datastore: the API server stand-in
    /// ([`super::apiserver`]), in place of etcd.
    #[serde(default)]
    pub apiserver: Option<ApiServerState>,
}

/// The API server stand-in of a lab on the Kubernetes datastore.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ApiServerState {
    pub proc: Proc,
    /// Its URL, as the kubeconfigs name it.
    pub url: String,
    /// Where its kubeconfigs (`kubeconfig-<identity>`) are.
    pub dir: PathBuf,
}

/// A lab name: lower-case letters, digits and '-', 1 to 10 characters (it
/// prefixes interface names, which the kernel caps at 15).
pub fn check_name(name: &str) -> Result<()> {
    let ok = (1..=10).contains(&name.len())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
        && !name.starts_with('-');
    if !ok {
        bail!("lab name {name:?}: use 1 to 10 lower-case letters, digits and '-'");
    }
    Ok(())
}

pub fn dir(name: &str) -> PathBuf {
    Path::new(STATE_ROOT).join(name)
}

pub fn bridge_name(name: &str) -> String {
    format!("{name}-br")
}

/// two-subnets: the bridge of the second subnet.
pub fn bridge2_name(name: &str) -> String {
    format!("{name}-br2")
}

/// tor: the top-of-rack router's namespace.
pub fn tor_netns(name: &str) -> String {
    format!("{name}-tor")
}

/// two-subnets: the router joining the subnets.
pub fn router_netns(name: &str) -> String {
    format!("{name}-router")
}

pub fn node_netns(name: &str, node: &str) -> String {
    format!("{name}-{node}")
}

pub fn pod_netns(name: &str, ns: &str, pod: &str) -> String {
    format!("{name}-pod-{ns}-{pod}")
}

impl LabState {
    pub fn path(name: &str) -> PathBuf {
        dir(name).join("state.json")
    }

    pub fn load(name: &str) -> Result<LabState> {
        let p = Self::path(name);
        let text = std::fs::read_to_string(&p).with_context(|| {
            format!(
                "no lab named {name} (no {}); start one with `tartan-lab up`",
                p.display()
            )
        })?;
        serde_json::from_str(&text).with_context(|| format!("{} is unreadable", p.display()))
    }

    pub fn save(&self) -> Result<()> {
        std::fs::create_dir_all(dir(&self.name))?;
        let tmp = dir(&self.name).join("state.json.tmp");
        std::fs::write(&tmp, serde_json::to_string_pretty(self)?)?;
        std::fs::rename(&tmp, Self::path(&self.name))?;
        Ok(())
    }

    pub fn node(&self, node: &str) -> Result<&NodeState> {
        self.nodes.iter().find(|n| n.name == node).with_context(|| {
            let names: Vec<&str> = self.nodes.iter().map(|n| n.name.as_str()).collect();
            format!(
                "lab {} has no node {node}; it has {}",
                self.name,
                names.join(", ")
            )
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        assert!(check_name("tartan").is_ok());
        assert!(check_name("a-1").is_ok());
        for bad in ["", "Tartan", "x_y", "-a", "elevenchars"] {
            assert!(check_name(bad).is_err(), "{bad}");
        }
        assert!(bridge_name("abcdefghij").len() <= 15);
        assert!(node_netns("t", "node-1") == "t-node-1");
    }

    #[test]
    fn a_state_written_before_dual_stack_still_loads() {
        // As a single-stack lab saved it: no service_cidr6, lb_cidr6 or
        // address6.
        let old = r#"{
            "name": "t", "subnet": "172.30.0.0/24", "gateway": "172.30.0.1",
            "bridge": "t-br", "etcd": null, "datastore": "etcd",
            "nodes": [{"name": "node-1", "netns": "t-node-1", "address": "172.30.0.11",
                       "bgpd": null, "felix": null, "bgp_socket": "/tmp/t/bgp.sock",
                       "conflist": "/tmp/t/10-tartan.conflist"}],
            "topology": "flat", "service_cidr": "10.96.0.0/16", "lb_cidr": "192.0.2.0/24"
        }"#;
        let s: LabState = serde_json::from_str(old).unwrap();
        assert_eq!(s.service_cidr6, None);
        assert_eq!(s.lb_cidr6, None);
        assert_eq!(s.nodes[0].address6, None);
        assert_eq!(s.service_cidr, DEFAULT_SERVICE_CIDR);
        // And it is saved back without inventing them.
        let again: LabState = serde_json::from_str(&serde_json::to_string(&s).unwrap()).unwrap();
        assert_eq!(again.service_cidr6, None);
        assert_eq!(again.nodes[0].address6, None);
    }
}
