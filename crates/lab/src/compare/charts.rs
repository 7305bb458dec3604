//! The comparison's charts, per workload: req/s and cost per request as bars (median, with a
//! min–max whisker), and latency percentiles at the fixed rate as one curve per server.
//! Each chart is written as PNG and SVG; text uses the embedded font (see [`crate::plot`]).
//! A server has one colour in every chart of a report, chosen by its place in the suite (not in
//! the chart, where a server that did not run a workload would shift the others).

use std::path::{Path, PathBuf};

use anyhow::anyhow;
use plotters::coord::Shift;
use plotters::prelude::*;

use super::stats::{Row, Spread, latency_labels};
use crate::plot::{FONT, init};

const SIZE: (u32, u32) = (900, 520);
/// Half a bar's width, in units of the distance between bars.
const BAR_HALF_WIDTH: f64 = 0.3;
const PALETTE: [RGBColor; 6] = [
    RGBColor(0x4c, 0x72, 0xb0),
    RGBColor(0xdd, 0x84, 0x52),
    RGBColor(0x55, 0xa8, 0x68),
    RGBColor(0xc4, 0x4e, 0x52),
    RGBColor(0x81, 0x72, 0xb3),
    RGBColor(0x93, 0x78, 0x60),
];

/// The colour of `server`: by its place in `order` (the suite's servers), the same in every
/// chart; a name not in `order` takes the colour after the suite's.
pub fn color_of(order: &[String], server: &str) -> RGBColor {
    let i = order
        .iter()
        .position(|s| s == server)
        .unwrap_or(order.len());
    PALETTE[i % PALETTE.len()]
}

/// A chart drawn on any backend.
trait Chart {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static;
}

/// Writes `<stem>.png` and `<stem>.svg`; returns the PNG's path.
fn write(dir: &Path, stem: &str, chart: &impl Chart) -> anyhow::Result<PathBuf> {
    init();
    let png = dir.join(format!("{stem}.png"));
    {
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        chart.draw(&root)?;
        root.present()
            .map_err(|e| anyhow!("{}: {e}", png.display()))?;
    }
    let svg = dir.join(format!("{stem}.svg"));
    {
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        chart.draw(&root)?;
        root.present()
            .map_err(|e| anyhow!("{}: {e}", svg.display()))?;
    }
    Ok(png)
}

/// Bars of one figure per server.
struct Bars<'a> {
    title: String,
    y_label: &'a str,
    names: Vec<&'a str>,
    values: Vec<Spread>,
    /// The suite's servers, for `color_of`.
    order: &'a [String],
}

impl Chart for Bars<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing failed: {e}");
        root.fill(&WHITE).map_err(e)?;
        let n = self.names.len();
        let top = self.values.iter().map(|s| s.max).fold(0.0, f64::max) * 1.15;
        let top = if top > 0.0 { top } else { 1.0 };
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 22))
            .margin(16)
            .x_label_area_size(36)
            .y_label_area_size(80)
            .build_cartesian_2d(-0.5..n as f64 - 0.5, 0.0..top)
            .map_err(e)?;
        let names = &self.names;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(n)
            .y_desc(self.y_label)
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 15))
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 && i >= 0.0 {
                    names.get(i as usize).copied().unwrap_or("").to_string()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| human(*v))
            .draw()
            .map_err(e)?;
        for (i, s) in self.values.iter().enumerate() {
            let x = i as f64;
            let c = color_of(self.order, self.names[i]);
            chart
                .draw_series(std::iter::once(Rectangle::new(
                    [(x - BAR_HALF_WIDTH, 0.0), (x + BAR_HALF_WIDTH, s.median)],
                    c.mix(0.85).filled(),
                )))
                .map_err(e)?;
            // Whisker: min–max over rounds, with caps.
            let cap = BAR_HALF_WIDTH / 4.0;
            chart
                .draw_series([
                    PathElement::new(vec![(x, s.min), (x, s.max)], BLACK.stroke_width(2)),
                    PathElement::new(
                        vec![(x - cap, s.min), (x + cap, s.min)],
                        BLACK.stroke_width(2),
                    ),
                    PathElement::new(
                        vec![(x - cap, s.max), (x + cap, s.max)],
                        BLACK.stroke_width(2),
                    ),
                ])
                .map_err(e)?;
            chart
                .draw_series(std::iter::once(Text::new(
                    human(s.median),
                    (x + cap * 1.5, s.median + top * 0.03),
                    (FONT, 16).into_font(),
                )))
                .map_err(e)?;
        }
        Ok(())
    }
}

/// Latency percentile curves, one per server.
struct Curves<'a> {
    title: String,
    names: Vec<&'a str>,
    series: Vec<Vec<f64>>,
    /// The suite's servers, for `color_of`.
    order: &'a [String],
}

impl Chart for Curves<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let e = |e: DrawingAreaErrorKind<DB::ErrorType>| anyhow!("drawing failed: {e}");
        root.fill(&WHITE).map_err(e)?;
        let labels = latency_labels();
        let finite = || {
            self.series
                .iter()
                .flatten()
                .copied()
                .filter(|v| v.is_finite() && *v > 0.0)
        };
        let lo = finite().fold(f64::INFINITY, f64::min).max(1.0) / 1.5;
        let hi = finite().fold(1.0, f64::max) * 1.5;
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, (FONT, 22))
            .margin(16)
            .x_label_area_size(36)
            .y_label_area_size(80)
            .build_cartesian_2d(0.0..(labels.len() - 1) as f64, (lo..hi).log_scale())
            .map_err(e)?;
        chart
            .configure_mesh()
            .x_labels(labels.len())
            .x_desc("percentile")
            .y_desc("latency (µs, log scale)")
            .label_style((FONT, 15))
            .axis_desc_style((FONT, 15))
            .x_label_formatter(&|x| {
                let i = x.round();
                if (x - i).abs() < 1e-6 {
                    labels.get(i as usize).copied().unwrap_or("").to_string()
                } else {
                    String::new()
                }
            })
            .y_label_formatter(&|v| human(*v))
            .draw()
            .map_err(e)?;
        for (name, ys) in self.names.iter().zip(&self.series) {
            let c = color_of(self.order, name);
            let pts: Vec<(f64, f64)> = ys
                .iter()
                .enumerate()
                .filter(|(_, y)| y.is_finite() && **y > 0.0)
                .map(|(x, y)| (x as f64, *y))
                .collect();
            chart
                .draw_series(LineSeries::new(pts.clone(), c.stroke_width(3)))
                .map_err(e)?
                .label(*name)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3))
                });
            chart
                .draw_series(pts.into_iter().map(|p| Circle::new(p, 4, c.filled())))
                .map_err(e)?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .label_font((FONT, 15))
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .draw()
            .map_err(e)?;
        Ok(())
    }
}

/// `161.1k`, `5.43`, `1.33M`.
pub fn human(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1e6 {
        format!("{:.2}M", v / 1e6)
    } else if a >= 1e4 {
        format!("{:.1}k", v / 1e3)
    } else if a >= 100.0 {
        format!("{v:.0}")
    } else if a >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

/// Writes one bar chart (`<stem>.png` and `.svg`: each server's median with its min–max) into
/// `dir`; returns the PNG's path. `order` is the servers' order, for their colours.
pub fn bars(
    dir: &Path,
    stem: &str,
    title: String,
    y_label: &str,
    named: Vec<(&str, Spread)>,
    order: &[String],
) -> anyhow::Result<PathBuf> {
    let (names, values) = named.into_iter().unzip();
    write(
        dir,
        stem,
        &Bars {
            title,
            y_label,
            names,
            values,
            order,
        },
    )
}

/// Writes the workload's charts into `dir`; returns the PNG paths written. `order` is the
/// suite's servers: each keeps its colour across charts and workloads.
pub fn workload_charts(
    dir: &Path,
    workload: &str,
    title: &str,
    rows: &[Row],
    order: &[String],
) -> anyhow::Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    let pick = |f: fn(&Row) -> Option<Spread>| -> (Vec<&str>, Vec<Spread>) {
        rows.iter()
            .filter_map(|r| f(r).map(|s| (r.server.as_str(), s)))
            .unzip()
    };
    let (names, values) = pick(|r| r.req_per_s);
    if !names.is_empty() {
        out.push(write(
            dir,
            &format!("{workload}-rps"),
            &Bars {
                title: format!("{title}: requests/s (median, min–max)"),
                y_label: "requests per second",
                names,
                values,
                order,
            },
        )?);
    }
    let (names, values) = pick(|r| r.cost_us);
    if !names.is_empty() {
        out.push(write(
            dir,
            &format!("{workload}-cost"),
            &Bars {
                title: format!("{title}: server CPU µs per request (lower is better)"),
                y_label: "µs of server CPU per request",
                names,
                values,
                order,
            },
        )?);
    }
    let (names, series): (Vec<&str>, Vec<Vec<f64>>) = rows
        .iter()
        .filter_map(|r| r.latency_us.clone().map(|l| (r.server.as_str(), l)))
        .unzip();
    if !names.is_empty() {
        let rate = rows.iter().find_map(|r| r.latency_rate).unwrap_or(0.0);
        out.push(write(
            dir,
            &format!("{workload}-latency"),
            &Curves {
                title: format!("{title}: latency at {} req/s", human(rate)),
                names,
                series,
                order,
            },
        )?);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_keeps_its_colour_in_every_chart() {
        let suite: Vec<String> = ["floor", "linerate", "nginx"].map(String::from).to_vec();
        // The JSON charts have all three; the file charts leave floor out: nginx must not take
        // linerate's colour there, nor linerate floor's.
        let distinct: Vec<RGBColor> = suite.iter().map(|s| color_of(&suite, s)).collect();
        assert!(
            distinct[0] != distinct[1] && distinct[1] != distinct[2] && distinct[0] != distinct[2]
        );
        for (server, want) in [("floor", 0), ("linerate", 1), ("nginx", 2)] {
            assert_eq!(color_of(&suite, server), PALETTE[want], "{server}");
        }
    }

    #[test]
    fn charts_of_different_workloads_draw_a_server_in_one_colour() {
        use super::super::stats::Row;
        let order: Vec<String> = ["floor", "linerate", "nginx"].map(String::from).to_vec();
        let row = |server: &str| Row {
            server: server.into(),
            samples: 1,
            req_per_s: Some(Spread {
                median: 1.0,
                min: 1.0,
                max: 1.0,
            }),
            ..Row::default()
        };
        let dir = std::env::temp_dir().join(format!("linerate-lab-colours-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        workload_charts(
            &dir,
            "all",
            "all",
            &[row("floor"), row("linerate"), row("nginx")],
            &order,
        )
        .unwrap();
        workload_charts(
            &dir,
            "some",
            "some",
            &[row("linerate"), row("nginx")],
            &order,
        )
        .unwrap();
        let fill = |c: RGBColor| format!("fill=\"#{:02X}{:02X}{:02X}\"", c.0, c.1, c.2);
        let all = std::fs::read_to_string(dir.join("all-rps.svg")).unwrap();
        let some = std::fs::read_to_string(dir.join("some-rps.svg")).unwrap();
        let (floor, nginx) = (fill(PALETTE[0]), fill(PALETTE[2]));
        assert!(all.contains(&floor) && all.contains(&nginx));
        assert!(
            some.contains(&nginx),
            "nginx keeps its colour without floor"
        );
        assert!(
            !some.contains(&floor),
            "no bar takes floor's colour when floor did not run"
        );
        std::fs::remove_dir_all(&dir).ok();
    }
}
