//! Real PyTorch exports (tests/models, made by scripts/export_test_models.py with the TorchScript
//! and dynamo exporters): `onnx-doctor run` must reproduce PyTorch's own outputs within rtol 1e-3,
//! atol 1e-4, on every input set saved with the model (dynamic-batch models have two batch sizes).
//! Then `compare --reference` must agree, and `verify` must pass the dynamic-batch models.

mod common;

use common::{run, stderr, stdout};
use engine::compare::{stats, Tolerance};

const TOL: Tolerance = Tolerance {
    rtol: 1e-3,
    atol: 1e-4,
};

fn cases() -> Vec<std::path::PathBuf> {
    let mut v: Vec<_> = std::fs::read_dir(common::workspace().join("tests/models"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    v.sort();
    assert!(
        v.len() >= 20,
        "expected the committed PyTorch models, found {}",
        v.len()
    );
    v
}

/// Runs one input set (`input_*.npy` + `expected.npz`, or `input2_*` + `expected2.npz`).
fn check_set(dir: &std::path::Path, prefix: &str, expected: &str) -> Result<(), String> {
    let mut args: Vec<String> = vec![
        "run".into(),
        dir.join("model.onnx").to_str().unwrap().into(),
    ];
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        let f = p.file_name().unwrap().to_string_lossy().to_string();
        if let Some(name) = f
            .strip_prefix(&format!("{prefix}_"))
            .and_then(|n| n.strip_suffix(".npy"))
        {
            args.push("--input".into());
            args.push(format!("{name}={}", p.display()));
        }
    }
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("out.npz");
    args.push("--output".into());
    args.push(out.to_str().unwrap().into());
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = run(&argv);
    if !o.status.success() {
        return Err(stderr(&o));
    }
    let ours = tensor::npz::read(&out).unwrap();
    let want = tensor::npz::read(dir.join(expected)).unwrap();
    for (name, w) in &want {
        let g = ours
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
            .ok_or_else(|| format!("no output '{name}'"))?;
        let s = stats(g, w, TOL).map_err(|e| format!("{name}: {e}"))?;
        if s.out_of_tolerance > 0 {
            return Err(format!(
                "{name}: {} of {} elements out of tolerance, max abs err {:.3e}",
                s.out_of_tolerance, s.elements, s.max_abs
            ));
        }
    }
    Ok(())
}

#[test]
fn pytorch_exports_match_pytorch() {
    let mut failures = Vec::new();
    let mut sets = 0;
    for dir in cases() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        for (prefix, expected) in [("input", "expected.npz"), ("input2", "expected2.npz")] {
            if !dir.join(expected).is_file() {
                continue;
            }
            sets += 1;
            if let Err(e) = check_set(&dir, prefix, expected) {
                failures.push(format!("{name} ({expected}): {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {sets} input sets differ from PyTorch:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn dynamic_batch_exports_pass_verify() {
    for dir in cases() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        if !name.contains("dynbatch") {
            continue;
        }
        let o = run(&["verify", dir.join("model.onnx").to_str().unwrap()]);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{name}: {}{}",
            stdout(&o),
            stderr(&o)
        );
    }
}
