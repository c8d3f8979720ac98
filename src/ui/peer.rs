//! Which user a TCP connection to the web server comes from.
//!
//! The kernel lists every IPv4 TCP socket of our network namespace in
//! `/proc/net/tcp`, one row each: its local and remote address, and the uid that
//! owns it. The client's socket of a connection we accepted is the row whose local
//! address is the peer's and whose remote address is ours; its `uid` column is the
//! uid that created it. A row with inode 0 has no socket file any more (the client
//! closed it, or it is in TIME_WAIT): its uid column is not the client's, so it is
//! not taken. The server listens on 127.0.0.1 only, so `/proc/net/tcp6` is not read.
//!
//! The file is host data and can be large (one 150-byte row per socket): it is
//! streamed a line at a time with a bounded line buffer, and the scan stops at the
//! match. Done once per connection, off the runtime's threads ([`Peer`]).

use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::sync::Arc;

use axum::serve::IncomingStream;

/// The longest row taken; a longer one is malformed and skipped (real rows are
/// 150 bytes).
const MAX_LINE: usize = 512;

/// Who is on the other end of one connection (the server's connect info, shared
/// by the connection's requests): the owning uid of the client's socket, looked
/// up once, at the first request, on a blocking thread (the scan is linear in the
/// host's sockets: it must hold neither the accept loop nor a runtime worker).
#[derive(Clone, Debug)]
pub(crate) struct Peer {
    peer: SocketAddr,
    ours: Option<SocketAddr>,
    uid: Arc<tokio::sync::OnceCell<Option<u32>>>,
}

impl Peer {
    /// The uid owning the client's socket; `None` when it could not be found.
    pub async fn uid(&self) -> Option<u32> {
        let (peer, ours) = (self.peer, self.ours?);
        *self
            .uid
            .get_or_init(|| async move {
                tokio::task::spawn_blocking(move || owner_uid(peer, ours))
                    .await
                    .ok()
                    .flatten()
            })
            .await
    }
}

impl axum::extract::connect_info::Connected<IncomingStream<'_, tokio::net::TcpListener>> for Peer {
    fn connect_info(stream: IncomingStream<'_, tokio::net::TcpListener>) -> Peer {
        Peer {
            peer: *stream.remote_addr(),
            ours: stream.io().local_addr().ok(),
            uid: Arc::default(),
        }
    }
}

/// The uid owning the socket at `peer` connected to `ours`, from `/proc/net/tcp`.
pub(crate) fn owner_uid(peer: SocketAddr, ours: SocketAddr) -> Option<u32> {
    let (SocketAddr::V4(peer), SocketAddr::V4(ours)) = (peer, ours) else {
        return None;
    };
    let f = std::fs::File::open("/proc/net/tcp").ok()?;
    find_owner(f, peer, ours)
}

/// One row of `/proc/net/tcp`: the fields the peer check reads.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Row {
    pub local: SocketAddrV4,
    pub remote: SocketAddrV4,
    pub uid: u32,
    pub inode: u64,
}

/// The owner of the row `peer` → `ours` in a `/proc/net/tcp` listing, read a
/// bounded line at a time.
fn find_owner(r: impl Read, peer: SocketAddrV4, ours: SocketAddrV4) -> Option<u32> {
    let mut r = BufReader::new(r);
    let mut line = Vec::with_capacity(MAX_LINE);
    loop {
        line.clear();
        let n = (&mut r)
            .take(MAX_LINE as u64 + 1)
            .read_until(b'\n', &mut line)
            .ok()?;
        if n == 0 {
            return None;
        }
        if n > MAX_LINE {
            // Too long: skip to the end of this line, holding none of it.
            if line.last() != Some(&b'\n') {
                r.skip_until(b'\n').ok()?;
            }
            continue;
        }
        let Some(row) = std::str::from_utf8(&line).ok().and_then(parse_line) else {
            continue;
        };
        if row.local == peer && row.remote == ours && row.inode != 0 {
            return Some(row.uid);
        }
    }
}

/// Parse one row (`sl local rem st tx:rx tr:when retrnsmt uid timeout inode …`);
/// `None` for the header and anything malformed.
pub(crate) fn parse_line(line: &str) -> Option<Row> {
    let f: Vec<&str> = line.split_ascii_whitespace().take(10).collect();
    let [sl, local, remote, _st, _q, _tr, _rt, uid, _timeout, inode] = f[..] else {
        return None;
    };
    sl.strip_suffix(':')?.parse::<u64>().ok()?;
    Some(Row {
        local: parse_addr(local)?,
        remote: parse_addr(remote)?,
        uid: uid.parse().ok()?,
        inode: inode.parse().ok()?,
    })
}

/// `0100007F:1F90` → 127.0.0.1:8080. The kernel prints the address as the 32-bit
/// word it stores in network order, read natively (`%08X`), and the port in host
/// order (`%04X`).
fn parse_addr(s: &str) -> Option<SocketAddrV4> {
    let (a, p) = s.split_once(':')?;
    if a.len() != 8 || p.len() != 4 {
        return None;
    }
    let word = u32::from_str_radix(a, 16).ok()?;
    let port = u16::from_str_radix(p, 16).ok()?;
    // from_str_radix accepts a leading '+'.
    if !a.bytes().chain(p.bytes()).all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    Some(SocketAddrV4::new(Ipv4Addr::from(word.to_ne_bytes()), port))
}

/// The row text the kernel would print for `a` (for tests).
#[cfg(test)]
fn addr_text(a: SocketAddrV4) -> String {
    format!(
        "{:08X}:{:04X}",
        u32::from_ne_bytes(a.ip().octets()),
        a.port()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const HEADER: &str = "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode";

    fn row(local: &str, remote: &str, uid: u32, inode: u64) -> String {
        raw(local, remote, &uid.to_string(), &inode.to_string())
    }

    fn raw(local: &str, remote: &str, uid: &str, inode: &str) -> String {
        format!(
            "   3: {local} {remote} 01 00000000:00000000 00:00000000 00000000 {uid:>5}        0 {inode} 1 0000000000000000 20 4 30 10 -1"
        )
    }

    fn v4(s: &str) -> SocketAddrV4 {
        s.parse().unwrap()
    }

    #[test]
    fn rows_parse_and_malformed_lines_do_not() {
        let r = parse_line(&row("0100007F:1F90", "0100007F:C350", 65534, 4242)).unwrap();
        assert_eq!(
            r,
            Row {
                local: v4("127.0.0.1:8080"),
                remote: v4("127.0.0.1:50000"),
                uid: 65534,
                inode: 4242,
            }
        );
        for bad in [
            "",
            HEADER,
            "   3: 0100007F:1F90",
            &row("0100007F:1F9", "0100007F:C350", 0, 1),
            &row("100007F:1F90", "0100007F:C350", 0, 1),
            &row("0100007G:1F90", "0100007F:C350", 0, 1),
            &row("+100007F:1F90", "0100007F:C350", 0, 1),
            &row("0100007F-1F90", "0100007F:C350", 0, 1),
            &row("0100007F:1F90", "0100007F:C350", 0, 1).replace("   3:", "   x:"),
            &row("0100007F:1F90", "0100007F:C350", 0, 1).replace("   3:", "   3"),
            &raw("0100007F:1F90", "0100007F:C350", "-1", "1"),
            &raw("0100007F:1F90", "0100007F:C350", "4294967296", "1"),
            &raw("0100007F:1F90", "0100007F:C350", "0", "x"),
            // An IPv6 row (tcp6 layout) is not an IPv4 one.
            &row(
                "0000000000000000FFFF00000100007F:1F90",
                "0000000000000000FFFF00000100007F:C350",
                0,
                1,
            ),
        ] {
            assert_eq!(parse_line(bad), None, "{bad:?}");
        }
    }

    #[test]
    fn the_owner_is_the_row_from_the_peer_to_us_with_a_socket() {
        let us = v4("127.0.0.1:7878");
        let peer = v4("127.0.0.1:40000");
        let listing = [
            HEADER.to_string(),
            // Our listening socket and our side of the connection: not the peer's.
            row(&addr_text(us), "00000000:0000", 1000, 10),
            row(&addr_text(us), &addr_text(peer), 1000, 11),
            // A closed socket of the same pair (TIME_WAIT: inode 0, uid 0).
            row(&addr_text(peer), &addr_text(us), 0, 0),
            "garbage".to_string(),
            "x".repeat(5000),
            row(&addr_text(peer), &addr_text(us), 65534, 12),
        ]
        .join("\n");
        assert_eq!(find_owner(listing.as_bytes(), peer, us), Some(65534));
        assert_eq!(
            find_owner(listing.as_bytes(), v4("127.0.0.1:40001"), us),
            None
        );
        // A row split across the line cap is not taken.
        let long = format!(
            "{}{}",
            " ".repeat(MAX_LINE),
            row(&addr_text(peer), &addr_text(us), 7, 1)
        );
        assert_eq!(find_owner(long.as_bytes(), peer, us), None);
        // A line of exactly the cap plus its newline is skipped alone.
        let edge = format!(
            "{}\n{}",
            "y".repeat(MAX_LINE),
            row(&addr_text(peer), &addr_text(us), 7, 1)
        );
        assert_eq!(find_owner(edge.as_bytes(), peer, us), Some(7));
    }

    #[test]
    fn our_own_connection_is_found_in_proc() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let c = std::net::TcpStream::connect(l.local_addr().unwrap()).unwrap();
        let (_s, peer) = l.accept().unwrap();
        assert_eq!(peer, c.local_addr().unwrap());
        // SAFETY: geteuid has no preconditions.
        let me = unsafe { libc::geteuid() };
        assert_eq!(owner_uid(peer, l.local_addr().unwrap()), Some(me));
        assert_eq!(owner_uid(l.local_addr().unwrap(), peer), Some(me));
        let other: SocketAddr = "127.0.0.1:1".parse().unwrap();
        assert_eq!(owner_uid(other, l.local_addr().unwrap()), None);
    }

    proptest! {
        #[test]
        fn printed_rows_parse_back(ip in any::<u32>(), port in any::<u16>(), rip in any::<u32>(),
                                   rport in any::<u16>(), uid in any::<u32>(), inode in any::<u64>()) {
            let local = SocketAddrV4::new(Ipv4Addr::from(ip), port);
            let remote = SocketAddrV4::new(Ipv4Addr::from(rip), rport);
            let r = parse_line(&row(&addr_text(local), &addr_text(remote), uid, inode)).unwrap();
            prop_assert_eq!(r, Row { local, remote, uid, inode });
        }

        #[test]
        fn arbitrary_text_never_panics(s in "\\PC{0,200}") {
            let _ = parse_line(&s);
        }
    }
}
