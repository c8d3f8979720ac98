//! `completions SHELL`: the shell's completion script, generated from the CLI
//! definition (clap_complete), so it always knows every command and option.

use super::definition::{Definition, RunWith};
use super::prelude::*;

/// Print a shell completion script (e.g. `treefork completions bash >
/// /etc/bash_completion.d/treefork`).
#[derive(clap::Args)]
pub struct Completions {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

/// The generated script, printed verbatim for people.
pub struct Script(pub String);

impl Human for Script {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        out.write_all(self.0.as_bytes())
    }
}

impl RunWith for Completions {
    fn run(&self, _cx: &Ctx, cli: &dyn Definition) -> Result<Outcome> {
        let mut buf = Vec::new();
        clap_complete::generate(self.shell, &mut cli.command(), "treefork", &mut buf);
        let script = String::from_utf8(buf)?;
        let raw = serde_json::json!({"shell": self.shell.to_string(), "script": script});
        Ok(Reply::new(raw, Script(script)).into())
    }
}
