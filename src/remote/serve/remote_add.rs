//! `remote_add`: validate, probe the server, create the descriptor, then store
//! the config (`y/<name>`). On any failure nothing is stored. Credentials the
//! request carried are used for the probe and then handed to the registry (in
//! memory only). Adding a remote again with the same URL, endpoint, region and
//! writer mode probes it again and refreshes its credentials (`updated`): how
//! credentials reach a daemon started without them.
//!
//! Split in two so the daemon runs the network part ([`prepare`]) outside its
//! name lock and the checks that race branch creation and another add of the
//! same name ([`commit`]) inside it.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::refs::remote_names;
use crate::remote::client::{Client, Credentials};
use crate::remote::{RemoteConfig, config as remote_config, probe, registry};
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
    /// The remote was already configured so: it was probed again and its
    /// credentials refreshed (nothing else changed).
    #[serde(default)]
    pub updated: bool,
}

/// A probed config, ready to be stored.
pub struct Ready {
    config: RemoteConfig,
    failures: Vec<String>,
    descriptor_created: bool,
    /// The stored config this add refreshes (same place), if any.
    replaces: Option<RemoteConfig>,
    /// Credentials the request carried.
    given: Option<Credentials>,
}

/// Whether two configs name the same place the same way (all the request sets).
fn same_place(a: &RemoteConfig, b: &RemoteConfig) -> bool {
    a.name == b.name
        && a.url == b.url
        && a.endpoint == b.endpoint
        && a.region == b.region
        && a.single_writer == b.single_writer
}

fn exists(name: &str) -> Error {
    Error::Conflict(format!(
        "remote {name:?} already exists (remove it first: treefork remote rm {name})"
    ))
}

/// Check the new remote's name, probe the server (with `given` credentials, else
/// the process's) and create the descriptor (network; no store change). `config`
/// is the request's, as [`RemoteConfig::new`] validated it. A remote already
/// configured the same way is probed again (to refresh its credentials); one
/// configured otherwise is a conflict.
pub fn prepare(
    store: &dyn ObjectStore,
    config: RemoteConfig,
    given: Option<Credentials>,
) -> Result<Ready> {
    let replaces = remote_config::get(store, &config.name)?;
    match &replaces {
        Some(old) if !same_place(old, &config) => return Err(exists(&config.name)),
        Some(_) => {}
        None => {
            if remote_names::exists(store, &config.name)? {
                return Err(exists(&config.name));
            }
            remote_names::refuse_remote_clash(store, &config.name)?;
        }
    }
    let client = registry::connect(store, &config, given.as_ref())?;
    let mut ready = prepare_with(config, &client)?;
    ready.replaces = replaces;
    ready.given = given;
    Ok(ready)
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
        replaces: None,
        given: None,
    })
}

/// Serve `remote_add` on `h`: probe outside its name lock, store under it, then
/// let lazy reads use the new remote.
pub fn run<H: crate::host::Host>(
    h: &H,
    config: RemoteConfig,
    given: Option<Credentials>,
) -> Result<RemoteAdded> {
    let store = h.store();
    let ready = prepare(&*store, config, given)?;
    let v = {
        let _names = h.name_lock();
        commit(&*store, ready)?
    };
    h.remotes_changed()?;
    Ok(v)
}

/// Store the config (checks again: another add of the name, a branch whose first
/// component is the name; a refresh, that the config is still the one probed),
/// then hand the request's credentials to the registry.
pub fn commit(store: &dyn ObjectStore, ready: Ready) -> Result<RemoteAdded> {
    let Ready {
        mut config,
        failures,
        descriptor_created,
        replaces,
        given,
    } = ready;
    let name = config.name.clone();
    let key = meta::remote_key(&name);
    let stored = store.meta_get(&key)?;
    let expect = match (&replaces, &stored) {
        (None, None) => {
            remote_names::refuse_remote_clash(store, &name)?;
            None
        }
        (Some(old), Some(bytes)) if RemoteConfig::decode(&name, bytes)? == *old => {
            config.created = old.created;
            Some(bytes.clone())
        }
        _ => return Err(exists(&name)),
    };
    if expect.is_none() && remote_names::exists(store, &name)? {
        return Err(exists(&name));
    }
    store
        .commit(vec![MetaOp::Expect(key, expect), config.op()])
        .map_err(|e| match e {
            Error::Conflict(_) => exists(&name),
            e => e,
        })?;
    registry::forget(store, &name, false);
    if let Some(c) = given {
        registry::give(store, &name, c);
    }
    Ok(RemoteAdded {
        conditional_writes: config.conditional_writes,
        remote: config,
        probe_failures: failures,
        descriptor_created,
        updated: replaces.is_some(),
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
                RemoteConfig::new("origin", "s3://bkt", "http://127.0.0.1:9", None, false).unwrap(),
                None,
            ),
            Err(Error::Conflict(_))
        ));
    }

    #[test]
    fn adding_the_same_remote_again_refreshes_it() {
        let s = MemStore::default();
        let c = Client::memory("origin");
        let first = commit(&s, prepare_with(cfg("origin"), &c).unwrap()).unwrap();
        assert!(!first.updated);
        let mut again = prepare_with(cfg("origin"), &c).unwrap();
        again.replaces = config::get(&s, "origin").unwrap();
        again.given = Some(Credentials {
            key_id: "AK".into(),
            secret: "SK".into(),
            token: None,
        });
        let v = commit(&s, again).unwrap();
        assert!(v.updated);
        assert_eq!(v.remote.created, first.remote.created);
        // The stored config changed meanwhile: a conflict, nothing written.
        let mut stale = prepare_with(cfg("origin"), &c).unwrap();
        let mut old = config::get(&s, "origin").unwrap().unwrap();
        old.created += 1;
        stale.replaces = Some(old);
        assert!(matches!(commit(&s, stale), Err(Error::Conflict(_))));
    }
}
