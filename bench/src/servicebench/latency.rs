//! Connection latency to a ClusterIP among few and many Services, and how
//! the connections spread over the endpoints.

use std::collections::BTreeMap;
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::Duration;

use anyhow::{Result, bail};
use tartan_felix::dataplane::nft::Written;

use super::figures::*;
use super::objects::*;
use super::options::*;
use super::sync::*;
use crate::benchkit::{in_ns, interleaved, median_us, serve, wake, wire_pod};
use tartan_lab::netns::Netns;

pub(super) fn latency(
    node: &Netns,
    o: &ServiceBenchOptions,
    fig: &mut Figures,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    let per = o.endpoints;
    let client = Netns::new("tsbc")?;
    let server = Netns::new("tsbs")?;
    wire_pod(node, &client, CLIENT_IFACE, &[CLIENT_ADDR])?;
    let addrs: Vec<Ipv4Addr> = (0..per).map(server_addr).collect();
    wire_pod(node, &server, SERVER_IFACE, &addrs)?;
    node.exec("sysctl", &["-qw", "net.ipv4.ip_forward=1"])?;
    let to = [
        SocketAddr::from((MEASURED_IP, SERVICE_PORT)),
        SocketAddr::from((server_addr(0), TARGET_PORT)),
    ];
    let stop = AtomicBool::new(false);
    let (ready_tx, ready_rx) = mpsc::channel::<Result<()>>();
    std::thread::scope(|s| -> Result<()> {
        let stop = &stop;
        let srv = &server;
        let t = s.spawn(move || serve(srv, TARGET_PORT, stop, ready_tx));
        let r = (|| -> Result<()> {
            ready_rx.recv()??;
            // Without the table nothing answers at the ClusterIP.
            in_ns(node, || {
                delete_table();
                Ok(())
            })?;
            let refused = in_ns(&client, || {
                Ok(TcpStream::connect_timeout(&to[0], Duration::from_millis(300)).is_err())
            })?;
            if !refused {
                bail!("the ClusterIP answered without the service table");
            }
            let mut small = table_of(o.latency_sizes[0], per);
            in_ns(node, || Ok(small.sync(false)?))?;
            // Which endpoints answer (the node's conntrack entries).
            in_ns(&client, || crate::benchkit::connections(to[0], 200))?;
            fig.spread = spread(node, &addrs);
            fig.enforced = format!(
                "checked: without the table the connection to {} fails; with it, 200 connections reached {} of the {} endpoints",
                to[0],
                fig.spread.len(),
                per
            );
            drop(small);
            for r in 0..o.runs {
                let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
                let mut m = [[0.0; 2]; 2];
                for v in order {
                    let n = o.latency_sizes[v];
                    let mut p = table_of(n, per);
                    let w = in_ns(node, || Ok(p.sync(false)?))?;
                    let Written::Full(took) = w else {
                        bail!("the table write was {w:?}");
                    };
                    [&mut fig.swaps_small, &mut fig.swaps_large][v].push(took);
                    drop(p);
                    let [x, y] = in_ns(&client, || {
                        interleaved(to, o.connections, o.connections.min(100))
                    })?;
                    m[v] = [median_us(&x), median_us(&y)];
                }
                log(&format!(
                    "latency run {r}: {} Services {:.1} µs (direct {:.1} µs), {} Services {:.1} µs (direct {:.1} µs)",
                    o.latency_sizes[0], m[0][0], m[0][1], o.latency_sizes[1], m[1][0], m[1][1]
                ));
                fig.svc_small.push(m[0][0]);
                fig.direct_small.push(m[0][1]);
                fig.svc_large.push(m[1][0]);
                fig.direct_large.push(m[1][1]);
            }
            Ok(())
        })();
        stop.store(true, Ordering::Relaxed);
        wake(&server, TARGET_PORT);
        let _ = t.join();
        r
    })?;
    in_ns(node, || {
        delete_table();
        Ok(())
    })
}

/// Connections to the measured ClusterIP per endpoint they were sent to,
/// from the node's conntrack table (`/proc/net/nf_conntrack` read inside
/// the node).
pub(super) fn spread(node: &Netns, endpoints: &[Ipv4Addr]) -> BTreeMap<Ipv4Addr, usize> {
    let out = node
        .exec("cat", &["/proc/net/nf_conntrack"])
        .unwrap_or_default();
    let dst = format!("dst={MEASURED_IP}");
    let mut m = BTreeMap::new();
    for line in out
        .lines()
        .filter(|l| l.split_whitespace().any(|w| w == dst))
    {
        // The reply direction's `src=` is the endpoint.
        if let Some(a) = line
            .split_whitespace()
            .filter_map(|w| w.strip_prefix("src="))
            .nth(1)
            .and_then(|a| a.parse::<Ipv4Addr>().ok())
            .filter(|a| endpoints.contains(a))
        {
            *m.entry(a).or_default() += 1;
        }
    }
    m
}
