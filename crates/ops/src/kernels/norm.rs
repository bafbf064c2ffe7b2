//! Kernels of the normalization family (inference: `families/norm.rs`): softmax-like ops,
//! batch/instance/group/layer/RMS/Lp/mean-variance normalization, LRN, Dropout and the two
//! classification losses. Float types compute in f64 and round once to the element type.

use crate::exec::util::{broadcast_to, norm_axis, to_f64s, to_i64s, FloatConv};
use crate::exec::{kernel, KResult, KernelDef, RunCx, Value};
use crate::for_float;
use crate::kernels::fast32;
use crate::kernels::reduce::Plan;
use tensor::{DataType, Tensor};

/// A float tensor's elements as f64 (`Unsupported` for other types).
fn floats(cx: &RunCx, t: &Tensor) -> KResult<Vec<f64>> {
    for_float!(t.dtype(), T => {
        Ok(t.to_vec::<T>()?.into_iter().map(FloatConv::to_f64).collect())
    } else {
        Err(cx.unsupported(t.dtype()))
    })
}

/// Builds a float tensor of `dtype` from f64 values.
fn from_f64s(cx: &RunCx, dtype: DataType, shape: Vec<usize>, v: Vec<f64>) -> KResult<Tensor> {
    for_float!(dtype, T => {
        Ok(Tensor::from_vec(shape, v.into_iter().map(T::from_f64).collect::<Vec<T>>())?)
    } else {
        Err(cx.unsupported(dtype))
    })
}

/// Splits `shape` around `axis` into (outer, n, inner) element counts.
fn split3(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}

/// The (outer, n, inner) layout of a softmax-like op: per axis from opset 13, the input
/// coerced to 2-D at `axis` before.
fn softmax_layout(cx: &RunCx, shape: &[usize]) -> KResult<(usize, usize, usize)> {
    let rank = shape.len();
    if cx.opset >= 13 {
        if rank == 0 {
            return Ok((1, 1, 1));
        }
        let axis =
            norm_axis(cx.int("axis", -1)?, rank).map_err(|e| cx.invalid(format!("axis: {e}")))?;
        Ok(split3(shape, axis))
    } else {
        let a = cx.int("axis", 1)?;
        let r = rank as i64;
        if a < -r || a > r {
            return Err(cx.invalid(format!("axis {a} is out of range for rank {rank}")));
        }
        let axis = if a < 0 { (a + r) as usize } else { a as usize };
        let outer: usize = shape[..axis].iter().product();
        let n: usize = shape[axis..].iter().product();
        Ok((outer, n, 1))
    }
}

#[derive(Clone, Copy, PartialEq)]
enum SoftKind {
    Softmax,
    LogSoftmax,
    Hardmax,
}

/// Applies a softmax-like op along the middle dim of (outer, n, inner) data in place.
fn softmax_inplace(v: &mut [f64], outer: usize, n: usize, inner: usize, kind: SoftKind) {
    let mut col = vec![0f64; n];
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            for k in 0..n {
                col[k] = v[base + k * inner];
            }
            match kind {
                SoftKind::Hardmax => {
                    let mut bi = 0;
                    for k in 1..n {
                        if col[k] > col[bi] || (col[k].is_nan() && !col[bi].is_nan()) {
                            bi = k;
                        }
                    }
                    col.iter_mut().for_each(|x| *x = 0.0);
                    if n > 0 {
                        col[bi] = 1.0;
                    }
                }
                _ => {
                    let mx = col.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                    let mut s = 0.0;
                    for x in col.iter_mut() {
                        *x = (*x - mx).exp();
                        s += *x;
                    }
                    if kind == SoftKind::Softmax {
                        col.iter_mut().for_each(|x| *x /= s);
                    } else {
                        col.iter_mut().for_each(|x| *x = (*x / s).ln());
                    }
                }
            }
            for k in 0..n {
                v[base + k * inner] = col[k];
            }
        }
    }
}

/// numpy's pairwise summation (`pairwise_sum` in loops_utils.h) in f32, as `np.sum` does for
/// float16 along a contiguous axis.
fn pairwise_sum_f32(a: &[f32]) -> f32 {
    let n = a.len();
    if n < 8 {
        a.iter().fold(0f32, |r, &x| r + x)
    } else if n <= 128 {
        let mut r = [0f32; 8];
        r.copy_from_slice(&a[..8]);
        let mut i = 8;
        while i < n - n % 8 {
            for j in 0..8 {
                r[j] += a[i + j];
            }
            i += 8;
        }
        let mut res = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for &x in &a[i..] {
            res += x;
        }
        res
    } else {
        let n2 = n / 2;
        let n2 = n2 - n2 % 8;
        pairwise_sum_f32(&a[..n2]) + pairwise_sum_f32(&a[n2..])
    }
}

/// Softmax of float16/bfloat16 data along the middle dim of (outer, n, inner), rounding each
/// step to the element type as the reference's numpy code does (every elementwise op is done
/// in f32 and rounded; float16 sums along a contiguous axis accumulate pairwise in f32, other
/// sums and all bfloat16 sums round after every addition).
fn softmax_half(v: &mut [f64], outer: usize, n: usize, inner: usize, dtype: DataType) {
    let rd: fn(f32) -> f32 = if dtype == DataType::Float16 {
        |x| half::f16::from_f32(x).to_f32()
    } else {
        |x| half::bf16::from_f32(x).to_f32()
    };
    let pairwise = dtype == DataType::Float16 && inner == 1;
    let mut col = vec![0f32; n];
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            for k in 0..n {
                col[k] = v[base + k * inner] as f32;
            }
            // np.max propagates NaN.
            let mx = col.iter().copied().fold(f32::NEG_INFINITY, |a, x| {
                if a.is_nan() || x.is_nan() {
                    f32::NAN
                } else {
                    a.max(x)
                }
            });
            for x in col.iter_mut() {
                *x = rd(rd(*x - mx).exp());
            }
            let s = if pairwise {
                rd(pairwise_sum_f32(&col))
            } else {
                col.iter().fold(0f32, |s, &x| rd(s + x))
            };
            for k in 0..n {
                v[base + k * inner] = f64::from(rd(col[k] / s));
            }
        }
    }
}

fn softmax_like(cx: &RunCx, kind: SoftKind) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let (outer, n, inner) = softmax_layout(cx, x.shape())?;
    if x.dtype() == DataType::Float && inner == 1 && kind != SoftKind::Hardmax {
        let t = fast32::softmax_rows(x, n, kind == SoftKind::LogSoftmax)?;
        return Ok(vec![t.into()]);
    }
    let mut v = floats(cx, x)?;
    if kind == SoftKind::Softmax && matches!(x.dtype(), DataType::Float16 | DataType::Bfloat16) {
        softmax_half(&mut v, outer, n, inner, x.dtype());
    } else {
        softmax_inplace(&mut v, outer, n, inner, kind);
    }
    Ok(vec![from_f64s(cx, x.dtype(), x.shape().to_vec(), v)?.into()])
}

/// Softmax: all versions (2-D coercion before 13, per axis from 13).
fn softmax(cx: &RunCx) -> KResult<Vec<Value>> {
    softmax_like(cx, SoftKind::Softmax)
}

/// LogSoftmax: all versions (2-D coercion before 13, per axis from 13).
fn log_softmax(cx: &RunCx) -> KResult<Vec<Value>> {
    softmax_like(cx, SoftKind::LogSoftmax)
}

/// Hardmax: all versions (2-D coercion before 13, per axis from 13); the first maximum wins.
fn hardmax(cx: &RunCx) -> KResult<Vec<Value>> {
    softmax_like(cx, SoftKind::Hardmax)
}

/// Per-channel (dim 1) parameter vector of length `c`, or per-sample-element when `full`.
fn per_channel(cx: &RunCx, t: &Tensor, what: &str, c: usize, full: usize) -> KResult<Vec<f64>> {
    let v = to_f64s(t)?;
    if v.len() != c && v.len() != full {
        return Err(cx.invalid(format!(
            "{what} must have {c} elements (one per channel), got shape {:?}",
            t.shape()
        )));
    }
    Ok(v)
}

/// BatchNormalization: inference for every version; training mode (v14+ `training_mode=1`)
/// normalizes with batch statistics and returns the updated running mean and variance.
fn batch_norm(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let shape = x.shape().to_vec();
    if shape.len() < 2 {
        return Err(cx.invalid(format!(
            "X must have rank >= 2 (N x C x ...), got shape {shape:?}"
        )));
    }
    let (n, c) = (shape[0], shape[1]);
    let sp: usize = shape[2..].iter().product();
    let eps = cx.float("epsilon", 1e-5)? as f64;
    let momentum = cx.float("momentum", 0.9)? as f64;
    let training = if cx.opset >= 14 {
        cx.int("training_mode", 0)? != 0
    } else {
        let extra = (1..cx.num_outputs()).any(|k| cx.wants_output(k));
        let is_test = cx.opset >= 7 || cx.int("is_test", 0)? != 0;
        if extra || !is_test {
            return Err(cx.unsupported(format!("training mode before opset 14 ({})", x.dtype())));
        }
        false
    };
    let xv = floats(cx, x)?;
    let full = c * sp;
    let scale = per_channel(cx, cx.input(1)?, "scale", c, full)?;
    let bias = per_channel(cx, cx.input(2)?, "B", c, full)?;
    let mean = per_channel(cx, cx.input(3)?, "input_mean", c, full)?;
    let var = per_channel(cx, cx.input(4)?, "input_var", c, full)?;
    let spatial_params = scale.len() == c && bias.len() == c && mean.len() == c && var.len() == c;
    if !spatial_params
        && (scale.len() != full || bias.len() != full || mean.len() != full || var.len() != full)
    {
        return Err(cx.invalid("scale, B, mean and var must all be per-channel or all per-element"));
    }
    let (use_mean, use_var) = if training {
        if !spatial_params {
            return Err(cx.invalid("training mode needs per-channel parameters"));
        }
        let cnt = (n * sp) as f64;
        let mut m = vec![0f64; c];
        let mut q = vec![0f64; c];
        for b in 0..n {
            for ch in 0..c {
                let row = &xv[(b * c + ch) * sp..(b * c + ch + 1) * sp];
                m[ch] += row.iter().sum::<f64>();
            }
        }
        m.iter_mut().for_each(|v| *v /= cnt);
        for b in 0..n {
            for ch in 0..c {
                let row = &xv[(b * c + ch) * sp..(b * c + ch + 1) * sp];
                q[ch] += row.iter().map(|v| (v - m[ch]) * (v - m[ch])).sum::<f64>();
            }
        }
        q.iter_mut().for_each(|v| *v /= cnt);
        (m, q)
    } else {
        (mean.clone(), var.clone())
    };
    let mut y = vec![0f64; xv.len()];
    for b in 0..n {
        for ch in 0..c {
            for s in 0..sp {
                let i = (b * c + ch) * sp + s;
                let p = if spatial_params { ch } else { ch * sp + s };
                y[i] = scale[p] * (xv[i] - use_mean[p]) / (use_var[p] + eps).sqrt() + bias[p];
            }
        }
    }
    let mut out = vec![from_f64s(cx, x.dtype(), shape, y)?.into()];
    if training {
        let mt = cx.input(3)?;
        let rm: Vec<f64> = mean
            .iter()
            .zip(&use_mean)
            .map(|(r, s)| r * momentum + s * (1.0 - momentum))
            .collect();
        let rv: Vec<f64> = var
            .iter()
            .zip(&use_var)
            .map(|(r, s)| r * momentum + s * (1.0 - momentum))
            .collect();
        out.push(from_f64s(cx, mt.dtype(), mt.shape().to_vec(), rm)?.into());
        out.push(from_f64s(cx, cx.input(4)?.dtype(), cx.input(4)?.shape().to_vec(), rv)?.into());
        out.truncate(cx.num_outputs().max(1));
    }
    Ok(out)
}

/// Normalizes each contiguous group of `len` elements to zero mean and unit variance
/// (population variance, `eps` added); returns the normalized data, means and inverse stddevs.
fn standardize(v: &[f64], len: usize, eps: f64) -> (Vec<f64>, Vec<f64>, Vec<f64>) {
    let groups = v.len().checked_div(len).unwrap_or(0);
    let mut y = vec![0f64; v.len()];
    let mut means = Vec::with_capacity(groups);
    let mut invs = Vec::with_capacity(groups);
    for g in 0..groups {
        let row = &v[g * len..(g + 1) * len];
        let m = row.iter().sum::<f64>() / len as f64;
        let var = row.iter().map(|x| (x - m) * (x - m)).sum::<f64>() / len as f64;
        let inv = 1.0 / (var + eps).sqrt();
        for (o, x) in y[g * len..(g + 1) * len].iter_mut().zip(row) {
            *o = (x - m) * inv;
        }
        means.push(m);
        invs.push(inv);
    }
    (y, means, invs)
}

/// InstanceNormalization: per (sample, channel) over the spatial dims, then per-channel affine.
fn instance_norm(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let shape = x.shape().to_vec();
    if shape.len() < 2 {
        return Err(cx.invalid(format!("input must have rank >= 2, got shape {shape:?}")));
    }
    let c = shape[1];
    let sp: usize = shape[2..].iter().product();
    let eps = cx.float("epsilon", 1e-5)? as f64;
    let scale = per_channel(cx, cx.input(1)?, "scale", c, c)?;
    let bias = per_channel(cx, cx.input(2)?, "B", c, c)?;
    let (mut y, _, _) = standardize(&floats(cx, x)?, sp, eps);
    for (g, chunk) in y.chunks_mut(sp.max(1)).enumerate() {
        let ch = g % c.max(1);
        chunk
            .iter_mut()
            .for_each(|v| *v = *v * scale[ch] + bias[ch]);
    }
    Ok(vec![from_f64s(cx, x.dtype(), shape, y)?.into()])
}

/// GroupNormalization: v18 (scale/bias per group) and v21 (per channel).
fn group_norm(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let shape = x.shape().to_vec();
    if shape.len() < 2 {
        return Err(cx.invalid(format!("X must have rank >= 2, got shape {shape:?}")));
    }
    let c = shape[1];
    let g = cx.int("num_groups", 0)?;
    if g <= 0 || c % g as usize != 0 {
        return Err(cx.invalid(format!("num_groups must divide the {c} channels, got {g}")));
    }
    let g = g as usize;
    let sp: usize = shape[2..].iter().product();
    let eps = cx.float("epsilon", 1e-5)? as f64;
    let per = if cx.opset >= 21 { c } else { g };
    let scale = per_channel(cx, cx.input(1)?, "scale", per, per)?;
    let bias = per_channel(cx, cx.input(2)?, "bias", per, per)?;
    let (mut y, _, _) = standardize(&floats(cx, x)?, (c / g) * sp, eps);
    for (i, chunk) in y.chunks_mut(sp.max(1)).enumerate() {
        let ch = i % c;
        let p = if per == c { ch } else { ch / (c / g) };
        chunk.iter_mut().for_each(|v| *v = *v * scale[p] + bias[p]);
    }
    Ok(vec![from_f64s(cx, x.dtype(), shape, y)?.into()])
}

/// `t` as one value per element of the normalized dims `shape[axis..]` (`false`), or, when it
/// broadcasts otherwise, one value per element of `shape` (`true`).
fn row_param(
    cx: &RunCx,
    t: &Tensor,
    shape: &[usize],
    axis: usize,
    what: &str,
) -> KResult<(Vec<f64>, bool)> {
    let strip = |s: &[usize]| -> Vec<usize> { s.iter().copied().skip_while(|&d| d == 1).collect() };
    if t.rank() <= shape.len() && strip(t.shape()) == strip(&shape[axis..]) {
        return Ok((to_f64s(t)?, false));
    }
    let full = crate::exec::util::broadcast_shapes(&[shape, t.shape()])
        .map_err(|e| cx.invalid(format!("{what}: {e}")))?;
    if full != shape {
        return Err(cx.invalid(format!(
            "{what} of shape {:?} does not broadcast to X of shape {shape:?}",
            t.shape()
        )));
    }
    let v = for_float!(t.dtype(), T => {
        broadcast_to::<T>(t, shape)?.into_iter().map(FloatConv::to_f64).collect()
    } else {
        return Err(cx.unsupported(t.dtype()))
    });
    Ok((v, true))
}

/// The element type of Mean / InvStdDev: the `stash_type` attribute (float or bfloat16).
fn stat_dtype(cx: &RunCx) -> KResult<DataType> {
    match cx.int("stash_type", 1)? {
        1 => Ok(DataType::Float),
        16 => Ok(DataType::Bfloat16),
        s => Err(cx.invalid(format!(
            "stash_type must be 1 (float) or 16 (bfloat16), got {s}"
        ))),
    }
}

/// LayerNormalization (17): Y, and Mean / InvStdDev over the dims from `axis`.
fn layer_norm(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let shape = x.shape().to_vec();
    let axis = norm_axis(cx.int("axis", -1)?, shape.len())
        .map_err(|e| cx.invalid(format!("axis: {e}")))?;
    let eps = cx.float("epsilon", 1e-5)? as f64;
    let cols: usize = shape[axis..].iter().product();
    if let Some(out) = layer_norm_f32(cx, x, axis, cols, eps)? {
        return Ok(out);
    }
    let (mut y, means, invs) = standardize(&floats(cx, x)?, cols, eps);
    let (w, wfull) = row_param(cx, cx.input(1)?, &shape, axis, "Scale")?;
    let b = match cx.opt_input(2)? {
        Some(b) => Some(row_param(cx, b, &shape, axis, "B")?),
        None => None,
    };
    for (i, v) in y.iter_mut().enumerate() {
        let k = if wfull { i } else { i % cols };
        *v *= w[k];
        if let Some((b, bfull)) = &b {
            *v += b[if *bfull { i } else { i % cols }];
        }
    }
    let mut stat_shape = shape.clone();
    stat_shape[axis..].iter_mut().for_each(|d| *d = 1);
    let sd = stat_dtype(cx)?;
    let mut out: Vec<Value> = vec![from_f64s(cx, x.dtype(), shape, y)?.into()];
    if cx.num_outputs() > 1 {
        out.push(from_f64s(cx, sd, stat_shape.clone(), means)?.into());
    }
    if cx.num_outputs() > 2 {
        out.push(from_f64s(cx, sd, stat_shape, invs)?.into());
    }
    Ok(out)
}

/// The float32 LayerNormalization when Scale (and B) hold one value per normalized element
/// and the statistics are stashed as float; `None` leaves the case to the general code.
fn layer_norm_f32(
    cx: &RunCx,
    x: &Tensor,
    axis: usize,
    cols: usize,
    eps: f64,
) -> KResult<Option<Vec<Value>>> {
    let scale = cx.input(1)?;
    let bias = cx.opt_input(2)?;
    let params: Vec<&Tensor> = std::iter::once(scale).chain(bias).collect();
    if !fast32::all_f32(&[x])
        || !fast32::all_f32(&params)
        || params.iter().any(|p| {
            let strip =
                |s: &[usize]| -> Vec<usize> { s.iter().copied().skip_while(|&d| d == 1).collect() };
            p.rank() > x.rank() || strip(p.shape()) != strip(&x.shape()[axis..])
        })
        || stat_dtype(cx)? != DataType::Float
    {
        return Ok(None);
    }
    let sv = fast32::elems(scale)?;
    let bv = bias.map(fast32::elems).transpose()?;
    let (y, means, invs) = fast32::layer_norm_rows(x, cols, &sv, bv.as_deref(), eps)?;
    let shape = x.shape().to_vec();
    let mut stat_shape = shape.clone();
    stat_shape[axis..].iter_mut().for_each(|d| *d = 1);
    let mut out: Vec<Value> = vec![Tensor::from_vec(shape, y)?.into()];
    if cx.num_outputs() > 1 {
        out.push(Tensor::from_vec(stat_shape.clone(), means)?.into());
    }
    if cx.num_outputs() > 2 {
        out.push(Tensor::from_vec(stat_shape, invs)?.into());
    }
    Ok(Some(out))
}

/// RMSNormalization (23): X / sqrt(mean(X²) + eps) * scale over the dims from `axis`.
fn rms_norm(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let shape = x.shape().to_vec();
    let axis = norm_axis(cx.int("axis", -1)?, shape.len())
        .map_err(|e| cx.invalid(format!("axis: {e}")))?;
    let eps = cx.float("epsilon", 1e-5)? as f64;
    let cols: usize = shape[axis..].iter().product();
    let mut y = floats(cx, x)?;
    let (w, wfull) = row_param(cx, cx.input(1)?, &shape, axis, "scale")?;
    if cols > 0 {
        for (r, row) in y.chunks_mut(cols).enumerate() {
            let ms = row.iter().map(|v| v * v).sum::<f64>() / cols as f64;
            let inv = 1.0 / (ms + eps).sqrt();
            for (j, v) in row.iter_mut().enumerate() {
                *v = *v * inv * w[if wfull { r * cols + j } else { j }];
            }
        }
    }
    Ok(vec![from_f64s(cx, x.dtype(), shape, y)?.into()])
}

/// LpNormalization: x / ||x||_p along `axis` (p = 1 or 2); a zero norm gives 0.
fn lp_norm(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let shape = x.shape().to_vec();
    if shape.is_empty() {
        return Err(cx.invalid("LpNormalization needs rank >= 1, got a scalar"));
    }
    let axis = norm_axis(cx.int("axis", -1)?, shape.len())
        .map_err(|e| cx.invalid(format!("axis: {e}")))?;
    let p = cx.int("p", 2)?;
    if p != 1 && p != 2 {
        return Err(cx.invalid(format!("p must be 1 or 2, got {p}")));
    }
    let (outer, n, inner) = split3(&shape, axis);
    let mut v = floats(cx, x)?;
    for o in 0..outer {
        for i in 0..inner {
            let base = o * n * inner + i;
            let mut s = 0.0;
            for k in 0..n {
                let e = v[base + k * inner];
                s += if p == 1 { e.abs() } else { e * e };
            }
            let norm = if p == 1 { s } else { s.sqrt() };
            for k in 0..n {
                let e = &mut v[base + k * inner];
                *e = if norm == 0.0 { 0.0 } else { *e / norm };
            }
        }
    }
    Ok(vec![from_f64s(cx, x.dtype(), shape, v)?.into()])
}

/// MeanVarianceNormalization: (X - E[X]) / (sqrt(E[X²] - E[X]²) + 1e-9) over `axes`.
fn mvn(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let axes = cx
        .attr_ints("axes")?
        .map(|a| a.to_vec())
        .unwrap_or_else(|| vec![0, 2, 3]);
    let plan = Plan::new(cx, x.shape(), Some(axes), false, true)?;
    let v = floats(cx, x)?;
    let n = plan.count as f64;
    let offs = plan.out_offsets();
    let mut m = vec![0f64; plan.out_len()];
    let mut q = vec![0f64; plan.out_len()];
    for (&e, &o) in v.iter().zip(&offs) {
        m[o] += e;
        q[o] += e * e;
    }
    let sd: Vec<f64> = m
        .iter_mut()
        .zip(&q)
        .map(|(m, q)| {
            *m /= n;
            (q / n - *m * *m).sqrt() + 1e-9
        })
        .collect();
    let y: Vec<f64> = v
        .iter()
        .zip(&offs)
        .map(|(&e, &o)| (e - m[o]) / sd[o])
        .collect();
    Ok(vec![from_f64s(cx, x.dtype(), x.shape().to_vec(), y)?.into()])
}

/// LRN: x / (bias + alpha/size * sum of squares over nearby channels)^beta.
fn lrn(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let shape = x.shape().to_vec();
    if shape.len() < 2 {
        return Err(cx.invalid(format!("X must have rank >= 2, got shape {shape:?}")));
    }
    let size = cx
        .attr_i("size")?
        .ok_or_else(|| cx.invalid("LRN needs the 'size' attribute"))?;
    if size <= 0 {
        return Err(cx.invalid(format!("size must be positive, got {size}")));
    }
    let alpha = cx.float("alpha", 1e-4)? as f64;
    let beta = cx.float("beta", 0.75)? as f64;
    let bias = cx.float("bias", 1.0)? as f64;
    let (n, c) = (shape[0], shape[1]);
    let sp: usize = shape[2..].iter().product();
    let lo = ((size - 1) / 2) as usize;
    let hi = ((size - 1) as usize).div_ceil(2);
    let v = floats(cx, x)?;
    let mut y = vec![0f64; v.len()];
    for b in 0..n {
        for ch in 0..c {
            let from = ch.saturating_sub(lo);
            let to = (ch + hi).min(c - 1);
            for s in 0..sp {
                let mut sq = 0.0;
                for k in from..=to {
                    let e = v[(b * c + k) * sp + s];
                    sq += e * e;
                }
                let i = (b * c + ch) * sp + s;
                y[i] = v[i] / (bias + alpha / size as f64 * sq).powf(beta);
            }
        }
    }
    Ok(vec![from_f64s(cx, x.dtype(), shape, y)?.into()])
}

/// numpy's legacy MT19937 (`np.random.seed(s)` then `uniform(0, 1)`), so that Dropout with a
/// seed reproduces the reference's masks.
struct Mt19937 {
    mt: [u32; 624],
    idx: usize,
}

impl Mt19937 {
    fn new(seed: u32) -> Self {
        let mut mt = [0u32; 624];
        mt[0] = seed;
        for i in 1..624 {
            mt[i] = 1812433253u32
                .wrapping_mul(mt[i - 1] ^ (mt[i - 1] >> 30))
                .wrapping_add(i as u32);
        }
        Mt19937 { mt, idx: 624 }
    }

    fn next_u32(&mut self) -> u32 {
        if self.idx >= 624 {
            for i in 0..624 {
                let y = (self.mt[i] & 0x8000_0000) | (self.mt[(i + 1) % 624] & 0x7fff_ffff);
                let mut v = self.mt[(i + 397) % 624] ^ (y >> 1);
                if y & 1 != 0 {
                    v ^= 0x9908_b0df;
                }
                self.mt[i] = v;
            }
            self.idx = 0;
        }
        let mut y = self.mt[self.idx];
        self.idx += 1;
        y ^= y >> 11;
        y ^= (y << 7) & 0x9d2c_5680;
        y ^= (y << 15) & 0xefc6_0000;
        y ^= y >> 18;
        y
    }

    fn next_f64(&mut self) -> f64 {
        let a = (self.next_u32() >> 5) as f64;
        let b = (self.next_u32() >> 6) as f64;
        (a * 67108864.0 + b) / 9007199254740992.0
    }
}

/// Dropout: identity (mask all true) unless training mode (v12+ input) with ratio > 0, which
/// drops with numpy's MT19937 seeded by `seed` (a clock-derived seed when absent).
fn dropout(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let (ratio, training) = if cx.opset >= 12 {
        let r = match cx.opt_input(1)? {
            Some(t) => {
                let v = to_f64s(t)?;
                *v.first()
                    .ok_or_else(|| cx.invalid("ratio must hold one value"))?
            }
            None => 0.5,
        };
        let t = match cx.opt_input(2)? {
            Some(t) => to_i64s(t)?.first().copied().unwrap_or(0) != 0,
            None => false,
        };
        (r, t)
    } else {
        (cx.float("ratio", 0.5)? as f64, false)
    };
    let want_mask = cx.wants_output(1);
    let mask_dtype = if cx.opset >= 10 {
        DataType::Bool
    } else {
        x.dtype()
    };
    if !training || ratio == 0.0 {
        let mut out = vec![Value::Tensor(x.clone())];
        if want_mask {
            let m = if mask_dtype == DataType::Bool {
                Tensor::from_vec(x.shape().to_vec(), vec![true; x.len()])?
            } else {
                from_f64s(cx, mask_dtype, x.shape().to_vec(), vec![1.0; x.len()])?
            };
            out.push(m.into());
        }
        return Ok(out);
    }
    if !(0.0..1.0).contains(&ratio) {
        return Err(cx.invalid(format!(
            "ratio must be in [0, 1) in training mode, got {ratio}"
        )));
    }
    let seed = match cx.attr_i("seed")? {
        Some(s) => s as u32,
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0),
    };
    let mut rng = Mt19937::new(seed);
    let mask: Vec<bool> = (0..x.len()).map(|_| rng.next_f64() >= ratio).collect();
    let y = for_float!(x.dtype(), T => {
        let scale = 1.0 / (1.0 - ratio as f32);
        let v = x.to_vec::<T>()?;
        let y: Vec<T> = v
            .into_iter()
            .zip(&mask)
            .map(|(e, &m)| T::from_f32(if m { e.to_f32() * scale } else { 0.0 }))
            .collect();
        Tensor::from_vec(x.shape().to_vec(), y)?
    } else {
        return Err(cx.unsupported(x.dtype()))
    });
    let mut out = vec![y.into()];
    if want_mask {
        out.push(Tensor::from_vec(x.shape().to_vec(), mask)?.into());
    }
    Ok(out)
}

/// Shared loss: -logp[n, t, d] weighted, with ignore_index and reduction none/sum/mean.
fn nll(cx: &RunCx, logp: &[f64], shape: &[usize], dtype: DataType) -> KResult<Tensor> {
    let target = cx.input(1)?;
    if shape.len() < 2 {
        return Err(cx.invalid(format!(
            "input must have rank >= 2 (N x C x ...), got {shape:?}"
        )));
    }
    let (n, c) = (shape[0], shape[1]);
    let d: usize = shape[2..].iter().product();
    let mut want_t = vec![n];
    want_t.extend_from_slice(&shape[2..]);
    if target.shape() != want_t.as_slice() {
        return Err(cx.invalid(format!(
            "target must have shape {want_t:?} for input {shape:?}, got {:?}",
            target.shape()
        )));
    }
    let t = to_i64s(target)?;
    let weight = match cx.opt_input(2)? {
        Some(w) => {
            let w = to_f64s(w)?;
            if w.len() != c {
                return Err(cx.invalid(format!("weight must have {c} elements, got {}", w.len())));
            }
            Some(w)
        }
        None => None,
    };
    let ignore = cx.attr_i("ignore_index")?;
    let reduction = cx.string("reduction", "mean")?;
    let mut loss = vec![0f64; n * d];
    let mut wsum = 0.0;
    for b in 0..n {
        for k in 0..d {
            let tv = t[b * d + k];
            if Some(tv) == ignore {
                continue;
            }
            if tv < 0 || tv as usize >= c {
                return Err(cx.invalid(format!("target value {tv} is out of range [0, {c})")));
            }
            let w = weight.as_ref().map_or(1.0, |w| w[tv as usize]);
            loss[b * d + k] = -logp[(b * c + tv as usize) * d + k] * w;
            wsum += w;
        }
    }
    let out = match reduction.as_str() {
        "none" => return from_f64s(cx, dtype, want_t, loss),
        "sum" => loss.iter().sum::<f64>(),
        "mean" => {
            let s = loss.iter().sum::<f64>();
            if weight.is_none() && ignore.is_none() {
                s / (n * d) as f64
            } else {
                s / wsum
            }
        }
        r => return Err(cx.invalid(format!("reduction must be none, sum or mean, got '{r}'"))),
    };
    from_f64s(cx, dtype, vec![], vec![out])
}

/// NegativeLogLikelihoodLoss: all versions.
fn nll_loss(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let v = floats(cx, x)?;
    Ok(vec![nll(cx, &v, x.shape(), x.dtype())?.into()])
}

/// SoftmaxCrossEntropyLoss: all versions; the optional second output is log_prob.
fn sce_loss(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let shape = x.shape();
    if shape.len() < 2 {
        return Err(cx.invalid(format!("scores must have rank >= 2, got {shape:?}")));
    }
    let mut v = floats(cx, x)?;
    let (outer, n, inner) = split3(shape, 1);
    softmax_inplace(&mut v, outer, n, inner, SoftKind::LogSoftmax);
    let loss = nll(cx, &v, shape, x.dtype())?;
    let mut out = vec![loss.into()];
    if cx.num_outputs() > 1 {
        out.push(from_f64s(cx, x.dtype(), shape.to_vec(), v)?.into());
    }
    Ok(out)
}

pub const KERNELS: &[KernelDef] = &[
    kernel("Softmax", 1, softmax),
    kernel("LogSoftmax", 1, log_softmax),
    kernel("Hardmax", 1, hardmax),
    kernel("BatchNormalization", 1, batch_norm),
    kernel("InstanceNormalization", 1, instance_norm),
    kernel("GroupNormalization", 18, group_norm),
    kernel("LayerNormalization", 17, layer_norm),
    kernel("RMSNormalization", 23, rms_norm),
    kernel("LpNormalization", 1, lp_norm),
    kernel("MeanVarianceNormalization", 9, mvn),
    kernel("LRN", 1, lrn),
    kernel("Dropout", 1, dropout),
    kernel("NegativeLogLikelihoodLoss", 12, nll_loss),
    kernel("SoftmaxCrossEntropyLoss", 12, sce_loss),
];

#[cfg(test)]
mod tests {
    use crate::kernels::reduce::testutil::{close, out, run, t, A};

    #[test]
    fn softmax_before_13_coerces_to_2d() {
        let x = t(&[2, 3], &[0f32, 1., 2., 3., 4., 5.]);
        let r = run(
            "Softmax",
            11,
            vec![("axis", A::I(0))],
            std::slice::from_ref(&x),
            1,
        )
        .unwrap();
        let want = [
            0.004269778f32,
            0.011606461,
            0.031549633,
            0.08576079,
            0.23312199,
            0.6336913,
        ];
        close(&out::<f32>(&r, 0).1, &want);
        // From 13 the same axis is per column.
        let r = run("Softmax", 13, vec![("axis", A::I(0))], &[x], 1).unwrap();
        let y = out::<f32>(&r, 0).1;
        close(&[y[0] + y[3]], &[1.0]);
    }

    #[test]
    fn hardmax_before_13_coerces_to_2d() {
        let x = t(&[1, 2, 2], &[1f32, 5., 3., 2.]);
        let r = run("Hardmax", 11, vec![], std::slice::from_ref(&x), 1).unwrap();
        assert_eq!(out::<f32>(&r, 0).1, vec![0., 1., 0., 0.]);
        let r = run("Hardmax", 13, vec![("axis", A::I(1))], &[x], 1).unwrap();
        assert_eq!(out::<f32>(&r, 0).1, vec![0., 1., 1., 0.]);
    }

    #[test]
    fn group_norm_18_scales_per_group() {
        let x = t(&[1, 4, 1], &[1f32, 3., 10., 30.]);
        let s = t(&[2], &[1f32, 2.]);
        let b = t(&[2], &[0f32, 1.]);
        let r = run(
            "GroupNormalization",
            18,
            vec![("num_groups", A::I(2)), ("epsilon", A::F(0.0))],
            &[x, s, b],
            1,
        )
        .unwrap();
        close(&out::<f32>(&r, 0).1, &[-1., 1., -1., 3.]);
    }

    #[test]
    fn batch_norm_per_element_params_and_old_training_is_unsupported() {
        let x = t(&[1, 1, 2], &[1f32, 2.]);
        let one = t(&[1, 2], &[1f32, 1.]);
        let m = t(&[1, 2], &[1f32, 0.]);
        let r = run(
            "BatchNormalization",
            7,
            vec![("epsilon", A::F(0.0))],
            &[x.clone(), one.clone(), m.clone(), m.clone(), one.clone()],
            1,
        )
        .unwrap();
        close(&out::<f32>(&r, 0).1, &[1., 2.]);
        let e = run(
            "BatchNormalization",
            6,
            vec![("is_test", A::I(0))],
            &[x, one.clone(), m.clone(), m, one],
            1,
        );
        assert!(matches!(
            e,
            Err(crate::exec::KernelError::Unsupported { .. })
        ));
    }

    #[test]
    fn lp_norm_p1_uses_absolute_values() {
        let x = t(&[2], &[-1f32, 3.]);
        let r = run("LpNormalization", 22, vec![("p", A::I(1))], &[x], 1).unwrap();
        close(&out::<f32>(&r, 0).1, &[-0.25, 0.75]);
    }

    #[test]
    fn dropout_masks_by_version() {
        let x = t(&[2], &[1f32, 2.]);
        let r = run("Dropout", 7, vec![], std::slice::from_ref(&x), 2).unwrap();
        assert_eq!(out::<f32>(&r, 1).1, vec![1., 1.]);
        let r = run("Dropout", 13, vec![], std::slice::from_ref(&x), 2).unwrap();
        assert_eq!(out::<bool>(&r, 1).1, vec![true, true]);
        // numpy: np.random.seed(0); np.random.uniform(0, 1, 2) = [0.5488, 0.7152]
        let ratio = t(&[], &[0.6f32]);
        let on = t(&[], &[true]);
        let r = run("Dropout", 13, vec![("seed", A::I(0))], &[x, ratio, on], 2).unwrap();
        assert_eq!(out::<bool>(&r, 1).1, vec![false, true]);
        close(&out::<f32>(&r, 0).1, &[0.0, 5.0]);
    }

    #[test]
    fn nll_rejects_out_of_range_targets() {
        let x = t(&[1, 2], &[0.1f32, 0.2]);
        let tg = t(&[1], &[2i64]);
        assert!(run(
            "NegativeLogLikelihoodLoss",
            22,
            vec![("reduction", A::S("none"))],
            &[x, tg],
            1
        )
        .is_err());
    }
}
