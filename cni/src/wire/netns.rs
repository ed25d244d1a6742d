//! Work inside another network namespace: a netlink socket belongs to the
//! namespace its thread was in when it was opened, so the work runs on a
//! thread of its own that enters the namespace first. The caller's threads
//! never change namespace.

use std::fs::File;
use std::future::Future;
use std::os::fd::{AsRawFd, RawFd};
use std::path::Path;
use std::sync::Arc;

use super::error::WireError;

/// An open namespace file.
#[derive(Clone)]
pub struct Ns {
    file: Arc<File>,
    pub path: String,
}

impl Ns {
    pub fn fd(&self) -> RawFd {
        self.file.as_raw_fd()
    }
}

pub fn open(path: &Path) -> Result<Ns, WireError> {
    let file = File::open(path).map_err(|source| WireError::Netns {
        path: path.display().to_string(),
        source,
    })?;
    Ok(Ns {
        file: Arc::new(file),
        path: path.display().to_string(),
    })
}

/// Run `work` with a netlink handle inside `ns`.
pub async fn run_in<T, F, Fut>(ns: &Ns, work: F) -> Result<T, WireError>
where
    T: Send + 'static,
    F: FnOnce(rtnetlink::Handle) -> Fut + Send + 'static,
    Fut: Future<Output = Result<T, WireError>>,
{
    let ns = ns.clone();
    let (tx, rx) = tokio::sync::oneshot::channel();
    std::thread::Builder::new()
        .name("tartan-netns".into())
        .spawn(move || {
            let r = (|| {
                nix::sched::setns(&*ns.file, nix::sched::CloneFlags::CLONE_NEWNET).map_err(
                    |e| WireError::Netns {
                        path: ns.path.clone(),
                        source: std::io::Error::from(e),
                    },
                )?;
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| WireError::kernel("start a runtime", e))?;
                rt.block_on(async move {
                    let (conn, handle, _) = rtnetlink::new_connection()
                        .map_err(|e| WireError::kernel("open netlink", e))?;
                    let task = tokio::spawn(conn);
                    let r = work(handle).await;
                    task.abort();
                    r
                })
            })();
            let _ = tx.send(r);
        })
        .map_err(|e| WireError::kernel("start a thread", e))?;
    rx.await
        .map_err(|_| WireError::kernel("namespace worker", "stopped without an answer"))?
}

/// Write a sysctl through /proc/sys, from the calling thread's namespace.
pub fn sysctl(path: &str, value: &str) -> Result<(), WireError> {
    std::fs::write(format!("/proc/sys/{path}"), value)
        .map_err(|e| WireError::kernel(format!("sysctl {path}={value}"), e))
}
