//! `--instructions`: user-space instructions per request, counted by valgrind's callgrind.
//!
//! Instruction counts do not depend on what else the machine is doing, so they are the one
//! figure a noisy host reproduces exactly. Each server runs twice under callgrind (child
//! processes traced too, for nginx's workers): once started and stopped idle, once answering N
//! requests; per request = (loaded − idle) ÷ answered. Start-up, the readiness probe and
//! shutdown cancel out.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt as _;
use std::path::Path;
use std::time::Duration;

use anyhow::{Context as _, bail};

use super::driver::{Generator, Run};
use super::report::Instructions;
use super::server;
use super::suite::{ServerSpec, Workload};

/// Valgrind starts slowly and runs the server ~50× slower.
const START_TIMEOUT: Duration = Duration::from_secs(60);
/// Time for callgrind to write its profile after SIGTERM.
const DUMP_GRACE: Duration = Duration::from_secs(60);
/// Connections for the counted run (few: each one is a slow valgrind-side event).
const CONNECTIONS: usize = 8;
/// Per-request (and per-handshake) patience of the counted run: a TLS server's first
/// handshakes under valgrind took longer than linerate load's default 2 s.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(60);

/// Total `summary:`/`totals:` instructions over the callgrind files in `dir`.
pub fn total_instructions(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    let mut files = 0;
    for e in std::fs::read_dir(dir)?.flatten() {
        let name = e.file_name();
        if !name.to_string_lossy().starts_with("callgrind.") {
            continue;
        }
        let text = std::fs::read_to_string(e.path())?;
        total +=
            parse_total(&text).with_context(|| format!("no totals in {}", e.path().display()))?;
        files += 1;
    }
    if files == 0 {
        bail!("callgrind wrote no profile (did the server exit on SIGTERM?)");
    }
    Ok(total)
}

/// The first event count of a callgrind profile's `summary:` (or `totals:`) line.
pub fn parse_total(text: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let rest = l
            .strip_prefix("summary:")
            .or_else(|| l.strip_prefix("totals:"))?;
        rest.split_whitespace().next()?.parse().ok()
    })
}

fn valgrind(profile_dir: &Path) -> Vec<String> {
    vec![
        "valgrind".into(),
        "--tool=callgrind".into(),
        "--trace-children=yes".into(),
        format!(
            "--callgrind-out-file={}/callgrind.%p.out",
            profile_dir.display()
        ),
    ]
}

/// What is profiled: one server on one workload, placed as in the comparison.
pub struct Target<'a> {
    pub spec: &'a ServerSpec,
    pub workload: &'a Workload,
    pub vars: &'a BTreeMap<String, String>,
    pub server_cpus: &'a [usize],
    pub load_cpus: &'a [usize],
}

/// One server and workload: the instruction count per request.
pub fn measure(t: &Target<'_>, requests: u64) -> Instructions {
    let result = (|| -> anyhow::Result<(u64, f64)> {
        if !server::on_path("valgrind") {
            bail!("valgrind is not installed");
        }
        let idle = run_once(t, 0)?.0;
        let (loaded, answered) = run_once(t, requests)?;
        if answered == 0 {
            bail!("no requests answered under callgrind");
        }
        Ok((
            answered,
            loaded.saturating_sub(idle) as f64 / answered as f64,
        ))
    })();
    let (requests, per_request, error) = match result {
        Ok((answered, per)) => (answered, Some(per), None),
        Err(e) => (0, None, Some(format!("{e:#}"))),
    };
    Instructions {
        server: t.spec.name.clone(),
        workload: t.workload.name.clone(),
        requests,
        per_request,
        error,
    }
}

/// Starts under callgrind, answers `requests` (none: idle), stops; (instructions, answered).
fn run_once(t: &Target<'_>, requests: u64) -> anyhow::Result<(u64, u64)> {
    // Profiles go to a directory of their own that anyone may write to: nginx started as root
    // runs its workers as `nobody`, and a worker that cannot write its profile is lost.
    let profile_dir = std::env::temp_dir().join(format!(
        "linerate-callgrind-{}-{}-{requests}",
        std::process::id(),
        t.spec.name
    ));
    std::fs::create_dir_all(&profile_dir)?;
    std::fs::set_permissions(&profile_dir, std::fs::Permissions::from_mode(0o1777))?;
    let result = profiled(t, requests, &profile_dir);
    let _ = std::fs::remove_dir_all(&profile_dir);
    result
}

fn profiled(t: &Target<'_>, requests: u64, profile_dir: &Path) -> anyhow::Result<(u64, u64)> {
    let mut spec = t.spec.clone();
    spec.command = valgrind(profile_dir)
        .into_iter()
        .chain(spec.command)
        .collect();
    let running = server::start(&spec, t.vars, t.server_cpus, START_TIMEOUT)?;
    let mut answered = 0;
    if requests > 0 {
        let r = Run {
            generator: Generator::Linerate,
            addr: running.addr_for(t.workload.tls),
            workload: t.workload,
            connections: CONNECTIONS,
            cpus: t.load_cpus,
            duration: Duration::ZERO,
            rate: None,
            requests: Some(requests),
            timeout: Some(REQUEST_TIMEOUT),
        }
        .execute();
        match r {
            Ok(res) => answered = res.requests,
            Err(e) => {
                running.stop();
                return Err(e);
            }
        }
    }
    if !running.stop_within(DUMP_GRACE) {
        bail!("the server did not exit within {DUMP_GRACE:?} of SIGTERM under callgrind");
    }
    Ok((total_instructions(profile_dir)?, answered))
}

#[cfg(test)]
mod tests {
    #[test]
    fn totals_are_read() {
        let text = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nsummary: 123456\n";
        assert_eq!(super::parse_total(text), Some(123456));
        assert_eq!(super::parse_total("totals: 9 1\n"), Some(9));
        assert_eq!(super::parse_total("events: Ir\n"), None);
    }
}
