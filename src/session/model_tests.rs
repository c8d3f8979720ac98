//! Model test: random operation sequences on a live session over the in-memory
//! store, checked against a `BTreeMap<path, bytes>` model, across flushes and
//! reopenings of the session from its durable record.

use std::collections::BTreeMap;
use std::sync::Arc;

use proptest::prelude::*;

use super::ops::{NewNode, SetAttr};
use super::{Session, create_record, empty_root};
use crate::store::{MemStore, ObjectStore};

#[derive(Debug, Clone)]
enum Op {
    Write {
        file: u8,
        offset: u32,
        len: u32,
        seed: u8,
    },
    Truncate {
        file: u8,
        size: u32,
    },
    Unlink {
        file: u8,
    },
    Rename {
        from: u8,
        to: u8,
    },
    Flush,
    Reopen,
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        4 => (0u8..12, 0u32..300_000, 0u32..140_000, any::<u8>())
            .prop_map(|(file, offset, len, seed)| Op::Write { file, offset, len, seed }),
        1 => (0u8..12, 0u32..300_000).prop_map(|(file, size)| Op::Truncate { file, size }),
        1 => (0u8..12).prop_map(|file| Op::Unlink { file }),
        1 => (0u8..12, 0u8..12).prop_map(|(from, to)| Op::Rename { from, to }),
        1 => Just(Op::Flush),
        1 => Just(Op::Reopen),
    ]
}

/// File `i` lives in directory `d{i % 3}` as `f{i}`.
fn place(i: u8) -> (usize, Vec<u8>) {
    ((i % 3) as usize, format!("f{i}").into_bytes())
}

fn bytes(seed: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|k| seed.wrapping_add((k / 1000) as u8) ^ (k as u8))
        .collect()
}

/// Look the directories up from the root, as the kernel would after a remount.
fn dirs_of(s: &Session) -> Vec<u64> {
    (0..3)
        .map(|d| s.lookup(1, format!("d{d}").as_bytes()).unwrap().ino)
        .collect()
}

fn check(s: &Session, model: &BTreeMap<u8, Vec<u8>>) {
    let dirs = dirs_of(s);
    for i in 0..12u8 {
        let (d, name) = place(i);
        match (s.lookup(dirs[d], &name), model.get(&i)) {
            (Ok(st), Some(want)) => {
                assert_eq!(st.attr.size, want.len() as u64, "size of f{i}");
                let got = s.read(st.ino, 0, want.len() as u32 + 10).unwrap();
                assert!(got == *want, "content of f{i} differs");
            }
            (Err(_), None) => {}
            (r, m) => panic!(
                "f{i}: session {:?} vs model {:?}",
                r.map(|s| s.attr.size),
                m.map(|v| v.len())
            ),
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]
    #[test]
    fn session_matches_model(ops in proptest::collection::vec(op(), 1..40)) {
        let store: Arc<dyn ObjectStore> = Arc::new(MemStore::default());
        let root = empty_root(&*store, 0, 0).unwrap();
        let rec = create_record(&*store, "m", root, 0, 1).unwrap();
        let mut s = Session::open(store.clone(), rec).unwrap();
        let mut dirs: Vec<u64> = (0..3)
            .map(|d| s.create_node(1, format!("d{d}").as_bytes(), NewNode::Dir, 0o755, 0, 0).unwrap().ino)
            .collect();
        let mut model: BTreeMap<u8, Vec<u8>> = BTreeMap::new();
        for op in ops {
            match op {
                Op::Write { file, offset, len, seed } => {
                    let (d, name) = place(file);
                    let ino = match s.lookup(dirs[d], &name) {
                        Ok(st) => st.ino,
                        Err(_) => s.create_node(dirs[d], &name, NewNode::File, 0o644, 0, 0).unwrap().ino,
                    };
                    let data = bytes(seed, len as usize);
                    s.write(ino, offset as u64, &data).unwrap();
                    let m = model.entry(file).or_default();
                    let end = offset as usize + data.len();
                    if m.len() < end && !data.is_empty() {
                        m.resize(end, 0);
                    }
                    m[offset as usize..offset as usize + data.len()].copy_from_slice(&data);
                }
                Op::Truncate { file, size } => {
                    let (d, name) = place(file);
                    if let Ok(st) = s.lookup(dirs[d], &name) {
                        s.setattr(st.ino, SetAttr { size: Some(size as u64), ..SetAttr::default() }).unwrap();
                        model.get_mut(&file).unwrap().resize(size as usize, 0);
                    }
                }
                Op::Unlink { file } => {
                    let (d, name) = place(file);
                    let r = s.remove(dirs[d], &name, false);
                    prop_assert_eq!(r.is_ok(), model.remove(&file).is_some());
                }
                Op::Rename { from, to } => {
                    let (fd, fname) = place(from);
                    let (td, tname) = place(to);
                    let r = s.rename(dirs[fd], &fname, dirs[td], &tname, 0);
                    prop_assert_eq!(r.is_ok(), model.contains_key(&from));
                    if let Some(v) = model.remove(&from) {
                        model.insert(to, v);
                    }
                }
                Op::Flush => {
                    s.flush().unwrap();
                }
                Op::Reopen => {
                    s.flush().unwrap();
                    s = Session::open(store.clone(), s.record()).unwrap();
                    dirs = dirs_of(&s);
                }
            }
            check(&s, &model);
        }
        s.flush().unwrap();
        let s2 = Session::open(store.clone(), s.record()).unwrap();
        check(&s2, &model);
    }
}
