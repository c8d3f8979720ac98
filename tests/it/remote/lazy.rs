//! Lazy hydration against a real S3 server (SeaweedFS): reads of a session
//! mounted from a remote while the server is down (hydrated files read fine,
//! others give EIO and the daemon log names the file; after a restart the same
//! read succeeds), a corrupted remote object (EIO, never wrong bytes), and
//! `hydrate` (afterwards every file reads with the server gone).

use std::io::Read;

use super::S3Server;
use super::pull::{add_remote, json_ok, machine, mount_from_remote};
use crate::harness::{Mount, daemon_log, pattern, write_synced};
use treefork::remote::client::{Body, PutIf};
use treefork::remote::packidx::Idx;

fn read(p: &std::path::Path) -> std::io::Result<Vec<u8>> {
    let mut v = Vec::new();
    std::fs::File::open(p)?.read_to_end(&mut v)?;
    Ok(v)
}

fn pushed_a(s3: &S3Server, prefix: &str) -> Mount {
    let a = Mount::new();
    for i in 0..4u64 {
        write_synced(&a.p(&format!("f{i}.bin")), &pattern(400_000, 50 + i));
    }
    add_remote(&a.store, s3, prefix);
    json_ok(&a.store, &["push"]);
    a
}

fn idx_keys(s3: &S3Server, prefix: &str) -> Vec<String> {
    let mut v: Vec<String> = s3
        .client(prefix)
        .list("packs")
        .unwrap()
        .into_iter()
        .map(|m| m.key)
        .filter(|k| k.ends_with(".idx"))
        .collect();
    v.sort();
    v
}

/// Write `name` in `a`, push, and return the chunk packs the push added (so a
/// test knows that no read-ahead of another file brought its chunks).
fn push_file(a: &Mount, s3: &S3Server, prefix: &str, name: &str, seed: u64) -> Vec<String> {
    let before = idx_keys(s3, prefix);
    write_synced(&a.p(name), &pattern(400_000, seed));
    json_ok(&a.store, &["push"]);
    let c = s3.client(prefix);
    idx_keys(s3, prefix)
        .into_iter()
        .filter(|k| !before.contains(k))
        .filter(|k| {
            let idx = Idx::decode(&c.get(k, Body::PackIdx).unwrap().unwrap().bytes).unwrap();
            idx.entries
                .iter()
                .all(|e| e.kind == treefork::store::Kind::Chunk)
        })
        .collect()
}

#[test]
fn lazy_reads_fail_cleanly_while_the_remote_is_down_and_work_after() {
    let Some(mut s3) = S3Server::start_or_skip() else {
        return;
    };
    let a = pushed_a(&s3, "lz");
    // Files pushed later are in packs of their own.
    assert_eq!(push_file(&a, &s3, "lz", "late.bin", 77).len(), 1);
    let bad = push_file(&a, &s3, "lz", "bad.bin", 78);
    assert_eq!(bad.len(), 1);
    let b = machine("s");
    add_remote(&b.store, &s3, "lz");
    mount_from_remote(&b, "origin/s");
    assert_eq!(read(&b.p("f0.bin")).unwrap(), pattern(400_000, 50));
    s3.kill();
    // Hydrated data keeps working; local writes too.
    assert_eq!(read(&b.p("f0.bin")).unwrap(), pattern(400_000, 50));
    write_synced(&b.p("local.txt"), b"written offline\n");
    let e = read(&b.p("late.bin")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    let log = daemon_log(&b.store);
    assert!(log.contains("read of /late.bin failed"), "{log}");
    // The next read after the server is back succeeds.
    s3.restart();
    assert_eq!(read(&b.p("late.bin")).unwrap(), pattern(400_000, 77));

    // A corrupted remote object: the chunk records of bad.bin bit-flipped on the
    // server. Reading it is EIO, never wrong bytes.
    let c = s3.client("lz");
    for k in &bad {
        let idx = Idx::decode(&c.get(k, Body::PackIdx).unwrap().unwrap().bytes).unwrap();
        let pk = format!("{}.tfp", k.strip_suffix(".idx").unwrap());
        let mut pack = c.get(&pk, Body::Pack).unwrap().unwrap().bytes;
        for e in &idx.entries {
            let at = (e.offset + 48 + (e.stored_len as u64) / 2) as usize;
            pack[at] ^= 0x5a;
        }
        c.put(&pk, pack, PutIf::Always).unwrap();
    }
    let e = read(&b.p("bad.bin")).unwrap_err();
    assert_eq!(e.raw_os_error(), Some(libc::EIO), "{e}");
    assert!(daemon_log(&b.store).contains("read of /bad.bin failed"));
    // What was hydrated before still reads right.
    assert_eq!(read(&b.p("late.bin")).unwrap(), pattern(400_000, 77));
}

#[test]
fn after_hydrate_every_file_reads_with_the_remote_gone() {
    let Some(mut s3) = S3Server::start_or_skip() else {
        return;
    };
    let _a = pushed_a(&s3, "hy");
    let b = machine("s");
    add_remote(&b.store, &s3, "hy");
    mount_from_remote(&b, "origin/s");
    // `session show` says how much is still only on the remote: the file
    // contents were never read.
    let shown = json_ok(&b.store, &["session", "show", "s"]);
    let before = shown["remote_only"]["objects"].as_u64().unwrap();
    // Four files' chunks, or (a directory node not fetched yet) a lower bound.
    let unread = shown["remote_only"]["unread_nodes"].as_u64().unwrap();
    assert!(before >= 4 || (before >= 1 && unread >= 1), "{shown}");
    let r = json_ok(&b.store, &["hydrate", "--session", "s"]);
    assert!(r["objects"].as_u64().unwrap() >= 4 * 6, "{r}");
    assert_eq!(r["missing"], 0, "{r}");
    let shown = json_ok(&b.store, &["session", "show", "s"]);
    assert_eq!(shown["remote_only"]["objects"], 0, "{shown}");
    assert!(
        shown["remote_only"]["local"].as_u64().unwrap() >= before,
        "{shown}"
    );
    let text = crate::harness::tf_ok(&b.store, &["session", "show", "s"]);
    assert!(
        text.contains("0 object(s) of the workspace only on the remote"),
        "{text}"
    );
    // Batched: far fewer requests than objects.
    assert!(
        r["requests"].as_u64().unwrap() * 4 < r["objects"].as_u64().unwrap(),
        "{r}"
    );
    s3.kill();
    for i in 0..4u64 {
        assert_eq!(
            read(&b.p(&format!("f{i}.bin"))).unwrap(),
            pattern(400_000, 50 + i)
        );
    }
    // A second hydrate has nothing left to fetch (and needs no server for data).
    s3.restart();
    let again = json_ok(&b.store, &["hydrate", "--session", "s"]);
    assert_eq!(again["objects"], 0, "{again}");
}
