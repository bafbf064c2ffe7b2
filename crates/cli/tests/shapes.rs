//! `onnx-doctor shapes`, end to end: symbolic dims, data propagation, `--input-shape`, and the
//! comparison with onnx.shape_inference on the whole node-test corpus.

mod common;

use common::{run, stderr, stdout};
use onnx_ir::{Dim, Model, ValueType};
use std::collections::HashMap;

fn types(path: &std::path::Path) -> HashMap<String, String> {
    let m = Model::load(path).unwrap();
    let g = m.graph();
    g.value_info
        .iter()
        .chain(&g.output)
        .map(|v| {
            (
                v.name().to_string(),
                ValueType::from_proto(v.r#type.as_ref()).to_string(),
            )
        })
        .collect()
}

#[test]
fn example_keeps_the_symbolic_batch_and_fixes_it_on_request() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.onnx");
    let o = run(&[
        "shapes",
        "examples/tiny_cnn.onnx",
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = types(&out);
    assert_eq!(t["/conv1/Conv_output_0"], "float[batch,8,32,32]");
    assert_eq!(t["/pool/MaxPool_output_0"], "float[batch,8,16,16]");
    assert_eq!(t["/Flatten_output_0"], "float[batch,16]");
    assert_eq!(t["probs"], "float[batch,10]");
    let o = run(&[
        "shapes",
        "examples/tiny_cnn.onnx",
        "-o",
        out.to_str().unwrap(),
        "--input-shape",
        "image=4x3x32x32",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = types(&out);
    assert_eq!(t["/gap/GlobalAveragePool_output_0"], "float[4,16,1,1]");
    assert_eq!(t["logits"], "float[4,10]");
}

#[test]
fn bad_input_shape_arguments_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("s.onnx");
    let out = out.to_str().unwrap();
    for (arg, expect) in [
        ("nope=1x3x32x32", "no graph input 'nope'"),
        ("image=1x3x32", "3 dims given"),
        ("image=1x4x32x32", "dim 1 is fixed to 3"),
        ("image=1xAx32x32", "'A' is not a non-negative integer"),
    ] {
        let o = run(&[
            "shapes",
            "examples/tiny_cnn.onnx",
            "-o",
            out,
            "--input-shape",
            arg,
        ]);
        assert_eq!(o.status.code(), Some(2), "{arg}");
        assert!(stderr(&o).contains(expect), "{arg}: {}", stderr(&o));
    }
    assert!(
        !std::path::Path::new(out).exists(),
        "no output is written on error"
    );
}

/// Shape → Gather → Unsqueeze → Concat → Reshape with a symbolic batch: the Reshape target is
/// known symbolically, so its output is [batch, 3*seq] and the -1 resolves exactly.
#[test]
fn data_propagation_through_shape_arithmetic() {
    let dir = tempfile::tempdir().unwrap();
    let script = r#"
import onnx, sys
from onnx import helper, TensorProto as T
import numpy as np
nodes = [
    helper.make_node("Shape", ["x"], ["s"]),
    helper.make_node("Gather", ["s", "i0"], ["b"], axis=0),
    helper.make_node("Unsqueeze", ["b", "ax"], ["b1"]),
    helper.make_node("Concat", ["b1", "m1"], ["target"], axis=0),
    helper.make_node("Reshape", ["x", "target"], ["y"]),
    helper.make_node("Gather", ["s", "i1"], ["seq"], axis=0),
    helper.make_node("Add", ["seq", "one"], ["seq1"]),
    helper.make_node("Unsqueeze", ["seq1", "ax"], ["seq1v"]),
    helper.make_node("ConstantOfShape", ["seq1v"], ["z"]),
]
inits = [
    helper.make_tensor("i0", T.INT64, [], [0]), helper.make_tensor("i1", T.INT64, [], [1]),
    helper.make_tensor("ax", T.INT64, [1], [0]), helper.make_tensor("m1", T.INT64, [1], [-1]),
    helper.make_tensor("one", T.INT64, [], [1]),
]
g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", T.FLOAT, ["batch", "seq", 3])],
    [helper.make_tensor_value_info("y", T.FLOAT, None), helper.make_tensor_value_info("z", T.FLOAT, None)], inits)
m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
onnx.save(m, sys.argv[1])
"#;
    let model = dir.path().join("dp.onnx");
    let py = std::process::Command::new("python3")
        .args(["-c", script, model.to_str().unwrap()])
        .output()
        .unwrap();
    assert!(
        py.status.success(),
        "{}",
        String::from_utf8_lossy(&py.stderr)
    );
    let out = dir.path().join("out.onnx");
    let o = run(&[
        "shapes",
        model.to_str().unwrap(),
        "-o",
        out.to_str().unwrap(),
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let t = types(&out);
    assert_eq!(t["y"], "float[batch,3*seq]");
    assert_eq!(t["z"], "float[seq+1]");
    assert_eq!(t["target"], "int64[2]");
    let m = Model::load(&out).unwrap();
    let y = m.graph().output.iter().find(|v| v.name() == "y").unwrap();
    assert_eq!(
        ValueType::from_proto(y.r#type.as_ref()).shape().unwrap()[0],
        Dim::Sym("batch".into())
    );
}

/// Wherever onnx.shape_inference (data_prop=True) infers a fully static shape on a node-test
/// model, we must never write a different one; and we must keep matching at least as many as the
/// committed floor (crates/cli/tests/shapes_floor.txt — raise it as ops gain inference, never lower it).
#[test]
fn shapes_agree_with_onnx_on_the_node_corpus() {
    let root = common::workspace();
    let out = std::process::Command::new("bash")
        .arg(root.join("scripts/shapes_vs_onnx.sh"))
        .arg(env!("CARGO_BIN_EXE_onnx-doctor"))
        .current_dir(&root)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    println!(
        "values {} matched {} missing {} wrong {}",
        v["values"], v["matched"], v["missing"], v["wrong"]
    );
    assert!(
        v["values"].as_u64().unwrap() > 12000,
        "corpus too small: {v}"
    );
    assert_eq!(
        v["wrong"],
        serde_json::json!({}),
        "shapes that differ from onnx:\n{}",
        v["examples"]
    );
    let floor: u64 = std::fs::read_to_string(root.join("crates/cli/tests/shapes_floor.txt"))
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let matched = v["matched"].as_u64().unwrap();
    assert!(
        matched >= floor,
        "matched {matched} static shapes, below the floor {floor}"
    );
}
