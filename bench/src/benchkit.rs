//! Helpers shared by the benchmarks that run felix's drivers in a node
//! namespace and time TCP connections between pods behind it (policy,
//! services): a thread inside a namespace, pods wired as the CNI plugin
//! wires them, one-byte echo servers and clients pinned to one CPU, and
//! the small statistics the reports print.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use serde_json::Value;

use crate::storebench::quantile;
use tartan_lab::netns::Netns;

/// Runs `f` on a thread inside `ns` (children it starts, `nft` among
/// them, inherit the namespace).
pub fn in_ns<T: Send>(ns: &Netns, f: impl FnOnce() -> Result<T> + Send) -> Result<T> {
    std::thread::scope(|s| {
        s.spawn(|| {
            ns.enter_current_thread()?;
            f()
        })
        .join()
        .map_err(|_| anyhow!("a thread in {} panicked", ns.name()))?
    })
}

/// A pod as the CNI plugin wires it: a veth, `host` on the node and
/// `eth0` in the pod, the pod's /32 addresses on `eth0` and a default
/// route via 169.254.1.1 (a permanent neighbour), proxy ARP on the host
/// end, a /32 route per address on the node. The node also gets a
/// permanent neighbour per address (it has no address of its own to ask
/// ARP from).
pub fn wire_pod(node: &Netns, pod: &Netns, host: &str, addrs: &[Ipv4Addr]) -> Result<()> {
    tartan_lab::netns::veth_eth0(Some(node.name()), host, pod.name())?;
    let mac = |ns: &Netns, dev: &str| -> Result<String> {
        let out = ns.ip(&["-j", "link", "show", dev])?;
        let v: Value = serde_json::from_str(&out)?;
        v[0]["address"]
            .as_str()
            .map(str::to_string)
            .context("no MAC")
    };
    for a in addrs {
        pod.ip(&["addr", "add", &format!("{a}/32"), "dev", "eth0"])?;
    }
    pod.ip(&["link", "set", "eth0", "up"])?;
    pod.ip(&[
        "route",
        "add",
        "169.254.1.1",
        "dev",
        "eth0",
        "scope",
        "link",
    ])?;
    pod.ip(&[
        "neigh",
        "add",
        "169.254.1.1",
        "lladdr",
        &mac(node, host)?,
        "dev",
        "eth0",
        "nud",
        "permanent",
    ])?;
    pod.ip(&[
        "route",
        "add",
        "default",
        "via",
        "169.254.1.1",
        "dev",
        "eth0",
    ])?;
    node.exec(
        "sysctl",
        &[
            "-qw",
            &format!("net.ipv4.conf.{host}.proxy_arp=1"),
            &format!("net.ipv4.neigh.{host}.proxy_delay=0"),
        ],
    )?;
    node.ip(&["link", "set", host, "up"])?;
    let pod_mac = mac(pod, "eth0")?;
    for a in addrs {
        let a = a.to_string();
        node.ip(&[
            "route",
            "add",
            &format!("{a}/32"),
            "dev",
            host,
            "scope",
            "link",
        ])?;
        node.ip(&[
            "neigh",
            "add",
            &a,
            "lladdr",
            &pod_mac,
            "dev",
            host,
            "nud",
            "permanent",
        ])?;
    }
    Ok(())
}

fn linger_zero(s: &TcpStream) {
    let l = libc::linger {
        l_onoff: 1,
        l_linger: 0,
    };
    // SAFETY: a valid socket and a correctly sized option value.
    unsafe {
        libc::setsockopt(
            s.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_LINGER,
            (&l as *const libc::linger).cast(),
            std::mem::size_of::<libc::linger>() as libc::socklen_t,
        );
    }
}

/// `n` fresh connections: connect, one byte each way; the client resets
/// (no TIME_WAIT, so ports never run out).
pub fn connections(to: SocketAddr, n: usize) -> Result<Vec<Duration>> {
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        let mut s = TcpStream::connect_timeout(&to, Duration::from_secs(2))
            .with_context(|| format!("connect to {to}"))?;
        s.set_nodelay(true)?;
        s.write_all(&[1])?;
        let mut b = [0u8; 1];
        s.read_exact(&mut b)?;
        out.push(t.elapsed());
        linger_zero(&s);
    }
    Ok(out)
}

/// `n` connections to each of `to`, interleaved (the order swapped every
/// round), after `warm` unmeasured ones; on the last CPU.
pub fn interleaved(to: [SocketAddr; 2], n: usize, warm: usize) -> Result<[Vec<Duration>; 2]> {
    pin_to_last_cpu();
    for t in to {
        connections(t, warm)?;
    }
    let mut out = [Vec::with_capacity(n), Vec::with_capacity(n)];
    for i in 0..n {
        for k in [i % 2, 1 - i % 2] {
            out[k].extend(connections(to[k], 1)?);
        }
    }
    Ok(out)
}

/// Pins the calling thread to the last CPU: clients and servers share
/// it, so every connection takes the same path through the scheduler
/// (no cross-CPU wakeups that come and go with the machine's other load).
pub fn pin_to_last_cpu() {
    let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
    // SAFETY: a zeroed cpu_set_t is valid; CPU_SET stays within it.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        libc::CPU_SET(cpus - 1, &mut set);
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Serves one byte back per connection on `0.0.0.0:port` in `ns` until
/// `stop` (then one more connection, see [`wake`], ends the loop); on
/// the last CPU. `ready` gets the outcome of the bind.
pub fn serve(ns: &Netns, port: u16, stop: &AtomicBool, ready: mpsc::Sender<Result<()>>) {
    pin_to_last_cpu();
    let l = ns
        .enter_current_thread()
        .and_then(|()| Ok(TcpListener::bind(("0.0.0.0", port))?));
    let l = match l {
        Ok(l) => {
            let _ = ready.send(Ok(()));
            l
        }
        Err(e) => {
            let _ = ready.send(Err(e));
            return;
        }
    };
    for c in l.incoming() {
        if stop.load(Ordering::Relaxed) {
            break;
        }
        let Ok(mut c) = c else { continue };
        let mut buf = [0u8; 1];
        if c.read_exact(&mut buf).is_ok() {
            let _ = c.write_all(&buf);
        }
    }
}

/// Wakes a [`serve`] loop (after `stop` is set) from inside its namespace.
pub fn wake(ns: &Netns, port: u16) {
    let _ = in_ns(ns, || Ok(TcpStream::connect(("127.0.0.1", port))));
}

pub fn median_us(v: &[Duration]) -> f64 {
    quantile(v, 0.5).as_secs_f64() * 1e6
}

pub fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

pub fn median_f(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    s.get(s.len() / 2).copied().unwrap_or(0.0)
}

/// The median of the per-run ratios (runs back to back).
pub fn paired_ratio(t: &[f64], b: &[f64]) -> f64 {
    let r: Vec<f64> = t.iter().zip(b).map(|(t, b)| t / b.max(1e-9)).collect();
    median_f(&r)
}

/// The largest peak RSS among the children waited for so far (KiB).
pub fn children_peak_rss_kib() -> i64 {
    // SAFETY: getrusage writes into the struct it is given.
    unsafe {
        let mut u: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_CHILDREN, &mut u);
        u.ru_maxrss
    }
}

/// A field of `/proc/<pid>/status` in KiB (`VmRSS`, `VmHWM`, …).
pub fn status_kib(pid: &str, field: &str) -> Option<u64> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    s.lines()
        .find(|l| l.starts_with(field) && l[field.len()..].starts_with(':'))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Writes Service `i` and then its EndpointSlice, for every `i < n`, from
/// 8 writers at once (as a busy control plane would).
pub async fn write_services<F>(
    store: &std::sync::Arc<tartan_api::store::etcd::EtcdStore>,
    n: usize,
    objects: F,
) -> Result<()>
where
    F: Fn(
            usize,
        ) -> Result<(
            k8s_openapi::api::core::v1::Service,
            k8s_openapi::api::discovery::v1::EndpointSlice,
        )> + Clone
        + Send
        + 'static,
{
    use tartan_api::store::typed::TypedStore;
    let mut tasks = Vec::new();
    for w in 0..8 {
        let (store, objects) = (store.clone(), objects.clone());
        tasks.push(tokio::spawn(async move {
            for i in (w..n).step_by(8) {
                let (svc, slice) = objects(i)?;
                store.create_typed(&svc).await?;
                store.create_typed(&slice).await?;
            }
            anyhow::Ok(())
        }));
    }
    for t in tasks {
        t.await??;
    }
    Ok(())
}
