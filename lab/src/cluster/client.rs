//! Driving the `tartan-lab` binary as a user would, for tests: each call
//! names the lab, and the lab goes down when the handle is dropped (also
//! when a test fails).

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

pub struct LabCli {
    pub bin: PathBuf,
    pub name: String,
}

impl LabCli {
    /// `prefix` and this process's id name the lab (at most 10 characters).
    pub fn new(bin: &str, prefix: &str) -> LabCli {
        let id = std::process::id() % 10_000_000;
        LabCli {
            bin: bin.into(),
            name: format!("{}{id}", &prefix[..prefix.len().min(3)]),
        }
    }

    pub fn cmd(&self) -> Command {
        let mut c = Command::new(&self.bin);
        c.arg("--name").arg(&self.name);
        c
    }

    /// Exit code, stdout, stderr.
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        match self.cmd().args(args).output() {
            Ok(out) => (
                out.status.code().unwrap_or(-1),
                String::from_utf8_lossy(&out.stdout).into_owned(),
                String::from_utf8_lossy(&out.stderr).into_owned(),
            ),
            Err(e) => (-1, String::new(), e.to_string()),
        }
    }

    /// Stdout of a call that must succeed.
    #[track_caller]
    pub fn ok(&self, args: &[&str]) -> String {
        let (code, out, err) = self.run(args);
        assert_eq!(code, 0, "tartan-lab {args:?}:\n{out}{err}");
        out
    }

    /// A call left running, its output piped.
    pub fn spawn(&self, args: &[&str]) -> std::io::Result<Child> {
        self.cmd()
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
    }

    /// Whether pod `from` reaches pod `to` with one ping.
    pub fn reach(&self, from: &str, to: &str) -> bool {
        let ip = self.ok(&["pod", "ip", to]).trim().to_string();
        self.run(&["exec", from, "--", "ping", "-c1", "-W2", &ip]).0 == 0
    }

    /// Whether pod `from` reaches pod `to`'s IPv6 address with one ping.
    pub fn reach6(&self, from: &str, to: &str) -> bool {
        let ip = self.ok(&["pod", "ip", "-6", to]).trim().to_string();
        self.run(&["exec", from, "--", "ping", "-c1", "-W2", &ip]).0 == 0
    }
}

impl LabCli {
    /// Whether `from` reaches `to` within `timeout` (a new pod's block
    /// takes a moment to reach the other nodes).
    pub fn wait_reach(&self, from: &str, to: &str, timeout: std::time::Duration) -> bool {
        let end = std::time::Instant::now() + timeout;
        loop {
            if self.reach(from, to) {
                return true;
            }
            if std::time::Instant::now() > end {
                return false;
            }
            std::thread::sleep(std::time::Duration::from_millis(200));
        }
    }

    /// Established BGP sessions per node, from `status -o json`.
    pub fn sessions(&self) -> Vec<u64> {
        let status: serde_json::Value =
            serde_json::from_str(&self.ok(&["status", "-o", "json"])).unwrap_or_default();
        status["nodes"]
            .as_array()
            .map(|nodes| {
                nodes
                    .iter()
                    .map(|n| n["bgpSessionsEstablished"].as_u64().unwrap_or(0))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Pod `pods[i]` on node-(i+1), then the pairs still unreachable after
    /// `tries` rounds (empty: all reach all).
    pub fn pods_on_nodes_reach_all(&self, pods: &[&str], tries: usize) -> Vec<(String, String)> {
        for (i, p) in pods.iter().enumerate() {
            self.ok(&["pod", "add", p, "--node", &format!("node-{}", i + 1)]);
        }
        self.wait_all(pods, tries)
    }

    /// The pairs of `pods` still unreachable after `tries` rounds.
    pub fn wait_all(&self, pods: &[&str], tries: usize) -> Vec<(String, String)> {
        let mut bad = Vec::new();
        for _ in 0..tries.max(1) {
            bad = self.all_pairs(pods);
            if bad.is_empty() {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(400));
        }
        bad
    }

    /// The ordered pairs of `pods` where the first does not reach the
    /// second.
    pub fn all_pairs(&self, pods: &[&str]) -> Vec<(String, String)> {
        let mut bad = Vec::new();
        for a in pods {
            for b in pods.iter().filter(|b| *b != a) {
                if !self.reach(a, b) {
                    bad.push((a.to_string(), b.to_string()));
                }
            }
        }
        bad
    }
}

impl Drop for LabCli {
    fn drop(&mut self) {
        let _ = self.run(&["down"]);
    }
}
