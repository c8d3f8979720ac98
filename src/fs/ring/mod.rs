//! FUSE over io_uring: the transport that serves a mount's requests on rings, one
//! per possible CPU, instead of reads and writes of /dev/fuse.
//!
//! Owns: the transport choice ([`Transport`], [`InUse`]) and why the ring cannot be
//! had ([`RingUnavailable`]); the kernel ABI of the ring (`abi.rs`), parsing an
//! entry's request (`parse.rs`), encoding its reply (`encode.rs`), the queues and
//! their threads (`queue.rs`), the mount's whole transport (`rings.rs`), the pool
//! of workers that answers slow requests off the ring threads (`workers.rs`) and
//! the translation of a parsed request into a core call (`dispatch.rs`).
//!
//! Names no fuser type: INIT, FORGET, INTERRUPT and notifications stay with
//! fuser's session on /dev/fuse. Never changes a kernel setting: whether the ring
//! may be used is root's choice through [`ENABLE_URING`]. See docs/design.md, "FUSE
//! over io_uring".

pub(crate) mod abi;
pub(crate) mod dispatch;
pub(crate) mod encode;
pub(crate) mod parse;
pub(crate) mod queue;
pub(crate) mod rings;
pub(crate) mod workers;

pub(crate) use rings::{MAX_WRITE, Preparing, Rings, prepare};

/// What serves a queue's requests (the dispatcher, or a test's fake).
pub(crate) trait Serve: Send + Sync + 'static {
    /// Whether the request in the entry may take long (it then runs on a worker,
    /// so the ring thread keeps serving).
    fn slow(&self, header: &parse::HeaderArea, payload: &[u8]) -> bool;
    /// Answer the request in the entry, writing the reply in place.
    fn serve(&self, header: &mut parse::HeaderArea, payload: &mut [u8]);
}

/// One entry's buffers, as registered with the kernel.
pub(crate) struct Slot {
    pub(crate) header: Box<parse::HeaderArea>,
    pub(crate) payload: Box<[u8]>,
}

/// The kernel's switch for FUSE over io_uring (module parameter, N by default).
pub const ENABLE_URING: &str = "/sys/module/fuse/parameters/enable_uring";

/// How a mount talks to the kernel, as asked (`treefork mount --transport`).
#[derive(
    Clone,
    Copy,
    Debug,
    Default,
    PartialEq,
    Eq,
    serde::Serialize,
    serde::Deserialize,
    schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// The ring when the kernel allows it, else /dev/fuse (one info line says how
    /// to allow it).
    #[default]
    Auto,
    /// The ring, or the mount fails naming why not.
    Uring,
    /// /dev/fuse only.
    Dev,
}

impl Transport {
    /// Its name (`auto`, `uring`, `dev`).
    pub fn name(self) -> &'static str {
        match self {
            Transport::Auto => "auto",
            Transport::Uring => "uring",
            Transport::Dev => "dev",
        }
    }

    /// From its name.
    pub fn parse(s: &str) -> Option<Transport> {
        [Transport::Auto, Transport::Uring, Transport::Dev]
            .into_iter()
            .find(|t| t.name() == s)
    }

    /// The default when a request names none: `TREEFORK_TRANSPORT` if set to a
    /// name, else [`Transport::Auto`].
    pub fn from_env() -> Transport {
        std::env::var("TREEFORK_TRANSPORT")
            .ok()
            .and_then(|v| Transport::parse(v.trim()))
            .unwrap_or_default()
    }
}

/// How a mount talks to the kernel, as it turned out.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "lowercase")]
pub enum InUse {
    /// /dev/fuse (fuser's threads).
    Dev,
    /// FUSE over io_uring (FORGET, INTERRUPT and notifications still on /dev/fuse).
    Uring,
}

impl InUse {
    /// Its name (`dev`, `uring`).
    pub fn name(self) -> &'static str {
        match self {
            InUse::Dev => "dev",
            InUse::Uring => "uring",
        }
    }
}

/// Why a mount cannot use FUSE over io_uring.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RingUnavailable {
    /// The kernel has no FUSE over io_uring (built without CONFIG_FUSE_IO_URING, or
    /// older than 6.14).
    #[error("this kernel has no FUSE over io_uring ({ENABLE_URING} does not exist)")]
    NoKernelSupport,
    /// Root has not enabled it.
    #[error(
        "FUSE over io_uring is disabled ({ENABLE_URING} is N; root enables it with `echo Y > {ENABLE_URING}`; treefork never changes it)"
    )]
    Disabled,
    /// The kernel's INIT did not offer it (enabled after the check, then disabled).
    #[error("the kernel did not offer FUSE over io_uring at INIT (is {ENABLE_URING} still Y?)")]
    NotOffered,
    /// A ring, its buffers or its threads could not be set up.
    #[error("cannot set up the io_uring queues: {0}")]
    Setup(String),
    /// The kernel refused to register the queues' entries (errno).
    #[error("the kernel refused the io_uring queues: {}", std::io::Error::from_raw_os_error(*.0))]
    Register(i32),
}

impl RingUnavailable {
    /// A stable machine-readable name.
    pub fn code(&self) -> &'static str {
        match self {
            RingUnavailable::NoKernelSupport => "no_kernel_support",
            RingUnavailable::Disabled => "disabled",
            RingUnavailable::NotOffered => "not_offered",
            RingUnavailable::Setup(_) => "setup",
            RingUnavailable::Register(_) => "register",
        }
    }
}

/// Whether the kernel lets a new mount use the ring (it reads [`ENABLE_URING`]).
pub fn available() -> Result<(), RingUnavailable> {
    match std::fs::read_to_string(ENABLE_URING) {
        Err(_) => Err(RingUnavailable::NoKernelSupport),
        Ok(v) if v.trim() == "Y" || v.trim() == "1" => Ok(()),
        Ok(_) => Err(RingUnavailable::Disabled),
    }
}

/// How many CPUs are possible (the kernel's queue count):
/// `/sys/devices/system/cpu/possible`, e.g. `0-1` or `0,2-3`.
pub(crate) fn possible_cpus() -> usize {
    std::fs::read_to_string("/sys/devices/system/cpu/possible")
        .ok()
        .and_then(|s| count_cpu_list(&s))
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

/// The number of CPUs in a kernel CPU list (`0-3,8,10-11`).
fn count_cpu_list(s: &str) -> Option<usize> {
    let mut n = 0;
    for part in s.trim().split(',') {
        n += match part.split_once('-') {
            Some((a, b)) => {
                b.parse::<usize>()
                    .ok()?
                    .checked_sub(a.parse::<usize>().ok()?)?
                    + 1
            }
            None => {
                part.parse::<usize>().ok()?;
                1
            }
        };
    }
    (n > 0).then_some(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists() {
        assert_eq!(count_cpu_list("0-1\n"), Some(2));
        assert_eq!(count_cpu_list("0"), Some(1));
        assert_eq!(count_cpu_list("0,2-3"), Some(3));
        assert_eq!(count_cpu_list("0-3,8,10-11"), Some(7));
        assert_eq!(count_cpu_list(""), None);
        assert_eq!(count_cpu_list("3-1"), None);
    }

    #[test]
    fn transport_names_round_trip() {
        for t in [Transport::Auto, Transport::Uring, Transport::Dev] {
            assert_eq!(Transport::parse(t.name()), Some(t));
        }
        assert_eq!(Transport::parse("ring"), None);
    }

    #[test]
    fn memory_is_bounded() {
        use rings::{MAX_ENTRIES, MEMORY_BOUND, PAYLOAD, entries_per_queue};
        assert_eq!(entries_per_queue(2), MAX_ENTRIES);
        for q in [1, 2, 4, 8, 16, 64] {
            let e = entries_per_queue(q);
            assert!((1..=MAX_ENTRIES).contains(&e));
            assert!(e == 1 || e * q * PAYLOAD <= MEMORY_BOUND, "{q} queues");
        }
    }
}
