//! BGP community values as written in resources.

use std::fmt;
use std::str::FromStr;

/// A BGP community: standard (RFC 1997, `AA:NN`), large (RFC 8092,
/// `A:B:C`) or one of the well-known names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Community {
    /// A standard community as its 32-bit value (well-known ones included).
    Standard(u32),
    Large(u32, u32, u32),
}

/// The well-known standard communities (RFC 1997, RFC 3765) by name.
pub const WELL_KNOWN: [(&str, u32); 4] = [
    ("no-export", 0xFFFF_FF01),
    ("no-advertise", 0xFFFF_FF02),
    ("no-export-subconfed", 0xFFFF_FF03),
    ("no-peer", 0xFFFF_FF04),
];

const FORMS: &str = "expected AA:NN (each 0 to 65535), A:B:C (each 0 to 4294967295) or one of no-export, no-advertise, no-export-subconfed, no-peer";

impl FromStr for Community {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        if let Some((_, v)) = WELL_KNOWN.iter().find(|(n, _)| *n == s) {
            return Ok(Community::Standard(*v));
        }
        let bad = || format!("{s:?} is not a community; {FORMS}");
        let parts: Vec<&str> = s.split(':').collect();
        let num = |t: &str| -> Result<u32, String> {
            if t.is_empty() || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            t.parse::<u32>().map_err(|_| bad())
        };
        match parts.as_slice() {
            [a, n] => {
                let (a, n) = (num(a)?, num(n)?);
                if a > 0xFFFF || n > 0xFFFF {
                    return Err(format!(
                        "{s:?}: a standard community's halves are 0 to 65535; use A:B:C for a large community"
                    ));
                }
                Ok(Community::Standard((a << 16) | n))
            }
            [a, b, c] => Ok(Community::Large(num(a)?, num(b)?, num(c)?)),
            _ => Err(bad()),
        }
    }
}

impl fmt::Display for Community {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Community::Standard(v) => match WELL_KNOWN.iter().find(|(_, w)| w == v) {
                Some((name, _)) => f.write_str(name),
                None => write!(f, "{}:{}", v >> 16, v & 0xFFFF),
            },
            Community::Large(a, b, c) => write!(f, "{a}:{b}:{c}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forms_parse_and_print_back() {
        for s in [
            "64512:100",
            "0:0",
            "65535:65535",
            "4200000000:1:2",
            "no-export",
            "no-peer",
        ] {
            let c: Community = s.parse().unwrap();
            assert_eq!(c.to_string(), s);
        }
        assert_eq!(
            "65535:65281".parse::<Community>(),
            Ok(Community::Standard(0xFFFF_FF01))
        );
        for bad in [
            "",
            "1",
            "65536:1",
            "1:2:3:4",
            "a:b",
            "no_export",
            "1:-2",
            "1:4294967296:0",
        ] {
            assert!(bad.parse::<Community>().is_err(), "{bad:?} parsed");
        }
    }
}
