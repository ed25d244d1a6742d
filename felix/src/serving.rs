//! A thread of its own for what must answer while felix's loop works: the
//! health endpoints, the proxy's health, the health-check node ports and
//! the CNI token's refresh. felix's loop runs on one thread (no hand-over
//! between threads for each datastore event) and a pass holds that thread
//! for as long as it takes (`nft` calls, a policy compile over every
//! endpoint); a probe must not wait for it.

use std::future::Future;
use std::sync::OnceLock;

use tokio::runtime::{Builder, Handle};
use tokio::task::JoinHandle;

static SERVING: OnceLock<Handle> = OnceLock::new();

/// The serving thread's runtime, started on first use.
fn handle() -> &'static Handle {
    SERVING.get_or_init(|| {
        let rt = Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("a Tokio runtime for felix's servers");
        let h = rt.handle().clone();
        std::thread::Builder::new()
            .name("felix-serving".into())
            .spawn(move || rt.block_on(std::future::pending::<()>()))
            .expect("felix's serving thread");
        h
    })
}

/// Run `f` on the serving thread.
pub fn spawn<F>(f: F) -> JoinHandle<F::Output>
where
    F: Future + Send + 'static,
    F::Output: Send + 'static,
{
    handle().spawn(f)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_served_task_runs_while_the_callers_thread_is_blocked() {
        let (tx, rx) = std::sync::mpsc::channel();
        let _task = spawn(async move {
            tx.send(std::thread::current().name().map(String::from))
                .unwrap();
        });
        // This thread does not await anything: the task runs elsewhere.
        let name = rx.recv_timeout(std::time::Duration::from_secs(10)).unwrap();
        assert_eq!(name.as_deref(), Some("felix-serving"));
    }
}
