//! `tartan_build_info`: the gauge every daemon exposes with value 1 and its
//! version and name as labels, so that dashboards can tell which build
//! runs where.

use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

/// Register `tartan_build_info{daemon, version} 1` in `registry` (a root
/// registry: the name carries no daemon prefix).
pub fn register(registry: &mut Registry, daemon: &str) {
    let family = Family::<Vec<(String, String)>, Gauge>::default();
    family
        .get_or_create(&vec![
            ("daemon".to_string(), daemon.to_string()),
            ("version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ])
        .set(1);
    registry.register(
        "tartan_build_info",
        "The running build: 1, labelled with the daemon and the version",
        family,
    );
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_gauge_carries_daemon_and_version() {
        let mut r = prometheus_client::registry::Registry::default();
        super::register(&mut r, "tartan-bgpd");
        let mut text = String::new();
        prometheus_client::encoding::text::encode(&mut text, &r).unwrap();
        let want = format!(
            "tartan_build_info{{daemon=\"tartan-bgpd\",version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        assert!(text.contains(&want), "{text}");
        assert!(text.contains("# TYPE tartan_build_info gauge"), "{text}");
    }
}
