//! `remote_list`: the configured remotes (no network).

use serde_json::{Value, json};

use crate::error::Result;
use crate::store::ObjectStore;

pub fn run(store: &dyn ObjectStore) -> Result<Value> {
    Ok(json!({ "remotes": crate::remote::list(store)? }))
}
