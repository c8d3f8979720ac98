//! The stopped state of a merge, cherry-pick, revert or rebase that ended on
//! conflicts, typed: [`Stop`] (`refs::Merging` over [`Conflict`]).
//!
//! Owns: the stop's conflicts' type and their decoding from, and encoding into,
//! the session record (`s/<name>`, field `merging`), where `refs` keeps them as
//! undecoded JSON because it cannot name [`Conflict`]. The encoding is the one
//! the session record has always held (each conflict the JSON object answered:
//! `path`, `kind`, `theirs_at`, `detail`), so stops stored by earlier versions
//! decode unchanged.
//!
//! Invariant: a stored stop either decodes whole or is `Error::Corrupt` naming
//! the session and the key; a conflict is never skipped (`--continue` with a
//! conflict dropped would pass with it left in the workspace).

use serde::Deserialize as _;

use super::Conflict;
use crate::error::{Error, Result};
use crate::refs::session_record::{Merging, SessionRecord};

/// A stopped merge with its conflicts decoded.
pub type Stop = Merging<Conflict>;

/// What a corrupt stop of `session` is named by in errors: the session record's
/// key and field.
fn what(session: &str) -> String {
    format!("stopped merge of session {session} (key s/{session}, field merging)")
}

/// Decode the stored stop `m` of `session`: every conflict, or `Error::Corrupt`
/// naming the session, the key and the first conflict that does not decode.
pub fn decode(session: &str, m: &Merging) -> Result<Stop> {
    let mut conflicts = Vec::with_capacity(m.conflicts.len());
    for (i, v) in m.conflicts.iter().enumerate() {
        let c = Conflict::deserialize(v)
            .map_err(|e| Error::corrupt(what(session), format!("conflict {i}: {e}")))?;
        conflicts.push(c);
    }
    Ok(Merging {
        op: m.op.clone(),
        theirs: m.theirs.clone(),
        theirs_id: m.theirs_id,
        parents: m.parents.clone(),
        before: m.before,
        before_root: m.before_root,
        message: m.message.clone(),
        conflicts,
        onto: m.onto.clone(),
    })
}

/// The stop `rec` holds, decoded (`None`: no merge is stopped).
pub fn of(rec: &SessionRecord) -> Result<Option<Stop>> {
    rec.merging
        .as_ref()
        .map(|m| decode(&rec.name, m))
        .transpose()
}

/// The stop as the session record stores it.
pub fn encode(s: &Stop) -> Merging {
    let conflicts = s
        .conflicts
        .iter()
        .map(|c| serde_json::to_value(c).expect("a conflict serializes"))
        .collect();
    Merging {
        op: s.op.clone(),
        theirs: s.theirs.clone(),
        theirs_id: s.theirs_id,
        parents: s.parents.clone(),
        before: s.before,
        before_root: s.before_root,
        message: s.message.clone(),
        conflicts,
        onto: s.onto.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::Error;
    use crate::merge::ConflictKind;

    /// A session record holding a stop as every version so far wrote it.
    fn stored(conflicts: &str) -> Vec<u8> {
        let root = "11".repeat(32);
        let before = "22".repeat(32);
        format!(
            r#"{{"version":2,"name":"s1","root":"{root}","base":"{root}","created":1,"updated":2,
               "head":"{before}",
               "merging":{{"op":"merge","theirs":"feature","theirs_id":"{before}",
                 "before":"{before}","before_root":"{root}","message":"merge feature",
                 "conflicts":{conflicts}}}}}"#
        )
        .into_bytes()
    }

    #[test]
    fn todays_encoding_decodes() {
        let bytes = stored(
            r#"[{"path":"a.txt","kind":"content","detail":"both changed lines 3-4"},
                {"path":"b.bin","kind":"binary","theirs_at":"b.bin~theirs","detail":"binary"},
                {"path":"c","kind":"modify_delete","detail":"ours changed, theirs deleted"}]"#,
        );
        let rec = SessionRecord::decode("s1", &bytes).unwrap();
        let s = of(&rec).unwrap().expect("a stop");
        assert_eq!(s.op, "merge");
        assert_eq!(s.theirs, "feature");
        assert_eq!(s.message, "merge feature");
        let kinds: Vec<_> = s
            .conflicts
            .iter()
            .map(|c| (c.path.as_str(), c.kind))
            .collect();
        assert_eq!(
            kinds,
            [
                ("a.txt", ConflictKind::Content),
                ("b.bin", ConflictKind::Binary),
                ("c", ConflictKind::ModifyDelete)
            ]
        );
        assert_eq!(s.conflicts[1].theirs_at.as_deref(), Some("b.bin~theirs"));
        // What is stored again is what was read.
        assert_eq!(encode(&s), rec.merging.clone().unwrap());
        let again: serde_json::Value = serde_json::from_slice(&bytes).unwrap();
        assert_eq!(serde_json::to_value(encode(&s)).unwrap(), again["merging"]);
    }

    #[test]
    fn an_undecodable_conflict_is_corrupt() {
        for bad in [
            r#"[{"path":"a.txt","kind":"content","detail":"x"},{"path":"b","kind":"no_such_kind","detail":"x"}]"#,
            r#"[{"kind":"content","detail":"x"}]"#,
            r#"[17]"#,
        ] {
            let rec = SessionRecord::decode("s1", &stored(bad)).unwrap();
            match of(&rec) {
                Err(Error::Corrupt { what, .. }) => {
                    assert!(what.contains("s1") && what.contains("s/s1"), "{what}")
                }
                other => panic!("{bad}: {other:?}"),
            }
        }
    }

    #[test]
    fn no_stop_is_none() {
        let rec = SessionRecord::decode("s1", &stored("[]")).unwrap();
        assert_eq!(of(&rec).unwrap().unwrap().conflicts, Vec::new());
        let mut rec = rec;
        rec.merging = None;
        assert!(of(&rec).unwrap().is_none());
    }
}
