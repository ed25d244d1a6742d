use crate::human::{duration, or_dash, truncate};
use crate::table::Table;
use tartan_api::bgp::PeerStatus;

/// Longest LAST ERROR shown in the narrow table; `-o wide` shows it whole.
const ERROR_WIDTH: usize = 48;

/// The peers table; empty when there are no peers.
pub fn render_peers(peers: &[PeerStatus], wide: bool) -> String {
    if peers.is_empty() {
        return String::new();
    }
    let mut headers = vec!["PEER", "ASN", "TYPE", "STATE", "BFD", "UPTIME", "PREFIXES"];
    if wide {
        headers.extend(["ROUTER ID", "HOLD", "FAMILIES", "MSGS IN/OUT", "RR CLIENT"]);
        headers.extend(["DESCRIPTION"]);
    }
    headers.push("LAST ERROR");
    let mut table = Table::new(headers);
    for p in peers {
        let p_ = &p.prefixes;
        let mut row = vec![
            p.address.to_string(),
            p.asn.to_string(),
            p.kind.to_string(),
            p.state.to_string(),
            p.bfd.as_ref().map_or_else(
                || "-".into(),
                |b| {
                    if b.multihop {
                        format!("{} multihop", b.state)
                    } else {
                        b.state.clone()
                    }
                },
            ),
            p.uptime_seconds.map_or_else(|| "-".into(), duration),
            format!("{}/{}/{}", p_.received, p_.accepted, p_.advertised),
        ];
        if wide {
            let (rx, tx) = (&p.messages.received, &p.messages.sent);
            let total = |m: &tartan_api::bgp::MessageTypeCounts| {
                m.open + m.update + m.notification + m.keepalive + m.route_refresh
            };
            row.extend([
                or_dash(p.router_id),
                or_dash(p.hold_time),
                if p.families.is_empty() {
                    "-".into()
                } else {
                    p.families.join(",")
                },
                format!("{}/{}", total(rx), total(tx)),
                if p.rr_client { "yes" } else { "no" }.into(),
                or_dash(p.description.as_deref()),
            ]);
        }
        row.push(match &p.last_error {
            Some(e) if wide => e.clone(),
            Some(e) => truncate(e, ERROR_WIDTH),
            None => "-".into(),
        });
        table.row(row);
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tartan_api::bgp::*;

    fn peer(addr: &str, state: SessionState, uptime: Option<u64>) -> PeerStatus {
        PeerStatus {
            address: addr.parse().unwrap(),
            port: None,
            asn: 65001,
            local_asn: 65000,
            kind: PeerKind::Ebgp,
            state,
            uptime_seconds: uptime,
            router_id: None,
            hold_time: None,
            families: vec![],
            prefixes: PrefixCounts {
                received: 10,
                accepted: 9,
                advertised: 3,
            },
            last_error: None,
            messages: MessageCounts::default(),
            graceful_restart: None,
            rr_client: false,
            description: None,
            bfd: None,
        }
    }

    #[test]
    fn narrow_table() {
        let mut down = peer("2001:db8::2", SessionState::Active, None);
        down.bfd = Some(BfdPeerStatus {
            state: "down".into(),
            diagnostic: "ControlDetectionTimeExpired".into(),
            tx_interval_ms: Some(1000),
            detection_time_ms: None,
            transitions: 3,
            multihop: false,
            remote_diagnostic: "None".into(),
        });
        down.kind = PeerKind::Ibgp;
        down.asn = 65000;
        down.last_error = Some("connection refused by the remote side of this session".into());
        let mut far = peer("198.51.100.7", SessionState::Established, Some(60));
        far.bfd = down.bfd.clone().map(|b| BfdPeerStatus {
            state: "up".into(),
            multihop: true,
            ..b
        });
        let peers = [
            peer("192.0.2.1", SessionState::Established, Some(192)),
            down,
            far,
        ];
        assert_eq!(
            render_peers(&peers, false),
            "PEER           ASN     TYPE   STATE         BFD           UPTIME   PREFIXES   LAST ERROR\n\
             192.0.2.1      65001   ebgp   Established   -             3m12s    10/9/3     -\n\
             2001:db8::2    65000   ibgp   Active        down          -        10/9/3     connection refused by the remote side of this s…\n\
             198.51.100.7   65001   ebgp   Established   up multihop   1m0s     10/9/3     -\n"
        );
    }

    #[test]
    fn wide_table_has_more_columns() {
        let mut p = peer("192.0.2.1", SessionState::Established, Some(7500));
        p.router_id = Some("192.0.2.1".parse().unwrap());
        p.hold_time = Some(90);
        p.families = vec!["ipv4-unicast".into(), "ipv6-unicast".into()];
        p.messages.received.keepalive = 4;
        p.messages.sent.update = 2;
        p.rr_client = true;
        p.description = Some("tor-a".into());
        let text = render_peers(&[p], true);
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap().split("   ").map(str::trim).collect();
        assert!(header.contains(&"ROUTER ID") && header.contains(&"MSGS IN/OUT"));
        let row = lines.next().unwrap();
        for cell in [
            "2h5m",
            "90",
            "ipv4-unicast,ipv6-unicast",
            "4/2",
            "yes",
            "tor-a",
        ] {
            assert!(row.contains(cell), "{cell} missing in {row}");
        }
    }

    #[test]
    fn no_peers_renders_nothing() {
        assert_eq!(render_peers(&[], false), "");
    }
}
