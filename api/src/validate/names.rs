//! The API server's rules for names, label keys and values, port names and
//! ports, as its `validation` package words them.

use std::net::IpAddr;

use ipnet::IpNet;

/// Longest label value and name part of a qualified name.
pub const LABEL_VALUE_MAX: usize = 63;
/// Largest total size of an object's annotations (keys and values).
pub const ANNOTATIONS_MAX: usize = 256 * 1024;

fn alnum(c: u8) -> bool {
    c.is_ascii_alphanumeric()
}

/// `[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?`
fn name_chars(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && alnum(b[0])
        && alnum(b[b.len() - 1])
        && b.iter()
            .all(|c| alnum(*c) || matches!(c, b'-' | b'_' | b'.'))
}

/// A label value: empty, or at most 63 characters of the name alphabet.
pub fn label_value(s: &str) -> Result<(), String> {
    if s.len() > LABEL_VALUE_MAX {
        return Err(format!(
            "{} characters; a label value has at most {LABEL_VALUE_MAX}",
            s.len()
        ));
    }
    if s.is_empty() || name_chars(s) {
        Ok(())
    } else {
        Err(format!(
            "{s:?} is not a valid label value; allowed: empty, or letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
        ))
    }
}

/// A qualified name (label and annotation keys): an optional DNS
/// subdomain prefix and `/`, then at most 63 characters of the name
/// alphabet.
pub fn qualified_name(s: &str) -> Result<(), String> {
    let (prefix, name) = match s.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, s),
    };
    if let Some(p) = prefix
        && crate::resources::common::dns_subdomain(p).is_err()
    {
        return Err(format!(
            "{s:?}: the prefix {p:?} is not a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253)"
        ));
    }
    if name.len() > LABEL_VALUE_MAX || !name_chars(name) {
        return Err(format!(
            "{s:?} is not a valid key; the name part must be at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit, with an optional DNS subdomain prefix and '/'"
        ));
    }
    Ok(())
}

/// An annotation key: a qualified name once lowercased, as the API
/// server's `ValidateAnnotations` reads it (`IsQualifiedName(ToLower(k))`),
/// so `Example.com/Owner` is a key where a label key could not be. Each
/// character is lowercased alone, as Go's `strings.ToLower` does.
pub fn annotation_key(s: &str) -> Result<(), String> {
    let lower: String = s
        .chars()
        .map(|c| {
            let mut l = c.to_lowercase();
            match (l.next(), l.next()) {
                (Some(one), None) => one,
                // Only 'İ' (U+0130) lowercases to two characters; Go's
                // simple mapping gives 'i'.
                _ if c == '\u{130}' => 'i',
                _ => c,
            }
        })
        .collect();
    qualified_name(&lower).map_err(|_| {
        format!(
            "{s:?} is not a valid annotation key; the name part must be at most 63 letters, digits, '-', '_' and '.', starting and ending with a letter or digit, with an optional DNS subdomain prefix (any case) and '/'"
        )
    })
}

/// A DNS-1035 label (Service names): a DNS-1123 label starting with a letter.
pub fn dns1035_label(s: &str) -> Result<(), String> {
    let ok = crate::resources::common::dns_label(s).is_ok()
        && s.as_bytes().first().is_some_and(u8::is_ascii_lowercase);
    if ok {
        Ok(())
    } else {
        Err(format!(
            "{s:?} is not a DNS-1035 label; allowed at most 63 lowercase letters, digits and '-', starting with a letter and ending with a letter or digit"
        ))
    }
}

/// Whether `s` is an IANA service name (a named port): at most 15
/// lowercase letters, digits and '-', with at least one letter, no '-' at
/// either end, no "--". The one place this rule is written; each caller
/// words its own refusal.
pub fn is_port_name(s: &str) -> bool {
    let b = s.as_bytes();
    !b.is_empty()
        && b.len() <= 15
        && b.iter()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == b'-')
        && b.iter().any(u8::is_ascii_lowercase)
        && b[0] != b'-'
        && b[b.len() - 1] != b'-'
        && !s.contains("--")
}

/// An IANA service name (a named port), see [`is_port_name`].
pub fn port_name(s: &str) -> Result<(), String> {
    if is_port_name(s) {
        Ok(())
    } else {
        Err(format!(
            "{s:?} is not a port name; allowed at most 15 lowercase letters, digits and '-', with at least one letter, not starting or ending with '-' and without \"--\""
        ))
    }
}

/// Whether `k` is a Secret or ConfigMap data key (`IsConfigMapKey`): 1 to
/// 253 letters, digits, '-', '_' and '.', not `.` or `..` and not
/// starting with `..`.
pub fn is_config_map_key(k: &str) -> bool {
    !k.is_empty()
        && k.len() <= 253
        && k.bytes()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'_' | b'.'))
        && k != "."
        && !k.starts_with("..")
}

/// Whether `s` is a whole number written in digits alone (no sign, no
/// spaces), as a CRD's `^[0-9]+$` says.
pub fn all_digits(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit())
}

/// A port number 1-65535.
pub fn port_number(n: i64) -> Result<(), String> {
    if (1..=65535).contains(&n) {
        Ok(())
    } else {
        Err(format!("{n} is not a port; allowed 1 to 65535"))
    }
}

/// An IP address as the API server reads one (no leading zeros, no zone).
pub fn ip(s: &str) -> Result<IpAddr, String> {
    s.parse::<IpAddr>()
        .map_err(|_| format!("{s:?} is not a valid IP address"))
}

/// An address the API server takes as an endpoint or external IP
/// (`ValidateNonSpecialIP`, `ValidateEndpointIP`): not unspecified
/// (0.0.0.0, ::), loopback (127.0.0.0/8, ::1), link-local (169.254.0.0/16,
/// fe80::/10) or link-local multicast (224.0.0.0/24, ff02::/16 with any
/// flags). An IPv4-mapped IPv6 address is judged as its IPv4 address, as
/// Go's `net.IP` does.
pub fn non_special_ip(a: IpAddr) -> Result<(), String> {
    let why = match a.to_canonical() {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            if v4.is_unspecified() {
                Some("may not be unspecified (0.0.0.0)")
            } else if v4.is_loopback() {
                Some("may not be in the loopback range (127.0.0.0/8)")
            } else if v4.is_link_local() {
                Some("may not be in the link-local range (169.254.0.0/16)")
            } else if o[0] == 224 && o[1] == 0 && o[2] == 0 {
                Some("may not be in the link-local multicast range (224.0.0.0/24)")
            } else {
                None
            }
        }
        IpAddr::V6(v6) => {
            let o = v6.octets();
            if v6.is_unspecified() {
                Some("may not be unspecified (::)")
            } else if v6.is_loopback() {
                Some("may not be in the loopback range (::1/128)")
            } else if v6.is_unicast_link_local() {
                Some("may not be in the link-local range (fe80::/10)")
            } else if o[0] == 0xff && o[1] & 0x0f == 0x02 {
                Some("may not be in the link-local multicast range (ff02::/16)")
            } else {
                None
            }
        }
    };
    match why {
        Some(w) => Err(format!("{a}: {w}")),
        None => Ok(()),
    }
}

/// A CIDR as the API server reads one (host bits allowed).
pub fn cidr(s: &str) -> Result<IpNet, String> {
    s.parse::<IpNet>()
        .map_err(|_| format!("{s:?} is not a valid CIDR, e.g. 10.0.0.0/16 or fd00::/64"))
}

/// A value from a fixed set.
pub fn one_of(s: &str, allowed: &[&str]) -> Result<(), String> {
    if allowed.contains(&s) {
        Ok(())
    } else {
        Err(format!(
            "{s:?} is not supported; allowed {}",
            allowed
                .iter()
                .map(|a| format!("{a:?}"))
                .collect::<Vec<_>>()
                .join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_values_and_keys() {
        for good in ["", "a", "A.b_c-1", &"x".repeat(63)] {
            assert!(label_value(good).is_ok(), "{good:?}");
        }
        for bad in ["-a", "a-", "a b", "a/b", &"x".repeat(64)] {
            assert!(label_value(bad).is_err(), "{bad:?}");
        }
        for good in ["app", "kubernetes.io/metadata.name", "a.b/C_d"] {
            assert!(qualified_name(good).is_ok(), "{good:?}");
        }
        for bad in ["", "/a", "Upper.IO/a", "a/", "a/b/c", "-a", &"k".repeat(64)] {
            assert!(qualified_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn annotation_keys_are_read_lowercased() {
        for good in [
            "Example.com/owner",
            "EXAMPLE.COM/Owner",
            "kubernetes.io/change-cause",
            "Plain",
            "\u{212a}ey",
        ] {
            assert!(annotation_key(good).is_ok(), "{good:?}");
        }
        for bad in [
            "",
            "/a",
            "a/",
            "a/b/c",
            "-a",
            "ex ample.com/a",
            &"k".repeat(64),
        ] {
            assert!(annotation_key(bad).is_err(), "{bad:?}");
        }
        // Label keys stay case-sensitive in their prefix.
        assert!(qualified_name("Example.com/owner").is_err());
    }

    #[test]
    fn special_addresses_are_refused() {
        for bad in [
            "0.0.0.0",
            "::",
            "127.0.0.1",
            "127.255.0.9",
            "::1",
            "169.254.169.254",
            "fe80::1",
            "febf::1",
            "224.0.0.1",
            "224.0.0.255",
            "ff02::1",
            "ff12::1",
            "::ffff:127.0.0.1",
            "::ffff:169.254.1.1",
            "::ffff:0.0.0.0",
        ] {
            assert!(non_special_ip(bad.parse().unwrap()).is_err(), "{bad}");
        }
        for good in [
            "10.0.0.1",
            "192.0.2.10",
            "224.0.1.1",
            "239.1.1.1",
            "fec0::1",
            "ff05::1",
            "2001:db8::1",
            "::2",
            "::ffff:10.0.0.1",
        ] {
            assert!(non_special_ip(good.parse().unwrap()).is_ok(), "{good}");
        }
    }

    #[test]
    fn port_names() {
        for good in ["http", "h2c", "dns-tcp", "a1"] {
            assert!(port_name(good).is_ok(), "{good:?}");
        }
        for bad in ["", "80", "HTTP", "-a", "a-", "a--b", "abcdefghijklmnop"] {
            assert!(port_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn service_names_start_with_a_letter() {
        assert!(dns1035_label("web").is_ok());
        assert!(dns1035_label("1web").is_err());
    }
}
