//! A Service's change of type through `tartanctl apply` on etcd, with the
//! Service control plane around it as `tartan-lab ctl` runs it (complete,
//! write, release): the old type's leftovers the file still carries are
//! dropped as the API server drops them, and what they held is freed.

mod support;

use std::time::Duration;

use serde_json::Value;
use support::Ctl;
use tartan_controllers::services::{Ranges, complete, release};
use tartan_lab::etcd::EtcdCluster;

const WEB: &str = "{apiVersion: v1, kind: Service, metadata: {name: web, namespace: team}, spec: {type: ClusterIP, clusterIP: 10.96.0.10, clusterIPs: [10.96.0.10], selector: {app: web}, ports: [{port: 80}]}}";

/// WEB turned into an alias, its old address (`ip`) still in it.
fn alias(ip: &str) -> String {
    format!(
        "{{apiVersion: v1, kind: Service, metadata: {{name: web, namespace: team}}, spec: {{type: ExternalName, externalName: db.example.com, clusterIP: {ip}, clusterIPs: [{ip}], selector: {{app: web}}, ports: [{{port: 80}}]}}}}"
    )
}

/// What `tartan-lab ctl apply -f path` does: the file's Services
/// completed and claimed, tartanctl run on the file, then what they no
/// longer hold freed. Whether tartanctl succeeded, and its stderr.
fn lab_apply(ctl: &Ctl, rt: &tokio::runtime::Runtime, path: &str) -> (bool, String) {
    let ranges = Ranges::new("10.96.0.0/16".parse().unwrap());
    let text = std::fs::read_to_string(path).unwrap();
    let obj: tartan_api::store::DynamicObject = serde_saphyr::from_str(&text).unwrap();
    let store = rt
        .block_on(tartan_api::store::connect(
            &ctl.datastore,
            Some(Duration::from_secs(10)),
        ))
        .unwrap();
    let done = rt
        .block_on(complete(&*store, &ranges, vec![obj]))
        .unwrap()
        .unwrap_or_else(|p| panic!("refused by allocation: {p:?}"));
    let run = ctl.run(&["apply", "-f", path]);
    if run.ok {
        rt.block_on(release(&*store, &ranges, &done.release))
            .unwrap();
    }
    (run.ok, run.stderr)
}

/// Whether the Service control plane would give `ip` to a new Service.
fn free(ctl: &Ctl, rt: &tokio::runtime::Runtime, ip: &str) -> bool {
    let ranges = Ranges::new("10.96.0.0/16".parse().unwrap());
    let other = format!(
        "{{apiVersion: v1, kind: Service, metadata: {{name: api, namespace: team}}, spec: {{clusterIP: {ip}, ports: [{{port: 80}}]}}}}"
    );
    let obj = serde_saphyr::from_str(&other).unwrap();
    rt.block_on(async {
        let store = tartan_api::store::connect(&ctl.datastore, Some(Duration::from_secs(10)))
            .await
            .unwrap();
        complete(&*store, &ranges, vec![obj]).await.unwrap().is_ok()
    })
}

#[test]
fn a_cluster_ip_service_turned_external_name_drops_and_frees_its_address() {
    let etcd = EtcdCluster::single().expect("etcd");
    let ctl = Ctl::etcd(&etcd);
    let rt = tokio::runtime::Runtime::new().unwrap();
    ctl.run(&[
        "apply",
        "-f",
        &ctl.file(
            "ns.yaml",
            "{apiVersion: v1, kind: Namespace, metadata: {name: team}}",
        ),
    ])
    .out();
    let (ok, err) = lab_apply(&ctl, &rt, &ctl.file("web.yaml", WEB));
    assert!(ok, "{err}");
    assert!(!free(&ctl, &rt, "10.96.0.10"), "held by web");

    // The user's own change (another address) is theirs: refused as the
    // API server refuses it, nothing written.
    let before = ctl.json(&["get", "service", "web", "-n", "team"]);
    let r = ctl.run(&[
        "apply",
        "-f",
        &ctl.file("changed.yaml", &alias("10.96.0.11")),
    ]);
    assert!(
        r.err()
            .contains("spec.clusterIPs: Forbidden: may not be set for ExternalName services"),
        "{}",
        r.stderr
    );
    assert_eq!(ctl.json(&["get", "service", "web", "-n", "team"]), before);

    // The same manifest, now ExternalName, its old address left in it.
    let (ok, err) = lab_apply(&ctl, &rt, &ctl.file("alias.yaml", &alias("10.96.0.10")));
    assert!(ok, "{err}");
    let stored: Value = ctl.json(&["get", "service", "web", "-n", "team"]);
    let spec = &stored["spec"];
    assert_eq!(spec["type"], "ExternalName", "{stored}");
    assert_eq!(spec["externalName"], "db.example.com");
    for f in ["clusterIP", "clusterIPs"] {
        assert!(spec.get(f).is_none(), "{f} stored: {stored}");
    }
    assert!(free(&ctl, &rt, "10.96.0.10"), "10.96.0.10 released");

    // A create is never prepared: the address is refused there.
    let mut new = alias("10.96.0.12").replace("name: web", "name: web2");
    new.push('\n');
    let r = ctl.run(&["create", "-f", &ctl.file("new.yaml", &new)]);
    assert!(
        r.err()
            .contains("spec.clusterIPs: Forbidden: may not be set for ExternalName services"),
        "{}",
        r.stderr
    );
}
