//! Objects whose checks depend on their stored version: a Service being
//! updated first loses what its old type left behind and the update did
//! not change (as the API server's `PrepareForUpdate` does, before it
//! validates), so it is checked only once the stored Service is read.
//! Still before anything is written: a file with one refused document
//! writes nothing.

use tartan_api::store::{Datastore, DynamicObject, StoreError};
use tartan_api::validate::{depends_on_stored, prepare_update, validate};

use super::describe;
use super::docs::DocError;
use super::objects::Prepared;
use super::write::Mode;

/// `desired`, about to replace `stored`, as the API server would check
/// and store it.
pub fn prepared(desired: &DynamicObject, stored: &DynamicObject) -> DynamicObject {
    let mut o = desired.clone();
    prepare_update(&mut o, stored);
    o
}

/// Checks the objects [`super::objects::Check::ValidateUnlessStored`] left
/// unchecked, each against its stored version when `mode` may update it.
/// Every refusal is reported on stderr; then nothing is to be written.
pub async fn check_against_stored(
    store: &dyn Datastore,
    mode: Mode,
    items: &[Prepared],
) -> anyhow::Result<()> {
    let mut errors = Vec::new();
    for p in items.iter().filter(|p| depends_on_stored(p.key.kind)) {
        let stored = match mode {
            Mode::Create => None,
            Mode::Apply | Mode::Replace => match store.get(&p.key).await {
                Ok(s) => Some(s),
                // Created (apply), or refused when written (replace).
                Err(StoreError::NotFound(_)) => None,
                Err(e) => anyhow::bail!(describe(&e)),
            },
        };
        let obj = match &stored {
            Some(s) => prepared(&p.obj, s),
            None => p.obj.clone(),
        };
        if let Err(e) = validate(&obj) {
            errors.push(DocError {
                origin: p.origin.clone(),
                object: None,
                message: e.to_string(),
            });
        }
    }
    if errors.is_empty() {
        return Ok(());
    }
    for e in &errors {
        eprintln!("error: {e}");
    }
    let (n, total) = (errors.len(), items.len());
    anyhow::bail!(
        "{n} of {total} document{} invalid; nothing was written",
        if total == 1 { " is" } else { "s are" }
    )
}
