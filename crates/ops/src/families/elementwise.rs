//! Element-wise ops: unary (same type and shape), binary and variadic with numpy broadcasting,
//! comparisons and logic (bool results), Where, Clip. Integer Add/Sub/Mul/Div/Max/Min also
//! propagate known values, so shape arithmetic (`batch*3`, `seq+1`) stays exact.
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (each op's section).

use crate::infer::{broadcast, InferCx, InferError, Info, Known, Shape};
use crate::sym::SymDim;
use crate::{op, OpDef};
use tensor::DataType;

fn same_as_input(cx: &mut InferCx) -> Result<(), InferError> {
    cx.pass_through(0, 0);
    Ok(())
}

fn bool_same_shape(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = cx.shape(0).cloned();
    cx.set_tensor(0, Some(DataType::Bool), shape);
    Ok(())
}

/// The broadcast shape of every given input (None if any rank is unknown).
fn broadcast_all(cx: &InferCx) -> Result<Option<Shape>, InferError> {
    if cx.opset < 7 {
        // Before opset 7, `broadcast=1` stretched B over A along `axis`: the output is A's shape.
        return Ok(cx.shape(0).cloned());
    }
    let mut out: Shape = Vec::new();
    for i in 0..cx.num_inputs() {
        if !cx.has_input(i) {
            continue;
        }
        match cx.shape(i) {
            Some(s) => out = broadcast(&out, s)?,
            None => return Ok(None),
        }
    }
    Ok(Some(out))
}

fn first_dtype(cx: &InferCx) -> Option<DataType> {
    (0..cx.num_inputs()).find_map(|i| cx.dtype(i))
}

fn broadcast_same_type(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = broadcast_all(cx)?;
    let dtype = cx.dtype(0).or_else(|| first_dtype(cx));
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn broadcast_bool(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = broadcast_all(cx)?;
    cx.set_tensor(0, Some(DataType::Bool), shape);
    Ok(())
}

/// Add, Sub, Mul, Div: broadcast, then compute the value when both operands are known ints.
fn arithmetic(
    cx: &mut InferCx,
    f: fn(&SymDim, &SymDim) -> Option<SymDim>,
) -> Result<(), InferError> {
    broadcast_same_type(cx)?;
    if !cx.dtype(0).is_some_and(|d| d.is_int()) {
        return Ok(());
    }
    let (Some(a), Some(b)) = (cx.dims_value(0), cx.dims_value(1)) else {
        return Ok(());
    };
    let scalar = cx.rank(0) == Some(0) && cx.rank(1) == Some(0);
    let n = a.len().max(b.len());
    if !(a.len() == n || a.len() == 1) || !(b.len() == n || b.len() == 1) {
        return Ok(());
    }
    let pick = |v: &Shape, i: usize| v[if v.len() == 1 { 0 } else { i }].clone();
    let dims: Shape = (0..n)
        .map(|i| match (pick(&a, i), pick(&b, i)) {
            (Some(x), Some(y)) => f(&x, &y),
            _ => None,
        })
        .collect();
    if cx.dtype(0) == Some(DataType::Int64) {
        cx.set_info(0, Info::dims(dims, scalar));
    } else if let Some(o) = cx.outputs.get_mut(0) {
        o.value = Some(Known::Dims { scalar, dims });
    }
    Ok(())
}

fn add(cx: &mut InferCx) -> Result<(), InferError> {
    arithmetic(cx, |a, b| Some(a.add(b)))
}
fn sub(cx: &mut InferCx) -> Result<(), InferError> {
    arithmetic(cx, |a, b| Some(a.sub(b)))
}
fn mul(cx: &mut InferCx) -> Result<(), InferError> {
    arithmetic(cx, |a, b| Some(a.mul(b)))
}
fn div(cx: &mut InferCx) -> Result<(), InferError> {
    arithmetic(cx, |a, b| match (a.as_known(), b.as_known()) {
        // Integer Div truncates toward zero.
        (Some(x), Some(y)) if y != 0 => Some(SymDim::known(x / y)),
        _ => a.div_exact(b),
    })
}

fn where_(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = broadcast_all(cx)?;
    let dtype = cx.dtype(1).or(cx.dtype(2));
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

/// Pow: the base's type, broadcast shape.
fn pow(cx: &mut InferCx) -> Result<(), InferError> {
    let shape = broadcast_all(cx)?;
    let dtype = cx.dtype(0);
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("Abs", 1, same_as_input),
    op("Acos", 7, same_as_input),
    op("Acosh", 9, same_as_input),
    op("Asin", 7, same_as_input),
    op("Asinh", 9, same_as_input),
    op("Atan", 7, same_as_input),
    op("Atanh", 9, same_as_input),
    op("Ceil", 1, same_as_input),
    op("Cos", 7, same_as_input),
    op("Cosh", 9, same_as_input),
    op("Erf", 9, same_as_input),
    op("Exp", 1, same_as_input),
    op("Floor", 1, same_as_input),
    op("Log", 1, same_as_input),
    op("Neg", 1, same_as_input),
    op("Reciprocal", 1, same_as_input),
    op("Relu", 1, same_as_input),
    op("Round", 11, same_as_input),
    op("Sigmoid", 1, same_as_input),
    op("Sign", 9, same_as_input),
    op("Sin", 7, same_as_input),
    op("Sinh", 9, same_as_input),
    op("Sqrt", 1, same_as_input),
    op("Tan", 7, same_as_input),
    op("Tanh", 1, same_as_input),
    op("Softplus", 1, same_as_input),
    op("Softsign", 1, same_as_input),
    op("Elu", 1, same_as_input),
    op("Selu", 1, same_as_input),
    op("Celu", 12, same_as_input),
    op("LeakyRelu", 1, same_as_input),
    op("HardSigmoid", 1, same_as_input),
    op("HardSwish", 14, same_as_input),
    op("ThresholdedRelu", 10, same_as_input),
    op("Mish", 18, same_as_input),
    op("Gelu", 20, same_as_input),
    op("Swish", 24, same_as_input),
    op("Shrink", 9, same_as_input),
    op("BitwiseNot", 18, same_as_input),
    op("Not", 1, same_as_input),
    op("Clip", 1, same_as_input),
    op("IsNaN", 9, bool_same_shape),
    op("IsInf", 10, bool_same_shape),
    op("Add", 1, add),
    op("Sub", 1, sub),
    op("Mul", 1, mul),
    op("Div", 1, div),
    op("Pow", 1, pow),
    op("Mod", 10, broadcast_same_type),
    op("BitShift", 11, broadcast_same_type),
    op("BitwiseAnd", 18, broadcast_same_type),
    op("BitwiseOr", 18, broadcast_same_type),
    op("BitwiseXor", 18, broadcast_same_type),
    op("PRelu", 1, broadcast_same_type),
    op("Max", 1, broadcast_same_type),
    op("Min", 1, broadcast_same_type),
    op("Sum", 1, broadcast_same_type),
    op("Mean", 1, broadcast_same_type),
    op("Equal", 1, broadcast_bool),
    op("Less", 1, broadcast_bool),
    op("Greater", 1, broadcast_bool),
    op("LessOrEqual", 12, broadcast_bool),
    op("GreaterOrEqual", 12, broadcast_bool),
    op("And", 1, broadcast_bool),
    op("Or", 1, broadcast_bool),
    op("Xor", 1, broadcast_bool),
    op("Where", 9, where_),
];
