//! `tartanctl check`: every object in the datastore that does not read as
//! its kind (the agents cannot read it either: a policy among them
//! isolates what it would govern), with the field at fault. Exits
//! non-zero when there is any.

use anyhow::{Result, bail};
use serde::Serialize;
use tartan_api::Kind;
use tartan_api::store::readable;

use crate::cli::OutputFormat;
use crate::resource::Ctx;
use crate::table::Table;

/// One unreadable object.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Finding {
    pub kind: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
    pub reason: String,
}

/// The unreadable objects of every kind, and how many objects were read.
pub async fn scan(cx: &Ctx) -> Result<(Vec<Finding>, usize)> {
    let mut found = Vec::new();
    let mut read = 0;
    for kind in Kind::all() {
        let listing = cx
            .store
            .list(kind, None)
            .await
            .map_err(|e| anyhow::anyhow!("cannot list {kind}: {e}"))?;
        read += listing.items.len();
        for o in &listing.items {
            if let Err(reason) = readable::check(kind, o) {
                found.push(Finding {
                    kind: kind.to_string(),
                    namespace: o.metadata.namespace.clone(),
                    name: o.metadata.name.clone().unwrap_or_default(),
                    reason,
                });
            }
        }
    }
    Ok((found, read))
}

pub async fn run(cx: &Ctx, output: Option<OutputFormat>) -> Result<()> {
    let (found, read) = scan(cx).await?;
    if output == Some(OutputFormat::Json) {
        println!("{}", serde_json::to_string_pretty(&found)?);
    } else if found.is_empty() {
        println!("ok: all {read} objects in the datastore are readable");
    } else {
        let mut t = Table::new(["KIND", "NAMESPACE", "NAME", "REASON"]);
        for f in &found {
            t.row([
                f.kind.clone(),
                f.namespace.clone().unwrap_or_else(|| "-".into()),
                f.name.clone(),
                f.reason.clone(),
            ]);
        }
        print!("{}", t.render());
    }
    if found.is_empty() {
        Ok(())
    } else {
        bail!(
            "{} unreadable object(s); agents report them and isolate what an unreadable policy would govern, until a readable version replaces it",
            found.len()
        )
    }
}
