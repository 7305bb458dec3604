//! The socket calls both backends make the same way (`epoll.rs`, `uring.rs`): an outbound
//! connect started, a queued connection accepted now, a chunk of a file sent, and one read
//! of a socket whose receive side is kernel TLS, with its record type.
#![forbid(unsafe_code)]

use std::net::SocketAddr;
use std::os::fd::{AsFd, OwnedFd};

use rustix::io::Errno;
use rustix::net::SocketFlags;

use super::backend::{Completion, Token, UpAddr};

/// Most file bytes one `sendfile` call is asked for.
pub(crate) const SENDFILE_CHUNK: u64 = 1 << 20;

/// Starts connecting a non-blocking socket to `addr`: the socket and whether the connect is
/// still under way (writable once it finished), or `None` when it failed at once (refused,
/// no socket; EAGAIN on a Unix socket is its full backlog, a refusal as nginx counts it).
pub(crate) fn connect(addr: &UpAddr) -> Option<(OwnedFd, bool)> {
    use rustix::net::{AddressFamily, SocketType};
    let family = match addr {
        UpAddr::Tcp(SocketAddr::V4(_)) => AddressFamily::INET,
        UpAddr::Tcp(SocketAddr::V6(_)) => AddressFamily::INET6,
        UpAddr::Unix(_) => AddressFamily::UNIX,
    };
    let flags = SocketFlags::NONBLOCK | SocketFlags::CLOEXEC;
    let sock = rustix::net::socket_with(family, SocketType::STREAM, flags, None).ok()?;
    let started = match addr {
        UpAddr::Tcp(a) => {
            let _ = rustix::net::sockopt::set_tcp_nodelay(&sock, true);
            rustix::net::connect(&sock, a)
        }
        UpAddr::Unix(p) => match rustix::net::SocketAddrUnix::new(p.as_path()) {
            Ok(a) => rustix::net::connect(&sock, &a),
            Err(e) => Err(e),
        },
    };
    match started {
        Ok(()) => Some((sock, false)),
        Err(Errno::INPROGRESS | Errno::INTR) => Some((sock, true)),
        Err(_) => None,
    }
}

/// Accepts one queued connection now, non-blocking and close-on-exec (`None`: none queued,
/// or accepting failed).
pub(crate) fn accept_now(listener: &OwnedFd) -> Option<(OwnedFd, Option<SocketAddr>)> {
    loop {
        return match rustix::net::acceptfrom_with(
            listener,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
        ) {
            Ok((sock, addr)) => Some((sock, addr.and_then(|a| SocketAddr::try_from(a).ok()))),
            Err(Errno::INTR | Errno::CONNABORTED) => continue,
            Err(_) => None,
        };
    }
}

/// Sends at most [`SENDFILE_CHUNK`] of the `len` bytes of `file` from `offset` (EINTR tried
/// again). `Ok(0)`: the file shrank, so the promised length can no longer be met.
pub(crate) fn sendfile(
    sock: &OwnedFd,
    file: &OwnedFd,
    offset: u64,
    len: u64,
) -> rustix::io::Result<usize> {
    loop {
        let mut off = offset;
        match rustix::fs::sendfile(sock, file, Some(&mut off), len.min(SENDFILE_CHUNK) as usize) {
            Err(Errno::INTR) => continue,
            r => return r,
        }
    }
}

/// One read from a kernel-TLS socket into `buf`: application data is `Received` as on any
/// socket; any other record (an alert, a handshake message) is a `Record` for the TLS layer,
/// its type the byte after the plaintext. `Err(buf)` gives the buffer back: nothing was
/// there (`None`), or the read ended the connection (`Eof`, `Failed`).
pub(crate) fn read_record(
    token: Token,
    fd: &OwnedFd,
    mut buf: Vec<u8>,
) -> Result<Completion, (Option<Completion>, Vec<u8>)> {
    match crate::sys::recv_tls_record(fd.as_fd(), &mut buf) {
        Ok((0, _)) => Err((Some(Completion::Eof { token }), buf)),
        Ok((_, crate::sys::TLS_APPLICATION_DATA)) => Ok(Completion::Received { token, buf }),
        Ok((_, kind)) => {
            buf.push(kind);
            Ok(Completion::Record { token, buf })
        }
        Err(e) if matches!(e.raw_os_error(), Some(libc::EAGAIN | libc::EINTR)) => Err((None, buf)),
        Err(e) => {
            tracing::debug!(error = %e, "kTLS read failed");
            Err((Some(Completion::Failed { token }), buf))
        }
    }
}
