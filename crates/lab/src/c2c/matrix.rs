//! The result of a run as numbers and text: the symmetric latency matrix (one-way ns, mean and
//! standard error per pair), its CSV and table forms, the closest pairs and the placement hint.
//! Pure data: no threads, no files. Invariant: `cells` is square over `cpus`, symmetric, with
//! `None` exactly on the diagonal.
#![forbid(unsafe_code)]

use std::fmt::Write as _;

use serde::Serialize;

use linerate_load::units::format_cpu_list;

/// Closest pairs listed in the text output.
pub const CLOSEST_SHOWN: usize = 5;
/// Most CPUs for which the table shows `mean±error`; wider tables show the mean only (the
/// errors are in c2c-err.csv).
pub const MAX_CPUS_WITH_ERRORS: usize = 16;
/// A CPU whose nearest CPU answers at least this many times faster than its next nearest is
/// taken to share a core with it (SMT): a sibling answers through the core's own L1/L2, the
/// others through the L3 or further, typically 2-3 times slower.
pub const SMT_GAP: f64 = 1.5;

/// One pair's one-way latency over the kept samples.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Cell {
    /// Mean one-way latency, ns (half a round trip).
    pub mean_ns: f64,
    /// Standard error of that mean, ns.
    pub sem_ns: f64,
}

impl Cell {
    /// From sample durations of `round_trips` round trips each (warm-up already dropped; at
    /// least two so the standard error exists — one gives an error of 0).
    pub fn from_samples(samples: &[std::time::Duration], round_trips: u64) -> Cell {
        let one_way: Vec<f64> = samples
            .iter()
            .map(|t| t.as_nanos() as f64 / (2.0 * round_trips as f64))
            .collect();
        Cell::from_values(&one_way)
    }

    /// Mean and standard error of the mean (sample standard deviation / √n).
    pub fn from_values(values: &[f64]) -> Cell {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let sem = match values.len() {
            0 | 1 => 0.0,
            _ => {
                let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
                (var / n).sqrt()
            }
        };
        Cell {
            mean_ns: mean,
            sem_ns: sem,
        }
    }
}

/// An unordered pair of CPUs (by number, `a < b`) and its latency.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Pair {
    pub a: usize,
    pub b: usize,
    pub cell: Cell,
}

/// Where to run the server and the load generator; see [`Matrix::placement`].
#[derive(Clone, Debug, PartialEq)]
pub struct Placement {
    /// CPUs for the server (`serve --cpus`), ascending.
    pub server: Vec<usize>,
    /// CPUs for the load generator (`load --cpus`), ascending.
    pub load: Vec<usize>,
    /// Mean latency between a server CPU and a load CPU, ns.
    pub cross_ns: f64,
}

/// Core-to-core latency between every pair of `cpus`.
#[derive(Clone, Debug, Serialize)]
pub struct Matrix {
    /// CPU numbers, ascending; row and column `i` are `cpus[i]`.
    pub cpus: Vec<usize>,
    /// `cells[i][j]`: latency between `cpus[i]` and `cpus[j]`; `None` on the diagonal.
    pub cells: Vec<Vec<Option<Cell>>>,
    /// Round trips per sample.
    pub round_trips: u64,
    /// Samples per pair, including the discarded first.
    pub samples: u32,
    /// Wall time of the run, calibration included.
    pub elapsed_s: f64,
    /// From /proc/cpuinfo, when it says.
    pub cpu_model: Option<String>,
}

impl Matrix {
    /// Number of CPUs (rows, columns).
    pub fn len(&self) -> usize {
        self.cpus.len()
    }

    /// True when no CPU was measured.
    pub fn is_empty(&self) -> bool {
        self.cpus.is_empty()
    }

    /// The cell at row `i`, column `j` (indices, not CPU numbers).
    pub fn get(&self, i: usize, j: usize) -> Option<Cell> {
        self.cells.get(i)?.get(j).copied().flatten()
    }

    /// Latency between CPUs `a` and `b` (CPU numbers).
    pub fn latency(&self, a: usize, b: usize) -> Option<Cell> {
        let i = self.cpus.iter().position(|&c| c == a)?;
        let j = self.cpus.iter().position(|&c| c == b)?;
        self.get(i, j)
    }

    /// Every measured pair, fastest first (ties by CPU number).
    pub fn closest_pairs(&self) -> Vec<Pair> {
        let mut pairs: Vec<Pair> = (0..self.len())
            .flat_map(|i| (i + 1..self.len()).map(move |j| (i, j)))
            .filter_map(|(i, j)| {
                self.get(i, j).map(|cell| Pair {
                    a: self.cpus[i],
                    b: self.cpus[j],
                    cell,
                })
            })
            .collect();
        pairs.sort_by(|x, y| {
            x.cell
                .mean_ns
                .total_cmp(&y.cell.mean_ns)
                .then((x.a, x.b).cmp(&(y.a, y.b)))
        });
        pairs
    }

    /// Smallest and largest off-diagonal mean, ns.
    pub fn range_ns(&self) -> Option<(f64, f64)> {
        self.cells
            .iter()
            .flatten()
            .flatten()
            .map(|c| c.mean_ns)
            .fold(None, |acc, v| match acc {
                None => Some((v, v)),
                Some((lo, hi)) => Some((f64::min(lo, v), f64::max(hi, v))),
            })
    }

    /// Pairs of CPUs that look like SMT siblings (two threads of one core), by CPU number:
    /// each is the other's nearest CPU, and at least [`SMT_GAP`] times nearer than its next.
    /// Needs three CPUs or more (with two there is no "next" to compare with).
    pub fn smt_siblings(&self) -> Vec<(usize, usize)> {
        let sibling = self.sibling_index();
        (0..self.len())
            .filter_map(|i| {
                sibling[i]
                    .filter(|&j| i < j)
                    .map(|j| (self.cpus[i], self.cpus[j]))
            })
            .collect()
    }

    /// For each row, its SMT sibling's row, when it has one (mutual, see [`Matrix::smt_siblings`]).
    fn sibling_index(&self) -> Vec<Option<usize>> {
        let n = self.len();
        let nearest: Vec<Option<usize>> = (0..n)
            .map(|i| {
                let mut by_latency: Vec<(f64, usize)> = (0..n)
                    .filter_map(|j| self.get(i, j).map(|c| (c.mean_ns, j)))
                    .collect();
                by_latency.sort_by(|x, y| x.0.total_cmp(&y.0).then(x.1.cmp(&y.1)));
                match by_latency[..] {
                    [(first, j), (second, _), ..] if first * SMT_GAP <= second => Some(j),
                    _ => None,
                }
            })
            .collect();
        (0..n)
            .map(|i| nearest[i].filter(|&j| nearest[j] == Some(i)))
            .collect()
    }

    /// Splits the CPUs between the server and the load generator.
    ///
    /// The kernel spreads connections over all server workers and all load threads, so every
    /// request crosses between the two sides and pays the latency between them: the split
    /// should keep the *mean latency across the sides* low. Physical cores come first, though:
    /// SMT siblings ([`Matrix::smt_siblings`]) stay on one side, so the server and the load
    /// never compete for one core's execution units. Over these units (a core, or a lone CPU)
    /// the closest pair seeds the sides, the server one end and the load the other; then the
    /// sides take turns, server first, each taking the unplaced unit with the lowest mean
    /// latency to the *other* side. On a host with several cache domains this interleaves the
    /// two sides across the domains, which beats one domain each (every request would then
    /// cross). The server gets ⌊units/2⌋ units, the load the rest: the generator spends as
    /// much CPU per request as the server or more. `None` with fewer than 2 CPUs.
    pub fn placement(&self) -> Option<Placement> {
        let sibling = self.sibling_index();
        let units: Vec<Vec<usize>> = (0..self.len())
            .filter(|&i| sibling[i].is_none_or(|j| i < j))
            .map(|i| std::iter::once(i).chain(sibling[i]).collect())
            .collect();
        let distance = |u: &[usize], v: &[usize]| {
            let (sum, count) = u
                .iter()
                .flat_map(|&i| v.iter().filter_map(move |&j| self.get(i, j)))
                .fold((0.0, 0), |(s, c), cell| (s + cell.mean_ns, c + 1));
            sum / f64::from(count.max(1))
        };
        let k = units.len();
        let (first, second) = (0..k)
            .flat_map(|u| (u + 1..k).map(move |v| (u, v)))
            .min_by(|&(a, b), &(c, d)| {
                distance(&units[a], &units[b]).total_cmp(&distance(&units[c], &units[d]))
            })?;
        let mut sides = [vec![first], vec![second]];
        let want = [k / 2, k - k / 2];
        let mut placed = vec![false; k];
        placed[first] = true;
        placed[second] = true;
        let mut turn = 0;
        while placed.iter().any(|p| !p) {
            if sides[turn].len() >= want[turn] {
                turn = 1 - turn;
            }
            let other: Vec<usize> = sides[1 - turn]
                .iter()
                .flat_map(|&u| units[u].clone())
                .collect();
            let next = (0..k).filter(|&u| !placed[u]).min_by(|&x, &y| {
                distance(&units[x], &other).total_cmp(&distance(&units[y], &other))
            })?;
            placed[next] = true;
            sides[turn].push(next);
            turn = 1 - turn;
        }
        let rows = |side: &[usize]| -> Vec<usize> {
            side.iter().flat_map(|&u| units[u].clone()).collect()
        };
        let (server, load) = (rows(&sides[0]), rows(&sides[1]));
        let cpus = |rows: &[usize]| {
            let mut v: Vec<usize> = rows.iter().map(|&i| self.cpus[i]).collect();
            v.sort_unstable();
            v
        };
        Some(Placement {
            server: cpus(&server),
            load: cpus(&load),
            cross_ns: distance(&server, &load),
        })
    }

    /// Means as CSV: header `cpu,<cpu>,…`, one row per CPU, ns with one decimal, the diagonal
    /// empty.
    pub fn to_csv(&self) -> String {
        self.csv(|c| c.mean_ns)
    }

    /// Standard errors, in the shape of [`Matrix::to_csv`].
    pub fn errors_csv(&self) -> String {
        self.csv(|c| c.sem_ns)
    }

    fn csv(&self, value: impl Fn(&Cell) -> f64) -> String {
        let mut out = String::from("cpu");
        for cpu in &self.cpus {
            let _ = write!(out, ",{cpu}");
        }
        out.push('\n');
        for (cpu, row) in self.cpus.iter().zip(&self.cells) {
            let _ = write!(out, "{cpu}");
            for cell in row {
                out.push(',');
                if let Some(c) = cell {
                    let _ = write!(out, "{:.1}", value(c));
                }
            }
            out.push('\n');
        }
        out
    }

    /// The report: heading, the table, the closest pairs and the placement hint.
    pub fn to_text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "core-to-core latency, one-way ns (mean ± standard error){}",
            self.cpu_model
                .as_deref()
                .map(|m| format!(", {m}"))
                .unwrap_or_default()
        );
        let _ = writeln!(
            out,
            "{} samples × {} CAS round trips per pair (first sample discarded), {:.1} s\n",
            self.samples.saturating_sub(1),
            self.round_trips,
            self.elapsed_s
        );
        out.push_str(&self.table());
        let closest = self.closest_pairs();
        if !closest.is_empty() {
            let shown: Vec<String> = closest
                .iter()
                .take(CLOSEST_SHOWN)
                .map(|p| format!("{}–{} ({:.1} ns)", p.a, p.b, p.cell.mean_ns))
                .collect();
            let _ = writeln!(out, "\nclosest pairs: {}", shown.join(", "));
        }
        let siblings = self.smt_siblings();
        if !siblings.is_empty() {
            let shown: Vec<String> = siblings
                .iter()
                .take(CLOSEST_SHOWN)
                .map(|(a, b)| format!("{a}–{b}"))
                .collect();
            let more = siblings.len().saturating_sub(CLOSEST_SHOWN);
            let _ = writeln!(
                out,
                "likely SMT siblings (one core): {}{}",
                shown.join(", "),
                if more > 0 {
                    format!(" and {more} more")
                } else {
                    String::new()
                }
            );
        }
        if let Some(p) = self.placement() {
            let (s, l) = (format_cpu_list(&p.server), format_cpu_list(&p.load));
            let cpus = |v: &[usize]| if v.len() == 1 { "CPU" } else { "CPUs" };
            let _ = writeln!(
                out,
                "hint: pin the server to {} {s} (serve --cpus {s}) and the load to {} {l} \
                 (load --cpus {l}): every request crosses between them, {:.1} ns on average{}",
                cpus(&p.server),
                cpus(&p.load),
                p.cross_ns,
                if siblings.is_empty() {
                    ""
                } else {
                    "; SMT siblings stay on one side"
                }
            );
        }
        out
    }

    /// The matrix as an aligned table, `-` on the diagonal.
    fn table(&self) -> String {
        let with_errors = self.len() <= MAX_CPUS_WITH_ERRORS;
        let text = |c: &Option<Cell>| match c {
            None => "-".to_string(),
            Some(c) if with_errors => format!("{:.1}±{:.1}", c.mean_ns, c.sem_ns),
            Some(c) => format!("{:.0}", c.mean_ns),
        };
        let width = self
            .cells
            .iter()
            .flatten()
            .map(|c| text(c).chars().count())
            .chain(self.cpus.iter().map(|c| c.to_string().len()))
            .max()
            .unwrap_or(1);
        let mut out = format!("{:>4}", "cpu");
        for cpu in &self.cpus {
            let _ = write!(out, " {cpu:>width$}");
        }
        out.push('\n');
        for (cpu, row) in self.cpus.iter().zip(&self.cells) {
            let _ = write!(out, "{cpu:>4}");
            for cell in row {
                let _ = write!(out, " {:>width$}", text(cell));
            }
            out.push('\n');
        }
        if !with_errors {
            out.push_str("(standard errors in c2c-err.csv)\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A matrix from a latency function over CPU numbers (symmetric by construction).
    fn synthetic(cpus: &[usize], ns: impl Fn(usize, usize) -> f64) -> Matrix {
        let cells = cpus
            .iter()
            .map(|&a| {
                cpus.iter()
                    .map(|&b| {
                        (a != b).then(|| Cell {
                            mean_ns: ns(a.min(b), a.max(b)),
                            sem_ns: 0.5,
                        })
                    })
                    .collect()
            })
            .collect();
        Matrix {
            cpus: cpus.to_vec(),
            cells,
            round_trips: 100,
            samples: 3,
            elapsed_s: 0.1,
            cpu_model: Some("Test CPU".into()),
        }
    }

    /// Two 2-CPU clusters {0,1} and {2,3}: 20 ns inside, 100 ns across, except 1–2 at 15 ns.
    fn clusters(a: usize, b: usize) -> f64 {
        match (a, b) {
            (1, 2) => 15.0,
            (0, 1) | (2, 3) => 20.0,
            _ => 100.0,
        }
    }

    #[test]
    fn mean_and_standard_error() {
        let c = Cell::from_values(&[10.0, 12.0, 14.0]);
        assert_eq!(c.mean_ns, 12.0);
        // sample sd = 2, sem = 2/√3
        assert!((c.sem_ns - 2.0 / 3f64.sqrt()).abs() < 1e-12);
        let one = Cell::from_values(&[7.0]);
        assert_eq!((one.mean_ns, one.sem_ns), (7.0, 0.0));
    }

    #[test]
    fn one_way_is_half_a_round_trip() {
        let ms = std::time::Duration::from_millis;
        // 1 ms for 1000 round trips = 1000 ns a round trip = 500 ns one way.
        let c = Cell::from_samples(&[ms(1), ms(1)], 1000);
        assert_eq!(c.mean_ns, 500.0);
        assert_eq!(c.sem_ns, 0.0);
    }

    #[test]
    fn csv_has_a_header_and_blank_diagonal() {
        let m = synthetic(&[0, 2, 5], |a, b| (a * 10 + b) as f64 + 0.21);
        assert_eq!(
            m.to_csv(),
            "cpu,0,2,5\n0,,2.2,5.2\n2,2.2,,25.2\n5,5.2,25.2,\n"
        );
        assert_eq!(
            m.errors_csv(),
            "cpu,0,2,5\n0,,0.5,0.5\n2,0.5,,0.5\n5,0.5,0.5,\n"
        );
    }

    #[test]
    fn closest_pairs_are_sorted() {
        let m = synthetic(&[0, 1, 2, 3], clusters);
        let pairs: Vec<(usize, usize)> = m.closest_pairs().iter().map(|p| (p.a, p.b)).collect();
        assert_eq!(pairs[..3], [(1, 2), (0, 1), (2, 3)]);
        assert_eq!(pairs.len(), 6);
        assert_eq!(m.range_ns(), Some((15.0, 100.0)));
        assert_eq!(m.latency(2, 1).map(|c| c.mean_ns), Some(15.0));
        assert_eq!(m.latency(1, 1), None);
    }

    /// 8 CPUs, 4 cores with SMT siblings (c, c+4); cores {0,1} share one cache, {2,3} another.
    fn smt_two_domains(a: usize, b: usize) -> f64 {
        let (ca, cb) = (a % 4, b % 4);
        match () {
            _ if ca == cb => 10.0,
            _ if ca / 2 == cb / 2 => 40.0,
            _ => 100.0,
        }
    }

    #[test]
    fn placement_on_two_cpus_is_one_each() {
        let two = synthetic(&[0, 1], |_, _| 50.0);
        let p = two.placement().unwrap();
        assert_eq!((p.server, p.load, p.cross_ns), (vec![0], vec![1], 50.0));
        assert!(two.smt_siblings().is_empty());
    }

    #[test]
    fn placement_straddles_the_closest_link() {
        let m = synthetic(&[0, 1, 2, 3], clusters);
        let p = m.placement().unwrap();
        // 1–2 is the cheapest link; the sides grow towards each other's CPUs.
        assert!(p.server.contains(&1) && p.load.contains(&2), "{p:?}");
        assert_eq!(p.server.len() + p.load.len(), 4);
        let odd = synthetic(&[0, 1, 2], |a, b| 50.0 + (a + b) as f64);
        let p = odd.placement().unwrap();
        assert_eq!((p.server.len(), p.load.len()), (1, 2));
    }

    #[test]
    fn smt_siblings_stay_on_one_side_and_domains_are_shared() {
        let m = synthetic(&(0..8).collect::<Vec<_>>(), smt_two_domains);
        assert_eq!(m.smt_siblings(), vec![(0, 4), (1, 5), (2, 6), (3, 7)]);
        let p = m.placement().unwrap();
        for (a, b) in m.smt_siblings() {
            assert_eq!(p.server.contains(&a), p.server.contains(&b), "{p:?}");
        }
        // Each side has one core in each cache domain: half the requests stay in a domain.
        assert_eq!(p.server, vec![0, 2, 4, 6]);
        assert_eq!(p.load, vec![1, 3, 5, 7]);
        assert_eq!(p.cross_ns, 70.0);
    }

    #[test]
    fn text_report_has_table_pairs_and_hint() {
        let text = synthetic(&[0, 1], |_, _| 52.14).to_text();
        assert!(text.contains("Test CPU"), "{text}");
        assert!(text.contains("   0        - 52.1±0.5"), "{text}");
        assert!(text.contains("closest pairs: 0–1 (52.1 ns)"), "{text}");
        assert!(
            text.contains("pin the server to CPU 0 (serve --cpus 0) and the load to CPU 1"),
            "{text}"
        );
        assert!(!text.contains("SMT"), "{text}");
        let text = synthetic(&(0..8).collect::<Vec<_>>(), smt_two_domains).to_text();
        assert!(
            text.contains("likely SMT siblings (one core): 0–4, 1–5, 2–6, 3–7\n"),
            "{text}"
        );
        assert!(
            text.contains(
                "pin the server to CPUs 0,2,4,6 (serve --cpus 0,2,4,6) and the load to CPUs 1,3,5,7"
            ),
            "{text}"
        );
    }
}
