//! The workspace's one parser of durations (`10s`, `500ms`, `2m`), one of byte sizes
//! (`64KiB`, `32GiB`) and one of CPU lists
//! (`0,2-3`, the kernel's cpuset syntax), the one CPU-list formatter and the one formatter of
//! latencies for people (`812µs`, `1.25ms`, `2.50s`). `linerate load`,
//! the lab (suite files, `c2c`, `doctor`) and the binary's flags all read through these, so a
//! value means the same wherever it is written. Pure text in, typed values or a typed error out.
#![forbid(unsafe_code)]

use std::fmt;
use std::time::Duration;

/// Highest CPU number a list may name (the kernel's CPU_SETSIZE less one); also stops
/// `0-4294967295` from allocating the world.
pub const MAX_CPU: usize = 1023;

/// Why a value was refused; `Display` is the one line a user sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum UnitError {
    Duration(String),
    /// A timeout of 0, which would expire at once (see [`timeout`]).
    ZeroTimeout(String),
    CpuList(String),
    /// A CPU number past [`MAX_CPU`]: no Linux process can run there.
    CpuTooHigh(String, usize),
    EmptyCpuList(String),
    Size(String),
}

impl fmt::Display for UnitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UnitError::Duration(s) => {
                write!(f, "invalid duration {s:?} (expected e.g. 10s, 500ms, 2m)")
            }
            UnitError::ZeroTimeout(s) => {
                write!(
                    f,
                    "{s:?} is no time: a timeout of 0 would expire at once (expected more than 0, e.g. 10s)"
                )
            }
            UnitError::CpuList(s) => {
                write!(f, "invalid CPU list {s:?} (expected e.g. 1 or 0,2-3)")
            }
            UnitError::CpuTooHigh(s, cpu) => write!(
                f,
                "invalid CPU list {s:?}: CPU {cpu} is not available on any Linux host \
                 (CPU_SETSIZE: at most {MAX_CPU})"
            ),
            UnitError::EmptyCpuList(s) => write!(f, "invalid CPU list {s:?}: no CPU named"),
            UnitError::Size(s) => {
                write!(
                    f,
                    "invalid size {s:?} (expected e.g. 65536, 64KiB, 1MiB, 32GiB)"
                )
            }
        }
    }
}

impl std::error::Error for UnitError {}

/// Parses `10s`, `250ms`, `2m`, `1h`, `1.5s`, `100us`; a bare number means seconds (as in wrk).
pub fn duration(s: &str) -> Result<Duration, UnitError> {
    let bad = || UnitError::Duration(s.to_owned());
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: f64 = num.parse().map_err(|_| bad())?;
    let scale = match unit {
        "" | "s" => 1.0,
        "ms" => 1e-3,
        "us" | "µs" => 1e-6,
        "m" => 60.0,
        "h" => 3600.0,
        _ => return Err(bad()),
    };
    Duration::try_from_secs_f64(n * scale).map_err(|_| bad())
}

/// A timeout: a [`duration`] more than 0. Zero is refused rather than read as "expire at
/// once" (every request would fail) or as "off" (a peer could then hold a connection
/// forever); a key whose 0 means something says so and parses with [`duration`].
pub fn timeout(s: &str) -> Result<Duration, UnitError> {
    let d = duration(s)?;
    if d.is_zero() {
        return Err(UnitError::ZeroTimeout(s.to_owned()));
    }
    Ok(d)
}

/// Parses a byte count: a bare number of bytes, or one with `KiB`, `MiB`, `GiB`, `TiB` (also
/// written `K`, `M`, `G`, `T`; powers of 1024). Zero and overflow are refused.
pub fn size(s: &str) -> Result<u64, UnitError> {
    let bad = || UnitError::Size(s.to_owned());
    let t = s.trim();
    let split = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let n: u64 = num.parse().map_err(|_| bad())?;
    let shift = match unit {
        "" | "B" => 0,
        "K" | "KiB" => 10,
        "M" | "MiB" => 20,
        "G" | "GiB" => 30,
        "T" | "TiB" => 40,
        _ => return Err(bad()),
    };
    match n.checked_mul(1 << shift) {
        Some(v) if v > 0 => Ok(v),
        _ => Err(bad()),
    }
}

/// [`size`], where 0 is allowed too (for limits that 0 turns off).
pub fn size_or_zero(s: &str) -> Result<u64, UnitError> {
    match s.trim() {
        "0" | "0B" => Ok(0),
        _ => size(s),
    }
}

/// Parses a CPU list such as `0-3,8,10-11` into sorted, distinct CPU numbers, as the kernel
/// writes and reads them (`Cpus_allowed_list`, cpusets, taskset -c). Empty text is the empty
/// list (kernel files such as `isolated` are often empty); flags want [`cpus`].
pub fn cpu_list(s: &str) -> Result<Vec<usize>, UnitError> {
    let text = s.trim();
    let mut cpus = Vec::new();
    if text.is_empty() {
        return Ok(cpus);
    }
    let bad = || UnitError::CpuList(s.to_owned());
    for part in text.split(',') {
        let (lo, hi): (usize, usize) = match part.split_once('-') {
            Some((lo, hi)) => (
                lo.trim().parse().map_err(|_| bad())?,
                hi.trim().parse().map_err(|_| bad())?,
            ),
            None => {
                let cpu = part.trim().parse().map_err(|_| bad())?;
                (cpu, cpu)
            }
        };
        if lo > hi {
            return Err(bad());
        }
        if hi > MAX_CPU {
            return Err(UnitError::CpuTooHigh(s.to_owned(), hi));
        }
        cpus.extend(lo..=hi);
    }
    cpus.sort_unstable();
    cpus.dedup();
    Ok(cpus)
}

/// A CPU list given as an option: like [`cpu_list`], but it must name at least one CPU.
pub fn cpus(s: &str) -> Result<Vec<usize>, UnitError> {
    let cpus = cpu_list(s)?;
    if cpus.is_empty() {
        return Err(UnitError::EmptyCpuList(s.to_owned()));
    }
    Ok(cpus)
}

/// Formats CPUs the way the kernel does, runs collapsed: `[0, 1, 2, 3, 8]` → `0-3,8`
/// (unsorted or repeated input is sorted and deduplicated first).
pub fn format_cpu_list(cpus: &[usize]) -> String {
    let mut sorted = cpus.to_vec();
    sorted.sort_unstable();
    sorted.dedup();
    let mut out = Vec::new();
    let mut i = 0;
    while i < sorted.len() {
        let start = sorted[i];
        while i + 1 < sorted.len() && sorted[i + 1] == sorted[i] + 1 {
            i += 1;
        }
        out.push(if sorted[i] == start {
            start.to_string()
        } else {
            format!("{start}-{}", sorted[i])
        });
        i += 1;
    }
    out.join(",")
}

/// A latency given in microseconds, in the unit that keeps it readable: µs below 1 ms (one
/// decimal at most: `45.3µs`, `812µs`), ms below 1 s and s above (two decimals: `1.25ms`,
/// `2.50s`). Machine-readable output keeps the raw microseconds instead.
pub fn format_micros(us: f64) -> String {
    // Decide on the rounded figure, so 999.96 µs reads 1.00ms and not 1000µs.
    let r1 = (us * 10.0).round() / 10.0;
    if r1 < 1000.0 {
        return format!("{r1}µs");
    }
    let ms = us / 1e3;
    if (ms * 100.0).round() / 100.0 < 1000.0 {
        return format!("{ms:.2}ms");
    }
    format!("{:.2}s", us / 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_parse_as_powers_of_1024_and_refuse_nonsense() {
        let rows: &[(&str, Option<u64>)] = &[
            ("1", Some(1)),
            ("65536", Some(65536)),
            ("64KiB", Some(64 << 10)),
            ("64K", Some(64 << 10)),
            ("1MiB", Some(1 << 20)),
            ("32GiB", Some(32 << 30)),
            ("2T", Some(2 << 40)),
            (" 7B ", Some(7)),
            ("0", None),
            ("", None),
            ("1.5MiB", None),
            ("1mb", None),
            ("-1", None),
            ("99999999999999999999", None),
            ("16777216TiB", None),
        ];
        for (text, want) in rows {
            assert_eq!(size(text).ok(), *want, "{text:?}");
        }
        // Where 0 turns a limit off, it is a size; the rest is refused as before.
        for (text, want) in [
            ("0", Some(0)),
            (" 0B", Some(0)),
            ("1KiB", Some(1024)),
            ("-0", None),
        ] {
            assert_eq!(size_or_zero(text).ok(), want, "{text:?}");
        }
        assert_eq!(
            size("1mb").unwrap_err().to_string(),
            "invalid size \"1mb\" (expected e.g. 65536, 64KiB, 1MiB, 32GiB)"
        );
    }

    #[test]
    fn durations() {
        let ms = Duration::from_millis;
        let rows: &[(&str, Option<Duration>)] = &[
            ("10s", Some(ms(10_000))),
            ("10", Some(ms(10_000))),
            ("3", Some(ms(3_000))),
            (" 3s ", Some(ms(3_000))),
            ("250ms", Some(ms(250))),
            ("500ms", Some(ms(500))),
            ("100us", Some(Duration::from_micros(100))),
            ("100µs", Some(Duration::from_micros(100))),
            ("2m", Some(ms(120_000))),
            ("1h", Some(ms(3_600_000))),
            ("1.5s", Some(ms(1500))),
            ("0s", Some(Duration::ZERO)),
            ("ten", None),
            ("5d", None),
            ("3 parsecs", None),
            ("", None),
            ("s", None),
            ("-1s", None),
            ("1e999s", None),
        ];
        for &(text, want) in rows {
            assert_eq!(duration(text).ok(), want, "{text:?}");
        }
        assert_eq!(
            duration("5d").unwrap_err().to_string(),
            "invalid duration \"5d\" (expected e.g. 10s, 500ms, 2m)"
        );
    }

    /// A timeout of 0 would expire at once: refused, however it is written.
    #[test]
    fn timeouts_are_durations_more_than_zero() {
        for zero in ["0", "0s", "0ms", "0.0s", "0us"] {
            assert!(
                matches!(timeout(zero), Err(UnitError::ZeroTimeout(_))),
                "{zero:?}"
            );
        }
        assert_eq!(timeout("1us").ok(), Some(Duration::from_micros(1)));
        assert_eq!(timeout("5s").ok(), Some(Duration::from_secs(5)));
        assert!(matches!(timeout("5d"), Err(UnitError::Duration(_))));
    }

    #[test]
    fn cpu_lists_round_trip() {
        let rows: &[(&str, Option<&[usize]>, &str)] = &[
            ("0", Some(&[0]), "0"),
            ("1", Some(&[1]), "1"),
            ("0-2,5", Some(&[0, 1, 2, 5]), "0-2,5"),
            ("0,2-3", Some(&[0, 2, 3]), "0,2-3"),
            ("0-3,8", Some(&[0, 1, 2, 3, 8]), "0-3,8"),
            ("2,0-1\n", Some(&[0, 1, 2]), "0-2"),
            ("3,1,2,2,7,9,10", Some(&[1, 2, 3, 7, 9, 10]), "1-3,7,9-10"),
            ("", Some(&[]), ""),
            ("1023", Some(&[1023]), "1023"),
            ("1024", None, ""),
            ("0-4294967295", None, ""),
            ("3-1", None, ""),
            ("2-1", None, ""),
            ("x", None, ""),
            ("1,", None, ""),
            ("-1", None, ""),
        ];
        for &(text, want, formatted) in rows {
            let got = cpu_list(text).ok();
            assert_eq!(got.as_deref(), want, "{text:?}");
            if let Some(cpus) = got {
                assert_eq!(format_cpu_list(&cpus), formatted, "{text:?}");
            }
        }
    }

    #[test]
    fn an_option_names_a_cpu() {
        assert_eq!(cpus("0-1"), Ok(vec![0, 1]));
        assert_eq!(cpus(" "), Err(UnitError::EmptyCpuList(" ".into())));
        assert!(
            cpus("x")
                .unwrap_err()
                .to_string()
                .starts_with("invalid CPU list")
        );
        let high = cpus("0,9999").unwrap_err();
        assert_eq!(high, UnitError::CpuTooHigh("0,9999".into(), 9999));
        assert!(
            high.to_string()
                .starts_with("invalid CPU list \"0,9999\": CPU 9999 is not")
        );
        assert!(
            cpus("")
                .unwrap_err()
                .to_string()
                .starts_with("invalid CPU list")
        );
    }

    #[test]
    fn formatting_sorts_and_collapses() {
        assert_eq!(format_cpu_list(&[5]), "5");
        assert_eq!(format_cpu_list(&[3, 1, 2, 2, 7, 9, 10]), "1-3,7,9-10");
        assert_eq!(format_cpu_list(&[]), "");
    }

    #[test]
    fn latencies_read_in_their_unit() {
        for (us, text) in [
            (0.0, "0µs"),
            (1.0, "1µs"),
            (45.34, "45.3µs"),
            (812.0, "812µs"),
            (999.9, "999.9µs"),
            (999.96, "1.00ms"),
            (1000.0, "1.00ms"),
            (1250.0, "1.25ms"),
            (45_678.0, "45.68ms"),
            (999_994.0, "999.99ms"),
            (999_996.0, "1.00s"),
            (2_500_000.0, "2.50s"),
            (60_000_000.0, "60.00s"),
        ] {
            assert_eq!(format_micros(us), text, "{us} µs");
        }
    }
}
