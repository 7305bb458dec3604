//! The real binary, started as a child process: `serve` on an OS-chosen port (address read
//! from the banner), signals by PID, bounded waits.

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_linerate");

/// Runs the binary to completion: (exit code, stderr).
pub fn run_err(args: &[&str]) -> (i32, String) {
    let out = Command::new(BIN)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// A running `linerate serve` and its banner's lines.
pub struct Served {
    pub child: Child,
    pub addr: SocketAddr,
    pub banner: Vec<String>,
}

impl Served {
    /// The `[::1]` listener the banner names on an "also on http://" line.
    pub fn also_on(&self) -> SocketAddr {
        self.banner
            .iter()
            .find_map(|l| l.trim().strip_prefix("also on http://"))
            .expect("the banner names a second listener")
            .parse()
            .unwrap()
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `linerate serve --addr 127.0.0.1:0 --no-pin --log-level warn --workers 1 EXTRA…`
/// and reads its banner up to the "Stop with" line.
pub fn serve(extra: &[&str]) -> Served {
    let mut args = vec!["--addr", "127.0.0.1:0"];
    args.extend_from_slice(extra);
    serve_as(&args)
}

/// Starts `linerate serve --no-pin --log-level warn --workers 1 ARGS…` (`--workers` from
/// `ARGS` when it is there; no `--addr`: a
/// `--config` file's listeners stay) and reads its banner.
pub fn serve_as(args: &[&str]) -> Served {
    // One worker unless the test asks for more.
    let workers: &[&str] = if args.contains(&"--workers") {
        &[]
    } else {
        &["--workers", "1"]
    };
    let mut child = Command::new(BIN)
        .args(["serve", "--no-pin", "--log-level", "warn"])
        .args(workers)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let mut reader = BufReader::new(child.stdout.take().unwrap());
    let mut banner = Vec::new();
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap() == 0 {
            panic!("server exited before its banner ended: {banner:?}");
        }
        let stop = line.starts_with("Stop with");
        banner.push(line.trim_end().to_string());
        if stop {
            break;
        }
    }
    // Keep reading the rest of stdout so the server never writes into a closed pipe.
    std::thread::spawn(move || std::io::copy(&mut reader, &mut std::io::sink()));
    let url = banner[0]
        .split_whitespace()
        .find(|w| w.starts_with("http://"))
        .expect("banner has the URL");
    let addr = url.trim_start_matches("http://").parse().unwrap();
    Served {
        child,
        addr,
        banner,
    }
}

/// Sends `sig` to the child.
pub fn signal(child: &Child, sig: rustix::process::Signal) {
    let pid = rustix::process::Pid::from_raw(child.id() as i32).unwrap();
    rustix::process::kill_process(pid, sig).unwrap();
}

/// Waits for the child to exit, at most `limit`.
pub fn wait_exit(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("server did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `serve --no-pin --workers 1 --log-level info --config FILE`, its stdio left to the caller.
fn serve_config(file: &Path) -> Command {
    let mut command = Command::new(BIN);
    command
        .args([
            "serve",
            "--no-pin",
            "--workers",
            "1",
            "--log-level",
            "info",
            "--config",
        ])
        .arg(file);
    command
}

/// `serve --config FILE` with one worker and `info` logs, stdout and stderr piped to the test
/// (which reads the log lines it waits for), killed when the test ends.
pub fn serve_config_logged(file: &Path) -> Stopped {
    let child = serve_config(file)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    Stopped(child)
}

/// A child that is killed when the test ends, however it ends (a failed assertion included):
/// a server left running would hold the test harness's output pipe open.
pub struct Stopped(pub Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A `linerate serve --config` child (one worker, `info` logs), its stderr (the error log)
/// kept in a file; killed when dropped.
pub struct Linerate {
    child: Stopped,
    log: PathBuf,
}

impl Linerate {
    /// Writes `config` to `dir`/linerate.toml and starts `serve --config` on it: returns once
    /// its banner is out, panics with its log if it never is. The log is `dir`/linerate-N.log,
    /// N new at each start (a free port's number), so servers started one after another in
    /// one dir keep their own logs.
    pub fn start(dir: &Path, config: &str) -> Linerate {
        let mut server = Linerate::spawn(dir, config);
        server.wait_banner();
        server
    }

    /// [`Linerate::start`] without the wait for the banner: spawn several, then
    /// [`Linerate::wait_banner`] each, and they start at once.
    pub fn spawn(dir: &Path, config: &str) -> Linerate {
        let path = dir.join("linerate.toml");
        std::fs::write(&path, config).unwrap();
        let log = dir.join(format!("linerate-{}.log", super::free_port("127.0.0.1")));
        let child = serve_config(&path)
            .stdout(Stdio::piped())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        Linerate {
            child: Stopped(child),
            log,
        }
    }

    /// Waits for the banner of a [`Linerate::spawn`]ed server; panics with its log if it
    /// exits or never finishes the banner.
    pub fn wait_banner(&mut self) {
        if let Err(lines) = banner(&mut self.child.0) {
            panic!("linerate did not start: {lines:?}\n{}", self.log());
        }
    }

    /// Its error log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Sends it SIGHUP.
    pub fn hup(&self) {
        signal(&self.child.0, rustix::process::Signal::HUP);
    }
}

/// Reads `child`'s stdout up to its banner's "Stop with" line, at most
/// [`crate::common::EVENTUALLY`]: `Ok` with the lines, or `Err` with what it printed when it
/// exited or never finished the banner. The rest of stdout is drained by a thread.
pub fn banner(child: &mut Child) -> Result<Vec<String>, Vec<String>> {
    use std::sync::mpsc;
    let out = child.stdout.take().expect("stdout piped");
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(out).lines() {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let deadline = Instant::now() + super::EVENTUALLY;
    let mut lines = Vec::new();
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok(Ok(line)) => {
                let done = line.starts_with("Stop with");
                lines.push(line);
                if done {
                    // Keep draining so the server never writes into a closed pipe.
                    std::thread::spawn(move || for _ in rx {});
                    return Ok(lines);
                }
            }
            _ => return Err(lines),
        }
    }
}
