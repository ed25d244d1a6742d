//! SIGHUP: read the file again and apply only the difference. A file that
//! does not parse, or that changes what needs a restart, changes nothing.
use super::instance::{Daemon, excluded, kernel_nexthop};
use super::origin::origin_diff;
use crate::config::{self, Config};
use crate::filter::PeerFilters;
use crate::model::Family;
use crate::rib::PeerId;
use crate::session::PeerCommand;
use crate::wire::Notification;
use ipnet::IpNet;
use std::collections::HashMap;
use std::sync::Arc;
use tracing::{error, info};

/// Settings a running speaker cannot take over: they define the sessions
/// and sockets themselves.
fn restart_needed(old: &Config, new: &Config) -> Option<&'static str> {
    if old.router_id != new.router_id {
        Some("router_id")
    } else if old.asn != new.asn {
        Some("asn")
    } else if old.cluster_id != new.cluster_id {
        Some("cluster_id")
    } else if old.listen != new.listen {
        Some("listen")
    } else if old.kernel_install != new.kernel_install {
        Some("kernel.install")
    } else {
        None
    }
}

impl Daemon {
    /// The excluded ranges changed: best routes that became excluded leave
    /// the kernel, those no longer excluded enter it.
    fn kernel_exclude_changed(&mut self, old: &[IpNet]) {
        let Some(k) = &self.kernel else { return };
        let new = &self.config.kernel_exclude;
        let (mut added, mut removed) = (0, 0);
        for family in [Family::Ipv4Unicast, Family::Ipv6Unicast] {
            let prefixes: Vec<IpNet> = self.rib.routes(family).map(|r| r.prefix).collect();
            for prefix in prefixes {
                match (excluded(old, &prefix), excluded(new, &prefix)) {
                    (false, true) => {
                        k.set(prefix, None);
                        removed += 1;
                    }
                    (true, false) => {
                        let hops: Vec<_> = self
                            .rib
                            .best(&prefix)
                            .map(|b| b.next_hops.iter().filter_map(kernel_nexthop).collect())
                            .unwrap_or_default();
                        if !hops.is_empty() {
                            k.set(prefix, Some(hops));
                            added += 1;
                        }
                    }
                    _ => {}
                }
            }
        }
        info!(exclude = ?new, added, removed, "kernel routes follow the new exclusions");
    }

    /// A neighbor's filters changed: taken over without a reset. What the
    /// new export rules change goes out at once; for new import rules the
    /// peer is asked to send its routes again (RFC 2918), or, where it
    /// cannot be asked, its session is reset.
    fn filters_changed(&mut self, id: PeerId, old: &PeerFilters, new: &Arc<PeerFilters>) {
        let c = self.rib.set_filters(id, new.clone());
        self.apply(c);
        let Some(p) = self.peers.get(&id) else { return };
        let address = p.neighbor.address;
        let Some(up) = &p.up else {
            info!(peer = %address, "filters changed; they apply when the session comes up");
            return;
        };
        if old.import == new.import {
            info!(peer = %address, "export filters changed; routes re-sent");
            return;
        }
        if up.negotiated.route_refresh {
            for f in up.negotiated.families.clone() {
                let _ = p.link.commands.try_send(PeerCommand::RouteRefresh(f));
            }
            info!(peer = %address, "import filters changed; asked the peer to send its routes again (route refresh)");
        } else {
            info!(peer = %address, "import filters changed and the peer cannot refresh; resetting its session");
            let n = p.neighbor.clone();
            // RFC 4486: Other Configuration Change.
            self.remove_peer(id, Notification::other_configuration_change());
            self.add_peer(n);
        }
    }

    pub(super) fn reload(&mut self) {
        let path = self.options.config_path.clone();
        if path.as_os_str().is_empty() {
            info!("SIGHUP ignored: the configuration comes from the datastore");
            return;
        }
        let label = path.display().to_string();
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) => {
                error!(file = %label, error = %e, "reload failed: cannot read the file; keeping the running configuration");
                return;
            }
        };
        let new = match config::parse(&label, &text) {
            Ok(c) => c,
            Err(e) => {
                error!(error = %e, "reload failed; keeping the running configuration");
                return;
            }
        };
        self.apply_config(new);
    }

    /// Take over `new` (from the file or the datastore): only neighbors
    /// and announcements that changed are touched. Changes that need a
    /// restart are refused, and the running configuration stays.
    pub(super) fn apply_config(&mut self, new: Config) {
        if new == self.config {
            return;
        }
        let started = std::time::Instant::now();
        self.take_over(new);
        self.options
            .metrics
            .durations()
            .config_apply
            .observe(started.elapsed().as_secs_f64());
    }

    fn take_over(&mut self, new: Config) {
        if let Some(key) = restart_needed(&self.config, &new) {
            error!(
                key,
                "reload refused: changing {key} needs a restart of tartan-bgpd; keeping the running configuration"
            );
            return;
        }
        let old = std::mem::replace(&mut self.config, new.clone());
        let mut by_addr: HashMap<_, _> = new.neighbors.iter().map(|n| (n.address, n)).collect();
        let current: Vec<_> = self
            .peers
            .iter()
            .map(|(id, p)| (*id, p.neighbor.clone()))
            .collect();
        let (mut added, mut removed, mut changed) = (0, 0, 0);
        for (id, n) in current {
            match by_addr.remove(&n.address) {
                None => {
                    // RFC 4486: Peer De-configured.
                    self.remove_peer(id, Notification::peer_deconfigured());
                    removed += 1;
                }
                Some(new_n) if !n.session_settings_equal(new_n) => {
                    // RFC 4486: Other Configuration Change.
                    self.remove_peer(id, Notification::other_configuration_change());
                    self.add_peer(Arc::new(new_n.clone()));
                    changed += 1;
                }
                Some(new_n) => {
                    let refilter = n.filters != new_n.filters;
                    if let Some(p) = self.peers.get_mut(&id) {
                        if let (Some(client), Some(timers)) = (&p.bfd, new_n.bfd)
                            && n.bfd != new_n.bfd
                        {
                            client.set_config(timers);
                        }
                        p.neighbor = Arc::new(new_n.clone());
                    }
                    if refilter {
                        self.filters_changed(id, &n.filters, &new_n.filters);
                    }
                }
            }
        }
        for n in new
            .neighbors
            .iter()
            .filter(|n| by_addr.contains_key(&n.address))
        {
            self.add_peer(Arc::new(n.clone()));
            added += 1;
        }
        self.next_origin_changes(&old, &new);
        if old.kernel_exclude != new.kernel_exclude {
            self.kernel_exclude_changed(&old.kernel_exclude);
        }
        // A neighbor removed is waited for no more (RFC 4724 4.1); one
        // reconfigured is waited for again.
        self.check_deferral();
        self.check_kernel_stale();
        info!(added, removed, changed, "configuration reloaded");
    }
}

impl Daemon {
    /// Originates what the new configuration announces and withdraws what
    /// it no longer does.
    pub(super) fn next_origin_changes(&mut self, old: &Config, new: &Config) {
        let diff = origin_diff(&old.announce, &new.announce);
        for prefix in diff.removed {
            let c = self.rib.unoriginate(prefix);
            self.apply(c);
            info!(%prefix, "announcement removed");
        }
        for (prefix, attrs) in diff.changed {
            let c = self.rib.originate(attrs, prefix);
            self.apply(c);
            info!(%prefix, "announcement added or changed");
        }
    }
}
