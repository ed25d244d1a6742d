//! STATUS: can an ADD succeed now? The datastore answers and a pool that
//! applies to this node has room.

use super::context::{Context, ipam_error};
use crate::spec::{CniError, error::code};

pub async fn status(cx: &Context) -> Result<(), CniError> {
    cx.ipam.check_room().await.map_err(|e| {
        let inner = ipam_error(e);
        CniError::new(
            code::NOT_AVAILABLE,
            format!("tartan cannot add pods now: {}", inner.msg),
        )
    })
}
