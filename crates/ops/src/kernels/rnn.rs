//! Kernels of the rnn family (inference: `families/rnn.rs`): RNN, GRU and LSTM.
//!
//! One engine runs all three cells: directions (forward / reverse / bidirectional),
//! `sequence_lens` (steps past a batch entry's length leave zeros in Y), initial states,
//! the `activations` list with `activation_alpha` / `activation_beta`, `clip`, `layout`,
//! LSTM peepholes and `input_forget`, GRU `linear_before_reset`. Computes float32 inputs in
//! float32 (vectorised dot products and Sigmoid/Tanh), the other float types in f64.

use super::conv::common::{self, store, Real};
use super::gemm::Dense;
use crate::exec::util;
use crate::exec::{kernel, KResult, KernelDef, RunCx, Value};
use tensor::{DataType, Tensor};

/// The recurrent cell kind.
#[derive(Clone, Copy, PartialEq)]
enum Cell {
    Rnn,
    Gru,
    Lstm,
}

impl Cell {
    fn gates(self) -> usize {
        match self {
            Cell::Rnn => 1,
            Cell::Gru => 3,
            Cell::Lstm => 4,
        }
    }
    fn default_acts(self) -> &'static [&'static str] {
        match self {
            Cell::Rnn => &["Tanh"],
            Cell::Gru => &["Sigmoid", "Tanh"],
            Cell::Lstm => &["Sigmoid", "Tanh", "Tanh"],
        }
    }
}

/// An activation function with its alpha and beta.
#[derive(Clone, Copy)]
enum Act {
    Relu,
    Tanh,
    Sigmoid,
    Affine(f64, f64),
    LeakyRelu(f64),
    ThresholdedRelu(f64),
    ScaledTanh(f64, f64),
    HardSigmoid(f64, f64),
    Elu(f64),
    Softsign,
    Softplus,
}

impl Act {
    fn apply<F: Real>(self, x: F) -> F {
        let (zero, one) = (F::zero(), F::one());
        match self {
            Act::Relu => x.max(zero),
            Act::Tanh => x.tanh(),
            Act::Sigmoid => one / (one + (-x).exp()),
            Act::Affine(a, b) => F::of(a) * x + F::of(b),
            Act::LeakyRelu(a) => {
                if x < zero {
                    F::of(a) * x
                } else {
                    x
                }
            }
            Act::ThresholdedRelu(a) => {
                if x > F::of(a) {
                    x
                } else {
                    zero
                }
            }
            Act::ScaledTanh(a, b) => F::of(a) * (F::of(b) * x).tanh(),
            Act::HardSigmoid(a, b) => clamp(F::of(a) * x + F::of(b), zero, one),
            Act::Elu(a) => {
                if x < zero {
                    F::of(a) * (x.exp() - one)
                } else {
                    x
                }
            }
            Act::Softsign => x / (one + x.abs()),
            Act::Softplus => (one + x.exp()).ln(),
        }
    }

    /// `xs[j] = self(xs[j])`: Sigmoid and Tanh of float32 through the vectorised functions.
    fn apply_all<F: Cellwise>(self, xs: &mut [F]) {
        match self {
            Act::Sigmoid => F::sigmoid_all(xs),
            Act::Tanh => F::tanh_all(xs),
            _ => xs.iter_mut().for_each(|v| *v = self.apply(*v)),
        }
    }
}

/// `v` limited to `lo..=hi`, NaN kept (as `f64::clamp` does; `max`/`min` would drop it).
fn clamp<F: Real>(v: F, lo: F, hi: F) -> F {
    if v.is_nan() {
        v
    } else {
        v.max(lo).min(hi)
    }
}

/// A compute type of the cells: `f32` (vectorised Sigmoid and Tanh) or `f64` (libm).
trait Cellwise: Real + Dense {
    fn sigmoid_all(xs: &mut [Self]);
    fn tanh_all(xs: &mut [Self]);
}

impl Cellwise for f32 {
    fn sigmoid_all(xs: &mut [f32]) {
        crate::kernels::fast32::map_inplace(xs, crate::kernels::fast32::sigmoid);
    }
    fn tanh_all(xs: &mut [f32]) {
        crate::kernels::fast32::map_inplace(xs, crate::kernels::fast32::tanh);
    }
}

impl Cellwise for f64 {
    fn sigmoid_all(xs: &mut [f64]) {
        xs.iter_mut().for_each(|v| *v = Act::Sigmoid.apply(*v));
    }
    fn tanh_all(xs: &mut [f64]) {
        xs.iter_mut().for_each(|v| *v = v.tanh());
    }
}

/// Parses the activations list (alpha/beta consumed in order by the functions that use them).
fn activations(cx: &RunCx, cell: Cell, dirs: usize) -> KResult<Vec<Act>> {
    let per = cell.default_acts().len();
    let names: Vec<String> = match cx.attr_strings("activations")? {
        Some(v) if !v.is_empty() => v,
        _ => (0..dirs)
            .flat_map(|_| cell.default_acts().iter().map(|s| s.to_string()))
            .collect(),
    };
    if names.len() != per * dirs {
        return Err(cx.invalid(format!(
            "activations must list {} functions ({per} per direction), got {names:?}",
            per * dirs
        )));
    }
    let alphas: Vec<f64> = cx
        .attr_floats("activation_alpha")?
        .unwrap_or(&[])
        .iter()
        .map(|&v| v as f64)
        .collect();
    let betas: Vec<f64> = cx
        .attr_floats("activation_beta")?
        .unwrap_or(&[])
        .iter()
        .map(|&v| v as f64)
        .collect();
    let (mut ai, mut bi) = (0usize, 0usize);
    let mut alpha = |d: f64| {
        let v = alphas.get(ai).copied().unwrap_or(d);
        ai += 1;
        v
    };
    let mut beta = |d: f64| {
        let v = betas.get(bi).copied().unwrap_or(d);
        bi += 1;
        v
    };
    names
        .iter()
        .map(|n| {
            Ok(match n.to_ascii_lowercase().as_str() {
                "relu" => Act::Relu,
                "tanh" => Act::Tanh,
                "sigmoid" => Act::Sigmoid,
                "affine" => Act::Affine(alpha(1.0), beta(0.0)),
                "leakyrelu" => Act::LeakyRelu(alpha(0.01)),
                "thresholdedrelu" => Act::ThresholdedRelu(alpha(1.0)),
                "scaledtanh" => Act::ScaledTanh(alpha(1.0), beta(1.0)),
                "hardsigmoid" => Act::HardSigmoid(alpha(0.2), beta(0.5)),
                "elu" => Act::Elu(alpha(1.0)),
                "softsign" => Act::Softsign,
                "softplus" => Act::Softplus,
                _ => return Err(cx.invalid(format!("unknown activation function '{n}'"))),
            })
        })
        .collect()
}

/// y[r] += sum_k m[r*cols + k] * v[k]: the matrix-vector product of `gemm`.
fn matvec_add<F: Dense>(y: &mut [F], m: &[F], v: &[F]) {
    use crate::kernels::gemm::{gemm_ldc, Operand};
    let column = Operand {
        data: v,
        rs: 1,
        cs: 1,
    };
    gemm_ldc(
        y.len(),
        v.len(),
        1,
        Operand::rows(m, v.len()),
        column,
        y,
        1,
        true,
        F::ONE,
    );
}

/// Optional float input `i` in the compute type, checked to have `shape`.
fn opt_load<F: Real>(cx: &RunCx, i: usize, shape: &[usize], what: &str) -> KResult<Option<Vec<F>>> {
    match cx.opt_input(i)? {
        None => Ok(None),
        Some(t) => {
            if t.shape() != shape {
                return Err(cx.invalid(format!(
                    "{what} must have shape {shape:?}, got {:?}",
                    t.shape()
                )));
            }
            Ok(Some(common::load::<F>(t)?))
        }
    }
}

/// Swaps the first two axes of a row-major [a, b, rest] buffer.
fn swap01<F: Copy + Default>(v: &[F], a: usize, b: usize, rest: usize) -> Vec<F> {
    let mut out = vec![F::default(); v.len()];
    for i in 0..a {
        for j in 0..b {
            let src = (i * b + j) * rest;
            let dst = (j * a + i) * rest;
            out[dst..dst + rest].copy_from_slice(&v[src..src + rest]);
        }
    }
    out
}

/// The shared RNN / GRU / LSTM kernel.
fn recurrent(cx: &RunCx, cell: Cell) -> KResult<Vec<Value>> {
    if cx.input(0)?.dtype() == DataType::Float {
        recurrent_in::<f32>(cx, cell)
    } else {
        recurrent_in::<f64>(cx, cell)
    }
}

/// [`recurrent`] computing in `F`.
fn recurrent_in<F: Cellwise>(cx: &RunCx, cell: Cell) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let w = cx.input(1)?;
    let r = cx.input(2)?;
    let dtype = x.dtype();
    if !matches!(
        dtype,
        DataType::Float | DataType::Double | DataType::Float16 | DataType::Bfloat16
    ) {
        return Err(cx.unsupported(dtype));
    }
    let layout = cx.int("layout", 0)?;
    if x.rank() != 3 || w.rank() != 3 || r.rank() != 3 {
        return Err(cx.invalid(format!(
            "X, W and R must have rank 3, got {:?}, {:?}, {:?}",
            x.shape(),
            w.shape(),
            r.shape()
        )));
    }
    let (t_len, batch, isz) = if layout == 0 {
        (x.shape()[0], x.shape()[1], x.shape()[2])
    } else {
        (x.shape()[1], x.shape()[0], x.shape()[2])
    };
    let direction = cx.string("direction", "forward")?;
    let dirs = match direction.as_str() {
        "forward" | "reverse" => 1,
        "bidirectional" => 2,
        _ => {
            return Err(cx.invalid(format!(
                "direction must be forward, reverse or bidirectional, got '{direction}'"
            )))
        }
    };
    let g = cell.gates();
    let h = r.shape()[2];
    if let Some(hs) = cx.attr_i("hidden_size")? {
        if hs as usize != h {
            return Err(cx.invalid(format!("hidden_size {hs} does not match R's last dim {h}")));
        }
    }
    if w.shape() != [dirs, g * h, isz] || r.shape() != [dirs, g * h, h] {
        return Err(cx.invalid(format!(
            "W must be {:?} and R {:?}, got {:?} and {:?}",
            [dirs, g * h, isz],
            [dirs, g * h, h],
            w.shape(),
            r.shape()
        )));
    }
    common::numel(cx, &[t_len, dirs, batch, h])?;
    let acts = activations(cx, cell, dirs)?;
    let per_act = cell.default_acts().len();
    let clip = cx.attr_f("clip")?.map(|c| F::of(c as f64));
    let lbr = cx.int("linear_before_reset", 0)? != 0;
    let input_forget = cx.int("input_forget", 0)? != 0;
    let mut xv = common::load::<F>(x)?;
    if layout != 0 {
        xv = swap01(&xv, batch, t_len, isz);
    }
    let wv = common::load::<F>(w)?;
    let rv = common::load::<F>(r)?;
    let bv = opt_load::<F>(cx, 3, &[dirs, 2 * g * h], "B")?;
    let seq_lens: Vec<usize> = match cx.opt_input(4)? {
        Some(s) => {
            let v = util::to_i64s(s)?;
            if v.len() != batch || v.iter().any(|&l| l < 0 || l as usize > t_len) {
                return Err(cx.invalid(format!(
                    "sequence_lens must hold {batch} values in 0..={t_len}, got {v:?}"
                )));
            }
            v.into_iter().map(|l| l as usize).collect()
        }
        None => vec![t_len; batch],
    };
    let state_shape = if layout == 0 {
        [dirs, batch, h]
    } else {
        [batch, dirs, h]
    };
    let mut h0 = opt_load::<F>(cx, 5, &state_shape, "initial_h")?;
    let mut c0 = if cell == Cell::Lstm {
        opt_load::<F>(cx, 6, &state_shape, "initial_c")?
    } else {
        None
    };
    if layout != 0 {
        h0 = h0.map(|v| swap01(&v, batch, dirs, h));
        c0 = c0.map(|v| swap01(&v, batch, dirs, h));
    }
    let pv = if cell == Cell::Lstm {
        opt_load::<F>(cx, 7, &[dirs, 3 * h], "P")?
    } else {
        None
    };
    // Y: [T, D, B, H]; Y_h, Y_c: [D, B, H].
    let zero = F::zero();
    let mut y = vec![zero; t_len * dirs * batch * h];
    let mut yh = vec![zero; dirs * batch * h];
    let mut yc = vec![zero; dirs * batch * h];
    let cl = |v: F| match clip {
        Some(c) => clamp(v, -c, c),
        None => v,
    };
    let mut gx = vec![zero; g * h];
    let mut gh = vec![zero; g * h];
    // Per-step scratch: gate values (up to four), and GRU's r ⊙ h and its product.
    let mut ga = vec![zero; h];
    let mut gb = vec![zero; h];
    let mut gc = vec![zero; h];
    let mut gd = vec![zero; h];
    // The input projections of every step at once: XW[t*B + b] = W_d · x[t, b].
    let mut xw = vec![zero; t_len * batch * g * h];
    for d in 0..dirs {
        let reverse = direction == "reverse" || d == 1;
        let wd = &wv[d * g * h * isz..(d + 1) * g * h * isz];
        crate::kernels::gemm::gemm(
            t_len * batch,
            isz,
            g * h,
            crate::kernels::gemm::Operand::rows(&xv[..t_len * batch * isz], isz),
            crate::kernels::gemm::Operand {
                data: wd,
                rs: 1,
                cs: isz,
            },
            &mut xw,
            false,
            F::one(),
        );
        let rd = &rv[d * g * h * h..(d + 1) * g * h * h];
        let zero_b = vec![zero; 2 * g * h];
        let bd = bv
            .as_ref()
            .map_or(&zero_b[..], |b| &b[d * 2 * g * h..(d + 1) * 2 * g * h]);
        let (wb, rb) = bd.split_at(g * h);
        let zero_p = vec![zero; 3 * h];
        let pd = pv
            .as_ref()
            .map_or(&zero_p[..], |p| &p[d * 3 * h..(d + 1) * 3 * h]);
        let a = &acts[d * per_act..(d + 1) * per_act];
        for b in 0..batch {
            let si = (d * batch + b) * h;
            let mut hs: Vec<F> = h0
                .as_ref()
                .map_or(vec![zero; h], |v| v[si..si + h].to_vec());
            let mut cs: Vec<F> = c0
                .as_ref()
                .map_or(vec![zero; h], |v| v[si..si + h].to_vec());
            let len = seq_lens[b];
            for step in 0..len {
                let t = if reverse { len - 1 - step } else { step };
                let xt = &xw[(t * batch + b) * g * h..(t * batch + b + 1) * g * h];
                for ((o, &p), &bias) in gx.iter_mut().zip(xt).zip(wb) {
                    *o = bias + p;
                }
                gh.copy_from_slice(rb);
                // GRU without linear_before_reset multiplies its third block by r ⊙ h below.
                let rows = if cell == Cell::Gru && !lbr {
                    2 * h
                } else {
                    g * h
                };
                matvec_add(&mut gh[..rows], &rd[..rows * h], &hs);
                match cell {
                    Cell::Rnn => {
                        for j in 0..h {
                            hs[j] = cl(gx[j] + gh[j]);
                        }
                        a[0].apply_all(&mut hs);
                    }
                    Cell::Gru => {
                        // Gate order z, r, h: ga = z, gb = r, gc = the candidate.
                        for j in 0..h {
                            ga[j] = cl(gx[j] + gh[j]);
                            gb[j] = cl(gx[h + j] + gh[h + j]);
                        }
                        a[0].apply_all(&mut ga);
                        a[0].apply_all(&mut gb);
                        if lbr {
                            for j in 0..h {
                                gc[j] = cl(gx[2 * h + j] + gb[j] * gh[2 * h + j]);
                            }
                        } else {
                            for j in 0..h {
                                gd[j] = gb[j] * hs[j];
                            }
                            let acc = &mut gh[2 * h..3 * h];
                            matvec_add(acc, &rd[2 * h * h..3 * h * h], &gd);
                            for j in 0..h {
                                gc[j] = cl(gx[2 * h + j] + gh[2 * h + j]);
                            }
                        }
                        a[1].apply_all(&mut gc);
                        for j in 0..h {
                            hs[j] = (F::one() - ga[j]) * gc[j] + ga[j] * hs[j];
                        }
                    }
                    Cell::Lstm => {
                        // Gate order i, o, f, c; peepholes i, o, f. ga = i, gb = f, gc = c̃,
                        // gd = o.
                        for j in 0..h {
                            ga[j] = cl(gx[j] + gh[j] + pd[j] * cs[j]);
                            gc[j] = cl(gx[3 * h + j] + gh[3 * h + j]);
                        }
                        a[0].apply_all(&mut ga);
                        if input_forget {
                            for j in 0..h {
                                gb[j] = F::one() - ga[j];
                            }
                        } else {
                            for j in 0..h {
                                gb[j] = cl(gx[2 * h + j] + gh[2 * h + j] + pd[2 * h + j] * cs[j]);
                            }
                            a[0].apply_all(&mut gb);
                        }
                        a[1].apply_all(&mut gc);
                        for j in 0..h {
                            cs[j] = gb[j] * cs[j] + ga[j] * gc[j];
                            gd[j] = cl(gx[h + j] + gh[h + j] + pd[h + j] * cs[j]);
                        }
                        a[0].apply_all(&mut gd);
                        hs.copy_from_slice(&cs);
                        a[2].apply_all(&mut hs);
                        for j in 0..h {
                            hs[j] = gd[j] * hs[j];
                        }
                    }
                }
                let yi = ((t * dirs + d) * batch + b) * h;
                y[yi..yi + h].copy_from_slice(&hs);
            }
            yh[si..si + h].copy_from_slice(&hs);
            yc[si..si + h].copy_from_slice(&cs);
        }
    }
    let (y, y_shape, yh, yc, s_shape) = if layout == 0 {
        (y, vec![t_len, dirs, batch, h], yh, yc, vec![dirs, batch, h])
    } else {
        // [T, D, B, H] -> [B, T, D, H]
        let mut o = vec![zero; y.len()];
        for t in 0..t_len {
            for d in 0..dirs {
                for b in 0..batch {
                    let src = ((t * dirs + d) * batch + b) * h;
                    let dst = ((b * t_len + t) * dirs + d) * h;
                    o[dst..dst + h].copy_from_slice(&y[src..src + h]);
                }
            }
        }
        (
            o,
            vec![batch, t_len, dirs, h],
            swap01(&yh, dirs, batch, h),
            swap01(&yc, dirs, batch, h),
            vec![batch, dirs, h],
        )
    };
    let n_out = cx.num_outputs().max(1);
    let mut outs: Vec<Value> = Vec::with_capacity(n_out);
    let mk = |shape: Vec<usize>, v: Vec<F>| -> KResult<Tensor> { store::<F>(dtype, shape, v) };
    outs.push(mk(y_shape, y)?.into());
    if n_out > 1 {
        outs.push(mk(s_shape.clone(), yh)?.into());
    }
    if n_out > 2 && cell == Cell::Lstm {
        outs.push(mk(s_shape, yc)?.into());
    }
    Ok(outs)
}

/// RNN: simple recurrent network.
fn rnn(cx: &RunCx) -> KResult<Vec<Value>> {
    recurrent(cx, Cell::Rnn)
}

/// GRU (with linear_before_reset).
fn gru(cx: &RunCx) -> KResult<Vec<Value>> {
    recurrent(cx, Cell::Gru)
}

/// LSTM (peepholes, input_forget, layout).
fn lstm(cx: &RunCx) -> KResult<Vec<Value>> {
    recurrent(cx, Cell::Lstm)
}

pub const KERNELS: &[KernelDef] = &[
    kernel("RNN", 1, rnn),
    kernel("GRU", 1, gru),
    kernel("LSTM", 1, lstm),
];

#[cfg(test)]
mod tests {
    use super::super::conv::tests::run;
    use crate::families::testing::ai;
    use tensor::Tensor;

    fn seq(n: usize, k: f32) -> Vec<f32> {
        (0..n).map(|i| ((i as f32) * k).sin()).collect()
    }

    #[test]
    fn sequence_lens_stop_a_batch_entry_early() {
        let (t, b, i, h) = (3, 2, 2, 3);
        let w = Tensor::from_vec(vec![1, 4 * h, i], seq(4 * h * i, 0.7)).unwrap();
        let r = Tensor::from_vec(vec![1, 4 * h, h], seq(4 * h * h, 1.3)).unwrap();
        let xv = seq(t * b * i, 0.9);
        let x = Tensor::from_vec(vec![t, b, i], xv.clone()).unwrap();
        let lens = Tensor::from_vec(vec![b], vec![3i32, 2]).unwrap();
        let attrs = || vec![ai("hidden_size", h as i64)];
        let full = run(
            super::lstm,
            "LSTM",
            22,
            attrs(),
            vec![Some(x), Some(w.clone()), Some(r.clone()), None, Some(lens)],
            3,
        )
        .unwrap();
        // Batch entry 1 alone over its first 2 steps.
        let x1: Vec<f32> = (0..2)
            .flat_map(|s| xv[(s * b + 1) * i..(s * b + 2) * i].to_vec())
            .collect();
        let x1 = Tensor::from_vec(vec![2, 1, i], x1).unwrap();
        let one = run(
            super::lstm,
            "LSTM",
            22,
            attrs(),
            vec![Some(x1), Some(w), Some(r)],
            3,
        )
        .unwrap();
        let yh = full[1].to_vec::<f32>().unwrap();
        assert_eq!(&yh[h..2 * h], &one[1].to_vec::<f32>().unwrap()[..]);
        let y = full[0].to_vec::<f32>().unwrap();
        // Y[t=2, d=0, b=1, :] is zero past the length.
        assert!(y[(2 * b + 1) * h..(2 * b + 2) * h]
            .iter()
            .all(|&v| v == 0.0));
    }
}
