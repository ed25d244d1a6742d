//! Every daemon's metrics follow Prometheus's naming conventions and every
//! line of its JSON log parses (issue 21, acceptance 7): bgpd, felix,
//! tartan-dns and tartan-controllers run in a two-node lab with `--log-format json`; each
//! `/metrics` is scraped once their work has begun (a BGP session
//! Established, a DNS query answered) and checked by
//! `tartan_tests::metric_names`; bgpd's apply and sync histograms are
//! there and have samples.

use std::time::Duration;

use tartan_lab::cnilab::CniLab;
use tartan_lab::netns::wait_for;
use tartan_lab::{Daemon, TempDir};
use tartan_tests::metric_names::problems;

fn scrape(lab: &CniLab, addr: &str) -> String {
    lab.underlay
        .node(0)
        .netns
        .exec(
            "curl",
            &["-s", "-m", "5", &format!("http://{addr}/metrics")],
        )
        .unwrap_or_default()
}

fn start(lab: &CniLab, i: usize, bin: &str, args: &[&str]) -> Daemon {
    let path = tartan_lab::cni::tartan_bin_dir().join(bin);
    let mut cmd = lab
        .underlay
        .node(i)
        .netns
        .command(&path.display().to_string());
    cmd.args(["--datastore", &lab.etcd.datastore_spec()])
        .args(args)
        .args(["--log-format", "json"]);
    Daemon::start(&format!("{bin}-{i}"), cmd).unwrap_or_else(|e| panic!("{bin}: {e}"))
}

fn json_lines(d: &Daemon) {
    let log = d.log();
    assert!(!log.trim().is_empty(), "{}: empty log", d.name());
    for l in log.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(l).unwrap_or_else(|e| panic!("{}: not JSON ({e}): {l}", d.name()));
        assert!(
            v["level"].is_string() && v["timestamp"].is_string(),
            "{}: {l}",
            d.name()
        );
    }
}

#[test]
fn every_daemon_names_its_metrics_by_the_conventions_and_logs_json() {
    let _one = tartan_tests::one_file_at_a_time(module_path!());
    let lab = tartan_tests::cni_lab(2, "10.91.0.0/16");
    for i in 0..2 {
        lab.add_node_object(i).unwrap();
    }
    let dir = TempDir::new("metricnames").unwrap();
    let bgpd: Vec<Daemon> = (0..2)
        .map(|i| {
            let sock = dir.join(&format!("bgpd-{i}.sock"));
            start(
                &lab,
                i,
                "tartan-bgpd",
                &[
                    "--node",
                    &CniLab::node_name(i),
                    "--metrics",
                    "127.0.0.1:9179",
                    "--socket",
                    &sock.display().to_string(),
                ],
            )
        })
        .collect();
    let felix = start(
        &lab,
        0,
        "tartan-felix",
        &[
            "--node",
            &CniLab::node_name(0),
            "--health-address",
            "127.0.0.1:9099",
            "--proxy-health-address",
            "none",
        ],
    );
    let dns = start(
        &lab,
        0,
        "tartan-dns",
        &[
            "--listen",
            "127.0.0.1:5353",
            "--health-address",
            "127.0.0.1:9153",
        ],
    );

    let controllers = start(
        &lab,
        0,
        "tartan-controllers",
        &[
            "--id",
            "metricnames-0",
            "--health-address",
            "127.0.0.1:9095",
        ],
    );
    wait_for(
        "bgpd's session Established",
        Duration::from_secs(40),
        || {
            scrape(&lab, "127.0.0.1:9179")
                .lines()
                .any(|l| l.starts_with("tartan_bgp_peer_state{") && l.ends_with(" 6"))
                .then_some(())
        },
    )
    .unwrap_or_else(|e| panic!("{e}\n{}", scrape(&lab, "127.0.0.1:9179")));
    // One query answered, so that the query families have samples.
    wait_for("tartan-dns answers", Duration::from_secs(20), || {
        let out = lab.underlay.node(0).netns.exec(
            "dig",
            &[
                "@127.0.0.1",
                "-p",
                "5353",
                "+short",
                "+time=1",
                "+tries=1",
                "kubernetes.default.svc.cluster.local",
            ],
        );
        out.is_ok().then_some(())
    })
    .unwrap();
    wait_for("felix serves metrics", Duration::from_secs(20), || {
        scrape(&lab, "127.0.0.1:9099")
            .contains("tartan_felix_")
            .then_some(())
    })
    .unwrap();

    for (addr, prefix) in [
        ("127.0.0.1:9179", "tartan_bgp_"),
        ("127.0.0.1:9099", "tartan_felix_"),
        ("127.0.0.1:9153", "tartan_dns_"),
        ("127.0.0.1:9095", "tartan_controllers_"),
    ] {
        let text = scrape(&lab, addr);
        assert!(text.contains(prefix), "{addr}: nothing scraped:\n{text}");
        let p = problems(&text, prefix);
        assert!(p.is_empty(), "{addr}: {p:#?}\n{text}");
    }
    // What bgpd applies or syncs is timed in a `_seconds` histogram: its
    // configuration rebuilt from the datastore (done before the session
    // came up) and taken over, its kernel route batches (none here: no
    // node has a block yet).
    let bgp = scrape(&lab, "127.0.0.1:9179");
    for name in [
        "tartan_bgp_config_build_duration_seconds",
        "tartan_bgp_config_apply_duration_seconds",
        "tartan_bgp_kernel_route_apply_duration_seconds",
        "tartan_bgp_status_write_duration_seconds",
    ] {
        assert!(
            bgp.contains(&format!("# TYPE {name} histogram")),
            "{name} missing:\n{bgp}"
        );
    }
    let builds: u64 = bgp
        .lines()
        .find_map(|l| {
            l.strip_prefix("tartan_bgp_config_build_duration_seconds_count")?
                .trim()
                .parse()
                .ok()
        })
        .unwrap_or(0);
    assert!(builds >= 1, "no configuration build recorded:\n{bgp}");
    for d in bgpd.iter().chain([&felix, &dns, &controllers]) {
        json_lines(d);
    }
}
