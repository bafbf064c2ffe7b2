//! Running one registered kernel on literal inputs, for the kernels' unit tests.

pub use super::NoSubgraphs;
use super::{lookup, KResult, RunCx, Value};
use onnx_proto::{AttributeProto, NodeProto};
use tensor::Tensor;

/// Runs the ai.onnx kernel of `op` at `opset` with `attrs` on `inputs` (`None` = omitted),
/// declaring `outputs` outputs.
pub fn run_values(
    op: &str,
    opset: i64,
    inputs: &[Option<Value>],
    outputs: usize,
    attrs: Vec<AttributeProto>,
) -> KResult<Vec<Value>> {
    let node = NodeProto {
        op_type: Some(op.to_string()),
        input: inputs
            .iter()
            .enumerate()
            .map(|(i, v)| {
                if v.is_some() {
                    format!("i{i}")
                } else {
                    String::new()
                }
            })
            .collect(),
        output: (0..outputs).map(|i| format!("o{i}")).collect(),
        attribute: attrs,
        ..Default::default()
    };
    let refs: Vec<Option<&Value>> = inputs.iter().map(|v| v.as_ref()).collect();
    let def = lookup("", op, opset).unwrap_or_else(|| panic!("no kernel for {op} v{opset}"));
    (def.run)(&RunCx::new(&node, opset, &refs, &NoSubgraphs))
}

/// [`run_values`] with tensor inputs.
pub fn run(
    op: &str,
    opset: i64,
    inputs: &[Option<Tensor>],
    outputs: usize,
    attrs: Vec<AttributeProto>,
) -> KResult<Vec<Value>> {
    let values: Vec<Option<Value>> = inputs
        .iter()
        .map(|t| t.clone().map(Value::Tensor))
        .collect();
    run_values(op, opset, &values, outputs, attrs)
}
