//! The per-session message writer: one thread per session that has messages to
//! write, fed by a bounded queue ([`QUEUE`] entries, like the seed's).
//!
//! An append validates, enqueues and returns; a full queue makes the caller wait
//! (nothing is dropped). The thread takes whatever is queued (up to [`BATCH`]
//! drafts) and hands it to the session's [`Sink`] (in `ops::messages`: one flush
//! of the workspace and one commit for the whole batch). A [`flush`] puts a mark
//! in the queue and waits until the thread has passed it: everything appended
//! before is then durable (or the error is reported).
//!
//! Invariants:
//! - One thread per session at a time, so sequence numbers are assigned by one
//!   writer in queue order, whichever process appended.
//! - Every send happens under the session slot's lock; an idle thread (nothing
//!   queued for [`IDLE`]) exits only after emptying the slot under that lock and
//!   seeing the queue empty, so no message is left in a queue nobody reads.
//! - A session mounted anew (another `Session` object) gets a new slot and thread;
//!   the old one finishes what it holds and exits.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use crossbeam_channel::{Receiver, RecvTimeoutError, Sender, TryRecvError, bounded};

use super::Draft;
use crate::error::{Error, Result};

/// Queue length per session.
pub const QUEUE: usize = 256;
/// Most drafts written in one batch (one flush and one commit).
pub const BATCH: usize = 64;
/// A writer with nothing to do for this long exits.
pub const IDLE: Duration = Duration::from_secs(2);

/// Writes one batch of drafts of a session durably (called on the writer thread).
pub type Sink = Box<dyn FnMut(Vec<Draft>) -> Result<()> + Send>;

enum Job {
    Append(Box<Draft>),
    Mark(Sender<Result<()>>),
}

struct Slot {
    /// Identity of the session object served (its address).
    ident: usize,
    tx: Mutex<Option<Sender<Job>>>,
}

fn slots() -> &'static Mutex<HashMap<String, Arc<Slot>>> {
    static S: OnceLock<Mutex<HashMap<String, Arc<Slot>>>> = OnceLock::new();
    S.get_or_init(Default::default)
}

/// Queue `job` for `session` (object `ident`), starting its writer with the sink
/// `make` builds when none runs. Waits while the queue is full.
fn send(session: &str, ident: usize, make: &mut dyn FnMut() -> Sink, job: Job) -> Result<()> {
    let slot = {
        let mut map = slots().lock().unwrap_or_else(|e| e.into_inner());
        let fresh = map.get(session).is_none_or(|s| s.ident != ident);
        if fresh {
            map.insert(
                session.to_string(),
                Arc::new(Slot {
                    ident,
                    tx: Mutex::new(None),
                }),
            );
        }
        map[session].clone()
    };
    let mut tx = slot.tx.lock().unwrap_or_else(|e| e.into_inner());
    if tx.is_none() {
        let (s, r) = bounded(QUEUE);
        let sink = make();
        let slot2 = slot.clone();
        let name = session.to_string();
        std::thread::Builder::new()
            .name(format!("msg-{name}"))
            .spawn(move || run(&name, &slot2, r, sink))
            .map_err(|e| Error::io("message writer thread", e))?;
        *tx = Some(s);
    }
    tx.as_ref()
        .expect("started")
        .send(job)
        .map_err(|_| Error::Invalid("the message writer stopped".into()))
}

/// Queue a draft (see the module docs).
pub fn append(session: &str, ident: usize, make: &mut dyn FnMut() -> Sink, d: Draft) -> Result<()> {
    send(session, ident, make, Job::Append(Box::new(d)))
}

/// Wait until everything queued for `session` before this call is written;
/// the first error of a batch written since the previous flush, if any.
pub fn flush(session: &str, ident: usize, make: &mut dyn FnMut() -> Sink) -> Result<()> {
    let running = {
        let map = slots().lock().unwrap_or_else(|e| e.into_inner());
        map.get(session)
            .is_some_and(|s| s.tx.lock().unwrap_or_else(|e| e.into_inner()).is_some())
    };
    if !running {
        return Ok(());
    }
    let (s, r) = bounded(1);
    send(session, ident, make, Job::Mark(s))?;
    r.recv()
        .map_err(|_| Error::Invalid("the message writer stopped".into()))?
}

fn run(name: &str, slot: &Slot, rx: Receiver<Job>, mut sink: Sink) {
    let mut failed: Option<Error> = None;
    loop {
        let first = match rx.recv_timeout(IDLE) {
            Ok(j) => j,
            Err(RecvTimeoutError::Disconnected) => return,
            Err(RecvTimeoutError::Timeout) => {
                let mut tx = slot.tx.lock().unwrap_or_else(|e| e.into_inner());
                if rx.is_empty() {
                    *tx = None;
                    return;
                }
                continue;
            }
        };
        let mut jobs = vec![first];
        let mut drafts = 0;
        while drafts < BATCH {
            match rx.try_recv() {
                Ok(j) => {
                    drafts += matches!(j, Job::Append(_)) as usize;
                    jobs.push(j);
                }
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => break,
            }
        }
        crate::failpoint::message_writer_delay();
        let mut batch = Vec::new();
        for j in jobs {
            match j {
                Job::Append(d) => batch.push(*d),
                Job::Mark(reply) => {
                    write(name, &mut sink, &mut batch, &mut failed);
                    let _ = reply.send(failed.take().map_or(Ok(()), Err));
                }
            }
        }
        write(name, &mut sink, &mut batch, &mut failed);
    }
}

fn write(name: &str, sink: &mut Sink, batch: &mut Vec<Draft>, failed: &mut Option<Error>) {
    if batch.is_empty() {
        return;
    }
    let n = batch.len();
    if let Err(e) = sink(std::mem::take(batch)) {
        log::error!("session {name}: writing {n} messages failed: {e}");
        failed.get_or_insert(e);
    }
}
