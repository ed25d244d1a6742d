//! A drain during route selection deferral (RFC 4724 4.1) as the
//! restarting speaker, against the whole instance over loopback TCP: the
//! peers get the GRACEFUL_SHUTDOWN routes (RFC 8326) before the Cease.
use crate::control::ControlSource;
use crate::daemon::test_instance::{free_port, run};
use crate::model::well_known::GRACEFUL_SHUTDOWN;
use crate::session::test_lab::{Got, Raw, WAIT};
use crate::wire::{Message, Notification, cease};
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::time::Duration;
use tokio::net::TcpSocket;

const X: &str = "10.8.9.0/24";

#[tokio::test]
async fn a_drain_ends_the_deferral_so_that_the_peers_get_graceful_shutdown() {
    let port = free_port();
    // A and B, both helpers with graceful restart: the deferral waits for
    // B's End-of-RIB, and B never comes. Our route's next hop goes out as
    // given, not 127.0.0.1 (which the test peer's decoder would take for
    // a bad one).
    let text = format!(
        "router_id = \"10.0.0.1\"\nasn = 65000\nebgp_requires_policy = false\n\
         [listen]\naddresses = [\"127.0.0.1\"]\nport = {port}\n\
         [kernel]\ninstall = false\n\
         [[announce]]\nprefix = \"{X}\"\nnext_hop = \"192.0.2.1\"\n\
         [[neighbor]]\naddress = \"127.0.0.1\"\nasn = 65001\npassive = true\nnext_hop = \"keep\"\n\
         [[neighbor]]\naddress = \"127.0.0.2\"\nasn = 65002\npassive = true\n"
    );
    let (control, _stop) = run(&text, true).await;
    let s = TcpSocket::new_v4().unwrap();
    s.bind(SocketAddr::new(IpAddr::V4(Ipv4Addr::LOCALHOST), 0))
        .unwrap();
    let stream = s.connect(([127, 0, 0, 1], port).into()).await.unwrap();
    let mut a = Raw::new(stream, true);
    a.restarting = false;
    a.establish(90).await;
    a.send_end_of_rib().await;
    // Deferred: nothing goes out.
    match a.recv(Duration::from_millis(500)).await {
        Got::TimedOut | Got::Message(Message::Keepalive) => {}
        other => panic!("A was sent something while selection is deferred: {other:?}"),
    }
    control.drain(Some(Duration::from_secs(2))).await.unwrap();
    // The output goes, but selection still waits for B: the kernel keeps
    // the routes of the previous run meanwhile.
    let r = control.status().await.unwrap().restart.expect("restarting");
    let v4 = &r.families["ipv4-unicast"];
    assert!(!v4.deferred);
    assert_eq!(
        v4.waiting_for,
        vec![IpAddr::V4(Ipv4Addr::new(127, 0, 0, 2))]
    );
    let mut graceful_shutdown = false;
    loop {
        match a.recv(WAIT * 2).await {
            Got::Message(Message::Keepalive) => {}
            Got::Message(Message::Update(u)) => {
                let attrs = u.attrs.as_ref();
                if attrs.is_some_and(|at| at.communities.contains(&GRACEFUL_SHUTDOWN)) {
                    let prefixes: Vec<String> = (u.reach.iter().flat_map(|r| &r.prefixes))
                        .map(|p| p.to_string())
                        .collect();
                    assert_eq!(prefixes, vec![X.to_string()]);
                    graceful_shutdown = true;
                }
            }
            Got::Message(Message::Notification(n)) => {
                assert!(
                    graceful_shutdown,
                    "the Cease came before any route with GRACEFUL_SHUTDOWN"
                );
                assert_eq!(
                    (n.code, n.subcode),
                    (
                        Notification::administrative_shutdown().code,
                        cease::ADMINISTRATIVE_SHUTDOWN
                    )
                );
                return;
            }
            other => {
                panic!("A: expected routes with GRACEFUL_SHUTDOWN, then the Cease; got {other:?}")
            }
        }
    }
}
