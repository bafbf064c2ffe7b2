//! Linear quantization: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear. The shape is
//! the input's; the element type is what changes between versions:
//! - QuantizeLinear: y_zero_point's type, else (opset 21 on) `output_dtype`, else uint8.
//! - DequantizeLinear: float before opset 19; then x_scale's type, or (opset 23 on)
//!   `output_dtype` when set.
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (each op's section).

use crate::infer::{InferCx, InferError};
use crate::{op, OpDef};
use tensor::DataType;

fn quantize_linear(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = cx.shape(0).cloned();
    let dtype = if cx.has_input(2) {
        cx.dtype(2)
    } else {
        match cx
            .attr_i("output_dtype")
            .filter(|&d| d != 0 && cx.opset >= 21)
        {
            Some(d) => DataType::from_onnx(d as i32),
            None => Some(DataType::Uint8),
        }
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn dequantize_linear(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = cx.shape(0).cloned();
    let dtype = if cx.opset < 19 {
        Some(DataType::Float)
    } else {
        match cx
            .attr_i("output_dtype")
            .filter(|&d| d != 0 && cx.opset >= 23)
        {
            Some(d) => DataType::from_onnx(d as i32),
            None => cx.dtype(1),
        }
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

/// y (uint8, x's shape), y_scale (float scalar), y_zero_point (uint8 scalar).
fn dynamic_quantize_linear(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = cx.shape(0).cloned();
    cx.set_tensor(0, Some(DataType::Uint8), shape);
    cx.set_tensor(1, Some(DataType::Float), Some(vec![]));
    cx.set_tensor(2, Some(DataType::Uint8), Some(vec![]));
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("QuantizeLinear", 10, quantize_linear),
    op("DequantizeLinear", 10, dequantize_linear),
    op("DynamicQuantizeLinear", 11, dynamic_quantize_linear),
];

#[cfg(test)]
mod tests {
    use super::super::norm::test_util::*;
    use super::*;

    #[test]
    fn element_types_by_version() {
        let x = f32s(&[2, 3]);
        let s = f32s(&[]);
        let out = run(quantize_linear, 13, &[x.clone(), s.clone()], 1, vec![]).unwrap();
        assert_eq!(out[0].dtype(), Some(DataType::Uint8));
        let out = run(
            quantize_linear,
            13,
            &[x.clone(), s.clone(), t(DataType::Int8, &[])],
            1,
            vec![],
        )
        .unwrap();
        assert_eq!(out[0].dtype(), Some(DataType::Int8));
        let out = run(
            quantize_linear,
            21,
            &[x, s],
            1,
            vec![("output_dtype", A::I(3))],
        )
        .unwrap();
        assert_eq!(out[0].dtype(), Some(DataType::Int8));
        let q = t(DataType::Int8, &[2, 3]);
        let h = t(DataType::Float16, &[]);
        assert_eq!(
            run(dequantize_linear, 13, &[q.clone(), h.clone()], 1, vec![]).unwrap()[0].dtype(),
            Some(DataType::Float)
        );
        assert_eq!(
            run(dequantize_linear, 19, &[q.clone(), h.clone()], 1, vec![]).unwrap()[0].dtype(),
            Some(DataType::Float16)
        );
        assert_eq!(
            run(
                dequantize_linear,
                23,
                &[q, h],
                1,
                vec![("output_dtype", A::I(1))]
            )
            .unwrap()[0]
                .dtype(),
            Some(DataType::Float)
        );
    }
}
