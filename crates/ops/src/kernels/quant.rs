//! Kernels of the quant family (inference: `families/quant.rs`).
//!
//! Scales and zero points are per tensor (one element), per axis (1-D along `axis`) or blocked
//! (`block_size` along `axis`), as the reference's `reshape_input`.

use super::cast::{mini, small_int, values_f64};
use crate::exec::util::norm_axis;
use crate::exec::{kernel, KResult, KernelDef, RunCx, Value};
use half::{bf16, f16};
use tensor::{DataType, Tensor};

/// For each element of `x` (row-major), the flat index of its scale.
fn scale_index(cx: &RunCx, x: &Tensor, s: &Tensor, what: &str) -> KResult<Vec<usize>> {
    let n = x.len();
    if s.len() == 1 {
        return Ok(vec![0; n]);
    }
    let block = if cx.opset >= 21 {
        cx.int("block_size", 0)?
    } else {
        0
    };
    let axis = norm_axis(cx.int("axis", 1)?, x.rank())?;
    let shape = x.shape();
    let dim = shape[axis];
    let inner: usize = shape[axis + 1..].iter().product();
    if block <= 0 {
        if block < 0 {
            return Err(cx.invalid(format!("block_size must be positive, got {block}")));
        }
        if s.rank() != 1 || s.len() != dim {
            return Err(cx.invalid(format!(
                "{what} of shape {:?} is neither one value nor a 1-D tensor of {dim} (axis {axis} of input shape {shape:?})",
                s.shape()
            )));
        }
        return Ok((0..n).map(|i| (i / inner.max(1)) % dim.max(1)).collect());
    }
    let bs = block as usize;
    let sdim = dim.div_ceil(bs);
    let ok = s.rank() == x.rank()
        && s.shape()
            .iter()
            .zip(shape)
            .enumerate()
            .all(|(k, (&a, &b))| if k == axis { a == sdim } else { a == b });
    if !ok {
        return Err(cx.invalid(format!(
            "blocked {what} must have input shape {shape:?} with dim {axis} = ceil({dim}/{bs}) = {sdim}, got {:?}",
            s.shape()
        )));
    }
    let inner = inner.max(1);
    Ok((0..n)
        .map(|i| {
            let in_ = i % inner;
            let d = (i / inner) % dim;
            let o = i / (inner * dim);
            (o * sdim + d / bs) * inner + in_
        })
        .collect())
}

/// Rounds `v` to the precision of float type `dt`.
fn round_to(dt: DataType, v: f64) -> f64 {
    match dt {
        DataType::Float => v as f32 as f64,
        DataType::Float16 => f64::from(f16::from_f64(v)),
        DataType::Bfloat16 => f64::from(bf16::from_f32(v as f32)),
        _ => v,
    }
}

fn float_tensor(cx: &RunCx, dt: DataType, shape: Vec<usize>, v: Vec<f64>) -> KResult<Tensor> {
    Ok(match dt {
        DataType::Float => Tensor::from_vec(shape, v.into_iter().map(|x| x as f32).collect())?,
        DataType::Double => Tensor::from_vec(shape, v)?,
        DataType::Float16 => Tensor::from_vec(shape, v.into_iter().map(f16::from_f64).collect())?,
        DataType::Bfloat16 => Tensor::from_vec(
            shape,
            v.into_iter().map(|x| bf16::from_f32(x as f32)).collect(),
        )?,
        _ => return Err(cx.unsupported(format!("output {dt}"))),
    })
}

fn int_range(dt: DataType) -> Option<(i64, i64)> {
    Some(match dt {
        DataType::Uint8 => (0, 255),
        DataType::Int8 => (-128, 127),
        DataType::Uint16 => (0, 65535),
        DataType::Int16 => (-32768, 32767),
        DataType::Uint4 => (0, 15),
        DataType::Int4 => (-8, 7),
        DataType::Uint2 => (0, 3),
        DataType::Int2 => (-2, 1),
        _ => return None,
    })
}

fn ints_tensor(cx: &RunCx, dt: DataType, shape: Vec<usize>, v: Vec<i64>) -> KResult<Tensor> {
    Ok(match dt {
        DataType::Uint8 => Tensor::from_vec(shape, v.into_iter().map(|x| x as u8).collect())?,
        DataType::Int8 => Tensor::from_vec(shape, v.into_iter().map(|x| x as i8).collect())?,
        DataType::Uint16 => Tensor::from_vec(shape, v.into_iter().map(|x| x as u16).collect())?,
        DataType::Int16 => Tensor::from_vec(shape, v.into_iter().map(|x| x as i16).collect())?,
        _ => match small_int(dt) {
            Some((bits, _)) => {
                let mask = (1i64 << bits) - 1;
                let codes: Vec<u8> = v.into_iter().map(|x| (x & mask) as u8).collect();
                Tensor::from_codes(dt, shape, &codes)?
            }
            None => return Err(cx.unsupported(format!("output {dt}"))),
        },
    })
}

fn round_even(x: f64) -> f64 {
    let r = x.round();
    if (r - x).abs() == 0.5 {
        2.0 * (x / 2.0).round()
    } else {
        r
    }
}

/// Float input values, or unsupported.
fn floats(cx: &RunCx, t: &Tensor) -> KResult<Vec<f64>> {
    if !t.dtype().is_float()
        || !matches!(
            t.dtype(),
            DataType::Float | DataType::Double | DataType::Float16 | DataType::Bfloat16
        )
    {
        return Err(cx.unsupported(t.dtype()));
    }
    Ok(values_f64(cx, t)?.unwrap_or_default())
}

/// The wider of two float types in numpy's promotion.
fn promote(a: DataType, b: DataType) -> DataType {
    let rank = |d: DataType| match d {
        DataType::Double => 3,
        DataType::Float => 2,
        _ => 1,
    };
    if a == b {
        a
    } else if rank(a) == 1 && rank(b) == 1 {
        DataType::Float
    } else if rank(a) >= rank(b) {
        a
    } else {
        b
    }
}

/// QuantizeLinear: `saturate(round(x / scale) + zero_point)` into the zero point's type (or
/// `output_dtype`, default uint8); float8 targets round `x / scale` (zero point ignored, as the
/// reference), float4/float6 add the zero point's value.
fn quantize_linear(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let s = cx.input(1)?;
    let zp = cx.opt_input(2)?;
    if cx.opset < 21 && s.rank() > 1 {
        return Err(cx.invalid(format!(
            "y_scale must be a scalar or 1-D before opset 21, got shape {:?}",
            s.shape()
        )));
    }
    let out_attr = if cx.opset >= 21 {
        cx.int("output_dtype", 0)?
    } else {
        0
    };
    let out_attr =
        if out_attr != 0 {
            Some(DataType::from_onnx(out_attr as i32).ok_or_else(|| {
                cx.invalid(format!("output_dtype {out_attr} is not a known type"))
            })?)
        } else {
            None
        };
    let to = match (zp, out_attr) {
        (Some(z), Some(o)) if z.dtype() != o => {
            return Err(cx.invalid(format!(
                "output_dtype {o} differs from the zero point's type {}",
                z.dtype()
            )))
        }
        (Some(z), _) => z.dtype(),
        (None, Some(o)) => o,
        (None, None) => DataType::Uint8,
    };
    let saturate = cx.opset < 19 || cx.int("saturate", 1)? != 0;
    let prec = if cx.opset >= 23 {
        cx.int("precision", 0)?
    } else {
        0
    };
    // An int32 input divides in double, as numpy promotes int32 / float.
    let int_x = x.dtype() == DataType::Int32;
    let div_dt = if prec != 0 {
        DataType::from_onnx(prec as i32)
            .ok_or_else(|| cx.invalid(format!("precision {prec} is not a known type")))?
    } else if int_x {
        DataType::Double
    } else {
        promote(x.dtype(), s.dtype())
    };
    let xv = if int_x {
        values_f64(cx, x)?.unwrap_or_default()
    } else {
        floats(cx, x)?
    };
    let sv = floats(cx, s)?;
    let si = scale_index(cx, x, s, "y_scale")?;
    let zv = match zp {
        Some(z) => {
            if z.shape() != s.shape() && z.len() != s.len() {
                return Err(cx.invalid(format!(
                    "zero point shape {:?} differs from scale shape {:?}",
                    z.shape(),
                    s.shape()
                )));
            }
            Some(values_f64(cx, z)?.ok_or_else(|| cx.unsupported(z.dtype()))?)
        }
        None => None,
    };
    let q = |i: usize| -> f64 {
        let (xx, ss) = (round_to(div_dt, xv[i]), round_to(div_dt, sv[si[i]]));
        round_to(div_dt, xx / ss)
    };
    let shape = x.shape().to_vec();
    let n = xv.len();
    let out = if let Some((lo, hi)) = int_range(to) {
        let v: Vec<i64> = (0..n)
            .map(|i| {
                let r = round_even(q(i));
                let r = if r.is_finite() {
                    r.clamp(i32::MIN as f64, i32::MAX as f64) as i64
                } else {
                    i32::MIN as i64
                };
                let z = zv.as_ref().map_or(0, |z| z[si[i]] as i64);
                (r + z).clamp(lo, hi)
            })
            .collect();
        ints_tensor(cx, to, shape, v)?
    } else if let Some(f) = mini(to) {
        let codes: Vec<u8> = if matches!(
            to,
            DataType::Float4e2m1 | DataType::Float6e2m3 | DataType::Float6e3m2
        ) {
            (0..n)
                .map(|i| {
                    let z = zv.as_ref().map_or(0.0, |z| z[si[i]]);
                    f.encode(round_to(div_dt, q(i) + z), false)
                })
                .collect()
        } else {
            (0..n).map(|i| f.encode(q(i), saturate)).collect()
        };
        Tensor::from_codes(to, shape, &codes)?
    } else {
        return Err(cx.unsupported(format!("quantize to {to}")));
    };
    Ok(vec![out.into()])
}

/// DequantizeLinear: `(x - zero_point) * scale` in the scale's type (or `output_dtype`).
fn dequantize_linear(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let s = cx.input(1)?;
    let zp = cx.opt_input(2)?;
    if cx.opset < 21 && s.rank() > 1 {
        return Err(cx.invalid(format!(
            "x_scale must be a scalar or 1-D before opset 21, got shape {:?}",
            s.shape()
        )));
    }
    let xt = x.dtype();
    let fp8 = matches!(
        xt,
        DataType::Float8e4m3fn
            | DataType::Float8e4m3fnuz
            | DataType::Float8e5m2
            | DataType::Float8e5m2fnuz
    );
    let ok_input =
        fp8 || matches!(
            xt,
            DataType::Float4e2m1 | DataType::Float6e2m3 | DataType::Float6e3m2 | DataType::Int32
        ) || int_range(xt).is_some();
    if !ok_input {
        return Err(cx.unsupported(xt));
    }
    let sv = floats(cx, s)?;
    let xv = values_f64(cx, x)?.ok_or_else(|| cx.unsupported(xt))?;
    let si = scale_index(cx, x, s, "x_scale")?;
    // The reference computes x.astype(float32) - zero_point in numpy: float32 for the small
    // integer types, float64 for int32.
    let wide = xt == DataType::Int32 && zp.is_some();
    let zv = match zp {
        Some(z) if !fp8 && xt != DataType::Float4e2m1 => {
            if z.dtype() != xt {
                return Err(cx.invalid(format!(
                    "zero point type {} differs from input type {xt}",
                    z.dtype()
                )));
            }
            if z.len() != s.len() {
                return Err(cx.invalid(format!(
                    "zero point shape {:?} differs from scale shape {:?}",
                    z.shape(),
                    s.shape()
                )));
            }
            Some(values_f64(cx, z)?.unwrap_or_default())
        }
        Some(z) if fp8 => {
            let v = values_f64(cx, z)?.unwrap_or_default();
            if v.iter().any(|&k| k != 0.0) {
                return Err(cx.invalid("a float8 zero point must be zero"));
            }
            None
        }
        _ => None,
    };
    let out_dt = match if cx.opset >= 23 {
        cx.int("output_dtype", 0)?
    } else {
        0
    } {
        0 => s.dtype(),
        c => DataType::from_onnx(c as i32)
            .ok_or_else(|| cx.invalid(format!("output_dtype {c} is not a known type")))?,
    };
    let y: Vec<f64> = (0..xv.len())
        .map(|i| {
            let xf = xv[i] as f32 as f64;
            let z = zv.as_ref().map_or(0.0, |z| z[si[i]]);
            if wide {
                (xf - z) * sv[si[i]]
            } else {
                let dx = (xf - z) as f32;
                (dx * sv[si[i]] as f32) as f64
            }
        })
        .collect();
    Ok(vec![float_tensor(cx, out_dt, x.shape().to_vec(), y)?.into()])
}

/// DynamicQuantizeLinear: uint8 quantization with scale and zero point from the data range.
fn dynamic_quantize_linear(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    if x.dtype() != DataType::Float {
        return Err(cx.unsupported(x.dtype()));
    }
    let v = x.to_vec::<f32>()?;
    let mx = v.iter().fold(
        f32::NEG_INFINITY,
        |a, &b| if b > a || b.is_nan() { b } else { a },
    );
    let mn = v.iter().fold(
        f32::INFINITY,
        |a, &b| if b < a || b.is_nan() { b } else { a },
    );
    let maxx = if mx.is_nan() { mx } else { mx.max(0.0) };
    let minx = if mn.is_nan() { mn } else { mn.min(0.0) };
    let scale = (if maxx == minx { 1.0 } else { maxx - minx }) / 255.0f32;
    let init_zp = 0.0f32 - minx / scale;
    let zp = init_zp.clamp(0.0, 255.0);
    let zpi = round_even(zp as f64) as f32;
    let y: Vec<u8> = v
        .iter()
        .map(|&e| {
            let q = round_even((e / scale) as f64) as f32 + zpi;
            q.clamp(0.0, 255.0) as u8
        })
        .collect();
    Ok(vec![
        Tensor::from_vec(x.shape().to_vec(), y)?.into(),
        Tensor::scalar(scale).into(),
        Tensor::scalar(zpi as u8).into(),
    ])
}

pub const KERNELS: &[KernelDef] = &[
    kernel("QuantizeLinear", 10, quantize_linear),
    kernel("DequantizeLinear", 10, dequantize_linear),
    kernel("DynamicQuantizeLinear", 11, dynamic_quantize_linear),
];

#[cfg(test)]
mod tests {
    use super::super::cast::test_util::*;
    use super::*;

    #[test]
    fn blocked_quantization_handles_a_remainder_block() {
        // x [1, 5] with block_size 2 along axis 1: scale [1, 3].
        let x = Tensor::from_vec(vec![1, 5], vec![2.0f32, 4.0, 6.0, 8.0, 10.0]).unwrap();
        let s = Tensor::from_vec(vec![1, 3], vec![1.0f32, 2.0, 5.0]).unwrap();
        let z = Tensor::from_vec(vec![1, 3], vec![0u8, 1, 2]).unwrap();
        let q = run1(
            "QuantizeLinear",
            vec![int_attr("axis", 1), int_attr("block_size", 2)],
            21,
            &[x, s.clone(), z.clone()],
        )
        .unwrap();
        assert_eq!(q.to_vec::<u8>().unwrap(), vec![2, 4, 4, 5, 4]);
        let d = run1(
            "DequantizeLinear",
            vec![int_attr("axis", 1), int_attr("block_size", 2)],
            21,
            &[q, s.clone(), z],
        )
        .unwrap();
        assert_eq!(d.to_vec::<f32>().unwrap(), vec![2.0, 4.0, 6.0, 8.0, 10.0]);
        let bad = Tensor::from_vec(vec![1, 2], vec![1.0f32, 2.0]).unwrap();
        let x = Tensor::from_vec(vec![1, 5], vec![0.0f32; 5]).unwrap();
        assert!(run1(
            "QuantizeLinear",
            vec![int_attr("axis", 1), int_attr("block_size", 2)],
            21,
            &[x, bad]
        )
        .is_err());
    }

    #[test]
    fn float6_quantizes_with_its_zero_point() {
        let x = Tensor::from_vec(vec![3], vec![1.0f32, 100.0, -0.25]).unwrap();
        let s = Tensor::scalar(1.0f32);
        let z = Tensor::from_codes(DataType::Float6e2m3, vec![], &[8]).unwrap(); // 1.0
        let q = run1("QuantizeLinear", vec![], 25, &[x, s.clone(), z.clone()]).unwrap();
        assert_eq!(q.dtype(), DataType::Float6e2m3);
        // 2.0 = 0b010_000, saturated 7.5 = 0b011_111, 0.75 = subnormal 6/8.
        assert_eq!(q.codes().unwrap(), vec![0b010_000, 0b011_111, 0b000_110]);
        let d = run1("DequantizeLinear", vec![], 25, &[q, s, z]).unwrap();
        assert_eq!(d.to_vec::<f32>().unwrap(), vec![1.0, 6.5, -0.25]);
    }

    #[test]
    fn quantize_rounds_half_to_even_and_saturates() {
        let x = Tensor::from_vec(vec![4], vec![0.5f32, 1.5, 300.0, -3.0]).unwrap();
        let s = Tensor::scalar(1.0f32);
        let q = run1("QuantizeLinear", vec![], 13, &[x, s]).unwrap();
        assert_eq!(q.to_vec::<u8>().unwrap(), vec![0, 2, 255, 0]);
    }
}
