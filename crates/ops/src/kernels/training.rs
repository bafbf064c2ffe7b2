//! Kernels of the `ai.onnx.preview.training` domain (inference: `families/training.rs`):
//! the optimizer update rules Adagrad, Adam and Momentum, over any number of tensors.

use crate::exec::util::{scalar_i64, to_f64s, FloatConv};
use crate::exec::{kernel_in, KResult, KernelDef, RunCx, Value};
use crate::for_float;
use tensor::Tensor;

const TRAINING: &str = "ai.onnx.preview.training";

/// The learning rate R and the step count T.
fn rate_and_step(cx: &RunCx) -> KResult<(f64, i64)> {
    let r = to_f64s(cx.input(0)?)?;
    let [r] = r.as_slice() else {
        return Err(cx.invalid(format!(
            "{} R must be a scalar, got shape {:?}",
            cx.op(),
            cx.input(0)?.shape()
        )));
    };
    Ok((*r, scalar_i64(cx.input(1)?, "T")?))
}

/// Splits the inputs after R, T into `k` equal groups of `n` tensors of the same shapes, each
/// read as f64; returns (n, groups[k][n]) and the tensors of the first group.
#[allow(clippy::type_complexity)]
fn groups<'a>(cx: &RunCx<'a>, k: usize) -> KResult<(usize, Vec<Vec<Vec<f64>>>, Vec<&'a Tensor>)> {
    let rest = cx.num_inputs().saturating_sub(2);
    if rest == 0 || !rest.is_multiple_of(k) {
        return Err(cx.invalid(format!(
            "{} takes R, T and {k} groups of equally many tensors, got {} inputs",
            cx.op(),
            cx.num_inputs()
        )));
    }
    let n = rest / k;
    let firsts: Vec<&Tensor> = (0..n).map(|i| cx.input(2 + i)).collect::<KResult<_>>()?;
    let mut all = Vec::with_capacity(k);
    for g in 0..k {
        let mut grp = Vec::with_capacity(n);
        for (i, x) in firsts.iter().enumerate() {
            let t = cx.input(2 + g * n + i)?;
            if t.shape() != x.shape() {
                return Err(cx.invalid(format!(
                    "{} input {} has shape {:?}, its tensor X has {:?}",
                    cx.op(),
                    2 + g * n + i,
                    t.shape(),
                    x.shape()
                )));
            }
            let v = for_float!(t.dtype(), T => {
                t.to_vec::<T>()?.into_iter().map(FloatConv::to_f64).collect::<Vec<f64>>()
            } else {
                return Err(cx.unsupported(t.dtype()))
            });
            grp.push(v);
        }
        all.push(grp);
    }
    Ok((n, all, firsts))
}

/// A tensor like `like` (shape and dtype) holding `v`.
fn like(cx: &RunCx, like: &Tensor, v: Vec<f64>) -> KResult<Value> {
    for_float!(like.dtype(), T => {
        Ok(Tensor::from_vec(like.shape().to_vec(), v.into_iter().map(T::from_f64).collect::<Vec<T>>())?.into())
    } else {
        Err(cx.unsupported(like.dtype()))
    })
}

/// Adagrad: X, G, H groups → new X's then new H's.
fn adagrad(cx: &RunCx) -> KResult<Vec<Value>> {
    let (r, t) = rate_and_step(cx)?;
    let decay = cx.float("decay_factor", 0.0)? as f64;
    let eps = cx.float("epsilon", 0.0)? as f64;
    let norm = cx.float("norm_coefficient", 0.0)? as f64;
    let (n, g, firsts) = groups(cx, 3)?;
    let lr = r / (1.0 + t as f64 * decay);
    let (mut xs, mut hs) = (Vec::with_capacity(n), Vec::with_capacity(n));
    for i in 0..n {
        let (x, gr, h) = (&g[0][i], &g[1][i], &g[2][i]);
        let mut xn = Vec::with_capacity(x.len());
        let mut hn = Vec::with_capacity(x.len());
        for j in 0..x.len() {
            let gg = norm * x[j] + gr[j];
            let h2 = h[j] + gg * gg;
            xn.push(x[j] - lr * gg / (h2.sqrt() + eps));
            hn.push(h2);
        }
        xs.push(like(cx, firsts[i], xn)?);
        hs.push(like(cx, cx.input(2 + 2 * n + i)?, hn)?);
    }
    xs.extend(hs);
    Ok(xs)
}

/// Adam: X, G, V, H groups → new X's, V's, H's.
fn adam(cx: &RunCx) -> KResult<Vec<Value>> {
    let (r, t) = rate_and_step(cx)?;
    let alpha = cx.float("alpha", 0.9)? as f64;
    let beta = cx.float("beta", 0.999)? as f64;
    let eps = cx.float("epsilon", 0.0)? as f64;
    let norm = cx.float("norm_coefficient", 0.0)? as f64;
    let post = cx.float("norm_coefficient_post", 0.0)? as f64;
    let (n, g, firsts) = groups(cx, 4)?;
    let lr = if t > 0 {
        r * (1.0 - beta.powf(t as f64)).sqrt() / (1.0 - alpha.powf(t as f64))
    } else {
        r
    };
    let (mut xs, mut vs, mut hs) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        let (x, gr, v, h) = (&g[0][i], &g[1][i], &g[2][i], &g[3][i]);
        let (mut xn, mut vn, mut hn) = (Vec::new(), Vec::new(), Vec::new());
        for j in 0..x.len() {
            let gg = norm * x[j] + gr[j];
            let v2 = alpha * v[j] + (1.0 - alpha) * gg;
            let h2 = beta * h[j] + (1.0 - beta) * gg * gg;
            let x2 = x[j] - lr * (v2 / (h2.sqrt() + eps));
            xn.push((1.0 - post) * x2);
            vn.push(v2);
            hn.push(h2);
        }
        xs.push(like(cx, firsts[i], xn)?);
        vs.push(like(cx, cx.input(2 + 2 * n + i)?, vn)?);
        hs.push(like(cx, cx.input(2 + 3 * n + i)?, hn)?);
    }
    xs.extend(vs);
    xs.extend(hs);
    Ok(xs)
}

/// Momentum (standard or Nesterov): X, G, V groups → new X's then new V's.
fn momentum(cx: &RunCx) -> KResult<Vec<Value>> {
    let (r, t) = rate_and_step(cx)?;
    let req = |name: &str| -> KResult<f64> {
        cx.attr_f(name)?
            .map(|v| v as f64)
            .ok_or_else(|| cx.invalid(format!("Momentum needs the '{name}' attribute")))
    };
    let alpha = req("alpha")?;
    let beta = req("beta")?;
    let norm = req("norm_coefficient")?;
    let nesterov = match cx.attr_s("mode")?.as_deref() {
        Some("standard") => false,
        Some("nesterov") => true,
        other => {
            return Err(cx.invalid(format!(
                "Momentum mode must be 'standard' or 'nesterov', got {other:?}"
            )))
        }
    };
    let (n, g, firsts) = groups(cx, 3)?;
    let b = if t > 0 { beta } else { 1.0 };
    let (mut xs, mut vs) = (Vec::new(), Vec::new());
    for i in 0..n {
        let (x, gr, v) = (&g[0][i], &g[1][i], &g[2][i]);
        let (mut xn, mut vn) = (Vec::new(), Vec::new());
        for j in 0..x.len() {
            let gg = norm * x[j] + gr[j];
            let v2 = alpha * v[j] + b * gg;
            xn.push(if nesterov {
                x[j] - r * (gg + alpha * v2)
            } else {
                x[j] - r * v2
            });
            vn.push(v2);
        }
        xs.push(like(cx, firsts[i], xn)?);
        vs.push(like(cx, cx.input(2 + 2 * n + i)?, vn)?);
    }
    xs.extend(vs);
    Ok(xs)
}

pub const KERNELS: &[KernelDef] = &[
    kernel_in(TRAINING, "Adagrad", 1, None, adagrad),
    kernel_in(TRAINING, "Adam", 1, None, adam),
    kernel_in(TRAINING, "Momentum", 1, None, momentum),
];
