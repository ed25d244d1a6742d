//! How objects and kinds are named in messages.

use tartan_api::Kind;
use tartan_api::store::ObjectKey;

/// `IPPool "pool-a"`, or `NetworkPolicy "p" in namespace "team"`.
pub fn display(key: &ObjectKey) -> String {
    match &key.namespace {
        Some(ns) => format!("{} {:?} in namespace {ns:?}", key.kind, key.name),
        None => format!("{} {:?}", key.kind, key.name),
    }
}

/// `ippool.tartan.dev/pool-a`, `node/n1`, as kubectl reports writes.
pub fn reference(key: &ObjectKey) -> String {
    let info = key.kind.info();
    let kind = info.name.to_ascii_lowercase();
    if info.group.is_empty() {
        format!("{kind}/{}", key.name)
    } else {
        format!("{kind}.{}/{}", info.group, key.name)
    }
}

/// Every kind as the command line accepts it, for error messages.
pub fn known_kinds() -> String {
    Kind::all()
        .map(|k| k.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

/// The kind a command-line word names, or an error listing the kinds.
pub fn resolve_kind(word: &str) -> anyhow::Result<Kind> {
    Kind::from_cli(word).ok_or_else(|| {
        anyhow::anyhow!(
            "unknown kind {word:?}; known kinds: {} (plurals and short names work too)",
            known_kinds()
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        let pool = ObjectKey::new(Kind::IpPool, None, "a");
        assert_eq!(display(&pool), "IPPool \"a\"");
        assert_eq!(reference(&pool), "ippool.tartan.dev/a");
        let np = ObjectKey::new(Kind::NetworkPolicy, Some("team"), "p");
        assert_eq!(display(&np), "NetworkPolicy \"p\" in namespace \"team\"");
        assert_eq!(
            reference(&ObjectKey::new(Kind::Node, None, "n1")),
            "node/n1"
        );
        assert_eq!(
            reference(&ObjectKey::new(Kind::KubeNetworkPolicy, Some("x"), "p")),
            "networkpolicy.networking.k8s.io/p"
        );
    }

    #[test]
    fn an_unknown_kind_lists_the_known_ones() {
        let e = resolve_kind("frob").unwrap_err().to_string();
        assert!(e.contains("unknown kind \"frob\""), "{e}");
        assert!(
            e.contains("IPPool") && e.contains("GlobalNetworkPolicy"),
            "{e}"
        );
        assert_eq!(resolve_kind("pools").unwrap(), Kind::IpPool);
    }
}
