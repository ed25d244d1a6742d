//! A temporary directory removed by its drop guard.
use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

static COUNTER: AtomicU32 = AtomicU32::new(0);

/// Set this environment variable to keep lab directories (configs, logs)
/// after a run, for debugging.
pub const KEEP_ENV: &str = "TARTAN_LAB_KEEP";

/// `std::env::temp_dir()/tartan-lab-<prefix>-<pid>-<n>`, removed on drop
/// unless `TARTAN_LAB_KEEP` is set.
#[derive(Debug)]
pub struct TempDir {
    path: PathBuf,
}

impl TempDir {
    pub fn new(prefix: &str) -> Result<TempDir> {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("tartan-lab-{prefix}-{}-{n}", std::process::id()));
        // A leftover from an earlier process with the same pid is stale.
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).with_context(|| format!("create {}", path.display()))?;
        Ok(TempDir { path })
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    /// Writes `name` inside the directory and returns its path.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> Result<PathBuf> {
        let p = self.join(name);
        std::fs::write(&p, contents).with_context(|| format!("write {}", p.display()))?;
        Ok(p)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os(KEEP_ENV).is_some() {
            eprintln!("{KEEP_ENV}: keeping {}", self.path.display());
            return;
        }
        let _ = std::fs::remove_dir_all(&self.path);
    }
}
