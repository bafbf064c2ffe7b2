//! `check --target` and `targets`, end to end on models built with onnx.helper.

mod common;

use common::{run, stderr, stdout};
use std::process::Command;

/// Writes a small valid model with one Unique and one NonZero node (scoped PyTorch-style names)
/// at opset 13 and returns its path.
fn hazard_model(dir: &std::path::Path) -> String {
    let path = dir.join("hazards.onnx");
    let script = r#"
import sys, onnx
from onnx import helper as h, TensorProto as T
x = h.make_tensor_value_info("x", T.FLOAT, [4])
y = h.make_tensor_value_info("y", T.FLOAT, ["u"])
i = h.make_tensor_value_info("i", T.INT64, [1, "n"])
nodes = [
    h.make_node("Unique", ["x"], ["y"], name="/enc/layer.0/Unique"),
    h.make_node("NonZero", ["x"], ["i"], name="/enc/mask/NonZero"),
]
g = h.make_graph(nodes, "g", [x], [y, i])
m = h.make_model(g, opset_imports=[h.make_opsetid("", 13)])
onnx.checker.check_model(m, full_check=True)
onnx.save(m, sys.argv[1])
"#;
    let o = Command::new("python3")
        .args(["-c", script, path.to_str().unwrap()])
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    path.to_str().unwrap().to_string()
}

#[test]
fn targets_lists_every_profile_with_sources() {
    let o = run(&["targets"]);
    assert_eq!(o.status.code(), Some(0), "{}", stderr(&o));
    let out = stdout(&o);
    for name in [
        "onnxruntime-cpu",
        "tensorrt-8.6",
        "tensorrt-10",
        "openvino",
        "ncnn",
        "tract",
    ] {
        assert!(out.contains(&format!("{name}  ")), "{name} missing:\n{out}");
    }
    assert!(
        out.contains("https://github.com/onnx/onnx-tensorrt/"),
        "{out}"
    );
    assert!(out.contains("https://github.com/Tencent/ncnn/"), "{out}");
    assert!(out.contains("https://github.com/sonos/tract/"), "{out}");
    let o = run(&["targets", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    for p in v.as_array().unwrap() {
        // ncnn's onnx2ncnn converts ~70 op types; every other profile lists more than 100.
        assert!(p["ops"].as_u64().unwrap() > 60, "{p}");
        assert!(!p["sources"].as_array().unwrap().is_empty());
    }
}

#[test]
fn unique_fails_on_tensorrt_and_runs_on_onnxruntime() {
    let dir = tempfile::tempdir().unwrap();
    let path = hazard_model(dir.path());
    let o = run(&["check", &path]);
    assert_eq!(
        o.status.code(),
        Some(0),
        "plain check: {}{}",
        stdout(&o),
        stderr(&o)
    );
    let o = run(&["check", &path, "--target", "tensorrt-8.6,onnxruntime-cpu"]);
    assert_eq!(o.status.code(), Some(1), "{}{}", stdout(&o), stderr(&o));
    let out = stdout(&o);
    assert!(out.contains("ODT001"), "{out}");
    assert!(out.contains("PyTorch module `enc.layer.0`"), "{out}");
    let table: Vec<&str> = out.lines().rev().take(2).collect();
    assert_eq!(
        table,
        vec!["onnxruntime-cpu  runs", "tensorrt-8.6     will fail"],
        "{out}"
    );

    let o = run(&[
        "check",
        &path,
        "--target",
        "tensorrt-8.6",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let diags = v["diagnostics"].as_array().unwrap();
    let unique = diags
        .iter()
        .find(|d| d["code"] == "ODT001")
        .expect("ODT001 in JSON");
    assert_eq!(unique["target"], "tensorrt-8.6");
    assert_eq!(unique["location"]["node"], "/enc/layer.0/Unique");
    assert_eq!(unique["location"]["op"], "Unique");
    let nonzero = diags.iter().find(|d| d["code"] == "ODT020").unwrap();
    assert_eq!(nonzero["severity"], "warning");
    assert_eq!(v["targets"][0]["verdict"], "will fail");

    // SARIF carries the target in each result's property bag.
    let o = run(&[
        "check",
        &path,
        "--target",
        "tensorrt-8.6",
        "--format",
        "sarif",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    let results = v["runs"][0]["results"].as_array().unwrap();
    let unique = results.iter().find(|r| r["ruleId"] == "ODT001").unwrap();
    assert_eq!(unique["properties"]["target"], "tensorrt-8.6");
    assert_eq!(unique["properties"]["node"], "/enc/layer.0/Unique");
    assert_eq!(unique["properties"]["op_type"], "Unique");
    assert!(unique["properties"]["help"].is_string());
    assert!(results.iter().all(|r| r["properties"]
        .as_object()
        .is_some_and(|p| p.contains_key("target"))));
}

#[test]
fn clean_example_runs_everywhere_and_unknown_targets_are_usage_errors() {
    let o = run(&[
        "check",
        "examples/tiny_cnn.onnx",
        "--target",
        "all",
        "--format",
        "json",
    ]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(o.status.code(), Some(0), "{v}");
    for t in v["targets"].as_array().unwrap() {
        assert_ne!(t["verdict"], "will fail", "{v}");
    }
    for d in v["diagnostics"].as_array().unwrap() {
        assert!(d.get("target").is_some(), "{d}");
    }
    let o = run(&["check", "examples/tiny_cnn.onnx", "--target", "tensorrt-7"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(
        stderr(&o).contains("unknown target 'tensorrt-7'"),
        "{}",
        stderr(&o)
    );
}

/// A Reshape of `x[batch,3,4]` to the constant `[b,12]` (b = 2: the export batch baked in, or -1),
/// with the output declared `[batch,12]`.
fn reshape_model(dir: &std::path::Path, b: i64) -> String {
    let path = dir.join(format!("reshape_{b}.onnx"));
    let script = r#"
import sys, onnx, numpy as np
from onnx import helper as h, TensorProto as T, numpy_helper as nh
x = h.make_tensor_value_info("x", T.FLOAT, ["batch", 3, 4])
y = h.make_tensor_value_info("y", T.FLOAT, ["batch", 12])
shape = nh.from_array(np.array([int(sys.argv[2]), 12], dtype=np.int64), "shape")
n = h.make_node("Reshape", ["x", "shape"], ["y"], name="/encoder/view/Reshape")
m = h.make_model(h.make_graph([n], "g", [x], [y], [shape]), opset_imports=[h.make_opsetid("", 17)])
onnx.checker.check_model(m, full_check=True)
onnx.save(m, sys.argv[1])
"#;
    let o = Command::new("python3")
        .args(["-c", script, path.to_str().unwrap(), &b.to_string()])
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    path.to_str().unwrap().to_string()
}

#[test]
fn baked_batch_is_an_error_and_minus_one_is_clean_on_every_target() {
    let dir = tempfile::tempdir().unwrap();
    let baked = reshape_model(dir.path(), 2);
    let o = run(&["check", &baked, "--target", "all", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(o.status.code(), Some(1), "{v}");
    let d = v["diagnostics"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["code"] == "ODT033")
        .expect("ODT033");
    assert_eq!(d["severity"], "error");
    assert_eq!(d["location"]["node"], "/encoder/view/Reshape");
    assert!(d["target"].is_null());
    let names: Vec<&str> = v["targets"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["target"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"ncnn") && names.contains(&"tract"), "{v}");
    let clean = reshape_model(dir.path(), -1);
    let o = run(&["check", &clean, "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(o.status.code(), Some(0), "{v}");
    assert!(!v.to_string().contains("ODT033"), "{v}");
}

/// `x * torch.ones_like(x, dtype=torch.long)` as exported: Mul(float, ConstantOfShape int64),
/// the Mul carrying dynamo metadata (name scopes, a stack trace with a torch/ frame innermost).
fn mixed_dtype_model(dir: &std::path::Path) -> String {
    let path = dir.join("mixed.onnx");
    let script = r#"
import sys, onnx, numpy as np
from onnx import helper as h, TensorProto as T, numpy_helper as nh
x = h.make_tensor_value_info("x", T.FLOAT, ["batch", 4])
y = h.make_tensor_value_info("y", T.FLOAT, ["batch", 4])
shape = h.make_node("Shape", ["x"], ["shp"], name="node_shape")
ones = h.make_node("ConstantOfShape", ["shp"], ["ones"], name="node_ones",
                   value=nh.from_array(np.array([1], dtype=np.int64)))
mul = h.make_node("Mul", ["x", "ones"], ["y"], name="node_mul")
for k, v in [("pkg.torch.onnx.name_scopes", "['', 'head', 'head.scale', 'mul']"),
             ("pkg.torch.onnx.stack_trace",
              'File "/src/proj/model.py", line 7, in forward\n    return self.scale(x)\n'
              '  File "/src/proj/scale.py", line 21, in forward\n    return x * torch.ones_like(x, dtype=torch.long)\n'
              '  File "/py/site-packages/torch/_tensor.py", line 41, in wrapped\n    return f(*args)')]:
    e = mul.metadata_props.add(); e.key = k; e.value = v
m = h.make_model(h.make_graph([shape, ones, mul], "g", [x], [y]), opset_imports=[h.make_opsetid("", 17)])
onnx.save(m, sys.argv[1])
"#;
    let o = Command::new("python3")
        .args(["-c", script, path.to_str().unwrap()])
        .output()
        .expect("python3");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    path.to_str().unwrap().to_string()
}

#[test]
fn mixed_operand_dtypes_fail_everywhere_and_name_the_pytorch_source() {
    let dir = tempfile::tempdir().unwrap();
    let m = mixed_dtype_model(dir.path());
    let o = run(&["check", &m, "--target", "all", "--format", "json"]);
    let v: serde_json::Value = serde_json::from_str(&stdout(&o)).unwrap();
    assert_eq!(o.status.code(), Some(1), "{v}");
    let diags = v["diagnostics"].as_array().unwrap();
    let d: Vec<_> = diags.iter().filter(|d| d["code"] == "ODT035").collect();
    assert_eq!(d.len(), 1, "{v}");
    assert_eq!(d[0]["severity"], "error");
    assert_eq!(d[0]["location"]["node"], "node_mul");
    assert!(d[0]["target"].is_null());
    let msg = d[0]["message"].as_str().unwrap();
    for part in [
        "'x' is float",
        "'ones' is int64",
        "PyTorch module `head.scale`, at /src/proj/scale.py:21",
    ] {
        assert!(msg.contains(part), "{msg}");
    }
    assert!(
        !diags.iter().any(|d| d["code"] == "ODC040"),
        "the spec check does not see this one: {v}"
    );
    assert!(
        v["targets"]
            .as_array()
            .unwrap()
            .iter()
            .all(|t| t["verdict"] == "will fail"),
        "{v}"
    );
}

#[test]
fn a_closed_stdout_is_not_a_panic() {
    use std::process::{Command, Stdio};
    let mut child = Command::new(env!("CARGO_BIN_EXE_onnx-doctor"))
        .args(["targets", "--format", "json"])
        .current_dir(common::workspace())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before reading anything, like `| head -0`.
    drop(child.stdout.take());
    let out = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
}
