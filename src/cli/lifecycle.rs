//! Session lifecycle commands: the policy flags of `mount` ([`PolicyArgs`]), the
//! lifecycle columns of `sessions` ([`LifeColumns`]), and `session show`,
//! `session extend`, `session discard`, `session sweep` (subcommands of
//! `session`, see `cli/store.rs`).

use serde_json::Value;

use super::prelude::*;
use super::values;
use treefork::lifecycle::manage::LifeColumns;

type Extended = treefork::verbs::session_extend::Extended;
type Discarded = treefork::verbs::session_discard::Discarded;
type Swept = treefork::verbs::session_sweep::Swept;

/// Eviction policy and task of a session (`mount`; on an existing session they
/// update it).
#[derive(clap::Args, Clone, Debug, Default)]
pub struct PolicyArgs {
    /// What the session is for (shown by `sessions`).
    #[arg(long, value_name = "TEXT")]
    pub task: Option<String>,
    /// Evict after this long without access, e.g. `30m`, `4h` (`never`: no idle
    /// limit) [default for new sessions: 4h].
    #[arg(long, value_name = "DURATION", value_parser = values::ttl)]
    pub ttl_idle: Option<String>,
    /// Evict this long from now whatever happens, e.g. `7d` (`never`: no limit).
    #[arg(long, value_name = "DURATION", value_parser = values::ttl)]
    pub ttl_absolute: Option<String>,
    /// Evict once promoted [the default].
    #[arg(long, overrides_with = "no_until_promote")]
    until_promote: bool,
    /// Keep it mounted after a promote.
    #[arg(long)]
    no_until_promote: bool,
    /// Never evict automatically (only `session discard` or `session rm`).
    #[arg(long)]
    pub manual: bool,
    /// Push the session to this remote before an eviction unmounts it
    /// (`none`: evict locally only).
    #[arg(long, value_name = "REMOTE")]
    pub evict_to: Option<String>,
}

impl PolicyArgs {
    /// The until-promote choice, if one was made.
    pub fn until_promote(&self) -> Option<bool> {
        match (self.until_promote, self.no_until_promote) {
            (true, _) => Some(true),
            (_, true) => Some(false),
            _ => None,
        }
    }
}

/// Seconds as `42s`, `5m`, `3h`, `2d`.
fn dur(s: i64) -> String {
    match s {
        s if s < 120 => format!("{s}s"),
        s if s < 7200 => format!("{}m", s / 60),
        s if s < 172_800 => format!("{}h", s / 3600),
        s => format!("{}d", s / 86_400),
    }
}

/// `LIFE AGE IDLE TOUCHED` cells of a `sessions` row.
pub fn columns(c: &LifeColumns) -> String {
    let state = serde_json::to_value(c.lifecycle).unwrap_or_default();
    let state = state.as_str().unwrap_or("-");
    let life = match &c.evict_blocked {
        Some(_) => format!("{state}*"),
        None => state.to_string(),
    };
    format!(
        "{:<9} {:>6} {:>6} {:>7}",
        life,
        dur(c.age),
        dur(c.idle),
        c.touched
    )
}

/// `  "task"` (and why eviction is blocked) of a `sessions` row, or nothing.
pub fn task_suffix(c: &LifeColumns) -> String {
    let mut s = String::new();
    if let Some(t) = &c.task {
        s.push_str(&format!("  {t:?}"));
    }
    if let Some(b) = &c.evict_blocked {
        s.push_str(&format!("  (eviction blocked: {b})"));
    }
    s
}

/// `session show`.
#[derive(clap::Args)]
pub struct Show {
    /// Session name [default: the workspace's session].
    name: Option<String>,
}

type Shown = treefork::lifecycle::manage::SessionShown;

impl Human for Shown {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let i = &serde_json::to_value(&self.info).unwrap_or_default();
        let s = |k: &str| i[k].as_str().unwrap_or("-").to_string();
        writeln!(out, "session  {} (id {})", s("session"), s("id"))?;
        writeln!(out, "state    {}", s("state"))?;
        if let Some(t) = i["task"].as_str() {
            writeln!(out, "task     {t}")?;
        }
        let o = &i["origin"];
        if o.is_object() {
            writeln!(
                out,
                "origin   {}{}{}",
                o["path"].as_str().unwrap_or("?"),
                o["branch"]
                    .as_str()
                    .map(|b| format!(" branch {b}"))
                    .unwrap_or_default(),
                o["baseline"]
                    .as_str()
                    .map(|b| format!(" baseline {}", &b[..b.len().min(12)]))
                    .unwrap_or_default(),
            )?;
        }
        let r = &i["meta"]["remote_origin"];
        if let Some(p) = r["origin"]["path"].as_str() {
            writeln!(
                out,
                "remote origin {p} (from remote {}: NOT trusted, not used; `treefork remote trust {}` after checking it)",
                r["remote"].as_str().unwrap_or("?"),
                s("session")
            )?;
        }
        let over = match self.transport.as_deref() {
            Some("uring") => " (over io_uring)",
            Some("dev") => " (over /dev/fuse)",
            _ => "",
        };
        writeln!(
            out,
            "mounted  {}{over}",
            self.mountpoint
                .as_deref()
                .map_or("no".into(), |p| p.to_string_lossy())
        )?;
        if let Some(a) = &self.agent_socket {
            let when = if self.mounted {
                ""
            } else {
                " (served again at its next mount)"
            };
            writeln!(out, "agent    socket {}{when}", a.display())?;
        }
        if let Some(r) = &self.remote_only {
            let bound = if r.unread_nodes > 0 { "at least " } else { "" };
            writeln!(
                out,
                "remote   {bound}{} object(s) of the workspace only on the remote ({} local; `treefork hydrate` fetches the rest)",
                r.objects, r.local
            )?;
        }
        writeln!(out, "age      {}, idle {}", dur(self.age), dur(self.idle))?;
        let p = &i["policy"];
        let ttl = |k: &str| p[k].as_i64().map_or("none".to_string(), dur);
        writeln!(
            out,
            "policy   idle ttl {}, absolute ttl {}, until-promote {}, manual {}",
            ttl("idle_ttl_secs"),
            ttl("absolute_ttl_secs"),
            p["until_promote"],
            p["manual"]
        )?;
        if let Some(e) = &self.expires {
            writeln!(out, "due      for eviction: {e}")?;
        }
        if let Some(b) = i["evict_blocked"].as_str() {
            writeln!(out, "blocked  eviction: {b}")?;
        }
        writeln!(out, "touched  {} file(s)", self.touched)?;
        let m = &i["metrics"];
        writeln!(
            out,
            "metrics  {} command(s) ({} ms), {} checkpoint(s), {} fork(s), {} recover(ies)",
            m["commands"], m["command_ms"], m["checkpoints"], m["forks"], m["recoveries"]
        )?;
        if let Some(p) = i["promoted"].as_object() {
            writeln!(out, "promoted {}", Value::Object(p.clone()))?;
        }
        Ok(())
    }
}

impl Run for Show {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let op = Request::SessionShow(treefork::verbs::SessionShow {
            name: self.name.clone(),
        });
        let r: Reply<Shown> = match &self.name {
            Some(_) => cx.store_op(op, false)?,
            None => cx.session(op)?,
        };
        Ok(r.into())
    }
}

/// `session extend`.
#[derive(clap::Args)]
pub struct Extend {
    /// Session name.
    name: String,
    /// New idle TTL, e.g. `8h` (`never`: none).
    #[arg(long, value_name = "DURATION", value_parser = values::ttl)]
    ttl_idle: Option<String>,
    /// New absolute TTL, counted from now, e.g. `2d` (`never`: none).
    #[arg(long, value_name = "DURATION", value_parser = values::ttl)]
    ttl_absolute: Option<String>,
    /// Push the session to this remote before an eviction unmounts it
    /// (`none`: evict locally only).
    #[arg(long, value_name = "REMOTE")]
    evict_to: Option<String>,
}

impl Human for Extended {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let ttl = |s: Option<u64>| s.map_or("none".to_string(), |s| dur(s as i64));
        writeln!(
            out,
            "session {}: idle ttl {}, absolute ttl {} (idle clock restarted)",
            self.session,
            ttl(self.policy.idle_ttl_secs),
            ttl(self.policy.absolute_ttl_secs)
        )
    }
}

impl Run for Extend {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let op = Request::SessionExtend(treefork::verbs::SessionExtend {
            name: self.name.clone(),
            ttl_idle: self.ttl_idle.clone(),
            ttl_absolute: self.ttl_absolute.clone(),
            evict_to: self.evict_to.clone(),
        });
        let r: Reply<Extended> = cx.store_op(op, false)?;
        Ok(r.into())
    }
}

/// `session discard`.
#[derive(clap::Args)]
pub struct Discard {
    /// Session name.
    name: String,
}

impl Human for Discarded {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "discarded session {} (gc removes it after the retention period)",
            self.session
        )?;
        for f in &self.forks_removed {
            writeln!(out, "removed its experiment fork {f}")?;
        }
        Ok(())
    }
}

impl Run for Discard {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let op = Request::SessionDiscard(treefork::verbs::SessionDiscard {
            name: self.name.clone(),
        });
        let r: Reply<Discarded> = cx.store_op(op, false)?;
        Ok(r.into())
    }
}

/// `session sweep`.
#[derive(clap::Args)]
pub struct Sweep {}

impl Human for Swept {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        for e in &self.evicted {
            writeln!(out, "evicted {} ({})", e.session, e.reason)?;
        }
        for e in &self.busy {
            writeln!(out, "busy    {} ({}): {}", e.session, e.reason, e.blocked)?;
        }
        for e in &self.expired {
            writeln!(out, "expired {} ({}, not mounted)", e.session, e.reason)?;
        }
        for e in &self.forks_removed {
            writeln!(out, "removed {} ({})", e.session, e.reason)?;
        }
        if self.evicted.is_empty()
            && self.busy.is_empty()
            && self.expired.is_empty()
            && self.forks_removed.is_empty()
        {
            writeln!(out, "nothing to evict")?;
        }
        Ok(())
    }
}

impl Run for Sweep {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let r: Reply<Swept> = cx.store_op(
            Request::SessionSweep(treefork::verbs::SessionSweep {}),
            false,
        )?;
        Ok(r.into())
    }
}
