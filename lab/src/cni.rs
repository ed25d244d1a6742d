//! A container runtime's side of CNI, as the lab plays it: run the plugins
//! of a conflist in order for ADD (each fed the previous one's result),
//! CHECK and DEL (in reverse), STATUS and GC, with the environment and
//! stdin the specification prescribes.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use anyhow::{Context, Result, anyhow, bail};
use serde_json::{Map, Value, json};

/// Where Tartan's plugins are: `TARTAN_CNI_BIN` if set, else beside the
/// running executable (target/debug, also from target/debug/deps).
pub fn tartan_bin_dir() -> PathBuf {
    if let Ok(p) = std::env::var("TARTAN_CNI_BIN") {
        return PathBuf::from(p);
    }
    let exe = std::env::current_exe().unwrap_or_default();
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    if dir.ends_with("deps") {
        dir.pop();
    }
    dir
}

/// Debian's reference plugins (containernetworking-plugins).
pub const REFERENCE_PLUGINS: &str = "/usr/lib/cni";

/// A plugin's answer: its stdout as JSON (if any) and exit status.
#[derive(Debug, Clone)]
pub struct Reply {
    pub plugin: String,
    pub success: bool,
    pub stdout: String,
    pub stderr: String,
    pub json: Value,
}

impl Reply {
    /// The CNI error code of a failed call.
    pub fn code(&self) -> Option<u64> {
        self.json.get("code").and_then(Value::as_u64)
    }

    pub fn msg(&self) -> &str {
        self.json.get("msg").and_then(Value::as_str).unwrap_or("")
    }
}

/// The call's environment besides CNI_COMMAND.
#[derive(Debug, Clone, Default)]
pub struct Call {
    pub container_id: String,
    pub netns: Option<PathBuf>,
    pub ifname: String,
    /// CNI_ARGS pairs.
    pub args: Vec<(String, String)>,
    /// Capability arguments (`portMappings`, `bandwidth`, …), passed to the
    /// plugins that declare the capability, as `runtimeConfig`.
    pub capability_args: Map<String, Value>,
}

impl Call {
    /// The call a kubelet's runtime makes for pod `namespace/name`: its
    /// sandbox the named network namespace, `eth0`, and the pod in
    /// CNI_ARGS (with IgnoreUnknown, so that plugins taking no pod
    /// arguments accept them).
    pub fn for_pod(container_id: &str, netns: &str, namespace: &str, name: &str) -> Call {
        Call {
            container_id: container_id.to_string(),
            netns: Some(format!("/run/netns/{netns}").into()),
            ifname: "eth0".into(),
            args: vec![
                ("IgnoreUnknown".into(), "1".into()),
                ("K8S_POD_NAMESPACE".into(), namespace.into()),
                ("K8S_POD_NAME".into(), name.into()),
            ],
            capability_args: Default::default(),
        }
    }
}

/// Run one plugin binary once. `env` overrides or removes (`None`)
/// variables; the rest of the environment is the caller's.
/// `netns`: the named namespace to run it in (a node), or the caller's.
pub fn exec(
    binary: &Path,
    netns: Option<&str>,
    env: &[(&str, Option<String>)],
    stdin: &[u8],
) -> Result<Reply> {
    let mut cmd = match netns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(binary);
            c
        }
        None => Command::new(binary),
    };
    for (k, v) in env {
        match v {
            Some(v) => cmd.env(k, v),
            None => cmd.env_remove(k),
        };
    }
    cmd.stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .with_context(|| format!("cannot run {}", binary.display()))?;
    if let Some(mut i) = child.stdin.take() {
        // A plugin may exit before reading (VERSION); a broken pipe is fine.
        let _ = i.write_all(stdin);
    }
    let out = child.wait_with_output()?;
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let json = if stdout.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(stdout.trim()).unwrap_or(Value::Null)
    };
    Ok(Reply {
        plugin: binary.display().to_string(),
        success: out.status.success(),
        stdout,
        stderr: String::from_utf8_lossy(&out.stderr).to_string(),
        json,
    })
}

/// A network configuration list and where its plugins are.
#[derive(Debug, Clone)]
pub struct Runtime {
    pub conflist: Value,
    pub path: Vec<PathBuf>,
    /// The node namespace the plugins run in (`None`: the caller's).
    pub netns: Option<String>,
    /// Extra environment for the plugins (e.g. PATH).
    pub env: Vec<(String, String)>,
}

impl Runtime {
    /// `conflist` with plugins looked up in Tartan's build directory, then
    /// the reference plugins.
    pub fn new(conflist: Value) -> Self {
        Runtime {
            conflist,
            path: vec![tartan_bin_dir(), PathBuf::from(REFERENCE_PLUGINS)],
            netns: None,
            env: vec![],
        }
    }

    /// The same, with the plugins run inside the namespace `name`.
    pub fn in_netns(mut self, name: &str) -> Self {
        self.netns = Some(name.to_string());
        self
    }

    fn plugins(&self) -> Result<Vec<Value>> {
        Ok(self
            .conflist
            .get("plugins")
            .and_then(Value::as_array)
            .ok_or_else(|| anyhow!("conflist has no plugins"))?
            .clone())
    }

    fn find(&self, plugin_type: &str) -> Result<PathBuf> {
        self.path
            .iter()
            .map(|d| d.join(plugin_type))
            .find(|p| p.is_file())
            .ok_or_else(|| {
                anyhow!(
                    "plugin {plugin_type} not found in {:?} (Tartan's are built by `cargo build --workspace`)",
                    self.path
                )
            })
    }

    /// The stdin of one plugin: its entry with the list's name and version,
    /// prevResult, and the capability arguments it declares.
    fn config_for(&self, plugin: &Value, call: &Call, prev: Option<&Value>) -> Value {
        let mut c = plugin.as_object().cloned().unwrap_or_default();
        for k in ["name", "cniVersion"] {
            if let Some(v) = self.conflist.get(k) {
                c.insert(k.into(), v.clone());
            }
        }
        if let Some(p) = prev {
            c.insert("prevResult".into(), p.clone());
        }
        let caps: Map<String, Value> = plugin
            .get("capabilities")
            .and_then(Value::as_object)
            .map(|caps| {
                caps.iter()
                    .filter(|(_, on)| on.as_bool() == Some(true))
                    .filter_map(|(k, _)| Some((k.clone(), call.capability_args.get(k)?.clone())))
                    .collect()
            })
            .unwrap_or_default();
        if !caps.is_empty() {
            c.insert("runtimeConfig".into(), Value::Object(caps));
        }
        Value::Object(c)
    }

    fn env(&self, command: &str, call: &Call) -> Vec<(&str, Option<String>)> {
        let path = std::env::join_paths(&self.path)
            .map(|p| p.to_string_lossy().to_string())
            .unwrap_or_default();
        let args: Vec<String> = call.args.iter().map(|(k, v)| format!("{k}={v}")).collect();
        let mut env: Vec<(&str, Option<String>)> = self
            .env
            .iter()
            .map(|(k, v)| (k.as_str(), Some(v.clone())))
            .collect();
        env.extend([
            ("CNI_COMMAND", Some(command.to_string())),
            (
                "CNI_CONTAINERID",
                Some(call.container_id.clone()).filter(|s| !s.is_empty()),
            ),
            (
                "CNI_NETNS",
                call.netns.as_ref().map(|p| p.display().to_string()),
            ),
            (
                "CNI_IFNAME",
                Some(call.ifname.clone()).filter(|s| !s.is_empty()),
            ),
            ("CNI_ARGS", Some(args.join(";")).filter(|s| !s.is_empty())),
            ("CNI_PATH", Some(path)),
        ]);
        env
    }

    fn run(&self, command: &str, plugin: &Value, call: &Call, stdin: &Value) -> Result<Reply> {
        let t = plugin
            .get("type")
            .and_then(Value::as_str)
            .ok_or_else(|| anyhow!("plugin entry without type: {plugin}"))?;
        let bin = self.find(t)?;
        let reply = exec(
            &bin,
            self.netns.as_deref(),
            &self.env(command, call),
            stdin.to_string().as_bytes(),
        )?;
        if !reply.success {
            bail!(
                "{command} {t} failed (code {:?}): {} {}{}",
                reply.code(),
                reply.msg(),
                reply
                    .json
                    .get("details")
                    .and_then(Value::as_str)
                    .unwrap_or(""),
                if reply.stderr.is_empty() {
                    String::new()
                } else {
                    format!("; stderr: {}", reply.stderr.trim())
                }
            );
        }
        Ok(reply)
    }

    /// ADD through the chain; the last plugin's result.
    pub fn add(&self, call: &Call) -> Result<Value> {
        let mut prev: Option<Value> = None;
        for p in self.plugins()? {
            let stdin = self.config_for(&p, call, prev.as_ref());
            let r = self.run("ADD", &p, call, &stdin)?;
            if !r.json.is_null() {
                prev = Some(r.json);
            }
        }
        prev.ok_or_else(|| anyhow!("the chain returned no result"))
    }

    /// CHECK through the chain with the cached result.
    pub fn check(&self, call: &Call, result: &Value) -> Result<()> {
        for p in self.plugins()? {
            let stdin = self.config_for(&p, call, Some(result));
            self.run("CHECK", &p, call, &stdin)?;
        }
        Ok(())
    }

    /// DEL through the chain in reverse, with the cached result if any.
    pub fn del(&self, call: &Call, result: Option<&Value>) -> Result<()> {
        for p in self.plugins()?.iter().rev() {
            let stdin = self.config_for(p, call, result);
            self.run("DEL", p, call, &stdin)?;
        }
        Ok(())
    }

    /// STATUS of every plugin (CNI 1.1).
    pub fn status(&self) -> Result<()> {
        for p in self.plugins()? {
            let stdin = self.config_for(&p, &Call::default(), None);
            self.run("STATUS", &p, &Call::default(), &stdin)?;
        }
        Ok(())
    }

    /// GC with the attachments still held (CNI 1.1).
    pub fn gc(&self, valid: &[(String, String)]) -> Result<()> {
        let list: Vec<Value> = valid
            .iter()
            .map(|(c, i)| json!({"containerID": c, "ifname": i}))
            .collect();
        for p in self.plugins()? {
            let mut stdin = self.config_for(&p, &Call::default(), None);
            if let Some(o) = stdin.as_object_mut() {
                o.insert(
                    "cni.dev/valid-attachments".into(),
                    Value::Array(list.clone()),
                );
            }
            self.run("GC", &p, &Call::default(), &stdin)?;
        }
        Ok(())
    }
}
