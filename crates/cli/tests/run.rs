//! `onnx-doctor run`, end to end: inputs from .npy/.pb/random, outputs to .npz and .pb, capture,
//! and the errors a user gets for inputs that do not fit the model.

mod common;

use common::{run, stderr, stdout};
use onnx_proto::Message;
use tensor::Tensor;

const CNN: &str = "examples/tiny_cnn.onnx";

fn npy(dir: &std::path::Path, name: &str, t: &Tensor) -> String {
    let p = dir.join(name);
    tensor::npy::write(&p, t).unwrap();
    p.to_str().unwrap().to_string()
}

fn image(batch: usize) -> Tensor {
    let n = batch * 3 * 32 * 32;
    Tensor::from_vec(
        vec![batch, 3, 32, 32],
        (0..n)
            .map(|i| ((i * 7919) % 255) as f32 / 255.0 - 0.5)
            .collect(),
    )
    .unwrap()
}

#[test]
fn runs_from_npy_into_npz_with_captured_intermediates() {
    let tmp = tempfile::tempdir().unwrap();
    let input = npy(tmp.path(), "image.npy", &image(2));
    let out = tmp.path().join("out.npz");
    let o = run(&[
        "run",
        CNN,
        "--input",
        &format!("image={input}"),
        "--output",
        out.to_str().unwrap(),
        "--capture",
        "all",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let values = tensor::npz::read(&out).unwrap();
    let get = |n: &str| values.iter().find(|(k, _)| k == n).map(|(_, t)| t.clone());
    let probs = get("probs").expect("probs in the npz");
    assert_eq!(probs.shape(), &[2, 10]);
    for row in probs.to_vec::<f32>().unwrap().chunks(10) {
        let s: f32 = row.iter().sum();
        assert!((s - 1.0).abs() < 1e-5, "softmax rows sum to 1, got {s}");
    }
    assert!(get("logits").is_some());
    // Every node output is captured: 9 nodes, two of them graph outputs.
    assert!(values.len() >= 9, "captured {} values", values.len());
    assert!(stdout(&o).contains("probs: float[2, 10]"), "{}", stdout(&o));
}

#[test]
fn output_dir_holds_named_tensor_protos_in_graph_order() {
    let tmp = tempfile::tempdir().unwrap();
    let o = run(&[
        "run",
        CNN,
        "--random-inputs",
        "--dim",
        "batch=3",
        "--output-dir",
        tmp.path().to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let (name0, t0) = tensor::pb::read(tmp.path().join("output_0.pb")).unwrap();
    let (name1, t1) = tensor::pb::read(tmp.path().join("output_1.pb")).unwrap();
    assert_eq!((name0.as_str(), name1.as_str()), ("logits", "probs"));
    assert_eq!(t0.shape(), &[3, 10]);
    assert_eq!(t1.shape(), &[3, 10]);
}

#[test]
fn random_inputs_are_reproducible_and_json_reports_outputs() {
    let a = run(&["run", CNN, "--random-inputs", "--format", "json"]);
    let b = run(&["run", CNN, "--random-inputs", "--format", "json"]);
    assert!(a.status.success(), "{}", stderr(&a));
    let ja: serde_json::Value = serde_json::from_str(&stdout(&a)).unwrap();
    let jb: serde_json::Value = serde_json::from_str(&stdout(&b)).unwrap();
    assert_eq!(ja["outputs"], jb["outputs"]);
    assert_eq!(ja["outputs"][1]["name"], "probs");
    assert_eq!(ja["outputs"][1]["shape"], serde_json::json!([1, 10]));
    assert!(
        stderr(&a).contains("dim 'batch' set to 1"),
        "{}",
        stderr(&a)
    );
}

fn fails_with(args: &[&str], needles: &[&str]) {
    let o = run(args);
    assert_eq!(o.status.code(), Some(2), "{args:?}: {}", stderr(&o));
    let e = stderr(&o);
    for n in needles {
        assert!(e.contains(n), "{args:?}: expected '{n}' in: {e}");
    }
    assert!(!e.contains("panicked"), "{e}");
}

#[test]
fn inputs_that_do_not_fit_are_refused_by_name() {
    let tmp = tempfile::tempdir().unwrap();
    fails_with(
        &["run", CNN],
        &["input 'image'", "missing", "tensor(float)[batch,3,32,32]"],
    );
    let ints = npy(
        tmp.path(),
        "ints.npy",
        &Tensor::from_vec(vec![1, 3, 32, 32], vec![0i64; 3 * 32 * 32]).unwrap(),
    );
    fails_with(
        &["run", CNN, "--input", &format!("image={ints}")],
        &["input 'image'", "expected element type float, got int64"],
    );
    let rank3 = npy(
        tmp.path(),
        "rank3.npy",
        &Tensor::from_vec(vec![3, 32, 32], vec![0f32; 3 * 32 * 32]).unwrap(),
    );
    fails_with(
        &["run", CNN, "--input", &format!("image={rank3}")],
        &["input 'image'", "expected rank 4", "got rank 3"],
    );
    let channels = npy(
        tmp.path(),
        "c4.npy",
        &Tensor::from_vec(vec![1, 4, 32, 32], vec![0f32; 4 * 32 * 32]).unwrap(),
    );
    fails_with(
        &["run", CNN, "--input", &format!("image={channels}")],
        &["input 'image'", "dim 1 must be 3", "got 4"],
    );
    fails_with(
        &["run", CNN, "--input", &format!("img={channels}")],
        &["no input 'img'", "image"],
    );
    fails_with(
        &["run", CNN, "--random-inputs", "--capture", "nope"],
        &["--capture nope", "no node"],
    );
    fails_with(
        &["run", CNN, "--input", "image=/nonexistent/x.npy"],
        &["/nonexistent/x.npy"],
    );
}

#[test]
fn an_op_nothing_can_run_is_refused_before_running() {
    let tmp = tempfile::tempdir().unwrap();
    let mut m = onnx_ir::Model::load(common::workspace().join(CNN))
        .unwrap()
        .proto;
    let g = m.graph.as_mut().unwrap();
    let relu = g.node.iter_mut().find(|n| n.op_type() == "Relu").unwrap();
    relu.op_type = Some("FancyRelu".into());
    relu.domain = Some("com.example".into());
    m.opset_import.push(onnx_proto::OperatorSetIdProto {
        domain: Some("com.example".into()),
        version: Some(1),
    });
    let path = tmp.path().join("custom.onnx");
    std::fs::write(&path, m.encode_to_vec()).unwrap();
    fails_with(
        &["run", path.to_str().unwrap(), "--random-inputs"],
        &[
            "unsupported: FancyRelu v1",
            "com.example",
            "cannot run this model",
        ],
    );
}
