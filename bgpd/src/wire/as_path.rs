//! AS_PATH and AS4_PATH values (RFC 4271 4.3, RFC 5065, RFC 6793).

use crate::model::{AsPath, AsSegment};

/// AS_TRANS (RFC 6793): stands in for a 4-octet AS towards a 2-octet peer.
pub const AS_TRANS: u32 = 23456;

const AS_SET: u8 = 1;
const AS_SEQUENCE: u8 = 2;
const AS_CONFED_SEQUENCE: u8 = 3;
const AS_CONFED_SET: u8 = 4;

/// Parses an AS_PATH (or AS4_PATH) value with `width`-octet AS numbers.
/// The error says why it is malformed (RFC 7606 7.2).
pub(super) fn decode(value: &[u8], width: usize) -> Result<AsPath, String> {
    let mut segments = Vec::new();
    let mut rest = value;
    while !rest.is_empty() {
        let [ty, count, body @ ..] = rest else {
            return Err("segment header truncated".into());
        };
        let count = usize::from(*count);
        if count == 0 {
            return Err("zero-length segment".into());
        }
        let bytes = body
            .get(..count * width)
            .ok_or_else(|| "segment overruns the attribute".to_string())?;
        let asns: Vec<u32> = if width == 4 {
            bytes
                .chunks_exact(4)
                .map(|c| u32::from_be_bytes([c[0], c[1], c[2], c[3]]))
                .collect()
        } else {
            bytes
                .chunks_exact(2)
                .map(|c| u32::from(u16::from_be_bytes([c[0], c[1]])))
                .collect()
        };
        // RFC 7607 2: AS 0 is reserved and makes the path malformed.
        if asns.contains(&0) {
            return Err("AS 0".into());
        }
        segments.push(match *ty {
            AS_SET => AsSegment::Set(asns),
            AS_SEQUENCE => AsSegment::Sequence(asns),
            AS_CONFED_SEQUENCE => AsSegment::ConfedSequence(asns),
            AS_CONFED_SET => AsSegment::ConfedSet(asns),
            other => return Err(format!("unknown segment type {other}")),
        });
        rest = &body[count * width..];
    }
    Ok(AsPath { segments })
}

/// Encodes `path` with `width`-octet AS numbers (2: AS_TRANS for any AS
/// above 65535). Empty segments are left out; segments longer than 255
/// are split, since the count is one octet.
pub(super) fn encode(path: &AsPath, width: usize, out: &mut Vec<u8>) {
    for seg in &path.segments {
        let ty = match seg {
            AsSegment::Set(_) => AS_SET,
            AsSegment::Sequence(_) => AS_SEQUENCE,
            AsSegment::ConfedSequence(_) => AS_CONFED_SEQUENCE,
            AsSegment::ConfedSet(_) => AS_CONFED_SET,
        };
        for chunk in seg.asns().chunks(255) {
            out.push(ty);
            out.push(chunk.len() as u8);
            for &asn in chunk {
                if width == 4 {
                    out.extend_from_slice(&asn.to_be_bytes());
                } else {
                    out.extend_from_slice(&two_octet(asn).to_be_bytes());
                }
            }
        }
    }
}

/// The 2-octet form of an AS: itself, or AS_TRANS.
pub(super) fn two_octet(asn: u32) -> u16 {
    u16::try_from(asn).unwrap_or(AS_TRANS as u16)
}

/// Whether a 2-octet peer needs AS4_PATH to learn this path (RFC 6793 4.2.2).
pub(super) fn needs_as4_path(path: &AsPath) -> bool {
    path.segments
        .iter()
        .filter(|s| !is_confed(s))
        .any(|s| s.asns().iter().any(|&a| a > 0xffff))
}

/// The AS4_PATH to send: the path without confederation segments, which
/// RFC 6793 3 keeps out of AS4_PATH.
pub(super) fn as4_path_of(path: &AsPath) -> AsPath {
    AsPath {
        segments: path
            .segments
            .iter()
            .filter(|s| !is_confed(s))
            .cloned()
            .collect(),
    }
}

pub(super) fn is_confed(seg: &AsSegment) -> bool {
    matches!(seg, AsSegment::ConfedSequence(_) | AsSegment::ConfedSet(_))
}

/// Rebuilds the path from a 2-octet peer's AS_PATH and AS4_PATH
/// (RFC 6793 4.2.3): if AS_PATH holds fewer AS numbers than AS4_PATH,
/// AS4_PATH is ignored; otherwise the leading AS numbers of AS_PATH that
/// AS4_PATH lacks are put in front of AS4_PATH. Counting follows RFC 4271
/// 9.1.2.2 (a SET counts as one, confederation segments do not count).
pub(super) fn merge_as4(as_path: AsPath, as4_path: AsPath) -> AsPath {
    let n = as_path.len_for_decision();
    let n4 = as4_path.len_for_decision();
    if n < n4 {
        return as_path;
    }
    let mut need = n - n4;
    let mut segments = Vec::with_capacity(as_path.segments.len() + as4_path.segments.len());
    for seg in as_path.segments {
        if need == 0 && !is_confed(&seg) {
            break;
        }
        match seg {
            AsSegment::Sequence(v) => {
                let take = need.min(v.len());
                need -= take;
                segments.push(AsSegment::Sequence(v[..take].to_vec()));
            }
            AsSegment::Set(v) => {
                need -= 1;
                segments.push(AsSegment::Set(v));
            }
            confed => segments.push(confed),
        }
    }
    let mut rest = as4_path.segments.into_iter();
    // AS_PATH's head and AS4_PATH's tail of one AS_SEQUENCE become one
    // segment again, as the path was before the 2-octet speaker saw it.
    if let (Some(AsSegment::Sequence(head)), Some(AsSegment::Sequence(tail))) =
        (segments.last_mut(), rest.as_slice().first())
    {
        head.extend_from_slice(tail);
        rest.next();
    }
    segments.extend(rest);
    AsPath { segments }
}
