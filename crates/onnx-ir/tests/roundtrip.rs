//! Load → save → load keeps everything, checked against the onnx package itself: every node-test
//! model and every model test of the onnx package is saved inline and with external data, and one
//! python process compares each saved model with the original (`onnx.load` equality) and runs
//! `onnx.checker.check_model` on every saved model whose original it accepts.

mod common;

use onnx_ir::{ExternalPolicy, Model, SaveOptions};
use onnx_proto::Message;
use std::io::Write;
use std::process::{Command, Stdio};

/// A model that uses every container the format has: doc strings, metadata_props on model, graph
/// and node, value_info, a sparse initializer, a subgraph with its own initializer, a model-local
/// function with a tensor attribute, and training info.
fn everything_model(dir: &std::path::Path) -> std::path::PathBuf {
    use onnx_proto::*;
    let meta = |k: &str, v: &str| StringStringEntryProto {
        key: Some(k.into()),
        value: Some(v.into()),
    };
    let tensor = |name: &str, n: usize| TensorProto {
        name: Some(name.into()),
        dims: vec![n as i64],
        data_type: Some(1),
        raw_data: Some(bytes::Bytes::from(
            (0..n * 4).map(|i| i as u8).collect::<Vec<u8>>(),
        )),
        doc_string: Some(format!("doc of {name}")),
        ..Default::default()
    };
    let vinfo = |name: &str| ValueInfoProto {
        name: Some(name.into()),
        r#type: Some(TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(1),
                shape: Some(TensorShapeProto {
                    dim: vec![tensor_shape_proto::Dimension {
                        value: Some(tensor_shape_proto::dimension::Value::DimParam("n".into())),
                        denotation: Some("DATA_BATCH".into()),
                    }],
                }),
            })),
            denotation: None,
        }),
        doc_string: Some(format!("doc of {name}")),
        metadata_props: vec![meta("vk", "vv")],
    };
    let attr_t = |name: &str, t: TensorProto| AttributeProto {
        name: Some(name.into()),
        r#type: Some(attribute_proto::AttributeType::Tensor as i32),
        t: Some(t),
        ..Default::default()
    };
    let node =
        |op: &str, name: &str, ins: &[&str], outs: &[&str], attribute: Vec<AttributeProto>| {
            NodeProto {
                op_type: Some(op.into()),
                name: Some(name.into()),
                input: ins.iter().map(|s| s.to_string()).collect(),
                output: outs.iter().map(|s| s.to_string()).collect(),
                attribute,
                doc_string: Some(format!("doc of node {name}")),
                metadata_props: vec![meta("pkg.torch.onnx.stack_trace", "model.py:3")],
                ..Default::default()
            }
        };
    let then_branch = GraphProto {
        name: Some("then".into()),
        node: vec![node("Add", "then_add", &["x", "k"], &["t_out"], vec![])],
        initializer: vec![tensor("k", 300)],
        output: vec![vinfo("t_out")],
        ..Default::default()
    };
    let else_branch = GraphProto {
        name: Some("else".into()),
        node: vec![node(
            "Constant",
            "else_c",
            &[],
            &["e_out"],
            vec![attr_t("value", tensor("c", 300))],
        )],
        output: vec![vinfo("e_out")],
        ..Default::default()
    };
    let if_attrs = vec![
        AttributeProto {
            name: Some("then_branch".into()),
            r#type: Some(5),
            g: Some(then_branch),
            ..Default::default()
        },
        AttributeProto {
            name: Some("else_branch".into()),
            r#type: Some(5),
            g: Some(else_branch),
            ..Default::default()
        },
    ];
    let graph = GraphProto {
        name: Some("everything".into()),
        doc_string: Some("graph doc".into()),
        node: vec![
            node("If", "if", &["cond"], &["y"], if_attrs),
            node("Scale", "local", &["y"], &["z"], vec![]),
        ],
        initializer: vec![tensor("w", 400), tensor("small", 2)],
        sparse_initializer: vec![SparseTensorProto {
            values: Some(tensor("sp", 3)),
            indices: Some(TensorProto {
                name: Some("sp_i".into()),
                dims: vec![3],
                data_type: Some(7),
                int64_data: vec![0, 5, 9],
                ..Default::default()
            }),
            dims: vec![10],
        }],
        input: vec![vinfo("x"), vinfo("cond")],
        output: vec![vinfo("z")],
        value_info: vec![vinfo("y")],
        metadata_props: vec![meta("gk", "gv")],
        ..Default::default()
    };
    let function = FunctionProto {
        name: Some("Scale".into()),
        domain: Some("local".into()),
        input: vec!["a".into()],
        output: vec!["b".into()],
        node: vec![
            node(
                "Constant",
                "f_c",
                &[],
                &["s"],
                vec![attr_t("value", tensor("s", 64))],
            ),
            node("Mul", "f_mul", &["a", "s"], &["b"], vec![]),
        ],
        opset_import: vec![OperatorSetIdProto {
            domain: Some(String::new()),
            version: Some(21),
        }],
        doc_string: Some("function doc".into()),
        ..Default::default()
    };
    let model = ModelProto {
        ir_version: Some(10),
        opset_import: vec![
            OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(21),
            },
            OperatorSetIdProto {
                domain: Some("local".into()),
                version: Some(1),
            },
        ],
        producer_name: Some("onnx-doctor-test".into()),
        producer_version: Some("1".into()),
        domain: Some("org.example".into()),
        model_version: Some(7),
        doc_string: Some("model doc".into()),
        graph: Some(graph),
        metadata_props: vec![meta("author", "tests")],
        training_info: vec![TrainingInfoProto {
            initialization: Some(GraphProto {
                name: Some("init".into()),
                initializer: vec![tensor("seed", 8)],
                ..Default::default()
            }),
            algorithm: Some(GraphProto {
                name: Some("algo".into()),
                ..Default::default()
            }),
            initialization_binding: vec![meta("w", "seed")],
            update_binding: vec![meta("w", "w")],
        }],
        functions: vec![function],
        ..Default::default()
    };
    let path = dir.join("everything.onnx");
    std::fs::write(&path, model.encode_to_vec()).unwrap();
    path
}

#[test]
fn every_corpus_model_round_trips_and_onnx_agrees() {
    let out = tempfile::tempdir().unwrap();
    let mut models: Vec<_> = common::node_models()
        .into_iter()
        .chain(common::package_models())
        .collect();
    models.push(everything_model(out.path()));
    let mut pairs = String::new();
    for (i, path) in models.iter().enumerate() {
        let model = Model::load(path).unwrap_or_else(|e| panic!("{e}"));
        for (kind, policy) in [
            ("inline", ExternalPolicy::Never),
            ("external", ExternalPolicy::Always),
        ] {
            let dir = out.path().join(format!("{i}-{kind}"));
            std::fs::create_dir(&dir).unwrap();
            let saved = dir.join("model.onnx");
            let options = SaveOptions {
                external: policy,
                threshold: 16,
                data_file: None,
            };
            model
                .save(&saved, &options)
                .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            // Our own reload sees the same proto.
            let again = Model::load(&saved).unwrap_or_else(|e| panic!("{e}"));
            // Bytes, not PartialEq: NaN attributes compare unequal to themselves.
            assert!(
                again.proto.encode_to_vec() == model.proto.encode_to_vec(),
                "{} ({kind}) changed on reload",
                path.display()
            );
            pairs.push_str(&format!("{}\t{}\n", path.display(), saved.display()));
        }
    }
    let script = common::workspace().join("crates/onnx-ir/tests/roundtrip_check.py");
    let mut child = Command::new("python3")
        .arg(script)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("python3");
    child
        .stdin
        .take()
        .unwrap()
        .write_all(pairs.as_bytes())
        .unwrap();
    let result = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&result.stdout);
    println!("{stdout}");
    assert!(
        result.status.success(),
        "onnx disagrees with our saved models:\n{stdout}\n{}",
        String::from_utf8_lossy(&result.stderr)
    );
}

#[test]
fn external_data_is_written_aligned_and_read_back() {
    let path = common::workspace().join("examples/tiny_cnn.onnx");
    let model = Model::load(&path).unwrap();
    assert!(model.external.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("cnn.onnx");
    let opts = SaveOptions {
        external: ExternalPolicy::Always,
        threshold: 100,
        data_file: Some("weights.bin".into()),
    };
    let report = model.save(&saved, &opts).unwrap();
    let (data_path, count, _) = report.external.expect("tensors went external");
    assert_eq!(data_path, dir.path().join("weights.bin"));
    let big = model
        .graph()
        .initializer
        .iter()
        .filter(|t| t.raw_data.as_ref().unwrap().len() >= 100)
        .count();
    assert_eq!(count, big);
    let again = Model::load(&saved).unwrap();
    assert_eq!(again.external.len(), big);
    assert!(again
        .external
        .iter()
        .all(|e| e.location == "weights.bin" && e.offset % 64 == 0));
    assert_eq!(again.proto, model.proto);
    // Auto keeps a model that came with external data external.
    let resaved = dir.path().join("again.onnx");
    let report = again.save(&resaved, &SaveOptions::default()).unwrap();
    assert_eq!(
        report.external.unwrap().0,
        dir.path().join("again.onnx.data")
    );
    // No temp files are left behind.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains(".tmp-")), "{names:?}");
}
