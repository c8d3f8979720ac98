//! `mount-helper`: `mount -t fuse.treefork SESSION DIR -o store=...` and
//! /etc/fstab lines.
//!
//! mount(8) runs `/sbin/mount.fuse.treefork SOURCE DIR [-sfnv] [-N NS] -o OPTS`;
//! installed as that name (a symlink to `treefork`, scripts/install-mount-helper.sh),
//! `treefork` sees the name in argv[0] and runs this command ([`argv`]). SOURCE is
//! the session, OPTS are translated to `treefork mount` flags ([`translate`]), and
//! the mount runs exactly as `treefork mount` would (background daemon, same
//! errors and exit statuses). Options mount(8) adds or fstab carries for itself
//! (`rw`, `defaults`, `noauto`, `nofail`, `_netdev`, `x-*`, ...) are ignored; `ro`
//! is refused (a workspace is writable); any other unknown option is a usage error
//! unless `-s` (sloppy). Success prints nothing (helpers are quiet), except with
//! `--json`.

use std::ffi::OsString;
use std::path::PathBuf;

use super::definition::{Definition, RunWith};
use super::failure::Failure;
use super::prelude::*;

/// The name mount(8) runs helpers by: `mount.fuse.treefork` (for
/// `-t fuse.treefork`) or `mount.treefork`.
const HELPER_PREFIX: &str = "mount.";

/// Mount a session as mount(8) runs a helper (install as /sbin/mount.fuse.treefork:
/// `mount -t fuse.treefork SESSION DIR -o store=DIR`).
#[derive(clap::Args)]
pub struct MountHelper {
    /// The session (mount's SOURCE); created if needed.
    source: String,
    /// The mountpoint.
    dir: PathBuf,
    /// Comma-separated options: store=DIR, from=DIR, task=TEXT, ttl_idle=D,
    /// ttl_absolute=D, until_promote, no_until_promote, manual, agent_socket=PATH,
    /// agent_uid=UID; mount(8)'s own (rw, defaults, noauto, nofail, x-*, ...) are
    /// ignored.
    #[arg(short = 'o', value_name = "OPTIONS")]
    options: Vec<String>,
    /// Sloppy: ignore unknown options (mount -s).
    #[arg(short = 's')]
    sloppy: bool,
    /// Fake: check the options, mount nothing (mount -f).
    #[arg(short = 'f')]
    fake: bool,
    /// Passed by mount(8) (no mtab / verbose / type / namespace); ignored.
    #[arg(short = 'n', hide = true)]
    no_mtab: bool,
    #[arg(short = 'v', hide = true)]
    verbose: bool,
    #[arg(short = 't', hide = true)]
    fstype: Option<String>,
    #[arg(short = 'N', hide = true)]
    namespace: Option<String>,
}

/// mount(8)'s options that mean nothing to treefork (mount flags it applies
/// itself, fstab bookkeeping).
const IGNORED: &[&str] = &[
    "rw",
    "defaults",
    "auto",
    "noauto",
    "nofail",
    "user",
    "nouser",
    "users",
    "owner",
    "group",
    "_netdev",
    "dev",
    "nodev",
    "suid",
    "nosuid",
    "exec",
    "noexec",
    "async",
    "atime",
    "noatime",
    "relatime",
    "norelatime",
    "strictatime",
    "nostrictatime",
    "diratime",
    "nodiratime",
    "lazytime",
    "nolazytime",
    "silent",
    "loud",
];

/// The `treefork mount` arguments (after `treefork`) for SOURCE, DIR and mount
/// options `opts`.
pub fn translate(source: &str, dir: &str, opts: &[String], sloppy: bool) -> Result<Vec<String>> {
    let mut globals = Vec::new();
    let mut args = vec![
        "mount".to_string(),
        dir.to_string(),
        "--session".into(),
        source.into(),
    ];
    for opt in opts
        .iter()
        .flat_map(|o| o.split(','))
        .filter(|o| !o.is_empty())
    {
        let (key, value) = match opt.split_once('=') {
            Some((k, v)) => (k, Some(v)),
            None => (opt, None),
        };
        let flag = |name: &str| format!("--{}", name.replace('_', "-"));
        match (key, value) {
            ("store", Some(v)) => globals.extend(["--store".to_string(), v.to_string()]),
            (
                "from" | "task" | "ttl_idle" | "ttl_absolute" | "agent_socket" | "agent_uid",
                Some(v),
            ) => args.extend([flag(key), v.to_string()]),
            ("until_promote" | "no_until_promote" | "manual", None) => args.push(flag(key)),
            ("ro", None) => {
                return Err(Failure::usage(
                    "a treefork workspace is writable: the `ro` mount option is not supported",
                ));
            }
            (k, _) if IGNORED.contains(&k) || k.starts_with("x-") || k == "comment" => {}
            _ if sloppy => {}
            _ => return Err(Failure::usage(format!("unknown mount option `{opt}`"))),
        }
    }
    globals.extend(args);
    Ok(globals)
}

/// The process arguments, with a helper invocation (argv[0] named `mount.*`)
/// rewritten to `treefork mount-helper ...`.
pub fn argv(args: impl IntoIterator<Item = OsString>) -> Vec<OsString> {
    let mut v: Vec<OsString> = args.into_iter().collect();
    let helper = v.first().and_then(|a| {
        let name = std::path::Path::new(a).file_name()?.to_str()?;
        Some(name.starts_with(HELPER_PREFIX))
    });
    if helper == Some(true) {
        v.insert(1, "mount-helper".into());
    }
    v
}

/// The mount's result, printed only with `--json`.
struct Quiet;

impl Human for Quiet {
    fn human(&self, _out: &mut dyn Write) -> io::Result<()> {
        Ok(())
    }
}

impl RunWith for MountHelper {
    fn run(&self, cx: &Ctx, cli: &dyn Definition) -> Result<Outcome> {
        let dir = self
            .dir
            .to_str()
            .ok_or_else(|| anyhow!("the mountpoint is not UTF-8"))?;
        let mut args = vec!["treefork".to_string()];
        args.extend(translate(&self.source, dir, &self.options, self.sloppy)?);
        let (mut g, cmd) = cli.parse(&args)?;
        if self.fake {
            return Ok(Outcome::Silent);
        }
        let outer = cx.globals();
        g.json |= outer.json;
        g.store = g.store.or_else(|| outer.store.clone());
        g.explanation = outer.explanation.clone();
        let inner = Ctx::new(g);
        match cmd.run(&inner)? {
            Outcome::Report(r) => Ok(Reply::new(r.json().clone(), Quiet).into()),
            Outcome::Silent => Ok(Outcome::Silent),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(opts: &[&str]) -> Result<Vec<String>> {
        let opts: Vec<String> = opts.iter().map(|s| s.to_string()).collect();
        translate("s1", "/mnt/w", &opts, false)
    }

    #[test]
    fn options_become_mount_flags() {
        let a = t(&["rw,store=/var/s,task=fix it,agent_uid=7,agent_socket=/a.sock,noauto,x-systemd.automount,manual"]).unwrap();
        assert_eq!(
            a,
            [
                "--store",
                "/var/s",
                "mount",
                "/mnt/w",
                "--session",
                "s1",
                "--task",
                "fix it",
                "--agent-uid",
                "7",
                "--agent-socket",
                "/a.sock",
                "--manual"
            ]
        );
        // That it parses as a real command line: `args`' tests (the registry).
    }

    #[test]
    fn ro_and_unknown_options_are_usage_errors_unless_sloppy() {
        for bad in ["ro", "bogus", "store"] {
            let e = t(&[bad]).unwrap_err();
            assert_eq!(super::super::failure::classify(&e).status, 2, "{bad}");
        }
        let opts = vec!["bogus=1".to_string()];
        assert!(translate("s", "/m", &opts, true).is_ok());
    }

    #[test]
    fn argv0_dispatch() {
        let v = argv(["/sbin/mount.fuse.treefork", "s", "/m", "-o", "rw"].map(OsString::from));
        assert_eq!(v[1], "mount-helper");
        assert_eq!(v.len(), 6);
        let v = argv(["/usr/bin/treefork", "status"].map(OsString::from));
        assert_eq!(v, ["/usr/bin/treefork", "status"].map(OsString::from));
    }
}
