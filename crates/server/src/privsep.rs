//! The privilege keeper: what a server that dropped root (`user = "…"`) still needs root for,
//! done by a small process forked just before the drop that keeps root and opens exactly the
//! files the configuration named at start, nothing else — the job nginx keeps its master for.
//!
//! - **Reading**: certificate chains and private keys (SIGHUP reads them again; certbot leaves
//!   keys `root:root 0600` under `/etc/letsencrypt`), error pages, the configuration file.
//! - **Appending**: the access log (SIGUSR1 reopens it after logrotate; the directory is
//!   usually root's).
//!
//! Everything else (site roots, new paths a reloaded file names) is opened by the server as
//! the user it became. [`open_read`], [`read`] and [`open_append`] try that first and ask the
//! keeper only when the system says no, so a process that never dropped root never asks.
//!
//! The keeper is the child of a `fork` in a process that already runs threads: between the
//! fork and its exit it only makes system calls on memory prepared before the fork (the list
//! of paths, stack buffers) — no allocation, no lock, no panic path. It answers one request
//! per `SOCK_SEQPACKET` message (`[op][path]` in, `errno` and the opened descriptor by
//! `SCM_RIGHTS` out), opens only a path byte-equal to one kept, and exits when the server's
//! end of the socket closes (the server exited, however it ended). A compromised worker can
//! make it open only those files, which it held at start anyway.
#![forbid(unsafe_code)]

use std::ffi::CString;
use std::fs::File;
use std::io::{self, IoSlice, IoSliceMut};
use std::mem::MaybeUninit;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

use rustix::fs::{FileType, Mode, OFlags};
use rustix::io::Errno;
use rustix::net::{
    AddressFamily, RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, SendAncillaryBuffer,
    SendAncillaryMessage, SendFlags, SocketFlags, SocketType,
};

/// The files the keeper opens for the server after it drops root.
#[derive(Clone, Debug, Default)]
pub struct Keep {
    /// Opened for reading: certificates, keys, error pages, a configuration file.
    pub read: Vec<PathBuf>,
    /// Opened for appending, created when missing: access logs.
    pub append: Vec<PathBuf>,
}

impl Keep {
    fn is_empty(&self) -> bool {
        self.read.is_empty() && self.append.is_empty()
    }
}

const OP_READ: u8 = 1;
const OP_APPEND: u8 = 2;
/// The longest path a request carries (Linux's PATH_MAX, its NUL included).
const MAX_PATH: usize = 4096;
/// A request: its sequence number (4 bytes), the operation, the path.
const HEADER: usize = 5;
/// KEEPER_TIMEOUT: the longest the server waits for the keeper's answer; a keeper that does
/// not answer costs one reload, never a stuck signal thread.
const KEEPER_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The server's end of the keeper's socket, once a keeper runs; requests take turns.
static KEEPER: OnceLock<Mutex<Link>> = OnceLock::new();

/// The server's side of the keeper.
struct Link {
    sock: OwnedFd,
    /// The next request's sequence number: an answer that comes after its request gave up
    /// waiting carries an older one and is thrown away.
    seq: u32,
}

/// The user the server becomes: the keeper keeps only paths this user cannot redirect.
pub(crate) struct Target {
    pub uid: u32,
    /// Its primary and supplementary groups.
    pub gids: Vec<u32>,
}

/// Starts the keeper for `keep` (nothing to keep: no keeper). Call it as root, after the
/// files were first read and before the user is switched to `target`. At most one keeper
/// per process.
///
/// The keeper opens paths as root and follows symlinks (certbot's `live/` files are links), so
/// a path the server's user could redirect — an entry on the way that it owns, or a directory
/// on the way it may write, where it could plant a link to any file (nginx's CVE-2016-1247) —
/// is not kept: the server opens it as itself, and a warning says so.
pub(crate) fn start(keep: &Keep, target: &Target) -> io::Result<()> {
    if keep.is_empty() || KEEPER.get().is_some() {
        return Ok(());
    }
    let safe = |paths: &[PathBuf]| -> io::Result<Vec<CString>> {
        let mut out = Vec::new();
        for p in paths {
            if let Some(why) = redirectable(p, target) {
                tracing::warn!(
                    path = %p.display(),
                    "not kept for reloads after the privilege drop: {why}; the server will \
                     open it as its own user"
                );
                continue;
            }
            out.push(CString::new(p.as_os_str().as_bytes()).map_err(|_| {
                io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte")
            })?);
        }
        Ok(out)
    };
    let (read, append) = (safe(&keep.read)?, safe(&keep.append)?);
    if read.is_empty() && append.is_empty() {
        return Ok(());
    }
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    rustix::net::sockopt::set_socket_timeout(
        &ours,
        rustix::net::sockopt::Timeout::Recv,
        Some(KEEPER_TIMEOUT),
    )?;
    crate::sys::fork_keeper(theirs.as_fd(), |sock| serve(sock, &read, &append))?;
    drop(theirs);
    let _ = KEEPER.set(Mutex::new(Link { sock: ours, seq: 0 }));
    tracing::debug!(
        read = read.len(),
        append = append.len(),
        "privilege keeper started"
    );
    Ok(())
}

/// Why `target` could make `path` name another file, if it could: an entry on the way that
/// it owns, or a directory on the way it may write (a sticky directory only for entries
/// that are missing or its own). Both the path as given and the file it resolves to now
/// are walked.
fn redirectable(path: &Path, target: &Target) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let writable = |m: &std::fs::Metadata| {
        let bits = if m.uid() == target.uid {
            0o200
        } else if target.gids.contains(&m.gid()) {
            0o020
        } else {
            0o002
        };
        m.mode() & bits != 0
    };
    let walk = |p: &Path| -> Option<String> {
        let mut at = PathBuf::new();
        for part in p.components() {
            let parent = at.clone();
            at.push(part);
            if parent.as_os_str().is_empty() {
                continue; // "/" itself
            }
            let Ok(dir) = std::fs::metadata(&parent) else {
                return Some(format!("{} cannot be examined", parent.display()));
            };
            let entry = std::fs::symlink_metadata(&at).ok();
            if let Some(e) = &entry
                && e.uid() == target.uid
            {
                return Some(format!("{} belongs to the server's user", at.display()));
            }
            let sticky = dir.mode() & 0o1000 != 0;
            if writable(&dir) && !(sticky && entry.is_some()) {
                return Some(format!(
                    "the server's user may write {}, where a link could point anywhere",
                    parent.display()
                ));
            }
        }
        None
    };
    let Ok(absolute) = std::path::absolute(path) else {
        return Some("it cannot be made absolute".into());
    };
    walk(&absolute).or_else(|| std::fs::canonicalize(&absolute).ok().and_then(|c| walk(&c)))
}

/// Opens `path` for reading: directly, or through the keeper when the system refuses and the
/// keeper holds that path. Never blocks: a FIFO named there opens at once (and reads fail).
pub fn open_read(path: &Path) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    let direct = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path);
    match direct {
        Err(e) if denied(&e) && KEEPER.get().is_some() => ask(OP_READ, path).map_err(|k| {
            // The keeper's own refusal (a path it does not keep) says less than the first.
            if k.kind() == io::ErrorKind::PermissionDenied {
                e
            } else {
                k
            }
        }),
        r => r,
    }
}

/// The contents of `path`, read as [`open_read`] opens it.
pub fn read(path: &Path) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    io::Read::read_to_end(&mut open_read(path)?, &mut out)?;
    Ok(out)
}

/// [`read`] as UTF-8 text.
pub fn read_to_string(path: &Path) -> io::Result<String> {
    String::from_utf8(read(path)?)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "not UTF-8 text"))
}

/// Opens `path` for appending (creating it), as [`open_read`] does for reading.
pub fn open_append(path: &Path) -> io::Result<File> {
    let direct = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    match direct {
        Err(e) if denied(&e) && KEEPER.get().is_some() => ask(OP_APPEND, path).map_err(|k| {
            if k.kind() == io::ErrorKind::PermissionDenied {
                e
            } else {
                k
            }
        }),
        r => r,
    }
}

/// Whether `name` is a user of the user database, as a user to switch to must be (it needs
/// a group).
pub fn user_exists(name: &str) -> io::Result<()> {
    match crate::sys::lookup_user(name)? {
        (_, Some(_)) => Ok(()),
        (_, None) => Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no user named {name:?} (a number names no group to switch to)"),
        )),
    }
}

/// Whether `name` is a user of this system or a numeric uid: what a socket's owner may be.
pub fn owner_exists(name: &str) -> io::Result<()> {
    crate::sys::lookup_user(name).map(|_| ())
}

/// Whether `name` is a group of this system (or a numeric gid).
pub fn group_exists(name: &str) -> io::Result<()> {
    crate::sys::lookup_group(name).map(|_| ())
}

fn denied(e: &io::Error) -> bool {
    e.kind() == io::ErrorKind::PermissionDenied
}

/// One request to the keeper.
fn ask(op: u8, path: &Path) -> io::Result<File> {
    let keeper = KEEPER.get().expect("checked by the caller");
    let mut link = keeper.lock().unwrap_or_else(|e| e.into_inner());
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= MAX_PATH {
        return Err(Errno::NAMETOOLONG.into());
    }
    link.seq = link.seq.wrapping_add(1);
    let seq = link.seq;
    let request = [&seq.to_ne_bytes()[..], &[op], bytes].concat();
    rustix::net::send(&link.sock, &request, SendFlags::NOSIGNAL)?;
    loop {
        let mut answer = [0u8; 8];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = RecvAncillaryBuffer::new(&mut space);
        let got = match rustix::net::recvmsg(
            &link.sock,
            &mut [IoSliceMut::new(&mut answer)],
            &mut control,
            RecvFlags::CMSG_CLOEXEC,
        ) {
            Ok(got) => got,
            Err(Errno::INTR) => continue,
            Err(Errno::AGAIN) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the privilege keeper did not answer",
                ));
            }
            Err(e) => return Err(e.into()),
        };
        // A descriptor that came with the answer is owned (and closed) here whatever it is.
        let mut fd: Option<OwnedFd> = None;
        for msg in control.drain() {
            if let RecvAncillaryMessage::ScmRights(fds) = msg {
                for f in fds {
                    fd.get_or_insert(f);
                }
            }
        }
        if got.bytes == 0 {
            return Err(io::Error::new(
                io::ErrorKind::BrokenPipe,
                "the privilege keeper is gone",
            ));
        }
        let [a, b, c, d, e0, e1, e2, e3] = answer;
        if u32::from_ne_bytes([a, b, c, d]) != seq {
            continue; // the late answer to a request that stopped waiting
        }
        return match (i32::from_ne_bytes([e0, e1, e2, e3]), fd) {
            (0, Some(fd)) => Ok(File::from(fd)),
            (0, None) => Err(io::Error::other("the privilege keeper sent no file")),
            (e, _) => Err(io::Error::from_raw_os_error(e)),
        };
    }
}

/// The keeper's loop (in the forked child: system calls only, on memory made before the
/// fork). Returns when the server's end closes; the caller exits with the result.
fn serve(sock: BorrowedFd<'_>, read: &[CString], append: &[CString]) -> i32 {
    let mut buf = [0u8; HEADER + MAX_PATH];
    loop {
        let n = match rustix::net::recv(sock, &mut buf[..], RecvFlags::empty()) {
            Ok((0, _)) => return 0,
            Ok((n, _)) => n,
            Err(Errno::INTR) => continue,
            Err(_) => return 1,
        };
        let (seq, op, path) = match buf.get(..n) {
            Some([a, b, c, d, op, path @ ..]) => ([*a, *b, *c, *d], *op, path),
            _ => continue,
        };
        // Never blocking (a FIFO named there opens at once, then is refused as no regular
        // file): one stuck open would stop every reload after it.
        let common = OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC;
        let (list, flags) = match op {
            OP_READ => (read, OFlags::RDONLY | common),
            OP_APPEND => (
                append,
                OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | common,
            ),
            _ => {
                reply(sock, seq, Err(Errno::INVAL));
                continue;
            }
        };
        let opened =
            match list.iter().find(|c| c.as_bytes() == path) {
                None => Err(Errno::ACCESS),
                Some(c) => rustix::fs::open(c.as_c_str(), flags, Mode::from_raw_mode(0o644))
                    .and_then(|fd| match rustix::fs::fstat(&fd) {
                        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                            Ok(fd)
                        }
                        Ok(_) => Err(Errno::INVAL),
                        Err(e) => Err(e),
                    }),
            };
        reply(sock, seq, opened);
    }
}

/// The keeper's answer: the request's sequence number, `errno` (0 on success) and, on
/// success, the descriptor. An answer that cannot carry the descriptor goes out without it,
/// so the server is never left waiting.
fn reply(sock: BorrowedFd<'_>, seq: [u8; 4], opened: Result<OwnedFd, Errno>) {
    let send = |code: i32, fd: Option<BorrowedFd<'_>>| {
        let [e0, e1, e2, e3] = code.to_ne_bytes();
        let bytes = [seq[0], seq[1], seq[2], seq[3], e0, e1, e2, e3];
        let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
        let mut control = SendAncillaryBuffer::new(&mut space);
        let fds;
        if let Some(fd) = fd {
            fds = [fd];
            control.push(SendAncillaryMessage::ScmRights(&fds));
        }
        rustix::net::sendmsg(
            sock,
            &[IoSlice::new(&bytes)],
            &mut control,
            SendFlags::NOSIGNAL,
        )
    };
    let sent = match &opened {
        Ok(fd) => send(0, Some(fd.as_fd())),
        Err(e) => send(e.raw_os_error(), None),
    };
    if let Err(e) = sent
        && opened.is_ok()
    {
        let _ = send(e.raw_os_error(), None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Without a keeper (never started in unit tests) the calls are plain opens.
    #[test]
    fn without_a_keeper_opens_are_direct() {
        let dir = std::env::temp_dir().join(format!("linerate-privsep-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("a.txt");
        std::fs::write(&f, b"hello").unwrap();
        assert_eq!(read(&f).unwrap(), b"hello");
        assert_eq!(read_to_string(&f).unwrap(), "hello");
        let log = dir.join("log");
        io::Write::write_all(&mut open_append(&log).unwrap(), b"x").unwrap();
        io::Write::write_all(&mut open_append(&log).unwrap(), b"y").unwrap();
        assert_eq!(std::fs::read(&log).unwrap(), b"xy");
        assert_eq!(
            read(&dir.join("missing")).unwrap_err().kind(),
            io::ErrorKind::NotFound
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
    /// A path is kept only when the server's user could not make it name another file
    /// (as a review of the keeper found: nginx's CVE-2016-1247 was a log directory the
    /// worker's user could write, where it planted a link that root then followed).
    #[test]
    fn a_path_the_user_could_redirect_is_not_kept() {
        use std::os::unix::fs::PermissionsExt;
        let d = std::env::temp_dir().join(format!("linerate-keep-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        let mode = |p: &Path, m: u32| {
            std::fs::set_permissions(p, std::fs::Permissions::from_mode(m)).unwrap()
        };
        for (dir, m) in [("safe", 0o755), ("open", 0o777), ("sticky", 0o1777)] {
            std::fs::create_dir_all(d.join(dir)).unwrap();
            mode(&d.join(dir), m);
            std::fs::write(d.join(dir).join("f"), b"x").unwrap();
        }
        mode(&d, 0o755);
        std::os::unix::fs::symlink(d.join("open/f"), d.join("safe/link")).unwrap();
        let me = rustix::process::getuid().as_raw();
        let other = Target {
            uid: me.wrapping_add(12345),
            gids: vec![me.wrapping_add(12345)],
        };
        let kept = |p: &str, t: &Target| redirectable(&d.join(p), t).is_none();
        assert!(kept("safe/f", &other));
        assert!(!kept("open/f", &other), "a directory it may write");
        assert!(
            kept("sticky/f", &other),
            "a sticky directory, an entry not its own"
        );
        assert!(
            !kept("sticky/missing", &other),
            "a name it could create first"
        );
        assert!(
            !kept("safe/missing-dir/f", &other),
            "a path that cannot be examined"
        );
        assert!(
            !kept("safe/link", &other),
            "a link into a directory it may write"
        );
        let me = Target {
            uid: me,
            gids: vec![],
        };
        assert!(!kept("safe/f", &me), "an entry on the way that it owns");
        let _ = std::fs::remove_dir_all(&d);
    }
}
