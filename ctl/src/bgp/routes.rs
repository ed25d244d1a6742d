use crate::human::or_dash;
use crate::table::Table;
use tartan_api::bgp::{PathView, RouteEntry};

/// The routes table, one row per path; the prefix is shown on its first
/// path only. Empty when there are no routes.
pub fn render_routes(routes: &[RouteEntry], wide: bool) -> String {
    if routes.is_empty() {
        return String::new();
    }
    let mut headers = vec!["", "PREFIX", "NEXT HOP", "PEER", "MED", "LOCPRF", "AS PATH"];
    if wide {
        headers.extend(["ORIGIN", "COMMUNITIES", "LARGE COMMUNITIES", "ORIGINATOR"]);
        headers.push("CLUSTER LIST");
    }
    let mut table = Table::new(headers);
    for route in routes {
        if route.paths.is_empty() {
            table.row(["".to_string(), route.prefix.to_string()]);
        }
        for (i, path) in route.paths.iter().enumerate() {
            let prefix = if i == 0 {
                route.prefix.to_string()
            } else {
                String::new()
            };
            table.row(path_row(prefix, path, wide));
        }
    }
    table.render()
}

/// `*>` best, `*=` multipath, `*` other; `s` in front when stale.
pub fn flags(path: &PathView) -> String {
    let mark = match (path.best, path.multipath) {
        (true, _) => "*>",
        (false, true) => "*=",
        (false, false) => "*",
    };
    if path.stale {
        format!("s{mark}")
    } else {
        mark.to_string()
    }
}

fn path_row(prefix: String, p: &PathView, wide: bool) -> Vec<String> {
    let list = |v: &[String]| {
        if v.is_empty() {
            "-".to_string()
        } else {
            v.join(" ")
        }
    };
    let mut row = vec![
        flags(p),
        prefix,
        or_dash(p.next_hop),
        p.peer
            .map_or_else(|| "local".to_string(), |a| a.to_string()),
        or_dash(p.med),
        or_dash(p.local_pref),
        if p.as_path.is_empty() {
            "-".into()
        } else {
            p.as_path.clone()
        },
    ];
    if wide {
        let clusters: Vec<String> = p.cluster_list.iter().map(|c| c.to_string()).collect();
        row.extend([
            p.origin.clone(),
            list(&p.communities),
            list(&p.large_communities),
            or_dash(p.originator_id),
            list(&clusters),
        ]);
    }
    row
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path(best: bool, multipath: bool, stale: bool, nh: &str) -> PathView {
        PathView {
            best,
            multipath,
            stale,
            peer: Some(nh.parse().unwrap()),
            next_hop: Some(nh.parse().unwrap()),
            as_path: "65001".into(),
            origin: "igp".into(),
            med: None,
            local_pref: Some(100),
            communities: vec!["65000:100".into(), "no-export".into()],
            large_communities: vec![],
            originator_id: None,
            cluster_list: vec!["10.0.0.1".parse().unwrap()],
        }
    }

    fn entry(prefix: &str, paths: Vec<PathView>) -> RouteEntry {
        RouteEntry {
            prefix: prefix.parse().unwrap(),
            family: "ipv4-unicast".into(),
            paths,
        }
    }

    #[test]
    fn flags_mark_best_multipath_and_stale() {
        assert_eq!(flags(&path(true, false, false, "192.0.2.1")), "*>");
        assert_eq!(flags(&path(false, true, false, "192.0.2.1")), "*=");
        assert_eq!(flags(&path(false, false, false, "192.0.2.1")), "*");
        assert_eq!(flags(&path(true, false, true, "192.0.2.1")), "s*>");
    }

    #[test]
    fn narrow_table_shows_prefix_once() {
        let mut local = path(true, false, false, "10.0.0.1");
        local.peer = None;
        local.as_path = String::new();
        local.med = Some(0);
        let routes = [
            entry(
                "10.0.1.0/26",
                vec![
                    path(true, false, false, "192.0.2.1"),
                    path(false, true, true, "192.0.2.2"),
                ],
            ),
            entry("10.0.2.0/26", vec![local]),
        ];
        assert_eq!(
            render_routes(&routes, false),
            "      PREFIX        NEXT HOP    PEER        MED   LOCPRF   AS PATH\n\
             *>    10.0.1.0/26   192.0.2.1   192.0.2.1   -     100      65001\n\
             s*=                 192.0.2.2   192.0.2.2   -     100      65001\n\
             *>    10.0.2.0/26   10.0.0.1    local       0     100      -\n"
        );
    }

    #[test]
    fn wide_table_lists_attributes() {
        let text = render_routes(
            &[entry(
                "10.0.1.0/26",
                vec![path(true, false, false, "192.0.2.1")],
            )],
            true,
        );
        let row = text.lines().nth(1).unwrap();
        assert!(row.contains("65000:100 no-export"), "{row}");
        assert!(row.ends_with("10.0.0.1"), "{row}");
        assert!(row.contains("igp"), "{row}");
    }

    #[test]
    fn a_prefix_without_paths_still_shows() {
        assert_eq!(
            render_routes(&[entry("10.0.3.0/24", vec![])], false)
                .lines()
                .nth(1),
            Some("   10.0.3.0/24")
        );
    }
}
