//! How a mount talks to the kernel, as the layers below `fs` name it: the
//! transport a mount asks for ([`Transport`], `treefork mount --transport`), the
//! one it got ([`InUse`], shown by `sessions` and `session show`), and why FUSE
//! over io_uring cannot be had ([`RingUnavailable`], carried by
//! `Error::RingUnavailable`).
//!
//! Owns these names and their wire forms only; the ring itself is `fs::ring`'s,
//! which re-exports them. Invariant: a leaf — imports nothing of this crate, so
//! `error`, `host`, `ops`, `verbs` and `fs` can all name it.

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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn transport_names_round_trip() {
        for t in [Transport::Auto, Transport::Uring, Transport::Dev] {
            assert_eq!(Transport::parse(t.name()), Some(t));
        }
        assert_eq!(Transport::parse("ring"), None);
    }
}
