//! Stale UDP conntrack (issue 24; upstream conntrack.go "should be able to
//! preserve UDP traffic when server pod cycles for a ClusterIP service",
//! and its NodePort and LoadBalancer variants), in a two-node lab.
//!
//! A client pod on node-1 sends from one fixed source port every 100 ms
//! to a UDP Service's ClusterIP, to its NodePort on node-2 and to its
//! LoadBalancer IP. Its backend pod on node-2 is deleted and a new one
//! (another address) takes its place: each client's traffic reaches the
//! new pod within 2 s of its creation. Without felix deleting the old
//! entries, the client kept them alive and kept sending to the dead pod.
//! On etcd and on the Kubernetes datastore; the LoadBalancer IP comes
//! from tartan-controllers on both.

use std::net::{Ipv4Addr, SocketAddr, UdpSocket};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tartan_lab::cluster::svcprobe::{Proto, poll};
use tartan_lab::netpol::probe::enter_netns;
use tartan_tests::services::*;

/// A client sending from one source port every 100 ms, recording who
/// answered and when. Stopped and joined on drop.
struct PinnedClient {
    stop: Arc<AtomicBool>,
    answers: Arc<Mutex<Vec<(Instant, String)>>>,
    thread: Option<JoinHandle<()>>,
}

impl PinnedClient {
    fn start(netns: &str, src_port: u16, to: SocketAddr) -> PinnedClient {
        let stop = Arc::new(AtomicBool::new(false));
        let answers = Arc::new(Mutex::new(Vec::new()));
        let (ns, s, a) = (netns.to_string(), stop.clone(), answers.clone());
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let thread = std::thread::spawn(move || {
            let sock = enter_netns(&ns)
                .and_then(|()| Ok(UdpSocket::bind((Ipv4Addr::UNSPECIFIED, src_port))?))
                .and_then(|u| {
                    u.connect(to)?;
                    u.set_read_timeout(Some(Duration::from_millis(100)))?;
                    Ok(u)
                });
            let sock = match sock {
                Ok(u) => {
                    let _ = ready_tx.send(Ok(()));
                    u
                }
                Err(e) => {
                    let _ = ready_tx.send(Err(e.to_string()));
                    return;
                }
            };
            let mut buf = [0u8; 200];
            let mut next = Instant::now();
            while !s.load(Ordering::Relaxed) {
                if Instant::now() >= next {
                    // Refusals (ICMP) while there is no endpoint are
                    // expected: keep sending from the same port.
                    let _ = sock.send(b"?");
                    next += Duration::from_millis(100);
                }
                if let Ok(n) = sock.recv(&mut buf) {
                    let text = String::from_utf8_lossy(&buf[..n]);
                    let server = text.split_whitespace().next().unwrap_or("").to_string();
                    if let Ok(mut v) = a.lock() {
                        v.push((Instant::now(), server));
                    }
                }
            }
        });
        let ready = ready_rx
            .recv_timeout(Duration::from_secs(5))
            .expect("the client thread started");
        ready.expect("the client's socket");
        PinnedClient {
            stop,
            answers,
            thread: Some(thread),
        }
    }

    /// The first answer from `server` at or after `since`.
    fn first_from(&self, server: &str, since: Instant) -> Option<Instant> {
        self.answers
            .lock()
            .ok()?
            .iter()
            .find(|(t, s)| *t >= since && s == server)
            .map(|(t, _)| *t)
    }

    fn last(&self) -> Option<(Instant, String)> {
        self.answers.lock().ok()?.last().cloned()
    }
}

impl Drop for PinnedClient {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn udp_traffic_follows_a_replaced_backend() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    udp_traffic_follows_a_replaced_backend_on(tartan_tests::Datastore::Etcd, "ucl");
}

/// The same on the Kubernetes datastore: the LoadBalancer address comes
/// from tartan-controllers (the lab's pool `lab-lb`) through the API
/// server stand-in, as every Service's does.
#[test]
fn udp_traffic_follows_a_replaced_backend_on_kubernetes() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    udp_traffic_follows_a_replaced_backend_on(tartan_tests::Datastore::Kubernetes, "uck");
}

fn udp_traffic_follows_a_replaced_backend_on(datastore: tartan_tests::Datastore, prefix: &str) {
    let lab = up_on(prefix, 2, datastore);
    let _old = server_pod(&lab, "u-1", "node-2", "app=u");
    let client = client_pod(&lab, "default/c-1", "node-1");
    apply_ok(
        &lab,
        &service_yaml(
            "u",
            "{type: LoadBalancer, selector: {app: u}, \
             ports: [{name: dns, port: 53, targetPort: dns, protocol: UDP}]}",
        ),
    );
    let svc = service(&lab, "u");
    let vip = cluster_ip(&lab, "u");
    let node_port = svc["spec"]["ports"][0]["nodePort"]
        .as_u64()
        .and_then(|p| u16::try_from(p).ok())
        .unwrap_or_else(|| panic!("no nodePort: {svc}"));
    let lb: Ipv4Addr = poll(Duration::from_secs(10), || {
        service(&lab, "u")["status"]["loadBalancer"]["ingress"][0]["ip"]
            .as_str()
            .and_then(|a| a.parse().ok())
    })
    .unwrap_or_else(|| panic!("no ingress IP: {}", service(&lab, "u")));
    let node2 = lab_state(&lab).node("node-2").unwrap().address;
    let targets = [
        ("ClusterIP", SocketAddr::from((vip, 53))),
        ("NodePort", SocketAddr::from((node2, node_port))),
        ("LoadBalancer", SocketAddr::from((lb, 53))),
    ];
    for (_, t) in &targets {
        let SocketAddr::V4(t) = t else { unreachable!() };
        wait_served(&lab, &client, *t.ip(), t.port(), Proto::Udp);
    }
    let clients: Vec<PinnedClient> = targets
        .iter()
        .enumerate()
        .map(|(i, (_, to))| PinnedClient::start(&client, 40_053 + i as u16, *to))
        .collect();
    let started = Instant::now();
    for ((what, _), c) in targets.iter().zip(&clients) {
        let got = poll(Duration::from_secs(5), || c.first_from("u-1", started));
        assert!(
            got.is_some(),
            "{what}: u-1 never answered the pinned client"
        );
    }

    // The pod cycles: u-1 goes, u-2 (another address) comes.
    let old_ip = pod_ip(&lab, "default/u-1");
    lab.ok(&["pod", "del", "default/u-1"]);
    drop(_old);
    let _new = server_pod(&lab, "u-2", "node-2", "app=u");
    let created = Instant::now();
    let new_ip = pod_ip(&lab, "default/u-2");
    assert_ne!(old_ip, new_ip);
    std::thread::sleep(Duration::from_secs(4));
    let mut failures = Vec::new();
    for ((what, to), c) in targets.iter().zip(&clients) {
        match c.first_from("u-2", created) {
            Some(t) => {
                let after = t - created;
                eprintln!("{what} ({to}): u-2 answered {after:?} after it was created");
                if after > Duration::from_secs(2) {
                    failures.push(format!("{what}: u-2 answered only after {after:?}"));
                }
            }
            None => failures.push(format!(
                "{what} ({to}): u-2 never answered the client pinned to one port; last answer {:?}",
                c.last()
                    .map(|(t, s)| (s, created.saturating_duration_since(t)))
            )),
        }
    }
    assert!(failures.is_empty(), "{failures:#?}\n{}", dump(&lab));
}
