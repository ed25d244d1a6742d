use crate::human::duration;
use tartan_api::bgp::{RestartStatus, SpeakerStatus};

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
    if let Some(r) = &s.restart {
        restart_lines(r, &mut lines);
    }
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

/// Our own graceful restart (RFC 4724 4.1): where selection and the
/// kernel routes of the previous run are, the time left, then per family
/// what is held and whose End-of-RIB is awaited.
fn restart_lines(r: &RestartStatus, lines: &mut Vec<(&str, String)>) {
    let fams = r.families.values();
    let selection = if fams.clone().any(|f| f.deferred) {
        "route selection deferred"
    } else if fams.clone().any(|f| !f.waiting_for.is_empty()) {
        "route selection under way, routes sent (drain)"
    } else {
        "route selection done"
    };
    let kernel = if r.kernel_routes_kept {
        "kernel routes of the previous run kept until every neighbor has sent End-of-RIB"
    } else {
        "kernel routes of the previous run removed"
    };
    lines.push((
        "Restarting",
        format!(
            "{selection}; {kernel}; at most {} left",
            duration(r.seconds_left)
        ),
    ));
    for (family, f) in &r.families {
        let who: Vec<String> = f.waiting_for.iter().map(|a| a.to_string()).collect();
        let state = match (f.deferred, who.is_empty()) {
            (false, true) => "selection done".to_string(),
            (true, true) => "nothing sent yet".to_string(),
            (held, false) => {
                let held = if held {
                    "nothing sent yet"
                } else {
                    "sent (drain)"
                };
                format!("{held}, waiting for End-of-RIB from {}", who.join(", "))
            }
        };
        lines.push(("", format!("{family}: {state}")));
    }
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
            restart: None,
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

    #[test]
    fn a_restart_shows_what_selection_waits_for() {
        use tartan_api::bgp::FamilyDeferral;
        let mut s = SpeakerStatus {
            router_id: "10.0.0.1".parse().unwrap(),
            asn: 65000,
            peers: 2,
            established_peers: 1,
            routes: BTreeMap::new(),
            kernel: KernelCounts::default(),
            started_at: 0,
            uptime_seconds: 5,
            version: "0.1.0".into(),
            restart: Some(RestartStatus {
                seconds_left: 85,
                kernel_routes_kept: true,
                families: BTreeMap::from([
                    (
                        "ipv4-unicast".into(),
                        FamilyDeferral {
                            deferred: true,
                            waiting_for: vec![
                                "10.0.0.2".parse().unwrap(),
                                "10.0.0.3".parse().unwrap(),
                            ],
                        },
                    ),
                    (
                        "ipv6-unicast".into(),
                        FamilyDeferral {
                            deferred: false,
                            waiting_for: vec![],
                        },
                    ),
                ]),
            }),
        };
        let out = render_status(&s);
        let tail: Vec<&str> = out.lines().skip(7).collect();
        assert_eq!(
            tail,
            [
                "Restarting:     route selection deferred; kernel routes of the previous run kept until every neighbor has sent End-of-RIB; at most 1m25s left",
                "                ipv4-unicast: nothing sent yet, waiting for End-of-RIB from 10.0.0.2, 10.0.0.3",
                "                ipv6-unicast: selection done",
            ],
            "{out}"
        );
        // After a drain: sent, but selection goes on.
        let r = s.restart.as_mut().unwrap();
        r.families.get_mut("ipv4-unicast").unwrap().deferred = false;
        let first = |s: &SpeakerStatus| render_status(s).lines().nth(7).unwrap().to_string();
        assert_eq!(
            first(&s),
            "Restarting:     route selection under way, routes sent (drain); kernel routes of the previous run kept until every neighbor has sent End-of-RIB; at most 1m25s left"
        );
        // Selection done (nobody waited for), the kernel's routes still
        // waiting for the neighbors' End-of-RIB.
        let r = s.restart.as_mut().unwrap();
        r.families
            .get_mut("ipv4-unicast")
            .unwrap()
            .waiting_for
            .clear();
        assert_eq!(
            first(&s),
            "Restarting:     route selection done; kernel routes of the previous run kept until every neighbor has sent End-of-RIB; at most 1m25s left"
        );
    }
}
