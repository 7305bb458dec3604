//! linerate-lab: the syscall-floor reference server, side-by-side comparisons, the host audit,
//! core-to-core latency and the first-flight (initial congestion window) check.
//!
//! Each tool is one module with a clap `…Args` struct and a `run` function; the binary wires them
//! as `linerate lab <tool>`. Charts go through [`plot`], which carries its own font so a PNG has
//! text on a machine without fonts.

pub mod c2c;
pub mod compare;
pub mod doctor;
pub mod firstflight;
pub mod floor;
pub mod plot;
