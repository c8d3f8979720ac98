use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub enum Kind {
    File { size: u64 },
    Dir { entries: u32 },
    Symlink { target: String },
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Entry {
    pub path: String,
    pub mode: u32,
    pub kind: Kind,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
}

pub fn sample(n: usize) -> Vec<Entry> {
    (0..n)
        .map(|i| Entry {
            path: format!("dir{}/file{}.rs", i % 10, i),
            mode: if i % 7 == 0 { 0o755 } else { 0o644 },
            kind: match i % 3 {
                0 => Kind::File { size: (i as u64) * 4096 },
                1 => Kind::Dir { entries: i as u32 },
                _ => Kind::Symlink { target: format!("../t{i}") },
            },
            tags: if i % 5 == 0 { vec!["hot".into()] } else { Vec::new() },
        })
        .collect()
}
