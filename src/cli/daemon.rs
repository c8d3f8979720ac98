//! `daemon` (hidden): run the store daemon in this process; `mount` starts it.

use super::plumbing;
use super::prelude::*;

/// Run the store daemon (started automatically by `mount`).
#[derive(clap::Args)]
pub struct Daemon {}

impl Run for Daemon {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        plumbing::run_daemon(cx.store_dir_create()?)?;
        Ok(Outcome::Silent)
    }
}
