//! Rendering one difference: a file's bytes and text from its record, line counts
//! (`diff --stat`) and unified patches (git-style headers). Files larger than
//! [`PATCH_LIMIT`] are never loaded.

use crate::error::Result;
use crate::store::{Kind as ObjKind, ObjectStore};
use crate::tree::{BLOCK_SIZE, Content, Kind, Record};

use super::DiffEntry;

/// Read a regular file's bytes from its record (at most `limit` bytes).
pub fn read_file(store: &dyn ObjectStore, r: &Record, limit: u64) -> Result<Vec<u8>> {
    let size = r.attr.size.min(limit);
    let Content::Node(id) = r.content else {
        return Ok(Vec::new());
    };
    let loaded = crate::files::load(store, id)?;
    match loaded.inline {
        Some(d) => Ok(d[..(size as usize).min(d.len())].to_vec()),
        None => {
            let blocks = loaded.blocks;
            let mut out = vec![0u8; size as usize];
            for (idx, c) in blocks {
                let start = idx * BLOCK_SIZE;
                if start >= size {
                    break;
                }
                let data = store.get(ObjKind::Chunk, &c.into())?;
                let n = (data.len() as u64).min(size - start) as usize;
                out[start as usize..start as usize + n].copy_from_slice(&data[..n]);
            }
            Ok(out)
        }
    }
}

/// Files larger than this are not diffed line by line, nor loaded at all: a patch
/// reports them with one line ([`patch`]), a stat as binary. This bounds the memory
/// of one file's patch (both versions and the line diff) whatever the file size.
pub const PATCH_LIMIT: u64 = 8 << 20;

/// Whether `r` is a regular file too large to diff line by line.
fn too_large(r: Option<&Record>) -> bool {
    r.is_some_and(|r| r.kind == Kind::File && r.attr.size > PATCH_LIMIT)
}

/// Text of a file for line diffs, or `None` if binary or too large.
pub fn text_of(store: &dyn ObjectStore, r: Option<&Record>) -> Result<Option<String>> {
    let Some(r) = r else {
        return Ok(Some(String::new()));
    };
    if r.kind == Kind::Symlink
        && let Content::Bytes(b) = &r.content
    {
        return Ok(String::from_utf8(b.clone()).ok().map(|s| s + "\n"));
    }
    if r.kind != Kind::File {
        return Ok(Some(String::new()));
    }
    if r.attr.size > PATCH_LIMIT {
        return Ok(None);
    }
    let b = read_file(store, r, PATCH_LIMIT)?;
    if b.iter().take(8000).any(|&c| c == 0) {
        return Ok(None);
    }
    Ok(String::from_utf8(b).ok())
}

/// (lines added, lines removed) of one entry, `None` if binary.
pub fn line_counts(store: &dyn ObjectStore, e: &DiffEntry) -> Result<Option<(usize, usize)>> {
    let (Some(a), Some(b)) = (
        text_of(store, e.old.as_ref())?,
        text_of(store, e.new.as_ref())?,
    ) else {
        return Ok(None);
    };
    let d = similar::TextDiff::from_lines(&a, &b);
    let (mut add, mut del) = (0, 0);
    for op in d.iter_all_changes() {
        match op.tag() {
            similar::ChangeTag::Insert => add += 1,
            similar::ChangeTag::Delete => del += 1,
            similar::ChangeTag::Equal => {}
        }
    }
    Ok(Some((add, del)))
}

/// A unified diff of one entry (git style headers).
pub fn patch(store: &dyn ObjectStore, e: &DiffEntry) -> Result<String> {
    let p = e.path_str();
    let (a_name, b_name) = (
        if e.old.is_some() {
            format!("a/{p}")
        } else {
            "/dev/null".into()
        },
        if e.new.is_some() {
            format!("b/{p}")
        } else {
            "/dev/null".into()
        },
    );
    let mut out = format!("diff --treefork a/{p} b/{p}\n");
    let is_dir = |r: &Option<Record>| r.as_ref().is_some_and(|r| r.kind == Kind::Dir);
    if is_dir(&e.old) || is_dir(&e.new) {
        return Ok(String::new());
    }
    if too_large(e.old.as_ref()) || too_large(e.new.as_ref()) {
        out.push_str(&format!(
            "Files {a_name} and {b_name} differ (larger than {} MiB: not compared line by line)\n",
            PATCH_LIMIT >> 20
        ));
        return Ok(out);
    }
    match (
        text_of(store, e.old.as_ref())?,
        text_of(store, e.new.as_ref())?,
    ) {
        (Some(a), Some(b)) => {
            if a == b {
                out.push_str("(metadata only)\n");
            } else {
                let d = similar::TextDiff::from_lines(&a, &b);
                out.push_str(
                    &d.unified_diff()
                        .context_radius(3)
                        .header(&a_name, &b_name)
                        .to_string(),
                );
            }
        }
        _ => out.push_str(&format!("Binary files {a_name} and {b_name} differ\n")),
    }
    Ok(out)
}
