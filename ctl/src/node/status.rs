//! The node status table: one row per session of every node's report; a
//! node whose report is stale (its bgpd stopped writing) shows its
//! sessions as `Down (stale)`.
use crate::human::{duration, truncate};
use crate::table::Table;
use serde::Serialize;
use tartan_api::resources::{BgpNodeStatus, BgpNodeStatusSpec};

/// Longest LAST ERROR shown in the narrow table; `-o wide` shows it whole.
const ERROR_WIDTH: usize = 40;

/// A report as `-o json` / `-o yaml` give it: the stored report, and what
/// the reader concluded from its age.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NodeView {
    pub node: String,
    /// Seconds since bgpd wrote the report.
    pub age_seconds: u64,
    /// Older than its refresh period allows: the node's bgpd is not
    /// running, and its sessions are to be taken as down.
    pub stale: bool,
    pub report: BgpNodeStatusSpec,
}

/// The reports at `now` (seconds since the epoch), ordered by node.
pub fn views(reports: &[BgpNodeStatus], now: u64) -> Vec<NodeView> {
    let mut out: Vec<NodeView> = reports
        .iter()
        .map(|r| NodeView {
            node: r
                .metadata
                .name
                .clone()
                .unwrap_or_else(|| r.spec.node.clone()),
            age_seconds: now.saturating_sub(r.spec.updated),
            stale: r.spec.is_stale(now),
            report: r.spec.clone(),
        })
        .collect();
    out.sort_by(|a, b| a.node.cmp(&b.node));
    out
}

/// The table; empty when there are no reports.
pub fn render_status(views: &[NodeView], wide: bool) -> String {
    if views.is_empty() {
        return String::new();
    }
    let mut headers = vec![
        "NODE",
        "PEER",
        "ASN",
        "STATE",
        "UPTIME",
        "PREFIXES RX/TX",
        "BFD",
        "UPDATED",
    ];
    if wide {
        headers.insert(1, "ROUTER ID");
    }
    headers.push("LAST ERROR");
    let mut table = Table::new(headers);
    for v in views {
        let updated = format!("{} ago", duration(v.age_seconds));
        let now = v.report.updated + v.age_seconds;
        if v.report.sessions.is_empty() {
            let mut row = vec![v.node.clone(), "-".into(), "-".into()];
            row.push(if v.stale { "stale" } else { "no sessions" }.into());
            row.extend([
                "-".into(),
                "-".into(),
                "-".into(),
                updated.clone(),
                "-".into(),
            ]);
            if wide {
                row.insert(1, v.report.router_id.clone());
            }
            table.row(row);
            continue;
        }
        for s in &v.report.sessions {
            let state = if v.stale {
                "Down (stale)".to_string()
            } else {
                s.state.to_string()
            };
            let uptime = match s.since {
                Some(t) if !v.stale => duration(now.saturating_sub(t)),
                _ => "-".into(),
            };
            let mut row = vec![
                v.node.clone(),
                s.peer.clone(),
                s.asn.to_string(),
                state,
                uptime,
                format!("{}/{}", s.prefixes_received, s.prefixes_sent),
                s.bfd.clone().unwrap_or_else(|| "-".into()),
                updated.clone(),
                match &s.last_error {
                    Some(e) if wide => e.clone(),
                    Some(e) => truncate(e, ERROR_WIDTH),
                    None => "-".into(),
                },
            ];
            if wide {
                row.insert(1, v.report.router_id.clone());
            }
            table.row(row);
        }
    }
    table.render()
}

#[cfg(test)]
mod tests {
    use super::*;
    use tartan_api::bgp::SessionState;
    use tartan_api::resources::BgpSessionReport;

    fn report(node: &str, updated: u64, state: SessionState) -> BgpNodeStatus {
        BgpNodeStatus::new(
            node,
            BgpNodeStatusSpec {
                node: node.into(),
                updated,
                refresh_seconds: 10,
                router_id: "192.0.2.1".into(),
                asn: 64512,
                sessions: vec![BgpSessionReport {
                    peer: "192.0.2.2".into(),
                    asn: 64512,
                    state,
                    since: (state == SessionState::Established).then_some(updated - 60),
                    prefixes_received: 1,
                    prefixes_sent: 2,
                    last_error: None,
                    bfd: None,
                }],
            },
        )
    }

    #[test]
    fn fresh_and_stale_reports() {
        let r = [
            report("node-b", 980, SessionState::Established),
            report("node-a", 1000, SessionState::Established),
        ];
        let v = views(&r, 1000);
        assert_eq!(v[0].node, "node-a");
        assert!(!v[0].stale);
        // node-b: 20 s old with a 10 s period (margin 5 s): stale.
        assert!(v[1].stale);
        assert_eq!(v[1].age_seconds, 20);
        assert_eq!(
            render_status(&v, false),
            "NODE     PEER        ASN     STATE          UPTIME   PREFIXES RX/TX   BFD   UPDATED   LAST ERROR\n\
             node-a   192.0.2.2   64512   Established    1m0s     1/2              -     0s ago    -\n\
             node-b   192.0.2.2   64512   Down (stale)   -        1/2              -     20s ago   -\n"
        );
    }

    #[test]
    fn no_reports_renders_nothing() {
        assert_eq!(render_status(&[], false), "");
    }
}
