//! The kernel routes of the previous run after our restart (RFC 4724
//! 4.1, `deferral.rs`): kept until every neighbor is up and has sent
//! End-of-RIB on its session, or the selection deferral time is over,
//! also when nobody is waited for and route selection is done at once;
//! and End-of-RIBs that count no more once the neighbor's routes are gone.
//! The instance runs without a kernel: the status's `kernelRoutesKept`
//! and the `tartan_bgp_restarting` gauge change exactly where the flush
//! is queued.
use super::deferral_tests::{A, B, P, Q, X, a_resent, connect, set, table, up};
use super::restart_end_tests::hang_up;
use super::test_instance::{free_port, run_updating};
use crate::config::Config;
use crate::control::{ControlSource, Metrics};
use crate::model::Family;
use crate::model::{AsPath, AsSegment, NextHop, Origin, PathAttrs};
use crate::session::test_lab::{Got, Raw, WAIT};
use crate::wire::{EncodeOptions, Message};
use std::net::IpAddr;
use std::sync::Arc;
use tartan_api::bgp::RestartStatus;
use tokio::io::AsyncWriteExt;
use tokio::sync::{mpsc, oneshot};

struct Instance {
    port: u16,
    control: super::ControlHandle,
    metrics: Arc<Metrics>,
    updates: mpsc::Sender<Config>,
    _stop: oneshot::Sender<()>,
}

/// The configuration of `deferral_tests.rs`; `extra`: more of the file,
/// `neighbor`: more of each neighbor's table.
fn text(port: u16, extra: &str, neighbor: &str) -> String {
    format!(
        "router_id = \"10.0.0.1\"\nasn = 65000\nebgp_requires_policy = false\n{extra}\
         [listen]\naddresses = [\"127.0.0.1\"]\nport = {port}\n\
         [kernel]\ninstall = false\n\
         [[announce]]\nprefix = \"{X}\"\n\
         [[neighbor]]\naddress = \"{A}\"\nasn = 65001\npassive = true\n{neighbor}\
         [[neighbor]]\naddress = \"{B}\"\nasn = 65002\npassive = true\n{neighbor}"
    )
}

/// Restarting, as after a start that found our routes in the kernel.
async fn instance(extra: &str, neighbor: &str) -> Instance {
    let port = free_port();
    let metrics = Arc::new(Metrics::new());
    let (control, stop, updates) =
        run_updating(&text(port, extra, neighbor), true, metrics.clone()).await;
    Instance {
        port,
        control,
        metrics,
        updates,
        _stop: stop,
    }
}

async fn restart(i: &Instance) -> Option<RestartStatus> {
    i.control.status().await.unwrap().restart
}

/// The restart's status once `ok` holds of it (None: over); the instance
/// takes in what the peers sent at its own pace.
async fn restart_when(
    i: &Instance,
    ok: impl Fn(&Option<RestartStatus>) -> bool,
) -> Option<RestartStatus> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let s = restart(i).await;
        if ok(&s) {
            return s;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "restart stays {s:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// The kernel routes of the previous run go (or went): the status and the
/// gauge show the restart over.
async fn restart_over(i: &Instance) {
    restart_when(i, |s| s.is_none()).await;
    assert!(
        gauge(i, "tartan_bgp_restarting 0"),
        "{}",
        i.metrics.encode()
    );
}

fn kept(s: &Option<RestartStatus>) -> bool {
    s.as_ref().is_some_and(|r| r.kernel_routes_kept)
}

fn waiting(s: &Option<RestartStatus>) -> Vec<IpAddr> {
    s.as_ref()
        .map_or(vec![], |r| r.families["ipv4-unicast"].waiting_for.clone())
}

fn gauge(i: &Instance, line: &str) -> bool {
    i.metrics.encode().lines().any(|l| l == line)
}

/// Waits for an UPDATE with `prefix` (KEEPALIVEs are fine).
async fn sees(peer: &mut Raw, prefix: &str) {
    loop {
        match peer.recv(WAIT).await {
            Got::Message(Message::Keepalive) => {}
            Got::Message(Message::Update(u)) => {
                let all = (u.reach.iter().flat_map(|r| &r.prefixes)).chain(&u.withdrawn);
                if all.map(|p| p.to_string()).any(|p| p == prefix) {
                    return;
                }
            }
            other => panic!("expected an UPDATE with {prefix}, got {other:?}"),
        }
    }
}

#[tokio::test]
async fn with_nobody_to_wait_for_the_kernel_routes_stay_until_every_neighbor_has_resent() {
    // No graceful restart with either neighbor: nothing to defer, but the
    // routes of the previous run must wait for the new ones.
    let i = instance("", "graceful_restart = false\n").await;
    let r = restart(&i).await.expect("restarting");
    assert!(!r.families["ipv4-unicast"].deferred, "{r:?}");
    assert!(
        r.kernel_routes_kept,
        "flushed before any neighbor was up: {r:?}"
    );
    assert!(
        gauge(&i, "tartan_bgp_restarting 1"),
        "{}",
        i.metrics.encode()
    );
    assert!(gauge(
        &i,
        r#"tartan_bgp_selection_deferred{family="ipv4-unicast"} 0"#
    ));
    let mut b = up(i.port, B, false).await;
    assert_eq!(table(&mut b, "B").await, set(&[X]));
    let mut a = up(i.port, A, false).await;
    assert_eq!(table(&mut a, "A").await, set(&[X]));
    // A resends its routes and End-of-RIB, then Q: once B has Q, A's
    // End-of-RIB was taken in. B has not sent its End-of-RIB yet.
    a.send_route(P).await;
    a.send_end_of_rib().await;
    a.send_route(Q).await;
    sees(&mut b, Q).await;
    assert!(
        kept(&restart(&i).await),
        "flushed before B has resent its routes"
    );
    b.send_end_of_rib().await;
    restart_over(&i).await;
}

#[tokio::test]
async fn peers_without_the_capability_do_not_have_the_kernel_routes_flushed_when_up() {
    // Both come up without graceful restart: selection waits for nobody
    // any more, but the kernel routes wait for their End-of-RIB.
    let i = instance("", "").await;
    let mut a = up(i.port, A, false).await;
    let mut b = up(i.port, B, false).await;
    assert_eq!(table(&mut a, "A").await, set(&[X]));
    assert_eq!(table(&mut b, "B").await, set(&[X]));
    assert!(
        kept(&restart(&i).await),
        "flushed once the sessions were up"
    );
    b.send_end_of_rib().await;
    a.send_end_of_rib().await;
    restart_over(&i).await;
}

#[tokio::test]
async fn a_neighbor_that_never_returns_holds_the_kernel_routes_until_the_deferral_time() {
    let i = instance(
        "[graceful_restart]\nstale_routes_time = 60\nselection_deferral_time = 1\n",
        "",
    )
    .await;
    let mut a = a_resent(i.port).await;
    let s = restart_when(&i, |s| waiting(s) == vec![IpAddr::from(B)]).await;
    assert!(kept(&s), "{s:?}");
    // B never comes: A's table, and the flush, come with the timer.
    assert_eq!(table(&mut a, "A").await, set(&[X]));
    restart_over(&i).await;
}

#[tokio::test]
async fn a_neighbor_reconfigured_during_the_deferral_is_waited_for_again() {
    let port_text = |i: &Instance, hold: &str| text(i.port, "", hold);
    let i = instance("", "").await;
    let a = a_resent(i.port).await;
    restart_when(&i, |s| waiting(s) == vec![IpAddr::from(B)]).await;
    // A new hold time resets A's session: its routes go, and so does the
    // End-of-RIB that completed them.
    let new = crate::config::parse("t", &port_text(&i, "hold_time = 60\n")).unwrap();
    i.updates.send(new).await.unwrap();
    let s = restart_when(&i, |s| waiting(s).contains(&IpAddr::from(A))).await;
    assert_eq!(waiting(&s), vec![IpAddr::from(A), IpAddr::from(B)]);
    // B's End-of-RIB does not end selection without A's routes.
    let mut b = up(i.port, B, true).await;
    b.send_end_of_rib().await;
    let s = restart_when(&i, |s| waiting(s) == vec![IpAddr::from(A)]).await;
    assert!(s.unwrap().families["ipv4-unicast"].deferred);
    // A comes back and resends: selection is done with its routes.
    drop(a);
    let mut a = connect(i.port, A, true).await;
    a.establish(60).await;
    a.send_route(P).await;
    a.send_end_of_rib().await;
    assert_eq!(table(&mut b, "B").await, set(&[P, X]));
    assert_eq!(table(&mut a, "A").await, set(&[X]));
    restart_when(&i, |s| s.is_none()).await;
}

#[tokio::test]
async fn an_end_of_rib_counts_no_more_once_its_session_ends_without_graceful_restart() {
    let i = instance("", "").await;
    // A without graceful restart: not waited for while up, but its End-of-
    // RIB is recorded; its routes go with its session.
    let mut a = up(i.port, A, false).await;
    a.send_route(P).await;
    a.send_end_of_rib().await;
    let mut b = up(i.port, B, true).await;
    b.send_route(Q).await;
    hang_up(a).await;
    // Down, A is a graceful-restart neighbor to wait for again: B's
    // End-of-RIB does not end selection.
    restart_when(&i, |s| waiting(s) == vec![IpAddr::from(A), IpAddr::from(B)]).await;
    b.send_end_of_rib().await;
    let s = restart_when(&i, |s| waiting(s) == vec![IpAddr::from(A)]).await;
    assert!(s.unwrap().families["ipv4-unicast"].deferred);
}

#[tokio::test]
async fn a_family_nobody_waits_for_is_not_shown_held_at_start() {
    let i = instance("", "").await;
    assert!(gauge(
        &i,
        r#"tartan_bgp_selection_deferred{family="ipv4-unicast"} 1"#
    ));
    assert!(
        gauge(
            &i,
            r#"tartan_bgp_selection_deferred{family="ipv6-unicast"} 0"#
        ),
        "{}",
        i.metrics.encode()
    );
}

/// A up with IPv4 and IPv6 unicast, both in its graceful restart
/// capability with the F bit.
async fn a_up_dual_stack(port: u16) -> Raw {
    a_up_keeping(port, &Family::ALL).await
}

/// A up with IPv4 and IPv6 unicast, only `kept` in its graceful restart
/// capability (with the F bit).
async fn a_up_keeping(port: u16, kept: &[Family]) -> Raw {
    let mut a = connect(port, A, true).await;
    a.expect("OPEN", |m| matches!(m, Message::Open(_))).await;
    let mut open = a.open_message(90);
    open.caps.families = Family::ALL.to_vec();
    if let Some(g) = open.caps.graceful_restart.as_mut() {
        g.families = kept.iter().map(|f| (*f, true)).collect();
    }
    a.stream.write_all(&open.encode()).await.unwrap();
    a.expect("KEEPALIVE", |m| *m == Message::Keepalive).await;
    a.send_keepalive().await;
    a
}

async fn end_of_rib(peer: &mut Raw, family: Family) {
    let mut out = Vec::new();
    crate::wire::encode_end_of_rib(family, &mut out);
    peer.stream.write_all(&out).await.unwrap();
}

fn waiting_in(s: &Option<RestartStatus>, family: &str) -> Vec<IpAddr> {
    s.as_ref()
        .map_or(vec![], |r| r.families[family].waiting_for.clone())
}

/// The stale-routes time runs from a session's start, so it ends after
/// the deferral, shorter (`config/file.rs`), unless a new configuration
/// shortens it meanwhile, as here.
#[tokio::test]
async fn the_stale_routes_timeout_keeps_the_end_of_ribs_of_the_current_session() {
    let both = "families = [\"ipv4-unicast\", \"ipv6-unicast\"]\n";
    let i = instance(
        "[graceful_restart]\nstale_routes_time = 600\nselection_deferral_time = 300\n",
        both,
    )
    .await;
    let short = "[graceful_restart]\nstale_routes_time = 1\nselection_deferral_time = 0\n";
    let new = crate::config::parse("t", &text(i.port, short, both)).unwrap();
    i.updates.send(new).await.unwrap();
    // Taken over (the instance times each configuration it applies).
    let deadline = tokio::time::Instant::now() + WAIT;
    while !gauge(&i, "tartan_bgp_config_apply_duration_seconds_count 1") {
        assert!(
            tokio::time::Instant::now() < deadline,
            "new configuration not applied: {}",
            i.metrics.encode()
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    // A sends End-of-RIB in both families, and its session is reset: its
    // routes stay, stale, and its End-of-RIBs count.
    let mut a = a_up_dual_stack(i.port).await;
    a.send_route(P).await;
    end_of_rib(&mut a, Family::Ipv4Unicast).await;
    end_of_rib(&mut a, Family::Ipv6Unicast).await;
    let b = vec![IpAddr::from(B)];
    restart_when(&i, |s| {
        waiting_in(s, "ipv4-unicast") == b && waiting_in(s, "ipv6-unicast") == b
    })
    .await;
    hang_up(a).await;
    // Back, A resends its IPv4 routes only: after the stale-routes time
    // its IPv6 routes go, and its IPv6 End-of-RIB with them; its IPv4
    // routes are current, and their End-of-RIB still counts.
    let mut a = a_up_dual_stack(i.port).await;
    a.send_route(P).await;
    end_of_rib(&mut a, Family::Ipv4Unicast).await;
    let a_b = vec![IpAddr::from(A), IpAddr::from(B)];
    let s = restart_when(&i, |s| waiting_in(s, "ipv6-unicast") == a_b).await;
    assert_eq!(waiting_in(&s, "ipv4-unicast"), b, "{s:?}");
}

const R: &str = "2001:db8:8:1::/64";

/// An UPDATE announcing the IPv6 prefix `prefix` from `peer`.
async fn send_route_v6(peer: &mut Raw, prefix: &str) {
    let attrs = PathAttrs {
        origin: Origin::Igp,
        as_path: AsPath {
            segments: vec![AsSegment::Sequence(vec![peer.asn])],
        },
        next_hop: NextHop::V6 {
            global: "2001:db8::fe".parse().unwrap(),
            link_local: None,
        },
        ..PathAttrs::default()
    };
    let mut out = Vec::new();
    let prefixes = [prefix.parse().unwrap()];
    let opts = EncodeOptions::default();
    crate::wire::encode_announce(&attrs, Family::Ipv6Unicast, &prefixes, &opts, &mut out).unwrap();
    peer.stream.write_all(&out).await.unwrap();
}

/// Waits until the prefixes of `family` in the RIB are `want`.
async fn rib_when(i: &Instance, family: Family, want: &[&str]) {
    let mut want: Vec<String> = want.iter().map(|p| p.to_string()).collect();
    want.sort();
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let routes = i.control.routes(Some(family), None).await.unwrap();
        let mut got: Vec<String> = routes.iter().map(|e| e.prefix.to_string()).collect();
        got.sort();
        if got == want {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "{family} RIB: expected {want:?}, got {got:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// RFC 4724 4.2: at a graceful end, only the families of the peer's
/// capability are kept; the routes of the others go at once, and so does
/// the End-of-RIB that completed them.
#[tokio::test]
async fn an_end_of_rib_counts_no_more_once_its_family_is_not_kept_over_a_restart() {
    let both = "families = [\"ipv4-unicast\", \"ipv6-unicast\"]\n";
    let i = instance("", both).await;
    // A keeps only IPv4 over a restart; it sends End-of-RIB in both.
    let mut a = a_up_keeping(i.port, &[Family::Ipv4Unicast]).await;
    a.send_route(P).await;
    send_route_v6(&mut a, R).await;
    end_of_rib(&mut a, Family::Ipv4Unicast).await;
    end_of_rib(&mut a, Family::Ipv6Unicast).await;
    let b = vec![IpAddr::from(B)];
    restart_when(&i, |s| {
        waiting_in(s, "ipv4-unicast") == b && waiting_in(s, "ipv6-unicast") == b
    })
    .await;
    rib_when(&i, Family::Ipv6Unicast, &[R]).await;
    // Its session ends without NOTIFICATION: P stays, stale, and its
    // End-of-RIB counts; R goes, and A is waited for again in IPv6.
    hang_up(a).await;
    rib_when(&i, Family::Ipv6Unicast, &[]).await;
    let a_b = vec![IpAddr::from(A), IpAddr::from(B)];
    let s = restart_when(&i, |s| waiting_in(s, "ipv6-unicast") == a_b).await;
    assert_eq!(waiting_in(&s, "ipv4-unicast"), b, "{s:?}");
    rib_when(&i, Family::Ipv4Unicast, &[P, X]).await;
}

/// A second graceful end before End-of-RIB: the routes still stale from
/// the first go (`Rib::mark_stale`), and so does the End-of-RIB, of the
/// session before, that completed them.
#[tokio::test]
async fn an_end_of_rib_counts_no_more_once_its_stale_routes_go_at_a_second_restart() {
    let i = instance("", "").await;
    hang_up(a_resent(i.port).await).await;
    // P stale, A's End-of-RIB counts while A is down and once it is back.
    let b = vec![IpAddr::from(B)];
    let a = up(i.port, A, true).await;
    restart_when(&i, |s| waiting(s) == b).await;
    rib_when(&i, Family::Ipv4Unicast, &[P, X]).await;
    // A's new session ends before A resends anything: P goes.
    hang_up(a).await;
    rib_when(&i, Family::Ipv4Unicast, &[X]).await;
    restart_when(&i, |s| waiting(s) == vec![IpAddr::from(A), IpAddr::from(B)]).await;
}
