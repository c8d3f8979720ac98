//! Fuzz entry points: one per family of decoders of bytes that reach the daemon from
//! outside its own memory — the control protocol (any local peer, agents included),
//! the store on disk (a damaged disk) and a remote (a hostile or broken server).
//!
//! Owns: [`TARGETS`] (the targets themselves live by family in `local`, `remote`,
//! `tree` and `records`), each a `run` function taking arbitrary bytes and a `seeds`
//! function giving valid inputs made by the real encoders. `fuzz/` (cargo-fuzz,
//! `scripts/fuzz.sh`) runs them under libFuzzer; the property tests in `tests.rs` run
//! them on arbitrary and mutated bytes in `cargo test --lib`.
//!
//! What a `run` asserts (a failed assertion is a panic, which is the finding):
//! every decoder returns instead of panicking or overflowing; its error is the typed
//! [`Error::Corrupt`] (or the protocol's `bad_request` family); and where the format
//! has an encoder, what decodes re-encodes to something that decodes to the same value
//! (byte-identical for the canonical binary formats). Formats behind a checksum
//! (pack index trailer, log segment name) are fed twice: as given, and with the
//! checksum recomputed, so the fuzzer reaches the parser behind it.
//!
//! Compiled only for tests and with the `fuzzing` feature: nothing here is part of the
//! daemon.

use std::collections::HashMap;

use serde::Serialize;

use crate::error::Error;

mod local;
mod records;
mod remote;
#[cfg(test)]
mod tests;
mod tree;

use local::*;
use records::*;
use remote::*;
use tree::*;

/// Inputs longer than this are cut (libFuzzer's `-max_len` is smaller still): no
/// decoder may need more to be exercised, and it bounds each run's memory.
pub const MAX_INPUT: usize = 1 << 20;

/// One fuzz target.
pub struct Target {
    /// Its name (`fuzz/fuzz_targets/<name>.rs`, `fuzz/corpus/<name>/`).
    pub name: &'static str,
    /// Decode `bytes` every way this target covers; panics on a finding.
    pub run: fn(&[u8]),
    /// Valid inputs made by the real encoders (the committed seed corpus).
    pub seeds: fn() -> Vec<Vec<u8>>,
}

/// Every target.
pub const TARGETS: &[Target] = &[
    Target {
        name: "protocol",
        run: protocol,
        seeds: protocol_seeds,
    },
    Target {
        name: "pack_records",
        run: pack_records,
        seeds: pack_records_seeds,
    },
    Target {
        name: "pack_index",
        run: pack_index,
        seeds: pack_index_seeds,
    },
    Target {
        name: "remote_idx",
        run: remote_idx,
        seeds: remote_idx_seeds,
    },
    Target {
        name: "remote_pack",
        run: remote_pack,
        seeds: remote_pack_seeds,
    },
    Target {
        name: "log_segment",
        run: log_segment,
        seeds: log_segment_seeds,
    },
    Target {
        name: "remote_refs",
        run: remote_refs,
        seeds: remote_refs_seeds,
    },
    Target {
        name: "tree_node",
        run: tree_node,
        seeds: tree_node_seeds,
    },
    Target {
        name: "block_map",
        run: block_map,
        seeds: block_map_seeds,
    },
    Target {
        name: "checkpoint_record",
        run: checkpoint_record,
        seeds: checkpoint_record_seeds,
    },
    Target {
        name: "session_record",
        run: session_record,
        seeds: session_record_seeds,
    },
    Target {
        name: "log_records",
        run: log_records,
        seeds: log_records_seeds,
    },
    Target {
        name: "meta_keys",
        run: meta_keys,
        seeds: meta_keys_seeds,
    },
];

/// The target named `name`.
pub fn target(name: &str) -> Option<&'static Target> {
    TARGETS.iter().find(|t| t.name == name)
}

/// Run target `name` on `bytes` (what each `fuzz/fuzz_targets/*.rs` calls).
pub fn run(name: &str, bytes: &[u8]) {
    let t = target(name).unwrap_or_else(|| panic!("no fuzz target {name}"));
    (t.run)(&bytes[..bytes.len().min(MAX_INPUT)]);
}

/// Once per fuzzer process: when `TREEFORK_FUZZ_SEEDS` names a directory, write
/// target `name`'s seeds into `<dir>/<name>/` (file name = hash of the content), so
/// the corpus always holds what today's encoders write.
pub fn init(name: &str) {
    let Some(dir) = std::env::var_os("TREEFORK_FUZZ_SEEDS") else {
        return;
    };
    let t = target(name).unwrap_or_else(|| panic!("no fuzz target {name}"));
    let dir = std::path::Path::new(&dir).join(name);
    std::fs::create_dir_all(&dir).expect("create the seed directory");
    for s in (t.seeds)() {
        let file = format!("seed-{}", &blake3::hash(&s).to_hex()[..16]);
        std::fs::write(dir.join(file), &s).expect("write a seed");
    }
}

thread_local! {
    /// Inputs some decoder accepted since the last [`take_accepted`] (lets the tests
    /// check that every seed is a valid encoding, so the corpus reaches past the
    /// first checks).
    static ACCEPTED: std::cell::Cell<u32> = const { std::cell::Cell::new(0) };
}

pub(super) fn accepted() {
    ACCEPTED.with(|c| c.set(c.get() + 1));
}

/// How many decodes succeeded on this thread since the last call.
pub fn take_accepted() -> u32 {
    ACCEPTED.with(|c| c.replace(0))
}

pub(super) fn assert_corrupt<T>(what: &str, r: &crate::Result<T>) {
    if let Err(e) = r {
        assert!(
            matches!(e, Error::Corrupt { .. }),
            "{what}: a decode error must be Error::Corrupt, got {e:?}"
        );
    }
}

/// `bytes` with its last 32 bytes replaced by the blake3 of the rest (a trailer).
pub(super) fn with_trailer(bytes: &[u8]) -> Vec<u8> {
    let body = &bytes[..bytes.len().saturating_sub(32)];
    let mut v = body.to_vec();
    v.extend_from_slice(blake3::hash(body).as_bytes());
    v
}

/// Decode JSON record `bytes` with `decode`; if it decodes, its JSON re-encoding
/// must decode to the same value.
pub(super) fn json_round_trip<T>(
    what: &str,
    bytes: &[u8],
    decode: impl Fn(&[u8]) -> crate::Result<T>,
) where
    T: Serialize + PartialEq + std::fmt::Debug,
{
    round_trip(what, bytes, decode, |x| {
        serde_json::to_vec(x).expect("a decoded record serializes")
    })
}

/// Decode record `bytes` with `decode`; if it decodes, its re-encoding with
/// `encode` must decode to the same value.
pub(super) fn round_trip<T>(
    what: &str,
    bytes: &[u8],
    decode: impl Fn(&[u8]) -> crate::Result<T>,
    encode: impl Fn(&T) -> Vec<u8>,
) where
    T: PartialEq + std::fmt::Debug,
{
    let r = decode(bytes);
    assert_corrupt(what, &r);
    if let Ok(x) = r {
        accepted();
        let again = encode(&x);
        match decode(&again) {
            Ok(y) => assert_eq!(x, y, "{what}: decode(encode(x)) != x"),
            Err(e) => panic!("{what}: re-encoding of a decoded record does not decode: {e}"),
        }
    }
}
