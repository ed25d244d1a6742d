//! Prometheus naming conventions, checked over a scraped exposition
//! (text format 0.0.4 or OpenMetrics): one prefix per daemon, base units
//! (seconds, bytes) named as a suffix, `_total` on counters and only on
//! counters, `# UNIT` matching the suffix, and `tartan_build_info`.

use std::collections::BTreeMap;

/// One metric family as the exposition declares it.
#[derive(Debug, Default, Clone)]
pub struct FamilyInfo {
    pub kind: String,
    pub unit: Option<String>,
    /// Sample names seen (with suffixes such as `_total`, `_bucket`).
    pub samples: Vec<String>,
}

/// The families of an exposition, by name.
pub fn families(text: &str) -> BTreeMap<String, FamilyInfo> {
    let mut out: BTreeMap<String, FamilyInfo> = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next()) {
            (Some("#"), Some("TYPE"), Some(name)) => {
                out.entry(name.to_string()).or_default().kind =
                    words.next().unwrap_or_default().to_string();
            }
            (Some("#"), Some("UNIT"), Some(name)) => {
                out.entry(name.to_string()).or_default().unit = words.next().map(str::to_string);
            }
            (Some("#"), ..) | (None, ..) => {}
            (Some(sample), ..) => {
                let name = sample.split('{').next().unwrap_or(sample);
                let family = out
                    .keys()
                    .filter(|f| name.starts_with(f.as_str()))
                    .max_by_key(|f| f.len())
                    .cloned()
                    .unwrap_or_else(|| name.to_string());
                out.entry(family)
                    .or_default()
                    .samples
                    .push(name.to_string());
            }
        }
    }
    out
}

/// Units that are not base units, as name parts.
const NOT_BASE: &[&str] = &[
    "ms",
    "millis",
    "milliseconds",
    "us",
    "micros",
    "microseconds",
    "ns",
    "nanoseconds",
    "minutes",
    "hours",
    "days",
    "kb",
    "kib",
    "mb",
    "mib",
    "gb",
    "gib",
    "percent",
];
/// Name parts that say a family measures time.
const TIME_WORDS: &[&str] = &["duration", "latency", "time", "age", "delay", "uptime"];

/// Every convention `text` breaks; `prefix` is the daemon's, e.g.
/// `tartan_bgp_`.
pub fn problems(text: &str, prefix: &str) -> Vec<String> {
    let fams = families(text);
    let mut p = Vec::new();
    if !fams.contains_key("tartan_build_info") {
        p.push("no tartan_build_info".to_string());
    }
    for (name, f) in &fams {
        let valid = name.chars().enumerate().all(|(i, c)| {
            c == '_' || c == ':' || c.is_ascii_alphabetic() || (i > 0 && c.is_ascii_digit())
        });
        if !valid {
            p.push(format!("{name}: not a valid metric name"));
        }
        if name != "tartan_build_info" && !name.starts_with(prefix) {
            p.push(format!("{name}: does not start with {prefix}"));
        }
        let parts: Vec<&str> = name.split('_').collect();
        if let Some(u) = parts.iter().find(|w| NOT_BASE.contains(w)) {
            p.push(format!(
                "{name}: {u:?} is not a base unit (use seconds or bytes)"
            ));
        }
        let base = name.strip_suffix("_total").unwrap_or(name);
        if parts.iter().any(|w| TIME_WORDS.contains(w))
            && !base.ends_with("_seconds")
            && f.kind != "info"
            && !name.ends_with("_info")
        {
            p.push(format!("{name}: a time without the _seconds unit"));
        }
        if let Some(u) = &f.unit
            && !base.ends_with(&format!("_{u}"))
        {
            p.push(format!(
                "{name}: UNIT {u} but the name does not end in _{u}"
            ));
        }
        match f.kind.as_str() {
            "counter" => {
                for s in &f.samples {
                    if !s.ends_with("_total") && !s.ends_with("_created") {
                        p.push(format!("{s}: a counter's sample does not end in _total"));
                    }
                }
            }
            "" => p.push(format!("{name}: samples without a TYPE line")),
            _ => {
                if name.ends_with("_total") {
                    p.push(format!("{name}: _total on a {}, not a counter", f.kind));
                }
            }
        }
    }
    if let Some(b) = fams.get("tartan_build_info") {
        if b.kind != "gauge" && b.kind != "info" {
            p.push(format!("tartan_build_info is a {}, not a gauge", b.kind));
        }
        if !text
            .lines()
            .any(|l| l.starts_with("tartan_build_info") && l.contains("version=\""))
        {
            p.push("tartan_build_info has no version label".to_string());
        }
    }
    p
}

#[cfg(test)]
mod tests {
    use super::problems;

    #[test]
    fn good_names_pass() {
        let text = "# HELP tartan_bgp_updates Updates.\n# TYPE tartan_bgp_updates counter\ntartan_bgp_updates_total{peer=\"a\"} 3\n# TYPE tartan_bgp_apply_duration_seconds histogram\n# UNIT tartan_bgp_apply_duration_seconds seconds\ntartan_bgp_apply_duration_seconds_bucket{le=\"0.1\"} 1\ntartan_bgp_apply_duration_seconds_sum 0.01\ntartan_bgp_apply_duration_seconds_count 1\n# TYPE tartan_build_info gauge\ntartan_build_info{version=\"0.1.0\"} 1\n# EOF\n";
        assert_eq!(problems(text, "tartan_bgp_"), Vec::<String>::new());
    }

    #[test]
    fn each_broken_convention_is_named() {
        let text = "# TYPE felix_writes counter\nfelix_writes 3\n# TYPE tartan_bgp_sync_ms gauge\ntartan_bgp_sync_ms 4\n# TYPE tartan_bgp_peers_total gauge\ntartan_bgp_peers_total 2\n# TYPE tartan_bgp_apply_duration histogram\ntartan_bgp_apply_duration_count 1\n# TYPE tartan_bgp_size gauge\n# UNIT tartan_bgp_size bytes\ntartan_bgp_size 9\n";
        let p = problems(text, "tartan_bgp_");
        let has = |s: &str| p.iter().any(|x| x.contains(s));
        assert!(has("no tartan_build_info"), "{p:?}");
        assert!(
            has("felix_writes: does not start with tartan_bgp_"),
            "{p:?}"
        );
        assert!(
            has("felix_writes: a counter's sample does not end in _total"),
            "{p:?}"
        );
        assert!(
            has("tartan_bgp_sync_ms: \"ms\" is not a base unit"),
            "{p:?}"
        );
        assert!(has("tartan_bgp_peers_total: _total on a gauge"), "{p:?}");
        assert!(
            has("tartan_bgp_apply_duration: a time without the _seconds unit"),
            "{p:?}"
        );
        assert!(has("tartan_bgp_size: UNIT bytes"), "{p:?}");
    }
}
