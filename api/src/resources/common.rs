//! Pieces shared by several resources: secret references, CIDR, duration,
//! AS number and name checks, and the problem list the checks fill.

use std::net::IpAddr;
use std::time::Duration;

use ipnet::IpNet;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// One problem with an object: (field path, what is wrong and what is allowed).
pub type Problem = (String, String);

/// The selector that matches everything; the default wherever a selector
/// may be left out.
pub const ALL_SELECTOR: &str = "all()";

pub(crate) fn all_selector() -> String {
    ALL_SELECTOR.to_string()
}

/// Collects problems while a check walks an object.
#[derive(Debug, Default)]
pub(crate) struct Problems(pub Vec<Problem>);

impl Problems {
    pub fn add(&mut self, field: impl Into<String>, why: impl Into<String>) {
        self.0.push((field.into(), why.into()));
    }

    /// Record the error of `r`, if any, against `field`; give back the value.
    pub fn take<T>(&mut self, field: &str, r: Result<T, String>) -> Option<T> {
        match r {
            Ok(v) => Some(v),
            Err(e) => {
                self.add(field, e);
                None
            }
        }
    }
}

/// The namespace of Tartan's own Secrets (BGP passwords), where the
/// DaemonSet runs.
pub const TARTAN_NAMESPACE: &str = "tartan-system";

/// A key in a Kubernetes Secret in Tartan's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretKeyRef {
    /// Name of the Secret.
    #[schemars(transform = super::schema_rules::dns_name)]
    pub name: String,
    /// Key within the Secret's data.
    #[schemars(transform = super::schema_rules::secret_key)]
    pub key: String,
}

/// Where a secret value (a BGP password) comes from.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SecretSource {
    /// A key of a Kubernetes Secret.
    pub secret_key_ref: SecretKeyRef,
}

impl SecretSource {
    pub(crate) fn check(&self, field: &str, p: &mut Problems) {
        let r = &self.secret_key_ref;
        if let Err(e) = dns_subdomain(&r.name) {
            p.add(format!("{field}.secretKeyRef.name"), e);
        }
        if !crate::validate::names::is_config_map_key(&r.key) {
            p.add(
                format!("{field}.secretKeyRef.key"),
                format!(
                    "{:?} is not a Secret key; allowed 1 to 253 letters, digits, '-', '_' and '.', not '.' and not starting with '..'",
                    r.key
                ),
            );
        }
    }
}

/// Parse a CIDR such as `10.244.0.0/16` or `fd00::/64`.
pub fn parse_cidr(s: &str) -> Result<IpNet, String> {
    s.parse::<IpNet>().map_err(|_| {
        if let Ok(a) = s.parse::<IpAddr>() {
            let host = if a.is_ipv4() { 32 } else { 128 };
            format!("{s:?} is an address, not a CIDR; add its prefix length, e.g. {s}/{host}")
        } else {
            format!("{s:?} is not a CIDR; expected e.g. 10.244.0.0/16 or fd00:10::/64")
        }
    })
}

/// Parse a CIDR that must be a network address (host bits zero).
pub fn parse_network(s: &str) -> Result<IpNet, String> {
    let net = parse_cidr(s)?;
    if net.trunc() != net {
        return Err(format!(
            "{s:?} has host bits set; the network is {}",
            net.trunc()
        ));
    }
    Ok(net)
}

/// Parse a network CIDR or a single address (taken as /32 or /128).
pub fn parse_network_or_address(s: &str) -> Result<IpNet, String> {
    if let Ok(a) = s.parse::<IpAddr>() {
        return Ok(IpNet::from(a));
    }
    parse_network(s).map_err(|e| {
        if e.contains("is not a CIDR") {
            format!(
                "{s:?} is neither a CIDR nor an address; expected e.g. 10.244.0.0/16 or 10.0.0.1"
            )
        } else {
            e
        }
    })
}

/// Parse a duration written as whole numbers with units, as in `120s`,
/// `2m`, `1m30s`, `1h` or `500ms`.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let bad = || {
        format!(
            "{s:?} is not a duration; write whole numbers with units h, m, s or ms, e.g. 120s or 2m"
        )
    };
    if s.is_empty() {
        return Err(bad());
    }
    let mut total = Duration::ZERO;
    let mut rest = s;
    while !rest.is_empty() {
        let digits = rest.chars().take_while(char::is_ascii_digit).count();
        if digits == 0 {
            return Err(bad());
        }
        let n: u64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest.chars().take_while(char::is_ascii_alphabetic).count();
        let part = match &rest[..unit_len] {
            "h" => n.checked_mul(3600).map(Duration::from_secs),
            "m" => n.checked_mul(60).map(Duration::from_secs),
            "s" => Some(Duration::from_secs(n)),
            "ms" => Some(Duration::from_millis(n)),
            _ => None,
        };
        total = part.and_then(|d| total.checked_add(d)).ok_or_else(bad)?;
        rest = &rest[unit_len..];
    }
    Ok(total)
}

/// Check a duration field that must lie within `min..=max` seconds.
pub(crate) fn check_duration(field: &str, s: &str, min: u64, max: u64, p: &mut Problems) {
    if let Some(d) = p.take(field, parse_duration(s))
        && (d < Duration::from_secs(min) || d > Duration::from_secs(max))
    {
        p.add(
            field,
            format!("{s} is out of range; allowed {min}s to {max}s"),
        );
    }
}

pub use super::limits::AS_TRANS;

/// Check an AS number a network may use as its own or its peer's.
pub fn check_as_number(asn: u32) -> Result<(), String> {
    match asn {
        0 => Err("0 is not an AS number; allowed 1 to 4294967295".into()),
        AS_TRANS => Err(format!(
            "{AS_TRANS} is AS_TRANS, reserved for 2-octet speakers; use the real AS number"
        )),
        _ => Ok(()),
    }
}

/// A DNS-1123 label: at most 63 lowercase letters, digits and '-',
/// starting and ending with a letter or digit (namespaces).
pub fn dns_label(s: &str) -> Result<(), String> {
    if label_ok(s) {
        Ok(())
    } else {
        Err(format!(
            "{s:?} is not a DNS label; allowed at most 63 lowercase letters, digits and '-', starting and ending with a letter or digit"
        ))
    }
}

fn label_ok(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 63
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
}

/// A DNS-1123 subdomain: at most 253 characters, dot-separated labels of
/// lowercase letters, digits and '-' (the names of most objects).
pub fn dns_subdomain(s: &str) -> Result<(), String> {
    let ok = !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            let b = l.as_bytes();
            !b.is_empty()
                && b.iter()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
                && b[0] != b'-'
                && b[b.len() - 1] != b'-'
        });
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{s:?} is not a valid name; allowed at most 253 lowercase letters, digits, '-' and '.', each part starting and ending with a letter or digit"
        ))
    }
}

/// Why `global()` is refused where it stands: it says "what belongs to no
/// namespace", which only a policy rule's namespaceSelector can take in
/// (GlobalNetworkSets); anywhere else it would quietly select nothing.
pub const GLOBAL_OUTSIDE_RULES: &str = "global() is only allowed in a rule's namespaceSelector (source or destination of a NetworkPolicy or GlobalNetworkPolicy rule), where it takes in GlobalNetworkSets; elsewhere it would select nothing";

/// A selector must parse: one an agent cannot read would select nothing (or,
/// for a policy, be enforced as nothing), so it is refused when written.
/// `global()` is refused too (see [`check_rule_namespace_selector`]).
pub(crate) fn check_selector(field: &str, s: &str, p: &mut Problems) {
    check_selector_text(field, s, false, p);
}

/// A policy rule's `source.namespaceSelector` or
/// `destination.namespaceSelector`: a selector, the one place where
/// `global()` is allowed.
pub(crate) fn check_rule_namespace_selector(field: &str, s: &str, p: &mut Problems) {
    check_selector_text(field, s, true, p);
}

fn check_selector_text(field: &str, s: &str, global_allowed: bool, p: &mut Problems) {
    // The schema's maxLength, checked first so that no overlong text is
    // parsed; counted in characters as the API server counts maxLength
    // (its message says bytes).
    let max = super::schema_rules::SELECTOR_MAX as usize;
    if s.len() > max && s.chars().count() > max {
        p.add(field, format!("Too long: may not be more than {max} bytes"));
        return;
    }
    if let Some(c) = s.chars().find(|c| c.is_control()) {
        p.add(
            field,
            format!("contains the control character {c:?}; a selector is printable text"),
        );
        return;
    }
    match crate::selector::Selector::parse(s) {
        Err(e) => p.add(
            field,
            format!(
                "{s:?} is not a selector: column {}: {}",
                e.column, e.message
            ),
        ),
        Ok(sel) if !global_allowed && sel.mentions_global() => {
            p.add(field, format!("{s:?}: {GLOBAL_OUTSIDE_RULES}"));
        }
        Ok(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_keys_are_config_map_keys() {
        let problems = |key: &str| {
            let mut p = Problems::default();
            SecretSource {
                secret_key_ref: SecretKeyRef {
                    name: "bgp-passwords".into(),
                    key: key.into(),
                },
            }
            .check("spec.password", &mut p);
            p.0
        };
        for good in ["password", "peer.a", ".hidden", "a..b", "a_b-C.1"] {
            assert!(problems(good).is_empty(), "{good:?}");
        }
        // `IsConfigMapKey`: not '.', not '..', not starting with '..'.
        for bad in [
            "",
            ".",
            "..",
            "..x",
            "../etc",
            "a b",
            "a/b",
            &"k".repeat(254),
        ] {
            let p = problems(bad);
            assert_eq!(p.len(), 1, "{bad:?}: {p:?}");
            assert_eq!(p[0].0, "spec.password.secretKeyRef.key");
        }
    }

    #[test]
    fn selectors_longer_than_the_schema_allows_are_not_parsed() {
        let problems = |s: &str| {
            let mut p = Problems::default();
            check_selector("spec.nodeSelector", s, &mut p);
            p.0
        };
        // At the limit: parsed (and fine).
        let longest = format!("has({})", "k".repeat(4091));
        assert_eq!(longest.len(), 4096);
        assert!(problems(&longest).is_empty());
        // Characters, not bytes, count.
        let wide = format!("k == '{}'", "é".repeat(4089));
        assert!(problems(&wide).is_empty());
        for long in [format!("has({})", "k".repeat(4092)), "!".repeat(1_000_000)] {
            let p = problems(&long);
            assert_eq!(p.len(), 1);
            assert_eq!(p[0].0, "spec.nodeSelector");
            assert_eq!(p[0].1, "Too long: may not be more than 4096 bytes");
        }
        // Within the length, nesting too deep is a parse error.
        let p = problems(&format!("{}all()", "!".repeat(65)));
        assert!(p[0].1.contains("nests deeper than 64 levels"), "{p:?}");
    }

    #[test]
    fn durations() {
        assert_eq!(parse_duration("120s"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("2m"), Ok(Duration::from_secs(120)));
        assert_eq!(parse_duration("1h1m1s"), Ok(Duration::from_secs(3661)));
        assert_eq!(parse_duration("1500ms"), Ok(Duration::from_millis(1500)));
        for bad in ["", "12", "s", "1d", "1.5s", "-1s", "1 s"] {
            assert!(parse_duration(bad).is_err(), "{bad:?} parsed");
        }
    }

    #[test]
    fn cidrs() {
        assert!(parse_network("10.244.0.0/16").is_ok());
        let e = parse_network("10.244.1.0/16").unwrap_err();
        assert!(
            e.contains("host bits set; the network is 10.244.0.0/16"),
            "{e}"
        );
        assert!(
            parse_cidr("10.0.0.1")
                .unwrap_err()
                .contains("is an address")
        );
        assert_eq!(
            parse_network_or_address("fd00::1"),
            Ok("fd00::1/128".parse().unwrap())
        );
    }

    #[test]
    fn names() {
        assert!(dns_subdomain("node.worker-1.example").is_ok());
        for bad in ["", "Upper", "a..b", "-a", "a-", "a_b", &"a".repeat(254)] {
            assert!(dns_subdomain(bad).is_err(), "{bad:?} accepted");
        }
        assert!(dns_label("kube-system").is_ok());
        assert!(dns_label("a.b").is_err());
        assert!(dns_label(&"a".repeat(64)).is_err());
    }
}
