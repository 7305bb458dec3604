//! Socket activation (systemd's `LISTEN_FDS`, sd_listen_fds(3)): the listening sockets a
//! service manager bound and passed, matched to configured listeners by their address. A
//! configured listener with a passed socket uses it (every worker accepts from that one
//! socket, as from a Unix socket: it is not in a SO_REUSEPORT group of ours, so no CPU
//! steering); one without binds as usual. A passed socket no listener names is refused at
//! start, naming its address: serving on it with some other listener's settings would be a
//! guess.
#![forbid(unsafe_code)]

use std::io;
use std::os::fd::OwnedFd;

use crate::config::ListenAddr;

/// The passed sockets, each with the address it listens on.
pub(crate) struct Passed(Vec<(ListenAddr, Option<OwnedFd>)>);

impl Passed {
    /// The sockets passed to this process (none when it was not socket-activated), made
    /// non-blocking and close-on-exec.
    pub(crate) fn take() -> io::Result<Passed> {
        let mut out = Vec::new();
        for fd in crate::sys::take_listen_fds() {
            let sock = socket2::Socket::from(fd);
            let local = sock.local_addr()?;
            let addr = if let Some(a) = local.as_socket() {
                ListenAddr::Tcp(a)
            } else if let Some(p) = local.as_pathname() {
                ListenAddr::Unix(p.to_path_buf())
            } else {
                return Err(io::Error::new(
                    io::ErrorKind::InvalidInput,
                    "LISTEN_FDS: a passed socket is neither TCP nor a Unix socket with a path",
                ));
            };
            sock.set_nonblocking(true)?;
            sock.set_cloexec(true)?;
            out.push((addr, Some(OwnedFd::from(sock))));
        }
        Ok(Passed(out))
    }

    /// The passed socket listening on `addr`, taken (a second listener on the same address
    /// binds its own).
    pub(crate) fn claim(&mut self, addr: &ListenAddr) -> Option<OwnedFd> {
        self.0
            .iter_mut()
            .find(|(a, fd)| a == addr && fd.is_some())
            .and_then(|(_, fd)| fd.take())
    }

    /// The address of a passed socket no listener claimed, if any.
    pub(crate) fn unclaimed(&self) -> Option<&ListenAddr> {
        self.0.iter().find(|(_, fd)| fd.is_some()).map(|(a, _)| a)
    }
}
