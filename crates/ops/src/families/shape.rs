//! Ops that make, read and rearrange shapes: Constant, ConstantOfShape, Shape, Size, Cast,
//! CastLike, Identity, Reshape, Flatten, Squeeze, Unsqueeze, Concat, Gather, Slice, Expand,
//! Transpose, Range. They propagate known values, so a Shape → Gather → Unsqueeze → Concat →
//! Reshape chain gives the Reshape a known (possibly symbolic) shape.
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (each op's section).

use crate::infer::{axis, broadcast, fixed, known, show, InferCx, InferError, Info, Known, Shape};
use crate::sym::SymDim;
use crate::{bail, op, OpDef};
use tensor::{DataType, Tensor};

/// No real tensor has more dims; a larger declared rank is not trusted for allocation.
const MAX_RANK: i64 = 1024;

fn product(dims: &[Option<SymDim>]) -> Option<SymDim> {
    dims.iter()
        .try_fold(SymDim::known(1), |acc, d| d.as_ref().map(|d| acc.mul(d)))
}

fn constant(cx: &mut InferCx) -> Result<(), InferError> {
    let t = if let Some(t) = cx.attr_t("value") {
        Tensor::from_proto(t).map_err(|e| InferError(format!("attribute 'value': {e}")))?
    } else if let Some(f) = cx.attr_f("value_float") {
        Tensor::scalar(f)
    } else if let Some(i) = cx.attr_i("value_int") {
        Tensor::scalar(i)
    } else if let Some(fs) = cx.attr("value_floats").map(|a| a.floats.clone()) {
        Tensor::from_vec(vec![fs.len()], fs).map_err(|e| InferError(e.to_string()))?
    } else if let Some(is) = cx.attr("value_ints").map(|a| a.ints.clone()) {
        Tensor::from_vec(vec![is.len()], is).map_err(|e| InferError(e.to_string()))?
    } else if let Some(a) = cx.attr("value_string") {
        Tensor::from_strings(vec![], vec![a.s.clone().unwrap_or_default()])
            .map_err(|e| InferError(e.to_string()))?
    } else if let Some(a) = cx.attr("value_strings") {
        Tensor::from_strings(vec![a.strings.len()], a.strings.clone())
            .map_err(|e| InferError(e.to_string()))?
    } else if let Some(sp) = cx
        .attr("sparse_value")
        .and_then(|a| a.sparse_tensor.as_ref())
    {
        let dtype = sp
            .values
            .as_ref()
            .and_then(|v| DataType::from_onnx(v.data_type()));
        let shape = sp.dims.iter().map(|&d| fixed(d)).collect();
        cx.set_tensor(0, dtype, Some(shape));
        return Ok(());
    } else {
        bail!("Constant has none of its value attributes");
    };
    cx.set_info(0, Info::known(t));
    Ok(())
}

fn constant_of_shape(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = match cx.attr_t("value") {
        Some(t) => DataType::from_onnx(t.data_type()),
        None => Some(DataType::Float),
    };
    let shape = cx.dims_value(0).or_else(|| {
        cx.shape(0)
            .and_then(|s| s.first())
            .and_then(known)
            .filter(|&n| (0..=MAX_RANK).contains(&n))
            .map(|n| vec![None; n as usize])
    });
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn shape_op(cx: &mut InferCx) -> Result<(), InferError> {
    let Some(s) = cx.shape(0) else {
        cx.set_tensor(0, Some(DataType::Int64), Some(vec![None]));
        return Ok(());
    };
    let r = s.len() as i64;
    let clamp = |v: i64| if v < 0 { (v + r).clamp(0, r) } else { v.clamp(0, r) } as usize;
    let start = clamp(cx.attr_i("start").unwrap_or(0));
    let end = clamp(cx.attr_i("end").unwrap_or(r));
    let dims: Shape = if start < end {
        s[start..end].to_vec()
    } else {
        Vec::new()
    };
    cx.set_info(0, Info::dims(dims, false));
    Ok(())
}

fn size(cx: &mut InferCx) -> Result<(), InferError> {
    match cx.shape(0).and_then(|s| product(s)) {
        Some(n) => cx.set_info(0, Info::dims(vec![Some(n)], true)),
        None => cx.set_tensor(0, Some(DataType::Int64), Some(vec![])),
    }
    Ok(())
}

fn cast_to(cx: &mut InferCx, to: Option<DataType>) {
    let shape = cx.shape(0).cloned();
    let value = match to {
        Some(DataType::Int64 | DataType::Int32) if cx.dtype(0).is_some_and(|d| d.is_int()) => cx
            .input(0)
            .and_then(|i| i.value.clone())
            .and_then(|v| match v {
                Known::Dims { .. } => Some(v),
                Known::Tensor(t) => crate::infer::ints_of(&t).map(|ints| Known::Dims {
                    scalar: t.shape().is_empty(),
                    dims: ints.into_iter().map(|i| Some(SymDim::known(i))).collect(),
                }),
            }),
        _ => None,
    };
    cx.set_tensor(0, to, shape);
    if let (Some(v), Some(o)) = (value, cx.outputs.get_mut(0)) {
        o.value = Some(v);
    }
}

fn cast(cx: &mut InferCx) -> Result<(), InferError> {
    let to = cx.attr_i("to").and_then(|t| DataType::from_onnx(t as i32));
    cast_to(cx, to);
    Ok(())
}

fn cast_like(cx: &mut InferCx) -> Result<(), InferError> {
    let to = cx.dtype(1);
    cast_to(cx, to);
    Ok(())
}

fn identity(cx: &mut InferCx) -> Result<(), InferError> {
    if let Some(i) = cx.input(0) {
        let i = i.clone();
        cx.set_info(0, i);
    }
    Ok(())
}

fn reshape(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let target = if cx.opset < 5 {
        cx.attr_ints("shape")
            .map(|s| s.iter().map(|&d| fixed(d)).collect())
    } else {
        cx.dims_value(1)
    };
    let Some(target) = target else {
        let rank = if cx.opset < 5 {
            None
        } else {
            cx.shape(1)
                .and_then(|s| s.first())
                .and_then(known)
                .filter(|&n| (0..=MAX_RANK).contains(&n))
        };
        cx.set_tensor(0, dtype, rank.map(|r| vec![None; r.max(0) as usize]));
        return Ok(());
    };
    let allowzero = cx.attr_i("allowzero").unwrap_or(0) != 0;
    let input = cx.shape(0).cloned();
    let mut out: Shape = Vec::with_capacity(target.len());
    let mut infer_at = None;
    for (i, d) in target.iter().enumerate() {
        match known(d) {
            Some(-1) => {
                if infer_at.replace(i).is_some() {
                    bail!("Reshape target {} has more than one -1", show(&target));
                }
                out.push(None);
            }
            Some(0) if !allowzero => out.push(match &input {
                Some(s) => s.get(i).cloned().ok_or_else(|| {
                    InferError(format!(
                        "Reshape target {} copies dim {i} (0) from an input of rank {}",
                        show(&target),
                        s.len()
                    ))
                })?,
                None => None,
            }),
            Some(n) if n < -1 => bail!("Reshape target {} has a negative dim {n}", show(&target)),
            _ => out.push(d.clone()),
        }
    }
    if let Some(at) = infer_at {
        let total = input.as_ref().and_then(|s| product(s));
        let rest = product(
            &out.iter()
                .enumerate()
                .filter(|(i, _)| *i != at)
                .map(|(_, d)| d.clone())
                .collect::<Vec<_>>(),
        );
        if let (Some(total), Some(rest)) = (total, rest) {
            out[at] = match (total.as_known(), rest.as_known()) {
                (Some(t), Some(r)) if r != 0 && t % r == 0 => fixed(t / r),
                (Some(t), Some(r)) if r != 0 => bail!(
                    "cannot reshape {} ({t} elements) into {}",
                    show(input.as_ref().unwrap_or(&vec![])),
                    show(&target)
                ),
                _ => total.div_exact(&rest),
            };
        }
    }
    if let (Some(total), Some(new)) = (
        input
            .as_ref()
            .and_then(|s| product(s))
            .and_then(|p| p.as_known()),
        product(&out).and_then(|p| p.as_known()),
    ) {
        if total != new {
            bail!(
                "cannot reshape {} ({total} elements) into {} ({new} elements)",
                show(input.as_ref().unwrap_or(&vec![])),
                show(&out)
            );
        }
    }
    let value = cx.input(0).and_then(|i| i.value.clone());
    cx.set_tensor(0, dtype, Some(out.clone()));
    // Reshaping a dims vector to a scalar or vector keeps the values.
    if let (Some(Known::Dims { dims, .. }), true) = (value, out.len() <= 1) {
        cx.set_value(
            0,
            Known::Dims {
                scalar: out.is_empty(),
                dims,
            },
        );
    }
    Ok(())
}

fn flatten(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let Some(s) = cx.shape(0).cloned() else {
        cx.set_tensor(0, dtype, Some(vec![None, None]));
        return Ok(());
    };
    let a = cx.attr_i("axis").unwrap_or(1);
    let r = s.len() as i64;
    if a < -r || a > r {
        bail!("Flatten axis {a} is out of range for rank {r}");
    }
    let a = if a < 0 { a + r } else { a } as usize;
    cx.set_tensor(0, dtype, Some(vec![product(&s[..a]), product(&s[a..])]));
    Ok(())
}

/// Axes from the attribute (before opset 13) or the second input (13 on).
fn axes_of(cx: &InferCx) -> Option<Option<Vec<i64>>> {
    if cx.opset < 13 {
        Some(cx.attr_ints("axes").map(<[i64]>::to_vec))
    } else if !cx.has_input(1) {
        Some(None)
    } else {
        cx.ints(1).map(Some)
    }
}

fn unsqueeze(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let (Some(Some(axes)), Some(s)) = (axes_of(cx), cx.shape(0).cloned()) else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let rank = s.len() + axes.len();
    let mut norm: Vec<usize> = axes
        .iter()
        .map(|&a| axis(a, rank))
        .collect::<Result<_, _>>()?;
    norm.sort_unstable();
    if norm.windows(2).any(|w| w[0] == w[1]) {
        bail!("Unsqueeze axes {axes:?} repeat an axis");
    }
    let mut it = s.into_iter();
    let out: Shape = (0..rank)
        .map(|i| {
            if norm.binary_search(&i).is_ok() {
                fixed(1)
            } else {
                it.next().flatten()
            }
        })
        .collect();
    let value = cx.input(0).and_then(|i| i.value.clone());
    cx.set_tensor(0, dtype, Some(out.clone()));
    if let (Some(Known::Dims { dims, .. }), 1) = (value, out.len()) {
        cx.set_value(
            0,
            Known::Dims {
                scalar: false,
                dims,
            },
        );
    }
    Ok(())
}

fn squeeze(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let (Some(axes), Some(s)) = (axes_of(cx), cx.shape(0).cloned()) else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let out: Option<Shape> = match axes {
        Some(axes) => {
            let norm: Vec<usize> = axes
                .iter()
                .map(|&a| axis(a, s.len()))
                .collect::<Result<_, _>>()?;
            for &a in &norm {
                if let Some(n) = known(&s[a]).filter(|&n| n != 1) {
                    bail!("Squeeze axis {a} has size {n}, not 1");
                }
            }
            Some(
                s.iter()
                    .enumerate()
                    .filter(|(i, _)| !norm.contains(i))
                    .map(|(_, d)| d.clone())
                    .collect(),
            )
        }
        // Without axes every dim of size 1 goes: unknowable while a dim is unknown.
        None if s.iter().all(|d| known(d).is_some()) => {
            Some(s.iter().filter(|d| known(d) != Some(1)).cloned().collect())
        }
        None => None,
    };
    let value = cx.input(0).and_then(|i| i.value.clone());
    cx.set_tensor(0, dtype, out.clone());
    if let (Some(Known::Dims { dims, .. }), Some(0)) = (value, out.map(|o| o.len())) {
        if dims.len() == 1 {
            cx.set_value(0, Known::Dims { scalar: true, dims });
        }
    }
    Ok(())
}

fn concat(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = (0..cx.num_inputs()).find_map(|i| cx.dtype(i));
    let shapes: Option<Vec<&Shape>> = (0..cx.num_inputs())
        .filter(|&i| cx.has_input(i))
        .map(|i| cx.shape(i))
        .collect();
    let Some(shapes) = shapes.filter(|s| !s.is_empty()) else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let rank = shapes[0].len();
    let a = axis(cx.attr_i("axis").unwrap_or(0), rank)?;
    let mut out = shapes[0].clone();
    out[a] = fixed(0);
    for s in &shapes {
        if s.len() != rank {
            bail!("Concat inputs have ranks {} and {}", rank, s.len());
        }
        for (i, d) in s.iter().enumerate() {
            if i == a {
                out[a] = match (&out[a], d) {
                    (Some(x), Some(y)) => Some(x.add(y)),
                    _ => None,
                };
            } else if out[i].is_none() {
                out[i] = d.clone();
            } else if let (Some(x), Some(y)) = (known(&out[i]), known(d)) {
                if x != y {
                    bail!("Concat inputs disagree on dim {i}: {x} vs {y}");
                }
            }
        }
    }
    cx.set_tensor(0, dtype, Some(out));
    if rank == 1 && dtype.is_some_and(|d| d.is_int()) {
        let parts: Option<Vec<Shape>> = (0..cx.num_inputs())
            .filter(|&i| cx.has_input(i))
            .map(|i| cx.dims_value(i))
            .collect();
        if let Some(parts) = parts {
            let dims: Shape = parts.into_iter().flatten().collect();
            if dtype == Some(DataType::Int64) {
                cx.set_info(0, Info::dims(dims, false));
            } else {
                cx.set_value(
                    0,
                    Known::Dims {
                        scalar: false,
                        dims,
                    },
                );
            }
        }
    }
    Ok(())
}

fn gather(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let (Some(data), Some(indices)) = (cx.shape(0).cloned(), cx.shape(1).cloned()) else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    if data.is_empty() {
        bail!("Gather data must have rank >= 1");
    }
    let a = axis(cx.attr_i("axis").unwrap_or(0), data.len())?;
    let out: Shape = data[..a]
        .iter()
        .chain(&indices)
        .chain(&data[a + 1..])
        .cloned()
        .collect();
    cx.set_tensor(0, dtype, Some(out));
    if data.len() == 1 {
        if let (Some(values), Some(idx)) = (cx.dims_value(0), cx.ints(1)) {
            let n = values.len() as i64;
            let picked: Option<Shape> = idx
                .iter()
                .map(|&i| values.get(if i < 0 { i + n } else { i } as usize).cloned())
                .collect();
            if let Some(dims) = picked {
                let scalar = indices.is_empty();
                if dtype == Some(DataType::Int64) {
                    cx.set_info(0, Info::dims(dims, scalar));
                } else if dtype.is_some_and(|d| d.is_int()) {
                    cx.set_value(0, Known::Dims { scalar, dims });
                }
            }
        }
    }
    Ok(())
}

/// Clamps a Slice bound as the spec does for step > 0 / step < 0.
fn slice_len(dim: i64, start: i64, end: i64, step: i64) -> (i64, i64) {
    let norm = |v: i64| if v < 0 { v + dim } else { v };
    let (s, e) = if step > 0 {
        (norm(start).clamp(0, dim), norm(end).clamp(0, dim))
    } else {
        (norm(start).clamp(0, dim - 1), norm(end).clamp(-1, dim - 1))
    };
    let len = if step > 0 {
        (e - s + step - 1).div_euclid(step)
    } else {
        (s - e + (-step) - 1).div_euclid(-step)
    };
    (s, len.max(0))
}

fn slice(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let Some(data) = cx.shape(0).cloned() else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let params = if cx.opset < 10 {
        match (cx.attr_ints("starts"), cx.attr_ints("ends")) {
            (Some(s), Some(e)) => Some((
                s.to_vec(),
                e.to_vec(),
                cx.attr_ints("axes").map(<[i64]>::to_vec),
                None,
            )),
            _ => None,
        }
    } else {
        let opt = |i: usize| {
            if cx.has_input(i) {
                cx.ints(i).map(Some)
            } else {
                Some(None)
            }
        };
        match (cx.ints(1), cx.ints(2), opt(3), opt(4)) {
            (Some(s), Some(e), Some(a), Some(st)) => Some((s, e, a, st)),
            _ => None,
        }
    };
    let Some((starts, ends, axes, steps)) = params else {
        // Which dims change is unknown, but the rank is kept.
        cx.set_tensor(0, dtype, Some(vec![None; data.len()]));
        return Ok(());
    };
    let axes: Vec<usize> = match axes {
        Some(a) => a
            .iter()
            .map(|&a| axis(a, data.len()))
            .collect::<Result<_, _>>()?,
        None => (0..starts.len()).collect(),
    };
    let steps = steps.unwrap_or_else(|| vec![1; starts.len()]);
    if starts.len() != ends.len() || axes.len() != starts.len() || steps.len() != starts.len() {
        bail!("Slice starts/ends/axes/steps have different lengths");
    }
    let mut out = data.clone();
    let mut picks = Vec::new();
    for (k, &a) in axes.iter().enumerate() {
        if steps[k] == 0 {
            bail!("Slice step is 0 on axis {a}");
        }
        out[a] = match known(&data[a]) {
            Some(dim) => {
                let (s, len) = slice_len(dim, starts[k], ends[k], steps[k]);
                picks.push((a, s, len, steps[k]));
                fixed(len)
            }
            None => None,
        };
    }
    cx.set_tensor(0, dtype, Some(out));
    if let (1, Some(values), [(0, s, len, step)]) = (data.len(), cx.dims_value(0), picks.as_slice())
    {
        let dims: Shape = (0..(*len).min(values.len() as i64))
            .map(|j| values.get((s + j * step) as usize).cloned().flatten())
            .collect();
        if dtype == Some(DataType::Int64) {
            cx.set_info(0, Info::dims(dims, false));
        }
    }
    Ok(())
}

fn expand(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let shape = match (cx.shape(0), cx.dims_value(1)) {
        (Some(s), Some(target)) => Some(broadcast(s, &target)?),
        // Without the input's rank or the target's values the output rank is unknown.
        _ => None,
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn transpose(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let Some(s) = cx.shape(0).cloned() else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    let perm: Vec<i64> = cx
        .attr_ints("perm")
        .filter(|p| !p.is_empty())
        .map_or_else(|| (0..s.len() as i64).rev().collect(), <[i64]>::to_vec);
    if perm.len() != s.len() {
        bail!("Transpose perm {perm:?} does not match rank {}", s.len());
    }
    let out: Shape = perm
        .iter()
        .map(|&p| axis(p, s.len()).map(|p| s[p].clone()))
        .collect::<Result<_, _>>()?;
    cx.set_tensor(0, dtype, Some(out));
    Ok(())
}

fn range(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let len = match (
        cx.floats(0).or_else(|| {
            cx.ints(0)
                .map(|v| v.into_iter().map(|x| x as f64).collect())
        }),
        cx.floats(1).or_else(|| {
            cx.ints(1)
                .map(|v| v.into_iter().map(|x| x as f64).collect())
        }),
        cx.floats(2).or_else(|| {
            cx.ints(2)
                .map(|v| v.into_iter().map(|x| x as f64).collect())
        }),
    ) {
        (Some(s), Some(l), Some(d))
            if s.len() == 1 && l.len() == 1 && d.len() == 1 && d[0] != 0.0 =>
        {
            fixed((((l[0] - s[0]) / d[0]).ceil()).max(0.0) as i64)
        }
        _ => None,
    };
    cx.set_tensor(0, dtype, Some(vec![len]));
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("Constant", 1, constant),
    op("ConstantOfShape", 9, constant_of_shape),
    op("Shape", 1, shape_op),
    op("Size", 1, size),
    op("Cast", 1, cast),
    op("CastLike", 15, cast_like),
    op("Identity", 1, identity),
    op("Reshape", 1, reshape),
    op("Flatten", 1, flatten),
    op("Squeeze", 1, squeeze),
    op("Unsqueeze", 1, unsqueeze),
    op("Concat", 1, concat),
    op("Gather", 1, gather),
    op("Slice", 1, slice),
    op("Expand", 8, expand),
    op("Transpose", 1, transpose),
    op("Range", 11, range),
];
