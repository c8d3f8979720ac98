//! `remote_add`: validate, probe the server, create the descriptor, then store
//! the config (`y/<name>`). On any failure nothing is stored.
//!
//! Split in two so the daemon runs the network part ([`prepare`]) outside its
//! name lock and the checks that race branch creation and another add of the
//! same name ([`commit`]) inside it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::refs::remote_names;
use crate::remote::client::Client;
use crate::remote::{RemoteConfig, probe, registry};
use crate::store::ObjectStore;

/// The answer to `remote_add`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RemoteAdded {
    /// The config stored.
    pub remote: RemoteConfig,
    /// The probe found conditional writes honoured (as `remote.conditional_writes`).
    pub conditional_writes: bool,
    /// What the probe found the server does not honour (accepted with
    /// `single_writer`).
    #[serde(default)]
    pub probe_failures: Vec<String>,
    /// The remote had no descriptor and this add wrote it.
    #[serde(default)]
    pub descriptor_created: bool,
}

/// A probed config, ready to be stored.
pub struct Ready {
    config: RemoteConfig,
    failures: Vec<String>,
    descriptor_created: bool,
}

fn exists(name: &str) -> Error {
    Error::Conflict(format!(
        "remote {name:?} already exists (remove it first: treefork remote rm {name})"
    ))
}

/// Check the new remote's name, probe the server and create the descriptor
/// (network; no store change). `config` is the request's, as
/// [`RemoteConfig::new`] validated it.
pub fn prepare(store: &dyn ObjectStore, config: RemoteConfig) -> Result<Ready> {
    if remote_names::exists(store, &config.name)? {
        return Err(exists(&config.name));
    }
    remote_names::refuse_remote_clash(store, &config.name)?;
    let client = registry::connect(&config)?;
    prepare_with(config, &client)
}

/// [`prepare`]'s network part against `client`.
fn prepare_with(mut config: RemoteConfig, client: &Client) -> Result<Ready> {
    let p = probe::probe(client)?;
    config.conditional_writes = p.conditional_writes();
    if !p.conditional_writes() && !config.single_writer {
        return Err(Error::Invalid(format!(
            "remote {}: the server at {} does not honour conditional writes ({}), so refs cannot be updated safely by several writers; pass --single-writer if this store is the only one that will ever write to {}",
            config.name,
            config.endpoint,
            p.failures.join("; "),
            config.url
        )));
    }
    let descriptor_created = probe::ensure_descriptor(client, config.content_put())?;
    Ok(Ready {
        config,
        failures: p.failures,
        descriptor_created,
    })
}

/// Serve `remote_add` on `h`: probe outside its name lock, store under it, then
/// let lazy reads use the new remote.
pub fn run<H: crate::ops::Host>(h: &H, config: RemoteConfig) -> Result<RemoteAdded> {
    let store = h.store();
    let ready = prepare(&*store, config)?;
    let v = {
        let _names = h.name_lock();
        commit(&*store, ready)?
    };
    h.remotes_changed()?;
    Ok(v)
}

/// Store the config (checks again: another add of the name, a branch whose first
/// component is the name).
pub fn commit(store: &dyn ObjectStore, ready: Ready) -> Result<RemoteAdded> {
    let name = ready.config.name.clone();
    if remote_names::exists(store, &name)? {
        return Err(exists(&name));
    }
    remote_names::refuse_remote_clash(store, &name)?;
    store
        .commit(vec![
            MetaOp::Expect(meta::remote_key(&name), None),
            ready.config.op(),
        ])
        .map_err(|e| match e {
            Error::Conflict(_) => exists(&name),
            e => e,
        })?;
    registry::forget(store, &name);
    Ok(RemoteAdded {
        conditional_writes: ready.config.conditional_writes,
        remote: ready.config,
        probe_failures: ready.failures,
        descriptor_created: ready.descriptor_created,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::remote::config;
    use crate::store::MemStore;

    fn cfg(name: &str) -> RemoteConfig {
        RemoteConfig::new(name, "s3://bkt/p", "http://127.0.0.1:9", None, false).unwrap()
    }

    #[test]
    fn add_probes_stores_and_refuses_a_second_add() {
        let s = MemStore::default();
        let c = Client::memory("origin");
        let ready = prepare_with(cfg("origin"), &c).unwrap();
        assert!(ready.descriptor_created);
        let v = commit(&s, ready).unwrap();
        assert!(v.conditional_writes);
        assert!(
            config::get(&s, "origin")
                .unwrap()
                .unwrap()
                .conditional_writes
        );
        assert!(
            c.get(
                crate::remote::layout::DESCRIPTOR,
                crate::remote::layout::Body::Descriptor
            )
            .unwrap()
            .is_some()
        );
        // Again (the descriptor exists now): conflict at commit.
        let ready = prepare_with(cfg("origin"), &c).unwrap();
        assert!(!ready.descriptor_created);
        assert!(matches!(commit(&s, ready), Err(Error::Conflict(_))));
        assert!(matches!(
            prepare(
                &s,
                RemoteConfig::new("origin", "s3://bkt", "http://127.0.0.1:9", None, false).unwrap()
            ),
            Err(Error::Conflict(_))
        ));
    }
}
