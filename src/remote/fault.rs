//! Short, typed descriptions of failed remote requests.
//!
//! Owns: [`Fault`], what went wrong talking to a remote, classified from an
//! `object_store` error and its source chain (an I/O error's kind, the HTTP
//! client's error kind, the store's own variants), and its one-line message
//! naming the endpoint and the cause (`cannot reach http://127.0.0.1:8333:
//! connection refused`).
//!
//! Invariants: the message is one line and bounded ([`MAX_CAUSE`]); it never
//! carries the client library's whole chain (that goes to the daemon log, where
//! the client logs it) nor credentials (a chain holds none: requests are signed
//! in headers, and no header is in an error).

use object_store::client::{HttpError, HttpErrorKind};

/// Longest cause kept in a message (characters).
pub const MAX_CAUSE: usize = 160;

/// What went wrong with a remote request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// No connection: refused, no route, name not resolved, reset while connecting.
    Unreachable {
        /// The server.
        endpoint: String,
        /// Why, in a few words.
        cause: String,
    },
    /// The server did not answer in time.
    TimedOut {
        /// The server.
        endpoint: String,
    },
    /// The server refused the credentials or the access.
    Denied {
        /// The server.
        endpoint: String,
    },
    /// Anything else: the server's or the library's innermost message, trimmed.
    Failed {
        /// The server.
        endpoint: String,
        /// Why.
        cause: String,
    },
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::Unreachable { endpoint, cause } => write!(f, "cannot reach {endpoint}: {cause}"),
            Fault::TimedOut { endpoint } => write!(f, "{endpoint} did not answer in time"),
            Fault::Denied { endpoint } => write!(
                f,
                "{endpoint} refused the credentials or the access (check the key and its rights on the bucket)"
            ),
            Fault::Failed { endpoint, cause } => write!(f, "{endpoint}: {cause}"),
        }
    }
}

/// The cause of an I/O error, in a few words.
fn io_cause(e: &std::io::Error) -> Option<&'static str> {
    use std::io::ErrorKind as K;
    Some(match e.kind() {
        K::ConnectionRefused => "connection refused",
        K::ConnectionReset => "connection reset",
        K::ConnectionAborted => "connection aborted",
        K::NotConnected => "not connected",
        K::AddrNotAvailable => "address not available",
        K::HostUnreachable => "host unreachable",
        K::NetworkUnreachable => "network unreachable",
        K::TimedOut => "timed out",
        _ => return None,
    })
}

/// One line of at most [`MAX_CAUSE`] characters.
fn trim(s: &str) -> String {
    let line: String = s.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= MAX_CAUSE {
        return line;
    }
    let mut t: String = line.chars().take(MAX_CAUSE).collect();
    t.push('…');
    t
}

/// Classify `e`, a failed request to `endpoint`.
pub fn classify(endpoint: &str, e: &object_store::Error) -> Fault {
    let endpoint = endpoint.to_string();
    if matches!(
        e,
        object_store::Error::PermissionDenied { .. } | object_store::Error::Unauthenticated { .. }
    ) {
        return Fault::Denied { endpoint };
    }
    let mut http = None;
    let mut innermost: &dyn std::error::Error = e;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = cur {
        if let Some(io) = s.downcast_ref::<std::io::Error>()
            && let Some(cause) = io_cause(io)
        {
            if io.kind() == std::io::ErrorKind::TimedOut {
                return Fault::TimedOut { endpoint };
            }
            return Fault::Unreachable {
                endpoint,
                cause: cause.into(),
            };
        }
        if let Some(h) = s.downcast_ref::<HttpError>() {
            http.get_or_insert(h.kind());
        }
        innermost = s;
        cur = s.source();
    }
    let cause = trim(&innermost.to_string());
    match http {
        Some(HttpErrorKind::Timeout) => Fault::TimedOut { endpoint },
        Some(HttpErrorKind::Connect) => Fault::Unreachable { endpoint, cause },
        _ => Fault::Failed { endpoint, cause },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Wrap(&'static str, Box<dyn std::error::Error + Send + Sync>);
    impl std::fmt::Display for Wrap {
        fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            write!(f, "{}: {}", self.0, self.1)
        }
    }
    impl std::error::Error for Wrap {
        fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
            Some(&*self.1)
        }
    }

    fn generic(source: Box<dyn std::error::Error + Send + Sync>) -> object_store::Error {
        object_store::Error::Generic {
            store: "S3",
            source,
        }
    }

    #[test]
    fn causes_are_found_down_the_chain() {
        let refused = std::io::Error::from(std::io::ErrorKind::ConnectionRefused);
        let e = generic(Box::new(Wrap(
            "Error performing PUT http://127.0.0.1:9/b/k in 1s, after 3 retries",
            Box::new(Wrap("client error (Connect)", Box::new(refused))),
        )));
        let f = classify("http://127.0.0.1:9", &e);
        assert_eq!(
            f.to_string(),
            "cannot reach http://127.0.0.1:9: connection refused"
        );
        let e = generic(Box::new(std::io::Error::from(std::io::ErrorKind::TimedOut)));
        assert_eq!(
            classify("http://h", &e),
            Fault::TimedOut {
                endpoint: "http://h".into()
            }
        );
        let e = object_store::Error::PermissionDenied {
            path: "k".into(),
            source: "403".into(),
        };
        assert!(matches!(classify("http://h", &e), Fault::Denied { .. }));
        // Otherwise the innermost message, on one bounded line.
        let long = format!("bad\nthing {}", "x".repeat(400));
        let e = generic(Box::new(Wrap("outer", long.into())));
        let m = classify("http://h", &e).to_string();
        assert!(
            m.starts_with("http://h: bad thing xx") && !m.contains("outer"),
            "{m}"
        );
        assert!(m.chars().count() < MAX_CAUSE + 20, "{m}");
    }
}
