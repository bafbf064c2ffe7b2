//! `onnx-doctor inspect`, end to end on real files.

mod common;

use common::{run, stderr, stdout};
use std::io::Write;
use std::process::{Command, Stdio};

#[test]
fn human_output_of_the_example() {
    let o = run(&["inspect", "examples/tiny_cnn.onnx"]);
    assert!(o.status.success(), "{}", stderr(&o));
    insta::assert_snapshot!(stdout(&o));
}

#[test]
fn json_output_of_the_example() {
    let o = run(&["inspect", "examples/tiny_cnn.onnx", "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    insta::assert_json_snapshot!(v);
}

#[test]
fn external_data_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let model = onnx_ir::Model::load(common::workspace().join("examples/tiny_cnn.onnx")).unwrap();
    let path = dir.path().join("m.onnx");
    let opts = onnx_ir::SaveOptions {
        external: onnx_ir::ExternalPolicy::Always,
        threshold: 600,
        data_file: None,
    };
    model.save(&path, &opts).unwrap();
    let o = run(&["inspect", path.to_str().unwrap(), "--format", "json"]);
    assert!(o.status.success(), "{}", stderr(&o));
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(v["external_data"]["used"], true);
    assert_eq!(v["external_data"]["files"][0]["location"], "m.onnx.data");
    assert_eq!(v["external_data"]["files"][0]["tensors"], 3); // conv1.weight, conv2.weight, fc.weight
    assert_eq!(v["parameters"], 1562);
    let human = stdout(&run(&["inspect", path.to_str().unwrap()]));
    assert!(
        human.contains("external     m.onnx.data: 3 tensors"),
        "{human}"
    );
}

/// A bad input: exit 2, one line on stderr that names the file, never a panic.
fn assert_input_error(args: &[&str], file: &str, expect: &str) {
    let o = run(args);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "not one line: {err}");
    assert!(
        err.starts_with("error: ") && err.contains(file),
        "does not name {file}: {err}"
    );
    assert!(err.contains(expect), "expected '{expect}' in: {err}");
    assert!(o.stdout.is_empty());
}

#[test]
fn bad_inputs_exit_2_with_one_line_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let d = |name: &str| dir.path().join(name).to_str().unwrap().to_string();
    let good = std::fs::read(common::workspace().join("examples/tiny_cnn.onnx")).unwrap();

    assert_input_error(
        &["inspect", &d("missing.onnx")],
        "missing.onnx",
        "No such file",
    );
    assert_input_error(
        &["inspect", dir.path().to_str().unwrap()],
        dir.path().to_str().unwrap(),
        "is a directory",
    );
    std::fs::write(d("empty.onnx"), b"").unwrap();
    assert_input_error(&["inspect", &d("empty.onnx")], "empty.onnx", "empty file");
    std::fs::write(d("truncated.onnx"), &good[..good.len() / 2]).unwrap();
    assert_input_error(
        &["inspect", &d("truncated.onnx")],
        "truncated.onnx",
        "not a valid ONNX model",
    );
    std::fs::write(d("text.onnx"), b"this is not a model\n").unwrap();
    assert_input_error(&["inspect", &d("text.onnx")], "text.onnx", "not");

    // Many truncations and bit flips through the real binary.
    let mut rng = 0x2545_f491_4f6c_dd1du64;
    let mut next = || {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng
    };
    let mut rejected = 0;
    for i in 0..60 {
        let mut b = good.clone();
        if i % 2 == 0 {
            b.truncate(1 + (next() as usize % (good.len() - 1)));
        } else {
            for _ in 0..4 {
                let at = next() as usize % b.len();
                b[at] ^= 1 << (next() % 8);
            }
        }
        let p = d(&format!("mutant{i}.onnx"));
        std::fs::write(&p, &b).unwrap();
        let o = run(&["inspect", &p]);
        let err = stderr(&o);
        assert!(!err.contains("panicked"), "mutant {i}: {err}");
        match o.status.code() {
            Some(0) => {}
            Some(2) => {
                rejected += 1;
                assert_eq!(err.trim_end().lines().count(), 1, "mutant {i}: {err}");
                assert!(
                    err.contains(&format!("mutant{i}.onnx")),
                    "mutant {i}: {err}"
                );
            }
            other => panic!("mutant {i}: exit {other:?}: {err}"),
        }
    }
    assert!(rejected >= 30, "only {rejected} of 60 mutants rejected");
}

#[test]
fn external_data_outside_the_model_directory_is_refused() {
    use onnx_proto::{tensor_proto::DataLocation, Message, StringStringEntryProto};
    let dir = tempfile::tempdir().unwrap();
    let inner = dir.path().join("model");
    std::fs::create_dir(&inner).unwrap();
    std::fs::write(dir.path().join("secret.bin"), [0u8; 64]).unwrap();
    let mut model = onnx_ir::Model::load(common::workspace().join("examples/tiny_cnn.onnx"))
        .unwrap()
        .proto;
    let entry = |k: &str, v: &str| StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v.into()),
    };
    let abs = dir.path().join("secret.bin").to_str().unwrap().to_string();
    for (location, expect) in [
        ("../secret.bin", "outside the model's directory"),
        (abs.as_str(), "absolute path"),
    ] {
        let t = &mut model.graph.as_mut().unwrap().initializer[1]; // conv1.bias: 8 floats = 32 bytes
        t.raw_data = None;
        t.data_location = Some(DataLocation::External as i32);
        t.external_data = vec![
            entry("location", location),
            entry("offset", "0"),
            entry("length", "32"),
        ];
        let path = inner.join("escape.onnx");
        std::fs::write(&path, model.encode_to_vec()).unwrap();
        assert_input_error(&["inspect", path.to_str().unwrap()], "escape.onnx", expect);
    }
}

/// `inspect --format json` on every node-test model and every onnx-package model test agrees
/// with what onnx (Python) counts.
#[test]
fn inspect_agrees_with_onnx_on_every_corpus_model() {
    let models = common::corpus_models();
    let script = common::workspace().join("crates/cli/tests/inspect_expected.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("python3");
    let list: String = models
        .iter()
        .map(|p| format!("{}\n", p.display()))
        .collect();
    let mut stdin = child.stdin.take().unwrap();
    // Write from another thread: python answers line by line and would fill its stdout pipe.
    let writer = std::thread::spawn(move || stdin.write_all(list.as_bytes()));
    let out = child.wait_with_output().unwrap();
    writer.join().unwrap().unwrap();
    assert!(out.status.success());
    let expected: Vec<serde_json::Value> = String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(expected.len(), models.len());
    let mut failures = Vec::new();
    for want in &expected {
        let path = want["path"].as_str().unwrap();
        let o = run(&["inspect", path, "--format", "json"]);
        if !o.status.success() {
            failures.push(format!(
                "{path}: exit {:?}: {}",
                o.status.code(),
                stderr(&o)
            ));
            continue;
        }
        let got: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
        for key in [
            "ir_version",
            "nodes",
            "initializers",
            "parameters",
            "opsets",
            "ops",
        ] {
            if got[key] != want[key] {
                failures.push(format!(
                    "{path}: {key}: ours {} onnx {}",
                    got[key], want[key]
                ));
            }
        }
        if got["producer"]["name"] != want["producer"] {
            failures.push(format!("{path}: producer differs"));
        }
        for side in ["inputs", "outputs"] {
            let (g, w) = (
                got[side].as_array().unwrap(),
                want[side].as_array().unwrap(),
            );
            if g.len() != w.len() {
                failures.push(format!("{path}: {side}: {} vs {}", g.len(), w.len()));
                continue;
            }
            for (g, w) in g.iter().zip(w) {
                let same = g["name"] == w["name"]
                    && (w["dtype"].is_null()
                        || (g["dtype"] == w["dtype"] && g["shape"] == w["shape"]));
                if !same {
                    failures.push(format!("{path}: {side} ours {g} onnx {w}"));
                }
            }
        }
    }
    println!(
        "{} models inspected, {} disagreements",
        expected.len(),
        failures.len()
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
