//! Opening remotes: config + credentials -> a [`Remote`], shared per process.
//!
//! Owns: the process-wide registry of open remotes, keyed by (store, remote
//! name), so push, pull, lazy reads and trim of one store share one client and
//! one remote index; the credentials a `remote add` request handed over ([`give`],
//! in memory only); the local cache directory of a remote ([`cache_dir`]).
//!
//! Invariants: an entry is reused only while the stored config and the
//! credentials found are the ones it was opened with (a `remote rm` + `remote
//! add` under the same name, new variables handed over, or a credentials file
//! rewritten opens afresh); credentials are looked up at each [`open`]: those
//! handed over for this (store, remote) first, else the process's own
//! (`remote::creds`); they are kept only in memory (this registry and the
//! client), never written anywhere; `remote rm` drops both ([`forget`]).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};

use super::client::{self, Client, Credentials};
use super::config::{self, RemoteConfig};
use super::index::RemoteIndex;
use crate::error::Result;
use crate::store::ObjectStore;

/// An open remote.
#[derive(Clone)]
pub struct Remote {
    /// Its configuration.
    pub config: RemoteConfig,
    /// A client for it.
    pub client: Client,
    /// What it holds, object by object (shared by every user of this remote in
    /// the process; loaded from the local cache, call `refresh` to update).
    pub index: Arc<RemoteIndex>,
}

impl std::fmt::Debug for Remote {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Remote({} at {})", self.config.name, self.config.url)
    }
}

/// One registry entry.
struct Entry {
    remote: Remote,
    /// The credentials its client was made with (`None`: a test client).
    creds: Option<Credentials>,
}

type Key = (String, String);

#[derive(Default)]
struct Registry {
    open: HashMap<Key, Entry>,
    /// Clients installed by [`use_client`] (tests): used instead of S3.
    clients: HashMap<Key, Client>,
    /// Credentials handed over by `remote add` requests ([`give`]).
    given: HashMap<Key, Credentials>,
}

fn registry() -> &'static Mutex<Registry> {
    static R: OnceLock<Mutex<Registry>> = OnceLock::new();
    R.get_or_init(Default::default)
}

/// The identity of `store` in the registry: its directory, or (for in-memory
/// stores) its address.
fn store_id(store: &dyn ObjectStore) -> String {
    match store.dir() {
        Some(d) => d.display().to_string(),
        None => format!("mem:{:p}", store as *const dyn ObjectStore as *const ()),
    }
}

/// The local cache directory of remote `name` of the store at `store_dir`:
/// `STORE/remotes/<name>` (downloaded indexes live in its `idx/`, see
/// [`index_dir`]).
pub fn cache_dir(store_dir: &Path, name: &str) -> PathBuf {
    store_dir.join("remotes").join(name)
}

/// The directory of a remote's cached indexes (what `RemoteIndex::load` takes),
/// inside its [`cache_dir`].
pub fn index_dir(cache_dir: &Path) -> PathBuf {
    cache_dir.join("idx")
}

/// The cache directory of remote `name` of `store` (an in-memory store gets one
/// under the temporary directory, per process and store).
pub fn store_cache_dir(store: &dyn ObjectStore, name: &str) -> PathBuf {
    match store.dir() {
        Some(d) => cache_dir(d, name),
        None => {
            let id = store_id(store).replace(':', "-");
            let base =
                std::env::temp_dir().join(format!("treefork-remotes-{}-{id}", std::process::id()));
            cache_dir(&base, name)
        }
    }
}

/// Open remote `name` of `store`: its config, its credentials (handed over by
/// `remote add`, else the process's own: `remote::creds`), a client; reused from
/// the registry while both are unchanged. `not_found` when no such remote is
/// configured; `remote` when no credentials are found.
pub fn open(store: &dyn ObjectStore, name: &str) -> Result<Remote> {
    let config = config::load(store, name)?;
    let key = (store_id(store), name.to_string());
    let mut r = registry().lock().unwrap();
    let test_client = r.clients.get(&key).cloned();
    let creds = match (&test_client, r.given.get(&key)) {
        (Some(_), _) => None,
        (None, Some(c)) => Some(c.clone()),
        (None, None) => Some(super::creds::load(name)?),
    };
    if let Some(e) = r.open.get(&key)
        && e.remote.config == config
        && e.creds == creds
    {
        return Ok(e.remote.clone());
    }
    let client = match (test_client, &creds) {
        (Some(c), _) => c,
        (None, Some(creds)) => client::s3(&config.name, &config.target(), creds)?,
        (None, None) => unreachable!("credentials are found for a client that is not a test's"),
    };
    // A remote reopened (new credentials) keeps its index: what it holds did not change.
    let index = match r.open.get(&key) {
        Some(e) if e.remote.config == config => e.remote.index.clone(),
        _ => Arc::new(RemoteIndex::load(&index_dir(&store_cache_dir(
            store, name,
        )))?),
    };
    let remote = Remote {
        config,
        client,
        index,
    };
    r.open.insert(
        key,
        Entry {
            remote: remote.clone(),
            creds,
        },
    );
    Ok(remote)
}

/// A client for `config`: with `given` credentials, else those of this process
/// for the remote (handed over earlier for `store`, else `remote::creds`).
pub fn connect(
    store: &dyn ObjectStore,
    config: &RemoteConfig,
    given: Option<&Credentials>,
) -> Result<Client> {
    let key = (store_id(store), config.name.clone());
    let creds = match given {
        Some(c) => c.clone(),
        None => match registry().lock().unwrap().given.get(&key) {
            Some(c) => c.clone(),
            None => super::creds::load(&config.name)?,
        },
    };
    client::s3(&config.name, &config.target(), &creds)
}

/// Use `creds` for remote `name` of `store` from now on, in this process (what a
/// `remote add` request carried; held in memory only, until [`forget`] or the
/// process exits).
pub fn give(store: &dyn ObjectStore, name: &str, creds: Credentials) {
    let key = (store_id(store), name.to_string());
    registry().lock().unwrap().given.insert(key, creds);
}

/// Every configured remote of `store`, by name.
pub fn list(store: &dyn ObjectStore) -> Result<Vec<RemoteConfig>> {
    config::list(store)
}

/// Drop the registry entry of remote `name` of `store` (after `remote add`,
/// which opens it afresh); with `creds`, the credentials handed over for it too
/// (after `remote rm`).
pub fn forget(store: &dyn ObjectStore, name: &str, creds: bool) {
    let key = (store_id(store), name.to_string());
    let mut r = registry().lock().unwrap();
    r.open.remove(&key);
    if creds {
        r.given.remove(&key);
    }
}

/// Make [`open`] of remote `name` of `store` use `client` instead of connecting
/// to S3 (for tests over `Client::memory`; the config must still be stored).
pub fn use_client(store: &dyn ObjectStore, name: &str, client: Client) {
    let key = (store_id(store), name.to_string());
    let mut r = registry().lock().unwrap();
    r.open.remove(&key);
    r.clients.insert(key, client);
}

#[cfg(test)]
mod tests {
    #[test]
    fn credentials_handed_over_are_used_first_and_reopen_the_client() {
        let s = MemStore::default();
        let c = RemoteConfig::new("given", "s3://bkt", "http://127.0.0.1:9", None, false).unwrap();
        s.commit(vec![c.op()]).unwrap();
        let creds = |k: &str| Credentials {
            key_id: k.into(),
            secret: "s".into(),
            token: None,
        };
        give(&s, "given", creds("AK1"));
        let a = open(&s, "given").unwrap();
        assert!(Arc::ptr_eq(&a.index, &open(&s, "given").unwrap().index));
        let key = (store_id(&s), "given".to_string());
        let creds_of = || registry().lock().unwrap().open[&key].creds.clone();
        assert_eq!(creds_of(), Some(creds("AK1")));
        // New credentials: a new client, the same index.
        give(&s, "given", creds("AK2"));
        let b = open(&s, "given").unwrap();
        assert_eq!(creds_of(), Some(creds("AK2")));
        assert!(Arc::ptr_eq(&a.index, &b.index));
        // `remote rm` forgets them.
        forget(&s, "given", true);
        assert!(!registry().lock().unwrap().given.contains_key(&key));
    }

    use super::*;
    use crate::remote::client::PutIf;
    use crate::store::MemStore;

    #[test]
    fn open_shares_one_remote_per_store_and_name() {
        let s = MemStore::default();
        let c = RemoteConfig::new("origin", "s3://bkt", "http://127.0.0.1:9", None, false).unwrap();
        s.commit(vec![c.op()]).unwrap();
        assert!(open(&s, "nope").is_err());
        let mem = Client::memory("origin");
        use_client(&s, "origin", mem.clone());
        let a = open(&s, "origin").unwrap();
        a.client.put("x", vec![1], PutIf::Always).unwrap();
        let b = open(&s, "origin").unwrap();
        assert_eq!(
            b.client
                .get("x", crate::remote::layout::Body::Ref)
                .unwrap()
                .unwrap()
                .bytes,
            vec![1]
        );
        // One index, shared.
        assert!(Arc::ptr_eq(&a.index, &b.index));
        assert!(a.index.dir().ends_with("remotes/origin/idx"));
        assert_eq!(list(&s).unwrap(), vec![c]);
        assert!(store_cache_dir(&s, "origin").ends_with("remotes/origin"));
        assert_eq!(
            cache_dir(Path::new("/st"), "o"),
            PathBuf::from("/st/remotes/o")
        );
        forget(&s, "origin", true);
        assert!(open(&s, "origin").is_ok());
    }
}
