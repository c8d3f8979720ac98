//! `GET /api/events[?session=S]`: server-sent events that tell a page to reload.
//!
//! The server asks the daemon twice a second for a fingerprint of what the pages
//! show — every session's name, state, stored root, update time and touched
//! count, and for `S` its newest operation and message — and sends a `changed`
//! event (data: the fingerprint) whenever it differs from the last one sent. The
//! first fingerprint is sent at once. A page reloads its data on each event.
//! Watching a session counts as access to it (its idle clock restarts), as any
//! request on it does.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use serde::Deserialize;
use serde_json::{Value, json};

use super::api::{Checked, relay};

/// How often the daemon is asked.
const POLL: Duration = Duration::from_millis(500);

#[derive(Deserialize)]
pub(crate) struct Watch {
    session: Option<String>,
}

fn ask(st: &super::State, request: Value) -> Value {
    relay(
        st,
        &Checked {
            request,
            writes: false,
        },
    )
}

/// What a page of `session` (or the sessions page) would show changed when this
/// changes.
fn fingerprint(st: &super::State, session: Option<&str>) -> String {
    let list = ask(st, json!({"op": "sessions"}));
    let rows: Vec<Value> = list["sessions"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|s| {
                    json!([
                        s["name"],
                        s["state"],
                        s["root"],
                        s["updated"],
                        s["touched"],
                        s["lifecycle"]
                    ])
                })
                .collect()
        })
        .unwrap_or_default();
    let mut fp = json!({"sessions": rows, "error": list["error"]["code"]});
    if let Some(s) = session {
        let t = ask(st, json!({"op": "timeline", "session": s, "limit": 1}));
        let m = ask(st, json!({"op": "messages", "session": s, "limit": 1}));
        fp["op"] = t["entries"][0]["seq"].clone();
        fp["message"] = m["messages"][0]["seq"].clone();
    }
    fp.to_string()
}

/// The handler.
pub(crate) async fn events(
    State(st): State<Arc<super::State>>,
    Query(w): Query<Watch>,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream = futures::stream::unfold(
        (st, w.session, None::<String>),
        |(st, s, last)| async move {
            loop {
                let (st2, s2) = (st.clone(), s.clone());
                let fp = tokio::task::spawn_blocking(move || fingerprint(&st2, s2.as_deref()))
                    .await
                    .unwrap_or_default();
                if last.as_deref() != Some(fp.as_str()) {
                    let ev = Event::default().event("changed").data(fp.clone());
                    return Some((Ok(ev), (st, s, Some(fp))));
                }
                tokio::time::sleep(POLL).await;
            }
        },
    );
    Sse::new(stream).keep_alive(KeepAlive::default())
}
