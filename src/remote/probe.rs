//! What `remote add` checks on the server before a remote is stored: that it
//! answers, that it honours conditional writes, and the remote's descriptor.
//!
//! Owns: the probe ([`probe`]: on a fresh `probe/<random>` key, a create-only
//! write must succeed then be refused as existing; a write conditional on a wrong
//! ETag must be refused; a write conditional on the right ETag must succeed; the
//! key is deleted after) and the descriptor `treefork-remote.json`
//! ([`ensure_descriptor`]: created create-only when missing; another format or
//! version is refused).
//!
//! Invariant: refs are moved by compare-and-swap, which is only safe on a server
//! that honours `If-None-Match: *` and `If-Match`; a server that does not is
//! refused unless the user declares the store its single writer.

use super::client::{Client, Put, PutIf};
use super::layout::{DESCRIPTOR, PROBE_DIR};
use super::refval::Descriptor;
use crate::error::{Error, Result};

/// What the probe found.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Probe {
    /// What the server did not honour, in words (empty: conditional writes work).
    pub failures: Vec<String>,
}

impl Probe {
    /// Whether the server honours conditional writes.
    pub fn conditional_writes(&self) -> bool {
        self.failures.is_empty()
    }
}

/// Probe the server behind `c` (see the module docs). Network failures are
/// [`Error::Remote`]; a server that ignores a condition is a [`Probe`] failure.
pub fn probe(c: &Client) -> Result<Probe> {
    let key = format!("{PROBE_DIR}/{}", random_hex());
    let r = probe_at(c, &key);
    let cleanup = c.delete(&key);
    let p = r?;
    cleanup?;
    Ok(p)
}

fn probe_at(c: &Client, key: &str) -> Result<Probe> {
    let mut failures = Vec::new();
    let etag = match c.put(key, b"probe 1".to_vec(), PutIf::Absent)? {
        Put::Written(e) => e,
        other => {
            failures.push(format!(
                "a create-only write (If-None-Match: *) of a new key answered {other:?}"
            ));
            None
        }
    };
    if c.put(key, b"probe 2".to_vec(), PutIf::Absent)? != Put::Exists {
        failures.push(
            "If-None-Match: * (a create-only write over an existing object succeeded)".into(),
        );
    }
    let wrong = PutIf::Matches("\"treefork-probe-wrong-etag\"".into());
    if c.put(key, b"probe 3".to_vec(), wrong)? != Put::Moved {
        failures.push("If-Match (a write with a wrong ETag succeeded)".into());
    }
    match c.head(key)?.and_then(|m| m.etag).or(etag) {
        None => failures.push("ETags (the server returned none)".into()),
        Some(e) => {
            if !matches!(
                c.put(key, b"probe 4".to_vec(), PutIf::Matches(e))?,
                Put::Written(_)
            ) {
                failures.push("If-Match (a write with the current ETag was refused)".into());
            }
        }
    }
    Ok(Probe { failures })
}

fn random_hex() -> String {
    crate::id::hex(&crate::id::random16())
}

/// Make sure the remote holds a treefork descriptor of this version: create it
/// (with `put`: create-only, or unconditional on a single-writer remote without
/// conditions) when missing; refuse ([`Error::Invalid`]) a prefix holding another
/// format or version. Returns whether it was created.
pub fn ensure_descriptor(c: &Client, put: PutIf) -> Result<bool> {
    if let Some(g) = c.get(DESCRIPTOR, crate::remote::layout::Body::Descriptor)? {
        check_descriptor(c.name(), &g.bytes)?;
        return Ok(false);
    }
    let d = Descriptor::new(crate::clock::unix_secs());
    match c.put(DESCRIPTOR, d.encode(), put)? {
        Put::Written(_) => Ok(true),
        // Someone created it meanwhile: check theirs.
        _ => match c.get(DESCRIPTOR, crate::remote::layout::Body::Descriptor)? {
            Some(g) => check_descriptor(c.name(), &g.bytes).map(|()| false),
            None => Err(Error::Remote {
                remote: c.name().to_string(),
                detail: format!("{DESCRIPTOR} was reported existing but cannot be read"),
            }),
        },
    }
}

/// Refuse a descriptor of another format or version (`refval::Descriptor`).
pub fn check_descriptor(remote: &str, bytes: &[u8]) -> Result<()> {
    Descriptor::decode(bytes).map(drop).map_err(|e| {
        Error::Invalid(format!(
            "remote {remote}: {DESCRIPTOR} there is not a treefork remote this build reads ({e}); use another prefix"
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    use futures::stream::BoxStream;
    use object_store::memory::InMemory;
    use object_store::path::Path;
    use object_store::{
        GetOptions, GetResult, ListResult, MultipartUpload, ObjectMeta, ObjectStore,
        PutMultipartOptions, PutOptions, PutPayload, PutResult,
    };

    /// A test double of a SERVER that ignores conditional writes (as Garage
    /// does): every put is an overwrite. Only the probe's refusal logic is tested
    /// with it; the real server path is tested against SeaweedFS in tests/it.
    #[derive(Debug)]
    struct IgnoresConditions(InMemory);

    impl std::fmt::Display for IgnoresConditions {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "IgnoresConditions")
        }
    }

    #[async_trait::async_trait]
    impl ObjectStore for IgnoresConditions {
        async fn put_opts(
            &self,
            location: &Path,
            payload: PutPayload,
            _opts: PutOptions,
        ) -> object_store::Result<PutResult> {
            self.0
                .put_opts(location, payload, PutOptions::default())
                .await
        }
        async fn put_multipart_opts(
            &self,
            location: &Path,
            opts: PutMultipartOptions,
        ) -> object_store::Result<Box<dyn MultipartUpload>> {
            self.0.put_multipart_opts(location, opts).await
        }
        async fn get_opts(
            &self,
            location: &Path,
            options: GetOptions,
        ) -> object_store::Result<GetResult> {
            self.0.get_opts(location, options).await
        }
        fn delete_stream(
            &self,
            locations: BoxStream<'static, object_store::Result<Path>>,
        ) -> BoxStream<'static, object_store::Result<Path>> {
            self.0.delete_stream(locations)
        }
        fn list(
            &self,
            prefix: Option<&Path>,
        ) -> BoxStream<'static, object_store::Result<ObjectMeta>> {
            self.0.list(prefix)
        }
        async fn list_with_delimiter(
            &self,
            prefix: Option<&Path>,
        ) -> object_store::Result<ListResult> {
            self.0.list_with_delimiter(prefix).await
        }
        async fn copy_opts(
            &self,
            from: &Path,
            to: &Path,
            options: object_store::CopyOptions,
        ) -> object_store::Result<()> {
            self.0.copy_opts(from, to, options).await
        }
    }

    #[test]
    fn probe_passes_on_a_server_with_conditional_writes() {
        let c = Client::memory("mem");
        let p = probe(&c).unwrap();
        assert!(p.conditional_writes(), "{p:?}");
        // The probe key is gone.
        assert!(c.list(PROBE_DIR).unwrap().is_empty());
    }

    #[test]
    fn probe_names_what_a_server_ignores() {
        let c = Client::new("g", Arc::new(IgnoresConditions(InMemory::new())), "");
        let p = probe(&c).unwrap();
        assert!(!p.conditional_writes());
        let all = p.failures.join("; ");
        assert!(
            all.contains("If-None-Match") && all.contains("If-Match"),
            "{all}"
        );
        assert!(c.list(PROBE_DIR).unwrap().is_empty());
    }

    #[test]
    fn descriptor_created_once_and_foreign_ones_refused() {
        let c = Client::memory("mem");
        assert!(ensure_descriptor(&c, PutIf::Absent).unwrap());
        assert!(!ensure_descriptor(&c, PutIf::Absent).unwrap());
        let other = Client::memory("o");
        other
            .put(
                DESCRIPTOR,
                br#"{"format":"treefork-remote","version":2,"created":1}"#.to_vec(),
                PutIf::Always,
            )
            .unwrap();
        let e = ensure_descriptor(&other, PutIf::Absent)
            .unwrap_err()
            .to_string();
        assert!(e.contains("version 2"), "{e}");
        other
            .put(DESCRIPTOR, b"junk".to_vec(), PutIf::Always)
            .unwrap();
        assert!(ensure_descriptor(&other, PutIf::Absent).is_err());
    }
}
