//! Where objects live in etcd: `/tartan/<kind segment>/<namespace>/<name>`
//! for namespaced kinds and `/tartan/<kind segment>/<name>` for cluster-wide
//! ones (segments in [`crate::kind`]). Names and namespaces never contain
//! `/`, so a prefix read of one kind (or one namespace) cannot see another.

use crate::kind::Kind;
use crate::store::{ObjectKey, StoreError};

pub const ROOT: &str = "/tartan/";

/// The prefix holding every object of `kind`, or of `kind` in `namespace`.
pub fn prefix(kind: Kind, namespace: Option<&str>) -> String {
    let seg = kind.info().key_segment;
    match namespace {
        Some(ns) if kind.info().namespaced => format!("{ROOT}{seg}/{ns}/"),
        _ => format!("{ROOT}{seg}/"),
    }
}

fn check_part(what: &str, s: &str, key: &ObjectKey) -> Result<(), StoreError> {
    if s.is_empty() || s.contains('/') || s == "." || s == ".." {
        return Err(StoreError::BadObject(format!(
            "{key}: {what} {s:?} may not be empty or contain '/'"
        )));
    }
    Ok(())
}

/// The etcd key of one object.
pub fn key(k: &ObjectKey) -> Result<String, StoreError> {
    check_part("name", &k.name, k)?;
    match (&k.namespace, k.kind.info().namespaced) {
        (Some(ns), true) => {
            check_part("namespace", ns, k)?;
            Ok(format!("{}{}", prefix(k.kind, Some(ns)), k.name))
        }
        (None, false) => Ok(format!("{}{}", prefix(k.kind, None), k.name)),
        (None, true) => Err(StoreError::BadObject(format!(
            "{k}: a namespace is required"
        ))),
        (Some(_), false) => Err(StoreError::BadObject(format!(
            "{k}: {} is cluster-wide; no namespace",
            k.kind
        ))),
    }
}

/// Where the outlines of objects of the kinds that have them are kept
/// (see `super::outline`): the object's key with [`ROOT`] replaced by
/// this. No kind's segment is `outlines`, so no kind's prefix holds them.
pub const OUTLINE_ROOT: &str = "/tartan/outlines/";

/// The key of the outline of the object at `key` (a key from [`key`]).
pub fn outline_key(key: &str) -> String {
    format!("{OUTLINE_ROOT}{}", key.strip_prefix(ROOT).unwrap_or(key))
}

/// The prefix holding the outlines of every object of `kind` (or of
/// `kind` in `namespace`).
pub fn outline_prefix(kind: Kind, namespace: Option<&str>) -> String {
    outline_key(&prefix(kind, namespace))
}

/// The namespace and name an etcd key under `kind`'s prefix stands for.
pub fn parse(kind: Kind, raw: &[u8]) -> Option<(Option<String>, String)> {
    parse_under(ROOT, kind, raw)
}

/// The namespace and name the outline key `raw` of `kind` stands for.
pub fn parse_outline(kind: Kind, raw: &[u8]) -> Option<(Option<String>, String)> {
    parse_under(OUTLINE_ROOT, kind, raw)
}

fn parse_under(root: &str, kind: Kind, raw: &[u8]) -> Option<(Option<String>, String)> {
    let s = std::str::from_utf8(raw).ok()?;
    // `prefix(kind, None)` matched piece by piece: this runs for every
    // object read and every watch event, so it builds no string.
    let rest = s
        .strip_prefix(root)?
        .strip_prefix(kind.info().key_segment)?
        .strip_prefix('/')?;
    if kind.info().namespaced {
        let (ns, name) = rest.split_once('/')?;
        (!ns.is_empty() && !name.is_empty() && !name.contains('/'))
            .then(|| (Some(ns.to_string()), name.to_string()))
    } else {
        (!rest.is_empty() && !rest.contains('/')).then(|| (None, rest.to_string()))
    }
}

/// The end of the key range starting at `prefix` (etcd's "prefix" range).
/// The end of the key range of every key starting with `prefix`, for any
/// bytes: the prefix with its last byte that is not 0xff incremented and
/// what follows dropped (`\0`, every key, when all are 0xff).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xff {
            end.push(last + 1);
            return end;
        }
    }
    vec![0]
}

pub fn range_end(prefix: &str) -> Vec<u8> {
    let mut end = prefix.as_bytes().to_vec();
    // The prefixes all end in '/', so the last byte can be incremented.
    if let Some(last) = end.last_mut() {
        *last += 1;
    }
    end
}

/// Where a paged listing continues: the revision it is read at and the
/// next key, as `<revision>:<key in hex>`.
pub fn continue_from(key: &[u8], revision: i64) -> String {
    let mut s = format!("{revision}:");
    for b in key {
        s.push_str(&format!("{b:02x}"));
    }
    s
}

/// The key and revision of a [`continue_from`] string; `None` for anything
/// else.
pub fn parse_continue(s: &str) -> Option<(Vec<u8>, i64)> {
    let (rev, hex) = s.split_once(':')?;
    let rev: i64 = rev.parse().ok().filter(|r| *r > 0)?;
    if hex.len() % 2 != 0 || !hex.is_ascii() {
        return None;
    }
    let key = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).ok())
        .collect::<Option<Vec<u8>>>()?;
    Some((key, rev))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_round_trip() {
        let k = ObjectKey::new(Kind::NetworkPolicy, Some("prod"), "deny-all");
        let s = key(&k).unwrap();
        assert_eq!(s, "/tartan/networkpolicies/prod/deny-all");
        assert_eq!(
            parse(Kind::NetworkPolicy, s.as_bytes()),
            Some((Some("prod".into()), "deny-all".into()))
        );
        let k = ObjectKey::new(Kind::Node, None, "n1");
        assert_eq!(key(&k).unwrap(), "/tartan/k8s/nodes/n1");
        assert_eq!(parse(Kind::IpPool, b"/tartan/k8s/nodes/n1"), None);
    }

    #[test]
    fn every_kind_parses_its_own_keys_and_no_other_kinds() {
        for kind in Kind::all() {
            let ns = kind.info().namespaced.then_some("ns1");
            let s = key(&ObjectKey::new(kind, ns, "o1")).unwrap();
            let want = Some((ns.map(String::from), "o1".to_string()));
            assert_eq!(parse(kind, s.as_bytes()), want, "{s}");
            // The prefix without its closing '/' names nothing.
            let bare = prefix(kind, None);
            assert_eq!(parse(kind, bare.trim_end_matches('/').as_bytes()), None);
            for other in Kind::all().filter(|o| *o != kind) {
                if !s.starts_with(&prefix(other, None)) {
                    assert_eq!(parse(other, s.as_bytes()), None, "{other} read {s}");
                }
            }
        }
    }

    #[test]
    fn outline_keys_are_apart_from_every_kind_and_parse_back() {
        for kind in Kind::all() {
            assert!(
                !OUTLINE_ROOT.starts_with(&prefix(kind, None)),
                "{kind}'s prefix holds the outlines"
            );
            let ns = kind.info().namespaced.then_some("ns1");
            let o = outline_key(&key(&ObjectKey::new(kind, ns, "o1")).unwrap());
            assert!(o.starts_with(&outline_prefix(kind, ns)), "{o}");
            let want = Some((ns.map(String::from), "o1".to_string()));
            assert_eq!(parse_outline(kind, o.as_bytes()), want, "{o}");
            for other in Kind::all() {
                assert_eq!(parse(other, o.as_bytes()), None, "{other} read {o}");
            }
        }
        assert_eq!(
            outline_key("/tartan/k8s/nodes/n1"),
            "/tartan/outlines/k8s/nodes/n1"
        );
    }

    #[test]
    fn bad_keys_are_refused() {
        for k in [
            ObjectKey::new(Kind::IpPool, None, "a/b"),
            ObjectKey::new(Kind::IpPool, None, ""),
            ObjectKey::new(Kind::IpPool, Some("ns"), "a"),
            ObjectKey::new(Kind::Pod, None, "a"),
            ObjectKey::new(Kind::Pod, Some("x/y"), "a"),
            ObjectKey::new(Kind::Pod, Some(".."), "a"),
        ] {
            assert!(key(&k).is_err(), "{k:?}");
        }
    }

    #[test]
    fn continuations_round_trip_and_refuse_garbage() {
        let k = b"/tartan/k8s/endpointslices/default/web-\x00";
        assert_eq!(
            parse_continue(&continue_from(k, 42)),
            Some((k.to_vec(), 42))
        );
        for bad in [
            "",
            "42",
            "x:00",
            "0:00",
            "-1:00",
            "42:0",
            "42:zz",
            "42:\u{e9}0",
        ] {
            assert_eq!(parse_continue(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn prefixes_do_not_overlap() {
        assert_eq!(range_end("/tartan/ippools/"), b"/tartan/ippools0".to_vec());
        assert_eq!(prefix_end(b"/a/n1."), b"/a/n1/".to_vec());
        assert_eq!(prefix_end(b"/a\xff\xff"), b"/b".to_vec());
        assert_eq!(prefix_end(b"\xff"), vec![0]);
        // A namespace prefix does not match a longer namespace name.
        assert!(!"/tartan/k8s/pods/ab/x".starts_with(&prefix(Kind::Pod, Some("a"))));
    }
}
