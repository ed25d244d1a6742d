//! What goes over the wire, counted with nftables in a namespace: VXLAN
//! packets (UDP 4789) and plain packets addressed to a pod range. Tests
//! read the counters before and after some traffic. The table lives in the
//! namespace and goes with it.

use std::io::Write;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};

pub struct WireCounters {
    netns: String,
}

/// Packets seen: encapsulated, and plain to the pod range.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Seen {
    pub vxlan: u64,
    pub plain: u64,
}

impl std::ops::Sub for Seen {
    type Output = Seen;
    fn sub(self, o: Seen) -> Seen {
        Seen {
            vxlan: self.vxlan.saturating_sub(o.vxlan),
            plain: self.plain.saturating_sub(o.plain),
        }
    }
}

fn nft(netns: &str, args: &[&str], stdin: Option<&str>) -> Result<String> {
    let mut child = Command::new("ip")
        .args(["netns", "exec", netns, "nft"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("run nft")?;
    if let Some(s) = stdin {
        child
            .stdin
            .take()
            .context("nft stdin")?
            .write_all(s.as_bytes())?;
    }
    drop(child.stdin.take());
    let out = child.wait_with_output()?;
    if !out.status.success() {
        bail!(
            "nft {args:?} in {netns}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl WireCounters {
    /// Count at `hook` (`postrouting` on a node, `forward` in a router),
    /// only packets leaving through `oif` when given, addressed to `pods`
    /// (a CIDR) for the plain count.
    pub fn install(netns: &str, hook: &str, oif: Option<&str>, pods: &str) -> Result<Self> {
        let m = oif.map(|o| format!("oifname \"{o}\" ")).unwrap_or_default();
        let rules = format!(
            "table inet tartan-wire {{
  counter vxlan {{}}
  counter plain {{}}
  chain count {{
    type filter hook {hook} priority 0; policy accept;
    {m}udp dport 4789 counter name vxlan
    {m}ip daddr {pods} counter name plain
  }}
}}"
        );
        nft(netns, &["-f", "-"], Some(&rules))?;
        Ok(WireCounters {
            netns: netns.to_string(),
        })
    }

    pub fn read(&self) -> Result<Seen> {
        let get = |name: &str| -> Result<u64> {
            let out = nft(
                &self.netns,
                &["list", "counter", "inet", "tartan-wire", name],
                None,
            )?;
            out.split_whitespace()
                .skip_while(|w| *w != "packets")
                .nth(1)
                .and_then(|n| n.parse().ok())
                .with_context(|| format!("no packet count in {out}"))
        };
        Ok(Seen {
            vxlan: get("vxlan")?,
            plain: get("plain")?,
        })
    }
}
