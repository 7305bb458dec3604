//! The one room where the server crate uses `unsafe`: attaching a classic BPF program to a
//! SO_REUSEPORT group, handing TLS session keys to the kernel (TCP_ULP "tls", then
//! SOL_TLS TLS_TX/TLS_RX) and reading and writing kTLS records with their record type in a
//! control message (TLS_GET_RECORD_TYPE / TLS_SET_RECORD_TYPE), which neither rustix nor
//! socket2 wraps, and reading the coarse
//! clocks through libc (rustix's own vDSO lookup does not run under valgrind, which the lab's
//! instruction counts need), looking users and groups up (getpwnam_r, getgrnam_r) and
//! switching the process to another user after binding (initgroups, setgid, setuid: glibc
//! applies them to every thread),
//! and reading file bytes onto the end of a buffer without zeroing it first (HTTP/2 DATA),
//! and forking the privilege keeper (privsep.rs) with the set-up its child runs,
//! and taking ownership of the listening sockets systemd passes (socket activation),
//! and registering a worker's epoll instance in its tokio runtime's reactor (tokio 1.54 made
//! `AsyncFd`'s registration `unsafe`: the fd must stay open while registered),
//! and the io_uring backend's ring ([`Ring`]: the submissions point into buffers it keeps
//! until their last completion, and leaks rather than frees while the kernel may use them).
//!
//! Everything else (epoll, sockets, affinity, eventfd) goes through rustix's safe API. Each
//! unsafe block carries a SAFETY comment; clippy denies undocumented ones.
#![allow(unsafe_code)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};

/// Registers `fd` (a worker's epoll instance, duplicated) for readability in the current
/// tokio runtime's reactor (`crate::runtime`).
pub(crate) fn watch_in_tokio(
    fd: std::os::fd::OwnedFd,
) -> io::Result<tokio::io::unix::AsyncFd<std::os::fd::OwnedFd>> {
    // SAFETY: the `AsyncFd` owns the descriptor: it is neither closed nor replaced while
    // registered, and is deregistered when the `AsyncFd` is dropped, before it closes.
    let registered = unsafe {
        tokio::io::unix::AsyncFd::register_with_interest(fd, tokio::io::Interest::READABLE)
    };
    registered.map_err(io::Error::from)
}

/// Reads up to `n` bytes of `fd` from `offset` onto the end of `buf`, into its spare capacity
/// (no zeroing first: HTTP/2 copies file bodies into DATA frames, and zeroing each 16 KiB
/// frame before the read overwrote it cost as much as the copy). Returns the bytes read.
#[cfg_attr(not(feature = "http2"), allow(dead_code))]
pub(crate) fn pread_append(
    fd: BorrowedFd<'_>,
    buf: &mut Vec<u8>,
    n: usize,
    offset: u64,
) -> io::Result<usize> {
    buf.reserve(n);
    let spare = &mut buf.spare_capacity_mut()[..n];
    let (init, _) = rustix::io::pread(fd, spare, offset)?;
    let got = init.len();
    // SAFETY: rustix returns as `init` exactly the prefix of the spare capacity that pread
    // wrote, so the vector's first `len + got` bytes are initialized (and `got <= n` fits the
    // capacity reserved above).
    unsafe { buf.set_len(buf.len() + got) };
    Ok(got)
}

/// Calls a `get*_r` lookup with a scratch buffer, growing it while the answer does not fit
/// (ERANGE: a large group from LDAP). `call` gets the buffer and returns the C result code.
fn with_scratch<T>(
    mut call: impl FnMut(&mut [libc::c_char]) -> (i32, Option<T>),
) -> io::Result<Option<T>> {
    let mut len = 16 * 1024;
    loop {
        let mut buf = vec![0 as libc::c_char; len];
        match call(&mut buf) {
            (0, found) => return Ok(found),
            (libc::ERANGE, _) if len < 16 << 20 => len *= 4,
            (rc, _) => return Err(io::Error::from_raw_os_error(rc)),
        }
    }
}

/// The uid and primary gid of user `name` from the user database; a number that names no
/// user there is that uid, without a group.
pub(crate) fn lookup_user(name: &str) -> io::Result<(u32, Option<u32>)> {
    let cname = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "user name holds NUL"))?;
    let found = with_scratch(|buf| {
        // SAFETY: passwd is a plain C struct; all-zero (null pointers, zero ids) is a valid
        // value that getpwnam_r overwrites.
        let mut pwd: libc::passwd = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::passwd = std::ptr::null_mut();
        // SAFETY: every pointer is valid for the call: the NUL-terminated name, the struct,
        // the scratch buffer with its true length, and the out-pointer; only the ids are read
        // back, while `buf` still lives.
        let rc = unsafe {
            libc::getpwnam_r(
                cname.as_ptr(),
                &mut pwd,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        };
        (rc, (!found.is_null()).then_some((pwd.pw_uid, pwd.pw_gid)))
    })?;
    match found {
        Some((uid, gid)) => Ok((uid, Some(gid))),
        None => match name.parse::<u32>() {
            Ok(uid) => Ok((uid, None)),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("no user named {name:?}"),
            )),
        },
    }
}

/// The gid of group `name` (a name from the group database, or a number).
pub(crate) fn lookup_group(name: &str) -> io::Result<u32> {
    let cname = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "group name holds NUL"))?;
    let found = with_scratch(|buf| {
        // SAFETY: group is a plain C struct; all-zero is a valid value that getgrnam_r
        // overwrites.
        let mut grp: libc::group = unsafe { std::mem::zeroed() };
        let mut found: *mut libc::group = std::ptr::null_mut();
        // SAFETY: as in lookup_user: valid pointers and the buffer's true length; only the id
        // is read back.
        let rc = unsafe {
            libc::getgrnam_r(
                cname.as_ptr(),
                &mut grp,
                buf.as_mut_ptr(),
                buf.len(),
                &mut found,
            )
        };
        (rc, (!found.is_null()).then_some(grp.gr_gid))
    })?;
    match found {
        Some(gid) => Ok(gid),
        None => name.parse::<u32>().map_err(|_| {
            io::Error::new(io::ErrorKind::NotFound, format!("no group named {name:?}"))
        }),
    }
}

/// Every group user `name` (primary group `gid`) is in: what it will be after the switch.
pub(crate) fn user_groups(name: &str, gid: u32) -> io::Result<Vec<u32>> {
    let cname = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "user name holds NUL"))?;
    let mut n: libc::c_int = 64;
    loop {
        let mut groups = vec![0 as libc::gid_t; n as usize];
        let mut got = n;
        // SAFETY: the name is NUL-terminated; `groups` holds `got` entries, and getgrouplist
        // writes at most that many, setting `got` to the true count.
        let rc = unsafe { libc::getgrouplist(cname.as_ptr(), gid, groups.as_mut_ptr(), &mut got) };
        if rc >= 0 {
            groups.truncate(got.max(0) as usize);
            return Ok(groups);
        }
        if got <= n || n > 1 << 16 {
            return Err(io::Error::other("getgrouplist failed"));
        }
        n = got;
    }
}

/// Switches the whole process to user `name`: its supplementary groups, its group, then its
/// user id (in that order: after setuid the others are no longer allowed). glibc applies each
/// to every thread of the process. Returns the new (uid, gid).
pub(crate) fn switch_user(name: &str) -> io::Result<(u32, u32)> {
    let (uid, Some(gid)) = lookup_user(name)? else {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!("no user named {name:?} (a number names no group to switch to)"),
        ));
    };
    let cname = std::ffi::CString::new(name)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "user name holds NUL"))?;
    // SAFETY: initgroups reads the NUL-terminated name and takes a plain id.
    if unsafe { libc::initgroups(cname.as_ptr(), gid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: setgid and setuid take plain ids and touch no memory of ours.
    if unsafe { libc::setgid(gid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: as above.
    if unsafe { libc::setuid(uid) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok((uid, gid))
}

/// Forks the privilege keeper (`crate::privsep`). The child ignores the signals the server
/// handles (a signal to the process group is the server's to act on; the keeper exits when
/// the server's end of its socket closes), puts its socket at descriptor 3, points 0-2 at
/// `/dev/null`, closes every other descriptor it inherited (listeners, epoll, eventfds), runs
/// `serve` and exits with its code. Returns the child's pid to the parent.
pub(crate) fn fork_keeper(
    sock: BorrowedFd<'_>,
    serve: impl FnOnce(BorrowedFd<'_>) -> i32,
) -> io::Result<i32> {
    let raw = sock.as_raw_fd();
    // Signals wait until the child has ignored the server's: a handler the parent installed
    // (signal-hook's writes to a pipe it shares with the parent) must never run in the child.
    // SAFETY: sigset_t is plain data that sigfillset fills in; pthread_sigmask reads `all`
    // and writes the old mask into `old`, both valid for the calls.
    let mut all: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    let mut old: libc::sigset_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe {
        libc::sigfillset(&mut all);
        libc::pthread_sigmask(libc::SIG_SETMASK, &all, &mut old);
    }
    // SAFETY: fork copies the process with one thread, this one. The child runs only
    // async-signal-safe system calls (signal, sigprocmask, dup2, open, close_range, close) and
    // then `serve`, which by its contract (privsep.rs) makes system calls on memory prepared
    // before the fork and never allocates, takes a lock or unwinds; it ends in _exit. So no
    // lock that another thread held at the fork is ever taken in the child, and no destructor
    // runs twice.
    let pid = unsafe { libc::fork() };
    if pid != 0 {
        // SAFETY: restores the mask saved above.
        unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
    }
    match pid {
        -1 => Err(io::Error::last_os_error()),
        0 => {
            keeper_prelude(raw);
            // SAFETY: the server's signals are ignored now; unblocking delivers nothing of
            // theirs to a handler.
            unsafe { libc::pthread_sigmask(libc::SIG_SETMASK, &old, std::ptr::null_mut()) };
            // SAFETY: the prelude put the socket at 3, open for the rest of the child's life.
            let sock = unsafe { BorrowedFd::borrow_raw(3) };
            let code = serve(sock);
            // SAFETY: _exit ends the child at once, without running the atexit handlers or
            // flushing the stdio buffers it copied from the parent.
            unsafe { libc::_exit(code) }
        }
        pid => Ok(pid),
    }
}

/// The keeper child's set-up, before it serves (see [`fork_keeper`]).
fn keeper_prelude(sock: i32) {
    for sig in [
        libc::SIGHUP,
        libc::SIGINT,
        libc::SIGTERM,
        libc::SIGQUIT,
        libc::SIGUSR1,
        libc::SIGUSR2,
        libc::SIGPIPE,
    ] {
        // SAFETY: signal with SIG_IGN installs no handler and touches no memory of ours.
        unsafe { libc::signal(sig, libc::SIG_IGN) };
    }
    if sock != 3 {
        // SAFETY: dup2 takes two descriptor numbers; whatever was at 3 is closed, as every
        // inherited descriptor is below.
        unsafe { libc::dup2(sock, 3) };
    }
    // SAFETY: open reads the NUL-terminated literal; the result is a descriptor or -1.
    let null = unsafe { libc::open(c"/dev/null".as_ptr(), libc::O_RDWR) };
    for fd in 0..3 {
        if null < 0 {
            // No /dev/null: close them, so no inherited descriptor (the server's end of the
            // socket, if the server started with stdio closed) outlives the server here.
            // SAFETY: close takes a plain number.
            unsafe { libc::close(fd) };
        } else if fd != null {
            // SAFETY: as above.
            unsafe { libc::dup2(null, fd) };
        }
    }
    // SAFETY: close_range takes plain numbers and closes descriptors 4 and up.
    let rc = unsafe { libc::syscall(libc::SYS_close_range, 4u32, u32::MAX, 0u32) };
    if rc != 0 {
        // A kernel before 5.9: close them one by one, up to the descriptor limit.
        // SAFETY: sysconf takes a plain name.
        let max = unsafe { libc::sysconf(libc::_SC_OPEN_MAX) }.clamp(1024, 1 << 20) as i32;
        for fd in 4..max {
            // SAFETY: close takes a plain number; a descriptor not open answers EBADF.
            unsafe { libc::close(fd) };
        }
    }
}

/// Builds a cBPF program that maps "the CPU this packet was received on" to a listener index:
/// for each worker `i` pinned to `cpus[i]`, `if cpu == cpus[i] return i`; otherwise
/// `cpu % n`. The kernel indexes sockets of a reuseport group in the order they called listen().
pub(crate) fn cpu_steering_program(cpus: &[usize]) -> Vec<libc::sock_filter> {
    const SKF_AD_CPU: u32 = 36;
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    let mut prog = vec![op(
        libc::BPF_LD | libc::BPF_W | libc::BPF_ABS,
        0,
        0,
        (libc::SKF_AD_OFF as u32).wrapping_add(SKF_AD_CPU),
    )];
    for (i, &cpu) in cpus.iter().enumerate() {
        // Jump over the return when the CPU differs.
        prog.push(op(
            libc::BPF_JMP | libc::BPF_JEQ | libc::BPF_K,
            0,
            1,
            cpu as u32,
        ));
        prog.push(op(libc::BPF_RET | libc::BPF_K, 0, 0, i as u32));
    }
    prog.push(op(
        libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K,
        0,
        0,
        cpus.len().max(1) as u32,
    ));
    prog.push(op(libc::BPF_RET | libc::BPF_A, 0, 0, 0));
    prog
}

/// Builds a cBPF program that steers QUIC datagrams to the worker whose connection they
/// belong to: a short-header packet (first bit 0) goes to socket `dcid[0] % workers`, where
/// `dcid[0]` is the first byte of the connection ID the server chose (`driver::quic` makes
/// that byte name the worker); a long-header packet returns an index past the group, so the
/// kernel falls back to its 4-tuple hash (a handshake's packets share their tuple).
pub(crate) fn quic_steering_program(workers: usize) -> Vec<libc::sock_filter> {
    let op = |code: u32, jt: u8, jf: u8, k: u32| libc::sock_filter {
        code: code as u16,
        jt,
        jf,
        k,
    };
    vec![
        // A = the first byte of the UDP payload.
        op(libc::BPF_LD | libc::BPF_B | libc::BPF_ABS, 0, 0, 0),
        // Long header: to the last instruction.
        op(libc::BPF_JMP | libc::BPF_JSET | libc::BPF_K, 3, 0, 0x80),
        // A = the destination connection ID's first byte.
        op(libc::BPF_LD | libc::BPF_B | libc::BPF_ABS, 0, 0, 1),
        op(
            libc::BPF_ALU | libc::BPF_MOD | libc::BPF_K,
            0,
            0,
            workers.max(1) as u32,
        ),
        op(libc::BPF_RET | libc::BPF_A, 0, 0, 0),
        op(libc::BPF_RET | libc::BPF_K, 0, 0, u32::MAX),
    ]
}

/// Attaches `prog` to the reuseport group `fd` belongs to (SO_ATTACH_REUSEPORT_CBPF, Linux 4.5+).
pub(crate) fn attach_reuseport_cbpf(
    fd: BorrowedFd<'_>,
    prog: &[libc::sock_filter],
) -> io::Result<()> {
    let fprog = libc::sock_fprog {
        len: u16::try_from(prog.len()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?,
        filter: prog.as_ptr() as *mut libc::sock_filter,
    };
    // SAFETY: `fd` is a valid open socket for the duration of the call (BorrowedFd); `fprog`
    // points at `prog`, which outlives the call, and its `len` is the slice's length. The
    // kernel copies the program during setsockopt and keeps no pointer to our memory.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_ATTACH_REUSEPORT_CBPF,
            (&fprog as *const libc::sock_fprog).cast(),
            std::mem::size_of::<libc::sock_fprog>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// `clock` (a `CLOCK_*` id) in milliseconds; 0 if the kernel refuses the clock.
#[inline(always)]
/// CLOCK_MONOTONIC in microseconds (a request's time to answer, when metrics or the access
/// log are on).
pub(crate) fn monotonic_us() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: as in `coarse_ms`: a valid, writable timespec, no pointer kept.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000 + ts.tv_nsec as u64 / 1_000
}

pub(crate) fn coarse_ms(clock: libc::clockid_t) -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call; clock_gettime
    // writes only into it and keeps no pointer.
    let rc = unsafe { libc::clock_gettime(clock, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1000 + ts.tv_nsec as u64 / 1_000_000
}

#[cfg(feature = "tls")] // kTLS: only the TLS transport hands sessions over.
/// Name of the kernel's TLS upper-layer protocol.
const TLS_ULP: &[u8] = b"tls";

#[cfg(feature = "tls")]
/// One direction's kTLS cipher state (`linux/tls.h`), built by the TLS module from the
/// secrets rustls hands over.
pub(crate) enum KtlsCrypto {
    Aes128Gcm(libc::tls12_crypto_info_aes_gcm_128),
    Aes256Gcm(libc::tls12_crypto_info_aes_gcm_256),
    Chacha20Poly1305(libc::tls12_crypto_info_chacha20_poly1305),
}

#[cfg(feature = "tls")]
/// Which direction of a kTLS socket a cipher state configures.
#[derive(Clone, Copy)]
pub(crate) enum KtlsDirection {
    Tx,
    Rx,
}

#[cfg(feature = "tls")]
/// Attaches the kernel TLS upper-layer protocol to a TCP socket. An established socket on a
/// kernel with kTLS succeeds; an unconnected one fails with ENOTCONN (the probe uses that);
/// a kernel without it fails with ENOENT.
pub(crate) fn set_tls_ulp(fd: BorrowedFd<'_>) -> io::Result<()> {
    // SAFETY: `fd` is a valid open socket for the duration of the call; the pointer and
    // length describe `TLS_ULP`, a static byte string the kernel copies during the call.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_ULP,
            TLS_ULP.as_ptr().cast(),
            TLS_ULP.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(feature = "tls")]
/// Installs one direction's cipher state on a socket that has the TLS ULP attached; from
/// then on the kernel encrypts (TX) or decrypts (RX) records for that direction.
pub(crate) fn set_ktls_crypto(
    fd: BorrowedFd<'_>,
    dir: KtlsDirection,
    crypto: &KtlsCrypto,
) -> io::Result<()> {
    let (ptr, len): (*const libc::c_void, usize) = match crypto {
        KtlsCrypto::Aes128Gcm(c) => (std::ptr::from_ref(c).cast(), std::mem::size_of_val(c)),
        KtlsCrypto::Aes256Gcm(c) => (std::ptr::from_ref(c).cast(), std::mem::size_of_val(c)),
        KtlsCrypto::Chacha20Poly1305(c) => (std::ptr::from_ref(c).cast(), std::mem::size_of_val(c)),
    };
    let name = match dir {
        KtlsDirection::Tx => libc::TLS_TX,
        KtlsDirection::Rx => libc::TLS_RX,
    };
    // SAFETY: `fd` is a valid open socket for the call; `ptr`/`len` describe one fully
    // initialised `tls12_crypto_info_*` struct borrowed from `crypto`, which outlives the
    // call, and `len` is that struct's exact size, as the kernel expects for its cipher
    // type. The kernel copies the struct and keeps no pointer to our memory.
    let rc = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_TLS,
            name,
            ptr,
            len as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The TLS record type of application data; every other type read from a kTLS socket is a
/// control record (alert, handshake) for user space to handle.
pub(crate) const TLS_APPLICATION_DATA: u8 = 23;

/// Room for one `cmsghdr` carrying one byte (the record type), 8-byte aligned.
#[repr(C, align(8))]
struct RecordTypeCmsg([u8; 32]);

/// Reads from a socket whose receive side is kernel TLS into `buf`'s spare capacity: the
/// plaintext of one or more records of one type, and that type (the kernel never mixes types
/// in one read, and fails a read that has no room for the type with EIO). Returns
/// `(bytes, record type)`; 0 bytes is the end of the stream. `buf`'s length grows by the bytes
/// read.
pub(crate) fn recv_tls_record(fd: BorrowedFd<'_>, buf: &mut Vec<u8>) -> io::Result<(usize, u8)> {
    let spare = buf.spare_capacity_mut();
    let mut iov = libc::iovec {
        iov_base: spare.as_mut_ptr().cast(),
        iov_len: spare.len(),
    };
    let mut control = RecordTypeCmsg([0; 32]);
    // SAFETY: an all-zero msghdr is a valid empty message header (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    msg.msg_controllen = control.0.len();
    // SAFETY: `fd` is a valid open socket for the call; `msg` points at one iovec describing
    // `buf`'s spare capacity (writable, uninitialised bytes the kernel may fill) and at
    // `control`, a 32-byte aligned buffer; both outlive the call.
    let n = unsafe { libc::recvmsg(fd.as_raw_fd(), &mut msg, 0) };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    let n = n as usize;
    // SAFETY: the kernel initialised the first `n` bytes of the spare capacity, and
    // `n <= spare.len()`.
    unsafe { buf.set_len(buf.len() + n) };
    let mut kind = TLS_APPLICATION_DATA;
    // SAFETY: `msg` is the header the kernel filled; CMSG_FIRSTHDR/CMSG_NXTHDR walk only
    // within `msg_control`/`msg_controllen`, which still describe `control`, and each header
    // they return is inside it, with CMSG_DATA pointing at its (at least one-byte) payload
    // when the level and type say it is the record type.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_TLS && (*c).cmsg_type == libc::TLS_GET_RECORD_TYPE {
                kind = *libc::CMSG_DATA(c);
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Ok((n, kind))
}

#[cfg(feature = "tls")]
/// Sends `data` as one record of type `kind` (an alert or a handshake message) on a socket
/// whose send side is kernel TLS: the kernel closes any open data record first, then
/// encrypts this one with the current key. Returns the bytes taken (all of them, or an error).
pub(crate) fn send_tls_record(fd: BorrowedFd<'_>, kind: u8, data: &[u8]) -> io::Result<usize> {
    let mut iov = libc::iovec {
        iov_base: data.as_ptr().cast_mut().cast(),
        iov_len: data.len(),
    };
    let mut control = RecordTypeCmsg([0; 32]);
    // SAFETY: an all-zero msghdr is a valid empty message header (null pointers, zero lengths).
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = &mut iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.0.as_mut_ptr().cast();
    // SAFETY: CMSG_SPACE is a pure size computation.
    msg.msg_controllen = unsafe { libc::CMSG_SPACE(1) } as usize;
    // SAFETY: `msg_control` points at `control` (32 aligned bytes, more than CMSG_SPACE(1));
    // CMSG_FIRSTHDR returns its start, and the header and one data byte written through it
    // and CMSG_DATA lie inside it.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_TLS;
        (*c).cmsg_type = libc::TLS_SET_RECORD_TYPE;
        (*c).cmsg_len = libc::CMSG_LEN(1) as usize;
        *libc::CMSG_DATA(c) = kind;
    }
    // SAFETY: `fd` is a valid open socket; `msg` describes `data` (read only by the kernel,
    // despite the iovec's mutable pointer type) and `control`, both alive for the call.
    let n = unsafe { libc::sendmsg(fd.as_raw_fd(), &msg, libc::MSG_NOSIGNAL) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

/// The first descriptor systemd passes (`SD_LISTEN_FDS_START`).
const LISTEN_FDS_START: i32 = 3;

/// The listening sockets systemd passed this process (socket activation: `LISTEN_PID` is
/// ours and `LISTEN_FDS` counts them from descriptor 3), owned, each at most once per
/// process: a second call returns none.
pub(crate) fn take_listen_fds() -> Vec<std::os::fd::OwnedFd> {
    use std::os::fd::FromRawFd;
    use std::sync::atomic::{AtomicBool, Ordering};
    static TAKEN: AtomicBool = AtomicBool::new(false);
    let ours = std::env::var("LISTEN_PID")
        .ok()
        .and_then(|p| p.parse::<u32>().ok())
        == Some(std::process::id());
    let n: i32 = match std::env::var("LISTEN_FDS")
        .ok()
        .and_then(|n| n.parse().ok())
    {
        Some(n) if ours && n > 0 => n,
        _ => return Vec::new(),
    };
    if TAKEN.swap(true, Ordering::SeqCst) {
        return Vec::new();
    }
    (LISTEN_FDS_START..LISTEN_FDS_START + n)
        .filter(|&fd| {
            // A descriptor that is not open is skipped rather than owned.
            // SAFETY: F_GETFD reads a flag of a descriptor number; no memory is involved.
            (unsafe { libc::fcntl(fd, libc::F_GETFD) }) >= 0
        })
        .map(|fd| {
            // SAFETY: systemd passed descriptors LISTEN_FDS_START.. to this process (LISTEN_PID
            // is ours) for it to own; nothing else in the process takes them (Rust's standard
            // library opens none of them, and TAKEN lets this run once), so each becomes
            // owned exactly once here. The check above found it open.
            unsafe { std::os::fd::OwnedFd::from_raw_fd(fd) }
        })
        .collect()
}

/// An io_uring instance whose operations own their buffers, for the io_uring backend
/// (driver/uring.rs): a buffer handed to [`Ring::recv`] or [`Ring::send`] is kept in the op
/// table until the operation's last completion gives it back in its [`Cqe`], so the kernel
/// never reads or writes memory the program has freed or moved. An accepted socket comes
/// back as an `OwnedFd`.
pub(crate) struct Ring {
    ring: io_uring::IoUring,
    /// Operations submitted or queued, by index (an SQE's user data).
    ops: Vec<RingOp>,
    free: Vec<u32>,
}

/// One operation's entry: the caller's tag and kind, and the buffer the kernel may use.
struct RingOp {
    tag: u64,
    kind: u8,
    buf: Option<Vec<u8>>,
    /// The kernel writes into `buf`'s spare capacity (a receive).
    into: bool,
}

/// One completion, with what the operation owned.
pub(crate) struct Cqe {
    pub tag: u64,
    pub kind: u8,
    /// The result: bytes, a descriptor, or a negated errno.
    pub res: i32,
    /// More completions follow for this operation (multishot).
    pub more: bool,
    /// The operation's buffer, on its last completion: a receive's holds the bytes read.
    pub buf: Option<Vec<u8>>,
    /// An accepted connection (kind [`Ring::ACCEPT`]).
    pub fd: Option<std::os::fd::OwnedFd>,
}

impl Ring {
    /// The kind of a multishot accept, whose result is a descriptor.
    pub(crate) const ACCEPT: u8 = 1;

    /// A ring of `entries` submission slots for one thread (SINGLE_ISSUER, COOP_TASKRUN; the
    /// plain setup where the kernel has neither). Not DEFER_TASKRUN: a worker that waits
    /// inside its tokio runtime polls the ring's descriptor, and deferred completions did not
    /// make it readable (linerate-server's around_kinds tests hung on io_uring with it).
    pub(crate) fn new(entries: u32) -> io::Result<Ring> {
        let ring = io_uring::IoUring::builder()
            .setup_single_issuer()
            .setup_coop_taskrun()
            .setup_cqsize(entries * 4)
            .build(entries)
            .or_else(|_| io_uring::IoUring::new(entries))?;
        Ok(Ring {
            ring,
            ops: Vec::new(),
            free: Vec::new(),
        })
    }

    /// The ring's descriptor: readable while completions wait.
    pub(crate) fn fd(&self) -> BorrowedFd<'_> {
        // SAFETY: the descriptor is the ring's, open for as long as `self` is borrowed.
        unsafe { BorrowedFd::borrow_raw(self.ring.as_raw_fd()) }
    }

    fn push(
        &mut self,
        entry: io_uring::squeue::Entry,
        (tag, kind): (u64, u8),
        buf: Option<Vec<u8>>,
        into: bool,
    ) {
        let idx = match self.free.pop() {
            Some(i) => i,
            None => {
                self.ops.push(RingOp {
                    tag: 0,
                    kind: 0,
                    buf: None,
                    into: false,
                });
                (self.ops.len() - 1) as u32
            }
        };
        self.ops[idx as usize] = RingOp {
            tag,
            kind,
            buf,
            into,
        };
        let entry = entry.user_data(u64::from(idx));
        loop {
            // SAFETY: every pointer in `entry` is to a buffer now owned by `self.ops[idx]`,
            // which keeps it, unmoved (a `Vec`'s heap block does not move with the `Vec`),
            // until the operation's last completion (`reap`), or forever (`Drop`).
            if unsafe { self.ring.submission().push(&entry) }.is_ok() {
                return;
            }
            // The submission queue is full: hand it to the kernel and push again.
            let _ = self.ring.submit();
        }
    }

    /// Receives into `buf`'s spare capacity (from its length on).
    pub(crate) fn recv(&mut self, fd: BorrowedFd<'_>, mut buf: Vec<u8>, tag: u64, kind: u8) {
        let spare = buf.spare_capacity_mut();
        let (ptr, len) = (spare.as_mut_ptr().cast::<u8>(), spare.len() as u32);
        let e = io_uring::opcode::Recv::new(io_uring::types::Fd(fd.as_raw_fd()), ptr, len).build();
        self.push(e, (tag, kind), Some(buf), true);
    }

    /// Sends `buf[from..]` with `flags` (MSG_*).
    pub(crate) fn send(
        &mut self,
        fd: BorrowedFd<'_>,
        buf: Vec<u8>,
        from: usize,
        flags: i32,
        tag: u64,
        kind: u8,
    ) {
        let rest = &buf[from..];
        let e = io_uring::opcode::Send::new(
            io_uring::types::Fd(fd.as_raw_fd()),
            rest.as_ptr(),
            rest.len() as u32,
        )
        .flags(flags)
        .build();
        self.push(e, (tag, kind), Some(buf), false);
    }

    /// Accepts connections until an error (multishot), non-blocking and close-on-exec.
    pub(crate) fn accept(&mut self, fd: BorrowedFd<'_>, tag: u64) {
        let e = io_uring::opcode::AcceptMulti::new(io_uring::types::Fd(fd.as_raw_fd()))
            .flags(libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC)
            .build();
        self.push(e, (tag, Self::ACCEPT), None, false);
    }

    /// Reports `events` (POLL*) on `fd`: once, or every time (`multi`).
    pub(crate) fn poll(
        &mut self,
        fd: BorrowedFd<'_>,
        events: u32,
        multi: bool,
        tag: u64,
        kind: u8,
    ) {
        let e = io_uring::opcode::PollAdd::new(io_uring::types::Fd(fd.as_raw_fd()), events)
            .multi(multi)
            .build();
        self.push(e, (tag, kind), None, false);
    }

    /// Cancels every operation on `fd`, with the next submission: the caller keeps the
    /// descriptor open until then (a number closed and reused before would name another
    /// socket). Their completions still come (`-ECANCELED`), with their buffers.
    pub(crate) fn cancel_fd(&mut self, fd: BorrowedFd<'_>, tag: u64, kind: u8) {
        let e = io_uring::opcode::AsyncCancel2::new(
            io_uring::types::CancelBuilder::fd(io_uring::types::Fd(fd.as_raw_fd())).all(),
        )
        .build();
        self.push(e, (tag, kind), None, false);
    }

    /// Submits what is queued and waits for one completion, or `timeout` (`Some(ZERO)`:
    /// submits only).
    pub(crate) fn submit_and_wait(
        &mut self,
        timeout: Option<std::time::Duration>,
    ) -> io::Result<()> {
        let r = match timeout {
            Some(t) if t.is_zero() => self.ring.submit(),
            None => self.ring.submit_and_wait(1),
            Some(t) => {
                let ts = io_uring::types::Timespec::new()
                    .sec(t.as_secs())
                    .nsec(t.subsec_nanos());
                let args = io_uring::types::SubmitArgs::new().timespec(&ts);
                self.ring.submitter().submit_with_args(1, &args)
            }
        };
        match r {
            Ok(_) => Ok(()),
            Err(e)
                if matches!(
                    e.raw_os_error(),
                    Some(libc::ETIME | libc::EINTR | libc::EBUSY | libc::EAGAIN)
                ) =>
            {
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    /// Hands what is queued to the kernel now, without waiting.
    pub(crate) fn submit(&mut self) {
        let _ = self.ring.submit();
    }

    /// Whether operations wait in the submission queue (a submission the kernel cut short).
    pub(crate) fn unsubmitted(&mut self) -> bool {
        !self.ring.submission().is_empty()
    }

    /// Moves the completions that are ready onto `out`.
    pub(crate) fn reap(&mut self, out: &mut Vec<Cqe>) {
        for cqe in self.ring.completion() {
            let idx = cqe.user_data() as usize;
            let Some(op) = self.ops.get_mut(idx) else {
                continue;
            };
            let more = io_uring::cqueue::more(cqe.flags());
            let res = cqe.result();
            let (tag, kind, into) = (op.tag, op.kind, op.into);
            let mut buf = None;
            if !more {
                buf = op.buf.take();
                self.free.push(idx as u32);
            }
            if let Some(b) = buf.as_mut()
                && into
                && res > 0
                && b.len() + res as usize <= b.capacity()
            {
                // SAFETY: a receive's completion says the kernel wrote `res` bytes into the
                // spare capacity from the old length on (checked to fit just above).
                unsafe { b.set_len(b.len() + res as usize) };
            }
            let fd = (kind == Self::ACCEPT && res >= 0).then(|| {
                // SAFETY: an accept's result is a new descriptor that nothing else owns.
                unsafe { <std::os::fd::OwnedFd as std::os::fd::FromRawFd>::from_raw_fd(res) }
            });
            out.push(Cqe {
                tag,
                kind,
                res,
                more,
                buf,
                fd,
            });
        }
    }
}

impl Drop for Ring {
    fn drop(&mut self) {
        // The kernel may still use the buffers of operations that did not complete, after
        // the ring's descriptor is closed: they are leaked, not freed.
        for op in &mut self.ops {
            if let Some(buf) = op.buf.take() {
                std::mem::forget(buf);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn coarse_clocks_move_forward_and_match_the_wall_clock() {
        let a = coarse_ms(libc::CLOCK_MONOTONIC_COARSE);
        std::thread::sleep(std::time::Duration::from_millis(20));
        assert!(coarse_ms(libc::CLOCK_MONOTONIC_COARSE) > a);
        let wall = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_millis() as u64;
        assert!(wall.abs_diff(coarse_ms(libc::CLOCK_REALTIME_COARSE)) < 1_000);
    }

    #[test]
    fn program_has_one_jump_and_return_per_cpu() {
        let p = cpu_steering_program(&[2, 5]);
        assert_eq!(p.len(), 1 + 2 * 2 + 2);
        assert_eq!(p[1].k, 2);
        assert_eq!(p[2].k, 0);
        assert_eq!(p[3].k, 5);
        assert_eq!(p[4].k, 1);
        assert_eq!(p[5].k, 2); // modulo n
    }

    #[test]
    fn attaching_to_a_reuseport_listener_works_or_fails_cleanly() {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        s.set_reuse_port(true).unwrap();
        s.bind(
            &"127.0.0.1:0"
                .parse::<std::net::SocketAddr>()
                .unwrap()
                .into(),
        )
        .unwrap();
        s.listen(16).unwrap();
        use std::os::fd::AsFd;
        // Kernels without the option return an error; either way no crash.
        let _ = attach_reuseport_cbpf(s.as_fd(), &cpu_steering_program(&[0]));
    }

    #[test]
    #[cfg(feature = "tls")]
    fn tls_ulp_on_an_unconnected_socket_never_succeeds() {
        let s = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        use std::os::fd::AsFd;
        // ENOTCONN where the kernel has kTLS, ENOENT (or similar) where it does not.
        assert!(set_tls_ulp(s.as_fd()).is_err());
    }
}
