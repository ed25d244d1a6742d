use super::support::get_over;
use crate::control::{Direction, MessageType, Metrics, serve_metrics_on};
use crate::model::Family;
use hyper_util::rt::TokioIo;
use std::net::IpAddr;
use std::sync::Arc;
use tartan_api::bgp::{PrefixCounts, SessionState};

fn peer_addr() -> IpAddr {
    "192.0.2.1".parse().unwrap()
}

#[test]
fn message_types_from_wire_codes() {
    assert_eq!(MessageType::from_code(1), Some(MessageType::Open));
    assert_eq!(MessageType::from_code(5), Some(MessageType::RouteRefresh));
    assert_eq!(MessageType::from_code(0), None);
    assert_eq!(MessageType::from_code(6), None);
}

#[test]
fn peer_handle_counts_and_exposes() {
    let m = Metrics::new();
    let p = m.peer(peer_addr());
    p.inc_received(MessageType::Update);
    p.inc_received(MessageType::Update);
    p.inc_message(Direction::Sent, MessageType::Keepalive);
    p.inc_treat_as_withdraw();
    p.set_state(SessionState::Established);
    p.set_prefixes(PrefixCounts {
        received: 10,
        accepted: 8,
        advertised: 2,
    });
    p.set_filtered(3);
    m.set_rib_prefixes(Family::Ipv6Unicast, 42);
    m.set_selection_deferred(Family::Ipv4Unicast, true);
    m.set_selection_deferred(Family::Ipv6Unicast, false);
    m.set_restarting(true);
    m.set_kernel_installed(7);
    m.inc_kernel_failed();

    let counts = p.message_counts();
    assert_eq!(counts.received.update, 2);
    assert_eq!(counts.sent.keepalive, 1);
    assert_eq!(counts.sent.update, 0);

    let text = m.encode();
    for line in [
        r#"tartan_bgp_peer_state{peer="192.0.2.1"} 6"#,
        r#"tartan_bgp_messages_total{peer="192.0.2.1",direction="received",type="update"} 2"#,
        r#"tartan_bgp_messages_total{peer="192.0.2.1",direction="sent",type="keepalive"} 1"#,
        r#"tartan_bgp_peer_prefixes_received{peer="192.0.2.1"} 10"#,
        r#"tartan_bgp_peer_prefixes_accepted{peer="192.0.2.1"} 8"#,
        r#"tartan_bgp_peer_prefixes_advertised{peer="192.0.2.1"} 2"#,
        r#"tartan_bgp_peer_prefixes_filtered{peer="192.0.2.1"} 3"#,
        r#"tartan_bgp_updates_treat_as_withdraw_total{peer="192.0.2.1"} 1"#,
        r#"tartan_bgp_rib_prefixes{family="ipv6-unicast"} 42"#,
        r#"tartan_bgp_selection_deferred{family="ipv4-unicast"} 1"#,
        r#"tartan_bgp_selection_deferred{family="ipv6-unicast"} 0"#,
        "tartan_bgp_restarting 1",
        "tartan_bgp_kernel_routes_installed 7",
        "tartan_bgp_kernel_routes_failed_total 1",
        "# EOF",
    ] {
        assert!(
            text.lines().any(|l| l == line),
            "missing {line:?} in\n{text}"
        );
    }
}

#[test]
fn a_new_peer_starts_idle_and_removal_drops_its_series() {
    let m = Metrics::new();
    let p = m.peer(peer_addr());
    assert!(
        m.encode()
            .contains(r#"tartan_bgp_peer_state{peer="192.0.2.1"} 1"#)
    );
    p.set_state(SessionState::OpenSent);
    // Asking again returns the same series, not a reset one.
    let again = m.peer(peer_addr());
    again.inc_sent(MessageType::Open);
    assert_eq!(p.message_counts().sent.open, 1);
    assert!(
        m.encode()
            .contains(r#"tartan_bgp_peer_state{peer="192.0.2.1"} 4"#)
    );

    m.remove_peer(peer_addr());
    assert!(!m.encode().contains("192.0.2.1"));
}

#[tokio::test]
async fn metrics_are_served_over_tcp() {
    let metrics = Arc::new(Metrics::new());
    metrics.peer(peer_addr()).inc_received(MessageType::Open);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (stop, rx) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(serve_metrics_on(listener, metrics, async {
        let _ = rx.await;
    }));

    let conn = || async { TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap()) };
    let (code, body) = get_over(conn().await, "/metrics").await;
    assert_eq!(code, 200);
    let text = String::from_utf8(body.to_vec()).unwrap();
    assert!(text.contains(
        r#"tartan_bgp_messages_total{peer="192.0.2.1",direction="received",type="open"} 1"#
    ));
    let (code, body) = get_over(conn().await, "/other").await;
    assert_eq!(code, 404);
    assert!(String::from_utf8_lossy(&body).contains("error"));

    stop.send(()).unwrap();
    task.await.unwrap().unwrap();
}

#[test]
fn apply_and_sync_durations_are_seconds_histograms() {
    let m = Metrics::new();
    let d = m.durations();
    d.kernel_route_apply.observe(0.0003);
    d.kernel_route_apply.observe(0.8);
    d.config_build.observe(0.002);
    let text = m.encode();
    for name in [
        "tartan_bgp_config_build_duration_seconds",
        "tartan_bgp_config_apply_duration_seconds",
        "tartan_bgp_kernel_route_apply_duration_seconds",
        "tartan_bgp_status_write_duration_seconds",
    ] {
        assert!(
            text.contains(&format!("# TYPE {name} histogram")),
            "{name}:\n{text}"
        );
    }
    assert!(text.contains("tartan_bgp_kernel_route_apply_duration_seconds_count 2"));
    assert!(
        text.contains("tartan_bgp_kernel_route_apply_duration_seconds_bucket{le=\"0.0005\"} 1")
    );
    assert!(text.contains("tartan_bgp_kernel_route_apply_duration_seconds_bucket{le=\"1.024\"} 2"));
    assert!(text.contains("tartan_bgp_config_build_duration_seconds_count 1"));
    assert!(text.contains("tartan_bgp_config_apply_duration_seconds_count 0"));
}
