//! The event-loop backend boundary and its epoll implementation.
//!
//! Contract every backend meets (mio's `sys` contract, readiness flavour): `add`/`modify`
//! register interest for a socket under a caller-chosen token; `wait` fills `Events` with
//! (token, readable, writable, closed) and returns after at most `timeout`; registrations are
//! level-triggered, so a backend must report a socket again while the condition holds. An
//! io_uring backend can meet the same contract with multishot POLL_ADD and later grow a
//! completion path; the worker only talks to this trait.
#![forbid(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::time::Duration;

use rustix::buffer::spare_capacity;
use rustix::event::Timespec;
use rustix::event::epoll;

/// What a registration waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Interest {
    Read,
    Write,
}

/// One readiness report.
#[derive(Clone, Copy, Debug)]
pub struct Event {
    pub token: u64,
    pub readable: bool,
    pub writable: bool,
    /// Error or hang-up: the socket should be read (to see EOF/error) or closed.
    pub closed: bool,
}

/// A readiness backend (see the module doc for the contract).
pub trait Poller {
    fn add(&self, fd: impl AsFd, token: u64, interest: Interest) -> io::Result<()>;
    fn modify(&self, fd: impl AsFd, token: u64, interest: Interest) -> io::Result<()>;
    fn delete(&self, fd: impl AsFd) -> io::Result<()>;
    /// Waits for events; `events` is cleared first.
    fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()>;
}

/// Level-triggered epoll.
pub struct Epoll {
    fd: OwnedFd,
    raw: Vec<epoll::Event>,
}

/// Most events taken from the kernel per wait.
const EVENTS_PER_WAIT: usize = 256;

impl Epoll {
    pub fn new() -> io::Result<Epoll> {
        Ok(Epoll {
            fd: epoll::create(epoll::CreateFlags::CLOEXEC)?,
            raw: Vec::with_capacity(EVENTS_PER_WAIT),
        })
    }
}

fn flags(interest: Interest) -> epoll::EventFlags {
    match interest {
        Interest::Read => epoll::EventFlags::IN | epoll::EventFlags::RDHUP,
        Interest::Write => epoll::EventFlags::OUT,
    }
}

impl Poller for Epoll {
    fn add(&self, fd: impl AsFd, token: u64, interest: Interest) -> io::Result<()> {
        Ok(epoll::add(
            &self.fd,
            fd,
            epoll::EventData::new_u64(token),
            flags(interest),
        )?)
    }

    fn modify(&self, fd: impl AsFd, token: u64, interest: Interest) -> io::Result<()> {
        Ok(epoll::modify(
            &self.fd,
            fd,
            epoll::EventData::new_u64(token),
            flags(interest),
        )?)
    }

    fn delete(&self, fd: impl AsFd) -> io::Result<()> {
        Ok(epoll::delete(&self.fd, fd)?)
    }

    fn wait(&mut self, events: &mut Vec<Event>, timeout: Option<Duration>) -> io::Result<()> {
        events.clear();
        self.raw.clear();
        let ts = timeout.map(|d| Timespec {
            tv_sec: d.as_secs() as i64,
            tv_nsec: i64::from(d.subsec_nanos()),
        });
        match epoll::wait(&self.fd, spare_capacity(&mut self.raw), ts.as_ref()) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        events.extend(self.raw.iter().map(|e| {
            let f = e.flags;
            Event {
                token: e.data.u64(),
                readable: f.intersects(epoll::EventFlags::IN | epoll::EventFlags::RDHUP),
                writable: f.contains(epoll::EventFlags::OUT),
                closed: f.intersects(epoll::EventFlags::ERR | epoll::EventFlags::HUP),
            }
        }));
        Ok(())
    }
}
