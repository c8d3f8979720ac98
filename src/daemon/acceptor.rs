//! One thread accepts connections on every mount's session and agent sockets
//! (issue 42: a mount costs no thread of its own). The listeners are non-blocking
//! and in one epoll set; each connection accepted is served as before, on a thread
//! of its own while it lasts ([`Daemon::take`]).
//!
//! A listener leaves the set when accepting on it fails for good (the unmount shuts
//! it down: `Mounted::close_control`) or it hangs up; it is then dropped, which
//! closes it. Invariant: the table of listeners and the epoll set change together,
//! under the table's lock.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::os::unix::net::UnixListener;
use std::sync::{Arc, Mutex, Weak};

use super::Daemon;
use super::server::SocketCtx;

/// Connections accepted from one listener before the others get their turn.
const BURST: usize = 16;

/// Every mount's listening sockets, served by one thread.
pub(crate) struct Acceptor {
    ep: OwnedFd,
    listening: Mutex<HashMap<i32, (UnixListener, Arc<SocketCtx>)>>,
}

impl Acceptor {
    /// Start the acceptor thread, serving connections with `daemon`.
    pub(crate) fn start(daemon: Weak<Daemon>) -> io::Result<Arc<Acceptor>> {
        // SAFETY: no memory arguments; the result is checked.
        let ep = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
        if ep < 0 {
            return Err(io::Error::last_os_error());
        }
        let a = Arc::new(Acceptor {
            // SAFETY: a fresh descriptor nothing else owns.
            ep: unsafe { OwnedFd::from_raw_fd(ep) },
            listening: Mutex::new(HashMap::new()),
        });
        let me = a.clone();
        std::thread::Builder::new()
            .name("accept".into())
            .spawn(move || me.run(daemon))?;
        Ok(a)
    }

    /// Accept on `listener` from now on, serving its connections with `ctx`.
    /// On failure the listener and context come back with the error.
    pub(crate) fn add(
        &self,
        listener: UnixListener,
        ctx: Arc<SocketCtx>,
    ) -> Result<(), (io::Error, UnixListener, Arc<SocketCtx>)> {
        if let Err(e) = listener.set_nonblocking(true) {
            return Err((e, listener, ctx));
        }
        let fd = listener.as_raw_fd();
        let mut l = self.listening.lock().unwrap_or_else(|p| p.into_inner());
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: fd as u64,
        };
        // SAFETY: both descriptors are live; `ev` is a live epoll_event.
        if unsafe { libc::epoll_ctl(self.ep.as_raw_fd(), libc::EPOLL_CTL_ADD, fd, &mut ev) } < 0 {
            return Err((io::Error::last_os_error(), listener, ctx));
        }
        l.insert(fd, (listener, ctx));
        Ok(())
    }

    fn remove(&self, fd: i32) {
        let mut l = self.listening.lock().unwrap_or_else(|p| p.into_inner());
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: as in `add`; DEL ignores `ev`.
        unsafe { libc::epoll_ctl(self.ep.as_raw_fd(), libc::EPOLL_CTL_DEL, fd, &mut ev) };
        l.remove(&fd);
    }

    fn run(&self, daemon: Weak<Daemon>) {
        let mut evs = [libc::epoll_event { events: 0, u64: 0 }; 64];
        loop {
            // SAFETY: `evs` is a live array of its length.
            let n = unsafe {
                libc::epoll_wait(self.ep.as_raw_fd(), evs.as_mut_ptr(), evs.len() as i32, -1)
            };
            let Some(d) = daemon.upgrade() else {
                return;
            };
            for ev in evs.iter().take(n.max(0) as usize) {
                let (fd, hup) = (ev.u64 as i32, ev.events & libc::EPOLLHUP as u32 != 0);
                if !self.drain(&d, fd) || hup {
                    self.remove(fd);
                }
            }
        }
    }

    /// Accept what is pending on `fd`, at most [`BURST`] (level-triggered: the
    /// rest comes back at the next wait, after the other listeners' turn); false
    /// once the listener is done for (shut down at its unmount).
    fn drain(&self, d: &Arc<Daemon>, fd: i32) -> bool {
        for _ in 0..BURST {
            let got = {
                let l = self.listening.lock().unwrap_or_else(|p| p.into_inner());
                let Some((listener, ctx)) = l.get(&fd) else {
                    return true;
                };
                listener.accept().map(|(s, _)| (s, ctx.clone()))
            };
            match got {
                Ok((stream, ctx)) => d.take(stream, &ctx),
                Err(e) => {
                    return match e.raw_os_error() {
                        Some(libc::EAGAIN | libc::EINTR | libc::ECONNABORTED) => true,
                        // Out of descriptors: the connection waits in the backlog.
                        Some(libc::EMFILE | libc::ENFILE) => {
                            log::warn!("accept: {e}");
                            std::thread::sleep(std::time::Duration::from_millis(20));
                            true
                        }
                        // Shut down (its unmount) or closed.
                        Some(libc::EINVAL | libc::EBADF) => false,
                        _ => {
                            log::warn!("accept: {e}");
                            true
                        }
                    };
                }
            }
        }
        true
    }
}

impl Daemon {
    /// Serve a mount's `listener` through the daemon's one acceptor (started on
    /// first use); should that fail, on a thread of its own.
    pub(crate) fn accept_shared(self: Arc<Self>, listener: UnixListener, ctx: SocketCtx) {
        static START: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let acceptor = match self.acceptor.get() {
            Some(a) => Ok(a.clone()),
            None => {
                let _g = START.lock().unwrap_or_else(|p| p.into_inner());
                match self.acceptor.get() {
                    Some(a) => Ok(a.clone()),
                    None => Acceptor::start(Arc::downgrade(&self))
                        .map(|a| self.acceptor.get_or_init(|| a).clone()),
                }
            }
        };
        let (e, listener, ctx) = match acceptor {
            Ok(a) => match a.add(listener, Arc::new(ctx)) {
                Ok(()) => return,
                Err((e, l, ctx)) => (e, l, Arc::into_inner(ctx)),
            },
            Err(e) => (e, listener, Some(ctx)),
        };
        log::warn!("the shared acceptor cannot take a session socket ({e}); it gets a thread");
        if let (Ok(()), Some(ctx)) = (listener.set_nonblocking(false), ctx) {
            self.accept(listener, ctx, true);
        }
    }
}
