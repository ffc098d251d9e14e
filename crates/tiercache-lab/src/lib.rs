//! The lab: experiments that put the four papers' claims next to our figures, run by
//! `tiercache lab`. Each experiment runs the simulator (virtual time, modeled devices) at a
//! stated scale, writes CSV tables, plots and `claims.json` to `OUT/NAME/`, and a report
//! `OUT/NAME.md` that lists every claim it checks with the rule it is judged by, the cases, and
//! a verdict computed from them (see [`Claim`]); a paper's headline results open the report
//! with their fidelity tables (see [`Fidelity`]). The papers' experiments are here
//! ([`PAPERS`]); the command line adds those measured on the engine (`ycsb`, `calibrate`),
//! which run its own commands, through [`run`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use anyhow::Context;
use clap::{Args, Subcommand};
use tiercache_core::{DeviceProfile, Request};
use tiercache_policy::AnyPolicy;
use tiercache_sim::timed::{simulate_timed, TimedOptions, TimedReport};
use tiercache_workload::gen::{KeyDistribution, SizeDistribution, Synthetic, SyntheticConfig};

use crate::plot::{write_chart, Chart, Series};

pub use claim::{Case, Claim};
pub use fidelity::{Fidelity, How, Param, Value};
pub use sensitivity::{Line, Needs, Sensitivity};

mod claim;
mod fidelity;
mod hibachi;
mod kassa;
mod orthus;
pub mod plot;
mod sensitivity;
mod writes_hurt;

#[derive(Subcommand)]
pub enum LabCommand {
    /// The experiments and what each reproduces.
    List,
    /// Run one experiment (or `all`) and write OUT/NAME.md and OUT/NAME/.
    Run(RunArgs),
    /// Count the verdicts of the claims in DIR/*/claims.json: the papers' claims apart from
    /// the lab's own.
    Tally(TallyArgs),
}

/// Where `lab run` writes and `lab tally` reads unless told otherwise.
const RESULTS: &str = "lab-results";

/// Where the repository keeps its committed quick run.
const COMMITTED: &str = "docs/lab";

#[derive(Args)]
pub struct TallyArgs {
    /// Where the experiments' directories are: where `lab run --out` wrote (the committed
    /// quick run of every experiment is in docs/lab).
    #[arg(long, default_value = RESULTS)]
    pub dir: PathBuf,
    /// One JSON object instead of the table.
    #[arg(long)]
    pub json: bool,
}

#[derive(Args)]
pub struct RunArgs {
    /// writes-hurt, orthus, kassa, hibachi, ycsb, calibrate, or all.
    pub name: String,
    /// The scaled-down version (each experiment under 10 minutes on a 2-core machine).
    #[arg(long)]
    pub quick: bool,
    /// A tiny version for tests: the same code paths, numbers too small to judge by.
    #[arg(long, hide = true)]
    pub smoke: bool,
    /// Where the experiment directories go (`lab tally` reads the same by default).
    #[arg(long, default_value = RESULTS)]
    pub out: PathBuf,
}

/// How big a run is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scale {
    Smoke,
    Quick,
    Full,
}

impl Scale {
    /// Requests of one timed run.
    pub fn requests(self, full: u64) -> u64 {
        match self {
            Scale::Full => full,
            Scale::Quick => full / 2,
            Scale::Smoke => (full / 100).max(2000),
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Scale::Full => "full",
            Scale::Quick => "quick",
            Scale::Smoke => "smoke",
        }
    }
}

/// An experiment of the lab: its name on the command line, what it reproduces, and its run.
pub struct Experiment {
    pub name: &'static str,
    pub what: &'static str,
    pub run: fn(&mut Lab) -> anyhow::Result<()>,
    /// Measured on the engine rather than simulated: its figures move from run to run.
    pub measured: bool,
    /// A paper's headline results: the report must open with their fidelity tables.
    pub headline: bool,
}

/// The papers' experiments, on the simulator.
pub const PAPERS: [Experiment; 4] = [
    Experiment {
        name: "writes-hurt",
        what: "NVCache admission (Writes Hurt, SoCC'22) under the engine's DRAM cache, against no NVRAM: alloc-read-write, no-write-allocate, small-bypass, OBP 5/10/30%, interference-aware; OBP across cache sizes; eager vs no eviction (Table 1); Open CAS write-around (Figure 7); performance per dollar of DRAM/NVRAM splits (Figure 8); Figures 4, 6, 8 and Table 1 swept over the NVRAM's write bandwidth, the dataset's size and skew and the SSD, the NVCache's size and the NVRAM's price",
        run: writes_hurt::run,
        measured: false,
        headline: true,
    },
    Experiment {
        name: "orthus",
        what: "Non-hierarchical caching (Orthus, FAST'21): classic, static splits with and without data admission, and NHC over DRAM+NVM, NVM+Optane SSD, Optane SSD+Flash at hit ratios 80/95% and loads 0.5-2.0, and where the gain comes from (with and without write interference); the three target metrics (Table 2); write-around, write-back and write-through with few and many dirty reads (Figure 8); YCSB-C over Zipf 0.6-0.99; a moving hot set (Figure 12b); YCSB-D with inserts (Figure 12c); Figure 7 swept over the load, with and without write interference",
        run: orthus::run,
        measured: false,
        headline: true,
    },
    Experiment {
        name: "kassa",
        what: "DRAM + SCM block cache placements (Kassa et al., ATC'21): DRAM-first, SCM-first(2/6), Bidirectional(4), all-SCM, all-DRAM over DRAM-SCM splits 64-0, 64-128, 32-128, 32-256, on the paper's device figures and our presets, over a Zipf and db_bench's mixgraph model; throughput, p95, throughput per cost; the stand-ins' locality against the paper's Figure 6; the abstract (against the 1P and the 2P server) and Figure 5b swept over the SCM's module count, with and without Optane's write interference",
        run: kassa::run,
        measured: false,
        headline: true,
    },
    Experiment {
        name: "hibachi",
        what: "Hibachi (MSST'17): read and write hit rates against Hybrid-LRU and Hybrid-ARC at 8-256 MiB on every real trace of the test data, where read hits land, the ASRL and ARCL latency formulas with NVRAM 1x, 5x, 10x slower than DRAM, the Hybrid-ARC anomaly, and write throughput on a disk (Figure 11) from the engine's own write-backs; Figure 6 on synthetic traces fitted to the paper's Table I (its MSR volumes), swept over the reads' skew",
        run: hibachi::run,
        measured: false,
        headline: true,
    },
];

/// Runs `command` over the papers' experiments and then `measured` (the engine's, which the
/// command line supplies).
pub fn run(command: &LabCommand, measured: &[Experiment]) -> anyhow::Result<()> {
    let experiments: Vec<&Experiment> = PAPERS.iter().chain(measured).collect();
    match command {
        LabCommand::List => {
            for e in &experiments {
                println!("{:<12} {}", e.name, e.what);
            }
            println!(
                "\nRun: tiercache lab run NAME [--quick] [--out DIR]   (or `all`); writes \
                 DIR/NAME.md and DIR/NAME/ (DIR: {RESULTS}; the committed quick run is in \
                 {COMMITTED})\nCount the verdicts: tiercache lab tally [--dir DIR]"
            );
            Ok(())
        }
        LabCommand::Tally(args) => tally(args, &experiments),
        LabCommand::Run(args) => {
            let scale = match (args.smoke, args.quick) {
                (true, _) => Scale::Smoke,
                (false, true) => Scale::Quick,
                (false, false) => Scale::Full,
            };
            let chosen: Vec<&Experiment> = match args.name.as_str() {
                "all" => experiments,
                name => match experiments.iter().find(|e| e.name == name) {
                    Some(e) => vec![*e],
                    None => {
                        let known: Vec<&str> = experiments.iter().map(|e| e.name).collect();
                        anyhow::bail!(
                            "no lab experiment '{name}'; known: {}, all",
                            known.join(", ")
                        )
                    }
                },
            };
            for experiment in chosen {
                let started = std::time::Instant::now();
                let mut lab = Lab::new(&args.out.join(experiment.name), experiment, scale)?;
                (experiment.run)(&mut lab)?;
                let report = lab.finish(started.elapsed().as_secs_f64())?;
                println!("wrote {}", report.display());
            }
            Ok(())
        }
    }
}

/// Verdicts counted, as `claims.json` spells them.
const VERDICTS: [&str; 4] = ["holds", "holds_in_shape", "does_not_hold", "not_tested"];

/// `lab tally`: each experiment's verdicts, and the papers' claims in all, from the
/// `claims.json` files the runs wrote (never from a report's prose).
fn tally(args: &TallyArgs, experiments: &[&Experiment]) -> anyhow::Result<()> {
    use std::collections::BTreeMap;
    let mut counts: BTreeMap<(String, String), [u64; 4]> = BTreeMap::new();
    // Claims judged but not counted: they follow from another, or are arithmetic.
    let mut uncounted: BTreeMap<String, u64> = BTreeMap::new();
    for e in experiments {
        let path = args.dir.join(e.name).join("claims.json");
        let text = match std::fs::read_to_string(&path) {
            Ok(text) => text,
            Err(err) if err.kind() == std::io::ErrorKind::NotFound => anyhow::bail!(
                "{} is missing: a tally counts every experiment's claims (run `tiercache lab \
                 run {} --out {}`, or give --dir where the runs wrote; the committed runs: \
                 --dir {COMMITTED})",
                path.display(),
                e.name,
                args.dir.display()
            ),
            Err(e) => return Err(e).with_context(|| format!("cannot read {}", path.display())),
        };
        let claims: Vec<serde_json::Value> = serde_json::from_str(&text)
            .with_context(|| format!("{}: not a list of claims", path.display()))?;
        for (i, claim) in claims.iter().enumerate() {
            let field = |name: &str| {
                claim.get(name).and_then(|v| v.as_str()).with_context(|| {
                    format!(
                        "{}: claim {} has no '{name}' (written before it was recorded: run \
                         `tiercache lab run {}` again)",
                        path.display(),
                        i + 1,
                        e.name
                    )
                })
            };
            let (origin, verdict) = (field("origin")?, field("verdict")?);
            if claim.get("not_counted").is_some_and(|v| !v.is_null()) {
                *uncounted.entry(e.name.to_string()).or_default() += 1;
                continue;
            }
            let Some(at) = VERDICTS.iter().position(|v| *v == verdict) else {
                anyhow::bail!("{}: claim {}: unknown verdict '{verdict}'", path.display(), i + 1)
            };
            counts.entry((e.name.to_string(), origin.to_string())).or_default()[at] += 1;
        }
    }
    anyhow::ensure!(!counts.is_empty(), "no claims.json under {}", args.dir.display());
    let total = |origin: &str| {
        counts.iter().filter(|((_, o), _)| o == origin).fold([0u64; 4], |mut sum, (_, c)| {
            sum.iter_mut().zip(c).for_each(|(s, c)| *s += c);
            sum
        })
    };
    let (papers, ours) = (total("paper"), total("ours"));
    if args.json {
        let row = |c: &[u64; 4]| {
            let mut row: BTreeMap<&str, u64> = VERDICTS.iter().copied().zip(*c).collect();
            row.insert("claims", c.iter().sum());
            row
        };
        let experiments: BTreeMap<String, BTreeMap<&str, BTreeMap<&str, u64>>> = experiments
            .iter()
            .map(|e| {
                let by_origin = ["paper", "ours"]
                    .into_iter()
                    .filter_map(|o| {
                        counts.get(&(e.name.to_string(), o.to_string())).map(|c| (o, row(c)))
                    })
                    .collect();
                (e.name.to_string(), by_origin)
            })
            .filter(|(_, by_origin): &(String, BTreeMap<_, _>)| !by_origin.is_empty())
            .collect();
        let out = serde_json::json!({
            "papers": row(&papers),
            "ours": row(&ours),
            "experiments": experiments,
            "not_counted": uncounted,
        });
        println!("{}", serde_json::to_string_pretty(&out)?);
        return Ok(());
    }
    println!(
        "| experiment | whose | claims | holds | holds in shape | does not hold | not tested |"
    );
    println!("|---|---|---|---|---|---|---|");
    let line = |name: &str, whose: &str, c: &[u64; 4]| {
        let n: u64 = c.iter().sum();
        println!("| {name} | {whose} | {n} | {} | {} | {} | {} |", c[0], c[1], c[2], c[3]);
    };
    for ((name, origin), c) in &counts {
        line(name, if origin == "paper" { "the paper's" } else { "the lab's own" }, c);
    }
    line("all", "the papers'", &papers);
    line("all", "the lab's own", &ours);
    if !uncounted.is_empty() {
        let listed: Vec<String> = uncounted.iter().map(|(name, n)| format!("{name} {n}")).collect();
        println!(
            "\nJudged but not counted (they follow from another claim, or their figure is \
             arithmetic on the inputs): {}.",
            listed.join(", ")
        );
    }
    Ok(())
}

/// One experiment's output directory and report.
pub struct Lab {
    dir: PathBuf,
    name: &'static str,
    what: &'static str,
    measured: bool,
    headline: bool,
    pub scale: Scale,
    setup: String,
    body: String,
    /// One paragraph per headline result swept ([`Lab::sensitivity`]), shown after the claims.
    headlines: String,
    claims: Vec<Claim>,
    /// One table per headline result, checked as it is added ([`Lab::fidelity`]).
    fidelity: Vec<Fidelity>,
}

impl Lab {
    fn new(dir: &Path, experiment: &Experiment, scale: Scale) -> anyhow::Result<Lab> {
        std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
        Ok(Lab {
            dir: dir.to_path_buf(),
            name: experiment.name,
            what: experiment.what,
            measured: experiment.measured,
            headline: experiment.headline,
            scale,
            setup: String::new(),
            body: String::new(),
            headlines: String::new(),
            claims: Vec::new(),
            fidelity: Vec::new(),
        })
    }

    /// A headline result's fidelity table: checked here (an unexplained difference from the
    /// paper fails the run), shown where the report opens.
    pub fn fidelity(&mut self, table: Fidelity) -> anyhow::Result<()> {
        table.check()?;
        self.fidelity.push(table);
        Ok(())
    }

    /// A line of the setup: what was run and how it is scaled down.
    pub fn setup(&mut self, line: impl AsRef<str>) {
        let _ = writeln!(self.setup, "- {}", line.as_ref());
    }

    /// A progress line on stderr.
    pub fn step(&self, text: impl AsRef<str>) {
        eprintln!("[{}] {}", self.name, text.as_ref());
    }

    pub fn heading(&mut self, text: &str) {
        let _ = writeln!(self.body, "\n## {text}\n");
    }

    /// A paragraph of the report (its figures computed, never typed in).
    pub fn paragraph(&mut self, text: impl AsRef<str>) {
        let _ = writeln!(self.body, "{}\n", text.as_ref());
    }

    /// Writes `NAME.csv` and puts the same table in the report.
    pub fn table(
        &mut self,
        name: &str,
        header: &[&str],
        rows: &[Vec<String>],
    ) -> anyhow::Result<()> {
        let path = self.dir.join(format!("{name}.csv"));
        // RFC 4180: a cell with a comma, a quote or a line break is quoted, its quotes doubled.
        let line = |cells: &mut dyn Iterator<Item = &str>| -> String {
            let quoted: Vec<String> = cells
                .map(|c| match c.contains([',', '"', '\n']) {
                    true => format!("\"{}\"", c.replace('"', "\"\"")),
                    false => c.to_string(),
                })
                .collect();
            quoted.join(",") + "\n"
        };
        let mut csv = line(&mut header.iter().copied());
        for row in rows {
            csv += &line(&mut row.iter().map(String::as_str));
        }
        std::fs::write(&path, csv).with_context(|| format!("cannot write {}", path.display()))?;
        let _ = writeln!(self.body, "| {} |", header.join(" | "));
        let _ = writeln!(self.body, "|{}", "---|".repeat(header.len()));
        for row in rows {
            let _ = writeln!(self.body, "| {} |", row.join(" | "));
        }
        let _ = writeln!(self.body, "\n([{name}.csv]({}/{name}.csv))\n", self.name);
        Ok(())
    }

    /// Draws `NAME.svg` and `NAME.png` and links the PNG from the report.
    pub fn chart(&mut self, name: &str, chart: &Chart) -> anyhow::Result<()> {
        let written = write_chart(&self.dir.join(name), chart)?;
        if !written.is_empty() {
            let _ = writeln!(self.body, "![{}]({}/{name}.png)\n", chart.title, self.name);
        }
        Ok(())
    }

    /// The experiment's directory, for files the report links.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Judges `claim` by its rule and adds it to the report.
    pub fn claim(&mut self, claim: Claim) {
        self.claims.push(claim.judged());
    }

    fn finish(self, seconds: f64) -> anyhow::Result<PathBuf> {
        let mut report = format!("# Lab: {}\n\n{}\n\n", self.name, self.what);
        let source = match self.measured {
            true => {
                "Every figure is measured: the engine runs on this machine (its CPU named \
                     in the setup), so figures move from run to run; the rules leave room for \
                     that where they say so."
            }
            false => {
                "Every figure comes from the simulator in virtual time over modeled \
                      devices, or from what an engine replaying a trace on one thread did \
                      (counts, timed by a device model, never by this machine's clock); the \
                      engine's timed runs are in docs/RESULTS.md."
            }
        };
        let _ = writeln!(
            report,
            "Scale: {} (`tiercache lab run {}{}`), {seconds:.0} s on this machine. {source}\n",
            self.scale.name(),
            self.name,
            match self.scale {
                Scale::Quick => " --quick",
                Scale::Smoke => " --smoke",
                Scale::Full => "",
            }
        );
        anyhow::ensure!(
            !self.headline || !self.fidelity.is_empty(),
            "lab {}: a paper's headline results need their fidelity tables",
            self.name
        );
        if !self.fidelity.is_empty() {
            report += FIDELITY_PREAMBLE;
            for table in &self.fidelity {
                report += &table.markdown();
                report += "\n";
            }
            let json = self.dir.join("fidelity.json");
            std::fs::write(&json, serde_json::to_string_pretty(&self.fidelity)? + "\n")
                .with_context(|| format!("cannot write {}", json.display()))?;
        }
        report += CLAIMS_PREAMBLE;
        let _ = writeln!(
            report,
            "Every claim and case as JSON: [{0}/claims.json]({0}/claims.json).\n",
            self.name
        );
        report += "| # | the paper says | rule (fixed before the run) | verdict | why (from the cases) |\n|---|---|---|---|---|\n";
        for (i, c) in self.claims.iter().enumerate() {
            let context =
                if c.context.is_empty() { String::new() } else { format!(" *{}*", c.context) };
            let counted = match &c.not_counted {
                Some(why) => format!(" (not counted: {why})"),
                None => String::new(),
            };
            let _ = writeln!(
                report,
                "| {} | **{}:** {} | {} | **{}**{counted} | {}.{context} |",
                i + 1,
                c.source,
                c.says,
                c.rule,
                c.verdict.as_str(),
                c.explanation,
            );
        }
        if !self.headlines.is_empty() {
            report += HEADLINES_PREAMBLE;
            report += &self.headlines;
        }
        let _ = writeln!(report, "\n## Setup\n\n{}", self.setup);
        report += &self.body;
        report += "\n## The cases of each claim\n";
        for (i, c) in self.claims.iter().enumerate().filter(|(_, c)| !c.cases.is_empty()) {
            let _ = writeln!(report, "\n### {}. {}\n", i + 1, c.source);
            report +=
                "| case | paper | ours | the rule needs | meets it |\n|---|---|---|---|---|\n";
            for case in &c.cases {
                let paper = if case.paper.is_empty() { "-" } else { &case.paper };
                let meets = if case.holds { "yes" } else { "**no**" };
                let _ = writeln!(
                    report,
                    "| {} | {paper} | {} | {} | {meets} |",
                    case.label, case.ours, case.needs
                );
            }
        }
        let json = self.dir.join("claims.json");
        std::fs::write(&json, serde_json::to_string_pretty(&self.claims)? + "\n")
            .with_context(|| format!("cannot write {}", json.display()))?;
        let path = self.dir.with_extension("md");
        std::fs::write(&path, report)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }
}

const FIDELITY_PREAMBLE: &str = "## Fidelity: the paper's setup beside ours\n\n\
Every parameter the paper states for a headline result, quoted with the paper's file (under \
`shared/papers/`) and line, beside the value the lab runs and the scale factor applied; a \
difference without a scale factor carries its reason, and `lab run` fails on one that has \
neither. Parameters the paper leaves out are listed as assumptions, each swept or justified. \
As JSON: `fidelity.json` beside `claims.json`.\n\n";

const CLAIMS_PREAMBLE: &str = "## Claims\n\n\
Each claim's rule is written in the experiment's code before the run: a claim of the paper's \
number **holds** when every case is within the stated tolerance of it; a claim of the paper's \
shape (an ordering, a sign, a range) **holds in shape** when the relation is true in every case. \
One failing case and the claim **does not hold**: no verdict rests on a majority. The \
explanations are computed from the cases, listed after the tables.\n\n";

const HEADLINES_PREAMBLE: &str = "\n## The headline results on the paper's setup\n\n\
Each headline result is run on the paper's own setup as far as the paper gives it, and swept over \
the assumption where our setup and the paper's differ most; the paragraph is computed from the \
sweep, whose chart and table follow in the report.\n\n";

/// A seeded synthetic stream of 4 KiB blocks.
pub fn blocks(
    distribution: KeyDistribution,
    objects: u64,
    requests: u64,
    reads: f64,
    seed: u64,
) -> Vec<Request> {
    sized_blocks(BLOCK, distribution, objects, requests, reads, seed)
}

/// A seeded synthetic stream of blocks of `bytes`.
pub fn sized_blocks(
    bytes: u64,
    distribution: KeyDistribution,
    objects: u64,
    requests: u64,
    reads: f64,
    seed: u64,
) -> Vec<Request> {
    let config = SyntheticConfig {
        distribution,
        objects,
        requests,
        read_ratio: reads,
        size: SizeDistribution::Fixed { bytes: bytes as u32 },
        seed,
    };
    Synthetic::new(config).expect("a valid generator").collect()
}

pub const BLOCK: u64 = 4096;

/// Where tiers held in memory put their files: tmpfs when there is one.
pub fn memory_dir() -> PathBuf {
    let shm = Path::new("/dev/shm");
    match shm.is_dir() {
        true => shm.to_path_buf(),
        false => std::env::temp_dir(),
    }
}

/// The CPU's model name, as `/proc/cpuinfo` gives it.
pub fn cpu_model() -> String {
    let info = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("model name").and_then(|r| r.split_once(':')))
        .map_or_else(|| "an unknown CPU".to_string(), |(_, name)| name.trim().to_string())
}

pub fn preset(name: &str) -> DeviceProfile {
    DeviceProfile::preset(name).expect("a preset")
}

/// Runs `warm` through the policy untimed, so timed runs start with a warm cache.
pub fn warmed(mut policy: AnyPolicy, warm: &[Request]) -> AnyPolicy {
    let mut decision = tiercache_core::Decision::new();
    for req in warm {
        decision.clear();
        tiercache_policy::Policy::decide(&mut policy, req, &mut decision);
    }
    policy
}

/// One timed run, closed loop.
pub fn timed(
    policy: &mut AnyPolicy,
    requests: &[Request],
    clients: usize,
    tiers: Vec<DeviceProfile>,
    backing: DeviceProfile,
    interval_us: u64,
) -> TimedReport {
    let options = TimedOptions { interval_us, ..TimedOptions::closed(clients, tiers, backing) };
    simulate_timed(policy, requests, &options)
}

/// A line per series over shared x values.
pub fn series(name: impl Into<String>, points: Vec<(f64, f64)>) -> Series {
    Series { name: name.into(), points }
}

pub fn f0(x: f64) -> String {
    format!("{x:.0}")
}

pub fn f1(x: f64) -> String {
    format!("{x:.1}")
}

pub fn f3(x: f64) -> String {
    format!("{x:.3}")
}

pub fn pct(x: f64) -> String {
    format!("{:.1}%", x * 100.0)
}

/// A change as a signed percentage: 0.12 is "+12.0%".
pub fn signed(x: f64) -> String {
    format!("{:+.1}%", x * 100.0)
}

/// The lowest and the highest of `values`.
pub fn range<'a>(values: impl IntoIterator<Item = &'a f64>) -> (f64, f64) {
    values.into_iter().fold((f64::MAX, f64::MIN), |(low, high), &x| (low.min(x), high.max(x)))
}

/// A ratio: 1.5 is "1.50x".
pub fn ratio(x: f64) -> String {
    format!("{x:.2}x")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every headline result's fidelity table, as the experiments build them.
    fn tables() -> Vec<Fidelity> {
        let mut all = writes_hurt::fidelity(1000);
        all.extend([orthus::figure_7_fidelity(1000), kassa::fidelity(1000), hibachi::fidelity()]);
        all
    }

    #[test]
    fn the_experiments_tables_pass_and_fail_on_any_difference_planted_in_them() {
        for table in tables() {
            table.check().unwrap_or_else(|e| panic!("{e}"));
            // Plant a difference in each row that says it is the paper's value: the check
            // must fail, naming the result and the parameter.
            for (i, param) in table.params.iter().enumerate() {
                if !matches!(param.how, How::Same) {
                    continue;
                }
                let mut planted = table.clone();
                planted.params[i].lab = match &param.lab {
                    Value::Bytes(b) => Value::Bytes(b * 2.0),
                    Value::Number(x, unit) => Value::Number(x + 1.0, unit),
                    Value::ByteRange(..) | Value::Words(_) => Value::words("something else"),
                };
                let err = planted.check().expect_err(&param.name).to_string();
                assert!(err.contains(&table.result), "{err}");
                assert!(err.contains(&format!("'{}'", param.name)), "{err}");
            }
        }
    }

    #[test]
    fn a_lab_refuses_a_table_with_an_unexplained_difference_and_a_headline_without_one() {
        let dir = std::env::temp_dir().join(format!("tiercache-fidelity-{}", std::process::id()));
        let experiment = &PAPERS[1];
        let mut lab = Lab::new(&dir, experiment, Scale::Smoke).unwrap();
        let mut table = orthus::figure_7_fidelity(1000);
        let page = table.params.iter_mut().find(|p| p.name.starts_with("page")).unwrap();
        page.lab = Value::kib(4.0);
        let err = lab.fidelity(table).unwrap_err().to_string();
        assert!(err.contains("'page (request) size'") && err.contains("4 KiB"), "{err}");
        // Nothing was added, so the report of a headline experiment cannot be written.
        let err = lab.finish(0.0).unwrap_err().to_string();
        assert!(err.contains("fidelity tables"), "{err}");
        let _ = std::fs::remove_dir_all(&dir);
    }
}
