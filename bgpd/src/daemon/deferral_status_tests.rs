//! What the operator sees of route selection deferral (RFC 4724 4.1):
//! the control API's status (`tartanctl bgp status`) and the
//! `tartan_bgp_selection_deferred` gauge, with the peers of
//! `deferral_tests.rs`.
use super::deferral_tests::{A, B, Instance, P, X, a_resent, instance, set, table, up};
use crate::control::ControlSource;
use crate::session::test_lab::WAIT;
use std::net::IpAddr;
use tartan_api::bgp::RestartStatus;

/// The deferral's status once `ok` holds of it (None: not restarting);
/// the instance takes in what the peers sent at its own pace.
async fn status_when(
    i: &Instance,
    ok: impl Fn(&Option<RestartStatus>) -> bool,
) -> Option<RestartStatus> {
    let deadline = tokio::time::Instant::now() + WAIT;
    loop {
        let s = i.control.status().await.unwrap().restart;
        if ok(&s) {
            return s;
        }
        assert!(tokio::time::Instant::now() < deadline, "status stays {s:?}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

fn waiting(s: &Option<RestartStatus>) -> Vec<IpAddr> {
    s.as_ref()
        .map_or(vec![], |r| r.families["ipv4-unicast"].waiting_for.clone())
}

/// The gauge's line for IPv4 unicast.
fn gauge(i: &Instance, value: u8) -> bool {
    let line = format!("tartan_bgp_selection_deferred{{family=\"ipv4-unicast\"}} {value}");
    i.metrics.encode().lines().any(|l| l == line)
}

#[tokio::test]
async fn the_status_and_a_gauge_show_the_deferral_until_it_ends() {
    let i = instance(
        true,
        "[graceful_restart]\nstale_routes_time = 600\nselection_deferral_time = 300\n",
    )
    .await;
    let s = i
        .control
        .status()
        .await
        .unwrap()
        .restart
        .expect("restarting");
    assert!((1..=300).contains(&s.seconds_left), "{s:?}");
    let v4 = &s.families["ipv4-unicast"];
    assert!(v4.deferred);
    assert_eq!(v4.waiting_for, vec![IpAddr::from(A), IpAddr::from(B)]);
    assert!(gauge(&i, 1), "{}", i.metrics.encode());
    // A's End-of-RIB counts; B's is still waited for.
    let mut a = a_resent(i.port).await;
    let s = status_when(&i, |s| waiting(s) == vec![IpAddr::from(B)]).await;
    assert!(s.unwrap().families["ipv4-unicast"].deferred);
    let mut b = up(i.port, B, true).await;
    b.send_end_of_rib().await;
    table(&mut a, "A").await;
    assert_eq!(table(&mut b, "B").await, set(&[P, X]));
    // Selection done, restart over: nothing to show any more.
    assert_eq!(i.control.status().await.unwrap().restart, None);
    assert!(gauge(&i, 0), "{}", i.metrics.encode());
}

#[tokio::test]
async fn a_cold_start_shows_no_deferral() {
    let i = instance(false, "").await;
    assert_eq!(i.control.status().await.unwrap().restart, None);
    assert!(gauge(&i, 0), "{}", i.metrics.encode());
}
