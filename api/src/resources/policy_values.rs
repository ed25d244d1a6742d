//! Policy rule values written either as a number or as a string: IP
//! protocols and ports. In the CRD schema they are
//! `x-kubernetes-int-or-string`.

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};
use serde::de::{self, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::validate::names::{all_digits, is_port_name};

/// An IP protocol, by name or number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Protocol {
    Tcp,
    Udp,
    Icmp,
    IcmpV6,
    Sctp,
    UdpLite,
    /// Any protocol by number, 1 to 255.
    Number(u8),
}

const PROTOCOL_NAMES: [(&str, Protocol); 6] = [
    ("TCP", Protocol::Tcp),
    ("UDP", Protocol::Udp),
    ("ICMP", Protocol::Icmp),
    ("ICMPv6", Protocol::IcmpV6),
    ("SCTP", Protocol::Sctp),
    ("UDPLite", Protocol::UdpLite),
];

const PROTOCOLS_ALLOWED: &str =
    "allowed TCP, UDP, ICMP, ICMPv6, SCTP, UDPLite or a number 1 to 255";

impl Protocol {
    /// The protocol number as in the IP header.
    pub fn number(self) -> u8 {
        match self {
            Protocol::Tcp => 6,
            Protocol::Udp => 17,
            Protocol::Icmp => 1,
            Protocol::IcmpV6 => 58,
            Protocol::Sctp => 132,
            Protocol::UdpLite => 136,
            Protocol::Number(n) => n,
        }
    }

    /// Whether a rule with this protocol may match ports: TCP, UDP and
    /// SCTP, as Calico's `SupportsPorts` (not UDPLite, though its packets
    /// carry ports too).
    pub fn has_ports(self) -> bool {
        matches!(self.number(), 6 | 17 | 132)
    }

    /// ICMP or ICMPv6.
    pub fn is_icmp(self) -> bool {
        matches!(self.number(), 1 | 58)
    }

    fn from_number(n: u64) -> Result<Protocol, String> {
        match n {
            1..=255 => Ok(Protocol::Number(n as u8)),
            _ => Err(format!("{n} is not a protocol; {PROTOCOLS_ALLOWED}")),
        }
    }

    /// Names in any case (`tcp` as `TCP`): Calico's v3 validator wants the
    /// canonical spelling, but policies stored with another must keep
    /// decoding (one that does not decode isolates its pods).
    fn from_name(s: &str) -> Result<Protocol, String> {
        if let Some((_, p)) = PROTOCOL_NAMES
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(s))
        {
            return Ok(*p);
        }
        // Digits only: Rust's parsing would take "+6".
        match s.parse::<u64>() {
            Ok(n) if all_digits(s) => Protocol::from_number(n),
            _ => Err(format!("{s:?} is not a protocol; {PROTOCOLS_ALLOWED}")),
        }
    }
}

impl fmt::Display for Protocol {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match PROTOCOL_NAMES.iter().find(|(_, p)| p == self) {
            Some((name, _)) => f.write_str(name),
            None => write!(f, "{}", self.number()),
        }
    }
}

impl Serialize for Protocol {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Protocol::Number(n) => s.serialize_u8(*n),
            named => s.collect_str(named),
        }
    }
}

impl<'de> Deserialize<'de> for Protocol {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Protocol;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a protocol name or number")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Protocol, E> {
                Protocol::from_number(n).map_err(E::custom)
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Protocol, E> {
                Protocol::from_number(u64::try_from(n).unwrap_or(0)).map_err(E::custom)
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Protocol, E> {
                Protocol::from_name(s).map_err(E::custom)
            }
        }
        d.deserialize_any(V)
    }
}

fn int_or_string(description: &str, rules: serde_json::Value) -> Schema {
    json_schema!({
        "x-kubernetes-int-or-string": true,
        "description": description,
        "maxLength": super::schema_rules::INT_OR_STRING_MAX,
        "x-kubernetes-validations": rules,
    })
}

impl JsonSchema for Protocol {
    fn schema_name() -> Cow<'static, str> {
        "Protocol".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        int_or_string(
            "TCP, UDP, ICMP, ICMPv6, SCTP, UDPLite or a protocol number 1 to 255.",
            super::schema_rules_policy::protocol_rules(),
        )
    }
}

/// A port condition: a number, a range `lo:hi` (bounds included) or the
/// name of a container port.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Port {
    Number(u16),
    Range(u16, u16),
    Named(String),
}

impl Port {
    /// Problems the parser lets through: port 0, reversed ranges, names
    /// that no container port can have.
    pub fn check(&self) -> Result<(), String> {
        match self {
            Port::Number(0) => Err("0 is not a port; allowed 1 to 65535".into()),
            Port::Number(_) => Ok(()),
            Port::Range(lo, hi) if *lo == 0 || *hi == 0 => Err(format!(
                "\"{lo}:{hi}\": 0 is not a port; allowed 1 to 65535"
            )),
            Port::Range(lo, hi) if lo > hi => Err(format!(
                "\"{lo}:{hi}\" is an empty range; write the lower port first"
            )),
            Port::Range(..) => Ok(()),
            Port::Named(n) => {
                if is_port_name(n) {
                    Ok(())
                } else {
                    Err(format!(
                        "{n:?} is not a port; allowed a number 1 to 65535, a range such as \"8000:8080\", or a port name (at most 15 lowercase letters, digits and '-')"
                    ))
                }
            }
        }
    }
}

impl fmt::Display for Port {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Port::Number(n) => write!(f, "{n}"),
            Port::Range(lo, hi) => write!(f, "{lo}:{hi}"),
            Port::Named(n) => f.write_str(n),
        }
    }
}

impl Serialize for Port {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Port::Number(n) => s.serialize_u16(*n),
            other => s.collect_str(other),
        }
    }
}

/// Digits only: Rust's parsing would take "+80".
fn port_number(t: &str) -> Result<u16, String> {
    t.parse::<u16>()
        .ok()
        .filter(|_| all_digits(t))
        .ok_or_else(|| format!("{t:?} is not a port; allowed 1 to 65535"))
}

impl<'de> Deserialize<'de> for Port {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Port;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a port number, range or name")
            }
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Port, E> {
                u16::try_from(n)
                    .map(Port::Number)
                    .map_err(|_| E::custom(format!("{n} is not a port; allowed 1 to 65535")))
            }
            fn visit_i64<E: de::Error>(self, n: i64) -> Result<Port, E> {
                u64::try_from(n)
                    .map_err(|_| E::custom(format!("{n} is not a port; allowed 1 to 65535")))
                    .and_then(|n| self.visit_u64(n))
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Port, E> {
                if s.bytes().all(|b| b.is_ascii_digit()) && !s.is_empty() {
                    return port_number(s).map(Port::Number).map_err(E::custom);
                }
                match s.split_once(':') {
                    Some((lo, hi)) => Ok(Port::Range(
                        port_number(lo).map_err(E::custom)?,
                        port_number(hi).map_err(E::custom)?,
                    )),
                    None => Ok(Port::Named(s.to_string())),
                }
            }
        }
        d.deserialize_any(V)
    }
}

impl JsonSchema for Port {
    fn schema_name() -> Cow<'static, str> {
        "Port".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(_: &mut SchemaGenerator) -> Schema {
        int_or_string(
            "A port 1 to 65535, a range \"lo:hi\", or a named container port.",
            super::schema_rules_policy::port_rules(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn protocols_by_name_or_number() {
        let p: Protocol = serde_json::from_value(json!("TCP")).unwrap();
        assert_eq!(p, Protocol::Tcp);
        let p: Protocol = serde_json::from_value(json!("UDPLite")).unwrap();
        assert_eq!(serde_json::to_value(p).unwrap(), json!("UDPLite"));
        let p: Protocol = serde_json::from_value(json!(47)).unwrap();
        assert_eq!(serde_json::to_value(p).unwrap(), json!(47));
        assert!(Protocol::Number(6).has_ports());
        // As Calico's SupportsPorts: TCP, UDP and SCTP only.
        assert!(Protocol::Sctp.has_ports());
        assert!(!Protocol::UdpLite.has_ports());
        assert!(!Protocol::Number(136).has_ports());
        for bad in [json!(0), json!(256), json!("GRE2"), json!(true), json!(-1)] {
            assert!(
                serde_json::from_value::<Protocol>(bad.clone()).is_err(),
                "{bad}"
            );
        }
    }

    /// Names are read in any case, as they always were: a stored policy
    /// written `tcp` keeps decoding.
    #[test]
    fn protocol_names_are_read_in_any_case() {
        for (name, p) in PROTOCOL_NAMES {
            for spelled in [name.to_string(), name.to_lowercase(), name.to_uppercase()] {
                assert_eq!(
                    serde_json::from_value::<Protocol>(json!(spelled)).unwrap(),
                    p
                );
            }
        }
    }

    /// Numbers are digits only, as the CRD's `^[0-9]+$` says: Rust's
    /// integer parsing takes a leading '+'.
    #[test]
    fn numbers_in_strings_are_digits_only() {
        let p: Protocol = serde_json::from_value(json!("6")).unwrap();
        assert_eq!(p, Protocol::Number(6));
        for bad in ["+6", "+17", " 6", "6 ", "-6", ""] {
            assert!(
                serde_json::from_value::<Protocol>(json!(bad)).is_err(),
                "{bad:?}"
            );
        }
        let p: Port = serde_json::from_value(json!("1:2")).unwrap();
        assert_eq!(p, Port::Range(1, 2));
        for bad in ["+1:+2", "+1:2", "1:+2", "1: 2", ":2", "1:", "1:2:3"] {
            assert!(
                serde_json::from_value::<Port>(json!(bad)).is_err(),
                "{bad:?}"
            );
        }
        // "+80" is no port number; as a name it is refused by the check.
        let p: Result<Port, _> = serde_json::from_value(json!("+80"));
        assert!(p.is_err() || p.unwrap().check().is_err());
    }

    #[test]
    fn ports_in_three_forms() {
        for (v, port) in [
            (json!(80), Port::Number(80)),
            (json!("8000:8080"), Port::Range(8000, 8080)),
            (json!("http"), Port::Named("http".into())),
        ] {
            let p: Port = serde_json::from_value(v.clone()).unwrap();
            assert_eq!(p, port);
            assert_eq!(serde_json::to_value(&p).unwrap(), v);
            assert!(p.check().is_ok());
        }
        let p: Port = serde_json::from_value(json!("443")).unwrap();
        assert_eq!(p, Port::Number(443));
        assert!(serde_json::from_value::<Port>(json!(70000)).is_err());
        assert!(serde_json::from_value::<Port>(json!("1:x")).is_err());
        assert!(Port::Range(90, 80).check().is_err());
        assert!(Port::Named("HTTP".into()).check().is_err());
        assert!(Port::Named("a-very-long-port-name".into()).check().is_err());
        assert!(Port::Number(0).check().is_err());
        // A policy's named port and a container's port name follow one
        // rule: both refuse and accept the same names.
        for name in [
            "http",
            "h2c",
            "dns-tcp",
            "a1",
            "",
            "80",
            "HTTP",
            "-a",
            "a-",
            "a--b",
            "abcdefghijklmno",
            "abcdefghijklmnop",
            "a_b",
            "a.b",
        ] {
            assert_eq!(
                Port::Named(name.into()).check().is_ok(),
                crate::validate::names::port_name(name).is_ok(),
                "{name:?}"
            );
        }
        assert!(Port::Named("abcdefghijklmno".into()).check().is_ok());
    }
}
