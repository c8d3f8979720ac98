//! `rewind`: bring the files and/or the conversation back to a message.

use super::prelude::*;

/// Bring the workspace back to how it was when message MSG was recorded and hide
/// the messages after it, or (--prompt N) to how it was before the Nth prompt and
/// hide that prompt and what followed (pending changes are saved first; `undo`
/// reverts it).
#[derive(clap::Args)]
#[command(group(clap::ArgGroup::new("point").required(true).args(["to", "prompt"])))]
pub struct Rewind {
    /// The message id.
    #[arg(long = "to", value_name = "MSG")]
    to: Option<String>,
    /// Before the Nth prompt (user message) of the conversation, counting from 1.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    prompt: Option<u64>,
    /// What to bring back.
    #[arg(long, value_parser = ["files", "conversation", "both"], default_value = "both")]
    what: String,
    /// Only report what would change.
    #[arg(long)]
    dry_run: bool,
}

/// What was saved, what changed (or would) and how many messages were hidden.
type Rewound = treefork::ops::messages::rewind::Rewound;

impl Human for Rewound {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        if let Some(r) = self.files.saved.as_ref().map(|s| &s.name) {
            writeln!(out, "saved pending changes as {r}")?;
        }
        let verb = if self.dry_run { "would" } else { "did" };
        for c in &self.files.changes {
            writeln!(out, "{verb} rewind {} ({})", c.path, c.change.name())?;
        }
        let n = self.conversation.dropped;
        if self.dry_run {
            writeln!(out, "would hide {n} messages")?;
        } else {
            writeln!(out, "hid {n} messages")?;
        }
        if let Some(op) = self.op {
            writeln!(out, "operation {op} (undo brings it back)")?;
        }
        Ok(())
    }
}

impl Run for Rewind {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let r: Reply<Answer<treefork::verbs::Rewind>> =
            cx.session(Request::Rewind(treefork::verbs::Rewind {
                to: self.to.clone().unwrap_or_default(),
                prompt: self.prompt,
                what: Some(self.what.clone()),
                dry_run: self.dry_run,
            }))?;
        Ok(r.into())
    }
}
