//! Writing a message's header (RFC 4271 4.1) for the encoders: the marker
//! and type first, the length once the body is written. Kept apart from
//! header checking, which reports errors as NOTIFICATIONs, so that the
//! NOTIFICATION encoder can use it without a circle.

/// The all-ones marker every message begins with.
pub(super) const MARKER: [u8; 16] = [0xff; 16];

/// Starts a message: appends a header whose length is fixed up by
/// [`finish_message`]. Returns the offset of the message in `out`.
pub(super) fn start_message(out: &mut Vec<u8>, ty: u8) -> usize {
    let start = out.len();
    out.extend_from_slice(&MARKER);
    out.extend_from_slice(&[0, 0, ty]);
    start
}

/// Writes the length of the message that begins at `start` and runs to the
/// end of `out`. Callers keep messages within `u16` range.
pub(super) fn finish_message(out: &mut [u8], start: usize) {
    let len = u16::try_from(out.len() - start).unwrap_or(u16::MAX);
    out[start + 16..start + 18].copy_from_slice(&len.to_be_bytes());
}
