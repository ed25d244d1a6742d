//! One request in, one response out (bytes to bytes), whatever arrives:
//! the cluster domain from the [`Records`], the rest forwarded. Never
//! panics on input; garbage that is not even a DNS header is dropped.
//!
//! - Not a query (QR set): dropped, so two servers never loop.
//! - A QUERY that is undecodable, or has not exactly one question: FORMERR
//!   (if the header has an id).
//! - Opcode other than QUERY: NOTIMP, decodable or not.
//! - Every reply copies the request's opcode and RD bit (RFC 1035 4.1.1),
//!   an undecodable request's too (read from its header).
//! - EDNS version above 0: BADVERS. An EDNS request gets an OPT back,
//!   with the request's DO bit.
//! - Zone transfers (AXFR, IXFR), of any zone: REFUSED.
//! - An ExternalName's CNAME to a name outside the zone is followed
//!   through the forwarder (see [`Handler::follow`]).
//! - UDP answers larger than the client's limit (512, or its EDNS payload
//!   size up to [`MAX_UDP`]) lose their additional section (no TC) if that is
//!   enough, else are cut to the header and question with TC set, so
//!   the client asks again over TCP.
//! - A UDP reply from the records is kept ([`ReplyCache`]) and sent again,
//!   with the new ID, for the same request bytes until the records change.
//! - A UDP reply from the forwarder's cache is kept likewise, for the rest
//!   of the current second of the handler's clock: its TTLs read at most a
//!   second high, as with any cache counting in whole seconds, and it is
//!   kept only while its answer has at least a second left, so it is never
//!   served expired.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock, RwLock};
use std::time::Instant;

use hickory_proto::op::{Edns, Message, MessageType, Metadata, OpCode, Query, ResponseCode};
use hickory_proto::rr::RecordType;
use prometheus_client::metrics::counter::Counter;

use crate::answer::{Zone, answer};
use crate::cache::Entry;
use crate::forward::{Forwarder, forwardable};
use crate::metrics::{Metrics, QueryLabels};
use crate::records::Records;
use crate::replies::{Reply, ReplyCache};

/// The payload size we advertise and the most we send over UDP, whatever
/// a client advertises: 1,232 bytes fit an IPv6 packet of the minimum MTU
/// unfragmented (the DNS Flag Day 2020 value), and a fragmented UDP
/// answer is lost wherever fragments are (pod MTUs under VXLAN, NAT).
pub const MAX_UDP: u16 = 1232;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Transport {
    Udp,
    Tcp,
}

impl Transport {
    fn name(self) -> &'static str {
        match self {
            Transport::Udp => "udp",
            Transport::Tcp => "tcp",
        }
    }
}

/// Encoded UDP replies kept for the cluster domain ([`ReplyCache`]).
pub const REPLY_CACHE: usize = 16_384;

pub struct Handler {
    pub records: Arc<RwLock<Records>>,
    pub zone: Zone,
    pub forwarder: Option<Arc<Forwarder>>,
    pub metrics: Arc<Metrics>,
    /// Replies to UDP questions answered from the records.
    pub replies: ReplyCache,
    /// Replies to UDP questions answered from the forwarder's cache, by
    /// the second of [`clock_second`] they were made in.
    pub forwarded: ReplyCache,
    /// Whether the first full listing of Services, EndpointSlices and
    /// Namespaces is in. Before, names of the zone are answered SERVFAIL
    /// (as CoreDNS does before its sync): an NXDOMAIN for a Service not
    /// read yet would be cached by clients for the negative TTL.
    pub ready: Arc<AtomicBool>,
}

/// Whole seconds since the first call: the generation of the forwarded
/// replies, which are kept for the second they were made in.
pub fn clock_second(now: Instant) -> u64 {
    static EPOCH: OnceLock<Instant> = OnceLock::new();
    now.saturating_duration_since(*EPOCH.get_or_init(|| now))
        .as_secs()
}

impl Handler {
    /// The response to `req`, or `None` to send nothing.
    pub async fn handle(&self, req: &[u8], transport: Transport) -> Option<Vec<u8>> {
        if req.len() < 12 {
            return None;
        }
        let id = u16::from_be_bytes([req[0], req[1]]);
        // The QR bit: a response is never answered.
        if req[2] & 0x80 != 0 {
            return None;
        }
        if transport == Transport::Udp {
            let generation = self.read_records().generation();
            if let Some(out) = self.replies.get(generation, req) {
                return Some(out);
            }
            if let Some(out) = self.forwarded.get(clock_second(Instant::now()), req) {
                return Some(out);
            }
        }
        let request = match Message::from_vec(req) {
            Ok(m) => m,
            Err(_) => return self.finish(undecodable(id, [req[2], req[3]]), None, transport),
        };
        if request.metadata.message_type != MessageType::Query {
            return None;
        }
        let mut resp = Message::response(id, request.metadata.op_code);
        resp.metadata = Metadata::response_from_request(&request.metadata);
        resp.metadata.recursion_available = self.forwarder.is_some();
        resp.add_queries(request.queries.iter().cloned());
        if let Some(e) = &request.edns {
            let mut edns = Edns::new();
            edns.set_max_payload(MAX_UDP);
            // RFC 3225 3: the DO bit is copied into the response.
            edns.set_dnssec_ok(e.flags().dnssec_ok);
            resp.set_edns(edns);
            if e.version() > 0 {
                resp.metadata.response_code = ResponseCode::BADVERS;
                return self.finish(resp, Some(&request), transport);
            }
        }
        if request.metadata.op_code != OpCode::Query {
            resp.metadata.response_code = ResponseCode::NotImp;
            return self.finish(resp, Some(&request), transport);
        }
        if request.queries.len() != 1 {
            resp.metadata.response_code = ResponseCode::FormErr;
            return self.finish(resp, Some(&request), transport);
        }
        let q = &request.queries[0];
        // No zone transfers, of the cluster zone or any other.
        if matches!(q.query_type(), RecordType::AXFR | RecordType::IXFR) {
            resp.metadata.response_code = ResponseCode::Refused;
            return self.finish(resp, Some(&request), transport);
        }
        let (local, generation) = {
            let records = self.read_records();
            (answer(&records, &self.zone, q), records.generation())
        };
        if local.is_some() && !self.ready.load(Ordering::Acquire) {
            resp.metadata.response_code = ResponseCode::ServFail;
            return self.finish(resp, Some(&request), transport);
        }
        if let Some(a) = local {
            // An error is no authoritative answer.
            resp.metadata.authoritative =
                matches!(a.rcode, ResponseCode::NoError | ResponseCode::NXDomain);
            resp.metadata.response_code = a.rcode;
            resp.add_answers(a.answers);
            resp.add_authorities(a.authorities);
            resp.add_additionals(a.additionals);
            if let Some(target) = a.follow {
                return self
                    .follow(resp, &request, req, target, q.query_type(), transport)
                    .await;
            }
            let (out, counter) = self.encode(resp, Some(&request), transport);
            if transport == Transport::Udp
                && let Some(bytes) = &out
            {
                self.keep(&self.replies, generation, req, bytes, counter, None);
            }
            return out;
        } else if !forwardable(q) {
            resp.metadata.response_code = ResponseCode::Refused;
        } else if let Some(f) = &self.forwarder {
            match f.resolve(q).await {
                Ok(e) => return self.upstream_reply(resp, &request, req, &e, transport),
                Err(_) => resp.metadata.response_code = ResponseCode::ServFail,
            }
        } else {
            resp.metadata.response_code = ResponseCode::ServFail;
        }
        self.finish(resp, Some(&request), transport)
    }

    /// `resp` ends in a CNAME to `target`, outside the zone: the
    /// forwarder's answer for `target` (same type) is added, as CoreDNS
    /// resolves an ExternalName Service's target, so that a stub resolver
    /// gets the addresses in one reply. The rcode becomes the target's
    /// (RFC 6604). Without a forwarder, or when it fails, the CNAME is sent
    /// alone. The reply depends on the upstream's TTLs, so it is kept as
    /// a forwarded one, never with the records' replies.
    async fn follow(
        &self,
        resp: Message,
        request: &Message,
        req: &[u8],
        target: hickory_proto::rr::Name,
        qtype: RecordType,
        transport: Transport,
    ) -> Option<Vec<u8>> {
        let Some(f) = &self.forwarder else {
            return self.finish(resp, Some(request), transport);
        };
        match f.resolve(&Query::query(target, qtype)).await {
            Ok(e) => self.upstream_reply(resp, request, req, &e, transport),
            Err(_) => self.finish(resp, Some(request), transport),
        }
    }

    /// `resp` with the upstream's answer `e` added (TTLs aged, its rcode),
    /// encoded; over UDP kept with the forwarded replies for the current
    /// second while the answer has one left.
    fn upstream_reply(
        &self,
        mut resp: Message,
        request: &Message,
        req: &[u8],
        e: &Entry,
        transport: Transport,
    ) -> Option<Vec<u8>> {
        let now = Instant::now();
        let (an, ns, ad) = e.aged(now);
        resp.metadata.response_code = e.rcode;
        resp.add_answers(an);
        resp.add_authorities(ns);
        resp.add_additionals(ad);
        let (out, counter) = self.encode(resp, Some(request), transport);
        if transport == Transport::Udp
            && e.remaining(now) >= 1
            && let Some(bytes) = &out
        {
            let hit = Some(self.metrics.cache_hits.clone());
            self.keep(&self.forwarded, clock_second(now), req, bytes, counter, hit);
        }
        out
    }

    /// Keep the encoded UDP reply to `req` in `cache` at `generation`.
    /// `hit`: counted at each reuse besides the query counter.
    fn keep(
        &self,
        cache: &ReplyCache,
        generation: u64,
        req: &[u8],
        bytes: &[u8],
        counter: Counter,
        hit: Option<Counter>,
    ) {
        let cut = bytes.get(2).is_some_and(|b| b & 0x02 != 0);
        let reply = Reply {
            bytes: bytes.to_vec(),
            counter,
            truncated: cut.then(|| self.metrics.truncated.clone()),
            hit,
        };
        cache.insert(generation, req, reply);
    }

    fn read_records(&self) -> std::sync::RwLockReadGuard<'_, Records> {
        self.records.read().unwrap_or_else(|e| e.into_inner())
    }

    /// Count, encode, and cut to size for UDP.
    fn finish(
        &self,
        resp: Message,
        request: Option<&Message>,
        transport: Transport,
    ) -> Option<Vec<u8>> {
        self.encode(resp, request, transport).0
    }

    /// [`Self::finish`], with the counter the query was counted in.
    fn encode(
        &self,
        resp: Message,
        request: Option<&Message>,
        transport: Transport,
    ) -> (Option<Vec<u8>>, Counter) {
        let qtype = resp
            .queries
            .first()
            .map_or(Cow::Borrowed("none"), |q| type_name(q.query_type()));
        let counter = self
            .metrics
            .queries
            .get_or_create(&QueryLabels {
                qtype,
                rcode: rcode_name(resp.metadata.response_code),
                transport: transport.name(),
            })
            .clone();
        counter.inc();
        let bytes = match crate::wire::encode(&resp) {
            Ok(b) => b,
            Err(_) => {
                let mut m = Message::error_msg(
                    resp.metadata.id,
                    resp.metadata.op_code,
                    ResponseCode::ServFail,
                );
                m.add_queries(resp.queries.iter().cloned());
                return (crate::wire::encode(&m).ok(), counter);
            }
        };
        let limit = match transport {
            Transport::Tcp => usize::from(u16::MAX),
            Transport::Udp => usize::from(
                request
                    .and_then(|r| r.edns.as_ref())
                    .map_or(512, |e| e.max_payload().clamp(512, MAX_UDP)),
            ),
        };
        if bytes.len() <= limit {
            return (Some(bytes), counter);
        }
        // RFC 2181 9: additional records that do not fit are left out
        // without setting TC; only answers or authorities that do not fit
        // truncate.
        if !resp.additionals.is_empty() {
            let mut lean = resp.clone();
            lean.additionals.clear();
            if let Ok(b) = crate::wire::encode(&lean)
                && b.len() <= limit
            {
                return (Some(b), counter);
            }
        }
        if transport == Transport::Udp {
            self.metrics.truncated.inc();
        }
        (crate::wire::encode(&resp.truncate()).ok(), counter)
    }
}

/// The answer to a request (QR clear) whose body does not decode, made
/// from its ID and flag bytes (the header's third and fourth) alone: the
/// opcode and RD (and CD) are copied, as RFC 1035 4.1.1 asks; an opcode
/// other than QUERY is NOTIMP whatever follows it (we implement no other,
/// so its body is not ours to judge); a QUERY that does not decode is
/// FORMERR.
fn undecodable(id: u16, flags: [u8; 2]) -> Message {
    let op_code = OpCode::from_u8((flags[0] >> 3) & 0x0f);
    let rcode = if op_code == OpCode::Query {
        ResponseCode::FormErr
    } else {
        ResponseCode::NotImp
    };
    let mut m = Message::error_msg(id, op_code, rcode);
    m.metadata.recursion_desired = flags[0] & 0x01 != 0;
    m.metadata.checking_disabled = flags[1] & 0x10 != 0;
    m
}

/// The rcode's mnemonic as DNS tools print it.
pub fn rcode_name(r: ResponseCode) -> Cow<'static, str> {
    Cow::Borrowed(match u16::from(r) {
        0 => "NOERROR",
        1 => "FORMERR",
        2 => "SERVFAIL",
        3 => "NXDOMAIN",
        4 => "NOTIMP",
        5 => "REFUSED",
        16 => "BADVERS",
        n => return Cow::Owned(n.to_string()),
    })
}

/// A record type's mnemonic (`A`, `SRV`), or `TYPEn` for one without.
pub fn type_name(t: RecordType) -> Cow<'static, str> {
    match t {
        RecordType::Unknown(_) => Cow::Owned(t.to_string()),
        t => Cow::Borrowed(<&'static str>::from(t)),
    }
}

#[cfg(test)]
#[path = "handler_tests.rs"]
mod tests;

/// Whether `bytes` decode as a DNS message (for the fuzz target's checks).
pub fn decodes(bytes: &[u8]) -> bool {
    Message::from_vec(bytes).is_ok()
}
