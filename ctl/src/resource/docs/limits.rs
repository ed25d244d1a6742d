//! How much one source may hold: bytes per document and per object (the
//! API server's and etcd's limits), documents per source, and a source's
//! size before it is read whole.

/// The API server's limit on a request body: a document is one request.
pub const MAX_DOCUMENT_BYTES: usize = 3 * 1024 * 1024;
/// The largest object etcd keeps (the API server's limit on an object).
pub const MAX_OBJECT_BYTES: usize = 1536 * 1024;
/// Documents in one source.
pub const MAX_DOCUMENTS: usize = 10_000;
/// A source is refused before it is read whole past this size.
pub const MAX_SOURCE_BYTES: u64 = 64 * 1024 * 1024;

/// Refuses a source larger than [`MAX_SOURCE_BYTES`].
pub fn check_source_size(name: &str, len: u64) -> anyhow::Result<()> {
    if len > MAX_SOURCE_BYTES {
        anyhow::bail!(
            "{name}: larger than {} MiB; split it into several files",
            MAX_SOURCE_BYTES / 1024 / 1024
        );
    }
    Ok(())
}
