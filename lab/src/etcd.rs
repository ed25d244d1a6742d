//! Real etcd servers on loopback for tests, the lab and benchmarks: one
//! member or a three-member cluster, each with its own ports and data
//! directory; members can be killed, stopped and started again with their
//! data. Everything is stopped and removed when the guard is dropped.

use std::io::{Read, Write};
use std::net::{IpAddr, Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nix::sys::signal::Signal;

use crate::process::Daemon;
use crate::tempdir::TempDir;

/// The etcd binary (Debian's etcd-server), overridable for other installs.
pub fn etcd_binary() -> String {
    std::env::var("TARTAN_ETCD").unwrap_or_else(|_| "/usr/bin/etcd".to_string())
}

struct Member {
    name: String,
    client: SocketAddr,
    peer: SocketAddr,
    daemon: Option<Daemon>,
}

/// A running etcd cluster on 127.0.0.1.
pub struct EtcdCluster {
    members: Vec<Member>,
    token: String,
    data: TempDir,
}

/// A port nobody listens on right now (the OS's choice).
fn free_port(host: IpAddr) -> Result<SocketAddr> {
    let l = TcpListener::bind((host, 0)).context("find a free port")?;
    Ok(l.local_addr()?)
}

impl EtcdCluster {
    pub fn single() -> Result<Self> {
        Self::start_cluster(1, Ipv4Addr::LOCALHOST.into())
    }

    /// One member listening on `host` (an address of a root-namespace
    /// interface, e.g. an underlay bridge, that node namespaces reach).
    pub fn single_on(host: IpAddr) -> Result<Self> {
        Self::start_cluster(1, host)
    }

    pub fn three() -> Result<Self> {
        Self::start_cluster(3, Ipv4Addr::LOCALHOST.into())
    }

    fn start_cluster(n: usize, host: IpAddr) -> Result<Self> {
        // A port found free can be taken by another process before etcd
        // binds it (tests start many etcds at once): then try new ports.
        let mut last = None;
        for _ in 0..4 {
            match Self::try_start(n, host) {
                Ok(c) => return Ok(c),
                Err(e) if format!("{e:#}").contains("address already in use") => last = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last.unwrap_or_else(|| anyhow::anyhow!("etcd did not start")))
    }

    fn try_start(n: usize, host: IpAddr) -> Result<Self> {
        let data = TempDir::new("etcd")?;
        let token = format!(
            "tartan-{}-{}",
            std::process::id(),
            data.path().display().to_string().len()
        );
        let mut taken = std::collections::HashSet::new();
        let mut port = || -> Result<SocketAddr> {
            loop {
                let p = free_port(host)?;
                if taken.insert(p) {
                    return Ok(p);
                }
            }
        };
        let mut members = Vec::new();
        for i in 0..n {
            members.push(Member {
                name: format!("m{i}"),
                client: port()?,
                peer: port()?,
                daemon: None,
            });
        }
        let mut cluster = EtcdCluster {
            members,
            token,
            data,
        };
        for i in 0..n {
            cluster.spawn(i)?;
        }
        for i in 0..n {
            cluster.wait_healthy(i, Duration::from_secs(30))?;
        }
        Ok(cluster)
    }

    fn spawn(&mut self, i: usize) -> Result<()> {
        let initial: Vec<String> = self
            .members
            .iter()
            .map(|m| format!("{}=http://{}", m.name, m.peer))
            .collect();
        let m = &self.members[i];
        let dir = self.data.join(&m.name);
        let mut cmd = Command::new(etcd_binary());
        cmd.args(["--name", &m.name])
            .arg("--data-dir")
            .arg(&dir)
            .args(["--listen-client-urls", &format!("http://{}", m.client)])
            .args(["--advertise-client-urls", &format!("http://{}", m.client)])
            .args(["--listen-peer-urls", &format!("http://{}", m.peer)])
            .args([
                "--initial-advertise-peer-urls",
                &format!("http://{}", m.peer),
            ])
            .args(["--initial-cluster", &initial.join(",")])
            .args(["--initial-cluster-token", &self.token])
            .args(["--initial-cluster-state", "new"])
            // Short election timings: a killed member is noticed quickly.
            .args(["--heartbeat-interval", "50", "--election-timeout", "500"])
            .args(["--log-level", "warn"]);
        let name = format!("etcd-{}", m.name);
        let daemon = Daemon::start(&name, cmd)?;
        self.members[i].daemon = Some(daemon);
        Ok(())
    }

    /// Client endpoints, `127.0.0.1:PORT` each, in member order.
    pub fn client_endpoints(&self) -> Vec<String> {
        self.members.iter().map(|m| m.client.to_string()).collect()
    }

    /// `etcd://a,b,c` for `--datastore`.
    pub fn datastore_spec(&self) -> String {
        format!("etcd://{}", self.client_endpoints().join(","))
    }

    pub fn len(&self) -> usize {
        self.members.len()
    }

    pub fn is_empty(&self) -> bool {
        self.members.is_empty()
    }

    /// SIGKILL one member; its data stays for `start`.
    pub fn kill(&mut self, i: usize) -> Result<()> {
        let d = self
            .members
            .get_mut(i)
            .and_then(|m| m.daemon.take())
            .context("no such running member")?;
        d.kill(Signal::SIGKILL)?;
        drop(d);
        Ok(())
    }

    /// Stop one member cleanly; its data stays for `start`.
    pub fn stop(&mut self, i: usize) -> Result<()> {
        let d = self
            .members
            .get_mut(i)
            .and_then(|m| m.daemon.take())
            .context("no such running member")?;
        d.stop();
        Ok(())
    }

    /// Start a stopped member again on its old ports and data, and wait
    /// until it is healthy.
    pub fn start(&mut self, i: usize) -> Result<()> {
        if i >= self.members.len() {
            bail!("no member {i}");
        }
        if self.members[i].daemon.is_some() {
            bail!("member {i} is running");
        }
        self.spawn(i)?;
        self.wait_healthy(i, Duration::from_secs(30))
    }

    /// The type of the filesystem that holds the members' data (`tmpfs`,
    /// `ext4`, ...): the directory is made under the temporary directory,
    /// `TMPDIR` if set, and a write's latency is mostly etcd's fsync there.
    pub fn data_filesystem(&self) -> String {
        crate::mounts::filesystem_here(self.data.path())
    }

    /// The process id of member `i`, while it runs.
    pub fn pid(&self, i: usize) -> Option<u32> {
        self.members
            .get(i)
            .and_then(|m| m.daemon.as_ref())
            .map(Daemon::pid)
    }

    pub fn is_running(&self, i: usize) -> bool {
        self.members
            .get(i)
            .and_then(|m| m.daemon.as_ref())
            .is_some_and(|d| d.is_running())
    }

    /// Compact the store's history up to `revision` (inclusive of older
    /// ones): watches from before it then fail as compacted.
    pub fn compact(&self, revision: i64) -> Result<()> {
        let addr = self.running_member()?;
        post_json(
            addr,
            "/v3/kv/compaction",
            &format!("{{\"revision\":\"{revision}\",\"physical\":true}}"),
        )
        .context("compact")?;
        Ok(())
    }

    /// Write `value` under `key` as it is, past every check Tartan makes on
    /// a write: what another tool (or an older version) could leave there.
    pub fn put_raw(&self, key: &str, value: &[u8]) -> Result<()> {
        let addr = self.running_member()?;
        post_json(
            addr,
            "/v3/kv/put",
            &format!(
                "{{\"key\":\"{}\",\"value\":\"{}\"}}",
                base64(key.as_bytes()),
                base64(value)
            ),
        )
        .with_context(|| format!("put {key}"))?;
        Ok(())
    }

    /// The current revision of the store.
    pub fn revision(&self) -> Result<i64> {
        let v = self.status(self.running_member()?)?;
        v.pointer("/header/revision")
            .and_then(as_i64)
            .context("no revision in etcd status")
    }

    /// The index of the member that leads the cluster now.
    pub fn leader(&self) -> Result<usize> {
        for (i, m) in self.members.iter().enumerate() {
            if m.daemon.is_none() {
                continue;
            }
            let v = self.status(m.client)?;
            let me = v.pointer("/header/member_id").and_then(as_u64);
            let leader = v.get("leader").and_then(as_u64);
            if me.is_some() && me == leader {
                return Ok(i);
            }
        }
        bail!("no running member says it is the leader")
    }

    fn status(&self, addr: SocketAddr) -> Result<serde_json::Value> {
        post_json(addr, "/v3/maintenance/status", "{}").context("etcd status")
    }

    /// How many calls of gRPC `method` (`Range`, `Txn`, …) the first
    /// running member has answered, from its `/metrics`.
    pub fn handled(&self, method: &str) -> Result<u64> {
        let (code, text) = exchange(self.running_member()?, "GET", "/metrics", "")?;
        if code != 200 {
            bail!("/metrics: HTTP {code}");
        }
        let label = format!("grpc_method=\"{method}\"");
        Ok(text
            .lines()
            .filter(|l| l.starts_with("grpc_server_handled_total{") && l.contains(&label))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64)
    }

    fn running_member(&self) -> Result<SocketAddr> {
        self.members
            .iter()
            .find(|m| m.daemon.is_some())
            .map(|m| m.client)
            .context("no etcd member is running")
    }

    /// Wait until member `i` answers `/health` with true.
    pub fn wait_healthy(&self, i: usize, limit: Duration) -> Result<()> {
        let m = &self.members[i];
        let deadline = Instant::now() + limit;
        loop {
            if health(m.client).unwrap_or(false) {
                return Ok(());
            }
            if let Some(d) = &m.daemon
                && !d.is_running()
            {
                bail!("etcd {} exited:\n{}", m.name, d.log_tail(20));
            }
            if Instant::now() > deadline {
                let log = m
                    .daemon
                    .as_ref()
                    .map(|d| d.log_tail(20))
                    .unwrap_or_default();
                bail!("etcd {} not healthy after {limit:?}:\n{log}", m.name);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// GET /health on a client port.
fn health(addr: SocketAddr) -> Result<bool> {
    let (code, body) = exchange(addr, "GET", "/health", "")?;
    Ok(code == 200 && body.contains("\"true\""))
}

/// The gRPC gateway renders 64-bit numbers as strings.
fn as_i64(v: &serde_json::Value) -> Option<i64> {
    v.as_i64().or_else(|| v.as_str()?.parse().ok())
}

fn as_u64(v: &serde_json::Value) -> Option<u64> {
    v.as_u64().or_else(|| v.as_str()?.parse().ok())
}

/// Standard base64 with padding, as etcd's JSON gateway takes bytes.
fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// POST a JSON body to etcd's HTTP gateway and return the JSON answer.
fn post_json(addr: SocketAddr, path: &str, body: &str) -> Result<serde_json::Value> {
    let (code, payload) = exchange(addr, "POST", path, body)?;
    if code != 200 {
        bail!("{path}: HTTP {code}: {payload}");
    }
    serde_json::from_str(&payload).with_context(|| format!("{path}: not JSON: {payload}"))
}

/// One HTTP/1.0 request to a client port: the status code and the body.
fn exchange(addr: SocketAddr, method: &str, path: &str, body: &str) -> Result<(u16, String)> {
    let mut s = TcpStream::connect_timeout(&addr, Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(
        s,
        "{method} {path} HTTP/1.0\r\nHost: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )?;
    let mut answer = String::new();
    s.read_to_string(&mut answer)?;
    let (head, payload) = answer.split_once("\r\n\r\n").context("no HTTP answer")?;
    let code = head
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .with_context(|| format!("no status in {head:?}"))?;
    Ok((code, payload.to_string()))
}

impl Drop for EtcdCluster {
    fn drop(&mut self) {
        // Daemons stop in their own drops; the data directory goes last.
        for m in &mut self.members {
            m.daemon.take();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::base64;

    #[test]
    fn base64_pads_as_the_standard_says() {
        assert_eq!(base64(b""), "");
        assert_eq!(base64(b"f"), "Zg==");
        assert_eq!(base64(b"fo"), "Zm8=");
        assert_eq!(base64(b"foo"), "Zm9v");
        assert_eq!(base64(b"/tartan/x"), "L3RhcnRhbi94");
        assert_eq!(base64(&[0xff, 0xfe]), "//4=");
    }
}
