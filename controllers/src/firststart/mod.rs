//! First start: the default IPPools from the ConfigMap
//! `tartan-system/tartan-config`, created once, when no pool exists.
//!
//! The leader runs it (one writer, after the Lease says so) until it has
//! settled, then never again in this process:
//! - some IPPool exists (readable or not): the operator's pools stand;
//!   nothing is read or written, not even after they are deleted;
//! - otherwise the ConfigMap is read (absent: every key's default) and
//!   checked as a whole ([`TartanConfig::parse`], the API server's IPPool
//!   rules included); a problem is logged once per change, counted in
//!   `tartan_controllers_config_problems`, and nothing is written until
//!   the ConfigMap is fixed;
//! - the pools it names are created; one the store refuses is tried again
//!   next pass (another that exists by then is not touched), so a pass
//!   cut short never leaves the second pool of a dual-stack cluster out.

#[cfg(test)]
mod tests;

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::ConfigMap;
use tartan_api::Kind;
use tartan_api::resources::IpPool;
use tartan_api::store::typed::TypedStore;
use tartan_api::store::{Datastore, StoreError};
use tartan_api::tartan_config::{CONFIG_MAP, ConfigError, TartanConfig};
use tracing::{error, info, warn};

/// Why a pass did not settle.
#[derive(Debug, thiserror::Error)]
pub enum FirstStartError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// What a pass found or did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Settled before: nothing done.
    Settled,
    /// Pools exist (this many): none created.
    PoolsExist(usize),
    /// The ConfigMap names no pool (both CIDRs empty).
    NoneConfigured,
    /// These pools were created (or found created under their names).
    Created(Vec<String>),
}

#[derive(Debug)]
enum State {
    Pending,
    /// Pools decided on, not yet all created.
    Creating(Vec<IpPool>),
    Settled,
}

/// The first-start controller of one process.
#[derive(Debug)]
pub struct FirstStart {
    namespace: String,
    state: State,
    /// The ConfigMap problem last logged, so that it is logged once.
    logged: Option<String>,
}

/// The settings of a ConfigMap; `binaryData` is not read, so a key there
/// is a problem rather than a setting not in force.
fn settings(cm: &ConfigMap) -> Result<TartanConfig, ConfigError> {
    let empty = BTreeMap::new();
    let parsed = TartanConfig::parse(cm.data.as_ref().unwrap_or(&empty));
    let binary: Vec<(String, String)> = cm
        .binary_data
        .iter()
        .flatten()
        .map(|(k, _)| {
            (
                format!("binaryData[{k}]"),
                "settings are read from data only".to_string(),
            )
        })
        .collect();
    match (parsed, binary.is_empty()) {
        (Ok(c), true) => Ok(c),
        (Ok(_), false) => Err(ConfigError { problems: binary }),
        (Err(mut e), _) => {
            e.problems.extend(binary);
            Err(e)
        }
    }
}

impl FirstStart {
    /// Reads the ConfigMap in `namespace`.
    pub fn new(namespace: &str) -> FirstStart {
        FirstStart {
            namespace: namespace.to_string(),
            state: State::Pending,
            logged: None,
        }
    }

    /// Nothing is left to do in this process.
    pub fn settled(&self) -> bool {
        matches!(self.state, State::Settled)
    }

    /// One pass; see the module's description.
    pub async fn pass(&mut self, store: &dyn Datastore) -> Result<Outcome, FirstStartError> {
        if let State::Pending = self.state {
            // Raw: a pool that does not parse still is the operator's.
            let existing = store.list(Kind::IpPool, None).await?.items.len();
            if existing > 0 {
                info!(
                    pools = existing,
                    "IPPools exist; no default pool is created"
                );
                self.state = State::Settled;
                return Ok(Outcome::PoolsExist(existing));
            }
            let config = match self.read(store).await {
                Ok(c) => c,
                Err(FirstStartError::Config(e)) => {
                    let text = e.to_string();
                    if self.logged.as_ref() != Some(&text) {
                        error!(problems = %text, "no IPPool exists and the ConfigMap is invalid: no default pool is created until it is fixed");
                        self.logged = Some(text);
                    }
                    return Err(e.into());
                }
                Err(e) => return Err(e),
            };
            let pools = config.default_pools();
            if pools.is_empty() {
                info!("no IPPool exists and {CONFIG_MAP} names none (both CIDRs empty)");
                self.state = State::Settled;
                return Ok(Outcome::NoneConfigured);
            }
            self.state = State::Creating(pools);
        }
        let State::Creating(pools) = &mut self.state else {
            return Ok(Outcome::Settled);
        };
        let mut created = Vec::new();
        while let Some(pool) = pools.first() {
            let name = pool.metadata.name.clone().unwrap_or_default();
            match store.create_typed(pool).await {
                Ok(_) => {
                    info!(pool = %name, cidr = %pool.spec.cidr, vxlan = ?pool.spec.vxlan_mode, ipip = ?pool.spec.ipip_mode, "default IPPool created")
                }
                Err(StoreError::AlreadyExists(_)) => {
                    warn!(pool = %name, "an IPPool of the default pool's name exists; left as it is")
                }
                Err(e) => return Err(e.into()),
            }
            created.push(name);
            pools.remove(0);
        }
        self.state = State::Settled;
        Ok(Outcome::Created(created))
    }

    async fn read(&self, store: &dyn Datastore) -> Result<TartanConfig, FirstStartError> {
        match store
            .get_typed::<ConfigMap>(Some(&self.namespace), CONFIG_MAP)
            .await
        {
            Ok(cm) => Ok(settings(&cm)?),
            Err(StoreError::NotFound(_)) => {
                warn!(namespace = %self.namespace, "no ConfigMap {CONFIG_MAP}: the default pool takes every key's default");
                Ok(TartanConfig::default())
            }
            Err(e) => Err(e.into()),
        }
    }
}
