//! A peer that restarts while its session is up (RFC 4724 4.2), against
//! the whole instance over loopback TCP: its new connection replaces the
//! session once its OPEN is accepted, and its routes stay, stale, until
//! its End-of-RIB.
use super::ControlHandle;
use super::test_instance::{free_port, run};
use crate::control::ControlSource;
use crate::model::Family;
use crate::session::test_lab::{Got, Raw, WAIT};
use crate::wire::Message;
use std::time::Duration;
use tokio::net::TcpStream;
use tokio::sync::oneshot;

/// The instance, listening on 127.0.0.1 for its one passive neighbor
/// there (graceful restart on), and the port.
async fn instance() -> (ControlHandle, u16, oneshot::Sender<()>) {
    let port = free_port();
    let text = format!(
        "router_id = \"10.0.0.1\"\nasn = 65000\nebgp_requires_policy = false\n\
         [listen]\naddresses = [\"127.0.0.1\"]\nport = {port}\n\
         [kernel]\ninstall = false\n\
         [[neighbor]]\naddress = \"127.0.0.1\"\nasn = 65001\npassive = true\n"
    );
    let (control, stop) = run(&text, false).await;
    (control, port, stop)
}

async fn connect(port: u16) -> Raw {
    let s = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    Raw::new(s, true)
}

/// Each IPv4 prefix in the RIB with whether its best path is stale.
async fn rib(control: &ControlHandle) -> Vec<(String, bool)> {
    let routes = control.routes(Some(Family::Ipv4Unicast), None).await;
    let mut r: Vec<(String, bool)> = routes
        .unwrap()
        .iter()
        .map(|e| {
            (
                e.prefix.to_string(),
                e.paths.first().is_some_and(|p| p.stale),
            )
        })
        .collect();
    r.sort();
    r
}

/// Waits until the RIB is `want`.
async fn wait_rib(control: &ControlHandle, want: &[(&str, bool)]) {
    let want: Vec<(String, bool)> = want.iter().map(|(p, s)| (p.to_string(), *s)).collect();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let got = rib(control).await;
        if got == want {
            return;
        }
        if tokio::time::Instant::now() > deadline {
            panic!("RIB (prefix, stale): expected {want:?}, got {got:?}");
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

const P: &str = "10.7.1.0/24";
const Q: &str = "10.7.2.0/24";

#[tokio::test]
async fn a_restarted_peers_routes_stay_stale_until_its_end_of_rib() {
    let (control, port, _stop) = instance().await;
    let mut old = connect(port).await;
    old.establish(90).await;
    old.send_route(P).await;
    old.send_route(Q).await;
    wait_rib(&control, &[(P, false), (Q, false)]).await;

    // A connection that stays silent changes nothing.
    let mut silent = connect(port).await;
    silent
        .expect("OPEN", |m| matches!(m, Message::Open(_)))
        .await;
    tokio::time::sleep(Duration::from_millis(200)).await;
    wait_rib(&control, &[(P, false), (Q, false)]).await;

    // The restarted peer: its OPEN on a new connection ends the session;
    // the routes stay, stale.
    let mut new = connect(port).await;
    new.open(90).await;
    wait_rib(&control, &[(P, true), (Q, true)]).await;
    loop {
        match old.recv(WAIT).await {
            Got::Closed => break,
            Got::Message(Message::Update(_) | Message::Keepalive) => {}
            other => panic!("expected the old connection closed, got {other:?}"),
        }
    }
    new.expect("KEEPALIVE", |m| *m == Message::Keepalive).await;
    new.send_keepalive().await;
    // P is sent again; Q stays stale until End-of-RIB, which sweeps it.
    new.send_route(P).await;
    wait_rib(&control, &[(P, false), (Q, true)]).await;
    new.send_end_of_rib().await;
    wait_rib(&control, &[(P, false)]).await;
    drop(silent);
}
