//! `linerate lab arena`: HttpArena's profiles on this machine. For every profile, its
//! validation (HttpArena's checks with its randomised anti-cheat inputs, [`checks`]) against
//! linerate's demo, started here with fixtures of its own, or a server the user started;
//! then (not with `--validate-only`) a load in HttpArena's shape and the score.
//!
//! With peers ([`peers`]: nginx, h2o and caddy; HttpArena's leading engines written in
//! bench/arena-peers; haproxy, actix-db and axum) each server in turn is started, validated with
//! the same checks on every profile it enters, loaded and stopped; the scores compare each
//! profile's servers with the best of them.
//!
//! The library takes [`ArenaArgs`] and returns reports; the binary owns the flags and the
//! printing. Profiles a server does not serve are "not entered", with the reason, never
//! passed; a profile whose needs are missing (a database, a peer not installed) is NOT RUN,
//! said loudly.

pub mod checks;
pub mod cpu_meter;
pub mod h2;
pub mod load;
pub mod peers;
pub mod profiles;
pub mod report;
pub mod rng;
pub mod score;
pub mod stack;
pub mod target;
pub mod tls_posture;
pub mod wire;
pub mod ws;

use peers::Peer;
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
    /// Peers started beside linerate, each on the profiles it enters.
    pub peers: Vec<Peer>,
    /// CPUs the demo and every peer are pinned to (empty: [`server_cpus`] of 1).
    pub cpus: Vec<usize>,
}

/// The first `n` CPUs this process may run on: where the arena pins the servers.
pub fn server_cpus(n: usize) -> Vec<usize> {
    let allowed = crate::c2c::measure::allowed_cpus();
    let mut cpus: Vec<usize> = allowed.iter().copied().take(n.max(1)).collect();
    if cpus.is_empty() {
        cpus.push(0);
    }
    cpus
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
    /// The demo's I/O backend when one was asked for (`serve --io`); None: serve's default.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub io: Option<String>,
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
///
/// Every server of the run is started first (one that cannot be is NOT RUN, with why) and
/// validated; then the load goes profile by profile, each profile's servers in turn for
/// `sizing.rounds` interleaved rounds (so a drift of the machine falls on every server
/// alike), one server loaded at a time, all of them pinned to the same CPUs.
pub fn run(
    args: &ArenaArgs,
    sizing: Option<load::Sizing>,
    mut progress: impl FnMut(&str),
) -> Result<Run, String> {
    let picked = select(&args.profiles)?;
    let seed = args.seed.unwrap_or_else(|| Rng::from_clock().next_u64());
    let mut rng = Rng::new(seed);
    let cpus = if args.cpus.is_empty() {
        server_cpus(1)
    } else {
        args.cpus.clone()
    };
    let mut validation = Vec::new();
    // actix-db's database: the demo's.
    let database_url = match &args.server {
        Server::Demo(s) => s.database_url.as_deref(),
        Server::Given(..) => None,
    };
    // The servers of the run, each with the profiles it passed.
    let mut servers: Vec<(Target, Vec<&'static Profile>)> = Vec::new();
    let mut validate_all = |target: Target,
                            entry: &dyn Fn(&Profile) -> Result<(), &'static str>,
                            computes: bool,
                            rng: &mut Rng,
                            validation: &mut Vec<Validation>| {
        let mut passed = Vec::new();
        for p in &picked {
            let mut v = validate_one(p, entry(p), &target, rng);
            if computes {
                v = not_written_for(v);
            }
            if v.result == "passed" {
                passed.push(*p);
            }
            validation.push(v);
        }
        servers.push((target, passed));
    };
    let target = match &args.server {
        Server::Demo(s) => Target::spawn_demo(s, &cpus, &mut rng)?,
        Server::Given(name, g) => Target::at(name, g.clone())?,
    };
    validate_all(target, &|p| p.entry, false, &mut rng, &mut validation);
    for peer in &args.peers {
        // Started only when it enters a picked profile; one that cannot be started is NOT RUN,
        // with why, on every profile it would have entered.
        let wants = picked.iter().any(|p| peer.enters(p).is_ok());
        match wants.then(|| peer.spawn(&cpus, database_url, &mut rng)) {
            Some(Ok(target)) => validate_all(
                target,
                &|p| peer.enters(p),
                peer.computes(),
                &mut rng,
                &mut validation,
            ),
            Some(Err(why)) => validation.extend(unstarted(*peer, &picked, &why)),
            None => validation.extend(unstarted(*peer, &picked, "")),
        }
    }
    let mut measured = Vec::new();
    if let Some(s) = sizing {
        let passed: Vec<Vec<&str>> = servers
            .iter()
            .map(|(_, ps)| ps.iter().map(|p| p.name).collect())
            .collect();
        let mut rounds: Vec<Vec<Result<load::Measured, String>>> = Vec::new();
        let mut rows: Vec<(&'static Profile, usize)> = Vec::new();
        for (pi, round, si) in schedule(&picked, &passed, s.rounds.max(1)) {
            let p = picked[pi];
            let (target, _) = &servers[si];
            progress(&format!(
                "load: {} on {} (round {} of {})",
                p.name,
                target.name,
                round + 1,
                s.rounds.max(1)
            ));
            let at = match rows.iter().position(|&(q, i)| q.name == p.name && i == si) {
                Some(at) => at,
                None => {
                    rows.push((p, si));
                    rounds.push(Vec::new());
                    rows.len() - 1
                }
            };
            rounds[at].push(load::measure(p, target, &s));
        }
        for ((p, si), r) in rows.into_iter().zip(rounds) {
            measured.push((p, servers[si].0.name.clone(), load::summarise(r)));
        }
    }
    drop(servers);
    // Tables read by profile: each profile's servers together, in the run's server order.
    let order = |name: &str| picked.iter().position(|p| p.name == name);
    validation.sort_by_key(|v| order(v.profile));
    measured.sort_by_key(|m| order(m.0.name));
    Ok(Run {
        seed,
        io: match &args.server {
            Server::Demo(s) => s.io.clone(),
            Server::Given(..) => None,
        },
        validation,
        load: scored(measured),
    })
}

/// The load's order: profile by profile, and within one, round by round, each server that
/// passed it in the run's order: `(profile, round, server)` indices.
pub fn schedule(
    picked: &[&'static Profile],
    passed: &[Vec<&str>],
    rounds: usize,
) -> Vec<(usize, usize, usize)> {
    let mut out = Vec::new();
    for (pi, p) in picked.iter().enumerate() {
        for round in 0..rounds {
            for (si, names) in passed.iter().enumerate() {
                if names.contains(&p.name) {
                    out.push((pi, round, si));
                }
            }
        }
    }
    out
}

/// A Rust peer's validation: a profile whose checks it fails is one its route was not written
/// for (HttpArena's contract, not TechEmpower's or the lab's), so "not entered" with the first
/// failure as why, its checks kept; never loaded.
fn not_written_for(mut v: Validation) -> Validation {
    if v.result == "FAILED" {
        v.result = "not entered";
        v.reason = Some(format!(
            "its route fails HttpArena's contract: {}",
            v.reason.as_deref().unwrap_or("")
        ));
    }
    v
}

/// The rows of a peer that was not started: "not entered" (with why) where it cannot enter,
/// and NOT RUN with `why` (not installed, did not start) where it would have.
fn unstarted(peer: Peer, picked: &[&'static Profile], why: &str) -> Vec<Validation> {
    picked
        .iter()
        .map(|p| match peer.enters(p) {
            Err(no) => Validation::skipped(p.name, peer.name(), "not entered", no),
            Ok(()) => Validation::skipped(p.name, peer.name(), "NOT RUN", why),
        })
        .collect()
}

/// A profile, the server it loaded, and what the load measured (or why it could not).
type Measurement = (&'static Profile, String, Result<load::Measured, String>);

/// Scores each profile's measurements against the other servers' on the same profile: req/s
/// and CPU per request as ratios to the best, and the paced profiles' composite with the bests
/// taken over those servers. Rows keep their order.
fn scored(measured: Vec<Measurement>) -> Vec<Scored> {
    let mut out: Vec<Scored> = measured
        .into_iter()
        .map(|(p, server, m)| match m {
            Err(why) => Scored {
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
                    p50_us: 0.0,
                    p99_us: 0.0,
                    cpu_source: "",
                    cpu_of: None,
                    rounds: 0,
                    rps_min_max: [0.0; 2],
                    cpu_us_min_max: None,
                    round_errors: None,
                },
                rps_ratio: 0.0,
                cpu_ratio: None,
                composite: None,
                error: Some(why),
            },
            Ok(m) => Scored {
                measured: m,
                rps_ratio: 0.0,
                cpu_ratio: None,
                composite: None,
                error: None,
            },
        })
        .collect();
    let mut profiles: Vec<&'static str> = out.iter().map(|s| s.measured.profile).collect();
    profiles.dedup();
    for name in profiles {
        let idx: Vec<usize> = (0..out.len())
            .filter(|&i| out[i].measured.profile == name && out[i].error.is_none())
            .collect();
        let rps = score::ratios(
            &idx.iter().map(|&i| out[i].measured.rps).collect::<Vec<_>>(),
            true,
        );
        // Servers without a CPU figure take no part in the CPU ratio (and get none).
        let cpu_of = |i: usize| out[i].measured.cpu_us_per_request.unwrap_or(0.0);
        let cpu = score::ratios(&idx.iter().map(|&i| cpu_of(i)).collect::<Vec<_>>(), false);
        let paced: Vec<score::Paced> = idx
            .iter()
            .filter_map(|&i| {
                let m = &out[i].measured;
                m.offered_rps.map(|offered| score::Paced {
                    offered_rps: offered,
                    achieved_rps: m.rps,
                    cpu_us: m.cpu_us_per_request,
                    mean_us: m.mean_us,
                    p99_us: m.p99_us,
                })
            })
            .collect();
        let composite = score::composite(&paced);
        for (k, &i) in idx.iter().enumerate() {
            out[i].rps_ratio = rps[k];
            out[i].cpu_ratio = out[i].measured.cpu_us_per_request.map(|_| cpu[k]);
            if out[i].measured.offered_rps.is_some() {
                // Paced rows are a profile's all or none (the rate is the profile's).
                out[i].composite = composite.get(k).copied();
            }
        }
    }
    out
}

/// One profile against `t`, which enters it or not as `entry` says (the profile's own entry
/// for linerate, [`Peer::enters`] for a peer).
pub fn validate_one(
    p: &'static Profile,
    entry: Result<(), &'static str>,
    t: &Target,
    rng: &mut Rng,
) -> Validation {
    if let Err(why) = entry {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn m(profile: &'static str, server: &str, rps: f64, cpu: Option<f64>) -> load::Measured {
        load::Measured {
            profile,
            server: server.into(),
            connections: 4,
            depth: 1,
            offered_rps: None,
            rps,
            responses: 1,
            failed: 0,
            cpu_us_per_request: cpu,
            mean_us: 100.0,
            p50_us: 90.0,
            p99_us: 200.0,
            cpu_source: "cgroup",
            cpu_of: None,
            rounds: 1,
            rps_min_max: [rps; 2],
            cpu_us_min_max: cpu.map(|c| [c; 2]),
            round_errors: None,
        }
    }

    /// Each profile's servers are scored against the best of them, not against themselves
    /// or other profiles; a server with an error or no CPU figure takes no part.
    #[test]
    fn ratios_are_to_the_best_server_of_each_profile() {
        let p = profiles::find("static").unwrap();
        let q = profiles::find("static-tls").unwrap();
        let s = scored(vec![
            (
                p,
                "linerate".into(),
                Ok(m("static", "linerate", 200.0, Some(5.0))),
            ),
            (
                p,
                "nginx".into(),
                Ok(m("static", "nginx", 100.0, Some(10.0))),
            ),
            (p, "h2o".into(), Err("no answers".into())),
            (p, "caddy".into(), Ok(m("static", "caddy", 50.0, None))),
            (
                q,
                "nginx".into(),
                Ok(m("static-tls", "nginx", 10.0, Some(40.0))),
            ),
        ]);
        let r: Vec<_> = s.iter().map(|s| (s.rps_ratio, s.cpu_ratio)).collect();
        assert_eq!(
            r,
            [
                (1.0, Some(1.0)),
                (0.5, Some(0.5)),
                (0.0, None),
                (0.25, None),
                (1.0, Some(1.0)),
            ]
        );
        assert_eq!(s[2].error.as_deref(), Some("no answers"));
    }

    /// Rounds interleave: within a profile, round 1 of every server that passed it, then
    /// round 2; a server is loaded only on the profiles it passed.
    #[test]
    fn rounds_interleave_the_servers_of_each_profile() {
        let picked = select(&["static".into(), "baseline".into()]).unwrap();
        let passed = vec![vec!["static", "baseline"], vec!["static"]];
        assert_eq!(
            schedule(&picked, &passed, 2),
            [
                (0, 0, 0),
                (0, 0, 1),
                (0, 1, 0),
                (0, 1, 1),
                (1, 0, 0),
                (1, 1, 0)
            ]
        );
    }

    /// A Rust peer that fails a profile's checks was not written for it: "not entered" with
    /// the failure as why (its checks kept), so never loaded; what passes stays passed, and
    /// linerate's (or an installed peer's) failure is never turned into one.
    #[test]
    fn a_rust_peers_failure_is_not_entered_with_why() {
        use checks::Outcome;
        let failed = Validation::checked(
            "async-db",
            "actix",
            vec![
                ("a".into(), Outcome::Pass),
                ("b".into(), Outcome::Fail("count 3".into())),
            ],
        );
        let v = not_written_for(failed.clone());
        assert_eq!(v.result, "not entered");
        assert_eq!(
            v.reason.as_deref(),
            Some("its route fails HttpArena's contract: b: count 3")
        );
        assert_eq!((v.passed, v.failed, v.checks.len()), (1, 1, 2));
        let passed = Validation::checked("async-db", "actix", vec![("a".into(), Outcome::Pass)]);
        assert_eq!(not_written_for(passed).result, "passed");
        assert_eq!(failed.result, "FAILED");
    }

    /// A Rust peer not built is NOT RUN, with why, where it would have entered.
    #[test]
    fn a_rust_peer_not_built_is_not_run_with_why() {
        let picked = select(&["async-db".into(), "baseline".into()]).unwrap();
        let why = "bench/actix-db/target/release/actix-db is not built (scripts/peers.sh rust)";
        let rows = unstarted(Peer::ActixDb, &picked, why);
        let got: Vec<_> = rows.iter().map(|r| (r.profile, r.result)).collect();
        assert_eq!(got, [("async-db", "NOT RUN"), ("baseline", "not entered")]);
        assert_eq!(rows[0].reason.as_deref(), Some(why));
        // An engine of the arena's, where its HttpArena entry enters.
        let why = "target/peers/may-minihttp is not built (scripts/peers.sh arena)";
        let rows = unstarted(Peer::MayMinihttp, &picked, why);
        let got: Vec<_> = rows.iter().map(|r| (r.profile, r.result)).collect();
        assert_eq!(got, [("async-db", "not entered"), ("baseline", "NOT RUN")]);
    }

    /// A peer that is not installed (or did not start) is NOT RUN, with why, on the profiles it
    /// would have entered, and "not entered" on the others: never passed, never missing.
    #[test]
    fn a_peer_not_started_is_not_run_with_why() {
        let picked = select(&["static".into(), "static-h3".into(), "baseline".into()]).unwrap();
        let rows = unstarted(Peer::Nginx, &picked, "nginx is not installed (not on PATH)");
        let got: Vec<_> = rows
            .iter()
            .map(|r| (r.profile, r.server.as_str(), r.result))
            .collect();
        assert_eq!(
            got,
            [
                ("static", "nginx", "NOT RUN"),
                ("static-h3", "nginx", "not entered"),
                ("baseline", "nginx", "not entered"),
            ]
        );
        assert_eq!(
            rows[0].reason.as_deref(),
            Some("nginx is not installed (not on PATH)")
        );
        assert!(rows.iter().all(|r| r.passed == 0 && r.reason.is_some()));
    }
}
