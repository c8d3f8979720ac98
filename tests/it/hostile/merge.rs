//! Defect 5 of issue 38: a merge's memory does not grow with the number of
//! conflicting paths. Theirs has one 60 MB binary file at 41 paths (hard links,
//! or plain copies: different records sharing one content node), each conflicting
//! with ours as `binary` (both changed it) or `kind` (ours made it a directory).
//! Theirs' version is written beside ours by node id: a dry run and the merge
//! itself read none of it. Before the fix each conflict read theirs' whole file
//! into the plan, all held at once (41 × 60 MB: the daemon grew by 2.5 GB).
//!
//! Run as uid 65534 on its agent socket; the daemon's peak RSS is measured around
//! each merge, and the result read back.

use std::fs;

use serde_json::Value;

use super::Agent;
use crate::harness::daemon_log;

/// Paths of theirs sharing the big file.
const PATHS: usize = 41;
/// Its size.
const BIG: usize = 60 << 20;
/// Most the daemon may grow during one merge.
const GROWTH_MAX_KIB: u64 = 200 << 10;
/// Exit status of a merge stopped on conflicts (`cli::failure::MERGE_CONFLICT`).
const MERGE_CONFLICT: i32 = 11;

/// Deterministic bytes no block of which repeats (a NUL first: binary).
fn big_content() -> Vec<u8> {
    let mut out = Vec::with_capacity(BIG);
    out.push(0);
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    while out.len() < BIG {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out.extend_from_slice(&x.to_le_bytes());
    }
    out.truncate(BIG);
    out
}

/// The agent's checkpoint with `message`: its id.
fn checkpoint(a: &Agent, message: &str) -> String {
    a.cli_ok(&["checkpoint", "-m", message])["checkpoint"]["id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// Run `args` (a merge) as the agent with the daemon's peak RSS reset first: its
/// JSON answer, exit status and how much the daemon grew (KiB).
fn measured(a: &Agent, args: &[&str]) -> (Value, i32, u64) {
    a.reset_daemon_peak();
    let before = a.daemon_rss_kib();
    let o = a.cli(args);
    let grew = a.daemon_peak_rss_kib().saturating_sub(before);
    eprintln!("{args:?}: daemon RSS {before} KiB, peak growth {grew} KiB");
    let v: Value = serde_json::from_slice(&o.stdout).unwrap_or_else(|e| {
        panic!(
            "{args:?}: no JSON ({e}): {}\n{}",
            String::from_utf8_lossy(&o.stderr),
            daemon_log(&a.m.store)
        )
    });
    (v, o.status.code().unwrap_or(-1), grew)
}

/// Base: `k0`..`k40` small binary files. Theirs: each replaced by the big file
/// (`share`: `ln` or `cp`). Ours (from the base): even paths changed, odd ones
/// made directories. Then `merge --dry-run` and `merge` of theirs, measured.
fn merge_shared_big_file(share: &str) {
    let a = Agent::new();
    let big = big_content();
    let src = a.home.join("big.bin");
    fs::write(&src, &big).unwrap();
    let all = (0..PATHS)
        .map(|i| i.to_string())
        .collect::<Vec<_>>()
        .join(" ");
    a.sh_ok(&format!(
        "for i in {all}; do printf 'base %s\\000' $i > k$i; done"
    ));
    let base = checkpoint(&a, "base");
    a.sh_ok(&format!(
        "cp '{}' big && for i in {all}; do rm k$i && {share} big k$i; done",
        src.display()
    ));
    let theirs = checkpoint(&a, "theirs: one big file at 41 paths");
    a.cli_ok(&["checkout", &base]);
    a.sh_ok(&format!(
        "for i in {all}; do if [ $((i % 2)) = 0 ]; then printf 'ours %s\\000' $i > k$i; \
         else rm k$i && mkdir k$i && echo x > k$i/f; fi; done"
    ));
    checkpoint(&a, "ours");
    fs::remove_file(&src).unwrap();

    let (plan, status, grew) = measured(&a, &["merge", "--dry-run", &theirs]);
    assert_eq!(status, 0, "{plan}");
    assert_eq!(plan["status"], "planned", "{plan}");
    let conflicts = plan["conflicts"].as_array().unwrap();
    assert_eq!(conflicts.len(), PATHS, "{plan}");
    assert!(
        grew < GROWTH_MAX_KIB,
        "merge --dry-run ({share}) grew the daemon by {grew} KiB (bound {GROWTH_MAX_KIB} KiB)"
    );

    let (done, status, grew) = measured(&a, &["merge", &theirs]);
    assert_eq!(status, MERGE_CONFLICT, "{done}");
    assert_eq!(done["status"], "merge_conflict", "{done}");
    assert!(
        grew < GROWTH_MAX_KIB,
        "merge ({share}) grew the daemon by {grew} KiB (bound {GROWTH_MAX_KIB} KiB)"
    );
    for c in done["conflicts"].as_array().unwrap() {
        let i: usize = c["path"].as_str().unwrap()[1..].parse().unwrap();
        let kind = if i.is_multiple_of(2) {
            "binary"
        } else {
            "kind"
        };
        assert_eq!(c["kind"], kind, "{c}");
        assert_eq!(c["theirs_at"], format!("k{i}~theirs"), "{c}");
    }

    // The result reads back: ours kept, theirs beside each, the big file taken.
    let mp = &a.m.mp;
    for i in 0..PATHS {
        if i.is_multiple_of(2) {
            assert_eq!(
                fs::read(mp.join(format!("k{i}"))).unwrap(),
                format!("ours {i}\0").as_bytes()
            );
        } else {
            assert_eq!(
                fs::read_to_string(mp.join(format!("k{i}/f"))).unwrap(),
                "x\n"
            );
        }
        let beside = fs::read(mp.join(format!("k{i}~theirs"))).unwrap();
        assert!(
            beside == big,
            "k{i}~theirs: {} bytes, not theirs' content",
            beside.len()
        );
    }
    assert!(
        fs::read(mp.join("big")).unwrap() == big,
        "big: not theirs' content"
    );
    a.assert_daemon_answers();
}

#[test]
fn merge_of_hard_links_to_a_big_file_reads_none_of_it() {
    merge_shared_big_file("ln");
}

#[test]
fn merge_of_copies_of_a_big_file_reads_none_of_it() {
    merge_shared_big_file("cp");
}
