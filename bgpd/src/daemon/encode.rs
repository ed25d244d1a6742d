//! Output batches from the RIB → UPDATE bytes for one peer.
use crate::rib::OutBatch;
use crate::wire::{self, EncodeOptions};
use tracing::warn;

/// Appends the batch's messages to `out`; returns how many were written.
pub fn encode_batch(batch: &OutBatch, opts: &EncodeOptions, out: &mut Vec<u8>) -> u64 {
    let start = out.len();
    match batch {
        OutBatch::Announce {
            family,
            attrs,
            prefixes,
        } => {
            if let Err(e) = wire::encode_announce(attrs, *family, prefixes, opts, out) {
                // Attributes too large for one message: the routes cannot be
                // sent at all. Say so rather than fail the session.
                warn!(%family, prefixes = prefixes.len(), error = %e, "cannot encode announcement; routes not sent");
            }
        }
        OutBatch::Withdraw { family, prefixes } => {
            wire::encode_withdraw(*family, prefixes, opts, out);
        }
    }
    count_messages(&out[start..])
}

/// Counts the messages in a buffer of whole messages we encoded.
pub fn count_messages(mut buf: &[u8]) -> u64 {
    let mut n = 0;
    while buf.len() >= wire::HEADER_LEN {
        let len = usize::from(u16::from_be_bytes([buf[16], buf[17]]));
        if len < wire::HEADER_LEN || len > buf.len() {
            break;
        }
        buf = &buf[len..];
        n += 1;
    }
    n
}
