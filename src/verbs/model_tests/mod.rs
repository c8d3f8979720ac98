//! Model tests of the ops that move a session along its history — `checkpoint`,
//! `branch`, `checkout`, `undo`, `redo`, `op restore` (all, files, refs) — on
//! the in-memory host ([`crate::ops::memhost`]), in-process and without FUSE. Each
//! request goes through the verb table (`verbs::run`) with an `Request` value (so dispatch is tested too);
//! workspace writes go through the session as the FUSE layer's would.
//!
//! After every step the workspace (files and root id), HEAD, its branch, the
//! branches and the newest operation record must equal the [`model`]'s. Checked
//! besides: `undo` N times then `redo` N times returns to the same state; an `op
//! restore` of everything returns to the state recorded after that operation;
//! every invalidation a graft sends follows an epoch increment, which follows a
//! `syncfs`.
//!
//! Defects found here are kept as named cases in [`regressions`].
//!
//! proptest shrinks a failing history to a short one and prints it
//! (`minimal failing input: steps = [...]`). `PROPTEST_CASES=n` runs more cases.
//! Run them alone with `cargo test --lib verbs::model_tests`.

mod crash;
mod model;
mod regressions;

use std::collections::BTreeMap;
use std::path::Path;

use proptest::prelude::*;
use serde_json::Value;

use crate::error::Result;
use crate::lifecycle::manage::SessionShown;
use crate::ops::Host;
use crate::ops::memhost::{self, KernelCall, MemHost};
use crate::remote::trim::{TrimReport, TrimRequest};
use crate::session::model_tests::cases;
use crate::verbs::{self, Request, needs_daemon};

/// The in-memory host serves no store-wide verb of the daemon's own.
impl crate::verbs::Server for MemHost {
    fn ping(&self, _: Option<&str>) -> Result<verbs::ping::Pong> {
        Err(needs_daemon("ping"))
    }
    fn mount(&self, _: verbs::Mount, _: &mut dyn FnMut(Value)) -> Result<verbs::mount::Mounted> {
        Err(needs_daemon("mount"))
    }
    fn umount(&self, _: &Path) -> Result<verbs::umount::Unmounted> {
        Err(needs_daemon("umount"))
    }
    fn shutdown(&self) -> Result<verbs::shutdown::Stopping> {
        Err(needs_daemon("shutdown"))
    }
    fn gc(&self, _: bool, _: &mut dyn FnMut(Value)) -> Result<verbs::gc::Collected> {
        Err(needs_daemon("gc"))
    }
    fn fsck(&self, _: bool, _: &mut dyn FnMut(Value)) -> Result<verbs::fsck::Checked> {
        Err(needs_daemon("fsck"))
    }
    fn session_show(&self, _: Option<&str>, _: Option<&str>) -> Result<SessionShown> {
        Err(needs_daemon("session_show"))
    }
    fn session_discard(&self, _: &str) -> Result<verbs::session_discard::Discarded> {
        Err(needs_daemon("session_discard"))
    }
    fn sweep(&self) -> Result<verbs::session_sweep::Swept> {
        Err(needs_daemon("session_sweep"))
    }
    fn store_trim(&self, _: TrimRequest, _: &mut dyn FnMut(Value)) -> Result<TrimReport> {
        Err(needs_daemon("store_trim"))
    }
}

/// Run `op` on session `session` of `host` as the user would (`treefork OP`),
/// through the verb table; event lines are dropped.
fn serve(host: &MemHost, session: &str, op: Request) -> crate::error::Result<Value> {
    let actor = crate::oplog::Actor::peer("user", 0, 1);
    crate::verbs::run(
        host,
        crate::control::MountFor::User,
        &actor,
        None,
        Some(session),
        op,
        &mut |_| {},
    )
}
use crate::error::Error;
use model::{Entries, Model, Outcome, What};

const SESSION: &str = "m";
/// The fork's name.
const OTHER: &str = "m2";
const FILES: u8 = 4;
const BRANCHES: u8 = 3;

/// One step of a random history.
#[derive(Debug, Clone)]
enum Step {
    /// Write file `f{file}` (created when missing).
    Write {
        file: u8,
    },
    /// Delete file `f{file}` (skipped when missing).
    Delete {
        file: u8,
    },
    Checkpoint,
    /// `branch b{name}` from HEAD.
    Branch {
        name: u8,
    },
    /// `checkout b{name}`.
    CheckoutBranch {
        name: u8,
    },
    /// `checkout` of the checkpoint made `nth` (modulo how many there are) by id.
    CheckoutCheckpoint {
        nth: u8,
    },
    Undo(What),
    Redo(What),
    /// `op restore` of record `nth` (modulo how many there are, from 1).
    OpRestore {
        nth: u8,
        what: What,
    },
    /// `undo` `n` times (as many as the undo stack holds), then `redo` as many.
    UndoRedo {
        n: u8,
    },
    /// `fork` a second session from HEAD (refused once there is one).
    Fork,
    /// In the fork: `checkout b{name}`.
    OtherCheckout {
        name: u8,
    },
    /// In the fork: `checkpoint` (moving the branch it has checked out).
    OtherCheckpoint,
}

fn what() -> impl Strategy<Value = What> {
    prop_oneof![3 => Just(What::All), 1 => Just(What::Files), 1 => Just(What::Refs)]
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0..FILES).prop_map(|file| Step::Write { file }),
        2 => (0..FILES).prop_map(|file| Step::Delete { file }),
        2 => Just(Step::Checkpoint),
        2 => (0..BRANCHES).prop_map(|name| Step::Branch { name }),
        2 => (0..BRANCHES).prop_map(|name| Step::CheckoutBranch { name }),
        1 => any::<u8>().prop_map(|nth| Step::CheckoutCheckpoint { nth }),
        3 => what().prop_map(Step::Undo),
        2 => what().prop_map(Step::Redo),
        2 => (any::<u8>(), what()).prop_map(|(nth, what)| Step::OpRestore { nth, what }),
        1 => (1u8..4).prop_map(|n| Step::UndoRedo { n }),
        1 => Just(Step::Fork),
        1 => (0..BRANCHES).prop_map(|name| Step::OtherCheckout { name }),
        1 => Just(Step::OtherCheckpoint),
    ]
}

// One function per op kind: the only places that build an `Request`.

fn checkpoint_op() -> Request {
    Request::Checkpoint(crate::verbs::Checkpoint {
        message: "model".into(),
        trigger: "manual".into(),
        meta: serde_json::Map::new(),
    })
}

fn branch_op(name: &str) -> Request {
    Request::Branch(crate::verbs::Branch {
        name: name.into(),
        from: None,
    })
}

fn checkout_op(spec: &str) -> Request {
    Request::Checkout(crate::verbs::Checkout {
        target: Some(spec.into()),
        create: None,
    })
}

fn fork_op(name: &str) -> Request {
    Request::Fork(crate::verbs::Fork {
        name: name.into(),
        from: None,
        mountpoint: std::path::Path::new("/memhost").join(name),
        agent_socket: None,
        agent_uid: None,
        from_message: None,
    })
}

fn undo_op(what: What) -> Request {
    Request::Undo(crate::verbs::Undo {
        what: what.wire(),
        if_last: None,
    })
}

fn redo_op(what: What) -> Request {
    Request::Redo(crate::verbs::Redo {
        what: what.wire(),
        if_last: None,
    })
}

fn op_restore_op(seq: u64, what: What) -> Request {
    Request::OpRestore(crate::verbs::OpRestore {
        seq,
        what: what.wire(),
    })
}

/// A session on the in-memory host and its model.
struct Run {
    host: MemHost,
    model: Model,
    /// Writes made so far (each write's content names its number).
    writes: u64,
}

/// What the session shows now: the workspace's files and root, HEAD, its branch
/// and the branches (`auto/...` refs of saved changes left out).
#[derive(Debug, PartialEq)]
struct Seen {
    files: BTreeMap<String, Vec<u8>>,
    ws: String,
    head: Option<String>,
    branch: Option<String>,
    branches: BTreeMap<String, String>,
    /// The fork's HEAD and branch.
    other: Option<(Option<String>, Option<String>)>,
}

/// The model's form of a checkpoint id (hex).
fn hex(id: Option<crate::id::CheckpointId>) -> Option<String> {
    id.map(|h| h.to_hex())
}

impl Run {
    fn new() -> Run {
        let host = MemHost::new();
        let t = host.create(SESSION).unwrap();
        let root = t.session.flush().unwrap().to_hex();
        assert_eq!(
            t.session.record().base.to_hex(),
            root,
            "a new session's base"
        );
        Run {
            host,
            model: Model::new(&root),
            writes: 0,
        }
    }

    fn target(&self) -> crate::ops::Target {
        self.host.target(Some(SESSION)).unwrap()
    }

    fn seen(&self) -> Seen {
        let s = self.target().session;
        let rec = s.record();
        let branches = crate::refs::list_refs(&*self.host.store())
            .unwrap()
            .into_iter()
            .filter(|(n, _)| !crate::refs::names::short(n).starts_with("auto/"))
            .map(|(n, r)| {
                let n = crate::refs::names::display(&n, Some(SESSION));
                (n, r.checkpoint.to_hex())
            })
            .collect();
        Seen {
            files: memhost::files(&s).unwrap(),
            ws: s.flush().unwrap().to_hex(),
            head: hex(rec.head),
            branch: rec
                .branch
                .map(|b| crate::refs::names::display(&b, Some(SESSION))),
            branches,
            other: self.host.target(Some(OTHER)).ok().map(|o| {
                let r = o.session.record();
                let b = r
                    .branch
                    .map(|b| crate::refs::names::display(&b, Some(SESSION)));
                (hex(r.head), b)
            }),
        }
    }

    fn expected(&self) -> Seen {
        let m = &self.model;
        Seen {
            files: m.files(),
            ws: m.ws.clone(),
            head: m.head.clone(),
            branch: m.branch.clone(),
            branches: m.branches.clone(),
            other: m.other.as_ref().map(|o| (o.head.clone(), o.branch.clone())),
        }
    }

    /// The session's records equal the model's (the newest compared whole).
    fn check_log(&self) {
        let store = self.host.store();
        let last = crate::oplog::last(&*store, SESSION).unwrap();
        assert_eq!(
            last.as_ref().map_or(0, |o| o.seq),
            self.model.log.len() as u64,
            "records in the log"
        );
        let (Some(o), Some(want)) = (last, self.model.log.last()) else {
            return;
        };
        // Records hold stored names (`m:b1`); the model writes them as SESSION does.
        let shown = |b: &str| crate::refs::names::display(b, Some(SESSION));
        let view = |v: &crate::oplog::View| model::View {
            head: hex(v.head),
            branch: v.branch.as_deref().map(shown),
            ws: v.workspace.to_hex(),
            branches: v
                .branches
                .iter()
                .map(|(b, c)| (shown(b), hex(*c)))
                .collect(),
        };
        let got = model::Rec {
            before: view(&o.before),
            after: view(&o.after),
            undoes: o.undoes,
            redoes: o.redoes,
            inert: o.inert,
        };
        assert_eq!(&got, want, "record {} ({})", o.seq, o.kind);
    }

    /// Every invalidation follows an epoch increment, which follows a `syncfs`;
    /// a step that changed the workspace's files sent at least one.
    fn check_kernel(&self, files_changed: bool) {
        let calls = self.host.mount_of(SESSION).take();
        let (mut synced, mut epoch, mut invals) = (false, false, 0);
        for c in &calls {
            match c {
                KernelCall::Syncfs => synced = true,
                KernelCall::IncEpoch => {
                    assert!(synced, "epoch increment before any syncfs: {calls:?}");
                    epoch = true;
                }
                KernelCall::InvalEntry(..) | KernelCall::InvalInode(_) => {
                    assert!(epoch, "invalidation before the epoch increment: {calls:?}");
                    invals += 1;
                }
            }
        }
        if files_changed {
            assert!(
                invals > 0,
                "a graft that changed files sent no invalidation"
            );
        }
    }

    fn request(&self, op: Request) -> Result<Value, Error> {
        serve(&self.host, SESSION, op)
    }

    /// Compare a refused or done request with the model's prediction.
    fn outcome(&self, got: &Result<Value, Error>, want: Outcome, what: &str) {
        match (got, want) {
            (Ok(_), Outcome::Recorded)
            | (Err(Error::Conflict(_)), Outcome::Conflict)
            | (Err(Error::NotFound(_)), Outcome::NotFound) => {}
            (got, want) => panic!("{what}: got {got:?}, the model says {want:?}"),
        }
    }

    fn write(&mut self, file: u8) {
        self.writes += 1;
        let name = format!("f{file}");
        let data = format!("{name} write {} ", self.writes).repeat(1 + file as usize * 50);
        let s = self.target().session;
        memhost::write_file(&s, &name, data.as_bytes()).unwrap();
        let mut entries: Entries = self.model.trees[&self.model.ws].clone();
        entries.insert(name, (self.writes, data.into_bytes()));
        self.model.learn_ws(s.flush().unwrap().to_hex(), entries);
    }

    fn delete(&mut self, file: u8) {
        let name = format!("f{file}");
        let mut entries: Entries = self.model.trees[&self.model.ws].clone();
        if entries.remove(&name).is_none() {
            return;
        }
        let s = self.target().session;
        memhost::remove_file(&s, &name).unwrap();
        self.model.learn_ws(s.flush().unwrap().to_hex(), entries);
    }

    fn checkpoint(&mut self) {
        let v = self.request(checkpoint_op()).unwrap();
        let c = &v["checkpoint"];
        assert_eq!(c["root"].as_str(), Some(&*self.model.ws), "checkpoint root");
        self.model.checkpoint(c["id"].as_str().unwrap());
    }

    /// The checkpoint an answer names when the op was to make a fresh one (the
    /// model has not seen it yet).
    fn fresh_checkpoint(&self, got: &Result<Value, Error>, fresh: bool) -> Option<String> {
        let Ok(v) = got else { return None };
        if !fresh {
            return None;
        }
        let id = v["checkpoint"].as_str().unwrap().to_string();
        assert!(
            !self.model.ckpt_root.contains_key(&id),
            "a fresh checkpoint"
        );
        Some(id)
    }

    fn branch(&mut self, name: u8) {
        let name = format!("b{name}");
        let fresh = self.model.branch_checkpoints();
        let got = self.request(branch_op(&name));
        let made = self.fresh_checkpoint(&got, fresh);
        let want = self.model.branch(&name, made.as_deref());
        self.outcome(&got, want, "branch");
    }

    fn fork(&mut self) {
        let fresh = self.model.branch_checkpoints();
        let got = self.request(fork_op(OTHER));
        let made = self.fresh_checkpoint(&got, fresh);
        let want = self.model.fork(made.as_deref());
        self.outcome(&got, want, "fork");
    }

    /// What the live workspace flushes to now.
    fn live(&self) -> String {
        self.target().session.flush().unwrap().to_hex()
    }

    fn checkout(&mut self, spec: &str, id: Option<String>, attach: Option<&str>) {
        let got = self.request(checkout_op(spec));
        match id {
            Some(id) => {
                self.outcome(&got, Outcome::Recorded, "checkout");
                let live = self.live();
                self.model.checkout(&id, attach, &live);
            }
            None => self.outcome(&got, Outcome::NotFound, "checkout"),
        }
    }

    fn apply(&mut self, step: &Step) {
        let files_before = self.model.files();
        let mut restored = None;
        match *step {
            Step::Write { file } => self.write(file),
            Step::Delete { file } => self.delete(file),
            Step::Checkpoint => self.checkpoint(),
            Step::Branch { name } => self.branch(name),
            Step::CheckoutBranch { name } => {
                let name = format!("b{name}");
                let id = self.model.branches.get(&name).cloned();
                let attach = self.model.attaches(&name).then_some(&*name);
                self.checkout(&name, id, attach);
            }
            Step::Fork => self.fork(),
            Step::OtherCheckout { name } => {
                let name = format!("b{name}");
                if self.model.other.is_none() || !self.model.branches.contains_key(&name) {
                    return;
                }
                let qualified = format!("{SESSION}/{name}");
                serve(&self.host, OTHER, checkout_op(&qualified)).unwrap();
                self.model.other_checkout(&name);
            }
            Step::OtherCheckpoint => {
                if self.model.other.is_none() {
                    return;
                }
                let v = serve(&self.host, OTHER, checkpoint_op()).unwrap();
                let c = &v["checkpoint"];
                let (id, root) = (c["id"].as_str().unwrap(), c["root"].as_str().unwrap());
                self.model.other_checkpoint(id, root);
            }
            Step::CheckoutCheckpoint { nth } => {
                let n = self.model.ckpts.len();
                if n == 0 {
                    return;
                }
                let id = self.model.ckpts[nth as usize % n].clone();
                self.checkout(&id, Some(id.clone()), None);
            }
            Step::Undo(what) | Step::Redo(what) => {
                self.undo(matches!(step, Step::Redo(_)), what);
            }
            Step::OpRestore { nth, what } => {
                let n = self.model.log.len() as u64;
                if n == 0 {
                    return;
                }
                let seq = 1 + nth as u64 % n;
                let got = self.request(op_restore_op(seq, what));
                let live = self.live();
                let want = self.model.op_restore(seq, what, &live);
                self.outcome(&got, want, "op restore");
                if got.is_ok() && what == What::All {
                    restored = Some(self.model.log[seq as usize - 1].after.clone());
                }
            }
            Step::UndoRedo { n } => return self.undo_redo(n),
        }
        let grafts = !matches!(step, Step::Write { .. } | Step::Delete { .. });
        self.check(&files_before, grafts);
        if let Some(v) = restored {
            // The state recorded after that operation, HEAD's attachment aside
            // (dropped when the branch no longer names HEAD).
            let seen = self.seen();
            let files: BTreeMap<_, _> = self.model.trees[&v.ws]
                .iter()
                .map(|(k, (_, d))| (k.clone(), d.clone()))
                .collect();
            assert_eq!((&seen.files, &seen.head), (&files, &v.head), "op restore");
        }
    }

    /// The session equals the model; with `grafts` (a request, not a write), a
    /// change of files was sent to the kernel.
    fn check(&self, files_before: &BTreeMap<String, Vec<u8>>, grafts: bool) {
        assert_eq!(self.seen(), self.expected(), "session vs model");
        self.check_log();
        self.check_kernel(grafts && &self.model.files() != files_before);
    }

    fn undo_redo(&mut self, n: u8) {
        let n = (n as usize).min(self.model.done.len());
        // The same files, HEAD and branches (the workspace's root id may differ:
        // each graft keeps the live inode counter, which the root records).
        let state = |r: &Run| Seen {
            ws: String::new(),
            ..r.seen()
        };
        let start = state(self);
        // Undos refused (a branch moved or checked out elsewhere since) end the
        // walk back: as many redos as undos were done.
        let mut done = 0;
        while done < n && self.checked_undo(false) {
            done += 1;
        }
        for _ in 0..done {
            self.checked_undo(true);
        }
        assert_eq!(state(self), start, "undo {done} then redo {done}");
    }

    /// One `undo` (or `redo`) of `what`, its outcome checked against the model's;
    /// whether it was done.
    fn undo(&mut self, redo: bool, what: What) -> bool {
        let op = if redo { redo_op(what) } else { undo_op(what) };
        let got = self.request(op);
        let live = self.live();
        let want = self.model.step(redo, what, &live);
        self.outcome(&got, want, if redo { "redo" } else { "undo" });
        got.is_ok()
    }

    /// [`Run::undo`] of everything, then the whole state checked.
    fn checked_undo(&mut self, redo: bool) -> bool {
        let files_before = self.model.files();
        let done = self.undo(redo, What::All);
        self.check(&files_before, true);
        done
    }
}

/// Run `steps` on a new session, checking after each.
fn run(steps: &[Step]) {
    let mut r = Run::new();
    for s in steps {
        r.apply(s);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(200), ..ProptestConfig::default() })]
    #[test]
    fn history_matches_model(steps in proptest::collection::vec(step(), 1..40)) {
        run(&steps);
    }
}
