//! The real server for end-to-end tests: bound on 127.0.0.1 with an OS-chosen port, run on a
//! background thread, stopped by a graceful shutdown (the server's `ShutdownHandle`) and a
//! join when dropped, so the port accepts nothing after the drop.
#![forbid(unsafe_code)]

use std::io;
use std::net::SocketAddr;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::config::Config;
use crate::router::Router;
use crate::server::{Server, ShutdownHandle};
use crate::start_error::StartError;
use crate::stats::StatsHandle;

/// How long a test server waits for a client's EOF after a response that closes (tests often
/// keep their sockets open to the end).
pub const TEST_LINGER_TIMEOUT: Duration = Duration::from_millis(200);
/// How long a test server's shutdown waits for requests in flight.
pub const TEST_DRAIN_TIMEOUT: Duration = Duration::from_secs(5);

/// A server running on background threads until it is dropped (or [`TestServer::stop`]ped).
///
/// ```
/// use std::io::{Read, Write};
/// use linerate_server::{Response, Router};
/// use linerate_server::testing::TestServer;
///
/// let server = TestServer::start(Router::new().get("/", |_| Response::text("hi")))?;
/// let mut tcp = std::net::TcpStream::connect(server.addr())?;
/// tcp.write_all(b"GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")?;
/// let mut got = String::new();
/// tcp.read_to_string(&mut got)?;
/// assert!(got.starts_with("HTTP/1.1 200 OK") && got.ends_with("hi"));
/// server.stop()?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct TestServer {
    addr: SocketAddr,
    h2c: Option<SocketAddr>,
    tls: Option<SocketAddr>,
    handle: ShutdownHandle,
    stats: StatsHandle,
    thread: Option<JoinHandle<io::Result<()>>>,
}

impl std::fmt::Debug for TestServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TestServer")
            .field("addr", &self.addr)
            .field("h2c", &self.h2c)
            .field("running", &self.thread.is_some())
            .finish_non_exhaustive()
    }
}

impl TestServer {
    /// The configuration [`TestServer::start`] uses: 127.0.0.1 with an OS-chosen port, one
    /// unpinned worker (tests share the machine), [`TEST_LINGER_TIMEOUT`] and
    /// [`TEST_DRAIN_TIMEOUT`]. Start from it to change a limit in
    /// [`TestServer::start_with`]. Its I/O backend is epoll, or io_uring where the
    /// environment has `LINERATE_TEST_IO=uring` (to run a test suite on both).
    pub fn config() -> Config {
        let io = match std::env::var("LINERATE_TEST_IO").as_deref() {
            Ok("uring") => crate::Io::Uring,
            _ => crate::Io::Epoll,
        };
        Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            workers: 1,
            pin: false,
            steering: false,
            io,
            linger_timeout: TEST_LINGER_TIMEOUT,
            drain_timeout: TEST_DRAIN_TIMEOUT,
            ..Config::default()
        }
    }

    /// Starts `router` with [`TestServer::config`].
    pub fn start(router: Router) -> Result<TestServer, StartError> {
        TestServer::start_with(TestServer::config(), router)
    }

    /// Binds `config`'s listeners (give it port 0) and runs the server on a background thread.
    pub fn start_with(config: Config, router: Router) -> Result<TestServer, StartError> {
        let server = Server::bind(config, router)?;
        let (addr, h2c, tls) = (server.local_addr(), server.h2c_addr(), server.tls_addr());
        let (handle, stats) = (server.handle(), server.stats());
        let thread = std::thread::Builder::new()
            .name("linerate-test-server".into())
            .spawn(move || server.run())
            .map_err(StartError::from)?;
        Ok(TestServer {
            addr,
            h2c,
            tls,
            handle,
            stats,
            thread: Some(thread),
        })
    }

    /// The address of the first listener.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The h2c (HTTP/2 with prior knowledge) listener's address, when the configuration has one.
    pub fn h2c_addr(&self) -> Option<SocketAddr> {
        self.h2c
    }

    /// The HTTPS listener's address, when the configuration has one.
    pub fn tls_addr(&self) -> Option<SocketAddr> {
        self.tls
    }

    /// `http://ADDR` followed by `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The server's counters (deferred answers outstanding, refused, timed out, late).
    pub fn stats(&self) -> &StatsHandle {
        &self.stats
    }

    /// Shuts down gracefully and waits for the workers; their error, if one failed.
    pub fn stop(mut self) -> io::Result<()> {
        self.halt()
    }

    fn halt(&mut self) -> io::Result<()> {
        self.handle.shutdown();
        match self.thread.take().map(JoinHandle::join) {
            None | Some(Ok(Ok(()))) => Ok(()),
            Some(Ok(Err(e))) => Err(e),
            Some(Err(_)) => Err(io::Error::other("the test server's thread panicked")),
        }
    }
}

impl Drop for TestServer {
    fn drop(&mut self) {
        if let Err(e) = self.halt() {
            tracing::error!(error = %e, "test server stopped with an error");
        }
    }
}
