use crate::human::duration;
use tartan_api::bgp::SpeakerStatus;

/// `Key:  value` lines, aligned.
pub fn render_status(s: &SpeakerStatus) -> String {
    let mut lines: Vec<(&str, String)> = vec![
        ("Router ID", s.router_id.to_string()),
        ("AS", s.asn.to_string()),
        ("Version", s.version.clone()),
        ("Uptime", duration(s.uptime_seconds)),
        (
            "Peers",
            format!("{} ({} established)", s.peers, s.established_peers),
        ),
    ];
    if s.routes.is_empty() {
        lines.push(("Routes", "none".into()));
    }
    for (i, (family, c)) in s.routes.iter().enumerate() {
        let key = if i == 0 { "Routes" } else { "" };
        let value = format!("{family}: {} prefixes, {} paths", c.prefixes, c.paths);
        lines.push((key, value));
    }
    let k = &s.kernel;
    lines.push((
        "Kernel routes",
        format!(
            "{} installed, {} removed, {} failed",
            k.installed, k.removed, k.failed
        ),
    ));
    let width = lines.iter().map(|(key, _)| key.len()).max().unwrap_or(0) + 1;
    let mut out = String::new();
    for (key, value) in lines {
        let label = if key.is_empty() {
            String::new()
        } else {
            format!("{key}:")
        };
        out.push_str(&format!("{label:width$}  {value}\n"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;
    use tartan_api::bgp::{KernelCounts, RouteCounts};

    #[test]
    fn status_lines_align() {
        let s = SpeakerStatus {
            router_id: "10.0.0.1".parse().unwrap(),
            asn: 65000,
            peers: 3,
            established_peers: 2,
            routes: BTreeMap::from([
                (
                    "ipv4-unicast".into(),
                    RouteCounts {
                        prefixes: 4,
                        paths: 6,
                    },
                ),
                (
                    "ipv6-unicast".into(),
                    RouteCounts {
                        prefixes: 1,
                        paths: 1,
                    },
                ),
            ]),
            kernel: KernelCounts {
                installed: 4,
                removed: 1,
                failed: 0,
            },
            started_at: 0,
            uptime_seconds: 7500,
            version: "0.1.0".into(),
        };
        assert_eq!(
            render_status(&s),
            "Router ID:      10.0.0.1\n\
             AS:             65000\n\
             Version:        0.1.0\n\
             Uptime:         2h5m\n\
             Peers:          3 (2 established)\n\
             Routes:         ipv4-unicast: 4 prefixes, 6 paths\n\
             \x20               ipv6-unicast: 1 prefixes, 1 paths\n\
             Kernel routes:  4 installed, 1 removed, 0 failed\n"
        );
    }
}
