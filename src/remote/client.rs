//! A synchronous client for one remote bucket/prefix, over the `object_store`
//! crate, on a small tokio runtime private to the remote module.
//!
//! Owns: the runtime ([`runtime`], two worker threads, started on first use), the
//! translation of `object_store` results into treefork's: a missing object is
//! `Ok(None)`, a conditional write that loses is a [`Put`] outcome (never an
//! error), and every other failure is [`Error::Remote`] naming the remote and the
//! operation, with one short line from `remote::fault` (`cannot reach
//! http://127.0.0.1:8333: connection refused`); the library's whole error chain
//! is logged (warn), not shown.
//!
//! Invariants:
//! - Keys are relative to the remote's prefix; the client never reads or writes
//!   outside it.
//! - Credentials live only inside the `object_store` client; they are never in an
//!   error message, a log line or the store.
//! - Every call blocks the calling (non-tokio) thread until done; [`Client::put_many`]
//!   and [`Client::get_many`] run up to [`PARALLEL`] requests at once.
//! - Reads are bounded (a remote is not trusted to be honest): a whole-object
//!   read names what it reads ([`Body`]) and streams at most its cap (a body that
//!   declares more is refused before any byte is read, one that streams more is
//!   dropped at the cap); a range read takes at most the bytes asked for; a
//!   [`Client::get_many`] keeps at most [`GET_MANY_BUDGET`] bytes of caps in
//!   flight (fewer requests at once for kinds with large caps).

use std::ops::Range;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use futures::{StreamExt, TryStreamExt};
use object_store::path::Path as ObjPath;
use object_store::{
    GetOptions, ObjectStore as Obj, ObjectStoreExt, PutMode, PutOptions, PutPayload, UpdateVersion,
};

pub use super::layout::Body;
use crate::error::{Error, Result};

/// Requests in flight at once for the `*_many` calls.
pub const PARALLEL: usize = 16;
/// A [`Client::get_many`] runs at most this many bytes of caps at once (at least
/// one request).
pub const GET_MANY_BUDGET: u64 = 512 << 20;

/// The tokio runtime all remote clients share (private to `remote`).
pub fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("treefork-remote")
            .enable_all()
            .build()
            .expect("the remote tier's runtime starts")
    })
}

/// How a [`Client::put`] may write.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PutIf {
    /// Only if no object has the key (`If-None-Match: *`).
    Absent,
    /// Only if the object's ETag is this one (`If-Match`).
    Matches(String),
    /// Unconditionally (content-named objects on a single-writer remote).
    Always,
}

/// What a [`Client::put`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Put {
    /// Written; the new ETag (when the server gave one).
    Written(Option<String>),
    /// [`PutIf::Absent`] and an object already has the key.
    Exists,
    /// [`PutIf::Matches`] and the object's ETag is another one (or it is gone).
    Moved,
}

/// An object's metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// Key relative to the remote's prefix.
    pub key: String,
    /// Size in bytes.
    pub size: u64,
    /// ETag, when the server gave one.
    pub etag: Option<String>,
    /// Last modification, unix seconds.
    pub modified: i64,
}

/// An object read whole.
#[derive(Debug, Clone)]
pub struct Got {
    /// Its bytes.
    pub bytes: Vec<u8>,
    /// Its ETag, when the server gave one.
    pub etag: Option<String>,
}

/// A client for one remote (see the module docs).
#[derive(Clone)]
pub struct Client {
    name: String,
    store: Arc<dyn Obj>,
    prefix: String,
    /// The server, for messages (`memory` for an in-memory store).
    endpoint: String,
}

impl std::fmt::Debug for Client {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Client({} at {})", self.name, self.store)
    }
}

impl Client {
    /// A client named `name` (for messages) over `store`, under `prefix` (no
    /// leading or trailing `/`; empty for the bucket's root).
    pub fn new(name: &str, store: Arc<dyn Obj>, prefix: &str) -> Client {
        Client {
            name: name.to_string(),
            store,
            prefix: prefix.trim_matches('/').to_string(),
            endpoint: "memory".into(),
        }
    }

    /// The same client, naming `endpoint` in its messages.
    pub fn with_endpoint(mut self, endpoint: &str) -> Client {
        self.endpoint = endpoint.to_string();
        self
    }

    /// A client over a fresh in-memory store (`object_store`'s; for tests of the
    /// protocol in `cargo test`).
    pub fn memory(name: &str) -> Client {
        Client::new(name, Arc::new(object_store::memory::InMemory::new()), "")
    }

    /// The remote's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    fn path(&self, key: &str) -> ObjPath {
        if self.prefix.is_empty() {
            ObjPath::from(key)
        } else {
            ObjPath::from(format!("{}/{key}", self.prefix))
        }
    }

    fn rel(&self, p: &ObjPath) -> String {
        let s = p.as_ref();
        if self.prefix.is_empty() {
            s.to_string()
        } else {
            s.strip_prefix(&self.prefix)
                .map(|r| r.trim_start_matches('/').to_string())
                .unwrap_or_else(|| s.to_string())
        }
    }

    /// A failed request (`what` `key`) as a short [`Error::Remote`]; the
    /// library's whole chain goes to the log.
    fn fail(&self, what: &str, key: &str, e: object_store::Error) -> Error {
        log::warn!("remote {}: {what} {key}: {e}", self.name);
        let fault = super::fault::classify(&self.endpoint, &e);
        Error::Remote {
            remote: self.name.clone(),
            detail: format!("{fault} ({what} {key})"),
        }
    }

    /// Read object `key` (a `body`) whole, at most `body.cap()` bytes; `None`
    /// when it does not exist.
    pub fn get(&self, key: &str, body: Body) -> Result<Option<Got>> {
        runtime().block_on(self.get_async(key, body))
    }

    async fn get_async(&self, key: &str, body: Body) -> Result<Option<Got>> {
        let p = self.path(key);
        let r = match self.store.get_opts(&p, GetOptions::default()).await {
            Ok(r) => r,
            Err(object_store::Error::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(self.fail("reading", key, e)),
        };
        let etag = r.meta.e_tag.clone();
        let what = || format!("a {} (at most {} bytes)", body.name(), body.cap());
        let bytes = self.read_capped(key, r, body.cap(), what).await?;
        Ok(Some(Got { bytes, etag }))
    }

    /// Stream the body of `r` (object `key`), refusing more than `cap` bytes
    /// declared or read; `what` names the read for messages.
    async fn read_capped(
        &self,
        key: &str,
        r: object_store::GetResult,
        cap: u64,
        what: impl Fn() -> String,
    ) -> Result<Vec<u8>> {
        let too_big = |n: &str| Error::Remote {
            remote: self.name.clone(),
            detail: format!("reading {key}: {n} bytes, more than {}", what()),
        };
        let declared = r.range.end.saturating_sub(r.range.start);
        if declared > cap {
            log::error!(
                "remote {}: {key} declares {declared} bytes, cap {cap}",
                self.name
            );
            return Err(too_big(&format!("declares {declared}")));
        }
        let mut buf = Vec::with_capacity(declared as usize);
        let mut stream = r.into_stream();
        while let Some(piece) = stream.next().await {
            let piece = piece.map_err(|e| self.fail("reading", key, e))?;
            if (buf.len() + piece.len()) as u64 > cap {
                log::error!("remote {}: {key} streams past its cap {cap}", self.name);
                return Err(too_big("streams over"));
            }
            buf.extend_from_slice(&piece);
        }
        Ok(buf)
    }

    /// Read bytes `range` of object `key` (which must exist: a missing object is
    /// [`Error::Remote`], like a short or a long one; no more than the range is
    /// read).
    pub fn get_range(&self, key: &str, range: Range<u64>) -> Result<Vec<u8>> {
        let p = self.path(key);
        let want = range.end.saturating_sub(range.start);
        let opts = GetOptions {
            range: Some(range.clone().into()),
            ..Default::default()
        };
        let what = || format!("the {want} bytes asked for");
        let b = runtime().block_on(async {
            let r = self
                .store
                .get_opts(&p, opts)
                .await
                .map_err(|e| self.fail("reading a range of", key, e))?;
            self.read_capped(key, r, want, what).await
        })?;
        if b.len() as u64 != want {
            return Err(Error::Remote {
                remote: self.name.clone(),
                detail: format!(
                    "reading {key} bytes {}..{}: got {} bytes",
                    range.start,
                    range.end,
                    b.len()
                ),
            });
        }
        Ok(b)
    }

    /// Metadata of object `key`; `None` when it does not exist.
    pub fn head(&self, key: &str) -> Result<Option<Meta>> {
        let p = self.path(key);
        match runtime().block_on(self.store.head(&p)) {
            Ok(m) => Ok(Some(self.meta(m))),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.fail("looking up", key, e)),
        }
    }

    fn meta(&self, m: object_store::ObjectMeta) -> Meta {
        Meta {
            key: self.rel(&m.location),
            size: m.size,
            etag: m.e_tag,
            modified: m.last_modified.timestamp(),
        }
    }

    /// Write object `key` under condition `cond`.
    pub fn put(&self, key: &str, bytes: Vec<u8>, cond: PutIf) -> Result<Put> {
        runtime().block_on(self.put_async(key, bytes, cond))
    }

    async fn put_async(&self, key: &str, bytes: Vec<u8>, cond: PutIf) -> Result<Put> {
        let p = self.path(key);
        let mode = match &cond {
            PutIf::Absent => PutMode::Create,
            PutIf::Matches(e) => PutMode::Update(UpdateVersion {
                e_tag: Some(e.clone()),
                version: None,
            }),
            PutIf::Always => PutMode::Overwrite,
        };
        let opts = PutOptions {
            mode,
            ..Default::default()
        };
        match self.store.put_opts(&p, PutPayload::from(bytes), opts).await {
            Ok(r) => Ok(Put::Written(r.e_tag)),
            Err(object_store::Error::AlreadyExists { .. }) if cond == PutIf::Absent => {
                Ok(Put::Exists)
            }
            Err(object_store::Error::Precondition { .. }) if cond == PutIf::Absent => {
                Ok(Put::Exists)
            }
            Err(
                object_store::Error::Precondition { .. } | object_store::Error::NotFound { .. },
            ) if matches!(cond, PutIf::Matches(_)) => Ok(Put::Moved),
            Err(e) => Err(self.fail("writing", key, e)),
        }
    }

    /// Write several objects, up to [`PARALLEL`] at once; the outcomes in order.
    pub fn put_many(&self, items: Vec<(String, Vec<u8>, PutIf)>) -> Result<Vec<Put>> {
        runtime().block_on(async {
            futures::stream::iter(items)
                .map(|(k, b, c)| async move { self.put_async(&k, b, c).await })
                .buffered(PARALLEL)
                .try_collect()
                .await
        })
    }

    /// Read several objects (each a `body`) whole, each capped like
    /// [`get`](Self::get), up to [`PARALLEL`] at once and at most
    /// [`GET_MANY_BUDGET`] bytes of caps in flight; in order, `None` for a missing
    /// one.
    pub fn get_many(&self, keys: &[String], body: Body) -> Result<Vec<Option<Got>>> {
        let parallel = (GET_MANY_BUDGET / body.cap()).clamp(1, PARALLEL as u64) as usize;
        runtime().block_on(async {
            futures::stream::iter(keys.iter())
                .map(|k| self.get_async(k, body))
                .buffered(parallel)
                .try_collect()
                .await
        })
    }

    /// Every object whose key starts with `dir` + `/` (a "directory" of the
    /// layout), in no particular order.
    pub fn list(&self, dir: &str) -> Result<Vec<Meta>> {
        let p = self.path(dir.trim_end_matches('/'));
        let r: std::result::Result<Vec<_>, _> =
            runtime().block_on(self.store.list(Some(&p)).try_collect());
        let v = r.map_err(|e| self.fail("listing", dir, e))?;
        Ok(v.into_iter().map(|m| self.meta(m)).collect())
    }

    /// Delete object `key` (deleting a missing object succeeds).
    pub fn delete(&self, key: &str) -> Result<()> {
        let p = self.path(key);
        match runtime().block_on(self.store.delete(&p)) {
            Ok(()) | Err(object_store::Error::NotFound { .. }) => Ok(()),
            Err(e) => Err(self.fail("deleting", key, e)),
        }
    }
}

/// How to reach an S3-compatible server.
#[derive(Debug, Clone)]
pub struct S3Target {
    /// Bucket.
    pub bucket: String,
    /// Key prefix inside the bucket (may be empty).
    pub prefix: String,
    /// Endpoint URL (`http://127.0.0.1:8333`); path-style requests are used.
    pub endpoint: String,
    /// Region (`us-east-1` when unsure).
    pub region: String,
}

/// Credentials for [`S3Target`]. `Debug` prints no secret.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// Access key id.
    pub key_id: String,
    /// Secret access key.
    pub secret: String,
    /// Session token, if any.
    pub token: Option<String>,
}

impl std::fmt::Debug for Credentials {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Credentials({}, <secret>)", self.key_id)
    }
}

/// Connection timeout of remote requests.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Whole-request timeout.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(120);

/// A client named `name` for the S3-compatible server `t` (path-style, plain
/// HTTP allowed, a few retries with backoff for transient failures).
pub fn s3(name: &str, t: &S3Target, creds: &Credentials) -> Result<Client> {
    use object_store::aws::{AmazonS3Builder, S3ConditionalPut};
    use object_store::{BackoffConfig, ClientOptions, RetryConfig};
    let retry = RetryConfig {
        backoff: BackoffConfig {
            init_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(2),
            base: 2.0,
        },
        max_retries: 3,
        retry_timeout: Duration::from_secs(15),
    };
    let opts = ClientOptions::new()
        .with_allow_http(true)
        .with_connect_timeout(CONNECT_TIMEOUT)
        .with_timeout(REQUEST_TIMEOUT);
    let mut b = AmazonS3Builder::new()
        .with_bucket_name(&t.bucket)
        .with_endpoint(&t.endpoint)
        .with_region(&t.region)
        .with_virtual_hosted_style_request(false)
        .with_allow_http(true)
        .with_access_key_id(&creds.key_id)
        .with_secret_access_key(&creds.secret)
        .with_conditional_put(S3ConditionalPut::ETagMatch)
        .with_retry(retry)
        .with_client_options(opts);
    if let Some(tok) = &creds.token {
        b = b.with_token(tok);
    }
    let store = b
        .build()
        .map_err(|e| Error::Invalid(format!("remote {name}: {e}")))?;
    Ok(Client::new(name, Arc::new(store), &t.prefix).with_endpoint(&t.endpoint))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memory_client_does_conditional_writes_and_ranges() {
        let c = Client::memory("mem");
        assert!(c.get("a/x", Body::Ref).unwrap().is_none());
        let Put::Written(e1) = c.put("a/x", b"hello".to_vec(), PutIf::Absent).unwrap() else {
            panic!()
        };
        assert_eq!(
            c.put("a/x", b"other".to_vec(), PutIf::Absent).unwrap(),
            Put::Exists
        );
        let e1 = e1.expect("in-memory etags");
        assert_eq!(
            c.put("a/x", b"v2".to_vec(), PutIf::Matches("nope".into()))
                .unwrap(),
            Put::Moved
        );
        assert!(matches!(
            c.put("a/x", b"v2".to_vec(), PutIf::Matches(e1.clone()))
                .unwrap(),
            Put::Written(_)
        ));
        assert_eq!(
            c.put("a/x", b"v3".to_vec(), PutIf::Matches(e1)).unwrap(),
            Put::Moved
        );
        assert_eq!(c.get("a/x", Body::Ref).unwrap().unwrap().bytes, b"v2");
        c.put("a/y", b"0123456789".to_vec(), PutIf::Always).unwrap();
        assert_eq!(c.get_range("a/y", 2..5).unwrap(), b"234");
        assert!(c.get_range("a/y", 8..20).is_err());
        let mut keys: Vec<String> = c.list("a").unwrap().into_iter().map(|m| m.key).collect();
        keys.sort();
        assert_eq!(keys, ["a/x", "a/y"]);
        c.delete("a/x").unwrap();
        c.delete("a/x").unwrap();
        assert!(c.head("a/x").unwrap().is_none());
        assert_eq!(c.head("a/y").unwrap().unwrap().size, 10);
        let outs = c
            .put_many(vec![
                ("b/1".into(), vec![1], PutIf::Absent),
                ("a/y".into(), vec![2], PutIf::Absent),
            ])
            .unwrap();
        assert!(matches!(outs[0], Put::Written(_)));
        assert_eq!(outs[1], Put::Exists);
        let got = c.get_many(&["b/1".into(), "zz".into()], Body::Ref).unwrap();
        assert_eq!(got[0].as_ref().unwrap().bytes, vec![1]);
        assert!(got[1].is_none());
    }

    #[test]
    fn reads_stop_at_their_cap() {
        let c = Client::memory("mem");
        let big = vec![7u8; (Body::Descriptor.cap() + 1) as usize];
        c.put(crate::remote::layout::DESCRIPTOR, big, PutIf::Always)
            .unwrap();
        let e = c
            .get(crate::remote::layout::DESCRIPTOR, Body::Descriptor)
            .unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::Remote { .. }), "{msg}");
        assert!(
            msg.contains("treefork-remote.json")
                && msg.contains(&Body::Descriptor.cap().to_string())
                && msg.contains("mem"),
            "{msg}"
        );
        let e = c
            .get_many(
                &[crate::remote::layout::DESCRIPTOR.into()],
                Body::Descriptor,
            )
            .unwrap_err();
        assert!(matches!(e, Error::Remote { .. }), "{e}");
        // At the cap is fine.
        let ok = vec![7u8; Body::Descriptor.cap() as usize];
        c.put("d", ok.clone(), PutIf::Always).unwrap();
        assert_eq!(c.get("d", Body::Descriptor).unwrap().unwrap().bytes, ok);
    }

    #[test]
    fn prefixed_client_stays_inside_its_prefix() {
        let inner: Arc<dyn Obj> = Arc::new(object_store::memory::InMemory::new());
        let a = Client::new("a", inner.clone(), "/team/a/");
        let b = Client::new("b", inner, "team/b");
        a.put("refs/x", vec![1], PutIf::Always).unwrap();
        assert!(b.get("refs/x", Body::Ref).unwrap().is_none());
        assert_eq!(a.list("refs").unwrap()[0].key, "refs/x");
    }

    #[test]
    fn unreachable_server_is_a_remote_error_naming_the_remote() {
        let t = S3Target {
            bucket: "b".into(),
            prefix: String::new(),
            endpoint: "http://127.0.0.1:9".into(),
            region: "us-east-1".into(),
        };
        let creds = Credentials {
            key_id: "k".into(),
            secret: "very-secret".into(),
            token: None,
        };
        let c = s3("origin", &t, &creds).unwrap();
        let e = c.get("x", Body::Ref).unwrap_err();
        let msg = e.to_string();
        assert!(matches!(e, Error::Remote { .. }), "{msg}");
        assert!(
            msg.contains("origin") && !msg.contains("very-secret"),
            "{msg}"
        );
        // Short: the endpoint and the cause, not the library's chain.
        assert_eq!(
            msg,
            "remote origin: cannot reach http://127.0.0.1:9: connection refused (reading x)"
        );
    }
}
