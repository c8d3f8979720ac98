//! `treefork agent install claude|codex|gemini`: put treefork's hooks and MCP
//! server into a runtime's own configuration, beside what is there.
//!
//! Where (`--project DIR` or `--user`):
//! - Claude Code: `DIR/.claude/settings.json` (hooks, and `enabledMcpjsonServers`)
//!   and `DIR/.mcp.json`; user: `~/.claude/settings.json` and `~/.claude.json`.
//! - Codex: `DIR/.codex/hooks.json` or `$CODEX_HOME/hooks.json` (`~/.codex`), and
//!   `$CODEX_HOME/config.toml` (MCP server, `notify`, hook trust: see `codex`).
//! - Gemini CLI: `DIR/.gemini/settings.json` or `~/.gemini/settings.json`.
//!
//! Invariants: every file is read whole, changed in memory and written by
//! rename (a reader never sees half a file); `--dry-run` writes nothing and
//! prints each file's change; reinstalling replaces treefork's entries in place,
//! `--uninstall` removes exactly them. JSON files are written with sorted keys
//! (serde_json), TOML keeps the user's text.

use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::super::prelude::*;
use super::codex;
use super::entries::{self, Entry};
use super::payload::Runtime;

/// Install treefork's hooks (and MCP server) into an agent runtime's configuration.
#[derive(clap::Args)]
pub struct Install {
    /// The runtime.
    #[arg(value_enum)]
    runtime: Runtime,
    /// Install into this project's configuration.
    #[arg(
        long,
        value_name = "DIR",
        conflicts_with = "user",
        required_unless_present = "user"
    )]
    project: Option<PathBuf>,
    /// Install into your user configuration (every project).
    #[arg(long)]
    user: bool,
    /// Show what would change; write nothing.
    #[arg(long)]
    dry_run: bool,
    /// Remove treefork's entries instead.
    #[arg(long)]
    uninstall: bool,
    /// Hooks block a tool treefork cannot record (`treefork hook --strict`).
    #[arg(long, conflicts_with = "uninstall")]
    strict: bool,
    /// Leave the MCP server out.
    #[arg(long)]
    no_mcp: bool,
    /// Claude Code: make a subagent's isolated worktree (and `claude --worktree`) a
    /// treefork fork of the workspace. Outside a treefork workspace Claude Code then
    /// cannot make worktrees at all.
    #[arg(long, conflicts_with = "uninstall")]
    worktrees: bool,
}

/// One file's change.
#[derive(serde::Serialize)]
struct Change {
    path: PathBuf,
    before: Option<String>,
    after: String,
}

/// What `agent install` did (or would do).
#[derive(serde::Serialize)]
struct Installed {
    runtime: &'static str,
    dry_run: bool,
    uninstall: bool,
    files: Vec<Change>,
    notes: Vec<String>,
}

impl Human for Installed {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let verb = match (self.uninstall, self.dry_run) {
            (false, false) => "installed into",
            (false, true) => "would install into",
            (true, false) => "removed from",
            (true, true) => "would remove from",
        };
        for f in &self.files {
            let same = f.before.as_deref() == Some(f.after.as_str());
            if same {
                writeln!(out, "{}: unchanged", f.path.display())?;
                continue;
            }
            writeln!(out, "{} {verb} {}", self.runtime, f.path.display())?;
            if self.dry_run {
                for l in diff_lines(f.before.as_deref().unwrap_or(""), &f.after) {
                    writeln!(out, "  {l}")?;
                }
            }
        }
        for n in &self.notes {
            writeln!(out, "note: {n}")?;
        }
        Ok(())
    }
}

/// The lines only in `a` (`-`) and only in `b` (`+`): enough to see a
/// configuration change.
fn diff_lines(a: &str, b: &str) -> Vec<String> {
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let mut v: Vec<String> = la
        .iter()
        .filter(|l| !lb.contains(l))
        .map(|l| format!("- {l}"))
        .collect();
    v.extend(
        lb.iter()
            .filter(|l| !la.contains(l))
            .map(|l| format!("+ {l}")),
    );
    v
}

fn home() -> Result<PathBuf> {
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| anyhow!("HOME is not set: pass --project DIR"))
}

fn codex_home() -> Result<PathBuf> {
    match std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()) {
        Some(h) => Ok(PathBuf::from(h)),
        None => Ok(home()?.join(".codex")),
    }
}

/// A file's text, `None` when it does not exist.
fn read(path: &Path) -> Result<Option<String>> {
    match std::fs::read_to_string(path) {
        Ok(s) => Ok(Some(s)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("cannot read {}", path.display())),
    }
}

fn parse_json(path: &Path, text: Option<&str>) -> Result<Value> {
    match text {
        None => Ok(json!({})),
        Some(t) if t.trim().is_empty() => Ok(json!({})),
        Some(t) => serde_json::from_str(t)
            .with_context(|| format!("{} is not valid JSON: fix or move it first", path.display())),
    }
}

fn pretty(v: &Value) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

use anyhow::Context;

impl Install {
    fn exe() -> Result<String> {
        let p = std::env::current_exe().context("cannot find the treefork binary's path")?;
        p.to_str()
            .map(str::to_string)
            .ok_or_else(|| anyhow!("the treefork binary's path is not UTF-8"))
    }

    /// Edit the JSON file at `path` with `f`.
    fn json_file(
        &self,
        changes: &mut Vec<Change>,
        path: PathBuf,
        f: impl FnOnce(&mut Value) -> Result<()>,
    ) -> Result<()> {
        let before = read(&path)?;
        let mut doc = parse_json(&path, before.as_deref())?;
        f(&mut doc)?;
        let after = pretty(&doc);
        if before.is_none() && doc == json!({}) {
            return Ok(()); // nothing to remove from a file that is not there
        }
        changes.push(Change {
            path,
            before,
            after,
        });
        Ok(())
    }

    fn groups(&self, rt: Runtime, exe: &str) -> Vec<(Entry, Value)> {
        let cmd = entries::command(exe, rt, self.strict);
        // Gemini CLI's timeouts are milliseconds; the others' seconds (their
        // default, 600, is kept: Codex's trust hash covers it).
        let timeout = (rt == Runtime::Gemini).then_some(60_000);
        let mut es = entries::entries(rt);
        if self.worktrees && rt == Runtime::Claude {
            es.extend(entries::worktree_entries());
        }
        es.into_iter()
            .map(|e| {
                let g = entries::group(&e, &cmd, timeout);
                (e, g)
            })
            .collect()
    }

    /// Hooks into a JSON hooks file; returns where the groups went and what a
    /// removal took out.
    fn hooks(
        &self,
        changes: &mut Vec<Change>,
        path: PathBuf,
        rt: Runtime,
        exe: &str,
        extra: impl FnOnce(&mut Value, bool) -> Result<()>,
    ) -> Result<(entries::Placed, entries::Removed)> {
        let groups = self.groups(rt, exe);
        let mut placed = Vec::new();
        let mut gone = Vec::new();
        self.json_file(changes, path, |doc| {
            if self.uninstall {
                gone = entries::remove(doc);
            } else {
                placed = entries::merge(doc, &groups).map_err(|e| anyhow!(e))?;
            }
            extra(doc, !self.uninstall)
        })?;
        Ok((placed, gone))
    }

    fn mcp_server(&self, exe: &str, install: bool) -> Option<Value> {
        (install && !self.no_mcp).then(|| json!({"command": exe, "args": ["mcp"]}))
    }

    fn claude(&self, exe: &str, files: &mut Vec<Change>, notes: &mut Vec<String>) -> Result<()> {
        let (settings, mcp_file) = match &self.project {
            Some(d) => (d.join(".claude/settings.json"), d.join(".mcp.json")),
            None => (
                home()?.join(".claude/settings.json"),
                home()?.join(".claude.json"),
            ),
        };
        let project = self.project.is_some();
        self.hooks(files, settings, Runtime::Claude, exe, |doc, install| {
            if project {
                enable_mcpjson(doc, install && !self.no_mcp);
            }
            Ok(())
        })?;
        let server = self.mcp_server(exe, !self.uninstall);
        if server.is_some() || self.uninstall || self.no_mcp {
            self.json_file(files, mcp_file, |doc| {
                entries::mcp(doc, server).map_err(|e| anyhow!(e))
            })?;
        }
        if !self.uninstall {
            notes.push("Claude Code reads hooks at start: restart running sessions".into());
        }
        Ok(())
    }

    fn gemini(&self, exe: &str, files: &mut Vec<Change>) -> Result<()> {
        let settings = match &self.project {
            Some(d) => d.join(".gemini/settings.json"),
            None => home()?.join(".gemini/settings.json"),
        };
        if self.worktrees {
            bail!("--worktrees is Claude Code's");
        }
        let server = self.mcp_server(exe, !self.uninstall);
        self.hooks(files, settings, Runtime::Gemini, exe, |doc, _| {
            entries::mcp(doc, server).map_err(|e| anyhow!(e))
        })?;
        Ok(())
    }

    fn codex(&self, exe: &str, files: &mut Vec<Change>, notes: &mut Vec<String>) -> Result<()> {
        if self.worktrees {
            bail!("--worktrees is Claude Code's");
        }
        let home = codex_home()?;
        let hooks_file = match &self.project {
            Some(d) => d.join(".codex/hooks.json"),
            None => home.join("hooks.json"),
        };
        let (placed, gone) = self.hooks(
            files,
            hooks_file.clone(),
            Runtime::Codex,
            exe,
            |_, _| Ok(()),
        )?;
        // Codex keys trust by the hooks file's real path.
        let real = real_path(&hooks_file);
        let config = home.join("config.toml");
        let before = read(&config)?;
        let mut doc: toml_edit::DocumentMut = before
            .as_deref()
            .unwrap_or("")
            .parse()
            .with_context(|| format!("{} is not valid TOML: fix it first", config.display()))?;
        let groups = self.groups(Runtime::Codex, exe);
        if self.uninstall {
            codex::untrust(&mut doc, &real, &gone);
            codex::mcp(&mut doc, None);
            codex::notify(&mut doc, None);
        } else {
            let keys: Vec<(String, String)> = placed
                .iter()
                .filter_map(|(event, gi)| {
                    let (_, g) = groups.iter().find(|(e, _)| e.event == *event)?;
                    Some((
                        codex::trust_key(&real, event, *gi, 0),
                        codex::trust_hash(event, g),
                    ))
                })
                .collect();
            codex::trust(&mut doc, &keys);
            codex::mcp(&mut doc, (!self.no_mcp).then_some(exe));
            let argv = vec![
                exe.to_string(),
                "hook".into(),
                "--runtime".into(),
                "codex".into(),
                "--notify".into(),
            ];
            if !codex::notify(&mut doc, Some(argv)) {
                notes.push("config.toml already names a notify program: treefork's per-turn checkpoint is left out (the Stop hook still logs each turn)".into());
            }
            if self.project.is_some() {
                notes.push(format!(
                    "Codex reads {} only in a project it trusts (`[projects.\"DIR\"] trust_level = \"trusted\"` in {})",
                    hooks_file.display(),
                    config.display()
                ));
            }
        }
        files.push(Change {
            path: config,
            before,
            after: doc.to_string(),
        });
        Ok(())
    }
}

/// Claude Code enables a project's `.mcp.json` servers only when named.
fn enable_mcpjson(doc: &mut Value, on: bool) {
    let Some(o) = doc.as_object_mut() else { return };
    let list = o
        .entry("enabledMcpjsonServers")
        .or_insert_with(|| json!([]));
    if let Some(a) = list.as_array_mut() {
        a.retain(|v| v != "treefork");
        if on {
            a.push(json!("treefork"));
        }
        if a.is_empty() {
            o.remove("enabledMcpjsonServers");
        }
    }
}

/// The real path of `p` (of its directory, when it does not exist yet).
fn real_path(p: &Path) -> String {
    let real = p.canonicalize().ok().or_else(|| {
        let dir = p.parent()?.canonicalize().ok()?;
        Some(dir.join(p.file_name()?))
    });
    real.unwrap_or_else(|| p.to_path_buf())
        .to_string_lossy()
        .into_owned()
}

/// Write `text` to `path` by rename, making its directory.
fn write(path: &Path, text: &str) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.treefork-{}",
        path.file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("config"),
        std::process::id()
    ));
    std::fs::write(&tmp, text).with_context(|| format!("cannot write {}", tmp.display()))?;
    if let Ok(m) = std::fs::metadata(path) {
        let _ = std::fs::set_permissions(&tmp, m.permissions());
    }
    std::fs::rename(&tmp, path).with_context(|| format!("cannot replace {}", path.display()))
}

impl Run for Install {
    fn run(&self, _cx: &Ctx) -> Result<Outcome> {
        let exe = Self::exe()?;
        // Codex's trust needs the hooks file's real path: make its directory first.
        let mut files = Vec::new();
        let mut notes = Vec::new();
        match self.runtime {
            Runtime::Claude => self.claude(&exe, &mut files, &mut notes)?,
            Runtime::Codex => {
                if !self.dry_run
                    && let Some(d) = &self.project
                {
                    std::fs::create_dir_all(d.join(".codex"))?;
                }
                self.codex(&exe, &mut files, &mut notes)?
            }
            Runtime::Gemini => self.gemini(&exe, &mut files)?,
        }
        if !self.dry_run {
            for f in &files {
                if f.before.as_deref() != Some(f.after.as_str()) {
                    write(&f.path, &f.after)?;
                }
            }
        }
        let body = Installed {
            runtime: self.runtime.name(),
            dry_run: self.dry_run,
            uninstall: self.uninstall,
            files,
            notes,
        };
        let raw = serde_json::to_value(&body)?;
        Ok(Reply::new(raw, body).into())
    }
}
