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
pub mod profiles;
pub mod report;
pub mod rng;
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
    let picked = select(&args.profiles)?;
    let seed = args.seed.unwrap_or_else(|| Rng::from_clock().next_u64());
    let mut rng = Rng::new(seed);
    let target = match &args.server {
        Server::Demo(s) => Target::spawn_demo(s, &mut rng)?,
        Server::Given(name, g) => Target::at(name, g.clone())?,
    };
    let mut rows = Vec::new();
    for p in picked {
        rows.push(validate_one(p, &target, &mut rng));
    }
    Ok((seed, rows))
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
