//! The difference between desired and actual routes. Pure.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::time::{Duration, Instant};

use ipnet::IpNet;

use crate::calc::routes::{Routes, Target};

/// What to change.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Plan {
    /// Routes to install or replace.
    pub install: Vec<(IpNet, Target)>,
    /// Routes of ours to remove.
    pub remove: Vec<IpNet>,
    /// Desired routes whose interface does not exist (yet) or is down:
    /// left for later.
    pub waiting: Vec<IpNet>,
}

/// Remembers since when each unexpected route has been seen: a pod's route
/// appears (made by the CNI plugin) a moment before its record reaches
/// felix, and must not be removed in that moment.
#[derive(Debug, Default)]
pub struct Grace {
    since: HashMap<IpNet, Instant>,
}

/// Compare. `actual` holds only our routes (protocol 202); `links` the
/// names of the interfaces that exist and are up. A pod route of ours that is not
/// desired is removed once it has been unexpected for `grace`; any other
/// route of ours at once.
pub fn plan(
    desired: &Routes,
    actual: &BTreeMap<IpNet, Target>,
    links: &HashSet<String>,
    grace: &mut Grace,
    now: Instant,
    wait: Duration,
) -> Plan {
    let mut p = Plan::default();
    for (dst, want) in desired {
        if let Some(name) = want.device()
            && !links.contains(name)
        {
            p.waiting.push(*dst);
            continue;
        }
        if actual.get(dst) != Some(want) {
            p.install.push((*dst, want.clone()));
        }
    }
    for (dst, target) in actual {
        if desired.contains_key(dst) {
            grace.since.remove(dst);
            continue;
        }
        // Only pod routes (to an interface) come from the CNI plugin ahead
        // of their record; blackholes and routes via other nodes are
        // felix's own and go at once.
        if !matches!(target, Target::Device(_)) {
            p.remove.push(*dst);
            continue;
        }
        let first = *grace.since.entry(*dst).or_insert(now);
        if now.duration_since(first) >= wait {
            p.remove.push(*dst);
        }
    }
    grace
        .since
        .retain(|dst, _| actual.contains_key(dst) && !desired.contains_key(dst));
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    fn n(s: &str) -> IpNet {
        s.parse().unwrap()
    }

    #[test]
    fn installs_replaces_waits_and_removes_after_grace() {
        let desired: Routes = [
            (n("10.0.0.0/26"), Target::Blackhole),
            (n("10.0.0.2/32"), Target::Device("tara".into())),
            (n("10.0.0.3/32"), Target::Device("tarb".into())),
            (n("10.0.0.4/32"), Target::Device("gone".into())),
        ]
        .into();
        let actual: BTreeMap<IpNet, Target> = [
            (n("10.0.0.2/32"), Target::Device("tara".into())),
            (n("10.0.0.3/32"), Target::Device("old".into())),
            (n("10.0.0.9/32"), Target::Device("tarx".into())),
        ]
        .into();
        let links: HashSet<String> = ["tara", "tarb", "tarx"].map(String::from).into();
        let mut g = Grace::default();
        let t0 = Instant::now();
        let wait = Duration::from_secs(5);
        let p = plan(&desired, &actual, &links, &mut g, t0, wait);
        assert_eq!(
            p.install,
            [
                (n("10.0.0.0/26"), Target::Blackhole),
                (n("10.0.0.3/32"), Target::Device("tarb".into()))
            ]
        );
        assert_eq!(p.waiting, [n("10.0.0.4/32")]);
        let mut stale_via = actual.clone();
        stale_via.insert(
            n("10.0.1.0/26"),
            Target::Via {
                gateway: "192.168.1.3".parse().unwrap(),
                device: None,
            },
        );
        stale_via.insert(n("10.0.2.0/26"), Target::Blackhole);
        let mut g2 = Grace::default();
        let p2 = plan(&desired, &stale_via, &links, &mut g2, t0, wait);
        assert_eq!(
            p2.remove,
            [n("10.0.1.0/26"), n("10.0.2.0/26")],
            "felix's own routes need no grace"
        );
        assert!(p.remove.is_empty(), "the unexpected route is in its grace");
        let p = plan(&desired, &actual, &links, &mut g, t0 + wait, wait);
        assert_eq!(p.remove, [n("10.0.0.9/32")]);
        // Desired again: the clock resets.
        let mut d2 = desired.clone();
        d2.insert(n("10.0.0.9/32"), Target::Device("tarx".into()));
        let p = plan(&d2, &actual, &links, &mut g, t0 + wait * 2, wait);
        assert!(p.remove.is_empty());
        let p = plan(&desired, &actual, &links, &mut g, t0 + wait * 2, wait);
        assert!(p.remove.is_empty(), "a fresh grace period");
    }
}
