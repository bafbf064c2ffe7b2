//! Kernels of the shape family (inference: `families/shape.rs`).

use crate::exec::{kernel, KResult, KernelDef, RunCx, Value};
use tensor::Tensor;

/// Identity: the input value, unchanged (tensors, sequences and optionals alike).
fn identity(cx: &RunCx) -> KResult<Vec<Value>> {
    let v = cx
        .value(0)
        .ok_or_else(|| cx.invalid("required input 0 is missing"))?;
    Ok(vec![v.clone()])
}

/// Constant: the one value attribute it carries.
fn constant(cx: &RunCx) -> KResult<Vec<Value>> {
    if let Some(t) = cx.attr_t("value")? {
        return Ok(vec![t.into()]);
    }
    if let Some(v) = cx.attr_f("value_float")? {
        return Ok(vec![Tensor::scalar(v).into()]);
    }
    if let Some(v) = cx.attr_floats("value_floats")? {
        return Ok(vec![Tensor::from_slice(vec![v.len()], v)?.into()]);
    }
    if let Some(v) = cx.attr_i("value_int")? {
        return Ok(vec![Tensor::scalar(v).into()]);
    }
    if let Some(v) = cx.attr_ints("value_ints")? {
        return Ok(vec![Tensor::from_slice(vec![v.len()], v)?.into()]);
    }
    if let Some(a) = cx.attr("value_string") {
        return Ok(vec![Tensor::from_strings(
            vec![],
            vec![bytes::Bytes::copy_from_slice(a.s())],
        )?
        .into()]);
    }
    if let Some(a) = cx.attr("value_strings") {
        return Ok(vec![Tensor::from_strings(
            vec![a.strings.len()],
            a.strings.clone(),
        )?
        .into()]);
    }
    if cx.attr("sparse_value").is_some() {
        return Err(cx.unsupported("sparse_value"));
    }
    Err(cx.invalid("Constant carries none of value, value_float(s), value_int(s), value_string(s)"))
}

pub const KERNELS: &[KernelDef] = &[
    kernel("Identity", 1, identity),
    kernel("Constant", 1, constant),
];
