//! The training preview domain `ai.onnx.preview.training`: Adagrad, Adam, Momentum. Inputs are
//! `R, T`, then groups of n tensors (X, G, then the optimizer's state: H for Adagrad, V for
//! Momentum, V and H for Adam); outputs are the new X and state groups, each typed like its input.
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (each op's section).

use crate::infer::{InferCx, InferError};
use crate::{bail, OpDef, VersionRange};

const TRAINING: &str = "ai.onnx.preview.training";

const fn training(name: &'static str, infer: crate::InferFn) -> OpDef {
    OpDef {
        domain: TRAINING,
        name,
        versions: VersionRange {
            since: 1,
            until: None,
        },
        infer,
    }
}

/// `groups` = number of n-tensor input groups after R, T (X, G and the states); outputs are X's
/// group and every state group (every input group but G).
fn optimizer(cx: &mut InferCx, groups: usize) -> Result<(), InferError> {
    let total = cx.node.input.len();
    if total < 2 || !(total - 2).is_multiple_of(groups) {
        bail!(
            "{} takes R, T and {groups} groups of equally many tensors, got {total} inputs",
            cx.node.op_type()
        );
    }
    let n = (total - 2) / groups;
    if cx.node.output.len() != n * (groups - 1) {
        bail!(
            "{} with {n} tensors per group has {} outputs, not {}",
            cx.node.op_type(),
            cx.node.output.len(),
            n * (groups - 1)
        );
    }
    for k in 0..n {
        cx.pass_through(2 + k, k);
    }
    for g in 2..groups {
        for k in 0..n {
            cx.pass_through(2 + g * n + k, (g - 1) * n + k);
        }
    }
    Ok(())
}

fn adagrad(cx: &mut InferCx) -> Result<(), InferError> {
    optimizer(cx, 3)
}
fn momentum(cx: &mut InferCx) -> Result<(), InferError> {
    optimizer(cx, 3)
}
fn adam(cx: &mut InferCx) -> Result<(), InferError> {
    optimizer(cx, 4)
}

pub const OPS: &[OpDef] = &[
    training("Adagrad", adagrad),
    training("Adam", adam),
    training("Momentum", momentum),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::testing::{node, run, t};
    use crate::infer::Info;
    use tensor::DataType;

    #[test]
    fn adam_outputs_follow_x_v_h() {
        let r = Info::of(t(DataType::Float, &[]));
        let x1 = Info::of(t(DataType::Float, &[2]));
        let x2 = Info::of(t(DataType::Double, &[3, 4]));
        let ins = [
            Some(&r),
            Some(&r),
            Some(&x1),
            Some(&x2),
            Some(&x1),
            Some(&x2),
            Some(&x1),
            Some(&x2),
            Some(&x1),
            Some(&x2),
        ];
        let n = node(
            "Adam",
            &["r", "t", "x1", "x2", "g1", "g2", "v1", "v2", "h1", "h2"],
            &["a", "b", "c", "d", "e", "f"],
            vec![],
        );
        let out = run(adam, &n, 1, &ins);
        assert_eq!(out[1].ty, t(DataType::Double, &[3, 4]));
        assert_eq!(out[4].ty, t(DataType::Float, &[2]));
    }
}
