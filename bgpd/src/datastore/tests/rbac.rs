//! The node role in deploy/tartan-node.yaml grants every kind bgpd reads.

#[test]
fn every_kind_bgpd_reads_is_granted_by_the_node_role() {
    use crate::datastore::follow::WATCHED;
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy/tartan-node.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let docs: Vec<serde_json::Value> = text
        .split("\n---")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .map(|d| serde_saphyr::from_str::<serde_json::Value>(d).unwrap())
        .collect();
    let grants = |kind: &str| -> Vec<(String, String, Vec<String>)> {
        docs.iter()
            .filter(|d| d["kind"] == kind)
            .flat_map(|d| d["rules"].as_array().cloned().unwrap_or_default())
            .flat_map(|r| {
                let verbs: Vec<String> = r["verbs"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect();
                let groups: Vec<String> = r["apiGroups"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect();
                let res: Vec<String> = r["resources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|v| v.as_str().map(String::from))
                    .collect();
                groups
                    .into_iter()
                    .flat_map(|g| res.iter().map(move |x| (g.clone(), x.clone())))
                    .map(move |(g, x)| (g, x, verbs.clone()))
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    let cluster = grants("ClusterRole");
    let namespaced = grants("Role");
    // bgpd writes its status report and deletes it when its Node goes
    // (crate::datastore::publish); it lists no one's.
    let status = tartan_api::Kind::BgpNodeStatus.info();
    for verb in ["get", "create", "update", "delete"] {
        assert!(
            cluster.iter().any(|(g, r, v)| g == status.group
                && r == status.plural
                && v.iter().any(|x| x == verb)),
            "deploy/tartan-node.yaml does not grant {verb} on {}",
            status.plural
        );
    }
    for kind in WATCHED {
        let info = kind.info();
        // Secrets only in Tartan's namespace (the Role); the rest cluster-wide.
        let rules = if kind == tartan_api::Kind::Secret {
            &namespaced
        } else {
            &cluster
        };
        // bgpd follows every kind by list and watch (tests/tests/rbac/
        // checks every request the daemons make, gets included).
        for verb in ["list", "watch"] {
            assert!(
                rules.iter().any(|(g, r, v)| g == info.group
                    && r == info.plural
                    && v.iter().any(|x| x == verb)),
                "deploy/tartan-node.yaml does not grant {verb} on {}.{}",
                info.plural,
                info.group
            );
        }
    }
}
