//! BIRD 2's routes as `birdc show route all` prints them, parsed into
//! paths with their BGP attributes.

use std::net::{IpAddr, Ipv4Addr};

/// One path of `birdc show route all`.
#[derive(Debug, Clone, PartialEq)]
pub struct BirdRoute {
    pub prefix: String,
    /// The protocol it came from ("n_10_0_0_2", "static4", …).
    pub proto: String,
    /// Marked `*` (the best path).
    pub primary: bool,
    /// Addresses of the `via` lines (several for multipath).
    pub next_hops: Vec<IpAddr>,
    /// Attribute lines as (name, value): ("BGP.as_path", "65001 65002"),
    /// ("BGP.originator_id", "10.0.0.1"), ("BGP.f0 [t]", "01 02"), …
    pub attrs: Vec<(String, String)>,
    /// The path's text as birdc printed it.
    pub text: String,
}

impl BirdRoute {
    pub fn attr(&self, name: &str) -> Option<&str> {
        self.attrs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The first `via` address, else the first BGP.next_hop address.
    pub fn next_hop(&self) -> Option<IpAddr> {
        self.next_hops.first().copied().or_else(|| {
            self.attr("BGP.next_hop")?
                .split_whitespace()
                .next()?
                .parse()
                .ok()
        })
    }

    /// AS numbers of BGP.as_path in order (AS_SET members included, braces
    /// dropped).
    pub fn as_path(&self) -> Vec<u32> {
        self.attr("BGP.as_path")
            .unwrap_or("")
            .split(|c: char| !c.is_ascii_digit())
            .filter_map(|t| t.parse().ok())
            .collect()
    }

    /// BGP.community as (asn, value) pairs.
    pub fn communities(&self) -> Vec<(u16, u16)> {
        tuples(self.attr("BGP.community").unwrap_or(""))
            .into_iter()
            .filter_map(|t| Some((t.first()?.parse().ok()?, t.get(1)?.parse().ok()?)))
            .collect()
    }

    /// BGP.large_community as triples.
    pub fn large_communities(&self) -> Vec<(u32, u32, u32)> {
        tuples(self.attr("BGP.large_community").unwrap_or(""))
            .into_iter()
            .filter_map(|t| {
                Some((
                    t.first()?.parse().ok()?,
                    t.get(1)?.parse().ok()?,
                    t.get(2)?.parse().ok()?,
                ))
            })
            .collect()
    }

    pub fn originator_id(&self) -> Option<Ipv4Addr> {
        self.attr("BGP.originator_id")?.trim().parse().ok()
    }

    pub fn cluster_list(&self) -> Vec<Ipv4Addr> {
        self.attr("BGP.cluster_list")
            .unwrap_or("")
            .split_whitespace()
            .filter_map(|t| t.parse().ok())
            .collect()
    }
}

/// "(1,2) (3, 4)" → [["1","2"],["3","4"]].
fn tuples(s: &str) -> Vec<Vec<String>> {
    s.split('(')
        .skip(1)
        .map(|t| {
            t.split(')')
                .next()
                .unwrap_or("")
                .split(',')
                .map(|x| x.trim().to_string())
                .collect()
        })
        .collect()
}

/// Parses `birdc show route all` (banner already removed or not).
pub fn parse_routes(out: &str) -> Vec<BirdRoute> {
    let mut routes: Vec<BirdRoute> = Vec::new();
    let mut prefix = String::new();
    for line in out.lines() {
        if line.trim().is_empty() || line.starts_with("Table ") || line.starts_with("BIRD ") {
            continue;
        }
        if let Some(body) = line.strip_prefix('\t') {
            let Some(r) = routes.last_mut() else { continue };
            r.text.push('\n');
            r.text.push_str(line);
            let body = body.trim();
            if let Some(via) = body.strip_prefix("via ") {
                if let Some(a) = via.split_whitespace().next().and_then(|a| a.parse().ok()) {
                    r.next_hops.push(a);
                }
            } else if let Some((k, v)) = body.split_once(':') {
                r.attrs.push((k.trim().to_string(), v.trim().to_string()));
            }
            continue;
        }
        // A new prefix starts at column 0; another path for the same prefix
        // is indented with spaces.
        let rest = if line.starts_with(' ') {
            line.trim_start()
        } else {
            let mut it = line.splitn(2, char::is_whitespace);
            prefix = it.next().unwrap_or("").to_string();
            it.next().unwrap_or("").trim_start()
        };
        let proto = rest
            .split('[')
            .nth(1)
            .and_then(|t| t.split_whitespace().next())
            .unwrap_or("")
            .trim_end_matches(']')
            .to_string();
        routes.push(BirdRoute {
            prefix: prefix.clone(),
            proto,
            primary: rest.contains("] * ") || rest.contains("] *\t"),
            next_hops: Vec::new(),
            attrs: Vec::new(),
            text: line.to_string(),
        });
    }
    routes
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLE: &str = "BIRD 2.0.12 ready.\nTable master4:\n\
198.18.0.0/24        unicast [n_10_0_0_1 04:15:08.961] * (100) [AS65001i]\n\
\tvia 10.0.0.1 on ve2\n\
\tType: BGP univ\n\
\tBGP.origin: IGP\n\
\tBGP.as_path: 65001 65003\n\
\tBGP.next_hop: 10.0.0.1\n\
\tBGP.local_pref: 100\n\
\tBGP.community: (65001,7) (65001,8)\n\
\tBGP.large_community: (1, 2, 3)\n\
\tBGP.originator_id: 10.0.0.9\n\
\tBGP.cluster_list: 1.1.1.1 2.2.2.2\n\
\tBGP.f0 [t]: 01 02 03 04 05\n\
\x20                    unicast [n_10_0_0_3 04:15:09.000] (100) [AS65003i]\n\
\tvia 10.0.0.3 on ve2\n\
\tBGP.as_path: 65003\n\
203.0.113.0/24       blackhole [static4 04:15:00.549] * (200)\n\
\tType: static univ\n";

    #[test]
    fn parses_show_route_all() {
        let r = parse_routes(SAMPLE);
        assert_eq!(r.len(), 3);
        assert_eq!(r[0].prefix, "198.18.0.0/24");
        assert_eq!(r[0].proto, "n_10_0_0_1");
        assert!(r[0].primary);
        assert_eq!(r[0].next_hop(), Some("10.0.0.1".parse().unwrap()));
        assert_eq!(r[0].as_path(), vec![65001, 65003]);
        assert_eq!(r[0].communities(), vec![(65001, 7), (65001, 8)]);
        assert_eq!(r[0].large_communities(), vec![(1, 2, 3)]);
        assert_eq!(r[0].originator_id(), Some(Ipv4Addr::new(10, 0, 0, 9)));
        assert_eq!(r[0].cluster_list().len(), 2);
        assert_eq!(r[0].attr("BGP.f0 [t]"), Some("01 02 03 04 05"));
        assert_eq!(r[1].prefix, "198.18.0.0/24");
        assert!(!r[1].primary);
        assert_eq!(r[1].as_path(), vec![65003]);
        assert_eq!(r[2].proto, "static4");
        assert_eq!(r[2].next_hop(), None);
    }
}
