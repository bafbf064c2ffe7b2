//! Kernels of the indexing family (inference: `families/indexing.rs`).

use super::shape::{checked_numel, gather_axis, int_input, narrow, norm_indices, take};
use crate::exec::util::{
    concat_flat, norm_axis, scalar_i64, strides, to_f64s, to_i64s, zeros, FloatConv,
};
use crate::exec::{kernel, kernel_range, KResult, KernelDef, RunCx, Value};
use crate::{for_float, for_numeric};
use std::cmp::Ordering;
use tensor::{DataType, Element, Tensor};

// ---------------------------------------------------------------------------------------------
// Arithmetic the scatter reductions and cumulative ops need (integers wrap like numpy).

trait Arith: Element + PartialOrd {
    fn zero() -> Self;
    fn one() -> Self;
    fn add(self, o: Self) -> Self;
    fn mul(self, o: Self) -> Self;
    fn is_nan(self) -> bool;
}

macro_rules! arith_int {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn zero() -> Self { 0 }
            fn one() -> Self { 1 }
            fn add(self, o: Self) -> Self { self.wrapping_add(o) }
            fn mul(self, o: Self) -> Self { self.wrapping_mul(o) }
            fn is_nan(self) -> bool { false }
        }
    )*};
}
arith_int!(i8, i16, i32, i64, u8, u16, u32, u64);

macro_rules! arith_float {
    ($($t:ty),*) => {$(
        impl Arith for $t {
            fn zero() -> Self { <$t as FloatConv>::from_f32(0.0) }
            fn one() -> Self { <$t as FloatConv>::from_f32(1.0) }
            fn add(self, o: Self) -> Self { self + o }
            fn mul(self, o: Self) -> Self { self * o }
            #[allow(clippy::eq_op)]
            fn is_nan(self) -> bool { self != self }
        }
    )*};
}
arith_float!(f32, f64, half::f16, half::bf16);

/// Total order for sorting: NaN sorts after everything (numpy's order).
fn total_cmp<T: Arith>(a: T, b: T) -> Ordering {
    match a.partial_cmp(&b) {
        Some(o) => o,
        None => a.is_nan().cmp(&b.is_nan()),
    }
}

/// numpy maximum/minimum: NaN propagates.
fn np_max<T: Arith>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        if a.is_nan() {
            a
        } else {
            b
        }
    } else if b > a {
        b
    } else {
        a
    }
}

fn np_min<T: Arith>(a: T, b: T) -> T {
    if a.is_nan() || b.is_nan() {
        if a.is_nan() {
            a
        } else {
            b
        }
    } else if b < a {
        b
    } else {
        a
    }
}

/// `[0, 1]` in `dtype` (for kernels that pick between zero and one by offset).
fn zero_one(cx: &RunCx, dtype: DataType) -> KResult<Tensor> {
    if dtype == DataType::Bool {
        return Ok(Tensor::from_vec(vec![2], vec![false, true])?);
    }
    for_numeric!(dtype, T => {
        Ok(Tensor::from_vec(vec![2], vec![<T as Arith>::zero(), <T as Arith>::one()])?)
    } else Err(cx.unsupported(dtype)))
}

/// The outer/dim/inner split of `shape` around `axis`.
fn split3(shape: &[usize], axis: usize) -> (usize, usize, usize) {
    (
        shape[..axis].iter().product(),
        shape[axis],
        shape[axis + 1..].iter().product(),
    )
}

// ---------------------------------------------------------------------------------------------

/// Compress: keeps the slices along `axis` (or flattened elements) whose condition is true.
fn compress(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let c = cx.input(1)?;
    if c.dtype() != DataType::Bool || c.rank() != 1 {
        return Err(cx.invalid(format!(
            "Compress condition must be a 1-D bool tensor, got {}{:?}",
            c.dtype(),
            c.shape()
        )));
    }
    let cond = c.to_vec::<bool>()?;
    let (t, axis) = match cx.attr_i("axis")? {
        Some(a) => (t.clone(), norm_axis(a, t.rank())?),
        None => (t.reshape(vec![t.len()])?, 0),
    };
    let dim = t.shape()[axis];
    let idx: Vec<usize> = cond
        .iter()
        .enumerate()
        .filter(|&(_, &b)| b)
        .map(|(i, _)| i)
        .collect();
    if let Some(&i) = idx.iter().find(|&&i| i >= dim) {
        return Err(cx.invalid(format!(
            "Compress condition selects index {i} but the axis has size {dim}"
        )));
    }
    Ok(vec![gather_axis(&t, axis, &idx, &[idx.len()])?.into()])
}

/// Shared body of CumSum and CumProd.
fn cumulative(cx: &RunCx, product: bool) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let axis = scalar_i64(cx.input(1)?, "axis")?;
    if t.rank() == 0 {
        return Err(cx.invalid("cumulative ops need an input of rank >= 1"));
    }
    let axis = norm_axis(axis, t.rank())?;
    let exclusive = cx.int("exclusive", 0)? != 0;
    let reverse = cx.int("reverse", 0)? != 0;
    let (outer, dim, inner) = split3(t.shape(), axis);
    for_numeric!(t.dtype(), T => {
        let v = t.to_vec::<T>()?;
        let mut out = v.clone();
        let init = if product { <T as Arith>::one() } else { <T as Arith>::zero() };
        let op = |a: T, b: T| if product { a.mul(b) } else { a.add(b) };
        for o in 0..outer {
            for i in 0..inner {
                let mut acc = init;
                for k in 0..dim {
                    let kk = if reverse { dim - 1 - k } else { k };
                    let off = (o * dim + kk) * inner + i;
                    if exclusive {
                        out[off] = acc;
                        acc = op(acc, v[off]);
                    } else {
                        acc = op(acc, v[off]);
                        out[off] = acc;
                    }
                }
            }
        }
        Ok(vec![Tensor::from_vec(t.shape().to_vec(), out)?.into()])
    } else Err(cx.unsupported(t.dtype())))
}

/// CumSum: running sum along `axis` (exclusive / reverse options).
fn cumsum(cx: &RunCx) -> KResult<Vec<Value>> {
    cumulative(cx, false)
}

/// CumProd: running product along `axis` (exclusive / reverse options).
fn cumprod(cx: &RunCx) -> KResult<Vec<Value>> {
    cumulative(cx, true)
}

/// Determinant of an n×n row-major matrix (LU with partial pivoting, in f64).
fn det_f64(m: &mut [f64], n: usize) -> f64 {
    let mut det = 1.0;
    for c in 0..n {
        let mut p = c;
        for r in c + 1..n {
            if m[r * n + c].abs() > m[p * n + c].abs() {
                p = r;
            }
        }
        if m[p * n + c] == 0.0 {
            return 0.0;
        }
        if p != c {
            for k in 0..n {
                m.swap(c * n + k, p * n + k);
            }
            det = -det;
        }
        let d = m[c * n + c];
        det *= d;
        for r in c + 1..n {
            let f = m[r * n + c] / d;
            if f != 0.0 {
                for k in c..n {
                    m[r * n + k] -= f * m[c * n + k];
                }
            }
        }
    }
    det
}

/// Det: determinants of the trailing square matrices.
fn det(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let r = t.rank();
    if r < 2 || t.shape()[r - 1] != t.shape()[r - 2] {
        return Err(cx.invalid(format!("Det needs [*, M, M] input, got {:?}", t.shape())));
    }
    let n = t.shape()[r - 1];
    let batch_shape = t.shape()[..r - 2].to_vec();
    for_float!(t.dtype(), T => {
        let v = t.to_vec::<T>()?;
        let batches: usize = batch_shape.iter().product();
        let mut out = Vec::with_capacity(batches);
        for b in 0..batches {
            let mut m: Vec<f64> = v[b * n * n..(b + 1) * n * n].iter().map(|x| x.to_f64()).collect();
            out.push(T::from_f64(det_f64(&mut m, n)));
        }
        Ok(vec![Tensor::from_vec(batch_shape, out)?.into()])
    } else Err(cx.unsupported(t.dtype())))
}

/// EyeLike: ones on the k-th diagonal of a 2-D tensor shaped like the input.
fn eye_like(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    if t.rank() != 2 {
        return Err(cx.invalid(format!(
            "EyeLike needs a 2-D input, got shape {:?}",
            t.shape()
        )));
    }
    let dtype = match cx.attr_i("dtype")? {
        Some(code) => DataType::from_onnx(code as i32)
            .ok_or_else(|| cx.invalid(format!("EyeLike dtype {code} is not a known type")))?,
        None => t.dtype(),
    };
    let k = cx.int("k", 0)?;
    let (rows, cols) = (t.shape()[0], t.shape()[1]);
    let zo = zero_one(cx, dtype)?;
    let offs: Vec<usize> = (0..rows * cols)
        .map(|i| ((i % cols) as i64 - (i / cols) as i64 == k) as usize)
        .collect();
    Ok(vec![take(&zo, &offs, vec![rows, cols])?.into()])
}

/// For GatherElements/ScatterElements: the flat data offset each index addresses — the index's
/// own position with its `axis` coordinate replaced by the (normalised) index value. An indices
/// tensor larger than the data on another axis is an error naming both shapes.
fn element_offsets(
    cx: &RunCx,
    indices_shape: &[usize],
    data_shape: &[usize],
    axis: usize,
    idx: &[usize],
) -> KResult<Vec<usize>> {
    let ist = strides(indices_shape);
    let dst = strides(data_shape);
    let mut offs = Vec::with_capacity(idx.len());
    for (flat, &j) in idx.iter().enumerate() {
        let mut off = 0;
        let mut rem = flat;
        for d in 0..data_shape.len() {
            let c = rem / ist[d];
            rem %= ist[d];
            let c = if d == axis { j } else { c };
            if c >= data_shape[d] {
                return Err(cx.invalid(format!(
                    "{} indices shape {indices_shape:?} exceeds data shape {data_shape:?} on axis {d}",
                    cx.op()
                )));
            }
            off += c * dst[d];
        }
        offs.push(off);
    }
    Ok(offs)
}

/// GatherElements: `out[i..] = data[.., idx[i..], ..]` along `axis`, shaped like the indices.
fn gather_elements(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let it = cx.input(1)?;
    let idx = int_input(cx, 1, "indices")?;
    let r = t.rank();
    if it.rank() != r || r == 0 {
        return Err(cx.invalid(format!(
            "GatherElements indices {:?} must have the data's rank (data {:?})",
            it.shape(),
            t.shape()
        )));
    }
    let axis = norm_axis(cx.int("axis", 0)?, r)?;
    let dim = t.shape()[axis];
    let idx = norm_indices(cx, &idx, dim, "GatherElements")?;
    let offs = element_offsets(cx, it.shape(), t.shape(), axis, &idx)?;
    Ok(vec![take(t, &offs, it.shape().to_vec())?.into()])
}

/// For ScatterND/GatherND: the data offset of each index tuple (last dim of `indices`) and the
/// slice size it addresses; `batch_dims` leading dims are shared between data and indices.
fn nd_offsets(
    cx: &RunCx,
    data: &[usize],
    ishape: &[usize],
    idx: &[i64],
    batch_dims: usize,
) -> KResult<(Vec<usize>, usize)> {
    let q = ishape.len();
    if q == 0 || batch_dims >= q || batch_dims > data.len() {
        return Err(cx.invalid(format!(
            "indices shape {ishape:?} with batch_dims {batch_dims} does not fit data {data:?}"
        )));
    }
    let k = ishape[q - 1];
    if batch_dims + k > data.len() || data[..batch_dims] != ishape[..batch_dims] {
        return Err(cx.invalid(format!(
            "indices shape {ishape:?} (batch_dims {batch_dims}) does not fit data {data:?}"
        )));
    }
    let dst = strides(data);
    let slice: usize = data[batch_dims + k..].iter().product();
    let tuples = idx
        .len()
        .checked_div(k)
        .unwrap_or_else(|| ishape[..q - 1].iter().product());
    let per_batch: usize = ishape[batch_dims..q - 1].iter().product();
    let mut offs = Vec::with_capacity(tuples);
    for tno in 0..tuples {
        let b = tno.checked_div(per_batch).unwrap_or(0);
        let mut off = if batch_dims > 0 {
            b * dst[batch_dims - 1]
        } else {
            0
        };
        for j in 0..k {
            let d = batch_dims + j;
            let v = idx[tno * k + j];
            let dim = data[d] as i64;
            let v2 = if v < 0 { v + dim } else { v };
            if v2 < 0 || v2 >= dim {
                return Err(cx.invalid(format!(
                    "index {v} is out of range for data dim {d} of size {dim}"
                )));
            }
            off += v2 as usize * dst[d];
        }
        offs.push(off);
    }
    Ok((offs, slice))
}

/// GatherND: gathers slices addressed by index tuples (with `batch_dims`, opset 12+).
fn gather_nd(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let it = cx.input(1)?;
    let idx = int_input(cx, 1, "indices")?;
    let b = cx.int("batch_dims", 0)?;
    if b < 0 {
        return Err(cx.invalid(format!("GatherND batch_dims must be >= 0, got {b}")));
    }
    let b = b as usize;
    let (starts, slice) = nd_offsets(cx, t.shape(), it.shape(), &idx, b)?;
    let q = it.rank();
    let k = it.shape()[q - 1];
    let mut out_shape = it.shape()[..q - 1].to_vec();
    out_shape.extend_from_slice(&t.shape()[b + k..]);
    checked_numel(cx, &out_shape)?;
    let mut offs = Vec::with_capacity(starts.len() * slice);
    for s in starts {
        offs.extend(s..s + slice);
    }
    Ok(vec![take(t, &offs, out_shape)?.into()])
}

/// NonMaxSuppression: greedy per-(batch, class) box selection by score and IoU.
fn non_max_suppression(cx: &RunCx) -> KResult<Vec<Value>> {
    let boxes = cx.input(0)?;
    let scores = cx.input(1)?;
    if boxes.dtype() != DataType::Float || scores.dtype() != DataType::Float {
        return Err(cx.unsupported(boxes.dtype()));
    }
    if boxes.rank() != 3 || boxes.shape()[2] != 4 || scores.rank() != 3 {
        return Err(cx.invalid(format!(
            "NonMaxSuppression needs boxes [B, N, 4] and scores [B, C, N], got {:?} and {:?}",
            boxes.shape(),
            scores.shape()
        )));
    }
    let (nb, nbox) = (boxes.shape()[0], boxes.shape()[1]);
    let nc = scores.shape()[1];
    if scores.shape()[0] != nb || scores.shape()[2] != nbox {
        return Err(cx.invalid(format!(
            "NonMaxSuppression boxes {:?} and scores {:?} disagree",
            boxes.shape(),
            scores.shape()
        )));
    }
    let max_out = match cx.opt_input(2)? {
        Some(t) if !t.is_empty() => to_i64s(t)?[0].max(0) as usize,
        _ => 0,
    };
    let f32_of = |i: usize| -> KResult<Option<f32>> {
        match cx.opt_input(i)? {
            Some(t) if !t.is_empty() => Ok(Some(t.to_vec::<f32>()?[0])),
            _ => Ok(None),
        }
    };
    let iou_th = f32_of(3)?.unwrap_or(0.0);
    let score_th = f32_of(4)?;
    let center = cx.int("center_point_box", 0)? != 0;
    let bv = boxes.to_vec::<f32>()?;
    let sv = scores.to_vec::<f32>()?;
    // Corners (xmin, xmax, ymin, ymax) of a box.
    let corners = |b: &[f32]| -> (f32, f32, f32, f32) {
        if center {
            let (hw, hh) = (b[2] / 2.0, b[3] / 2.0);
            (b[0] - hw, b[0] + hw, b[1] - hh, b[1] + hh)
        } else {
            (
                b[1].min(b[3]),
                b[1].max(b[3]),
                b[0].min(b[2]),
                b[0].max(b[2]),
            )
        }
    };
    let suppress = |a: &[f32], b: &[f32]| -> bool {
        let (ax0, ax1, ay0, ay1) = corners(a);
        let (bx0, bx1, by0, by1) = corners(b);
        let ix0 = ax0.max(bx0);
        let ix1 = ax1.min(bx1);
        if ix1 <= ix0 {
            return false;
        }
        let iy0 = ay0.max(by0);
        let iy1 = ay1.min(by1);
        if iy1 <= iy0 {
            return false;
        }
        let inter = (ix1 - ix0) * (iy1 - iy0);
        if inter <= 0.0 {
            return false;
        }
        let a1 = (ax1 - ax0) * (ay1 - ay0);
        let a2 = (bx1 - bx0) * (by1 - by0);
        let uni = a1 + a2 - inter;
        if a1 <= 0.0 || a2 <= 0.0 || uni <= 0.0 {
            return false;
        }
        inter / uni > iou_th
    };
    let mut sel: Vec<i64> = Vec::new();
    for b in 0..nb {
        let bb = &bv[b * nbox * 4..(b + 1) * nbox * 4];
        for c in 0..nc {
            let sc = &sv[(b * nc + c) * nbox..(b * nc + c + 1) * nbox];
            let mut cand: Vec<usize> = (0..nbox)
                .filter(|&i| score_th.is_none_or(|th| sc[i] > th))
                .collect();
            // Highest score first; ties keep the lower box index first.
            cand.sort_by(|&i, &j| {
                sc[j]
                    .partial_cmp(&sc[i])
                    .unwrap_or(Ordering::Equal)
                    .then(i.cmp(&j))
            });
            let mut kept: Vec<usize> = Vec::new();
            for i in cand {
                if kept.len() >= max_out {
                    break;
                }
                let bi = &bb[i * 4..i * 4 + 4];
                if kept.iter().all(|&j| !suppress(bi, &bb[j * 4..j * 4 + 4])) {
                    kept.push(i);
                    sel.extend([b as i64, c as i64, i as i64]);
                }
            }
        }
    }
    Ok(vec![Tensor::from_vec(vec![sel.len() / 3, 3], sel)?.into()])
}

/// Whether each element is nonzero (strings: non-empty).
fn nonzero_mask(cx: &RunCx, t: &Tensor) -> KResult<Vec<bool>> {
    if let Some(s) = t.strings() {
        return Ok(s.iter().map(|x| !x.is_empty()).collect());
    }
    match t.dtype() {
        DataType::Bool => return Ok(t.to_vec::<bool>()?),
        DataType::Complex64 => {
            return Ok(t
                .to_vec::<tensor::Complex<f32>>()?
                .iter()
                .map(|c| c.re != 0.0 || c.im != 0.0)
                .collect())
        }
        DataType::Complex128 => {
            return Ok(t
                .to_vec::<tensor::Complex<f64>>()?
                .iter()
                .map(|c| c.re != 0.0 || c.im != 0.0)
                .collect())
        }
        _ => {}
    }
    for_numeric!(t.dtype(), T => {
        let z = <T as Arith>::zero();
        Ok(t.to_vec::<T>()?.into_iter().map(|x| x != z).collect())
    } else Err(cx.unsupported(t.dtype())))
}

/// NonZero: the coordinates of nonzero elements, as int64 `[rank, count]`.
fn non_zero(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let mask = nonzero_mask(cx, t)?;
    let r = t.rank();
    let st = strides(t.shape());
    let hits: Vec<usize> = (0..mask.len()).filter(|&i| mask[i]).collect();
    let n = hits.len();
    if r == 0 {
        // The reference answers a scalar with shape [0, count].
        return Ok(vec![Tensor::from_vec(vec![0, n], Vec::<i64>::new())?.into()]);
    }
    let mut out = vec![0i64; r * n];
    for (j, &h) in hits.iter().enumerate() {
        let mut rem = h;
        for d in 0..r {
            out[d * n + j] = (rem / st[d]) as i64;
            rem %= st[d];
        }
    }
    Ok(vec![Tensor::from_vec(vec![r, n], out)?.into()])
}

/// OneHot: `values[1]` where the new `axis` coordinate equals the index, `values[0]` elsewhere.
fn one_hot(cx: &RunCx) -> KResult<Vec<Value>> {
    let it = cx.input(0)?;
    let idx = to_f64s(it)?;
    let depth_t = cx.input(1)?;
    if depth_t.len() != 1 {
        return Err(cx.invalid(format!(
            "OneHot depth must be a scalar, got shape {:?}",
            depth_t.shape()
        )));
    }
    let depth = to_f64s(depth_t)?[0].ceil();
    if depth.is_nan() || depth < 1.0 || depth > super::shape::MAX_ELEMENTS as f64 {
        return Err(cx.invalid(format!("OneHot depth must be positive, got {depth}")));
    }
    let depth = depth as usize;
    let values = cx.input(2)?;
    if values.len() != 2 {
        return Err(cx.invalid(format!(
            "OneHot values must hold [off, on], got shape {:?}",
            values.shape()
        )));
    }
    let r = it.rank();
    let axis = cx.int("axis", -1)?;
    let axis = norm_axis(axis, r + 1)?;
    let mut out_shape = it.shape().to_vec();
    out_shape.insert(axis, depth);
    let n = checked_numel(cx, &out_shape)?;
    let (outer, inner) = (
        it.shape()[..axis].iter().product::<usize>(),
        it.shape()[axis..].iter().product::<usize>(),
    );
    let mut offs = vec![0usize; n];
    for o in 0..outer {
        for i in 0..inner {
            let mut v = idx[o * inner + i];
            if v < 0.0 {
                v += depth as f64;
            }
            if v >= 0.0 && v < depth as f64 && v.fract() == 0.0 {
                offs[(o * depth + v as usize) * inner + i] = 1;
            }
        }
    }
    let values = values.reshape(vec![2])?;
    Ok(vec![take(&values, &offs, out_shape)?.into()])
}

/// ReverseSequence: reverses the first `sequence_lens[b]` time steps of each batch entry.
fn reverse_sequence(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let lens = to_i64s(cx.input(1)?)?;
    if t.rank() < 2 {
        return Err(cx.invalid(format!(
            "ReverseSequence needs rank >= 2, got {:?}",
            t.shape()
        )));
    }
    let ta = cx.int("time_axis", 0)?;
    let ba = cx.int("batch_axis", 1)?;
    if !matches!((ta, ba), (0, 1) | (1, 0)) {
        return Err(cx.invalid(format!(
            "ReverseSequence time_axis/batch_axis must be 0/1 or 1/0, got {ta}/{ba}"
        )));
    }
    let (ta, ba) = (ta as usize, ba as usize);
    let shape = t.shape();
    let (nb, nt) = (shape[ba], shape[ta]);
    if lens.len() != nb {
        return Err(cx.invalid(format!(
            "ReverseSequence sequence_lens has {} entries for batch size {nb}",
            lens.len()
        )));
    }
    if let Some(l) = lens.iter().find(|&&l| l < 0 || l as usize > nt) {
        return Err(cx.invalid(format!(
            "ReverseSequence length {l} is out of range 0..={nt}"
        )));
    }
    let st = strides(shape);
    let inner: usize = shape[2..].iter().product();
    let mut offs = Vec::with_capacity(t.len());
    for a in 0..shape[0] {
        for b in 0..shape[1] {
            let (bi, ti) = if ba == 0 { (a, b) } else { (b, a) };
            let l = lens[bi] as usize;
            let src_t = if ti < l { l - 1 - ti } else { ti };
            let base = bi * st[ba] + src_t * st[ta];
            offs.extend(base..base + inner);
        }
    }
    Ok(vec![take(t, &offs, shape.to_vec())?.into()])
}

/// The reduction of a scatter op: `None` replaces.
#[derive(Clone, Copy, PartialEq)]
enum Reduction {
    None,
    Add,
    Mul,
    Max,
    Min,
}

fn reduction(cx: &RunCx) -> KResult<Reduction> {
    match cx.string("reduction", "none")?.as_str() {
        "none" => Ok(Reduction::None),
        "add" => Ok(Reduction::Add),
        "mul" => Ok(Reduction::Mul),
        "max" => Ok(Reduction::Max),
        "min" => Ok(Reduction::Min),
        other => Err(cx.invalid(format!(
            "reduction must be none, add, mul, max or min, got '{other}'"
        ))),
    }
}

/// Writes `updates[j]` into `data[targets[j]]` in order, combining by `red`.
fn scatter_apply(
    cx: &RunCx,
    data: &Tensor,
    updates: &Tensor,
    targets: &[usize],
    red: Reduction,
) -> KResult<Tensor> {
    if data.dtype() != updates.dtype() {
        return Err(cx.invalid(format!(
            "updates type {} differs from data type {}",
            updates.dtype(),
            data.dtype()
        )));
    }
    if red == Reduction::None {
        let n = data.len();
        let mut offs: Vec<usize> = (0..n).collect();
        for (j, &t) in targets.iter().enumerate() {
            offs[t] = n + j;
        }
        let flat = concat_flat(&[data, updates], data.dtype(), vec![n + updates.len()])?;
        return take(&flat, &offs, data.shape().to_vec());
    }
    for_numeric!(data.dtype(), T => {
        let mut v = data.to_vec::<T>()?;
        let u = updates.to_vec::<T>()?;
        for (j, &t) in targets.iter().enumerate() {
            v[t] = match red {
                Reduction::Add => v[t].add(u[j]),
                Reduction::Mul => v[t].mul(u[j]),
                Reduction::Max => np_max(v[t], u[j]),
                Reduction::Min => np_min(v[t], u[j]),
                Reduction::None => u[j],
            };
        }
        Ok(Tensor::from_vec(data.shape().to_vec(), v)?)
    } else Err(cx.unsupported(data.dtype())))
}

/// ScatterElements (and the deprecated Scatter): writes updates at per-element indices on `axis`.
fn scatter_elements(cx: &RunCx) -> KResult<Vec<Value>> {
    let data = cx.input(0)?;
    let it = cx.input(1)?;
    let upd = cx.input(2)?;
    let idx = int_input(cx, 1, "indices")?;
    let r = data.rank();
    if it.shape() != upd.shape() || it.rank() != r || r == 0 {
        return Err(cx.invalid(format!(
            "indices {:?} and updates {:?} must have one shape of the data's rank ({:?})",
            it.shape(),
            upd.shape(),
            data.shape()
        )));
    }
    let red = if cx.op() == "Scatter" {
        Reduction::None
    } else {
        reduction(cx)?
    };
    let axis = norm_axis(cx.int("axis", 0)?, r)?;
    let idx = norm_indices(cx, &idx, data.shape()[axis], cx.op())?;
    let targets = element_offsets(cx, it.shape(), data.shape(), axis, &idx)?;
    Ok(vec![scatter_apply(cx, data, upd, &targets, red)?.into()])
}

/// ScatterND: writes update slices at index tuples.
fn scatter_nd(cx: &RunCx) -> KResult<Vec<Value>> {
    let data = cx.input(0)?;
    let it = cx.input(1)?;
    let upd = cx.input(2)?;
    let idx = int_input(cx, 1, "indices")?;
    let red = reduction(cx)?;
    let (starts, slice) = nd_offsets(cx, data.shape(), it.shape(), &idx, 0)?;
    let q = it.rank();
    let k = it.shape()[q - 1];
    let mut want = it.shape()[..q - 1].to_vec();
    want.extend_from_slice(&data.shape()[k..]);
    if upd.shape() != want.as_slice() {
        return Err(cx.invalid(format!(
            "ScatterND updates must have shape {want:?}, got {:?}",
            upd.shape()
        )));
    }
    let mut targets = Vec::with_capacity(upd.len());
    for s in starts {
        targets.extend(s..s + slice);
    }
    Ok(vec![scatter_apply(cx, data, upd, &targets, red)?.into()])
}

/// Split lengths: explicit, or `n` parts (the last smaller when uneven, opset 18's rule).
fn split_lengths(cx: &RunCx, dim: usize, split: Option<Vec<i64>>, n: usize) -> KResult<Vec<usize>> {
    match split {
        Some(s) => {
            if s.iter().any(|&x| x < 0) || s.iter().sum::<i64>() != dim as i64 {
                return Err(cx.invalid(format!(
                    "split {s:?} must be non-negative and sum to the axis size {dim}"
                )));
            }
            Ok(s.iter().map(|&x| x as usize).collect())
        }
        None => {
            if n == 0 {
                return Err(cx.invalid("Split needs at least one output"));
            }
            if dim.is_multiple_of(n) {
                Ok(vec![dim / n; n])
            } else {
                let c = dim.div_ceil(n);
                if c * (n - 1) > dim {
                    return Err(
                        cx.invalid(format!("cannot split an axis of size {dim} into {n} parts"))
                    );
                }
                let mut v = vec![c; n];
                v[n - 1] = dim - c * (n - 1);
                Ok(v)
            }
        }
    }
}

/// Split: cuts the input along `axis` into the node's outputs.
fn split(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    if t.rank() == 0 {
        return Err(cx.invalid("Split needs an input of rank >= 1"));
    }
    let axis = norm_axis(cx.int("axis", 0)?, t.rank())?;
    let dim = t.shape()[axis];
    let explicit = if cx.opset >= 13 || (cx.opset < 2 && cx.has_input(1)) {
        if cx.has_input(1) {
            Some(int_input(cx, 1, "split")?)
        } else {
            None
        }
    } else {
        cx.attr_ints("split")?.map(|s| s.to_vec())
    };
    let n = if cx.opset >= 18 && explicit.is_none() {
        match cx.attr_i("num_outputs")? {
            Some(k) if k >= 1 => {
                if k as usize != cx.num_outputs() {
                    return Err(cx.invalid(format!(
                        "Split num_outputs {k} but the node has {} outputs",
                        cx.num_outputs()
                    )));
                }
                k as usize
            }
            Some(k) => return Err(cx.invalid(format!("Split num_outputs must be >= 1, got {k}"))),
            None => cx.num_outputs(),
        }
    } else {
        cx.num_outputs()
    };
    let lens = split_lengths(cx, dim, explicit, n)?;
    if lens.len() != cx.num_outputs() {
        return Err(cx.invalid(format!(
            "Split into {} parts but the node has {} outputs",
            lens.len(),
            cx.num_outputs()
        )));
    }
    let mut out = Vec::with_capacity(lens.len());
    let mut pos = 0;
    for l in lens {
        out.push(narrow(t, axis, pos, l)?.into());
        pos += l;
    }
    Ok(out)
}

/// SplitToSequence: like Split but into a sequence (default: pieces of 1, `keepdims` applies).
fn split_to_sequence(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    if t.rank() == 0 {
        return Err(cx.invalid("SplitToSequence needs an input of rank >= 1"));
    }
    let axis = norm_axis(cx.int("axis", 0)?, t.rank())?;
    let dim = t.shape()[axis];
    let mut items = Vec::new();
    match cx.opt_input(1)? {
        None => {
            let keep = cx.int("keepdims", 1)? != 0;
            for i in 0..dim {
                let p = narrow(t, axis, i, 1)?;
                items.push(if keep {
                    p
                } else {
                    let mut s = p.shape().to_vec();
                    s.remove(axis);
                    p.reshape(s)?
                });
            }
        }
        Some(s) => {
            let v = int_input(cx, 1, "split")?;
            let lens: Vec<usize> = if s.rank() == 0 {
                let l = v[0];
                if l <= 0 {
                    return Err(cx.invalid(format!("split must be positive, got {l}")));
                }
                let l = l as usize;
                let mut lens = vec![l; dim / l];
                if dim % l > 0 {
                    lens.push(dim % l);
                }
                lens
            } else {
                split_lengths(cx, dim, Some(v), 0)?
            };
            let mut pos = 0;
            for l in lens {
                items.push(narrow(t, axis, pos, l)?);
                pos += l;
            }
        }
    }
    Ok(vec![Value::Sequence {
        elem_type: t.dtype(),
        items,
    }])
}

/// TensorScatter: writes `update` into a KV cache at per-batch `write_indices` along `axis`.
fn tensor_scatter(cx: &RunCx) -> KResult<Vec<Value>> {
    let cache = cx.input(0)?;
    let upd = cx.input(1)?;
    let r = cache.rank();
    if r < 2 || upd.rank() != r {
        return Err(cx.invalid(format!(
            "TensorScatter needs cache and update of one rank >= 2, got {:?} and {:?}",
            cache.shape(),
            upd.shape()
        )));
    }
    let axis = norm_axis(cx.int("axis", -2)?, r)?;
    if axis == 0 {
        return Err(cx.invalid("TensorScatter axis must not be the batch axis 0"));
    }
    let circular = match cx.string("mode", "linear")?.as_str() {
        "linear" => false,
        "circular" => true,
        m => {
            return Err(cx.invalid(format!(
                "TensorScatter mode must be linear or circular, got '{m}'"
            )))
        }
    };
    let (cs, us) = (cache.shape(), upd.shape());
    for d in 0..r {
        if (d != axis && cs[d] != us[d]) || (d == axis && us[d] > cs[d]) {
            return Err(cx.invalid(format!(
                "TensorScatter update {us:?} does not fit cache {cs:?}"
            )));
        }
    }
    let wi = match cx.opt_input(2)? {
        Some(w) => to_i64s(w)?,
        None => vec![0; cs[0]],
    };
    if wi.len() != cs[0] {
        return Err(cx.invalid(format!(
            "TensorScatter write_indices has {} entries for batch size {}",
            wi.len(),
            cs[0]
        )));
    }
    let (outer, max_len, inner) = split3(cs, axis);
    let seq = us[axis];
    let per_batch = outer / cs[0].max(1);
    let mut targets = Vec::with_capacity(upd.len());
    for o in 0..outer {
        let b = o.checked_div(per_batch).unwrap_or(0);
        for s in 0..seq {
            let mut pos = wi[b].saturating_add(s as i64);
            if circular && max_len > 0 {
                pos = pos.rem_euclid(max_len as i64);
            }
            if pos < 0 || pos >= max_len as i64 {
                return Err(cx.invalid(format!(
                    "TensorScatter write position {pos} is out of range for a cache of length {max_len}"
                )));
            }
            let base = (o * max_len + pos as usize) * inner;
            targets.extend(base..base + inner);
        }
    }
    Ok(vec![scatter_apply(
        cx,
        cache,
        upd,
        &targets,
        Reduction::None,
    )?
    .into()])
}

/// Tile: repeats the input `repeats[d]` times along each axis (opset 1: one axis, `tiles` times).
fn tile(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let r = t.rank();
    let reps: Vec<i64> = if cx.opset < 6 {
        let tiles = scalar_i64(cx.input(1)?, "tiles")?;
        let axis = norm_axis(scalar_i64(cx.input(2)?, "axis")?, r)?;
        let mut v = vec![1; r];
        v[axis] = tiles;
        v
    } else {
        int_input(cx, 1, "repeats")?
    };
    if reps.len() != r || reps.iter().any(|&x| x < 0) {
        return Err(cx.invalid(format!(
            "Tile repeats {reps:?} must be {r} non-negative values for input {:?}",
            t.shape()
        )));
    }
    let shape = t.shape();
    let mut out = Vec::with_capacity(r);
    for d in 0..r {
        out.push(
            shape[d]
                .checked_mul(reps[d] as usize)
                .ok_or_else(|| cx.invalid("Tile output is too large"))?,
        );
    }
    let n = checked_numel(cx, &out)?;
    let st = strides(shape);
    let ost = strides(&out);
    let mut offs = Vec::with_capacity(n);
    for i in 0..n {
        let mut rem = i;
        let mut off = 0;
        for d in 0..r {
            let c = rem / ost[d];
            rem %= ost[d];
            off += (c % shape[d]) * st[d];
        }
        offs.push(off);
    }
    Ok(vec![take(t, &offs, out)?.into()])
}

/// TopK: the k largest (or smallest) along `axis`, ties broken by the lower index.
fn top_k(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let k = if cx.opset < 10 {
        cx.attr_i("k")?
            .ok_or_else(|| cx.invalid("TopK-1 needs the 'k' attribute"))?
    } else {
        scalar_i64(cx.input(1)?, "K")?
    };
    if t.rank() == 0 {
        return Err(cx.invalid("TopK needs an input of rank >= 1"));
    }
    let axis = norm_axis(cx.int("axis", -1)?, t.rank())?;
    let largest = cx.opset < 11 || cx.int("largest", 1)? != 0;
    let (outer, dim, inner) = split3(t.shape(), axis);
    if k < 0 || k as usize > dim {
        return Err(cx.invalid(format!(
            "TopK k={k} is out of range for an axis of size {dim}"
        )));
    }
    let k = k as usize;
    let mut out_shape = t.shape().to_vec();
    out_shape[axis] = k;
    let order: Vec<usize>;
    let mut idx_out = vec![0i64; outer * k * inner];
    for_numeric!(t.dtype(), T => {
        let v = t.to_vec::<T>()?;
        let mut lane: Vec<usize> = Vec::with_capacity(dim);
        let mut offs = vec![0usize; outer * k * inner];
        for o in 0..outer {
            for i in 0..inner {
                lane.clear();
                lane.extend(0..dim);
                let at = |j: usize| v[(o * dim + j) * inner + i];
                lane.sort_by(|&a, &b| {
                    let c = total_cmp(at(a), at(b));
                    let c = if largest { c.reverse() } else { c };
                    c.then(a.cmp(&b))
                });
                for (p, &j) in lane[..k].iter().enumerate() {
                    let dst = (o * k + p) * inner + i;
                    offs[dst] = (o * dim + j) * inner + i;
                    idx_out[dst] = j as i64;
                }
            }
        }
        order = offs;
    } else return Err(cx.unsupported(t.dtype())));
    let values = take(t, &order, out_shape.clone())?;
    Ok(vec![
        values.into(),
        Tensor::from_vec(out_shape, idx_out)?.into(),
    ])
}

/// Trilu: keeps the upper (or lower) triangle relative to diagonal `k`, zeroing the rest.
fn trilu(cx: &RunCx) -> KResult<Vec<Value>> {
    let t = cx.input(0)?;
    let r = t.rank();
    if r < 2 {
        return Err(cx.invalid(format!("Trilu needs rank >= 2, got {:?}", t.shape())));
    }
    let k = match cx.opt_input(1)? {
        Some(kt) => scalar_i64(kt, "k")?,
        None => 0,
    };
    let upper = cx.int("upper", 1)? != 0;
    let (rows, cols) = (t.shape()[r - 2], t.shape()[r - 1]);
    let n = t.len();
    let zero = zeros(t.dtype(), vec![1])?;
    let flat = concat_flat(&[&t.reshape(vec![n])?, &zero], t.dtype(), vec![n + 1])?;
    let offs: Vec<usize> = (0..n)
        .map(|i| {
            let c = (i % cols) as i64;
            let rr = ((i / cols) % rows.max(1)) as i64;
            let keep = if upper { c - rr >= k } else { c - rr <= k };
            if keep {
                i
            } else {
                n
            }
        })
        .collect();
    Ok(vec![take(&flat, &offs, t.shape().to_vec())?.into()])
}

/// Sort-and-dedupe keys of Unique: an ordering and an equality over slice numbers.
fn unique_order(
    cx: &RunCx,
    t: &Tensor,
    nslices: usize,
    width: usize,
    stride_outer: usize,
    inner: usize,
) -> KResult<(Vec<usize>, Vec<Vec<usize>>)> {
    // Element offsets of slice s, in lexicographic comparison order.
    let elems = |s: usize| -> Vec<usize> {
        let outer = width / inner.max(1);
        let mut v = Vec::with_capacity(width);
        for o in 0..outer {
            let b = o * stride_outer + s * inner;
            v.extend(b..b + inner);
        }
        v
    };
    let slices: Vec<Vec<usize>> = (0..nslices).map(elems).collect();
    let mut order: Vec<usize> = (0..nslices).collect();
    macro_rules! sort_with {
        ($cmp:expr) => {{
            let cmp = $cmp;
            let lex = |a: usize, b: usize| -> Ordering {
                for (&x, &y) in slices[a].iter().zip(&slices[b]) {
                    let c = cmp(x, y);
                    if c != Ordering::Equal {
                        return c;
                    }
                }
                Ordering::Equal
            };
            order.sort_by(|&a, &b| lex(a, b).then(a.cmp(&b)));
            let mut groups: Vec<Vec<usize>> = Vec::new();
            for &s in &order {
                match groups.last_mut() {
                    Some(g) if lex(g[0], s) == Ordering::Equal => g.push(s),
                    _ => groups.push(vec![s]),
                }
            }
            groups
        }};
    }
    let groups = if let Some(sv) = t.strings() {
        sort_with!(|x: usize, y: usize| sv[x].cmp(&sv[y]))
    } else if t.dtype() == DataType::Bool {
        let v = t.to_vec::<bool>()?;
        sort_with!(|x: usize, y: usize| v[x].cmp(&v[y]))
    } else {
        for_numeric!(t.dtype(), T => {
            let v = t.to_vec::<T>()?;
            sort_with!(|x: usize, y: usize| total_cmp(v[x], v[y]))
        } else return Err(cx.unsupported(t.dtype())))
    };
    Ok((order, groups))
}

/// Unique: distinct elements (or slices along `axis`), with first indices, inverse and counts.
fn unique(cx: &RunCx) -> KResult<Vec<Value>> {
    let t0 = cx.input(0)?;
    let (t, axis) = match cx.attr_i("axis")? {
        Some(a) => (t0.clone(), norm_axis(a, t0.rank())?),
        None => (t0.reshape(vec![t0.len()])?, 0),
    };
    let sorted = cx.int("sorted", 1)? != 0;
    let (outer, dim, inner) = split3(t.shape(), axis);
    let width = outer * inner;
    let (_, mut groups) = unique_order(cx, &t, dim, width, dim * inner, inner)?;
    if !sorted {
        groups.sort_by_key(|g| g[0]);
    }
    // Groups hold slice numbers in ascending order, so g[0] is the first occurrence.
    let first: Vec<usize> = groups.iter().map(|g| g[0]).collect();
    let mut inverse = vec![0i64; dim];
    for (gi, g) in groups.iter().enumerate() {
        for &s in g {
            inverse[s] = gi as i64;
        }
    }
    let y = gather_axis(&t, axis, &first, &[first.len()])?;
    let u = first.len();
    Ok(vec![
        y.into(),
        Tensor::from_vec(vec![u], first.iter().map(|&f| f as i64).collect())?.into(),
        Tensor::from_vec(vec![dim], inverse)?.into(),
        Tensor::from_vec(vec![u], groups.iter().map(|g| g.len() as i64).collect())?.into(),
    ])
}

pub const KERNELS: &[KernelDef] = &[
    kernel("Compress", 9, compress),
    kernel("CumSum", 11, cumsum),
    kernel("CumProd", 26, cumprod),
    kernel("Det", 11, det),
    kernel("EyeLike", 9, eye_like),
    kernel("GatherElements", 11, gather_elements),
    kernel("GatherND", 11, gather_nd),
    kernel("NonMaxSuppression", 10, non_max_suppression),
    kernel("NonZero", 9, non_zero),
    kernel("OneHot", 9, one_hot),
    kernel("ReverseSequence", 10, reverse_sequence),
    kernel_range("Scatter", 9, 10, scatter_elements),
    kernel("ScatterElements", 11, scatter_elements),
    kernel("ScatterND", 11, scatter_nd),
    kernel("Split", 1, split),
    kernel("SplitToSequence", 11, split_to_sequence),
    kernel("TensorScatter", 24, tensor_scatter),
    kernel("Tile", 1, tile),
    kernel("TopK", 1, top_k),
    kernel("Trilu", 14, trilu),
    kernel("Unique", 11, unique),
];

#[cfg(test)]
#[allow(clippy::cloned_ref_to_slice_refs)]
mod tests {
    use crate::exec::{KResult, Value};
    use crate::families::testing::{ai, ais, astr};
    use onnx_proto::AttributeProto;
    use tensor::Tensor;

    /// Runs the registered kernel of `op` at `opset`.
    pub(crate) fn run(
        op: &str,
        opset: i64,
        inputs: &[Option<Tensor>],
        outputs: usize,
        attrs: Vec<AttributeProto>,
    ) -> KResult<Vec<Value>> {
        crate::exec::testing::run(op, opset, inputs, outputs, attrs)
    }

    fn t(v: &Value) -> &Tensor {
        v.as_tensor().unwrap()
    }

    fn f32s(shape: &[usize], v: &[f32]) -> Option<Tensor> {
        Some(Tensor::from_vec(shape.to_vec(), v.to_vec()).unwrap())
    }

    fn i64s(v: &[i64]) -> Option<Tensor> {
        Some(Tensor::from_vec(vec![v.len()], v.to_vec()).unwrap())
    }

    #[test]
    fn old_attribute_forms() {
        let x = f32s(&[2, 3], &[1., 2., 3., 4., 5., 6.]);
        // Reshape-1: shape attribute.
        let r = run("Reshape", 1, &[x.clone()], 1, vec![ais("shape", &[3, -1])]).unwrap();
        assert_eq!(t(&r[0]).shape(), &[3, 2]);
        // Slice-1: attributes.
        let r = run(
            "Slice",
            1,
            &[x.clone()],
            1,
            vec![ais("starts", &[1]), ais("ends", &[3]), ais("axes", &[1])],
        )
        .unwrap();
        assert_eq!(t(&r[0]).to_vec::<f32>().unwrap(), vec![2., 3., 5., 6.]);
        // Unsqueeze-1 / Squeeze-1: axes attribute.
        let r = run("Unsqueeze", 1, &[x.clone()], 1, vec![ais("axes", &[0, 3])]).unwrap();
        assert_eq!(t(&r[0]).shape(), &[1, 2, 3, 1]);
        let r = run(
            "Squeeze",
            1,
            &[Some(t(&r[0]).clone())],
            1,
            vec![ais("axes", &[3])],
        )
        .unwrap();
        assert_eq!(t(&r[0]).shape(), &[1, 2, 3]);
        assert!(run("Squeeze", 11, &[x.clone()], 1, vec![ais("axes", &[0])]).is_err());
        // Split-2: split attribute; Split-1: split input.
        let r = run(
            "Split",
            2,
            &[x.clone()],
            2,
            vec![ai("axis", 1), ais("split", &[1, 2])],
        )
        .unwrap();
        assert_eq!(t(&r[1]).to_vec::<f32>().unwrap(), vec![2., 3., 5., 6.]);
        let r = run(
            "Split",
            1,
            &[x.clone(), i64s(&[2, 1])],
            2,
            vec![ai("axis", 1)],
        )
        .unwrap();
        assert_eq!(t(&r[0]).to_vec::<f32>().unwrap(), vec![1., 2., 4., 5.]);
        // Split-18: num_outputs, uneven.
        let r = run(
            "Split",
            18,
            &[x.clone()],
            2,
            vec![ai("axis", 1), ai("num_outputs", 2)],
        )
        .unwrap();
        assert_eq!(t(&r[0]).shape(), &[2, 2]);
        assert_eq!(t(&r[1]).shape(), &[2, 1]);
        // Tile-1: tiles and axis inputs.
        let r = run(
            "Tile",
            1,
            &[
                x.clone(),
                Some(Tensor::scalar(2i64)),
                Some(Tensor::scalar(0i64)),
            ],
            1,
            vec![],
        )
        .unwrap();
        assert_eq!(t(&r[0]).shape(), &[4, 3]);
        // TopK-1: k attribute.
        let r = run("TopK", 1, &[x.clone()], 2, vec![ai("k", 2)]).unwrap();
        assert_eq!(t(&r[0]).to_vec::<f32>().unwrap(), vec![3., 2., 6., 5.]);
        assert_eq!(t(&r[1]).to_vec::<i64>().unwrap(), vec![2, 1, 2, 1]);
        // Concat-1: default axis 1.
        let r = run("Concat", 1, &[x.clone(), x.clone()], 1, vec![]).unwrap();
        assert_eq!(t(&r[0]).shape(), &[2, 6]);
    }

    #[test]
    fn data_movement_keeps_strings_and_packed_types() {
        let s = Some(
            Tensor::from_strings(
                vec![2, 2],
                vec!["a".into(), "b".into(), "c".into(), "d".into()],
            )
            .unwrap(),
        );
        let r = run("Transpose", 13, &[s.clone()], 1, vec![]).unwrap();
        assert_eq!(
            t(&r[0]).strings().unwrap(),
            &["a".into(), "c".into(), "b".into(), "d".into()] as &[bytes::Bytes]
        );
        let r = run("Trilu", 14, &[s.clone()], 1, vec![]).unwrap();
        assert_eq!(
            t(&r[0]).strings().unwrap(),
            &["a".into(), "b".into(), "".into(), "d".into()] as &[bytes::Bytes]
        );
        let p = Some(
            Tensor::from_codes(tensor::DataType::Int4, vec![2, 3], &[1, 2, 3, 4, 5, 6]).unwrap(),
        );
        let r = run(
            "Slice",
            13,
            &[p, i64s(&[1]), i64s(&[3]), i64s(&[1])],
            1,
            vec![],
        )
        .unwrap();
        assert_eq!(t(&r[0]).codes().unwrap(), vec![2, 3, 5, 6]);
    }

    #[test]
    fn concat_and_gather_fall_back_for_strings_and_packed() {
        let s = Some(
            Tensor::from_strings(
                vec![2, 2],
                vec!["a".into(), "b".into(), "c".into(), "d".into()],
            )
            .unwrap(),
        );
        let r = run(
            "Concat",
            13,
            &[s.clone(), s.clone()],
            1,
            vec![ai("axis", 1)],
        )
        .unwrap();
        let want: Vec<bytes::Bytes> = ["a", "b", "a", "b", "c", "d", "c", "d"]
            .iter()
            .map(|x| bytes::Bytes::from(*x))
            .collect();
        assert_eq!(t(&r[0]).strings().unwrap(), want.as_slice());
        let p =
            Some(Tensor::from_codes(tensor::DataType::Uint4, vec![2, 2], &[1, 2, 3, 4]).unwrap());
        let r = run(
            "Concat",
            13,
            &[p.clone(), p.clone()],
            1,
            vec![ai("axis", 1)],
        )
        .unwrap();
        assert_eq!(t(&r[0]).codes().unwrap(), vec![1, 2, 1, 2, 3, 4, 3, 4]);
        let r = run(
            "Gather",
            13,
            &[p.clone(), i64s(&[1, -2])],
            1,
            vec![ai("axis", 1)],
        )
        .unwrap();
        assert_eq!(t(&r[0]).codes().unwrap(), vec![2, 1, 4, 3]);
        let r = run("Gather", 13, &[s.clone(), i64s(&[1])], 1, vec![]).unwrap();
        assert_eq!(t(&r[0]).shape(), &[1, 2]);
    }

    #[test]
    fn scatter_and_bad_input_are_errors_not_panics() {
        let x = f32s(&[3], &[1., 2., 3.]);
        let r = run(
            "Scatter",
            9,
            &[x.clone(), i64s(&[2]), f32s(&[1], &[9.])],
            1,
            vec![],
        )
        .unwrap();
        assert_eq!(t(&r[0]).to_vec::<f32>().unwrap(), vec![1., 2., 9.]);
        assert!(run("Gather", 13, &[x.clone(), i64s(&[3])], 1, vec![]).is_err());
        assert!(run("Reshape", 13, &[x.clone(), i64s(&[2, -1])], 1, vec![]).is_err());
        assert!(run(
            "ScatterElements",
            18,
            &[x.clone(), i64s(&[0]), f32s(&[1], &[1.])],
            1,
            vec![astr("reduction", "bogus")]
        )
        .is_err());
        let empty = f32s(&[0], &[]);
        let r = run(
            "Slice",
            13,
            &[
                empty,
                i64s(&[-1]),
                i64s(&[i64::MIN]),
                i64s(&[0]),
                i64s(&[-1]),
            ],
            1,
            vec![],
        )
        .unwrap();
        assert_eq!(t(&r[0]).shape(), &[0]);
    }

    #[test]
    fn range_half_uses_float_stash() {
        let h = |v: f32| Some(Tensor::scalar(half::f16::from_f32(v)));
        let r = run("Range", 27, &[h(2048.), h(2052.), h(1.)], 1, vec![]).unwrap();
        assert_eq!(t(&r[0]).len(), 4);
    }
}
