//! Running sled where it may panic on a damaged database, without a backtrace.
//!
//! Owns: one process-wide panic hook, installed once, that stays silent for panics
//! raised inside [`catch`] on the calling thread and hands every other panic to the
//! hook it replaced. sled 0.34 panics (rather than returning an error) on several
//! kinds of damage to its files; a damaged database must be one clear line, not a
//! backtrace on the user's terminal.
//! Invariant: outside [`catch`], panics print exactly as before.

use std::cell::Cell;
use std::panic::{self, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    static QUIET: Cell<u32> = const { Cell::new(0) };
}

static HOOK: Once = Once::new();

fn install() {
    HOOK.call_once(|| {
        let previous = panic::take_hook();
        panic::set_hook(Box::new(move |info| {
            if QUIET.with(|q| q.get()) == 0 {
                previous(info);
            } else {
                log::debug!("sled panicked (caught): {info}");
            }
        }));
    });
}

/// Run `f`; a panic inside it is caught silently and returned as its message.
pub fn catch<T>(f: impl FnOnce() -> T) -> Result<T, String> {
    install();
    QUIET.with(|q| q.set(q.get() + 1));
    let r = panic::catch_unwind(AssertUnwindSafe(f));
    QUIET.with(|q| q.set(q.get() - 1));
    r.map_err(|p| {
        p.downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| p.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "a panic without a message".into())
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn catches_and_names_a_panic() {
        let r: Result<(), String> = super::catch(|| panic!("page {} is bad", 7));
        assert_eq!(r.unwrap_err(), "page 7 is bad");
        assert_eq!(super::catch(|| 5).unwrap(), 5);
    }
}
