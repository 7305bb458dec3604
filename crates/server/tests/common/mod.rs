//! What the integration tests that drive real clients share: a child process killed when the
//! test ends (a failed assertion leaves none running), and headless Chromium.
#![allow(dead_code)] // each test binary uses its part

use std::process::{Child, Command, Stdio};

/// The mask of every client frame the WebSocket tests send.
pub const MASK: [u8; 4] = [0x37, 0xfa, 0x21, 0x3d];

/// A client's WebSocket frame: first byte `b0`, the payload masked with [`MASK`], its length
/// in the shortest form.
pub fn masked_frame(b0: u8, payload: &[u8]) -> Vec<u8> {
    let mut v = vec![b0];
    match payload.len() {
        n if n < 126 => v.push(0x80 | n as u8),
        n if n <= 0xFFFF => {
            v.push(0x80 | 126);
            v.extend_from_slice(&(n as u16).to_be_bytes());
        }
        n => {
            v.push(0x80 | 127);
            v.extend_from_slice(&(n as u64).to_be_bytes());
        }
    }
    v.extend_from_slice(&MASK);
    v.extend(payload.iter().enumerate().map(|(i, b)| b ^ MASK[i % 4]));
    v
}

/// Kills a child when dropped (a failed assertion leaves no client running).
pub struct Kill(pub Child);

impl Drop for Kill {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Headless Chromium with a fresh profile, loading `url`.
pub fn chromium(url: &str, profile: &std::path::Path) -> Option<Kill> {
    chromium_with(url, profile, &[])
}

/// [`chromium`] with `extra` flags (`--ignore-certificate-errors` for a throwaway
/// certificate).
pub fn chromium_with(url: &str, profile: &std::path::Path, extra: &[&str]) -> Option<Kill> {
    let bin = ["chromium", "chromium-browser"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    });
    let Some(bin) = bin else {
        println!("NOT RUN: no chromium (scripts/browser.sh installs Debian's)");
        return None;
    };
    let child = Command::new(bin)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-dev-shm-usage",
            "--disable-background-networking",
            "--no-first-run",
            "--remote-debugging-port=0",
        ])
        .args(extra)
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(url)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .ok()?;
    Some(Kill(child))
}

/// Debian's curl, where it is installed; `None` after a NOT RUN line where it is not.
pub fn curl() -> Option<&'static str> {
    let ok = Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        println!("NOT RUN: no curl");
    }
    ok.then_some("curl")
}
