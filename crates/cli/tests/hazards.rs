//! The PyTorch-exported hazard corpus (`tests/hazards/<case>/{model.onnx, expect.toml}`, format in
//! tests/hazards/README.md), end to end: `check MODEL --target all --format json` on every case,
//! each expectation checked against what the binary reports.
//!
//! A case passes when every expected finding is reported with its code (or an equivalent code), at
//! its node (with its op) or value, for exactly the expected targets (`[]` = target null), no more
//! severe than `max_severity`; and, for a clean control, when no warning or error is reported with
//! target null or for one of its `clean_targets`. A case with `uncovered` (a hazard no rule
//! reports) does not pass. Cases the tool cannot meet yet are listed in tests/hazards/xfail.txt
//! with the reason; a listed case that passes fails the test, so the list only shrinks.

mod common;

use common::{run, stderr, stdout, workspace};
use serde::Deserialize;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Deserialize)]
struct Expect {
    #[serde(default)]
    clean: bool,
    #[serde(default)]
    clean_targets: Vec<String>,
    uncovered: Option<String>,
    #[serde(default)]
    finding: Vec<Expected>,
}

#[derive(Deserialize)]
struct Expected {
    code: String,
    op_type: Option<String>,
    node: Option<String>,
    value: Option<String>,
    targets: Vec<String>,
    #[serde(default)]
    equivalent_codes: Vec<String>,
    max_severity: Option<String>,
}

fn rank(severity: &str) -> u8 {
    match severity {
        "error" => 3,
        "warning" => 2,
        "info" => 1,
        _ => 0,
    }
}

impl Expected {
    fn label(&self) -> String {
        let at = match (&self.node, &self.value) {
            (Some(n), _) => format!("{} `{n}`", self.op_type.as_deref().unwrap_or("?")),
            (None, Some(v)) => format!("value `{v}`"),
            (None, None) => "model".into(),
        };
        format!("{} on {at}", self.code)
    }

    /// Is `d` this finding (code and location), whatever its target and severity?
    fn matches(&self, d: &Value) -> bool {
        let code = d["code"].as_str().unwrap_or_default();
        if code != self.code && !self.equivalent_codes.iter().any(|c| c == code) {
            return false;
        }
        let loc = &d["location"];
        let kind = loc["kind"].as_str().unwrap_or_default();
        let at_node = self.node.as_deref().is_some_and(|n| {
            kind == "node"
                && loc["node"].as_str() == Some(n)
                && self
                    .op_type
                    .as_deref()
                    .is_none_or(|op| loc["op"].as_str() == Some(op))
        });
        let at_value = self
            .value
            .as_deref()
            .is_some_and(|v| kind == "value" && loc["value"].as_str() == Some(v));
        match (&self.node, &self.value) {
            (None, None) => kind != "node" && kind != "value",
            _ => at_node || at_value,
        }
    }

    /// Why `reported` does not meet this expectation, or `None` when it does.
    fn check(&self, reported: &[Value]) -> Option<String> {
        let hits: Vec<&Value> = reported.iter().filter(|d| self.matches(d)).collect();
        let got: BTreeSet<String> = hits
            .iter()
            .map(|d| d["target"].as_str().unwrap_or("null").to_string())
            .collect();
        let want: BTreeSet<String> = if self.targets.is_empty() {
            ["null".to_string()].into()
        } else {
            self.targets.iter().cloned().collect()
        };
        if got != want {
            let missing: Vec<_> = want.difference(&got).cloned().collect();
            let extra: Vec<_> = got.difference(&want).cloned().collect();
            return Some(format!(
                "{}: targets missing {missing:?}, unexpected {extra:?}",
                self.label()
            ));
        }
        if let Some(max) = &self.max_severity {
            if let Some(d) = hits
                .iter()
                .find(|d| rank(d["severity"].as_str().unwrap_or_default()) > rank(max))
            {
                return Some(format!(
                    "{}: reported as {} for {}, expected at most {max}",
                    self.label(),
                    d["severity"].as_str().unwrap_or_default(),
                    d["target"].as_str().unwrap_or("null")
                ));
            }
        }
        None
    }
}

struct Outcome {
    hits: usize,
    misses: Vec<String>,
    false_positives: Vec<String>,
    uncovered: bool,
}

impl Outcome {
    fn passes(&self) -> bool {
        self.misses.is_empty() && self.false_positives.is_empty() && !self.uncovered
    }
}

fn check_case(case: &str) -> Outcome {
    let dir = workspace().join("tests/hazards").join(case);
    let text = std::fs::read_to_string(dir.join("expect.toml")).unwrap();
    let expect: Expect =
        toml::from_str(&text).unwrap_or_else(|e| panic!("{case}/expect.toml: {e}"));
    let model = format!("tests/hazards/{case}/model.onnx");
    let o = run(&["check", &model, "--target", "all", "--format", "json"]);
    assert!(
        matches!(o.status.code(), Some(0 | 1)),
        "{case}: exit {:?}: {}",
        o.status.code(),
        stderr(&o)
    );
    let doc: Value = serde_json::from_str(&stdout(&o))
        .unwrap_or_else(|e| panic!("{case}: not JSON ({e}): {}", stdout(&o)));
    let reported = doc["diagnostics"].as_array().cloned().unwrap_or_default();
    let mut out = Outcome {
        hits: 0,
        misses: Vec::new(),
        false_positives: Vec::new(),
        uncovered: expect.uncovered.is_some(),
    };
    for f in &expect.finding {
        match f.check(&reported) {
            None => out.hits += 1,
            Some(why) => out.misses.push(why),
        }
    }
    if expect.clean {
        for d in &reported {
            let severity = d["severity"].as_str().unwrap_or_default();
            let target = d["target"].as_str();
            let concerns = target.is_none_or(|t| expect.clean_targets.iter().any(|c| c == t));
            if rank(severity) >= rank("warning") && concerns {
                out.false_positives.push(format!(
                    "{} {severity}: {}",
                    d["code"].as_str().unwrap_or_default(),
                    d["message"].as_str().unwrap_or_default()
                ));
            }
        }
    }
    out
}

/// tests/hazards/xfail.txt: `case  reason` per line, `#` comments.
fn xfail() -> BTreeMap<String, String> {
    let text =
        std::fs::read_to_string(workspace().join("tests/hazards/xfail.txt")).unwrap_or_default();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (case, reason) = l.split_once(char::is_whitespace).unwrap_or((l, ""));
            assert!(!reason.trim().is_empty(), "xfail.txt: {case} has no reason");
            (case.to_string(), reason.trim().to_string())
        })
        .collect()
}

#[test]
fn hazard_corpus_meets_its_expectations() {
    let root = workspace().join("tests/hazards");
    let mut cases: Vec<String> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("expect.toml").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    cases.sort();
    assert!(cases.len() >= 42, "hazard corpus incomplete: {cases:?}");
    let xfail = xfail();
    for case in xfail.keys() {
        assert!(cases.contains(case), "xfail.txt names unknown case {case}");
    }
    let (mut hits, mut misses, mut fps) = (0, 0, 0);
    let mut problems = Vec::new();
    for case in &cases {
        let o = check_case(case);
        hits += o.hits;
        misses += o.misses.len();
        fps += o.false_positives.len();
        let mut why: Vec<String> = o.misses.clone();
        why.extend(
            o.false_positives
                .iter()
                .take(5)
                .map(|f| format!("false positive: {f}")),
        );
        if o.false_positives.len() > 5 {
            why.push(format!(
                "... {} more false positives",
                o.false_positives.len() - 5
            ));
        }
        if o.uncovered {
            why.push("uncovered by any rule".into());
        }
        match (o.passes(), xfail.contains_key(case)) {
            (true, true) => problems.push(format!(
                "{case} passes now: remove it from tests/hazards/xfail.txt"
            )),
            (false, false) => problems.push(format!("{case} fails:\n    {}", why.join("\n    "))),
            (false, true) => eprintln!("xfail {case}: {}", why.join("; ")),
            (true, false) => {}
        }
    }
    println!(
        "hazard corpus: {} cases, {hits} expected findings hit, {misses} missed, {fps} false positives on clean controls, {} xfail",
        cases.len(),
        xfail.len()
    );
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
