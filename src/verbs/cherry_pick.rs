//! `cherry_pick`: Apply one checkpoint's changes (against its first parent) to the session.

use super::prelude::*;

super::pick::pick_verb! {
    /// Apply one checkpoint's changes (against its first parent) to the session.
    CherryPick,
    "cherry_pick",
    ops::merge::start::cherry_pick
}
