//! Git's ignore rules over a workspace tree (pure: bytes in, answers out).
//!
//! Owns: parsing one `.gitignore` file (or `.git/info/exclude`) from its bytes, and
//! asking a stack of them, one level per directory from the root down, whether a
//! path is ignored. The semantics are gitignore(5)'s, through the `ignore` crate's
//! matcher (ripgrep's): `#` comments, trailing spaces, `\` escapes, `!` negation,
//! a trailing `/` for directories only, a leading or inner `/` anchoring to the
//! file's directory, `*`, `?`, `[...]` and `**`. Within a file the last matching
//! line decides; a deeper file overrides a shallower one; `.git/info/exclude` is
//! below the root `.gitignore`. A path inside an ignored directory stays ignored
//! whatever a deeper negation says (git never looks inside): the caller stops at an
//! ignored directory ([`crate::diff::Filter`]).
//!
//! Not read: the user's `core.excludesFile` (a setting of one user's git, not of the
//! workspace; the daemon runs as root and reads nothing outside the tree).
//!
//! The files come from the agent's tree and are hostile input: each is read up to
//! [`MAX_FILE`] bytes (the rest is not read), lines that are not valid patterns are
//! skipped as git skips them, and nothing here touches the file system or runs a
//! program (`promote` asks the durable repository's own git instead: its question is
//! what *that* repository ignores).

use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::sync::Arc;

use ignore::Match;
use ignore::gitignore::{Gitignore, GitignoreBuilder};

/// The most of one ignore file that is read (bytes); the rest is left out.
pub const MAX_FILE: usize = 1 << 20;

/// The name of the per-directory ignore file.
pub const FILE_NAME: &[u8] = b".gitignore";

/// The workspace-wide exclude file, below the root `.gitignore`.
pub const EXCLUDE_PATH: &[u8] = b".git/info/exclude";

/// One ignore file's rules, matched against paths relative to its directory.
struct Rules(Gitignore);

impl Rules {
    /// Parse `bytes` (at most [`MAX_FILE`] of them); `None` when no line is a rule.
    fn parse(bytes: &[u8]) -> Option<Rules> {
        let bytes = &bytes[..bytes.len().min(MAX_FILE)];
        let text = String::from_utf8_lossy(bytes);
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let mut b = GitignoreBuilder::new(".");
        for line in text.lines() {
            // A line that is not a valid pattern is skipped, as git skips it.
            let _ = b.add_line(None, line);
        }
        let gi = b.build().ok()?;
        (!gi.is_empty()).then_some(Rules(gi))
    }

    fn matched(&self, rel: &[u8], is_dir: bool) -> Match<()> {
        let p = Path::new(OsStr::from_bytes(rel));
        match self.0.matched(p, is_dir) {
            Match::None => Match::None,
            Match::Ignore(_) => Match::Ignore(()),
            Match::Whitelist(_) => Match::Whitelist(()),
        }
    }
}

/// The rules in force in one directory: its own file's, then its parents' (down to
/// the root's `.gitignore`, then `.git/info/exclude`). Shared by the directories
/// below it (`Arc`), so a walk keeps one level per directory it is inside.
pub struct Stack {
    /// The directory the rules are relative to (workspace-relative, `/`-separated,
    /// empty for the root).
    dir: Vec<u8>,
    rules: Rules,
    parent: Option<Arc<Stack>>,
}

impl Stack {
    /// The rules of the workspace root: `.git/info/exclude` and the root
    /// `.gitignore` (either may be absent); `None` when neither has a rule.
    pub fn root(exclude: Option<&[u8]>, gitignore: Option<&[u8]>) -> Option<Arc<Stack>> {
        let base = exclude.and_then(Rules::parse).map(|rules| {
            Arc::new(Stack {
                dir: Vec::new(),
                rules,
                parent: None,
            })
        });
        Stack::child(base, b"", gitignore)
    }

    /// The rules in directory `dir` (workspace-relative): `parent`'s, with `dir`'s
    /// own `.gitignore` (`gitignore`, if any) on top.
    pub fn child(
        parent: Option<Arc<Stack>>,
        dir: &[u8],
        gitignore: Option<&[u8]>,
    ) -> Option<Arc<Stack>> {
        match gitignore.and_then(Rules::parse) {
            Some(rules) => Some(Arc::new(Stack {
                dir: dir.to_vec(),
                rules,
                parent,
            })),
            None => parent,
        }
    }

    /// Whether `path` (workspace-relative; a directory when `is_dir`) is ignored by
    /// these rules. Its parent directories are not looked at: a caller walking down
    /// stops at the first ignored one.
    pub fn ignored(&self, path: &[u8], is_dir: bool) -> bool {
        let mut level = Some(self);
        while let Some(s) = level {
            let rel = if s.dir.is_empty() {
                Some(path)
            } else {
                path.strip_prefix(&s.dir[..])
                    .and_then(|r| r.strip_prefix(b"/"))
            };
            if let Some(rel) = rel {
                match s.rules.matched(rel, is_dir) {
                    Match::Ignore(()) => return true,
                    Match::Whitelist(()) => return false,
                    Match::None => {}
                }
            }
            level = s.parent.as_deref();
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ign(s: &Option<Arc<Stack>>, p: &str, dir: bool) -> bool {
        s.as_ref().is_some_and(|s| s.ignored(p.as_bytes(), dir))
    }

    #[test]
    fn git_semantics() {
        let root = Stack::root(
            Some(b"# exclude\nsecret.txt\n"),
            Some(b"node_modules/\n*.log\n!keep.log\n/only-top\nbuild/out\n\\#hash\n"),
        );
        assert!(ign(&root, "node_modules", true));
        assert!(
            !ign(&root, "node_modules", false),
            "a file named like the dir"
        );
        assert!(ign(&root, "a/b/node_modules", true));
        assert!(ign(&root, "x.log", false));
        assert!(ign(&root, "deep/er/x.log", false));
        assert!(!ign(&root, "keep.log", false));
        assert!(ign(&root, "only-top", false));
        assert!(!ign(&root, "sub/only-top", false));
        assert!(ign(&root, "build/out", false));
        assert!(!ign(&root, "sub/build/out", false));
        assert!(ign(&root, "secret.txt", false));
        assert!(ign(&root, "#hash", false));
        assert!(!ign(&root, "src/main.rs", false));
        // A nested file overrides its parents, relative to its own directory.
        let sub = Stack::child(root.clone(), b"pkg", Some(b"!important.log\n/gen\n"));
        assert!(!ign(&sub, "pkg/important.log", false));
        assert!(ign(&sub, "pkg/other.log", false));
        assert!(ign(&sub, "pkg/gen", true));
        assert!(!ign(&sub, "pkg/a/gen", true));
        assert!(
            !ign(&sub, "gen", true),
            "not under the nested file's directory"
        );
        // The nested file's rules do not apply beside it.
        assert!(ign(&root, "important.log", false));
        // No rules: nothing ignored; a file of comments is no rules.
        assert!(Stack::root(None, Some(b"# nothing\n\n")).is_none());
        // The root .gitignore overrides the exclude file.
        let r = Stack::root(Some(b"*.txt\n"), Some(b"!a.txt\n"));
        assert!(!ign(&r, "a.txt", false));
        assert!(ign(&r, "b.txt", false));
    }

    #[test]
    fn hostile_input_is_bounded_and_tolerated() {
        let mut big = b"[unclosed\n\xff\xfe*.tmp\n".to_vec();
        big.extend(std::iter::repeat_n(b'#', MAX_FILE));
        big.extend(b"\nlate\n");
        let s = Stack::root(None, Some(&big));
        assert!(!ign(&s, "late", false), "past MAX_FILE is not read");
        assert!(
            !ign(&s, "x.tmp", false),
            "the line with invalid UTF-8 is not *.tmp"
        );
        let s = Stack::root(None, Some(b"[unclosed\nok\n"));
        assert!(ign(&s, "ok", false));
    }
}
