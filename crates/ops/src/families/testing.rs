//! Helpers for the families' unit tests: build a node, run one infer function on it.

use crate::infer::{fixed, InferCx, InferError, Info};
use crate::{InferFn, Ty};
use onnx_proto::{AttributeProto, GraphProto, NodeProto};
use tensor::{DataType, Tensor};

/// An int attribute.
pub fn ai(name: &str, v: i64) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        i: Some(v),
        r#type: Some(2),
        ..Default::default()
    }
}
/// An ints attribute.
pub fn ais(name: &str, v: &[i64]) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        ints: v.to_vec(),
        r#type: Some(7),
        ..Default::default()
    }
}
/// A string attribute.
pub fn astr(name: &str, v: &str) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        s: Some(v.as_bytes().to_vec().into()),
        r#type: Some(3),
        ..Default::default()
    }
}
/// A graph attribute.
pub fn ag(name: &str, g: GraphProto) -> AttributeProto {
    AttributeProto {
        name: Some(name.into()),
        g: Some(g),
        r#type: Some(5),
        ..Default::default()
    }
}

pub fn node(op: &str, inputs: &[&str], outputs: &[&str], attrs: Vec<AttributeProto>) -> NodeProto {
    NodeProto {
        op_type: Some(op.into()),
        input: inputs.iter().map(|s| s.to_string()).collect(),
        output: outputs.iter().map(|s| s.to_string()).collect(),
        attribute: attrs,
        ..Default::default()
    }
}

/// A tensor type; a negative dim is unknown.
pub fn t(dtype: DataType, dims: &[i64]) -> Ty {
    Ty::tensor(
        Some(dtype),
        Some(
            dims.iter()
                .map(|&d| if d < 0 { None } else { fixed(d) })
                .collect(),
        ),
    )
}

/// A known int64 vector.
pub fn ints_info(v: &[i64]) -> Info {
    Info::known(Tensor::from_vec(vec![v.len()], v.to_vec()).unwrap())
}

/// A known int64 scalar.
pub fn int_scalar(v: i64) -> Info {
    Info::known(Tensor::scalar(v))
}

pub fn try_run(
    f: InferFn,
    n: &NodeProto,
    opset: i64,
    inputs: &[Option<&Info>],
) -> Result<Vec<Info>, InferError> {
    let mut cx = InferCx::new(n, opset, inputs.to_vec());
    f(&mut cx)?;
    Ok(cx.outputs)
}

pub fn run(f: InferFn, n: &NodeProto, opset: i64, inputs: &[Option<&Info>]) -> Vec<Info> {
    try_run(f, n, opset, inputs).unwrap()
}

/// Runs `f` with a subgraph callback that answers `answer` for every subgraph.
pub fn run_with_subgraph(
    f: InferFn,
    n: &NodeProto,
    opset: i64,
    inputs: &[Option<&Info>],
    answer: &dyn Fn(&GraphProto, &[Ty]) -> Vec<Ty>,
) -> Result<Vec<Info>, InferError> {
    let mut cx = InferCx::new(n, opset, inputs.to_vec());
    cx.subgraph = Some(answer);
    f(&mut cx)?;
    Ok(cx.outputs)
}
