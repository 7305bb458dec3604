//! Redis and memcached for the tests that need a second cache tier: started on a loopback
//! port the test picks, no persistence, a small memory limit, killed by PID when dropped; a
//! NOT RUN line where the program is missing.

use std::process::Command;

/// A `redis-server` or `memcached` this test started on 127.0.0.1 on a port it picked (no
/// persistence, a small memory limit), killed by PID when dropped.
pub struct TierServer {
    pub program: &'static str,
    pub port: u16,
    child: std::process::Child,
}

impl TierServer {
    /// `None` after a NOT RUN line where the program is missing.
    pub fn start(program: &'static str) -> Option<TierServer> {
        let missing = Command::new(program)
            .arg("--version")
            .stdout(std::process::Stdio::null())
            .status()
            .is_err();
        if missing {
            eprintln!(
                "NOT RUN: the {program} tier: not installed (scripts/cache-servers.sh install)"
            );
            return None;
        }
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Self::spawn(program, port);
        Some(TierServer {
            program,
            port,
            child,
        })
    }

    fn spawn(program: &str, port: u16) -> std::process::Child {
        let port_s = port.to_string();
        let mut cmd = Command::new(program);
        if program == "redis-server" {
            cmd.args([
                "--bind",
                "127.0.0.1",
                "--port",
                &port_s,
                "--save",
                "",
                "--appendonly",
            ])
            .args([
                "no",
                "--maxmemory",
                "8mb",
                "--maxmemory-policy",
                "allkeys-lru",
            ]);
        } else {
            cmd.args(["-l", "127.0.0.1", "-p", &port_s, "-U", "0", "-m", "8"]);
            if is_root() {
                cmd.args(["-u", "root"]);
            }
        }
        let mut child = cmd
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        for _ in 0..400 {
            if std::net::TcpStream::connect(("127.0.0.1", port)).is_ok() {
                return child;
            }
            std::thread::sleep(std::time::Duration::from_millis(25));
        }
        let _ = child.kill();
        let _ = child.wait();
        panic!("{program} did not listen on {port}");
    }

    pub fn url(&self) -> String {
        match self.program {
            "redis-server" => format!("redis://127.0.0.1:{}", self.port),
            _ => format!("memcached://127.0.0.1:{}", self.port),
        }
    }

    /// Sends `sig` to the server (SIGSTOP: a tier that takes connections and never answers).
    pub fn signal(&self, sig: rustix::process::Signal) {
        let pid = rustix::process::Pid::from_raw(self.child.id() as i32).unwrap();
        rustix::process::kill_process(pid, sig).unwrap();
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    pub fn restart(&mut self) {
        self.kill();
        self.child = Self::spawn(self.program, self.port);
    }
}

/// Whether this process runs as root (memcached then needs `-u root`).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|v| v.split_whitespace().next().map(|u| u == "0"))
            .unwrap_or(false)
    })
}

impl Drop for TierServer {
    fn drop(&mut self) {
        self.kill();
    }
}
