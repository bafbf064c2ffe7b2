//! `onnx-doctor check`, end to end: every valid corpus model passes; corrupted models are caught
//! wherever onnx.checker catches them; output formats are snapshotted.

mod common;

use common::{run, stderr, stdout};
use onnx_proto::Message;
use std::collections::BTreeMap;
use std::process::Command;

/// tiny_cnn with three mistakes: an attribute of the wrong type, an op that does not exist yet at
/// opset 17, and a graph output nothing produces.
fn broken_model(dir: &std::path::Path) -> String {
    use onnx_proto::{attribute_proto::AttributeType, ValueInfoProto};
    let mut m = onnx_ir::Model::load(common::workspace().join("examples/tiny_cnn.onnx"))
        .unwrap()
        .proto;
    let g = m.graph.as_mut().unwrap();
    let flatten = g
        .node
        .iter_mut()
        .find(|n| n.op_type() == "Flatten")
        .unwrap();
    flatten.attribute[0].r#type = Some(AttributeType::Float as i32);
    let softmax = g
        .node
        .iter_mut()
        .find(|n| n.op_type() == "Softmax")
        .unwrap();
    softmax.op_type = Some("Gelu".into());
    softmax.attribute.clear();
    g.output.push(ValueInfoProto {
        name: Some("missing".into()),
        r#type: g.output[0].r#type.clone(),
        ..Default::default()
    });
    let path = dir.join("broken.onnx");
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    path.to_str().unwrap().to_string()
}

#[test]
fn clean_example_passes() {
    let o = run(&["check", "examples/tiny_cnn.onnx"]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(stdout(&o), "examples/tiny_cnn.onnx: all checks passed\n");
}

#[test]
fn findings_in_every_format() {
    let dir = tempfile::tempdir().unwrap();
    let path = broken_model(dir.path());
    let shown = |s: String| s.replace(&path, "broken.onnx");
    let o = run(&["check", &path]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    insta::assert_snapshot!("human", shown(stdout(&o)));
    let o = run(&["check", &path, "--format", "json"]);
    assert_eq!(o.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_str(&shown(stdout(&o))).unwrap();
    insta::assert_json_snapshot!("json", json);
    let o = run(&["check", &path, "--format", "sarif"]);
    let sarif: serde_json::Value = serde_json::from_str(&shown(stdout(&o))).unwrap();
    assert_eq!(sarif["version"], "2.1.0");
    let ids: Vec<&str> = sarif["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ruleId"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["ODC031", "ODC011", "ODC050"]);
}

#[test]
fn unreadable_model_is_an_input_error() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("junk.onnx");
    std::fs::write(&p, b"\xff\xff\xff junk").unwrap();
    let o = run(&["check", p.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("junk.onnx"));
}

/// Every model of the node corpus and the onnx package: no error-level finding (they all pass
/// onnx.checker with full_check, but one whose shape inference fails — test_mvn — which has no
/// structural error either).
#[test]
fn every_corpus_model_passes() {
    let mut failures = Vec::new();
    let mut warnings: BTreeMap<String, usize> = BTreeMap::new();
    let models = common::corpus_models();
    for path in &models {
        let o = run(&["check", path.to_str().unwrap(), "--format", "json"]);
        let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap_or_default();
        if o.status.code() != Some(0) {
            failures.push(format!("{}: {}{}", path.display(), stdout(&o), stderr(&o)));
        }
        for d in v["diagnostics"].as_array().into_iter().flatten() {
            *warnings
                .entry(d["code"].as_str().unwrap_or("?").to_string())
                .or_default() += 1;
        }
    }
    println!(
        "{} models checked; warnings by code: {warnings:?}",
        models.len()
    );
    assert!(
        failures.is_empty(),
        "{} of {} valid models fail:\n{}",
        failures.len(),
        models.len(),
        failures.join("\n")
    );
}

/// Ten kinds of corruption over a quarter of the node corpus and the example (written by
/// check_mutants.py, which records whether onnx.checker full_check rejects each): `check` must exit 1
/// on at least 99% of what onnx rejects.
#[test]
fn corruptions_that_onnx_rejects_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    let mut models: Vec<String> = common::corpus_models()
        .into_iter()
        .filter(|p| p.starts_with(common::workspace().join("corpus")))
        .step_by(4)
        .map(|p| p.display().to_string())
        .collect();
    models.push(
        common::workspace()
            .join("examples/tiny_cnn.onnx")
            .display()
            .to_string(),
    );
    let script = common::workspace().join("crates/cli/tests/check_mutants.py");
    let o = Command::new("python3")
        .arg(script)
        .arg(dir.path())
        .args(&models)
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let manifest: Vec<serde_json::Value> =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("manifest.json")).unwrap())
            .unwrap();
    let mut per_kind: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut missed = Vec::new();
    for m in manifest.iter().filter(|m| m["onnx_rejects"] == true) {
        let file = m["file"].as_str().unwrap();
        let o = run(&["check", file]);
        assert!(!stderr(&o).contains("panicked"), "{file}: {}", stderr(&o));
        let caught = o.status.code() == Some(1);
        let e = per_kind
            .entry(m["kind"].as_str().unwrap().to_string())
            .or_default();
        e.0 += caught as usize;
        e.1 += 1;
        if !caught {
            missed.push(format!(
                "{} ({}): onnx says {}",
                m["original"], m["kind"], m["onnx_error"]
            ));
        }
    }
    let (caught, total) = per_kind
        .values()
        .fold((0, 0), |a, b| (a.0 + b.0, a.1 + b.1));
    println!("caught {caught} of {total} corruptions that onnx.checker rejects; per kind (caught, total): {per_kind:?}");
    for m in &missed {
        println!("missed: {m}");
    }
    assert_eq!(
        per_kind.len(),
        10,
        "every kind of corruption must be exercised: {per_kind:?}"
    );
    assert!(total > 4000, "too few mutants: {total}");
    assert!(
        caught * 100 >= total * 99,
        "caught only {caught} of {total}"
    );
}
