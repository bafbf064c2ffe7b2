//! `onnx-doctor compare` and `verify`, end to end, on the example CNN with injected faults and on
//! small models with a baked dynamic axis (tests/fixtures, scripts/gen_verify_fixtures.py).

mod common;

use common::{run, stderr, stdout};
use onnx_proto::Message;
use serde_json::Value as Json;

const CNN: &str = "examples/tiny_cnn.onnx";

/// The example CNN with one change applied to its proto.
fn faulty(
    dir: &std::path::Path,
    name: &str,
    change: impl FnOnce(&mut onnx_proto::ModelProto),
) -> String {
    let mut m = onnx_ir::Model::load(common::workspace().join(CNN))
        .unwrap()
        .proto;
    change(&mut m);
    let p = dir.join(name);
    std::fs::write(&p, m.encode_to_vec()).unwrap();
    p.to_str().unwrap().to_string()
}

fn json(o: &std::process::Output) -> Json {
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}: {}\n{}", stdout(o), stderr(o)))
}

#[test]
fn a_model_agrees_with_itself() {
    let o = run(&[
        "compare",
        CNN,
        "--against",
        CNN,
        "--layerwise",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json(&o);
    assert_eq!(j["ok"], true);
    assert!(j["first_divergent_node"].is_null());
    assert_eq!(j["nodes"].as_array().unwrap().len(), 9);
}

#[test]
fn layerwise_names_the_node_with_a_changed_weight() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = faulty(tmp.path(), "w.onnx", |m| {
        let g = m.graph.as_mut().unwrap();
        let w = g
            .initializer
            .iter_mut()
            .find(|t| t.name() == "conv2.weight")
            .unwrap();
        let mut t = tensor::Tensor::from_proto(w)
            .unwrap()
            .to_vec::<f32>()
            .unwrap();
        t[0] += 0.5;
        let shape: Vec<usize> = w.dims.iter().map(|&d| d as usize).collect();
        *w = tensor::Tensor::from_vec(shape, t)
            .unwrap()
            .to_proto("conv2.weight");
    });
    let bisect = tmp.path().join("cut");
    let html = tmp.path().join("report.html");
    let o = run(&[
        "compare",
        CNN,
        "--against",
        &bad,
        "--layerwise",
        "--reinject",
        "--format",
        "json",
        "--bisect",
        bisect.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let j = json(&o);
    assert_eq!(j["ok"], false);
    assert_eq!(j["first_divergent_node"]["name"], "/conv2/Conv");
    assert_eq!(j["first_divergent_node"]["op_type"], "Conv");
    let diffs = j["first_divergent_node"]["differences"].to_string();
    assert!(
        diffs.contains("initializer 'conv2.weight' differs"),
        "{diffs}"
    );
    // Nodes before it agree; its own (reinjected) error is its whole error.
    let nodes = j["nodes"].as_array().unwrap();
    assert_eq!(nodes[0]["output"]["ok"], true);
    let conv2 = nodes.iter().find(|n| n["name"] == "/conv2/Conv").unwrap();
    assert_eq!(conv2["own"]["ok"], false);
    // The bisected node alone reproduces the divergence against the reference's values.
    let cut = bisect.join("model.onnx");
    assert!(cut.is_file());
    let o2 = run(&[
        "compare",
        cut.to_str().unwrap(),
        "--reference",
        bisect.join("test_data_set_0").to_str().unwrap(),
    ]);
    assert_eq!(
        o2.status.code(),
        Some(1),
        "the cut node alone diverges: {}{}",
        stdout(&o2),
        stderr(&o2)
    );
    assert!(
        stdout(&o2).contains("BAD /conv2/Conv_output_0"),
        "{}",
        stdout(&o2)
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<svg") && page.contains("/conv2/Conv"));
    assert!(!page.contains("http://") || page.contains("xmlns='http://www.w3.org/2000/svg'"));
}

#[test]
fn layerwise_names_the_node_with_a_changed_attribute() {
    let tmp = tempfile::tempdir().unwrap();
    let bad = faulty(tmp.path(), "a.onnx", |m| {
        let g = m.graph.as_mut().unwrap();
        let gemm = g.node.iter_mut().find(|n| n.op_type() == "Gemm").unwrap();
        gemm.attribute.push(onnx_proto::AttributeProto {
            name: Some("alpha".into()),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::Float as i32),
            f: Some(1.5),
            ..Default::default()
        });
    });
    let o = run(&[
        "compare",
        CNN,
        "--against",
        &bad,
        "--layerwise",
        "--random-inputs",
        "--dim",
        "batch=2",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("first divergent node: '/fc/Gemm' (Gemm)"),
        "{out}"
    );
    assert!(out.contains("attribute 'alpha' added (1.5)"), "{out}");
}

#[test]
fn reference_npz_with_inputs_and_per_output_tolerance() {
    let tmp = tempfile::tempdir().unwrap();
    let refnpz = tmp.path().join("ref.npz");
    let o = run(&[
        "run",
        CNN,
        "--random-inputs",
        "--output",
        refnpz.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    // Same seeded inputs: equal.
    let o = run(&[
        "compare",
        CNN,
        "--reference",
        refnpz.to_str().unwrap(),
        "--random-inputs",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    // Other inputs: the outputs differ.
    let o = run(&[
        "compare",
        CNN,
        "--reference",
        refnpz.to_str().unwrap(),
        "--random-inputs",
        "--seed",
        "7",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    // ... unless the tolerance of every output is wide enough.
    let o = run(&[
        "compare",
        CNN,
        "--reference",
        refnpz.to_str().unwrap(),
        "--random-inputs",
        "--seed",
        "7",
        "--tol",
        "logits=0,100",
        "--tol",
        "probs=0,1",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let o = run(&["compare", CNN]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("--reference") && stderr(&o).contains("--against"));
}

#[test]
fn verify_passes_a_dynamic_model_and_names_a_baked_constant() {
    let o = run(&[
        "verify",
        "tests/fixtures/dyn_reshape_ok.onnx",
        "--dim",
        "batch=1,2,7",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    assert!(stdout(&o).contains("all 3 runs passed"), "{}", stdout(&o));

    let o = run(&[
        "verify",
        "tests/fixtures/dyn_reshape_baked.onnx",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let j = json(&o);
    assert_eq!(j["ok"], false);
    let runs = j["runs"].as_array().unwrap();
    let failed: Vec<&Json> = runs.iter().filter(|r| r["ok"] == false).collect();
    assert!(!failed.is_empty());
    assert!(
        failed.iter().all(|r| r["node"] == "/model/Reshape"),
        "{runs:?}"
    );
    assert!(runs
        .iter()
        .any(|r| r["ok"] == true && r["dims"]["batch"] == 2));
    assert_eq!(j["baked_constants"][0]["code"], "ODT033");

    let o = run(&[
        "verify",
        "tests/fixtures/dyn_range_baked.onnx",
        "--dim",
        "seq=5,9",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}", stderr(&o));
    let out = stdout(&o);
    assert!(
        out.contains("/Add") && out.contains("node '/pos/Range' (Range)"),
        "{out}"
    );

    let o = run(&["verify", CNN, "--dim", "seq=1,2"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("no symbolic dim 'seq'"),
        "{}",
        stderr(&o)
    );
}

#[test]
fn backends_compare_one_model_on_two_engines() {
    let o = run(&[
        "compare",
        CNN,
        "--backends",
        "native,native",
        "--layerwise",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let j = json(&o);
    assert_eq!(j["ok"], true);
    // Every intermediate came back from the candidate backend through the exposed outputs.
    assert_eq!(j["nodes"].as_array().unwrap().len(), 9);
    if !cfg!(feature = "ort") {
        let o = run(&["compare", CNN, "--backends", "native,ort"]);
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains("cargo feature 'ort'"), "{}", stderr(&o));
        let o = run(&[
            "verify",
            "tests/fixtures/dyn_reshape_ok.onnx",
            "--backends",
            "native,ort",
        ]);
        assert_eq!(o.status.code(), Some(2));
        assert!(stderr(&o).contains("cargo feature 'ort'"), "{}", stderr(&o));
    }
    let o = run(&["compare", CNN, "--backends", "native"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("two backends"), "{}", stderr(&o));
}

/// A PyTorch reference with module-path intermediates (scripts/torch_reference.py): the
/// exporter folded BatchNorm into the Conv, so `bn`'s output is the reference for /conv/Conv.
#[test]
fn pytorch_reference_with_module_paths() {
    let dir = "tests/fixtures/torch_ref";
    let model = format!("{dir}/model.onnx");
    let o = run(&[
        "compare",
        &model,
        "--reference",
        &format!("{dir}/ref.npz"),
        "--layerwise",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(0), "{}{}", stdout(&o), stderr(&o));
    let j = json(&o);
    let names: Vec<&str> = j["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["/conv/Conv", "/head/Gemm"]);
    let o = run(&[
        "compare",
        &model,
        "--reference",
        &format!("{dir}/ref_bad.npz"),
        "--layerwise",
        "--format",
        "json",
    ]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    assert_eq!(json(&o)["first_divergent_node"]["name"], "/head/Gemm");
}
