use crate::inventory::{Entry, Kind};
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Debug, Default, Serialize)]
pub struct Stats {
    pub files: usize,
    pub dirs: usize,
    pub links: usize,
    pub bytes: u64,
    pub per_dir: BTreeMap<String, usize>,
}

pub fn summarize(inv: &[Entry]) -> Stats {
    let mut s = Stats::default();
    for e in inv {
        match &e.kind {
            Kind::File { size } => {
                s.files += 1;
                s.bytes += size;
            }
            Kind::Dir { .. } => s.dirs += 1,
            Kind::Symlink { .. } => s.links += 1,
        }
        let dir = e.path.split('/').next().unwrap_or("").to_string();
        *s.per_dir.entry(dir).or_default() += 1;
    }
    s
}
