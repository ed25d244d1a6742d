//! Route selection deferral as the restarting speaker (RFC 4724 4.1),
//! against the whole instance over loopback TCP: peers A (127.0.0.1) and
//! B (127.0.0.2), both passive, graceful restart on, eBGP; the instance
//! announces X itself.
use super::ControlHandle;
use super::test_instance::{free_port, run_with};
use crate::control::Metrics;
use crate::model::Family;
use crate::session::test_lab::{Got, Raw, WAIT};
use crate::wire::{Message, Update};
use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpSocket;
use tokio::sync::oneshot;

pub(super) const A: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 1);
pub(super) const B: Ipv4Addr = Ipv4Addr::new(127, 0, 0, 2);
pub(super) const P: &str = "10.8.1.0/24";
pub(super) const Q: &str = "10.8.2.0/24";
pub(super) const X: &str = "10.8.9.0/24";

pub(super) struct Instance {
    pub port: u16,
    pub control: ControlHandle,
    pub metrics: Arc<Metrics>,
    _stop: oneshot::Sender<()>,
    /// Just before the daemon started.
    started: Instant,
}

/// The instance; `restarting`: as after a restart with our routes found
/// in the kernel; `extra`: more of the file (neighbors' settings).
pub(super) async fn instance(restarting: bool, extra: &str) -> Instance {
    let port = free_port();
    let text = format!(
        "router_id = \"10.0.0.1\"\nasn = 65000\nebgp_requires_policy = false\n{extra}\
         [listen]\naddresses = [\"127.0.0.1\"]\nport = {port}\n\
         [kernel]\ninstall = false\n\
         [[announce]]\nprefix = \"{X}\"\n\
         [[neighbor]]\naddress = \"{A}\"\nasn = 65001\npassive = true\n\
         [[neighbor]]\naddress = \"{B}\"\nasn = 65002\npassive = true\n"
    );
    let started = Instant::now();
    let metrics = Arc::new(Metrics::new());
    let (control, stop) = run_with(&text, restarting, metrics.clone()).await;
    Instance {
        port,
        control,
        metrics,
        _stop: stop,
        started,
    }
}

/// The peer at `from` connects; graceful restart with the Restart State
/// bit clear (a helper), or no graceful restart.
pub(super) async fn connect(port: u16, from: Ipv4Addr, graceful_restart: bool) -> Raw {
    let s = TcpSocket::new_v4().unwrap();
    s.bind(SocketAddr::new(IpAddr::V4(from), 0)).unwrap();
    let stream = s.connect(([127, 0, 0, 1], port).into()).await.unwrap();
    let mut r = Raw::new(stream, graceful_restart);
    r.restarting = false;
    if from == B {
        r.asn = 65002;
        r.router_id = Ipv4Addr::new(10, 0, 0, 6);
    }
    r
}

/// Established, as a helper would be.
pub(super) async fn up(port: u16, from: Ipv4Addr, graceful_restart: bool) -> Raw {
    let mut r = connect(port, from, graceful_restart).await;
    r.establish(90).await;
    r
}

/// A up, having sent P and End-of-RIB.
pub(super) async fn a_resent(port: u16) -> Raw {
    let mut a = up(port, A, true).await;
    a.send_route(P).await;
    a.send_end_of_rib().await;
    a
}

/// No UPDATE for `wait` (KEEPALIVEs are fine).
async fn silent(peer: &mut Raw, wait: Duration, who: &str) {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        match peer.recv(left).await {
            Got::TimedOut => return,
            Got::Message(Message::Keepalive) => {}
            other => {
                panic!("{who} was sent something while route selection is deferred: {other:?}")
            }
        }
    }
}

/// The prefixes `u` announces. Over loopback our next hop is 127.0.0.1,
/// which the test peer's decoder takes for a bad one (treat-as-withdraw,
/// RFC 7606): those prefixes were still announced. Any other withdrawal
/// fails the test.
fn announced(u: &Update) -> Vec<String> {
    let withdrawn = match &u.treat_as_withdraw {
        Some(why) if why.contains("loopback") => vec![],
        _ => u.withdrawn.clone(),
    };
    assert!(withdrawn.is_empty(), "withdrawal {u:?}");
    let mut got: Vec<String> = (u.reach.iter().flat_map(|r| &r.prefixes))
        .map(|p| p.to_string())
        .collect();
    if u.treat_as_withdraw.is_some() {
        got.extend(u.withdrawn.iter().map(|p| p.to_string()));
    }
    got
}

/// The prefixes announced up to IPv4 End-of-RIB, which must come after
/// them, with no withdrawal.
pub(super) async fn table(peer: &mut Raw, who: &str) -> BTreeSet<String> {
    let mut got = BTreeSet::new();
    loop {
        match peer.recv(WAIT).await {
            Got::Message(Message::Keepalive) => {}
            Got::Message(Message::Update(u)) => {
                if u.end_of_rib == Some(Family::Ipv4Unicast) {
                    return got;
                }
                got.extend(announced(&u));
            }
            other => panic!("{who}: expected the table and End-of-RIB, got {other:?}"),
        }
    }
}

pub(super) fn set(p: &[&str]) -> BTreeSet<String> {
    p.iter().map(|s| s.to_string()).collect()
}

#[tokio::test]
async fn a_restarting_speaker_sends_nothing_until_every_peers_end_of_rib() {
    let i = instance(true, "").await;
    let mut a = a_resent(i.port).await;
    // B is not up yet: A gets neither our routes nor End-of-RIB.
    silent(&mut a, Duration::from_millis(500), "A").await;
    let mut b = up(i.port, B, true).await;
    b.send_route(Q).await;
    silent(&mut a, Duration::from_millis(300), "A").await;
    silent(&mut b, Duration::from_millis(100), "B").await;
    // B's End-of-RIB: selection is done, each gets the whole table, then
    // End-of-RIB.
    b.send_end_of_rib().await;
    assert_eq!(table(&mut a, "A").await, set(&[Q, X]));
    assert_eq!(table(&mut b, "B").await, set(&[P, X]));
}

#[tokio::test]
async fn the_deferral_ends_with_its_own_time_before_the_stale_routes_time() {
    let i = instance(
        true,
        "[graceful_restart]\nstale_routes_time = 60\nselection_deferral_time = 2\n",
    )
    .await;
    let mut a = a_resent(i.port).await;
    // B never comes: A's table waits for the deferral time, no longer (a
    // helper keeping our routes for the stale-routes time has them again
    // well before it gives up on them).
    assert_eq!(table(&mut a, "A").await, set(&[X]));
    let waited = i.started.elapsed();
    assert!(
        waited >= Duration::from_secs(2),
        "the table went out after {waited:?}, before the deferral time"
    );
    assert!(
        waited < Duration::from_secs(60),
        "the table waited for the stale-routes time: {waited:?}"
    );
    // B, up after the deferral, gets its table at once.
    let mut b = up(i.port, B, true).await;
    assert_eq!(table(&mut b, "B").await, set(&[P, X]));
}

#[tokio::test]
async fn a_peer_without_graceful_restart_is_not_waited_for() {
    let i = instance(true, "").await;
    let mut a = up(i.port, A, true).await;
    let mut b = up(i.port, B, false).await;
    b.send_route(Q).await;
    // A has not sent End-of-RIB: nothing goes out, to either.
    silent(&mut a, Duration::from_millis(500), "A").await;
    silent(&mut b, Duration::from_millis(100), "B").await;
    a.send_route(P).await;
    a.send_end_of_rib().await;
    // B never sends End-of-RIB, and is not waited for.
    assert_eq!(table(&mut a, "A").await, set(&[Q, X]));
    assert_eq!(table(&mut b, "B").await, set(&[P, X]));
}

#[tokio::test]
async fn a_peer_that_restarts_too_is_not_waited_for() {
    let i = instance(true, "").await;
    let mut a = up(i.port, A, true).await;
    // B sets the Restart State bit: it waits for our End-of-RIB.
    let mut b = connect(i.port, B, true).await;
    b.restarting = true;
    b.establish(90).await;
    a.send_end_of_rib().await;
    assert_eq!(table(&mut a, "A").await, set(&[X]));
    assert_eq!(table(&mut b, "B").await, set(&[X]));
}

#[tokio::test]
async fn a_cold_start_sends_the_table_at_once() {
    let i = instance(false, "").await;
    // B is down and A sends no End-of-RIB: A gets its table anyway.
    let mut a = up(i.port, A, true).await;
    assert_eq!(table(&mut a, "A").await, set(&[X]));
    let mut b = up(i.port, B, true).await;
    assert_eq!(table(&mut b, "B").await, set(&[X]));
    a.send_route(P).await;
    match b.recv(WAIT).await {
        Got::Message(Message::Update(u)) => assert_eq!(announced(&u), vec![P.to_string()]),
        other => panic!("expected P, got {other:?}"),
    }
}
