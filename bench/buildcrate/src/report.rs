use crate::inventory::Entry;
use crate::stats::Stats;

pub fn render(inv: &[Entry], s: &Stats) -> String {
    let json = serde_json::to_string(inv).expect("serialize");
    let back: Vec<Entry> = serde_json::from_str(&json).expect("round trip");
    assert_eq!(&back[..], inv);
    serde_json::to_string_pretty(&serde_json::json!({
        "entries": inv.len(),
        "json_bytes": json.len(),
        "stats": s,
    }))
    .expect("serialize")
}
