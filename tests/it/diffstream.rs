//! Streamed `diff --patch` (one `patch` event per file, sent as soon as it is made)
//! and the bound on one file's patch (a file over the line-diff limit is a one-line
//! notice, never loaded).

use std::path::Path;

use serde_json::{Value, json};

use crate::harness::{Mount, write_synced, ws_ok};

/// Send one raw request to the session socket of `m`; the events and the response.
fn request(m: &Mount, req: Value) -> (Vec<Value>, Value) {
    use std::io::{BufRead, BufReader, Write};
    let canon = m.mp.canonicalize().unwrap();
    let rec = treefork::control::find_mount(&canon).expect("mount record");
    let sock = rec
        .socket
        .unwrap_or_else(|| treefork::control::session_socket(&canon).unwrap());
    let mut s = std::os::unix::net::UnixStream::connect(&sock).unwrap();
    let mut line = serde_json::to_vec(&req).unwrap();
    line.push(b'\n');
    s.write_all(&line).unwrap();
    let mut events = Vec::new();
    for l in BufReader::new(s).lines() {
        let v: Value = serde_json::from_str(&l.unwrap()).unwrap();
        if v.get("event").is_some() {
            events.push(v);
        } else {
            assert_eq!(v["ok"], true, "request {req} failed: {v}");
            return (events, v);
        }
    }
    panic!("no response to {req}");
}

fn text_file(i: usize, version: u32) -> String {
    (0..40)
        .map(|l| {
            if l % 7 == i % 7 {
                format!("file {i} line {l} version {version}\n")
            } else {
                format!("file {i} line {l}\n")
            }
        })
        .collect()
}

fn populate(mp: &Path, version: u32) {
    for i in 0..60 {
        let dir = mp.join(format!("d{}", i % 4));
        write_synced(
            &dir.join(format!("f{i:02}.txt")),
            text_file(i, version).as_bytes(),
        );
    }
}

/// Many changed files: the streamed patch is one event per file, its concatenation
/// is exactly the unstreamed `patch`, the streamed response carries no text, and the
/// CLI (which streams) prints the same bytes.
#[test]
fn diff_patch_streams_one_event_per_file() {
    let m = Mount::new();
    populate(&m.mp, 1);
    ws_ok(&m, &["checkpoint", "-m", "one"]);
    populate(&m.mp, 2);
    // Also an added and a deleted file, and a new directory (no patch of its own).
    write_synced(&m.p("new/added.txt"), b"hello\n");
    std::fs::remove_file(m.p("d0/f00.txt")).unwrap();

    let (ev, whole) = request(&m, json!({"v":1,"op":"diff","mode":"patch"}));
    assert!(ev.is_empty(), "unstreamed diff sent events: {ev:?}");
    let whole_text = whole["patch"].as_str().expect("unstreamed patch text");
    assert!(whole_text.contains("version 2"), "{whole_text}");

    let (ev, resp) = request(&m, json!({"v":1,"op":"diff","mode":"patch","stream":true}));
    // 59 modified files + 1 added + 1 deleted; directories have no patch.
    assert_eq!(ev.len(), 61, "events: {ev:?}");
    assert!(ev.iter().all(|e| e["event"] == "patch"), "{ev:?}");
    let streamed: String = ev.iter().map(|e| e["text"].as_str().unwrap()).collect();
    assert_eq!(streamed, whole_text);
    for e in &ev {
        let path = e["path"].as_str().unwrap();
        let text = e["text"].as_str().unwrap();
        assert!(
            text.starts_with(&format!("diff --treefork a/{path} b/{path}\n")),
            "event for {path} holds another file's patch: {text}"
        );
    }
    assert!(
        resp["patch"].is_null(),
        "streamed response has text: {resp}"
    );
    assert_eq!(resp["entries"], whole["entries"]);

    let cli = ws_ok(&m, &["diff", "--patch"]);
    assert_eq!(cli, whole_text);
    // `--json` is the unstreamed document's patch too.
    let j: Value = serde_json::from_str(&ws_ok(&m, &["--json", "diff", "--patch"])).unwrap();
    assert_eq!(j["patch"].as_str(), Some(whole_text));
}

/// A text file over the line-diff limit is reported with one notice line, in the
/// streamed and the unstreamed patch, and `--stat` calls it binary.
#[test]
fn diff_patch_of_a_large_file_is_one_notice() {
    let m = Mount::new();
    let big = |v: u8| -> Vec<u8> {
        let line = format!("a line of text, version {v}\n");
        line.as_bytes()
            .iter()
            .copied()
            .cycle()
            .take((treefork::diff::PATCH_LIMIT + 4096) as usize)
            .collect()
    };
    write_synced(&m.p("big.txt"), &big(1));
    write_synced(&m.p("small.txt"), b"one\n");
    ws_ok(&m, &["checkpoint", "-m", "one"]);
    write_synced(&m.p("big.txt"), &big(2));
    write_synced(&m.p("small.txt"), b"two\n");

    let notice = "diff --treefork a/big.txt b/big.txt\n\
                  Files a/big.txt and b/big.txt differ (larger than 8 MiB: not compared line by line)\n";
    let (_, whole) = request(&m, json!({"v":1,"op":"diff","mode":"patch"}));
    let whole = whole["patch"].as_str().unwrap().to_string();
    assert!(whole.starts_with(notice), "{whole}");
    assert!(whole.contains("-one\n+two\n"), "{whole}");
    let (ev, _) = request(&m, json!({"v":1,"op":"diff","mode":"patch","stream":true}));
    assert_eq!(ev.len(), 2, "{ev:?}");
    assert_eq!(ev[0]["text"], notice);
    assert_eq!(ws_ok(&m, &["diff", "--patch"]), whole);
    assert!(ws_ok(&m, &["diff", "--stat"]).contains(" big.txt | binary"));
}
