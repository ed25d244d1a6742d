//! `tartanctl delete KIND NAME…` and `delete -f FILE`.

use anyhow::bail;
use tartan_api::store::{ObjectKey, StoreError};

use super::names::{reference, resolve_kind};
use super::objects::Check;
use super::{Ctx, Progress, describe, load};
use crate::cli::DeleteArgs;
use crate::output;

pub async fn run(ctx: &Ctx, args: DeleteArgs) -> anyhow::Result<()> {
    let keys: Vec<ObjectKey> = if !args.files.is_empty() {
        load(&args.files, ctx.namespace.as_deref(), Check::KeyOnly)?
            .into_iter()
            .map(|p| p.key)
            .collect()
    } else {
        let Some((kind, names)) = args.words.split_first() else {
            bail!("say what to delete: tartanctl delete KIND NAME... or tartanctl delete -f FILE");
        };
        let kind = resolve_kind(kind)?;
        if names.is_empty() {
            bail!("name the {kind} object(s) to delete: tartanctl delete {kind} NAME...");
        }
        let namespace = ctx.namespace_for(kind);
        names
            .iter()
            .map(|n| ObjectKey::new(kind, namespace.as_deref(), n))
            .collect()
    };
    let refs = keys.iter().map(reference).collect();
    let mut progress = Progress::new(refs, "deleted", args.continue_on_error);
    for (i, key) in keys.iter().enumerate() {
        match ctx.store.delete(key, None).await {
            Ok(()) => {
                progress.succeeded();
                output::print(&format!("{} deleted\n", reference(key)))?;
            }
            Err(StoreError::NotFound(_)) if args.ignore_not_found => progress.succeeded(),
            Err(e) => {
                if let Some(stop) = progress.failed(i, &describe(&e)) {
                    return Err(stop);
                }
            }
        }
    }
    progress.finish()
}
