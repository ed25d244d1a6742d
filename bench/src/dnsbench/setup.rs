//! Setting the benchmark up: the Services written to etcd, the name files
//! each server is given (hosts file, unbound's `local-data`, dnsperf's
//! queries), the servers started, and waiting for tartan-dns to load.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, TcpStream};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Result, bail};
use serde_json::json;
use tartan_api::store::etcd::EtcdStore;
use tartan_api::store::typed::TypedStore;
use tartan_lab::process::Daemon;
use tartan_lab::tempdir::TempDir;

use super::model::{
    DnsBenchOptions, HEALTH, NAMESPACES, UPSTREAM_PORT, cluster_ip, fqdn, namespace, port_of,
    service_name,
};

pub(super) fn k8s_service(i: usize) -> Result<k8s_openapi::api::core::v1::Service> {
    let ip = cluster_ip(i).to_string();
    Ok(serde_json::from_value(json!({
        "metadata": {"namespace": namespace(i), "name": service_name(i)},
        "spec": {"type": "ClusterIP", "clusterIP": ip, "clusterIPs": [ip],
                 "ports": [{"name": "http", "protocol": "TCP", "port": 80, "targetPort": 8080}]}
    }))?)
}

pub(super) fn k8s_slice(
    i: usize,
    per: usize,
) -> Result<k8s_openapi::api::discovery::v1::EndpointSlice> {
    let eps: Vec<_> = (0..per)
        .map(|j| {
            let a = Ipv4Addr::from(0x0a80_0000 + (i * per + j) as u32 + 1);
            json!({"addresses": [a.to_string()], "nodeName": format!("node-{}", j % 10),
                   "conditions": {"ready": true, "serving": true, "terminating": false}})
        })
        .collect();
    Ok(serde_json::from_value(json!({
        "metadata": {"namespace": namespace(i), "name": format!("{}-1", service_name(i)),
                     "labels": {"kubernetes.io/service-name": service_name(i)}},
        "addressType": "IPv4",
        "ports": [{"name": "http", "protocol": "TCP", "port": 8080}],
        "endpoints": eps
    }))?)
}

pub(super) fn k8s_namespace(n: usize) -> Result<k8s_openapi::api::core::v1::Namespace> {
    Ok(serde_json::from_value(
        json!({"metadata": {"name": format!("ns-{n:02}")}}),
    )?)
}

/// Writes the objects from 8 writers.
pub(super) fn fill(
    store: &Arc<EtcdStore>,
    rt: &tokio::runtime::Runtime,
    o: &DnsBenchOptions,
) -> Result<()> {
    rt.block_on(async {
        for n in 0..NAMESPACES {
            store.create_typed(&k8s_namespace(n)?).await?;
        }
        let per = o.endpoints;
        crate::benchkit::write_services(store, o.services, move |i| {
            Ok((k8s_service(i)?, k8s_slice(i, per)?))
        })
        .await?;
        anyhow::Ok(())
    })
}

/// `names` in a fixed shuffled order (a multiplicative step through them),
/// one `NAME A` line each.
pub(super) fn query_file(names: impl Fn(usize) -> String, n: usize) -> String {
    // Any step coprime to n visits every index once; there is one among
    // any n consecutive numbers.
    let step = (7919..).find(|s| gcd(*s, n.max(1)) == 1).unwrap_or(1);
    (0..n)
        .map(|i| format!("{} A\n", names((i * step) % n)))
        .collect()
}

pub(super) fn gcd(a: usize, b: usize) -> usize {
    if b == 0 { a } else { gcd(b, a % b) }
}

pub(super) fn hosts(
    names: impl Fn(usize) -> String,
    ip: impl Fn(usize) -> Ipv4Addr,
    n: usize,
) -> String {
    (0..n)
        .map(|i| format!("{} {}\n", ip(i), names(i)))
        .collect()
}

pub(super) fn dnsmasq(
    name: &str,
    port: u16,
    hosts: &std::path::Path,
    extra: &[String],
) -> Result<Daemon> {
    let mut cmd = Command::new("dnsmasq");
    cmd.args([
        "-k",
        "-C",
        "/dev/null",
        &format!("--port={port}"),
        "--listen-address=127.0.0.1",
        "--bind-interfaces",
        "--no-resolv",
        "--no-hosts",
        &format!("--addn-hosts={}", hosts.display()),
        "--user=root",
        "--log-facility=-",
    ]);
    cmd.args(extra);
    Daemon::start(name, cmd)
}

pub(super) fn unbound_conf(dir: &TempDir, o: &DnsBenchOptions) -> Result<std::path::PathBuf> {
    let mut c = format!(
        "server:\n  interface: 127.0.0.1\n  port: {}\n  do-daemonize: no\n  username: \"\"\n  chroot: \"\"\n  directory: \"{}\"\n  pidfile: \"\"\n  use-syslog: no\n  logfile: \"\"\n  verbosity: 0\n  access-control: 127.0.0.0/8 allow\n  do-not-query-localhost: no\n  module-config: \"iterator\"\n  do-ip6: no\n  local-zone: \"cluster.local.\" static\n  local-zone: \"test.\" nodefault\n",
        port_of("unbound"),
        dir.path().display()
    );
    for i in 0..o.services {
        let _ = writeln!(c, "  local-data: \"{}. 5 IN A {}\"", fqdn(i), cluster_ip(i));
    }
    let _ = write!(
        c,
        "forward-zone:\n  name: \".\"\n  forward-addr: 127.0.0.1@{UPSTREAM_PORT}\n"
    );
    dir.write("unbound.conf", c)
}

pub(super) fn http_get(addr: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr.parse().ok()?, Duration::from_secs(1)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: x\r\n\r\n").ok()?;
    let mut out = String::new();
    s.read_to_string(&mut out).ok()?;
    let code = out.split_whitespace().nth(1)?.parse().ok()?;
    let body = out.split_once("\r\n\r\n").map(|(_, b)| b.to_string())?;
    Some((code, body))
}

pub(super) fn gauge(metrics: &str, name: &str) -> Option<usize> {
    metrics.lines().find_map(|l| {
        let rest = l.strip_prefix(name)?.trim();
        rest.parse::<f64>().ok().map(|v| v as usize)
    })
}

/// Waits until tartan-dns is ready and holds every Service and slice.
pub(super) fn wait_loaded(dns: &Daemon, o: &DnsBenchOptions, limit: Duration) -> Result<()> {
    let t = Instant::now();
    loop {
        let ready = http_get(HEALTH, "/readyz").is_some_and(|(c, _)| c == 200);
        let metrics = if ready {
            http_get(HEALTH, "/metrics").map(|(_, m)| m)
        } else {
            None
        };
        if let Some(m) = metrics {
            let s = gauge(&m, "tartan_dns_services");
            let e = gauge(&m, "tartan_dns_endpoint_slices");
            if s == Some(o.services) && e == Some(o.services) {
                return Ok(());
            }
        }
        if !dns.is_running() {
            bail!("tartan-dns exited:\n{}", dns.log_tail(20));
        }
        if t.elapsed() > limit {
            bail!(
                "tartan-dns did not load {} Services in {limit:?}:\n{}",
                o.services,
                dns.log_tail(20)
            );
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_file_names_every_service_once() {
        for n in [1, 7, 50, 7919, 10_000] {
            let f = query_file(fqdn, n);
            let mut lines: Vec<&str> = f.lines().collect();
            assert_eq!(lines.len(), n);
            lines.sort();
            lines.dedup();
            assert_eq!(lines.len(), n, "{n}: a name twice");
        }
    }
}
