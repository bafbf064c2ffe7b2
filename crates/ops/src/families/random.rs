//! Random generators and their `*Like` forms: RandomUniform, RandomNormal (shape and dtype from
//! attributes), RandomUniformLike, RandomNormalLike, Bernoulli (the input's shape; dtype from the
//! attribute, else the input's), Multinomial (`[batch, sample_size]`).
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (each op's section).

use crate::infer::{fixed, show, InferCx, InferError};
use crate::{bail, op, OpDef};
use tensor::DataType;

fn dtype_attr(cx: &InferCx) -> Option<Option<DataType>> {
    cx.attr_i("dtype").map(|d| DataType::from_onnx(d as i32))
}

fn like(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = dtype_attr(cx).unwrap_or_else(|| cx.dtype(0));
    let shape = cx.shape(0).cloned();
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn generator(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = dtype_attr(cx).unwrap_or(Some(DataType::Float));
    let Some(shape) = cx.attr_ints("shape") else {
        bail!("{} has no 'shape' attribute", cx.node.op_type())
    };
    if let Some(d) = shape.iter().find(|&&d| d < 0) {
        bail!("{} shape has a negative dim {d}", cx.node.op_type());
    }
    cx.set_tensor(0, dtype, Some(shape.iter().map(|&d| fixed(d)).collect()));
    Ok(())
}

fn multinomial(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = dtype_attr(cx).unwrap_or(Some(DataType::Int32));
    let samples = cx.attr_i("sample_size").unwrap_or(1);
    let shape = match cx.shape(0) {
        Some(s) if s.len() != 2 => bail!(
            "Multinomial input must be [batch_size, class_size], got {}",
            show(s)
        ),
        Some(s) => Some(vec![s[0].clone(), fixed(samples)]),
        None => Some(vec![None, fixed(samples)]),
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("RandomUniform", 1, generator),
    op("RandomNormal", 1, generator),
    op("RandomUniformLike", 1, like),
    op("RandomNormalLike", 1, like),
    op("Bernoulli", 15, like),
    op("Multinomial", 7, multinomial),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::testing::{ai, ais, node, run, t};
    use crate::infer::Info;

    #[test]
    fn dtype_from_attribute_else_input() {
        let x = Info::of(t(DataType::Double, &[2, 3]));
        let n = node("RandomUniformLike", &["x"], &["y"], vec![]);
        assert_eq!(
            run(like, &n, 22, &[Some(&x)])[0].ty,
            t(DataType::Double, &[2, 3])
        );
        let n = node("Bernoulli", &["x"], &["y"], vec![ai("dtype", 9)]);
        assert_eq!(
            run(like, &n, 22, &[Some(&x)])[0].ty,
            t(DataType::Bool, &[2, 3])
        );
        let n = node("RandomNormal", &[], &["y"], vec![ais("shape", &[4, 5])]);
        assert_eq!(
            run(generator, &n, 22, &[])[0].ty,
            t(DataType::Float, &[4, 5])
        );
        let n = node("Multinomial", &["x"], &["y"], vec![ai("sample_size", 7)]);
        assert_eq!(
            run(multinomial, &n, 22, &[Some(&x)])[0].ty,
            t(DataType::Int32, &[2, 7])
        );
    }
}
