//! The measurement: for every unordered pair of CPUs, two threads pinned one to each play
//! compare-and-swap ping-pong on one cache line, and a sample is the time of N round trips.
//! Owns the CPU checks, pinning, calibration, the round-trip choice from the time budget, and
//! the bounds. Invariant: nothing here waits unboundedly — every spin reads the clock every
//! [`SPIN_CHECK_EVERY`] turns and gives up on a stalled partner or an overrun deadline, and the
//! only blocking wait (the start barrier) is reached by both threads whatever happened before.
#![forbid(unsafe_code)]

use std::fmt;
use std::io;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use rustix::thread::CpuSet;

use super::cpu_model;
use super::matrix::{Cell, Matrix};
use super::{DEFAULT_ROUND_TRIPS, MIN_ROUND_TRIPS, MIN_SAMPLES, Options};
use linerate_load::units::format_cpu_list;

/// Most CPUs one run measures: pairs grow as n², and at 256 CPUs (32,640 pairs) starting and
/// pinning the threads alone takes seconds. Measure a subset with `--cores`.
pub const MAX_CPUS: usize = 256;
/// Spins between clock reads while waiting for the partner. A clock read on every turn would
/// slow the ping-pong; one per 1024 turns is free and notices a stall within microseconds.
pub const SPIN_CHECK_EVERY: u32 = 1024;
/// Round trips per calibration sample (the calibration times the first pair once, up front).
const CALIBRATION_ROUND_TRIPS: u64 = 2_000;
/// Calibration samples; the first is discarded like any other.
const CALIBRATION_SAMPLES: u32 = 3;
/// Time the calibration may take on top of the stall timeout.
const CALIBRATION_LIMIT: Duration = Duration::from_secs(2);
/// A pair may take this many times its planned time (plus the stall timeout) before the run
/// fails: a cross-socket pair is a few times slower than the calibrated first pair, a busy
/// host more; a pair slower than this is time-sliced, and its number would mean nothing.
const PAIR_DEADLINE_FACTOR: u32 = 20;

/// No pair may take longer than this, whatever the round trips asked for.
const MAX_PAIR_TIME: Duration = Duration::from_secs(3600);

/// Why a measurement could not be made. Each variant says what the user can change.
#[derive(Debug)]
pub enum C2cError {
    /// A requested CPU is not in this process's affinity mask (absent, offline, or excluded by
    /// taskset or a cgroup cpuset).
    NotAllowed { cpu: usize, allowed: Vec<usize> },
    /// Fewer than two distinct CPUs: there is no pair.
    TooFewCpus { count: usize },
    /// More than [`MAX_CPUS`] CPUs.
    TooManyCpus { count: usize },
    /// Fewer than [`MIN_SAMPLES`] samples per pair: no standard error.
    TooFewSamples { samples: u32 },
    /// `round_trips` was `Some(0)`.
    ZeroRoundTrips,
    /// The affinity mask could not be read.
    Affinity(io::Error),
    /// `sched_setaffinity` refused a CPU that the mask allowed (it went offline meanwhile).
    Pin { cpu: usize, source: io::Error },
    /// The thread on `waiting` saw no answer from `partner` for `timeout`.
    Stalled {
        waiting: usize,
        partner: usize,
        timeout: Duration,
    },
    /// A pair ran past its deadline while still making progress, slowly.
    Overtime { a: usize, b: usize, limit: Duration },
}

impl fmt::Display for C2cError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            C2cError::NotAllowed { cpu, allowed } => write!(
                f,
                "CPU {cpu} is not available to this process (allowed: {}); pick from those with --cores",
                format_cpu_list(allowed)
            ),
            C2cError::TooFewCpus { count } => write!(
                f,
                "core-to-core latency needs at least 2 distinct CPUs, got {count}"
            ),
            C2cError::TooManyCpus { count } => write!(
                f,
                "{count} CPUs is more than the {MAX_CPUS} one run measures; pick a subset with --cores"
            ),
            C2cError::TooFewSamples { samples } => write!(
                f,
                "{samples} samples per pair is too few: the first is discarded and a standard error needs two more (at least {MIN_SAMPLES})"
            ),
            C2cError::ZeroRoundTrips => write!(f, "round trips per sample must be at least 1"),
            C2cError::Affinity(e) => write!(f, "reading this process's CPU affinity: {e}"),
            C2cError::Pin { cpu, source } => write!(f, "pinning a thread to CPU {cpu}: {source}"),
            C2cError::Stalled {
                waiting,
                partner,
                timeout,
            } => write!(
                f,
                "CPU {partner} did not answer CPU {waiting} for {timeout:?}: the partner thread is not running \
                 (the CPU is saturated, or both CPUs share one host core in a VM)"
            ),
            C2cError::Overtime { a, b, limit } => write!(
                f,
                "pair {a}–{b} ran past its {limit:.1?} limit: the CPUs are busy or time-sliced onto one host core; \
                 measure when the host is quieter or leave them out with --cores"
            ),
        }
    }
}

impl std::error::Error for C2cError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            C2cError::Affinity(e) | C2cError::Pin { source: e, .. } => Some(e),
            _ => None,
        }
    }
}

/// The CPUs this process may run on (its affinity mask), ascending.
pub fn allowed_cpus() -> Vec<usize> {
    match rustix::thread::sched_getaffinity(None) {
        Ok(set) => (0..CpuSet::MAX_CPU).filter(|&c| set.is_set(c)).collect(),
        Err(_) => (0..std::thread::available_parallelism().map_or(1, |n| n.get())).collect(),
    }
}

/// Measures every pair of `cores` (sorted, duplicates dropped): [`Plan::new`] then [`Plan::run`].
pub fn measure(cores: &[usize], opts: &Options) -> Result<Matrix, C2cError> {
    Plan::new(cores, opts)?.run()
}

/// A checked, calibrated measurement, ready to run; [`Plan::estimate`] says how long it takes.
#[derive(Clone, Debug)]
pub struct Plan {
    cpus: Vec<usize>,
    round_trips: u64,
    samples: u32,
    stall_timeout: Duration,
    /// One round trip on the calibrated (first) pair.
    round_trip: Duration,
    /// Starting, pinning and joining one pair's threads, beyond its samples.
    pair_overhead: Duration,
    calibration: Duration,
}

impl Plan {
    /// Checks the CPUs and options, then calibrates on the first pair: the time of a round trip
    /// and the per-pair overhead, from which the round trips per sample fit the budget.
    pub fn new(cores: &[usize], opts: &Options) -> Result<Plan, C2cError> {
        if opts.samples < MIN_SAMPLES {
            return Err(C2cError::TooFewSamples {
                samples: opts.samples,
            });
        }
        if opts.round_trips == Some(0) {
            return Err(C2cError::ZeroRoundTrips);
        }
        let cpus = check_cpus(cores)?;

        let start = Instant::now();
        let deadline = start + opts.stall_timeout + CALIBRATION_LIMIT;
        let times = ping_pong(
            (cpus[0], cpus[1]),
            CALIBRATION_ROUND_TRIPS,
            CALIBRATION_SAMPLES,
            opts.stall_timeout,
            deadline,
        )?;
        let calibration = start.elapsed();
        let kept = &times[1..];
        let round_trip =
            kept.iter().sum::<Duration>() / (kept.len() as u32) / CALIBRATION_ROUND_TRIPS as u32;
        let pair_overhead = calibration.saturating_sub(times.iter().sum());
        let round_trips = opts.round_trips.unwrap_or_else(|| {
            fit_round_trips(
                opts.budget,
                pair_count(cpus.len()),
                opts.samples,
                round_trip,
                pair_overhead,
            )
        });
        Ok(Plan {
            cpus,
            round_trips,
            samples: opts.samples,
            stall_timeout: opts.stall_timeout,
            round_trip,
            pair_overhead,
            calibration,
        })
    }

    /// The CPUs measured, ascending.
    pub fn cpus(&self) -> &[usize] {
        &self.cpus
    }

    /// Unordered pairs measured: n(n-1)/2.
    pub fn pairs(&self) -> usize {
        pair_count(self.cpus.len())
    }

    /// Round trips per sample.
    pub fn round_trips(&self) -> u64 {
        self.round_trips
    }

    /// Samples per pair, the first discarded.
    pub fn samples(&self) -> u32 {
        self.samples
    }

    /// Expected duration of [`Plan::run`], from the calibration.
    pub fn estimate(&self) -> Duration {
        self.pair_time()
            .saturating_add(self.pair_overhead)
            .saturating_mul(u32::try_from(self.pairs()).unwrap_or(u32::MAX))
    }

    /// Measures every pair.
    pub fn run(&self) -> Result<Matrix, C2cError> {
        self.run_with(|_, _| {})
    }

    /// Measures every pair, calling `progress(done, total)` after each.
    pub fn run_with(&self, mut progress: impl FnMut(usize, usize)) -> Result<Matrix, C2cError> {
        let start = Instant::now();
        let n = self.cpus.len();
        let total = self.pairs();
        let limit = (self.pair_time().saturating_mul(PAIR_DEADLINE_FACTOR) + self.stall_timeout)
            .min(MAX_PAIR_TIME);
        let mut cells = vec![vec![None; n]; n];
        let mut done = 0;
        for (i, j) in (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))) {
            let times = ping_pong(
                (self.cpus[i], self.cpus[j]),
                self.round_trips,
                self.samples,
                self.stall_timeout,
                Instant::now() + limit,
            )?;
            let cell = Cell::from_samples(&times[1..], self.round_trips);
            cells[i][j] = Some(cell);
            cells[j][i] = Some(cell);
            done += 1;
            progress(done, total);
        }
        Ok(Matrix {
            cpus: self.cpus.clone(),
            cells,
            round_trips: self.round_trips,
            samples: self.samples,
            elapsed_s: (self.calibration + start.elapsed()).as_secs_f64(),
            cpu_model: cpu_model(),
        })
    }

    /// Planned sample time of one pair, all samples.
    fn pair_time(&self) -> Duration {
        self.round_trip
            .saturating_mul(u32::try_from(self.round_trips).unwrap_or(u32::MAX))
            .saturating_mul(self.samples)
    }
}

/// Round trips per sample that fit `budget`: what is left after the fixed per-pair costs,
/// divided evenly over all samples of all pairs, within [`MIN_ROUND_TRIPS`] and
/// [`DEFAULT_ROUND_TRIPS`]. At the floor the run can exceed the budget; the caller warns.
pub fn fit_round_trips(
    budget: Duration,
    pairs: usize,
    samples: u32,
    round_trip: Duration,
    pair_overhead: Duration,
) -> u64 {
    let per_pair = budget
        .div_f64(pairs.max(1) as f64)
        .saturating_sub(pair_overhead);
    let per_sample = per_pair / samples.max(1);
    let fit = per_sample.as_nanos() / round_trip.as_nanos().max(1);
    u64::try_from(fit)
        .unwrap_or(u64::MAX)
        .clamp(MIN_ROUND_TRIPS, DEFAULT_ROUND_TRIPS)
}

fn pair_count(n: usize) -> usize {
    n * n.saturating_sub(1) / 2
}

/// Sorts and dedups `cores` and checks each against the affinity mask and the count limits.
fn check_cpus(cores: &[usize]) -> Result<Vec<usize>, C2cError> {
    let allowed =
        rustix::thread::sched_getaffinity(None).map_err(|e| C2cError::Affinity(e.into()))?;
    let mut cpus = cores.to_vec();
    cpus.sort_unstable();
    cpus.dedup();
    if let Some(&cpu) = cpus
        .iter()
        .find(|&&c| c >= CpuSet::MAX_CPU || !allowed.is_set(c))
    {
        return Err(C2cError::NotAllowed {
            cpu,
            allowed: allowed_cpus(),
        });
    }
    match cpus.len() {
        count @ 0..2 => Err(C2cError::TooFewCpus { count }),
        count if count > MAX_CPUS => Err(C2cError::TooManyCpus { count }),
        _ => Ok(cpus),
    }
}

/// The ping-pong line, alone on a 128-byte block: Intel's adjacent-line prefetcher pulls cache
/// lines in 128-byte pairs, so a neighbour on the other half would add traffic.
#[repr(align(128))]
#[derive(Default)]
struct Line(AtomicU64);

/// The abort flag, on its own block so that polling it does not disturb [`Line`].
#[repr(align(128))]
#[derive(Default)]
struct Flag(AtomicBool);

/// Why one side of a pair stopped early.
#[derive(Debug)]
enum Stop {
    Pin(io::Error),
    /// No progress from the partner for the stall timeout.
    Stalled,
    /// The pair deadline passed.
    Overtime,
    /// The other side stopped first.
    Aborted,
}

/// What bounds a wait.
struct Limits<'a> {
    abort: &'a AtomicBool,
    stall: Duration,
    deadline: Instant,
}

/// Times `samples` samples of `round_trips` round trips between CPUs `a` (initiator) and `b`
/// (responder), warm-up first. The line counts up: round trip r is the initiator's CAS
/// 2r → 2r+1 and the responder's answer 2r+1 → 2r+2, so either side knows exactly what to wait
/// for and samples follow each other with no second barrier.
fn ping_pong(
    (a, b): (usize, usize),
    round_trips: u64,
    samples: u32,
    stall: Duration,
    deadline: Instant,
) -> Result<Vec<Duration>, C2cError> {
    let began = Instant::now();
    let line = Line::default();
    let abort = Flag::default();
    let barrier = Barrier::new(2);
    let limits = Limits {
        abort: &abort.0,
        stall,
        deadline,
    };
    let (ra, rb) = std::thread::scope(|s| {
        let ha = s.spawn(|| initiator(&line.0, &barrier, &limits, a, round_trips, samples));
        let hb = s.spawn(|| {
            responder(
                &line.0,
                &barrier,
                &limits,
                b,
                round_trips.saturating_mul(u64::from(samples)),
            )
        });
        let ra = ha.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        let rb = hb.join().unwrap_or_else(|p| std::panic::resume_unwind(p));
        (ra, rb)
    });
    // The side that failed first names the cause; the other one only saw the abort flag.
    let stop = match (ra, rb) {
        (Ok(times), Ok(())) => return Ok(times),
        (Err(Stop::Aborted), Err(stop)) => (b, a, stop),
        (Err(stop), _) => (a, b, stop),
        (Ok(_), Err(stop)) => (b, a, stop),
    };
    Err(match stop {
        (cpu, _, Stop::Pin(source)) => C2cError::Pin { cpu, source },
        (waiting, partner, Stop::Stalled) => C2cError::Stalled {
            waiting,
            partner,
            timeout: stall,
        },
        (_, _, Stop::Overtime | Stop::Aborted) => C2cError::Overtime {
            a,
            b,
            limit: deadline.saturating_duration_since(began),
        },
    })
}

/// Pins the calling thread to `cpu`; on failure raises `abort` so the partner leaves too.
/// Both sides then always reach the barrier, so neither can block on it forever.
fn start(cpu: usize, barrier: &Barrier, limits: &Limits<'_>) -> Result<(), Stop> {
    let mut set = CpuSet::new();
    set.set(cpu);
    let pinned = rustix::thread::sched_setaffinity(None, &set);
    if pinned.is_err() {
        limits.abort.store(true, Ordering::Relaxed);
    }
    barrier.wait();
    pinned.map_err(|e| Stop::Pin(e.into()))?;
    match limits.abort.load(Ordering::Relaxed) {
        true => Err(Stop::Aborted),
        false => Ok(()),
    }
}

fn initiator(
    line: &AtomicU64,
    barrier: &Barrier,
    limits: &Limits<'_>,
    cpu: usize,
    round_trips: u64,
    samples: u32,
) -> Result<Vec<Duration>, Stop> {
    start(cpu, barrier, limits)?;
    let mut times = Vec::with_capacity(samples as usize);
    let mut value = 0u64;
    let mut t0 = Instant::now();
    for _ in 0..samples {
        for _ in 0..round_trips {
            spin_until(limits, || {
                line.compare_exchange(value, value + 1, Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
            })?;
            value += 2;
        }
        // The last CAS of the sample has gone out; the sample ends with its answer.
        spin_until(limits, || line.load(Ordering::Acquire) == value)?;
        let t1 = Instant::now();
        times.push(t1 - t0);
        t0 = t1;
    }
    Ok(times)
}

fn responder(
    line: &AtomicU64,
    barrier: &Barrier,
    limits: &Limits<'_>,
    cpu: usize,
    round_trips: u64,
) -> Result<(), Stop> {
    start(cpu, barrier, limits)?;
    let mut value = 1u64;
    for _ in 0..round_trips {
        spin_until(limits, || {
            line.compare_exchange(value, value + 1, Ordering::AcqRel, Ordering::Relaxed)
                .is_ok()
        })?;
        value += 2;
    }
    Ok(())
}

/// Spins until `done()`, bounded by `limits`. The first [`SPIN_CHECK_EVERY`] turns spin flat
/// out: a `pause` costs about 140 cycles on recent Intel cores, which would be added to every
/// hop measured, and under a hypervisor pause-loop exiting could deschedule the vCPU mid-hop.
/// Past that the partner is late anyway (a hop is well under a microsecond), so the wait turns
/// polite with [`std::hint::spin_loop`], which also lets a hypervisor run the partner.
#[inline(always)]
fn spin_until(limits: &Limits<'_>, mut done: impl FnMut() -> bool) -> Result<(), Stop> {
    let mut polite = false;
    let mut check_in = SPIN_CHECK_EVERY;
    let mut stall_at: Option<Instant> = None;
    while !done() {
        if polite {
            std::hint::spin_loop();
        }
        check_in -= 1;
        if check_in > 0 {
            continue;
        }
        check_in = SPIN_CHECK_EVERY;
        polite = true;
        if limits.abort.load(Ordering::Relaxed) {
            return Err(Stop::Aborted);
        }
        let now = Instant::now();
        let stop = if now >= limits.deadline {
            Stop::Overtime
        } else {
            match stall_at {
                None => {
                    stall_at = Some(now + limits.stall);
                    continue;
                }
                Some(at) if now >= at => Stop::Stalled,
                Some(_) => continue,
            }
        };
        limits.abort.store(true, Ordering::Relaxed);
        return Err(stop);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two threads pinned to the same CPU can only hand the line over when the scheduler
    /// switches between them: the pair must end at its deadline with an error, not hang.
    #[test]
    fn time_sliced_pair_ends_at_its_deadline() {
        let cpu = allowed_cpus()[0];
        let result = ping_pong(
            (cpu, cpu),
            10_000_000,
            3,
            Duration::from_secs(5),
            Instant::now() + Duration::from_millis(200),
        );
        // Far too many round trips for the deadline: the pair stops there, with this error.
        assert!(
            matches!(result, Err(C2cError::Overtime { .. })),
            "{result:?}"
        );
    }

    #[test]
    fn a_partner_that_never_answers_stalls_out() {
        // A responder that never starts: the initiator waits on a line nobody writes.
        let line = Line::default();
        let abort = Flag::default();
        let limits = Limits {
            abort: &abort.0,
            stall: Duration::from_millis(50),
            deadline: Instant::now() + Duration::from_secs(10),
        };
        let result = spin_until(&limits, || line.0.load(Ordering::Acquire) == 2);
        // Stalled (50 ms without progress), not Overtime (the 10 s deadline).
        assert!(matches!(result, Err(Stop::Stalled)), "{result:?}");
        assert!(
            abort.0.load(Ordering::Relaxed),
            "the partner is told to leave"
        );
    }

    #[test]
    fn bad_options_are_refused_before_any_thread_starts() {
        let opts = Options {
            samples: 2,
            ..Options::default()
        };
        assert!(matches!(
            Plan::new(&[0, 1], &opts),
            Err(C2cError::TooFewSamples { samples: 2 })
        ));
        let opts = Options {
            round_trips: Some(0),
            ..Options::default()
        };
        assert!(matches!(
            Plan::new(&[0, 1], &opts),
            Err(C2cError::ZeroRoundTrips)
        ));
    }

    #[test]
    fn the_budget_bounds_a_many_core_run() {
        let (rt, overhead) = (Duration::from_nanos(200), Duration::from_micros(200));
        let budget = Duration::from_secs(60);
        // 2 CPUs: the budget is ample, the default applies.
        assert_eq!(
            fit_round_trips(budget, 1, 11, rt, overhead),
            DEFAULT_ROUND_TRIPS
        );
        // 128 CPUs: 8128 pairs fit in the budget.
        let pairs = pair_count(128);
        let fit = fit_round_trips(budget, pairs, 11, rt, overhead);
        assert!(fit > MIN_ROUND_TRIPS && fit < DEFAULT_ROUND_TRIPS, "{fit}");
        let plan_time = (rt * fit as u32 * 11 + overhead) * pairs as u32;
        assert!(plan_time <= budget, "{plan_time:?}");
        // A tiny budget: the floor, not zero.
        assert_eq!(
            fit_round_trips(Duration::from_millis(1), pairs, 11, rt, overhead),
            MIN_ROUND_TRIPS
        );
    }

    #[test]
    fn cpu_checks() {
        let first = allowed_cpus()[0];
        assert!(matches!(
            check_cpus(&[first, first]),
            Err(C2cError::TooFewCpus { count: 1 })
        ));
        assert!(matches!(
            check_cpus(&[]),
            Err(C2cError::TooFewCpus { count: 0 })
        ));
        assert!(matches!(
            check_cpus(&[first, usize::MAX]),
            Err(C2cError::NotAllowed {
                cpu: usize::MAX,
                ..
            })
        ));
    }
}
