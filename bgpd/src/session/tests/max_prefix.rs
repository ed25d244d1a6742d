//! Maximum prefixes (RFC 4486 4): the instance finds the limit exceeded
//! and resets the session with Cease / Maximum Number of Prefixes Reached,
//! AFI, SAFI and the limit as data; the neighbor starts over after the
//! connect-retry time. bgpd has no warning-only mode.
use super::*;
use crate::wire::Notification;

#[test]
fn the_notification_carries_afi_safi_and_the_limit() {
    let n = Notification::max_prefixes_reached(Family::Ipv6Unicast, 1000);
    assert_eq!((n.code, n.subcode), (6, 1));
    assert_eq!(n.data, vec![0, 2, 1, 0, 0, 0x03, 0xe8]);
    assert_eq!(
        n.to_string(),
        "Cease / Maximum Number of Prefixes Reached (6/1)"
    );
}

#[test]
fn reaching_the_limit_resets_the_session_and_retries() {
    let n = Notification::max_prefixes_reached(Family::Ipv4Unicast, 3);
    let m = check(
        "Established AutomaticStop (max prefix)",
        fsm(State::Established, false, true),
        Event::AutomaticStop(n.clone()),
        State::Idle,
        // Not graceful even with graceful restart: we sent a NOTIFICATION.
        closing(Some(false), Cause::Sent(n), Then::Retry),
    );
    check(
        "Idle ConnectRetryTimer_Expires after the reset",
        m,
        Event::ConnectRetryTimerExpires,
        State::Connect,
        vec![Action::Dial],
    );
}

#[test]
fn a_reset_before_established_changes_nothing() {
    for s in [State::Connect, State::OpenSent, State::OpenConfirm] {
        let n = Notification::max_prefixes_reached(Family::Ipv4Unicast, 3);
        check(
            "AutomaticStop before Established",
            fsm(s, false, false),
            Event::AutomaticStop(n),
            s,
            vec![],
        );
    }
}
