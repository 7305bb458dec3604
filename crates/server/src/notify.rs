//! systemd's service notifications (sd_notify(3)), spoken without libsystemd: one datagram per
//! state change to the socket named by `NOTIFY_SOCKET` (a path, or `@name` in the abstract
//! namespace). The server sends `READY=1` (with `MAINPID`) once its workers run,
//! `RELOADING=1` (with `MONOTONIC_USEC`) and then `READY=1` around each SIGHUP, `STOPPING=1`
//! when a signal asks it to drain, and `WATCHDOG=1` every half `WATCHDOG_USEC` while every
//! worker thread is alive (a worker that ends stops the pings, so systemd's watchdog restarts
//! the service). Without `NOTIFY_SOCKET` every call here does nothing. A unit using it says
//! `Type=notify-reload` (systemd 253 and later) or `Type=notify`.
#![forbid(unsafe_code)]

use std::io;
use std::os::unix::net::{SocketAddr, UnixDatagram};
use std::time::Duration;

/// Where notifications go, read once from the environment.
#[derive(Debug)]
pub struct Notifier {
    sock: UnixDatagram,
    addr: SocketAddr,
}

impl Notifier {
    /// The notifier of `NOTIFY_SOCKET`, or `None` when it is unset, empty or unusable (a
    /// relative path, say, which systemd never sets).
    pub fn from_env() -> Option<Notifier> {
        let target = std::env::var_os("NOTIFY_SOCKET")?;
        Notifier::to(target.to_str()?).ok()
    }

    /// A notifier sending to `target`: an absolute path, or `@name` for an abstract socket.
    pub fn to(target: &str) -> io::Result<Notifier> {
        let addr = if let Some(name) = target.strip_prefix('@') {
            use std::os::linux::net::SocketAddrExt;
            SocketAddr::from_abstract_name(name.as_bytes())?
        } else if target.starts_with('/') {
            SocketAddr::from_pathname(target)?
        } else {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "NOTIFY_SOCKET is neither an absolute path nor @name",
            ));
        };
        // Never blocks the thread that tells (the signal thread tells STOPPING before it
        // shuts down): a notification a full socket cannot take is lost, and logged.
        let sock = UnixDatagram::unbound()?;
        sock.set_nonblocking(true)?;
        Ok(Notifier { sock, addr })
    }

    /// Sends one notification (newline-separated `KEY=VALUE` assignments).
    pub fn send(&self, state: &str) -> io::Result<()> {
        self.sock
            .send_to_addr(state.as_bytes(), &self.addr)
            .map(drop)
    }

    /// Sends `state` and logs a failure (a notification lost is not worth stopping for).
    pub(crate) fn tell(&self, state: &str) {
        if let Err(e) = self.send(state) {
            tracing::warn!(error = %e, state, "cannot notify systemd");
        }
    }

    pub(crate) fn ready(&self) {
        self.tell(&format!("READY=1\nMAINPID={}", std::process::id()));
    }

    pub(crate) fn reloading(&self) {
        self.tell(&format!(
            "RELOADING=1\nMONOTONIC_USEC={}",
            crate::sys::monotonic_us()
        ));
    }

    pub(crate) fn stopping(&self) {
        self.tell("STOPPING=1");
    }
}

/// How often to ping the watchdog: half of `WATCHDOG_USEC`, when it is set for this process
/// (`WATCHDOG_PID` absent or ours).
pub fn watchdog_interval() -> Option<Duration> {
    let usec: u64 = std::env::var("WATCHDOG_USEC").ok()?.parse().ok()?;
    if let Ok(pid) = std::env::var("WATCHDOG_PID")
        && pid.parse::<u32>().ok() != Some(std::process::id())
    {
        return None;
    }
    (usec > 0).then(|| Duration::from_micros(usec / 2))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sends_to_a_path_and_to_an_abstract_name() {
        let dir = std::env::temp_dir().join(format!("linerate-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("notify.sock");
        let _ = std::fs::remove_file(&path);
        let rx = UnixDatagram::bind(&path).unwrap();
        Notifier::to(path.to_str().unwrap())
            .unwrap()
            .send("READY=1")
            .unwrap();
        let mut buf = [0u8; 64];
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
        let _ = std::fs::remove_dir_all(&dir);

        use std::os::linux::net::SocketAddrExt;
        let name = format!("linerate-notify-test-{}", std::process::id());
        let rx = UnixDatagram::bind_addr(&SocketAddr::from_abstract_name(&name).unwrap()).unwrap();
        Notifier::to(&format!("@{name}"))
            .unwrap()
            .send("STOPPING=1")
            .unwrap();
        let n = rx.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"STOPPING=1");
    }

    #[test]
    fn a_relative_path_is_refused() {
        assert!(Notifier::to("notify.sock").is_err());
        assert!(Notifier::to("").is_err());
    }
}
