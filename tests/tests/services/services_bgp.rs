//! LoadBalancer and external IPs through a router that learned them over
//! BGP (acceptance 2, second half, and 4 of issue 7): `tartan-lab up
//! --topology tor` (mesh off, an AS per node, eBGP with a BIRD top-of-rack
//! router), and a client host on a link of its own behind the ToR, with
//! only a default route to the ToR; the ToR announces the client's network
//! to the nodes (so replies find their way back), and the nodes announce
//! BGPConfiguration's service ranges to the ToR.
//!
//! - externalTrafficPolicy Cluster: BIRD learns the LB range and the
//!   external range from both nodes; the client reaches the LB IP and the
//!   external IP over TCP and gets answers from endpoints on both nodes.
//! - externalTrafficPolicy Local: BIRD learns the Service's /32 only from
//!   node-1, which has the endpoint; the ToR forwards it there, and the
//!   server sees the client's own address.

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

use tartan_lab::cluster::client::LabCli;
use tartan_lab::cluster::state;
use tartan_lab::cluster::svcprobe::{Outcome, Proto, ask, ask_many, poll};
use tartan_lab::netns::{Netns, ip, unique_name};
use tartan_lab::peers::{Bird, BirdRoute, parse_bird_routes};
use tartan_tests::services::*;

/// The client's link behind the ToR: the ToR is .1, the client .2.
const CLIENT_NET: &str = "100.64.7.0/24";
const TOR_SIDE: &str = "100.64.7.1";
const CLIENT: &str = "100.64.7.2";
/// BGPConfiguration's serviceExternalIPs, and the Cluster Service's
/// external IP in it.
const EXT_RANGE: &str = "203.0.113.0/24";
const EXT_IP: Ipv4Addr = Ipv4Addr::new(203, 0, 113, 10);

/// The lab's BIRD top-of-rack router.
struct Tor {
    netns: String,
    sock: PathBuf,
    conf: PathBuf,
    /// BIRD's protocol name for each node's session, in node order.
    protos: Vec<String>,
}

impl Tor {
    fn of(lab: &LabCli, nodes: &[Ipv4Addr]) -> Tor {
        let dir = state::dir(&lab.name);
        Tor {
            netns: state::tor_netns(&lab.name),
            sock: dir.join("bird-tor.ctl"),
            conf: dir.join("bird-tor.conf"),
            protos: nodes
                .iter()
                .map(|a| Bird::protocol_name(IpAddr::V4(*a)))
                .collect(),
        }
    }

    fn birdc(&self, args: &[&str]) -> String {
        let out = Command::new("ip")
            .args(["netns", "exec", &self.netns, "birdc", "-s"])
            .arg(&self.sock)
            .args(args)
            .output()
            .expect("birdc");
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Every path BIRD has for exactly `prefix`.
    fn routes(&self, prefix: &str) -> Vec<BirdRoute> {
        parse_bird_routes(&self.birdc(&["show", "route", prefix, "all"]))
            .into_iter()
            .filter(|r| r.prefix == prefix)
            .collect()
    }

    /// The nodes (1-based) BIRD has a BGP path for `prefix` from.
    fn announcers(&self, prefix: &str) -> BTreeSet<usize> {
        self.routes(prefix)
            .iter()
            .filter_map(|r| self.protos.iter().position(|p| *p == r.proto))
            .map(|i| i + 1)
            .collect()
    }

    /// Waits until exactly the nodes `want` announce `prefix`.
    #[track_caller]
    fn wait_from(&self, prefix: &str, want: &[usize]) -> Duration {
        let t = Instant::now();
        let want: BTreeSet<usize> = want.iter().copied().collect();
        if poll(Duration::from_secs(20), || {
            (self.announcers(prefix) == want).then_some(())
        })
        .is_none()
        {
            panic!(
                "BIRD has {prefix} from nodes {:?}, want {want:?}\n{}",
                self.announcers(prefix),
                self.birdc(&["show", "route", "all"])
            );
        }
        t.elapsed()
    }
}

/// The ToR's address on the underlay: its last.
fn tor_address(st: &tartan_lab::cluster::LabState) -> Ipv4Addr {
    let subnet: ipnet::Ipv4Net = st.subnet.parse().unwrap();
    subnet.hosts().last().unwrap()
}

/// A host on a link of its own behind the ToR, with a default route to
/// it and nothing else; the ToR announces the link's network over BGP.
/// The namespace (and with it the link) goes with the guard.
fn client_behind(tor: &Tor) -> Netns {
    let host = Netns::new("svbgp").unwrap();
    let outside = unique_name("svb");
    tartan_lab::netns::veth_eth0(Some(&tor.netns), &outside, host.name()).unwrap();
    ip(&[
        "-n",
        &tor.netns,
        "addr",
        "add",
        &format!("{TOR_SIDE}/24"),
        "dev",
        &outside,
    ])
    .unwrap();
    ip(&["-n", &tor.netns, "link", "set", &outside, "up"]).unwrap();
    host.ip(&["addr", "add", &format!("{CLIENT}/24"), "dev", "eth0"])
        .unwrap();
    host.ip(&["link", "set", "eth0", "up"]).unwrap();
    host.ip(&["route", "add", "default", "via", TOR_SIDE])
        .unwrap();
    // BIRD exports static and BGP routes to the nodes: a static route for
    // the client's network, added to the lab's configuration, preferred
    // over the link's direct route (BIRD exports only its best route).
    let mut conf = std::fs::read_to_string(&tor.conf).unwrap();
    conf.push_str(&format!(
        "protocol static clients4 {{ ipv4 {{ preference 250; }}; route {CLIENT_NET} via {CLIENT}; }}\n"
    ));
    std::fs::write(&tor.conf, conf).unwrap();
    let out = tor.birdc(&["configure"]);
    assert!(out.contains("Reconfigured"), "birdc configure: {out}");
    host
}

#[test]
fn lb_and_external_ips_through_a_bgp_router() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let t0 = Instant::now();
    let (lab, _) = tartan_tests::lab_up("sbg", &["--nodes", "2", "--topology", "tor"]);
    let st = lab_state(&lab);
    let nodes: Vec<Ipv4Addr> = st.nodes.iter().map(|n| n.address).collect();
    let tor = Tor::of(&lab, &nodes);
    eprintln!("lab up in {:?}", t0.elapsed());

    let _servers = ext_and_local_servers(&lab);
    apply_ok(
        &lab,
        &format!(
            "apiVersion: tartan.dev/v1
kind: BGPConfiguration
metadata: {{name: default}}
spec:
  nodeToNodeMeshEnabled: false
  serviceLoadBalancerIPs: [{{cidr: {lb}}}]
  serviceExternalIPs: [{{cidr: {EXT_RANGE}}}]
---
apiVersion: v1
kind: Service
metadata: {{name: lb}}
spec:
  type: LoadBalancer
  selector: {{app: ext}}
  externalIPs: [{EXT_IP}]
  ports: [{{port: 80, targetPort: 8080}}]
---
apiVersion: v1
kind: Service
metadata: {{name: loc}}
spec:
  type: LoadBalancer
  externalTrafficPolicy: Local
  selector: {{app: loc}}
  ports: [{{port: 80, targetPort: 8080}}]
",
            lb = st.lb_cidr
        ),
    );
    let (lb, loc) = (lb_ip(&lab, "lb"), lb_ip(&lab, "loc"));
    let host = client_behind(&tor);
    let hostns = vec![host.name().to_string()];
    eprintln!(
        "pods, Services, client behind the ToR in {:?}; lb {lb}, loc {loc}",
        t0.elapsed()
    );

    // The client knows nothing of the LB range: its default route only.
    let routes = host.ip(&["route", "show"]).unwrap();
    assert_eq!(
        routes
            .lines()
            .filter(|l| !l.starts_with("default") && !l.starts_with(CLIENT_NET))
            .count(),
        0,
        "the client has routes of its own:\n{routes}"
    );

    // BIRD learns both ranges from both nodes, the Local /32 from node-1
    // alone, and no /32 for the Cluster Service.
    let took = [
        tor.wait_from(&st.lb_cidr, &[1, 2]),
        tor.wait_from(EXT_RANGE, &[1, 2]),
        tor.wait_from(&format!("{loc}/32"), &[1]),
    ];
    assert!(
        tor.routes(&format!("{lb}/32")).is_empty(),
        "a Cluster Service's IP is covered by the range alone:\n{}",
        tor.birdc(&["show", "route", "all"])
    );
    // ... and the nodes learn the client's network from the ToR.
    for n in &st.nodes {
        let learned = poll(Duration::from_secs(10), || {
            let r = ip(&["-n", &n.netns, "route", "show", CLIENT_NET]).ok()?;
            r.contains(&format!("via {}", tor_address(&st)))
                .then_some(())
        });
        assert!(
            learned.is_some(),
            "{} has no route to {CLIENT_NET} via the ToR:\n{}",
            n.name,
            ip(&["-n", &n.netns, "route"]).unwrap_or_default()
        );
    }
    eprintln!(
        "BIRD learned the ranges and the /32 (waits {took:?}), at {:?}:\n{}",
        t0.elapsed(),
        tor.birdc(&["show", "route"])
    );

    // Cluster: the LB IP and the external IP, answered by both endpoints.
    for (what, to) in [("LB IP", lb), ("external IP", EXT_IP)] {
        wait_served(&lab, host.name(), to, 80, Proto::Tcp);
        let r = ask_many(&hostns, 12, to, 80, Proto::Tcp, ASK_WAIT);
        let t = tally(&r[0]);
        eprintln!("{what} {to} from behind the ToR: {t:?}");
        assert!(r[0].iter().all(|o| o.server().is_some()), "{what}: {t:?}");
        assert_eq!(
            servers_of(&r[0]),
            BTreeSet::from(["e-1".to_string(), "e-2".to_string()]),
            "{what}: {t:?}"
        );
    }

    // Local: the ToR forwards the /32 to node-1, and l-1 sees the client.
    let via = ip(&["-n", &tor.netns, "route", "get", &loc.to_string()]).unwrap();
    assert!(
        via.contains(&format!("via {} ", nodes[0])),
        "the ToR routes {loc} not via node-1 ({}): {via}",
        nodes[0]
    );
    wait_served(&lab, host.name(), loc, 80, Proto::Tcp);
    for _ in 0..4 {
        let (o, _) = ask(host.name(), loc, 80, Proto::Tcp, ASK_WAIT);
        assert_eq!(
            o,
            Outcome::Answer {
                server: "l-1".into(),
                client: CLIENT.into()
            },
            "Local LB IP through the ToR keeps the client's address"
        );
    }
    eprintln!("Local LB IP {loc} via node-1, at {:?}", t0.elapsed());

    // The endpoint moves to node-2: the /32 follows it (announced by
    // node-2 alone), and the client lands there, its address kept.
    let _l2 = server_pod(&lab, "l-2", "node-2", "app=loc");
    lab.ok(&["pod", "del", "default/l-1"]);
    let moved = tor.wait_from(&format!("{loc}/32"), &[2]);
    let want = Outcome::Answer {
        server: "l-2".into(),
        client: CLIENT.into(),
    };
    let landed = poll(Duration::from_secs(10), || {
        (ask(host.name(), loc, 80, Proto::Tcp, ASK_WAIT).0 == want).then_some(())
    });
    assert!(
        landed.is_some(),
        "Local LB IP after the move: {:?}\nToR: {}",
        ask(host.name(), loc, 80, Proto::Tcp, ASK_WAIT).0,
        ip(&["-n", &tor.netns, "route", "get", &loc.to_string()]).unwrap_or_default()
    );
    for _ in 0..4 {
        let (o, _) = ask(host.name(), loc, 80, Proto::Tcp, ASK_WAIT);
        assert_eq!(o, want, "Local LB IP via node-2 after the move");
    }
    eprintln!(
        "moved: BIRD had the /32 from node-2 alone {moved:?} after the pod moved\n{}",
        tor.birdc(&["show", "route", &format!("{loc}/32"), "all"])
    );
    eprintln!("all done in {:?}", t0.elapsed());
}
