//! SARIF 2.1.0 output (https://docs.oasis-open.org/sarif/sarif/v2.1.0/), one run, one result per
//! diagnostic. Source locations become `physicalLocation`s; nodes and values become
//! `logicalLocation`s inside the model file's artifact.

use crate::{Diagnostic, Location, RuleInfo, Severity};
use serde_json::{json, Value};

pub fn render_sarif(diagnostics: &[Diagnostic], rules: &[RuleInfo], tool_version: &str) -> Value {
    let results: Vec<Value> = diagnostics.iter().map(result).collect();
    let rules: Vec<Value> = rules
        .iter()
        .map(|r| json!({"id": r.code, "name": r.name, "shortDescription": {"text": r.summary}}))
        .collect();
    json!({
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "onnx-doctor",
                "version": tool_version,
                "informationUri": "https://github.com/onnx-doctor/onnx-doctor",
                "rules": rules,
            }},
            "results": results,
        }]
    })
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::Error => "error",
        Severity::Warning => "warning",
        Severity::Info => "note",
    }
}

fn result(d: &Diagnostic) -> Value {
    let artifact = json!({"uri": d.location.file()});
    let location = match &d.location {
        Location::Source { line, column, .. } => json!({
            "physicalLocation": {"artifactLocation": artifact, "region": {"startLine": line, "startColumn": column}}
        }),
        Location::Node { node, op, .. } => json!({
            "physicalLocation": {"artifactLocation": artifact},
            "logicalLocations": [{"name": node, "kind": "function", "decoratedName": format!("{node} ({op})")}]
        }),
        Location::Value { value, .. } => json!({
            "physicalLocation": {"artifactLocation": artifact},
            "logicalLocations": [{"name": value, "kind": "variable"}]
        }),
        Location::File { .. } => json!({"physicalLocation": {"artifactLocation": artifact}}),
    };
    let mut text = d.message.clone();
    if let Some(help) = &d.help {
        text.push_str("\nhelp: ");
        text.push_str(help);
    }
    json!({"ruleId": d.code, "level": level(d.severity), "message": {"text": text}, "locations": [location]})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixtures;

    #[test]
    fn snapshot() {
        let rules = [RuleInfo {
            code: "ODL001".into(),
            name: "mask-assignment".into(),
            summary: "x[mask] = v".into(),
        }];
        insta::assert_json_snapshot!(render_sarif(&fixtures::sample(), &rules, "0.1.0"));
    }

    #[test]
    fn every_result_has_the_required_sarif_fields() {
        let v = render_sarif(&fixtures::sample(), &[], "0.1.0");
        for r in v["runs"][0]["results"].as_array().unwrap() {
            assert!(r["ruleId"].is_string() && r["message"]["text"].is_string());
            assert!(["error", "warning", "note"].contains(&r["level"].as_str().unwrap()));
            assert!(r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].is_string());
        }
    }
}
