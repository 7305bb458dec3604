//! `linerate lab c2c`: core-to-core latency. Two threads pinned to each pair of CPUs play
//! compare-and-swap ping-pong on one cache line; the one-way latency is half a round trip.
//! Prints the matrix (mean ± standard error), the closest pairs and a placement hint, and writes
//! CSV, JSON and a PNG/SVG heatmap. This file owns the command line and its output files;
//! [`measure()`] owns the threads, [`matrix`] the numbers and text, [`heatmap`] the picture.
//! Invariant: a run ends in bounded time (a time budget, a CPU cap, and a deadline on every wait).
#![forbid(unsafe_code)]

pub mod heatmap;
pub mod matrix;
pub mod measure;

use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context as _;
use linerate_load::units::{self, format_cpu_list};

pub use heatmap::{write_heatmap_png, write_heatmap_svg};
pub use matrix::{Cell, Matrix, Pair, Placement};
pub use measure::{C2cError, MAX_CPUS, Plan, allowed_cpus, fit_round_trips, measure};

/// Samples per pair by default: one warm-up (discarded) and ten kept.
pub const DEFAULT_SAMPLES: u32 = 11;
/// Fewest samples per pair: one discarded and two kept, the least that gives a standard error.
pub const MIN_SAMPLES: u32 = 3;
/// Round trips per sample when `--round-trips` is not given and the budget allows: about 5 ms
/// a sample at a typical 100-250 ns round trip, long enough that clock reads do not matter.
pub const DEFAULT_ROUND_TRIPS: u64 = 20_000;
/// Fewest round trips per sample the budget may choose: below this the first round trip's
/// wake-up and the clock reads are a visible part of a sample.
pub const MIN_ROUND_TRIPS: u64 = 200;
/// Default time budget for the whole run (`--budget`).
pub const DEFAULT_BUDGET: &str = "60s";
/// How long a thread waits for its partner to make any progress before the run fails.
pub const STALL_TIMEOUT: Duration = Duration::from_secs(1);
/// Default output directory (`--out`).
pub const DEFAULT_OUT: &str = "lab-out/c2c";

/// Measure core-to-core latency: compare-and-swap ping-pong between every pair of CPUs.
#[derive(Debug, Clone)]
pub struct C2cArgs {
    /// CPUs to measure, e.g. `0-3,8` (default: every CPU this process may run on).
    pub cores: Option<Vec<usize>>,
    /// Round trips per sample (default: chosen to fit --budget, at most 20000).
    pub round_trips: Option<u64>,
    /// Samples per pair; the first is a warm-up and is discarded.
    pub samples: u32,
    /// Time the whole run should fit in; picks the round trips per sample when --round-trips is
    /// not given (e.g. 60s, 2m).
    pub budget: Duration,
    /// Directory for c2c.csv, c2c-err.csv, c2c.json, c2c.png and c2c.svg.
    pub out: PathBuf,
    /// Print the matrix as JSON on stdout instead of the table.
    pub json: bool,
}

/// What to measure and how long it may take.
#[derive(Clone, Debug)]
pub struct Options {
    /// Round trips per sample; `None` picks them from `budget` (at most [`DEFAULT_ROUND_TRIPS`]).
    pub round_trips: Option<u64>,
    /// Samples per pair, the first discarded (at least [`MIN_SAMPLES`]).
    pub samples: u32,
    /// Time the whole measurement should fit in when `round_trips` is `None`.
    pub budget: Duration,
    /// How long a thread waits for its partner to make progress before the run fails.
    pub stall_timeout: Duration,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            round_trips: None,
            samples: DEFAULT_SAMPLES,
            budget: units::duration(DEFAULT_BUDGET).unwrap_or(Duration::from_secs(60)),
            stall_timeout: STALL_TIMEOUT,
        }
    }
}

/// Runs `linerate lab c2c`: plans (prints the estimate), measures, writes the files, prints
/// the matrix, the closest pairs and the placement hint.
pub fn run(args: &C2cArgs) -> anyhow::Result<ExitCode> {
    let cores = match &args.cores {
        Some(list) => list.clone(),
        None => allowed_cpus(),
    };
    let opts = Options {
        round_trips: args.round_trips,
        samples: args.samples,
        budget: args.budget,
        ..Options::default()
    };
    let plan = Plan::new(&cores, &opts).context("lab c2c")?;
    eprintln!(
        "c2c: {} CPUs ({}), {} pair(s) × {} samples × {} round trips; estimated {:.1?}",
        plan.cpus().len(),
        format_cpu_list(plan.cpus()),
        plan.pairs(),
        plan.samples(),
        plan.round_trips(),
        plan.estimate(),
    );
    if args.round_trips.is_none() && plan.estimate() > args.budget {
        eprintln!(
            "c2c: warning: that is over the {:.0?} budget even at {MIN_ROUND_TRIPS} round trips \
             a sample; measure fewer CPUs (--cores) or fewer --samples",
            args.budget
        );
    }
    let total = plan.pairs();
    let step = total.div_ceil(PROGRESS_LINES).max(1);
    let matrix = plan
        .run_with(|done, total| {
            if done % step == 0 && done < total {
                eprintln!("c2c: {done}/{total} pairs");
            }
        })
        .context("lab c2c")?;

    let written = write_all(&matrix, &args.out)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&matrix)?);
    } else {
        print!("{}", matrix.to_text());
    }
    let mut files = String::new();
    for path in &written {
        let _ = write!(files, " {}", path.display());
    }
    eprintln!("c2c: wrote{files}");
    Ok(ExitCode::SUCCESS)
}

/// Progress lines printed on stderr over a run (many-CPU runs take a while).
const PROGRESS_LINES: usize = 10;

/// Writes c2c.csv, c2c-err.csv, c2c.json, c2c.png and c2c.svg into `dir`; returns their paths.
pub fn write_all(matrix: &Matrix, dir: &std::path::Path) -> anyhow::Result<Vec<PathBuf>> {
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let mut written = Vec::new();
    for (name, text) in [
        ("c2c.csv", matrix.to_csv()),
        ("c2c-err.csv", matrix.errors_csv()),
        ("c2c.json", serde_json::to_string_pretty(matrix)? + "\n"),
    ] {
        let path = dir.join(name);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    let png = dir.join("c2c.png");
    write_heatmap_png(matrix, &png)?;
    written.push(png);
    let svg = dir.join("c2c.svg");
    write_heatmap_svg(matrix, &svg)?;
    written.push(svg);
    Ok(written)
}

/// The CPU model from /proc/cpuinfo ("model name", x86), if there is one.
pub fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .filter_map(|line| line.split_once(':'))
        .find(|(key, _)| key.trim() == "model name")
        .map(|(_, value)| value.split_whitespace().collect::<Vec<_>>().join(" "))
        .filter(|model| !model.is_empty())
}
