//! `continue`: resume work on a project in a new session forked from the latest
//! session imported from it, its conversation copied.

use std::path::PathBuf;

use anyhow::Context;

use super::paths;
use super::plumbing;
use super::prelude::*;

/// Fork the latest session whose durable repository is PATH (its files and its
/// conversation) and mount the fork.
#[derive(clap::Args)]
pub struct Continue {
    /// The durable repository the session was imported from.
    #[arg(long, value_name = "PATH")]
    project: PathBuf,
    /// Directory to mount the new session on.
    #[arg(long = "mount", value_name = "DIR")]
    mountpoint: PathBuf,
    /// The new session's name [default: the project's name and the time].
    #[arg(long)]
    name: Option<String>,
}

/// The `continue` answer, with the mountpoint as this command resolved it.
struct Continued {
    answer: Answer<treefork::verbs::Continue>,
    mountpoint: PathBuf,
}

impl Human for Continued {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "session {} continues {} ({} messages) at {}",
            self.answer.session,
            self.answer.from,
            self.answer.messages,
            self.mountpoint.display()
        )
    }
}

/// `<project name>-<unix seconds>`, within the session name rules.
fn default_name(project: &std::path::Path) -> String {
    let base: String = project
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .take(40)
        .collect();
    let base = base.trim_start_matches(['-', '.']);
    let secs = treefork::clock::unix_secs();
    if base.is_empty() {
        format!("continue-{secs}")
    } else {
        format!("{base}-{secs}")
    }
}

impl Run for Continue {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let project = self
            .project
            .canonicalize()
            .with_context(|| format!("--project {}: cannot resolve", self.project.display()))?;
        let mp = paths::mountpoint(&self.mountpoint)
            .or_else(|_| std::path::absolute(&self.mountpoint).map_err(anyhow::Error::from))?;
        let name = self.name.clone().unwrap_or_else(|| default_name(&project));
        let op = Request::Continue(treefork::verbs::Continue {
            project,
            name,
            mountpoint: mp.clone(),
        });
        let r: Reply<Answer<treefork::verbs::Continue>> = match cx.explicit(&op)? {
            Some(r) => r,
            None => plumbing::call_with_daemon(&cx.store_dir()?, &op, &mut |_| {})?,
        };
        Ok(r.map(|answer| Continued {
            answer,
            mountpoint: mp,
        })
        .into())
    }
}
