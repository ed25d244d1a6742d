//! A simulated route reflector: an iBGP speaker on a thread inside its
//! own namespace that connects to the real node, sends every simulated
//! node's block as a reflected route (ORIGINATOR_ID the node, CLUSTER_LIST
//! the reflector, NEXT_HOP one address on the node's link for every route
//! of both reflectors, as reflection leaves the originator's next hop, so
//! that the kernel can install it), keeps the session alive, and announces
//! new blocks on demand, telling when each was written.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, Shutdown, SocketAddr, TcpStream};
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, channel};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use ipnet::{IpNet, Ipv4Net};
use tartan_bgpd::model::{AsPath, Family, NextHop, Origin, PathAttrs};
use tartan_bgpd::wire::{EncodeOptions, encode_announce, encode_end_of_rib};

use crate::bgpload::{SpeakerId, establish, keepalive};

enum Ctl {
    /// Announce this block (originated by that node); reply with the
    /// moment it was handed to TCP.
    Announce(Ipv4Net, Ipv4Addr, Sender<Instant>),
    Stop,
}

pub struct Reflector {
    ctl: Sender<Ctl>,
    thread: Option<JoinHandle<Result<()>>>,
    sock: std::sync::Arc<std::sync::Mutex<Option<TcpStream>>>,
}

/// The reflected route for `net`, originated by `originator`.
fn update(
    net: Ipv4Net,
    originator: Ipv4Addr,
    me: Ipv4Addr,
    next_hop: Ipv4Addr,
    out: &mut Vec<u8>,
) -> Result<()> {
    let attrs = PathAttrs {
        origin: Origin::Igp,
        as_path: AsPath { segments: vec![] },
        next_hop: NextHop::V4(next_hop),
        local_pref: Some(100),
        originator_id: Some(originator),
        cluster_list: vec![me],
        ..PathAttrs::default()
    };
    let opts = EncodeOptions {
        four_octet_as: true,
        ..EncodeOptions::default()
    };
    encode_announce(&attrs, Family::Ipv4Unicast, &[IpNet::V4(net)], &opts, out)?;
    Ok(())
}

impl Reflector {
    /// Connects from namespace `netns` (address `me`) to the node at
    /// `node` and sends `routes` (block, originator) via `next_hop`, and
    /// End-of-RIB.
    pub fn start(
        netns: &str,
        me: Ipv4Addr,
        next_hop: Ipv4Addr,
        node: Ipv4Addr,
        routes: Vec<(Ipv4Net, Ipv4Addr)>,
        timeout: Duration,
    ) -> Result<Reflector> {
        let (ctl, rx) = channel();
        let (ready_tx, ready) = channel();
        let sock = std::sync::Arc::new(std::sync::Mutex::new(None));
        let s = sock.clone();
        let netns = netns.to_string();
        let thread = std::thread::Builder::new()
            .name(format!("rr-{me}"))
            .spawn(move || {
                run(
                    &netns,
                    [me, next_hop],
                    node,
                    routes,
                    timeout,
                    rx,
                    ready_tx,
                    s,
                )
            })
            .context("spawn reflector")?;
        let r = Reflector {
            ctl,
            thread: Some(thread),
            sock,
        };
        match ready.recv_timeout(timeout + Duration::from_secs(5)) {
            Ok(Ok(())) => Ok(r),
            Ok(Err(e)) => Err(e),
            Err(_) => Err(anyhow!("reflector {me}: no session within {timeout:?}")),
        }
    }

    /// Announces `net` from `originator`; the moment just before it was
    /// handed to TCP.
    pub fn announce(&self, net: Ipv4Net, originator: Ipv4Addr) -> Result<Instant> {
        let (tx, rx) = channel();
        self.ctl
            .send(Ctl::Announce(net, originator, tx))
            .map_err(|_| anyhow!("reflector stopped"))?;
        rx.recv_timeout(Duration::from_secs(10))
            .map_err(|_| anyhow!("reflector did not write the announcement"))
    }
}

impl Drop for Reflector {
    fn drop(&mut self) {
        let _ = self.ctl.send(Ctl::Stop);
        if let Some(s) = self.sock.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
            let _ = s.shutdown(Shutdown::Both);
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn run(
    netns: &str,
    [me, next_hop]: [Ipv4Addr; 2],
    node: Ipv4Addr,
    routes: Vec<(Ipv4Net, Ipv4Addr)>,
    timeout: Duration,
    ctl: Receiver<Ctl>,
    ready: Sender<Result<()>>,
    sock: std::sync::Arc<std::sync::Mutex<Option<TcpStream>>>,
) -> Result<()> {
    let setup = || -> Result<(TcpStream, Duration)> {
        tartan_lab::netpol::probe::enter_netns(netns)?;
        let id = SpeakerId {
            asn: super::objects::ASN,
            router_id: me,
            hold_time: 90,
        };
        let est = establish(SocketAddr::from((node, 179)), &id, timeout)?;
        let every = est.keepalive_every().unwrap_or(Duration::from_secs(3600));
        let mut stream = est.stream;
        // What the node sends back is read and dropped.
        let mut rd = stream.try_clone()?;
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            while matches!(rd.read(&mut buf), Ok(n) if n > 0) {}
        });
        let mut out = Vec::with_capacity(routes.len() * 64 + 64);
        for (net, originator) in &routes {
            update(*net, *originator, me, next_hop, &mut out)?;
        }
        encode_end_of_rib(Family::Ipv4Unicast, &mut out);
        stream.write_all(&out).context("write the routes")?;
        Ok((stream, every))
    };
    let (mut stream, every) = match setup() {
        Ok(x) => x,
        Err(e) => {
            let msg = format!("reflector {me}: {e:#}");
            let _ = ready.send(Err(e));
            return Err(anyhow!(msg));
        }
    };
    *sock.lock().unwrap_or_else(|e| e.into_inner()) = stream.try_clone().ok();
    let _ = ready.send(Ok(()));
    let ka = keepalive();
    loop {
        match ctl.recv_timeout(every) {
            Ok(Ctl::Announce(net, originator, done)) => {
                let mut out = Vec::new();
                update(net, originator, me, next_hop, &mut out)?;
                let at = Instant::now();
                stream.write_all(&out)?;
                let _ = done.send(at);
            }
            Ok(Ctl::Stop) | Err(RecvTimeoutError::Disconnected) => return Ok(()),
            Err(RecvTimeoutError::Timeout) => stream.write_all(&ka)?,
        }
    }
}
