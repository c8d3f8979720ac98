//! The corruption matrix: each variant damages its own copy of the fixture store,
//! then checks the damaged open (refused, or where allowed identical), the repair
//! and every fact of the fixture.

use std::path::Path;

use super::damage::{self, Opened};
use super::facts::{self, exec_output_key};
use super::fixture::{self, BIG_OUTPUT_PROBE, Fixture, SESSIONS};
use crate::harness::{Mount, sh};

/// What a variant's damaged open must do.
#[derive(Clone, Copy, PartialEq, Debug)]
enum Expect {
    /// Refused (exit 7), then repaired; `meta/` existed (moved aside); records
    /// lost (variant h: the big output's).
    Refused { had_meta: bool, lost: bool },
    /// Refused and repaired as above, or opened with facts identical (sled never
    /// read the damaged bytes).
    RefusedOrIdentical,
    /// Opens with facts identical, nothing refused.
    Identical,
}

/// Copy the fixture, apply `damage` (given the fixture and the copy's store
/// dir), and check what `expect` says, then the facts, `fsck` and a new write.
/// `human` runs the repair without `--json` (checks its `rebuilt:` line).
fn run(name: &str, expect: Expect, human: bool, damage: impl FnOnce(&Fixture, &Path)) {
    let fx = fixture::get();
    let tmp = tempfile::Builder::new()
        .prefix(&format!("tf-dmg-{name}-"))
        .tempdir()
        .unwrap();
    let dir = tmp.path().to_path_buf();
    let store = dir.join("store");
    sh(
        &dir,
        &format!("cp -a {} {}", fx.store.display(), store.display()),
    );
    // Unmounts what a failing check leaves mounted under `dir`.
    let _guard = Mount::at(tmp, store.clone(), dir.join("mnt"), "s1");
    let had_journal = store.join("journal").is_dir();
    damage(fx, &store);
    let opened = damage::open_damaged(&store, &dir.join("refused"), "s1");
    let mut want = fx.facts.clone();
    match (opened, expect) {
        (Opened::Fine, Expect::Refused { .. }) => {
            // Say whether it opened at the fixture's state or another one.
            let got = facts::record(&store, &dir, &SESSIONS, &fx.tracking);
            let diffs = facts::differences(&want, &got, &[]);
            panic!(
                "{name}: the damaged store opened (`sessions` exit 0); it must be refused \
                 (exit 7). Its facts: {}\n{}",
                if diffs.is_empty() {
                    "identical to the fixture's".to_string()
                } else {
                    format!("{} differ", diffs.len())
                },
                diffs.join("\n")
            )
        }
        (Opened::Refused, Expect::Identical) => {
            panic!("{name}: the store was refused; it must open (nothing is damaged)")
        }
        (Opened::Fine, _) => {}
        (Opened::Refused, _) => {
            let (had_meta, lost) = match expect {
                Expect::Refused { had_meta, lost } => (had_meta, lost),
                _ => (true, false),
            };
            let rebuilt = if human {
                repair_human(&store)
            } else {
                damage::repair(&store, lost)
            };
            if !human {
                let recovered: u64 = rebuilt["recovered"]
                    .as_object()
                    .unwrap()
                    .values()
                    .filter_map(|v| v.as_u64())
                    .sum();
                assert!(recovered > 0, "{name}: nothing recovered: {rebuilt}");
                let lost_list = rebuilt["lost"].as_array().unwrap();
                if lost {
                    assert!(!lost_list.is_empty(), "{name}: `lost` is empty: {rebuilt}");
                    // The damaged journal record is the exec's whole batch: its
                    // operation record and its output.
                    let (s, n, seq) = &fx.big_exec;
                    want = facts::without_exec(&want, s, *n, *seq);
                } else {
                    assert!(lost_list.is_empty(), "{name}: records lost: {rebuilt}");
                }
            }
            damage::assert_moved_aside(&store, &rebuilt, had_meta, had_journal);
        }
    }
    let got = facts::record(&store, &dir, &SESSIONS, &fx.tracking);
    let except = match expect {
        // What the lost batch held may read back as anything, or fail.
        Expect::Refused { lost: true, .. } => {
            vec![exec_output_key(&fx.big_exec.0, fx.big_exec.1)]
        }
        _ => vec![],
    };
    facts::assert_same(name, &want, &got, &except);
    damage::assert_fsck_clean(&store);
    damage::assert_takes_write(&store, &dir.join("write"), "s1");
    let journal = std::fs::read_dir(store.join("journal")).map_or(0, |d| d.count());
    assert!(
        journal > 0,
        "{name}: no journal file after the store was used"
    );
}

/// `fsck --repair` in human form: exit 0 and a `rebuilt:` line. Returns a
/// `rebuilt` with no `moved_aside` (the directories are checked by name).
fn repair_human(store: &Path) -> serde_json::Value {
    let o = crate::harness::tf(store, &["fsck", "--repair"]);
    let (out, err) = (
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr),
    );
    assert_eq!(o.status.code(), Some(0), "fsck --repair:\n{out}\n{err}");
    assert!(
        out.lines().any(|l| l.starts_with("rebuilt:")),
        "no `rebuilt:` line:\n{out}\n{err}"
    );
    serde_json::json!({"moved_aside": []})
}

fn db(store: &Path) -> std::path::PathBuf {
    store.join("meta/db")
}

#[test]
fn a_db_bytes_flipped_seed_1() {
    run("a", Expect::RefusedOrIdentical, false, |_, s| {
        damage::flip(&db(s), 1)
    });
}

#[test]
fn b_db_bytes_flipped_seed_2() {
    run("b", Expect::RefusedOrIdentical, false, |_, s| {
        damage::flip(&db(s), 2)
    });
}

const REFUSED: Expect = Expect::Refused {
    had_meta: true,
    lost: false,
};

#[test]
fn c_db_truncated_to_half() {
    run("c", REFUSED, false, |_, s| damage::truncate_half(&db(s)));
}

#[test]
fn d_db_deleted_repair_in_human_form() {
    run("d", REFUSED, true, |_, s| {
        std::fs::remove_file(db(s)).unwrap()
    });
}

#[test]
fn e_meta_dir_deleted() {
    let gone = Expect::Refused {
        had_meta: false,
        lost: false,
    };
    run("e", gone, false, |_, s| {
        std::fs::remove_dir_all(s.join("meta")).unwrap()
    });
}

#[test]
fn f_blobs_deleted() {
    run("f", REFUSED, false, |_, s| {
        let blobs = s.join("meta/blobs");
        let n = std::fs::read_dir(&blobs).map(|d| d.count()).unwrap_or(0);
        assert!(n > 0, "the fixture has no blob file in {}", blobs.display());
        std::fs::remove_dir_all(blobs).unwrap();
    });
}

#[test]
fn g_meta_rolled_back_older_than_the_journal() {
    run("g", REFUSED, false, |fx, s| {
        std::fs::remove_dir_all(s.join("meta")).unwrap();
        sh(
            s,
            &format!(
                "cp -a {} {}",
                fx.rollback_meta.display(),
                s.join("meta").display()
            ),
        );
    });
}

#[test]
fn h_db_flipped_and_journal_record_damaged() {
    let lost = Expect::Refused {
        had_meta: true,
        lost: true,
    };
    run("h", lost, false, |_, s| {
        damage::damage_journal_record(s, BIG_OUTPUT_PROBE);
        damage::flip(&db(s), 3);
    });
}

#[test]
fn i_journal_deleted_is_not_damage() {
    run("i", Expect::Identical, false, |_, s| {
        std::fs::remove_dir_all(s.join("journal")).unwrap();
    });
}

#[test]
fn control_no_damage() {
    run("control", Expect::Identical, false, |_, s| {
        assert!(s.join("journal").is_dir(), "the fixture has no journal/");
    });
}
