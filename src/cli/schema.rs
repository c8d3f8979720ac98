//! `schema` (hidden): every verb of the protocol with its request and response
//! JSON Schemas, from the verb table (`treefork::verbs::schemas`), as one JSON
//! document `{"verbs": [{"name", "agent", "request", "response"}, ...]}`, for
//! clients that check their types against the protocol (the Python client's
//! tests do). Printed as JSON with or without `--json`.

use serde_json::{Value, json};
use treefork::control::Agent;

use super::prelude::*;

/// Print every verb's request and response JSON Schemas (for client tests).
#[derive(clap::Args)]
pub struct Schema {}

/// The document, printed as indented JSON for people too.
pub struct Document(Value);

impl Human for Document {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        serde_json::to_writer_pretty(&mut *out, &self.0)?;
        writeln!(out)
    }
}

/// The schema document of every verb in the table.
fn document() -> Value {
    let verbs: Vec<Value> = treefork::verbs::schemas()
        .into_iter()
        .map(|v| {
            json!({
                "name": v.name,
                "agent": match v.agent {
                    Agent::Yes => "yes",
                    Agent::No => "no",
                    Agent::Some => "some",
                },
                "request": v.request,
                "response": v.response,
            })
        })
        .collect();
    json!({ "verbs": verbs })
}

impl Run for Schema {
    fn run(&self, _cx: &Ctx) -> Result<Outcome> {
        let doc = document();
        Ok(Reply::new(doc.clone(), Document(doc)).into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_verb_is_in_the_document_with_object_requests() {
        let doc = document();
        let verbs = doc["verbs"].as_array().unwrap();
        assert_eq!(verbs.len(), treefork::verbs::NAMES.len());
        for (v, name) in verbs.iter().zip(treefork::verbs::NAMES) {
            assert_eq!(v["name"], *name);
            assert_eq!(v["request"]["type"], "object", "{name}");
            assert!(["yes", "no", "some"].contains(&v["agent"].as_str().unwrap()));
        }
        let promote = verbs.iter().find(|v| v["name"] == "promote").unwrap();
        assert_eq!(promote["agent"], "no");
        let restore = verbs.iter().find(|v| v["name"] == "restore").unwrap();
        assert!(restore["request"]["properties"].get("ref").is_some());
    }
}
