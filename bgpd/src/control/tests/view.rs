use crate::control::{PathFlags, path_view};
use crate::model::{AsPath, AsSegment, NextHop, Origin, PathAttrs, well_known};
use std::net::Ipv4Addr;

#[test]
fn path_view_renders_attributes_as_text() {
    let attrs = PathAttrs {
        origin: Origin::Incomplete,
        as_path: AsPath {
            segments: vec![
                AsSegment::Sequence(vec![65001, 65002]),
                AsSegment::Set(vec![65003, 65004]),
            ],
        },
        next_hop: NextHop::V4(Ipv4Addr::new(192, 0, 2, 1)),
        med: Some(10),
        local_pref: Some(200),
        communities: vec![(65000 << 16) | 100, well_known::NO_EXPORT],
        large_communities: vec![[65000, 1, 2]],
        originator_id: Some(Ipv4Addr::new(10, 0, 0, 9)),
        cluster_list: vec![Ipv4Addr::new(10, 0, 0, 1)],
        ..PathAttrs::default()
    };
    let flags = PathFlags {
        best: true,
        ..PathFlags::default()
    };
    let v = path_view(&attrs, None, flags);
    assert!(v.best && !v.multipath && !v.stale);
    assert_eq!(v.peer, None);
    assert_eq!(v.next_hop, Some("192.0.2.1".parse().unwrap()));
    assert_eq!(v.as_path, "65001 65002 {65003 65004}");
    assert_eq!(v.origin, "incomplete");
    assert_eq!(v.communities, ["65000:100", "no-export"]);
    assert_eq!(v.large_communities, ["65000:1:2"]);
    assert_eq!(v.originator_id, Some(Ipv4Addr::new(10, 0, 0, 9)));
}
