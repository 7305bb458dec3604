//! Pure text parsers for the formats the checks read: kernel CPU lists (`0-3,8`), hex CPU masks
//! (`xps_cpus`), `/proc/self/status` fields, `/proc/self/limits`, `/proc/net/tls_stat` counters, kernel
//! release numbers. No I/O
//! here; every parser returns `None` on text it does not understand rather than guessing.

use super::host::NofileLimit;

/// Bits per comma-separated group in a kernel CPU mask (`ffffffff,00000001`).
const MASK_GROUP_BITS: usize = 32;

/// A kernel CPU list such as `0-3,8,10-11` (an empty list is `Some(vec![])`), through the
/// workspace's one CPU-list parser.
pub fn cpu_list(text: &str) -> Option<Vec<usize>> {
    linerate_load::units::cpu_list(text).ok()
}

pub use linerate_load::units::format_cpu_list;

/// Parses a hex CPU mask such as `00000000,00000003` into CPU numbers.
pub fn cpu_mask(text: &str) -> Option<Vec<usize>> {
    let mut cpus = Vec::new();
    for (group_index, group) in text.trim().rsplit(',').enumerate() {
        let bits = u32::from_str_radix(group, 16).ok()?;
        for bit in 0..MASK_GROUP_BITS {
            if bits & (1 << bit) != 0 {
                cpus.push(group_index * MASK_GROUP_BITS + bit);
            }
        }
    }
    cpus.sort_unstable();
    Some(cpus)
}

/// Formats one CPU as a hex mask for `xps_cpus`/`rps_cpus` (`5` → `20`; groups of 32 bits).
pub fn single_cpu_mask(cpu: usize) -> String {
    let groups = cpu / MASK_GROUP_BITS;
    let mut out = format!("{:x}", 1u32 << (cpu % MASK_GROUP_BITS));
    for _ in 0..groups {
        out.push_str(",00000000");
    }
    out
}

/// The value of `Name:` in a `/proc/<pid>/status` style file.
pub fn status_field<'a>(status: &'a str, name: &str) -> Option<&'a str> {
    status.lines().find_map(|line| {
        let (key, value) = line.split_once(':')?;
        (key == name).then_some(value.trim())
    })
}

/// A counter of `/proc/net/tls_stat` (`Name<whitespace>value` lines).
pub fn tls_stat_counter(text: &str, name: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        (it.next() == Some(name)).then(|| it.next()?.parse().ok())?
    })
}

/// `Max open files` from `/proc/<pid>/limits` (`unlimited` is `None`).
pub fn nofile_from_limits(limits: &str) -> Option<NofileLimit> {
    let rest = limits
        .lines()
        .find_map(|line| line.strip_prefix("Max open files"))?;
    let mut fields = rest.split_whitespace();
    let mut value = || -> Option<Option<u64>> {
        match fields.next()? {
            "unlimited" => Some(None),
            n => Some(Some(n.parse().ok()?)),
        }
    };
    Some(NofileLimit {
        soft: value()?,
        hard: value()?,
    })
}

/// `(major, minor)` of a kernel release such as `6.8.0-45-generic`.
pub fn kernel_version(release: &str) -> Option<(u32, u32)> {
    let mut parts = release.trim().split(['.', '-']);
    let major = parts.next()?.parse().ok()?;
    let minor = parts
        .next()?
        .trim_end_matches(|c: char| !c.is_ascii_digit())
        .parse()
        .ok()?;
    Some((major, minor))
}

/// The first unsigned integer in a sysctl-style file (`"4096\n"` → 4096).
pub fn number(text: &str) -> Option<u64> {
    text.split_whitespace().next()?.parse().ok()
}

/// The trailing queue number of an IRQ or queue name: `virtio2-input.3` → 3, `eth0-TxRx-7` → 7.
pub fn trailing_number(name: &str) -> Option<usize> {
    let digits = name.len() - name.trim_end_matches(|c: char| c.is_ascii_digit()).len();
    name[name.len() - digits..].parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_lists_round_trip() {
        let rows: &[(&str, Option<&[usize]>, &str)] = &[
            ("0", Some(&[0]), "0"),
            ("0-3,8", Some(&[0, 1, 2, 3, 8]), "0-3,8"),
            ("2,0-1\n", Some(&[0, 1, 2]), "0-2"),
            ("", Some(&[]), ""),
            ("3-1", None, ""),
            ("x", None, ""),
        ];
        for &(text, want, formatted) in rows {
            let got = cpu_list(text);
            assert_eq!(got.as_deref(), want, "{text:?}");
            if let Some(cpus) = got {
                assert_eq!(format_cpu_list(&cpus), formatted, "{text:?}");
            }
        }
    }

    #[test]
    fn cpu_masks() {
        let rows: &[(&str, Option<&[usize]>)] = &[
            ("0", Some(&[])),
            ("00000003", Some(&[0, 1])),
            ("00000001,00000000", Some(&[32])),
            ("zz", None),
        ];
        for &(text, want) in rows {
            assert_eq!(cpu_mask(text).as_deref(), want, "{text:?}");
        }
        for cpu in [0, 5, 31, 32, 70] {
            assert_eq!(cpu_mask(&single_cpu_mask(cpu)), Some(vec![cpu]));
        }
    }

    #[test]
    fn small_fields() {
        assert_eq!(kernel_version("6.18.44-fc-v595"), Some((6, 18)));
        assert_eq!(kernel_version("5.4.0-150-generic"), Some((5, 4)));
        assert_eq!(kernel_version("junk"), None);
        assert_eq!(trailing_number("virtio2-input.3"), Some(3));
        assert_eq!(trailing_number("eth0-TxRx-12"), Some(12));
        assert_eq!(trailing_number("eth0-link"), None);
        let limits = "Limit  Soft Limit Hard Limit Units\nMax open files  1024  unlimited  files\n";
        assert_eq!(
            nofile_from_limits(limits),
            Some(NofileLimit {
                soft: Some(1024),
                hard: None
            })
        );
        assert_eq!(status_field("Seccomp:\t2\n", "Seccomp"), Some("2"));
    }
}
