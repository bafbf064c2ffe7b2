//! Compares the registry with the installed `onnx` package, schema by schema.
//!
//! Skipped (loudly) when python3 or onnx is missing, or when the installed onnx is not the version
//! the data was generated from; CI installs the matching onnx.

use std::collections::BTreeMap;
use std::process::Command;

use serde_json::{json, Value};

/// Prints `{"onnx_version": …, "schemas": [summary, …]}` for every schema onnx knows.
const SNIPPET: &str = r#"
import json, onnx, onnx.defs
def arity(n): return None if n == 2**31 - 1 else n
def params(ps): return [[p.name, p.option.name] for p in ps]
print(json.dumps({"onnx_version": onnx.__version__, "schemas": [{
    "id": [s.domain, s.name, s.since_version],
    "deprecated": s.deprecated,
    "arity": [s.min_input, arity(s.max_input), s.min_output, arity(s.max_output)],
    "inputs": params(s.inputs),
    "outputs": params(s.outputs),
    "attributes": sorted([a.name, a.type.name, a.required] for a in s.attributes.values()),
    "type_params": [c.type_param_str for c in s.type_constraints],
    "function_opsets": sorted(s.function_opset_versions),
    "context_dependent": s.has_context_dependent_function,
} for s in onnx.defs.get_all_schemas_with_history()]}))
"#;

/// The same summary, from the Rust side.
fn summary(s: &opset::Schema) -> Value {
    let params = |ps: &[opset::FormalParameter]| -> Vec<Value> {
        ps.iter()
            .map(|p| json!([p.name, format!("{:?}", p.option)]))
            .collect()
    };
    json!({
        "id": [s.domain, s.name, s.since_version],
        "deprecated": s.deprecated,
        "arity": [s.min_inputs, s.max_inputs, s.min_outputs, s.max_outputs],
        "inputs": params(&s.inputs),
        "outputs": params(&s.outputs),
        "attributes": s.attributes.iter()
            .map(|a| json!([a.name, format!("{:?}", a.ty), a.required]))
            .collect::<Vec<_>>(),
        "type_params": s.type_constraints.iter().map(|c| &c.type_param_str).collect::<Vec<_>>(),
        "function_opsets": s.function_opsets().collect::<Vec<_>>(),
        "context_dependent": s.has_context_dependent_function,
    })
}

/// `FLOAT` ↔ `Float`, `SPARSE_TENSOR` ↔ `SparseTensor`: compare attribute types case-blind.
fn normalize(mut v: Value) -> Value {
    for attr in v["attributes"].as_array_mut().into_iter().flatten() {
        attr[1] = Value::String(attr[1].as_str().unwrap().replace('_', "").to_lowercase());
    }
    v
}

fn run_onnx() -> Option<Value> {
    let skip = |why: &str| {
        eprintln!("\n!!!!!! SKIPPED opset conformance test: {why} !!!!!!\n");
        None
    };
    let output = match Command::new("python3").args(["-c", SNIPPET]).output() {
        Ok(output) => output,
        Err(e) => return skip(&format!("cannot run python3 ({e})")),
    };
    let stderr = String::from_utf8_lossy(&output.stderr);
    if !output.status.success() {
        if stderr.contains("No module named 'onnx'") {
            return skip("the onnx Python package is not installed (pip install onnx)");
        }
        panic!("python snippet failed:\n{stderr}");
    }
    let report: Value = serde_json::from_slice(&output.stdout).expect("snippet prints JSON");
    let installed = report["onnx_version"].as_str().unwrap_or_default();
    if installed != opset::onnx_version() {
        return skip(&format!(
            "installed onnx {installed} but the data is from onnx {}; \
             install that version or run scripts/gen_opset_schemas.py",
            opset::onnx_version()
        ));
    }
    Some(report)
}

#[test]
fn registry_matches_installed_onnx() {
    let Some(report) = run_onnx() else { return };
    let expected: BTreeMap<String, Value> = report["schemas"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| (s["id"].to_string(), normalize(s.clone())))
        .collect();
    let actual: BTreeMap<String, Value> = opset::all()
        .map(summary)
        .map(|s| (s["id"].to_string(), normalize(s)))
        .collect();

    let missing: Vec<_> = expected
        .keys()
        .filter(|k| !actual.contains_key(*k))
        .collect();
    let extra: Vec<_> = actual
        .keys()
        .filter(|k| !expected.contains_key(*k))
        .collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "missing {missing:?}, extra {extra:?}"
    );
    for (id, want) in &expected {
        assert_eq!(&actual[id], want, "schema {id}");
    }
    eprintln!(
        "opset conformance: {} schemas match onnx {}",
        expected.len(),
        opset::onnx_version()
    );
}
