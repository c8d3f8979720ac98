//! `remote_list`: the configured remotes (no network).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::remote::RemoteConfig;
use crate::store::ObjectStore;

/// The answer to `remote_list`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RemotesListed {
    /// Every configured remote, by name (no credentials: they are never stored).
    pub remotes: Vec<RemoteConfig>,
}

/// The remotes configured in `store`.
pub fn run(store: &dyn ObjectStore) -> Result<RemotesListed> {
    Ok(RemotesListed {
        remotes: crate::remote::list(store)?,
    })
}
