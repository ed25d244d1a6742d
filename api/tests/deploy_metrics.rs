//! Every daemon in deploy/ serves its metrics where a scraper finds them:
//! the address it is told to serve `/metrics` on is not loopback, and the
//! container declares that port under a name ending in `metrics`.

use serde_json::Value;

fn documents(text: &str) -> Vec<Value> {
    text.split("\n---")
        .filter(|d| {
            d.lines()
                .any(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        })
        .map(|d| serde_saphyr::from_str::<Value>(d).unwrap())
        .collect()
}

/// The flag each daemon serves `/metrics` on.
fn metrics_flag(program: &str) -> Option<&'static str> {
    match program.rsplit('/').next()? {
        "tartan-bgpd" => Some("--metrics"),
        "tartan-felix" | "tartan-dns" | "tartan-controllers" => Some("--health-address"),
        _ => None,
    }
}

/// The value of `flag` in a command line, as `--flag V` or `--flag=V`.
fn flag_value(argv: &[String], flag: &str) -> Option<String> {
    argv.iter().enumerate().find_map(|(i, a)| {
        if a == flag {
            argv.get(i + 1).cloned()
        } else {
            a.strip_prefix(flag)?.strip_prefix('=').map(str::to_string)
        }
    })
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

#[test]
fn every_daemon_serves_metrics_off_loopback_on_a_port_named_for_them() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../deploy");
    let mut seen = Vec::new();
    for file in [
        "tartan-node.yaml",
        "tartan-dns.yaml",
        "tartan-controllers.yaml",
    ] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        for doc in documents(&text) {
            for c in doc["spec"]["template"]["spec"]["containers"]
                .as_array()
                .into_iter()
                .flatten()
            {
                let mut argv = strings(&c["command"]);
                argv.extend(strings(&c["args"]));
                let Some(flag) = argv.first().and_then(|p| metrics_flag(p)) else {
                    continue;
                };
                let name = &c["name"];
                let addr: std::net::SocketAddr = flag_value(&argv, flag)
                    .unwrap_or_else(|| panic!("{file} {name}: no {flag}: metrics off"))
                    .parse()
                    .unwrap_or_else(|e| panic!("{file} {name}: {flag}: {e}"));
                assert!(
                    !addr.ip().is_loopback(),
                    "{file} {name}: metrics on {addr} cannot be scraped"
                );
                let port = c["ports"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .find(|p| p["containerPort"] == addr.port())
                    .unwrap_or_else(|| panic!("{file} {name}: port {} undeclared", addr.port()));
                assert!(
                    port["name"]
                        .as_str()
                        .is_some_and(|n| n.ends_with("metrics")),
                    "{file} {name}: {port}"
                );
                seen.push(argv[0].rsplit('/').next().unwrap().to_string());
            }
        }
    }
    seen.sort();
    assert_eq!(
        seen,
        [
            "tartan-bgpd",
            "tartan-controllers",
            "tartan-dns",
            "tartan-felix"
        ]
    );
}
