//! Text forms of communities, as operators write them in config and read
//! them in `tartanctl`: `65000:100`, `no-export`, `65000:1:2` (large).
use super::well_known;

pub fn parse_community(s: &str) -> Result<u32, String> {
    match s {
        "no-export" => return Ok(well_known::NO_EXPORT),
        "no-advertise" => return Ok(well_known::NO_ADVERTISE),
        "no-export-subconfed" => return Ok(well_known::NO_EXPORT_SUBCONFED),
        _ => {}
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

pub fn format_community(c: u32) -> String {
    match c {
        well_known::NO_EXPORT => "no-export".into(),
        well_known::NO_ADVERTISE => "no-advertise".into(),
        well_known::NO_EXPORT_SUBCONFED => "no-export-subconfed".into(),
        _ => format!("{}:{}", c >> 16, c & 0xffff),
    }
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

pub fn format_large_community(c: &[u32; 3]) -> String {
    format!("{}:{}:{}", c[0], c[1], c[2])
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(format_large_community(&[1, 2, 3]), "1:2:3");
    }
}
