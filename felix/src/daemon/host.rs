//! The host's switches felix turns on at startup (and leaves on at
//! shutdown): forwarding, and logging from other network namespaces.

use std::path::Path;

use tracing::{debug, info, warn};

/// A node routes between its pods and the network: IPv4 and IPv6
/// forwarding on (left on at shutdown, like everything else).
pub(super) fn enable_forwarding() {
    keep_router_advertisements();
    for (path, what) in [
        ("/proc/sys/net/ipv4/ip_forward", "IPv4"),
        ("/proc/sys/net/ipv6/conf/all/forwarding", "IPv6"),
    ] {
        match std::fs::read_to_string(path) {
            Ok(v) if v.trim() == "1" => {}
            _ => match std::fs::write(path, "1") {
                Ok(()) => info!("{what} forwarding turned on"),
                Err(e) => warn!(error = %e, "cannot turn on {what} forwarding"),
            },
        }
    }
}

/// Log records of policy rules come from the nodes' and pods' network
/// namespaces, which the kernel logs only with this switch on. It exists
/// only in the first namespace; elsewhere the host must set it.
pub(super) fn allow_logging_from_namespaces() {
    let path = "/proc/sys/net/netfilter/nf_log_all_netns";
    if std::fs::read_to_string(path).is_ok_and(|v| v.trim() == "1") {
        return;
    }
    if let Err(e) = std::fs::write(path, "1") {
        debug!(error = %e, "cannot turn on nf_log_all_netns; Log rules log only where the host allows it");
    }
}

/// With IPv6 forwarding on, an interface whose `accept_ra` is 1 ignores
/// router advertisements, and a node whose IPv6 default route was learnt
/// from them loses it when it expires. Before forwarding is turned on,
/// each of the host's own interfaces at 1 is set to 2 (accept them while
/// forwarding). Pods' and Tartan's own interfaces (`tar…`), loopback and
/// `default` are left alone: a pod must not be able to route the node by an
/// advertisement.
fn keep_router_advertisements() {
    let conf = Path::new("/proc/sys/net/ipv6/conf");
    let forwarding = std::fs::read_to_string(conf.join("all/forwarding"));
    if forwarding.is_ok_and(|v| v.trim() == "1") {
        return;
    }
    let Ok(dir) = std::fs::read_dir(conf) else {
        return;
    };
    let seen: Vec<(String, String)> = dir
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().into_string().ok()?;
            let v = std::fs::read_to_string(e.path().join("accept_ra")).ok()?;
            Some((name, v))
        })
        .collect();
    for name in to_accept_ra_while_forwarding(&seen) {
        let path = conf.join(name).join("accept_ra");
        match std::fs::write(&path, "2") {
            Ok(()) => info!(
                interface = name,
                "router advertisements kept while forwarding (accept_ra 2)"
            ),
            Err(e) => {
                warn!(interface = name, error = %e, "cannot set accept_ra 2; router advertisements stop with IPv6 forwarding")
            }
        }
    }
}

/// Of `(interface, accept_ra)`, the host interfaces that accept router
/// advertisements only while not forwarding.
fn to_accept_ra_while_forwarding(seen: &[(String, String)]) -> Vec<&str> {
    seen.iter()
        .filter(|(name, v)| {
            v.trim() == "1"
                && !matches!(name.as_str(), "all" | "default" | "lo")
                && !name.starts_with("tar")
        })
        .map(|(name, _)| name.as_str())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_host_interfaces_that_would_stop_accepting_are_changed() {
        let seen: Vec<(String, String)> = [
            ("eth0", "1\n"),
            ("eth1", "0\n"),
            ("eth2", "2\n"),
            ("all", "1\n"),
            ("default", "1\n"),
            ("lo", "1\n"),
            ("tar0123456789a", "1\n"),
            ("tartan.vxlan", "1\n"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(to_accept_ra_while_forwarding(&seen), ["eth0"]);
    }
}
