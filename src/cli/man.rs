//! `man`: manual pages in roff, generated from the CLI definition (clap_mangen):
//! `treefork(1)` lists every command and documents the exit statuses; `man
//! COMMAND...` prints that command's own page; `--out-dir` writes every page
//! (`treefork.1`, `treefork-mount.1`, ...) for installation. Each page's SYNOPSIS
//! is spelled out here (options with their values, positional arguments).

use std::path::PathBuf;

use super::completions::Script;
use super::definition::{Definition, RunWith};
use super::failure;
use super::prelude::*;

/// Print the manual page (roff; view with `treefork man | man -l -`).
#[derive(clap::Args)]
pub struct Man {
    /// A command's own page (e.g. `mount`, or `session rm`) [default: treefork(1),
    /// which lists every command].
    command: Vec<String>,
    /// Write every page (treefork.1 and one per command) into DIR instead.
    #[arg(long, value_name = "DIR", conflicts_with = "command")]
    out_dir: Option<PathBuf>,
}

/// The exit statuses, for the top-level page (from the one mapping in
/// `cli::failure`).
fn exit_status_text() -> String {
    use failure::*;
    let rows = [
        (OK, "success"),
        (FAILURE, "any other failure"),
        (
            USAGE,
            "usage: a bad command line, or a bad value in it (whoever found it)",
        ),
        (
            BASELINE_CONFLICT,
            "promote refused: the durable repository drifted (BASELINE_CONFLICT)",
        ),
        (
            NOT_FOUND,
            "not found: no such session, ref, store or workspace",
        ),
        (
            CONFLICT,
            "conflict with the current state, or busy, locked, shutting down, rate limited",
        ),
        (
            FORBIDDEN,
            "forbidden: the socket's role does not allow the request",
        ),
        (
            DAMAGED,
            "the store is damaged (fsck found problems; a corrupt or missing object)",
        ),
        (
            REMOTE,
            "a remote could not be used (unreachable, refused); retry once it is back",
        ),
        (
            NON_FAST_FORWARD,
            "push refused: the remote ref moved or is not an ancestor (pull, or --force)",
        ),
        (
            QUOTA,
            "a quota of the store would be exceeded (treefork limits); nothing was changed",
        ),
        (
            MERGE_CONFLICT,
            "a merge, cherry-pick or rebase stopped on conflicts: resolve, then --continue",
        ),
    ];
    let mut s = String::from("Exit status:\n");
    for (n, what) in rows {
        s.push_str(&format!("  {n}  {what}\n"));
    }
    s.push_str(
        "  exec exits with its command's status; an interrupted experiment with 128+N.\n\
         With --json, a failure prints {\"ok\":false,\"error\":{\"code\":...,\"message\":...}} on stdout.",
    );
    s
}

/// The whole command definition, as the pages show it: each command's SYNOPSIS
/// spelled out ([`synopsis`]).
fn definition(cli: &dyn Definition) -> clap::Command {
    let mut cmd = cli
        .command()
        .after_long_help(exit_status_text())
        .propagate_version(true)
        .disable_help_subcommand(true);
    cmd.build();
    with_synopses(cmd, true)
}

/// `cmd` and its subcommands, each with its [`synopsis`] as its usage (what
/// clap_mangen prints as SYNOPSIS; its own leaves out options' values).
fn with_synopses(cmd: clap::Command, root: bool) -> clap::Command {
    let line = synopsis(&cmd, root);
    cmd.override_usage(line)
        .mut_subcommands(|c| with_synopses(c, false))
}

/// One line: the command's full name, its options with their values
/// (`[--session NAME]`; required ones without brackets), its positional
/// arguments (`<MOUNTPOINT>`, `[REF]`, `[PATH]...`), and `<COMMAND>` when it has
/// subcommands. Help and version are left out, and so are the global options
/// but on the top-level page.
fn synopsis(cmd: &clap::Command, root: bool) -> String {
    let name = cmd.get_bin_name().unwrap_or_else(|| cmd.get_name());
    let mut words = vec![name.to_string()];
    let shown = |a: &&clap::Arg| {
        !a.is_hide_set()
            && !matches!(a.get_id().as_str(), "help" | "version")
            && (root || !a.is_global_set())
    };
    for a in cmd
        .get_arguments()
        .filter(|a| !a.is_positional())
        .filter(shown)
    {
        let flag = match (a.get_short(), a.get_long()) {
            (Some(s), Some(l)) => format!("-{s}|--{l}"),
            (Some(s), None) => format!("-{s}"),
            (None, Some(l)) => format!("--{l}"),
            (None, None) => continue,
        };
        let value = if a.get_action().takes_values() {
            format!(" {}", value_name(a))
        } else {
            String::new()
        };
        let more = if repeats(a) { "..." } else { "" };
        words.push(match a.is_required_set() {
            true => format!("{flag}{value}{more}"),
            false => format!("[{flag}{value}]{more}"),
        });
    }
    for a in cmd.get_positionals().filter(shown) {
        let more = if repeats(a) { "..." } else { "" };
        words.push(match a.is_required_set() {
            true => format!("<{}>{more}", value_name(a)),
            false => format!("[{}]{more}", value_name(a)),
        });
    }
    if cmd.has_subcommands() {
        words.push("<COMMAND>".into());
    }
    words.join(" ")
}

/// An argument's value name (`NAME`), else its id in capitals.
fn value_name(a: &clap::Arg) -> String {
    match a.get_value_names() {
        Some(v) if !v.is_empty() => v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(" "),
        _ => a.get_id().as_str().to_uppercase(),
    }
}

/// Whether an argument may be given more than once (or takes several values).
fn repeats(a: &clap::Arg) -> bool {
    matches!(
        a.get_action(),
        clap::ArgAction::Append | clap::ArgAction::Count
    ) || a.get_num_args().is_some_and(|n| n.max_values() > 1)
}

impl RunWith for Man {
    fn run(&self, _cx: &Ctx, cli: &dyn Definition) -> Result<Outcome> {
        let root = definition(cli);
        if let Some(dir) = &self.out_dir {
            std::fs::create_dir_all(dir)?;
            clap_mangen::generate_to(root, dir)?;
            let raw = serde_json::json!({"out_dir": dir});
            return Ok(Reply::new(raw, Written(dir.clone())).into());
        }
        let mut cmd = &root;
        for name in &self.command {
            cmd = cmd
                .find_subcommand(name)
                .ok_or_else(|| super::failure::Failure::not_found(format!("no command {name}")))?;
        }
        let mut buf = Vec::new();
        clap_mangen::Man::new(cmd.clone()).render(&mut buf)?;
        let page = String::from_utf8(buf)?;
        let raw = serde_json::json!({"page": page});
        Ok(Reply::new(raw, Script(page)).into())
    }
}

/// `wrote manual pages to DIR`.
struct Written(PathBuf);

impl Human for Written {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "wrote manual pages to {}", self.0.display())
    }
}
