//! Opening a path below the root directory handle so that nothing can escape it.
//!
//! Owns every file-system call of the files module (open, fstat); it never reads file
//! contents and never touches a socket. Two confinements: `openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_MAGICLINKS` (symlinks that stay below the root are followed; one that leaves
//! it fails with EXDEV), or, where the kernel lacks openat2 or links are refused by policy,
//! a walk of `openat(…, O_NOFOLLOW)` one component at a time (no symlink is followed at all).
//! Invariant: only regular files are ever opened for reading; the type is checked on an
//! `O_PATH` handle first, so a FIFO or device is never opened (and could not block us).
#![forbid(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::path::Path;

use rustix::fs::{FileType, Mode, OFlags, ResolveFlags, Stat};
use rustix::io::Errno;

/// How paths are resolved below the root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Confinement {
    /// `openat2(RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS)`: links inside the root are followed.
    Beneath,
    /// Component-by-component `openat(O_NOFOLLOW)`: no symlink is followed.
    Walk,
}

/// `openat2` can fail with EAGAIN when a rename races with resolution; it is retried this
/// many times before the request is answered as an error.
const OPENAT2_RETRIES: usize = 4;

/// The identity and validators of one opened file. The open-file cache compares all of it
/// to see a change on disk: the status change time (ctime) too, which moves with every
/// write, even one that puts the mtime back (`cp -p`, `rsync -t --inplace`), and which no
/// one can set.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileMeta {
    pub dev: u64,
    pub ino: u64,
    pub size: u64,
    pub mtime_s: i64,
    pub mtime_ns: u32,
    pub ctime_s: i64,
    pub ctime_ns: u32,
}

impl FileMeta {
    // Stat field widths differ by target (c_long, c_ulong, i64, u32), hence the casts.
    #[allow(clippy::unnecessary_cast)]
    fn of(st: &Stat) -> FileMeta {
        FileMeta {
            dev: st.st_dev as u64,
            ino: st.st_ino as u64,
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime_s: st.st_mtime as i64,
            mtime_ns: st.st_mtime_nsec as u32,
            ctime_s: st.st_ctime as i64,
            ctime_ns: st.st_ctime_nsec as u32,
        }
    }
}

/// What is at a path below the root.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Probe {
    File(FileMeta),
    Dir,
    /// Absent, not reachable inside the root, or not a regular file or directory.
    Missing,
    /// The permission bits refuse us (EACCES/EPERM).
    Forbidden,
    /// Anything else (EMFILE, EIO, …): a server-side failure, not the client's.
    Error(Errno),
}

/// Opens the root directory as an `O_PATH` handle: it grants no read access by itself and
/// is only ever used as the starting point of confined lookups.
pub fn open_root(root: &Path) -> io::Result<OwnedFd> {
    Ok(rustix::fs::open(
        root,
        OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC,
        Mode::empty(),
    )?)
}

/// Which confinement this kernel supports: a probe of `openat2` on the root itself. Seccomp
/// filters in older container runtimes answer unknown syscalls with EPERM, not ENOSYS.
pub fn detect(root: BorrowedFd<'_>) -> Confinement {
    match openat2(root, ".", OFlags::PATH) {
        Err(Errno::NOSYS | Errno::PERM) => Confinement::Walk,
        _ => Confinement::Beneath,
    }
}

/// Looks at `rel` (a normalized relative path, `""` for the root) without opening it for
/// reading.
pub fn probe(root: BorrowedFd<'_>, rel: &str, how: Confinement) -> Probe {
    match resolve(root, rel, OFlags::PATH, how) {
        Ok(fd) => classify(&fd),
        Err(e) => from_errno(e),
    }
}

/// Opens the regular file at `rel` for reading, and checks that it is still the file
/// `expect` described when probed (same device and inode, still regular).
pub fn open_read(
    root: BorrowedFd<'_>,
    rel: &str,
    how: Confinement,
    expect: &FileMeta,
) -> Result<(OwnedFd, FileMeta), Probe> {
    // O_NONBLOCK: should the path be swapped for a FIFO after the probe, open must not wait
    // for a writer; the fstat below then refuses it.
    let flags = OFlags::RDONLY | OFlags::NONBLOCK | OFlags::NOCTTY;
    let fd = resolve(root, rel, flags, how).map_err(from_errno)?;
    match classify(&fd) {
        Probe::File(meta) if meta.dev == expect.dev && meta.ino == expect.ino => Ok((fd, meta)),
        // Replaced between the probe and the open: answer 404 now; the next lookup probes
        // again.
        Probe::File(_) | Probe::Missing | Probe::Dir => Err(Probe::Missing),
        other => Err(other),
    }
}

/// Opens the directory at `rel` for reading its entries (a listing), under the same
/// confinement as a file.
pub fn open_dir(root: BorrowedFd<'_>, rel: &str, how: Confinement) -> Result<OwnedFd, Probe> {
    let flags = OFlags::RDONLY | OFlags::DIRECTORY | OFlags::NONBLOCK;
    resolve(root, rel, flags, how).map_err(from_errno)
}

/// What a listing shows of one entry of a directory opened by [`open_dir`], looked at
/// without following a link: a regular file (its size and mtime) or a directory; `None` for
/// links, FIFOs, sockets, devices and what vanished.
pub fn entry_meta(dir: BorrowedFd<'_>, name: &std::ffi::CStr) -> Option<(bool, FileMeta)> {
    let st = rustix::fs::statat(dir, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW).ok()?;
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Some((false, FileMeta::of(&st))),
        FileType::Directory => Some((true, FileMeta::of(&st))),
        _ => None,
    }
}

fn classify(fd: &OwnedFd) -> Probe {
    let st = match rustix::fs::fstat(fd) {
        Ok(st) => st,
        Err(e) => return from_errno(e),
    };
    match FileType::from_raw_mode(st.st_mode) {
        FileType::RegularFile => Probe::File(FileMeta::of(&st)),
        FileType::Directory => Probe::Dir,
        // Symlinks (seen with O_NOFOLLOW), FIFOs, sockets, devices: never served.
        _ => Probe::Missing,
    }
}

/// Opens `rel` below `root` with `flags` (plus O_CLOEXEC) under the given confinement.
fn resolve(
    root: BorrowedFd<'_>,
    rel: &str,
    flags: OFlags,
    how: Confinement,
) -> rustix::io::Result<OwnedFd> {
    let path = if rel.is_empty() { "." } else { rel };
    match how {
        Confinement::Beneath => {
            let mut tries = 0;
            loop {
                match openat2(root, path, flags) {
                    Err(Errno::AGAIN) if tries < OPENAT2_RETRIES => tries += 1,
                    other => return other,
                }
            }
        }
        Confinement::Walk => walk(root, path, flags),
    }
}

fn openat2(root: BorrowedFd<'_>, path: &str, flags: OFlags) -> rustix::io::Result<OwnedFd> {
    rustix::fs::openat2(
        root,
        path,
        flags | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::BENEATH | ResolveFlags::NO_MAGICLINKS,
    )
}

/// One `openat` per component, each with O_NOFOLLOW: directories are entered as `O_PATH`
/// handles, and a symlink anywhere fails (ELOOP/ENOTDIR) or is seen as a link by fstat.
/// The path holds no `..` (see `path.rs`), so the walk only ever descends.
fn walk(root: BorrowedFd<'_>, path: &str, flags: OFlags) -> rustix::io::Result<OwnedFd> {
    let (dirs, last) = match path.rsplit_once('/') {
        Some((dirs, last)) => (Some(dirs), last),
        None => (None, path),
    };
    let mut held: Option<OwnedFd> = None;
    for component in dirs.into_iter().flat_map(|d| d.split('/')) {
        debug_assert!(component != ".." && !component.is_empty());
        let at = held.as_ref().map_or(root, |fd| fd.as_fd());
        let next = rustix::fs::openat(
            at,
            component,
            OFlags::PATH | OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        held = Some(next);
    }
    let at = held.as_ref().map_or(root, |fd| fd.as_fd());
    rustix::fs::openat(
        at,
        last,
        flags | OFlags::NOFOLLOW | OFlags::CLOEXEC,
        Mode::empty(),
    )
}

/// Maps a failed lookup to what the client may learn: missing things (and escapes, which
/// must look missing) are 404, permission problems 403, the rest a server error.
fn from_errno(e: Errno) -> Probe {
    match e {
        Errno::NOENT
        | Errno::NOTDIR
        | Errno::LOOP
        | Errno::XDEV
        | Errno::NAMETOOLONG
        | Errno::NXIO
        | Errno::NODEV
        | Errno::ISDIR => Probe::Missing,
        Errno::ACCESS | Errno::PERM => Probe::Forbidden,
        other => Probe::Error(other),
    }
}
