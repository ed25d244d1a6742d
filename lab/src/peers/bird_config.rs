//! BIRD 2's configuration rendered from the shared model: one `protocol
//! bgp` per neighbor (named by [`protocol_name`]), static blackholes for
//! originated routes, and the kernel export when asked.

use std::fmt::Write;
use std::net::IpAddr;

use super::config::{BgpConfig, Neighbor, Route};

/// The name of the `protocol bgp` for a neighbor address.
pub fn protocol_name(addr: IpAddr) -> String {
    let s: String = addr
        .to_string()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("n_{s}")
}

/// The generated bird.conf.
pub fn render(c: &BgpConfig) -> String {
    let mut s = String::new();
    let kexport = if c.kernel {
        "where source = RTS_BGP"
    } else {
        "none"
    };
    // `learn` imports routes others put in the kernel (static routes to
    // multihop peers) so recursive next hops resolve.
    let _ = write!(
        s,
        "log stderr all;\nrouter id {};\n\
         protocol device {{ scan time 2; }}\n\
         protocol direct {{ ipv4; ipv6; }}\n\
         protocol kernel kernel4 {{ learn; scan time 2; merge paths on;\n  \
           ipv4 {{ import all; export {kexport}; }};\n}}\n\
         protocol kernel kernel6 {{ learn; scan time 2; merge paths on;\n  \
           ipv6 {{ import all; export {kexport}; }};\n}}\n",
        c.router_id
    );
    for (name, v6) in [("static4", false), ("static6", true)] {
        let routes: Vec<&Route> = c.routes.iter().filter(|r| r.is_ipv6() == v6).collect();
        if routes.is_empty() {
            continue;
        }
        let chan = if v6 { "ipv6" } else { "ipv4" };
        let _ = writeln!(s, "protocol static {name} {{\n  {chan} {{ import filter {{");
        for r in &routes {
            if r.communities.is_empty() && r.large_communities.is_empty() {
                continue;
            }
            let _ = write!(s, "    if net = {} then {{", r.prefix);
            for (a, v) in &r.communities {
                let _ = write!(s, " bgp_community.add(({a},{v}));");
            }
            for (a, b, x) in &r.large_communities {
                let _ = write!(s, " bgp_large_community.add(({a},{b},{x}));");
            }
            s.push_str(" }\n");
        }
        s.push_str("    accept;\n  }; };\n");
        for r in &routes {
            let _ = writeln!(s, "  route {} blackhole;", r.prefix);
        }
        s.push_str("}\n");
    }
    // BFD: one `protocol bfd` whose timers (those of the first neighbor
    // with BFD) apply on every interface and to multihop sessions (which
    // BIRD's BGP asks for with a `multihop` neighbor); `bfd on` in each
    // such session.
    if let Some(b) = c.neighbors.iter().find_map(|n| n.bfd) {
        let timers = format!(
            "min rx interval {} ms; min tx interval {} ms; multiplier {};",
            b.min_rx_ms, b.min_tx_ms, b.multiplier
        );
        let _ = writeln!(
            s,
            "protocol bfd {{\n  interface \"*\" {{ {timers} }};\n  multihop {{ {timers} }};\n}}"
        );
    }
    for n in &c.neighbors {
        render_neighbor(&mut s, c, n);
    }
    s.push_str(&c.extra);
    s
}

fn render_neighbor(s: &mut String, c: &BgpConfig, n: &Neighbor) {
    let _ = writeln!(s, "protocol bgp {} {{", protocol_name(n.address));
    match n.local_address.or(c.listen) {
        Some(a) => {
            let _ = writeln!(s, "  local {a} as {};", c.local_as);
        }
        None => {
            let _ = writeln!(s, "  local as {};", c.local_as);
        }
    }
    let _ = writeln!(s, "  neighbor {} as {};", n.address, n.remote_as);
    // BIRD's defaults (5 s connect delay, long error waits) slow tests.
    s.push_str("  connect delay time 1;\n  connect retry time 3;\n  error wait time 1, 10;\n");
    if n.passive {
        s.push_str("  passive on;\n");
    }
    if let Some(p) = &n.password {
        let _ = writeln!(s, "  password \"{p}\";");
    }
    if let Some(ttl) = n.multihop {
        let _ = writeln!(s, "  multihop {ttl};");
    }
    if n.rr_client {
        s.push_str("  rr client;\n");
        if let Some(id) = c.cluster_id {
            let _ = writeln!(s, "  rr cluster id {id};");
        }
    }
    match n.graceful_restart {
        Some(t) => {
            let _ = writeln!(s, "  graceful restart on;\n  graceful restart time {t};");
        }
        None => s.push_str("  graceful restart off;\n"),
    }
    if n.bfd.is_some() {
        s.push_str("  bfd on;\n");
    }
    let nhs = if n.next_hop_self {
        " next hop self;"
    } else {
        ""
    };
    let export = "import all; export where source ~ [RTS_STATIC, RTS_BGP];";
    if n.ipv4 {
        // IPv4 over an IPv6 session needs RFC 8950 next hops.
        let ext = if n.address.is_ipv6() {
            " extended next hop on;"
        } else {
            ""
        };
        let _ = writeln!(s, "  ipv4 {{ {export}{nhs}{ext} }};");
    }
    if n.ipv6 {
        let _ = writeln!(s, "  ipv6 {{ {export}{nhs} }};");
    }
    s.push_str("}\n");
}
