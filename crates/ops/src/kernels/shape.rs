//! Kernels of the shape family (inference: `families/shape.rs`).

use crate::exec::util;
use crate::exec::util::{
    broadcast_offsets, broadcast_shapes, broadcast_strides, concat_flat, norm_axis, strides,
    to_i64s, FloatConv,
};
use crate::exec::{kernel, KResult, KernelDef, RunCx, Value};
use tensor::{DataType, Tensor};

/// Identity: the input value, unchanged (tensors, sequences and optionals alike).
fn identity(cx: &RunCx) -> KResult<Vec<Value>> {
    let v = cx
        .value(0)
        .ok_or_else(|| cx.invalid("required input 0 is missing"))?;
    Ok(vec![v.clone()])
}

/// Constant: the one value attribute it carries.
fn constant(cx: &RunCx) -> KResult<Vec<Value>> {
    if let Some(t) = cx.attr_t("value")? {
        return Ok(vec![t.into()]);
    }
    if let Some(v) = cx.attr_f("value_float")? {
        return Ok(vec![Tensor::scalar(v).into()]);
    }
    if let Some(v) = cx.attr_floats("value_floats")? {
        return Ok(vec![Tensor::from_slice(vec![v.len()], v)?.into()]);
    }
    if let Some(v) = cx.attr_i("value_int")? {
        return Ok(vec![Tensor::scalar(v).into()]);
    }
    if let Some(v) = cx.attr_ints("value_ints")? {
        return Ok(vec![Tensor::from_slice(vec![v.len()], v)?.into()]);
    }
    if let Some(a) = cx.attr("value_string") {
        return Ok(vec![Tensor::from_strings(
            vec![],
            vec![bytes::Bytes::copy_from_slice(a.s())],
        )?
        .into()]);
    }
    if let Some(a) = cx.attr("value_strings") {
        return Ok(vec![Tensor::from_strings(
            vec![a.strings.len()],
            a.strings.clone(),
        )?
        .into()]);
    }
    if cx.attr("sparse_value").is_some() {
        return Err(cx.unsupported("sparse_value"));
    }
    Err(cx.invalid("Constant carries none of value, value_float(s), value_int(s), value_string(s)"))
}

/// Shape: the input's dims as int64, optionally the `[start, end)` window (opset 15+).
fn shape(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let r = t.rank() as i64;
    let clamp = |v: i64| -> usize {
        let v = if v < 0 { v + r } else { v };
        v.clamp(0, r) as usize
    };
    let start = clamp(cx.int("start", 0)?);
    let end = match cx.attr_i("end")? {
        Some(e) => clamp(e),
        None => r as usize,
    };
    let dims: Vec<i64> = if start < end {
        t.shape()[start..end].iter().map(|&d| d as i64).collect()
    } else {
        Vec::new()
    };
    Ok(vec![Tensor::from_vec(vec![dims.len()], dims)?.into()])
}

/// Size: the input's element count as an int64 scalar.
fn size(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    Ok(vec![Tensor::scalar(t.len() as i64).into()])
}

/// Resolves a Reshape target (`0` copies the input dim unless `allowzero`, one `-1` is inferred).
fn reshape_target(
    cx: &RunCx,
    input: &[usize],
    target: &[i64],
    allowzero: bool,
) -> KResult<Vec<usize>> {
    let total: usize = input.iter().product();
    let mut out = Vec::with_capacity(target.len());
    let mut infer = None;
    for (i, &d) in target.iter().enumerate() {
        match d {
            -1 => {
                if infer.is_some() {
                    return Err(
                        cx.invalid(format!("Reshape target {target:?} has more than one -1"))
                    );
                }
                infer = Some(i);
                out.push(1);
            }
            0 if !allowzero => {
                let v = *input.get(i).ok_or_else(|| {
                    cx.invalid(format!(
                        "Reshape target {target:?} copies dim {i} (0) but the input {input:?} has rank {}",
                        input.len()
                    ))
                })?;
                out.push(v);
            }
            d if d >= 0 => out.push(d as usize),
            d => return Err(cx.invalid(format!("Reshape target {target:?} has invalid dim {d}"))),
        }
    }
    if let Some(i) = infer {
        let known: usize = out
            .iter()
            .enumerate()
            .filter(|&(j, _)| j != i)
            .map(|(_, &d)| d)
            .try_fold(1usize, |a, d| a.checked_mul(d))
            .unwrap_or(0);
        if known == 0 || !total.is_multiple_of(known) {
            return Err(cx.invalid(format!(
                "Reshape cannot infer the -1 in {target:?} for input shape {input:?}"
            )));
        }
        out[i] = total / known;
    }
    let n = out
        .iter()
        .try_fold(1usize, |a, &d| a.checked_mul(d))
        .unwrap_or(usize::MAX);
    if n != total {
        return Err(cx.invalid(format!(
            "Reshape target {target:?} (resolved {out:?}) does not match input shape {input:?} ({total} elements)"
        )));
    }
    Ok(out)
}

/// Reshape: same data, new shape (target from the `shape` attribute before opset 5, an input after).
fn reshape(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let target: Vec<i64> = if cx.opset < 5 {
        cx.attr_ints("shape")?
            .ok_or_else(|| cx.invalid("Reshape-1 needs the 'shape' attribute"))?
            .to_vec()
    } else {
        int_input(cx, 1, "shape")?
    };
    let allowzero = cx.opset >= 14 && cx.int("allowzero", 0)? != 0;
    let out = reshape_target(cx, t.shape(), &target, allowzero)?;
    Ok(vec![t.reshape(out)?.into()])
}

/// Flatten: 2-D `[prod(dims[..axis]), prod(dims[axis..])]`.
fn flatten(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let r = t.rank() as i64;
    let axis = cx.int("axis", 1)?;
    if axis < -r || axis > r {
        return Err(cx.invalid(format!(
            "Flatten axis {axis} is out of range for rank {r} (expected {}..={r})",
            -r
        )));
    }
    let axis = if axis < 0 { axis + r } else { axis } as usize;
    let a: usize = t.shape()[..axis].iter().product();
    let b: usize = t.shape()[axis..].iter().product();
    Ok(vec![t.reshape(vec![a, b])?.into()])
}

/// Axes from the `axes` attribute (before opset 13) or the optional `axes` input (13+).
fn axes_attr_or_input(cx: &RunCx, input: usize) -> KResult<Option<Vec<i64>>> {
    if cx.opset < 13 {
        Ok(cx.attr_ints("axes")?.map(|a| a.to_vec()))
    } else if cx.has_input(input) {
        Ok(Some(int_input(cx, input, "axes")?))
    } else {
        Ok(None)
    }
}

/// Squeeze: drops the given size-1 axes (all size-1 axes when none are given).
fn squeeze(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let shape = t.shape();
    let mut axes = axes_attr_or_input(cx, 1)?;
    if cx.opset < 13 && axes.as_ref().is_some_and(|a| a.is_empty()) {
        // An empty `axes` attribute means "all" (an empty input from opset 13 means "none").
        axes = None;
    }
    let out: Vec<usize> = match axes {
        None => shape.iter().copied().filter(|&d| d != 1).collect(),
        Some(axes) => {
            let axes = norm_axes(cx, &axes, shape.len())?;
            for &a in &axes {
                if shape[a] != 1 {
                    return Err(cx.invalid(format!(
                        "Squeeze axis {a} has size {} in shape {shape:?} (expected 1)",
                        shape[a]
                    )));
                }
            }
            shape
                .iter()
                .enumerate()
                .filter(|(i, _)| !axes.contains(i))
                .map(|(_, &d)| d)
                .collect()
        }
    };
    Ok(vec![t.reshape(out)?.into()])
}

/// Unsqueeze: inserts size-1 axes at the given output positions.
fn unsqueeze(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let axes = axes_attr_or_input(cx, 1)?.ok_or_else(|| cx.invalid("Unsqueeze needs axes"))?;
    let rank = t.rank() + axes.len();
    let axes = norm_axes(cx, &axes, rank)?;
    let mut src = t.shape().iter();
    let out: Vec<usize> = (0..rank)
        .map(|i| {
            if axes.contains(&i) {
                1
            } else {
                *src.next().unwrap_or(&1)
            }
        })
        .collect();
    Ok(vec![t.reshape(out)?.into()])
}

/// Transposes `t` by `perm` (a permutation of its axes, already checked).
pub(crate) fn permute(t: &Tensor, perm: &[usize]) -> KResult<Tensor> {
    let shape = t.shape();
    let st = strides(shape);
    let out: Vec<usize> = perm.iter().map(|&p| shape[p]).collect();
    if perm.iter().enumerate().all(|(i, &p)| i == p) {
        return Ok(t.clone());
    }
    if !t.dtype().is_packed() && t.dtype() != tensor::DataType::String {
        let vs: Vec<usize> = perm.iter().map(|&p| st[p]).collect();
        crate::for_element!(t.dtype(), T => {
            let src = match t.as_slice::<T>() {
                Some(s) => std::borrow::Cow::Borrowed(s),
                None => std::borrow::Cow::Owned(t.to_vec::<T>()?),
            };
            return Ok(Tensor::from_vec(out.clone(), gather_strided(&src, &out, &vs))?);
        } else {});
    }
    let vs: Vec<isize> = perm.iter().map(|&p| st[p] as isize).collect();
    take(t, &view_offsets(0, &out, &vs), out)
}

/// The elements of `src` read through source strides `st` for each index of `shape`, in
/// row-major order: a tight loop over the last dim, counters over the others.
fn gather_strided<T: Copy>(src: &[T], shape: &[usize], st: &[usize]) -> Vec<T> {
    let total: usize = shape.iter().product();
    let mut out = Vec::with_capacity(total);
    if total == 0 {
        return out;
    }
    let Some((&inner, outer_dims)) = shape.split_last() else {
        out.push(src[0]);
        return out;
    };
    let si = st[shape.len() - 1];
    let mut idx = vec![0usize; outer_dims.len()];
    let mut base = 0usize;
    for _ in 0..total / inner {
        if si == 1 {
            out.extend_from_slice(&src[base..base + inner]);
        } else {
            out.extend((0..inner).map(|j| src[base + j * si]));
        }
        for d in (0..outer_dims.len()).rev() {
            idx[d] += 1;
            base += st[d];
            if idx[d] < outer_dims[d] {
                break;
            }
            base -= st[d] * outer_dims[d];
            idx[d] = 0;
        }
    }
    out
}

/// Transpose: permutes axes by `perm` (default: reversed).
fn transpose(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let r = t.rank();
    let perm: Vec<usize> = match cx.attr_ints("perm")? {
        None => (0..r).rev().collect(),
        Some(p) => {
            if p.len() != r {
                return Err(cx.invalid(format!(
                    "Transpose perm {p:?} has {} entries for an input of rank {r}",
                    p.len()
                )));
            }
            norm_axes(cx, p, r)?
        }
    };
    Ok(vec![permute(t, &perm)?.into()])
}

/// Concat: joins the inputs along `axis` (default 1 in opset 1-3).
fn concat(cx: &RunCx) -> KResult<Vec<Value>> {
    let mut parts = Vec::with_capacity(cx.num_inputs());
    for i in 0..cx.num_inputs() {
        parts.push(cx.input(i)?);
    }
    let first = *parts
        .first()
        .ok_or_else(|| cx.invalid("Concat needs at least one input"))?;
    let axis = match cx.attr_i("axis")? {
        Some(a) => a,
        None if cx.opset < 4 => 1,
        None => return Err(cx.invalid("Concat needs the 'axis' attribute")),
    };
    let dtype = first.dtype();
    let r = first.rank();
    let axis = norm_axis(axis, r)?;
    for p in &parts[1..] {
        let ok = p.dtype() == dtype
            && p.rank() == r
            && (0..r).all(|d| d == axis || p.shape()[d] == first.shape()[d]);
        if !ok {
            return Err(cx.invalid(format!(
                "Concat on axis {axis}: input tensor({}){:?} does not match tensor({dtype}){:?}",
                p.dtype(),
                p.shape(),
                first.shape()
            )));
        }
    }
    Ok(vec![concat_axis(&parts, axis, dtype)?.into()])
}

/// Indices normalised against `dim` (negative counts from the back; out of range is an error).
pub(crate) fn norm_indices(cx: &RunCx, idx: &[i64], dim: usize, what: &str) -> KResult<Vec<usize>> {
    let d = dim as i64;
    idx.iter()
        .map(|&i| {
            let j = if i < 0 { i + d } else { i };
            if j < 0 || j >= d {
                Err(cx.invalid(format!(
                    "{what} index {i} is out of range for a dim of size {dim} (expected {}..={})",
                    -d,
                    d - 1
                )))
            } else {
                Ok(j as usize)
            }
        })
        .collect()
}

/// Gather: takes slices along `axis` at the given indices.
fn gather(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let it = cx.input(1)?;
    let idx = int_input(cx, 1, "indices")?;
    if t.rank() == 0 {
        return Err(cx.invalid("Gather needs data of rank >= 1, got a scalar"));
    }
    let axis = norm_axis(cx.int("axis", 0)?, t.rank())?;
    let idx = norm_indices(cx, &idx, t.shape()[axis], "Gather")?;
    let mut out_shape = t.shape()[..axis].to_vec();
    out_shape.extend_from_slice(it.shape());
    out_shape.extend_from_slice(&t.shape()[axis + 1..]);
    checked_numel(cx, &out_shape)?;
    Ok(vec![gather_axis(t, axis, &idx, it.shape())?.into()])
}

/// Slice: numpy-style strided slicing (attributes before opset 10, inputs with steps after).
fn slice(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let r = t.rank();
    let (starts, ends, axes, steps) = if cx.opset < 10 {
        let starts = cx
            .attr_ints("starts")?
            .ok_or_else(|| cx.invalid("Slice needs 'starts'"))?
            .to_vec();
        let ends = cx
            .attr_ints("ends")?
            .ok_or_else(|| cx.invalid("Slice needs 'ends'"))?
            .to_vec();
        let axes = cx.attr_ints("axes")?.map(|a| a.to_vec());
        (starts, ends, axes, None)
    } else {
        let starts = int_input(cx, 1, "starts")?;
        let ends = int_input(cx, 2, "ends")?;
        let axes = if cx.has_input(3) {
            Some(int_input(cx, 3, "axes")?)
        } else {
            None
        };
        let steps = if cx.has_input(4) {
            Some(int_input(cx, 4, "steps")?)
        } else {
            None
        };
        (starts, ends, axes, steps)
    };
    let n = starts.len();
    if ends.len() != n
        || axes.as_ref().is_some_and(|a| a.len() != n)
        || steps.as_ref().is_some_and(|s| s.len() != n)
    {
        return Err(cx.invalid(format!(
            "Slice starts/ends/axes/steps must have equal lengths, got {n}/{}/{}/{}",
            ends.len(),
            axes.as_ref().map_or(n, |a| a.len()),
            steps.as_ref().map_or(n, |s| s.len())
        )));
    }
    let axes: Vec<usize> = match axes {
        Some(a) => norm_axes(cx, &a, r)?,
        None => {
            if n > r {
                return Err(cx.invalid(format!("Slice has {n} starts for an input of rank {r}")));
            }
            (0..n).collect()
        }
    };
    let shape = t.shape();
    let st = strides(shape);
    let mut out: Vec<usize> = shape.to_vec();
    let mut vstrides: Vec<isize> = st.iter().map(|&s| s as isize).collect();
    let mut base: isize = 0;
    for k in 0..n {
        let a = axes[k];
        let dim = shape[a] as i64;
        let step = steps.as_ref().map_or(1, |s| s[k]);
        if step == 0 {
            return Err(cx.invalid("Slice step must not be 0"));
        }
        let fix = |v: i64| if v < 0 { v.saturating_add(dim) } else { v };
        let (start, end) = if dim == 0 {
            (0, 0)
        } else if step > 0 {
            (fix(starts[k]).clamp(0, dim), fix(ends[k]).clamp(0, dim))
        } else {
            (
                fix(starts[k]).clamp(0, dim - 1),
                fix(ends[k]).clamp(-1, dim - 1),
            )
        };
        // In i128: steps near i64::MAX must not overflow.
        let (s128, e128, st128) = (start as i128, end as i128, step as i128);
        let len = if step > 0 {
            if e128 > s128 {
                (e128 - s128 + st128 - 1) / st128
            } else {
                0
            }
        } else if s128 > e128 {
            (s128 - e128 - st128 - 1) / (-st128)
        } else {
            0
        } as i64;
        out[a] = len as usize;
        if len > 0 {
            base += start as isize * st[a] as isize;
        }
        // A stride is only followed between elements, so with len <= 1 it is never used.
        vstrides[a] = if len > 1 {
            step as isize * st[a] as isize
        } else {
            0
        };
    }
    if r > 0 && vstrides[r - 1] == 1 {
        // Rows along the last axis are contiguous: copy them as runs.
        let row = out[r - 1];
        let starts = view_offsets(base, &out[..r - 1], &vstrides[..r - 1]);
        let runs: Vec<(usize, usize)> = if row == 0 {
            Vec::new()
        } else {
            starts.into_iter().map(|s| (s, row)).collect()
        };
        return Ok(vec![take_runs(t, &runs, out)?.into()]);
    }
    let offs = view_offsets(base, &out, &vstrides);
    Ok(vec![take(t, &offs, out)?.into()])
}

/// Expand: bidirectional broadcast of the input to the given shape.
fn expand(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let target = int_input(cx, 1, "shape")?;
    if let Some(d) = target.iter().find(|&&d| d < 0) {
        return Err(cx.invalid(format!("Expand shape {target:?} has negative dim {d}")));
    }
    let target: Vec<usize> = target.iter().map(|&d| d as usize).collect();
    let out = broadcast_shapes(&[t.shape(), &target])?;
    checked_numel(cx, &out)?;
    if out == t.shape() {
        return Ok(vec![t.clone().into()]);
    }
    let offs = broadcast_offsets(&out, &broadcast_strides(t.shape(), &out));
    Ok(vec![take(t, &offs, out)?.into()])
}

/// ConstantOfShape: a tensor of the given shape filled with `value` (default float 0).
fn constant_of_shape(cx: &RunCx) -> KResult<Vec<Value>> {
    let dims = int_input(cx, 0, "shape")?;
    if let Some(d) = dims.iter().find(|&&d| d < 0) {
        return Err(cx.invalid(format!(
            "ConstantOfShape shape {dims:?} has negative dim {d}"
        )));
    }
    let shape: Vec<usize> = dims.iter().map(|&d| d as usize).collect();
    let n = checked_numel(cx, &shape)?;
    let value = match cx.attr_t("value")? {
        Some(v) => {
            if v.len() != 1 {
                return Err(cx.invalid(format!(
                    "ConstantOfShape value must hold one element, got shape {:?}",
                    v.shape()
                )));
            }
            v
        }
        None => Tensor::scalar(0.0f32),
    };
    if let (Some(_), Some(b)) = (byte_width(&value), value.bytes()) {
        return Ok(vec![Tensor::from_bytes(
            value.dtype(),
            shape,
            b.repeat(n).into(),
        )?
        .into()]);
    }
    Ok(vec![take(&value, &vec![0; n], shape)?.into()])
}

/// Range: `start + i*delta` for `i < max(ceil((limit-start)/delta), 0)`.
fn range(cx: &RunCx) -> KResult<Vec<Value>> {
    let (s, l, d) = (cx.input(0)?, cx.input(1)?, cx.input(2)?);
    let dtype = s.dtype();
    if l.dtype() != dtype || d.dtype() != dtype {
        return Err(cx.invalid(format!(
            "Range inputs must share one type, got {}, {}, {}",
            dtype,
            l.dtype(),
            d.dtype()
        )));
    }
    for (t, what) in [(s, "start"), (l, "limit"), (d, "delta")] {
        if t.len() != 1 {
            return Err(cx.invalid(format!(
                "Range {what} must be a scalar, got shape {:?}",
                t.shape()
            )));
        }
    }
    match dtype {
        DataType::Int16 | DataType::Int32 | DataType::Int64 => {
            let (a, b, c) = (to_i64s(s)?[0], to_i64s(l)?[0], to_i64s(d)?[0]);
            if c == 0 {
                return Err(cx.invalid("Range delta must not be 0"));
            }
            let span = b as i128 - a as i128;
            let c128 = c as i128;
            let n = if (span > 0) == (c > 0) && span != 0 {
                ((span + c128 - c128.signum()) / c128).max(0) as usize
            } else {
                0
            };
            checked_numel(cx, &[n])?;
            let vals: Vec<i64> = (0..n as i64).map(|i| a + i * c).collect();
            let out = Tensor::from_vec(vec![n], vals)?;
            Ok(vec![match dtype {
                DataType::Int64 => out,
                DataType::Int32 => Tensor::from_vec(
                    vec![n],
                    out.to_vec::<i64>()?.iter().map(|&v| v as i32).collect(),
                )?,
                _ => Tensor::from_vec(
                    vec![n],
                    out.to_vec::<i64>()?.iter().map(|&v| v as i16).collect(),
                )?,
            }
            .into()])
        }
        _ => crate::for_float!(dtype, T => {
            let a = s.to_vec::<T>()?[0].to_f64();
            let b = l.to_vec::<T>()?[0].to_f64();
            let c = d.to_vec::<T>()?[0].to_f64();
            if c == 0.0 || !c.is_finite() || !a.is_finite() || !b.is_finite() {
                return Err(cx.invalid(format!("Range needs finite start/limit and a nonzero finite delta, got {a}, {b}, {c}")));
            }
            let n = ((b - a) / c).ceil().max(0.0);
            if n > MAX_ELEMENTS as f64 {
                return Err(cx.invalid(format!("Range would produce {n} elements")));
            }
            let n = n as usize;
            let low = matches!(dtype, DataType::Float16 | DataType::Bfloat16);
            let vals: Vec<T> = if low && cx.opset >= 27 && cx.int("stash_type", 1)? == 1 {
                let (a, c) = (a as f32, c as f32);
                (0..n).map(|i| T::from_f32(a + i as f32 * c)).collect()
            } else {
                (0..n).map(|i| T::from_f64(a + i as f64 * c)).collect()
            };
            Ok(vec![Tensor::from_vec(vec![n], vals)?.into()])
        } else Err(cx.unsupported(dtype))),
    }
}

pub const KERNELS: &[KernelDef] = &[
    kernel("Identity", 1, identity),
    kernel("Constant", 1, constant),
    kernel("Shape", 1, shape),
    kernel("Size", 1, size),
    kernel("Reshape", 1, reshape),
    kernel("Flatten", 1, flatten),
    kernel("Squeeze", 1, squeeze),
    kernel("Unsqueeze", 1, unsqueeze),
    kernel("Transpose", 1, transpose),
    kernel("Concat", 1, concat),
    kernel("Gather", 1, gather),
    kernel("Slice", 1, slice),
    kernel("Expand", 8, expand),
    kernel("ConstantOfShape", 9, constant_of_shape),
    kernel("Range", 11, range),
];

// ---------------------------------------------------------------------------------------------
// Shared data-movement helpers (also used by `indexing.rs`).

/// Checked product of dims, as an allocation guard.
pub(crate) fn checked_numel(cx: &RunCx, shape: &[usize]) -> KResult<usize> {
    let mut n: usize = 1;
    for &d in shape {
        n = n
            .checked_mul(d)
            .ok_or_else(|| cx.invalid(format!("output shape {shape:?} is too large")))?;
    }
    if n > MAX_ELEMENTS {
        return Err(cx.invalid(format!(
            "output shape {shape:?} has {n} elements, more than the {MAX_ELEMENTS} allowed"
        )));
    }
    Ok(n)
}

/// Upper bound on the number of elements a kernel will allocate from data-driven shapes.
/// (2^30: beyond it a data-driven shape is far more likely a bad input than a real model, and
/// the per-element offset vectors the kernels build would take gigabytes.)
pub(crate) const MAX_ELEMENTS: usize = 1 << 30;

/// Element width in bytes of a byte-aligned numeric type (`None` for strings and packed types).
fn byte_width(t: &Tensor) -> Option<usize> {
    if t.strings().is_some() || t.dtype().is_packed() {
        return None;
    }
    t.dtype().bit_width().map(|b| (b / 8) as usize)
}

fn gather_w<const W: usize>(src: &[u8], offs: &[usize]) -> Vec<u8> {
    let (arr, _) = src.as_chunks::<W>();
    let mut out = Vec::with_capacity(offs.len() * W);
    for &o in offs {
        out.extend_from_slice(&arr[o]);
    }
    out
}

/// [`util::take`] with fixed-width copies for the common element sizes.
pub(crate) fn take(t: &Tensor, offsets: &[usize], shape: Vec<usize>) -> KResult<Tensor> {
    let (Some(w), Some(src)) = (byte_width(t), t.bytes()) else {
        return util::take(t, offsets, shape);
    };
    let out = match w {
        1 => gather_w::<1>(src, offsets),
        2 => gather_w::<2>(src, offsets),
        4 => gather_w::<4>(src, offsets),
        8 => gather_w::<8>(src, offsets),
        16 => gather_w::<16>(src, offsets),
        _ => return util::take(t, offsets, shape),
    };
    Ok(Tensor::from_bytes(t.dtype(), shape, out.into())?)
}

/// Copies the element runs `(start, len)` of `t`, in order, into a new tensor of `shape`.
pub(crate) fn take_runs(t: &Tensor, runs: &[(usize, usize)], shape: Vec<usize>) -> KResult<Tensor> {
    let (Some(w), Some(src)) = (byte_width(t), t.bytes()) else {
        let offs: Vec<usize> = runs.iter().flat_map(|&(s, l)| s..s + l).collect();
        return util::take(t, &offs, shape);
    };
    let total: usize = runs.iter().map(|r| r.1).sum();
    let mut out = Vec::with_capacity(total * w);
    for &(s, l) in runs {
        out.extend_from_slice(&src[s * w..(s + l) * w]);
    }
    Ok(Tensor::from_bytes(t.dtype(), shape, out.into())?)
}

/// Flat offsets of a strided view: element `idx` of `out` reads `base + sum(idx[d] * strides[d])`.
pub(crate) fn view_offsets(base: isize, out: &[usize], strides: &[isize]) -> Vec<usize> {
    let n: usize = out.iter().product();
    let mut offs = Vec::with_capacity(n);
    if n == 0 {
        return offs;
    }
    let rank = out.len();
    let mut idx = vec![0usize; rank];
    let mut off = base;
    for _ in 0..n {
        offs.push(off as usize);
        for d in (0..rank).rev() {
            idx[d] += 1;
            off += strides[d];
            if idx[d] < out[d] {
                break;
            }
            off -= strides[d] * out[d] as isize;
            idx[d] = 0;
        }
    }
    offs
}

/// Integer values of an int32/int64 tensor input `i` (an error for other types).
pub(crate) fn int_input(cx: &RunCx, i: usize, what: &str) -> KResult<Vec<i64>> {
    let t = cx.input(i)?;
    match t.dtype() {
        DataType::Int64 | DataType::Int32 => to_i64s(t),
        other => Err(cx.invalid(format!(
            "input {i} ({what}) must be int32 or int64, got {other}"
        ))),
    }
}

/// Normalises `axes` against `rank`, rejecting duplicates.
pub(crate) fn norm_axes(cx: &RunCx, axes: &[i64], rank: usize) -> KResult<Vec<usize>> {
    let mut out = Vec::with_capacity(axes.len());
    for &a in axes {
        let n = norm_axis(a, rank)?;
        if out.contains(&n) {
            return Err(cx.invalid(format!("axes {axes:?} name axis {a} twice")));
        }
        out.push(n);
    }
    Ok(out)
}

/// Gathers along `axis` with already-normalised `idx`: output shape is
/// `shape[..axis] + idx_shape + shape[axis+1..]`.
pub(crate) fn gather_axis(
    t: &Tensor,
    axis: usize,
    idx: &[usize],
    idx_shape: &[usize],
) -> KResult<Tensor> {
    let shape = t.shape();
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let dim = shape[axis];
    let mut runs = Vec::with_capacity(outer * idx.len());
    for o in 0..outer {
        for &i in idx {
            runs.push(((o * dim + i) * inner, inner));
        }
    }
    let mut out_shape = shape[..axis].to_vec();
    out_shape.extend_from_slice(idx_shape);
    out_shape.extend_from_slice(&shape[axis + 1..]);
    take_runs(t, &runs, out_shape)
}

/// Slices `[start, start+len)` along `axis`.
pub(crate) fn narrow(t: &Tensor, axis: usize, start: usize, len: usize) -> KResult<Tensor> {
    let idx: Vec<usize> = (start..start + len).collect();
    gather_axis(t, axis, &idx, &[len])
}

/// Concatenates same-dtype tensors along `axis` (shapes already checked).
pub(crate) fn concat_axis(parts: &[&Tensor], axis: usize, dtype: DataType) -> KResult<Tensor> {
    let first = parts[0].shape();
    let outer: usize = first[..axis].iter().product();
    let inner: usize = first[axis + 1..].iter().product();
    let total: usize = parts.iter().map(|p| p.shape()[axis]).sum();
    let mut out_shape = first.to_vec();
    out_shape[axis] = total;
    if outer == 1 || parts.len() == 1 {
        return concat_flat(parts, dtype, out_shape);
    }
    let widths: Vec<Option<usize>> = parts.iter().map(|p| byte_width(p)).collect();
    if widths.iter().all(|w| w.is_some()) {
        let w = widths[0].unwrap_or(1);
        let mut out = Vec::with_capacity(outer * total * inner * w);
        for o in 0..outer {
            for p in parts {
                let chunk = p.shape()[axis] * inner * w;
                if let Some(b) = p.bytes() {
                    out.extend_from_slice(&b[o * chunk..(o + 1) * chunk]);
                }
            }
        }
        return Ok(Tensor::from_bytes(dtype, out_shape, out.into())?);
    }
    // Strings and packed types: offsets into the flat concatenation of all parts.
    let mut bases = Vec::with_capacity(parts.len());
    let mut acc = 0usize;
    for p in parts {
        bases.push(acc);
        acc += p.len();
    }
    let flat = concat_flat(parts, dtype, vec![acc])?;
    let mut offs = Vec::with_capacity(outer * total * inner);
    for o in 0..outer {
        for (p, &b) in parts.iter().zip(&bases) {
            let chunk = p.shape()[axis] * inner;
            let s = b + o * chunk;
            offs.extend(s..s + chunk);
        }
    }
    take(&flat, &offs, out_shape)
}
