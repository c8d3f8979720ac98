//! Defect 8 of issue 21: a hostile or broken remote. The attacker is the S3
//! server ([`s3::HostileS3`], in this process): an honest push lands on it, then
//! it rewrites what it stores or lies about bodies, and a second store ("machine
//! B") mounts the session from it. Each test asserts that the daemon of B still
//! answers, that another session of B (with writes not yet checkpointed) is
//! intact, and that the attack ends in a clear error (EIO at the file system).
//!
//! - a delta cycle in a remote index (A on B on A, and an object on itself):
//!   lazy reads are EIO, never a stack overflow;
//! - a pack index declaring 1 TiB: refused before a byte is read;
//! - range reads whose body runs far past the range: cut at the range, RSS flat;
//! - a pulled session's origin (a repository on B): not used by `continue` or
//!   `promote` until `remote trust`.

mod s3;

use std::path::{Path, PathBuf};
use std::process::Output;

use serde_json::Value;
use treefork::remote::layout;
use treefork::remote::packidx::{Idx, PackBuilder};
use treefork::store::Kind;
use treefork::store::pack::Codec;

use self::s3::{HostileS3, Lie};
use super::proc_status_kib;
use crate::harness::{Mount, daemon_log, pattern, tf, tf_ok, umount_ok, write_synced};

const BUCKET: &str = "treefork-test";

fn json_ok(store: &Path, args: &[&str]) -> Value {
    let mut full = vec!["--json"];
    full.extend_from_slice(args);
    let o = tf(store, &full);
    assert!(
        o.status.success(),
        "treefork {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        daemon_log(store)
    );
    serde_json::from_slice(&o.stdout).unwrap_or(Value::Null)
}

fn add_remote(store: &Path, s3: &HostileS3, prefix: &str) {
    let url = format!("s3://{BUCKET}/{prefix}");
    json_ok(
        store,
        &["remote", "add", "origin", &url, "--endpoint", &s3.endpoint],
    );
}

/// Machine B: a store with session `bystander` mounted holding a file written
/// and not checkpointed; `session` (to come from the remote) not mounted yet.
struct MachineB {
    m: Mount,
    bystander: PathBuf,
}

const BYSTANDER_FILE: &str = "unsaved.txt";
const BYSTANDER_DATA: &[u8] = b"written by another session, not checkpointed\n";

fn machine_b(session: &str) -> MachineB {
    let tmp = tempfile::Builder::new()
        .prefix("tf-test-b-")
        .tempdir()
        .unwrap();
    let store = tmp.path().join("store");
    let mp = tmp.path().join("mnt");
    let bystander = tmp.path().join("bystander");
    std::fs::create_dir_all(&bystander).unwrap();
    tf_ok(
        &store,
        &[
            "mount",
            bystander.to_str().unwrap(),
            "--session",
            "bystander",
        ],
    );
    std::fs::write(bystander.join(BYSTANDER_FILE), BYSTANDER_DATA).unwrap();
    MachineB {
        m: Mount::at(tmp, store, mp, session),
        bystander,
    }
}

impl MachineB {
    fn mount_from_remote(&self, spec: &str) -> Output {
        let mp = self.m.mp.to_str().unwrap();
        tf(
            &self.m.store,
            &[
                "--json",
                "mount",
                mp,
                "--session",
                &self.m.session,
                "--from-remote",
                spec,
            ],
        )
    }

    /// The daemon answers and the bystander's unsaved write is there and can be
    /// checkpointed.
    fn assert_intact(&self) {
        let log = || daemon_log(&self.m.store);
        let o = tf(&self.m.store, &["--json", "sessions"]);
        assert!(o.status.success(), "the daemon does not answer:\n{}", log());
        assert_eq!(
            std::fs::read(self.bystander.join(BYSTANDER_FILE))
                .ok()
                .as_deref(),
            Some(BYSTANDER_DATA),
            "the other session lost its write:\n{}",
            log()
        );
        let by = self.bystander.to_str().unwrap();
        json_ok(
            &self.m.store,
            &["-C", by, "checkpoint", "-m", "after the attack"],
        );
    }

    fn peak_rss_kib(&self) -> u64 {
        proc_status_kib(self.m.daemon_pid(), "VmHWM:")
    }
}

impl Drop for MachineB {
    fn drop(&mut self) {
        for mp in [&self.m.mp, &self.bystander] {
            let _ = tf(&self.m.store, &["umount", mp.to_str().unwrap()]);
        }
    }
}

/// Machine A: session `session` with a few files, pushed to `s3` under `prefix`.
fn pushed(s3: &HostileS3, prefix: &str, session: &str, extra: &[&str]) -> Mount {
    let a = Mount::with_options(session, extra);
    for i in 0..3u64 {
        write_synced(&a.p(&format!("f{i}.bin")), &pattern(200_000, 40 + i));
    }
    add_remote(&a.store, s3, prefix);
    json_ok(&a.store, &["push"]);
    a
}

/// `(idx key, decoded idx)` of every pack under `prefix` holding only chunks.
fn chunk_packs(s3: &HostileS3, prefix: &str) -> Vec<(String, Idx)> {
    s3.keys(&format!("{BUCKET}/{prefix}/packs/"))
        .into_iter()
        .filter(|k| k.ends_with(".idx"))
        .map(|k| {
            let idx = Idx::decode(&s3.get(&k).unwrap()).unwrap();
            (k, idx)
        })
        .filter(|(_, idx)| idx.entries.iter().all(|e| e.kind == Kind::Chunk))
        .collect()
}

fn read_errno(p: &Path) -> Option<i32> {
    std::fs::read(p).err().and_then(|e| e.raw_os_error())
}

#[test]
fn a_delta_cycle_in_a_remote_index_is_eio_and_the_daemon_lives() {
    let s3 = HostileS3::start();
    let _a = pushed(&s3, "cycle", "s", &[]);
    // Every chunk pack becomes cycles: chunks paired, each a delta on the other
    // (an odd one out: a delta on itself). Headers and index agree, so only the
    // cycles are wrong.
    let packs = chunk_packs(&s3, "cycle");
    assert!(!packs.is_empty());
    for (key, idx) in packs {
        let ids: Vec<[u8; 32]> = idx.entries.iter().map(|e| e.id.0).collect();
        let mut pb = PackBuilder::new();
        for (i, e) in idx.entries.iter().enumerate() {
            let j = i ^ 1;
            let base = ids[if j < ids.len() { j } else { i }];
            let mut payload = base.to_vec();
            payload.extend_from_slice(&[0x5a; 40]);
            pb.add_record(
                Kind::Chunk,
                e.id,
                Codec::Delta,
                e.raw_len,
                &payload,
                Some(treefork::id::ObjectId(base)),
            )
            .unwrap();
        }
        let built = pb.finish();
        let dir = format!("{BUCKET}/cycle/");
        s3.delete(&key);
        s3.delete(&format!("{dir}{}", layout::pack_key(&idx.pack_hash)));
        s3.put(
            &format!("{dir}{}", layout::pack_key(&built.hash)),
            built.pack,
        );
        s3.put(&format!("{dir}{}", layout::idx_key(&built.hash)), built.idx);
    }
    let b = machine_b("s");
    add_remote(&b.m.store, &s3, "cycle");
    let o = b.mount_from_remote("origin/s");
    assert!(
        o.status.success(),
        "mount --from-remote: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        daemon_log(&b.m.store)
    );
    let asked = s3.requests();
    for i in 0..3 {
        assert_eq!(
            read_errno(&b.m.p(&format!("f{i}.bin"))),
            Some(libc::EIO),
            "f{i}.bin:\n{}",
            daemon_log(&b.m.store)
        );
    }
    // One read follows one chain: a cycle costs a handful of requests, not a
    // fan-out of base fetches.
    let asked = s3.requests() - asked;
    assert!(asked < 300, "{asked} requests for three reads of a cycle");
    b.assert_intact();
    let log = daemon_log(&b.m.store);
    assert!(
        log.contains("delta cycle") && log.contains("origin"),
        "{log}"
    );
}

#[test]
fn a_pack_index_declaring_a_terabyte_is_refused_unread() {
    let s3 = HostileS3::start();
    let _a = pushed(&s3, "huge", "s", &[]);
    s3.lie(
        &format!("{BUCKET}/huge/packs/"),
        Lie::Declare {
            declared: 1 << 40,
            sent: 64 << 20,
        },
    );
    let b = machine_b("s");
    add_remote(&b.m.store, &s3, "huge");
    let before = b.peak_rss_kib();
    let o = b.mount_from_remote("origin/s");
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "a lying index was accepted");
    assert!(
        err.contains(".idx") && err.contains("1099511627776") && err.contains("pack index"),
        "{err}\n{}",
        daemon_log(&b.m.store)
    );
    b.assert_intact();
    let grown = b.peak_rss_kib().saturating_sub(before);
    assert!(
        grown < 128 << 10,
        "the daemon's peak RSS grew by {grown} KiB"
    );
    assert!(s3.lied_bytes() < 16 << 20, "read {} bytes", s3.lied_bytes());
}

#[test]
fn range_bodies_longer_than_asked_are_cut_at_the_range() {
    let s3 = HostileS3::start();
    let _a = pushed(&s3, "long", "s", &[]);
    let b = machine_b("s");
    add_remote(&b.m.store, &s3, "long");
    let o = b.mount_from_remote("origin/s");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Node packs stay honest (the tree is read); every chunk pack lies.
    for (_, idx) in chunk_packs(&s3, "long") {
        let key = format!("{BUCKET}/long/{}", layout::pack_key(&idx.pack_hash));
        s3.lie(&key, Lie::LongRange { sent: 1 << 30 });
    }
    let before = b.peak_rss_kib();
    assert_eq!(
        read_errno(&b.m.p("f0.bin")),
        Some(libc::EIO),
        "{}",
        daemon_log(&b.m.store)
    );
    b.assert_intact();
    let grown = b.peak_rss_kib().saturating_sub(before);
    assert!(
        grown < 128 << 10,
        "the daemon's peak RSS grew by {grown} KiB"
    );
    assert!(
        s3.lied_bytes() < 256 << 20,
        "the daemon read {} bytes of a lying body",
        s3.lied_bytes()
    );
}

fn git(dir: &Path, args: &[&str]) {
    let o = std::process::Command::new("git")
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.invalid")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.invalid")
        .output()
        .unwrap();
    assert!(o.status.success(), "git {args:?}: {o:?}");
}

#[test]
fn a_pulled_origin_is_not_used_until_the_user_trusts_it() {
    let s3 = HostileS3::start();
    // The "planted" repository: on machine B's disk, named by the remote.
    let planted = tempfile::tempdir().unwrap();
    let repo = planted.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    git(&repo, &["init", "-q", "-b", "main"]);
    std::fs::write(repo.join("a.txt"), "base\n").unwrap();
    git(&repo, &["add", "a.txt"]);
    git(&repo, &["commit", "-q", "-m", "base"]);
    let head = |r: &Path| std::fs::read_to_string(r.join(".git/refs/heads/main")).unwrap();
    let before = head(&repo);
    let a = pushed(&s3, "origin", "p", &["--from", repo.to_str().unwrap()]);
    write_synced(&a.p("a.txt"), b"changed by the remote's session\n");
    json_ok(&a.store, &["push"]);

    let b = machine_b("p");
    add_remote(&b.m.store, &s3, "origin");
    let o = b.mount_from_remote("origin/p");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Shown, not used.
    let shown = tf_ok(&b.m.store, &["session", "show", "p"]);
    assert!(
        shown.contains(repo.to_str().unwrap()) && shown.contains("NOT trusted"),
        "{shown}"
    );
    let cont = b.m.tmp.path().join("cont");
    let cont_s = cont.to_str().unwrap();
    let continue_args = [
        "continue",
        "--project",
        repo.to_str().unwrap(),
        "--name",
        "p2",
        "--mount",
        cont_s,
    ];
    let o = tf(&b.m.store, &continue_args);
    assert!(
        !o.status.success(),
        "continue --project used the remote's origin: {}",
        String::from_utf8_lossy(&o.stdout)
    );
    let file = b.m.p("a.txt");
    let o = tf(
        &b.m.store,
        &[
            "-C",
            b.m.mp.to_str().unwrap(),
            "promote",
            file.to_str().unwrap(),
        ],
    );
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success(), "promote used the remote's origin");
    assert!(err.contains("remote trust"), "{err}");
    assert_eq!(head(&repo), before, "the planted repository was written");
    b.assert_intact();

    // The user checks and trusts it: now it is used.
    let v = json_ok(&b.m.store, &["remote", "trust", "p"]);
    assert_eq!(v["origin"].as_str(), Some(repo.to_str().unwrap()), "{v}");
    let o = tf(&b.m.store, &continue_args);
    assert!(
        o.status.success(),
        "continue after trust: {}\n{}",
        String::from_utf8_lossy(&o.stderr),
        daemon_log(&b.m.store)
    );
    umount_ok(&b.m.store, &cont);
}
