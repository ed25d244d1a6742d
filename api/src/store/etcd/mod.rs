//! The etcd backend: each object is one key ([`keys`]) holding the object's
//! JSON without its resourceVersion; the key's `mod_revision` is the
//! resourceVersion, and the store revision of a read is the listing's
//! revision. Writes that must not race are etcd transactions comparing the
//! key's revision. An update carries the stored object's identity fields
//! over, so it reads the stored value first, unless this client has just
//! read or written that value (see `recent.rs`): then compare-and-swap costs
//! one round trip.
//!
//! The client is given every endpoint of the cluster; its channel balances
//! over them and reconnects by itself when members go away and come back.
//! Calls made while no member answers fail as [`StoreError::Unavailable`]
//! (and are retried by [`crate::store::retry`]).

pub mod keys;
mod outline;
mod paced;
mod recent;
mod watch;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use etcd_client::{
    Client, Compare, CompareOp, ConnectOptions, GetOptions, KeyValue, Txn, TxnOp, TxnOpResponse,
    TxnResponse,
};
use futures::stream::BoxStream;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tracing::{error, warn};

use super::{
    Datastore, DynamicObject, ListPage, Listing, Narrow, ObjectKey, RawEvent, Result, StoreError,
    WatchScope,
};
use crate::kind::Kind;

#[derive(Clone)]
pub struct EtcdStore {
    client: Client,
    endpoints: Vec<String>,
    /// The endpoints as URLs, for the paced watch connections ([`paced`]).
    urls: Vec<String>,
    /// Values just read or written, for updates that follow ([`recent`]).
    recent: Arc<Mutex<recent::Recent>>,
}

/// Keys per read when listing (see [`EtcdStore::list_pages`]).
const LIST_PAGE: i64 = 500;

/// One consistent listing: its keys and the revision they were read at.
#[derive(Default)]
struct Pages {
    kvs: Vec<KeyValue>,
    revision: i64,
}

/// The smallest key after `key`.
fn next_key(key: &[u8]) -> Vec<u8> {
    let mut k = key.to_vec();
    k.push(0);
    k
}

/// How long one call may take before it counts as the store being away.
const CALL_TIMEOUT: Duration = Duration::from_secs(5);
/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// HTTP/2 pings: their interval, and how long an answer may take.
const KEEP_ALIVE: (Duration, Duration) = (Duration::from_secs(10), Duration::from_secs(5));

/// Kinds watched over a paced connection of their own ([`paced`]): those
/// whose changes are mostly heartbeats.
const PACED_KINDS: &[Kind] = &[Kind::Node];

/// Kinds whose objects have an outline key beside their own ([`outline`]):
/// those that kubelets rewrite every few seconds while what the agents
/// read of them stays the same.
const OUTLINED_KINDS: &[Kind] = &[Kind::Node];

/// How a value read from etcd is read into an object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Read {
    /// Whole, from the object's own key.
    Whole,
    /// As its metadata and the shape of the rest
    /// ([`crate::store::shape::metadata_from_slice`]), from its own key.
    Metadata,
    /// From its outline key ([`outline`]), which holds only that.
    Outline,
}

pub(crate) fn map_err(e: etcd_client::Error) -> StoreError {
    use etcd_client::Error as E;
    match e {
        E::TransportError(e) => StoreError::Unavailable(e.to_string()),
        E::IoError(e) => StoreError::Unavailable(e.to_string()),
        E::GRpcStatus(s) => match s.code() {
            tonic::Code::Unavailable
            | tonic::Code::DeadlineExceeded
            | tonic::Code::Cancelled
            | tonic::Code::Unknown
            | tonic::Code::ResourceExhausted
            | tonic::Code::Aborted => {
                StoreError::Unavailable(format!("{}: {}", code_name(s.code()), s.message()))
            }
            _ if s.message().contains("compacted") => StoreError::Expired(s.message().to_string()),
            c => StoreError::Backend(format!("{}: {}", code_name(c), s.message())),
        },
        other => StoreError::Backend(other.to_string()),
    }
}

fn code_name(c: tonic::Code) -> String {
    format!("{c:?}")
}

fn endpoint_url(e: &str) -> String {
    if e.starts_with("http://") || e.starts_with("https://") {
        e.to_string()
    } else {
        format!("http://{e}")
    }
}

/// The stored object at `kv`, read as `read` says, with resourceVersion
/// set.
fn decode_as(kind: Kind, kv: &KeyValue, read: Read) -> Result<DynamicObject> {
    decode_value(kind, kv.key(), kv.value(), kv.mod_revision(), read)
}

/// The prefix of the keys a watch reading as `read` watches: the objects'
/// own, or their outlines'.
fn prefix_for(read: Read, kind: Kind, namespace: Option<&str>) -> String {
    match read {
        Read::Outline => keys::outline_prefix(kind, namespace),
        Read::Whole | Read::Metadata => keys::prefix(kind, namespace),
    }
}

/// The namespace and name of the object `key` (read as `read`) is of.
fn parse_key(kind: Kind, key: &[u8], read: Read) -> Option<(Option<String>, String)> {
    match read {
        Read::Outline => keys::parse_outline(kind, key),
        Read::Whole | Read::Metadata => keys::parse(kind, key),
    }
}

/// [`decode_as`] of a value stored at `key` at `mod_revision`.
fn decode_value(
    kind: Kind,
    key: &[u8],
    value: &[u8],
    mod_revision: i64,
    read: Read,
) -> Result<DynamicObject> {
    let reader = match read {
        Read::Whole => crate::store::shape::from_slice,
        Read::Metadata | Read::Outline => crate::store::shape::metadata_from_slice,
    };
    let mut obj: DynamicObject = reader(value).map_err(|e| {
        StoreError::BadObject(format!(
            "etcd key {} does not hold a {kind} object: {}",
            String::from_utf8_lossy(key),
            crate::store::shape::why_unreadable(value, &e)
        ))
    })?;
    let (namespace, name) = parse_key(kind, key, read).ok_or_else(|| {
        StoreError::BadObject(format!(
            "etcd key {} is not a {kind} key",
            String::from_utf8_lossy(key)
        ))
    })?;
    // The key is the truth for identity, whatever the value says.
    obj.metadata.name = Some(name);
    obj.metadata.namespace = namespace;
    obj.metadata.resource_version = Some(mod_revision.to_string());
    if obj.types.is_none() {
        obj.types = Some(::kube::core::TypeMeta {
            api_version: kind.api_version(),
            kind: kind.info().name.to_string(),
        });
    }
    Ok(obj)
}

/// [`decode_as`], or for a value that is not an object of `kind` a
/// placeholder naming the object and why (see [`crate::store::readable`]):
/// one unreadable value (written by hand, say) neither hides every other
/// object nor is itself hidden. `None` only for a key that names no object
/// of `kind` (logged).
pub(crate) fn decode_or_placeholder(
    kind: Kind,
    kv: &KeyValue,
    read: Read,
) -> Option<DynamicObject> {
    match decode_as(kind, kv, read) {
        Ok(o) => Some(o),
        Err(e) => match parse_key(kind, kv.key(), read) {
            Some((namespace, name)) => {
                let key = ObjectKey {
                    kind,
                    namespace,
                    name,
                };
                let reason = match serde_json::from_slice::<serde_json::Value>(kv.value()) {
                    Ok(_) => format!("not an object of this kind: {e}"),
                    Err(j) => format!("not JSON: {j}"),
                };
                let mut o = crate::store::readable::placeholder(&key, &reason);
                o.metadata.resource_version = Some(kv.mod_revision().to_string());
                Some(o)
            }
            None => {
                error!(error = %e, "etcd key names no object; not read");
                None
            }
        },
    }
}

/// An update's identity fields from the stored object `stored` (kept as
/// the writer gave them when the stored value does not read): its uid and
/// creation time, and its generation, one more when the spec changes.
fn carry_identity(obj: &mut DynamicObject, stored: Option<DynamicObject>) {
    let Some(stored) = stored else { return };
    obj.metadata.uid = stored.metadata.uid;
    obj.metadata.creation_timestamp = stored.metadata.creation_timestamp;
    let spec_changed = stored.data.get("spec") != obj.data.get("spec");
    let generation = stored.metadata.generation.unwrap_or(1);
    obj.metadata.generation = Some(if spec_changed {
        generation + 1
    } else {
        generation
    });
}

fn encode(obj: &DynamicObject) -> Result<Vec<u8>> {
    let mut stored = obj.clone();
    stored.metadata.resource_version = None;
    serde_json::to_vec(&stored).map_err(|e| StoreError::BadObject(e.to_string()))
}

fn parse_rv(key: &ObjectKey, rv: &str) -> Result<i64> {
    rv.parse::<i64>()
        .ok()
        .filter(|r| *r > 0)
        .ok_or_else(|| StoreError::Conflict {
            key: key.clone(),
            expected: rv.to_string(),
        })
}

/// The object the failed branch of a compare read back, if any.
fn current(resp: &TxnResponse) -> Option<KeyValue> {
    resp.op_responses().into_iter().find_map(|r| match r {
        TxnOpResponse::Get(g) => g.kvs().first().cloned(),
        _ => None,
    })
}

/// The store revision a successful write transaction made: the
/// transaction's own header (nested responses carry none).
fn put_revision(resp: &TxnResponse) -> Option<i64> {
    resp.header().map(|h| h.revision()).filter(|r| *r > 0)
}

impl EtcdStore {
    /// Connect to a cluster given its client endpoints (`host:port` or
    /// URLs). Fails only when none answers within the connect timeout.
    pub async fn connect(endpoints: &[String]) -> Result<Self> {
        if endpoints.is_empty() {
            return Err(StoreError::BadObject("no etcd endpoints given".into()));
        }
        let urls: Vec<String> = endpoints.iter().map(|e| endpoint_url(e)).collect();
        let opts = ConnectOptions::new()
            .with_connect_timeout(CONNECT_TIMEOUT)
            .with_timeout(CALL_TIMEOUT)
            .with_keep_alive(KEEP_ALIVE.0, KEEP_ALIVE.1)
            .with_keep_alive_while_idle(true)
            .with_require_leader(true);
        let client = Client::connect(&urls, Some(opts)).await.map_err(map_err)?;
        Ok(EtcdStore {
            client,
            endpoints: endpoints.to_vec(),
            urls,
            recent: Arc::default(),
        })
    }

    /// This store with its kept values ([`recent`]) bounded to `entries`
    /// values of `bytes` together instead of the default few: for a writer
    /// that updates many keys in turn, as an API server does from the
    /// watch cache that holds every object. Values kept so far are not
    /// carried over.
    pub fn keeping(mut self, entries: usize, bytes: usize) -> Self {
        self.recent = Arc::new(Mutex::new(recent::Recent::bounded(entries, bytes)));
        self
    }

    /// `obj` over the value `old` stored at `k` at revision `rev`, the
    /// stored identity fields carried over; the transaction compares the
    /// revision and, with `same_value`, the value too. `Ok(Err(now))`: the
    /// compare failed, `now` being what is stored instead (if anything).
    async fn write_over(
        &self,
        key: &ObjectKey,
        k: &str,
        mut obj: DynamicObject,
        rev: i64,
        old: &[u8],
        same_value: bool,
    ) -> Result<std::result::Result<DynamicObject, Option<KeyValue>>> {
        obj.metadata.namespace = key.namespace.clone();
        carry_identity(
            &mut obj,
            decode_value(key.kind, k.as_bytes(), old, rev, Read::Whole).ok(),
        );
        let value = encode(&obj)?;
        let mut when = vec![Compare::mod_revision(k, CompareOp::Equal, rev)];
        if same_value {
            when.push(Compare::value(k, CompareOp::Equal, old));
        }
        let mut then = vec![TxnOp::put(k, value.clone(), None)];
        if let Some(o) = outline::of(key.kind, k, &value)? {
            then.push(o.put_if_changed());
        }
        let txn = Txn::new()
            .when(when)
            .and_then(then)
            .or_else([TxnOp::get(k, None)]);
        let resp = self.txn(txn).await?;
        if !resp.succeeded() {
            return Ok(Err(current(&resp)));
        }
        self.written(k, &resp, &value, obj).map(Ok)
    }

    /// `obj`, put at `k` as `value` by `resp`'s transaction: kept, and
    /// given the revision it was written at.
    fn written(
        &self,
        k: &str,
        resp: &TxnResponse,
        value: &[u8],
        mut obj: DynamicObject,
    ) -> Result<DynamicObject> {
        let rev = put_revision(resp)
            .ok_or_else(|| StoreError::Backend("etcd put returned no revision".into()))?;
        self.keep(k.as_bytes(), rev, value);
        obj.metadata.resource_version = Some(rev.to_string());
        Ok(obj)
    }

    /// The value kept at `key` ([`recent`]) if it is at `revision`.
    fn kept_at(&self, key: &[u8], revision: i64) -> Option<Arc<[u8]>> {
        self.recent.lock().ok()?.at(key, revision)
    }

    fn keep(&self, key: &[u8], revision: i64, value: &[u8]) {
        if let Ok(mut r) = self.recent.lock() {
            r.keep(key, revision, value);
        }
    }

    fn forget(&self, key: &[u8]) {
        if let Ok(mut r) = self.recent.lock() {
            r.forget(key);
        }
    }

    /// The underlying client, for harness work (compaction, status).
    pub fn client(&self) -> Client {
        self.client.clone()
    }

    /// Every key in `[start, end)` as of one revision, read in pages:
    /// the client refuses a reply over 4 MiB (10,000 EndpointSlices are
    /// about 16 MB), so a range is never read in one call. The first page
    /// fixes the revision and later pages read at it, so the listing is
    /// one consistent snapshot.
    async fn list_pages(&self, start: Vec<u8>, end: Vec<u8>, page: i64) -> Result<Pages> {
        let mut out = Pages::default();
        let mut from = start;
        loop {
            let (kvs, revision, more) = self.page(from, &end, page, out.revision).await?;
            out.revision = revision;
            let next = kvs.last().map(|last| next_key(last.key()));
            out.kvs.extend(kvs);
            match next {
                Some(n) if more => from = n,
                _ => return Ok(out),
            }
        }
    }

    /// Up to `limit` keys of `[from, end)` at `revision` (0: the current
    /// one), with the revision read at and whether more follow. A page
    /// refused as too large is read again at half the size, down to one
    /// key.
    async fn page(
        &self,
        from: Vec<u8>,
        end: &[u8],
        limit: i64,
        revision: i64,
    ) -> Result<(Vec<KeyValue>, i64, bool)> {
        let mut kv = self.client.kv_client();
        let mut limit = limit.max(1);
        loop {
            let opts = GetOptions::new()
                .with_range(end.to_vec())
                .with_limit(limit)
                .with_revision(revision);
            let mut resp = match kv.get(from.clone(), Some(opts)).await {
                Ok(r) => r,
                Err(etcd_client::Error::GRpcStatus(s))
                    if s.code() == tonic::Code::OutOfRange
                        || s.code() == tonic::Code::ResourceExhausted =>
                {
                    if limit == 1 {
                        return Err(StoreError::Backend(format!(
                            "one etcd value is too large to read: {}",
                            s.message()
                        )));
                    }
                    limit = (limit / 2).max(1);
                    warn!(limit, "etcd page too large, reading smaller pages");
                    continue;
                }
                Err(e) => return Err(map_err(e)),
            };
            let at = if revision == 0 {
                resp.header().map(|h| h.revision()).unwrap_or(0)
            } else {
                revision
            };
            let more = resp.more();
            let kvs = resp.take_kvs();
            let more = more && !kvs.is_empty();
            return Ok((kvs, at, more));
        }
    }

    async fn txn(&self, txn: Txn) -> Result<TxnResponse> {
        self.client.kv_client().txn(txn).await.map_err(map_err)
    }
}

#[async_trait]
impl Datastore for EtcdStore {
    async fn get(&self, key: &ObjectKey) -> Result<DynamicObject> {
        let k = keys::key(key)?;
        let resp = self
            .client
            .kv_client()
            .get(k, None)
            .await
            .map_err(map_err)?;
        match resp.kvs().first() {
            Some(kv) => {
                self.keep(kv.key(), kv.mod_revision(), kv.value());
                decode_or_placeholder(key.kind, kv, Read::Whole)
                    .ok_or_else(|| StoreError::NotFound(key.clone()))
            }
            None => Err(StoreError::NotFound(key.clone())),
        }
    }

    async fn list(&self, kind: Kind, namespace: Option<&str>) -> Result<Listing> {
        let prefix = keys::prefix(kind, namespace);
        let end = keys::range_end(&prefix);
        let pages = self.list_pages(prefix.into(), end, LIST_PAGE).await?;
        // Each value's bytes are dropped as soon as it is decoded, so the
        // raw pages and the decoded objects are not both held whole.
        let mut items = Vec::with_capacity(pages.kvs.len());
        items.extend(
            pages
                .kvs
                .into_iter()
                .filter_map(|kv| decode_or_placeholder(kind, &kv, Read::Whole)),
        );
        Ok(Listing {
            items,
            revision: pages.revision.to_string(),
        })
    }

    async fn list_narrow(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        narrow: Narrow<'_>,
    ) -> Result<Listing> {
        // The key range of the name prefix; names never hold '/', so a
        // prefix with one picks nothing.
        if narrow.name_prefix.contains('/') {
            return Ok(Listing {
                items: vec![],
                revision: String::new(),
            });
        }
        let prefix = format!("{}{}", keys::prefix(kind, namespace), narrow.name_prefix);
        let end = keys::prefix_end(prefix.as_bytes());
        let pages = self.list_pages(prefix.into(), end, LIST_PAGE).await?;
        let items = pages
            .kvs
            .iter()
            .filter_map(|kv| decode_or_placeholder(kind, kv, Read::Whole))
            .filter(|o| narrow.matches(o))
            .collect();
        Ok(Listing {
            items,
            revision: pages.revision.to_string(),
        })
    }

    async fn list_page(
        &self,
        kind: Kind,
        namespace: Option<&str>,
        from: Option<&str>,
        limit: usize,
    ) -> Result<ListPage> {
        let prefix = keys::prefix(kind, namespace);
        let end = keys::range_end(&prefix);
        let (start, revision) = match from {
            None => (prefix.into_bytes(), 0),
            Some(f) => keys::parse_continue(f)
                .filter(|(k, _)| k.starts_with(prefix.as_bytes()))
                .ok_or_else(|| {
                    StoreError::Backend(format!("not a listing continuation of {kind}: {f:?}"))
                })?,
        };
        let limit = i64::try_from(limit).unwrap_or(LIST_PAGE);
        let (kvs, revision, more) = self.page(start, &end, limit, revision).await?;
        let next = match kvs.last() {
            Some(last) if more => Some(keys::continue_from(&next_key(last.key()), revision)),
            _ => None,
        };
        let mut items = Vec::with_capacity(kvs.len());
        items.extend(
            kvs.into_iter()
                .filter_map(|kv| decode_or_placeholder(kind, &kv, Read::Whole)),
        );
        Ok(ListPage {
            items,
            revision: revision.to_string(),
            next,
        })
    }

    async fn create(&self, mut obj: DynamicObject) -> Result<DynamicObject> {
        let key = ObjectKey::of(&obj)?;
        let k = keys::key(&key)?;
        obj.metadata.namespace = key.namespace.clone();
        obj.metadata.uid = Some(uuid::Uuid::new_v4().to_string());
        obj.metadata.creation_timestamp = Some(Time(k8s_openapi::jiff::Timestamp::now()));
        obj.metadata.generation = Some(1);
        let value = encode(&obj)?;
        let mut then = vec![TxnOp::put(k.clone(), value.clone(), None)];
        if let Some(o) = outline::of(key.kind, &k, &value)? {
            then.push(o.put());
        }
        let txn = Txn::new()
            .when([Compare::create_revision(k.clone(), CompareOp::Equal, 0)])
            .and_then(then);
        let resp = self.txn(txn).await?;
        if !resp.succeeded() {
            return Err(StoreError::AlreadyExists(key));
        }
        self.written(&k, &resp, &value, obj)
    }

    async fn update(&self, obj: DynamicObject) -> Result<DynamicObject> {
        let key = ObjectKey::of(&obj)?;
        let k = keys::key(&key)?;
        let expected = key.expected_version(&obj)?;
        let rev = parse_rv(&key, &expected)?;
        // Identity fields are the stored object's, not the writer's: taken
        // from the value this process holds at that revision, compared in
        // the same transaction (one round trip), or else read first.
        let old_kv = match self.kept_at(k.as_bytes(), rev) {
            Some(old) => match self
                .write_over(&key, &k, obj.clone(), rev, &old, true)
                .await?
            {
                Ok(done) => return Ok(done),
                // The transaction's other branch read what is stored now:
                // changed since (a conflict), gone, or at this revision
                // but not the value kept; then written over as below.
                Err(now) => {
                    self.forget(k.as_bytes());
                    now
                }
            },
            None => {
                let mut old = self
                    .client
                    .kv_client()
                    .get(k.clone(), None)
                    .await
                    .map_err(map_err)?;
                old.take_kvs().into_iter().next()
            }
        };
        let Some(old_kv) = old_kv else {
            return Err(StoreError::NotFound(key));
        };
        if old_kv.mod_revision() != rev {
            return Err(StoreError::Conflict { key, expected });
        }
        match self
            .write_over(&key, &k, obj, rev, old_kv.value(), false)
            .await?
        {
            Ok(done) => Ok(done),
            Err(Some(_)) => Err(StoreError::Conflict { key, expected }),
            Err(None) => Err(StoreError::NotFound(key)),
        }
    }

    async fn delete(&self, key: &ObjectKey, resource_version: Option<&str>) -> Result<()> {
        let k = keys::key(key)?;
        self.forget(k.as_bytes());
        let compare = match resource_version {
            Some(rv) => Compare::mod_revision(k.clone(), CompareOp::Equal, parse_rv(key, rv)?),
            None => Compare::create_revision(k.clone(), CompareOp::Greater, 0),
        };
        let mut then = vec![TxnOp::delete(k.clone(), None)];
        then.extend(outline::delete(key.kind, &k));
        let txn = Txn::new()
            .when([compare])
            .and_then(then)
            .or_else([TxnOp::get(k, None)]);
        let resp = self.txn(txn).await?;
        if resp.succeeded() {
            return Ok(());
        }
        match (current(&resp), resource_version) {
            (Some(_), Some(rv)) => Err(StoreError::Conflict {
                key: key.clone(),
                expected: rv.to_string(),
            }),
            _ => Err(StoreError::NotFound(key.clone())),
        }
    }

    async fn watch_raw(
        &self,
        scope: &WatchScope,
        revision: &str,
    ) -> Result<BoxStream<'static, Result<RawEvent>>> {
        let read = match (scope.metadata_only, outline::kept_for(scope.kind)) {
            (true, true) => Read::Outline,
            (true, false) => Read::Metadata,
            (false, _) => Read::Whole,
        };
        // An outline changes only when what its readers read does: it has
        // no heartbeats to pace.
        let client = if PACED_KINDS.contains(&scope.kind) && read != Read::Outline {
            match paced::connect(&self.urls, CONNECT_TIMEOUT, KEEP_ALIVE, true).await {
                Some(client) => client?,
                None => self.client.clone(),
            }
        } else {
            self.client.clone()
        };
        watch::open(client, scope.clone(), revision, read).await
    }

    fn describe(&self) -> String {
        format!("etcd://{}", self.endpoints.join(","))
    }
}
