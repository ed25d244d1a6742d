//! Reading felix's HTTP endpoint (metrics, health) on 127.0.0.1:9099
//! inside a node's namespace.

use std::io::{Read, Write};
use std::time::Duration;

use tartan_lab::netns::Netns;

/// felix's answer to `GET path` in `ns`, headers included; empty when it
/// does not answer. (HTTP/1.0 with the request written whole, from a
/// thread in the namespace: a client that half-closes after its request,
/// as `socat -` does, may get no answer from the server.)
pub fn felix_http_get(ns: &Netns, path: &str) -> String {
    std::thread::scope(|s| {
        s.spawn(|| {
            ns.enter_current_thread().ok()?;
            let mut c = std::net::TcpStream::connect("127.0.0.1:9099").ok()?;
            c.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
            write!(c, "GET {path} HTTP/1.0\r\n\r\n").ok()?;
            let mut out = String::new();
            c.read_to_string(&mut out).ok()?;
            Some(out)
        })
        .join()
        .ok()
        .flatten()
        .unwrap_or_default()
    })
}
