//! Connection latency through the large ruleset beside no policy: two pods
//! wired behind the node, connections interleaved between the servers.

use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use tartan_felix::calc::policy::desired;
use tartan_felix::dataplane::policy::PolicyDriver;
use tartan_policy::compile::Ruleset;

use super::figures::*;
use super::model::*;
use super::options::*;
use super::sync::*;
use crate::benchkit::{connections, in_ns, interleaved, median_us, serve, wake, wire_pod};
use tartan_lab::netns::Netns;

/// A pod as the CNI plugin wires it (see [`wire_pod`]).
pub(super) fn wire(node: &Netns, pod: &Netns, p: &PodInfo) -> Result<()> {
    let host = p.interface.as_deref().context("pod not local")?;
    wire_pod(node, pod, host, &[p.addr])
}

/// A second server beside the measured one, always dispatched to `open`
/// (an extra verdict-map element), so that every run interleaves a
/// connection through the policy chains with one through none.
pub(super) const OPEN_SERVER_IFACE: &str = "tarbopen";
pub(super) const OPEN_SERVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 244, 255, 2);

pub(super) fn latency(
    node: &Netns,
    syn: &Synthetic,
    o: &PolicyBenchOptions,
    fig: &mut Figures,
    log: &mut dyn FnMut(&str),
) -> Result<()> {
    let a = Netns::new("tpbc")?;
    let b = Netns::new("tpbs")?;
    let b2 = Netns::new("tpbo")?;
    wire(node, &a, &syn.client)?;
    wire(node, &b, &syn.server)?;
    let open_server = PodInfo {
        namespace: BENCH_NS.into(),
        name: "open".into(),
        addr: OPEN_SERVER_ADDR,
        interface: Some(OPEN_SERVER_IFACE.into()),
    };
    wire(node, &b2, &open_server)?;
    node.exec("sysctl", &["-qw", "net.ipv4.ip_forward=1"])?;
    let open = |mut rs: Ruleset| {
        for map in [&mut rs.to_endpoint, &mut rs.from_endpoint] {
            map.insert(
                OPEN_SERVER_IFACE.into(),
                tartan_policy::compile::OPEN_CHAIN.into(),
            );
        }
        rs
    };
    let with = open(desired(&syn.node, &syn.state));
    let mut bare = syn.state.clone();
    bare.kube_policies.clear();
    bare.tartan_policies.clear();
    bare.global_policies.clear();
    let empty = open(desired(&syn.node, &bare));
    let mut cut = syn.state.clone();
    cut.kube_policies
        .insert(syn.last_bench_key.clone(), syn.last_bench_cut.clone());
    let cut = open(desired(&syn.node, &cut));
    fig.path = path_of(&with, syn);
    let to = [
        SocketAddr::from((syn.server.addr, SERVER_PORT)),
        SocketAddr::from((OPEN_SERVER_ADDR, SERVER_PORT)),
    ];
    let stop = AtomicBool::new(false);
    let (ready_tx, ready_rx) = mpsc::channel::<Result<()>>();
    std::thread::scope(|s| -> Result<()> {
        let stop = &stop;
        let servers: Vec<_> = [&b, &b2]
            .into_iter()
            .map(|ns| {
                let tx = ready_tx.clone();
                s.spawn(move || serve(ns, SERVER_PORT, stop, tx))
            })
            .collect();
        let r = (|| -> Result<()> {
            ready_rx.recv()??;
            ready_rx.recv()??;
            let mut d = PolicyDriver::default();
            in_ns(node, || {
                delete_table();
                Ok(d.apply(&with, false, &no_dynamic_sets)?)
            })?;
            // The ruleset decides: without the final rule of the last
            // bench policy the connection is dropped.
            in_ns(&a, || connections(to[0], 3))?;
            in_ns(node, || Ok(d.apply(&cut, false, &no_dynamic_sets)?))?;
            let dropped = in_ns(&a, || {
                Ok(TcpStream::connect_timeout(&to[0], Duration::from_millis(300)).is_err())
            })?;
            if !dropped {
                bail!("the connection went through without the rule that allows it");
            }
            fig.enforced = "checked: with the last bench policy's final rule removed, the client's connection is dropped".to_string();
            for r in 0..o.runs {
                let order = if r % 2 == 0 { [0, 1] } else { [1, 0] };
                let mut m = [[0.0; 2]; 2];
                for v in order {
                    let rs = [&with, &empty][v];
                    let t = Instant::now();
                    in_ns(node, || Ok(d.apply(rs, false, &no_dynamic_sets)?))?;
                    fig.swaps.push(t.elapsed());
                    let [x, y] = in_ns(&a, || {
                        interleaved(to, o.connections, o.connections.min(100))
                    })?;
                    m[v] = [median_us(&x), median_us(&y)];
                }
                log(&format!(
                    "latency run {r}: ruleset {:.1} µs (open server beside it {:.1} µs), empty table {:.1} µs ({:.1} µs)",
                    m[0][0], m[0][1], m[1][0], m[1][1]
                ));
                fig.latency_policy.push(m[0][0]);
                fig.latency_policy_open.push(m[0][1]);
                fig.latency_empty.push(m[1][0]);
                fig.latency_empty_open.push(m[1][1]);
            }
            Ok(())
        })();
        stop.store(true, Ordering::Relaxed);
        // Wake the accept loops from inside the servers' namespaces.
        for ns in [&b, &b2] {
            wake(ns, SERVER_PORT);
        }
        for t in servers {
            let _ = t.join();
        }
        r
    })
}
