//! linerate-lab: the syscall-floor reference server, and later comparisons, audits and reports.

pub mod floor;
