//! Calls that ride out an outage: a wrapper that retries a backend's
//! transient failures ([`StoreError::Unavailable`]) with backoff, for as
//! long as its caller is willing to wait. Daemons wait forever (a store
//! outage must not need a restart); `tartanctl` gives up after a while and
//! says why.
//!
//! A retried `create` whose first attempt reached the store but whose answer
//! was lost comes back as `AlreadyExists`, and a retried `update` as
//! `Conflict`: the caller sees the same errors as for a race with another
//! writer, and handles them the same way (read again).

use std::time::{Duration, Instant};

use async_trait::async_trait;
use backon::{BackoffBuilder, ExponentialBuilder};
use futures::stream::BoxStream;
use tracing::warn;

use super::{
    Datastore, DynamicObject, ListPage, Listing, Narrow, ObjectKey, RawEvent, Result, StoreError,
    WatchScope,
};
use crate::kind::Kind;

pub struct Retrying<S> {
    inner: S,
    /// Give up after this long; `None` retries for ever.
    give_up_after: Option<Duration>,
}

impl<S: Datastore> Retrying<S> {
    pub fn new(inner: S, give_up_after: Option<Duration>) -> Self {
        Retrying {
            inner,
            give_up_after,
        }
    }

    pub fn inner(&self) -> &S {
        &self.inner
    }

    /// The stored object, if its content is exactly `written` (labels,
    /// annotations and everything outside metadata).
    async fn ours(&self, key: &ObjectKey, written: &DynamicObject) -> Option<DynamicObject> {
        let stored = self.run("get", || self.inner.get(key)).await.0.ok()?;
        super::same_content(&stored, written).then_some(stored)
    }

    /// Call until the answer is not transient; also says whether an
    /// earlier attempt failed in a way that leaves its outcome unknown.
    async fn run<T, F, Fut>(&self, what: &str, mut call: F) -> (Result<T>, bool)
    where
        F: FnMut() -> Fut + Send,
        Fut: std::future::Future<Output = Result<T>> + Send,
        T: Send,
    {
        let start = Instant::now();
        let mut retried = false;
        let mut delays = ExponentialBuilder::default()
            .with_min_delay(Duration::from_millis(200))
            .with_max_delay(Duration::from_secs(5))
            .with_jitter()
            .without_max_times()
            .build();
        loop {
            match call().await {
                Err(e) if e.is_transient() => {
                    let delay = delays.next().unwrap_or(Duration::from_secs(5));
                    if let Some(limit) = self.give_up_after
                        && start.elapsed() + delay > limit
                    {
                        return (
                            Err(StoreError::Unavailable(format!(
                                "{e} (gave up after {:.0?} of retries)",
                                start.elapsed()
                            ))),
                            retried,
                        );
                    }
                    warn!(store = %self.inner.describe(), error = %e, retry_in = ?delay, "{what} failed; retrying");
                    tokio::time::sleep(delay).await;
                    retried = true;
                }
                other => return (other, retried),
            }
        }
    }
}

#[async_trait]
impl<S: Datastore> Datastore for Retrying<S> {
    async fn get(&self, key: &ObjectKey) -> Result<DynamicObject> {
        self.run("get", || self.inner.get(key)).await.0
    }

    async fn list(&self, kind: Kind, namespace: Option<&str>) -> Result<Listing> {
        self.run("list", || self.inner.list(kind, namespace))
            .await
            .0
    }

    async fn list_narrow(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        narrow: Narrow<'_>,
    ) -> Result<Listing> {
        self.run("list", || self.inner.list_narrow(kind, namespace, narrow))
            .await
            .0
    }

    async fn list_page(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        from: Option<&str>,
        limit: usize,
    ) -> Result<ListPage> {
        self.run("list", || {
            self.inner.list_page(kind, namespace, from, limit)
        })
        .await
        .0
    }

    async fn create(&self, obj: DynamicObject) -> Result<DynamicObject> {
        match self.run("create", || self.inner.create(obj.clone())).await {
            // An attempt that timed out may have been applied: if what is
            // stored now is what we wrote, that attempt was ours.
            (Err(StoreError::AlreadyExists(key)), true) => self
                .ours(&key, &obj)
                .await
                .ok_or(StoreError::AlreadyExists(key)),
            (r, _) => r,
        }
    }

    async fn update(&self, obj: DynamicObject) -> Result<DynamicObject> {
        match self.run("update", || self.inner.update(obj.clone())).await {
            (Err(StoreError::Conflict { key, expected }), true) => self
                .ours(&key, &obj)
                .await
                .ok_or(StoreError::Conflict { key, expected }),
            (r, _) => r,
        }
    }

    async fn update_status(&self, obj: DynamicObject) -> Result<DynamicObject> {
        match self
            .run("update_status", || self.inner.update_status(obj.clone()))
            .await
        {
            (Err(StoreError::Conflict { key, expected }), true) => self
                .ours(&key, &obj)
                .await
                .ok_or(StoreError::Conflict { key, expected }),
            (r, _) => r,
        }
    }

    async fn delete(&self, key: &ObjectKey, resource_version: Option<&str>) -> Result<()> {
        match self
            .run("delete", || self.inner.delete(key, resource_version))
            .await
        {
            // Gone after an attempt whose outcome was unknown: it was ours.
            (Err(StoreError::NotFound(_)), true) => Ok(()),
            (r, _) => r,
        }
    }

    async fn watch_raw(
        &self,
        scope: &WatchScope,
        revision: &str,
    ) -> Result<BoxStream<'static, Result<RawEvent>>> {
        // The watch layer has its own backoff; starting a watch is not
        // retried here so that it sees Expired and outages promptly.
        self.inner.watch_raw(scope, revision).await
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::memory::MemoryStore;

    fn pool(name: &str) -> DynamicObject {
        serde_json::from_value(serde_json::json!({
            "apiVersion": "tartan.dev/v1", "kind": "IPPool",
            "metadata": {"name": name}, "spec": {"cidr": "10.0.0.0/16"}
        }))
        .unwrap()
    }

    #[tokio::test(start_paused = true)]
    async fn write_during_outage_completes_after_it() {
        let mem = MemoryStore::new();
        let store = std::sync::Arc::new(Retrying::new(mem.clone(), None));
        mem.set_unavailable(true);
        let s = store.clone();
        let write = tokio::spawn(async move { s.create(pool("a")).await });
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert!(!write.is_finished(), "write should still be retrying");
        mem.set_unavailable(false);
        let created = write.await.unwrap().unwrap();
        assert_eq!(created.metadata.name.as_deref(), Some("a"));
        assert!(
            mem.get(&ObjectKey::new(Kind::IpPool, None, "a"))
                .await
                .is_ok()
        );
    }

    #[tokio::test(start_paused = true)]
    async fn bounded_retry_gives_up_with_reason() {
        let mem = MemoryStore::new();
        mem.set_unavailable(true);
        let store = Retrying::new(mem, Some(Duration::from_secs(10)));
        let err = store.list(Kind::IpPool, None).await.unwrap_err();
        assert!(matches!(err, StoreError::Unavailable(_)), "{err}");
        assert!(err.to_string().contains("gave up"), "{err}");
    }

    #[tokio::test]
    async fn errors_that_are_answers_are_not_retried() {
        let store = Retrying::new(MemoryStore::new(), None);
        let err = store
            .get(&ObjectKey::new(Kind::IpPool, None, "nope"))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::NotFound(_)));
    }

    /// Applies each write, then reports the first of each kind of call as
    /// lost (the answer never came back), as a dropped connection would.
    struct LostAnswers {
        mem: MemoryStore,
        lost: std::sync::Mutex<std::collections::HashSet<&'static str>>,
    }

    impl LostAnswers {
        fn lose(&self, call: &'static str) -> bool {
            self.lost.lock().unwrap().insert(call)
        }
    }

    #[async_trait]
    impl Datastore for LostAnswers {
        async fn get(&self, key: &ObjectKey) -> Result<DynamicObject> {
            self.mem.get(key).await
        }
        async fn list(&self, kind: Kind, namespace: Option<&str>) -> Result<Listing> {
            self.mem.list(kind, namespace).await
        }
        async fn create(&self, obj: DynamicObject) -> Result<DynamicObject> {
            let r = self.mem.create(obj).await;
            if self.lose("create") {
                Err(StoreError::Unavailable("answer lost".into()))
            } else {
                r
            }
        }
        async fn update(&self, obj: DynamicObject) -> Result<DynamicObject> {
            let r = self.mem.update(obj).await;
            if self.lose("update") {
                Err(StoreError::Unavailable("answer lost".into()))
            } else {
                r
            }
        }
        async fn delete(&self, key: &ObjectKey, rv: Option<&str>) -> Result<()> {
            let r = self.mem.delete(key, rv).await;
            if self.lose("delete") {
                Err(StoreError::Unavailable("answer lost".into()))
            } else {
                r
            }
        }
        async fn watch_raw(
            &self,
            scope: &WatchScope,
            revision: &str,
        ) -> Result<BoxStream<'static, Result<RawEvent>>> {
            self.mem.watch_raw(scope, revision).await
        }
        fn describe(&self) -> String {
            "lost-answers".into()
        }
    }

    /// A write whose answer was lost was applied: its retry must not report
    /// AlreadyExists / Conflict / NotFound for the caller's own write.
    #[tokio::test(start_paused = true)]
    async fn retried_writes_whose_first_answer_was_lost_succeed() {
        let mem = MemoryStore::new();
        let store = Retrying::new(
            LostAnswers {
                mem: mem.clone(),
                lost: Default::default(),
            },
            None,
        );
        let created = store
            .create(pool("a"))
            .await
            .expect("create after a lost answer");
        let mut changed = created.clone();
        changed.data["spec"]["cidr"] = "10.1.0.0/16".into();
        let updated = store
            .update(changed)
            .await
            .expect("update after a lost answer");
        assert_eq!(updated.data["spec"]["cidr"], "10.1.0.0/16");
        let key = ObjectKey::new(Kind::IpPool, None, "a");
        store
            .delete(&key, updated.metadata.resource_version.as_deref())
            .await
            .expect("delete after a lost answer");
        assert!(mem.get(&key).await.is_err());
        // Someone else's object under the same name is still a conflict.
        mem.create(pool("b")).await.unwrap();
        let mut other = pool("b");
        other.data["spec"]["cidr"] = "10.9.0.0/16".into();
        let plain = Retrying::new(mem.clone(), None);
        assert!(matches!(
            plain.create(other).await,
            Err(StoreError::AlreadyExists(_))
        ));
    }
}
