//! Kernels of the random family (inference: `families/random.rs`): RandomNormal,
//! RandomUniform, their `Like` forms, Bernoulli and Multinomial.
//!
//! Values come from a seeded xoshiro256** generator (the `seed` attribute, else a fixed
//! default), so one model gives the same values on every run; they cannot match another
//! runtime's generator bit for bit, only in dtype, shape and distribution.

use crate::exec::util::{to_f64s, FloatConv};
use crate::exec::{kernel, KResult, KernelDef, RunCx, Value};
use crate::{for_float, for_int};
use tensor::{DataType, Tensor};

/// Seed used when the node gives none.
const DEFAULT_SEED: u64 = 0x6f6e_6e78_646f_6374;

/// Largest number of values we agree to generate (guards allocations from attributes/data).
const MAX_VALUES: usize = 1 << 28;

/// xoshiro256** seeded through splitmix64.
struct Rng {
    s: [u64; 4],
}

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut z = seed;
        let mut next = || {
            z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut x = z;
            x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            x ^ (x >> 31)
        };
        Rng {
            s: [next(), next(), next(), next()],
        }
    }

    fn next_u64(&mut self) -> u64 {
        let s = &mut self.s;
        let result = s[1].wrapping_mul(5).rotate_left(7).wrapping_mul(9);
        let t = s[1] << 17;
        s[2] ^= s[0];
        s[3] ^= s[1];
        s[1] ^= s[2];
        s[0] ^= s[3];
        s[2] ^= t;
        s[3] = s[3].rotate_left(45);
        result
    }

    /// Uniform in [0, 1).
    fn uniform(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
    }

    /// Standard normal (Box-Muller).
    fn normal(&mut self) -> f64 {
        let u1 = 1.0 - self.uniform();
        let u2 = self.uniform();
        (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos()
    }
}

/// The generator of this node: its `seed` attribute (a float), else the default.
fn rng(cx: &RunCx) -> KResult<Rng> {
    Ok(Rng::new(match cx.attr_f("seed")? {
        Some(s) => s.to_bits() as u64 ^ DEFAULT_SEED,
        None => DEFAULT_SEED,
    }))
}

/// The `dtype` attribute, or `default`.
fn dtype_attr(cx: &RunCx, default: DataType) -> KResult<DataType> {
    match cx.attr_i("dtype")? {
        Some(code) => DataType::from_onnx(code as i32)
            .ok_or_else(|| cx.invalid(format!("dtype {code} is not a tensor type"))),
        None => Ok(default),
    }
}

/// A float tensor of `dtype` from generated f64 values.
fn float_out(cx: &RunCx, dtype: DataType, shape: Vec<usize>, v: Vec<f64>) -> KResult<Tensor> {
    for_float!(dtype, T => {
        Ok(Tensor::from_vec(shape, v.into_iter().map(T::from_f64).collect::<Vec<T>>())?)
    } else {
        Err(cx.unsupported(dtype))
    })
}

/// Checked element count of `shape`.
fn count(cx: &RunCx, shape: &[usize]) -> KResult<usize> {
    shape
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .filter(|&n| n <= MAX_VALUES)
        .ok_or_else(|| cx.invalid(format!("shape {shape:?} is too large to generate")))
}

/// Fills `shape` with normal or uniform values by the node's attributes.
fn generate(cx: &RunCx, dtype: DataType, shape: Vec<usize>, normal: bool) -> KResult<Vec<Value>> {
    if !dtype.is_float() {
        return Err(cx.unsupported(dtype));
    }
    let n = count(cx, &shape)?;
    let mut g = rng(cx)?;
    let v: Vec<f64> = if normal {
        let mean = cx.float("mean", 0.0)? as f64;
        let scale = cx.float("scale", 1.0)? as f64;
        (0..n).map(|_| mean + scale * g.normal()).collect()
    } else {
        let low = cx.float("low", 0.0)? as f64;
        let high = cx.float("high", 1.0)? as f64;
        (0..n).map(|_| low + (high - low) * g.uniform()).collect()
    };
    Ok(vec![float_out(cx, dtype, shape, v)?.into()])
}

/// The `shape` attribute of RandomNormal/RandomUniform.
fn shape_attr(cx: &RunCx) -> KResult<Vec<usize>> {
    let s = cx
        .attr_ints("shape")?
        .ok_or_else(|| cx.invalid(format!("{} needs the 'shape' attribute", cx.op())))?;
    s.iter()
        .map(|&d| {
            usize::try_from(d).map_err(|_| cx.invalid(format!("shape {s:?} has a negative dim")))
        })
        .collect()
}

/// RandomNormal: normal values (`mean`, `scale`) of the given `shape` and `dtype`.
fn random_normal(cx: &RunCx) -> KResult<Vec<Value>> {
    let shape = shape_attr(cx)?;
    generate(cx, dtype_attr(cx, DataType::Float)?, shape, true)
}

/// RandomUniform: uniform values in [`low`, `high`) of the given `shape` and `dtype`.
fn random_uniform(cx: &RunCx) -> KResult<Vec<Value>> {
    let shape = shape_attr(cx)?;
    generate(cx, dtype_attr(cx, DataType::Float)?, shape, false)
}

/// RandomNormalLike: RandomNormal with the input's shape (and dtype unless given).
fn random_normal_like(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    generate(cx, dtype_attr(cx, x.dtype())?, x.shape().to_vec(), true)
}

/// RandomUniformLike: RandomUniform with the input's shape (and dtype unless given).
fn random_uniform_like(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    generate(cx, dtype_attr(cx, x.dtype())?, x.shape().to_vec(), false)
}

/// A tensor of any numeric or bool `dtype` holding 0/1 values.
fn binary_out(cx: &RunCx, dtype: DataType, shape: Vec<usize>, v: Vec<bool>) -> KResult<Tensor> {
    if dtype == DataType::Bool {
        return Ok(Tensor::from_vec(shape, v)?);
    }
    if dtype.is_float() {
        for_float!(dtype, T => {
            Ok(Tensor::from_vec(shape, v.into_iter().map(|b| T::from_f64(b as u8 as f64)).collect::<Vec<T>>())?)
        } else {
            Err(cx.unsupported(dtype))
        })
    } else {
        for_int!(dtype, T => {
            Ok(Tensor::from_vec(shape, v.into_iter().map(|b| b as u8 as T).collect::<Vec<T>>())?)
        } else {
            Err(cx.unsupported(dtype))
        })
    }
}

/// Bernoulli: 1 with the input's probability per element, in `dtype` (default the input's).
fn bernoulli(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    if !x.dtype().is_float() {
        return Err(cx.unsupported(x.dtype()));
    }
    let p = to_f64s(x)?;
    let dtype = dtype_attr(cx, x.dtype())?;
    let mut g = rng(cx)?;
    let v: Vec<bool> = p.iter().map(|&p| g.uniform() < p).collect();
    Ok(vec![binary_out(cx, dtype, x.shape().to_vec(), v)?.into()])
}

/// Multinomial: `sample_size` class indices per batch row, drawn from the row's
/// unnormalised log-probabilities; int32 (default) or int64.
fn multinomial(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    if !x.dtype().is_float() {
        return Err(cx.unsupported(x.dtype()));
    }
    let [batch, classes] = *x.shape() else {
        return Err(cx.invalid(format!(
            "Multinomial input must have shape [batch, classes], got {:?}",
            x.shape()
        )));
    };
    let k = cx.int("sample_size", 1)?;
    if k < 0 {
        return Err(cx.invalid(format!("Multinomial sample_size must be >= 0, got {k}")));
    }
    let k = k as usize;
    count(cx, &[batch, k])?;
    let dtype = dtype_attr(cx, DataType::Int32)?;
    if dtype != DataType::Int32 && dtype != DataType::Int64 {
        return Err(cx.unsupported(dtype));
    }
    if classes == 0 {
        return Err(cx.invalid("Multinomial needs at least one class"));
    }
    let logits = to_f64s(x)?;
    let mut g = rng(cx)?;
    let mut out: Vec<i64> = Vec::with_capacity(batch * k);
    let mut cdf = vec![0.0f64; classes];
    for b in 0..batch {
        let row = &logits[b * classes..(b + 1) * classes];
        let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let mut acc = 0.0;
        for (c, &l) in row.iter().enumerate() {
            acc += (l - m).exp();
            cdf[c] = acc;
        }
        for _ in 0..k {
            let u = g.uniform() * acc;
            let pick = cdf.iter().position(|&c| u < c).unwrap_or(classes - 1);
            out.push(pick as i64);
        }
    }
    let t = if dtype == DataType::Int64 {
        Tensor::from_vec(vec![batch, k], out)?
    } else {
        Tensor::from_vec(
            vec![batch, k],
            out.into_iter().map(|v| v as i32).collect::<Vec<_>>(),
        )?
    };
    Ok(vec![t.into()])
}

pub const KERNELS: &[KernelDef] = &[
    kernel("RandomNormal", 1, random_normal),
    kernel("RandomUniform", 1, random_uniform),
    kernel("RandomNormalLike", 1, random_normal_like),
    kernel("RandomUniformLike", 1, random_uniform_like),
    kernel("Bernoulli", 15, bernoulli),
    kernel("Multinomial", 7, multinomial),
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generator_is_roughly_uniform_and_normal() {
        let mut g = Rng::new(1);
        let n = 20000;
        let u: Vec<f64> = (0..n).map(|_| g.uniform()).collect();
        let mean = u.iter().sum::<f64>() / n as f64;
        assert!((mean - 0.5).abs() < 0.02, "{mean}");
        assert!(u.iter().all(|&v| (0.0..1.0).contains(&v)));
        let z: Vec<f64> = (0..n).map(|_| g.normal()).collect();
        let m = z.iter().sum::<f64>() / n as f64;
        let var = z.iter().map(|v| (v - m) * (v - m)).sum::<f64>() / n as f64;
        assert!(m.abs() < 0.05 && (var - 1.0).abs() < 0.05, "{m} {var}");
    }
}
