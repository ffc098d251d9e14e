//! Plots as SVG and PNG. Text is laid out (and, in PNG, rasterised) from a TrueType font: the
//! one built into the command (DejaVu Sans, cut to Latin; `fonts/` beside this crate, with its
//! license), or the file `TIERCACHE_FONT` names. No system font is needed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::Context;
use plotters::coord::Shift;
use plotters::prelude::*;

/// The built-in font.
const FONT: &[u8] = include_bytes!("../fonts/DejaVuSans-subset.ttf");

/// Registers the font for plot text once: `TIERCACHE_FONT`'s file if it is set and reads as
/// a font, else the built-in one. Whether one was registered.
fn font_ready() -> bool {
    static READY: OnceLock<bool> = OnceLock::new();
    *READY.get_or_init(|| {
        let chosen =
            std::env::var_os("TIERCACHE_FONT").filter(|path| !path.is_empty()).and_then(|path| {
                match std::fs::read(&path) {
                    Ok(bytes) => Some(bytes),
                    Err(e) => {
                        let path = PathBuf::from(path);
                        eprintln!(
                            "note: TIERCACHE_FONT {}: {e}; using the built-in font",
                            path.display()
                        );
                        None
                    }
                }
            });
        if let Some(bytes) = chosen {
            let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
            if plotters::style::register_font("sans-serif", FontStyle::Normal, bytes).is_ok() {
                return true;
            }
            eprintln!("note: TIERCACHE_FONT is not a TrueType font; using the built-in font");
        }
        plotters::style::register_font("sans-serif", FontStyle::Normal, FONT).is_ok()
    })
}

/// One line of a plot.
pub struct Series {
    pub name: String,
    pub points: Vec<(f64, f64)>,
}

pub struct Chart<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    /// A log x axis, with its ticks at powers of two (sizes) or at 1, 2 and 5 times a power
    /// of ten (counts); `None`, a linear one choosing its own.
    pub log_x: Option<Ticks>,
    /// Formats an x-axis value (sizes as `64 MiB`, counts as `10k`).
    pub x_format: fn(f64) -> String,
    /// Formats a y-axis value in the units its label and legend speak (`+21%`); `None`: as
    /// numbers.
    pub y_format: Option<fn(f64) -> String>,
    pub series: &'a [Series],
}

/// Round values for a log axis's ticks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ticks {
    Binary,
    Decimal,
}

impl Ticks {
    /// At most `most` round values in `lo..=hi` (lo > 0), spread evenly over the log axis:
    /// powers of two, every one or every second, third...; or 1, 2, 5 times powers of ten,
    /// then powers of ten alone.
    pub fn between(self, lo: f64, hi: f64, most: usize) -> Vec<f64> {
        let candidates: Vec<f64> = match self {
            Ticks::Binary => (-10..=70).map(|k| 2f64.powi(k)).collect(),
            Ticks::Decimal => {
                (-3..=18).flat_map(|k| [1.0, 2.0, 5.0].map(|m| m * 10f64.powi(k))).collect()
            }
        };
        let inside: Vec<f64> =
            candidates.into_iter().filter(|&v| v >= lo * 0.999 && v <= hi * 1.001).collect();
        if inside.len() <= most {
            return inside;
        }
        if self == Ticks::Decimal {
            let tens: Vec<f64> =
                inside.iter().copied().filter(|v| v.log10().fract().abs() < 1e-9).collect();
            if tens.len() <= most && tens.len() >= 2 {
                return tens;
            }
        }
        let step = inside.len().div_ceil(most);
        inside.into_iter().step_by(step).collect()
    }
}

/// Formats a byte count for an axis.
pub fn axis_bytes(x: f64) -> String {
    tiercache_core::format_size(x.max(0.0) as u64)
}

/// Formats a count for an axis: 950, 12k, 3.5M.
pub fn axis_count(x: f64) -> String {
    match x {
        x if x >= 1e6 => {
            format!("{:.3}M", x / 1e6).trim_end_matches('0').trim_end_matches('.').to_string()
        }
        x if x >= 1e3 => {
            format!("{:.3}k", x / 1e3).trim_end_matches('0').trim_end_matches('.').to_string()
        }
        x => format!("{x:.0}"),
    }
}

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];

/// The corner of the plot whose quarter holds the fewest points (of lines drawn through them,
/// sampled), so that the legend hides as little as it can: lower left first on a tie.
fn legend_corner(chart: &Chart, (x0, x1): (f64, f64), (y0, y1): (f64, f64)) -> SeriesLabelPosition {
    let unit = |v: f64, lo: f64, hi: f64| if hi > lo { (v - lo) / (hi - lo) } else { 0.5 };
    let mut counts = [0usize; 4];
    for s in chart.series {
        let x_of = |x: f64| match chart.log_x.is_some() && x0 > 0.0 && x > 0.0 {
            true => unit(x.ln(), x0.ln(), x1.ln()),
            false => unit(x, x0, x1),
        };
        // Each segment sampled at ten points, so a line crossing a corner counts there; a
        // lone point is a segment of its own.
        let segments: Vec<((f64, f64), (f64, f64))> = match s.points.as_slice() {
            [only] => vec![(*only, *only)],
            points => points.windows(2).map(|w| (w[0], w[1])).collect(),
        };
        for (a, b) in segments {
            for i in 0..=10 {
                let t = i as f64 / 10.0;
                let (x, y) =
                    (x_of(a.0) + t * (x_of(b.0) - x_of(a.0)), unit(a.1 + t * (b.1 - a.1), y0, y1));
                let (left, low) = (x < 0.45, y < 0.45);
                let (right, high) = (x > 0.55, y > 0.55);
                counts[0] += usize::from(left && low);
                counts[1] += usize::from(left && high);
                counts[2] += usize::from(right && high);
                counts[3] += usize::from(right && low);
            }
        }
    }
    let corners = [
        SeriesLabelPosition::LowerLeft,
        SeriesLabelPosition::UpperLeft,
        SeriesLabelPosition::UpperRight,
        SeriesLabelPosition::LowerRight,
    ];
    let best = (0..4).min_by_key(|&i| counts[i]).expect("four corners");
    corners[best].clone()
}

fn draw<DB: DrawingBackend>(area: DrawingArea<DB, Shift>, chart: &Chart) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    area.fill(&WHITE).map_err(|e| anyhow::anyhow!("{e:?}"))?;
    let xs = chart.series.iter().flat_map(|s| s.points.iter().map(|p| p.0));
    let (x_min, x_max) = xs.fold((f64::MAX, f64::MIN), |(a, b), x| (a.min(x), b.max(x)));
    let ys = || chart.series.iter().flat_map(|s| s.points.iter().map(|p| p.1));
    let y_max = ys().fold(f64::MIN, f64::max);
    let y_min = ys().fold(f64::MAX, f64::min);
    // Fitted to the data, a twentieth of its span beyond each end (never below zero for
    // data that is not), so that curves close together are told apart.
    let pad = ((y_max - y_min) * 0.05).max(y_max.abs() * 0.01).max(1e-3);
    let y_low = if y_min >= 0.0 { (y_min - pad).max(0.0) } else { y_min - pad };
    let (y_low, y_high) = (y_low, y_max + pad);
    let y_range = y_low..y_high;
    let mut builder = ChartBuilder::on(&area);
    builder
        .caption(chart.title, ("sans-serif", 22))
        .margin(15)
        .x_label_area_size(45)
        .y_label_area_size(60);
    macro_rules! finish {
        ($ctx:expr) => {{
            let mut ctx = $ctx;
            let x_format = |x: &f64| (chart.x_format)(*x);
            let y_format = |y: &f64| chart.y_format.map_or_else(String::new, |f| f(*y));
            let mut mesh = ctx.configure_mesh();
            mesh.x_labels(8)
                .x_label_formatter(&x_format)
                .light_line_style(WHITE.mix(0.0))
                .x_desc(chart.x_label)
                .y_desc(chart.y_label);
            if chart.y_format.is_some() {
                mesh.y_label_formatter(&y_format);
            }
            mesh.draw().map_err(|e| anyhow::anyhow!("{e:?}"))?;
            for (i, s) in chart.series.iter().enumerate() {
                let color = COLORS[i % COLORS.len()];
                ctx.draw_series(LineSeries::new(s.points.iter().copied(), color.stroke_width(2)))
                    .map_err(|e| anyhow::anyhow!("{e:?}"))?
                    .label(s.name.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
                    });
                ctx.draw_series(s.points.iter().map(|p| Circle::new(*p, 3, color.filled())))
                    .map_err(|e| anyhow::anyhow!("{e:?}"))?;
            }
            ctx.configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .position(legend_corner(chart, (x_min, x_max), (y_low, y_high)))
                .draw()
                .map_err(|e| anyhow::anyhow!("{e:?}"))?;
        }};
    }
    if let Some(ticks) = chart.log_x.filter(|_| x_min > 0.0) {
        let (lo, hi) = (x_min * 0.9, x_max * 1.1);
        let ticks = ticks.between(lo, hi, 8);
        finish!(builder
            .build_cartesian_2d((lo..hi).log_scale().with_key_points(ticks), y_range)
            .map_err(|e| anyhow::anyhow!("{e:?}"))?);
    } else {
        finish!(builder
            .build_cartesian_2d(x_min..x_max, y_range)
            .map_err(|e| anyhow::anyhow!("{e:?}"))?);
    }
    area.present().map_err(|e| anyhow::anyhow!("{e:?}"))?;
    Ok(())
}

/// Writes `<stem>.svg` and `<stem>.png`, and returns them.
pub fn write_chart(stem: &Path, chart: &Chart) -> anyhow::Result<Vec<PathBuf>> {
    anyhow::ensure!(font_ready(), "the built-in font did not load");
    let svg = stem.with_extension("svg");
    draw(SVGBackend::new(&svg, (960, 600)).into_drawing_area(), chart)
        .with_context(|| format!("cannot draw {}", svg.display()))?;
    let png = stem.with_extension("png");
    draw(BitMapBackend::new(&png, (960, 600)).into_drawing_area(), chart)
        .with_context(|| format!("cannot draw {}", png.display()))?;
    Ok(vec![svg, png])
}

#[cfg(test)]
mod tests {
    use super::Ticks;

    #[test]
    fn log_ticks_are_round_and_few() {
        let mib = (1u64 << 20) as f64;
        // A sweep from 9.5 MiB to 953.7 MiB: powers of two, not 10^7 bytes and its multiples.
        let ticks = Ticks::Binary.between(9.5 * mib, 953.7 * mib, 8);
        assert_eq!(ticks, [16.0, 32.0, 64.0, 128.0, 256.0, 512.0].map(|m| m * mib));
        // Wider: every second power, still at most eight.
        let ticks = Ticks::Binary.between(1024.0, 64.0 * 1024.0 * mib, 8);
        assert!(ticks.len() <= 8 && ticks.iter().all(|t| t.log2().fract() == 0.0), "{ticks:?}");
        assert_eq!(Ticks::Decimal.between(90.0, 2100.0, 8), [100.0, 200.0, 500.0, 1000.0, 2000.0]);
        assert_eq!(Ticks::Decimal.between(1.0, 1e6, 8), [1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6]);
    }
}
