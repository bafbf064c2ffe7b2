//! The native engine agrees with onnxruntime (the PyPI wheel, as an oracle) on real networks:
//! the onnx package's `light/` models (AlexNet, DenseNet-121, Inception v1/v2, ResNet-50,
//! ShuffleNet, SqueezeNet, VGG-19, ZFNet-512 with constant weights) and the example model, on
//! the same seeded random inputs (scripts/compare_ort.py), at rtol 1e-3, atol 1e-4.

mod common;

use std::process::Command;

#[test]
fn light_models_match_onnxruntime() {
    let out = Command::new("python3")
        .args([
            "-c",
            "import onnx, os; print(os.path.dirname(onnx.__file__))",
        ])
        .output()
        .expect("python3");
    let root = String::from_utf8(out.stdout).unwrap();
    let light = std::path::Path::new(root.trim()).join("backend/test/data/light");
    let mut models: Vec<String> = std::fs::read_dir(&light)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "onnx"))
        .map(|p| p.to_str().unwrap().to_string())
        .collect();
    models.sort();
    assert_eq!(
        models.len(),
        9,
        "expected the 9 light models of onnx 1.23.2"
    );
    models.push("examples/tiny_cnn.onnx".into());
    let o = Command::new("python3")
        .arg("scripts/compare_ort.py")
        .arg("--bin")
        .arg(env!("CARGO_BIN_EXE_onnx-doctor"))
        .args(&models)
        .current_dir(common::workspace())
        .output()
        .unwrap();
    let report = String::from_utf8_lossy(&o.stdout);
    println!("{report}");
    assert!(
        o.status.success(),
        "{report}\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
}
