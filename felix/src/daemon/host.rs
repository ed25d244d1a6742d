//! The host's switches felix turns on at startup (and leaves on at
//! shutdown): forwarding, and logging from other network namespaces.

use tracing::{debug, info, warn};

/// A node routes between its pods and the network: IPv4 and IPv6
/// forwarding on (left on at shutdown, like everything else).
pub(super) fn enable_forwarding() {
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
