//! Folding elementwise chains into Conv/MatMul/Gemm (`fuse.rs`, `ops::exec::epilogue`) changes
//! no value: on every committed PyTorch export, a run with fusion (no capture) gives bit for bit
//! the outputs of a run without it (capturing every intermediate turns fusion off), and the
//! networks built of such chains do fold them.

use engine::{Capture, Session, Value};
use onnx_ir::{Dim, ElemType, Model, ValueType};
use std::path::Path;
use tensor::{DataType, Tensor};

fn seeded_input(ty: &ValueType, seed: &mut u64) -> Value {
    let ValueType::Tensor {
        elem: ElemType::Known(dt),
        shape: Some(shape),
    } = ty
    else {
        panic!("test models declare tensor inputs with shapes, got {ty:?}");
    };
    let dims: Vec<usize> = shape
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => *n as usize,
            _ => 2,
        })
        .collect();
    let n: usize = dims.iter().product();
    let mut next = || {
        *seed ^= *seed << 13;
        *seed ^= *seed >> 7;
        *seed ^= *seed << 17;
        (*seed >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
    };
    let t = match dt {
        DataType::Float => Tensor::from_vec(dims, (0..n).map(|_| next()).collect::<Vec<f32>>()),
        DataType::Int64 => Tensor::from_vec(
            dims,
            (0..n)
                .map(|_| (next().abs() * 3.0) as i64)
                .collect::<Vec<i64>>(),
        ),
        DataType::Bool => {
            Tensor::from_vec(dims, (0..n).map(|_| next() > 0.0).collect::<Vec<bool>>())
        }
        other => panic!("no seeded input for {other}"),
    };
    Value::Tensor(t.unwrap())
}

fn bits(v: &Value) -> Vec<u32> {
    match v {
        Value::Tensor(t) if t.dtype() == DataType::Float => t
            .to_vec::<f32>()
            .unwrap()
            .into_iter()
            .map(f32::to_bits)
            .collect(),
        other => panic!("expected float outputs, got {}", other.describe()),
    }
}

#[test]
fn fused_runs_match_unfused_runs_bit_for_bit() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/models");
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.join("model.onnx").is_file())
        .collect();
    dirs.sort();
    assert!(
        dirs.len() >= 20,
        "the PyTorch exports are missing from {root:?}"
    );
    let mut folded = Vec::new();
    for dir in dirs {
        let name = dir.file_name().unwrap().to_string_lossy().into_owned();
        let session = Session::new(Model::load(dir.join("model.onnx")).unwrap()).unwrap();
        let mut seed = 0x2545_F491_4F6C_DD1Du64;
        let inputs: Vec<(String, Value)> = session
            .inputs()
            .into_iter()
            .filter(|s| !s.has_initializer)
            .map(|s| (s.name.clone(), seeded_input(&s.ty.0, &mut seed)))
            .collect();
        let fused = session.run(inputs.clone(), &Capture::None).unwrap();
        let plain = session.run(inputs, &Capture::All).unwrap();
        for ((n, a), (_, b)) in fused.outputs.iter().zip(&plain.outputs) {
            assert!(bits(a) == bits(b), "{name}: output {n} differs with fusion");
        }
        folded.push((name, session.fused_nodes()));
    }
    eprintln!("folded per model: {folded:?}");
    let count = |m: &str| folded.iter().find(|(n, _)| n == m).map_or(0, |f| f.1);
    // Conv+Relu chains; Conv+HardSwish/Relu/HardSigmoid; MatMul+bias+GELU in each block.
    assert!(count("cnn_ts") >= 2, "{folded:?}");
    assert!(count("mobilenet_v3_small_ts") >= 20, "{folded:?}");
    assert!(count("tiny_vit_ts") >= 6, "{folded:?}");
}

/// `y = op(x)`-style nodes over float values of `shape`, as a model with the given
/// initializers (opset 17).
fn model(
    nodes: Vec<onnx_proto::NodeProto>,
    inputs: &[(&str, &[i64])],
    output: &str,
    inits: Vec<onnx_proto::TensorProto>,
) -> Model {
    use onnx_proto::{
        tensor_shape_proto::{dimension, Dimension},
        type_proto, GraphProto, ModelProto, OperatorSetIdProto, TensorShapeProto, TypeProto,
        ValueInfoProto,
    };
    let vi = |name: &str, dims: &[i64]| ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(DataType::Float.onnx_code()),
                shape: Some(TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            value: Some(dimension::Value::DimValue(d)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }),
        ..Default::default()
    };
    Model::from_proto(ModelProto {
        ir_version: Some(8),
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(17),
        }],
        graph: Some(GraphProto {
            name: Some("g".into()),
            node: nodes,
            input: inputs.iter().map(|(n, d)| vi(n, d)).collect(),
            output: vec![onnx_proto::ValueInfoProto {
                name: Some(output.into()),
                ..Default::default()
            }],
            initializer: inits,
            ..Default::default()
        }),
        ..Default::default()
    })
}

fn node(op: &str, inputs: &[&str], output: &str) -> onnx_proto::NodeProto {
    onnx_proto::NodeProto {
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: vec![output.into()],
        ..Default::default()
    }
}

/// An [8, 6] float32 initializer `w` of small distinct values.
fn weight_8x6() -> onnx_proto::TensorProto {
    Tensor::from_vec(
        vec![8, 6],
        (0..48)
            .map(|i| (i as f32 - 20.0) * 0.05)
            .collect::<Vec<f32>>(),
    )
    .unwrap()
    .to_proto("w")
}

#[test]
fn silu_and_a_partial_chain_fold_bit_for_bit() {
    let w = weight_8x6();
    // MatMul → SiLU (Sigmoid + Mul reading the MatMul) → Add of an input of a larger rank,
    // which only the Add node can broadcast: the kernel folds the prefix, the Add runs.
    let m = model(
        vec![
            node("MatMul", &["x", "w"], "mm"),
            node("Sigmoid", &["mm"], "s"),
            node("Mul", &["mm", "s"], "silu"),
            node("Add", &["silu", "big"], "y"),
        ],
        &[("x", &[4, 8]), ("big", &[3, 4, 6])],
        "y",
        vec![w],
    );
    let mut session = Session::new(m).unwrap();
    assert_eq!(session.fused_nodes(), 3, "Sigmoid, Mul and Add are planned");
    session.enable_profile();
    let mut seed = 7u64;
    let x = seeded_input(&session.inputs()[0].ty.0, &mut seed);
    let big = seeded_input(&session.inputs()[1].ty.0, &mut seed);
    let inputs = vec![("x".to_string(), x), ("big".to_string(), big)];
    let fused = session.run(inputs.clone(), &Capture::None).unwrap();
    let steps = session.take_profile();
    let plain = session.run(inputs, &Capture::All).unwrap();
    assert_eq!(fused.outputs[0].1.as_tensor().unwrap().shape(), [3, 4, 6]);
    assert!(bits(&fused.outputs[0].1) == bits(&plain.outputs[0].1));
    // The fused run's MatMul step took in the Sigmoid and Mul (nodes 1, 2); the Add ran.
    assert_eq!(steps.len(), 2, "{steps:?}");
    assert_eq!((steps[0].node, steps[0].fused.clone()), (0, vec![1, 2]));
    assert_eq!((steps[1].node, steps[1].fused.len()), (3, 0));
}

#[test]
fn constant_nodes_run_once_and_change_no_value() {
    let w = weight_8x6();
    let zero = Tensor::from_vec(vec![], vec![0f32])
        .unwrap()
        .to_proto("zero");
    let scale = Tensor::from_vec(vec![6], vec![0.5f32, 1.0, 1.5, 2.0, 2.5, 3.0])
        .unwrap()
        .to_proto("");
    let mut constant = node("Constant", &[], "c");
    constant.attribute.push(onnx_proto::AttributeProto {
        name: Some("value".into()),
        r#type: Some(onnx_proto::attribute_proto::AttributeType::Tensor as i32),
        t: Some(scale),
        ..Default::default()
    });
    // Identity of an initializer, a Constant and their product (nodes 0-2) read nothing that
    // changes between runs; the random node (4) must run every time.
    let m = model(
        vec![
            node("Identity", &["w"], "wi"),
            constant,
            node("Mul", &["wi", "c"], "wc"),
            node("MatMul", &["x", "wc"], "mm"),
            node("RandomUniformLike", &["mm"], "r"),
            node("Mul", &["r", "zero"], "r0"),
            node("Add", &["mm", "r0"], "y"),
        ],
        &[("x", &[4, 8])],
        "y",
        vec![w, zero],
    );
    let mut session = Session::new(m).unwrap();
    session.enable_profile();
    let mut seed = 11u64;
    let x = seeded_input(&session.inputs()[0].ty.0, &mut seed);
    let inputs = vec![("x".to_string(), x)];
    let first = session.run(inputs.clone(), &Capture::None).unwrap();
    let second = session.run(inputs.clone(), &Capture::None).unwrap();
    let steps = session.take_profile();
    let plain = session.run(inputs, &Capture::All).unwrap();
    assert!(bits(&first.outputs[0].1) == bits(&plain.outputs[0].1));
    assert!(bits(&second.outputs[0].1) == bits(&plain.outputs[0].1));
    let ran: Vec<usize> = steps.iter().map(|s| s.node).collect();
    assert!(ran.iter().all(|&n| n > 2), "constant nodes ran: {ran:?}");
    assert_eq!(ran.iter().filter(|&&n| n == 4).count(), 2, "{ran:?}");
    // A run capturing intermediates still sees (and runs) every node.
    let names: Vec<&str> = plain.captured.iter().map(|(n, _)| n.as_str()).collect();
    for v in ["wi", "c", "wc"] {
        assert!(names.contains(&v), "{v} not captured: {names:?}");
    }
}
