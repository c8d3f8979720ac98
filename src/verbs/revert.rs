//! `revert`: take out what one checkpoint (or `exec@N`: one recorded command) changed, keeping what came after it: a three-way merge with base = its state and theirs = the state before it; a stop on conflicts as merge.

use super::prelude::*;

super::pick::pick_verb! {
    /// Take out what one checkpoint (or `exec@N`: one recorded command) changed, keeping what came after it: a three-way merge with base = its state and theirs = the state before it; a stop on conflicts as merge.
    Revert,
    "revert",
    ops::merge::start::revert
}
