//! A paper's claim, the rule it is judged by and the cases it is judged on.
//!
//! Every claim states its rule in the code, before the run produces a number: a *value* claim
//! holds when every case is within the stated tolerance of the paper's number; a *shape* claim
//! holds in shape when the paper's relation (an ordering, a sign, a range) holds in every case.
//! One failing case fails the claim: there is no majority. A claim the lab cannot test says why.
//! The explanation beside a verdict is computed from the cases, so it cannot contradict the
//! table; a claim's context may describe the model and the setup, never the outcome.

use serde::Serialize;

/// What kind of statement a claim checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The paper's number, within a tolerance.
    Value,
    /// The paper's relation: an ordering, a sign, a range.
    Shape,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// A value claim, every case within tolerance.
    Holds,
    /// A shape claim, the relation true in every case.
    HoldsInShape,
    /// At least one case fails the rule.
    DoesNotHold,
    /// The lab cannot test it here (the claim says why).
    NotTested,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Holds => "holds",
            Verdict::HoldsInShape => "holds in shape",
            Verdict::DoesNotHold => "does not hold",
            Verdict::NotTested => "not tested",
        }
    }
}

/// One case of a claim: what the paper has for it (if anything), ours, what the rule needs.
#[derive(Clone, Debug, Serialize)]
pub struct Case {
    pub label: String,
    pub paper: String,
    pub ours: String,
    pub needs: String,
    pub holds: bool,
}

impl Case {
    /// A case judged by a relation the caller computed: `needs` states it in words.
    pub fn new(
        label: impl Into<String>,
        ours: impl Into<String>,
        needs: impl Into<String>,
        holds: bool,
    ) -> Case {
        Case {
            label: label.into(),
            paper: String::new(),
            ours: ours.into(),
            needs: needs.into(),
            holds,
        }
    }

    /// The paper's number for this case.
    pub fn paper(mut self, paper: impl Into<String>) -> Case {
        self.paper = paper.into();
        self
    }

    /// `ours` at least `bound`.
    pub fn at_least(
        label: impl Into<String>,
        ours: f64,
        bound: f64,
        show: fn(f64) -> String,
    ) -> Case {
        Case::new(label, show(ours), format!(">= {}", show(bound)), ours >= bound)
    }

    /// `ours` at most `bound`.
    pub fn at_most(
        label: impl Into<String>,
        ours: f64,
        bound: f64,
        show: fn(f64) -> String,
    ) -> Case {
        Case::new(label, show(ours), format!("<= {}", show(bound)), ours <= bound)
    }

    /// `ours` in `[low, high]`.
    pub fn between(
        label: impl Into<String>,
        ours: f64,
        (low, high): (f64, f64),
        show: fn(f64) -> String,
    ) -> Case {
        let holds = (low..=high).contains(&ours);
        Case::new(label, show(ours), format!("in [{}, {}]", show(low), show(high)), holds)
    }

    /// `ours` within `tolerance` (same unit) of the paper's `paper`.
    pub fn near(
        label: impl Into<String>,
        ours: f64,
        paper: f64,
        tolerance: f64,
        show: fn(f64) -> String,
    ) -> Case {
        let holds = (ours - paper).abs() <= tolerance;
        Case::new(
            label,
            show(ours),
            format!("within {} of {}", show(tolerance), show(paper)),
            holds,
        )
        .paper(show(paper))
    }
}

/// Whose claim it is: one of the papers', or the lab's own (a target of this project, or a
/// check of our own reading of a result). Tallies count the papers' claims.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Origin {
    Paper,
    Ours,
}

/// A claim of a paper, its rule, and the cases it was judged on.
#[derive(Clone, Debug, Serialize)]
pub struct Claim {
    /// Where the paper says it: section, figure or table.
    pub source: String,
    pub origin: Origin,
    /// What the paper says, with its number.
    pub says: String,
    pub kind: Kind,
    /// The rule, stated before the run.
    pub rule: String,
    pub cases: Vec<Case>,
    /// The model and setup behind the cases (never the outcome).
    pub context: String,
    /// Why the lab cannot test the claim, for one it cannot.
    pub untested: Option<String>,
    pub verdict: Verdict,
    pub explanation: String,
    /// Why the claim is judged but not counted in a tally: it follows from another claim, or
    /// its figure is arithmetic on the inputs rather than a result of a run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub not_counted: Option<String>,
}

impl Claim {
    /// A claim of the paper's number; `rule` states the tolerance.
    pub fn value(source: &str, says: &str, rule: &str) -> Claim {
        Claim::with_kind(Kind::Value, source, says, rule)
    }

    /// A claim of the paper's relation; `rule` states the relation every case must meet.
    pub fn shape(source: &str, says: &str, rule: &str) -> Claim {
        Claim::with_kind(Kind::Shape, source, says, rule)
    }

    /// A claim the lab cannot test, and why.
    pub fn untested(source: &str, says: &str, why: &str) -> Claim {
        let mut claim = Claim::with_kind(Kind::Shape, source, says, "-");
        claim.untested = Some(why.to_string());
        claim
    }

    fn with_kind(kind: Kind, source: &str, says: &str, rule: &str) -> Claim {
        Claim {
            source: source.to_string(),
            origin: Origin::Paper,
            says: says.to_string(),
            kind,
            rule: rule.to_string(),
            cases: Vec::new(),
            context: String::new(),
            untested: None,
            verdict: Verdict::NotTested,
            explanation: String::new(),
            not_counted: None,
        }
    }

    /// Marks the claim as following from another (`how`: which, and why): judged, shown, and
    /// not counted a second time.
    pub fn follows(mut self, how: &str) -> Claim {
        self.not_counted = Some(format!("follows from {how}"));
        self
    }

    /// Marks the claim's figure as arithmetic on the inputs (`how`): judged, shown, and never
    /// counted as reproduced.
    pub fn arithmetic(mut self, how: &str) -> Claim {
        self.not_counted = Some(format!("arithmetic: {how}"));
        self
    }

    /// Marks the claim as the lab's own, not a paper's.
    pub fn ours(mut self) -> Claim {
        self.origin = Origin::Ours;
        self
    }

    pub fn case(mut self, case: Case) -> Claim {
        self.cases.push(case);
        self
    }

    pub fn cases(mut self, cases: impl IntoIterator<Item = Case>) -> Claim {
        self.cases.extend(cases);
        self
    }

    /// The model and setup behind the cases, for the reader; it must not state the outcome.
    pub fn context(mut self, text: impl Into<String>) -> Claim {
        self.context = text.into();
        self
    }

    /// Judges the claim by its rule: every case must hold.
    pub fn judged(mut self) -> Claim {
        let failed: Vec<&Case> = self.cases.iter().filter(|c| !c.holds).collect();
        let n = self.cases.len();
        (self.verdict, self.explanation) = match (&self.untested, n) {
            (Some(why), _) => (Verdict::NotTested, why.clone()),
            (None, 0) => (Verdict::NotTested, "no case ran at this scale".to_string()),
            (None, _) if failed.is_empty() => {
                let verdict =
                    if self.kind == Kind::Value { Verdict::Holds } else { Verdict::HoldsInShape };
                let all = if n == 1 {
                    "the one case meets".to_string()
                } else {
                    format!("all {n} cases meet")
                };
                (verdict, format!("{all} the rule"))
            }
            (None, _) => {
                let listed: Vec<String> = failed
                    .iter()
                    .take(3)
                    .map(|c| format!("{}: {} (needs {})", c.label, c.ours, c.needs))
                    .collect();
                let more = match failed.len().saturating_sub(3) {
                    0 => String::new(),
                    k => format!("; and {k} more"),
                };
                let text = format!(
                    "{} of {n} cases fail the rule: {}{more}",
                    failed.len(),
                    listed.join("; ")
                );
                (Verdict::DoesNotHold, text)
            }
        };
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(x: f64) -> String {
        format!("{x:.1}")
    }

    #[test]
    fn one_failing_case_fails_the_claim() {
        let claim = Claim::shape("s1", "x rises", "x >= 1 in every case")
            .cases((0..4).map(|i| Case::at_least(format!("case {i}"), i as f64, 1.0, show)))
            .judged();
        assert_eq!(claim.verdict, Verdict::DoesNotHold);
        assert!(claim.explanation.starts_with("1 of 4 cases fail"), "{}", claim.explanation);
        assert!(claim.explanation.contains("case 0: 0.0 (needs >= 1.0)"), "{}", claim.explanation);
    }

    #[test]
    fn a_value_claim_holds_and_a_shape_claim_holds_in_shape_only_in_every_case() {
        let value = Claim::value("s", "x is 10", "within 1 of 10")
            .case(Case::near("a", 10.5, 10.0, 1.0, show))
            .case(Case::near("b", 9.2, 10.0, 1.0, show))
            .judged();
        assert_eq!(value.verdict, Verdict::Holds);
        assert_eq!(value.cases[0].paper, "10.0");
        let shape = Claim::shape("s", "x in range", "in [1, 2]")
            .case(Case::between("a", 1.5, (1.0, 2.0), show))
            .judged();
        assert_eq!(shape.verdict, Verdict::HoldsInShape);
        let outside = Claim::shape("s", "x in range", "in [1, 2]")
            .case(Case::between("a", 2.01, (1.0, 2.0), show))
            .judged();
        assert_eq!(outside.verdict, Verdict::DoesNotHold);
    }

    #[test]
    fn a_claim_without_cases_is_not_tested_and_says_why() {
        let claim = Claim::untested("Figure 11", "x", "needs a trace we do not have").judged();
        assert_eq!(claim.verdict, Verdict::NotTested);
        assert_eq!(claim.explanation, "needs a trace we do not have");
        let empty = Claim::shape("s", "x", "r").judged();
        assert_eq!(empty.verdict, Verdict::NotTested);
    }
}
