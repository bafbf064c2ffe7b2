//! Kernels of the resize family (inference: `families/resize.rs`): Resize, Upsample, GridSample,
//! AffineGrid, CenterCropPad, DepthToSpace, SpaceToDepth, Pad.

use super::conv::common::{self, load, store};
use crate::exec::util::{self, FloatConv};
use crate::exec::{kernel, kernel_range, KResult, KernelDef, RunCx, Value};
use tensor::{DataType, Tensor};

/// Marks "no source element" in an offset list (the fill value goes there).
const FILL: usize = usize::MAX;

/// Combines per-axis source-coordinate maps (None = fill) into flat source offsets over
/// `in_shape`, row-major over the output.
fn combine(maps: &[Vec<Option<usize>>], in_shape: &[usize]) -> Vec<usize> {
    let st = util::strides(in_shape);
    let mut offs = vec![0usize];
    for (a, m) in maps.iter().enumerate() {
        let mut next = Vec::with_capacity(offs.len() * m.len());
        for &o in &offs {
            for &c in m {
                next.push(match c {
                    Some(c) if o != FILL => o + c * st[a],
                    _ => FILL,
                });
            }
        }
        offs = next;
    }
    offs
}

/// Gathers `t`'s elements at `offs` into `shape`; [`FILL`] entries take `fill` (a one-element
/// tensor of t's dtype) or zero.
fn gather_fill(
    t: &Tensor,
    offs: &[usize],
    fill: Option<&Tensor>,
    shape: Vec<usize>,
) -> KResult<Tensor> {
    if !offs.contains(&FILL) {
        return util::take(t, offs, shape);
    }
    let zero;
    let fill = match fill {
        Some(f) => f,
        None => {
            zero = util::zeros(t.dtype(), vec![1])?;
            &zero
        }
    };
    let n = t.len();
    let ext = util::concat_flat(&[t, fill], t.dtype(), vec![n + 1])?;
    let offs: Vec<usize> = offs
        .iter()
        .map(|&o| if o == FILL { n } else { o })
        .collect();
    util::take(&ext, &offs, shape)
}

/// A one-element tensor of `dtype` holding `v` (numbers and bool).
fn scalar_like(cx: &RunCx, dtype: DataType, v: f64) -> KResult<Tensor> {
    if dtype == DataType::Bool {
        return Ok(Tensor::from_vec(vec![1], vec![v != 0.0])?);
    }
    crate::for_float!(dtype, T => {
        return Ok(Tensor::from_vec(vec![1], vec![<T as FloatConv>::from_f64(v)])?);
    } else {});
    crate::for_int!(dtype, T => {
        return Ok(Tensor::from_vec(vec![1], vec![v as T])?);
    } else {});
    Err(cx.unsupported(dtype))
}

/// f64 values back into a tensor of `dtype` (integers rounded half to even and saturated).
fn from_f64s(cx: &RunCx, dtype: DataType, shape: Vec<usize>, v: Vec<f64>) -> KResult<Tensor> {
    crate::for_float!(dtype, T => {
        return Ok(Tensor::from_vec(shape, v.into_iter().map(<T as FloatConv>::from_f64).collect::<Vec<T>>())?);
    } else {});
    crate::for_int!(dtype, T => {
        return Ok(Tensor::from_vec(shape, v.into_iter().map(|x| x.round_ties_even().clamp(T::MIN as f64, T::MAX as f64) as T).collect::<Vec<T>>())?);
    } else {});
    Err(cx.unsupported(dtype))
}

// ---------------------------------------------------------------------------------------------
// Pad

/// Source coordinate of output coordinate `o` along an axis of length `n` padded by `pb`.
fn pad_coord(o: usize, pb: i64, n: usize, mode: &str) -> Option<usize> {
    let c = o as i64 - pb;
    let ni = n as i64;
    if c >= 0 && c < ni {
        return Some(c as usize);
    }
    match mode {
        "edge" => Some(c.clamp(0, ni - 1) as usize),
        "reflect" => {
            if ni == 1 {
                return Some(0);
            }
            let period = 2 * (ni - 1);
            let m = c.rem_euclid(period);
            Some(if m >= ni { period - m } else { m } as usize)
        }
        "wrap" => Some(c.rem_euclid(ni) as usize),
        _ => None,
    }
}

/// Pad: constant / reflect / edge / wrap padding (pads as attribute before opset 11, axes input
/// from 18).
fn pad(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let rank = x.rank();
    let mode = cx.string("mode", "constant")?;
    if !matches!(mode.as_str(), "constant" | "reflect" | "edge" | "wrap") {
        return Err(cx.invalid(format!(
            "mode must be constant, reflect, edge or wrap, got '{mode}'"
        )));
    }
    let (pads, fill, axes): (Vec<i64>, Option<Tensor>, Vec<usize>) = if cx.opset < 11 {
        let name = if cx.opset < 2 { "paddings" } else { "pads" };
        let p = cx
            .attr_ints(name)?
            .ok_or_else(|| cx.invalid(format!("attribute '{name}' is required")))?
            .to_vec();
        let v = cx.float("value", 0.0)? as f64;
        let fill = if mode == "constant" {
            Some(scalar_like(cx, x.dtype(), v)?)
        } else {
            None
        };
        (p, fill, (0..rank).collect())
    } else {
        let p = util::to_i64s(cx.input(1)?)?;
        let fill = match cx.opt_input(2)? {
            Some(f) if f.dtype() != x.dtype() => {
                return Err(cx.invalid(format!(
                    "constant_value must have data's type {}, got {}",
                    x.dtype(),
                    f.dtype()
                )))
            }
            Some(f) if f.len() != 1 => {
                return Err(cx.invalid(format!(
                    "constant_value must hold one value, got shape {:?}",
                    f.shape()
                )))
            }
            Some(f) => Some(f.reshape(vec![1])?),
            None => None,
        };
        let axes = match cx.opt_input(3)? {
            Some(a) if cx.opset >= 18 => util::to_i64s(a)?
                .into_iter()
                .map(|a| util::norm_axis(a, rank))
                .collect::<KResult<Vec<_>>>()?,
            _ => (0..rank).collect(),
        };
        (p, fill, axes)
    };
    if pads.len() != 2 * axes.len() {
        return Err(cx.invalid(format!(
            "pads must hold {} values (2 per padded axis), got {}",
            2 * axes.len(),
            pads.len()
        )));
    }
    if pads.iter().any(|p| p.unsigned_abs() > common::LIMIT) {
        return Err(cx.invalid(format!(
            "pads must lie within ±{}, got {pads:?}",
            common::LIMIT
        )));
    }
    let na = axes.len();
    let mut pb = vec![0i64; rank];
    let mut pe = vec![0i64; rank];
    for (i, &a) in axes.iter().enumerate() {
        pb[a] = pads[i];
        pe[a] = pads[na + i];
    }
    let mut out_shape = Vec::with_capacity(rank);
    let mut maps = Vec::with_capacity(rank);
    for a in 0..rank {
        let n = x.shape()[a];
        let o = n as i64 + pb[a] + pe[a];
        if o < 0 {
            return Err(cx.invalid(format!("pads {pads:?} make axis {a} (length {n}) negative")));
        }
        let o = o as usize;
        if n == 0 && o > 0 && mode != "constant" {
            return Err(cx.invalid(format!("mode '{mode}' cannot pad the empty axis {a}")));
        }
        out_shape.push(o);
        maps.push((0..o).map(|i| pad_coord(i, pb[a], n, &mode)).collect());
    }
    common::numel(cx, &out_shape)?;
    let offs = combine(&maps, x.shape());
    Ok(vec![gather_fill(x, &offs, fill.as_ref(), out_shape)?.into()])
}

// ---------------------------------------------------------------------------------------------
// CenterCropPad, DepthToSpace, SpaceToDepth

/// CenterCropPad: crops or zero-pads the given axes around the center to `shape`.
fn center_crop_pad(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let rank = x.rank();
    let shape = util::to_i64s(cx.input(1)?)?;
    let axes: Vec<usize> = match cx.attr_ints("axes")? {
        Some(a) => a
            .iter()
            .map(|&a| util::norm_axis(a, rank))
            .collect::<KResult<_>>()?,
        None => (0..rank).collect(),
    };
    if shape.len() != axes.len() || shape.iter().any(|&s| s < 0) {
        return Err(cx.invalid(format!(
            "shape must hold {} non-negative values (one per axis), got {shape:?}",
            axes.len()
        )));
    }
    let mut out_shape = x.shape().to_vec();
    for (&a, &sh) in axes.iter().zip(&shape) {
        out_shape[a] = sh as usize;
    }
    common::numel(cx, &out_shape)?;
    let mut maps: Vec<Vec<Option<usize>>> = x
        .shape()
        .iter()
        .map(|&n| (0..n).map(Some).collect())
        .collect();
    for (&a, &sh) in axes.iter().zip(&shape) {
        let dim = x.shape()[a];
        let sh = sh as usize;
        out_shape[a] = sh;
        maps[a] = if sh <= dim {
            let start = (dim - sh) / 2;
            (0..sh).map(|o| Some(o + start)).collect()
        } else {
            let start = (sh - dim) / 2;
            (0..sh)
                .map(|o| (o >= start && o - start < dim).then(|| o - start))
                .collect()
        };
    }
    common::numel(cx, &out_shape)?;
    let offs = combine(&maps, x.shape());
    Ok(vec![gather_fill(x, &offs, None, out_shape)?.into()])
}

/// The blocksize attribute and a rank-4 input's dims.
fn block_args(cx: &RunCx, x: &Tensor) -> KResult<(usize, [usize; 4], bool)> {
    let bs = cx.int("blocksize", 0)?;
    if !(1..=1 << 16).contains(&bs) {
        return Err(cx.invalid(format!("blocksize must be positive, got {bs}")));
    }
    if x.rank() != 4 {
        return Err(cx.invalid(format!("input must have rank 4, got shape {:?}", x.shape())));
    }
    let mode = cx.string("mode", "DCR")?;
    let crd = match mode.as_str() {
        "DCR" => false,
        "CRD" => true,
        _ => return Err(cx.invalid(format!("mode must be DCR or CRD, got '{mode}'"))),
    };
    let s = x.shape();
    Ok((bs as usize, [s[0], s[1], s[2], s[3]], crd))
}

/// DepthToSpace (DCR / CRD).
fn depth_to_space(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let (bs, [b, c, h, w], crd) = block_args(cx, x)?;
    if c % (bs * bs) != 0 {
        return Err(cx.invalid(format!(
            "channels {c} must be divisible by blocksize^2 = {}",
            bs * bs
        )));
    }
    let co = c / (bs * bs);
    let (ho, wo) = (h * bs, w * bs);
    let mut offs = Vec::with_capacity(x.len());
    for n in 0..b {
        for cc in 0..co {
            for y in 0..ho {
                for xx in 0..wo {
                    let (i, hh) = (y % bs, y / bs);
                    let (j, ww) = (xx % bs, xx / bs);
                    let ci = if crd {
                        cc * bs * bs + i * bs + j
                    } else {
                        (i * bs + j) * co + cc
                    };
                    offs.push(((n * c + ci) * h + hh) * w + ww);
                }
            }
        }
    }
    Ok(vec![util::take(x, &offs, vec![b, co, ho, wo])?.into()])
}

/// SpaceToDepth (DCR; CRD from opset 28).
fn space_to_depth(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let (bs, [b, c, h, w], crd) = block_args(cx, x)?;
    if h % bs != 0 || w % bs != 0 {
        return Err(cx.invalid(format!(
            "spatial dims {h}x{w} must be divisible by blocksize {bs}"
        )));
    }
    let (ho, wo) = (h / bs, w / bs);
    let co = c * bs * bs;
    common::numel(cx, &[b, co, ho, wo])?;
    let mut offs = vec![0usize; x.len()];
    for n in 0..b {
        for cc in 0..c {
            for y in 0..h {
                for xx in 0..w {
                    let (i, hh) = (y % bs, y / bs);
                    let (j, ww) = (xx % bs, xx / bs);
                    let oc = if crd {
                        cc * bs * bs + i * bs + j
                    } else {
                        (i * bs + j) * c + cc
                    };
                    offs[((n * co + oc) * ho + hh) * wo + ww] = ((n * c + cc) * h + y) * w + xx;
                }
            }
        }
    }
    Ok(vec![util::take(x, &offs, vec![b, co, ho, wo])?.into()])
}

// ---------------------------------------------------------------------------------------------
// Resize / Upsample

/// Resize parameters that do not vary per axis.
struct Interp {
    mode: String,
    nearest_mode: String,
    coord: String,
    cubic_a: f64,
    exclude_outside: bool,
    extrapolation: f64,
    antialias: bool,
}

impl Interp {
    /// The interpolation coefficients for fractional position `ratio` at `scale`.
    fn coeffs(&self, ratio: f64, scale: f64) -> Vec<f64> {
        match self.mode.as_str() {
            "nearest" => {
                if ratio == ratio.trunc() {
                    return vec![0.0, 1.0];
                }
                let b = |v: bool| if v { 1.0 } else { 0.0 };
                match self.nearest_mode.as_str() {
                    "round_prefer_ceil" => vec![b(ratio < 0.5), b(ratio >= 0.5)],
                    "floor" => vec![1.0, 0.0],
                    // Opset-10 Resize (as onnxruntime): ceil when downsampling, else floor.
                    "simple" if scale < 1.0 => vec![0.0, 1.0],
                    "simple" => vec![1.0, 0.0],
                    "ceil" => vec![0.0, 1.0],
                    _ => vec![b(ratio <= 0.5), b(ratio > 0.5)],
                }
            }
            "linear" if self.antialias => {
                let scale = scale.min(1.0);
                let start = (-1.0 / scale).floor() as i64 + 1;
                let fp = 2 - 2 * start;
                let c: Vec<f64> = (start..start + fp)
                    .map(|i| (1.0 - ((i as f64 - ratio) * scale).abs()).clamp(0.0, 1.0))
                    .collect();
                let s: f64 = c.iter().sum();
                c.into_iter().map(|v| v / s).collect()
            }
            "linear" => vec![1.0 - ratio, ratio],
            _ if self.antialias => {
                let a = self.cubic_a;
                let scale = scale.min(1.0);
                let f = |x: f64| {
                    let x = x.abs();
                    let (x2, x3) = (x * x, x * x * x);
                    if x <= 1.0 {
                        (a + 2.0) * x3 - (a + 3.0) * x2 + 1.0
                    } else if x < 2.0 {
                        a * x3 - 5.0 * a * x2 + 8.0 * a * x - 4.0 * a
                    } else {
                        0.0
                    }
                };
                let i_start = (-2.0 / scale).floor() as i64 + 1;
                let i_end = 2 - i_start;
                let c: Vec<f64> = (i_start..i_end)
                    .map(|i| f(scale * (i as f64 - ratio)))
                    .collect();
                let s: f64 = c.iter().sum();
                c.into_iter().map(|v| v / s).collect()
            }
            _ => {
                let a = self.cubic_a;
                let r = ratio;
                let q = 1.0 - r;
                vec![
                    ((a * (r + 1.0) - 5.0 * a) * (r + 1.0) + 8.0 * a) * (r + 1.0) - 4.0 * a,
                    ((a + 2.0) * r - (a + 3.0)) * r * r + 1.0,
                    ((a + 2.0) * q - (a + 3.0)) * q * q + 1.0,
                    ((a * (q + 1.0) - 5.0 * a) * (q + 1.0) + 8.0 * a) * (q + 1.0) - 4.0 * a,
                ]
            }
        }
    }

    /// For each output coordinate along one axis: (source indices, weights, extrapolated).
    #[allow(clippy::type_complexity)]
    fn axis_taps(
        &self,
        in_w: usize,
        out_w: usize,
        scale: f64,
        roi: (f64, f64),
    ) -> Vec<(Vec<usize>, Vec<f64>, bool)> {
        let out_f = scale * in_w as f64;
        let inw = in_w as f64;
        (0..out_w)
            .map(|y| {
                let yf = y as f64;
                let mut extrap = false;
                let x = match self.coord.as_str() {
                    "align_corners" => {
                        if out_f == 1.0 {
                            0.0
                        } else {
                            yf * (inw - 1.0) / (out_f - 1.0)
                        }
                    }
                    "asymmetric" => yf / scale,
                    "tf_crop_and_resize" => {
                        let x = if out_f == 1.0 {
                            (roi.1 - roi.0) * (inw - 1.0) / 2.0
                        } else {
                            yf * (roi.1 - roi.0) * (inw - 1.0) / (out_f - 1.0)
                        } + roi.0 * (inw - 1.0);
                        extrap = x < 0.0 || x > inw - 1.0;
                        x
                    }
                    "pytorch_half_pixel" => {
                        if out_f == 1.0 {
                            -0.5
                        } else {
                            (yf + 0.5) / scale - 0.5
                        }
                    }
                    "half_pixel_symmetric" => {
                        let adj = out_w as f64 / out_f;
                        let offset = inw / 2.0 * (1.0 - adj);
                        offset + (yf + 0.5) / scale - 0.5
                    }
                    _ => (yf + 0.5) / scale - 0.5,
                };
                // Far-away coordinates all clamp to the edge; keep the index arithmetic finite.
                let x = x.clamp(-1e12, 1e12);
                let xi = x.floor();
                let ratio = if x == xi { 1.0 } else { x - xi };
                let mut w = self.coeffs(ratio, scale);
                let n = w.len() as i64;
                let pad = (n + 1) / 2;
                let xp = x + pad as f64;
                let p = xp.floor();
                let frac = xp - p;
                let off = if n % 2 == 0 {
                    if frac == 0.0 {
                        -(n / 2)
                    } else {
                        -(n / 2) + 1
                    }
                } else {
                    let base = -((n - 1) / 2);
                    if frac <= 0.5 {
                        base
                    } else {
                        base + 1
                    }
                };
                let start = p as i64 + off - pad;
                let raw: Vec<i64> = (start..start + n).collect();
                if self.exclude_outside {
                    for (wv, &i) in w.iter_mut().zip(&raw) {
                        if i < 0 || i >= in_w as i64 {
                            *wv = 0.0;
                        }
                    }
                    let s: f64 = w.iter().sum();
                    let s = if s == 0.0 { 1.0 } else { s };
                    w.iter_mut().for_each(|v| *v /= s);
                }
                let idx = raw
                    .iter()
                    .map(|&i| i.clamp(0, in_w as i64 - 1) as usize)
                    .collect();
                (idx, w, extrap)
            })
            .collect()
    }
}

/// Resizes `data` (f64, `shape`) along `axis` to `out_w`.
fn resize_axis(
    data: &[f64],
    shape: &[usize],
    axis: usize,
    taps: &[(Vec<usize>, Vec<f64>, bool)],
    extrapolation: f64,
) -> Vec<f64> {
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let in_w = shape[axis];
    let out_w = taps.len();
    let mut out = vec![0f64; outer * out_w * inner];
    for o in 0..outer {
        for (y, (idx, w, ex)) in taps.iter().enumerate() {
            let dst = &mut out[(o * out_w + y) * inner..(o * out_w + y + 1) * inner];
            if *ex {
                dst.iter_mut().for_each(|v| *v = extrapolation);
                continue;
            }
            for (&i, &wv) in idx.iter().zip(w) {
                if wv == 0.0 {
                    continue;
                }
                let src = &data[(o * in_w + i) * inner..(o * in_w + i + 1) * inner];
                for (d, &s) in dst.iter_mut().zip(src) {
                    *d += wv * s;
                }
            }
        }
    }
    out
}

/// Shared body of Resize and Upsample once the per-axis targets are known.
/// `axes[i]` gets output size `sizes[i]`, scale `scales[i]` and roi `rois[i]`.
fn run_resize(
    cx: &RunCx,
    x: &Tensor,
    ip: &Interp,
    axes: &[usize],
    sizes: &[usize],
    scales: &[f64],
    rois: &[(f64, f64)],
) -> KResult<Tensor> {
    let mut out_shape = x.shape().to_vec();
    for (i, &a) in axes.iter().enumerate() {
        out_shape[a] = sizes[i];
    }
    common::numel(cx, &out_shape)?;
    if x.shape().contains(&0) {
        if out_shape.contains(&0) {
            return util::zeros(x.dtype(), out_shape);
        }
        return Err(cx.invalid(format!(
            "cannot resize the empty input {:?} to {out_shape:?}",
            x.shape()
        )));
    }
    let active: Vec<usize> = (0..axes.len())
        .filter(|&i| {
            let a = axes[i];
            !((scales[i] - 1.0).abs() <= 1e-9
                && sizes[i] == x.shape()[a]
                && (rois[i].0.abs() <= 1e-9 && (rois[i].1 - 1.0).abs() <= 1e-9))
        })
        .collect();
    if ip.mode == "nearest" && !ip.exclude_outside && ip.coord != "tf_crop_and_resize" {
        // Pure index selection: exact for every dtype.
        let mut maps: Vec<Vec<Option<usize>>> = x
            .shape()
            .iter()
            .map(|&n| (0..n).map(Some).collect())
            .collect();
        for &i in &active {
            let a = axes[i];
            let taps = ip.axis_taps(x.shape()[a], sizes[i], scales[i], rois[i]);
            maps[a] = taps
                .iter()
                .map(|(idx, w, _)| {
                    let k = w
                        .iter()
                        .enumerate()
                        .fold(0, |b, (k, &v)| if v > w[b] { k } else { b });
                    Some(idx[k])
                })
                .collect();
        }
        let offs = combine(&maps, x.shape());
        return gather_fill(x, &offs, None, out_shape);
    }
    let is_num = matches!(
        x.dtype(),
        DataType::Float
            | DataType::Double
            | DataType::Float16
            | DataType::Bfloat16
            | DataType::Int8
            | DataType::Uint8
            | DataType::Int16
            | DataType::Uint16
            | DataType::Int32
            | DataType::Uint32
            | DataType::Int64
            | DataType::Uint64
    );
    if !is_num {
        return Err(cx.unsupported(x.dtype()));
    }
    let mut data = util::to_f64s(x)?;
    let mut shape = x.shape().to_vec();
    for &i in &active {
        let a = axes[i];
        let taps = ip.axis_taps(shape[a], sizes[i], scales[i], rois[i]);
        data = resize_axis(&data, &shape, a, &taps, ip.extrapolation);
        shape[a] = sizes[i];
    }
    from_f64s(cx, x.dtype(), shape, data)
}

/// Output size from a scale (truncation, as the reference's `astype(int)`).
fn size_of_scale(cx: &RunCx, n: usize, s: f64) -> KResult<usize> {
    let v = s * n as f64;
    if s.is_nan() || s <= 0.0 || !v.is_finite() || v > 1e12 {
        return Err(cx.invalid(format!("scale {s} must be positive and finite")));
    }
    Ok(v as usize)
}

/// Resize (opsets 10 to 19).
fn resize(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let rank = x.rank();
    let mode = cx.string("mode", "nearest")?;
    if !matches!(mode.as_str(), "nearest" | "linear" | "cubic")
        || (cx.opset < 11 && mode == "cubic")
    {
        return Err(cx.invalid(format!("unsupported Resize mode '{mode}'")));
    }
    if cx.opset < 11 {
        let scales = util::to_f64s(cx.input(1)?)?;
        if scales.len() != rank {
            return Err(cx.invalid(format!(
                "scales must hold {rank} values, got {}",
                scales.len()
            )));
        }
        let ip = Interp {
            mode,
            nearest_mode: "simple".into(),
            coord: "asymmetric".into(),
            cubic_a: -0.75,
            exclude_outside: false,
            extrapolation: 0.0,
            antialias: false,
        };
        let sizes = (0..rank)
            .map(|a| size_of_scale(cx, x.shape()[a], scales[a]))
            .collect::<KResult<Vec<_>>>()?;
        let axes: Vec<usize> = (0..rank).collect();
        let rois = vec![(0.0, 1.0); rank];
        return Ok(vec![
            run_resize(cx, x, &ip, &axes, &sizes, &scales, &rois)?.into()
        ]);
    }
    let coord = cx.string("coordinate_transformation_mode", "half_pixel")?;
    let known = [
        "half_pixel",
        "half_pixel_symmetric",
        "pytorch_half_pixel",
        "align_corners",
        "asymmetric",
        "tf_crop_and_resize",
    ];
    if !known.contains(&coord.as_str()) {
        return Err(cx.invalid(format!("unknown coordinate_transformation_mode '{coord}'")));
    }
    let nearest_mode = cx.string("nearest_mode", "round_prefer_floor")?;
    if !["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]
        .contains(&nearest_mode.as_str())
    {
        return Err(cx.invalid(format!("unknown nearest_mode '{nearest_mode}'")));
    }
    let antialias = cx.int("antialias", 0)? != 0;
    if antialias && mode == "nearest" {
        return Err(cx.invalid("antialias is not supported with mode nearest"));
    }
    let ip = Interp {
        mode,
        nearest_mode,
        coord,
        cubic_a: cx.float("cubic_coeff_a", -0.75)? as f64,
        exclude_outside: cx.int("exclude_outside", 0)? != 0,
        extrapolation: cx.float("extrapolation_value", 0.0)? as f64,
        antialias,
    };
    let axes: Vec<usize> = match cx.attr_ints("axes")? {
        Some(a) => {
            let v = a
                .iter()
                .map(|&a| util::norm_axis(a, rank))
                .collect::<KResult<Vec<_>>>()?;
            let mut s = v.clone();
            s.sort();
            s.dedup();
            if s.len() != v.len() {
                return Err(cx.invalid(format!("axes {a:?} repeat an axis")));
            }
            v
        }
        None => (0..rank).collect(),
    };
    let na = axes.len();
    let roi = match cx.opt_input(1)? {
        Some(r) if !r.is_empty() => Some(util::to_f64s(r)?),
        _ => None,
    };
    let rois: Vec<(f64, f64)> = match roi {
        Some(r) if r.len() == 2 * na => (0..na).map(|i| (r[i], r[na + i])).collect(),
        Some(r) if ip.coord == "tf_crop_and_resize" => {
            return Err(cx.invalid(format!("roi must hold {} values, got {}", 2 * na, r.len())))
        }
        _ => vec![(0.0, 1.0); na],
    };
    if ip.coord == "tf_crop_and_resize" && cx.opt_input(1)?.is_none_or(|r| r.is_empty()) {
        return Err(cx.invalid("tf_crop_and_resize needs the roi input"));
    }
    let scales_in = match cx.opt_input(2)? {
        Some(s) if !s.is_empty() => Some(util::to_f64s(s)?),
        _ => None,
    };
    let sizes_in = match cx.opt_input(3)? {
        Some(s) if !s.is_empty() => Some(util::to_i64s(s)?),
        _ => None,
    };
    let in_dims: Vec<usize> = axes.iter().map(|&a| x.shape()[a]).collect();
    let (sizes, scales) = match (scales_in, sizes_in) {
        (Some(sc), None) => {
            if sc.len() != na {
                return Err(cx.invalid(format!("scales must hold {na} values, got {}", sc.len())));
            }
            let sizes = (0..na)
                .map(|i| size_of_scale(cx, in_dims[i], sc[i]))
                .collect::<KResult<Vec<_>>>()?;
            (sizes, sc)
        }
        (None, Some(sz)) => {
            if sz.len() != na || sz.iter().any(|&s| s < 0) {
                return Err(cx.invalid(format!(
                    "sizes must hold {na} non-negative values, got {sz:?}"
                )));
            }
            let mut scales: Vec<f64> = (0..na).map(|i| sz[i] as f64 / in_dims[i] as f64).collect();
            let mut sizes: Vec<usize> = sz.iter().map(|&s| s as usize).collect();
            let policy = cx.string("keep_aspect_ratio_policy", "stretch")?;
            match policy.as_str() {
                "stretch" => {}
                "not_larger" | "not_smaller" => {
                    let s = if policy == "not_larger" {
                        scales.iter().copied().fold(f64::INFINITY, f64::min)
                    } else {
                        scales.iter().copied().fold(f64::NEG_INFINITY, f64::max)
                    };
                    scales = vec![s; na];
                    sizes = (0..na)
                        .map(|i| (s * in_dims[i] as f64 + 0.5) as usize)
                        .collect();
                }
                _ => {
                    return Err(cx.invalid(format!(
                        "keep_aspect_ratio_policy must be stretch, not_larger or not_smaller, got '{policy}'"
                    )))
                }
            }
            (sizes, scales)
        }
        _ => {
            return Err(cx.invalid("exactly one of scales and sizes must be given (and non-empty)"))
        }
    };
    Ok(vec![
        run_resize(cx, x, &ip, &axes, &sizes, &scales, &rois)?.into()
    ])
}

/// Upsample (deprecated; opsets 1 to 9): nearest or (bi)linear with asymmetric coordinates.
fn upsample(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let rank = x.rank();
    let scales: Vec<f64> = if cx.opset >= 9 {
        util::to_f64s(cx.input(1)?)?
    } else if cx.opset >= 7 {
        cx.attr_floats("scales")?
            .ok_or_else(|| cx.invalid("attribute 'scales' is required"))?
            .iter()
            .map(|&v| v as f64)
            .collect()
    } else {
        if rank != 4 {
            return Err(cx.invalid(format!(
                "Upsample-1 needs a rank-4 input, got {:?}",
                x.shape()
            )));
        }
        let h = cx
            .attr_f("height_scale")?
            .ok_or_else(|| cx.invalid("height_scale is required"))?;
        let w = cx
            .attr_f("width_scale")?
            .ok_or_else(|| cx.invalid("width_scale is required"))?;
        vec![1.0, 1.0, h as f64, w as f64]
    };
    if scales.len() != rank || scales.iter().any(|&s| s < 1.0) {
        return Err(cx.invalid(format!(
            "scales must hold {rank} values >= 1, got {scales:?}"
        )));
    }
    let mode = cx.string("mode", "nearest")?;
    let mode = match mode.as_str() {
        "nearest" => "nearest",
        "linear" | "bilinear" => "linear",
        _ => return Err(cx.invalid(format!("unsupported Upsample mode '{mode}'"))),
    };
    let ip = Interp {
        mode: mode.into(),
        nearest_mode: "floor".into(),
        coord: "asymmetric".into(),
        cubic_a: -0.75,
        exclude_outside: false,
        extrapolation: 0.0,
        antialias: false,
    };
    let sizes = (0..rank)
        .map(|a| size_of_scale(cx, x.shape()[a], scales[a]))
        .collect::<KResult<Vec<_>>>()?;
    let axes: Vec<usize> = (0..rank).collect();
    let rois = vec![(0.0, 1.0); rank];
    Ok(vec![
        run_resize(cx, x, &ip, &axes, &sizes, &scales, &rois)?.into()
    ])
}

// ---------------------------------------------------------------------------------------------
// GridSample / AffineGrid

/// Reflects `x` into `[lo, hi]` like the reference `_gs_reflect`.
fn gs_reflect(x: f64, lo: f64, hi: f64) -> f64 {
    let rng = hi - lo;
    if x < lo {
        let dx = lo - x;
        let n = (dx / rng) as i64;
        let r = dx - n as f64 * rng;
        if n % 2 == 0 {
            lo + r
        } else {
            hi - r
        }
    } else if x > hi {
        let dx = x - hi;
        let n = (dx / rng) as i64;
        let r = dx - n as f64 * rng;
        if n % 2 == 0 {
            hi - r
        } else {
            lo + r
        }
    } else {
        x
    }
}

/// Keys cubic coefficients (A = -0.75) for fraction `x`.
fn gs_cubic(x: f64) -> [f64; 4] {
    let a = -0.75;
    let x = x.abs();
    [
        ((a * (x + 1.0) - 5.0 * a) * (x + 1.0) + 8.0 * a) * (x + 1.0) - 4.0 * a,
        ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0,
        ((a + 2.0) * (1.0 - x) - (a + 3.0)) * (1.0 - x) * (1.0 - x) + 1.0,
        ((a * (2.0 - x) - 5.0 * a) * (2.0 - x) + 8.0 * a) * (2.0 - x) - 4.0 * a,
    ]
}

/// GridSample: N-d sampling of X at grid locations (nearest / linear / cubic; zeros / border /
/// reflection padding).
fn grid_sample(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let grid = cx.input(1)?;
    let xs = x.shape();
    let gs = grid.shape();
    if xs.len() < 3 || gs.len() != xs.len() || gs[0] != xs[0] || gs[gs.len() - 1] != xs.len() - 2 {
        return Err(cx.invalid(format!(
            "X must be (N, C, D1..Dr) and grid (N, O1..Or, r), got X {xs:?} and grid {gs:?}"
        )));
    }
    let nd = xs.len() - 2;
    let mode = match cx
        .string("mode", if cx.opset < 20 { "bilinear" } else { "linear" })?
        .as_str()
    {
        "bilinear" | "linear" => 1,
        "nearest" => 0,
        "bicubic" | "cubic" => 2,
        m => return Err(cx.invalid(format!("unknown mode '{m}'"))),
    };
    let padding = match cx.string("padding_mode", "zeros")?.as_str() {
        "zeros" => 0,
        "border" => 1,
        "reflection" => 2,
        m => return Err(cx.invalid(format!("unknown padding_mode '{m}'"))),
    };
    let align = cx.int("align_corners", 0)? != 0;
    let (n, c) = (xs[0], xs[1]);
    let dims = &xs[2..];
    if dims.contains(&0) {
        return Err(cx.invalid(format!("X spatial dims must be non-empty, got {xs:?}")));
    }
    let out_sp = &gs[1..gs.len() - 1];
    let osz: usize = out_sp.iter().product();
    let insz: usize = dims.iter().product();
    let mut out_shape = vec![n, c];
    out_shape.extend(out_sp);
    common::numel(cx, &out_shape)?;
    let xv = util::to_f64s(x)?;
    let gv = util::to_f64s(grid)?;
    if !matches!(
        x.dtype(),
        DataType::Float | DataType::Double | DataType::Float16 | DataType::Bfloat16
    ) {
        return Err(cx.unsupported(x.dtype()));
    }
    let st = util::strides(dims);
    let border: Vec<(f64, f64)> = dims
        .iter()
        .map(|&d| {
            if align {
                (0.0, d as f64 - 1.0)
            } else {
                (-0.5, d as f64 - 0.5)
            }
        })
        .collect();
    // Index handling per padding mode: Some(valid index) or None (zero).
    let pix = |i: i64, dim: usize| -> Option<usize> {
        let d = dims[dim] as i64;
        match padding {
            0 => (i >= 0 && i < d).then_some(i as usize),
            1 => Some(i.clamp(0, d - 1) as usize),
            _ => {
                let r = gs_reflect(i as f64, border[dim].0, border[dim].1) as i64;
                Some(r.clamp(0, d - 1) as usize)
            }
        }
    };
    let mut y = vec![0f64; n * c * osz];
    let mut taps: Vec<Vec<(Option<usize>, f64)>> = vec![Vec::new(); nd];
    for b in 0..n {
        for o in 0..osz {
            let g = &gv[(b * osz + o) * nd..(b * osz + o + 1) * nd];
            for i in 0..nd {
                let v = g[nd - 1 - i];
                let len = dims[i] as f64;
                let mut xo = if align {
                    (v + 1.0) / 2.0 * (len - 1.0)
                } else {
                    ((v + 1.0) * len - 1.0) / 2.0
                } as f32 as f64;
                if mode == 0 {
                    xo = xo.round_ties_even();
                }
                let (lo, hi) = border[i];
                if xo < lo || xo > hi {
                    if padding == 1 {
                        xo = xo.clamp(0.0, len - 1.0);
                    } else if padding == 2 {
                        xo = gs_reflect(xo, lo, hi);
                    }
                }
                let xo = if xo.is_nan() {
                    xo
                } else {
                    xo.clamp(-1e12, 1e12)
                };
                taps[i].clear();
                match mode {
                    0 => taps[i].push((pix(xo as i32 as i64, i), 1.0)),
                    1 => {
                        let x0 = xo.floor();
                        let f = xo - x0;
                        taps[i].push((pix(x0 as i64, i), 1.0 - f));
                        taps[i].push((pix(x0 as i64 + 1, i), f));
                    }
                    _ => {
                        let x0 = xo.floor();
                        let cf = gs_cubic(xo - x0);
                        for (k, &w) in cf.iter().enumerate() {
                            taps[i].push((pix(x0 as i64 - 1 + k as i64, i), w));
                        }
                    }
                }
            }
            // Combine taps over dims: (offset or None, weight).
            let mut comb: Vec<(Option<usize>, f64)> = vec![(Some(0), 1.0)];
            for i in 0..nd {
                let mut next = Vec::with_capacity(comb.len() * taps[i].len());
                for &(off, w) in &comb {
                    for &(t, tw) in &taps[i] {
                        next.push((off.zip(t).map(|(a, t)| a + t * st[i]), w * tw));
                    }
                }
                comb = next;
            }
            for ch in 0..c {
                let src = &xv[(b * c + ch) * insz..(b * c + ch + 1) * insz];
                let mut acc = 0f64;
                for &(off, w) in &comb {
                    if let Some(off) = off {
                        acc += w * src[off];
                    }
                }
                y[(b * c + ch) * osz + o] = acc;
            }
        }
    }
    Ok(vec![from_f64s(cx, x.dtype(), out_shape, y)?.into()])
}

/// AffineGrid: sampling grids (N, H, W, 2) / (N, D, H, W, 3) from affine matrices theta.
fn affine_grid(cx: &RunCx) -> KResult<Vec<Value>> {
    let theta = cx.input(0)?;
    let size = util::to_i64s(cx.input(1)?)?;
    let align = cx.int("align_corners", 0)? != 0;
    let nd = size.len().saturating_sub(2);
    let ts = theta.shape();
    if !(nd == 2 || nd == 3)
        || ts.len() != 3
        || ts[1] != nd
        || ts[2] != nd + 1
        || ts[0] as i64 != size[0]
    {
        return Err(cx.invalid(format!(
            "theta must be (N, 2, 3) with size (N, C, H, W) or (N, 3, 4) with size (N, C, D, H, W), got theta {ts:?} and size {size:?}"
        )));
    }
    if size.iter().any(|&s| s < 0) {
        return Err(cx.invalid(format!("size must be non-negative, got {size:?}")));
    }
    let sp: Vec<usize> = size[2..].iter().map(|&s| s as usize).collect();
    let n = ts[0];
    let mut out_shape = vec![n];
    out_shape.extend(&sp);
    out_shape.push(nd);
    common::numel(cx, &out_shape)?;
    let base = |i: usize, len: usize| -> f64 {
        if align {
            if len <= 1 {
                -1.0
            } else {
                -1.0 + i as f64 * 2.0 / (len - 1) as f64
            }
        } else {
            -1.0 + (2 * i + 1) as f64 / len as f64
        }
    };
    crate::with_real!(cx, theta.dtype(), F => {
        let th = load::<F>(theta)?;
        let th: Vec<f64> = th.iter().map(|v| common::Real::f(*v)).collect();
        let mut out = Vec::with_capacity(out_shape.iter().product());
        for b in 0..n {
            let t = &th[b * nd * (nd + 1)..(b + 1) * nd * (nd + 1)];
            common::for_each_index(&sp, |idx| {
                // Homogeneous point (x, y[, z], 1): x runs over the last spatial dim.
                let mut pt = vec![0f64; nd + 1];
                for (k, p) in pt.iter_mut().take(nd).enumerate() {
                    let dim = nd - 1 - k;
                    *p = base(idx[dim], sp[dim]);
                }
                pt[nd] = 1.0;
                for r in 0..nd {
                    let v: f64 = (0..=nd).map(|k| t[r * (nd + 1) + k] * pt[k]).sum();
                    out.push(<F as common::Real>::of(v));
                }
            });
        }
        Ok(vec![store(theta.dtype(), out_shape, out)?.into()])
    })
}

// ---------------------------------------------------------------------------------------------
// Col2Im

/// Col2Im: sums sliding-block columns (N, C*prod(block), L) back into images (N, C, image...).
fn col2im(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let image = util::to_i64s(cx.input(1)?)?;
    let block = util::to_i64s(cx.input(2)?)?;
    let nd = image.len();
    if nd == 0
        || block.len() != nd
        || image
            .iter()
            .chain(&block)
            .any(|&v| v < 1 || v as u64 > common::LIMIT)
    {
        return Err(cx.invalid(format!(
            "image_shape and block_shape must hold the same number of positive values, got {image:?} and {block:?}"
        )));
    }
    if x.rank() != 3 {
        return Err(cx.invalid(format!(
            "input must be (N, C*prod(block_shape), L), got {:?}",
            x.shape()
        )));
    }
    let img: Vec<usize> = image.iter().map(|&v| v as usize).collect();
    let blk: Vec<usize> = block.iter().map(|&v| v as usize).collect();
    let s = common::positive_n(cx, "strides", nd)?;
    let d = common::positive_n(cx, "dilations", nd)?;
    let p = common::ints_n(cx, "pads", 2 * nd, 0)?;
    let (pb, pe) = (p[..nd].to_vec(), p[nd..].to_vec());
    let mut nblocks = Vec::with_capacity(nd);
    for i in 0..nd {
        let v = (img[i] as i64 + pb[i] + pe[i] - (d[i] as i64 * (blk[i] as i64 - 1) + 1))
            / s[i] as i64
            + 1;
        if v < 1 {
            return Err(cx.invalid(format!("no sliding block fits image dim {i}")));
        }
        nblocks.push(v as usize);
    }
    let k: usize = common::numel(cx, &blk)?;
    let l: usize = nblocks.iter().product();
    let (n, ck, xl) = (x.shape()[0], x.shape()[1], x.shape()[2]);
    if ck % k != 0 || xl != l {
        return Err(cx.invalid(format!(
            "input must be (N, C*{k}, {l}) for these shapes, got {:?}",
            x.shape()
        )));
    }
    let c = ck / k;
    let mut out_shape = vec![n, c];
    out_shape.extend(&img);
    common::numel(cx, &out_shape)?;
    let tab = super::conv::window_table(cx, &nblocks, &blk, &s, &d, &pb, &pe, &img)?;
    let isz: usize = img.iter().product();
    crate::with_real!(cx, x.dtype(), F => {
        let xv = load::<F>(x)?;
        let mut y = vec![<F as num_traits::Zero>::zero(); n * c * isz];
        for nc in 0..n * c {
            let out = &mut y[nc * isz..(nc + 1) * isz];
            for kk in 0..k {
                let row = &xv[(nc * k + kk) * l..(nc * k + kk + 1) * l];
                for (bl, &v) in row.iter().enumerate() {
                    let t = tab[kk * l + bl];
                    if t < super::conv::PAD {
                        out[t] += v;
                    }
                }
            }
        }
        Ok(vec![store(x.dtype(), out_shape, y)?.into()])
    })
}

pub const KERNELS: &[KernelDef] = &[
    kernel("Pad", 1, pad),
    kernel("CenterCropPad", 18, center_crop_pad),
    kernel("DepthToSpace", 1, depth_to_space),
    kernel("SpaceToDepth", 1, space_to_depth),
    kernel("Resize", 10, resize),
    kernel_range("Upsample", 1, 9, upsample),
    kernel("GridSample", 16, grid_sample),
    kernel("AffineGrid", 20, affine_grid),
    kernel("Col2Im", 18, col2im),
];

#[cfg(test)]
mod tests {
    use super::super::conv::tests::run;
    use crate::families::testing::astr;
    use tensor::Tensor;

    #[test]
    fn pad_with_negative_pads_crops() {
        let x = Tensor::from_vec(vec![2, 3], vec![1i64, 2, 3, 4, 5, 6]).unwrap();
        let p = Tensor::from_vec(vec![4], vec![0i64, -1, 1, 1]).unwrap();
        let y = run(super::pad, "Pad", 19, vec![], vec![Some(x), Some(p)], 1).unwrap();
        assert_eq!(y[0].shape(), &[3, 3]);
        assert_eq!(
            y[0].to_vec::<i64>().unwrap(),
            vec![2, 3, 0, 5, 6, 0, 0, 0, 0]
        );
    }

    #[test]
    fn pad_reflect_and_wrap_strings() {
        let x = Tensor::from_strings(vec![3], vec!["a".into(), "b".into(), "c".into()]).unwrap();
        let p = Tensor::from_vec(vec![2], vec![2i64, 2]).unwrap();
        let y = run(
            super::pad,
            "Pad",
            19,
            vec![astr("mode", "reflect")],
            vec![Some(x.clone()), Some(p.clone())],
            1,
        )
        .unwrap();
        let s: Vec<_> = y[0]
            .strings()
            .unwrap()
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect();
        assert_eq!(s, ["c", "b", "a", "b", "c", "b", "a"]);
        let y = run(
            super::pad,
            "Pad",
            19,
            vec![astr("mode", "wrap")],
            vec![Some(x), Some(p)],
            1,
        )
        .unwrap();
        let s: Vec<_> = y[0]
            .strings()
            .unwrap()
            .iter()
            .map(|b| String::from_utf8_lossy(b).into_owned())
            .collect();
        assert_eq!(s, ["b", "c", "a", "b", "c", "a", "b"]);
    }

    #[test]
    fn upsample_linear_v7_is_asymmetric() {
        use onnx_proto::AttributeProto;
        let scales = AttributeProto {
            name: Some("scales".into()),
            floats: vec![1.0, 2.0],
            r#type: Some(6),
            ..Default::default()
        };
        let x = Tensor::from_vec(vec![1, 2], vec![1f32, 3.0]).unwrap();
        let y = run(
            super::upsample,
            "Upsample",
            7,
            vec![scales, astr("mode", "linear")],
            vec![Some(x)],
            1,
        )
        .unwrap();
        assert_eq!(y[0].to_vec::<f32>().unwrap(), vec![1.0, 2.0, 3.0, 3.0]);
    }
}
