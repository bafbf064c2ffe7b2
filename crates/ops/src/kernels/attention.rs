//! Kernels of the attention family (inference: `families/attention.rs`): Attention (23–25),
//! RotaryEmbedding, SwiGLU, LinearAttention and FlexAttention (ai.onnx.preview).
//!
//! Attention computes in f64 but rounds to the element type at each step where the reference
//! (onnx `op_attention.py`, which the function body mirrors) materialises a tensor of that type,
//! so half-precision results match it closely.

use crate::exec::util::{broadcast_strides, to_i64s, FloatConv};
use crate::exec::{kernel, kernel_in, KResult, KernelDef, RunCx, Value};
use crate::for_float;
use crate::kernels::reduce::checked_len;
use half::{bf16, f16};
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

/// Rounding to the precision of a float type.
fn rounder(d: DataType) -> fn(f64) -> f64 {
    match d {
        DataType::Float => |v| v as f32 as f64,
        DataType::Float16 => |v| f16::from_f64(v).to_f64(),
        DataType::Bfloat16 => |v| bf16::from_f64(v).to_f64(),
        _ => |v| v,
    }
}

/// A [B, S, H*D] (or already [B, H, S, D]) tensor's data as [B, H, S, D].
fn to_bhsd(v: &[f64], shape: &[usize], heads: usize) -> (Vec<f64>, [usize; 4]) {
    if shape.len() == 4 {
        return (v.to_vec(), [shape[0], shape[1], shape[2], shape[3]]);
    }
    let (b, s, hd) = (shape[0], shape[1], shape[2]);
    let d = hd / heads;
    let mut out = vec![0f64; v.len()];
    for bi in 0..b {
        for si in 0..s {
            for h in 0..heads {
                let src = (bi * s + si) * hd + h * d;
                let dst = ((bi * heads + h) * s + si) * d;
                out[dst..dst + d].copy_from_slice(&v[src..src + d]);
            }
        }
    }
    (out, [b, heads, s, d])
}

/// Appends `cur` to `past` along the sequence axis of [B, H, S, D] data.
fn concat_seq(past: &[f64], ps: [usize; 4], cur: &[f64], cs: [usize; 4]) -> Vec<f64> {
    let [b, h, p, d] = ps;
    let s = cs[2];
    let mut out = Vec::with_capacity(past.len() + cur.len());
    for bh in 0..b * h {
        out.extend_from_slice(&past[bh * p * d..(bh + 1) * p * d]);
        out.extend_from_slice(&cur[bh * s * d..(bh + 1) * s * d]);
    }
    out
}

fn attn_shape_err(cx: &RunCx, what: &str, got: &[usize]) -> crate::exec::KernelError {
    cx.invalid(format!(
        "{what} must be 3-D [B, S, H*D] or 4-D [B, H, S, D], got {got:?}"
    ))
}

/// Attention (23, 24, 25): scaled dot-product attention with masks, causal and sliding-window
/// masking, past/present KV cache, nonpad_kv_seqlen, softcap, GQA and qk_matmul_output modes.
fn attention(cx: &RunCx) -> KResult<Vec<Value>> {
    let q_t = cx.input(0)?;
    let k_t = cx.input(1)?;
    let v_t = cx.input(2)?;
    let rank = q_t.rank();
    if rank != 3 && rank != 4 {
        return Err(attn_shape_err(cx, "Q", q_t.shape()));
    }
    if k_t.rank() != rank || v_t.rank() != rank {
        return Err(cx.invalid(format!(
            "Q, K and V must have the same rank, got {:?}, {:?}, {:?}",
            q_t.shape(),
            k_t.shape(),
            v_t.shape()
        )));
    }
    let dt = q_t.dtype();
    let r = rounder(dt);
    let (hq, hkv) = if rank == 3 {
        let hq = cx.attr_i("q_num_heads")?;
        let hkv = cx.attr_i("kv_num_heads")?;
        match (hq, hkv) {
            (Some(a), Some(b)) if a > 0 && b > 0 => (a as usize, b as usize),
            _ => {
                return Err(cx.invalid("3-D Attention needs positive q_num_heads and kv_num_heads"))
            }
        }
    } else {
        if cx.opset >= 25 && (cx.attr("q_num_heads").is_some() || cx.attr("kv_num_heads").is_some())
        {
            return Err(cx.invalid("q_num_heads and kv_num_heads must not be given for 4-D inputs"));
        }
        (q_t.shape()[1], k_t.shape()[1])
    };
    if rank == 3 {
        for (t, h, what) in [(q_t, hq, "Q"), (k_t, hkv, "K"), (v_t, hkv, "V")] {
            if t.shape()[2] % h != 0 {
                return Err(cx.invalid(format!(
                    "{what} hidden size {} is not divisible by {h} heads",
                    t.shape()[2]
                )));
            }
        }
    }
    let (q, qs) = to_bhsd(&floats(cx, q_t)?, q_t.shape(), hq);
    let (k, ks) = to_bhsd(&floats(cx, k_t)?, k_t.shape(), hkv);
    let (v, vs) = to_bhsd(&floats(cx, v_t)?, v_t.shape(), hkv);
    let [b, _, sq, d] = qs;
    let dv = vs[3];
    if ks[0] != b || vs[0] != b || ks[3] != d || vs[2] != ks[2] || vs[1] != ks[1] {
        return Err(cx.invalid(format!(
            "K {:?} / V {:?} do not match Q {:?} (batch, head size, sequence)",
            k_t.shape(),
            v_t.shape(),
            q_t.shape()
        )));
    }
    if hq != hkv && (hkv == 0 || hq % hkv != 0) {
        return Err(cx.invalid(format!("q heads {hq} must be a multiple of kv heads {hkv}")));
    }
    // KV cache.
    let past_k = cx.opt_input(4)?;
    let past_v = cx.opt_input(5)?;
    if past_k.is_some() != past_v.is_some() {
        return Err(cx.invalid("past_key and past_value must be given together"));
    }
    let nonpad = if cx.opset >= 24 {
        cx.opt_input(6)?
    } else {
        None
    };
    if nonpad.is_some() && past_k.is_some() {
        return Err(cx.invalid("nonpad_kv_seqlen cannot be combined with past_key/past_value"));
    }
    let (kk, vv, past_len) = match (past_k, past_v) {
        (Some(pk), Some(pv)) => {
            let (pks, pvs) = (pk.shape(), pv.shape());
            if pks.len() != 4
                || pvs.len() != 4
                || pks[0] != b
                || pks[1] != hkv
                || pks[3] != d
                || pvs[0] != b
                || pvs[1] != hkv
                || pvs[3] != dv
                || pvs[2] != pks[2]
            {
                return Err(cx.invalid(format!(
                    "past_key {pks:?} / past_value {pvs:?} must be [B, kv_heads, P, head size] matching K and V"
                )));
            }
            let p = pks[2];
            let kk = concat_seq(&floats(cx, pk)?, [b, hkv, p, d], &k, ks);
            let vv = concat_seq(&floats(cx, pv)?, [b, hkv, p, dv], &v, vs);
            (kk, vv, p)
        }
        _ => (k, v, 0),
    };
    let t = past_len + ks[2];
    let nonpad: Option<Vec<i64>> = match nonpad {
        Some(n) => {
            let n = to_i64s(n)?;
            if n.len() != b {
                return Err(cx.invalid(format!(
                    "nonpad_kv_seqlen must hold {b} values, got {}",
                    n.len()
                )));
            }
            Some(n)
        }
        None => None,
    };
    // Attributes.
    let scale = match cx.attr_f("scale")? {
        Some(s) => s as f64,
        None => 1.0 / (d as f64).sqrt(),
    };
    let sqrt_scale = r(scale.sqrt());
    let is_causal = cx.int("is_causal", 0)? != 0;
    let softcap = cx.float("softcap", 0.0)? as f64;
    let mode = cx.int("qk_matmul_output_mode", 0)?;
    if !(0..=3).contains(&mode) {
        return Err(cx.invalid(format!("qk_matmul_output_mode must be 0..3, got {mode}")));
    }
    let (rs, seq_sum) = match cx.attr_i("softmax_precision")? {
        None => (r, dt == DataType::Bfloat16),
        Some(p) => match DataType::from_onnx(p as i32).ok_or(()) {
            Ok(
                d @ (DataType::Float | DataType::Float16 | DataType::Bfloat16 | DataType::Double),
            ) => (rounder(d), d == DataType::Bfloat16),
            _ => {
                return Err(cx.invalid(format!(
                    "softmax_precision must be a float type code, got {p}"
                )))
            }
        },
    };
    let (left, right) = if cx.opset >= 25 {
        (
            cx.int("left_window_size", -1)?,
            cx.int("right_window_size", -1)?,
        )
    } else {
        (-1, -1)
    };
    if left < -1 || right < -1 {
        return Err(cx.invalid(format!(
            "window sizes must be -1 or >= 0, got {left} and {right}"
        )));
    }
    // Mask, as an additive bias broadcast right-aligned to [B, Hq, Sq, T'].
    let mask = match cx.opt_input(3)? {
        Some(m) => {
            let ms = m.shape();
            if ms.is_empty() || ms.len() > 4 {
                return Err(cx.invalid(format!("attn_mask must have rank 1 to 4, got {ms:?}")));
            }
            let tm = ms[ms.len() - 1];
            if tm > t {
                return Err(cx.invalid(format!(
                    "attn_mask's last dim {tm} exceeds the kv length {t}"
                )));
            }
            let target = [b, hq, sq, tm];
            let ok = ms
                .iter()
                .rev()
                .zip(target.iter().rev())
                .all(|(&a, &o)| a == o || a == 1);
            if !ok {
                return Err(
                    cx.invalid(format!("attn_mask {ms:?} does not broadcast to {target:?}"))
                );
            }
            let vals: Vec<f64> = if m.dtype() == DataType::Bool {
                m.to_vec::<bool>()?
                    .into_iter()
                    .map(|x| if x { 0.0 } else { f64::NEG_INFINITY })
                    .collect()
            } else {
                floats(cx, m)?.into_iter().map(r).collect()
            };
            Some((vals, broadcast_strides(ms, &target), tm))
        }
        None => None,
    };
    checked_len(cx, &[b, hq, sq, dv.max(t)], "Attention output")?;
    let reps = hq / hkv;
    let mut y = vec![0f64; b * hq * sq * dv];
    let want_qk = cx.wants_output(3);
    let mut qk_out = if want_qk {
        vec![0f64; b * hq * sq * t]
    } else {
        Vec::new()
    };
    let mut bias = vec![0f64; t];
    let mut s = vec![0f64; t];
    let mut p = vec![0f64; t];
    let mut qrow = vec![0f64; d];
    let kscaled: Vec<f64> = kk.iter().map(|&x| r(x * sqrt_scale)).collect();
    for bi in 0..b {
        let offset: i64 = match &nonpad {
            Some(n) if past_k.is_none() => n[bi] - sq as i64,
            _ => past_len as i64,
        };
        for h in 0..hq {
            let kh = h / reps;
            let kbase = (bi * hkv + kh) * t;
            for i in 0..sq {
                // Additive bias for this query row.
                for (j, bj) in bias.iter_mut().enumerate() {
                    let mut x = 0.0;
                    if let Some((mv, st, tm)) = &mask {
                        x += if j < *tm {
                            mv[bi * st[0] + h * st[1] + i * st[2] + j * st[3]]
                        } else {
                            f64::NEG_INFINITY
                        };
                    }
                    let diff = i as i64 + offset - j as i64;
                    if is_causal && diff < 0 {
                        x += f64::NEG_INFINITY;
                    }
                    if (left >= 0 && diff > left) || (right >= 0 && -diff > right) {
                        x += f64::NEG_INFINITY;
                    }
                    if let Some(n) = &nonpad {
                        if j as i64 >= n[bi] {
                            x += f64::NEG_INFINITY;
                        }
                    }
                    *bj = x;
                }
                let qoff = ((bi * hq + h) * sq + i) * d;
                for (o, &x) in qrow.iter_mut().zip(&q[qoff..qoff + d]) {
                    *o = r(x * sqrt_scale);
                }
                for j in 0..t {
                    let kr = &kscaled[(kbase + j) * d..(kbase + j + 1) * d];
                    let mut dot = r(qrow.iter().zip(kr).map(|(a, b)| a * b).sum::<f64>());
                    if softcap > 0.0 {
                        dot = r(r(r(dot / softcap).tanh()) * softcap);
                    }
                    s[j] = dot;
                }
                let qo = ((bi * hq + h) * sq + i) * t;
                if want_qk && mode <= 1 {
                    qk_out[qo..qo + t].copy_from_slice(&s);
                }
                for j in 0..t {
                    s[j] = r(s[j] + bias[j]);
                }
                if want_qk && mode == 2 {
                    qk_out[qo..qo + t].copy_from_slice(&s);
                }
                // Softmax in the softmax precision, fully-masked rows give 0.
                let mx = s.iter().fold(f64::NEG_INFINITY, |a, &x| {
                    if x.is_nan() || a.is_nan() {
                        f64::NAN
                    } else {
                        a.max(x)
                    }
                });
                let mx = if mx == f64::NEG_INFINITY { 0.0 } else { rs(mx) };
                let mut sum = 0.0;
                for j in 0..t {
                    p[j] = rs(rs(rs(s[j]) - mx).exp());
                    // numpy sums bfloat16 (a user dtype) sequentially in bfloat16.
                    sum = if seq_sum { rs(sum + p[j]) } else { sum + p[j] };
                }
                let sum = rs(sum);
                let sum = if sum == 0.0 { 1.0 } else { sum };
                let all_masked = bias.iter().all(|&x| x == f64::NEG_INFINITY);
                for pj in p.iter_mut() {
                    *pj = if all_masked { 0.0 } else { r(rs(*pj / sum)) };
                }
                if want_qk && mode == 3 {
                    qk_out[qo..qo + t].copy_from_slice(&p);
                }
                let yo = ((bi * hq + h) * sq + i) * dv;
                let yr = &mut y[yo..yo + dv];
                for (j, &pj) in p.iter().enumerate() {
                    if pj == 0.0 {
                        continue;
                    }
                    let vr = &vv[(kbase + j) * dv..(kbase + j + 1) * dv];
                    for (o, &x) in yr.iter_mut().zip(vr) {
                        *o += pj * x;
                    }
                }
            }
        }
    }
    // Y back to the input layout.
    let y_shape = if rank == 3 {
        let mut out = vec![0f64; y.len()];
        for bi in 0..b {
            for h in 0..hq {
                for i in 0..sq {
                    let src = ((bi * hq + h) * sq + i) * dv;
                    let dst = (bi * sq + i) * hq * dv + h * dv;
                    out[dst..dst + dv].copy_from_slice(&y[src..src + dv]);
                }
            }
        }
        y = out;
        vec![b, sq, hq * dv]
    } else {
        vec![b, hq, sq, dv]
    };
    let mut outs: Vec<Value> = vec![from_f64s(cx, dt, y_shape, y)?.into()];
    if cx.num_outputs() > 1 {
        outs.push(from_f64s(cx, k_t.dtype(), vec![b, hkv, t, d], kk)?.into());
    }
    if cx.num_outputs() > 2 {
        outs.push(from_f64s(cx, v_t.dtype(), vec![b, hkv, t, dv], vv)?.into());
    }
    if cx.num_outputs() > 3 {
        let v = if want_qk {
            qk_out
        } else {
            vec![0.0; b * hq * sq * t]
        };
        outs.push(from_f64s(cx, dt, vec![b, hq, sq, t], v)?.into());
    }
    Ok(outs)
}

/// RotaryEmbedding (23): rotates the first `rotary_embedding_dim` features of each head by
/// the cached cos/sin (indexed by position_ids when given), split-half or interleaved.
fn rotary_embedding(cx: &RunCx) -> KResult<Vec<Value>> {
    let x_t = cx.input(0)?;
    let cos_t = cx.input(1)?;
    let sin_t = cx.input(2)?;
    let pos = cx.opt_input(3)?;
    let shape = x_t.shape().to_vec();
    let interleaved = cx.int("interleaved", 0)? != 0;
    // Logical layout [B, S, H, D] with element strides into X.
    let (b, s, h, d, st) = match shape.len() {
        4 => {
            let (b, h, s, d) = (shape[0], shape[1], shape[2], shape[3]);
            (b, s, h, d, [h * s * d, d, s * d])
        }
        3 => {
            let nh = cx.int("num_heads", 0)?;
            if nh <= 0 || shape[2] % nh as usize != 0 {
                return Err(cx.invalid(format!(
                    "3-D input needs num_heads dividing the hidden size {}, got {nh}",
                    shape[2]
                )));
            }
            let h = nh as usize;
            let d = shape[2] / h;
            (shape[0], shape[1], h, d, [shape[1] * shape[2], shape[2], d])
        }
        _ => return Err(cx.invalid(format!("X must be 3-D or 4-D, got {shape:?}"))),
    };
    let rd = match cx.int("rotary_embedding_dim", 0)? {
        0 => d,
        n if n > 0 && n as usize <= d && n % 2 == 0 => n as usize,
        n => {
            return Err(cx.invalid(format!(
                "rotary_embedding_dim must be even and <= head size {d}, got {n}"
            )))
        }
    };
    let half = rd / 2;
    let cos = floats(cx, cos_t)?;
    let sin = floats(cx, sin_t)?;
    if cos_t.shape() != sin_t.shape() || cos_t.shape().last() != Some(&half) {
        return Err(cx.invalid(format!(
            "cos_cache {:?} and sin_cache {:?} must match and end in rotary_dim/2 = {half}",
            cos_t.shape(),
            sin_t.shape()
        )));
    }
    // Row of the caches for (batch, position).
    let pos_ids = match pos {
        Some(p) => {
            let v = to_i64s(p)?;
            if v.len() != b * s {
                return Err(cx.invalid(format!(
                    "position_ids must be [{b}, {s}], got {:?}",
                    p.shape()
                )));
            }
            let max = cos_t.shape()[0] as i64;
            if cos_t.rank() != 2 {
                return Err(cx.invalid(format!(
                    "with position_ids the caches must be 2-D, got {:?}",
                    cos_t.shape()
                )));
            }
            if let Some(bad) = v.iter().find(|&&x| x < 0 || x >= max) {
                return Err(cx.invalid(format!("position id {bad} is out of range [0, {max})")));
            }
            Some(v)
        }
        None => {
            if cos_t.shape() != [b, s, half] {
                return Err(cx.invalid(format!(
                    "without position_ids the caches must be [{b}, {s}, {half}], got {:?}",
                    cos_t.shape()
                )));
            }
            None
        }
    };
    let r = rounder(x_t.dtype());
    let xv = floats(cx, x_t)?;
    let mut out = xv.clone();
    for bi in 0..b {
        for si in 0..s {
            let row = match &pos_ids {
                Some(p) => p[bi * s + si] as usize,
                None => bi * s + si,
            };
            let c = &cos[row * half..(row + 1) * half];
            let sn = &sin[row * half..(row + 1) * half];
            for hi in 0..h {
                let base = bi * st[0] + si * st[1] + hi * st[2];
                for k in 0..half {
                    let (i1, i2) = if interleaved {
                        (base + 2 * k, base + 2 * k + 1)
                    } else {
                        (base + k, base + k + half)
                    };
                    let (x1, x2) = (xv[i1], xv[i2]);
                    out[i1] = r(r(c[k] * x1) - r(sn[k] * x2));
                    out[i2] = r(r(sn[k] * x1) + r(c[k] * x2));
                }
            }
        }
    }
    Ok(vec![from_f64s(cx, x_t.dtype(), shape, out)?.into()])
}

/// SwiGLU (28): A · sigmoid(alpha · A) · B (equal shapes, no broadcasting).
fn swiglu(cx: &RunCx) -> KResult<Vec<Value>> {
    let a = cx.input(0)?;
    let bt = cx.input(1)?;
    if a.shape() != bt.shape() || a.dtype() != bt.dtype() {
        return Err(cx.invalid(format!(
            "A and B must have the same shape and type, got {} {:?} and {} {:?}",
            a.dtype(),
            a.shape(),
            bt.dtype(),
            bt.shape()
        )));
    }
    let alpha = cx.float("alpha", 1.0)? as f64;
    let r = rounder(a.dtype());
    let av = floats(cx, a)?;
    let bv = floats(cx, bt)?;
    let y: Vec<f64> = av
        .iter()
        .zip(&bv)
        .map(|(&x, &y)| {
            let sig = r(1.0 / (1.0 + (-alpha * x).exp()));
            r(r(x * sig) * y)
        })
        .collect();
    Ok(vec![from_f64s(cx, a.dtype(), a.shape().to_vec(), y)?.into()])
}

/// LinearAttention (27): recurrent linear attention with the linear / gated / delta /
/// gated_delta update rules, in f32 like the reference.
fn linear_attention(cx: &RunCx) -> KResult<Vec<Value>> {
    let rule = cx.string("update_rule", "gated_delta")?;
    let (gating, delta) = match rule.as_str() {
        "linear" => (false, false),
        "gated" => (true, false),
        "delta" => (false, true),
        "gated_delta" => (true, true),
        r => {
            return Err(cx.invalid(format!(
                "update_rule must be linear, gated, delta or gated_delta, got '{r}'"
            )))
        }
    };
    let hq = cx.attr_i("q_num_heads")?.unwrap_or(0);
    let hkv = cx.attr_i("kv_num_heads")?.unwrap_or(0);
    if hq <= 0 || hkv <= 0 || hq % hkv != 0 {
        return Err(cx.invalid(format!(
            "q_num_heads ({hq}) must be a positive multiple of kv_num_heads ({hkv})"
        )));
    }
    let (hq, hkv) = (hq as usize, hkv as usize);
    let q_t = cx.input(0)?;
    let k_t = cx.input(1)?;
    let v_t = cx.input(2)?;
    for (n, x) in [("query", q_t), ("key", k_t), ("value", v_t)] {
        if x.rank() != 3 {
            return Err(cx.invalid(format!(
                "{n} must be rank 3 (B, T, H*D), got {:?}",
                x.shape()
            )));
        }
    }
    let (b, t) = (q_t.shape()[0], q_t.shape()[1]);
    if q_t.shape()[2] % hq != 0 || k_t.shape()[2] % hkv != 0 || v_t.shape()[2] % hkv != 0 {
        return Err(cx.invalid("hidden sizes must be divisible by the head counts"));
    }
    let dk = q_t.shape()[2] / hq;
    let dvv = v_t.shape()[2] / hkv;
    if k_t.shape() != [b, t, hkv * dk] || v_t.shape()[..2] != [b, t] {
        return Err(cx.invalid(format!(
            "key {:?} / value {:?} do not match query {:?}",
            k_t.shape(),
            v_t.shape(),
            q_t.shape()
        )));
    }
    let f32s = |x: &Tensor| -> KResult<Vec<f32>> {
        Ok(floats(cx, x)?.into_iter().map(|v| v as f32).collect())
    };
    let q = f32s(q_t)?;
    let k = f32s(k_t)?;
    let v = f32s(v_t)?;
    let decay = cx.opt_input(4)?;
    let beta = cx.opt_input(5)?;
    if gating != decay.is_some() {
        return Err(cx.invalid(format!(
            "update_rule '{rule}' {} the decay input",
            if gating { "requires" } else { "forbids" }
        )));
    }
    if delta != beta.is_some() {
        return Err(cx.invalid(format!(
            "update_rule '{rule}' {} the beta input",
            if delta { "requires" } else { "forbids" }
        )));
    }
    // decay: [B, T, Hkv] or [B, T, Hkv*dk]; beta: [B, T, Hkv] or [B, T, 1].
    let decay = match decay {
        Some(g) => {
            let last = g.shape().last().copied().unwrap_or(0);
            if g.rank() != 3 || g.shape()[..2] != [b, t] || (last != hkv && last != hkv * dk) {
                return Err(cx.invalid(format!(
                    "decay must be [{b}, {t}, {hkv} or {}], got {:?}",
                    hkv * dk,
                    g.shape()
                )));
            }
            Some((f32s(g)?, last == hkv * dk))
        }
        None => None,
    };
    let beta = match beta {
        Some(bt) => {
            let last = bt.shape().last().copied().unwrap_or(0);
            if bt.rank() != 3 || bt.shape()[..2] != [b, t] || (last != hkv && last != 1) {
                return Err(cx.invalid(format!(
                    "beta must be [{b}, {t}, {hkv} or 1], got {:?}",
                    bt.shape()
                )));
            }
            Some((f32s(bt)?, last))
        }
        None => None,
    };
    let state_len = b * hkv * dk * dvv;
    let (mut state, state_dtype) = match cx.opt_input(3)? {
        Some(ps) => {
            if ps.shape() != [b, hkv, dk, dvv] {
                return Err(cx.invalid(format!(
                    "past_state must be [{b}, {hkv}, {dk}, {dvv}], got {:?}",
                    ps.shape()
                )));
            }
            (f32s(ps)?, ps.dtype())
        }
        None => (vec![0f32; state_len], q_t.dtype()),
    };
    let scale = match cx.attr_f("scale")? {
        Some(s) if s != 0.0 => s,
        _ => 1.0 / (dk as f32).sqrt(),
    };
    let group = hq / hkv;
    checked_len(cx, &[b, t, hq, dvv], "LinearAttention output")?;
    let mut out = vec![0f32; b * t * hq * dvv];
    let mut vt = vec![0f32; dvv];
    for ti in 0..t {
        for bi in 0..b {
            for h in 0..hkv {
                let st = &mut state[(bi * hkv + h) * dk * dvv..(bi * hkv + h + 1) * dk * dvv];
                let row = bi * t + ti;
                if let Some((g, full)) = &decay {
                    for di in 0..dk {
                        let gv = if *full {
                            g[row * hkv * dk + h * dk + di]
                        } else {
                            g[row * hkv + h]
                        };
                        let e = gv.exp();
                        st[di * dvv..(di + 1) * dvv]
                            .iter_mut()
                            .for_each(|x| *x *= e);
                    }
                }
                let kt = &k[row * hkv * dk + h * dk..row * hkv * dk + (h + 1) * dk];
                vt.copy_from_slice(&v[row * hkv * dvv + h * dvv..row * hkv * dvv + (h + 1) * dvv]);
                if let Some((bv, last)) = &beta {
                    let be = bv[row * last + if *last == 1 { 0 } else { h }];
                    for m in 0..dvv {
                        let retrieved: f32 = (0..dk).map(|di| st[di * dvv + m] * kt[di]).sum();
                        vt[m] = be * (vt[m] - retrieved);
                    }
                }
                for di in 0..dk {
                    for m in 0..dvv {
                        st[di * dvv + m] += kt[di] * vt[m];
                    }
                }
                for g in 0..group {
                    let qh = h * group + g;
                    let qt = &q[row * hq * dk + qh * dk..row * hq * dk + (qh + 1) * dk];
                    let o = &mut out[row * hq * dvv + qh * dvv..row * hq * dvv + (qh + 1) * dvv];
                    for m in 0..dvv {
                        let acc: f32 = (0..dk).map(|di| qt[di] * st[di * dvv + m]).sum();
                        o[m] = scale * acc;
                    }
                }
            }
        }
    }
    let out = from_f64s(
        cx,
        q_t.dtype(),
        vec![b, t, hq * dvv],
        out.into_iter().map(f64::from).collect(),
    )?;
    let mut outs: Vec<Value> = vec![out.into()];
    if cx.num_outputs() > 1 {
        outs.push(
            from_f64s(
                cx,
                state_dtype,
                vec![b, hkv, dk, dvv],
                state.into_iter().map(f64::from).collect(),
            )?
            .into(),
        );
    }
    Ok(outs)
}

/// Runs a FlexAttention modifier subgraph on a [B, Hq, L, S] tensor of the softmax type and
/// returns its output rounded to that type.
fn run_mod(
    cx: &RunCx,
    name: &str,
    dtype: DataType,
    shape: &[usize],
    vals: Vec<f64>,
) -> KResult<Vec<f64>> {
    let t = from_f64s(cx, dtype, shape.to_vec(), vals)?;
    let outs = cx.run_subgraph(name, vec![t.into()])?;
    if outs.len() != 1 {
        return Err(cx.invalid(format!(
            "{name} must produce exactly 1 output, got {}",
            outs.len()
        )));
    }
    let out = outs[0].as_tensor().ok_or_else(|| {
        cx.invalid(format!(
            "{name} must produce a tensor, got {}",
            outs[0].describe()
        ))
    })?;
    if out.shape() != shape {
        return Err(cx.invalid(format!(
            "{name} must preserve the shape {shape:?}, got {:?}",
            out.shape()
        )));
    }
    let r = rounder(dtype);
    Ok(floats(cx, out)?.into_iter().map(r).collect())
}

/// FlexAttention (ai.onnx.preview 1): rank-4 scaled dot-product attention with GQA and optional
/// score_mod / prob_mod subgraphs, the softmax in `softmax_precision` (default f32, or f64 for
/// double inputs), rounding where the reference materialises tensors.
fn flex_attention(cx: &RunCx) -> KResult<Vec<Value>> {
    let q_t = cx.input(0)?;
    let k_t = cx.input(1)?;
    let v_t = cx.input(2)?;
    let dt = q_t.dtype();
    if !matches!(
        dt,
        DataType::Float | DataType::Float16 | DataType::Bfloat16 | DataType::Double
    ) {
        return Err(cx.unsupported(dt));
    }
    if k_t.dtype() != dt || v_t.dtype() != dt {
        return Err(cx.invalid(format!(
            "Q, K and V must have the same type, got {}, {} and {}",
            dt,
            k_t.dtype(),
            v_t.dtype()
        )));
    }
    if q_t.rank() != 4 || k_t.rank() != 4 || v_t.rank() != 4 {
        return Err(cx.invalid(format!(
            "FlexAttention needs rank-4 Q, K, V, got {:?}, {:?}, {:?}",
            q_t.shape(),
            k_t.shape(),
            v_t.shape()
        )));
    }
    let (qs, ks, vs) = (q_t.shape(), k_t.shape(), v_t.shape());
    let (b, hq, l, e) = (qs[0], qs[1], qs[2], qs[3]);
    let (hkv, s, ev) = (ks[1], ks[2], vs[3]);
    if ks[0] != b || vs[0] != b || vs[1] != hkv || vs[2] != s || ks[3] != e {
        return Err(cx.invalid(format!(
            "K {ks:?} / V {vs:?} do not match Q {qs:?} (batch, kv heads, kv length, head size)"
        )));
    }
    if hkv == 0 || hq % hkv != 0 {
        return Err(cx.invalid(format!(
            "q_num_heads {hq} must be a multiple of kv_num_heads {hkv}"
        )));
    }
    let cd = match cx.attr_i("softmax_precision")? {
        None => {
            if dt == DataType::Double {
                DataType::Double
            } else {
                DataType::Float
            }
        }
        Some(p) => match DataType::from_onnx(p as i32) {
            Some(
                d @ (DataType::Float | DataType::Float16 | DataType::Bfloat16 | DataType::Double),
            ) => d,
            _ => {
                return Err(cx.invalid(format!(
                    "softmax_precision must be a float type code, got {p}"
                )))
            }
        },
    };
    let r = rounder(dt);
    let rc = rounder(cd);
    // sqrt(scale) in f32, then in the input type.
    let scale = match cx.attr_f("scale")? {
        Some(sc) => sc,
        None => (1.0 / (e as f64).sqrt()) as f32,
    };
    let sqrt_scale = r(scale.sqrt() as f64);
    checked_len(cx, &[b, hq, l, s.max(ev)], "FlexAttention scores")?;
    let q: Vec<f64> = floats(cx, q_t)?
        .into_iter()
        .map(|x| r(x * sqrt_scale))
        .collect();
    let k: Vec<f64> = floats(cx, k_t)?
        .into_iter()
        .map(|x| r(x * sqrt_scale))
        .collect();
    let v: Vec<f64> = floats(cx, v_t)?.into_iter().map(rc).collect();
    let reps = hq / hkv;
    // Scores = (Q·sqrt(scale)) @ (K·sqrt(scale))^T in the input type, then the softmax type.
    let mut sc = vec![0f64; b * hq * l * s];
    for bi in 0..b {
        for h in 0..hq {
            let kb = (bi * hkv + h / reps) * s * e;
            for i in 0..l {
                let qr = &q[((bi * hq + h) * l + i) * e..][..e];
                let row = &mut sc[((bi * hq + h) * l + i) * s..][..s];
                for (j, o) in row.iter_mut().enumerate() {
                    let kr = &k[kb + j * e..kb + (j + 1) * e];
                    *o = rc(r(qr.iter().zip(kr).map(|(a, b)| a * b).sum::<f64>()));
                }
            }
        }
    }
    let sshape = [b, hq, l, s];
    if cx.attr_g("score_mod")?.is_some() {
        sc = run_mod(cx, "score_mod", cd, &sshape, sc)?;
    }
    // Softmax over the kv axis, as numpy does it in the softmax type (a row of -inf gives NaN).
    let seq_sum = cd == DataType::Bfloat16;
    if s > 0 {
        for row in sc.chunks_mut(s) {
            let mx = row.iter().fold(f64::NEG_INFINITY, |a, &x| {
                if x.is_nan() || a.is_nan() {
                    f64::NAN
                } else {
                    a.max(x)
                }
            });
            let mut sum = 0.0;
            for x in row.iter_mut() {
                *x = rc(rc(*x - mx).exp());
                sum = if seq_sum { rc(sum + *x) } else { sum + *x };
            }
            let sum = rc(sum);
            for x in row.iter_mut() {
                *x = rc(*x / sum);
            }
        }
    }
    if cx.attr_g("prob_mod")?.is_some() {
        sc = run_mod(cx, "prob_mod", cd, &sshape, sc)?;
    }
    // Y = Probs @ V in the softmax type, then the input type.
    let mut y = vec![0f64; b * hq * l * ev];
    for bi in 0..b {
        for h in 0..hq {
            let vb = (bi * hkv + h / reps) * s * ev;
            for i in 0..l {
                let pr = &sc[((bi * hq + h) * l + i) * s..][..s];
                let yr = &mut y[((bi * hq + h) * l + i) * ev..][..ev];
                for (j, &p) in pr.iter().enumerate() {
                    let vr = &v[vb + j * ev..vb + (j + 1) * ev];
                    for (o, &x) in yr.iter_mut().zip(vr) {
                        *o += p * x;
                    }
                }
                for o in yr.iter_mut() {
                    *o = r(rc(*o));
                }
            }
        }
    }
    Ok(vec![from_f64s(cx, dt, vec![b, hq, l, ev], y)?.into()])
}

pub const KERNELS: &[KernelDef] = &[
    kernel("Attention", 23, attention),
    kernel("RotaryEmbedding", 23, rotary_embedding),
    kernel("SwiGLU", 28, swiglu),
    kernel("LinearAttention", 27, linear_attention),
    kernel_in("ai.onnx.preview", "FlexAttention", 1, None, flex_attention),
];
