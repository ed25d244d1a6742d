//! What the loop has seen since the last pass, and so what the next pass
//! is for: a watch event that changed what felix keeps asks for the
//! desired state to be computed again; the periodic check and a kernel
//! event ask only for the kernel to be compared with the last result
//! (computing from the whole cluster at every check made the idle cost
//! grow with the cluster). A burst of such events is applied once: 5 ms
//! after the last of them, and at most 100 ms after the first; events that
//! change nothing (heartbeats) do not put the pass off.

use std::time::Duration;

use tartan_api::store::watch::burst::Burst;

use super::apply::{Checks, Pass};
use super::fold::Folded;

/// A pass waits this long after the last event that asked for it.
const QUIET: Duration = Duration::from_millis(5);
/// And at most this long after the first.
const LIMIT: Duration = Duration::from_millis(100);

#[derive(Debug)]
pub(super) struct Pending {
    burst: Burst,
    pass: Pass,
}

impl Default for Pending {
    fn default() -> Self {
        Pending {
            burst: Burst::new(QUIET, LIMIT),
            pass: Pass::default(),
        }
    }
}

impl Pending {
    /// A watch event of something the calculation reads was folded.
    pub(super) fn folded(&mut self, f: Folded) {
        if f.changed {
            self.burst.mark(tokio::time::Instant::now());
            self.pass.changed = true;
        }
    }

    /// The service proxy's own index changed (Services, EndpointSlices):
    /// a pass writes it, the rest of the desired state stays.
    pub(super) fn proxy_changed(&mut self, f: Folded) {
        if f.changed {
            self.burst.mark(tokio::time::Instant::now());
        }
    }

    /// A route of ours went in the kernel: a pass puts it back, from
    /// what the event said (nothing read, nothing computed again).
    pub(super) fn route_event(&mut self) {
        self.burst.mark(tokio::time::Instant::now());
    }

    /// Something of ours changed in the kernel: compare now.
    pub(super) fn kernel_event(&mut self) {
        self.burst.mark(tokio::time::Instant::now());
        self.pass.checks.kernel = true;
    }

    /// The periodic check.
    pub(super) fn tick(&mut self) {
        self.burst.mark(tokio::time::Instant::now());
        self.pass.checks = Checks {
            nat_present: true,
            republish: true,
            kernel: true,
        };
    }

    pub(super) fn due(&self) -> bool {
        self.burst.is_open()
    }

    /// When the pass due is to run (an hour away when none is: the loop
    /// does not poll that branch then).
    pub(super) fn deadline(&self) -> tokio::time::Instant {
        self.burst
            .deadline()
            .unwrap_or_else(|| tokio::time::Instant::now() + Duration::from_secs(3600))
    }

    /// The pass due, and nothing pending after it.
    pub(super) fn take(&mut self) -> Pass {
        self.burst.close();
        std::mem::take(&mut self.pass)
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::api::core::v1::Node;
    use tartan_api::resources::node::BGP_IPV4_ADDRESS;
    use tartan_api::resources::{IpamBlockSpec, WorkloadEndpointSpec};
    use tartan_api::store::typed::to_dynamic;
    use tartan_api::store::watch::WatchEvent;

    use super::*;
    use crate::calc::desired::Calc;
    use crate::calc::state::State;
    use crate::daemon::fold::fold_node;
    use crate::unreadable::Unreadable;

    fn node_event(beat: u32) -> WatchEvent {
        let mut n = Node::default();
        n.metadata.name = Some("n1".into());
        n.metadata.resource_version = Some(beat.to_string());
        n.metadata.annotations = Some(
            [
                (BGP_IPV4_ADDRESS.to_string(), "192.168.1.2/24".to_string()),
                ("heartbeat".to_string(), beat.to_string()),
            ]
            .into(),
        );
        WatchEvent::Modified(to_dynamic(&n).unwrap())
    }

    fn state() -> State {
        let mut s = State::for_node("n1");
        let mut b = IpamBlockSpec::empty(&"10.0.0.0/26".parse().unwrap());
        b.affinity = Some("host:n1".into());
        s.blocks.insert("b".into(), b.into());
        let w = WorkloadEndpointSpec {
            node: "n1".into(),
            pod: "a".into(),
            container_id: "c".into(),
            endpoint: "eth0".into(),
            interface_name: "tara".into(),
            mac: None,
            ip_networks: vec!["10.0.0.2/32".into()],
            ports: vec![],
        };
        s.endpoints.set("x/a.eth0", Some((w, BTreeMap::new())));
        s
    }

    /// The loop's pass as the daemon runs it: what is pending, then the
    /// desired state.
    fn pass(p: &mut Pending, calc: &mut Calc, s: &State) -> Option<(Pass, usize)> {
        if !p.due() {
            return None;
        }
        let pass = p.take();
        let d = calc.desired("n1", s, pass.changed, true, false);
        Some((pass, d.routes.len()))
    }

    #[test]
    fn a_check_with_no_datastore_change_compares_the_kernel_without_recomputing() {
        let mut s = state();
        let mut bad = Unreadable::new(None);
        let mut p = Pending::default();
        let mut calc = Calc::default();
        p.folded(fold_node(&mut s.nodes, node_event(0), &mut bad));
        let (first, routes) = pass(&mut p, &mut calc, &s).expect("a pass");
        assert!(first.changed);
        assert_eq!(routes, 2, "the block's blackhole and the pod's route");
        assert_eq!(calc.recomputes(), 1);
        for beat in 1..=5 {
            p.tick();
            let (check, routes) = pass(&mut p, &mut calc, &s).expect("a check");
            assert!(!check.changed);
            assert!(check.checks.kernel && check.checks.nat_present && check.checks.republish);
            assert_eq!(
                routes, 2,
                "the last desired state, compared with the kernel"
            );
            p.kernel_event();
            let (ev, _) = pass(&mut p, &mut calc, &s).expect("a comparison");
            assert_eq!(
                ev,
                Pass {
                    changed: false,
                    checks: Checks {
                        kernel: true,
                        ..Checks::default()
                    }
                }
            );
            // A heartbeat changes nothing felix keeps: no pass at all.
            p.folded(fold_node(&mut s.nodes, node_event(beat), &mut bad));
            assert_eq!(pass(&mut p, &mut calc, &s), None);
        }
        assert_eq!(
            calc.recomputes(),
            1,
            "a check or a kernel event recomputed the desired state"
        );
        // A change is computed, once.
        let w = WorkloadEndpointSpec {
            node: "n1".into(),
            pod: "b".into(),
            container_id: "c".into(),
            endpoint: "eth0".into(),
            interface_name: "tarb".into(),
            mac: None,
            ip_networks: vec!["10.0.0.3/32".into()],
            ports: vec![],
        };
        let changed = s.endpoints.set("x/b.eth0", Some((w, BTreeMap::new())));
        p.folded(Folded {
            synced: false,
            changed,
        });
        p.tick();
        let (both, routes) = pass(&mut p, &mut calc, &s).expect("a pass");
        assert!(both.changed && both.checks.kernel);
        assert_eq!(routes, 3);
        assert_eq!(calc.recomputes(), 2);
    }

    #[test]
    fn a_route_deleted_asks_for_a_pass_that_neither_computes_nor_checks() {
        let mut p = Pending::default();
        assert!(!p.due());
        p.route_event();
        assert!(p.due());
        assert_eq!(p.take(), Pass::default());
        assert!(!p.due());
    }

    #[test]
    fn heartbeats_do_not_put_off_a_pass_that_a_change_asked_for() {
        let mut s = state();
        let mut bad = Unreadable::new(None);
        let mut p = Pending::default();
        p.folded(fold_node(&mut s.nodes, node_event(0), &mut bad));
        p.take();
        let before = tokio::time::Instant::now();
        p.folded(Folded {
            synced: false,
            changed: true,
        });
        let after = tokio::time::Instant::now();
        let due = p.deadline();
        assert!(due >= before + QUIET && due <= after + QUIET, "{due:?}");
        for beat in 1..=200 {
            p.folded(fold_node(&mut s.nodes, node_event(beat), &mut bad));
        }
        assert_eq!(p.deadline(), due, "a heartbeat moved the pass");
        assert!(p.take().changed);
        assert!(!p.due());
    }

    #[test]
    fn learning_ipip_support_recomputes_only_the_routes_to_other_nodes() {
        let s = state();
        let mut calc = Calc::default();
        let before = calc.desired("n1", &s, true, true, false).clone();
        let after = calc.desired("n1", &s, false, true, true).clone();
        assert_eq!(calc.recomputes(), 1);
        assert!(after.ipip_available && !before.ipip_available);
        assert_eq!(before.local, after.local);
    }
}
