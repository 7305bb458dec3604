//! `linerate lab arena`: HttpArena's profiles on this machine. For every profile, its
//! validation (HttpArena's checks with its randomised anti-cheat inputs, [`checks`]) against
//! linerate's demo, started here with fixtures of its own, or a server the user started;
//! then (not with `--validate-only`) a load in HttpArena's shape and the score.
//!
//! The library takes [`ArenaArgs`] and returns reports; the binary owns the flags and the
//! printing. Profiles the demo does not serve are "not entered", with the reason, never
//! passed; a profile whose needs are missing (a database) is NOT RUN, said loudly.

pub mod checks;
pub mod h2;
pub mod load;
pub mod profiles;
pub mod report;
pub mod rng;
pub mod score;
pub mod target;
pub mod tls_posture;
pub mod wire;
pub mod ws;

use profiles::{Needs, PROFILES, Profile};
use report::Validation;
use rng::Rng;
use target::{Given, Spawn, Target};

/// Which server the arena validates.
#[derive(Clone, Debug)]
pub enum Server {
    /// linerate's demo, started by the arena.
    Demo(Spawn),
    /// A server the user started.
    Given(String, Given),
}

/// What `linerate lab arena` is asked to do.
#[derive(Clone, Debug)]
pub struct ArenaArgs {
    pub server: Server,
    /// Only these profiles (empty: all).
    pub profiles: Vec<String>,
    /// Random seed (default: from the clock), so a failing run can be repeated.
    pub seed: Option<u64>,
}

/// The profiles `names` picks (all when empty), or the first unknown name.
pub fn select(names: &[String]) -> Result<Vec<&'static Profile>, String> {
    if names.is_empty() {
        return Ok(PROFILES.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            profiles::find(n).ok_or_else(|| {
                let known: Vec<_> = PROFILES.iter().map(|p| p.name).collect();
                format!("unknown profile {n:?} (known: {})", known.join(", "))
            })
        })
        .collect()
}

/// Validates every selected profile; the seed used comes back with the rows.
pub fn validate(args: &ArenaArgs) -> Result<(u64, Vec<Validation>), String> {
    run(args, None, |_| {}).map(|r| (r.seed, r.validation))
}

/// What a run of the arena found.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Run {
    pub seed: u64,
    pub validation: Vec<Validation>,
    /// The loaded profiles (those that passed validation), scored.
    pub load: Vec<Scored>,
}

/// One measurement with its scores against the other servers of the run.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Scored {
    #[serde(flatten)]
    pub measured: load::Measured,
    /// req/s over the best server's on this profile.
    pub rps_ratio: f64,
    /// The best server's CPU per request over this one's (1: the cheapest).
    pub cpu_ratio: Option<f64>,
    /// The paced profiles' composite (HttpArena's latency score).
    pub composite: Option<score::Composite>,
    /// Why a profile that passed validation has no figures.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// Validates every selected profile and, with `sizing`, loads each one that passed and
/// scores it; `progress` hears a line per profile loaded.
pub fn run(
    args: &ArenaArgs,
    sizing: Option<load::Sizing>,
    mut progress: impl FnMut(&str),
) -> Result<Run, String> {
    let picked = select(&args.profiles)?;
    let seed = args.seed.unwrap_or_else(|| Rng::from_clock().next_u64());
    let mut rng = Rng::new(seed);
    let target = match &args.server {
        Server::Demo(s) => Target::spawn_demo(s, &mut rng)?,
        Server::Given(name, g) => Target::at(name, g.clone())?,
    };
    let mut validation = Vec::new();
    for p in &picked {
        validation.push(validate_one(p, &target, &mut rng));
    }
    let mut measured = Vec::new();
    if let Some(s) = sizing {
        for (p, v) in picked.iter().zip(&validation) {
            if v.result != "passed" {
                continue;
            }
            progress(&format!("load: {} on {}", p.name, target.name));
            measured.push((*p, target.name.clone(), load::measure(p, &target, &s)));
        }
    }
    Ok(Run {
        seed,
        validation,
        load: scored(measured),
    })
}

/// Scores each profile's measurements against each other (one server today: ratios of 1,
/// and the composite against itself).
fn scored(
    measured: Vec<(&'static Profile, String, Result<load::Measured, String>)>,
) -> Vec<Scored> {
    let mut out = Vec::new();
    for (p, server, m) in measured {
        match m {
            Err(why) => out.push(Scored {
                measured: load::Measured {
                    profile: p.name,
                    server,
                    connections: 0,
                    depth: 0,
                    offered_rps: None,
                    rps: 0.0,
                    responses: 0,
                    failed: 0,
                    cpu_us_per_request: None,
                    mean_us: 0.0,
                    p99_us: 0.0,
                },
                rps_ratio: 0.0,
                cpu_ratio: None,
                composite: None,
                error: Some(why),
            }),
            Ok(m) => {
                let rps = score::ratios(&[m.rps], true)[0];
                let cpu = m.cpu_us_per_request.map(|c| score::ratios(&[c], false)[0]);
                let composite = m.offered_rps.map(|offered| {
                    score::composite(&[score::Paced {
                        offered_rps: offered,
                        achieved_rps: m.rps,
                        cpu_us: m.cpu_us_per_request,
                        mean_us: m.mean_us,
                        p99_us: m.p99_us,
                    }])[0]
                });
                out.push(Scored {
                    measured: m,
                    rps_ratio: rps,
                    cpu_ratio: cpu,
                    composite,
                    error: None,
                });
            }
        }
    }
    out
}

/// One profile against `t`.
pub fn validate_one(p: &'static Profile, t: &Target, rng: &mut Rng) -> Validation {
    if let Err(why) = p.entry {
        return Validation::skipped(p.name, &t.name, "not entered", why);
    }
    if p.needs == Needs::Postgres && !t.database {
        return Validation::skipped(
            p.name,
            &t.name,
            "NOT RUN",
            "needs PostgreSQL (--database-url), not given",
        );
    }
    Validation::checked(p.name, &t.name, checks::validate(p, t, rng))
}
