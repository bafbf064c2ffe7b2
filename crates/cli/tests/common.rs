//! Helpers for the end-to-end tests: run the real `onnx-doctor` binary.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

pub fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

/// Runs `onnx-doctor ARGS` from the workspace root.
pub fn run(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_onnx-doctor"))
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("running onnx-doctor")
}

pub fn stdout(o: &Output) -> String {
    String::from_utf8_lossy(&o.stdout).into_owned()
}

pub fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).into_owned()
}

/// Every model the conformance tests use: the generated node corpus and the onnx package's model tests.
pub fn corpus_models() -> Vec<PathBuf> {
    let dir = workspace().join("corpus/node");
    assert!(
        dir.is_dir(),
        "{} is missing: run `python3 scripts/gen_node_corpus.py` (scripts/test.sh does it)",
        dir.display()
    );
    let mut v: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path().join("model.onnx"))
        .filter(|p| p.is_file())
        .collect();
    assert!(
        v.len() >= 1884,
        "expected the 1884 node tests of onnx 1.23.2, found {}",
        v.len()
    );
    let out = Command::new("python3")
        .args([
            "-c",
            "import onnx, os; print(os.path.dirname(onnx.__file__))",
        ])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "python3 cannot import onnx (scripts/test.sh installs it)"
    );
    let root =
        PathBuf::from(String::from_utf8(out.stdout).unwrap().trim()).join("backend/test/data");
    let mut package = 0;
    for kind in ["light", "pytorch-converted", "pytorch-operator", "simple"] {
        for e in std::fs::read_dir(root.join(kind)).unwrap() {
            let p = e.unwrap().path();
            if p.is_file() && p.extension().is_some_and(|e| e == "onnx") {
                v.push(p);
                package += 1;
            } else if p.join("model.onnx").is_file() {
                v.push(p.join("model.onnx"));
                package += 1;
            }
        }
    }
    assert!(
        package > 100,
        "expected the onnx package's model tests, found {package}"
    );
    v.sort();
    v
}
