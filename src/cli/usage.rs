//! A command line clap refused, as the one line every error is: clap's own first
//! line (with the lines under it: the missing arguments, the possible values),
//! its best suggestion (the most similar subcommand, argument or value),
//! and where to read more (`see 'treefork checkpoint --help'`: the subcommands
//! the command line named), in place of clap's usage, tip and "For more
//! information" lines.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue};

/// The one-line message of `e`, clap's refusal of `argv` by `cmd` (without the
/// `treefork: error: ` prefix).
pub fn line(e: &clap::Error, cmd: &clap::Command, argv: &[OsString]) -> String {
    let text = e.render().to_string();
    let mut lines = text.lines();
    let first = lines.next().unwrap_or("").trim();
    let mut line = first.strip_prefix("error: ").unwrap_or(first).to_string();
    // The lines right under it belong to it (the missing arguments, the
    // possible values); the usage and tips after the blank line do not.
    let more: Vec<&str> = lines
        .take_while(|l| !l.trim().is_empty())
        .map(str::trim)
        .filter(|l| !l.starts_with("tip:"))
        .collect();
    if !more.is_empty() {
        let sep = if line.ends_with(':') { ", " } else { " " };
        line.push(' ');
        line.push_str(&more.join(sep));
    }
    let mut notes = Vec::new();
    if let Some(s) = suggestion(e) {
        notes.push(format!("did you mean '{s}'?"));
    }
    notes.push(format!("see '{} --help'", help_command(cmd, argv)));
    line.push_str(&format!(" ({})", notes.join(" ")));
    line
}

/// The most similar name clap found, if any: clap lists candidates from the
/// least to the most similar, so the last one.
fn suggestion(e: &clap::Error) -> Option<String> {
    [
        ContextKind::SuggestedSubcommand,
        ContextKind::SuggestedArg,
        ContextKind::SuggestedValue,
    ]
    .into_iter()
    .find_map(|k| match e.get(k)? {
        ContextValue::String(s) => Some(s.clone()),
        ContextValue::Strings(v) => v.last().cloned(),
        _ => None,
    })
}

/// The command whose `--help` to read: the subcommands named in `argv` (before
/// any `--`), as deep as they go (`treefork session extend`).
fn help_command(cmd: &clap::Command, argv: &[OsString]) -> String {
    let mut names = vec![cmd.get_name().to_string()];
    let mut cur = cmd;
    for a in argv.iter().skip(1).take_while(|a| *a != "--") {
        if let Some(sub) = a.to_str().and_then(|a| cur.find_subcommand(a)) {
            names.push(sub.get_name().to_string());
            cur = sub;
        }
    }
    names.join(" ")
}

#[cfg(test)]
mod tests {
    use std::ffi::OsString;

    use clap::{CommandFactory, Parser};

    use super::line;
    use crate::cli::args::Cli;

    fn refused(args: &[&str]) -> String {
        let mut argv = vec![OsString::from("treefork")];
        argv.extend(args.iter().map(OsString::from));
        match Cli::try_parse_from(&argv) {
            Ok(_) => panic!("{args:?} parsed"),
            Err(e) => line(&e, &Cli::command(), &argv),
        }
    }

    #[test]
    fn a_refusal_is_one_line_naming_the_help_to_read() {
        let l = refused(&["checkpoint", "--foo"]);
        assert!(l.starts_with("unexpected argument '--foo'"), "{l}");
        assert!(l.ends_with("(see 'treefork checkpoint --help')"), "{l}");
        assert!(!l.contains('\n'), "{l}");
        let l = refused(&["session", "extend", "s", "--ttl-idle", "5x"]);
        assert!(l.contains("invalid value '5x'"), "{l}");
        assert!(l.contains("see 'treefork session extend --help'"), "{l}");
        assert!(!l.contains('\n'), "{l}");
    }

    #[test]
    fn what_is_missing_or_possible_stays_on_the_line() {
        let l = refused(&["mount"]);
        assert!(l.contains("not provided: <MOUNTPOINT>"), "{l}");
        let l = refused(&["note", "--type", "idea", "x"]);
        assert!(
            l.contains("[possible values: action, decision, error, nudge]"),
            "{l}"
        );
        assert!(!l.contains('\n'), "{l}");
    }

    #[test]
    fn a_misspelt_command_suggests_the_nearest_name() {
        let l = refused(&["chekpoint"]);
        assert!(l.contains("'chekpoint'"), "{l}");
        assert!(l.contains("did you mean 'checkpoint'?"), "{l}");
        assert!(l.contains("see 'treefork --help'"), "{l}");
        let l = refused(&["brnches"]);
        assert!(l.contains("did you mean 'branches'?"), "{l}");
        let l = refused(&["log", "--onelin"]);
        assert!(l.contains("did you mean '--oneline'?"), "{l}");
    }

    #[test]
    fn bad_values_are_refused_by_the_parser() {
        for args in [
            &["timeline", "--since", "5x"][..],
            &["mount", "/m", "--ttl-idle", "5x"],
            &["session", "extend", "s", "--ttl-absolute", "soon"],
            &["store", "trim", "--older-than", "5x"],
            &["exec", "--timeout", "0", "true"],
            &["exec", "--capture-limit", "999999999999", "true"],
            &["bisect", "run", "-j", "0", "true"],
            &["experiment", "--timeout", "0", "-c", "true"],
            &["experiment", "--command", "true", "--env", "noequals"],
            &["config", "noequals"],
        ] {
            let l = refused(args);
            assert!(l.contains("invalid value"), "{args:?}: {l}");
        }
        // Good values parse.
        Cli::try_parse_from(["treefork", "timeline", "--since", "30m"]).unwrap();
        Cli::try_parse_from(["treefork", "mount", "/m", "--ttl-idle", "never"]).unwrap();
    }
}
