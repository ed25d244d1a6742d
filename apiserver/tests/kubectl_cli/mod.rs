//! Running the real kubectl in tests: found on PATH, with its own
//! kubeconfig, discovery cache and HOME, each run bounded in time.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

pub fn find_kubectl() -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("kubectl"))
        .find(|p| p.is_file())
}

pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

pub struct Kubectl {
    pub bin: PathBuf,
    pub dir: PathBuf,
}

/// What one run printed.
pub struct Out {
    pub ok: bool,
    pub stdout: String,
    pub stderr: String,
}

impl Kubectl {
    pub fn command(&self, args: &[&str]) -> tokio::process::Command {
        let mut c = tokio::process::Command::new(&self.bin);
        c.arg("--kubeconfig")
            .arg(self.dir.join("kubeconfig"))
            .arg("--cache-dir")
            .arg(self.dir.join("cache"))
            .arg("--request-timeout=30s")
            .args(args)
            .env("HOME", &self.dir)
            .stdin(Stdio::null())
            .kill_on_drop(true);
        c
    }

    pub async fn run(&self, args: &[&str]) -> Out {
        let run = self.command(args).output();
        let out = tokio::time::timeout(Duration::from_secs(60), run)
            .await
            .unwrap_or_else(|_| panic!("kubectl {args:?} did not finish in 60 s"))
            .expect("run kubectl");
        Out {
            ok: out.status.success(),
            stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        }
    }

    /// A run that must succeed: its stdout lines.
    pub async fn lines(&self, args: &[&str]) -> Vec<String> {
        let o = self.run(args).await;
        assert!(o.ok, "kubectl {args:?} failed: {}{}", o.stdout, o.stderr);
        o.stdout.lines().map(str::to_string).collect()
    }
}

/// Columns of a table line.
pub fn cols(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

pub fn write(dir: &Path, name: &str, text: &str) -> String {
    let p = dir.join(name);
    std::fs::write(&p, text).unwrap();
    p.to_string_lossy().into_owned()
}

/// A folder removed when dropped, also when the test fails.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(prefix: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("{prefix}-{}", uuid::Uuid::new_v4().simple()));
        std::fs::create_dir_all(&dir).expect("create a temporary folder");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
