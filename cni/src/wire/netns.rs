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

/// Open the namespace file at `path`. A file that is not a network
/// namespace (a stale bind mount point, a directory) is
/// [`WireError::NotNetns`]; so is the plugin's own namespace, which is
/// never a pod's.
pub fn open(path: &Path) -> Result<Ns, WireError> {
    let file = File::open(path).map_err(|source| WireError::Netns {
        path: path.display().to_string(),
        source,
    })?;
    let not = |why: &str| WireError::NotNetns {
        path: path.display().to_string(),
        why: why.to_string(),
    };
    // NS_GET_NSTYPE (_IO(0xb7, 0x3)): the kind of namespace an nsfs file
    // is; any other file refuses the request.
    const NS_GET_NSTYPE: libc::c_ulong = 0xb703;
    // SAFETY: an ioctl without an argument on a file descriptor we own.
    let kind = unsafe { libc::ioctl(file.as_raw_fd(), NS_GET_NSTYPE as _) };
    if kind != libc::CLONE_NEWNET {
        return Err(not("not a network namespace"));
    }
    // The calling thread's namespace: the node's, where the plugin runs.
    if same_file(&file, Path::new("/proc/thread-self/ns/net")) {
        return Err(not("the plugin's own network namespace, not a pod's"));
    }
    Ok(Ns {
        file: Arc::new(file),
        path: path.display().to_string(),
    })
}

/// Whether `file` is the file at `other` (device and inode).
fn same_file(file: &File, other: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (file.metadata(), std::fs::metadata(other)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
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
