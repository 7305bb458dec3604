//! A binary upgrade without systemd, by socket handoff (as HAProxy's `-x` and Envoy's hot
//! restart): a running server offers its listening sockets on a Unix socket (`upgrade_socket`,
//! mode 0600, its own user or root only); a new process (`--takeover PATH`) receives every
//! one of them with SCM_RIGHTS, each with the address it belongs to, serves them, and only
//! then tells the old one to drain. Owns the wire format and both of its ends; it binds no
//! listener and serves no request itself.
//!
//! Invariant: the old process stops accepting only once the new one's workers accept from
//! the very same sockets, so no connection meets a closed port or a reset accept queue.
#![forbid(unsafe_code)]

use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::net::{
    RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, ReturnFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags,
};
use socket2::{Domain, SockAddr, Socket, Type};

/// Most descriptors one message carries (the kernel's SCM_MAX_FD is 253): a listener with
/// more sockets (more workers) goes in several messages under the same name.
const MAX_FDS_PER_MESSAGE: usize = 64;
/// Largest message of the handoff (a kind and an address or a Unix socket's path).
const MAX_MESSAGE_BYTES: usize = 4096;
/// Longest either side waits for the other's next message: a peer that stops answering
/// ends the handoff (the old process keeps serving) instead of holding it forever.
pub const HANDOFF_TIMEOUT: Duration = Duration::from_secs(30);
/// The upgrade socket's mode: only its owner (and root) may connect and take the listeners.
const UPGRADE_SOCKET_MODE: u32 = 0o600;

/// The last message of the listing.
const END: &[u8] = b"end";
/// The new process serves: the old one is to stop accepting and drain. It carries the new
/// process's QUIC relays (one per worker; none without QUIC listeners, or from a version
/// that had none, which an old process takes as before: it drops new clients' Initials).
const DRAIN: &[u8] = b"drain";
/// The old process's answer to [`DRAIN`]: it no longer accepts, nor offers.
const DRAINING: &[u8] = b"draining";
/// The old process already drains and offers nothing.
const REFUSED: &[u8] = b"refused";

/// What a handed-over socket is, which says how the new process serves it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A TCP listener's SO_REUSEPORT group: one socket per worker of the old process.
    Tcp,
    /// One socket every worker accepts from: a Unix listener, or a socket systemd passed.
    Shared,
    /// The admin listener.
    Admin,
    /// A QUIC listener's UDP SO_REUSEPORT group, one socket per worker.
    Udp,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Tcp => "tcp",
            Kind::Shared => "shared",
            Kind::Admin => "admin",
            Kind::Udp => "udp",
        }
    }

    fn parse(s: &str) -> Option<Kind> {
        [Kind::Tcp, Kind::Shared, Kind::Admin, Kind::Udp]
            .into_iter()
            .find(|k| k.name() == s)
    }
}

/// One listener's sockets, as offered or received: its kind, its address as the
/// configuration writes it (`127.0.0.1:8080`, `unix:/run/app.sock`), and its descriptors.
pub(crate) struct Entry {
    pub(crate) kind: Kind,
    pub(crate) addr: String,
    pub(crate) fds: Vec<OwnedFd>,
}

/// Why a takeover failed.
#[derive(Debug)]
pub enum HandoffError {
    /// Nothing listens on the upgrade socket (no server, or one without `upgrade_socket`).
    NoServer(PathBuf, io::Error),
    /// The old process already drains: it offers nothing.
    Refused(PathBuf),
    /// The exchange broke off or made no sense.
    Broken(PathBuf, String),
}

impl std::fmt::Display for HandoffError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HandoffError::NoServer(p, e) => write!(
                f,
                "cannot take over from {}: no running server offers its listeners there ({e})",
                p.display()
            ),
            HandoffError::Refused(p) => write!(
                f,
                "cannot take over from {}: that server is already draining",
                p.display()
            ),
            HandoffError::Broken(p, why) => {
                write!(f, "takeover from {} failed: {why}", p.display())
            }
        }
    }
}

impl std::error::Error for HandoffError {}

impl From<HandoffError> for io::Error {
    fn from(e: HandoffError) -> io::Error {
        let kind = match &e {
            HandoffError::NoServer(_, io) => io.kind(),
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, e.to_string())
    }
}

/// Sends one message: `body` and up to [`MAX_FDS_PER_MESSAGE`] descriptors.
fn send(sock: &impl AsFd, body: &[u8], fds: &[BorrowedFd<'_>]) -> io::Result<()> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS_PER_MESSAGE))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    if !fds.is_empty() && !control.push(SendAncillaryMessage::ScmRights(fds)) {
        return Err(io::Error::other("too many descriptors for one message"));
    }
    rustix::net::sendmsg(
        sock,
        &[IoSlice::new(body)],
        &mut control,
        SendFlags::NOSIGNAL,
    )?;
    Ok(())
}

/// Receives one message: its body and the descriptors it carried (close-on-exec). An empty
/// body with no descriptor is the end of the stream.
fn recv(sock: &impl AsFd) -> io::Result<(Vec<u8>, Vec<OwnedFd>)> {
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_FDS_PER_MESSAGE))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let mut body = vec![0u8; MAX_MESSAGE_BYTES];
    let got = rustix::net::recvmsg(
        sock,
        &mut [IoSliceMut::new(&mut body)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
    let mut fds = Vec::new();
    for m in control.drain() {
        if let RecvAncillaryMessage::ScmRights(got) = m {
            fds.extend(got);
        }
    }
    if got
        .flags
        .intersects(ReturnFlags::CTRUNC | ReturnFlags::TRUNC)
    {
        return Err(io::Error::other("a handoff message was cut short"));
    }
    body.truncate(got.bytes);
    Ok((body, fds))
}

/// The old process's side: the sockets it offers, until it drains.
#[derive(Clone, Default)]
pub(crate) struct Offer {
    /// Copies of the listening sockets, taken (and closed) once the server drains: held any
    /// longer, a socket would stay in its reuseport group with nobody accepting, and the
    /// kernel would keep queueing connections there.
    entries: Arc<Mutex<Option<Vec<Entry>>>>,
    /// The upgrade socket's path, removed when the offer ends.
    path: Option<PathBuf>,
    /// Set once a new process took the sockets: the Unix listeners' files are its own then,
    /// and the old process must not remove them as it exits.
    pub(crate) handed_over: Arc<std::sync::atomic::AtomicBool>,
    /// The new process's QUIC relays, one per its worker, set before `handed_over`: while
    /// this one drains, datagrams on the shared UDP sockets for none of its connections go
    /// there (see `driver::quic`).
    pub(crate) relays: Arc<Mutex<Vec<OwnedFd>>>,
}

impl Offer {
    /// An offer of `entries` on the upgrade socket at `path`.
    pub(crate) fn new(entries: Vec<Entry>, path: PathBuf) -> Offer {
        Offer {
            entries: Arc::new(Mutex::new(Some(entries))),
            path: Some(path),
            handed_over: Arc::default(),
            relays: Arc::default(),
        }
    }

    /// Ends the offer (the server drains): closes the copies and removes the socket's file.
    pub(crate) fn end(&self) {
        let taken = self
            .entries
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take();
        if taken.is_some()
            && let Some(p) = &self.path
        {
            let _ = std::fs::remove_file(p);
        }
    }

    /// Serves the upgrade socket `listener` on a thread of its own: each new process that
    /// connects gets the listing, and once it says it serves, `drain` runs (the server stops
    /// accepting and drains). A process of another user is refused.
    pub(crate) fn serve(
        self,
        listener: OwnedFd,
        drain: Box<dyn Fn() + Send>,
    ) -> io::Result<std::thread::JoinHandle<()>> {
        let listener = Socket::from(listener);
        std::thread::Builder::new()
            .name("linerate-upgrade".into())
            .spawn(move || {
                loop {
                    let conn = match listener.accept() {
                        Ok((c, _)) => c,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => {
                            tracing::warn!(error = %e, "upgrade socket: accept failed");
                            std::thread::sleep(Duration::from_millis(100));
                            continue;
                        }
                    };
                    match self.hand_over(&conn) {
                        Ok(true) => {
                            tracing::info!(
                                "upgrade: a new process serves the listeners; draining"
                            );
                            self.handed_over
                                .store(true, std::sync::atomic::Ordering::Relaxed);
                            drain();
                            self.end();
                            let _ = send(&conn, DRAINING, &[]);
                            return;
                        }
                        Ok(false) => return,
                        Err(e) => {
                            tracing::warn!(error = %e, "upgrade: the new process gave up; still serving")
                        }
                    }
                }
            })
    }

    /// One exchange: the listing, then the new process's word. `Ok(true)`: it serves and the
    /// old one must drain; `Ok(false)`: the offer had ended (refused).
    fn hand_over(&self, conn: &Socket) -> io::Result<bool> {
        let me = rustix::process::geteuid();
        let peer = rustix::net::sockopt::socket_peercred(conn)?;
        if peer.uid != me && !peer.uid.is_root() {
            return Err(io::Error::new(
                io::ErrorKind::PermissionDenied,
                format!("pid {} of another user asked", peer.pid.as_raw_nonzero()),
            ));
        }
        conn.set_read_timeout(Some(HANDOFF_TIMEOUT))?;
        {
            let entries = self.entries.lock().unwrap_or_else(|e| e.into_inner());
            let Some(entries) = entries.as_ref() else {
                let _ = send(conn, REFUSED, &[]);
                return Ok(false);
            };
            for e in entries {
                let head = format!("{} {}", e.kind.name(), e.addr);
                let fds: Vec<BorrowedFd<'_>> = e.fds.iter().map(|f| f.as_fd()).collect();
                for chunk in fds.chunks(MAX_FDS_PER_MESSAGE) {
                    send(conn, head.as_bytes(), chunk)?;
                }
            }
            send(conn, END, &[])?;
        }
        // The new process binds what it lacks and starts its workers meanwhile: allow for
        // that (a timeout here is a new process that never said it serves).
        conn.set_read_timeout(Some(HANDOFF_TIMEOUT))?;
        match recv(conn)? {
            (m, relays) if m == DRAIN => {
                *self.relays.lock().unwrap_or_else(|e| e.into_inner()) = relays;
                Ok(true)
            }
            (m, _) if m.is_empty() => Err(io::Error::other(
                "it closed the upgrade connection before serving",
            )),
            (m, _) => Err(io::Error::other(format!(
                "unexpected message {:?}",
                String::from_utf8_lossy(&m)
            ))),
        }
    }
}

/// Binds the upgrade socket at `path` (a SOCK_SEQPACKET Unix socket, mode 0600). A file
/// already there is replaced only when nothing answers on it (a crashed server's leftover).
pub(crate) fn bind_upgrade_socket(path: &Path) -> io::Result<OwnedFd> {
    if std::fs::symlink_metadata(path).is_ok() {
        let probe = Socket::new(Domain::UNIX, Type::SEQPACKET, None)?;
        if probe.connect(&SockAddr::unix(path)?).is_ok() {
            return Err(io::Error::new(
                io::ErrorKind::AddrInUse,
                format!(
                    "upgrade socket {}: a running server offers its listeners there (take them \
                     over with --takeover {0})",
                    path.display()
                ),
            ));
        }
        std::fs::remove_file(path)?;
    }
    let sock = Socket::new(Domain::UNIX, Type::SEQPACKET, None)?;
    // The mode is set before the socket listens: nobody can connect in between.
    sock.bind(&SockAddr::unix(path)?)?;
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(UPGRADE_SOCKET_MODE))?;
    sock.listen(4)?;
    sock.set_cloexec(true)?;
    Ok(sock.into())
}

/// The new process's side: the sockets received from the old one, claimed by the listeners
/// of the new configuration one by one; the rest are closed.
pub struct Taken {
    path: PathBuf,
    conn: Socket,
    entries: Vec<Entry>,
    /// The old process's QUIC listeners, in its order (the order of its datagrams'
    /// listener indexes when it forwards them).
    udp_order: Vec<String>,
}

impl Taken {
    /// Connects to the old process's upgrade socket at `path` and receives its listing.
    pub fn receive(path: &Path) -> Result<Taken, HandoffError> {
        let broken = |e: io::Error| HandoffError::Broken(path.to_path_buf(), e.to_string());
        let conn = Socket::new(Domain::UNIX, Type::SEQPACKET, None).map_err(broken)?;
        conn.connect(&SockAddr::unix(path).map_err(broken)?)
            .map_err(|e| HandoffError::NoServer(path.to_path_buf(), e))?;
        conn.set_read_timeout(Some(HANDOFF_TIMEOUT))
            .map_err(broken)?;
        let mut entries: Vec<Entry> = Vec::new();
        loop {
            let (body, fds) = recv(&conn).map_err(broken)?;
            if body == END {
                break;
            }
            if body == REFUSED {
                return Err(HandoffError::Refused(path.to_path_buf()));
            }
            if body.is_empty() {
                return Err(HandoffError::Broken(
                    path.to_path_buf(),
                    "the old process closed the connection mid-listing".into(),
                ));
            }
            let text = String::from_utf8_lossy(&body);
            let (kind, addr) = text
                .split_once(' ')
                .and_then(|(k, a)| Some((Kind::parse(k)?, a)))
                .ok_or_else(|| {
                    HandoffError::Broken(path.to_path_buf(), format!("unknown entry {text:?}"))
                })?;
            match entries.last_mut() {
                // The next part of a listener with more sockets than one message carries.
                Some(last) if last.kind == kind && last.addr == addr => last.fds.extend(fds),
                _ => entries.push(Entry {
                    kind,
                    addr: addr.to_string(),
                    fds,
                }),
            }
        }
        let udp_order = entries
            .iter()
            .filter(|e| e.kind == Kind::Udp)
            .map(|e| e.addr.clone())
            .collect();
        Ok(Taken {
            path: path.to_path_buf(),
            conn,
            entries,
            udp_order,
        })
    }

    /// The sockets of the old listener of `kind` on `addr` (the configuration's spelling),
    /// taken: none when the old process had no such listener.
    pub(crate) fn claim(&mut self, kind: Kind, addr: &str) -> Option<Vec<OwnedFd>> {
        let i = self
            .entries
            .iter()
            .position(|e| e.kind == kind && e.addr == addr)?;
        Some(self.entries.remove(i).fds)
    }

    /// The old process's QUIC listeners' addresses, in its listener order.
    pub(crate) fn udp_order(&self) -> &[String] {
        &self.udp_order
    }

    /// The path the sockets came from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Tells the old process that this one serves, and waits for it to stop accepting. The
    /// sockets no listener claimed are closed first (the old process holds them until its
    /// drain ends, so their queued connections are still accepted there). `relays`: this
    /// process's QUIC relays, one per worker, which the old one forwards to while it drains
    /// (none past the most one message carries, 64: the old one then drops new clients'
    /// Initials).
    pub fn finish(mut self, relays: Vec<OwnedFd>) -> Result<(), HandoffError> {
        let path = self.path.clone();
        let broken = |e: io::Error| HandoffError::Broken(path.clone(), e.to_string());
        for e in self.entries.drain(..) {
            tracing::info!(kind = e.kind.name(), addr = %e.addr, "upgrade: an old listener the configuration no longer has is closed");
        }
        let relays: Vec<BorrowedFd<'_>> = if relays.len() <= MAX_FDS_PER_MESSAGE {
            relays.iter().map(|f| f.as_fd()).collect()
        } else {
            Vec::new()
        };
        send(&self.conn, DRAIN, &relays).map_err(broken)?;
        match recv(&self.conn).map_err(broken)? {
            (m, _) if m == DRAINING => Ok(()),
            (m, _) => Err(HandoffError::Broken(
                path.clone(),
                format!(
                    "the old process answered {:?}, not draining",
                    String::from_utf8_lossy(&m)
                ),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listing with more sockets than one message carries arrives whole, each socket
    /// usable, and the old side drains only on the new side's word.
    #[test]
    fn every_socket_of_a_listing_crosses_and_drain_waits_for_the_word() {
        let dir = std::env::temp_dir().join(format!("linerate-handoff-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("up.sock");
        let listener = bind_upgrade_socket(&path).unwrap();
        let mode = std::os::unix::fs::PermissionsExt::mode(
            &std::fs::metadata(&path).unwrap().permissions(),
        );
        assert_eq!(mode & 0o777, 0o600);
        let many = MAX_FDS_PER_MESSAGE + 3;
        let tcp: Vec<OwnedFd> = (0..many)
            .map(|_| std::net::TcpListener::bind("127.0.0.1:0").unwrap().into())
            .collect();
        let udp = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
        let offer = Offer::new(
            vec![
                Entry {
                    kind: Kind::Tcp,
                    addr: "127.0.0.1:1".into(),
                    fds: tcp,
                },
                Entry {
                    kind: Kind::Udp,
                    addr: "127.0.0.1:1".into(),
                    fds: vec![udp.into()],
                },
            ],
            path.clone(),
        );
        let drained = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let d = drained.clone();
        let t = offer
            .clone()
            .serve(
                listener,
                Box::new(move || d.store(true, std::sync::atomic::Ordering::SeqCst)),
            )
            .unwrap();
        let mut taken = Taken::receive(&path).unwrap();
        let got = taken.claim(Kind::Tcp, "127.0.0.1:1").unwrap();
        assert_eq!(got.len(), many);
        for fd in &got {
            assert!(
                socket2::SockRef::from(fd)
                    .local_addr()
                    .unwrap()
                    .as_socket()
                    .is_some()
            );
        }
        assert!(taken.claim(Kind::Tcp, "127.0.0.1:2").is_none());
        assert_eq!(taken.udp_order(), ["127.0.0.1:1"]);
        assert!(!drained.load(std::sync::atomic::Ordering::SeqCst));
        // The new side's QUIC relays cross with the word to drain, usable on the old side.
        let (relay_rx, relay_tx) = std::os::unix::net::UnixDatagram::pair().unwrap();
        taken.finish(vec![relay_tx.into()]).unwrap();
        t.join().unwrap();
        assert!(drained.load(std::sync::atomic::Ordering::SeqCst));
        assert!(offer.handed_over.load(std::sync::atomic::Ordering::SeqCst));
        let relays = std::mem::take(&mut *offer.relays.lock().unwrap());
        assert_eq!(relays.len(), 1);
        std::os::unix::net::UnixDatagram::from(relays.into_iter().next().unwrap())
            .send(b"forwarded")
            .unwrap();
        let mut buf = [0u8; 16];
        assert_eq!(relay_rx.recv(&mut buf).unwrap(), 9);
        // The offer ended with the drain: its file is gone, and nothing answers there.
        assert!(matches!(
            Taken::receive(&path),
            Err(HandoffError::NoServer(..))
        ));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
