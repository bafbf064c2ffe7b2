//! Kernels of the reduce family (inference: `families/reduce.rs`).
//!
//! The Reduce* ops share one engine: [`Plan`] resolves the axes (attribute before opset 18,
//! ReduceSum before 13; an input after) and the output shape, and [`fold`] walks the input once
//! in memory order, folding each element into the accumulator of its output position. Floats
//! accumulate in f64, integers in i128 (wrapping like numpy's fixed-width sums, then truncated
//! to the element type). Empty reductions give the fold's identity, as the reference does
//! (Max → -inf / type minimum, Min → +inf / maximum, Prod → 1, Sum → 0, LogSum → -inf).

use crate::exec::util::{broadcast_offsets, norm_axis, strides, to_i64s, FloatConv};
use crate::exec::{kernel, KResult, KernelDef, RunCx, Value};
use crate::{for_float, for_int};
use num_traits::AsPrimitive;
use tensor::{DataType, Element, Tensor};

/// Which axes a reduction folds and the shapes it produces.
pub(crate) struct Plan {
    in_shape: Vec<usize>,
    /// Per input dim: whether it is reduced.
    reduced: Vec<bool>,
    /// Output shape with reduced dims kept as 1.
    kept: Vec<usize>,
    /// Output shape as the node returns it.
    out: Vec<usize>,
    /// Elements folded into each output element.
    pub(crate) count: usize,
}

impl Plan {
    pub(crate) fn new(
        cx: &RunCx,
        shape: &[usize],
        axes: Option<Vec<i64>>,
        noop: bool,
        keepdims: bool,
    ) -> KResult<Plan> {
        let rank = shape.len();
        let mut reduced = vec![false; rank];
        match axes {
            Some(a) if !a.is_empty() => {
                for &ax in &a {
                    let d = norm_axis(ax, rank).map_err(|e| cx.invalid(format!("axes: {e}")))?;
                    if reduced[d] {
                        return Err(cx.invalid(format!("axes {a:?} name axis {d} twice")));
                    }
                    reduced[d] = true;
                }
            }
            _ => {
                if !noop {
                    reduced = vec![true; rank];
                }
            }
        }
        let kept: Vec<usize> = shape
            .iter()
            .zip(&reduced)
            .map(|(&d, &r)| if r { 1 } else { d })
            .collect();
        let out: Vec<usize> = if keepdims {
            kept.clone()
        } else {
            shape
                .iter()
                .zip(&reduced)
                .filter(|(_, &r)| !r)
                .map(|(&d, _)| d)
                .collect()
        };
        let count = shape
            .iter()
            .zip(&reduced)
            .filter(|(_, &r)| r)
            .map(|(&d, _)| d)
            .product();
        Ok(Plan {
            in_shape: shape.to_vec(),
            reduced,
            kept,
            out,
            count,
        })
    }

    pub(crate) fn out_len(&self) -> usize {
        self.kept.iter().product()
    }

    /// For each input element in order, the offset of its output element.
    pub(crate) fn out_offsets(&self) -> Vec<usize> {
        let ost = strides(&self.kept);
        let ost: Vec<usize> = (0..self.in_shape.len())
            .map(|d| if self.reduced[d] { 0 } else { ost[d] })
            .collect();
        broadcast_offsets(&self.in_shape, &ost)
    }
}

/// Folds every input element into the accumulator of its output position.
fn fold<X: Copy, A: Copy>(plan: &Plan, data: &[X], init: A, f: impl Fn(A, X) -> A) -> Vec<A> {
    let mut acc = vec![init; plan.out_len()];
    fold_into(plan, data, &mut acc, |a, _, x| f(a, x));
    acc
}

/// Like [`fold`] over existing accumulators; `f` also sees the output offset.
fn fold_into<X: Copy, A: Copy>(
    plan: &Plan,
    data: &[X],
    acc: &mut [A],
    f: impl Fn(A, usize, X) -> A,
) {
    if data.is_empty() || acc.is_empty() {
        return;
    }
    let rank = plan.in_shape.len();
    if rank == 0 {
        acc[0] = f(acc[0], 0, data[0]);
        return;
    }
    let ost = strides(&plan.kept);
    let ost: Vec<usize> = (0..rank)
        .map(|d| if plan.reduced[d] { 0 } else { ost[d] })
        .collect();
    let last = plan.in_shape[rank - 1];
    let ls = ost[rank - 1];
    let mut idx = vec![0usize; rank];
    let mut off = 0usize;
    for row in data.chunks_exact(last) {
        if ls == 0 {
            let mut a = acc[off];
            for &x in row {
                a = f(a, off, x);
            }
            acc[off] = a;
        } else {
            for (j, &x) in row.iter().enumerate() {
                acc[off + j] = f(acc[off + j], off + j, x);
            }
        }
        // Advance the odometer over the leading dims.
        for d in (0..rank - 1).rev() {
            idx[d] += 1;
            off += ost[d];
            if idx[d] < plan.in_shape[d] {
                break;
            }
            off -= ost[d] * plan.in_shape[d];
            idx[d] = 0;
        }
    }
}

/// Most elements a kernel allocates for a result or intermediate whose size is a product of
/// several input dims (not bounded by any one input's size).
pub(crate) const MAX_ELEMENTS: usize = 1 << 31;

/// The product of `dims`, or an error when it overflows or exceeds [`MAX_ELEMENTS`].
pub(crate) fn checked_len(cx: &RunCx, dims: &[usize], what: &str) -> KResult<usize> {
    dims.iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= MAX_ELEMENTS)
        .ok_or_else(|| {
            cx.invalid(format!(
                "{what} of dims {dims:?} would exceed {MAX_ELEMENTS} elements"
            ))
        })
}

#[derive(Clone, Copy, PartialEq)]
enum Kind {
    Sum,
    Mean,
    Prod,
    Max,
    Min,
    L1,
    L2,
    SumSquare,
    LogSum,
    LogSumExp,
}

fn max_nan(a: f64, x: f64) -> f64 {
    if x.is_nan() || x > a {
        x
    } else {
        a
    }
}

fn min_nan(a: f64, x: f64) -> f64 {
    if x.is_nan() || x < a {
        x
    } else {
        a
    }
}

/// A float reduction in f64.
fn reduce_f64(kind: Kind, plan: &Plan, v: &[f64]) -> Vec<f64> {
    match kind {
        Kind::Sum => fold(plan, v, 0.0, |a, x| a + x),
        Kind::Mean => {
            let n = plan.count as f64;
            let mut r = fold(plan, v, 0.0, |a, x| a + x);
            r.iter_mut().for_each(|x| *x /= n);
            r
        }
        Kind::Prod => fold(plan, v, 1.0, |a, x| a * x),
        Kind::Max => fold(plan, v, f64::NEG_INFINITY, |a, x| {
            if a.is_nan() {
                a
            } else {
                max_nan(a, x)
            }
        }),
        Kind::Min => fold(plan, v, f64::INFINITY, |a, x| {
            if a.is_nan() {
                a
            } else {
                min_nan(a, x)
            }
        }),
        Kind::L1 => fold(plan, v, 0.0, |a, x| a + x.abs()),
        Kind::L2 => {
            let mut r = fold(plan, v, 0.0, |a, x| a + x * x);
            r.iter_mut().for_each(|x| *x = x.sqrt());
            r
        }
        Kind::SumSquare => fold(plan, v, 0.0, |a, x| a + x * x),
        Kind::LogSum => {
            let mut r = fold(plan, v, 0.0, |a, x| a + x);
            r.iter_mut().for_each(|x| *x = x.ln());
            r
        }
        Kind::LogSumExp => {
            // Shift by the largest finite element (as the reference does) for stability.
            let mx = fold(plan, v, f64::NEG_INFINITY, |a, x| {
                if x.is_infinite() {
                    a
                } else {
                    max_nan(a, x)
                }
            });
            let shift: Vec<f64> = mx
                .iter()
                .map(|&m| if m.is_finite() { m } else { 0.0 })
                .collect();
            let mut s = vec![0.0f64; shift.len()];
            fold_into(plan, v, &mut s, |a, o, x| a + (x - shift[o]).exp());
            s.iter().zip(&shift).map(|(&s, &m)| s.ln() + m).collect()
        }
    }
}

/// An integer reduction in i128 (`None` for kinds integers do not have).
fn reduce_i128(kind: Kind, plan: &Plan, v: &[i128], min: i128, max: i128) -> Option<Vec<i128>> {
    Some(match kind {
        Kind::Sum => fold(plan, v, 0i128, |a, x| a.wrapping_add(x)),
        Kind::Mean => {
            let n = plan.count as i128;
            let r = fold(plan, v, 0i128, |a, x| a.wrapping_add(x));
            // numpy divides the fixed-width sum and truncates toward zero.
            r.into_iter()
                .map(|s| if n == 0 { 0 } else { s / n })
                .collect()
        }
        Kind::Prod => fold(plan, v, 1i128, |a, x| a.wrapping_mul(x)),
        Kind::Max => fold(plan, v, min, |a, x| a.max(x)),
        Kind::Min => fold(plan, v, max, |a, x| a.min(x)),
        Kind::L1 => fold(plan, v, 0i128, |a, x| a.wrapping_add(x.abs())),
        Kind::SumSquare => fold(plan, v, 0i128, |a, x| a.wrapping_add(x.wrapping_mul(x))),
        Kind::L2 => fold(plan, v, 0f64, |a, x| a + (x as f64) * (x as f64))
            .into_iter()
            .map(|s| s.sqrt() as i128)
            .collect(),
        Kind::LogSum | Kind::LogSumExp => return None,
    })
}

fn reduce_int<T>(kind: Kind, plan: &Plan, t: &Tensor) -> KResult<Option<Tensor>>
where
    T: Element + AsPrimitive<i128> + num_traits::Bounded,
    i128: AsPrimitive<T>,
{
    let v: Vec<i128> = t.to_vec::<T>()?.into_iter().map(|x| x.as_()).collect();
    let (min, max) = (T::min_value().as_(), T::max_value().as_());
    Ok(match reduce_i128(kind, plan, &v, min, max) {
        Some(r) => Some(Tensor::from_vec(
            plan.out.clone(),
            r.into_iter().map(|x| x.as_()).collect::<Vec<T>>(),
        )?),
        None => None,
    })
}

/// Runs reduction `kind` on input 0 with the node's axes.
fn reduce(cx: &RunCx, kind: Kind) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let axes_as_input = cx.opset >= 18 || (kind == Kind::Sum && cx.opset >= 13);
    let axes = match cx.opt_input(1)? {
        Some(a) if axes_as_input => Some(to_i64s(a)?),
        Some(_) => {
            return Err(cx.invalid(format!(
                "{} v{} takes axes as an attribute, not an input",
                cx.op(),
                cx.opset
            )))
        }
        None => cx.attr_ints("axes")?.map(|a| a.to_vec()),
    };
    let noop = axes_as_input && cx.int("noop_with_empty_axes", 0)? != 0;
    let keepdims = cx.int("keepdims", 1)? != 0;
    let plan = Plan::new(cx, x.shape(), axes, noop, keepdims)?;
    let dt = x.dtype();
    let out = for_float!(dt, T => {
        let v: Vec<f64> = x.to_vec::<T>()?.into_iter().map(FloatConv::to_f64).collect();
        let r = reduce_f64(kind, &plan, &v);
        Tensor::from_vec(plan.out.clone(), r.into_iter().map(T::from_f64).collect::<Vec<T>>())?
    } else {
        if dt == DataType::Bool && matches!(kind, Kind::Max | Kind::Min) {
            let v: Vec<i128> = x.to_vec::<bool>()?.into_iter().map(i128::from).collect();
            let r = reduce_i128(kind, &plan, &v, 0, 1).unwrap_or_default();
            Tensor::from_vec(plan.out.clone(), r.into_iter().map(|b| b != 0).collect::<Vec<bool>>())?
        } else {
            let r = for_int!(dt, T => { reduce_int::<T>(kind, &plan, x)? } else { None });
            r.ok_or_else(|| cx.unsupported(dt))?
        }
    });
    Ok(vec![out.into()])
}

macro_rules! reducers {
    ($($f:ident => $k:ident),* $(,)?) => {$(
        #[doc = concat!("Reduce", stringify!($k), ": every opset (axes attribute or input).")]
        fn $f(cx: &RunCx) -> KResult<Vec<Value>> {
            reduce(cx, Kind::$k)
        }
    )*};
}

reducers!(
    reduce_sum => Sum,
    reduce_mean => Mean,
    reduce_prod => Prod,
    reduce_max => Max,
    reduce_min => Min,
    reduce_l1 => L1,
    reduce_l2 => L2,
    reduce_sum_square => SumSquare,
    reduce_log_sum => LogSum,
    reduce_log_sum_exp => LogSumExp,
);

/// Index of the extreme element along one axis of (outer, n, inner) data.
fn arg_extreme<T: Copy + PartialOrd>(
    v: &[T],
    outer: usize,
    n: usize,
    inner: usize,
    is_max: bool,
    last: bool,
    is_nan: impl Fn(T) -> bool,
) -> Vec<i64> {
    let mut out = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            let mut best = v[base];
            let mut bi = 0usize;
            for k in 1..n {
                let x = v[base + k * inner];
                // numpy: the first NaN wins (the last with select_last_index, which flips).
                let take = if is_nan(best) {
                    last && is_nan(x)
                } else if is_nan(x) {
                    true
                } else if is_max {
                    x > best || (last && x == best)
                } else {
                    x < best || (last && x == best)
                };
                if take {
                    best = x;
                    bi = k;
                }
            }
            out.push(bi as i64);
        }
    }
    out
}

fn arg(cx: &RunCx, is_max: bool) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let rank = x.rank();
    let axis =
        norm_axis(cx.int("axis", 0)?, rank.max(1)).map_err(|e| cx.invalid(format!("axis: {e}")))?;
    let keepdims = cx.int("keepdims", 1)? != 0;
    let last = cx.opset >= 12 && cx.int("select_last_index", 0)? != 0;
    let shape = x.shape();
    if rank == 0 {
        return Err(cx.invalid("ArgMax/ArgMin need an input of rank >= 1, got a scalar"));
    }
    let n = shape[axis];
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let mut out_shape = shape.to_vec();
    if keepdims {
        out_shape[axis] = 1;
    } else {
        out_shape.remove(axis);
    }
    if n == 0 {
        if outer * inner == 0 {
            return Ok(vec![Tensor::from_vec(out_shape, Vec::<i64>::new())?.into()]);
        }
        return Err(cx.invalid(format!(
            "{} over axis {axis} of size 0 (shape {shape:?}) has no answer",
            cx.op()
        )));
    }
    let dt = x.dtype();
    let r = for_float!(dt, T => {
        let v: Vec<f64> = x.to_vec::<T>()?.into_iter().map(FloatConv::to_f64).collect();
        arg_extreme(&v, outer, n, inner, is_max, last, f64::is_nan)
    } else {
        for_int!(dt, T => {
            let v = x.to_vec::<T>()?;
            arg_extreme(&v, outer, n, inner, is_max, last, |_| false)
        } else {
            if dt == DataType::Bool {
                let v = x.to_vec::<bool>()?;
                arg_extreme(&v, outer, n, inner, is_max, last, |_| false)
            } else {
                return Err(cx.unsupported(dt));
            }
        })
    });
    Ok(vec![Tensor::from_vec(out_shape, r)?.into()])
}

/// ArgMax: all versions (select_last_index from 12).
fn argmax(cx: &RunCx) -> KResult<Vec<Value>> {
    arg(cx, true)
}

/// ArgMin: all versions (select_last_index from 12).
fn argmin(cx: &RunCx) -> KResult<Vec<Value>> {
    arg(cx, false)
}

pub const KERNELS: &[KernelDef] = &[
    kernel("ArgMax", 1, argmax),
    kernel("ArgMin", 1, argmin),
    kernel("ReduceSum", 1, reduce_sum),
    kernel("ReduceMean", 1, reduce_mean),
    kernel("ReduceProd", 1, reduce_prod),
    kernel("ReduceMax", 1, reduce_max),
    kernel("ReduceMin", 1, reduce_min),
    kernel("ReduceL1", 1, reduce_l1),
    kernel("ReduceL2", 1, reduce_l2),
    kernel("ReduceSumSquare", 1, reduce_sum_square),
    kernel("ReduceLogSum", 1, reduce_log_sum),
    kernel("ReduceLogSumExp", 1, reduce_log_sum_exp),
];

/// Runs one registered kernel on literal inputs, for the unit tests of this family's files.
#[cfg(test)]
pub(crate) mod testutil {
    use crate::exec::{KResult, Value};
    use onnx_proto::{attribute_proto::AttributeType, AttributeProto};
    use tensor::{Element, Tensor};

    /// An attribute value.
    pub enum A {
        I(i64),
        F(f32),
        Is(Vec<i64>),
        S(&'static str),
    }

    /// Runs `op` at `opset` with `attrs` and `inputs` (None = omitted), declaring `n_out` outputs.
    pub fn run(
        op: &str,
        opset: i64,
        attrs: Vec<(&str, A)>,
        inputs: &[Option<Tensor>],
        n_out: usize,
    ) -> KResult<Vec<Value>> {
        let attribute: Vec<AttributeProto> = attrs
            .into_iter()
            .map(|(name, v)| {
                let mut a = AttributeProto {
                    name: Some(name.to_string()),
                    ..Default::default()
                };
                match v {
                    A::I(i) => {
                        a.r#type = Some(AttributeType::Int as i32);
                        a.i = Some(i);
                    }
                    A::F(f) => {
                        a.r#type = Some(AttributeType::Float as i32);
                        a.f = Some(f);
                    }
                    A::Is(v) => {
                        a.r#type = Some(AttributeType::Ints as i32);
                        a.ints = v;
                    }
                    A::S(s) => {
                        a.r#type = Some(AttributeType::String as i32);
                        a.s = Some(bytes::Bytes::from(s.as_bytes().to_vec()));
                    }
                }
                a
            })
            .collect();
        crate::exec::testing::run(op, opset, inputs, n_out, attribute)
    }

    /// A tensor from a shape and values.
    pub fn t<T: Element>(shape: &[usize], v: &[T]) -> Option<Tensor> {
        Some(Tensor::from_slice(shape.to_vec(), v).unwrap())
    }

    /// Output `k` as a vector of `T`.
    pub fn out<T: Element>(r: &[Value], k: usize) -> (Vec<usize>, Vec<T>) {
        let t = r[k].as_tensor().unwrap();
        (t.shape().to_vec(), t.to_vec::<T>().unwrap())
    }

    /// Asserts two float slices agree to 1e-5.
    pub fn close(a: &[f32], b: &[f32]) {
        assert_eq!(a.len(), b.len(), "{a:?} vs {b:?}");
        for (x, y) in a.iter().zip(b) {
            assert!((x - y).abs() <= 1e-5 * (1.0 + y.abs()), "{a:?} vs {b:?}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::testutil::{out, run, t, A};

    #[test]
    fn reduce_sum_before_13_takes_axes_attribute() {
        let x = t(&[2, 3], &[1f32, 2., 3., 4., 5., 6.]);
        let r = run(
            "ReduceSum",
            11,
            vec![("axes", A::Is(vec![1])), ("keepdims", A::I(0))],
            &[x],
            1,
        )
        .unwrap();
        assert_eq!(out::<f32>(&r, 0), (vec![2], vec![6., 15.]));
    }

    #[test]
    fn noop_with_empty_axes_applies_the_elementwise_part() {
        // As the reference does: ReduceL2 over no axes is |x|.
        let x = t(&[2], &[-3f32, 4.]);
        let axes = t::<i64>(&[0], &[]);
        let r = run(
            "ReduceL2",
            18,
            vec![("noop_with_empty_axes", A::I(1))],
            &[x, axes],
            1,
        )
        .unwrap();
        assert_eq!(out::<f32>(&r, 0), (vec![2], vec![3., 4.]));
    }

    #[test]
    fn integer_reductions_wrap_and_truncate_like_numpy() {
        let x = t(&[3], &[100i8, 100, 100]);
        let r = run(
            "ReduceSum",
            13,
            vec![("keepdims", A::I(0))],
            std::slice::from_ref(&x),
            1,
        )
        .unwrap();
        assert_eq!(out::<i8>(&r, 0).1, vec![44]); // 300 mod 256
        let y = t(&[2], &[-3i32, 0]);
        let r = run("ReduceMean", 18, vec![], &[y], 1).unwrap();
        assert_eq!(out::<i32>(&r, 0), (vec![1], vec![-1]));
        let e = t::<i32>(&[0], &[]);
        let r = run("ReduceMin", 18, vec![], &[e], 1).unwrap();
        assert_eq!(out::<i32>(&r, 0).1, vec![i32::MAX]);
    }

    #[test]
    fn argmax_select_last_index_and_bad_axis() {
        let x = t(&[4], &[1f32, 3., 3., 0.]);
        let r = run(
            "ArgMax",
            13,
            vec![("select_last_index", A::I(1))],
            std::slice::from_ref(&x),
            1,
        )
        .unwrap();
        assert_eq!(out::<i64>(&r, 0), (vec![1], vec![2]));
        let r = run(
            "ArgMax",
            11,
            vec![("select_last_index", A::I(1))],
            std::slice::from_ref(&x),
            1,
        )
        .unwrap();
        assert_eq!(out::<i64>(&r, 0).1, vec![1]); // attribute unknown before 12
        assert!(run("ArgMin", 13, vec![("axis", A::I(3))], &[x], 1).is_err());
    }
}
