//! Memory budgets that scale with the machine: a share of physical RAM between a
//! floor and a ceiling, or a size from the environment (diagnostics and the
//! bench); and the daemon-wide budget of unsealed data every session draws on
//! ([`unsealed`], the one piece of state here).

pub mod unsealed;

/// Physical RAM in bytes (0 when unknown).
pub fn ram_bytes() -> u64 {
    // SAFETY: sysconf has no memory-safety preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    (pages.max(0) as u64).saturating_mul(page.max(0) as u64)
}

/// `env` (a positive number of MiB) if set, else `ram / divisor` clamped to
/// `[min, max]`.
pub fn ram_share(env: &str, ram: u64, divisor: u64, min: u64, max: u64) -> u64 {
    if let Some(mb) = std::env::var(env)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&mb| mb > 0)
    {
        return mb.saturating_mul(1 << 20);
    }
    (ram / divisor.max(1)).clamp(min, max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_share_is_clamped_and_the_environment_wins() {
        const M: u64 = 1 << 20;
        let var = "TREEFORK_BUDGET_TEST_MB";
        assert_eq!(ram_share(var, 24 << 30, 64, 32 * M, 256 * M), 256 * M);
        assert_eq!(ram_share(var, 4 << 30, 64, 32 * M, 256 * M), 64 * M);
        assert_eq!(ram_share(var, 0, 64, 32 * M, 256 * M), 32 * M);
        // SAFETY: this test is the only user of this variable.
        unsafe { std::env::set_var(var, "7") };
        assert_eq!(ram_share(var, 24 << 30, 64, 32 * M, 256 * M), 7 * M);
        assert!(ram_bytes() > 0);
    }
}
