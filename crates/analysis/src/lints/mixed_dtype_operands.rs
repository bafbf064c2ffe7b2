//! Flags Where, arithmetic, comparison and Concat nodes whose operands have different element types.
//!
//! ## What it does
//! Runs shape/type inference and, for each node of the main graph, compares the element types of
//! the inputs ONNX binds to one type parameter: both inputs of Add, Sub, Mul, Div, Mod, MatMul,
//! Equal, Less, Greater, LessOrEqual, GreaterOrEqual, And, Or, Xor, BitShift and Pow (before
//! opset 12, where base and exponent must match); the two branches of Where; every input of
//! Concat, Sum, Max, Min and Mean. A node is reported once, naming the first operand pair that
//! differs. A mismatch the spec check already reports on the same node (ODC040, from declared
//! types) is not repeated.
//!
//! ## Why is this bad?
//! ONNX has no implicit type promotion: the model is invalid, ONNX Runtime refuses to load it
//! ("Type parameter (T) of Optype (Add) bound to different types"), TensorRT and OpenVINO reject
//! the node. PyTorch promotes silently, so the export succeeds.
//!
//! ## Example
//! `x / x.shape[-1]` or `x + torch.arange(n)` mixes int64 index math with float;
//! `x * mask` with a bool mask; a custom symbolic that emits an int64 constant next to a float
//! tensor. The exporter then writes e.g. `Mul(float, int64)`.
//!
//! ## Fix
//! PyTorch side: cast explicitly before the op — `mask.to(x.dtype)`, `idx.float()`,
//! `torch.arange(n, dtype=x.dtype)`, or `torch.where(mask, x, y)` instead of mask arithmetic.
//! ONNX side: insert a Cast on the odd operand to the other operand's type.

use super::{module_suffix, node_label, push, Cx, Finding};
use crate::Code;
use diagnostics::{Location, Severity};
use onnx_proto::NodeProto;
use std::collections::HashSet;
use tensor::DataType;

/// Indices of the inputs that must share one element type, for the ops this rule checks.
fn same_type_inputs(n: &NodeProto, opset: i64) -> Option<Vec<usize>> {
    let all = || (0..n.input.len()).collect();
    Some(match n.op_type() {
        "Add" | "Sub" | "Mul" | "Div" | "Mod" | "MatMul" | "Equal" | "Less" | "Greater"
        | "LessOrEqual" | "GreaterOrEqual" | "And" | "Or" | "Xor" | "BitShift" => vec![0, 1],
        "Pow" if opset < 12 => vec![0, 1],
        "Where" => vec![1, 2],
        "Concat" | "Sum" | "Max" | "Min" | "Mean" => all(),
        _ => return None,
    })
}

fn dtype_name(t: DataType) -> &'static str {
    t.name()
}

fn is_int(t: DataType) -> bool {
    use DataType::*;
    matches!(
        t,
        Int8 | Int16 | Int32 | Int64 | Uint8 | Uint16 | Uint32 | Uint64
    )
}

/// The likely PyTorch cause for a pair of differing element types.
fn cause(a: DataType, b: DataType) -> &'static str {
    if a == DataType::Bool || b == DataType::Bool {
        "likely a bool mask used in arithmetic (`x * mask`)"
    } else if is_int(a) != is_int(b) {
        "likely int64 index or shape math mixed with float (`x / x.shape[-1]`, `torch.arange(n)` without dtype)"
    } else {
        "likely operands of mixed precision or integer width meeting without a cast"
    }
}

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    let g = cx.model.graph();
    let mut hits = Vec::new();
    for (i, n) in g.node.iter().enumerate() {
        if !super::default_domain(n) {
            continue;
        }
        let Some(idx) = same_type_inputs(n, cx.opset) else {
            continue;
        };
        let values = &cx.inference().values;
        let typed: Vec<(usize, &str, DataType)> = idx
            .into_iter()
            .filter_map(|k| {
                let name = n.input.get(k).filter(|s| !s.is_empty())?;
                Some((k, name.as_str(), values.get(name)?.ty.dtype()?))
            })
            .collect();
        let Some(first) = typed.first() else {
            continue;
        };
        if let Some(odd) = typed.iter().find(|t| t.2 != first.2) {
            hits.push((i, n, *first, *odd));
        }
    }
    if hits.is_empty() {
        return;
    }
    // Nodes the spec check already reports a type-parameter conflict on (from declared types).
    let checked: HashSet<(&str, &str)> = cx
        .spec()
        .iter()
        .filter(|d| d.code == Code::TypeConstraintViolated.code())
        .filter_map(|d| match &d.location {
            Location::Node { node, op, .. } => Some((node.as_str(), op.as_str())),
            _ => None,
        })
        .collect();
    for (i, n, (ka, a, ta), (kb, b, tb)) in hits {
        let check_label = if n.name().is_empty() {
            format!("#{i}")
        } else {
            n.name().to_string()
        };
        if checked.contains(&(check_label.as_str(), n.op_type())) {
            continue;
        }
        push(
            out,
            None,
            Code::MixedDtypeOperands,
            Severity::Error,
            cx.node_location(n),
            format!(
                "{}{}: input {ka} '{a}' is {} but input {kb} '{b}' is {}; {} requires one element type for these operands ({})",
                node_label(n),
                module_suffix(n),
                dtype_name(ta),
                dtype_name(tb),
                n.op_type(),
                cause(ta, tb)
            ),
            format!(
                "cast explicitly in PyTorch (`.to(x.dtype)`, `torch.arange(n, dtype=x.dtype)`), or insert a Cast to {} on input {kb} '{b}'",
                dtype_name(ta)
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::{fixture::*, lint};
    use onnx_proto::{
        tensor_proto::DataType, tensor_shape_proto, type_proto, TensorShapeProto, TypeProto,
        ValueInfoProto,
    };

    pub(super) fn input(name: &str, t: DataType) -> ValueInfoProto {
        ValueInfoProto {
            name: Some(name.into()),
            r#type: Some(TypeProto {
                value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                    elem_type: Some(t as i32),
                    shape: Some(TensorShapeProto {
                        dim: vec![tensor_shape_proto::Dimension {
                            value: Some(tensor_shape_proto::dimension::Value::DimValue(4)),
                            ..Default::default()
                        }],
                    }),
                })),
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    pub(super) fn with_inputs(
        nodes: Vec<onnx_proto::NodeProto>,
        inputs: Vec<ValueInfoProto>,
    ) -> onnx_ir::Model {
        let mut m = model(17, nodes, vec![]);
        m.proto.graph.as_mut().unwrap().input = inputs;
        onnx_ir::Model::from_proto(m.proto)
    }

    fn odt035(m: &onnx_ir::Model) -> Vec<(String, String)> {
        lint(m, "m.onnx", &[])
            .into_iter()
            .filter(|f| f.diagnostic.code == "ODT035")
            .map(|f| {
                let at = match f.diagnostic.location {
                    diagnostics::Location::Node { node, .. } => node,
                    _ => String::new(),
                };
                (at, f.diagnostic.message)
            })
            .collect()
    }

    /// `ConstantOfShape(Shape(x))` with an int64 or bool `value` (what `torch.ones_like(x,
    /// dtype=torch.long)` or a `torch.full(..., True)` mask export to): the spec check cannot type
    /// ConstantOfShape's output from its attribute, shape inference can.
    fn filled(name: &str, value: onnx_proto::TensorProto, out: &str) -> onnx_proto::NodeProto {
        let mut n = node("ConstantOfShape", name, &["shp"], &[out]);
        n.attribute.push(onnx_proto::AttributeProto {
            name: Some("value".into()),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::Tensor as i32),
            t: Some(value),
            ..Default::default()
        });
        n
    }

    fn hazard() -> onnx_ir::Model {
        let mut concat = node("Concat", "/cat/Concat", &["x", "ones"], &["c"]);
        concat.attribute.push(attr_i("axis", 0));
        with_inputs(
            vec![
                node("Shape", "/Shape", &["x"], &["shp"]),
                filled("/pos/ConstantOfShape", int64("v", &[1]), "ones"),
                filled("/mask/ConstantOfShape", bool_scalar("b", true), "mask"),
                node("Div", "/enc/attn/Div", &["x", "ones"], &["d"]),
                node("Mul", "/mask/Mul", &["x", "mask"], &["y"]),
                node("Where", "/sel/Where", &["mask", "x", "ones"], &["w"]),
                concat,
                // Clean: same types, and Pow(float, int64) is legal from opset 12.
                node("Add", "/ok/Add", &["x", "x"], &["s"]),
                node("Pow", "/ok/Pow", &["x", "ones"], &["p"]),
                node("Where", "/ok/Where", &["mask", "x", "s"], &["w2"]),
            ],
            vec![input("x", DataType::Float)],
        )
    }

    #[test]
    fn mismatched_operands_are_errors_on_their_nodes() {
        let f = odt035(&hazard());
        let at: Vec<&str> = f.iter().map(|f| f.0.as_str()).collect();
        assert_eq!(
            at,
            vec!["/enc/attn/Div", "/mask/Mul", "/sel/Where", "/cat/Concat"]
        );
        assert!(
            f[0].1
                .contains("input 0 'x' is float but input 1 'ones' is int64"),
            "{}",
            f[0].1
        );
        assert!(f[0].1.contains("enc.attn") && f[0].1.contains("index or shape math"));
        assert!(f[1].1.contains("bool mask"), "{}", f[1].1);
        let all = lint(&hazard(), "m.onnx", &[]);
        assert!(all
            .iter()
            .filter(|f| f.diagnostic.code == "ODT035")
            .all(|f| f.target.is_none() && f.diagnostic.severity.as_str() == "error"));
    }

    #[test]
    fn matching_operands_are_clean() {
        let m = with_inputs(
            vec![
                node("Relu", "/a/Relu", &["x"], &["xr"]),
                node("Add", "/a/Add", &["x", "xr"], &["s"]),
                node("Less", "/a/Less", &["s", "x"], &["l"]),
                node("Where", "/a/Where", &["l", "s", "x"], &["w"]),
            ],
            vec![input("x", DataType::Float)],
        );
        assert!(odt035(&m).is_empty());
    }

    #[test]
    fn mismatches_the_spec_check_reports_are_not_repeated() {
        // Both operands declared: ODC040 from the spec check names the node already.
        let m = with_inputs(
            vec![node("Add", "/a/Add", &["x", "i"], &["s"])],
            vec![input("x", DataType::Float), input("i", DataType::Int64)],
        );
        let check = crate::check(&m, "m.onnx", &Default::default());
        assert!(check.iter().any(|d| d.code == "ODC040"), "{check:?}");
        assert!(odt035(&m).is_empty());
        // The hazard model's mismatches need ConstantOfShape's `value`: the checker is silent.
        let check = crate::check(&hazard(), "m.onnx", &Default::default());
        let odc040: Vec<_> = check.iter().filter(|d| d.code == "ODC040").collect();
        assert!(odc040.is_empty(), "{odc040:?}");
    }
}
