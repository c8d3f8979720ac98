//! A recorded command as a person reads it: its argv joined and shell-quoted
//! (`["sh", "-c", "echo a b"]` → `sh -c 'echo a b'`), so what is shown can be
//! pasted back into a shell.

/// `argv` shell-quoted ([`shlex::try_join`]); an argument no shell can quote (a
/// NUL byte) is shown in Rust's debug quoting instead.
pub fn quoted(argv: &[String]) -> String {
    shlex::try_join(argv.iter().map(String::as_str)).unwrap_or_else(|_| {
        argv.iter()
            .map(|a| match shlex::try_quote(a) {
                Ok(q) => q.into_owned(),
                Err(_) => format!("{a:?}"),
            })
            .collect::<Vec<_>>()
            .join(" ")
    })
}

/// [`quoted`], cut to `max` characters (`...` marks a cut).
pub fn quoted_short(argv: &[String], max: usize) -> String {
    let q = quoted(argv);
    match q.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &q[..i]),
        None => q,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments_with_spaces_and_quotes_are_quoted() {
        assert_eq!(quoted(&v(&["sh", "-c", "echo a b"])), "sh -c 'echo a b'");
        assert_eq!(quoted(&v(&["make", "test"])), "make test");
        assert_eq!(quoted(&v(&["echo", "it's", ""])), r#"echo "it's" ''"#);
        assert_eq!(quoted(&v(&["a\0b"])), r#""a\0b""#);
    }

    #[test]
    fn long_commands_are_cut() {
        let long = v(&["echo", &"x".repeat(100)]);
        let s = quoted_short(&long, 20);
        assert_eq!(s, format!("echo {}...", "x".repeat(15)));
        assert_eq!(quoted_short(&v(&["ls"]), 20), "ls");
    }
}
