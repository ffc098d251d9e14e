//! A headline result's fidelity table: every parameter the paper states for the figure, quoted
//! with the paper file's name and line, beside the lab's value and the scale factor applied; and
//! the parameters the paper leaves out, each swept or justified.
//!
//! The table is checked before the report is written: a lab value that differs from the paper's
//! stated value must either be the paper's value times a stated scale factor or carry its reason,
//! and a parameter the paper does not state must name the sweep that varies it or say why one
//! value is enough. A table that breaks this fails `lab run` ([`Fidelity::check`]), so a setup
//! cannot drift from the paper's without the report saying so.

use serde::Serialize;

/// A value of a parameter, the paper's or the lab's.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Value {
    /// A size in bytes (the papers' KB, MB and GB are read as KiB, MiB and GiB).
    Bytes(f64),
    /// A number in a unit ("ns", "GB/s", "clients", "%").
    Number(f64, &'static str),
    /// A range of sizes in bytes the paper gives ("10-15 GB"): a value inside it (after any
    /// scale factor) is the paper's.
    ByteRange(f64, f64),
    /// Words, compared as they are written.
    Words(String),
}

impl Value {
    pub fn kib(n: f64) -> Value {
        Value::Bytes(n * 1024.0)
    }

    pub fn mib(n: f64) -> Value {
        Value::Bytes(n * 1024.0 * 1024.0)
    }

    pub fn gib(n: f64) -> Value {
        Value::Bytes(n * 1024.0 * 1024.0 * 1024.0)
    }

    pub fn words(text: impl Into<String>) -> Value {
        Value::Words(text.into())
    }

    fn number(&self) -> Option<(f64, &'static str)> {
        match self {
            Value::Bytes(b) => Some((*b, "bytes")),
            Value::Number(x, unit) => Some((*x, unit)),
            Value::ByteRange(..) | Value::Words(_) => None,
        }
    }

    /// Whether `self` is `other` times `factor` (words: the same words, factor 1).
    fn is(&self, other: &Value, factor: f64) -> bool {
        if let (Value::Bytes(b), Value::ByteRange(low, high)) = (self, other) {
            let slack = 1e-9 * high * factor;
            return *b >= low * factor - slack && *b <= high * factor + slack;
        }
        match (self.number(), other.number()) {
            (Some((a, ua)), Some((b, ub))) => {
                ua == ub && (a - b * factor).abs() <= 1e-9 * (b * factor).abs().max(1e-12)
            }
            _ => match (self, other) {
                (Value::Words(a), Value::Words(b)) => a == b && factor == 1.0,
                _ => false,
            },
        }
    }

    pub fn show(&self) -> String {
        match self {
            Value::Bytes(b) => bytes(*b),
            Value::Number(x, unit) => {
                let x = if x.fract() == 0.0 { format!("{x:.0}") } else { format!("{x}") };
                match *unit {
                    "%" => format!("{x}%"),
                    "" => x,
                    unit => format!("{x} {unit}"),
                }
            }
            Value::ByteRange(low, high) => format!("{} to {}", bytes(*low), bytes(*high)),
            Value::Words(w) => w.clone(),
        }
    }
}

/// A scale factor as a reader writes it: 1/1024 rather than 0.0009765625.
fn factor_text(factor: f64) -> String {
    let inverse = 1.0 / factor;
    match factor < 1.0 && (inverse - inverse.round()).abs() < 1e-9 {
        true => format!("1/{}", inverse.round()),
        false => format!("{factor}"),
    }
}

fn bytes(b: f64) -> String {
    for (unit, size) in [("TiB", 1u64 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)]
    {
        let n = b / size as f64;
        if n >= 1.0 {
            let n = if n.fract() == 0.0 { format!("{n:.0}") } else { format!("{n:.2}") };
            return format!("{n} {unit}");
        }
    }
    format!("{b:.0} B")
}

/// Where a paper states a parameter: its words, the file under `shared/papers/` and the line.
#[derive(Clone, Debug, Serialize)]
pub struct Quote {
    pub text: String,
    pub file: &'static str,
    pub line: u32,
    pub value: Value,
}

/// How the lab's value relates to the paper's.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum How {
    /// The paper's value.
    Same,
    /// The paper's value times `factor`, for the reason given.
    Scaled { factor: f64, why: String },
    /// Not the paper's value, for the reason given.
    Differs(String),
    /// The paper does not state it: the sweep named here varies it.
    Swept(String),
    /// The paper does not state it: why the one value used is enough.
    Assumed(String),
}

/// One row of a fidelity table.
#[derive(Clone, Debug, Serialize)]
pub struct Param {
    pub name: String,
    /// `None`: the paper does not state it.
    pub paper: Option<Quote>,
    pub lab: Value,
    pub how: How,
}

impl Param {
    /// A parameter the paper states, in `text`, at `file` line `line`.
    pub fn stated(
        name: &str,
        (file, line, text): (&'static str, u32, &str),
        paper: Value,
        lab: Value,
        how: How,
    ) -> Param {
        let quote = Quote { text: text.to_string(), file, line, value: paper };
        Param { name: name.to_string(), paper: Some(quote), lab, how }
    }

    /// A parameter the paper leaves out: the lab's assumption and how it is covered.
    pub fn assumed(name: &str, lab: Value, how: How) -> Param {
        Param { name: name.to_string(), paper: None, lab, how }
    }

    /// Why the row is not acceptable, if it is not.
    fn fault(&self) -> Option<String> {
        let reason = |why: &str| !why.trim().is_empty();
        match (&self.paper, &self.how) {
            (Some(q), How::Same) if !self.lab.is(&q.value, 1.0) => Some(format!(
                "the paper has {} ({} line {}) and the lab {}, with neither a scale factor nor a \
                 reason",
                q.value.show(),
                q.file,
                q.line,
                self.lab.show()
            )),
            (Some(q), How::Scaled { factor, why }) if !self.lab.is(&q.value, *factor) => {
                Some(format!(
                    "scaled by {factor} the paper's {} is not the lab's {} (and the reason \
                     given, '{why}', is for the scale, not for a difference)",
                    q.value.show(),
                    self.lab.show()
                ))
            }
            (Some(_), How::Scaled { why, .. }) if !reason(why) => {
                Some("a scale factor without its reason".to_string())
            }
            (Some(_), How::Differs(why)) if !reason(why) => {
                Some("differs from the paper without a reason".to_string())
            }
            (Some(q), How::Swept(_) | How::Assumed(_)) => Some(format!(
                "the paper states it ({} line {}): compare the lab's value with the paper's",
                q.file, q.line
            )),
            (None, How::Swept(what) | How::Assumed(what)) if !reason(what) => {
                Some("an assumption neither swept nor justified".to_string())
            }
            (None, How::Same | How::Scaled { .. } | How::Differs(_)) => {
                Some("the paper does not state it: say how the assumption is covered".to_string())
            }
            _ => None,
        }
    }
}

/// The parameters behind one headline result.
#[derive(Clone, Debug, Serialize)]
pub struct Fidelity {
    /// The result, as its claim names it ("Orthus Figure 7").
    pub result: String,
    pub params: Vec<Param>,
}

impl Fidelity {
    pub fn new(result: &str, params: Vec<Param>) -> Fidelity {
        Fidelity { result: result.to_string(), params }
    }

    /// Fails on the first row that differs from the paper unexplained, or an assumption left
    /// uncovered, naming the result and the parameter.
    pub fn check(&self) -> anyhow::Result<()> {
        for p in &self.params {
            if let Some(fault) = p.fault() {
                anyhow::bail!("fidelity table of {}: parameter '{}': {fault}", self.result, p.name);
            }
        }
        anyhow::ensure!(
            self.params.iter().any(|p| p.paper.is_some()),
            "fidelity table of {}: no parameter quoted from the paper",
            self.result
        );
        Ok(())
    }

    /// The table in Markdown: stated parameters first, then the assumptions.
    pub fn markdown(&self) -> String {
        let mut out = format!("**{}**\n\n", self.result);
        out += "| parameter | the paper says (file, line) | paper | lab | scale | why it differs, or how an assumption is covered |\n|---|---|---|---|---|---|\n";
        let cell = |s: &str| s.replace('|', "\\|");
        for p in self.params.iter().filter(|p| p.paper.is_some()) {
            let q = p.paper.as_ref().expect("stated");
            let (scale, why) = match &p.how {
                How::Same => ("1".to_string(), "-".to_string()),
                How::Scaled { factor, why } => (factor_text(*factor), why.clone()),
                How::Differs(why) => ("-".to_string(), format!("**differs:** {why}")),
                How::Swept(_) | How::Assumed(_) => unreachable!("checked"),
            };
            out += &format!(
                "| {} | \"{}\" ({} line {}) | {} | {} | {scale} | {} |\n",
                p.name,
                cell(&q.text),
                q.file,
                q.line,
                cell(&q.value.show()),
                cell(&p.lab.show()),
                cell(&why)
            );
        }
        for p in self.params.iter().filter(|p| p.paper.is_none()) {
            let covered = match &p.how {
                How::Swept(what) => format!("assumed; swept: {what}"),
                How::Assumed(why) => format!("assumed: {why}"),
                _ => unreachable!("checked"),
            };
            out += &format!(
                "| {} | not stated | - | {} | - | {} |\n",
                p.name,
                cell(&p.lab.show()),
                cell(&covered)
            );
        }
        out
    }
}

/// A paper's file under `shared/papers/`, as the tables cite it.
pub const WRITES_HURT: &str = "000_daef7679ed21120d.txt";
pub const ORTHUS: &str = "001_d87d383f07d68f67.txt";
pub const KASSA: &str = "003_9e80e0ad4982cdff.txt";
pub const HIBACHI: &str = "004_4060e1fdeb885256.txt";

#[cfg(test)]
mod tests {
    use super::*;

    const AT: (&str, u32, &str) = (ORTHUS, 312, "The accesses are uniformly random and 64KB");

    fn table(lab: Value, how: How) -> Fidelity {
        Fidelity::new(
            "Orthus Figure 7",
            vec![Param::stated("block size", AT, Value::kib(64.0), lab, how)],
        )
    }

    #[test]
    fn the_papers_value_or_a_stated_scale_or_a_reason_passes() {
        table(Value::kib(64.0), How::Same).check().unwrap();
        let scaled = How::Scaled { factor: 1.0 / 16.0, why: "a smaller page".into() };
        table(Value::kib(4.0), scaled).check().unwrap();
        table(Value::kib(4.0), How::Differs("the 4 KiB run is the one kept".into()))
            .check()
            .unwrap();
        let md = table(Value::kib(4.0), How::Differs("kept".into())).markdown();
        assert!(md.contains("| 64 KiB | 4 KiB | - | **differs:** kept |"), "{md}");
        assert!(md.contains(&format!("({ORTHUS} line 312)")), "{md}");
    }

    #[test]
    fn a_planted_difference_without_scale_or_reason_fails_naming_it() {
        let err = table(Value::kib(4.0), How::Same).check().unwrap_err().to_string();
        assert!(err.contains("Orthus Figure 7") && err.contains("'block size'"), "{err}");
        assert!(err.contains("64 KiB") && err.contains("4 KiB"), "{err}");
        let wrong_scale = How::Scaled { factor: 0.5, why: "half".into() };
        assert!(table(Value::kib(4.0), wrong_scale).check().is_err());
        assert!(table(Value::kib(4.0), How::Differs(" ".into())).check().is_err());
        let words = Fidelity::new(
            "x",
            vec![Param::stated(
                "access pattern",
                AT,
                Value::words("uniformly random"),
                Value::words("Zipf 0.9"),
                How::Same,
            )],
        );
        assert!(words.check().is_err());
    }

    #[test]
    fn an_assumption_must_be_swept_or_justified_and_a_stated_one_compared() {
        let assumed = |how| {
            Fidelity::new(
                "x",
                vec![
                    Param::stated("block size", AT, Value::kib(64.0), Value::kib(64.0), How::Same),
                    Param::assumed("interference", Value::words("on"), how),
                ],
            )
        };
        assumed(How::Swept("on and off".into())).check().unwrap();
        assert!(assumed(How::Assumed(String::new())).check().is_err());
        assert!(assumed(How::Same).check().is_err());
        let stated_as_assumed = table(Value::kib(64.0), How::Assumed("why".into()));
        assert!(stated_as_assumed.check().is_err());
        let nothing_quoted = Fidelity::new(
            "x",
            vec![Param::assumed("interference", Value::words("on"), How::Assumed("y".into()))],
        );
        assert!(nothing_quoted.check().is_err());
    }
}
