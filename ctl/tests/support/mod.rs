//! What the tests that run the built `tartanctl` share: a `tartanctl`
//! pointed at one datastore, and what a run printed.
// Each test file uses a different part of this module.
#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Command, Output, Stdio};

use serde_json::Value;
use tartan_lab::TempDir;
use tartan_lab::etcd::EtcdCluster;

/// `tartanctl` pointed at one datastore, with a directory for its files.
pub struct Ctl {
    pub datastore: String,
    pub dir: TempDir,
}

/// What a run printed and how it ended.
pub struct Run {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    pub fn from(out: Output) -> Run {
        Run {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// Succeeded; its stdout.
    #[track_caller]
    pub fn out(&self) -> &str {
        assert!(self.ok, "expected success:\n{}{}", self.stdout, self.stderr);
        &self.stdout
    }

    /// Failed; its stderr.
    #[track_caller]
    pub fn err(&self) -> &str {
        assert!(
            !self.ok,
            "expected failure:\n{}{}",
            self.stdout, self.stderr
        );
        &self.stderr
    }
}

pub fn tartanctl() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_tartanctl"));
    c.env_remove("TARTAN_DATASTORE")
        .env_remove("TARTAN_TIMEOUT")
        .stdin(Stdio::null());
    c
}

impl Ctl {
    pub fn new(datastore: String) -> Ctl {
        Ctl {
            datastore,
            dir: TempDir::new("ctl").expect("temp dir"),
        }
    }

    pub fn etcd(etcd: &EtcdCluster) -> Ctl {
        Ctl::new(etcd.datastore_spec())
    }

    pub fn run(&self, args: &[&str]) -> Run {
        let out = tartanctl()
            .arg("--datastore")
            .arg(&self.datastore)
            .args(args)
            .output()
            .expect("run tartanctl");
        Run::from(out)
    }

    /// Runs with `text` on stdin.
    pub fn run_stdin(&self, args: &[&str], text: &str) -> Run {
        use std::io::Write;
        let mut child = tartanctl()
            .arg("--datastore")
            .arg(&self.datastore)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run tartanctl");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(text.as_bytes())
            .expect("write stdin");
        Run::from(child.wait_with_output().expect("wait"))
    }

    pub fn file(&self, name: &str, text: &str) -> String {
        let p: PathBuf = self.dir.write(name, text).expect("write file");
        p.display().to_string()
    }

    pub fn json(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "json"]);
        let r = self.run(&a);
        serde_json::from_str(r.out()).expect("get -o json prints JSON")
    }

    pub fn yaml(&self, args: &[&str]) -> Value {
        let mut a = args.to_vec();
        a.extend(["-o", "yaml"]);
        let r = self.run(&a);
        serde_saphyr::from_str(r.out()).expect("get -o yaml prints YAML")
    }

    /// The names `get KIND -o json` lists (all namespaces).
    pub fn names(&self, kind: &str) -> Vec<String> {
        let list = self.json(&["get", kind, "-A"]);
        list["items"]
            .as_array()
            .expect("a List")
            .iter()
            .map(|o| o["metadata"]["name"].as_str().unwrap_or("?").to_string())
            .collect()
    }
}
