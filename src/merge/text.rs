//! Line merges of text files, by the `diffy` crate (its three-way merge of
//! `diff3`'s kind; see docs/design.md, "Merges", for why this crate).

/// Bytes looked at to decide whether a file is binary (as git: a NUL in the first
/// 8000 bytes).
const SNIFF: usize = 8000;

/// Whether `data` is binary: a NUL byte near the start, or not UTF-8.
pub fn is_binary(data: &[u8]) -> bool {
    data[..data.len().min(SNIFF)].contains(&0) || std::str::from_utf8(data).is_err()
}

/// Merge `ours` and `theirs`, both changed from `base`: the merged bytes, and
/// whether the merge was clean (otherwise they hold `<<<<<<< ours`, `=======`,
/// `>>>>>>> theirs` around each clash).
pub fn merge3(base: &[u8], ours: &[u8], theirs: &[u8]) -> (Vec<u8>, bool) {
    merge3_labeled(base, ours, theirs, Labels::PLAIN)
}

/// What the conflict markers call each side.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Labels {
    /// After `<<<<<<< `: the side kept above `=======`.
    pub ours: &'static str,
    /// After `>>>>>>> `: the side below it.
    pub theirs: &'static str,
}

impl Labels {
    /// `ours` / `theirs` (merge, cherry-pick, revert: ours is the session).
    pub const PLAIN: Labels = Labels {
        ours: "ours",
        theirs: "theirs",
    };
    /// A rebase onto the repository: the session's side is "ours" here, the
    /// reverse of `git rebase`, so the markers name both sides outright.
    pub const REBASE: Labels = Labels {
        ours: "session (yours)",
        theirs: "repository (upstream)",
    };
}

/// [`merge3`] with the markers naming the sides `labels`.
pub fn merge3_labeled(base: &[u8], ours: &[u8], theirs: &[u8], labels: Labels) -> (Vec<u8>, bool) {
    if ours == theirs {
        return (ours.to_vec(), true);
    }
    match diffy::merge_bytes(base, ours, theirs) {
        Ok(m) => (m, true),
        Err(m) if labels == Labels::PLAIN => (m, false),
        Err(m) => (relabel(&m, labels), false),
    }
}

/// `m` (diffy's output, markers `<<<<<<< ours` / `>>>>>>> theirs`) with the
/// marker lines naming the sides `labels`.
fn relabel(m: &[u8], labels: Labels) -> Vec<u8> {
    let (o, t) = (
        format!("<<<<<<< {}", labels.ours),
        format!(">>>>>>> {}", labels.theirs),
    );
    let mut out = Vec::with_capacity(m.len() + 64);
    for (i, l) in m.split(|&b| b == b'\n').enumerate() {
        if i > 0 {
            out.push(b'\n');
        }
        match l {
            b"<<<<<<< ours" => out.extend_from_slice(o.as_bytes()),
            b">>>>>>> theirs" => out.extend_from_slice(t.as_bytes()),
            _ => out.extend_from_slice(l),
        }
    }
    out
}

/// Whether `data` still holds a conflict marker line this module writes.
pub fn has_markers(data: &[u8]) -> bool {
    data.split(|&b| b == b'\n')
        .any(|l| l.starts_with(b"<<<<<<< ") || l.starts_with(b">>>>>>> ") || l == b"=======")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn rebase_markers_name_the_session_and_the_repository() {
        let (m, clean) = merge3_labeled(b"a\nb\n", b"A\nb\n", b"X\nb\n", Labels::REBASE);
        assert!(!clean);
        let m = String::from_utf8(m).unwrap();
        // diff3 style: the base's lines sit between `|||||||` and `=======`.
        assert!(
            m.starts_with("<<<<<<< session (yours)\nA\n||||||| original\na\n=======\nX\n>>>>>>> repository (upstream)\n"),
            "{m}"
        );
        assert!(!m.contains("ours\n") && !m.contains("theirs\n"), "{m}");
        assert!(has_markers(m.as_bytes()));
    }

    #[test]
    fn clean_and_conflicting_merges() {
        let base = b"a\nb\nc\nd\ne\n";
        let ours = b"A\nb\nc\nd\ne\n";
        let theirs = b"a\nb\nc\nd\nE\n";
        let (m, clean) = merge3(base, ours, theirs);
        assert!(clean);
        assert_eq!(m, b"A\nb\nc\nd\nE\n");
        let (m, clean) = merge3(base, b"a\nX\nc\nd\ne\n", b"a\nY\nc\nd\ne\n");
        assert!(!clean);
        assert!(has_markers(&m), "{}", String::from_utf8_lossy(&m));
        let (m, clean) = merge3(b"", b"one\n", b"two\n");
        assert!(!clean && has_markers(&m));
    }

    #[test]
    fn binary_detection() {
        assert!(is_binary(b"a\0b"));
        assert!(is_binary(&[0xff, 0xfe]));
        assert!(!is_binary("héllo\n".as_bytes()));
    }

    proptest! {
        /// Edits to different lines merge cleanly into both edits; one side's
        /// edit alone is that side.
        #[test]
        fn disjoint_edits_merge(n in 4usize..40, i in 0usize..40, j in 0usize..40) {
            let (i, j) = (i % n, j % n);
            prop_assume!(i.abs_diff(j) > 1);
            let base: Vec<String> = (0..n).map(|k| format!("line {k}\n")).collect();
            let mut ours = base.clone();
            ours[i] = "ours\n".into();
            let mut theirs = base.clone();
            theirs[j] = "theirs\n".into();
            let mut both = base.clone();
            both[i] = "ours\n".into();
            both[j] = "theirs\n".into();
            let (b, o, t, w) = (base.concat(), ours.concat(), theirs.concat(), both.concat());
            let (m, clean) = merge3(b.as_bytes(), o.as_bytes(), t.as_bytes());
            prop_assert!(clean);
            prop_assert_eq!(m, w.into_bytes());
            let (m, clean) = merge3(b.as_bytes(), b.as_bytes(), t.as_bytes());
            prop_assert!(clean);
            prop_assert_eq!(m, t.clone().into_bytes());
        }
    }
}
