//! `messages`: the session's conversation log — list it, append to it, export it
//! as JSONL, import JSONL, wait until it is durable, and merge conversation
//! metadata (model, turns, cost, exit reason) into the session's info.

use std::path::PathBuf;

use anyhow::Context;
use serde_json::{Value, json};
use treefork::ops::messages::{Durable, MessagesAnswer, MetaUpdated, Queued};
use treefork::ops::views::MessageView;

use super::output::short;
use super::prelude::*;

/// The session's conversation (oldest first), or with a subcommand, append to it,
/// export or import it.
#[derive(clap::Args)]
#[command(args_conflicts_with_subcommands = true)]
pub struct Messages {
    #[command(subcommand)]
    cmd: Option<Sub>,
    #[command(flatten)]
    list: ListArgs,
}

#[derive(clap::Args)]
struct ListArgs {
    /// Only the newest N messages.
    #[arg(short = 'n', long = "max-count", value_name = "N")]
    limit: Option<usize>,
    /// Only up to (including) message ID.
    #[arg(long, value_name = "ID")]
    upto: Option<String>,
    /// Only after message ID.
    #[arg(long, value_name = "ID")]
    after: Option<String>,
    /// The stream: messages (default) or transcript (raw SDK messages).
    #[arg(long, value_parser = ["messages", "transcript"])]
    stream: Option<String>,
}

#[derive(clap::Subcommand)]
enum Sub {
    /// Append a message (returns once it is queued; --flush waits until durable).
    Append(Append),
    /// Write the conversation as JSONL (one message per line).
    Export(Export),
    /// Append every message of a JSONL file (ids already stored are skipped).
    Import(Import),
    /// Wait until every appended message is durable.
    Flush(Flush),
    /// Merge conversation metadata into the session's info.
    Meta(MetaArgs),
}

type List = Answer<treefork::verbs::Messages>;

/// The messages `op` (an `Request::Messages`) names: one page with a `limit`,
/// else every page (each next one `after` the last id received).
fn list_all(cx: &Ctx, op: Request) -> Result<Reply<List>> {
    let Request::Messages(treefork::verbs::Messages {
        stream,
        limit,
        upto,
        after,
    }) = op
    else {
        unreachable!("list_all takes a messages op")
    };
    let mut after = after;
    let mut all = Vec::new();
    loop {
        let r: Reply<List> = cx.session(Request::Messages(treefork::verbs::Messages {
            stream: stream.clone(),
            limit,
            upto: upto.clone(),
            after: after.clone(),
        }))?;
        let more = r.body.more;
        if limit.is_some() {
            return Ok(r);
        }
        let last = r.body.messages.last().map(|m| m.message.id.clone());
        all.extend(r.body.messages);
        match last {
            Some(id) if more => after = Some(id),
            _ => break,
        }
    }
    let raw = json!({"messages": all, "more": false});
    Reply::<List>::parse(raw)
}

fn content_line(v: &Value) -> String {
    let s = match v {
        Value::String(s) => s.clone(),
        v => v.to_string(),
    };
    let one: String = s.replace('\n', " ");
    if one.chars().count() > 100 {
        format!("{}...", one.chars().take(100).collect::<String>())
    } else {
        one
    }
}

impl Human for MessagesAnswer {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        for m in &self.messages {
            writeln!(
                out,
                "{:<8} #{:<4} {:<9} {}",
                short(&m.message.id),
                m.message.seq,
                m.message.role,
                content_line(&m.message.content)
            )?;
        }
        Ok(())
    }
}

fn list_op(a: &ListArgs) -> Request {
    Request::Messages(treefork::verbs::Messages {
        stream: a.stream.clone(),
        limit: a.limit,
        upto: a.upto.clone(),
        after: a.after.clone(),
    })
}

impl Run for Messages {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        match &self.cmd {
            Some(Sub::Append(a)) => a.run(cx),
            Some(Sub::Export(e)) => e.run(cx),
            Some(Sub::Import(i)) => i.run(cx),
            Some(Sub::Flush(f)) => f.run(cx),
            Some(Sub::Meta(m)) => m.run(cx),
            None => Ok(list_all(cx, list_op(&self.list))?.into()),
        }
    }
}

#[derive(clap::Args)]
struct Append {
    /// The role.
    #[arg(long, value_parser = ["user", "assistant", "tool", "system"])]
    role: String,
    /// The content, as JSON (a bare word that is not JSON is taken as a string).
    #[arg(long, conflicts_with = "file", required_unless_present = "file")]
    content: Option<String>,
    /// Read the content (JSON) from FILE (`-`: standard input).
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// The message id (a UUID; default: a new one). Appending an id again does nothing.
    #[arg(long)]
    id: Option<String>,
    /// Tool calls, as JSON.
    #[arg(long, value_name = "JSON")]
    tool_calls: Option<String>,
    /// The tool call this message answers.
    #[arg(long, value_name = "ID")]
    tool_call_id: Option<String>,
    /// Caller data, a JSON object.
    #[arg(long, value_name = "JSON")]
    meta: Option<String>,
    /// The stream: messages (default) or transcript.
    #[arg(long, value_parser = ["messages", "transcript"])]
    stream: Option<String>,
    /// Wait until it is durable.
    #[arg(long)]
    flush: bool,
}

impl Human for Queued {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        if self.duplicate {
            writeln!(out, "message {} was already recorded", self.id)
        } else {
            writeln!(out, "queued message {}", self.id)
        }
    }
}

fn parse_json(what: &str, s: &str) -> Result<Value> {
    serde_json::from_str(s).with_context(|| format!("{what}: not valid JSON"))
}

impl Append {
    fn content(&self) -> Result<Value> {
        if let Some(c) = &self.content {
            return Ok(serde_json::from_str(c).unwrap_or_else(|_| json!(c)));
        }
        let f = self.file.as_ref().expect("clap requires one");
        let text = if f.as_os_str() == "-" {
            let mut s = String::new();
            io::Read::read_to_string(&mut io::stdin(), &mut s)?;
            s
        } else {
            std::fs::read_to_string(f).with_context(|| format!("cannot read {}", f.display()))?
        };
        parse_json(&f.display().to_string(), &text)
    }

    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let meta = match &self.meta {
            Some(m) => match parse_json("--meta", m)? {
                Value::Object(o) => Some(o),
                _ => bail!("--meta must be a JSON object"),
            },
            None => None,
        };
        let op = Request::MessageAppend(treefork::verbs::MessageAppend {
            role: self.role.clone(),
            content: self.content()?,
            tool_calls: self
                .tool_calls
                .as_deref()
                .map(|t| parse_json("--tool-calls", t))
                .transpose()?,
            tool_call_id: self.tool_call_id.clone(),
            meta,
            id: self.id.clone(),
            stream: self.stream.clone(),
        });
        let r: Reply<Queued> = cx.session(op)?;
        if self.flush {
            let _: Reply<Ignored> =
                cx.session(Request::MessageFlush(treefork::verbs::MessageFlush {}))?;
        }
        Ok(r.into())
    }
}

#[derive(clap::Args)]
struct Export {
    /// Write to FILE instead of standard output.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    /// The stream: messages (default) or transcript.
    #[arg(long, value_parser = ["messages", "transcript"])]
    stream: Option<String>,
}

/// JSONL lines, printed as they are.
struct Lines(Vec<MessageView>);

/// A message as one JSONL line (the protocol form, keys in name order).
fn jsonl(m: &MessageView) -> String {
    serde_json::to_value(m).unwrap_or(Value::Null).to_string()
}

impl Human for Lines {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        for m in &self.0 {
            writeln!(out, "{}", jsonl(m))?;
        }
        Ok(())
    }
}

#[derive(Deserialize)]
struct Exported {
    exported: usize,
    file: PathBuf,
}

impl Human for Exported {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "exported {} messages to {}",
            self.exported,
            self.file.display()
        )
    }
}

impl Export {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let _: Reply<Ignored> =
            cx.session(Request::MessageFlush(treefork::verbs::MessageFlush {}))?;
        let r = list_all(
            cx,
            Request::Messages(treefork::verbs::Messages {
                stream: self.stream.clone(),
                limit: None,
                upto: None,
                after: None,
            }),
        )?;
        let Some(path) = &self.output else {
            return Ok(r.map(|l| Lines(l.messages)).into());
        };
        let mut text = String::new();
        for m in &r.body.messages {
            text.push_str(&jsonl(m));
            text.push('\n');
        }
        std::fs::write(path, text).with_context(|| format!("cannot write {}", path.display()))?;
        let raw = json!({"exported": r.body.messages.len(), "file": path});
        Ok(Reply::<Exported>::parse(raw)?.into())
    }
}

#[derive(clap::Args)]
struct Import {
    /// The JSONL file (`-`: standard input): one message per line, as `export`
    /// writes them (role and content required; id, tool_calls, tool_call_id and
    /// meta kept).
    file: PathBuf,
    /// The stream to append to: messages (default) or transcript.
    #[arg(long, value_parser = ["messages", "transcript"])]
    stream: Option<String>,
}

#[derive(Deserialize)]
struct Imported {
    imported: usize,
    duplicates: usize,
    durable: u64,
}

impl Human for Imported {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(
            out,
            "imported {} messages ({} already recorded); the log holds {}",
            self.imported, self.duplicates, self.durable
        )
    }
}

/// The append request of one exported line.
fn line_op(n: usize, line: &str, stream: &Option<String>) -> Result<Request> {
    let v = parse_json(&format!("line {n}"), line)?;
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let Some(role) = s("role") else {
        bail!("line {n}: no \"role\"");
    };
    Ok(Request::MessageAppend(treefork::verbs::MessageAppend {
        role,
        content: v.get("content").cloned().unwrap_or(Value::Null),
        tool_calls: v.get("tool_calls").filter(|t| !t.is_null()).cloned(),
        tool_call_id: s("tool_call_id"),
        meta: v.get("meta").and_then(Value::as_object).cloned(),
        id: s("id"),
        stream: stream.clone(),
    }))
}

impl Import {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let text = if self.file.as_os_str() == "-" {
            let mut s = String::new();
            io::Read::read_to_string(&mut io::stdin(), &mut s)?;
            s
        } else {
            std::fs::read_to_string(&self.file)
                .with_context(|| format!("cannot read {}", self.file.display()))?
        };
        // Every line is checked before any is sent.
        let ops: Vec<Request> = text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| line_op(i + 1, l, &self.stream))
            .collect::<Result<_>>()?;
        let (mut imported, mut duplicates) = (0, 0);
        for op in ops {
            let r: Reply<Queued> = cx.session(op)?;
            if r.body.duplicate {
                duplicates += 1;
            } else {
                imported += 1;
            }
        }
        let d: Reply<Durable> =
            cx.session(Request::MessageFlush(treefork::verbs::MessageFlush {}))?;
        let raw =
            json!({"imported": imported, "duplicates": duplicates, "durable": d.body.durable});
        Ok(Reply::<Imported>::parse(raw)?.into())
    }
}

#[derive(clap::Args)]
struct Flush {}

impl Human for Durable {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        writeln!(out, "{} messages durable", self.durable)
    }
}

impl Flush {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let r: Reply<Durable> =
            cx.session(Request::MessageFlush(treefork::verbs::MessageFlush {}))?;
        Ok(r.into())
    }
}

#[derive(clap::Args)]
struct MetaArgs {
    /// The model in use.
    #[arg(long)]
    model: Option<String>,
    /// Add N turns to the count.
    #[arg(long, value_name = "N")]
    add_turns: Option<u64>,
    /// Add to the total cost.
    #[arg(long, value_name = "AMOUNT")]
    add_cost: Option<f64>,
    /// Why the agent stopped.
    #[arg(long)]
    exit_reason: Option<String>,
}

impl Human for MetaUpdated {
    fn human(&self, out: &mut dyn Write) -> io::Result<()> {
        let c = serde_json::to_value(&self.conversation).unwrap_or(Value::Null);
        writeln!(out, "{c}")
    }
}

impl MetaArgs {
    fn run(&self, cx: &Ctx) -> Result<Outcome> {
        let r: Reply<Answer<treefork::verbs::SessionMetaUpdate>> = cx.session(
            Request::SessionMetaUpdate(treefork::verbs::SessionMetaUpdate {
                model: self.model.clone(),
                add_turns: self.add_turns,
                add_cost: self.add_cost,
                exit_reason: self.exit_reason.clone(),
                runtime: None,
                runtime_session: None,
            }),
        )?;
        Ok(r.into())
    }
}
