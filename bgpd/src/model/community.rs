//! Communities as operators write them in config: `65000:100`, a
//! well-known name such as `no-export`, `65000:1:2` (large). The text forms
//! `tartanctl` prints come from `tartan_api::bgp`, which holds the one table
//! of well-known names both directions use.
use tartan_api::bgp::well_known_community;

pub fn parse_community(s: &str) -> Result<u32, String> {
    if let Some(v) = well_known_community(s) {
        return Ok(v);
    }
    let (hi, lo) = s
        .split_once(':')
        .ok_or_else(|| format!("community {s:?} is not ASN:VALUE or a well-known name"))?;
    let hi: u16 = hi
        .parse()
        .map_err(|_| format!("community {s:?}: {hi:?} is not a number 0-65535"))?;
    let lo: u16 = lo
        .parse()
        .map_err(|_| format!("community {s:?}: {lo:?} is not a number 0-65535"))?;
    Ok((u32::from(hi) << 16) | u32::from(lo))
}

pub fn parse_large_community(s: &str) -> Result<[u32; 3], String> {
    let parts: Vec<&str> = s.split(':').collect();
    if parts.len() != 3 {
        return Err(format!("large community {s:?} is not GLOBAL:LOCAL1:LOCAL2"));
    }
    let mut out = [0u32; 3];
    for (o, p) in out.iter_mut().zip(&parts) {
        *o = p
            .parse()
            .map_err(|_| format!("large community {s:?}: {p:?} is not a number 0-4294967295"))?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use tartan_api::bgp::{format_community, format_large_community};

    #[test]
    fn communities_round_trip() {
        for s in [
            "65000:100",
            "0:0",
            "65535:65535",
            "no-export",
            "no-advertise",
        ] {
            assert_eq!(format_community(parse_community(s).unwrap()), s);
        }
        assert_eq!(parse_community("1:2").unwrap(), 0x0001_0002);
        assert!(parse_community("65536:1").is_err());
        assert!(parse_community("abc").is_err());
        assert_eq!(
            parse_large_community("4200000000:1:2").unwrap(),
            [4200000000, 1, 2]
        );
        assert!(parse_large_community("1:2").is_err());
        assert_eq!(format_large_community([1, 2, 3]), "1:2:3");
    }
}
