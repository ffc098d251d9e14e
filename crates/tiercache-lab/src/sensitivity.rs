//! A paper's headline result swept over one assumption where our setup and the paper's differ
//! (the SCM's bandwidth, the load, the trace's locality): the measure its claim judges, at each
//! point of the sweep and for each line (a workload, a hierarchy), beside what the claim needs.
//! It is drawn (`NAME.png`), written (`NAME.csv`) and told in one paragraph whose every figure
//! is computed from the points: whether the result reproduces on the paper's setup, and if not,
//! where along the sweep it flips and by how much.

use std::fmt::Write as _;

use super::{series, Chart, Lab};

/// What a claim needs of its measure.
#[derive(Clone, Copy, Debug)]
pub enum Needs {
    AtLeast(f64),
    /// Above the bound, not at it.
    Above(f64),
    AtMost(f64),
    /// Below the bound, not at it.
    Below(f64),
    /// Within `tolerance` of `target` (the paper's number).
    Near {
        target: f64,
        tolerance: f64,
    },
    /// Above the first bound and at most the second: `(low, high]`.
    AboveAtMost(f64, f64),
    /// At least the first bound and below the second: `[low, high)`.
    AtLeastBelow(f64, f64),
}

impl Needs {
    pub fn met(self, y: f64) -> bool {
        match self {
            Needs::AtLeast(bound) => y >= bound,
            Needs::Above(bound) => y > bound,
            Needs::AtMost(bound) => y <= bound,
            Needs::Below(bound) => y < bound,
            Needs::Near { target, tolerance } => (y - target).abs() <= tolerance,
            Needs::AboveAtMost(low, high) => y > low && y <= high,
            Needs::AtLeastBelow(low, high) => y >= low && y < high,
        }
    }

    pub fn describe(self, show: fn(f64) -> String) -> String {
        match self {
            Needs::AtLeast(bound) => format!(">= {}", show(bound)),
            Needs::Above(bound) => format!("above {}", show(bound)),
            Needs::AtMost(bound) => format!("<= {}", show(bound)),
            Needs::Below(bound) => format!("below {}", show(bound)),
            Needs::Near { target, tolerance } => {
                format!("within {} of {}", magnitude(show, tolerance), show(target))
            }
            Needs::AboveAtMost(low, high) => format!("in ({}, {}]", show(low), show(high)),
            Needs::AtLeastBelow(low, high) => format!("in [{}, {})", show(low), show(high)),
        }
    }

    /// The levels the chart draws for the claim, each with its label: its bound, or both
    /// (the edges of a range, or of the band around the paper's number).
    fn bounds(self, show: fn(f64) -> String) -> Vec<(f64, String)> {
        match self {
            Needs::AtLeast(b) | Needs::Above(b) | Needs::AtMost(b) | Needs::Below(b) => {
                vec![(b, self.describe(show))]
            }
            Needs::Near { target, tolerance } => {
                let said = self.describe(show);
                vec![
                    (target - tolerance, format!("{said}: from {}", show(target - tolerance))),
                    (target + tolerance, format!("{said}: to {}", show(target + tolerance))),
                ]
            }
            Needs::AboveAtMost(low, high) => {
                vec![(low, format!("above {}", show(low))), (high, format!("<= {}", show(high)))]
            }
            Needs::AtLeastBelow(low, high) => {
                vec![(low, format!(">= {}", show(low))), (high, format!("below {}", show(high)))]
            }
        }
    }
}

/// A tolerance as `show` writes it, without the sign a signed format gives it.
fn magnitude(show: fn(f64) -> String, x: f64) -> String {
    show(x).trim_start_matches('+').to_string()
}

/// One line of a sweep: its measure at each point, and what the claim needs of it.
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    pub needs: Needs,
}

/// A headline result swept over one assumption.
pub struct Sensitivity<'a> {
    /// The file names: `NAME.csv`, `NAME.svg`, `NAME.png`.
    pub name: &'a str,
    /// The result, as the paragraph opens ("Kassa, Figure 5b: ...").
    pub result: &'a str,
    /// What is swept (the x axis).
    pub assumption: &'a str,
    /// What the claim judges (the y axis).
    pub measure: &'a str,
    pub x_format: fn(f64) -> String,
    pub y_format: fn(f64) -> String,
    /// Where the paper's setup lies on the sweep (one of its points), and the setup in words.
    pub paper_x: f64,
    pub paper_setup: &'a str,
    pub lines: Vec<Line>,
    /// Said after the paragraph's reading of the sweep (computed by the caller): why the
    /// lines run as they do, or what the rule leaves out. Empty: nothing.
    pub note: String,
}

/// One line's stretches along the sweep: where the claim's need is met, and where it flips.
struct Reading {
    at_paper: Option<f64>,
    /// How many points meet the need.
    met: usize,
    /// Between which points the need turns from unmet to met or back, as (before, after).
    flips: Vec<(usize, usize)>,
}

fn read(line: &Line, paper_x: f64) -> Reading {
    let at_paper = line.points.iter().find(|(x, _)| (x - paper_x).abs() < 1e-9).map(|p| p.1);
    let met = line.points.iter().filter(|p| line.needs.met(p.1)).count();
    let flips = line
        .points
        .windows(2)
        .enumerate()
        .filter(|(_, w)| line.needs.met(w[0].1) != line.needs.met(w[1].1))
        .map(|(i, _)| (i, i + 1))
        .collect();
    Reading { at_paper, met, flips }
}

impl Sensitivity<'_> {
    /// Whether every line meets its need on the paper's setup (`None` if a line lacks the
    /// paper's point).
    pub fn reproduces(&self) -> Option<bool> {
        self.lines
            .iter()
            .map(|line| read(line, self.paper_x).at_paper.map(|y| line.needs.met(y)))
            .collect::<Option<Vec<bool>>>()
            .map(|met| met.iter().all(|&m| m))
    }

    /// The paragraph: on the paper's setup, then along the sweep, line by line.
    pub fn paragraph(&self) -> String {
        let (x, y) = (self.x_format, self.y_format);
        let mut text = format!("**{}** ", self.result);
        let verdict = match self.reproduces() {
            Some(true) => "reproduces",
            Some(false) => "does not reproduce",
            None => "is not measured",
        };
        let at_paper: Vec<String> = self
            .lines
            .iter()
            .map(|line| {
                let value = read(line, self.paper_x).at_paper.map_or("-".to_string(), y);
                format!("{} {value}", line.name)
            })
            .collect();
        let _ = write!(
            text,
            "On the paper's setup ({}; {} {}) the result {verdict}: {} is {} (the claim needs {}).",
            self.paper_setup,
            self.assumption,
            x(self.paper_x),
            self.measure,
            at_paper.join(", "),
            describe_needs(&self.lines, y),
        );
        let _ = write!(
            text,
            " Along {} ({} to {}):",
            self.assumption,
            x(self.first_x()),
            x(self.last_x())
        );
        let mut parts = Vec::new();
        for line in &self.lines {
            let reading = read(line, self.paper_x);
            let points = &line.points;
            let crossing = match line.needs {
                // A line that jumps over the paper's number without landing near it.
                Needs::Near { target, .. } => points
                    .windows(2)
                    .find(|w| (w[0].1 - target).signum() != (w[1].1 - target).signum()),
                _ => None,
            };
            let part = if let (true, Some(w)) = (reading.met == 0, crossing) {
                format!(
                    "{} meets it at no point swept but passes the paper's number between {} ({}) and {} ({})",
                    line.name,
                    x(w[0].0),
                    y(w[0].1),
                    x(w[1].0),
                    y(w[1].1)
                )
            } else if reading.met == 0 {
                let closest = points
                    .iter()
                    .min_by(|a, b| distance(line.needs, a.1).total_cmp(&distance(line.needs, b.1)))
                    .expect("a point");
                format!(
                    "{} meets it nowhere (closest: {} at {})",
                    line.name,
                    y(closest.1),
                    x(closest.0)
                )
            } else if reading.met == points.len() {
                format!(
                    "{} meets it everywhere ({} to {})",
                    line.name,
                    y(min_y(points)),
                    y(max_y(points))
                )
            } else {
                let flips: Vec<String> = reading
                    .flips
                    .iter()
                    .map(|&(a, b)| {
                        let turns = if line.needs.met(points[b].1) { "meets it" } else { "fails" };
                        format!(
                            "{turns} from {} on ({} at {}, {} at {})",
                            x(points[b].0),
                            y(points[a].1),
                            x(points[a].0),
                            y(points[b].1),
                            x(points[b].0)
                        )
                    })
                    .collect();
                format!("{} {}", line.name, flips.join(", then "))
            };
            parts.push(part);
        }
        let _ = write!(text, " {}.", parts.join("; "));
        if !self.note.is_empty() {
            let _ = write!(text, " {}", self.note);
        }
        text
    }

    /// What the chart and table show, in a line.
    fn measure_line(&self) -> String {
        format!(
            "{} by {}; the paper's setup at {}.",
            self.measure,
            self.assumption,
            (self.x_format)(self.paper_x)
        )
    }

    fn first_x(&self) -> f64 {
        self.lines.iter().flat_map(|l| l.points.first().map(|p| p.0)).fold(f64::MAX, f64::min)
    }

    fn last_x(&self) -> f64 {
        self.lines.iter().flat_map(|l| l.points.last().map(|p| p.0)).fold(f64::MIN, f64::max)
    }
}

/// What the lines need, each need said once with the lines that share it.
fn describe_needs(lines: &[Line], show: fn(f64) -> String) -> String {
    let mut needs: Vec<(String, Vec<&str>)> = Vec::new();
    for line in lines {
        let said = line.needs.describe(show);
        match needs.iter_mut().find(|(n, _)| *n == said) {
            Some((_, names)) => names.push(&line.name),
            None => needs.push((said, vec![&line.name])),
        }
    }
    match needs.len() {
        1 => needs.remove(0).0,
        _ => needs
            .iter()
            .map(|(need, names)| format!("{} {need}", names.join(" and ")))
            .collect::<Vec<_>>()
            .join("; "),
    }
}

/// How far `y` is from meeting `needs` (0 where it meets it).
fn distance(needs: Needs, y: f64) -> f64 {
    match needs {
        Needs::AtLeast(b) | Needs::Above(b) => (b - y).max(0.0),
        Needs::AtMost(b) | Needs::Below(b) => (y - b).max(0.0),
        Needs::Near { target, tolerance } => ((y - target).abs() - tolerance).max(0.0),
        Needs::AboveAtMost(low, high) | Needs::AtLeastBelow(low, high) => {
            (low - y).max(y - high).max(0.0)
        }
    }
}

fn min_y(points: &[(f64, f64)]) -> f64 {
    points.iter().map(|p| p.1).fold(f64::MAX, f64::min)
}

fn max_y(points: &[(f64, f64)]) -> f64 {
    points.iter().map(|p| p.1).fold(f64::MIN, f64::max)
}

impl Lab {
    /// Writes a sweep's CSV and chart and its paragraph, under a heading of its own.
    pub fn sensitivity(&mut self, sweep: &Sensitivity) -> anyhow::Result<()> {
        let (x, y) = (sweep.x_format, sweep.y_format);
        let rows: Vec<Vec<String>> = sweep
            .lines
            .iter()
            .flat_map(|line| {
                line.points.iter().map(move |&(px, py)| {
                    vec![
                        line.name.clone(),
                        x(px),
                        y(py),
                        line.needs.describe(y),
                        if line.needs.met(py) { "yes" } else { "no" }.to_string(),
                        if (px - sweep.paper_x).abs() < 1e-9 { "yes" } else { "" }.to_string(),
                    ]
                })
            })
            .collect();
        let heading = format!("Sensitivity: {}", sweep.result.trim_end_matches('.'));
        let _ = writeln!(
            self.headlines,
            "{} (The sweep: [{1}.png]({2}/{1}.png), [{1}.csv]({2}/{1}.csv).)\n",
            sweep.paragraph(),
            sweep.name,
            self.name,
        );
        self.heading(&heading);
        self.paragraph(format!(
            "{} Whether the result reproduces, and where it flips: the paragraph under the \
             headline results at the top.",
            sweep.measure_line()
        ));
        let mut lines: Vec<super::Series> =
            sweep.lines.iter().map(|l| series(l.name.clone(), l.points.clone())).collect();
        let (first, last) = (sweep.first_x(), sweep.last_x());
        // Each level the claim needs drawn once: named for the claim where every line needs
        // it, else for the lines that do.
        let mut drawn: Vec<f64> = Vec::new();
        for line in &sweep.lines {
            for (level, said) in line.needs.bounds(y) {
                if drawn.iter().any(|d| (d - level).abs() < 1e-12) {
                    continue;
                }
                drawn.push(level);
                let sharing: Vec<&str> = sweep
                    .lines
                    .iter()
                    .filter(|l| l.needs.bounds(y).iter().any(|b| (b.0 - level).abs() < 1e-12))
                    .map(|l| l.name.as_str())
                    .collect();
                let name = match sharing.len() {
                    n if n == sweep.lines.len() => format!("the claim: {said}"),
                    _ => format!("{}: {said}", sharing.join(" and ")),
                };
                lines.push(series(name, vec![(first, level), (last, level)]));
            }
        }
        let title = format!("{} by {}", sweep.measure, sweep.assumption);
        self.chart(
            sweep.name,
            &Chart {
                title: &title,
                x_label: sweep.assumption,
                y_label: sweep.measure,
                log_x: None,
                x_format: sweep.x_format,
                y_format: Some(sweep.y_format),
                series: &lines,
            },
        )?;
        self.table(
            sweep.name,
            &[
                "line",
                sweep.assumption,
                sweep.measure,
                "the claim needs",
                "meets it",
                "paper's setup",
            ],
            &rows,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pct(x: f64) -> String {
        format!("{:.0}%", x * 100.0)
    }

    fn sweep(points: Vec<(f64, f64)>, needs: Needs) -> Sensitivity<'static> {
        Sensitivity {
            name: "s",
            result: "A result.",
            assumption: "modules",
            measure: "gain",
            x_format: |x| format!("{x:.0}"),
            y_format: pct,
            paper_x: 1.0,
            paper_setup: "one module",
            note: String::new(),
            lines: vec![Line { name: "zipf".into(), points, needs }],
        }
    }

    #[test]
    fn a_result_that_flips_says_where_and_by_how_much() {
        let s = sweep(vec![(1.0, -0.1), (2.0, 0.05), (4.0, 0.3)], Needs::Above(0.0));
        assert_eq!(s.reproduces(), Some(false));
        let text = s.paragraph();
        assert!(text.contains("does not reproduce: gain is zipf -10%"), "{text}");
        assert!(text.contains("zipf meets it from 2 on (-10% at 1, 5% at 2)"), "{text}");
    }

    #[test]
    fn a_result_met_everywhere_or_nowhere_says_so() {
        let s = sweep(vec![(1.0, 0.1), (2.0, 0.2)], Needs::Above(0.0));
        assert_eq!(s.reproduces(), Some(true));
        assert!(s.paragraph().contains("zipf meets it everywhere (10% to 20%)"));
        let s = sweep(vec![(1.0, 0.5), (2.0, 0.4)], Needs::Near { target: 0.2, tolerance: 0.1 });
        assert_eq!(s.reproduces(), Some(false));
        assert!(s.paragraph().contains("zipf meets it nowhere (closest: 40% at 2)"));
    }

    #[test]
    fn a_line_that_jumps_over_the_papers_number_says_between_where() {
        let near = Needs::Near { target: 0.2, tolerance: 0.05 };
        let s = sweep(vec![(1.0, 0.02), (2.0, 0.5)], near);
        assert!(
            s.paragraph().contains("passes the paper's number between 1 (2%) and 2 (50%)"),
            "{}",
            s.paragraph()
        );
    }

    /// A band around the paper's number is drawn as its two edges, each named for what it
    /// is; a tolerance is written without the sign a signed format gives a gain.
    #[test]
    fn the_chart_draws_each_edge_of_what_the_claim_needs() {
        let signed = |x: f64| format!("{:+.0}%", x * 100.0);
        let near = Needs::Near { target: 0.21, tolerance: 0.10 };
        assert_eq!(near.describe(signed), "within 10% of +21%");
        let bounds = near.bounds(signed);
        assert_eq!(bounds.len(), 2);
        assert!((bounds[0].0 - 0.11).abs() < 1e-12 && (bounds[1].0 - 0.31).abs() < 1e-12);
        assert_eq!(bounds[0].1, "within 10% of +21%: from +11%");
        assert_eq!(bounds[1].1, "within 10% of +21%: to +31%");
        let range = Needs::AboveAtMost(0.0, 0.5).bounds(signed);
        assert_eq!(
            range.iter().map(|b| b.1.as_str()).collect::<Vec<_>>(),
            ["above +0%", "<= +50%"]
        );
        assert_eq!(Needs::Above(0.0).bounds(signed).len(), 1);
    }

    #[test]
    fn a_sweep_without_the_papers_point_is_not_a_verdict() {
        let s = Sensitivity { paper_x: 3.0, ..sweep(vec![(1.0, 0.1)], Needs::Above(0.0)) };
        assert_eq!(s.reproduces(), None);
        assert!(s.paragraph().contains("is not measured"));
    }
}
