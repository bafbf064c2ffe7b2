//! Helpers every kernel family uses: type dispatch, broadcasting, conversions, axes.

use super::{KResult, KernelError};
use half::{bf16, f16};
use tensor::{DataType, Element, Tensor};

/// Runs `$body` with `$T` bound to the Rust type of `$dtype` for float types
/// (float16, bfloat16, float, double); evaluates `$else` otherwise.
#[macro_export]
macro_rules! for_float {
    ($dtype:expr, $T:ident => $body:block else $else:expr) => {
        match $dtype {
            tensor::DataType::Float => {
                type $T = f32;
                $body
            }
            tensor::DataType::Double => {
                type $T = f64;
                $body
            }
            tensor::DataType::Float16 => {
                type $T = half::f16;
                $body
            }
            tensor::DataType::Bfloat16 => {
                type $T = half::bf16;
                $body
            }
            _ => $else,
        }
    };
}

/// Like [`for_float!`] for the signed and unsigned 8- to 64-bit integers.
#[macro_export]
macro_rules! for_int {
    ($dtype:expr, $T:ident => $body:block else $else:expr) => {
        match $dtype {
            tensor::DataType::Int8 => {
                type $T = i8;
                $body
            }
            tensor::DataType::Int16 => {
                type $T = i16;
                $body
            }
            tensor::DataType::Int32 => {
                type $T = i32;
                $body
            }
            tensor::DataType::Int64 => {
                type $T = i64;
                $body
            }
            tensor::DataType::Uint8 => {
                type $T = u8;
                $body
            }
            tensor::DataType::Uint16 => {
                type $T = u16;
                $body
            }
            tensor::DataType::Uint32 => {
                type $T = u32;
                $body
            }
            tensor::DataType::Uint64 => {
                type $T = u64;
                $body
            }
            _ => $else,
        }
    };
}

/// Like [`for_float!`] for every float and integer type.
#[macro_export]
macro_rules! for_numeric {
    ($dtype:expr, $T:ident => $body:block else $else:expr) => {{
        let dtype: tensor::DataType = $dtype;
        $crate::for_float!(dtype, $T => $body else $crate::for_int!(dtype, $T => $body else $else))
    }};
}

/// Like [`for_float!`] for every type with a Rust [`Element`] (numbers, bool, complex).
/// Use for data movement (Transpose, Gather, Concat, ...); strings are handled separately.
#[macro_export]
macro_rules! for_element {
    ($dtype:expr, $T:ident => $body:block else $else:expr) => {{
        let dtype: tensor::DataType = $dtype;
        $crate::for_numeric!(dtype, $T => $body else match dtype {
            tensor::DataType::Bool => { type $T = bool; $body }
            tensor::DataType::Complex64 => { type $T = tensor::Complex<f32>; $body }
            tensor::DataType::Complex128 => { type $T = tensor::Complex<f64>; $body }
            _ => $else,
        })
    }};
}

/// Numpy-style multidirectional broadcast of several shapes.
pub fn broadcast_shapes(shapes: &[&[usize]]) -> KResult<Vec<usize>> {
    let rank = shapes.iter().map(|s| s.len()).max().unwrap_or(0);
    let mut out = vec![1usize; rank];
    for s in shapes {
        let off = rank - s.len();
        for (i, &d) in s.iter().enumerate() {
            let o = &mut out[off + i];
            if *o == 1 {
                *o = d;
            } else if d != 1 && d != *o {
                return Err(KernelError::Invalid(format!(
                    "shapes {} cannot be broadcast together",
                    shapes
                        .iter()
                        .map(|s| format!("{s:?}"))
                        .collect::<Vec<_>>()
                        .join(" and ")
                )));
            }
        }
    }
    Ok(out)
}

/// Row-major strides (in elements) of `shape`.
pub fn strides(shape: &[usize]) -> Vec<usize> {
    let mut s = vec![1usize; shape.len()];
    for i in (0..shape.len().saturating_sub(1)).rev() {
        s[i] = s[i + 1] * shape[i + 1];
    }
    s
}

/// Strides to read a tensor of `shape` broadcast to `out` (0 on broadcast dims).
pub fn broadcast_strides(shape: &[usize], out: &[usize]) -> Vec<usize> {
    let st = strides(shape);
    let off = out.len() - shape.len();
    (0..out.len())
        .map(|i| {
            if i < off || shape[i - off] == 1 {
                0
            } else {
                st[i - off]
            }
        })
        .collect()
}

/// For each element of `out` in row-major order, the source offset under `strides`.
pub fn broadcast_offsets(out: &[usize], strides: &[usize]) -> Vec<usize> {
    let n: usize = out.iter().product();
    let mut offs = Vec::with_capacity(n);
    if n == 0 {
        return offs;
    }
    let rank = out.len();
    let mut idx = vec![0usize; rank];
    let mut off = 0usize;
    for _ in 0..n {
        offs.push(off);
        for d in (0..rank).rev() {
            idx[d] += 1;
            off += strides[d];
            if idx[d] < out[d] {
                break;
            }
            off -= strides[d] * out[d];
            idx[d] = 0;
        }
    }
    offs
}

/// Elements of `t` broadcast to `out` (which must be a valid broadcast target).
pub fn broadcast_to<T: Element>(t: &Tensor, out: &[usize]) -> KResult<Vec<T>> {
    let v = t.to_vec::<T>()?;
    if t.shape() == out {
        return Ok(v);
    }
    let offs = broadcast_offsets(out, &broadcast_strides(t.shape(), out));
    Ok(offs.into_iter().map(|o| v[o]).collect())
}

/// Elementwise `f` over `a` and `b` with broadcasting.
pub fn binary<A: Element, B: Element, O: Element>(
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(A, B) -> O,
) -> KResult<Tensor> {
    let out = broadcast_shapes(&[a.shape(), b.shape()])?;
    let av = a.to_vec::<A>()?;
    let bv = b.to_vec::<B>()?;
    let data: Vec<O> = if a.shape() == b.shape() {
        av.iter().zip(&bv).map(|(&x, &y)| f(x, y)).collect()
    } else if b.len() == 1 {
        let y = bv[0];
        let ao = broadcast_offsets(&out, &broadcast_strides(a.shape(), &out));
        ao.into_iter().map(|o| f(av[o], y)).collect()
    } else {
        let ao = broadcast_offsets(&out, &broadcast_strides(a.shape(), &out));
        let bo = broadcast_offsets(&out, &broadcast_strides(b.shape(), &out));
        ao.into_iter()
            .zip(bo)
            .map(|(i, j)| f(av[i], bv[j]))
            .collect()
    };
    Ok(Tensor::from_vec(out, data)?)
}

/// Elementwise `f` over `t`.
pub fn unary<A: Element, O: Element>(t: &Tensor, f: impl Fn(A) -> O) -> KResult<Tensor> {
    let v = t.to_vec::<A>()?;
    Ok(Tensor::from_vec(
        t.shape().to_vec(),
        v.into_iter().map(f).collect::<Vec<O>>(),
    )?)
}

/// Any integer (or bool) tensor's elements as `i64` (uint64 above `i64::MAX` is an error).
pub fn to_i64s(t: &Tensor) -> KResult<Vec<i64>> {
    crate::infer::ints_of(t).ok_or_else(|| {
        KernelError::Invalid(format!(
            "expected an integer tensor, got tensor({}){:?}",
            t.dtype(),
            t.shape()
        ))
    })
}

/// Any float or integer tensor's elements as `f64`.
pub fn to_f64s(t: &Tensor) -> KResult<Vec<f64>> {
    if let Some(v) = crate::infer::floats_of(t) {
        return Ok(v);
    }
    for_int!(t.dtype(), T => {
        Ok(t.to_vec::<T>()?.into_iter().map(|x| x as f64).collect())
    } else {
        Err(KernelError::Invalid(format!(
            "expected a numeric tensor, got tensor({}){:?}",
            t.dtype(),
            t.shape()
        )))
    })
}

/// A scalar (or one-element) integer input's value.
pub fn scalar_i64(t: &Tensor, what: &str) -> KResult<i64> {
    let v = to_i64s(t)?;
    match v.as_slice() {
        [x] => Ok(*x),
        _ => Err(KernelError::Invalid(format!(
            "{what} must hold one value, got shape {:?}",
            t.shape()
        ))),
    }
}

/// Normalises a possibly negative `axis` for a tensor of `rank` (valid: `-rank..rank`).
pub fn norm_axis(axis: i64, rank: usize) -> KResult<usize> {
    let r = rank as i64;
    if axis < -r || axis >= r {
        return Err(KernelError::Invalid(format!(
            "axis {axis} is out of range for rank {rank} (expected {}..={})",
            -r,
            r - 1
        )));
    }
    Ok(if axis < 0 {
        (axis + r) as usize
    } else {
        axis as usize
    })
}

/// Converts between f32 and the float element types, for kernels that compute in f32/f64.
pub trait FloatConv: Element {
    fn to_f64(self) -> f64;
    fn from_f64(v: f64) -> Self;
    fn to_f32(self) -> f32;
    fn from_f32(v: f32) -> Self;
}

macro_rules! float_conv {
    ($t:ty, $to64:expr, $from64:expr, $to32:expr, $from32:expr) => {
        impl FloatConv for $t {
            fn to_f64(self) -> f64 {
                $to64(self)
            }
            fn from_f64(v: f64) -> Self {
                $from64(v)
            }
            fn to_f32(self) -> f32 {
                $to32(self)
            }
            fn from_f32(v: f32) -> Self {
                $from32(v)
            }
        }
    };
}

float_conv!(f32, f64::from, |v: f64| v as f32, |v| v, |v| v);
float_conv!(f64, |v| v, |v| v, |v: f64| v as f32, f64::from);
float_conv!(f16, f64::from, f16::from_f64, f32::from, f16::from_f32);
float_conv!(bf16, f64::from, bf16::from_f64, f32::from, bf16::from_f32);

/// A zero-filled tensor.
pub fn zeros(dtype: DataType, shape: Vec<usize>) -> KResult<Tensor> {
    let n: usize = shape.iter().product();
    if dtype == DataType::String {
        return Ok(Tensor::from_strings(shape, vec![bytes::Bytes::new(); n])?);
    }
    let len = dtype
        .byte_len(n as u64)
        .ok_or_else(|| KernelError::Invalid(format!("shape {shape:?} is too large")))?;
    Ok(Tensor::from_bytes(
        dtype,
        shape,
        bytes::Bytes::from(vec![0u8; len as usize]),
    )?)
}

/// Gathers elements of `t` at the given flat offsets into a new tensor of `shape`, for any
/// dtype (strings and packed sub-byte types included).
pub fn take(t: &Tensor, offsets: &[usize], shape: Vec<usize>) -> KResult<Tensor> {
    if let Some(s) = t.strings() {
        return Ok(Tensor::from_strings(
            shape,
            offsets.iter().map(|&o| s[o].clone()).collect(),
        )?);
    }
    if t.dtype().is_packed() {
        let codes = t.codes()?;
        let picked: Vec<u8> = offsets.iter().map(|&o| codes[o]).collect();
        return Ok(Tensor::from_codes(t.dtype(), shape, &picked)?);
    }
    let width = (t.dtype().bit_width().unwrap_or(8) / 8) as usize;
    let src = t.bytes().expect("non-string tensors have bytes");
    let mut out = Vec::with_capacity(offsets.len() * width);
    for &o in offsets {
        out.extend_from_slice(&src[o * width..(o + 1) * width]);
    }
    Ok(Tensor::from_bytes(
        t.dtype(),
        shape,
        bytes::Bytes::from(out),
    )?)
}

/// Concatenates the elements of several tensors of one dtype, in order, into `shape`.
pub fn concat_flat(parts: &[&Tensor], dtype: DataType, shape: Vec<usize>) -> KResult<Tensor> {
    if dtype == DataType::String {
        let mut all = Vec::new();
        for p in parts {
            all.extend_from_slice(p.strings().unwrap_or(&[]));
        }
        return Ok(Tensor::from_strings(shape, all)?);
    }
    if dtype.is_packed() {
        let mut all = Vec::new();
        for p in parts {
            all.extend(p.codes()?);
        }
        return Ok(Tensor::from_codes(dtype, shape, &all)?);
    }
    let mut all = Vec::new();
    for p in parts {
        all.extend_from_slice(p.bytes().map(|b| &b[..]).unwrap_or(&[]));
    }
    Ok(Tensor::from_bytes(dtype, shape, bytes::Bytes::from(all))?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasts_like_numpy() {
        assert_eq!(
            broadcast_shapes(&[&[2, 1, 3], &[4, 1]]).unwrap(),
            vec![2, 4, 3]
        );
        assert!(broadcast_shapes(&[&[2], &[3]]).is_err());
        let a = Tensor::from_vec(vec![2, 1], vec![1.0f32, 2.0]).unwrap();
        let b = Tensor::from_vec(vec![3], vec![10.0f32, 20.0, 30.0]).unwrap();
        let c = binary(&a, &b, |x: f32, y: f32| x + y).unwrap();
        assert_eq!(c.shape(), &[2, 3]);
        assert_eq!(
            c.to_vec::<f32>().unwrap(),
            vec![11.0, 21.0, 31.0, 12.0, 22.0, 32.0]
        );
    }

    #[test]
    fn take_moves_any_dtype() {
        let t = Tensor::from_strings(vec![3], vec!["a".into(), "b".into(), "c".into()]).unwrap();
        let u = take(&t, &[2, 0], vec![2]).unwrap();
        assert_eq!(
            u.strings().unwrap(),
            &["c".into(), "a".into()] as &[bytes::Bytes]
        );
        let f = Tensor::from_vec(vec![3], vec![1i64, 2, 3]).unwrap();
        assert_eq!(
            take(&f, &[1, 1], vec![2]).unwrap().to_vec::<i64>().unwrap(),
            vec![2, 2]
        );
    }
}
