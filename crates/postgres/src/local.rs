//! A reactor and an executor on the HTTP worker's own thread ([`Driver::Worker`]): the
//! database connections' sockets are watched by an epoll instance of this worker's own, which
//! the worker's loop watches in turn, and the futures waiting on them run here, so a query
//! never crosses threads.
//!
//! Owns the nested epoll, the non-blocking TCP stream tokio-postgres speaks over
//! ([`LocalTcp`]), a timer for retry backoff ([`sleep`]), the per-thread spawner, and the
//! [`WorkerLocal`] the server runs after every turn of the worker's loop. Readiness is
//! edge-triggered: a future that finds its socket not ready leaves its waker and is woken by
//! the next event, which cannot be missed since both happen on this thread. Knows nothing of
//! PostgreSQL.
//!
//! [`Driver::Worker`]: crate::Driver::Worker
#![forbid(unsafe_code)]

use std::cell::RefCell;
use std::future::{Future, poll_fn};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use futures_executor::{LocalPool, LocalSpawner};
use futures_util::task::LocalSpawnExt;
use linerate_server::WorkerLocal;
use rustix::event::epoll;
use rustix::io::Errno;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Events taken from the nested epoll per call.
const EVENTS: usize = 64;

#[derive(Default)]
struct Interest {
    read: Option<Waker>,
    write: Option<Waker>,
    /// A read came back short, so the socket held nothing more then; no read is tried again
    /// until the reactor reports new input (an edge), saving the `recv` that would only say
    /// EAGAIN.
    drained: bool,
}

/// The worker's nested epoll and who waits on what.
struct Reactor {
    ep: OwnedFd,
    waiting: RefCell<Vec<Option<Interest>>>,
    free: RefCell<Vec<usize>>,
    events: RefCell<Vec<epoll::Event>>,
}

impl Reactor {
    fn new() -> io::Result<Reactor> {
        Ok(Reactor {
            ep: epoll::create(epoll::CreateFlags::CLOEXEC)?,
            waiting: RefCell::new(Vec::new()),
            free: RefCell::new(Vec::new()),
            events: RefCell::new(Vec::with_capacity(EVENTS)),
        })
    }

    /// Wakes whoever waits on what is ready; waits up to `timeout` for something (`Some(0)`:
    /// not at all).
    fn turn(&self, timeout: Option<Duration>) -> io::Result<()> {
        loop {
            let mut events = self.events.borrow_mut();
            events.clear();
            let ts = timeout.map(|d| rustix::time::Timespec {
                tv_sec: d.as_secs() as i64,
                tv_nsec: d.subsec_nanos() as i64,
            });
            match epoll::wait(
                &self.ep,
                rustix::buffer::spare_capacity(&mut *events),
                ts.as_ref(),
            ) {
                Ok(_) => {}
                Err(Errno::INTR) => continue,
                Err(e) => return Err(e.into()),
            }
            let full = events.len() == EVENTS;
            let mut wake = Vec::new();
            {
                let mut waiting = self.waiting.borrow_mut();
                for ev in events.iter() {
                    let Some(Some(w)) = waiting.get_mut(ev.data.u64() as usize) else {
                        continue;
                    };
                    let f = ev.flags;
                    let broken = f.intersects(epoll::EventFlags::ERR | epoll::EventFlags::HUP);
                    if broken || f.intersects(epoll::EventFlags::IN | epoll::EventFlags::RDHUP) {
                        w.drained = false;
                        wake.extend(w.read.take());
                    }
                    if broken || f.contains(epoll::EventFlags::OUT) {
                        wake.extend(w.write.take());
                    }
                }
            }
            drop(events);
            wake.into_iter().for_each(Waker::wake);
            if !full {
                return Ok(());
            }
        }
    }

    fn register(&self, fd: BorrowedFd<'_>) -> io::Result<usize> {
        let key = match self.free.borrow_mut().pop() {
            Some(k) => k,
            None => {
                let mut w = self.waiting.borrow_mut();
                w.push(None);
                w.len() - 1
            }
        };
        self.waiting.borrow_mut()[key] = Some(Interest::default());
        let flags = epoll::EventFlags::IN
            | epoll::EventFlags::OUT
            | epoll::EventFlags::RDHUP
            | epoll::EventFlags::ET;
        if let Err(e) = epoll::add(&self.ep, fd, epoll::EventData::new_u64(key as u64), flags) {
            self.waiting.borrow_mut()[key] = None;
            self.free.borrow_mut().push(key);
            return Err(e.into());
        }
        Ok(key)
    }

    fn park(&self, key: usize, write: bool, waker: &Waker) {
        if let Some(Some(w)) = self.waiting.borrow_mut().get_mut(key) {
            let slot = if write { &mut w.write } else { &mut w.read };
            *slot = Some(waker.clone());
        }
    }

    /// Whether the last read drained the socket and no input has been reported since.
    fn drained(&self, key: usize) -> bool {
        matches!(self.waiting.borrow().get(key), Some(Some(w)) if w.drained)
    }

    fn set_drained(&self, key: usize) {
        if let Some(Some(w)) = self.waiting.borrow_mut().get_mut(key) {
            w.drained = true;
        }
    }

    fn deregister(&self, fd: BorrowedFd<'_>, key: usize) {
        let _ = epoll::delete(&self.ep, fd);
        self.waiting.borrow_mut()[key] = None;
        self.free.borrow_mut().push(key);
    }
}

thread_local! {
    static THIS: RefCell<Option<(Rc<Reactor>, LocalSpawner)>> = const { RefCell::new(None) };
}

fn reactor() -> io::Result<Rc<Reactor>> {
    THIS.with(|t| t.borrow().as_ref().map(|(r, _)| r.clone()))
        .ok_or_else(|| io::Error::other("no worker-local reactor on this thread"))
}

/// Runs `f` on this thread's executor; false when this thread has none (not a worker).
pub(crate) fn spawn(f: impl Future<Output = ()> + 'static) -> bool {
    THIS.with(|t| match t.borrow().as_ref() {
        Some((_, spawner)) => spawner.spawn_local(f).is_ok(),
        None => false,
    })
}

/// A file descriptor watched by this thread's reactor.
struct Watched<F: AsFd> {
    fd: F,
    key: usize,
    reactor: Rc<Reactor>,
}

impl<F: AsFd> Watched<F> {
    fn new(fd: F) -> io::Result<Watched<F>> {
        let reactor = reactor()?;
        let key = reactor.register(fd.as_fd())?;
        Ok(Watched { fd, key, reactor })
    }

    /// `op` until it stops saying "would block"; then parks the waker for that direction.
    fn poll_io<T>(
        &self,
        cx: &mut Context<'_>,
        write: bool,
        mut op: impl FnMut(&F) -> io::Result<T>,
    ) -> Poll<io::Result<T>> {
        loop {
            match op(&self.fd) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.reactor.park(self.key, write, cx.waker());
                    return Poll::Pending;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                r => return Poll::Ready(r),
            }
        }
    }
}

impl<F: AsFd> Drop for Watched<F> {
    fn drop(&mut self) {
        self.reactor.deregister(self.fd.as_fd(), self.key);
    }
}

/// A non-blocking TCP connection driven by this worker's reactor.
pub(crate) struct LocalTcp(Watched<TcpStream>);

impl LocalTcp {
    /// Connects to `addr` without blocking the thread.
    pub(crate) async fn connect(addr: SocketAddr) -> io::Result<LocalTcp> {
        use rustix::net::{AddressFamily, SocketFlags, SocketType};
        let family = if addr.is_ipv4() {
            AddressFamily::INET
        } else {
            AddressFamily::INET6
        };
        let fd = rustix::net::socket_with(
            family,
            SocketType::STREAM,
            SocketFlags::NONBLOCK | SocketFlags::CLOEXEC,
            None,
        )?;
        match rustix::net::connect(&fd, &addr) {
            Ok(()) | Err(Errno::INPROGRESS) => {}
            Err(e) => return Err(e.into()),
        }
        let sock = TcpStream::from(fd);
        sock.set_nodelay(true)?;
        let w = Watched::new(sock)?;
        poll_fn(|cx| {
            w.poll_io(cx, true, |s| match rustix::net::sockopt::socket_error(s)? {
                Err(e) => Err(io::Error::from(e)),
                Ok(()) => match s.peer_addr() {
                    Ok(_) => Ok(()),
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => {
                        Err(io::ErrorKind::WouldBlock.into())
                    }
                    Err(e) => Err(e),
                },
            })
        })
        .await?;
        Ok(LocalTcp(w))
    }
}

impl AsyncRead for LocalTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let w = &self.0;
        // Edge-triggered: input arriving after the short read below is reported as a new
        // event, which clears the mark and wakes the waker parked here.
        if w.reactor.drained(w.key) {
            w.reactor.park(w.key, false, cx.waker());
            return Poll::Pending;
        }
        let room = buf.remaining();
        let n = match w.poll_io(cx, false, |mut s| s.read(buf.initialize_unfilled())) {
            Poll::Ready(Ok(n)) => n,
            Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
            Poll::Pending => return Poll::Pending,
        };
        if n > 0 && n < room {
            w.reactor.set_drained(w.key);
        }
        buf.advance(n);
        Poll::Ready(Ok(()))
    }
}

impl AsyncWrite for LocalTcp {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        self.0.poll_io(cx, true, |mut s| s.write(data))
    }

    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(self.0.fd.shutdown(std::net::Shutdown::Write))
    }
}

/// Waits `d` on this worker's reactor (a timerfd).
pub(crate) async fn sleep(d: Duration) -> io::Result<()> {
    use rustix::time::{
        Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags, Timespec, timerfd_create,
        timerfd_settime,
    };
    let t = timerfd_create(
        TimerfdClockId::Monotonic,
        TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
    )?;
    let value = Timespec {
        tv_sec: d.as_secs() as i64,
        tv_nsec: d.subsec_nanos().max(1) as i64,
    };
    let zero = Timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    timerfd_settime(
        &t,
        TimerfdTimerFlags::empty(),
        &Itimerspec {
            it_interval: zero,
            it_value: value,
        },
    )?;
    let w = Watched::new(t)?;
    poll_fn(|cx| {
        w.poll_io(cx, false, |t| {
            rustix::io::read(t, &mut [0u8; 8]).map_err(io::Error::from)
        })
    })
    .await?;
    Ok(())
}

/// This worker's executor and reactor, as the server runs them.
pub(crate) struct Local {
    pool: LocalPool,
    reactor: Rc<Reactor>,
}

impl Local {
    /// Makes this thread's reactor and executor, reachable through [`spawn`] from here on.
    pub(crate) fn install() -> io::Result<Local> {
        let reactor = Rc::new(Reactor::new()?);
        let pool = LocalPool::new();
        THIS.with(|t| *t.borrow_mut() = Some((reactor.clone(), pool.spawner())));
        Ok(Local { pool, reactor })
    }

    /// Runs what is spawned until `done` says so or `limit` passes (worker start-up: the
    /// connections opened before the worker serves).
    pub(crate) fn run_until(&mut self, limit: Duration, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + limit;
        loop {
            self.pool.run_until_stalled();
            let now = Instant::now();
            if done() || now >= deadline {
                return;
            }
            let wait = (deadline - now).min(Duration::from_millis(50));
            if self.reactor.turn(Some(wait)).is_err() {
                return;
            }
        }
    }
}

impl WorkerLocal for Local {
    fn fd(&self) -> BorrowedFd<'_> {
        self.reactor.ep.as_fd()
    }

    fn run(&mut self, fd_ready: bool) {
        if fd_ready && let Err(e) = self.reactor.turn(Some(Duration::ZERO)) {
            tracing::error!(error = %e, "worker-local reactor failed");
        }
        self.pool.run_until_stalled();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// Reads `tcp` to its end, a poll at a time, as tokio-postgres does.
    async fn read_all(mut tcp: LocalTcp) -> Vec<u8> {
        let mut got = Vec::new();
        let mut buf = [0u8; 64];
        loop {
            let n = poll_fn(|cx| {
                let mut rb = ReadBuf::new(&mut buf);
                Pin::new(&mut tcp)
                    .poll_read(cx, &mut rb)
                    .map_ok(|()| rb.filled().len())
            })
            .await
            .expect("read");
            if n == 0 {
                return got;
            }
            got.extend_from_slice(&buf[..n]);
        }
    }

    #[test]
    fn input_after_a_short_read_wakes_the_reader_and_the_end_is_seen() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let peer = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            // Each piece is read short (less than the reader's 64 bytes), so the reader
            // waits on the reactor's next edge, not on a read that says EAGAIN.
            for piece in [&b"abc"[..], b"def", b"ghi"] {
                s.write_all(piece).unwrap();
                std::thread::sleep(Duration::from_millis(30));
            }
        });
        let mut local = Local::install().unwrap();
        let got = Rc::new(RefCell::new(None));
        let done = Rc::new(Cell::new(false));
        let (g, d) = (got.clone(), done.clone());
        assert!(spawn(async move {
            let tcp = LocalTcp::connect(addr).await.expect("connect");
            *g.borrow_mut() = Some(read_all(tcp).await);
            d.set(true);
        }));
        local.run_until(Duration::from_secs(10), || done.get());
        peer.join().unwrap();
        assert_eq!(got.borrow().as_deref(), Some(&b"abcdefghi"[..]));
    }
}
