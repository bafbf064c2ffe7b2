//! Conformance: `onnx-doctor run` on every ONNX backend test case (the generated node corpus and
//! the onnx package's pytorch-converted / pytorch-operator / simple model tests), compared with
//! the expected outputs at rtol 1e-3, atol 1e-7 (exact for integers, bools and strings; dtypes
//! and shapes must match).
//!
//! Cases that fail must be listed in `conformance_xfail.txt` with a reason; a listed case that
//! passes fails the test too, so the list can only shrink. Set `CONFORMANCE_ONLY=substr` to run
//! a subset, `CONFORMANCE_UPDATE=1` to rewrite the list from this run (reasons are the first
//! line of each failure; edit them into explanations). A report of every case is written to
//! `$CARGO_TARGET_DIR/tmp/conformance-report.txt`.

mod common;

use engine::compare::{compare_value, Tolerance};
use onnx_ir::{Model, ValueType};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const TOL: Tolerance = Tolerance {
    rtol: 1e-3,
    atol: 1e-7,
};
const TIMEOUT: Duration = Duration::from_secs(120);

/// (name, directory holding model.onnx and test_data_set_*).
fn cases() -> Vec<(String, PathBuf)> {
    let mut v = Vec::new();
    for model in common::corpus_models() {
        let dir = model.parent().unwrap().to_path_buf();
        if !dir.join("test_data_set_0").is_dir() || model.file_name().unwrap() != "model.onnx" {
            continue;
        }
        let kind = dir
            .parent()
            .unwrap()
            .file_name()
            .unwrap()
            .to_string_lossy()
            .to_string();
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let name = if kind == "node" {
            name
        } else {
            format!("{kind}/{name}")
        };
        v.push((name, dir));
    }
    if let Ok(only) = std::env::var("CONFORMANCE_ONLY") {
        v.retain(|(n, _)| only.split(',').any(|o| n.contains(o)));
    }
    v
}

/// Runs the binary on one data set; `Err` is the failure reason.
fn run_case(dir: &Path, outputs: &[(String, ValueType)]) -> Result<(), String> {
    let bin = env!("CARGO_BIN_EXE_onnx-doctor");
    let mut sets: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.is_dir()
                && p.file_name()
                    .unwrap()
                    .to_string_lossy()
                    .starts_with("test_data_set_")
        })
        .collect();
    sets.sort();
    for set in sets {
        let out = tempfile::tempdir().unwrap();
        let mut child = Command::new(bin)
            .arg("run")
            .arg(dir.join("model.onnx"))
            .arg("--input-dir")
            .arg(&set)
            .arg("--output-dir")
            .arg(out.path())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let start = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().unwrap() {
                break s;
            }
            if start.elapsed() > TIMEOUT {
                let _ = child.kill();
                return Err(format!("timed out after {}s", TIMEOUT.as_secs()));
            }
            std::thread::sleep(Duration::from_millis(2));
        };
        let mut err = String::new();
        std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut err).unwrap();
        if !status.success() {
            let code = status
                .code()
                .map_or("signal".to_string(), |c| c.to_string());
            if code != "2" {
                return Err(format!("exit {code} (crash?): {}", err.trim()));
            }
            let model = dir.join("model.onnx").display().to_string();
            return Err(err
                .trim()
                .trim_start_matches("error: ")
                .replace(&format!("{model}: "), "")
                .to_string());
        }
        for (i, (name, ty)) in outputs.iter().enumerate() {
            let want_path = set.join(format!("output_{i}.pb"));
            if !want_path.exists() {
                continue;
            }
            let want =
                engine::io::read_pb(&want_path, ty).map_err(|e| format!("reference: {e}"))?;
            let got = engine::io::read_pb(&out.path().join(format!("output_{i}.pb")), ty)
                .map_err(|e| format!("output {i} ('{name}'): {e}"))?;
            compare_value(&got, &want, TOL).map_err(|e| format!("output {i} ('{name}'): {e}"))?;
        }
    }
    Ok(())
}

#[test]
fn node_and_model_tests_match_onnx() {
    let cases = cases();
    let xfail_path = common::workspace().join("crates/cli/tests/conformance_xfail.txt");
    let xfail: BTreeMap<String, String> = std::fs::read_to_string(&xfail_path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (n, r) = l.split_once('#').unwrap_or((l, ""));
            (n.trim().to_string(), r.trim().to_string())
        })
        .collect();
    let results: std::sync::Mutex<BTreeMap<String, Result<(), String>>> = Default::default();
    let next = std::sync::atomic::AtomicUsize::new(0);
    let threads = std::thread::available_parallelism()
        .map_or(2, |n| n.get())
        .min(4);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| loop {
                let i = next.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let Some((name, dir)) = cases.get(i) else {
                    break;
                };
                let r = match Model::load(dir.join("model.onnx")) {
                    Ok(m) => {
                        let outs: Vec<(String, ValueType)> = m
                            .graph()
                            .output
                            .iter()
                            .map(|o| {
                                (
                                    o.name().to_string(),
                                    ValueType::from_proto(o.r#type.as_ref()),
                                )
                            })
                            .collect();
                        run_case(dir, &outs)
                    }
                    Err(e) => Err(format!("load: {e}")),
                };
                results.lock().unwrap().insert(name.clone(), r);
            });
        }
    });
    let results = results.into_inner().unwrap();
    let passed = results.values().filter(|r| r.is_ok()).count();
    let mut report = String::new();
    for (n, r) in &results {
        match r {
            Ok(()) => report.push_str(&format!("PASS {n}\n")),
            Err(e) => report.push_str(&format!("FAIL {n}  # {}\n", e.lines().next().unwrap_or(""))),
        }
    }
    let report_path =
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("conformance-report.txt");
    println!("report: {}", report_path.display());
    let _ = std::fs::write(&report_path, &report);
    println!("conformance: {passed} of {} cases pass", results.len());

    if std::env::var("CONFORMANCE_UPDATE").is_ok() {
        let mut out = String::from(
            "# Conformance cases that fail today, one per line: NAME  # reason.\n\
             # This list can only shrink: the conformance test fails if a listed case passes.\n",
        );
        for (n, r) in &results {
            if let Err(e) = r {
                let reason = xfail
                    .get(n)
                    .filter(|r| !r.is_empty())
                    .cloned()
                    .unwrap_or_else(|| e.lines().next().unwrap_or("").to_string());
                out.push_str(&format!("{n}  # {reason}\n"));
            }
        }
        std::fs::write(&xfail_path, out).unwrap();
        return;
    }
    let mut problems = Vec::new();
    for (n, r) in &results {
        match (r, xfail.contains_key(n)) {
            (Err(e), false) => {
                problems.push(format!("FAILS (not in conformance_xfail.txt): {n}: {e}"))
            }
            (Ok(()), true) => problems.push(format!(
                "PASSES but is listed in conformance_xfail.txt (remove it): {n}"
            )),
            _ => {}
        }
    }
    for (n, reason) in &xfail {
        if reason.is_empty() && results.contains_key(n) {
            problems.push(format!("conformance_xfail.txt: {n} has no reason"));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}
