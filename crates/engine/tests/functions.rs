//! Model-local functions: the body runs with the caller's inputs, attribute references resolve
//! to the caller's attributes (or the function's defaults), and a function body's node that
//! nothing can run is refused when the session is created.

use engine::{Capture, Session, Value};
use onnx_ir::Model;
use onnx_proto::{
    attribute_proto::AttributeType, AttributeProto, FunctionProto, GraphProto, ModelProto,
    NodeProto, OperatorSetIdProto, ValueInfoProto,
};
use tensor::Tensor;

fn opset(domain: &str, v: i64) -> OperatorSetIdProto {
    OperatorSetIdProto {
        domain: Some(domain.into()),
        version: Some(v),
    }
}

fn node(
    op: &str,
    domain: &str,
    inputs: &[&str],
    outputs: &[&str],
    attrs: Vec<AttributeProto>,
) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        domain: Some(domain.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

fn float_attr(name: &str, v: f32) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        r#type: Some(AttributeType::Float as i32),
        f: Some(v),
        ..Default::default()
    }
}

/// `y = LeakyRelu(x, alpha = caller's alpha or 0.5) * 2` as function `custom.Scaled`.
fn model(call_attrs: Vec<AttributeProto>, body_op: &str) -> Model {
    let alpha_ref = AttributeProto {
        name: Some("alpha".into()),
        r#type: Some(AttributeType::Float as i32),
        ref_attr_name: Some("alpha".into()),
        ..Default::default()
    };
    let two = onnx_proto::AttributeProto {
        name: Some("value".into()),
        r#type: Some(AttributeType::Tensor as i32),
        t: Some(Tensor::scalar(2.0f32).to_proto("two")),
        ..Default::default()
    };
    let f = FunctionProto {
        name: Some("Scaled".into()),
        domain: Some("custom".into()),
        input: vec!["X".into()],
        output: vec!["Y".into()],
        attribute_proto: vec![float_attr("alpha", 0.5)],
        opset_import: vec![opset("", 17)],
        node: vec![
            node(body_op, "", &["X"], &["L"], vec![alpha_ref]),
            node("Constant", "", &[], &["two"], vec![two]),
            node("Mul", "", &["L", "two"], &["Y"], vec![]),
        ],
        ..Default::default()
    };
    let g = GraphProto {
        name: Some("g".into()),
        node: vec![node("Scaled", "custom", &["x"], &["y"], call_attrs)],
        input: vec![ValueInfoProto {
            name: Some("x".into()),
            ..Default::default()
        }],
        output: vec![ValueInfoProto {
            name: Some("y".into()),
            ..Default::default()
        }],
        ..Default::default()
    };
    Model::from_proto(ModelProto {
        ir_version: Some(10),
        opset_import: vec![opset("", 17), opset("custom", 1)],
        graph: Some(g),
        functions: vec![f],
        ..Default::default()
    })
}

fn run(m: Model) -> Vec<f32> {
    let s = Session::new(m).unwrap();
    let x = Tensor::from_vec(vec![3], vec![-2.0f32, 0.0, 3.0]).unwrap();
    let out = s
        .run(vec![("x".into(), Value::Tensor(x))], &Capture::None)
        .unwrap();
    out.outputs[0]
        .1
        .as_tensor()
        .unwrap()
        .to_vec::<f32>()
        .unwrap()
}

#[test]
fn attribute_references_take_the_callers_value_or_the_default() {
    assert_eq!(
        run(model(vec![float_attr("alpha", 0.25)], "LeakyRelu")),
        vec![-1.0, 0.0, 6.0]
    );
    assert_eq!(run(model(vec![], "LeakyRelu")), vec![-2.0, 0.0, 6.0]);
}

#[test]
fn a_body_node_nothing_can_run_is_refused_at_session_creation() {
    let e = Session::new(model(vec![], "NoSuchOp"))
        .err()
        .expect("refused")
        .to_string();
    assert!(e.contains("unsupported: NoSuchOp v17"), "{e}");
    assert!(e.contains("function body of Scaled"), "{e}");
}
