//! Starting and stopping the server: listeners (one SO_REUSEPORT socket per worker, and one
//! more per worker for HTTPS), TLS set-up and kTLS detection, CPU steering, worker threads,
//! signals and graceful shutdown.
//!
//! Owns the process-level wiring; the request path lives in the workers. Shutdown is a write
//! to each worker's eventfd — from a signal-watching thread or a [`ShutdownHandle`] — so
//! workers never poll a shared flag. Each worker also gets the inbox its deferred answers
//! come back through (another eventfd) and its counters ([`StatsHandle`]).
#![forbid(unsafe_code)]

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;

use rustix::event::{EventfdFlags, eventfd};
use socket2::{Domain, Protocol, Socket, Type};

use crate::access_log::Logger;
use crate::app::deferred::Inbox;
use crate::app::{App, AppIo};
use crate::config::Config;
use crate::driver::epoll::Epoll;
use crate::driver::{Setup, Shared, Worker};
use crate::files::{FilesOptions, StaticFiles};
use crate::router::Router;
use crate::stats::{Counters, StatsHandle};

/// A bound server, ready to run.
pub struct Server {
    listeners: Vec<TcpListener>,
    /// One HTTPS listener per worker (empty without TLS).
    tls_listeners: Vec<TcpListener>,
    tls_addr: Option<SocketAddr>,
    cpus: Vec<Option<usize>>,
    wakes: Arc<Vec<OwnedFd>>,
    counters: Arc<Vec<Arc<Counters>>>,
    shared: Arc<Shared>,
    addr: SocketAddr,
    steering: bool,
    /// The static-file root, opened once; each worker gets its own cache from it.
    files: Option<StaticFiles>,
}

/// Triggers a graceful shutdown from another thread (tests, embedding programs).
#[derive(Clone)]
pub struct ShutdownHandle {
    wakes: Arc<Vec<OwnedFd>>,
}

impl ShutdownHandle {
    /// Asks every worker to stop accepting, finish in-flight requests and exit.
    pub fn shutdown(&self) {
        for fd in self.wakes.iter() {
            let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
        }
    }
}

/// The CPUs this process may run on.
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..rustix::thread::CpuSet::MAX_CPU)
            .filter(|&c| set.is_set(c))
            .collect(),
        Err(_) => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

impl Server {
    /// Binds one listener per worker and prepares the workers.
    pub fn bind(config: Config, router: Router) -> io::Result<Server> {
        let cpus = if config.cpus.is_empty() {
            allowed_cpus()
        } else {
            config.cpus.clone()
        };
        if cpus.is_empty() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "no CPU to run on",
            ));
        }
        let workers = if config.workers == 0 {
            cpus.len()
        } else {
            config.workers
        };
        let mut addr = config.addr;
        let mut listeners = Vec::with_capacity(workers);
        for _ in 0..workers {
            let l = listen(addr, config.backlog)?;
            // Port 0: the first bind picks the port, the others join it.
            addr = l.local_addr()?;
            listeners.push(l);
        }
        let tls =
            match &config.tls {
                Some(t) => Some(crate::tls::server_config(t).map_err(|e| {
                    io::Error::new(io::ErrorKind::InvalidInput, format!("HTTPS: {e}"))
                })?),
                None => None,
            };
        let mut tls_listeners = Vec::new();
        let mut tls_addr = None;
        if let Some(t) = &config.tls {
            let mut addr = t.addr;
            for _ in 0..workers {
                let l = listen(addr, config.backlog)?;
                addr = l.local_addr()?;
                tls_listeners.push(l);
            }
            tls_addr = Some(addr);
        }
        let kernel_ciphers = if config.tls.as_ref().is_some_and(|t| t.ktls) {
            crate::tls::ktls_ciphers()
        } else {
            crate::tls::KernelCiphers::default()
        };
        let ktls = kernel_ciphers.any();
        if config.tls.is_some() {
            tracing::info!(
                ktls,
                ciphers = ?kernel_ciphers,
                "HTTPS: {}",
                if ktls {
                    "kernel TLS after each handshake (sendfile for files)"
                } else {
                    "user-space TLS (rustls)"
                }
            );
        }
        let worker_cpus: Vec<Option<usize>> = (0..workers)
            .map(|i| config.pin.then(|| cpus[i % cpus.len()]))
            .collect();
        let mut steering = false;
        if config.steering && workers > 1 {
            let pinned: Vec<usize> = worker_cpus.iter().map(|c| c.unwrap_or(0)).collect();
            let program = crate::sys::cpu_steering_program(&pinned);
            let attached = crate::sys::attach_reuseport_cbpf(listeners[0].as_fd(), &program)
                .and_then(|()| match tls_listeners.first() {
                    Some(l) => crate::sys::attach_reuseport_cbpf(l.as_fd(), &program),
                    None => Ok(()),
                });
            match attached {
                Ok(()) => steering = true,
                Err(e) => {
                    tracing::warn!(error = %e, "CPU steering (SO_ATTACH_REUSEPORT_CBPF) unavailable; kernel hashing used")
                }
            }
        }
        let wakes = (0..workers)
            .map(|_| {
                eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK).map_err(io::Error::from)
            })
            .collect::<io::Result<Vec<_>>>()?;
        let files =
            match &config.files {
                Some(m) => Some(StaticFiles::open(&m.root, FilesOptions::default()).map_err(
                    |e| io::Error::new(e.kind(), format!("cannot serve {}: {e}", m.root.display())),
                )?),
                None => None,
            };
        let counters = (0..workers).map(|_| Arc::default()).collect();
        Ok(Server {
            listeners,
            tls_listeners,
            tls_addr,
            cpus: worker_cpus,
            wakes: Arc::new(wakes),
            counters: Arc::new(counters),
            shared: Arc::new(Shared {
                app: App::new(router, &config),
                conn: config.conn(),
                tls,
                tls_policy: crate::tls::TlsPolicy {
                    kernel: kernel_ciphers,
                    key_update_bytes: config
                        .tls
                        .as_ref()
                        .map_or(crate::tls::TLS_KEY_UPDATE_BYTES, |t| t.key_update_bytes),
                },
                drain_timeout: config.drain_timeout,
                config,
            }),
            addr,
            steering,
            files,
        })
    }

    /// The bound address (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound HTTPS address, when TLS is configured.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// Whether HTTPS connections hand their keys to the kernel (kTLS) after the handshake.
    pub fn ktls(&self) -> bool {
        self.shared.tls_policy.kernel.any()
    }

    /// Number of workers.
    pub fn workers(&self) -> usize {
        self.listeners.len()
    }

    /// Whether the CPU-steering program is attached.
    pub fn steering(&self) -> bool {
        self.steering
    }

    /// Reads the server's counters (deferred answers outstanding, refused, timed out, late).
    pub fn stats(&self) -> StatsHandle {
        StatsHandle {
            workers: self.counters.clone(),
        }
    }

    /// A handle that starts a graceful shutdown.
    pub fn handle(&self) -> ShutdownHandle {
        ShutdownHandle {
            wakes: self.wakes.clone(),
        }
    }

    /// Runs the workers until a shutdown completes.
    pub fn run(self) -> io::Result<()> {
        let logger = match &self.shared.config.access_log {
            Some(target) => Some(Logger::start(target)?),
            None => None,
        };
        let mut threads = Vec::new();
        let mut tls_listeners = self.tls_listeners.into_iter();
        for (i, listener) in self.listeners.into_iter().enumerate() {
            let tls_listener = tls_listeners.next();
            let shared = self.shared.clone();
            let wake = self.wakes[i].try_clone()?;
            let cpu = self.cpus[i];
            let log = logger.as_ref().map(Logger::buffer);
            let files = self.files.as_ref().map(StaticFiles::for_worker);
            let inbox_fd = eventfd(0, EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK)?;
            let waker = inbox_fd.try_clone()?;
            let inbox = Arc::new(Inbox::new(Box::new(move || {
                let _ = rustix::io::write(&waker, &1u64.to_ne_bytes());
            })));
            let counters = self.counters[i].clone();
            let t = std::thread::Builder::new()
                .name(format!("linerate-w{i}"))
                .spawn(move || -> io::Result<()> {
                    if let Some(cpu) = cpu {
                        let mut set = rustix::thread::CpuSet::new();
                        set.set(cpu);
                        if let Err(e) = rustix::thread::sched_setaffinity(None, &set) {
                            tracing::warn!(cpu, error = %e, "cannot pin worker");
                        }
                    }
                    let setup = Setup {
                        conn: shared.conn.clone(),
                        listener,
                        tls_listener,
                        shutdown: wake,
                        inbox_fd,
                        app: AppIo {
                            files,
                            log,
                            inbox,
                            outstanding: 0,
                            counters,
                        },
                    };
                    let mut worker = Worker::new(Epoll::new()?, setup)?;
                    worker.run(&shared)
                })?;
            threads.push(t);
        }
        let mut result = Ok(());
        for t in threads {
            match t.join() {
                Ok(Ok(())) => {}
                Ok(Err(e)) => result = Err(e),
                Err(_) => result = Err(io::Error::other("worker thread panicked")),
            }
        }
        result
    }

    /// Runs until SIGTERM or SIGINT, then shuts down gracefully; a second signal exits at once.
    pub fn run_until_signal(self) -> io::Result<()> {
        let handle = self.handle();
        let mut signals = signal_hook::iterator::Signals::new([
            signal_hook::consts::SIGTERM,
            signal_hook::consts::SIGINT,
        ])?;
        std::thread::Builder::new()
            .name("linerate-signals".into())
            .spawn(move || {
                let mut seen = 0;
                for sig in signals.forever() {
                    seen += 1;
                    if seen == 1 {
                        tracing::info!(signal = sig, "shutting down: draining connections");
                        handle.shutdown();
                    } else {
                        tracing::warn!("second signal: exiting now");
                        std::process::exit(130);
                    }
                }
            })?;
        self.run()
    }
}

/// A nonblocking SO_REUSEPORT listener.
fn listen(addr: SocketAddr, backlog: i32) -> io::Result<TcpListener> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.bind(&addr.into())?;
    socket.listen(backlog)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}
