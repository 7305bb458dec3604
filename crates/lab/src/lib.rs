//! linerate-lab: the syscall-floor reference server and its proxy twin ([`relay`]), side-by-side comparisons, the host audit,
//! core-to-core latency, the first-flight (initial congestion window) check, and the arena
//! (HttpArena's profiles validated, loaded and scored on this machine).
//!
//! Each tool is one module with a plain `…Args` struct (what it is asked to do, as data); the
//! binary owns the flags (clap), fills the struct in and wires the tools as `linerate lab <tool>`.
//! `doctor::report` and `firstflight::check` return their reports for the binary to print;
//! `compare::run` and `c2c::run`, which run for minutes, write their files and print progress
//! and their report themselves. `compare` drives the load generator through `linerate_load::LoadOptions`,
//! not a command line. Charts go through [`plot`], which carries its own font so a PNG has
//! text on a machine without fonts.

pub mod arena;
pub mod c2c;
pub mod cache;
pub mod compare;
pub mod doctor;
pub mod firstflight;
pub mod floor;
pub mod plot;
pub mod relay;
