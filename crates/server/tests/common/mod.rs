//! What the integration tests that drive real clients share: a child process killed when the
//! test ends (a failed assertion leaves none running), and headless Chromium.
#![allow(dead_code)] // each test binary uses its part

use std::process::{Child, Command, Stdio};

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
