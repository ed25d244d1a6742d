//! A watch its consumer can trust: list, then follow the raw watch from the
//! list's revision; when the store has forgotten that revision (etcd
//! compaction, Kubernetes 410 Gone) or the connection drops, resume — by
//! relisting if need be — and hand the consumer only what changed since
//! what it last saw. Each object's events reach the consumer once, in order;
//! after a relist, objects that vanished in between come out as `Deleted`
//! (except from a watch whose consumer keeps the record, below).
//!
//! The consumer never sees store errors: the watch retries with backoff and
//! logs. [`WatchEvent::Synced`] says the consumer's view now equals the
//! store at a revision (after the first list and after every relist), which
//! is when a node agent may act on "everything".
//!
//! A watch may be narrowed by a predicate on the object ([`Watch::keeping`]):
//! it then shows the consumer only the objects that pass, and keeps no record
//! of the others. An agent that uses a few objects of a large kind (bgpd, its
//! own node's pods among every pod of the cluster) so holds nothing per
//! object of the rest.
//!
//! A consumer that keeps every object of a kind by key anyway (felix, every
//! WorkloadEndpoint and Pod of the cluster) may keep the record itself
//! ([`Watch::unrecorded`]): the watch then holds nothing per object, tells
//! of every change and deletion as it comes, and opens each listing with
//! [`WatchEvent::Relisting`] so that the consumer can tell what the
//! listing no longer has.

pub mod burst;
mod record;

use record::{Found, Record, record_key, split_key};
use std::sync::Arc;
use std::time::Duration;

use backon::{BackoffBuilder, ExponentialBackoff, ExponentialBuilder};
use futures::StreamExt;
use futures::future::BoxFuture;
use futures::stream::BoxStream;
use tracing::{debug, info, warn};

use super::{
    Datastore, DynamicObject, ListPage, ObjectKey, RawEvent, Result, StoreError, WatchScope,
};

/// What the consumer of a watch sees.
#[derive(Clone, Debug)]
pub enum WatchEvent {
    Added(DynamicObject),
    Modified(DynamicObject),
    /// The object's key: apiVersion and kind, name, namespace, and the
    /// resourceVersion of the deletion (or, for an object found gone at a
    /// relist, the last one this watch told of). Its content is not kept.
    Deleted(DynamicObject),
    /// The consumer's view equals the store at `revision`.
    Synced {
        revision: String,
    },
    /// Only from a watch whose consumer keeps the record
    /// ([`Watch::unrecorded`]): a listing begins. Every object that exists
    /// (and passes the watch's predicate, if narrowed) is told of, as
    /// `Modified`, before the next `Synced`; what the consumer holds and is
    /// not told of again is gone. A listing that fails half-way starts
    /// again with another `Relisting`: the consumer starts over.
    Relisting,
}

/// Which objects a narrowed watch passes on.
type Keep = Box<dyn Fn(&DynamicObject) -> bool + Send + Sync>;

/// A running watch of one kind (and optionally one namespace).
pub struct Watch {
    store: Arc<dyn Datastore>,
    scope: WatchScope,
    /// The objects the consumer is shown; `None`: all.
    keep: Option<Keep>,
    /// What the consumer has been told exists, by `namespace/name`: the
    /// resourceVersion it was told of. Only that: consumers keep what
    /// they need of an object, so the watch keeps no second copy of the
    /// whole store.
    seen: Record,
    /// Whether `seen` is kept; `false`: the consumer keeps the record.
    recorded: bool,
    /// The revision the consumer's view is at; `None` until the first list.
    revision: Option<String>,
    raw: Option<BoxStream<'static, Result<RawEvent>>>,
    pending: std::collections::VecDeque<WatchEvent>,
    must_relist: bool,
    /// A listing under way (read a page at a time).
    listing: Option<Listing>,
    backoff: Option<ExponentialBackoff>,
    relists: u64,
    /// The store call under way, kept here so that [`Watch::next`] is
    /// cancel-safe: a consumer that drops it (one branch of a `select!`
    /// over several watches) resumes the same call on the next one
    /// instead of starting it again. Without this a listing slower than
    /// the other branches' events never finished, each dropped page
    /// resetting an HTTP/2 stream until the connection failed.
    in_flight: Option<InFlight>,
    /// After a failure: no store call before then.
    paused_until: Option<tokio::time::Instant>,
}

/// A store call of the watch's, owned by it.
enum InFlight {
    Page(BoxFuture<'static, Result<ListPage>>),
    Watch(BoxFuture<'static, Result<BoxStream<'static, Result<RawEvent>>>>),
}

/// Objects per page when listing: the consumer's events are made a page
/// at a time, so a listing is never held whole.
const LIST_PAGE: usize = 500;

/// Where a paged listing stands.
struct Listing {
    revision: String,
    /// Where the next page starts.
    next: Option<String>,
}

/// Start watching: the first events are the current objects as `Added`,
/// then `Synced`, then changes. (From an unrecorded watch, every listing is
/// `Relisting`, the objects as `Modified`, then `Synced`.)
pub fn watch(store: Arc<dyn Datastore>, scope: WatchScope) -> Watch {
    Watch {
        store,
        scope,
        keep: None,
        seen: Record::default(),
        recorded: true,
        revision: None,
        raw: None,
        pending: Default::default(),
        must_relist: true,
        listing: None,
        backoff: None,
        relists: 0,
        in_flight: None,
        paused_until: None,
    }
}

fn backoff() -> ExponentialBackoff {
    ExponentialBuilder::default()
        .with_min_delay(Duration::from_millis(100))
        .with_max_delay(Duration::from_secs(5))
        .with_jitter()
        .without_max_times()
        .build()
}

fn local_key(o: &DynamicObject) -> (Option<String>, String) {
    (
        o.metadata.namespace.clone().filter(|n| !n.is_empty()),
        o.metadata.name.clone().unwrap_or_default(),
    )
}

/// How a page's objects are ordered: by namespace (none first), then name.
fn sort_key(o: &DynamicObject) -> (&str, &str) {
    (
        o.metadata.namespace.as_deref().unwrap_or(""),
        o.metadata.name.as_deref().unwrap_or(""),
    )
}

impl Watch {
    /// This watch narrowed to the objects `keep` passes: the others are
    /// neither shown nor remembered. An object that stops passing (a
    /// change, or found so at a relist) is shown as `Deleted`, one that
    /// starts passing as `Added`. (Unrecorded, an object that does not
    /// pass is shown as `Deleted` on every change, and a listing leaves it
    /// out for the consumer's sweep.) `keep` must decide from the object
    /// alone.
    pub fn keeping(
        mut self,
        keep: impl Fn(&DynamicObject) -> bool + Send + Sync + 'static,
    ) -> Watch {
        self.keep = Some(Box::new(keep));
        self
    }

    /// This watch with its record kept by the consumer, which holds every
    /// object it is shown by key anyway. The watch then keeps nothing per
    /// object: every change comes out as `Modified` (also a repeat of what
    /// the consumer has, or an object it has never seen), every deletion
    /// as `Deleted` (also of an object it never had), and each listing,
    /// the first too, opens with [`WatchEvent::Relisting`]: what the
    /// consumer holds and the listing does not tell of again before
    /// `Synced` is gone.
    pub fn unrecorded(mut self) -> Watch {
        self.recorded = false;
        self
    }

    fn kept(&self, o: &DynamicObject) -> bool {
        self.keep.as_ref().is_none_or(|k| k(o))
    }

    /// The next event. Waits as long as it takes; never fails.
    /// Cancel-safe: dropped before it returns, nothing is lost and the
    /// store call under way goes on at the next call.
    pub async fn next(&mut self) -> WatchEvent {
        loop {
            if let Some(e) = self.pending.pop_front() {
                return e;
            }
            if let Some(until) = self.paused_until {
                tokio::time::sleep_until(until).await;
                self.paused_until = None;
            }
            if self.must_relist {
                let page = match &mut self.in_flight {
                    Some(InFlight::Page(f)) => f,
                    _ => {
                        let store = self.store.clone();
                        let scope = self.scope.clone();
                        let from = self.listing.as_ref().and_then(|l| l.next.clone());
                        self.in_flight = Some(InFlight::Page(Box::pin(async move {
                            store
                                .list_page(
                                    scope.kind,
                                    scope.namespace.as_deref(),
                                    from.as_deref(),
                                    LIST_PAGE,
                                )
                                .await
                        })));
                        continue;
                    }
                };
                let r = page.await;
                self.in_flight = None;
                match r {
                    Ok(page) => {
                        self.backoff = None;
                        self.apply_page(page);
                    }
                    Err(e) => {
                        // The store may have forgotten the listing's
                        // revision: the next try starts it again.
                        self.listing = None;
                        self.pause(&e, "list");
                    }
                }
                continue;
            }
            let Some(raw) = self.raw.as_mut() else {
                let start = match &mut self.in_flight {
                    Some(InFlight::Watch(f)) => f,
                    _ => {
                        let store = self.store.clone();
                        let scope = self.scope.clone();
                        let rev = self.revision.clone().unwrap_or_default();
                        self.in_flight = Some(InFlight::Watch(Box::pin(async move {
                            store.watch_raw(&scope, &rev).await
                        })));
                        continue;
                    }
                };
                let r = start.await;
                self.in_flight = None;
                match r {
                    Ok(s) => self.raw = Some(s),
                    Err(StoreError::Expired(_)) => {
                        let rev = self.revision.clone().unwrap_or_default();
                        info!(kind = %self.scope.kind, revision = %rev, "watch revision no longer available; relisting");
                        self.must_relist = true;
                    }
                    Err(e) => self.pause(&e, "watch"),
                }
                continue;
            };
            // A stream's next item is cancel-safe by itself.
            match raw.next().await {
                Some(Ok(ev)) => {
                    self.backoff = None;
                    self.apply_raw(ev);
                }
                Some(Err(StoreError::Expired(rev))) => {
                    info!(kind = %self.scope.kind, revision = %rev, "watch fell behind; relisting");
                    self.raw = None;
                    self.must_relist = true;
                }
                Some(Err(e)) => {
                    self.raw = None;
                    self.pause(&e, "watch");
                }
                None => {
                    debug!(kind = %self.scope.kind, "watch stream ended; resuming");
                    self.raw = None;
                }
            }
        }
    }

    /// The revision the consumer's view is at.
    pub fn revision(&self) -> Option<&str> {
        self.revision.as_deref()
    }

    /// How many objects the watch keeps a record of (those it has shown
    /// the consumer and not shown gone).
    pub fn remembered(&self) -> usize {
        self.seen.len()
    }

    /// How many times the watch listed (1 for the first list).
    pub fn lists(&self) -> u64 {
        self.relists
    }

    /// Logs a failure and holds the next store call back by the backoff.
    fn pause(&mut self, e: &StoreError, what: &str) {
        let delay = self
            .backoff
            .get_or_insert_with(backoff)
            .next()
            .unwrap_or(Duration::from_secs(5));
        warn!(kind = %self.scope.kind, error = %e, retry_in = ?delay, "{what} failed");
        self.paused_until = Some(tokio::time::Instant::now() + delay);
    }

    /// One page of a listing: tell the consumer what it adds or changes;
    /// after the last page, what is gone, then `Synced`. The listed
    /// objects are moved into the events, not copied.
    fn apply_page(&mut self, page: ListPage) {
        if self.listing.is_none() {
            // What this listing does not find is, at its end, gone.
            if self.recorded {
                self.seen.start_listing();
            } else {
                self.pending.push_back(WatchEvent::Relisting);
            }
        }
        let listing = self.listing.get_or_insert_with(|| Listing {
            revision: page.revision.clone(),
            next: None,
        });
        let mut items = page.items;
        if let Some(keep) = &self.keep {
            // What is not listed here is, at the end, gone for the consumer.
            items.retain(|o| keep(o));
        }
        items.sort_by(|a, b| sort_key(a).cmp(&sort_key(b)));
        if self.recorded {
            for o in items {
                match self
                    .seen
                    .found(record_key(&o), o.metadata.resource_version.as_deref())
                {
                    Found::Same | Found::Again => {}
                    Found::Changed => self.pending.push_back(WatchEvent::Modified(o)),
                    Found::New => self.pending.push_back(WatchEvent::Added(o)),
                }
            }
        } else {
            self.pending
                .extend(items.into_iter().map(WatchEvent::Modified));
        }
        if page.next.is_some() {
            listing.next = page.next;
            return;
        }
        let Some(listing) = self.listing.take() else {
            return;
        };
        let gone = if self.recorded {
            self.seen.end_listing()
        } else {
            Vec::new()
        };
        for (k, rv) in gone {
            let o = self.gone_object(&k, rv);
            self.pending.push_back(WatchEvent::Deleted(o));
        }
        self.pending.push_back(WatchEvent::Synced {
            revision: listing.revision.clone(),
        });
        self.revision = Some(listing.revision);
        self.must_relist = false;
        self.relists += 1;
    }

    /// What a `Deleted` event carries for an object that a relist found
    /// gone: its key and the last resourceVersion told of.
    fn gone_object(&self, key: &str, rv: Option<String>) -> DynamicObject {
        let (namespace, name) = split_key(key);
        let mut o = DynamicObject::new(&name, &self.scope.kind.api_resource());
        o.metadata.namespace = namespace;
        o.metadata.resource_version = rv;
        o
    }

    fn apply_raw(&mut self, ev: RawEvent) {
        match ev {
            RawEvent::Put(o) if !self.recorded => {
                self.note_revision(&o);
                let ev = if self.kept(&o) {
                    WatchEvent::Modified(o)
                } else {
                    // Perhaps shown before: the consumer knows.
                    let k = record_key(&o);
                    WatchEvent::Deleted(self.gone_object(&k, o.metadata.resource_version.clone()))
                };
                self.pending.push_back(ev);
            }
            RawEvent::Put(o) if !self.kept(&o) => {
                self.note_revision(&o);
                // Shown before, now outside what the consumer is shown.
                let k = record_key(&o);
                if self.seen.forget(&k).is_some() {
                    let gone = self.gone_object(&k, o.metadata.resource_version.clone());
                    self.pending.push_back(WatchEvent::Deleted(gone));
                }
            }
            RawEvent::Put(o) => {
                let k = record_key(&o);
                self.note_revision(&o);
                let rv = o.metadata.resource_version.as_deref();
                match self.seen.told_at(&k, rv) {
                    // A repeat of what the consumer has (a resumed watch
                    // replaying its first event): nothing to say.
                    Some(true) => {}
                    Some(false) => {
                        self.seen.tell(k, rv, false);
                        self.pending.push_back(WatchEvent::Modified(o));
                    }
                    None => {
                        self.seen.tell(k, rv, false);
                        self.pending.push_back(WatchEvent::Added(o));
                    }
                }
            }
            RawEvent::Deleted(o) if !self.recorded => {
                self.note_revision(&o);
                self.pending.push_back(WatchEvent::Deleted(o));
            }
            RawEvent::Deleted(o) => {
                self.note_revision(&o);
                if self.seen.forget(&record_key(&o)).is_some() {
                    self.pending.push_back(WatchEvent::Deleted(o));
                }
            }
            RawEvent::Progress(rev) => self.revision = Some(rev),
        }
    }

    fn note_revision(&mut self, o: &DynamicObject) {
        if let Some(rv) = &o.metadata.resource_version {
            self.revision = Some(rv.clone());
        }
    }
}

/// The key of an object as the watch reports it, for consumers that keep
/// maps by key.
pub fn key_of(scope: &WatchScope, o: &DynamicObject) -> ObjectKey {
    let (namespace, name) = local_key(o);
    ObjectKey {
        kind: scope.kind,
        namespace,
        name,
    }
}

#[cfg(test)]
#[path = "watch_tests.rs"]
mod tests;
