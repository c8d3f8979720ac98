//! `config`: show or change the session's settings; `limits`: the store's quotas.

use serde_json::{Map, Value};

use super::prelude::*;

/// Show or change session settings (KEY=VALUE, e.g. auto_checkpoint_ops=100).
#[derive(clap::Args)]
pub struct Config {
    /// Settings to change.
    #[arg(value_name = "KEY=VALUE", value_parser = super::values::key_value)]
    settings: Vec<String>,
}

/// `KEY=VALUE` lines (sorted by key), values as JSON.
type Settings = treefork::ops::config::ConfigAnswer;

impl Human for Settings {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        key_values(out, &self.config)?;
        Ok(())
    }
}

/// The fields of `v` as `KEY=VALUE` lines, values as JSON.
fn key_values(out: &mut dyn Write, v: &impl serde::Serialize) -> io::Result<()> {
    if let Value::Object(m) = serde_json::to_value(v).unwrap_or_default() {
        for (k, val) in &m {
            writeln!(out, "{k}={val}")?;
        }
    }
    Ok(())
}

/// `KEY=VALUE` arguments as a JSON object; a value that is not JSON is a string.
fn parse_settings(settings: &[String]) -> Result<Option<Map<String, Value>>> {
    if settings.is_empty() {
        return Ok(None);
    }
    let mut m = Map::new();
    for s in settings {
        let (k, val) = s
            .split_once('=')
            .ok_or_else(|| anyhow!("expected KEY=VALUE, got {s:?}"))?;
        let val: Value = serde_json::from_str(val).unwrap_or(Value::String(val.into()));
        m.insert(k.to_string(), val);
    }
    Ok(Some(m))
}

impl Run for Config {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let set = parse_settings(&self.settings)?;
        let r: Reply<Answer<treefork::verbs::Config>> =
            cx.session(Request::Config(treefork::verbs::Config { set }))?;
        Ok(r.into())
    }
}

/// Show or change the store's quotas (KEY=VALUE, e.g. message_bytes=536870912);
/// changing them is the user's (an agent socket may only show them).
#[derive(clap::Args)]
pub struct Limits {
    /// Limits to change.
    #[arg(value_name = "KEY=VALUE", value_parser = super::values::key_value)]
    settings: Vec<String>,
}

/// `KEY=VALUE` lines.
type LimitList = treefork::quota::LimitsShown;

impl Human for LimitList {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        key_values(out, &self.limits)?;
        if let Some(m) = &self.memory {
            let b = |n: u64| super::output::human_bytes(n as f64);
            writeln!(
                out,
                "# in effect: unsealed data {} for every session together ({} held by {} sessions; one session seals past {}), read cache {} ({} held)",
                b(m.unsealed_limit),
                b(m.unsealed_used),
                m.unsealed_sessions,
                b(m.session_seal),
                b(m.read_cache_limit),
                b(m.read_cache_used),
            )?;
        }
        Ok(())
    }
}

impl Run for Limits {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let set = parse_settings(&self.settings)?;
        let r: Reply<LimitList> =
            cx.store_op(Request::Limits(treefork::verbs::Limits { set }), false)?;
        Ok(r.into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn settings_parse_as_json_else_string() {
        let m = parse_settings(&["a=100".into(), "b=x y".into(), "c=true".into()])
            .unwrap()
            .unwrap();
        assert_eq!(m["a"], serde_json::json!(100));
        assert_eq!(m["b"], serde_json::json!("x y"));
        assert_eq!(m["c"], serde_json::json!(true));
        assert!(parse_settings(&[]).unwrap().is_none());
        assert!(parse_settings(&["nokey".into()]).is_err());
    }
}
