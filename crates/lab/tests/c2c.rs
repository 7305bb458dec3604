//! Core-to-core latency on this machine with a tiny iteration count: the matrix's shape and
//! symmetry, the CSV format, the output files, and a clear error (not a hang) for a CPU the
//! process may not use. The measuring tests take a lock: two ping-pongs at once on a 2-CPU
//! host would each starve the other.

use std::sync::Mutex;

use linerate_lab::c2c::{self, C2cError, Matrix, Options};

/// Serialises the tests that spin threads on the CPUs.
static CPUS: Mutex<()> = Mutex::new(());

/// Few round trips and the fewest samples: each test measures in milliseconds.
fn tiny() -> Options {
    Options {
        round_trips: Some(500),
        samples: c2c::MIN_SAMPLES,
        ..Options::default()
    }
}

/// The first two CPUs this process may use, or `None` (and a note) on a 1-CPU host.
fn two_cpus() -> Option<Vec<usize>> {
    let cpus = c2c::allowed_cpus();
    if cpus.len() < 2 {
        eprintln!("skipped: core-to-core latency needs 2 CPUs, this process has {cpus:?}");
        return None;
    }
    Some(cpus[..2].to_vec())
}

fn measure_two() -> Option<Matrix> {
    let cpus = two_cpus()?;
    let _guard = CPUS.lock().unwrap_or_else(|e| e.into_inner());
    let m = c2c::measure(&cpus, &tiny()).expect("measuring two CPUs");
    Some(m)
}

#[test]
fn matrix_is_square_symmetric_with_an_empty_diagonal() {
    let Some(m) = measure_two() else { return };
    assert_eq!(m.len(), 2);
    assert_eq!(m.cells.len(), 2);
    assert!(m.cells.iter().all(|row| row.len() == 2));
    assert_eq!(m.get(0, 0), None);
    assert_eq!(m.get(1, 1), None);
    let cell = m.get(0, 1).expect("the pair was measured");
    assert_eq!(m.get(1, 0), Some(cell));
    assert!(cell.mean_ns.is_finite() && cell.mean_ns > 0.0, "{cell:?}");
    assert!(cell.sem_ns.is_finite() && cell.sem_ns >= 0.0, "{cell:?}");
    assert_eq!((m.round_trips, m.samples), (500, c2c::MIN_SAMPLES));

    let pairs = m.closest_pairs();
    assert_eq!(pairs.len(), 1);
    assert_eq!((pairs[0].a, pairs[0].b), (m.cpus[0], m.cpus[1]));
    let p = m.placement().expect("a placement for two CPUs");
    assert_eq!((p.server, p.load), (vec![m.cpus[0]], vec![m.cpus[1]]));
}

#[test]
fn csv_has_header_one_row_per_cpu_and_blank_diagonal() {
    let Some(m) = measure_two() else { return };
    let (a, b) = (m.cpus[0], m.cpus[1]);
    for csv in [m.to_csv(), m.errors_csv()] {
        let lines: Vec<&str> = csv.lines().collect();
        assert_eq!(lines.len(), 3, "{csv}");
        assert_eq!(lines[0], format!("cpu,{a},{b}"));
        let row0: Vec<&str> = lines[1].split(',').collect();
        let row1: Vec<&str> = lines[2].split(',').collect();
        assert_eq!(row0.len(), 3);
        assert_eq!(row1.len(), 3);
        assert_eq!((row0[0], row0[1]), (a.to_string().as_str(), ""));
        assert_eq!((row1[0], row1[2]), (b.to_string().as_str(), ""));
        assert_eq!(row0[2], row1[1], "symmetric");
        let v: f64 = row0[2].parse().expect("a number");
        assert!(v >= 0.0);
        assert_eq!(row0[2].split_once('.').map(|(_, d)| d.len()), Some(1));
    }
}

#[test]
fn writes_csv_json_png_and_svg() {
    let Some(m) = measure_two() else { return };
    let dir = std::env::temp_dir().join(format!("linerate-c2c-{}", std::process::id()));
    let written = c2c::write_all(&m, &dir).expect("writing the files");
    assert_eq!(written.len(), 5);
    assert_eq!(
        std::fs::read_to_string(dir.join("c2c.csv")).unwrap(),
        m.to_csv()
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("c2c.json")).unwrap()).unwrap();
    assert_eq!(json["cells"][0][0], serde_json::Value::Null);
    assert!(json["cells"][0][1]["mean_ns"].as_f64().unwrap() > 0.0);
    let png = std::fs::read(dir.join("c2c.png")).unwrap();
    assert_eq!(&png[..8], b"\x89PNG\r\n\x1a\n");
    let svg = std::fs::read_to_string(dir.join("c2c.svg")).unwrap();
    assert!(svg.contains("<svg") && svg.contains("Core-to-core latency"));
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_cpu_this_process_may_not_use_is_a_clear_error() {
    let allowed = c2c::allowed_cpus();
    let outside = (0..1024).find(|c| !allowed.contains(c)).unwrap();
    let err = c2c::measure(&[allowed[0], outside], &tiny()).unwrap_err();
    assert!(
        matches!(err, C2cError::NotAllowed { cpu, .. } if cpu == outside),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.contains(&format!("CPU {outside} is not available to this process")),
        "{text}"
    );
    // Beyond the kernel's CPU set size: the same error, not a panic.
    let err = c2c::measure(&[allowed[0], 1 << 20], &tiny()).unwrap_err();
    assert!(matches!(err, C2cError::NotAllowed { .. }), "{err:?}");
}

#[test]
fn one_cpu_is_not_a_pair() {
    let first = c2c::allowed_cpus()[0];
    let err = c2c::measure(&[first, first], &tiny()).unwrap_err();
    assert!(matches!(err, C2cError::TooFewCpus { count: 1 }), "{err:?}");
}
