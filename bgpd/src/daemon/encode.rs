//! Output batches from the RIB → UPDATE bytes for one peer.
use crate::rib::OutBatch;
use crate::wire::{self, EncodeOptions};
use tracing::warn;

/// What `encode_batch` wrote.
#[derive(Debug, PartialEq, Eq)]
pub struct Encoded {
    pub messages: u64,
    /// The batch was an announcement that could not be encoded, and a
    /// withdraw of its prefixes went out instead.
    pub withdrawn_instead: bool,
}

/// Appends the batch's messages to `out`.
pub fn encode_batch(batch: &OutBatch, opts: &EncodeOptions, out: &mut Vec<u8>) -> Encoded {
    let start = out.len();
    let mut withdrawn_instead = false;
    match batch {
        OutBatch::Announce {
            family,
            attrs,
            prefixes,
        } => {
            if let Err(e) = wire::encode_announce(attrs, *family, prefixes, opts, out) {
                // Attributes too large for one message: the routes cannot be
                // sent, and RFC 4271 9.2 then wants what the peer holds for
                // those prefixes withdrawn rather than left stale.
                warn!(%family, prefixes = prefixes.len(), error = %e, "cannot encode announcement; withdrawing the prefixes instead");
                out.truncate(start);
                wire::encode_withdraw(*family, prefixes, opts, out);
                withdrawn_instead = true;
            }
        }
        OutBatch::Withdraw { family, prefixes } => {
            wire::encode_withdraw(*family, prefixes, opts, out);
        }
    }
    Encoded {
        messages: count_messages(&out[start..]),
        withdrawn_instead,
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{Family, NextHop, PathAttrs, RawAttr};
    use crate::wire::{DecodeOptions, Message};
    use std::sync::Arc;

    /// RFC 4271 9.2: a route that cannot be sent must not be left
    /// advertised as it was; its prefixes are withdrawn.
    #[test]
    fn an_announcement_too_large_to_encode_is_sent_as_a_withdraw() {
        let attrs = PathAttrs {
            next_hop: NextHop::V4("192.0.2.1".parse().unwrap()),
            unknown: vec![RawAttr {
                flags: RawAttr::OPTIONAL | RawAttr::TRANSITIVE,
                type_code: 99,
                value: vec![0; 5000],
            }],
            ..PathAttrs::default()
        };
        let prefixes = vec![
            "10.1.0.0/16".parse().unwrap(),
            "10.2.0.0/16".parse().unwrap(),
        ];
        let batch = OutBatch::Announce {
            family: Family::Ipv4Unicast,
            attrs: Arc::new(attrs),
            prefixes: prefixes.clone(),
        };
        let mut out = Vec::new();
        let e = encode_batch(&batch, &EncodeOptions::default(), &mut out);
        assert_eq!(
            e,
            Encoded {
                messages: 1,
                withdrawn_instead: true
            }
        );
        let Ok(Message::Update(u)) = wire::decode(&out, &DecodeOptions::default()) else {
            panic!("not an UPDATE");
        };
        assert_eq!(u.withdrawn, prefixes);
        assert!(u.reach.is_empty());
    }
}
