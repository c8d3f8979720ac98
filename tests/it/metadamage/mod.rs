//! Damage to the metadata database (issue 26): a corruption matrix on one fixture
//! store (two sessions, a fork, branches, named checkpoints, exec records — one
//! with ~340 KB of output, which sled keeps in a blob file — conversation
//! messages, a remote with pushed refs, and a last change flushed but not
//! checkpointed). Every fact of the fixture is recorded through the CLI once;
//! each variant damages its own copy of the store (`meta/db` bytes flipped,
//! truncated, deleted; `meta/` or `meta/blobs/` deleted; `meta/` rolled back; the
//! journal damaged or deleted) and checks that the damaged open is refused with
//! exit status 7 and one line naming `fsck --repair` (or, where sled never reads
//! the damaged bytes, that the store opens with identical facts), that
//! `fsck --repair` rebuilds the database and moves the damaged one aside, and
//! that every fact reads back equal, `fsck` is clean and a session takes a new
//! write. A small store (one session of 300 files) checks that damage never
//! yields an empty workspace in place of the session.
//!
//! Layout: `fixture` (the shared store, built once per test run), `facts`
//! (recording and comparing what the CLI shows), `damage` (the damage and the
//! checks of a damaged open and of a repair), `matrix` (the variants), `small`.

mod damage;
mod facts;
mod fixture;
mod matrix;
mod small;
