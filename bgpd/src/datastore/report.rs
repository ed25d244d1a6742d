//! The node's BGPNodeStatus report from the control API's view of the
//! speaker (pure): what to write, and whether it differs from what was
//! written last.
use tartan_api::bgp::{PeerStatus, SessionState, SpeakerStatus};
use tartan_api::resources::{BgpNodeStatusSpec, BgpSessionReport};

/// The report of `node` at `now` (seconds since the epoch). `previous`
/// keeps each Established session's `since` steady: it is computed from an
/// uptime in whole seconds, so two readings a second apart may differ by
/// one; a reading within a second of the last one keeps the last one.
pub fn report(
    node: &str,
    speaker: &SpeakerStatus,
    peers: &[PeerStatus],
    now: u64,
    refresh_seconds: u32,
    previous: Option<&BgpNodeStatusSpec>,
) -> BgpNodeStatusSpec {
    let mut sessions: Vec<BgpSessionReport> = peers
        .iter()
        .map(|p| {
            let peer = p.address.to_string();
            let since = (p.state == SessionState::Established)
                .then(|| p.uptime_seconds.map(|u| now.saturating_sub(u)))
                .flatten()
                .map(|s| steady_since(&peer, s, previous));
            BgpSessionReport {
                peer,
                asn: p.asn,
                state: p.state,
                since,
                prefixes_received: p.prefixes.received,
                prefixes_sent: p.prefixes.advertised,
                last_error: p.last_error.clone(),
                bfd: p.bfd.as_ref().map(|b| b.state.clone()),
            }
        })
        .collect();
    sessions.sort_by_key(|s| s.peer.parse::<std::net::IpAddr>().ok());
    BgpNodeStatusSpec {
        node: node.to_string(),
        updated: now,
        refresh_seconds: refresh_seconds.max(1),
        router_id: speaker.router_id.to_string(),
        asn: speaker.asn,
        sessions,
    }
}

fn steady_since(peer: &str, since: u64, previous: Option<&BgpNodeStatusSpec>) -> u64 {
    previous
        .and_then(|p| p.sessions.iter().find(|s| s.peer == peer))
        .and_then(|s| s.since)
        .filter(|old| old.abs_diff(since) <= 1)
        .unwrap_or(since)
}

/// Whether `new` says something `old` does not (everything but the time
/// of writing).
pub fn changed(old: &BgpNodeStatusSpec, new: &BgpNodeStatusSpec) -> bool {
    let strip = |s: &BgpNodeStatusSpec| BgpNodeStatusSpec {
        updated: 0,
        ..s.clone()
    };
    strip(old) != strip(new)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tartan_api::bgp::{MessageCounts, PeerKind, PrefixCounts};

    fn speaker() -> SpeakerStatus {
        SpeakerStatus {
            router_id: "192.0.2.1".parse().unwrap(),
            asn: 64512,
            peers: 2,
            established_peers: 1,
            routes: Default::default(),
            kernel: Default::default(),
            started_at: 0,
            uptime_seconds: 0,
            version: "test".into(),
            restart: None,
        }
    }

    fn peer(addr: &str, state: SessionState, uptime: Option<u64>) -> PeerStatus {
        PeerStatus {
            address: addr.parse().unwrap(),
            port: None,
            asn: 64512,
            local_asn: 64512,
            kind: PeerKind::Ibgp,
            state,
            uptime_seconds: uptime,
            router_id: None,
            hold_time: None,
            families: vec![],
            prefixes: PrefixCounts {
                received: 3,
                accepted: 3,
                advertised: 2,
            },
            last_error: Some("connection refused".into()),
            messages: MessageCounts::default(),
            graceful_restart: None,
            rr_client: false,
            description: None,
            bfd: None,
        }
    }

    #[test]
    fn sessions_by_address_with_since_only_when_established() {
        let peers = [
            peer("192.0.2.10", SessionState::Active, None),
            peer("192.0.2.9", SessionState::Established, Some(100)),
        ];
        let r = report("node-a", &speaker(), &peers, 1000, 30, None);
        assert_eq!(r.node, "node-a");
        assert_eq!((r.updated, r.refresh_seconds), (1000, 30));
        assert_eq!(r.router_id, "192.0.2.1");
        let s: Vec<_> = r.sessions.iter().map(|s| s.peer.as_str()).collect();
        assert_eq!(s, ["192.0.2.9", "192.0.2.10"]);
        assert_eq!(r.sessions[0].since, Some(900));
        assert_eq!(r.sessions[1].since, None);
        assert_eq!(
            (r.sessions[0].prefixes_received, r.sessions[0].prefixes_sent),
            (3, 2)
        );
        assert_eq!(
            r.sessions[1].last_error.as_deref(),
            Some("connection refused")
        );
        assert_eq!(r.sessions[0].bfd, None);
    }

    #[test]
    fn a_second_reading_is_no_change_but_a_state_change_is() {
        let up = [peer("192.0.2.9", SessionState::Established, Some(100))];
        let first = report("n", &speaker(), &up, 1000, 30, None);
        // A second later the uptime reads 100 again (rounding): since
        // would be 901; it stays 900, and nothing changed.
        let again = report("n", &speaker(), &up, 1001, 30, Some(&first));
        assert_eq!(again.sessions[0].since, Some(900));
        assert!(!changed(&first, &again));
        // A reset: uptime 0 at 1500 is a new since, and a change.
        let reset = [peer("192.0.2.9", SessionState::Established, Some(0))];
        let r = report("n", &speaker(), &reset, 1500, 30, Some(&first));
        assert_eq!(r.sessions[0].since, Some(1500));
        assert!(changed(&first, &r));
        let down = [peer("192.0.2.9", SessionState::Idle, None)];
        assert!(changed(
            &first,
            &report("n", &speaker(), &down, 1001, 30, Some(&first))
        ));
    }
}
