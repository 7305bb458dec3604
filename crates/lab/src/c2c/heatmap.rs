//! The heatmap of a [`Matrix`]: one square per pair coloured by one-way latency (viridis, dark
//! is close), the value written in each square while squares are big enough to read, CPU
//! numbers on both axes, a colour legend, and the CPU model in the title. Drawn once for any
//! plotters backend, so the PNG and the SVG are the same picture. Text always uses the embedded
//! font ([`plot::FONT`], registered here), never a system one.
#![forbid(unsafe_code)]

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::colors::colormaps::ViridisRGB;
use plotters::style::text_anchor::{HPos, Pos, VPos};

use super::matrix::Matrix;
use crate::plot;

/// Side of the grid the cell size aims at, px.
const GRID_PX: u32 = 640;
/// Largest square, px (a 2-CPU matrix would otherwise be two huge squares).
const MAX_CELL_PX: u32 = 120;
/// Smallest square, px ([`super::MAX_CPUS`] × 3 px is still a picture).
const MIN_CELL_PX: u32 = 3;
/// Most CPUs for which each square carries its value: at 32 CPUs a square is 20 px.
pub const MAX_LABELLED_CPUS: usize = 32;
/// Squares at least this big also show the standard error under the mean.
const ERROR_LABEL_CELL_PX: i32 = 60;
/// Narrowest picture, px: room for the title line.
const MIN_WIDTH: u32 = 760;
/// Space left of the grid (row labels), above it (title, column labels), below it, px.
const LEFT: i32 = 70;
const TOP: i32 = 100;
const BOTTOM: i32 = 40;
/// The legend bar: gap from the grid, width, and room for its labels, px.
const LEGEND_GAP: i32 = 40;
const LEGEND_BAR: i32 = 20;
const LEGEND_LABELS: i32 = 100;
/// Shortest legend bar, px (a 2-CPU grid is short).
const MIN_LEGEND_PX: i32 = 200;
/// Closest row/column labels may be, px; with smaller squares only every k-th CPU is labelled.
const MIN_LABEL_SPACING: i32 = 14;
/// The diagonal (a CPU with itself): not measured.
const DIAGONAL: RGBColor = RGBColor(235, 235, 235);
/// Viridis is dark below about this fraction of the scale: write on it in white.
const DARK_BELOW: f64 = 0.55;

/// Writes the heatmap as a PNG.
pub fn write_heatmap_png(matrix: &Matrix, path: &Path) -> anyhow::Result<()> {
    let layout = Layout::new(matrix.len());
    let root = BitMapBackend::new(path, (layout.width, layout.height)).into_drawing_area();
    draw(matrix, &layout, &root).map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
    root.present()
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))
}

/// Writes the heatmap as an SVG (text as `<text>` in the plain `sans-serif` family).
pub fn write_heatmap_svg(matrix: &Matrix, path: &Path) -> anyhow::Result<()> {
    let layout = Layout::new(matrix.len());
    let root = SVGBackend::new(path, (layout.width, layout.height)).into_drawing_area();
    draw(matrix, &layout, &root).map_err(|e| anyhow::anyhow!("drawing {}: {e}", path.display()))?;
    root.present()
        .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))
}

/// Pixel geometry for an n-CPU matrix.
struct Layout {
    n: i32,
    cell: i32,
    width: u32,
    height: u32,
}

impl Layout {
    fn new(n: usize) -> Layout {
        let n = n.max(1) as u32;
        let cell = (GRID_PX / n).clamp(MIN_CELL_PX, MAX_CELL_PX);
        let grid = (cell * n) as i32;
        let width = (LEFT + grid + LEGEND_GAP + LEGEND_BAR + LEGEND_LABELS) as u32;
        Layout {
            n: n as i32,
            cell: cell as i32,
            width: width.max(MIN_WIDTH),
            height: (TOP + grid.max(MIN_LEGEND_PX) + BOTTOM) as u32,
        }
    }

    fn grid(&self) -> i32 {
        self.cell * self.n
    }
}

type DrawResult<DB> = Result<(), DrawingAreaErrorKind<<DB as DrawingBackend>::ErrorType>>;

fn draw<DB: DrawingBackend>(
    m: &Matrix,
    layout: &Layout,
    root: &DrawingArea<DB, Shift>,
) -> DrawResult<DB> {
    plot::init();
    root.fill(&WHITE)?;
    let (lo, hi) = scale(m);
    let text = |size: f64, colour: RGBColor, h: HPos, v: VPos| {
        (plot::FONT, size)
            .into_font()
            .color(&colour)
            .pos(Pos::new(h, v))
    };

    root.draw(&Text::new(
        "Core-to-core latency, one-way (ns)".to_string(),
        (LEFT, 12),
        text(22.0, BLACK, HPos::Left, VPos::Top),
    ))?;
    let model = m
        .cpu_model
        .as_deref()
        .map(|model| format!("{model} · "))
        .unwrap_or_default();
    root.draw(&Text::new(
        format!(
            "{model}mean of {} samples × {} CAS round trips per pair",
            m.samples.saturating_sub(1),
            m.round_trips
        ),
        (LEFT, 42),
        text(14.0, BLACK, HPos::Left, VPos::Top),
    ))?;

    let (cell, grid) = (layout.cell, layout.grid());
    let label_size = (f64::from(cell) * 0.5).clamp(9.0, 14.0);
    let every = (MIN_LABEL_SPACING + cell - 1) / cell;
    root.draw(&Text::new(
        "CPU".to_string(),
        (LEFT - 8, TOP - 8),
        text(label_size, BLACK, HPos::Right, VPos::Bottom),
    ))?;
    for (k, cpu) in m.cpus.iter().enumerate() {
        if k as i32 % every != 0 {
            continue;
        }
        let mid = k as i32 * cell + cell / 2;
        root.draw(&Text::new(
            cpu.to_string(),
            (LEFT + mid, TOP - 8),
            text(label_size, BLACK, HPos::Center, VPos::Bottom),
        ))?;
        root.draw(&Text::new(
            cpu.to_string(),
            (LEFT - 8, TOP + mid),
            text(label_size, BLACK, HPos::Right, VPos::Center),
        ))?;
    }

    let labelled = m.len() <= MAX_LABELLED_CPUS;
    let value_size = (f64::from(cell) * 0.3).clamp(7.0, 22.0);
    for (i, row) in m.cells.iter().enumerate() {
        for (j, c) in row.iter().enumerate() {
            let (x, y) = (LEFT + j as i32 * cell, TOP + i as i32 * cell);
            let colour = c.map_or(DIAGONAL, |c| colour(c.mean_ns, lo, hi));
            root.draw(&Rectangle::new(
                [(x, y), (x + cell, y + cell)],
                colour.filled(),
            ))?;
            if cell >= 8 {
                root.draw(&Rectangle::new([(x, y), (x + cell, y + cell)], WHITE))?;
            }
            let Some(c) = c.filter(|_| labelled) else {
                continue;
            };
            let ink = match (c.mean_ns - lo) / (hi - lo) < DARK_BELOW {
                true => WHITE,
                false => BLACK,
            };
            let centre = (x + cell / 2, y + cell / 2);
            let with_error = cell >= ERROR_LABEL_CELL_PX;
            let mean_at = match with_error {
                true => (centre.0, centre.1 - value_size as i32 / 3),
                false => centre,
            };
            root.draw(&Text::new(
                ns_label(c.mean_ns),
                mean_at,
                text(value_size, ink, HPos::Center, VPos::Center),
            ))?;
            if with_error {
                root.draw(&Text::new(
                    format!("±{:.1}", c.sem_ns),
                    (centre.0, mean_at.1 + value_size as i32),
                    text(value_size * 0.6, ink, HPos::Center, VPos::Center),
                ))?;
            }
        }
    }

    // Legend: the scale top (slow) to bottom (fast), labelled at both ends and the middle.
    let bar_x = LEFT + grid + LEGEND_GAP;
    let bar_h = grid.max(MIN_LEGEND_PX);
    for k in 0..bar_h {
        let v = hi - (hi - lo) * f64::from(k) / f64::from(bar_h - 1);
        root.draw(&Rectangle::new(
            [(bar_x, TOP + k), (bar_x + LEGEND_BAR, TOP + k + 1)],
            colour(v, lo, hi).filled(),
        ))?;
    }
    root.draw(&Rectangle::new(
        [(bar_x, TOP), (bar_x + LEGEND_BAR, TOP + bar_h)],
        BLACK,
    ))?;
    root.draw(&Text::new(
        "ns".to_string(),
        (bar_x, TOP - 8),
        text(12.0, BLACK, HPos::Left, VPos::Bottom),
    ))?;
    for (frac, v) in [(0.0, hi), (0.5, (lo + hi) / 2.0), (1.0, lo)] {
        let y = TOP + (frac * f64::from(bar_h - 1)) as i32;
        root.draw(&PathElement::new(
            [(bar_x + LEGEND_BAR, y), (bar_x + LEGEND_BAR + 4, y)],
            BLACK,
        ))?;
        root.draw(&Text::new(
            ns_label(v),
            (bar_x + LEGEND_BAR + 7, y),
            text(12.0, BLACK, HPos::Left, VPos::Center),
        ))?;
    }
    root.draw(&Text::new(
        "diagonal: a CPU with itself (not measured)".to_string(),
        (LEFT, TOP + bar_h + 12),
        text(12.0, RGBColor(90, 90, 90), HPos::Left, VPos::Top),
    ))?;
    Ok(())
}

/// The colour scale's ends: the smallest and largest mean, or 0 to the value when every pair
/// measures about the same (a 2-CPU matrix has one value).
fn scale(m: &Matrix) -> (f64, f64) {
    match m.range_ns() {
        Some((lo, hi)) if hi - lo > hi * 0.01 => (lo, hi),
        Some((_, hi)) if hi > 0.0 => (0.0, hi),
        _ => (0.0, 1.0),
    }
}

fn colour(v: f64, lo: f64, hi: f64) -> RGBColor {
    ViridisRGB::get_color_normalized(v, lo, hi)
}

/// ns with one decimal below 100, whole above (three digits are precise enough to read).
fn ns_label(v: f64) -> String {
    match v < 100.0 {
        true => format!("{v:.1}"),
        false => format!("{v:.0}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::c2c::matrix::Cell;

    fn synthetic(n: usize) -> Matrix {
        let cpus: Vec<usize> = (0..n).collect();
        let cells = cpus
            .iter()
            .map(|&a| {
                cpus.iter()
                    .map(|&b| {
                        (a != b).then_some(Cell {
                            mean_ns: 20.0 + (a + b) as f64,
                            sem_ns: 1.0,
                        })
                    })
                    .collect()
            })
            .collect();
        Matrix {
            cpus,
            cells,
            round_trips: 100,
            samples: 3,
            elapsed_s: 0.1,
            cpu_model: None,
        }
    }

    #[test]
    fn small_labelled_and_large_unlabelled_maps_render() {
        let dir = std::env::temp_dir().join(format!("linerate-heatmap-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        for n in [2, MAX_LABELLED_CPUS + 1, super::super::MAX_CPUS] {
            let path = dir.join(format!("{n}.png"));
            write_heatmap_png(&synthetic(n), &path).unwrap();
            assert_eq!(&std::fs::read(&path).unwrap()[..8], b"\x89PNG\r\n\x1a\n");
        }
        let svg = dir.join("2.svg");
        write_heatmap_svg(&synthetic(2), &svg).unwrap();
        let text = std::fs::read_to_string(&svg).unwrap();
        assert!(
            text.contains("\n21.0\n"),
            "the value is written in its cell"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_single_value_still_has_a_scale() {
        let (lo, hi) = scale(&synthetic(2));
        assert_eq!((lo, hi), (0.0, 21.0));
        assert_eq!(ns_label(123.4), "123");
        assert_eq!(ns_label(52.14), "52.1");
    }
}
