//! Kernels of the `ai.onnx.ml` domain (inference: `families/ml.rs`): the classic-ML operators
//! sklearn exports use. Map-typed ops (ZipMap, DictVectorizer, CastMap) are not implemented:
//! runtime values have no map type.

use crate::exec::util::{concat_flat, take, to_f64s, to_i64s, FloatConv};
use crate::exec::{kernel_in, KResult, KernelDef, RunCx, Value};
use crate::{for_float, for_int};
use bytes::Bytes;
use std::collections::HashMap;
use tensor::{DataType, Tensor};

const ML: &str = "ai.onnx.ml";

/// A lookup key: integers, floats (by bits, see [`float_key`]) or strings.
#[derive(Clone, PartialEq, Eq, Hash)]
enum Key {
    I(i64),
    F(u64),
    S(Bytes),
}

/// A float key: -0 folds into 0 and every NaN into one NaN (LabelEncoder-4 matches any NaN).
fn float_key(v: f64) -> Key {
    Key::F(if v == 0.0 {
        0f64.to_bits()
    } else if v.is_nan() {
        f64::NAN.to_bits()
    } else {
        v.to_bits()
    })
}

/// The elements of `t` as keys.
fn keys_of(cx: &RunCx, t: &Tensor) -> KResult<Vec<Key>> {
    if let Some(s) = t.strings() {
        return Ok(s.iter().map(|b| Key::S(b.clone())).collect());
    }
    if t.dtype().is_float() {
        return Ok(to_f64s(t)?.into_iter().map(float_key).collect());
    }
    if t.dtype().is_int() {
        return Ok(to_i64s(t)?.into_iter().map(Key::I).collect());
    }
    Err(cx.unsupported(t.dtype()))
}

/// A one-element tensor of `dtype` holding `v` (numeric types).
fn scalar_of(cx: &RunCx, dtype: DataType, v: f64) -> KResult<Tensor> {
    from_f64s(cx, dtype, vec![1], vec![v])
}

/// A one-element string tensor.
fn string1(s: &str) -> KResult<Tensor> {
    Ok(Tensor::from_strings(
        vec![1],
        vec![Bytes::copy_from_slice(s.as_bytes())],
    )?)
}

/// LabelEncoder: maps each input element through keys → values, else to the default
/// (v1: `classes_strings` between strings and their indices; v2: `keys_*`/`values_*`
/// lists; v4: also `keys_tensor`/`values_tensor`/`default_tensor`).
fn label_encoder(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let xk = keys_of(cx, x)?;
    let (keys, values, default): (Vec<Key>, Tensor, Tensor) = if cx.opset < 2 {
        let classes = cx
            .attr("classes_strings")
            .map(|a| a.strings.clone())
            .unwrap_or_default();
        let n = classes.len();
        if x.dtype() == DataType::String {
            let keys = classes.into_iter().map(Key::S).collect();
            let values = Tensor::from_vec(vec![n], (0..n as i64).collect::<Vec<_>>())?;
            let d = Tensor::from_vec(vec![1], vec![cx.int("default_int64", -1)?])?;
            (keys, values, d)
        } else if x.dtype() == DataType::Int64 {
            let keys = (0..n as i64).map(Key::I).collect();
            let values = Tensor::from_strings(vec![n], classes)?;
            let d = string1(&cx.string("default_string", "_Unused")?)?;
            (keys, values, d)
        } else {
            return Err(cx.unsupported(x.dtype()));
        }
    } else {
        let keys: Vec<Key> = if let Some(k) = cx.attr_floats("keys_floats")? {
            k.iter().map(|&v| float_key(v as f64)).collect()
        } else if let Some(k) = cx.attr_ints("keys_int64s")? {
            k.iter().map(|&v| Key::I(v)).collect()
        } else if let Some(a) = cx.attr("keys_strings") {
            a.strings.iter().map(|s| Key::S(s.clone())).collect()
        } else if let Some(t) = cx.attr_t("keys_tensor")? {
            keys_of(cx, &t)?
        } else {
            return Err(cx.invalid(
                "LabelEncoder needs one of keys_floats, keys_int64s, keys_strings, keys_tensor",
            ));
        };
        let (values, default) = if let Some(v) = cx.attr_floats("values_floats")? {
            (
                Tensor::from_slice(vec![v.len()], v)?,
                Tensor::from_vec(vec![1], vec![cx.float("default_float", -0.0)?])?,
            )
        } else if let Some(v) = cx.attr_ints("values_int64s")? {
            (
                Tensor::from_slice(vec![v.len()], v)?,
                Tensor::from_vec(vec![1], vec![cx.int("default_int64", -1)?])?,
            )
        } else if let Some(a) = cx.attr("values_strings") {
            (
                Tensor::from_strings(vec![a.strings.len()], a.strings.clone())?,
                string1(&cx.string("default_string", "_Unused")?)?,
            )
        } else if let Some(t) = cx.attr_t("values_tensor")? {
            let n = t.len();
            let t = t.reshape(vec![n])?;
            let d = match cx.attr_t("default_tensor")? {
                Some(d) if d.dtype() == t.dtype() && d.len() == 1 => d.reshape(vec![1])?,
                Some(d) => {
                    return Err(cx.invalid(format!(
                        "LabelEncoder default_tensor must be one element of type {}, got tensor({}){:?}",
                        t.dtype(),
                        d.dtype(),
                        d.shape()
                    )))
                }
                None if t.dtype() == DataType::String => string1("_Unused")?,
                None if t.dtype().is_float() => scalar_of(cx, t.dtype(), -0.0)?,
                None => scalar_of(cx, t.dtype(), -1.0)?,
            };
            (t, d)
        } else {
            return Err(cx.invalid("LabelEncoder needs one of values_floats, values_int64s, values_strings, values_tensor"));
        };
        (keys, values, default)
    };
    if keys.len() != values.len() {
        return Err(cx.invalid(format!(
            "LabelEncoder has {} keys and {} values",
            keys.len(),
            values.len()
        )));
    }
    let n = keys.len();
    let mut map: HashMap<Key, usize> = HashMap::with_capacity(n);
    for (i, k) in keys.into_iter().enumerate() {
        map.entry(k).or_insert(i);
    }
    let table = concat_flat(&[&values, &default], values.dtype(), vec![n + 1])?;
    let offs: Vec<usize> = xk
        .iter()
        .map(|k| map.get(k).copied().unwrap_or(n))
        .collect();
    Ok(vec![take(&table, &offs, x.shape().to_vec())?.into()])
}

/// CategoryMapper: strings to int64 through the parallel `cats_strings`/`cats_int64s` lists,
/// or int64 to strings, unknown values giving `default_int64` / `default_string`.
fn category_mapper(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let strs = cx
        .attr("cats_strings")
        .map(|a| a.strings.clone())
        .unwrap_or_default();
    let ints = cx.attr_ints("cats_int64s")?.unwrap_or(&[]);
    if strs.len() != ints.len() {
        return Err(cx.invalid(format!(
            "CategoryMapper has {} cats_strings and {} cats_int64s",
            strs.len(),
            ints.len()
        )));
    }
    let n = strs.len();
    let (keys, table): (Vec<Key>, Tensor) = match x.dtype() {
        DataType::String => {
            let mut v = ints.to_vec();
            v.push(cx.int("default_int64", -1)?);
            (
                strs.iter().map(|s| Key::S(s.clone())).collect(),
                Tensor::from_vec(vec![n + 1], v)?,
            )
        }
        DataType::Int64 => {
            let mut v = strs.clone();
            v.push(Bytes::from(cx.string("default_string", "_Unused")?));
            (
                ints.iter().map(|&i| Key::I(i)).collect(),
                Tensor::from_strings(vec![n + 1], v)?,
            )
        }
        d => return Err(cx.unsupported(d)),
    };
    let mut map: HashMap<Key, usize> = HashMap::with_capacity(n);
    for (i, k) in keys.into_iter().enumerate() {
        map.entry(k).or_insert(i);
    }
    let offs: Vec<usize> = keys_of(cx, x)?
        .iter()
        .map(|k| map.get(k).copied().unwrap_or(n))
        .collect();
    Ok(vec![take(&table, &offs, x.shape().to_vec())?.into()])
}

/// ArrayFeatureExtractor: picks the given indices along the last axis (a 1-D input gives
/// `[1, k]`).
fn array_feature_extractor(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let idx = to_i64s(cx.input(1)?)?;
    if x.rank() == 0 {
        return Err(cx.invalid("ArrayFeatureExtractor input must have rank >= 1"));
    }
    let c = x.shape()[x.rank() - 1];
    let picks: Vec<usize> = idx
        .iter()
        .map(|&i| {
            if i < 0 || i as usize >= c {
                Err(cx.invalid(format!(
                    "ArrayFeatureExtractor index {i} is out of range for a last dim of {c}"
                )))
            } else {
                Ok(i as usize)
            }
        })
        .collect::<KResult<_>>()?;
    let rows = x.len() / c.max(1);
    let mut offs = Vec::with_capacity(rows * picks.len());
    for r in 0..rows {
        offs.extend(picks.iter().map(|&p| r * c + p));
    }
    let shape = if x.rank() == 1 {
        vec![1, picks.len()]
    } else {
        let mut s = x.shape()[..x.rank() - 1].to_vec();
        s.push(picks.len());
        s
    };
    Ok(vec![take(x, &offs, shape)?.into()])
}

/// A numeric tensor as f64 values, or unsupported.
fn numbers(cx: &RunCx, t: &Tensor) -> KResult<Vec<f64>> {
    if t.dtype().is_float() || t.dtype().is_int() {
        to_f64s(t)
    } else {
        Err(cx.unsupported(t.dtype()))
    }
}

/// A tensor of `dtype` from f64 values (float types round, integers truncate).
fn from_f64s(cx: &RunCx, dtype: DataType, shape: Vec<usize>, v: Vec<f64>) -> KResult<Tensor> {
    if dtype.is_float() {
        for_float!(dtype, T => {
            Ok(Tensor::from_vec(shape, v.into_iter().map(T::from_f64).collect::<Vec<T>>())?)
        } else {
            Err(cx.unsupported(dtype))
        })
    } else {
        for_int!(dtype, T => {
            Ok(Tensor::from_vec(shape, v.into_iter().map(|x| x as T).collect::<Vec<T>>())?)
        } else {
            Err(cx.unsupported(dtype))
        })
    }
}

/// Binarizer: 1 where the input exceeds `threshold`, else 0, in the input's type.
fn binarizer(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let th = cx.float("threshold", 0.0)? as f64;
    let v = numbers(cx, x)?;
    let out = v
        .into_iter()
        .map(|a| if a > th { 1.0 } else { 0.0 })
        .collect();
    Ok(vec![
        from_f64s(cx, x.dtype(), x.shape().to_vec(), out)?.into()
    ])
}

/// Rows of a `[N, C]` (or `[C]`, one row) input: (N, C).
fn rows_cols(cx: &RunCx, t: &Tensor) -> KResult<(usize, usize)> {
    match *t.shape() {
        [c] => Ok((1, c)),
        [n, c] => Ok((n, c)),
        ref s => Err(cx.invalid(format!(
            "{} input must have shape [N, C] or [C], got {s:?}",
            cx.op()
        ))),
    }
}

/// Scaler: `(x - offset) * scale`, per column (one value broadcasts), as float.
fn scaler(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let v = numbers(cx, x)?;
    let offset = cx.attr_floats("offset")?.unwrap_or(&[]);
    let scale = cx.attr_floats("scale")?.unwrap_or(&[]);
    let c = x.shape().last().copied().unwrap_or(1).max(1);
    for (name, a) in [("offset", offset), ("scale", scale)] {
        if a.len() > 1 && a.len() != c {
            return Err(cx.invalid(format!(
                "Scaler {name} has {} values for {c} columns",
                a.len()
            )));
        }
    }
    let pick = |a: &[f32], j: usize, d: f32| -> f32 {
        match a.len() {
            0 => d,
            1 => a[0],
            _ => a[j],
        }
    };
    let out: Vec<f32> = v
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let j = i % c;
            (a as f32 - pick(offset, j, 0.0)) * pick(scale, j, 1.0)
        })
        .collect();
    Ok(vec![Tensor::from_vec(x.shape().to_vec(), out)?.into()])
}

/// Normalizer: each row divided by its MAX, L1 or L2 norm, as float.
fn normalizer(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let (n, c) = rows_cols(cx, x)?;
    let v = numbers(cx, x)?;
    let norm = cx.string("norm", "MAX")?;
    let mut out = Vec::with_capacity(v.len());
    for r in 0..n {
        let row = &v[r * c..(r + 1) * c];
        let d = match norm.as_str() {
            "MAX" => row.iter().fold(f64::NEG_INFINITY, |m, &a| m.max(a.abs())),
            "L1" => row.iter().map(|a| a.abs()).sum(),
            "L2" => row.iter().map(|a| a * a).sum::<f64>().sqrt(),
            other => {
                return Err(cx.invalid(format!(
                    "Normalizer norm must be MAX, L1 or L2, got '{other}'"
                )))
            }
        };
        let d = d.max(1e-30);
        out.extend(row.iter().map(|&a| (a / d) as f32));
    }
    Ok(vec![Tensor::from_vec(x.shape().to_vec(), out)?.into()])
}

/// Imputer: replaces `replaced_value_*` (NaN by default for floats) with the per-column
/// imputed value.
fn imputer(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let c = x.shape().last().copied().unwrap_or(1).max(1);
    let (vals, replace): (Vec<f64>, f64) = match cx.attr_floats("imputed_value_floats")? {
        Some(v) if !v.is_empty() => (
            v.iter().map(|&a| a as f64).collect(),
            cx.float("replaced_value_float", 0.0)? as f64,
        ),
        _ => match cx.attr_ints("imputed_value_int64s")? {
            Some(v) if !v.is_empty() => (
                v.iter().map(|&a| a as f64).collect(),
                cx.int("replaced_value_int64", 0)? as f64,
            ),
            _ => {
                return Err(cx.invalid("Imputer needs imputed_value_floats or imputed_value_int64s"))
            }
        },
    };
    if vals.len() != 1 && vals.len() != c {
        return Err(cx.invalid(format!(
            "Imputer has {} imputed values for {c} columns",
            vals.len()
        )));
    }
    let v = numbers(cx, x)?;
    let out: Vec<f64> = v
        .into_iter()
        .enumerate()
        .map(|(i, a)| {
            let hit = if replace.is_nan() {
                a.is_nan()
            } else {
                a == replace
            };
            if hit {
                vals[if vals.len() == 1 { 0 } else { i % c }]
            } else {
                a
            }
        })
        .collect();
    Ok(vec![
        from_f64s(cx, x.dtype(), x.shape().to_vec(), out)?.into()
    ])
}

/// The ONNX-ML approximation of erf⁻¹ used by PROBIT.
fn erf_inv(x: f64) -> f64 {
    let sgn = if x < 0.0 { -1.0 } else { 1.0 };
    let x = (1.0 - x) * (1.0 + x);
    if x == 0.0 {
        return 0.0;
    }
    let log = x.ln();
    let v = 2.0 / (std::f64::consts::PI * 0.147) + 0.5 * log;
    let v2 = 1.0 / 0.147 * log;
    let v3 = -v + (v * v - v2).sqrt();
    sgn * v3.sqrt()
}

/// Applies `post_transform` to rows of width `w` in place.
fn post_transform(cx: &RunCx, name: &str, scores: &mut [f64], w: usize) -> KResult<()> {
    match name {
        "NONE" => {}
        "LOGISTIC" => scores
            .iter_mut()
            .for_each(|s| *s = 1.0 / (1.0 + (-*s).exp())),
        "SOFTMAX" => {
            for row in scores.chunks_mut(w.max(1)) {
                let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let mut sum = 0.0;
                for v in row.iter_mut() {
                    *v = (*v - m).exp();
                    sum += *v;
                }
                row.iter_mut().for_each(|v| *v /= sum);
            }
        }
        "SOFTMAX_ZERO" => {
            for row in scores.chunks_mut(w.max(1)) {
                let m = row.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                let e = (-m).exp();
                let mut sum = 0.0;
                for v in row.iter_mut() {
                    if *v > 1e-7 || *v < -1e-7 {
                        *v = (*v - m).exp();
                    } else {
                        *v *= e;
                    }
                    sum += *v;
                }
                if sum == 0.0 {
                    row.iter_mut().for_each(|v| *v = 0.5);
                } else {
                    row.iter_mut().for_each(|v| *v /= sum);
                }
            }
        }
        "PROBIT" => scores
            .iter_mut()
            .for_each(|s| *s = std::f64::consts::SQRT_2 * erf_inv(*s * 2.0 - 1.0)),
        other => {
            return Err(cx.invalid(format!(
            "post_transform must be NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT, got '{other}'"
        )))
        }
    }
    Ok(())
}

/// LinearRegressor: `x · coefficientsᵀ + intercepts` for `targets` outputs, as float.
fn linear_regressor(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let (n, c) = rows_cols(cx, x)?;
    let v = numbers(cx, x)?;
    let coef = cx.attr_floats("coefficients")?.unwrap_or(&[]);
    let icpt = cx.attr_floats("intercepts")?.unwrap_or(&[]);
    let t = cx.int("targets", 1)?;
    if t < 1 || coef.len() != t as usize * c || (!icpt.is_empty() && icpt.len() != t as usize) {
        return Err(cx.invalid(format!(
            "LinearRegressor needs targets × {c} coefficients and targets intercepts, got targets={t}, {} and {}",
            coef.len(),
            icpt.len()
        )));
    }
    let t = t as usize;
    let mut out = vec![0.0f64; n * t];
    for r in 0..n {
        for k in 0..t {
            let mut s = icpt.get(k).map_or(0.0, |&b| b as f64);
            for j in 0..c {
                s += v[r * c + j] * coef[k * c + j] as f64;
            }
            out[r * t + k] = s;
        }
    }
    post_transform(cx, &cx.string("post_transform", "NONE")?, &mut out, t)?;
    let out: Vec<f32> = out.into_iter().map(|a| a as f32).collect();
    Ok(vec![Tensor::from_vec(vec![n, t], out)?.into()])
}

/// Class labels of a classifier: ints or strings.
enum Labels {
    Ints(Vec<i64>),
    Strings(Vec<Bytes>),
}

impl Labels {
    fn read(cx: &RunCx) -> KResult<Labels> {
        if let Some(v) = cx.attr_ints("classlabels_ints")? {
            return Ok(Labels::Ints(v.to_vec()));
        }
        if let Some(a) = cx.attr("classlabels_strings") {
            return Ok(Labels::Strings(a.strings.clone()));
        }
        Err(cx.invalid(format!(
            "{} needs classlabels_ints or classlabels_strings",
            cx.op()
        )))
    }

    fn len(&self) -> usize {
        match self {
            Labels::Ints(v) => v.len(),
            Labels::Strings(v) => v.len(),
        }
    }

    /// A `[n]` tensor of the labels at `picks`.
    fn tensor(&self, picks: &[usize]) -> KResult<Tensor> {
        Ok(match self {
            Labels::Ints(v) => Tensor::from_vec(
                vec![picks.len()],
                picks.iter().map(|&i| v[i]).collect::<Vec<_>>(),
            )?,
            Labels::Strings(v) => Tensor::from_strings(
                vec![picks.len()],
                picks.iter().map(|&i| v[i].clone()).collect(),
            )?,
        })
    }
}

/// Index of the largest value (first on ties; the first NaN wins, as numpy's argmax).
fn argmax(row: &[f64]) -> usize {
    if let Some(i) = row.iter().position(|v| v.is_nan()) {
        return i;
    }
    let mut best = 0;
    for (i, &v) in row.iter().enumerate() {
        if v > row[best] {
            best = i;
        }
    }
    best
}

/// LinearClassifier: per-class linear scores (post-transformed) and the best class label.
fn linear_classifier(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let (n, c) = rows_cols(cx, x)?;
    let v = numbers(cx, x)?;
    let coef = cx.attr_floats("coefficients")?.unwrap_or(&[]);
    let icpt = cx.attr_floats("intercepts")?.unwrap_or(&[]);
    let labels = Labels::read(cx)?;
    if c == 0 || coef.len() % c != 0 {
        return Err(cx.invalid(format!(
            "LinearClassifier has {} coefficients for {c} features",
            coef.len()
        )));
    }
    let k = coef.len() / c;
    if !icpt.is_empty() && icpt.len() != k {
        return Err(cx.invalid(format!(
            "LinearClassifier has {} intercepts for {k} classes",
            icpt.len()
        )));
    }
    let mut scores = vec![0.0f64; n * k];
    for r in 0..n {
        for q in 0..k {
            let mut s = icpt.get(q).map_or(0.0, |&b| b as f64);
            for j in 0..c {
                s += v[r * c + j] * coef[q * c + j] as f64;
            }
            scores[r * k + q] = s;
        }
    }
    let (mut scores, w) = if k == 1 && labels.len() == 2 {
        (scores.iter().flat_map(|&s| [-s, s]).collect::<Vec<_>>(), 2)
    } else {
        (scores, k)
    };
    let pt = cx.string("post_transform", "NONE")?;
    post_transform(cx, &pt, &mut scores, w)?;
    let label = if w > 1 {
        let picks: Vec<usize> = scores.chunks(w).map(argmax).collect();
        if picks.iter().any(|&p| p >= labels.len()) {
            return Err(cx.invalid(format!(
                "LinearClassifier has {w} classes but {} labels",
                labels.len()
            )));
        }
        labels.tensor(&picks)?
    } else {
        let th = if pt == "NONE" { 0.0 } else { 0.5 };
        match &labels {
            Labels::Ints(l) => Tensor::from_vec(
                vec![n],
                scores
                    .iter()
                    .map(|&s| {
                        if s >= th {
                            l.first().copied().unwrap_or(1)
                        } else {
                            0
                        }
                    })
                    .collect::<Vec<_>>(),
            )?,
            Labels::Strings(_) => return Err(cx.unsupported("one-class string labels")),
        }
    };
    let z: Vec<f32> = scores.into_iter().map(|a| a as f32).collect();
    Ok(vec![label.into(), Tensor::from_vec(vec![n, w], z)?.into()])
}

/// A tensor attribute (or its plain list twin `name` as floats) as f64 values.
fn floats_attr(cx: &RunCx, name: &str) -> KResult<Option<Vec<f64>>> {
    if let Some(t) = cx.attr_t(&format!("{name}_as_tensor"))? {
        return Ok(Some(to_f64s(&t)?));
    }
    let is_tensor = cx.attr(name).is_some_and(|a| {
        a.r#type == Some(onnx_proto::attribute_proto::AttributeType::Tensor as i32)
    });
    if is_tensor {
        if let Some(t) = cx.attr_t(name)? {
            return Ok(Some(to_f64s(&t)?));
        }
    }
    Ok(cx
        .attr_floats(name)?
        .map(|v| v.iter().map(|&a| a as f64).collect()))
}

/// An ints attribute, required.
fn ints<'a>(cx: &RunCx<'a>, name: &str) -> KResult<&'a [i64]> {
    cx.attr_ints(name)?
        .ok_or_else(|| cx.invalid(format!("{} needs the '{name}' attribute", cx.op())))
}

/// A decision-node comparison.
#[derive(Clone, Copy, PartialEq)]
enum Cmp {
    Leq,
    Lt,
    Gte,
    Gt,
    Eq,
    Neq,
    Member,
}

impl Cmp {
    fn from_code(c: i64) -> Option<Cmp> {
        Some(match c {
            0 => Cmp::Leq,
            1 => Cmp::Lt,
            2 => Cmp::Gte,
            3 => Cmp::Gt,
            4 => Cmp::Eq,
            5 => Cmp::Neq,
            6 => Cmp::Member,
            _ => return None,
        })
    }

    fn test(self, x: f64, th: f64, set: &[f64]) -> bool {
        match self {
            Cmp::Leq => x <= th,
            Cmp::Lt => x < th,
            Cmp::Gte => x >= th,
            Cmp::Gt => x > th,
            Cmp::Eq => x == th,
            Cmp::Neq => x != th,
            Cmp::Member => set.contains(&x),
        }
    }
}

/// TreeEnsemble (v5): sums (or averages, min, max) leaf weights per target over the trees.
fn tree_ensemble(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let (n, c) = rows_cols(cx, x)?;
    let xv = for_float!(x.dtype(), T => {
        x.to_vec::<T>()?.into_iter().map(FloatConv::to_f64).collect::<Vec<f64>>()
    } else {
        return Err(cx.unsupported(x.dtype()))
    });
    let splits = floats_attr(cx, "nodes_splits")?.unwrap_or_default();
    let feats = ints(cx, "nodes_featureids")?;
    let modes: Vec<i64> = match cx.attr_t("nodes_modes")? {
        Some(t) => to_i64s(&t)?,
        None => return Err(cx.invalid("TreeEnsemble needs the 'nodes_modes' attribute")),
    };
    let tids = ints(cx, "nodes_truenodeids")?;
    let fids = ints(cx, "nodes_falsenodeids")?;
    let tleaf = ints(cx, "nodes_trueleafs")?;
    let fleaf = ints(cx, "nodes_falseleafs")?;
    let leaf_t = ints(cx, "leaf_targetids")?;
    let leaf_w = floats_attr(cx, "leaf_weights")?.unwrap_or_default();
    let roots = ints(cx, "tree_roots")?;
    let missing = cx
        .attr_ints("nodes_missing_value_tracks_true")?
        .unwrap_or(&[]);
    let members = floats_attr(cx, "membership_values")?.unwrap_or_default();
    let n_targets = cx.int("n_targets", 0)?;
    let agg = cx.int("aggregate_function", 1)?;
    let pt = cx.int("post_transform", 0)?;
    let nn = modes.len();
    if [
        splits.len(),
        feats.len(),
        tids.len(),
        fids.len(),
        tleaf.len(),
        fleaf.len(),
    ]
    .iter()
    .any(|&l| l != nn)
        || leaf_t.len() != leaf_w.len()
        || (!missing.is_empty() && missing.len() != nn)
        || n_targets < 1
    {
        return Err(cx.invalid(
            "TreeEnsemble node attributes must all have one entry per node, leaf attributes one per leaf, and n_targets >= 1",
        ));
    }
    let cmps: Vec<Cmp> = modes
        .iter()
        .map(|&m| {
            Cmp::from_code(m)
                .ok_or_else(|| cx.invalid(format!("TreeEnsemble node mode {m} is not 0..=6")))
        })
        .collect::<KResult<_>>()?;
    // Membership sets in node order, NaN-delimited.
    let mut sets: Vec<Vec<f64>> = vec![Vec::new(); nn];
    let mut it = members.iter();
    for (i, m) in cmps.iter().enumerate() {
        if *m == Cmp::Member {
            for &v in it.by_ref() {
                if v.is_nan() {
                    break;
                }
                sets[i].push(v);
            }
        }
    }
    let nt = n_targets as usize;
    for &f in feats {
        if f < 0 || f as usize >= c {
            return Err(cx.invalid(format!(
                "TreeEnsemble feature id {f} is out of range for {c} features"
            )));
        }
    }
    for &t in leaf_t {
        if t < 0 || t as usize >= nt {
            return Err(cx.invalid(format!(
                "TreeEnsemble leaf target id {t} is out of range for {nt} targets"
            )));
        }
    }
    let (init, combine): (f64, fn(f64, f64) -> f64) = match agg {
        0 | 1 => (0.0, |a, b| a + b),
        2 => (f64::MAX, f64::min),
        3 => (f64::MIN, f64::max),
        a => return Err(cx.invalid(format!("TreeEnsemble aggregate_function {a} is not 0..=3"))),
    };
    // Targets no leaf reaches keep the extreme of the input's float type, as in the reference.
    let init = match (agg, x.dtype()) {
        (2, DataType::Float) => f32::MAX as f64,
        (3, DataType::Float) => f32::MIN as f64,
        _ => init,
    };
    let mut out = vec![init; n * nt];
    for r in 0..n {
        let row = &xv[r * c..(r + 1) * c];
        for &root in roots {
            if root < 0 || root as usize >= nn {
                return Err(cx.invalid(format!("TreeEnsemble tree root {root} is not a node")));
            }
            let mut node = root as usize;
            let mut is_leaf = tleaf[node] != 0 && fleaf[node] != 0 && tids[node] == fids[node];
            let mut idx = if is_leaf { tids[node] } else { node as i64 };
            let mut steps = 0usize;
            while !is_leaf {
                steps += 1;
                if steps > nn + 1 {
                    return Err(cx.invalid("TreeEnsemble trees contain a cycle"));
                }
                let xvv = row[feats[node] as usize];
                let go_true = (xvv.is_nan() && missing.get(node).copied().unwrap_or(0) != 0)
                    || cmps[node].test(xvv, splits[node], &sets[node]);
                let (next, leaf) = if go_true {
                    (tids[node], tleaf[node] != 0)
                } else {
                    (fids[node], fleaf[node] != 0)
                };
                is_leaf = leaf;
                idx = next;
                if !leaf {
                    if next < 0 || next as usize >= nn {
                        return Err(
                            cx.invalid(format!("TreeEnsemble node id {next} is not a node"))
                        );
                    }
                    node = next as usize;
                }
            }
            if idx < 0 || idx as usize >= leaf_w.len() {
                return Err(cx.invalid(format!("TreeEnsemble leaf id {idx} is not a leaf")));
            }
            let l = idx as usize;
            let slot = &mut out[r * nt + leaf_t[l] as usize];
            let w = if agg == 0 {
                leaf_w[l] / roots.len() as f64
            } else {
                leaf_w[l]
            };
            *slot = combine(*slot, w);
        }
    }
    let name = match pt {
        0 => "NONE",
        1 => "SOFTMAX",
        2 => "LOGISTIC",
        3 => "SOFTMAX_ZERO",
        4 => "PROBIT",
        p => return Err(cx.invalid(format!("TreeEnsemble post_transform {p} is not 0..=4"))),
    };
    post_transform(cx, name, &mut out, nt)?;
    Ok(vec![from_f64s(cx, x.dtype(), vec![n, nt], out)?.into()])
}

/// The trees of a TreeEnsembleRegressor/Classifier (v1/v3 attribute layout): nodes keyed by
/// (tree id, node id), with string modes.
struct Forest {
    /// Root node index per tree, in ascending tree id order.
    roots: Vec<usize>,
    index: HashMap<(i64, i64), usize>,
    tree: Vec<i64>,
    node: Vec<i64>,
    feature: Vec<usize>,
    value: Vec<f64>,
    /// `None` for a leaf.
    rule: Vec<Option<Cmp>>,
    true_id: Vec<i64>,
    false_id: Vec<i64>,
    missing_true: Vec<bool>,
}

impl Forest {
    fn read(cx: &RunCx, n_features: usize) -> KResult<Forest> {
        let tree = ints(cx, "nodes_treeids")?.to_vec();
        let node = ints(cx, "nodes_nodeids")?.to_vec();
        let feats = ints(cx, "nodes_featureids")?;
        let value = floats_attr(cx, "nodes_values")?.unwrap_or_default();
        let modes = cx
            .attr_strings("nodes_modes")?
            .ok_or_else(|| cx.invalid(format!("{} needs the 'nodes_modes' attribute", cx.op())))?;
        let true_id = ints(cx, "nodes_truenodeids")?.to_vec();
        let false_id = ints(cx, "nodes_falsenodeids")?.to_vec();
        let missing = cx
            .attr_ints("nodes_missing_value_tracks_true")?
            .unwrap_or(&[]);
        let n = tree.len();
        if [
            node.len(),
            feats.len(),
            modes.len(),
            true_id.len(),
            false_id.len(),
        ]
        .iter()
        .any(|&l| l != n)
            || (!value.is_empty() && value.len() != n)
            || (!missing.is_empty() && missing.len() != n)
        {
            return Err(cx.invalid(format!(
                "{} node attributes must all have one entry per node ({n})",
                cx.op()
            )));
        }
        let rule: Vec<Option<Cmp>> = modes
            .iter()
            .map(|m| match m.as_str() {
                "LEAF" => Ok(None),
                "BRANCH_LEQ" => Ok(Some(Cmp::Leq)),
                "BRANCH_LT" => Ok(Some(Cmp::Lt)),
                "BRANCH_GTE" => Ok(Some(Cmp::Gte)),
                "BRANCH_GT" => Ok(Some(Cmp::Gt)),
                "BRANCH_EQ" => Ok(Some(Cmp::Eq)),
                "BRANCH_NEQ" => Ok(Some(Cmp::Neq)),
                other => Err(cx.invalid(format!("{} node mode '{other}' is unknown", cx.op()))),
            })
            .collect::<KResult<_>>()?;
        let mut feature = Vec::with_capacity(n);
        for (i, &f) in feats.iter().enumerate() {
            if rule[i].is_some() && (f < 0 || f as usize >= n_features) {
                return Err(cx.invalid(format!(
                    "{} feature id {f} is out of range for {n_features} features",
                    cx.op()
                )));
            }
            feature.push(f.max(0) as usize);
        }
        let mut index = HashMap::with_capacity(n);
        let mut root_of: std::collections::BTreeMap<i64, usize> = Default::default();
        for i in 0..n {
            index.entry((tree[i], node[i])).or_insert(i);
            root_of.entry(tree[i]).or_insert(i);
        }
        Ok(Forest {
            roots: root_of.into_values().collect(),
            index,
            value: if value.is_empty() {
                vec![0.0; n]
            } else {
                value
            },
            missing_true: (0..n)
                .map(|i| missing.get(i).is_some_and(|&m| m >= 1))
                .collect(),
            tree,
            node,
            feature,
            rule,
            true_id,
            false_id,
        })
    }

    /// The leaf node index `row` reaches in the tree rooted at `root`.
    fn leaf(&self, cx: &RunCx, root: usize, row: &[f64]) -> KResult<usize> {
        let mut i = root;
        let mut steps = 0;
        while let Some(cmp) = self.rule[i] {
            steps += 1;
            if steps > self.rule.len() {
                return Err(cx.invalid(format!("{} trees contain a cycle", cx.op())));
            }
            let x = row[self.feature[i]];
            let go = if x.is_nan() {
                self.missing_true[i]
            } else {
                cmp.test(x, self.value[i], &[])
            };
            let nid = if go {
                self.true_id[i]
            } else {
                self.false_id[i]
            };
            i = *self.index.get(&(self.tree[i], nid)).ok_or_else(|| {
                cx.invalid(format!(
                    "{}: tree {} has no node {nid}",
                    cx.op(),
                    self.tree[i]
                ))
            })?;
        }
        Ok(i)
    }
}

/// Rows of a float tensor as f64 (integers converted), with (N, C).
fn feature_rows(cx: &RunCx, x: &Tensor) -> KResult<(usize, usize, Vec<f64>)> {
    let (n, c) = rows_cols(cx, x)?;
    Ok((n, c, numbers(cx, x)?))
}

/// Entry indices per (tree id, node id) leaf.
type LeafIndex = HashMap<(i64, i64), Vec<usize>>;

/// For each (tree, node) leaf, the indices of its target/class entries; and the entries'
/// target/class ids and weights.
fn leaf_entries(cx: &RunCx, prefix: &str) -> KResult<(LeafIndex, Vec<i64>, Vec<f64>)> {
    let trees = ints(cx, &format!("{prefix}_treeids"))?;
    let nodes = ints(cx, &format!("{prefix}_nodeids"))?;
    let ids = ints(cx, &format!("{prefix}_ids"))?.to_vec();
    let weights = floats_attr(cx, &format!("{prefix}_weights"))?.unwrap_or_default();
    if trees.len() != nodes.len() || ids.len() != nodes.len() || weights.len() != nodes.len() {
        return Err(cx.invalid(format!(
            "{} {prefix}_treeids/nodeids/ids/weights must have equal lengths",
            cx.op()
        )));
    }
    let mut m: HashMap<(i64, i64), Vec<usize>> = HashMap::new();
    for (i, (&t, &n)) in trees.iter().zip(nodes).enumerate() {
        m.entry((t, n)).or_default().push(i);
    }
    Ok((m, ids, weights))
}

/// TreeEnsembleRegressor: per-target aggregate of leaf weights over the trees, plus
/// `base_values`, post-transformed; float output `[N, n_targets]`.
fn tree_ensemble_regressor(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let (n, c, xv) = feature_rows(cx, x)?;
    let forest = Forest::read(cx, c)?;
    let (entries, ids, weights) = leaf_entries(cx, "target")?;
    let nt = cx.int("n_targets", 1)?;
    if nt < 1 || ids.iter().any(|&t| t < 0 || t >= nt) {
        return Err(cx.invalid(format!(
            "TreeEnsembleRegressor target ids must be in 0..{nt} (n_targets)"
        )));
    }
    let nt = nt as usize;
    let agg = cx.string("aggregate_function", "SUM")?;
    let base = floats_attr(cx, "base_values")?.unwrap_or_default();
    if !base.is_empty() && base.len() != nt {
        return Err(cx.invalid(format!(
            "TreeEnsembleRegressor has {} base_values for {nt} targets",
            base.len()
        )));
    }
    let init = match agg.as_str() {
        "SUM" | "AVERAGE" => 0.0,
        "MIN" => f32::MAX as f64,
        "MAX" => f32::MIN as f64,
        other => {
            return Err(cx.invalid(format!(
                "aggregate_function must be SUM, AVERAGE, MIN or MAX, got '{other}'"
            )))
        }
    };
    let mut out = vec![init; n * nt];
    for r in 0..n {
        let row = &xv[r * c..(r + 1) * c];
        for &root in &forest.roots {
            let leaf = forest.leaf(cx, root, row)?;
            let Some(its) = entries.get(&(forest.tree[leaf], forest.node[leaf])) else {
                continue;
            };
            for &it in its {
                let slot = &mut out[r * nt + ids[it] as usize];
                let w = weights[it];
                *slot = match agg.as_str() {
                    "MIN" => slot.min(w),
                    "MAX" => slot.max(w),
                    _ => *slot + w,
                };
            }
        }
    }
    if agg == "AVERAGE" && !forest.roots.is_empty() {
        out.iter_mut().for_each(|v| *v /= forest.roots.len() as f64);
    }
    if !base.is_empty() {
        for (i, v) in out.iter_mut().enumerate() {
            *v += base[i % nt];
        }
    }
    post_transform(cx, &cx.string("post_transform", "NONE")?, &mut out, nt)?;
    let out: Vec<f32> = out.into_iter().map(|v| v as f32).collect();
    Ok(vec![Tensor::from_vec(vec![n, nt], out)?.into()])
}

/// TreeEnsembleClassifier: per-class sums of leaf weights over the trees (plus
/// `base_values`), post-transformed, and the best class label; binary ensembles (one class
/// id) score the second class and derive the first as the reference does.
fn tree_ensemble_classifier(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let (n, c, xv) = feature_rows(cx, x)?;
    let forest = Forest::read(cx, c)?;
    let (entries, ids, weights) = leaf_entries(cx, "class")?;
    let labels = if let Some(v) = cx.attr_ints("classlabels_int64s")? {
        Labels::Ints(v.to_vec())
    } else if let Some(a) = cx.attr("classlabels_strings") {
        Labels::Strings(a.strings.clone())
    } else {
        return Err(
            cx.invalid("TreeEnsembleClassifier needs classlabels_int64s or classlabels_strings")
        );
    };
    let k = labels.len();
    if k == 0 || ids.iter().any(|&t| t < 0 || t as usize >= k) {
        return Err(cx.invalid(format!(
            "TreeEnsembleClassifier class ids must be in 0..{k} (the number of labels)"
        )));
    }
    let base = floats_attr(cx, "base_values")?.unwrap_or_default();
    if !base.is_empty() && base.len() != k {
        return Err(cx.invalid(format!(
            "TreeEnsembleClassifier has {} base_values for {k} classes",
            base.len()
        )));
    }
    let mut res = vec![0.0f64; n * k];
    for r in 0..n {
        if !base.is_empty() {
            res[r * k..(r + 1) * k].copy_from_slice(&base);
        }
        let row = &xv[r * c..(r + 1) * c];
        for &root in &forest.roots {
            let leaf = forest.leaf(cx, root, row)?;
            if let Some(its) = entries.get(&(forest.tree[leaf], forest.node[leaf])) {
                for &it in its {
                    res[r * k + ids[it] as usize] += weights[it];
                }
            }
        }
    }
    let pt = cx.string("post_transform", "NONE")?;
    let binary = ids.iter().all(|&i| i == ids[0]) && !ids.is_empty();
    let (mut scores, w) = if binary {
        let w = k.max(2);
        let mut s = vec![0.0f64; n * w];
        for r in 0..n {
            let v = if k == 1 { res[r] } else { res[r * k] };
            // Columns past the first two keep their scores (k > 2 labels).
            for q in 2..k {
                s[r * w + q] = res[r * k + q];
            }
            s[r * w + 1] = v;
            s[r * w] = if matches!(pt.as_str(), "NONE" | "PROBIT") {
                1.0 - v
            } else {
                -v
            };
        }
        (s, w)
    } else {
        (res, k)
    };
    post_transform(cx, &pt, &mut scores, w)?;
    let picks: Vec<usize> = scores.chunks(w).map(argmax).collect();
    let label = match &labels {
        Labels::Ints(l) if l.len() == 1 => {
            if l[0] != 1 {
                return Err(cx.unsupported("a single int64 class label other than 1"));
            }
            Tensor::from_vec(
                vec![n],
                picks
                    .iter()
                    .map(|&p| if p == 1 { 1i64 } else { 0 })
                    .collect::<Vec<_>>(),
            )?
        }
        Labels::Strings(l) if l.len() == 1 => {
            return Err(cx.unsupported("a single string class label"));
        }
        l => l.tensor(&picks)?,
    };
    let z: Vec<f32> = scores.into_iter().map(|v| v as f32).collect();
    Ok(vec![label.into(), Tensor::from_vec(vec![n, w], z)?.into()])
}

/// OneHotEncoder: one float one-hot vector per element over `cats_int64s` (numbers are
/// truncated to integers) or `cats_strings`; with `zeros` = 0 an unknown value is an error.
fn one_hot_encoder(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let zeros = cx.int("zeros", 1)? != 0;
    let mut map: HashMap<Key, usize> = HashMap::new();
    let cats = if x.dtype() == DataType::String {
        let a = cx
            .attr("cats_strings")
            .ok_or_else(|| cx.invalid("OneHotEncoder on strings needs 'cats_strings'"))?;
        for (i, c) in a.strings.iter().enumerate() {
            map.entry(Key::S(c.clone())).or_insert(i);
        }
        a.strings.len()
    } else {
        let c = cx
            .attr_ints("cats_int64s")?
            .ok_or_else(|| cx.invalid("OneHotEncoder on numbers needs 'cats_int64s'"))?;
        for (i, &v) in c.iter().enumerate() {
            map.entry(Key::I(v)).or_insert(i);
        }
        c.len()
    };
    let keys: Vec<Key> = match x.dtype() {
        DataType::String => keys_of(cx, x)?,
        DataType::Int64 | DataType::Int32 => to_i64s(x)?.into_iter().map(Key::I).collect(),
        DataType::Float | DataType::Double => {
            to_f64s(x)?.into_iter().map(|v| Key::I(v as i64)).collect()
        }
        d => return Err(cx.unsupported(d)),
    };
    let mut out = vec![0f32; keys.len() * cats];
    for (i, k) in keys.iter().enumerate() {
        match map.get(k) {
            Some(&j) => out[i * cats + j] = 1.0,
            None if zeros => {}
            None => {
                return Err(cx.invalid(format!(
                    "OneHotEncoder: element {i} is in no category (and zeros = 0)"
                )))
            }
        }
    }
    let mut shape = x.shape().to_vec();
    shape.push(cats);
    Ok(vec![Tensor::from_vec(shape, out)?.into()])
}

/// FeatureVectorizer: concatenates its `[N, C]` (or `[N]`) inputs column-wise, each cut or
/// zero-padded to its `inputdimensions` entry, as float.
fn feature_vectorizer(cx: &RunCx) -> KResult<Vec<Value>> {
    let dims = cx.attr_ints("inputdimensions")?.unwrap_or(&[]);
    if dims.len() != cx.num_inputs() || dims.iter().any(|&d| d < 0) {
        return Err(cx.invalid(format!(
            "FeatureVectorizer needs one non-negative inputdimensions entry per input ({}), got {dims:?}",
            cx.num_inputs()
        )));
    }
    let total: usize = dims.iter().map(|&d| d as usize).sum();
    let mut rows: Option<usize> = None;
    let mut parts = Vec::with_capacity(dims.len());
    for (i, &d) in dims.iter().enumerate() {
        let t = cx.input(i)?;
        let (n, c) = match *t.shape() {
            [n] => (n, 1),
            [n, c] => (n, c),
            ref s => {
                return Err(cx.invalid(format!(
                    "FeatureVectorizer input {i} must be [N] or [N, C], got {s:?}"
                )))
            }
        };
        if rows.is_some_and(|r| r != n) {
            return Err(cx.invalid("FeatureVectorizer inputs disagree on N"));
        }
        rows = Some(n);
        parts.push((numbers(cx, t)?, c, d as usize));
    }
    let n = rows.unwrap_or(0);
    let mut out = vec![0f32; n * total];
    let mut col = 0;
    for (v, c, d) in parts {
        for r in 0..n {
            for j in 0..d.min(c) {
                out[r * total + col + j] = v[r * c + j] as f32;
            }
        }
        col += d;
    }
    Ok(vec![Tensor::from_vec(vec![n, total], out)?.into()])
}

/// The SVM kernel function.
fn svm_kernel(kind: &str, a: &[f64], b: &[f64], gamma: f64, coef0: f64, degree: i32) -> f64 {
    let dot = || a.iter().zip(b).map(|(x, y)| x * y).sum::<f64>();
    match kind {
        "POLY" => (dot() * gamma + coef0).powi(degree),
        "SIGMOID" => (dot() * gamma + coef0).tanh(),
        "RBF" => (-gamma * a.iter().zip(b).map(|(x, y)| (x - y) * (x - y)).sum::<f64>()).exp(),
        _ => dot(),
    }
}

/// SVMRegressor: `Σ coefficient·K(x, support vector) + rho` (or the linear form without
/// support vectors); `one_class` gives ±1.
fn svm_regressor(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let (n, c, xv) = feature_rows(cx, x)?;
    let coef: Vec<f64> = floats_attr(cx, "coefficients")?.unwrap_or_default();
    let rho = floats_attr(cx, "rho")?.unwrap_or_default();
    let params = floats_attr(cx, "kernel_params")?.unwrap_or_default();
    let kind = cx.string("kernel_type", "LINEAR")?;
    if !matches!(kind.as_str(), "LINEAR" | "POLY" | "RBF" | "SIGMOID") {
        return Err(cx.invalid(format!("SVMRegressor kernel_type '{kind}' is unknown")));
    }
    let pt = cx.string("post_transform", "NONE")?;
    if pt != "NONE" {
        return Err(cx.unsupported(format!("post_transform {pt}")));
    }
    let one_class = cx.int("one_class", 0)? != 0;
    let n_sup = cx.int("n_supports", 0)?;
    let sv = floats_attr(cx, "support_vectors")?.unwrap_or_default();
    let (gamma, coef0, degree) = match params.as_slice() {
        [g, c0, d, ..] => (*g, *c0, *d as i32),
        _ => (0.0, 0.0, 0),
    };
    let b = rho.first().copied().unwrap_or(0.0);
    if n_sup < 0
        || (n_sup > 0 && (sv.len() != n_sup as usize * c || coef.len() < n_sup as usize))
        || (n_sup == 0 && coef.len() != c)
    {
        return Err(cx.invalid(format!(
            "SVMRegressor needs n_supports × {c} support vector values and n_supports coefficients (or {c} linear coefficients)"
        )));
    }
    let mut out = Vec::with_capacity(n);
    for r in 0..n {
        let row = &xv[r * c..(r + 1) * c];
        let s = if n_sup > 0 {
            (0..n_sup as usize)
                .map(|j| {
                    coef[j] * svm_kernel(&kind, row, &sv[j * c..(j + 1) * c], gamma, coef0, degree)
                })
                .sum::<f64>()
                + b
        } else {
            svm_kernel("LINEAR", row, &coef, 0.0, 0.0, 0) + b
        };
        out.push(if one_class {
            if s > 0.0 {
                1.0
            } else {
                -1.0
            }
        } else {
            s as f32
        });
    }
    Ok(vec![Tensor::from_vec(vec![n, 1], out)?.into()])
}

/// libsvm's pairwise-coupling estimate of class probabilities from pairwise ones `r` (as
/// libsvm and onnxruntime compute it; the onnx reference fills the upper triangle of Q with one
/// dot product instead, which we do not copy).
fn multiclass_probability(k: usize, r: &[f64]) -> Vec<f64> {
    let max_iter = 100.max(k);
    let mut q = vec![0.0f64; k * k];
    let mut qp = vec![0.0f64; k];
    let mut p = vec![1.0 / k as f64; k];
    let eps = 0.005 / k as f64;
    for t in 0..k {
        q[t * k + t] = (0..t).map(|j| r[j * k + t] * r[j * k + t]).sum();
        for j in 0..t {
            q[t * k + j] = q[j * k + t];
        }
        q[t * k + t] += (t + 1..k).map(|j| r[j * k + t] * r[j * k + t]).sum::<f64>();
        for j in t + 1..k {
            q[t * k + j] = -r[j * k + t] * r[t * k + j];
        }
    }
    for _ in 0..max_iter {
        for t in 0..k {
            qp[t] = (0..k).map(|j| q[t * k + j] * p[j]).sum();
        }
        let mut pqp: f64 = (0..k).map(|t| p[t] * qp[t]).sum();
        let max_error = (0..k).map(|t| (qp[t] - pqp).abs()).fold(0.0, f64::max);
        if max_error < eps {
            break;
        }
        for t in 0..k {
            let diff = (-qp[t] + pqp) / q[t * k + t];
            p[t] += diff;
            pqp =
                (pqp + diff * (diff * q[t * k + t] + 2.0 * qp[t])) / ((1.0 + diff) * (1.0 + diff));
            for v in p.iter_mut() {
                *v /= 1.0 + diff;
            }
            for j in 0..k {
                qp[j] = (qp[j] + diff * q[t * k + j]) / (1.0 + diff);
            }
        }
    }
    p
}

/// `1 / (1 + e^-v)`, computed stably.
fn logistic(v: f64) -> f64 {
    let e = 1.0 / (1.0 + (-v.abs()).exp());
    if v < 0.0 {
        1.0 - e
    } else {
        e
    }
}

/// SVMClassifier: one-vs-one SVC voting (optionally Platt-scaled probabilities) or linear
/// scores, labels and post-transformed scores as the ONNX reference computes them.
fn svm_classifier(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let (n, c, xv) = feature_rows(cx, x)?;
    let int_labels = cx.attr_ints("classlabels_ints")?.map(|v| v.to_vec());
    let str_labels = cx.attr("classlabels_strings").map(|a| a.strings.clone());
    let n_labels = int_labels
        .as_ref()
        .map(Vec::len)
        .or(str_labels.as_ref().map(Vec::len))
        .unwrap_or(0);
    let k = n_labels.max(1);
    let coef = floats_attr(cx, "coefficients")?.unwrap_or_default();
    let rho = floats_attr(cx, "rho")?.unwrap_or_default();
    let prob_a = floats_attr(cx, "prob_a")?.unwrap_or_default();
    let prob_b = floats_attr(cx, "prob_b")?.unwrap_or_default();
    let params = floats_attr(cx, "kernel_params")?.unwrap_or_default();
    let sv = floats_attr(cx, "support_vectors")?.unwrap_or_default();
    let per_class = cx.attr_ints("vectors_per_class")?.unwrap_or(&[]);
    let kind = cx.string("kernel_type", "LINEAR")?;
    let pt = cx.string("post_transform", "NONE")?;
    if !matches!(kind.as_str(), "LINEAR" | "POLY" | "RBF" | "SIGMOID") {
        return Err(cx.invalid(format!("SVMClassifier kernel_type '{kind}' is unknown")));
    }
    let (gamma, coef0, degree) = match params.as_slice() {
        [g, c0, d, ..] => (*g, *c0, *d as i32),
        _ => (0.0, 0.0, 0),
    };
    if rho.is_empty() || coef.is_empty() {
        return Err(cx.invalid("SVMClassifier needs coefficients and rho"));
    }
    let mut starts = Vec::with_capacity(per_class.len());
    let mut n_vec = 0usize;
    for &v in per_class {
        if v < 0 {
            return Err(cx.invalid("SVMClassifier vectors_per_class must be >= 0"));
        }
        starts.push(n_vec);
        n_vec += v as usize;
    }
    let svc = n_vec > 0;
    let pairs = k * (k - 1) / 2;
    if svc {
        if per_class.len() != k
            || sv.len() != n_vec * c
            || coef.len() != (k - 1) * n_vec
            || rho.len() < pairs
        {
            return Err(cx.invalid(format!(
                "SVMClassifier attributes do not fit {k} classes, {n_vec} support vectors of {c} features"
            )));
        }
        if !prob_a.is_empty() && (prob_a.len() < pairs || prob_b.len() < pairs) {
            return Err(cx.invalid("SVMClassifier prob_a/prob_b need one entry per class pair"));
        }
    } else if coef.len() != k * c {
        return Err(cx.invalid(format!(
            "SVMClassifier (linear) needs {k} × {c} coefficients, got {}",
            coef.len()
        )));
    }
    let all_positive = coef.iter().all(|&v| v >= 0.0);
    let has_proba = svc && !prob_a.is_empty();
    let mut labels: Vec<i64> = Vec::with_capacity(n);
    let mut all_scores: Vec<f64> = Vec::new();
    let mut width = 0;
    let mut kernels = vec![0.0f64; n_vec];
    for r in 0..n {
        let row = &xv[r * c..(r + 1) * c];
        let (votes, raw): (Option<Vec<f64>>, Vec<f64>) = if svc {
            for (j, kv) in kernels.iter_mut().enumerate() {
                *kv = svm_kernel(&kind, row, &sv[j * c..(j + 1) * c], gamma, coef0, degree);
            }
            let mut votes = vec![0.0f64; k];
            let mut scores = Vec::with_capacity(pairs);
            let mut e = 0;
            for i in 0..k {
                let (si, ci) = (starts[i], per_class[i] as usize);
                for j in i + 1..k {
                    let (sj, cj) = (starts[j], per_class[j] as usize);
                    let s1: f64 = (0..ci)
                        .map(|t| coef[(j - 1) * n_vec + si + t] * kernels[si + t])
                        .sum();
                    let s2: f64 = (0..cj)
                        .map(|t| coef[i * n_vec + sj + t] * kernels[sj + t])
                        .sum();
                    let s = rho[e] + s1 + s2;
                    scores.push(s);
                    if s > 0.0 {
                        votes[i] += 1.0;
                    } else {
                        votes[j] += 1.0;
                    }
                    e += 1;
                }
            }
            (Some(votes), scores)
        } else {
            let scores = (0..k)
                .map(|j| rho[0] + svm_kernel("LINEAR", row, &coef[j * c..(j + 1) * c], 0.0, 0.0, 0))
                .collect();
            (None, scores)
        };
        let scores = if has_proba {
            let mut p2 = vec![0.0f64; k * k];
            let mut e = 0;
            for i in 0..k {
                for j in i + 1..k {
                    let v1 = 1.0 - logistic(raw[e] * prob_a[e] + prob_b[e]);
                    let v2 = v1.clamp(1e-7, 1.0 - 1e-7);
                    p2[i * k + j] = v2;
                    p2[j * k + i] = 1.0 - v2;
                    e += 1;
                }
            }
            multiclass_probability(k, &p2)
        } else {
            raw
        };
        let basis = votes.as_deref().unwrap_or(&scores);
        let max_class = if basis.is_empty() { 0 } else { argmax(basis) };
        let max_weight = basis.get(max_class).copied().unwrap_or(0.0);
        let mut add_second = -1;
        let label: i64 = if rho.len() == 1 {
            if n_labels == 2 {
                add_second = 2;
                let idx = if !has_proba && all_positive && max_weight >= 0.5 {
                    1
                } else {
                    max_class
                };
                match &int_labels {
                    Some(l) => l[idx],
                    None => idx as i64,
                }
            } else if max_weight > 0.0 {
                1
            } else {
                0
            }
        } else {
            match &int_labels {
                Some(l) if !l.is_empty() => *l.get(max_class).ok_or_else(|| {
                    cx.invalid(format!("SVMClassifier class {max_class} has no label"))
                })?,
                _ => max_class as i64,
            }
        };
        let mut out = if scores.len() >= 2 {
            let mut s = scores;
            let w = s.len();
            post_transform(cx, &pt, &mut s, w)?;
            s
        } else if scores.len() == 1 {
            let s0 = scores[0];
            if pt == "PROBIT" {
                vec![std::f64::consts::SQRT_2 * erf_inv(s0 * 2.0 - 1.0)]
            } else if add_second == 0 || add_second == 1 {
                vec![1.0 - s0, s0]
            } else if add_second == 2 || add_second == 3 {
                let mut v = vec![-s0, s0];
                match pt.as_str() {
                    "LOGISTIC" => v = vec![logistic(-s0), logistic(s0)],
                    "SOFTMAX" | "SOFTMAX_ZERO" => post_transform(cx, &pt, &mut v, 2)?,
                    _ => {}
                }
                v
            } else {
                vec![s0]
            }
        } else {
            vec![]
        };
        if r == 0 {
            width = out.len();
        }
        all_scores.append(&mut out);
        labels.push(label);
    }
    let label = match &str_labels {
        Some(l) if !l.is_empty() => {
            let picked = labels
                .iter()
                .map(|&i| {
                    l.get(i as usize).cloned().ok_or_else(|| {
                        cx.invalid(format!("SVMClassifier label index {i} has no string label"))
                    })
                })
                .collect::<KResult<Vec<_>>>()?;
            Tensor::from_strings(vec![n], picked)?
        }
        _ => Tensor::from_vec(vec![n], labels)?,
    };
    let z: Vec<f32> = all_scores.into_iter().map(|v| v as f32).collect();
    Ok(vec![
        label.into(),
        Tensor::from_vec(vec![n, width], z)?.into(),
    ])
}

pub const KERNELS: &[KernelDef] = &[
    kernel_in(ML, "LabelEncoder", 1, None, label_encoder),
    kernel_in(
        ML,
        "ArrayFeatureExtractor",
        1,
        None,
        array_feature_extractor,
    ),
    kernel_in(ML, "Binarizer", 1, None, binarizer),
    kernel_in(ML, "Scaler", 1, None, scaler),
    kernel_in(ML, "Normalizer", 1, None, normalizer),
    kernel_in(ML, "Imputer", 1, None, imputer),
    kernel_in(ML, "LinearRegressor", 1, None, linear_regressor),
    kernel_in(ML, "LinearClassifier", 1, None, linear_classifier),
    kernel_in(ML, "TreeEnsemble", 5, None, tree_ensemble),
    kernel_in(
        ML,
        "TreeEnsembleRegressor",
        1,
        None,
        tree_ensemble_regressor,
    ),
    kernel_in(
        ML,
        "TreeEnsembleClassifier",
        1,
        None,
        tree_ensemble_classifier,
    ),
    kernel_in(ML, "OneHotEncoder", 1, None, one_hot_encoder),
    kernel_in(ML, "FeatureVectorizer", 1, None, feature_vectorizer),
    kernel_in(ML, "SVMRegressor", 1, None, svm_regressor),
    kernel_in(ML, "SVMClassifier", 1, None, svm_classifier),
    kernel_in(ML, "CategoryMapper", 1, None, category_mapper),
];
