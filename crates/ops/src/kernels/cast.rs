//! Kernels that reinterpret or convert element types: Cast, CastLike, BitCast (inference:
//! `families/shape.rs`, `families/indexing.rs`).
//!
//! Conversions follow numpy/ml_dtypes as the reference uses them: floats to integers truncate
//! toward zero and wrap, float8/float4 round to nearest even (float8 with `saturate` clamping to
//! the finite range first, without it overflowing to inf or NaN), float8e8m0 follows
//! `onnx.numpy_helper.to_float8e8m0`, numbers print like numpy's `astype(str)`.

use crate::exec::{kernel, KResult, KernelDef, KernelError, RunCx, Value};
use crate::for_int;
use bytes::Bytes;
use half::{bf16, f16};
use tensor::{DataType, Tensor};

// ---------------------------------------------------------------------------------------------
// Small float formats

#[derive(Clone, Copy, PartialEq)]
enum Special {
    /// No inf; NaN is S.1111.111 (float8e4m3fn).
    Fn,
    /// IEEE-like inf and NaN (float8e5m2).
    Ieee,
    /// No inf, no negative zero; NaN is 0x80 (the `fnuz` formats).
    Uz,
    /// No inf, no NaN: overflow saturates (float4e2m1, float6e2m3, float6e3m2).
    Sat,
}

/// A small float format: exponent and mantissa bits, bias, largest finite value, specials.
#[derive(Clone, Copy)]
pub(crate) struct Mini {
    e: u32,
    m: u32,
    bias: i32,
    max: f64,
    special: Special,
}

pub(crate) fn mini(dtype: DataType) -> Option<Mini> {
    let (e, m, bias, max, special) = match dtype {
        DataType::Float8e4m3fn => (4, 3, 7, 448.0, Special::Fn),
        DataType::Float8e4m3fnuz => (4, 3, 8, 240.0, Special::Uz),
        DataType::Float8e5m2 => (5, 2, 15, 57344.0, Special::Ieee),
        DataType::Float8e5m2fnuz => (5, 2, 16, 57344.0, Special::Uz),
        DataType::Float4e2m1 => (2, 1, 1, 6.0, Special::Sat),
        DataType::Float6e2m3 => (2, 3, 1, 7.5, Special::Sat),
        DataType::Float6e3m2 => (3, 2, 3, 28.0, Special::Sat),
        _ => return None,
    };
    Some(Mini {
        e,
        m,
        bias,
        max,
        special,
    })
}

impl Mini {
    fn sign_bit(&self) -> u8 {
        1u8 << (self.e + self.m)
    }

    fn nan_code(&self, neg: bool) -> u8 {
        let s = if neg { self.sign_bit() } else { 0 };
        match self.special {
            Special::Fn => (self.sign_bit() - 1) | s,
            Special::Ieee => ((((1u8 << self.e) - 1) << self.m) | (1 << (self.m - 1))) | s,
            Special::Uz => 0x80,
            // ml_dtypes turns NaN into the zero of the opposite sign.
            Special::Sat => {
                if neg {
                    0
                } else {
                    self.sign_bit()
                }
            }
        }
    }

    fn inf_code(&self, neg: bool) -> u8 {
        let s = if neg { self.sign_bit() } else { 0 };
        match self.special {
            Special::Ieee => (((1u8 << self.e) - 1) << self.m) | s,
            _ => self.nan_code(neg),
        }
    }

    /// The value of a bit pattern.
    pub(crate) fn decode(&self, code: u8) -> f64 {
        let neg = code & self.sign_bit() != 0;
        let ef = ((code >> self.m) & ((1 << self.e) - 1)) as i32;
        let mf = (code & ((1 << self.m) - 1)) as i32;
        let emax_field = (1 << self.e) - 1;
        match self.special {
            Special::Fn if ef == emax_field && mf == (1 << self.m) - 1 => return f64::NAN,
            Special::Ieee if ef == emax_field => {
                return if mf == 0 {
                    if neg {
                        f64::NEG_INFINITY
                    } else {
                        f64::INFINITY
                    }
                } else {
                    f64::NAN
                }
            }
            Special::Uz if code == 0x80 => return f64::NAN,
            _ => {}
        }
        let v = if ef == 0 {
            mf as f64 * 2f64.powi(1 - self.bias - self.m as i32)
        } else {
            (1.0 + mf as f64 / (1 << self.m) as f64) * 2f64.powi(ef - self.bias)
        };
        if neg {
            -v
        } else {
            v
        }
    }

    /// The bit pattern nearest `x` (ties to even); `saturate` clamps to the finite range first.
    pub(crate) fn encode(&self, x: f64, saturate: bool) -> u8 {
        let neg = x.is_sign_negative();
        if x.is_nan() {
            return self.nan_code(neg);
        }
        let mut a = x.abs();
        if (saturate || self.special == Special::Sat) && a > self.max {
            a = self.max;
        }
        if a.is_infinite() {
            return self.inf_code(neg);
        }
        let emin = 1 - self.bias;
        let e = floor_log2(a).max(emin);
        let q = 2f64.powi(e - self.m as i32);
        let r = round_even(a / q);
        let v = r * q;
        if v > self.max {
            return self.inf_code(neg);
        }
        let s = if neg { self.sign_bit() } else { 0 };
        if v == 0.0 {
            return if self.special == Special::Uz { 0 } else { s };
        }
        let ev = floor_log2(v);
        let code = if ev < emin {
            (v / 2f64.powi(emin - self.m as i32)) as u8
        } else {
            let mant = (v / 2f64.powi(ev - self.m as i32)) as u32 - (1 << self.m);
            ((((ev + self.bias) as u32) << self.m) | mant) as u8
        };
        code | s
    }
}

fn floor_log2(a: f64) -> i32 {
    if a == 0.0 {
        return i32::MIN / 2;
    }
    let (m, e) = frexp(a);
    let _ = m;
    e - 1
}

/// `a = m * 2^e` with `m` in [0.5, 1).
fn frexp(a: f64) -> (f64, i32) {
    let bits = a.to_bits();
    let ef = ((bits >> 52) & 0x7ff) as i32;
    if ef == 0 {
        let (m, e) = frexp(a * 2f64.powi(64));
        return (m, e - 64);
    }
    let m = f64::from_bits((bits & !(0x7ffu64 << 52)) | (1022u64 << 52));
    (m, ef - 1022)
}

fn round_even(x: f64) -> f64 {
    let r = x.round();
    if (r - x).abs() == 0.5 {
        2.0 * (x / 2.0).round()
    } else {
        r
    }
}

/// float8e8m0 from a float32, as `onnx.numpy_helper.to_float8e8m0`.
pub(crate) fn to_e8m0(x: f32, saturate: bool, round_mode: &str) -> u8 {
    let bits = x.to_bits();
    let mut exp = ((bits >> 23) & 0xff) as u16;
    if exp == 0xff {
        return 0xff;
    }
    let round_up = match round_mode {
        "nearest" => {
            let g = bits & 0x40_0000 != 0;
            let r = bits & 0x20_0000 != 0;
            let s = bits & 0x1f_ffff != 0;
            let lsb = exp > 0;
            g && (r || s || lsb)
        }
        "up" => bits & 0x7f_ffff != 0,
        _ => false,
    };
    if round_up && !(saturate && exp == 0xfe) {
        exp += 1;
    }
    exp as u8
}

fn from_e8m0(code: u8) -> f64 {
    if code == 0xff {
        f64::NAN
    } else {
        2f64.powi(code as i32 - 127)
    }
}

// ---------------------------------------------------------------------------------------------
// Conversion

/// Decoded elements of a source tensor.
enum Src<'a> {
    F(Vec<f64>),
    I(Vec<i128>),
    S(&'a [Bytes]),
}

fn sub_byte_int(dtype: DataType) -> Option<(u32, bool)> {
    match dtype {
        DataType::Int4 => Some((4, true)),
        DataType::Uint4 => Some((4, false)),
        DataType::Int2 => Some((2, true)),
        DataType::Uint2 => Some((2, false)),
        _ => None,
    }
}

fn read<'a>(cx: &RunCx, t: &'a Tensor) -> KResult<Src<'a>> {
    let dt = t.dtype();
    Ok(match dt {
        DataType::Float => Src::F(t.to_vec::<f32>()?.into_iter().map(f64::from).collect()),
        DataType::Double => Src::F(t.to_vec::<f64>()?),
        DataType::Float16 => Src::F(t.to_vec::<f16>()?.into_iter().map(f64::from).collect()),
        DataType::Bfloat16 => Src::F(t.to_vec::<bf16>()?.into_iter().map(f64::from).collect()),
        DataType::Bool => Src::I(t.to_vec::<bool>()?.into_iter().map(i128::from).collect()),
        DataType::String => Src::S(t.strings().unwrap_or(&[])),
        DataType::Float8e8m0 => Src::F(t.codes()?.into_iter().map(from_e8m0).collect()),
        _ => {
            if let Some(f) = mini(dt) {
                return Ok(Src::F(
                    t.codes()?.into_iter().map(|c| f.decode(c)).collect(),
                ));
            }
            if let Some((bits, signed)) = sub_byte_int(dt) {
                let shift = 8 - bits;
                return Ok(Src::I(
                    t.codes()?
                        .into_iter()
                        .map(|c| {
                            if signed {
                                (((c << shift) as i8) >> shift) as i128
                            } else {
                                (c & ((1 << bits) - 1)) as i128
                            }
                        })
                        .collect(),
                ));
            }
            for_int!(dt, T => {
                Src::I(t.to_vec::<T>()?.into_iter().map(|v| v as i128).collect())
            } else {
                return Err(cx.unsupported(format!("cast from {dt}")));
            })
        }
    })
}

/// Any numeric tensor's elements as `f64` (float8/float4/e8m0 and 2-/4-bit integers
/// included); `None` for strings, complex and types without a decoder here.
pub(crate) fn values_f64(cx: &RunCx, t: &Tensor) -> KResult<Option<Vec<f64>>> {
    if matches!(
        t.dtype(),
        DataType::String | DataType::Complex64 | DataType::Complex128
    ) {
        return Ok(None);
    }
    Ok(match read(cx, t) {
        Ok(Src::F(v)) => Some(v),
        Ok(Src::I(v)) => Some(v.into_iter().map(|x| x as f64).collect()),
        Ok(Src::S(_)) | Err(KernelError::Unsupported { .. }) => None,
        Err(e) => return Err(e),
    })
}

/// Width and signedness of the 2- and 4-bit integer types.
pub(crate) fn small_int(dtype: DataType) -> Option<(u32, bool)> {
    sub_byte_int(dtype)
}

/// Float to integer as numpy does it on x86-64: truncation toward zero; for int64 a NaN or
/// out-of-range value gives `i64::MIN`, for the types up to 32 bits (converted through int32,
/// then wrapped) `i32::MIN`; uint32/uint64 truncate and wrap (NaN and infinities give 0).
fn f2i(x: f64, to: DataType) -> i128 {
    match to {
        DataType::Uint32 | DataType::Uint64 => {
            if x.is_finite() {
                x.trunc() as i128
            } else {
                0
            }
        }
        DataType::Int64 => {
            if x.is_finite() && x >= -(2f64.powi(63)) && x < 2f64.powi(63) {
                x.trunc() as i128
            } else {
                i64::MIN as i128
            }
        }
        _ => {
            if x.is_finite() && x > -2147483649.0 && x < 2147483648.0 {
                x.trunc() as i128
            } else {
                i32::MIN as i128
            }
        }
    }
}

/// Shortest round-trip digits and decimal exponent of a float printed with `{:e}`.
fn digits(sci: &str) -> (bool, String, i32) {
    let (neg, s) = match sci.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, sci),
    };
    let (mant, exp) = s.split_once('e').unwrap_or((s, "0"));
    let d: String = mant.chars().filter(|c| *c != '.').collect();
    (neg, d, exp.parse().unwrap_or(0))
}

/// numpy's `astype(str)` of a float: shortest round-trip digits, positional when
/// `1e-4 <= |x| < upper` (1e3 for float16, 1e6 for float32, 1e16 for double), else
/// `d.ddde+XX`.
fn float_str(x: f64, sci: String, upper: f64) -> String {
    if x.is_nan() {
        return "nan".into();
    }
    if x.is_infinite() {
        return if x < 0.0 { "-inf" } else { "inf" }.into();
    }
    let (neg, d, e) = digits(&sci);
    let sign = if neg { "-" } else { "" };
    let a = x.abs();
    if a == 0.0 || (1e-4..upper).contains(&a) {
        let body = if e >= 0 {
            let e = e as usize;
            let (int, frac) = if d.len() > e + 1 {
                (d[..e + 1].to_string(), d[e + 1..].to_string())
            } else {
                (
                    format!("{d}{}", "0".repeat(e + 1 - d.len())),
                    "0".to_string(),
                )
            };
            format!("{int}.{frac}")
        } else {
            format!("0.{}{d}", "0".repeat((-e - 1) as usize))
        };
        format!("{sign}{body}")
    } else {
        let mant = if d.len() > 1 {
            format!("{}.{}", &d[..1], &d[1..])
        } else {
            d
        };
        let es = if e < 0 { '-' } else { '+' };
        format!("{sign}{mant}e{es}{:02}", e.abs())
    }
}

fn to_strings(cx: &RunCx, t: &Tensor) -> KResult<Vec<Bytes>> {
    let s: Vec<String> = match t.dtype() {
        DataType::Float => t
            .to_vec::<f32>()?
            .into_iter()
            .map(|v| float_str(v as f64, format!("{v:e}"), 1e6))
            .collect(),
        DataType::Double => t
            .to_vec::<f64>()?
            .into_iter()
            .map(|v| float_str(v, format!("{v:e}"), 1e16))
            .collect(),
        DataType::Float16 => t
            .to_vec::<f16>()?
            .into_iter()
            .map(|v| {
                let f = v.to_f32();
                let sci = (0..8)
                    .map(|p| format!("{f:.p$e}"))
                    .find(|s| s.parse::<f32>().is_ok_and(|g| f16::from_f32(g) == v))
                    .unwrap_or_else(|| format!("{f:e}"));
                float_str(f as f64, sci, 1e3)
            })
            .collect(),
        DataType::Bool => t
            .to_vec::<bool>()?
            .into_iter()
            .map(|b| if b { "True" } else { "False" }.to_string())
            .collect(),
        dt => for_int!(dt, T => {
            t.to_vec::<T>()?.into_iter().map(|v| v.to_string()).collect()
        } else {
            return Err(cx.unsupported(format!("cast from {dt} to string")));
        }),
    };
    Ok(s.into_iter().map(Bytes::from).collect())
}

fn parse_f64(cx: &RunCx, s: &Bytes) -> KResult<f64> {
    let txt = String::from_utf8_lossy(s);
    txt.trim()
        .parse::<f64>()
        .map_err(|_| cx.invalid(format!("cannot cast string '{txt}' to a number")))
}

fn parse_i128(cx: &RunCx, s: &Bytes) -> KResult<i128> {
    let txt = String::from_utf8_lossy(s);
    txt.trim()
        .parse::<i128>()
        .map_err(|_| cx.invalid(format!("cannot cast string '{txt}' to an integer")))
}

/// Converts `t` to `to`.
pub(crate) fn cast_tensor(
    cx: &RunCx,
    t: &Tensor,
    to: DataType,
    saturate: bool,
    round_mode: &str,
) -> KResult<Tensor> {
    let from = t.dtype();
    if from == to {
        return Ok(t.clone());
    }
    let shape = t.shape().to_vec();
    if to == DataType::String {
        return Ok(Tensor::from_strings(shape, to_strings(cx, t)?)?);
    }
    let src = read(cx, t)?;
    // Strings parse as floats for float targets and as integers for integer targets.
    let src = match src {
        Src::S(strs) => {
            if to.is_float() || to == DataType::Float8e8m0 {
                if to == DataType::Float {
                    let mut v = Vec::with_capacity(strs.len());
                    for s in strs {
                        let txt = String::from_utf8_lossy(s);
                        let f: f32 = txt.trim().parse().map_err(|_| {
                            cx.invalid(format!("cannot cast string '{txt}' to a number"))
                        })?;
                        v.push(f as f64);
                    }
                    Src::F(v)
                } else {
                    Src::F(
                        strs.iter()
                            .map(|s| parse_f64(cx, s))
                            .collect::<KResult<_>>()?,
                    )
                }
            } else if to.is_int() {
                Src::I(
                    strs.iter()
                        .map(|s| parse_i128(cx, s))
                        .collect::<KResult<_>>()?,
                )
            } else {
                return Err(cx.unsupported(format!("cast from string to {to}")));
            }
        }
        s => s,
    };
    let as_f = |s: &Src| -> Vec<f64> {
        match s {
            Src::F(v) => v.clone(),
            Src::I(v) => v.iter().map(|&x| x as f64).collect(),
            Src::S(_) => Vec::new(),
        }
    };
    let as_i = |s: &Src| -> Vec<i128> {
        match s {
            Src::F(v) => v.iter().map(|&x| f2i(x, to)).collect(),
            Src::I(v) => v.clone(),
            Src::S(_) => Vec::new(),
        }
    };
    let out = match to {
        DataType::Float => Tensor::from_vec(
            shape,
            as_f(&src).into_iter().map(|x| x as f32).collect::<Vec<_>>(),
        )?,
        DataType::Double => Tensor::from_vec(shape, as_f(&src))?,
        DataType::Float16 => Tensor::from_vec(
            shape,
            as_f(&src)
                .into_iter()
                .map(f16::from_f64)
                .collect::<Vec<_>>(),
        )?,
        DataType::Bfloat16 => Tensor::from_vec(
            shape,
            as_f(&src)
                .into_iter()
                .map(|x| bf16::from_f32(x as f32))
                .collect::<Vec<_>>(),
        )?,
        DataType::Bool => {
            let v: Vec<bool> = match &src {
                Src::F(v) => v.iter().map(|&x| x != 0.0).collect(),
                Src::I(v) => v.iter().map(|&x| x != 0).collect(),
                Src::S(_) => Vec::new(),
            };
            Tensor::from_vec(shape, v)?
        }
        DataType::Float8e8m0 => {
            let codes: Vec<u8> = as_f(&src)
                .into_iter()
                .map(|x| to_e8m0(x as f32, saturate, round_mode))
                .collect();
            Tensor::from_codes(to, shape, &codes)?
        }
        _ => {
            if let Some(f) = mini(to) {
                let sat = saturate && f.special != Special::Sat;
                let codes: Vec<u8> = as_f(&src).into_iter().map(|x| f.encode(x, sat)).collect();
                Tensor::from_codes(to, shape, &codes)?
            } else if let Some((bits, _)) = sub_byte_int(to) {
                let mask = (1i128 << bits) - 1;
                let codes: Vec<u8> = as_i(&src).into_iter().map(|v| (v & mask) as u8).collect();
                Tensor::from_codes(to, shape, &codes)?
            } else {
                for_int!(to, T => {
                    Tensor::from_vec(shape, as_i(&src).into_iter().map(|v| v as T).collect::<Vec<T>>())?
                } else {
                    return Err(cx.unsupported(format!("cast from {from} to {to}")));
                })
            }
        }
    };
    Ok(out)
}

fn round_mode(cx: &RunCx) -> KResult<String> {
    let m = cx.string("round_mode", "up")?;
    if !matches!(m.as_str(), "up" | "down" | "nearest") {
        return Err(cx.invalid(format!("round_mode must be up, down or nearest, got '{m}'")));
    }
    Ok(m)
}

/// Cast to the `to` attribute's type (`saturate` from opset 19, `round_mode` for float8e8m0).
fn cast(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    // Cast-1 names the type as a string ("FLOAT"); later versions use the enum value.
    let string_to = match cx.attr("to") {
        Some(a) if cx.opset < 6 && !a.s().is_empty() => Some(cx.attr_s("to")?.unwrap_or_default()),
        _ => None,
    };
    let to = if let Some(name) = string_to {
        DataType::from_name(&name.to_ascii_lowercase()).ok_or_else(|| {
            cx.invalid(format!("Cast 'to' = '{name}' is not a known element type"))
        })?
    } else {
        let code = cx
            .attr_i("to")?
            .ok_or_else(|| cx.invalid("Cast needs the 'to' attribute"))?;
        DataType::from_onnx(code as i32)
            .ok_or_else(|| cx.invalid(format!("Cast 'to' = {code} is not a known element type")))?
    };
    let saturate = cx.opset < 19 || cx.int("saturate", 1)? != 0;
    Ok(vec![
        cast_tensor(cx, x, to, saturate, &round_mode(cx)?)?.into()
    ])
}

/// CastLike: Cast to the type of the second input.
fn cast_like(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let to = cx.input(1)?.dtype();
    let saturate = cx.opset < 19 || cx.int("saturate", 1)? != 0;
    Ok(vec![
        cast_tensor(cx, x, to, saturate, &round_mode(cx)?)?.into()
    ])
}

/// BitCast: the same bits viewed as another type of the same width.
fn bit_cast(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let code = cx
        .attr_i("to")?
        .ok_or_else(|| cx.invalid("BitCast needs the 'to' attribute"))?;
    let to = DataType::from_onnx(code as i32)
        .ok_or_else(|| cx.invalid(format!("BitCast 'to' = {code} is not a known element type")))?;
    if x.dtype() == DataType::String || to == DataType::String {
        return Err(cx.invalid("BitCast does not apply to strings"));
    }
    let (wa, wb) = (x.dtype().bit_width(), to.bit_width());
    if wa.is_none() || wa != wb {
        return Err(cx.invalid(format!(
            "BitCast needs types of one bit width, got {} ({wa:?} bits) and {to} ({wb:?} bits)",
            x.dtype()
        )));
    }
    let bytes = x.bytes().cloned().unwrap_or_default();
    Ok(vec![
        Tensor::from_bytes(to, x.shape().to_vec(), bytes)?.into()
    ])
}

pub const KERNELS: &[KernelDef] = &[
    kernel("Cast", 1, cast),
    kernel("CastLike", 15, cast_like),
    kernel("BitCast", 26, bit_cast),
];

/// Runs kernels in unit tests.
#[cfg(test)]
pub(crate) mod test_util {
    use crate::exec::{KResult, Value};
    use tensor::Tensor;

    pub(crate) fn cx_run(
        op: &str,
        attrs: Vec<onnx_proto::AttributeProto>,
        opset: i64,
        inputs: &[Tensor],
    ) -> KResult<Vec<Value>> {
        let given: Vec<Option<Tensor>> = inputs.iter().cloned().map(Some).collect();
        crate::exec::testing::run(op, opset, &given, 1, attrs)
    }

    pub(crate) fn int_attr(name: &str, v: i64) -> onnx_proto::AttributeProto {
        onnx_proto::AttributeProto {
            name: Some(name.into()),
            i: Some(v),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::Int as i32),
            ..Default::default()
        }
    }

    pub(crate) fn float_attr(name: &str, v: f32) -> onnx_proto::AttributeProto {
        onnx_proto::AttributeProto {
            name: Some(name.into()),
            f: Some(v),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::Float as i32),
            ..Default::default()
        }
    }

    pub(crate) fn str_attr(name: &str, v: &str) -> onnx_proto::AttributeProto {
        onnx_proto::AttributeProto {
            name: Some(name.into()),
            s: Some(v.as_bytes().to_vec().into()),
            r#type: Some(onnx_proto::attribute_proto::AttributeType::String as i32),
            ..Default::default()
        }
    }

    /// The first output of `op` as a tensor.
    pub(crate) fn run1(
        op: &str,
        attrs: Vec<onnx_proto::AttributeProto>,
        opset: i64,
        inputs: &[Tensor],
    ) -> KResult<Tensor> {
        let out = cx_run(op, attrs, opset, inputs)?;
        Ok(out[0].as_tensor().expect("tensor").clone())
    }
}

#[cfg(test)]
mod tests {
    use super::test_util::*;
    use super::*;

    #[test]
    fn strings_parse_and_print() {
        let s = Tensor::from_strings(
            vec![4],
            vec![" 1.5".into(), "NaN".into(), "-INF".into(), "1e3".into()],
        )
        .unwrap();
        let out = cx_run("Cast", vec![int_attr("to", 1)], 21, &[s]).unwrap();
        let v = out[0].as_tensor().unwrap().to_vec::<f32>().unwrap();
        assert_eq!(v[0], 1.5);
        assert!(v[1].is_nan());
        assert_eq!(v[2], f32::NEG_INFINITY);
        assert_eq!(v[3], 1000.0);
        let i = Tensor::from_vec(vec![2], vec![-3i64, 7]).unwrap();
        let out = cx_run("Cast", vec![int_attr("to", 8)], 21, &[i]).unwrap();
        let t = out[0].as_tensor().unwrap();
        assert_eq!(t.strings().unwrap(), &[Bytes::from("-3"), Bytes::from("7")]);
        let bad = Tensor::from_strings(vec![1], vec!["x".into()]).unwrap();
        assert!(cx_run("Cast", vec![int_attr("to", 6)], 21, &[bad]).is_err());
    }

    #[test]
    fn small_formats_match_ml_dtypes() {
        let x = [
            f64::NAN,
            -f64::NAN,
            f64::INFINITY,
            f64::NEG_INFINITY,
            1e6,
            -0.0,
            0.1,
            7.6,
            29.0,
            0.3,
            1.0,
        ];
        let e2m3 = mini(DataType::Float6e2m3).unwrap();
        let e3m2 = mini(DataType::Float6e3m2).unwrap();
        let a: Vec<u8> = x.iter().map(|&v| e2m3.encode(v, false)).collect();
        let b: Vec<u8> = x.iter().map(|&v| e3m2.encode(v, false)).collect();
        assert_eq!(a, vec![32, 0, 31, 63, 31, 32, 1, 31, 31, 2, 8]);
        assert_eq!(b, vec![32, 0, 31, 63, 31, 32, 2, 24, 31, 5, 12]);
        let e4m3 = mini(DataType::Float8e4m3fn).unwrap();
        assert_eq!(e4m3.encode(f64::INFINITY, false), 0x7f);
        assert_eq!(e4m3.encode(f64::NEG_INFINITY, false), 0xff);
        assert_eq!(e4m3.encode(470.0, false), 0x7f);
        assert_eq!(e4m3.encode(470.0, true), 0x7e);
        let e5m2 = mini(DataType::Float8e5m2).unwrap();
        assert_eq!(e5m2.encode(1e6, false), 0x7c);
        assert_eq!(e5m2.encode(f64::NAN, false), 0x7e);
        let uz = mini(DataType::Float8e4m3fnuz).unwrap();
        assert_eq!(uz.encode(-0.0, false), 0);
        assert_eq!(uz.encode(f64::INFINITY, false), 0x80);
    }

    #[test]
    fn out_of_range_floats_to_ints_follow_numpy_on_x86() {
        let f = Tensor::from_vec(vec![4], vec![f32::NAN, 3e9, 300.7, -300.7]).unwrap();
        let i32s = run1(
            "Cast",
            vec![int_attr("to", 6)],
            13,
            std::slice::from_ref(&f),
        )
        .unwrap();
        assert_eq!(
            i32s.to_vec::<i32>().unwrap(),
            vec![i32::MIN, i32::MIN, 300, -300]
        );
        let i8s = run1(
            "Cast",
            vec![int_attr("to", 3)],
            13,
            std::slice::from_ref(&f),
        )
        .unwrap();
        assert_eq!(i8s.to_vec::<i8>().unwrap(), vec![0, 0, 44, -44]);
        let i64s = run1("Cast", vec![int_attr("to", 7)], 13, &[f]).unwrap();
        assert_eq!(
            i64s.to_vec::<i64>().unwrap(),
            vec![i64::MIN, 3_000_000_000, 300, -300]
        );
    }

    #[test]
    fn cast_1_takes_a_type_name() {
        let x = Tensor::from_vec(vec![2], vec![1.5f32, -2.5]).unwrap();
        let out = run1("Cast", vec![str_attr("to", "INT32")], 1, &[x]).unwrap();
        assert_eq!(out.to_vec::<i32>().unwrap(), vec![1, -2]);
    }

    #[test]
    fn floats_to_ints_truncate_and_wrap() {
        let f = Tensor::from_vec(vec![4], vec![2.7f32, -2.7, 300.0, -1.0]).unwrap();
        let out = cx_run("Cast", vec![int_attr("to", 2)], 13, &[f]).unwrap();
        assert_eq!(
            out[0].as_tensor().unwrap().to_vec::<u8>().unwrap(),
            vec![2, 254, 44, 255]
        );
    }

    #[test]
    fn floats_print_like_numpy() {
        let f = |v: f32| float_str(v as f64, format!("{v:e}"), 1e6);
        assert_eq!(f(1e-7), "1e-07");
        assert_eq!(f(1e6), "1e+06");
        assert_eq!(f(1e-4), "1e-04");
        assert_eq!(f(0.00012345), "0.00012345");
        assert_eq!(f(123456789.0), "1.2345679e+08");
        assert_eq!(f(-0.0), "-0.0");
        assert_eq!(f(3.0), "3.0");
        assert_eq!(f(999999.0), "999999.0");
        assert_eq!(f(0.47892547), "0.47892547");
        let d = |v: f64| float_str(v, format!("{v:e}"), 1e16);
        assert_eq!(d(1e15), "1000000000000000.0");
        assert_eq!(d(1e16), "1e+16");
        assert_eq!(d(0.0001), "0.0001");
        assert_eq!(d(1e-5), "1e-05");
        let h = |v: f32| {
            let t = Tensor::from_vec(vec![1], vec![f16::from_f32(v)]).unwrap();
            let node = onnx_proto::NodeProto::default();
            let cx = RunCx::new(&node, 21, &[], &crate::exec::testing::NoSubgraphs);
            String::from_utf8(to_strings(&cx, &t).unwrap()[0].to_vec()).unwrap()
        };
        assert_eq!(h(1000.0), "1e+03");
        assert_eq!(h(65504.0), "6.55e+04");
        assert_eq!(h(0.0001), "0.0001");
        assert_eq!(h(9e-5), "9e-05");
        assert_eq!(h(1.23456), "1.234");
        assert_eq!(h(12345.0), "1.2344e+04");
        assert_eq!(" INF".trim().parse::<f64>().unwrap(), f64::INFINITY);
        assert!("NaN".parse::<f64>().unwrap().is_nan());
        assert_eq!("+INF".parse::<f64>().unwrap(), f64::INFINITY);
    }

    #[test]
    fn minifloats_round_trip() {
        for dt in [
            DataType::Float8e4m3fn,
            DataType::Float8e4m3fnuz,
            DataType::Float8e5m2,
            DataType::Float8e5m2fnuz,
            DataType::Float4e2m1,
            DataType::Float6e2m3,
            DataType::Float6e3m2,
        ] {
            let f = mini(dt).unwrap();
            let n = 1u16 << (f.e + f.m + 1);
            for c in 0..n {
                let c = c as u8;
                let v = f.decode(c);
                if v.is_nan() || (v == 0.0 && c != 0) {
                    continue;
                }
                assert_eq!(f.encode(v, false), c, "{dt} code {c}");
            }
        }
    }
}
