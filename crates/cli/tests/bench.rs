//! `onnx-doctor bench`, end to end: the JSON report and its statistics, inputs from files or
//! random, and the errors for a backend this build lacks or a model the engine cannot run.

mod common;

use common::{run, stderr, stdout};
use onnx_proto::{
    tensor_shape_proto::{dimension, Dimension},
    type_proto, GraphProto, Message, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto,
    TypeProto, ValueInfoProto,
};
use std::path::{Path, PathBuf};
use tensor::Tensor;

fn vi(name: &str, dims: &[dimension::Value]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(tensor::DataType::Float.onnx_code()),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|d| Dimension {
                            value: Some(d.clone()),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// `y = op(x)` with x: float[batch, 64].
fn write_model(dir: &Path, op: &str) -> PathBuf {
    let dims = [
        dimension::Value::DimParam("batch".into()),
        dimension::Value::DimValue(64),
    ];
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            name: Some("bench".into()),
            input: vec![vi("x", &dims)],
            output: vec![vi("y", &dims)],
            node: vec![NodeProto {
                op_type: Some(op.into()),
                name: Some(format!("the_{op}")),
                input: vec!["x".into()],
                output: vec!["y".into()],
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    };
    let path = dir.join(format!("{op}.onnx"));
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

fn json(o: &std::process::Output) -> serde_json::Value {
    assert!(o.status.success(), "{}", stderr(o));
    serde_json::from_str(&stdout(o)).unwrap_or_else(|e| panic!("{e}: {}", stdout(o)))
}

fn num(doc: &serde_json::Value, key: &str) -> f64 {
    doc[key]
        .as_f64()
        .unwrap_or_else(|| panic!("'{key}' is not a number in {doc}"))
}

/// Every documented field, with the latency statistics in order.
fn check_report(doc: &serde_json::Value, backend: &str, runs: u64, warmup: u64, threads: u64) {
    assert_eq!(doc["backend"], backend);
    assert_eq!(doc["runs"], runs);
    assert_eq!(doc["warmup"], warmup);
    assert_eq!(doc["threads"], threads);
    let stats: Vec<f64> = ["min_ms", "median_ms", "p90_ms", "p99_ms", "max_ms"]
        .iter()
        .map(|k| num(doc, k))
        .collect();
    assert!(stats[0] > 0.0, "{doc}");
    assert!(
        stats.windows(2).all(|w| w[0] <= w[1]),
        "min <= median <= p90 <= p99 <= max: {stats:?}"
    );
    let mean = num(doc, "mean_ms");
    assert!(stats[0] <= mean && mean <= stats[4], "{doc}");
    let throughput = num(doc, "throughput_per_s");
    assert!(
        (throughput - 1e3 / mean).abs() <= 1e-6 * throughput,
        "throughput is runs per second of timed running: {doc}"
    );
    assert!(num(doc, "load_ms") > 0.0, "{doc}");
    if cfg!(target_os = "linux") {
        assert!(num(doc, "peak_rss_mib") > 1.0, "{doc}");
    }
}

#[test]
fn json_report_has_ordered_statistics() {
    let tmp = tempfile::tempdir().unwrap();
    let model = write_model(tmp.path(), "Identity");
    let o = run(&[
        "bench",
        model.to_str().unwrap(),
        "--random-inputs",
        "--dim",
        "batch=8",
        "--runs",
        "3",
        "--warmup",
        "1",
        "--format",
        "json",
    ]);
    let doc = json(&o);
    check_report(&doc, "native", 3, 1, 1);
    assert_eq!(doc["threads_effective"], 1);
    assert_eq!(doc["inputs"][0]["shape"], serde_json::json!([8, 64]));
}

#[test]
fn profile_reports_steps_per_op_and_node() {
    let tmp = tempfile::tempdir().unwrap();
    let model = write_model(tmp.path(), "Relu");
    let args = |fmt: &str| {
        run(&[
            "bench",
            model.to_str().unwrap(),
            "--dim",
            "batch=4",
            "--runs",
            "4",
            "--warmup",
            "1",
            "--profile",
            "--format",
            fmt,
        ])
    };
    let doc = json(&args("json"));
    let p = &doc["profile"];
    assert_eq!(p["ops"][0]["ops"], "Relu", "{doc}");
    // One step per run, reported per run.
    assert_eq!(p["ops"][0]["steps"], 1.0, "{doc}");
    assert_eq!(p["nodes"][0]["node"], "the_Relu", "{doc}");
    assert!(
        num(p, "total_ms") > 0.0 && num(p, "total_ms") <= num(&doc, "max_ms"),
        "{doc}"
    );
    let human = args("human");
    assert!(human.status.success(), "{}", stderr(&human));
    let out = stdout(&human);
    assert!(
        out.contains("time per op type") && out.contains("the_Relu (Relu)"),
        "{out}"
    );
    // Without --profile the field is there, and null.
    let plain = json(&run(&[
        "bench",
        model.to_str().unwrap(),
        "--runs",
        "1",
        "--format",
        "json",
    ]));
    assert!(plain["profile"].is_null(), "{plain}");
}

#[test]
fn the_corpus_identity_model_benches() {
    // The model the brief names; generated by scripts/test.sh, so skipped where it is absent.
    let model = common::workspace().join("corpus/node/test_identity/model.onnx");
    if !model.is_file() {
        eprintln!("skipped: {} is missing", model.display());
        return;
    }
    let input = model.with_file_name("test_data_set_0");
    let o = run(&[
        "bench",
        model.to_str().unwrap(),
        "--input-dir",
        input.to_str().unwrap(),
        "--runs",
        "3",
        "--warmup",
        "1",
        "--format",
        "json",
    ]);
    check_report(&json(&o), "native", 3, 1, 1);
}

#[test]
fn inputs_from_npy_and_threads_in_human_output() {
    let tmp = tempfile::tempdir().unwrap();
    let model = write_model(tmp.path(), "Identity");
    let x = Tensor::from_vec(vec![2, 64], (0..128).map(|i| i as f32).collect()).unwrap();
    let npy = tmp.path().join("x.npy");
    tensor::npy::write(&npy, &x).unwrap();
    let o = run(&[
        "bench",
        model.to_str().unwrap(),
        "--input",
        &format!("x={}", npy.display()),
        "--runs",
        "2",
        "--threads",
        "2",
    ]);
    assert!(o.status.success(), "{}", stderr(&o));
    let out = stdout(&o);
    for want in [
        "backend native",
        "median",
        "p99",
        "throughput",
        "peak RSS",
        "load",
    ] {
        assert!(out.contains(want), "'{want}' missing from:\n{out}");
    }
    assert!(out.contains("2 thread(s)"), "{out}");
    assert!(!stderr(&o).contains("note:"), "{}", stderr(&o));
}

#[test]
fn wrong_input_shape_is_a_usage_error() {
    let tmp = tempfile::tempdir().unwrap();
    let model = write_model(tmp.path(), "Identity");
    let x = Tensor::from_vec(vec![2, 3], vec![0f32; 6]).unwrap();
    let npy = tmp.path().join("x.npy");
    tensor::npy::write(&npy, &x).unwrap();
    let o = run(&[
        "bench",
        model.to_str().unwrap(),
        "--input",
        &format!("x={}", npy.display()),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(stderr(&o).contains("input 'x'"), "{}", stderr(&o));
}

#[test]
fn a_model_the_engine_cannot_run_names_the_node() {
    let tmp = tempfile::tempdir().unwrap();
    let model = write_model(tmp.path(), "NoSuchOp");
    let o = run(&["bench", model.to_str().unwrap(), "--format", "json"]);
    assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
    assert!(stderr(&o).contains("the_NoSuchOp"), "{}", stderr(&o));
    assert!(stdout(&o).is_empty());
}

#[test]
fn peers_not_compiled_in_name_their_cargo_feature() {
    let tmp = tempfile::tempdir().unwrap();
    let model = write_model(tmp.path(), "Identity");
    for (backend, compiled) in [
        ("ort", cfg!(feature = "ort")),
        ("tract", cfg!(feature = "tract")),
    ] {
        if compiled {
            continue;
        }
        let o = run(&["bench", model.to_str().unwrap(), "--backend", backend]);
        assert_eq!(o.status.code(), Some(2), "{}", stderr(&o));
        let err = stderr(&o);
        assert!(
            err.contains(&format!("--features {backend}")) && err.contains("not compiled"),
            "{err}"
        );
    }
}

#[cfg(feature = "ort")]
#[test]
fn ort_backend_reports_its_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let model = write_model(tmp.path(), "Identity");
    let o = run(&[
        "bench",
        model.to_str().unwrap(),
        "--backend",
        "ort",
        "--threads",
        "2",
        "--runs",
        "3",
        "--warmup",
        "1",
        "--format",
        "json",
    ]);
    let doc = json(&o);
    check_report(&doc, "ort", 3, 1, 2);
    assert_eq!(doc["threads_effective"], 2);
}

#[cfg(feature = "tract")]
#[test]
fn tract_backend_reports_its_threads() {
    let tmp = tempfile::tempdir().unwrap();
    let model = write_model(tmp.path(), "Identity");
    let o = run(&[
        "bench",
        model.to_str().unwrap(),
        "--backend",
        "tract",
        "--threads",
        "2",
        "--runs",
        "3",
        "--warmup",
        "1",
        "--format",
        "json",
    ]);
    let doc = json(&o);
    check_report(&doc, "tract", 3, 1, 2);
    assert_eq!(doc["threads_effective"], 2);
}
