//! A remote's configuration: the `y/<name>` record and its validation.
//!
//! Owns: [`RemoteConfig`] (JSON v1 under [`crate::meta::remote_key`]), parsing of
//! `s3://BUCKET/PREFIX` URLs and endpoints. The remote name rules and the clash
//! checks between remote names and local branch names live below, in
//! `crate::refs::remote_names` (branch operations check them without the remote tier).
//!
//! Invariants: a stored config has passed [`RemoteConfig::validate`] (its name
//! [`validate_name`]); it never holds credentials (those come from the daemon's
//! environment, `remote::creds`).

use serde::{Deserialize, Serialize};

use super::client::{PutIf, S3Target};
use crate::error::{Error, Result};
use crate::meta::{self, MetaOp};
use crate::refs::remote_names::validate_name;
use crate::store::ObjectStore;

/// Version of the config record.
pub const CONFIG_VERSION: u32 = 1;
/// Region used when none is given.
pub const DEFAULT_REGION: &str = "us-east-1";

/// A configured remote (value of `y/<name>`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct RemoteConfig {
    /// Record version ([`CONFIG_VERSION`]).
    pub version: u32,
    /// The remote's name.
    pub name: String,
    /// `s3://BUCKET/PREFIX` as given (normalized: no trailing `/`).
    pub url: String,
    /// Bucket.
    pub bucket: String,
    /// Key prefix inside the bucket (no leading or trailing `/`; may be empty).
    pub prefix: String,
    /// Endpoint URL (`http(s)://host[:port]`).
    pub endpoint: String,
    /// Region.
    pub region: String,
    /// The user declared this store the remote's only writer: content-named
    /// objects may be written unconditionally when the server ignores conditions.
    pub single_writer: bool,
    /// The probe at `remote add` found conditional writes honoured.
    pub conditional_writes: bool,
    /// When it was added (unix seconds).
    pub created: i64,
}

impl RemoteConfig {
    /// A new config, validated (`conditional_writes` from the probe).
    pub fn new(
        name: &str,
        url: &str,
        endpoint: &str,
        region: Option<&str>,
        single_writer: bool,
    ) -> Result<RemoteConfig> {
        validate_name(name)?;
        let (bucket, prefix) = parse_url(url)?;
        let endpoint = validate_endpoint(endpoint)?;
        let region = region
            .filter(|r| !r.is_empty())
            .unwrap_or(DEFAULT_REGION)
            .to_string();
        validate_region(&region)?;
        let url = if prefix.is_empty() {
            format!("s3://{bucket}")
        } else {
            format!("s3://{bucket}/{prefix}")
        };
        Ok(RemoteConfig {
            version: CONFIG_VERSION,
            name: name.to_string(),
            url,
            bucket,
            prefix,
            endpoint,
            region,
            single_writer,
            conditional_writes: false,
            created: crate::clock::unix_secs(),
        })
    }

    /// Check every field (a record read back is checked again: it reaches the
    /// network).
    pub fn validate(&self) -> Result<()> {
        if self.version != CONFIG_VERSION {
            return Err(Error::Corrupt {
                what: format!("remote config {}", self.name),
                reason: format!("unsupported version {}", self.version),
            });
        }
        validate_name(&self.name)?;
        let (bucket, prefix) = parse_url(&self.url)?;
        if bucket != self.bucket || prefix != self.prefix {
            return Err(Error::Corrupt {
                what: format!("remote config {}", self.name),
                reason: "url, bucket and prefix disagree".into(),
            });
        }
        validate_endpoint(&self.endpoint)?;
        validate_region(&self.region)
    }

    /// Where the client connects.
    pub fn target(&self) -> S3Target {
        S3Target {
            bucket: self.bucket.clone(),
            prefix: self.prefix.clone(),
            endpoint: self.endpoint.clone(),
            region: self.region.clone(),
        }
    }

    /// How content-named objects (packs, idx, checkpoints, logs) are written:
    /// create-only, or unconditionally on a single-writer remote whose server
    /// does not honour conditions.
    pub fn content_put(&self) -> PutIf {
        if self.single_writer && !self.conditional_writes {
            PutIf::Always
        } else {
            PutIf::Absent
        }
    }

    /// The record's bytes.
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).expect("config serializes")
    }

    /// Parse and validate a stored record of remote `name`.
    pub fn decode(name: &str, bytes: &[u8]) -> Result<RemoteConfig> {
        let c: RemoteConfig = serde_json::from_slice(bytes).map_err(|e| Error::Corrupt {
            what: format!("remote config {name}"),
            reason: e.to_string(),
        })?;
        if c.name != name {
            return Err(Error::Corrupt {
                what: format!("remote config {name}"),
                reason: format!("names remote {:?}", c.name),
            });
        }
        // A stored record that no longer validates is damaged, not a bad request.
        c.validate().map_err(|e| match e {
            Error::Invalid(reason) => Error::Corrupt {
                what: format!("remote config {name}"),
                reason,
            },
            e => e,
        })?;
        Ok(c)
    }

    /// The op writing this config.
    pub fn op(&self) -> MetaOp {
        MetaOp::Put(meta::remote_key(&self.name), self.encode())
    }
}

/// Remote `name`'s config, if there is one.
pub fn get(store: &dyn ObjectStore, name: &str) -> Result<Option<RemoteConfig>> {
    match store.meta_get(&meta::remote_key(name))? {
        None => Ok(None),
        Some(v) => RemoteConfig::decode(name, &v).map(Some),
    }
}

/// Remote `name`'s config; `not_found` naming it when there is none.
pub fn load(store: &dyn ObjectStore, name: &str) -> Result<RemoteConfig> {
    get(store, name)?.ok_or_else(|| {
        Error::NotFound(format!(
            "no remote named {name:?} (see `treefork remote list`)"
        ))
    })
}

/// Every configured remote, by name.
pub fn list(store: &dyn ObjectStore) -> Result<Vec<RemoteConfig>> {
    let mut out = Vec::new();
    for (k, v) in store.meta_scan(meta::REMOTE_PREFIX)? {
        let Some(name) = meta::remote_name(&k) else {
            continue;
        };
        out.push(RemoteConfig::decode(name, &v)?);
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// `s3://BUCKET[/PREFIX]` -> (bucket, prefix). Bucket: 3-63 of `[a-z0-9.-]`,
/// starting and ending with a letter or digit. Prefix: `/`-separated non-empty
/// components without `.`/`..`, control characters or backslashes (a trailing `/`
/// is dropped).
pub fn parse_url(url: &str) -> Result<(String, String)> {
    let bad = |why: String| Err(Error::Invalid(format!("invalid remote URL {url:?}: {why}")));
    let Some(rest) = url.strip_prefix("s3://") else {
        let scheme = url.split_once("://").map(|(s, _)| s).unwrap_or("");
        return bad(if scheme.is_empty() {
            "expected s3://BUCKET/PREFIX".into()
        } else {
            format!("scheme {scheme:?} is not supported (only s3://BUCKET/PREFIX)")
        });
    };
    let (bucket, prefix) = rest.split_once('/').unwrap_or((rest, ""));
    let ok_char = |c: char| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '.' || c == '-';
    let ends_ok = |c: Option<char>| c.is_some_and(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if !(3..=63).contains(&bucket.len())
        || !bucket.chars().all(ok_char)
        || !ends_ok(bucket.chars().next())
        || !ends_ok(bucket.chars().last())
        || bucket.contains("..")
    {
        return bad(format!(
            "bucket {bucket:?} must be 3-63 characters of a-z, 0-9, '.' and '-', starting and ending with a letter or digit"
        ));
    }
    let prefix = prefix.strip_suffix('/').unwrap_or(prefix);
    if !prefix.is_empty() {
        if prefix.len() > 512 {
            return bad("prefix longer than 512 bytes".into());
        }
        for comp in prefix.split('/') {
            if comp.is_empty() || comp == "." || comp == ".." {
                return bad("prefix has an empty, '.' or '..' component".into());
            }
            if comp.chars().any(|c| c.is_control() || c == '\\') {
                return bad("prefix holds a control character or a backslash".into());
            }
        }
    }
    Ok((bucket.to_string(), prefix.to_string()))
}

/// An endpoint `http(s)://host[:port]` (no path, query or credentials), without
/// a trailing `/`.
pub fn validate_endpoint(endpoint: &str) -> Result<String> {
    let bad = |why: &str| {
        Err(Error::Invalid(format!(
            "invalid endpoint {endpoint:?}: {why} (expected http(s)://HOST[:PORT])"
        )))
    };
    let Some(hostport) = endpoint
        .strip_prefix("http://")
        .or_else(|| endpoint.strip_prefix("https://"))
    else {
        return bad("not an http or https URL");
    };
    let hostport = hostport.strip_suffix('/').unwrap_or(hostport);
    if hostport.is_empty() {
        return bad("no host");
    }
    if hostport.contains(['/', '?', '#', '@']) || hostport.chars().any(|c| c.is_whitespace()) {
        return bad("no path, query, user or spaces allowed");
    }
    let (host, port) = match hostport.rsplit_once(':') {
        // An IPv6 literal `[::1]` without a port has ':' inside the brackets.
        Some((h, p)) if !p.contains(']') => (h, Some(p)),
        _ => (hostport, None),
    };
    if host.is_empty() {
        return bad("no host");
    }
    let host_ok = if let Some(v6) = host.strip_prefix('[') {
        v6.strip_suffix(']')
            .is_some_and(|a| a.parse::<std::net::Ipv6Addr>().is_ok())
    } else {
        host.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '-')
    };
    if !host_ok {
        return bad("bad host");
    }
    if let Some(p) = port
        && p.parse::<u16>().map_or(true, |p| p == 0)
    {
        return bad("bad port");
    }
    Ok(endpoint.trim_end_matches('/').to_string())
}

fn validate_region(region: &str) -> Result<()> {
    if region.is_empty()
        || region.len() > 64
        || !region
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
    {
        return Err(Error::Invalid(format!(
            "invalid region {region:?} (letters, digits, '-' and '_')"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Found by the `remote_refs` fuzz target (which requires decode errors to be
    /// `Corrupt`; input in fuzz/regressions/remote_refs/): a stored config whose
    /// endpoint (or URL, name, region) does not validate decoded to `Invalid` (a bad
    /// request), not `Corrupt` (a damaged record).
    #[test]
    fn damaged_stored_config_is_corrupt() {
        let rec = |endpoint: &str, url: &str| {
            serde_json::to_vec(&serde_json::json!({
                "version": 1, "name": "origin", "url": url, "bucket": "bkt", "prefix": "",
                "endpoint": endpoint, "region": "us-east-1", "single_writer": false,
                "conditional_writes": true, "created": 1,
            }))
            .unwrap()
        };
        assert!(RemoteConfig::decode("origin", &rec("http://127.0.0.1:9000", "s3://bkt")).is_ok());
        for bad in [
            rec("ftp://x", "s3://bkt"),
            rec("http://127.0.0.1:9000", "s3://Bkt"),
        ] {
            let e = RemoteConfig::decode("origin", &bad).unwrap_err();
            assert!(matches!(e, Error::Corrupt { .. }), "{e:?}");
        }
    }

    #[test]
    fn urls() {
        assert_eq!(
            parse_url("s3://bkt/a/b").unwrap(),
            ("bkt".into(), "a/b".into())
        );
        assert_eq!(parse_url("s3://bkt/a/b/").unwrap().1, "a/b");
        assert_eq!(
            parse_url("s3://bkt").unwrap(),
            ("bkt".into(), String::new())
        );
        assert_eq!(parse_url("s3://bkt/").unwrap().1, "");
        assert_eq!(parse_url("s3://my.bucket-1/x").unwrap().0, "my.bucket-1");
        for bad in [
            "gs://bkt/x",
            "bkt/x",
            "s3://ab",
            "s3://Bkt",
            "s3://bkt_x",
            "s3://-bkt",
            "s3://bkt-",
            &format!("s3://{}", "a".repeat(64)),
            "s3://bkt/a//b",
            "s3://bkt/a/../b",
            "s3://bkt/a\nb",
        ] {
            assert!(parse_url(bad).is_err(), "{bad}");
        }
        let e = parse_url("gs://b/x").unwrap_err().to_string();
        assert!(e.contains("\"gs\" is not supported"), "{e}");
    }

    #[test]
    fn endpoints() {
        for ok in [
            "http://127.0.0.1:8333",
            "https://s3.example.com",
            "http://localhost:9000/",
            "http://[::1]:8333",
            "http://[::1]",
        ] {
            assert!(validate_endpoint(ok).is_ok(), "{ok}");
        }
        assert_eq!(
            validate_endpoint("http://localhost:9000/").unwrap(),
            "http://localhost:9000"
        );
        for bad in [
            "ftp://h",
            "127.0.0.1:8333",
            "http://",
            "http://h:0",
            "http://h:99999",
            "http://h:x",
            "http://h/path",
            "http://u:p@h",
            "http://h?x",
            "http://h h",
        ] {
            assert!(validate_endpoint(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn config_round_trips_and_refuses_tampering() {
        let c = RemoteConfig::new("origin", "s3://bkt/p/", "http://h:1", None, false).unwrap();
        assert_eq!(c.url, "s3://bkt/p");
        assert_eq!(c.region, DEFAULT_REGION);
        assert_eq!(RemoteConfig::decode("origin", &c.encode()).unwrap(), c);
        assert!(RemoteConfig::decode("other", &c.encode()).is_err());
        let mut t = c.clone();
        t.prefix = "q".into();
        assert!(RemoteConfig::decode("origin", &t.encode()).is_err());
        let mut t = c.clone();
        t.version = 2;
        assert!(RemoteConfig::decode("origin", &t.encode()).is_err());
        assert!(RemoteConfig::decode("origin", b"{").is_err());
        // Content writes are conditional unless single-writer without conditions.
        assert_eq!(c.content_put(), PutIf::Absent);
        let sw = RemoteConfig {
            single_writer: true,
            ..c
        };
        assert_eq!(sw.content_put(), PutIf::Always);
    }

    #[test]
    fn remote_and_branch_names_do_not_clash() {
        use crate::refs::remote_names::{refuse_branch_clash, refuse_remote_clash};
        let s = crate::store::MemStore::default();
        let c = RemoteConfig::new("origin", "s3://bkt", "http://h:1", None, false).unwrap();
        s.commit(vec![c.op()]).unwrap();
        assert!(refuse_branch_clash(&s, "origin/x").is_err());
        assert!(refuse_branch_clash(&s, "origin").is_err());
        assert!(refuse_branch_clash(&s, "origins/x").is_ok());
        assert!(refuse_branch_clash(&s, "x/origin").is_ok());
        let r = crate::refs::RefRecord {
            checkpoint: crate::id::CheckpointId([1; 32]),
            created: 0,
        };
        s.commit(vec![crate::refs::ref_op("team/main", &r)])
            .unwrap();
        assert!(refuse_remote_clash(&s, "team").is_err());
        assert!(refuse_remote_clash(&s, "tea").is_ok());
        assert_eq!(list(&s).unwrap(), vec![c.clone()]);
        assert!(load(&s, "nope").is_err());
    }
}
