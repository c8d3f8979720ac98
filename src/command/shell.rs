//! A recorded command as a person reads it: its argv joined and quoted only where
//! a shell needs it (`["sh", "-c", "echo a b"]` → `sh -c 'echo a b'`), so what is
//! shown reads as typed and, pasted back into a POSIX shell (bash, zsh, dash),
//! runs the same argv.
//!
//! Per argument: left bare when every character is a letter, a digit or one of
//! `_ / . - : @ , + =` (`=` not in the first word, where it would make an
//! assignment); else single-quoted; with a `'` in it, double-quoted when nothing
//! in it is special there (`$`, `` ` ``, `\`, `"`, `!`), else single-quoted with
//! `'\''` for each `'`. An argument with a control character (or an invisible
//! formatting character such as a bidi override) is written in ANSI-C quoting,
//! `$'a\tb\n'`, so nothing unseen is shown raw.

/// `argv` quoted for a shell, as typed where that is safe (see the module docs).
pub fn quoted(argv: &[String]) -> String {
    argv.iter()
        .enumerate()
        .map(|(i, a)| quote_word(a, i == 0))
        .collect::<Vec<_>>()
        .join(" ")
}

/// [`quoted`], cut to `max` characters (`...` marks a cut).
pub fn quoted_short(argv: &[String], max: usize) -> String {
    cut(&quoted(argv), max)
}

/// `s` cut to `max` characters (`...` marks a cut).
pub fn cut(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// A character that needs no quoting (in the first word when `first`).
fn bare(c: char, first: bool) -> bool {
    c.is_alphanumeric() && !invisible(c)
        || matches!(c, '_' | '/' | '.' | '-' | ':' | '@' | ',' | '+')
        || (c == '=' && !first)
}

/// A character that must not be shown raw: a control character, or a
/// formatting character a reader cannot see (zero-width, bidi controls, BOM).
fn invisible(c: char) -> bool {
    c.is_control()
        || matches!(c, '\u{00ad}' | '\u{200b}'..='\u{200f}' | '\u{2028}'..='\u{202e}' | '\u{2060}'..='\u{2069}' | '\u{feff}')
}

/// One argument, quoted as little as a shell needs.
fn quote_word(a: &str, first: bool) -> String {
    if !a.is_empty() && a.chars().all(|c| bare(c, first)) {
        return a.to_string();
    }
    if a.chars().any(invisible) {
        return ansi_c(a);
    }
    if !a.contains('\'') {
        return format!("'{a}'");
    }
    if !a.contains(['$', '`', '\\', '"', '!']) {
        return format!("\"{a}\"");
    }
    format!("'{}'", a.replace('\'', r"'\''"))
}

/// `$'...'` with every control or invisible character escaped.
fn ansi_c(a: &str) -> String {
    let mut s = String::from("$'");
    for c in a.chars() {
        match c {
            '\\' => s.push_str(r"\\"),
            '\'' => s.push_str(r"\'"),
            '\n' => s.push_str(r"\n"),
            '\t' => s.push_str(r"\t"),
            '\r' => s.push_str(r"\r"),
            c if invisible(c) && (c as u32) < 0x80 => s.push_str(&format!("\\x{:02x}", c as u32)),
            c if invisible(c) && (c as u32) <= 0xffff => {
                s.push_str(&format!("\\u{:04x}", c as u32))
            }
            c if invisible(c) => s.push_str(&format!("\\U{:08x}", c as u32)),
            c => s.push(c),
        }
    }
    s.push('\'');
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v(a: &[&str]) -> Vec<String> {
        a.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn arguments_are_quoted_only_where_a_shell_needs_it() {
        assert_eq!(quoted(&v(&["sh", "-c", "echo a b"])), "sh -c 'echo a b'");
        assert_eq!(quoted(&v(&["make", "test"])), "make test");
        assert_eq!(quoted(&v(&["echo", "it's", ""])), r#"echo "it's" ''"#);
        assert_eq!(
            quoted(&v(&["sh", "-c", r#"printf "%s\n" a=b"#])),
            r#"sh -c 'printf "%s\n" a=b'"#
        );
        assert_eq!(
            quoted(&v(&["env", "A=1", "./x.sh", "--f=v:w@h,i+1", "é"])),
            "env A=1 ./x.sh --f=v:w@h,i+1 é"
        );
        // `=` in the first word would be an assignment; `~`, globs, `$` expand.
        assert_eq!(quoted(&v(&["A=1", "~", "*", "$x"])), "'A=1' '~' '*' '$x'");
        assert_eq!(quoted(&v(&["echo", r"it's $x"])), r"echo 'it'\''s $x'");
        assert_eq!(quoted(&v(&["printf", "a\tb\n"])), r"printf $'a\tb\n'");
        assert_eq!(quoted(&v(&["a\0b"])), r"$'a\x00b'");
        assert_eq!(quoted(&v(&["x\u{202e}y'"])), r"$'x\u202ey\''");
    }

    #[test]
    fn long_commands_are_cut() {
        let long = v(&["echo", &"x".repeat(100)]);
        let s = quoted_short(&long, 20);
        assert_eq!(s, format!("echo {}...", "x".repeat(15)));
        assert_eq!(quoted_short(&v(&["ls"]), 20), "ls");
    }

    /// What bash makes of `line`: the words `printf '%s\0'` prints.
    fn bash_words(line: &str) -> Vec<String> {
        let o = std::process::Command::new("bash")
            .arg("-c")
            .arg(format!("printf '%s\\0' {line}"))
            .output()
            .expect("bash runs");
        assert!(o.status.success(), "{line}");
        let mut w: Vec<String> = String::from_utf8(o.stdout)
            .unwrap()
            .split('\0')
            .map(str::to_string)
            .collect();
        w.pop();
        w
    }

    #[test]
    fn bash_reads_back_what_is_shown() {
        let argv = v(&[
            "echo",
            "it's $x",
            "a\tb\n",
            "x\u{202e}y'",
            "\\",
            "!",
            "\"",
            "A=1",
            "{a,b}",
            "#",
            "",
        ]);
        assert_eq!(bash_words(&quoted(&argv[1..])), argv[1..].to_vec());
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        /// Without control characters, shlex splits what is shown back into the
        /// argv; a bare word has nothing a shell would expand.
        #[test]
        fn shlex_splits_it_back(argv in prop::collection::vec("[ -~é]{0,12}", 1..6)) {
            let q = quoted(&argv);
            prop_assert_eq!(shlex::split(&q), Some(argv.clone()));
            let special = [
                '$', '*', '?', '~', '{', '[', '\'', '"', '\\', ' ', '#', '&', ';', '|', '<', '>',
                '(', ')', '`', '!',
            ];
            for (i, a) in argv.iter().enumerate() {
                let bare = quote_word(a, i == 0) == *a;
                prop_assert!(!bare || !a.contains(special), "{:?} left bare", a);
            }
        }

        /// With any characters, bash reads back the argv.
        #[test]
        fn bash_reads_it_back(argv in prop::collection::vec("[\\x01-\\x7f\u{202e}é]{0,8}", 1..4)) {
            prop_assert_eq!(bash_words(&quoted(&argv)), argv.clone());
        }
    }
}
