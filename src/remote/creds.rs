//! Credentials of remotes: where the daemon finds them.
//!
//! Owns: the lookup order of the process's own sources — the process
//! environment (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`),
//! else the shared credentials file (`AWS_SHARED_CREDENTIALS_FILE`, else
//! `$HOME/.aws/credentials`; profile `AWS_PROFILE`, else `default`; INI) — that
//! file's parser, and the message saying how to provide credentials. (Credentials
//! a `remote add` request carried come first; `registry` holds them, in memory.)
//!
//! Invariants: credentials are read each time a remote is opened (so a file
//! written, or variables handed over, after the daemon started are used) and live
//! only in the [`Credentials`] value handed to the client; they are never stored
//! on disk by treefork (no config field holds them), never logged, never in an
//! error message ([`Credentials`]' `Debug` hides the secret; errors name only
//! where the lookup went).

use std::path::PathBuf;

use super::client::Credentials;
use crate::error::{Error, Result};

/// Environment variable of the access key id.
pub const ENV_KEY_ID: &str = "AWS_ACCESS_KEY_ID";
/// Environment variable of the secret access key.
pub const ENV_SECRET: &str = "AWS_SECRET_ACCESS_KEY";
/// Environment variable of the session token.
pub const ENV_TOKEN: &str = "AWS_SESSION_TOKEN";
/// Environment variable naming the credentials file.
pub const ENV_FILE: &str = "AWS_SHARED_CREDENTIALS_FILE";
/// Environment variable naming the profile.
pub const ENV_PROFILE: &str = "AWS_PROFILE";

/// The variables [`hold_from_environment`] takes out of the environment.
const HELD: &[&str] = &[ENV_KEY_ID, ENV_SECRET, ENV_TOKEN, ENV_FILE, ENV_PROFILE];

/// The daemon's credential variables, taken out of its environment at start.
static HELD_ENV: std::sync::OnceLock<Vec<(String, String)>> = std::sync::OnceLock::new();

/// Move the credential variables out of this process's environment into memory
/// (the daemon calls it first thing, before any thread exists): no child can
/// inherit them, whatever spawns it. (`/proc/PID/environ` still shows the
/// environment the daemon started with; only the daemon's uid and root read
/// it.) [`load`] reads them from memory from then on.
pub fn hold_from_environment() {
    let held: Vec<(String, String)> = HELD
        .iter()
        .filter_map(|k| Some((k.to_string(), std::env::var(k).ok()?)))
        .collect();
    for k in HELD {
        // SAFETY: called at the daemon's start, before it starts any thread
        // (`daemon::run`), so no other thread reads the environment meanwhile.
        unsafe { std::env::remove_var(k) };
    }
    let _ = HELD_ENV.set(held);
}

/// The credentials for remote `remote` (named in the error), from this
/// process's environment (as held by [`hold_from_environment`] in the daemon).
pub fn load(remote: &str) -> Result<Credentials> {
    match HELD_ENV.get() {
        Some(held) => load_with(remote, &|k| {
            held.iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.clone())
                .or_else(|| (k == "HOME").then(|| std::env::var(k).ok()).flatten())
        }),
        None => load_with(remote, &|k| std::env::var(k).ok()),
    }
}

/// Like [`load`], with `env` standing for the environment.
pub fn load_with(remote: &str, env: &dyn Fn(&str) -> Option<String>) -> Result<Credentials> {
    let var = |k: &str| env(k).filter(|v| !v.is_empty());
    if let (Some(key_id), Some(secret)) = (var(ENV_KEY_ID), var(ENV_SECRET)) {
        return Ok(Credentials {
            key_id,
            secret,
            token: var(ENV_TOKEN),
        });
    }
    let profile = var(ENV_PROFILE).unwrap_or_else(|| "default".into());
    let file = var(ENV_FILE)
        .map(PathBuf::from)
        .or_else(|| var("HOME").map(|h| PathBuf::from(h).join(".aws/credentials")));
    let write = file.as_ref().map_or_else(
        || format!("set {ENV_FILE}"),
        |f| format!("write {}", f.display()),
    );
    let missing = |why: String| Error::Remote {
        remote: remote.to_string(),
        detail: format!(
            "no credentials: {ENV_KEY_ID}/{ENV_SECRET} are not set in the daemon's environment and {why}; \
             export {ENV_KEY_ID}/{ENV_SECRET} and run `treefork remote add {remote} URL --endpoint URL` \
             again (same URL and endpoint: it hands them to the running daemon), or {write}"
        ),
    };
    let Some(file) = file else {
        return Err(missing(format!(
            "neither {ENV_FILE} nor HOME is set (no credentials file)"
        )));
    };
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) => {
            return Err(missing(format!(
                "the credentials file {} cannot be read ({})",
                file.display(),
                e.kind()
            )));
        }
    };
    parse_file(&text, &profile).ok_or_else(|| {
        missing(format!(
            "the credentials file {} has no profile [{profile}] with aws_access_key_id and aws_secret_access_key",
            file.display()
        ))
    })
}

/// The credentials of `profile` in the text of a credentials file (INI:
/// `[profile]` sections of `key = value` lines; `#`/`;` comments; keys
/// case-insensitive). `None` when the profile or one of its two keys is missing.
pub fn parse_file(text: &str, profile: &str) -> Option<Credentials> {
    let mut in_profile = false;
    let (mut key_id, mut secret, mut token) = (None, None, None);
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(sec) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            let sec = sec.trim();
            let sec = sec.strip_prefix("profile ").unwrap_or(sec).trim();
            in_profile = sec == profile;
            continue;
        }
        if !in_profile {
            continue;
        }
        let Some((k, v)) = line.split_once('=') else {
            continue;
        };
        let v = v.trim().to_string();
        match k.trim().to_ascii_lowercase().as_str() {
            "aws_access_key_id" => key_id = Some(v),
            "aws_secret_access_key" => secret = Some(v),
            "aws_session_token" => token = Some(v),
            _ => {}
        }
    }
    Some(Credentials {
        key_id: key_id.filter(|v| !v.is_empty())?,
        secret: secret.filter(|v| !v.is_empty())?,
        token: token.filter(|v| !v.is_empty()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn env(pairs: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
        let m: HashMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        move |k| m.get(k).cloned()
    }

    const FILE: &str = "\
# comment
[default]
aws_access_key_id = AKDEFAULT
aws_secret_access_key = s3cr3t-default

[profile team]
AWS_ACCESS_KEY_ID=AKTEAM
aws_secret_access_key= s3cr3t-team
aws_session_token = tok
; another
[half]
aws_access_key_id = only
";

    #[test]
    fn environment_first() {
        let c = load_with(
            "o",
            &env(&[
                (ENV_KEY_ID, "AK"),
                (ENV_SECRET, "SK"),
                (ENV_TOKEN, "T"),
                ("HOME", "/nonexistent"),
            ]),
        )
        .unwrap();
        assert_eq!((c.key_id.as_str(), c.secret.as_str()), ("AK", "SK"));
        assert_eq!(c.token.as_deref(), Some("T"));
        assert!(!format!("{c:?}").contains("SK"));
    }

    #[test]
    fn credentials_file_profiles() {
        let c = parse_file(FILE, "default").unwrap();
        assert_eq!(
            (c.key_id.as_str(), c.secret.as_str()),
            ("AKDEFAULT", "s3cr3t-default")
        );
        assert_eq!(c.token, None);
        let t = parse_file(FILE, "team").unwrap();
        assert_eq!(
            (t.key_id.as_str(), t.secret.as_str()),
            ("AKTEAM", "s3cr3t-team")
        );
        assert_eq!(t.token.as_deref(), Some("tok"));
        assert!(parse_file(FILE, "half").is_none());
        assert!(parse_file(FILE, "nope").is_none());
        assert!(parse_file("garbage\n[[x\n=", "default").is_none());
    }

    #[test]
    fn file_lookup_and_missing_credentials_message() {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("creds");
        std::fs::write(&f, FILE).unwrap();
        let fs = f.to_str().unwrap();
        // Only the key id in the environment: the file is used.
        let c = load_with(
            "o",
            &env(&[(ENV_KEY_ID, "AK"), (ENV_FILE, fs), (ENV_PROFILE, "team")]),
        )
        .unwrap();
        assert_eq!(c.key_id, "AKTEAM");
        std::fs::create_dir_all(dir.path().join(".aws")).unwrap();
        std::fs::write(dir.path().join(".aws/credentials"), FILE).unwrap();
        let c = load_with("o", &env(&[("HOME", dir.path().to_str().unwrap())])).unwrap();
        assert_eq!(c.key_id, "AKDEFAULT");
        let e = load_with("origin", &env(&[(ENV_FILE, "/nonexistent/c")])).unwrap_err();
        let m = e.to_string();
        assert!(matches!(e, Error::Remote { .. }));
        assert!(
            m.contains("origin") && m.contains(ENV_KEY_ID) && m.contains("/nonexistent/c"),
            "{m}"
        );
        // It says how to fix it: hand them over with `remote add`, or write the file.
        assert!(
            m.contains("treefork remote add origin") && m.contains("write /nonexistent/c"),
            "{m}"
        );
        let e = load_with("origin", &env(&[(ENV_FILE, fs), (ENV_PROFILE, "half")]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("[half]") && !e.contains("only"), "{e}");
        let e = load_with("origin", &env(&[])).unwrap_err().to_string();
        assert!(e.contains("HOME"), "{e}");
    }
}
