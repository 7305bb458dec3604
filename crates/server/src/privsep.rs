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

/// The server's end of the keeper's socket, once a keeper runs; requests take turns.
static KEEPER: OnceLock<Mutex<OwnedFd>> = OnceLock::new();

/// Starts the keeper for `keep` (nothing to keep: no keeper). Call it as root, after the
/// files were first read and before the user is switched. At most one keeper per process.
pub(crate) fn start(keep: &Keep) -> io::Result<()> {
    if keep.is_empty() || KEEPER.get().is_some() {
        return Ok(());
    }
    let cstrings = |paths: &[PathBuf]| -> io::Result<Vec<CString>> {
        paths
            .iter()
            .map(|p| {
                CString::new(p.as_os_str().as_bytes()).map_err(|_| {
                    io::Error::new(io::ErrorKind::InvalidInput, "a path holds a NUL byte")
                })
            })
            .collect()
    };
    let (read, append) = (cstrings(&keep.read)?, cstrings(&keep.append)?);
    let (ours, theirs) = rustix::net::socketpair(
        AddressFamily::UNIX,
        SocketType::SEQPACKET,
        SocketFlags::CLOEXEC,
        None,
    )?;
    crate::sys::fork_keeper(theirs.as_fd(), |sock| serve(sock, &read, &append))?;
    drop(theirs);
    let _ = KEEPER.set(Mutex::new(ours));
    tracing::debug!(
        read = keep.read.len(),
        append = keep.append.len(),
        "privilege keeper started"
    );
    Ok(())
}

/// Opens `path` for reading: directly, or through the keeper when the system refuses and the
/// keeper holds that path.
pub fn open_read(path: &Path) -> io::Result<File> {
    match File::open(path) {
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

/// Whether `name` is a user of this system (or a numeric uid): what an owner or a `user`
/// setting names.
pub fn user_exists(name: &str) -> io::Result<()> {
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
    let sock = keeper.lock().unwrap_or_else(|e| e.into_inner());
    let bytes = path.as_os_str().as_bytes();
    if bytes.len() >= MAX_PATH {
        return Err(Errno::NAMETOOLONG.into());
    }
    let request = [&[op][..], bytes].concat();
    rustix::net::send(&*sock, &request, SendFlags::NOSIGNAL)?;
    let mut errno = [0u8; 4];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    let got = rustix::net::recvmsg(
        &*sock,
        &mut [IoSliceMut::new(&mut errno)],
        &mut control,
        RecvFlags::CMSG_CLOEXEC,
    )?;
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
    match (i32::from_ne_bytes(errno), fd) {
        (0, Some(fd)) => Ok(File::from(fd)),
        (0, None) => Err(io::Error::other("the privilege keeper sent no file")),
        (e, _) => Err(io::Error::from_raw_os_error(e)),
    }
}

/// The keeper's loop (in the forked child: system calls only, on memory made before the
/// fork). Returns never: the caller exits with its result.
fn serve(sock: BorrowedFd<'_>, read: &[CString], append: &[CString]) -> i32 {
    let mut buf = [0u8; MAX_PATH + 1];
    loop {
        let n = match rustix::net::recv(sock, &mut buf[..], RecvFlags::empty()) {
            Ok((0, _)) => return 0,
            Ok((n, _)) => n,
            Err(Errno::INTR) => continue,
            Err(_) => return 1,
        };
        let (op, path) = match buf.get(..n) {
            Some([op, path @ ..]) => (*op, path),
            _ => continue,
        };
        let (list, flags) = match op {
            OP_READ => (
                read,
                OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY | OFlags::CLOEXEC,
            ),
            OP_APPEND => (
                append,
                OFlags::WRONLY | OFlags::APPEND | OFlags::CREATE | OFlags::NOCTTY | OFlags::CLOEXEC,
            ),
            _ => {
                reply(sock, Err(Errno::INVAL));
                continue;
            }
        };
        let opened = match list.iter().find(|c| c.as_bytes() == path) {
            None => Err(Errno::ACCESS),
            Some(c) => {
                rustix::fs::open(c.as_c_str(), flags, Mode::from_raw_mode(0o644)).and_then(|fd| {
                    // Only regular files: a FIFO or device named there is refused.
                    match rustix::fs::fstat(&fd) {
                        Ok(st) if FileType::from_raw_mode(st.st_mode) == FileType::RegularFile => {
                            Ok(fd)
                        }
                        Ok(_) => Err(Errno::INVAL),
                        Err(e) => Err(e),
                    }
                })
            }
        };
        reply(sock, opened);
    }
}

/// The keeper's answer: `errno` (0 on success) and, on success, the descriptor.
fn reply(sock: BorrowedFd<'_>, opened: Result<OwnedFd, Errno>) {
    let code: i32 = match &opened {
        Ok(_) => 0,
        Err(e) => e.raw_os_error(),
    };
    let bytes = code.to_ne_bytes();
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
    let mut control = SendAncillaryBuffer::new(&mut space);
    let fds;
    if let Ok(fd) = &opened {
        fds = [fd.as_fd()];
        control.push(SendAncillaryMessage::ScmRights(&fds));
    }
    let _ = rustix::net::sendmsg(
        sock,
        &[IoSlice::new(&bytes)],
        &mut control,
        SendFlags::NOSIGNAL,
    );
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
}
