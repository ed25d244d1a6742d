//! The lab's cluster DNS, as a cluster with kube-dns has it: tartan-dns
//! runs in node-1's namespace (like a host-network pod), behind the Service
//! `kube-system/kube-dns` at the tenth address of the service range
//! (10.96.0.10 by default), whose EndpointSlice names node-1; and every
//! pod's resolver points there, with the cluster's search path, through
//! `/etc/netns/<pod namespace>/resolv.conf` (which `ip netns exec`, and so
//! `tartan-lab exec`, mounts over `/etc/resolv.conf`).

use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use ipnet::Ipv4Net;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use serde_json::json;
use tartan_api::store::StoreError;
use tartan_api::store::typed::TypedStore;

use super::detached;
use super::runtime::runtime;
use super::state::{self, LabState};
use crate::cni::tartan_bin_dir;

pub const DOMAIN: &str = "cluster.local";
pub const NAMESPACE: &str = "kube-system";
pub const SERVICE: &str = "kube-dns";
/// Where tartan-dns answers /livez, /readyz and /metrics, on node-1.
pub const HEALTH_PORT: u16 = 9153;

/// The DNS Service's ClusterIP: the tenth address of the service range,
/// as kubeadm gives it.
pub fn service_ip(service_cidr: &str) -> Result<Ipv4Addr> {
    let net: Ipv4Net = service_cidr
        .parse()
        .with_context(|| format!("service range {service_cidr:?}"))?;
    let ip = u32::from(net.network()) + 10;
    let ip = Ipv4Addr::from(ip);
    if !net.contains(&ip) || ip == net.broadcast() {
        bail!("service range {service_cidr} has no tenth address for the DNS Service");
    }
    Ok(ip)
}

/// A pod's resolv.conf, as the kubelet writes it for `dnsPolicy:
/// ClusterFirst`.
pub fn resolv_conf(nameserver: Ipv4Addr, namespace: &str) -> String {
    format!(
        "nameserver {nameserver}\nsearch {namespace}.svc.{DOMAIN} svc.{DOMAIN} {DOMAIN}\noptions ndots:5\n"
    )
}

/// `/etc/netns/<netns>`: what `ip netns exec` mounts over `/etc`.
fn etc_dir(netns: &str) -> PathBuf {
    PathBuf::from("/etc/netns").join(netns)
}

/// Gives the pod in `netns` (of Kubernetes namespace `namespace`) the
/// cluster's resolver.
pub fn write_pod_resolv(st: &LabState, netns: &str, namespace: &str) -> Result<()> {
    let dir = etc_dir(netns);
    std::fs::create_dir_all(&dir).with_context(|| format!("create {}", dir.display()))?;
    let ip = service_ip(&st.service_cidr)?;
    std::fs::write(dir.join("resolv.conf"), resolv_conf(ip, namespace))
        .with_context(|| format!("write {}/resolv.conf", dir.display()))
}

/// Removes what [`write_pod_resolv`] wrote (nothing there is fine).
pub fn remove_pod_resolv(netns: &str) {
    let _ = std::fs::remove_dir_all(etc_dir(netns));
}

fn objects(st: &LabState, node1: Ipv4Addr) -> Result<(Namespace, Service, EndpointSlice)> {
    let ip = service_ip(&st.service_cidr)?.to_string();
    let ns = serde_json::from_value(json!({
        "metadata": {"name": NAMESPACE, "labels": {"kubernetes.io/metadata.name": NAMESPACE}}
    }))?;
    let svc = serde_json::from_value(json!({
        "metadata": {"name": SERVICE, "namespace": NAMESPACE,
                     "labels": {"k8s-app": "kube-dns"}},
        "spec": {"clusterIP": ip, "clusterIPs": [ip], "type": "ClusterIP",
                 "ports": [
                     {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": 53},
                     {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": 53},
                     {"name": "metrics", "port": HEALTH_PORT, "protocol": "TCP",
                      "targetPort": HEALTH_PORT}]}
    }))?;
    let slice = serde_json::from_value(json!({
        "metadata": {"name": format!("{SERVICE}-lab"), "namespace": NAMESPACE,
                     "labels": {"kubernetes.io/service-name": SERVICE}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": [node1.to_string()], "nodeName": "node-1",
                       "conditions": {"ready": true, "serving": true, "terminating": false}}],
        "ports": [
            {"name": "dns", "port": 53, "protocol": "UDP"},
            {"name": "dns-tcp", "port": 53, "protocol": "TCP"},
            {"name": "metrics", "port": HEALTH_PORT, "protocol": "TCP"}]
    }))?;
    Ok((ns, svc, slice))
}

/// Writes the DNS Service and its EndpointSlice (kept as they are when
/// they exist: a lab brought up again on its datastore).
fn write_objects(st: &LabState, node1: Ipv4Addr) -> Result<()> {
    let (ns, svc, slice) = objects(st, node1)?;
    runtime()?.block_on(async {
        let store = super::store::open(st, Duration::from_secs(10)).await?;
        for r in [
            store.create_typed(&ns).await.map(|_| ()),
            store.create_typed(&svc).await.map(|_| ()),
            store.create_typed(&slice).await.map(|_| ()),
        ] {
            match r {
                Ok(()) | Err(StoreError::AlreadyExists(_)) => {}
                Err(e) => return Err(anyhow::Error::from(e)),
            }
        }
        Ok(())
    })
}

/// Starts tartan-dns in node-1's namespace and writes its Service; waits
/// until it has listed the datastore (`/readyz`).
pub fn start(st: &LabState) -> Result<state::Proc> {
    let node = st.nodes.first().context("a lab without nodes has no DNS")?;
    let bin = tartan_bin_dir().join("tartan-dns");
    if !bin.exists() {
        bail!(
            "{} is not built (cargo build --workspace --bins)",
            bin.display()
        );
    }
    write_objects(st, node.address)?;
    let mut cmd = Command::new("ip");
    cmd.args(["netns", "exec", &node.netns]).arg(&bin).args([
        "--datastore",
        &st.datastore,
        "--listen",
        "0.0.0.0:53",
        "--health-address",
        &format!("0.0.0.0:{HEALTH_PORT}"),
        "--domain",
        DOMAIN,
    ]);
    super::apiserver::datastore_env(&mut cmd, st, super::apiserver::Identity::Dns);
    let log = state::dir(&st.name).join("dns.log");
    let p = detached::spawn(cmd, &log)?;
    let addr = std::net::SocketAddr::from((node.address, HEALTH_PORT));
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if ready(addr) {
            return Ok(p);
        }
        if !detached::alive(&p) {
            bail!("tartan-dns exited; see {}", log.display());
        }
        if Instant::now() > deadline {
            bail!("tartan-dns not ready after 30 s; see {}", log.display());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `GET /readyz` answered 200.
fn ready(addr: std::net::SocketAddr) -> bool {
    use std::io::{Read, Write};
    let Ok(mut s) = std::net::TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(1)));
    if s.write_all(b"GET /readyz HTTP/1.0\r\n\r\n").is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.") && &head[9..12] == b"200"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_dns_address_is_the_tenth_of_the_service_range() {
        assert_eq!(
            service_ip("10.96.0.0/16").unwrap(),
            "10.96.0.10".parse::<Ipv4Addr>().unwrap()
        );
        assert_eq!(
            service_ip("172.20.8.0/24").unwrap(),
            "172.20.8.10".parse::<Ipv4Addr>().unwrap()
        );
        assert!(service_ip("10.96.0.0/29").is_err());
        assert!(service_ip("10.96.0.0/28").is_ok());
        assert!(service_ip("nonsense").is_err());
    }

    #[test]
    fn a_pods_resolver_searches_its_namespace_first() {
        assert_eq!(
            resolv_conf("10.96.0.10".parse().unwrap(), "web"),
            "nameserver 10.96.0.10\nsearch web.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"
        );
    }
}
