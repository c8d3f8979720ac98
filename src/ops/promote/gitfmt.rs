//! Git's on-disk formats that promote writes into a workspace's own `.git`
//! through the session (never by running git there): loose objects and the
//! index (version 2), SHA-1 repositories only.
//!
//! Pure encoding, no I/O. Formats as git documents them
//! (`gitformat-index(5)`, "loose objects" in `gitformat-pack`... ):
//! - a loose object is `zlib("<type> <size>\0" + content)`, stored at
//!   `objects/<2 hex>/<38 hex>`;
//! - the index is `"DIRC"`, version 2, the entry count (32-bit big-endian), the
//!   entries sorted by path bytes, each: ten 32-bit stat fields (all zero here
//!   but the mode, as `git read-tree` leaves them: git re-reads such a file once
//!   and refreshes it), the 20-byte object id, 16-bit flags (the path length,
//!   `0xFFF` when longer), the path and 1-8 NULs to a multiple of 8 bytes; then
//!   the SHA-1 of everything before it.

use std::io::Write;

use sha1::{Digest, Sha1};

use crate::error::{Error, Result};

/// A loose object's stored bytes: the header and content, zlib-compressed.
pub fn loose_object(kind: &str, content: &[u8]) -> Vec<u8> {
    let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::fast());
    // Writes to a Vec cannot fail.
    let _ = write!(z, "{kind} {}\0", content.len());
    let _ = z.write_all(content);
    z.finish().unwrap_or_default()
}

/// The object id of `content` as a `kind` object (hex).
pub fn object_id(kind: &str, content: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(format!("{kind} {}\0", content.len()).as_bytes());
    h.update(content);
    hex(&h.finalize())
}

fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// One index entry: mode (e.g. 0o100644), object id (40 hex), path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexEntry {
    /// The git mode.
    pub mode: u32,
    /// The object id (hex).
    pub id: String,
    /// The path (`/`-separated, from the top).
    pub path: Vec<u8>,
}

/// Parse `git ls-tree -r -z --full-tree` output into index entries.
pub fn parse_ls_tree(out: &[u8]) -> Result<Vec<IndexEntry>> {
    let bad = |why: &str| Error::Invalid(format!("unexpected git ls-tree output: {why}"));
    let mut v = Vec::new();
    for rec in out.split(|&b| b == 0).filter(|r| !r.is_empty()) {
        let tab = rec
            .iter()
            .position(|&b| b == b'\t')
            .ok_or_else(|| bad("no tab"))?;
        let head = std::str::from_utf8(&rec[..tab]).map_err(|_| bad("not text"))?;
        let mut f = head.split(' ');
        let (Some(mode), Some(_kind), Some(id), None) = (f.next(), f.next(), f.next(), f.next())
        else {
            return Err(bad("fields"));
        };
        let mode = u32::from_str_radix(mode, 8).map_err(|_| bad("mode"))?;
        if id.len() != 40 || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(bad("object id"));
        }
        v.push(IndexEntry {
            mode,
            id: id.to_ascii_lowercase(),
            path: rec[tab + 1..].to_vec(),
        });
    }
    Ok(v)
}

/// An index (version 2) holding `entries` (sorted here), stat data zero.
pub fn index_v2(mut entries: Vec<IndexEntry>) -> Result<Vec<u8>> {
    entries.sort_by(|a, b| a.path.cmp(&b.path));
    entries.dedup_by(|a, b| a.path == b.path);
    let n = u32::try_from(entries.len())
        .map_err(|_| Error::Invalid("too many paths for a git index".into()))?;
    let mut out = Vec::with_capacity(12 + entries.len() * 80);
    out.extend_from_slice(b"DIRC");
    out.extend_from_slice(&2u32.to_be_bytes());
    out.extend_from_slice(&n.to_be_bytes());
    for e in &entries {
        let start = out.len();
        // ctime, mtime (sec, nsec each), dev, ino: zero.
        out.extend_from_slice(&[0u8; 24]);
        out.extend_from_slice(&e.mode.to_be_bytes());
        // uid, gid, size: zero.
        out.extend_from_slice(&[0u8; 12]);
        for i in 0..20 {
            let byte = u8::from_str_radix(&e.id[2 * i..2 * i + 2], 16)
                .map_err(|_| Error::Invalid(format!("bad object id {}", e.id)))?;
            out.push(byte);
        }
        let flags = e.path.len().min(0xFFF) as u16;
        out.extend_from_slice(&flags.to_be_bytes());
        out.extend_from_slice(&e.path);
        let len = out.len() - start;
        let pad = 8 - len % 8;
        out.extend(std::iter::repeat_n(0u8, pad));
    }
    let sum = Sha1::digest(&out);
    out.extend_from_slice(&sum);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &std::path::Path, args: &[&str]) -> Vec<u8> {
        let o = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("HOME", "/nonexistent")
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        o.stdout
    }

    /// What we write is what git writes: the same object ids, an index git
    /// reads back entry for entry, loose objects `git fsck` accepts.
    #[test]
    fn git_reads_what_we_write() {
        let d = tempfile::tempdir().unwrap();
        let src = d.path().join("src");
        std::fs::create_dir_all(src.join("a/b")).unwrap();
        std::fs::write(src.join("a/b/c.txt"), "hello\n").unwrap();
        std::fs::write(src.join("a.b"), "dot\n").unwrap();
        std::fs::write(src.join("a-b"), "dash\n").unwrap();
        std::os::unix::fs::symlink("a/b/c.txt", src.join("link")).unwrap();
        git(&src, &["init", "-q"]);
        git(&src, &["add", "-A"]);
        let tree = String::from_utf8(git(&src, &["write-tree"])).unwrap();
        let tree = tree.trim();
        let listing = git(&src, &["ls-tree", "-r", "-z", "--full-tree", tree]);
        let entries = parse_ls_tree(&listing).unwrap();
        assert_eq!(entries.len(), 4);
        // Another repository takes the objects as loose files and our index.
        let dst = d.path().join("dst");
        std::fs::create_dir(&dst).unwrap();
        git(&dst, &["init", "-q"]);
        for e in &entries {
            let content = git(&src, &["cat-file", "-p", &e.id]);
            let kind = "blob";
            assert_eq!(object_id(kind, &content), e.id);
            let p = dst.join(".git/objects").join(&e.id[..2]);
            std::fs::create_dir_all(&p).unwrap();
            std::fs::write(p.join(&e.id[2..]), loose_object(kind, &content)).unwrap();
        }
        std::fs::write(dst.join(".git/index"), index_v2(entries.clone()).unwrap()).unwrap();
        let ours = git(&dst, &["ls-files", "-s", "-z"]);
        let theirs = git(&src, &["ls-files", "-s", "-z"]);
        assert_eq!(ours, theirs);
        let t2 = String::from_utf8(git(&dst, &["write-tree"])).unwrap();
        assert_eq!(t2.trim(), tree);
    }

    #[test]
    fn malformed_listings_are_refused() {
        for bad in [
            &b"100644 blob xyz\tp\0"[..],
            b"100644 blob\tp\0",
            b"zz blob 0123456789012345678901234567890123456789\tp\0",
            b"100644 blob 0123456789012345678901234567890123456789 p\0",
        ] {
            assert!(
                parse_ls_tree(bad).is_err(),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}
