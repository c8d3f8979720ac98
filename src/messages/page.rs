//! Listing a conversation in bounded pages: what `messages` (the CLI, MCP, the
//! Python client) answers.
//!
//! A listing walks the session's view ([`super::share::chain`]) only over its
//! visible ranges ([`super::share::visible`]), [`super::share::CHUNK`] records at
//! a time, and stops at [`PAGE_COUNT`] messages or [`PAGE_BYTES`] stored bytes
//! (always at least one message), so what one request makes the daemon hold is
//! bounded whatever the log holds. `more` says whether matching messages were
//! left out: older ones for a `limit` listing (newest first), newer ones
//! otherwise (continue with `after` = the last id returned).

use super::share::{self, walk};
use super::{Message, Stream, conversation};
use crate::error::{Error, Result};
use crate::store::ObjectStore;

/// Most messages in one page (a larger `limit` is clamped to it).
pub const PAGE_COUNT: usize = 1000;
/// Most stored bytes in one page (past it the page ends, `more` set).
pub const PAGE_BYTES: usize = 8 << 20;

/// Which messages a listing returns.
#[derive(Debug, Clone, Default)]
pub struct Query {
    /// The stream.
    pub stream: Option<String>,
    /// Only the newest this many (at most [`PAGE_COUNT`]).
    pub limit: Option<usize>,
    /// Only up to (including) this id.
    pub upto: Option<String>,
    /// Only after this id.
    pub after: Option<String>,
}

/// One page of a listing.
#[derive(Debug, Clone, Default)]
pub struct Page {
    /// Oldest first.
    pub messages: Vec<Message>,
    /// Whether matching messages were left out (see the module docs).
    pub more: bool,
}

/// The visible messages of `session` matching `q`, oldest first, one page.
pub fn list(store: &dyn ObjectStore, session: &str, q: &Query) -> Result<Page> {
    let stream = Stream::parse(q.stream.as_deref())?;
    let seq_of = |id: &str| -> Result<u64> {
        let (s, m) = super::by_id(store, session, id)?;
        if s != stream {
            return Err(Error::Invalid(format!(
                "message {id} is in stream {}, not {}",
                s.name(),
                stream.name()
            )));
        }
        Ok(m.seq)
    };
    let upto = q.upto.as_deref().map(seq_of).transpose()?;
    let after = q.after.as_deref().map(seq_of).transpose()?;
    let hidden = match stream {
        Stream::Messages => conversation::hidden(store, session)?,
        Stream::Transcript => Vec::new(),
    };
    let last = share::last_seq(store, session, stream)?;
    let from = after.map_or(1, |a| a.saturating_add(1));
    let to = upto.map_or(last, |u| u.min(last));
    let ranges = share::visible(&hidden, from, to);
    let chain = share::chain(store, session, stream)?;
    let rev = q.limit.is_some();
    let want = q.limit.unwrap_or(PAGE_COUNT).min(PAGE_COUNT);
    let mut page = Page::default();
    let mut bytes = 0usize;
    if want == 0 {
        page.more = !ranges.is_empty();
        return Ok(page);
    }
    walk(store, &chain, stream, &ranges, rev, &mut |seq, v| {
        let full = page.messages.len() >= want
            || (!page.messages.is_empty() && bytes.saturating_add(v.len()) > PAGE_BYTES);
        if full {
            page.more = true;
            return Ok(false);
        }
        bytes += v.len();
        let owner = format!("message {session}#{}{seq}", stream.tag() as char);
        page.messages.push(Message::decode(&owner, &v)?);
        Ok(true)
    })?;
    if rev {
        page.messages.reverse();
    }
    Ok(page)
}

/// How many messages of `session`'s view are visible (its sequence numbers
/// `1..=last` all exist, so this reads no record).
pub fn visible_count(store: &dyn ObjectStore, session: &str) -> Result<u64> {
    let last = share::last_seq(store, session, Stream::Messages)?;
    let hidden = conversation::hidden(store, session)?;
    Ok(share::visible(&hidden, 1, last)
        .iter()
        .map(|[a, b]| b - a + 1)
        .sum())
}

/// The `n`th visible `user` message of `session`'s conversation (counting from
/// 1): what `rewind --prompt N` goes back to. Walks the visible records once,
/// stopping at it.
pub fn nth_prompt(store: &dyn ObjectStore, session: &str, n: u64) -> Result<Message> {
    let hidden = conversation::hidden(store, session)?;
    let last = share::last_seq(store, session, Stream::Messages)?;
    let ranges = share::visible(&hidden, 1, last);
    let chain = share::chain(store, session, Stream::Messages)?;
    let (mut seen, mut found) = (0u64, None);
    walk(
        store,
        &chain,
        Stream::Messages,
        &ranges,
        false,
        &mut |seq, v| {
            let owner = format!("message {session}#m{seq}");
            let m = Message::decode(&owner, &v)?;
            if m.role == "user" {
                seen += 1;
                if seen == n {
                    found = Some(m);
                    return Ok(false);
                }
            }
            Ok(true)
        },
    )?;
    found.ok_or_else(|| {
        Error::NotFound(format!(
            "prompt {n}: the conversation holds {seen} prompt{} (user messages)",
            if seen == 1 { "" } else { "s" }
        ))
    })
}
