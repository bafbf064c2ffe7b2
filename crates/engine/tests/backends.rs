//! The backends behind `onnx-doctor bench` agree with the native engine on a model built here
//! from ops every backend runs (Identity per element type), and compute an Add the native engine
//! may not have yet: each peer only with its cargo feature (`cargo test -p engine --features ort`,
//! `--features tract`).

use engine::backend::{self, Backend, BackendKind};
use engine::Value;
use onnx_ir::Model;
use onnx_proto::{
    tensor_shape_proto::{dimension, Dimension},
    type_proto, GraphProto, Message, ModelProto, NodeProto, OperatorSetIdProto, TensorShapeProto,
    TypeProto, ValueInfoProto,
};
use std::path::{Path, PathBuf};
use tensor::{DataType, Tensor};

fn vi(name: &str, dtype: DataType, shape: &[usize]) -> ValueInfoProto {
    ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(dtype.onnx_code()),
                shape: Some(TensorShapeProto {
                    dim: shape
                        .iter()
                        .map(|&d| Dimension {
                            value: Some(dimension::Value::DimValue(d as i64)),
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

fn node(op: &str, inputs: &[&str], output: &str) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        name: Some(format!("{op}_{output}")),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        ..Default::default()
    }
}

/// The element types every backend converts.
const TYPES: [DataType; 8] = [
    DataType::Float,
    DataType::Double,
    DataType::Float16,
    DataType::Int64,
    DataType::Int32,
    DataType::Int8,
    DataType::Uint8,
    DataType::Bool,
];

/// `y_<type> = Identity(x_<type>)` for each type, and with `add`, `sum = Add(a, b)` in float.
fn write_model(dir: &Path, add: bool) -> PathBuf {
    let mut graph = GraphProto {
        name: Some("backends".into()),
        ..Default::default()
    };
    for (i, &t) in TYPES.iter().enumerate() {
        let shape = [2, 3 + i];
        graph.input.push(vi(&format!("x_{}", t.name()), t, &shape));
        graph.output.push(vi(&format!("y_{}", t.name()), t, &shape));
        graph.node.push(node(
            "Identity",
            &[&format!("x_{}", t.name())],
            &format!("y_{}", t.name()),
        ));
    }
    if add {
        graph.input.push(vi("a", DataType::Float, &[2, 4]));
        graph.input.push(vi("b", DataType::Float, &[4]));
        graph.output.push(vi("sum", DataType::Float, &[2, 4]));
        graph.node.push(node("Add", &["a", "b"], "sum"));
    }
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        producer_name: Some("onnx-doctor-test".into()),
        graph: Some(graph),
        ..Default::default()
    };
    let path = dir.join(if add { "add.onnx" } else { "identity.onnx" });
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

fn inputs(add: bool) -> Vec<(String, Value)> {
    let mut v = Vec::new();
    for (i, &t) in TYPES.iter().enumerate() {
        let shape = vec![2, 3 + i];
        let n = shape.iter().product::<usize>();
        let x = |k: usize| (k as f64 * 0.37).sin() * 5.0;
        let tensor = match t {
            DataType::Float => Tensor::from_vec(shape, (0..n).map(|k| x(k) as f32).collect()),
            DataType::Double => Tensor::from_vec(shape, (0..n).map(x).collect()),
            DataType::Float16 => {
                Tensor::from_vec(shape, (0..n).map(|k| half::f16::from_f64(x(k))).collect())
            }
            DataType::Int64 => Tensor::from_vec(shape, (0..n).map(|k| x(k) as i64 - 1).collect()),
            DataType::Int32 => Tensor::from_vec(shape, (0..n).map(|k| x(k) as i32 + 7).collect()),
            DataType::Int8 => Tensor::from_vec(shape, (0..n).map(|k| x(k) as i8).collect()),
            DataType::Uint8 => Tensor::from_vec(shape, (0..n).map(|k| (k * 37) as u8).collect()),
            DataType::Bool => Tensor::from_vec(shape, (0..n).map(|k| k % 3 == 0).collect()),
            _ => unreachable!(),
        }
        .unwrap();
        v.push((format!("x_{}", t.name()), Value::Tensor(tensor)));
    }
    if add {
        let a = Tensor::from_vec(vec![2, 4], (0..8).map(|k| k as f32 * 0.5).collect()).unwrap();
        let b = Tensor::from_vec(vec![4], vec![1.0f32, -2.0, 0.25, 10.0]).unwrap();
        v.push(("a".into(), Value::Tensor(a)));
        v.push(("b".into(), Value::Tensor(b)));
    }
    v
}

fn open(kind: BackendKind, path: &Path, threads: usize) -> Box<dyn Backend> {
    let model = Model::load(path).unwrap();
    backend::open(kind, path, model, threads).unwrap_or_else(|e| panic!("{}: {e}", kind.name()))
}

fn tensor(v: &Value) -> &Tensor {
    match v {
        Value::Tensor(t) => t,
        other => panic!("expected a tensor, got {}", other.describe()),
    }
}

#[cfg_attr(not(any(feature = "ort", feature = "tract")), allow(dead_code))]
/// Runs `kind` and the native engine on the same inputs: same output names in graph order,
/// same types, shapes and bytes (Identity is exact everywhere). Then `kind` alone on the model
/// with an Add: Identity outputs equal their inputs, and the sum is right.
fn agrees_with_native(kind: BackendKind, threads: usize) {
    let dir = tempfile::tempdir().unwrap();
    let path = write_model(dir.path(), false);
    let ins = inputs(false);
    let mut native = open(BackendKind::Native, &path, 1);
    let mut peer = open(kind, &path, threads);
    assert_eq!(peer.name(), kind.name());
    assert_eq!(peer.threads(), threads);
    peer.prepare(&ins).unwrap();
    let want = native.run(&ins).unwrap();
    for _ in 0..2 {
        let got = peer.run(&ins).unwrap();
        same(&got, &want);
    }

    let path = write_model(dir.path(), true);
    let ins = inputs(true);
    let mut peer = open(kind, &path, threads);
    peer.prepare(&ins).unwrap();
    let got = peer.run(&ins).unwrap();
    assert_eq!(got.len(), TYPES.len() + 1);
    for ((out, y), (_, x)) in got.iter().zip(&ins).take(TYPES.len()) {
        assert_eq!(tensor(y).dtype(), tensor(x).dtype(), "{out}");
        assert_eq!(tensor(y).shape(), tensor(x).shape(), "{out}");
        assert_eq!(tensor(y).bytes(), tensor(x).bytes(), "{out}");
    }
    let (name, sum) = got.last().unwrap();
    assert_eq!(name, "sum");
    assert_eq!(
        tensor(sum).to_vec::<f32>().unwrap(),
        vec![1.0, -1.5, 1.25, 11.5, 3.0, 0.5, 3.25, 13.5]
    );
}

/// Same names in the same order, same types, shapes and bytes.
fn same(got: &[(String, Value)], want: &[(String, Value)]) {
    let names = |v: &[(String, Value)]| v.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(names(got), names(want));
    for ((name, g), (_, w)) in got.iter().zip(want) {
        let (g, w) = (tensor(g), tensor(w));
        assert_eq!(g.dtype(), w.dtype(), "{name}");
        assert_eq!(g.shape(), w.shape(), "{name}");
        assert_eq!(g.bytes(), w.bytes(), "{name}");
    }
}

#[cfg_attr(not(any(feature = "ort", feature = "tract")), allow(dead_code))]
/// A type outside the converted set is refused with an error naming the value and the type.
fn refuses_other_types(kind: BackendKind) {
    let dir = tempfile::tempdir().unwrap();
    let graph = GraphProto {
        name: Some("u16".into()),
        input: vec![vi("x", DataType::Uint16, &[2])],
        output: vec![vi("y", DataType::Uint16, &[2])],
        node: vec![node("Identity", &["x"], "y")],
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(graph),
        ..Default::default()
    };
    let path = dir.path().join("u16.onnx");
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    let x = Tensor::from_vec(vec![2], vec![1u16, 2]).unwrap();
    let ins = vec![("x".to_string(), Value::Tensor(x))];
    let mut peer = open(kind, &path, 1);
    let err = peer
        .prepare(&ins)
        .and_then(|_| peer.run(&ins).map(|_| ()))
        .expect_err("uint16 is not converted");
    let msg = err.to_string();
    assert!(msg.contains("'x'") && msg.contains("uint16"), "{msg}");
}

#[test]
fn native_backend_runs_on_the_threads_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_model(dir.path(), false);
    let mut native = open(BackendKind::Native, &path, 4);
    assert_eq!((native.name(), native.threads()), ("native", 4));
    let ins = inputs(false);
    let out = native.run(&ins).unwrap();
    same(
        &out,
        &ins.iter()
            .map(|(n, v)| (n.replacen("x_", "y_", 1), v.clone()))
            .collect::<Vec<_>>(),
    );
}

#[test]
fn peers_without_their_feature_name_it() {
    for kind in [BackendKind::Ort, BackendKind::Tract] {
        if kind.compiled() {
            continue;
        }
        let dir = tempfile::tempdir().unwrap();
        let path = write_model(dir.path(), false);
        let model = Model::load(&path).unwrap();
        let err = backend::open(kind, &path, model, 1).err().unwrap();
        let msg = err.to_string();
        assert!(
            msg.contains(&format!("--features {}", kind.name())),
            "{msg}"
        );
    }
}

#[cfg(feature = "ort")]
#[test]
fn ort_agrees_with_native() {
    agrees_with_native(BackendKind::Ort, 1);
    agrees_with_native(BackendKind::Ort, 2);
    refuses_other_types(BackendKind::Ort);
}

#[cfg(feature = "tract")]
#[test]
fn tract_agrees_with_native() {
    agrees_with_native(BackendKind::Tract, 1);
    agrees_with_native(BackendKind::Tract, 2);
    refuses_other_types(BackendKind::Tract);
}

#[cfg(all(feature = "ort", feature = "tract"))]
#[test]
fn ort_and_tract_agree() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_model(dir.path(), true);
    let mut ort = open(BackendKind::Ort, &path, 2);
    let mut tract = open(BackendKind::Tract, &path, 2);
    let ins = inputs(true);
    tract.prepare(&ins).unwrap();
    same(&ort.run(&ins).unwrap(), &tract.run(&ins).unwrap());
}
