//! Host endpoints against the real kernel, with real packets: the node
//! (a fresh network namespace) has a veth to a client (a named
//! namespace). With a HostEndpoint on the veth and no policy, a TCP
//! connection into the host on a port that is not failsafe is dropped and
//! one to a failsafe port (22) accepted, and the host's own connection
//! out is dropped; a GlobalNetworkPolicy selecting the endpoint opens
//! what it allows; the endpoint removed, the host is open again. Every
//! change after the first write goes as a difference, and the drift check
//! finds the table as written.

use std::io::ErrorKind;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use serde_json::json;
use tartan_api::resources::{GlobalNetworkPolicy, HostEndpoint};
use tartan_felix::calc::hosts::{
    FAILSAFE_IN_DEFAULT, FAILSAFE_OUT_DEFAULT, HostEndpointInfo, parse_failsafe,
};
use tartan_felix::calc::policy::desired;
use tartan_felix::calc::state::State;
use tartan_felix::dataplane::nft::{NftDriver, Written};
use tartan_policy::compile::Ruleset;

mod common;
use common::{in_new_netns, ok, run};

fn is_root() -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata("/proc/self").is_ok_and(|m| m.uid() == 0)
}

/// A named namespace (the client), deleted when dropped.
struct Netns(String);

impl Netns {
    fn new(prefix: &str) -> Netns {
        static N: AtomicU32 = AtomicU32::new(0);
        let name = format!(
            "{prefix}-{}-{}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        );
        ok(&["ip", "netns", "add", &name]);
        Netns(name)
    }

    fn exec(&self, args: &[&str]) {
        let mut v = vec!["ip", "netns", "exec", &self.0];
        v.extend(args);
        ok(&v);
    }

    fn path(&self) -> String {
        format!("/run/netns/{}", self.0)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = run(&["ip", "netns", "del", &self.0]);
    }
}

/// TCP listeners on `ports` (every address) in the namespace `ns` (the
/// caller's when `None`), accepting and closing; stopped when dropped.
struct Listeners {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Listeners {
    fn start(ns: Option<String>, ports: &'static [u16]) -> Listeners {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            if let Some(p) = ns {
                let f = std::fs::File::open(p).unwrap();
                nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            }
            let ls: Vec<TcpListener> = ports
                .iter()
                .map(|p| {
                    let l = TcpListener::bind(("0.0.0.0", *p)).unwrap();
                    l.set_nonblocking(true).unwrap();
                    l
                })
                .collect();
            tx.send(()).unwrap();
            while !flag.load(Ordering::Relaxed) {
                for l in &ls {
                    match l.accept() {
                        Ok(_) => {}
                        Err(e) if e.kind() == ErrorKind::WouldBlock => {}
                        Err(e) => panic!("accept: {e}"),
                    }
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        rx.recv_timeout(Duration::from_secs(5)).expect("listening");
        Listeners {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Listeners {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// Whether a TCP connection to `to` is made within a second, from the
/// namespace at `ns` (the caller's when `None`).
fn connects(ns: Option<String>, to: &str) -> bool {
    let to: SocketAddr = to.parse().unwrap();
    std::thread::spawn(move || {
        if let Some(p) = ns {
            let f = std::fs::File::open(p).unwrap();
            nix::sched::setns(f, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        }
        TcpStream::connect_timeout(&to, Duration::from_secs(1)).is_ok()
    })
    .join()
    .unwrap()
}

fn hep() -> HostEndpointInfo {
    let h: HostEndpoint = serde_json::from_value(json!({
        "apiVersion": "tartan.dev/v1", "kind": "HostEndpoint",
        "metadata": {"name": "n1-hep0", "labels": {"role": "edge"}},
        "spec": {"node": "n1", "interfaceName": "hep0", "expectedIPs": ["10.77.0.1"]}
    }))
    .unwrap();
    HostEndpointInfo::from_object(&h)
}

fn allow_gnp() -> tartan_policy::ir::Policy {
    let g: GlobalNetworkPolicy = serde_json::from_value(json!({
        "apiVersion": "tartan.dev/v1", "kind": "GlobalNetworkPolicy",
        "metadata": {"name": "edge"},
        "spec": {"selector": "role == 'edge'",
            "ingress": [{"action": "Allow", "protocol": "TCP", "destination": {"ports": [8080]}}],
            "egress": [{"action": "Allow", "protocol": "TCP", "destination": {"ports": [9090]}}]}
    }))
    .unwrap();
    tartan_policy::tartan::from_global_network_policy(&g).unwrap()
}

/// Write `state`'s table; the drift check then finds nothing.
fn write(d: &mut NftDriver<Ruleset>, state: &State, whole: bool) {
    let rs = desired("n1", state);
    let w = d.apply(&rs, false, &|_| false).unwrap();
    if whole {
        assert!(matches!(w, Written::Full(_)), "{w:?}");
    } else {
        assert!(matches!(w, Written::Difference(_)), "{w:?}");
    }
    assert_eq!(
        d.apply(&rs, true, &|_| false).unwrap(),
        Written::Nothing,
        "the drift check must match what was written"
    );
}

#[test]
fn a_host_endpoint_denies_by_default_but_failsafe_and_policy_open_it() {
    if !is_root() {
        eprintln!("skipped: needs root for network namespaces");
        return;
    }
    if !run(&["nft", "--version"]).status.success() {
        eprintln!("skipped: no nft");
        return;
    }
    in_new_netns(|| {
        let client = Netns::new("heptest");
        ok(&["ip", "link", "set", "lo", "up"]);
        ok(&[
            "ip", "link", "add", "hep0", "type", "veth", "peer", "name", "eth0", "netns", &client.0,
        ]);
        ok(&["ip", "addr", "add", "10.77.0.1/24", "dev", "hep0"]);
        ok(&["ip", "link", "set", "hep0", "up"]);
        client.exec(&["ip", "link", "set", "lo", "up"]);
        client.exec(&["ip", "addr", "add", "10.77.0.2/24", "dev", "eth0"]);
        client.exec(&["ip", "link", "set", "eth0", "up"]);
        let up = (0..50).any(|_| run(&["ping", "-c1", "-W1", "10.77.0.2"]).status.success());
        assert!(up, "the client answers");
        let _host = Listeners::start(None, &[22, 8080]);
        let _far = Listeners::start(Some(client.path()), &[9090]);
        let from_client = |port: u16| connects(Some(client.path()), &format!("10.77.0.1:{port}"));
        let from_host = || connects(None, "10.77.0.2:9090");

        let mut state = State::for_node("n1");
        state.failsafe_in = parse_failsafe(FAILSAFE_IN_DEFAULT).unwrap();
        state.failsafe_out = parse_failsafe(FAILSAFE_OUT_DEFAULT).unwrap();
        let mut d: NftDriver<Ruleset> = NftDriver::default();
        // No host endpoint: the host is open.
        write(&mut d, &state, true);
        assert!(from_client(8080), "no host endpoint: open");
        assert!(from_host(), "no host endpoint: open out");

        // A host endpoint, no policy: denied but for the failsafe port.
        state.host_endpoints.insert("/n1-hep0".into(), Ok(hep()));
        write(&mut d, &state, false);
        assert!(!from_client(8080), "default deny in");
        assert!(from_client(22), "failsafe 22 in");
        assert!(!from_host(), "default deny out");

        // A policy selecting it allows what it says.
        state
            .global_policies
            .insert("/edge".into(), Ok(allow_gnp()));
        write(&mut d, &state, false);
        assert!(from_client(8080), "allowed in by policy");
        assert!(from_host(), "allowed out by policy");

        // Failsafe off: 22 is governed too (and denied).
        state.failsafe_in = parse_failsafe("none").unwrap();
        write(&mut d, &state, false);
        assert!(!from_client(22), "no failsafe: 22 denied");
        assert!(from_client(8080));

        // The endpoint removed: open again.
        state.host_endpoints.clear();
        write(&mut d, &state, false);
        assert!(from_client(22) && from_client(8080), "open again");
        assert!(from_host());
    });
}
