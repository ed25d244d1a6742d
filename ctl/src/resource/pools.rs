//! The checks across objects that a write of address pools needs, which
//! no one object's validation can make (as Calico's IPPool checks): an
//! IPPool's `cidr` overlaps no other IPPool, a LoadBalancerIPPool's
//! addresses are in no IPPool (a pod and a Service would be given the
//! same address) nor in another LoadBalancerIPPool, and a stored IPPool's `cidr` and `blockSize` do not
//! change (blocks already claimed were carved from the pool as it was).

use ipnet::IpNet;
use tartan_api::Kind;
use tartan_api::resources::common::parse_network_or_address;
use tartan_api::resources::ippool::IpPoolSpec;
use tartan_api::resources::lbpool::LoadBalancerIpPoolSpec;
use tartan_api::store::{Datastore, DynamicObject, StoreError};

use super::objects::Prepared;
use super::write::Mode;

/// Whether any of `items` needs these checks.
pub fn concern(items: &[Prepared]) -> bool {
    items
        .iter()
        .any(|p| matches!(p.key.kind, Kind::IpPool | Kind::LoadBalancerIpPool))
}

/// Reads the stored pools of both kinds.
pub async fn stored(
    store: &dyn Datastore,
) -> Result<(Vec<DynamicObject>, Vec<DynamicObject>), StoreError> {
    let pools = store.list(Kind::IpPool, None).await?.items;
    let lb = store.list(Kind::LoadBalancerIpPool, None).await?.items;
    Ok((pools, lb))
}

fn name(o: &DynamicObject) -> String {
    o.metadata.name.clone().unwrap_or_default()
}

fn spec<T: serde::de::DeserializeOwned>(o: &DynamicObject) -> Option<T> {
    serde_json::from_value(o.data.get("spec")?.clone()).ok()
}

/// A pool's network, host bits cleared.
type Net = IpNet;

fn net(text: &str) -> Option<Net> {
    parse_network_or_address(text).ok().map(|n| n.trunc())
}

/// Whether two networks share an address: one holds the other (networks
/// of two families hold nothing of each other).
fn overlap(a: &Net, b: &Net) -> bool {
    a.contains(b) || b.contains(a)
}

/// One pool as it will stand: its name, its networks (one for an IPPool)
/// and, for one of the file's, its index in `items`.
struct Entry {
    name: String,
    nets: Vec<(String, Net)>,
    item: Option<usize>,
}

/// The pools of `kind` once `items` are written: the stored ones the
/// file does not name, then the file's.
fn after(kind: Kind, items: &[Prepared], stored: &[DynamicObject]) -> Vec<Entry> {
    let nets = |o: &DynamicObject| -> Vec<(String, Net)> {
        if kind == Kind::IpPool {
            spec::<IpPoolSpec>(o)
                .and_then(|s| Some((s.cidr.clone(), net(&s.cidr)?)))
                .into_iter()
                .collect()
        } else {
            spec::<LoadBalancerIpPoolSpec>(o)
                .map(|s| {
                    s.cidrs
                        .iter()
                        .filter_map(|c| Some((c.clone(), net(c)?)))
                        .collect()
                })
                .unwrap_or_default()
        }
    };
    let in_file = |n: &str| items.iter().any(|p| p.key.kind == kind && p.key.name == n);
    let mut out: Vec<Entry> = stored
        .iter()
        .filter(|o| !in_file(&name(o)))
        .map(|o| Entry {
            name: name(o),
            nets: nets(o),
            item: None,
        })
        .collect();
    out.extend(
        items
            .iter()
            .enumerate()
            .filter(|(_, p)| p.key.kind == kind)
            .map(|(i, p)| Entry {
                name: p.key.name.clone(),
                nets: nets(&p.obj),
                item: Some(i),
            }),
    );
    out
}

/// A pool's network in a message, as Calico words it.
fn describe(kind: Kind, name: &str, net: &str) -> String {
    match kind {
        Kind::IpPool => format!("IPPool({name}) CIDR {net}"),
        _ => format!("LoadBalancerIPPool({name}) {net}"),
    }
}

/// Every item of `items` these checks refuse: its index and why. `pools`
/// and `lb_pools` are the stored IPPools and LoadBalancerIPPools.
pub fn problems(
    mode: Mode,
    items: &[Prepared],
    pools: &[DynamicObject],
    lb_pools: &[DynamicObject],
) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    // cidr and blockSize of a stored IPPool stay as they are.
    if mode != Mode::Create {
        for (i, p) in items.iter().enumerate() {
            if p.key.kind != Kind::IpPool {
                continue;
            }
            let Some(old) = pools.iter().find(|o| name(o) == p.key.name) else {
                continue;
            };
            let (Some(new), Some(old)) = (spec::<IpPoolSpec>(&p.obj), spec::<IpPoolSpec>(old))
            else {
                continue;
            };
            for (field, why) in new.check_update(&old) {
                out.push((i, format!("{field}: {why}")));
            }
        }
    }
    let ip = after(Kind::IpPool, items, pools);
    let lb = after(Kind::LoadBalancerIpPool, items, lb_pools);
    // A pool of the file overlaps no other pool: an IPPool no IPPool and
    // no LoadBalancerIPPool (pod and Service addresses are not shared), a
    // LoadBalancerIPPool neither (nor one address for two Services).
    let kinds = [(Kind::IpPool, &ip), (Kind::LoadBalancerIpPool, &lb)];
    for (kind, entries) in kinds {
        for e in entries.iter().filter(|e| e.item.is_some()) {
            for (j, (text, this)) in e.nets.iter().enumerate() {
                let field = match kind {
                    Kind::IpPool => "spec.cidr".to_string(),
                    _ => format!("spec.cidrs[{j}]"),
                };
                for (other_kind, others) in kinds {
                    let suffix = if other_kind == kind {
                        ""
                    } else {
                        "; pod and LoadBalancer addresses must not be shared"
                    };
                    for other in others
                        .iter()
                        .filter(|o| other_kind != kind || o.name != e.name)
                    {
                        if let Some((ot, _)) = other.nets.iter().find(|(_, n)| overlap(n, this)) {
                            out.push((
                                e.item.unwrap_or_default(),
                                format!(
                                    "{field}: {} overlaps with {}{suffix}",
                                    describe(kind, &e.name, text),
                                    describe(other_kind, &other.name, ot)
                                ),
                            ));
                        }
                    }
                }
            }
        }
    }
    out.sort_by_key(|(i, _)| *i);
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::super::{docs, objects};
    use super::*;

    fn items(text: &str) -> Vec<Prepared> {
        let (d, e) = docs::parse("t.yaml", text);
        assert!(e.is_empty(), "{text}");
        objects::prepare(d, None, objects::Check::Validate)
            .unwrap_or_else(|_| panic!("does not prepare: {text}"))
    }

    fn objs(text: &str) -> Vec<DynamicObject> {
        items(text).into_iter().map(|p| p.obj).collect()
    }

    fn pool(name: &str, spec: &str) -> String {
        format!(
            "---\n{{apiVersion: tartan.dev/v1, kind: IPPool, metadata: {{name: {name}}}, spec: {spec}}}\n"
        )
    }

    fn lb(name: &str, spec: &str) -> String {
        format!(
            "---\n{{apiVersion: tartan.dev/v1, kind: LoadBalancerIPPool, metadata: {{name: {name}}}, spec: {spec}}}\n"
        )
    }

    fn refusals(mode: Mode, file: &str, pools: &str, lbs: &str) -> Vec<(usize, String)> {
        problems(mode, &items(file), &objs(pools), &objs(lbs))
    }

    #[test]
    fn overlapping_ip_pools_are_refused() {
        let stored = pool("a", "{cidr: 10.0.0.0/16, disabled: true}");
        for mode in [Mode::Apply, Mode::Create, Mode::Replace] {
            let p = refusals(mode, &pool("b", "{cidr: 10.0.1.0/24}"), &stored, "");
            assert_eq!(
                p,
                [(
                    0,
                    "spec.cidr: IPPool(b) CIDR 10.0.1.0/24 overlaps with IPPool(a) CIDR 10.0.0.0/16"
                        .to_string()
                )]
            );
        }
        // Wider than a stored one, too.
        let p = refusals(Mode::Apply, &pool("b", "{cidr: 10.0.0.0/8}"), &stored, "");
        assert_eq!(p.len(), 1, "{p:?}");
        // Beside it, of the other family, or the same pool again: fine.
        for file in [
            pool("b", "{cidr: 10.1.0.0/16}"),
            pool("b", "{cidr: 'fd00::/56'}"),
            pool("a", "{cidr: 10.0.0.0/16, natOutgoing: true}"),
        ] {
            assert_eq!(refusals(Mode::Apply, &file, &stored, ""), [], "{file}");
        }
        // Two new pools of one file that overlap each other.
        let file = pool("b", "{cidr: 10.2.0.0/16}") + &pool("c", "{cidr: 10.2.128.0/17}");
        let p = refusals(Mode::Apply, &file, &stored, "");
        assert_eq!(p.iter().map(|(i, _)| *i).collect::<Vec<_>>(), [0, 1]);
        // A stored pool the file moves out of the way is not in the way.
        let file = pool("a", "{cidr: 10.0.0.0/16}") + &pool("b", "{cidr: 10.1.0.0/16}");
        assert_eq!(refusals(Mode::Apply, &file, &stored, ""), []);
    }

    #[test]
    fn load_balancer_pools_and_ip_pools_do_not_share_addresses() {
        let stored = pool("a", "{cidr: 10.0.0.0/16}");
        let p = refusals(
            Mode::Apply,
            &lb("public", "{cidrs: [198.51.100.0/28, 10.0.5.7]}"),
            &stored,
            "",
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].1.starts_with(
                "spec.cidrs[1]: LoadBalancerIPPool(public) 10.0.5.7 overlaps with IPPool(a) CIDR 10.0.0.0/16"
            ),
            "{p:?}"
        );
        let stored_lb = lb("public", "{cidrs: [198.51.100.0/28]}");
        let p = refusals(
            Mode::Create,
            &pool("b", "{cidr: 198.51.100.0/24}"),
            "",
            &stored_lb,
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].1
                .contains("IPPool(b) CIDR 198.51.100.0/24 overlaps with LoadBalancerIPPool(public) 198.51.100.0/28"),
            "{p:?}"
        );
        assert_eq!(
            refusals(
                Mode::Apply,
                &lb("public", "{cidrs: [198.51.100.0/28]}"),
                &stored,
                &stored_lb
            ),
            []
        );
    }

    #[test]
    fn load_balancer_pools_do_not_share_addresses_with_each_other() {
        let stored_lb = lb("public", "{cidrs: [198.51.100.0/28]}");
        let p = refusals(
            Mode::Apply,
            &lb("other", "{cidrs: [203.0.113.0/24, 198.51.100.8/29]}"),
            "",
            &stored_lb,
        );
        assert_eq!(p.len(), 1, "{p:?}");
        assert!(
            p[0].1.starts_with(
                "spec.cidrs[1]: LoadBalancerIPPool(other) 198.51.100.8/29 overlaps with LoadBalancerIPPool(public) 198.51.100.0/28"
            ),
            "{p:?}"
        );
        // The same pool written again is no overlap with itself.
        assert_eq!(refusals(Mode::Apply, &stored_lb, "", &stored_lb), []);
    }

    #[test]
    fn a_stored_pool_keeps_its_cidr_and_block_size() {
        let stored = pool("a", "{cidr: 10.0.0.0/16}");
        for mode in [Mode::Apply, Mode::Replace] {
            let p = refusals(
                mode,
                &pool("a", "{cidr: 10.0.0.0/16, blockSize: 24}"),
                &stored,
                "",
            );
            assert_eq!(p.len(), 1, "{p:?}");
            assert!(
                p[0].1
                    .starts_with("spec.blockSize: IPPool BlockSize cannot be modified (stored 26)"),
                "{p:?}"
            );
            let p = refusals(mode, &pool("a", "{cidr: 10.1.0.0/16}"), &stored, "");
            assert!(
                p.iter()
                    .any(|(_, w)| w.starts_with("spec.cidr: IPPool CIDR cannot be modified")),
                "{p:?}"
            );
            // The default written out is no change.
            let same = pool("a", "{cidr: 10.0.0.0/16, blockSize: 26, natOutgoing: true}");
            assert_eq!(refusals(mode, &same, &stored, ""), []);
        }
        // Another name is another pool.
        assert_eq!(
            refusals(
                Mode::Apply,
                &pool("b", "{cidr: 10.1.0.0/16, blockSize: 24}"),
                &stored,
                ""
            ),
            []
        );
    }

    #[test]
    fn overlap_is_by_the_shorter_prefix() {
        let n = |s: &str| net(s).unwrap();
        assert!(overlap(&n("10.0.0.0/8"), &n("10.255.0.0/16")));
        assert!(overlap(&n("0.0.0.0/0"), &n("192.0.2.1")));
        assert!(!overlap(&n("10.0.0.0/16"), &n("10.1.0.0/16")));
        assert!(!overlap(&n("0.0.0.0/0"), &n("::/0")));
        assert!(overlap(&n("::/0"), &n("fd00::1")));
        assert!(!overlap(&n("fd00::/64"), &n("fd00:0:0:1::/64")));
    }
}
