//! Epilogues: elementwise nodes the engine folds into the node that produces their input.
//!
//! When a Conv, MatMul or Gemm output feeds only a chain of elementwise nodes (a bias or
//! residual Add, a per-channel Mul, an activation, the erf form of GELU, SiLU), the engine hands
//! that chain to the producing kernel as an [`EpilogueOp`] list ([`RunCx::epilogue`]); a
//! float32 kernel applies it to its output while the output is still in cache, instead of one
//! more node (and one more full-size tensor) per step.
//!
//! **Architecture Invariant:** an applied epilogue gives bit-for-bit the values the chain's
//! nodes give when run one by one: every step is the same float32 operation the node's own
//! kernel performs ([`Activation`] calls the elementwise kernels' scalar functions; Add and
//! Mul are commutative in IEEE arithmetic). A kernel that cannot apply an epilogue (another
//! type, a broadcast it does not handle) applies only the steps before it and the engine runs
//! the remaining nodes.
//!
//! [`RunCx::epilogue`]: super::RunCx::epilogue

use onnx_proto::NodeProto;
use std::borrow::Cow;
use tensor::Tensor;

/// One elementwise step applied to a kernel's output `y`.
#[derive(Debug, Clone)]
pub enum EpilogueOp<'a> {
    /// `y + t` (`t` broadcast onto `y`; the result keeps `y`'s shape).
    Add(&'a Tensor),
    /// `y * t` (as for `Add`).
    Mul(&'a Tensor),
    /// A unary activation.
    Unary(Activation),
}

/// A unary activation with its attributes resolved, or the erf form of GELU as exported by
/// PyTorch (`Mul(Mul(x, Add(Erf(Div(x, d)), one)), half)`) with its three constants.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Activation {
    kind: Kind,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Relu,
    Sigmoid,
    Tanh,
    HardSigmoid {
        alpha: f32,
        beta: f32,
    },
    HardSwish,
    LeakyRelu {
        alpha: f32,
    },
    GeluErf {
        d: f32,
        one: f32,
        half: f32,
    },
    /// `x * Sigmoid(x)` (PyTorch's SiLU: a Sigmoid and a Mul reading the same value).
    Silu,
}

impl Activation {
    /// The activation node `node` computes, with its attributes (and their schema defaults),
    /// for the ops an epilogue supports; `None` for any other node.
    pub fn of_node(node: &NodeProto) -> Option<Activation> {
        if !matches!(node.domain(), "" | "ai.onnx") || node.input.len() != 1 {
            return None;
        }
        let float = |name: &str, default: f32| {
            node.attribute
                .iter()
                .find(|a| a.name() == name)
                .map_or(Some(default), |a| a.f)
        };
        let kind = match node.op_type() {
            "Relu" => Kind::Relu,
            "Sigmoid" => Kind::Sigmoid,
            "Tanh" => Kind::Tanh,
            "HardSigmoid" => Kind::HardSigmoid {
                alpha: float("alpha", 0.2)?,
                beta: float("beta", 0.5)?,
            },
            "HardSwish" => Kind::HardSwish,
            "LeakyRelu" => Kind::LeakyRelu {
                alpha: float("alpha", 0.01)?,
            },
            _ => return None,
        };
        Some(Activation { kind })
    }

    /// SiLU as PyTorch's exporters spell it: `Mul(x, Sigmoid(x))`.
    pub fn silu() -> Activation {
        Activation { kind: Kind::Silu }
    }

    /// GELU as PyTorch's exporters spell it: `x * (erf(x / d) + one) * half`, each step
    /// rounded to float32 as the Div, Erf, Add and two Mul nodes would.
    pub fn gelu_erf(d: f32, one: f32, half: f32) -> Activation {
        Activation {
            kind: Kind::GeluErf { d, one, half },
        }
    }

    fn apply(&self, y: &mut [f32]) {
        use crate::kernels::elementwise::{ufloat as u, U};
        use crate::kernels::fast32::map_inplace;
        match self.kind {
            Kind::Relu => map_inplace(y, |v| u(U::Relu, v, 0.0, 0.0)),
            Kind::Sigmoid => map_inplace(y, crate::kernels::fast32::sigmoid),
            Kind::Silu => map_inplace(y, |v| v * crate::kernels::fast32::sigmoid(v)),
            Kind::Tanh => map_inplace(y, |v| u(U::Tanh, v, 0.0, 0.0)),
            Kind::HardSigmoid { alpha, beta } => {
                map_inplace(y, |v| u(U::HardSigmoid, v, alpha, beta))
            }
            Kind::HardSwish => map_inplace(y, |v| u(U::HardSwish, v, 0.0, 0.0)),
            Kind::LeakyRelu { alpha } => map_inplace(y, |v| u(U::LeakyRelu, v, alpha, 0.0)),
            Kind::GeluErf { d, one, half } => map_inplace(y, |v| {
                let e = crate::kernels::fast32::erf(v / d);
                (v * (e + one)) * half
            }),
        }
    }
}

/// How a tensor `t` broadcasts onto `y`'s shape, in the forms an epilogue handles.
enum Bcast<'t> {
    /// One value per element of `y`.
    Same(Cow<'t, [f32]>),
    /// One value for everything.
    Scalar(f32),
    /// `t[c]` for every element whose index along one axis of `y` is `c`; `inner` elements
    /// of `y` follow each other with the same `c`.
    Axis { t: Cow<'t, [f32]>, inner: usize },
}

fn bcast<'t>(t: &'t Tensor, y_shape: &[usize]) -> Option<Bcast<'t>> {
    if t.dtype() != tensor::DataType::Float {
        return None;
    }
    let tv: Cow<[f32]> = match t.as_slice::<f32>() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(t.to_vec::<f32>().ok()?),
    };
    let ts = t.shape();
    if ts.len() > y_shape.len() {
        return None;
    }
    if ts == y_shape {
        return Some(Bcast::Same(tv));
    }
    if tv.len() == 1 {
        return Some(Bcast::Scalar(tv[0]));
    }
    // Left-pad t's shape with 1s; it must be 1 everywhere but on one axis, where it is y's dim.
    let pad = y_shape.len() - ts.len();
    let mut axis = None;
    for (i, &d) in y_shape.iter().enumerate() {
        let td = if i < pad { 1 } else { ts[i - pad] };
        if td == d && d != 1 {
            if axis.is_some() {
                return None;
            }
            axis = Some(i);
        } else if td != 1 {
            return None;
        }
    }
    let axis = axis?;
    Some(Bcast::Axis {
        t: tv,
        inner: y_shape[axis + 1..].iter().product(),
    })
}

/// `y[j] = f(y[j], t at element start + j)` for the chunk `y` of the output starting at
/// element `start`.
fn combine(y: &mut [f32], start: usize, b: &Bcast, f: impl Fn(f32, f32) -> f32 + Copy) {
    use crate::kernels::fast32::{map_inplace, zip_inplace};
    match b {
        Bcast::Same(t) => {
            let len = y.len();
            zip_inplace(y, &t[start..start + len], f)
        }
        Bcast::Scalar(s) => map_inplace(y, |v| f(v, *s)),
        Bcast::Axis { t, inner } => {
            let (n, inner) = (t.len(), (*inner).max(1));
            let mut pos = start;
            let end = start + y.len();
            if inner == 1 {
                // Rows of n, the first and last possibly partial.
                while pos < end {
                    let c0 = pos % n;
                    let len = (n - c0).min(end - pos);
                    zip_inplace(&mut y[pos - start..pos - start + len], &t[c0..c0 + len], f);
                    pos += len;
                }
            } else {
                // Runs of `inner` elements sharing one value.
                while pos < end {
                    let block = pos / inner;
                    let run_end = ((block + 1) * inner).min(end);
                    let w = t[block % n];
                    map_inplace(&mut y[pos - start..run_end - start], |v| f(v, w));
                    pos = run_end;
                }
            }
        }
    }
}

/// Elements processed together: every step runs over one chunk while it is in cache.
const CHUNK: usize = 1 << 14;

/// Applies the longest prefix of `ops` it can to `y` (of shape `y_shape`), in order, and
/// returns its length: it stops before the first step that is not float32 or broadcasts in a
/// way only the node itself handles (e.g. an operand larger than `y`). Chunks of `y` are
/// spread over the engine's threads.
pub fn apply_f32(ops: &[EpilogueOp], y: &mut [f32], y_shape: &[usize]) -> usize {
    apply_f32_biased(None, ops, y, y_shape)
}

/// [`apply_f32`] after adding `bias` along axis 1 of `y` (one value per channel of an
/// N×C×… output), in the same pass; the bias is added even when no step can be.
pub fn apply_f32_biased(
    bias: Option<&[f32]>,
    ops: &[EpilogueOp],
    y: &mut [f32],
    y_shape: &[usize],
) -> usize {
    let bias = bias.map(|b| Bcast::Axis {
        t: Cow::Borrowed(b),
        inner: y_shape.get(2..).map_or(1, |s| s.iter().product()),
    });
    let mut plans = Vec::with_capacity(ops.len());
    for op in ops {
        match op {
            EpilogueOp::Add(t) | EpilogueOp::Mul(t) => match bcast(t, y_shape) {
                Some(b) => plans.push(Some(b)),
                None => break,
            },
            EpilogueOp::Unary(_) => plans.push(None),
        }
    }
    let ops = &ops[..plans.len()];
    if ops.is_empty() && bias.is_none() {
        return 0;
    }
    let chunk = |(k, c): (usize, &mut [f32])| {
        let start = k * CHUNK;
        if let Some(b) = &bias {
            combine(c, start, b, |v, w| v + w);
        }
        for (op, plan) in ops.iter().zip(&plans) {
            match (op, plan) {
                (EpilogueOp::Add(_), Some(b)) => combine(c, start, b, |v, w| v + w),
                (EpilogueOp::Mul(_), Some(b)) => combine(c, start, b, |v, w| v * w),
                (EpilogueOp::Unary(a), _) => a.apply(c),
                _ => unreachable!("every Add/Mul has a broadcast plan"),
            }
        }
    };
    // One cheap operation per value: below half a million values, waking a second thread and
    // pulling the values into its core's cache costs more than the thread saves.
    if crate::kernels::gemm::threads() > 1 && y.len() > 32 * CHUNK {
        use rayon::prelude::*;
        y.par_chunks_mut(CHUNK).enumerate().for_each(chunk);
    } else {
        y.chunks_mut(CHUNK).enumerate().for_each(chunk);
    }
    ops.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasts_an_epilogue_handles() {
        let y = [2usize, 3, 4];
        let t = |s: Vec<usize>| Tensor::from_vec(s.clone(), vec![1f32; s.iter().product()]);
        assert!(matches!(
            bcast(&t(vec![2, 3, 4]).unwrap(), &y),
            Some(Bcast::Same(_))
        ));
        assert!(matches!(
            bcast(&t(vec![1]).unwrap(), &y),
            Some(Bcast::Scalar(_))
        ));
        assert!(matches!(
            bcast(&t(vec![4]).unwrap(), &y),
            Some(Bcast::Axis { inner: 1, .. })
        ));
        assert!(matches!(
            bcast(&t(vec![3, 1]).unwrap(), &y),
            Some(Bcast::Axis { inner: 4, .. })
        ));
        // Two broadcast axes, a t larger than y, or a t that would grow y: not handled.
        assert!(bcast(&t(vec![3, 4]).unwrap(), &y).is_none());
        assert!(bcast(&t(vec![2, 1, 4]).unwrap(), &y).is_none());
        assert!(bcast(&t(vec![5, 2, 3, 4]).unwrap(), &y).is_none());
        assert!(bcast(&t(vec![2, 3, 8]).unwrap(), &y).is_none());
        // Not float32: the node runs instead.
        let i = Tensor::from_vec(vec![4], vec![1i64; 4]).unwrap();
        let mut v = vec![0f32; 24];
        assert_eq!(apply_f32(&[EpilogueOp::Add(&i)], &mut v, &y), 0);
        // A prefix is applied: the step after the last one that can be is left to its node.
        let big = Tensor::from_vec(vec![4, 2, 3, 4], vec![1f32; 96]).unwrap();
        let one = Tensor::from_vec(vec![1], vec![1f32]).unwrap();
        assert_eq!(
            apply_f32(
                &[
                    EpilogueOp::Add(&one),
                    EpilogueOp::Mul(&big),
                    EpilogueOp::Add(&one)
                ],
                &mut v,
                &y
            ),
            1
        );
        assert!(v.iter().all(|&x| x == 1.0));
    }

    #[test]
    fn chunks_see_the_right_broadcast_values() {
        // Longer than a chunk, with periods that do not divide it.
        let (a, b) = (7usize, 2 * CHUNK / 7 + 5);
        let shape = [a, b];
        let n = a * b;
        let per_row = Tensor::from_vec(vec![b], (0..b).map(|i| i as f32).collect()).unwrap();
        let per_col =
            Tensor::from_vec(vec![a, 1], (0..a).map(|i| 1000.0 * i as f32).collect()).unwrap();
        let same = Tensor::from_vec(vec![a, b], vec![0.5f32; n]).unwrap();
        let mut y = vec![0f32; n];
        let ops = [
            EpilogueOp::Add(&per_row),
            EpilogueOp::Add(&per_col),
            EpilogueOp::Add(&same),
        ];
        assert_eq!(apply_f32(&ops, &mut y, &shape), 3);
        for i in 0..a {
            for j in 0..b {
                assert_eq!(
                    y[i * b + j],
                    j as f32 + 1000.0 * i as f32 + 0.5,
                    "({i}, {j})"
                );
            }
        }
    }

    #[test]
    fn applies_steps_in_order() {
        let bias = Tensor::from_vec(vec![2], vec![1f32, -10.0]).unwrap();
        let scale = Tensor::from_vec(vec![1], vec![3f32]).unwrap();
        let relu = Activation::of_node(&NodeProto {
            op_type: Some("Relu".into()),
            input: vec!["x".into()],
            ..Default::default()
        })
        .unwrap();
        let mut y = vec![1f32, 2.0, 3.0, 4.0];
        let ops = [
            EpilogueOp::Add(&bias),
            EpilogueOp::Unary(relu),
            EpilogueOp::Mul(&scale),
        ];
        assert_eq!(apply_f32(&ops, &mut y, &[2, 2]), 3);
        assert_eq!(y, vec![6.0, 0.0, 12.0, 0.0]);
    }
}
