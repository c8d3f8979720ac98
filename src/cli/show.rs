//! `show REF` (a checkpoint's metadata and changed paths) and `show REF:PATH` (what
//! is at PATH in that state, without a checkout: a file's bytes raw on stdout, a
//! directory's entries, a symbolic link's target).
//!
//! File bytes arrive as `data` events (base64); they are written to stdout as they
//! arrive (for people) and checked at the end against the size and blake3 the
//! daemon sends: a mismatch is an error, never silently short output. With
//! `--json` the daemon's description is printed, plus `text` when the bytes are
//! UTF-8 (else `binary: true`).

use treefork::ops::show::{ShowAnswer, ShownCheckpoint};

use super::output::fmt_time;
use super::prelude::*;

/// Show a checkpoint (REF), or the file, directory or link at PATH in it (REF:PATH).
#[derive(clap::Args)]
pub struct Show {
    /// REF or REF:PATH (PATH relative to the workspace root). REF is HEAD, @,
    /// @{-N}, exec@N, a branch or an id prefix, with ~N / ^N suffixes.
    #[arg(value_name = "REF[:PATH]")]
    what: String,
}

impl Human for ShowAnswer {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let p = match self {
            ShowAnswer::Checkpoint(c) => return record(c, out),
            ShowAnswer::Path(p) => p,
        };
        match p.kind.as_str() {
            // The bytes were written as they arrived.
            "file" | "symlink" => Ok(()),
            "dir" => {
                for e in p.entries.iter().flatten() {
                    let slash = if e.kind.as_deref() == Some("dir") {
                        "/"
                    } else {
                        ""
                    };
                    writeln!(out, "{}{slash}", e.name)?;
                }
                Ok(())
            }
            kind => writeln!(out, "{}: a {kind} (no contents to show)", p.path),
        }
    }
}

fn record(shown: &ShownCheckpoint, out: &mut dyn Write) -> io::Result<()> {
    let c = &shown.checkpoint;
    writeln!(out, "checkpoint {}", c.id)?;
    for p in &c.parents {
        writeln!(out, "parent     {p}")?;
    }
    writeln!(out, "time       {}", fmt_time(c.time))?;
    writeln!(out, "trigger    {}", c.trigger)?;
    if !c.meta.is_empty() {
        let meta = serde_json::Value::Object(c.meta.clone());
        writeln!(out, "meta       {meta}")?;
    }
    writeln!(out, "\n    {}\n", c.message)?;
    match &shown.changes {
        None => writeln!(out, "(first checkpoint: no parent to compare with)"),
        Some(list) => {
            for ch in list {
                writeln!(out, "{}\t{}", ch.change.letter(), ch.path)?;
            }
            Ok(())
        }
    }
}

/// `REF` or `REF:PATH` (a ref never contains `:`).
fn split(what: &str) -> (String, Option<String>) {
    match what.split_once(':') {
        Some((r, p)) => (r.to_string(), Some(p.to_string())),
        None => (what.to_string(), None),
    }
}

impl Run for Show {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let (target, path) = split(&self.what);
        let op = Request::Show(treefork::verbs::Show { target, path });
        let json = cx.json();
        let mut bytes = Vec::new();
        let mut hash = blake3::Hasher::new();
        let mut size = 0u64;
        let mut failed: Option<anyhow::Error> = None;
        let mut on_event = |ev: &serde_json::Value| {
            if ev["event"] != "data" || failed.is_some() {
                return;
            }
            let chunk = match decode_base64(ev["data"].as_str().unwrap_or("")) {
                Ok(c) => c,
                Err(e) => {
                    failed = Some(e);
                    return;
                }
            };
            hash.update(&chunk);
            size += chunk.len() as u64;
            if json {
                bytes.extend_from_slice(&chunk);
                return;
            }
            let mut out = io::stdout().lock();
            if let Err(e) = out.write_all(&chunk).and_then(|()| out.flush()) {
                failed = Some(anyhow::Error::new(e).context("cannot write to stdout"));
            }
        };
        let r: Reply<serde_json::Value> = cx.session_events(op, &mut on_event)?;
        if let Some(e) = failed {
            return Err(e);
        }
        let mut raw = r.body;
        if let Some(want) = raw["size"].as_u64() {
            let got = hash.finalize().to_hex().to_string();
            if want != size || raw["blake3"].as_str() != Some(&got) {
                bail!(
                    "show: received {size} bytes (blake3 {got}); the daemon sent {want} bytes (blake3 {})",
                    raw["blake3"].as_str().unwrap_or("?")
                );
            }
            if json {
                match String::from_utf8(bytes) {
                    Ok(text) => raw["text"] = serde_json::Value::String(text),
                    Err(_) => raw["binary"] = serde_json::Value::Bool(true),
                }
            }
        }
        let r: Reply<Answer<treefork::verbs::Show>> = Reply::parse(raw)?;
        Ok(r.into())
    }
}

/// Decode a `data` event's base64.
fn decode_base64(s: &str) -> Result<Vec<u8>> {
    super::plumbing::b64_decode(s).ok_or_else(|| anyhow!("malformed data from the daemon (base64)"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_decodes_rfc4648_vectors_and_refuses_garbage() {
        for (o, i) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(decode_base64(i).unwrap(), o.as_bytes(), "{i}");
        }
        assert_eq!(decode_base64("//79").unwrap(), [0xff, 0xfe, 0xfd]);
        for bad in ["Zg=", "Z===", "Zg==Zm9v", "Zm9*", "é123"] {
            assert!(decode_base64(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn splits_ref_and_path() {
        assert_eq!(split("HEAD~1"), ("HEAD~1".into(), None));
        assert_eq!(split("main:a/b:c"), ("main".into(), Some("a/b:c".into())));
        assert_eq!(split("@:"), ("@".into(), Some(String::new())));
    }
}
