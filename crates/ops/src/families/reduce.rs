//! Reductions: ReduceSum, ReduceMean, ReduceMax, ReduceMin, ReduceProd, ReduceL1, ReduceL2,
//! ReduceLogSum, ReduceLogSumExp, ReduceSumSquare (`keepdims`, `noop_with_empty_axes`; `axes` an
//! attribute before opset 18 — 13 for ReduceSum — and an input from then on), and ArgMax/ArgMin
//! (one `axis`, int64 result).
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (each op's section).

use crate::infer::{axis, fixed, InferCx, InferError, Shape};
use crate::{bail, op, OpDef};
use tensor::DataType;

/// The shape after reducing `axes` (normalized, may repeat) of `s`.
fn reduced(s: &Shape, axes: &[usize], keepdims: bool) -> Shape {
    s.iter()
        .enumerate()
        .filter_map(|(i, d)| match (axes.contains(&i), keepdims) {
            (false, _) => Some(d.clone()),
            (true, true) => Some(fixed(1)),
            (true, false) => None,
        })
        .collect()
}

fn reduce(cx: &mut InferCx, axes_input_since: i64) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let keepdims = cx.attr_i("keepdims").unwrap_or(1) != 0;
    let noop = cx.opset >= axes_input_since && cx.attr_i("noop_with_empty_axes").unwrap_or(0) != 0;
    let Some(s) = cx.shape(0).cloned() else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let axes: Vec<i64> = if cx.opset < axes_input_since {
        cx.attr_ints("axes")
            .map(<[i64]>::to_vec)
            .unwrap_or_default()
    } else if !cx.has_input(1) {
        Vec::new()
    } else {
        match cx.ints(1) {
            Some(a) => a,
            None => {
                // Which axes go is unknown: with keepdims the rank stays, nothing else is known.
                let shape = if keepdims {
                    Some(vec![None; s.len()])
                } else {
                    None
                };
                cx.set_tensor(0, dtype, shape);
                return Ok(());
            }
        }
    };
    let out = if axes.is_empty() {
        if noop {
            s
        } else {
            reduced(&s, &(0..s.len()).collect::<Vec<_>>(), keepdims)
        }
    } else {
        let norm: Vec<usize> = axes
            .iter()
            .map(|&a| axis(a, s.len()))
            .collect::<Result<_, _>>()?;
        reduced(&s, &norm, keepdims)
    };
    cx.set_tensor(0, dtype, Some(out));
    Ok(())
}

fn reduce_attr_until_17(cx: &mut InferCx) -> Result<(), InferError> {
    reduce(cx, 18)
}

fn reduce_sum(cx: &mut InferCx) -> Result<(), InferError> {
    reduce(cx, 13)
}

fn arg_reduce(cx: &mut InferCx) -> Result<(), InferError> {
    let keepdims = cx.attr_i("keepdims").unwrap_or(1) != 0;
    let shape = match cx.shape(0) {
        Some(s) => {
            if s.is_empty() {
                bail!("{} needs an input of rank >= 1", cx.node.op_type());
            }
            let a = axis(cx.attr_i("axis").unwrap_or(0), s.len())?;
            Some(reduced(s, &[a], keepdims))
        }
        None => None,
    };
    cx.set_tensor(0, Some(DataType::Int64), shape);
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("ReduceSum", 1, reduce_sum),
    op("ReduceMean", 1, reduce_attr_until_17),
    op("ReduceMax", 1, reduce_attr_until_17),
    op("ReduceMin", 1, reduce_attr_until_17),
    op("ReduceProd", 1, reduce_attr_until_17),
    op("ReduceL1", 1, reduce_attr_until_17),
    op("ReduceL2", 1, reduce_attr_until_17),
    op("ReduceLogSum", 1, reduce_attr_until_17),
    op("ReduceLogSumExp", 1, reduce_attr_until_17),
    op("ReduceSumSquare", 1, reduce_attr_until_17),
    op("ArgMax", 1, arg_reduce),
    op("ArgMin", 1, arg_reduce),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::testing::{ai, ais, ints_info, node, run, t, try_run};
    use crate::infer::Info;

    #[test]
    fn axes_attribute_before_18_and_input_after() {
        let x = Info::of(t(DataType::Float, &[2, 3, 4]));
        let n = node(
            "ReduceMean",
            &["x"],
            &["y"],
            vec![ais("axes", &[1]), ai("keepdims", 0)],
        );
        let out = run(reduce_attr_until_17, &n, 13, &[Some(&x)]);
        assert_eq!(out[0].ty, t(DataType::Float, &[2, 4]));
        let axes = ints_info(&[-1]);
        let n = node("ReduceMean", &["x", "a"], &["y"], vec![]);
        let out = run(reduce_attr_until_17, &n, 18, &[Some(&x), Some(&axes)]);
        assert_eq!(out[0].ty, t(DataType::Float, &[2, 3, 1]));
    }

    #[test]
    fn empty_axes_reduce_all_unless_noop() {
        let x = Info::of(t(DataType::Float, &[2, 3]));
        let n = node("ReduceSum", &["x"], &["y"], vec![ai("keepdims", 0)]);
        assert_eq!(
            run(reduce_sum, &n, 13, &[Some(&x)])[0].ty,
            t(DataType::Float, &[])
        );
        let n = node(
            "ReduceSum",
            &["x"],
            &["y"],
            vec![ai("noop_with_empty_axes", 1)],
        );
        assert_eq!(
            run(reduce_sum, &n, 13, &[Some(&x)])[0].ty,
            t(DataType::Float, &[2, 3])
        );
        // Unknown axes with keepdims=0: the rank is unknown.
        let n = node("ReduceSum", &["x", "a"], &["y"], vec![ai("keepdims", 0)]);
        let a = Info::of(t(DataType::Int64, &[1]));
        assert_eq!(
            run(reduce_sum, &n, 13, &[Some(&x), Some(&a)])[0].ty.shape(),
            None
        );
    }

    #[test]
    fn argmax_is_int64_and_checks_the_axis() {
        let x = Info::of(t(DataType::Float, &[2, 3]));
        let n = node("ArgMax", &["x"], &["y"], vec![ai("axis", -1)]);
        assert_eq!(
            run(arg_reduce, &n, 13, &[Some(&x)])[0].ty,
            t(DataType::Int64, &[2, 1])
        );
        let n = node("ArgMax", &["x"], &["y"], vec![ai("axis", 2)]);
        assert!(try_run(arg_reduce, &n, 13, &[Some(&x)]).is_err());
    }
}
