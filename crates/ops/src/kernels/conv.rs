//! Kernels of the conv family (inference: `families/conv.rs`): convolutions (plain, transposed,
//! integer, quantized, deformable, causal with state) and pooling.
//!
//! Float kernels compute in `f32` (float16/bfloat16/float) or `f64` (double) through the
//! private [`common::Real`] trait; the helpers in [`common`] are shared with `resize.rs` and
//! `rnn.rs`.

use crate::exec::util::FloatConv;
use crate::exec::{kernel, KResult, KernelDef, RunCx, Value};
use common::{load, load_f64, store, Real};
#[allow(unused_imports)]
use num_traits::{Float, Zero};
use tensor::{DataType, Tensor};

/// Helpers shared by the conv, resize and rnn kernel families.
pub(crate) mod common {
    use crate::exec::util::FloatConv;
    use crate::exec::{KResult, KernelError, RunCx};
    use tensor::{DataType, Tensor};

    /// The compute type of a float kernel (`f32` or `f64`).
    pub(crate) trait Real:
        num_traits::Float
        + num_traits::NumAssign
        + Default
        + std::fmt::Debug
        + std::iter::Sum
        + Send
        + Sync
        + 'static
    {
        fn of(v: f64) -> Self;
        fn f(self) -> f64;
    }
    impl Real for f32 {
        fn of(v: f64) -> Self {
            v as f32
        }
        fn f(self) -> f64 {
            self as f64
        }
    }
    impl Real for f64 {
        fn of(v: f64) -> Self {
            v
        }
        fn f(self) -> f64 {
            self
        }
    }

    /// A float tensor's elements in compute type `F`.
    pub(crate) fn load<F: Real>(t: &Tensor) -> KResult<Vec<F>> {
        crate::for_float!(t.dtype(), T => {
            Ok(t.to_vec::<T>()?.into_iter().map(|v| F::of(FloatConv::to_f64(v))).collect())
        } else Err(KernelError::Invalid(format!(
            "expected a float tensor, got tensor({}){:?}", t.dtype(), t.shape()
        ))))
    }

    /// Any numeric tensor's elements as f64.
    pub(crate) fn load_f64(t: &Tensor) -> KResult<Vec<f64>> {
        crate::exec::util::to_f64s(t)
    }

    /// A tensor of float `dtype` from compute-type values.
    pub(crate) fn store<F: Real>(dtype: DataType, shape: Vec<usize>, v: Vec<F>) -> KResult<Tensor> {
        crate::for_float!(dtype, T => {
            let data: Vec<T> = v.into_iter().map(|x| <T as FloatConv>::from_f64(x.f())).collect();
            Ok(Tensor::from_vec(shape, data)?)
        } else Err(KernelError::Invalid(format!("expected a float dtype, got {dtype}"))))
    }

    /// Runs `$body` with `$F` = `f64` for double and `f32` for the other float types.
    #[macro_export]
    macro_rules! with_real {
        ($cx:expr, $dtype:expr, $F:ident => $body:expr) => {
            match $dtype {
                tensor::DataType::Double => {
                    type $F = f64;
                    $body
                }
                tensor::DataType::Float
                | tensor::DataType::Float16
                | tensor::DataType::Bfloat16 => {
                    type $F = f32;
                    $body
                }
                other => Err($cx.unsupported(other)),
            }
        };
    }

    /// Product of dims, failing on overflow or above a sanity bound.
    pub(crate) fn numel(cx: &RunCx, shape: &[usize]) -> KResult<usize> {
        let mut n: usize = 1;
        for &d in shape {
            n = n
                .checked_mul(d)
                .ok_or_else(|| cx.invalid(format!("shape {shape:?} is too large")))?;
        }
        if n > (1usize << 31) {
            return Err(cx.invalid(format!("shape {shape:?} is too large")));
        }
        Ok(n)
    }

    /// Bound on geometry attribute values (pads, strides, kernel sizes ...).
    pub(crate) const LIMIT: u64 = 1 << 31;

    /// An int list attribute of exactly `n` values, or `default` repeated.
    pub(crate) fn ints_n(cx: &RunCx, name: &str, n: usize, default: i64) -> KResult<Vec<i64>> {
        match cx.attr_ints(name)? {
            None => Ok(vec![default; n]),
            Some([]) => Ok(vec![default; n]),
            Some(v) if v.len() == n => {
                if v.iter().any(|x| x.unsigned_abs() > LIMIT) {
                    return Err(cx.invalid(format!(
                        "attribute '{name}' values must lie within ±{LIMIT}, got {v:?}"
                    )));
                }
                Ok(v.to_vec())
            }
            Some(v) => Err(cx.invalid(format!(
                "attribute '{name}' must hold {n} values, got {}",
                v.len()
            ))),
        }
    }

    /// Attribute `name` (ints) as positive sizes of length `n`, default 1.
    pub(crate) fn positive_n(cx: &RunCx, name: &str, n: usize) -> KResult<Vec<usize>> {
        let v = ints_n(cx, name, n, 1)?;
        v.iter()
            .map(|&x| {
                if x >= 1 {
                    Ok(x as usize)
                } else {
                    Err(cx.invalid(format!("attribute '{name}' must be positive, got {v:?}")))
                }
            })
            .collect()
    }

    /// Iterates row-major over every multi-index of `shape`.
    pub(crate) fn for_each_index(shape: &[usize], mut f: impl FnMut(&[usize])) {
        if shape.contains(&0) {
            return;
        }
        let mut idx = vec![0usize; shape.len()];
        loop {
            f(&idx);
            let mut d = shape.len();
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                idx[d] += 1;
                if idx[d] < shape[d] {
                    break;
                }
                idx[d] = 0;
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Window geometry

/// Marks a window element in the padding (inside `-pad_begin .. len + pad_end`).
pub(crate) const PAD: usize = usize::MAX - 1;
/// Marks a window element beyond the padding (ceil-mode overhang).
const OUT: usize = usize::MAX;

/// For every kernel position `k` (row-major over `kshape`) and position `p` (row-major over
/// `pshape`), the flat offset into `tshape` of coordinate `p*s + k*d - pb`, or [`PAD`]/[`OUT`].
/// Indexed `k * P + p`.
#[allow(clippy::too_many_arguments)]
pub(crate) fn window_table(
    cx: &RunCx,
    pshape: &[usize],
    kshape: &[usize],
    s: &[usize],
    d: &[usize],
    pb: &[i64],
    pe: &[i64],
    tshape: &[usize],
) -> KResult<Vec<usize>> {
    let n = pshape.len();
    let p_total = common::numel(cx, pshape)?;
    let k_total = common::numel(cx, kshape)?;
    let total = p_total
        .checked_mul(k_total)
        .filter(|&t| t <= (1usize << 28))
        .ok_or_else(|| cx.invalid("window table too large"))?;
    if total == 0 {
        return Ok(Vec::new());
    }
    let tstr = crate::exec::util::strides(tshape);
    // Per dim: for (kd, pd), (offset contribution or None, in padded region).
    let mut per: Vec<Vec<(Option<usize>, bool)>> = Vec::with_capacity(n);
    for i in 0..n {
        let mut v = Vec::with_capacity(kshape[i] * pshape[i]);
        for kd in 0..kshape[i] {
            for pd in 0..pshape[i] {
                let c = pd as i64 * s[i] as i64 + kd as i64 * d[i] as i64 - pb[i];
                let t = tshape[i] as i64;
                let valid = c >= 0 && c < t;
                let padded = c >= -pb[i] && c < t + pe[i];
                v.push((valid.then(|| c as usize * tstr[i]), padded));
            }
        }
        per.push(v);
    }
    let mut tab = Vec::with_capacity(total);
    common::for_each_index(kshape, |k| {
        common::for_each_index(pshape, |p| {
            let mut off = 0usize;
            let mut valid = true;
            let mut padded = true;
            for i in 0..n {
                let (o, pd) = per[i][k[i] * pshape[i] + p[i]];
                match o {
                    Some(o) => off += o,
                    None => valid = false,
                }
                padded &= pd;
            }
            tab.push(if valid {
                off
            } else if padded {
                PAD
            } else {
                OUT
            });
        });
    });
    if n == 0 {
        tab.clear();
        tab.push(0);
    }
    Ok(tab)
}

/// Resolved pads of a conv-like node.
fn auto_pad(cx: &RunCx) -> KResult<String> {
    let a = cx.string("auto_pad", "NOTSET")?;
    match a.as_str() {
        "NOTSET" | "SAME_UPPER" | "SAME_LOWER" | "VALID" => Ok(a),
        "" => Ok("NOTSET".into()),
        _ => Err(cx.invalid(format!(
            "auto_pad must be NOTSET, SAME_UPPER, SAME_LOWER or VALID, got '{a}'"
        ))),
    }
}

/// Explicit `pads` attribute split into begins and ends (zeros when absent).
fn explicit_pads(cx: &RunCx, n: usize) -> KResult<(Vec<i64>, Vec<i64>)> {
    let p = common::ints_n(cx, "pads", 2 * n, 0)?;
    Ok((p[..n].to_vec(), p[n..].to_vec()))
}

/// Conv output geometry: (pads begin, pads end, output spatial shape).
fn conv_geometry(
    cx: &RunCx,
    in_sp: &[usize],
    keff: &[usize],
    s: &[usize],
) -> KResult<(Vec<i64>, Vec<i64>, Vec<usize>)> {
    let n = in_sp.len();
    let ap = auto_pad(cx)?;
    let (mut pb, mut pe) = match ap.as_str() {
        "NOTSET" => explicit_pads(cx, n)?,
        _ => (vec![0; n], vec![0; n]),
    };
    if ap.starts_with("SAME") {
        for i in 0..n {
            let (d, st, k) = (in_sp[i] as i64, s[i] as i64, keff[i] as i64);
            let target = (d + st - 1) / st;
            let need = ((target - 1) * st + k - d).max(0);
            let head = if ap == "SAME_LOWER" {
                (need + 1) / 2
            } else {
                need / 2
            };
            pb[i] = head;
            pe[i] = need - head;
        }
    }
    let mut out = Vec::with_capacity(n);
    for i in 0..n {
        let span = in_sp[i] as i64 + pb[i] + pe[i] - keff[i] as i64;
        if span < 0 {
            return Err(cx.invalid(format!(
                "input spatial shape {in_sp:?} with pads {pb:?}/{pe:?} is smaller than the (dilated) kernel {keff:?}"
            )));
        }
        out.push((span / s[i] as i64 + 1) as usize);
    }
    Ok((pb, pe, out))
}

/// Pool output geometry with ceil_mode: (pads begin, pads end, output spatial shape).
fn pool_geometry(
    cx: &RunCx,
    in_sp: &[usize],
    keff: &[usize],
    s: &[usize],
) -> KResult<(Vec<i64>, Vec<i64>, Vec<usize>)> {
    let n = in_sp.len();
    let ap = auto_pad(cx)?;
    let ceil = cx.int("ceil_mode", 0)? != 0;
    let mut pb = vec![0i64; n];
    let mut pe = vec![0i64; n];
    let mut out = Vec::with_capacity(n);
    match ap.as_str() {
        "NOTSET" => {
            (pb, pe) = explicit_pads(cx, n)?;
            for i in 0..n {
                let span = in_sp[i] as i64 + pb[i] + pe[i] - keff[i] as i64;
                if span < 0 {
                    return Err(cx.invalid(format!(
                        "input spatial shape {in_sp:?} with pads is smaller than the (dilated) kernel {keff:?}"
                    )));
                }
                let st = s[i] as i64;
                let mut o = if ceil {
                    (span + st - 1) / st + 1
                } else {
                    span / st + 1
                };
                if ceil && (o - 1) * st >= in_sp[i] as i64 + pb[i] {
                    o -= 1;
                }
                out.push(o as usize);
            }
        }
        "VALID" => {
            for i in 0..n {
                let span = in_sp[i] as i64 - keff[i] as i64;
                if span < 0 {
                    return Err(cx.invalid(format!(
                        "input spatial shape {in_sp:?} is smaller than the (dilated) kernel {keff:?}"
                    )));
                }
                out.push((span / s[i] as i64 + 1) as usize);
            }
        }
        _ => {
            for i in 0..n {
                let (d, st, k) = (in_sp[i] as i64, s[i] as i64, keff[i] as i64);
                let o = (d + st - 1) / st;
                let total = ((o - 1) * st + k - d).max(0);
                let head = if ap == "SAME_LOWER" {
                    total - total / 2
                } else {
                    total / 2
                };
                pb[i] = head;
                pe[i] = total - head;
                out.push(o as usize);
            }
        }
    }
    Ok((pb, pe, out))
}

/// Checks an N,C,spatial... input and returns its spatial shape.
fn spatial_of<'a>(cx: &RunCx, x: &'a Tensor, what: &str) -> KResult<&'a [usize]> {
    if x.rank() < 3 {
        return Err(cx.invalid(format!(
            "{what} must have rank >= 3 (N, C, spatial...), got shape {:?}",
            x.shape()
        )));
    }
    Ok(&x.shape()[2..])
}

// ---------------------------------------------------------------------------------------------
// Conv

/// Geometry shared by Conv-like ops once attributes are resolved.
struct ConvPlan {
    n: usize,
    c: usize,
    m: usize,
    group: usize,
    in_sp: Vec<usize>,
    k_sp: Vec<usize>,
    out_sp: Vec<usize>,
    strides: Vec<usize>,
    dilations: Vec<usize>,
    pads_begin: Vec<i64>,
    pads_end: Vec<i64>,
    /// `window_table` of output positions over input (empty until [`conv_plan`] fills it).
    tab: Vec<usize>,
}

/// Resolves Conv geometry from X and W shapes and the node's attributes, with the window table.
fn conv_plan(cx: &RunCx, xs: &[usize], ws: &[usize]) -> KResult<ConvPlan> {
    let mut p = conv_geom(cx, xs, ws)?;
    p.tab = window_table(
        cx,
        &p.out_sp,
        &p.k_sp,
        &p.strides,
        &p.dilations,
        &p.pads_begin,
        &p.pads_end,
        &p.in_sp,
    )?;
    Ok(p)
}

/// Resolves Conv geometry from X and W shapes and the node's attributes (no window table).
fn conv_geom(cx: &RunCx, xs: &[usize], ws: &[usize]) -> KResult<ConvPlan> {
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(cx.invalid(format!(
            "X must have rank >= 3 and W the same rank, got X {xs:?} and W {ws:?}"
        )));
    }
    let nsp = xs.len() - 2;
    let group = cx.int("group", 1)?;
    if group < 1 {
        return Err(cx.invalid(format!("group must be >= 1, got {group}")));
    }
    let group = group as usize;
    let (n, c, m) = (xs[0], xs[1], ws[0]);
    if group > c.max(1) {
        return Err(cx.invalid(format!("group {group} exceeds the {c} input channels")));
    }
    if c != ws[1] * group || m % group != 0 {
        return Err(cx.invalid(format!(
            "X channels {c} must equal W.shape[1] ({}) * group ({group}) and W.shape[0] ({m}) must divide by group",
            ws[1]
        )));
    }
    let k_sp = ws[2..].to_vec();
    if let Some(ks) = cx.attr_ints("kernel_shape")? {
        if !ks.is_empty() && ks.iter().map(|&k| k as usize).ne(k_sp.iter().copied()) {
            return Err(cx.invalid(format!(
                "kernel_shape {ks:?} does not match W spatial shape {k_sp:?}"
            )));
        }
    }
    let s = common::positive_n(cx, "strides", nsp)?;
    let d = common::positive_n(cx, "dilations", nsp)?;
    let keff: Vec<usize> = (0..nsp).map(|i| (k_sp[i].max(1) - 1) * d[i] + 1).collect();
    let in_sp = xs[2..].to_vec();
    let (pb, pe, out_sp) = conv_geometry(cx, &in_sp, &keff, &s)?;
    Ok(ConvPlan {
        n,
        c,
        m,
        group,
        in_sp,
        k_sp,
        out_sp,
        strides: s,
        dilations: d,
        pads_begin: pb,
        pads_end: pe,
        tab: Vec::new(),
    })
}

/// Convolution of `x` by `w` (+ `b`) per plan, in compute type F.
fn conv_compute<F: Real>(p: &ConvPlan, x: &[F], w: &[F], b: Option<&[F]>) -> Vec<F> {
    let insz: usize = p.in_sp.iter().product();
    let osz: usize = p.out_sp.iter().product();
    let ksz: usize = p.k_sp.iter().product();
    let cg = p.c / p.group;
    let mg = p.m / p.group;
    let rows = cg * ksz;
    let mut y = vec![F::zero(); p.n * p.m * osz];
    let mut col = vec![F::zero(); rows * osz];
    for n in 0..p.n {
        for g in 0..p.group {
            for c in 0..cg {
                let xb = (n * p.c + g * cg + c) * insz;
                let xs = &x[xb..xb + insz];
                for k in 0..ksz {
                    let row = &mut col[(c * ksz + k) * osz..(c * ksz + k + 1) * osz];
                    let t = &p.tab[k * osz..(k + 1) * osz];
                    for (r, &o) in row.iter_mut().zip(t) {
                        *r = if o < PAD { xs[o] } else { F::zero() };
                    }
                }
            }
            for mm in 0..mg {
                let oc = g * mg + mm;
                let out = &mut y[(n * p.m + oc) * osz..(n * p.m + oc + 1) * osz];
                let bias = b.map_or(F::zero(), |b| b[oc]);
                out.iter_mut().for_each(|v| *v = bias);
                let wr = &w[oc * rows..(oc + 1) * rows];
                for (r, &wv) in wr.iter().enumerate() {
                    if wv == F::zero() {
                        continue;
                    }
                    let cr = &col[r * osz..(r + 1) * osz];
                    for (o, &cv) in out.iter_mut().zip(cr) {
                        *o += wv * cv;
                    }
                }
            }
        }
    }
    y
}

/// Bias input `i` checked to hold `m` values.
fn bias_of<F: Real>(cx: &RunCx, i: usize, m: usize) -> KResult<Option<Vec<F>>> {
    match cx.opt_input(i)? {
        None => Ok(None),
        Some(b) => {
            if b.len() != m {
                return Err(cx.invalid(format!(
                    "bias must hold {m} values (one per output channel), got shape {:?}",
                    b.shape()
                )));
            }
            Ok(Some(load::<F>(b)?))
        }
    }
}

/// Conv: N-d grouped, dilated, strided convolution with explicit or automatic padding.
fn conv(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let w = cx.input(1)?;
    if w.dtype() != x.dtype() {
        return Err(cx.invalid(format!(
            "X and W must share a type, got {} and {}",
            x.dtype(),
            w.dtype()
        )));
    }
    if x.dtype() == DataType::Float {
        return Ok(vec![
            fast::conv_f32(cx, x, w, cx.opt_input(2)?, true)?.into()
        ]);
    }
    // float16 and bfloat16 through the float32 kernels (exact conversions in; one rounding
    // of each output to the type, as the general path rounds its f64 sums).
    if matches!(x.dtype(), DataType::Float16 | DataType::Bfloat16) {
        let f32s = |t: &Tensor| -> KResult<Tensor> {
            Ok(Tensor::from_vec(t.shape().to_vec(), load::<f32>(t)?)?)
        };
        let b = cx.opt_input(2)?.map(f32s).transpose()?;
        let y = fast::conv_f32(cx, &f32s(x)?, &f32s(w)?, b.as_ref(), false)?;
        let shape = y.shape().to_vec();
        return Ok(vec![store(x.dtype(), shape, y.to_vec::<f32>()?)?.into()]);
    }
    let p = conv_plan(cx, x.shape(), w.shape())?;
    crate::with_real!(cx, x.dtype(), F => {
        let b = bias_of::<F>(cx, 2, p.m)?;
        let y = conv_compute::<F>(&p, &load::<F>(x)?, &load::<F>(w)?, b.as_deref());
        let mut shape = vec![p.n, p.m];
        shape.extend(&p.out_sp);
        Ok(vec![store(x.dtype(), shape, y)?.into()])
    })
}

/// The float32 Conv: depthwise 2-D convolutions directly, the rest as im2col (skipped for 1×1
/// unit-stride unpadded kernels, whose input already is the column matrix) and one fast
/// matrix product per group, the bias seeding the output.
mod fast {
    use super::{common, conv_geom, window_table, ConvPlan, PAD};
    use crate::exec::{KResult, RunCx};
    use crate::kernels::depthwise;
    use crate::kernels::fast32;
    use crate::kernels::gemm::{self, Operand};
    use crate::kernels::pointwise;
    use crate::kernels::winograd;
    use rayon::prelude::*;
    use std::borrow::Cow;
    use tensor::Tensor;

    fn elems(t: &Tensor) -> KResult<Cow<'_, [f32]>> {
        Ok(match t.as_slice::<f32>() {
            Some(s) => Cow::Borrowed(s),
            None => Cow::Owned(t.to_vec::<f32>()?),
        })
    }

    /// Output positions `o` in `0..out` whose input coordinate `o*s + off` lies in `0..len`.
    fn valid_range(out: usize, s: usize, off: i64, len: usize) -> (usize, usize) {
        let (s, len) = (s as i64, len as i64);
        // o*s + off >= 0  <=>  o >= ceil(-off / s)
        let lo = if off >= 0 { 0 } else { (-off + s - 1) / s };
        // o*s + off < len  <=>  o < ceil((len - off) / s)
        let hi = if len - off <= 0 {
            0
        } else {
            (len - off + s - 1) / s
        };
        let hi = hi.clamp(0, out as i64) as usize;
        let lo = (lo.max(0) as usize).min(hi);
        (lo, hi)
    }

    /// 2-D geometry: input, kernel and output width, strides, dilations, leading pads.
    struct G2 {
        h: usize,
        w: usize,
        kh: usize,
        kw: usize,
        ow: usize,
        sh: usize,
        sw: usize,
        dh: usize,
        dw: usize,
        ph: i64,
        pw: i64,
    }

    impl G2 {
        fn of(p: &ConvPlan) -> Option<G2> {
            (p.in_sp.len() == 2).then(|| G2 {
                h: p.in_sp[0],
                w: p.in_sp[1],
                kh: p.k_sp[0],
                kw: p.k_sp[1],
                ow: p.out_sp[1],
                sh: p.strides[0],
                sw: p.strides[1],
                dh: p.dilations[0],
                dw: p.dilations[1],
                ph: p.pads_begin[0],
                pw: p.pads_begin[1],
            })
        }

        /// One im2col row for output rows `oy0..oy0 + dst.len() / ow`: input plane `x` at kernel
        /// tap (i, j) for each of those output positions.
        fn im2col_row(&self, x: &[f32], dst: &mut [f32], i: usize, j: usize, oy0: usize) {
            let off = (j * self.dw) as i64 - self.pw;
            let (lo, hi) = valid_range(self.ow, self.sw, off, self.w);
            // Output rows whose input row lies inside the plane: one block of rows.
            let rows = dst.len() / self.ow;
            let row_off = (oy0 * self.sh + i * self.dh) as i64 - self.ph;
            let (r0, r1) = valid_range(rows, self.sh, row_off, self.h);
            if lo >= hi || r0 >= r1 {
                dst.fill(0.0);
                return;
            }
            dst[..r0 * self.ow].fill(0.0);
            dst[r1 * self.ow..].fill(0.0);
            if lo > 0 || hi < self.ow {
                for d in dst[r0 * self.ow..r1 * self.ow].chunks_exact_mut(self.ow) {
                    d[..lo].fill(0.0);
                    d[hi..].fill(0.0);
                }
            }
            let iy0 = (r0 as i64 * self.sh as i64 + row_off) as usize;
            let start = (lo as i64 * self.sw as i64 + off) as usize;
            fast32::copy_rows(
                &mut dst[r0 * self.ow + lo..],
                self.ow,
                &x[iy0 * self.w + start..],
                self.sh * self.w,
                r1 - r0,
                hi - lo,
                self.sw,
            );
        }
    }

    /// The stride phases of a zero-padded 2-D plane, so that every kernel tap of a strided
    /// (and dilated) window reads a contiguous run: phase (a, b) holds padded element
    /// `[y*sh + a][x*sw + b]` at `[y][x]`, `hq` rows of `wq` values (plus `wq` of slack).
    struct Phases {
        hq: usize,
        wq: usize,
        data: Vec<f32>,
    }

    impl Phases {
        fn new(g: &G2, oh: usize, fill: f32) -> Phases {
            let hq = oh + ((g.kh.max(1) - 1) * g.dh) / g.sh;
            let wq = g.ow + ((g.kw.max(1) - 1) * g.dw) / g.sw;
            Phases {
                hq,
                wq,
                // 32 values of slack past the last phase for whole 32-lane runs.
                data: vec![fill; g.sh * g.sw * (hq * wq + wq) + 32],
            }
        }

        fn plane_len(&self) -> usize {
            self.hq * self.wq + self.wq
        }

        /// Copies input plane `x` into the phases. Positions outside the plane are never
        /// written, so they keep the `fill` the phases were made with, plane after plane.
        fn load(&mut self, g: &G2, x: &[f32]) {
            let (hq, wq, len) = (self.hq, self.wq, self.plane_len());
            for a in 0..g.sh {
                for b in 0..g.sw {
                    let plane = &mut self.data[(a * g.sw + b) * len..][..len];
                    // Columns x with 0 <= x*sw + b - pw < w.
                    let (lo, hi) = valid_range(wq, g.sw, b as i64 - g.pw, g.w);
                    if lo >= hi {
                        continue;
                    }
                    // Phase rows y whose input row iy = y*sh + a - ph lies in 0..h.
                    let (y0, y1) = valid_range(hq, g.sh, a as i64 - g.ph, g.h);
                    if y0 >= y1 {
                        continue;
                    }
                    let iy0 = ((y0 * g.sh + a) as i64 - g.ph) as usize;
                    let start = ((lo * g.sw + b) as i64 - g.pw) as usize;
                    let rows = y1 - y0;
                    let n = hi - lo;
                    // Bounds of every row read and written (the copy itself is unchecked
                    // indexing in a vectorised loop, checked here once).
                    assert!((y1 - 1) * wq + hi <= plane.len());
                    assert!((iy0 + (rows - 1) * g.sh) * g.w + start + (n - 1) * g.sw < x.len());
                    fast32::copy_rows(
                        &mut plane[y0 * wq + lo..],
                        wq,
                        &x[iy0 * g.w + start..],
                        g.sh * g.w,
                        rows,
                        n,
                        g.sw,
                    );
                }
            }
        }

        /// Where in `data` the run read by tap (i, j) starts: output (oy, ox) of the tap reads
        /// `data[offset + oy * wq + ox]`.
        fn tap_offset(&self, g: &G2, i: usize, j: usize) -> usize {
            let (ri, cj) = (i * g.dh, j * g.dw);
            let plane = ((ri % g.sh) * g.sw + cj % g.sw) * self.plane_len();
            plane + (ri / g.sh) * self.wq + cj / g.sw
        }
    }

    /// float32 2-D MaxPool without dilation or indices, over a plane padded with -inf. `None`
    /// when a plane holds NaN or some window lies wholly in the padding: there the general
    /// kernel's first-element-wins and empty-window rules differ from a plain maximum.
    pub(super) fn max_pool_2d(
        x: &Tensor,
        k: &[usize],
        s: &[usize],
        pb: &[i64],
        out_sp: &[usize],
    ) -> KResult<Option<Vec<f32>>> {
        let (h, w) = (x.shape()[2], x.shape()[3]);
        let (oh, ow) = (out_sp[0], out_sp[1]);
        let planes = x.shape()[0] * x.shape()[1];
        if oh == 0 || ow == 0 || planes == 0 {
            return Ok(Some(Vec::new()));
        }
        // Every window must reach a real element: the first from the start, the last from the end.
        for (i, len) in [h, w].into_iter().enumerate() {
            let last = (out_sp[i] - 1) as i64 * s[i] as i64 - pb[i];
            if pb[i] >= k[i] as i64 || last >= len as i64 {
                return Ok(None);
            }
        }
        let xv = elems(x)?;
        if xv.iter().any(|v| v.is_nan()) {
            return Ok(None);
        }
        // The window's taps read the plane's stride phases (padded with -inf) as contiguous
        // runs, output rows kept `wq` wide.
        let g = G2 {
            h,
            w,
            kh: k[0],
            kw: k[1],
            ow,
            sh: s[0],
            sw: s[1],
            dh: 1,
            dw: 1,
            ph: pb[0],
            pw: pb[1],
        };
        let mut phases = Phases::new(&g, oh, f32::NEG_INFINITY);
        let offs: Vec<usize> = (0..k[0] * k[1])
            .map(|t| phases.tap_offset(&g, t / k[1], t % k[1]))
            .collect();
        let mut acc = vec![0f32; oh * phases.wq];
        // Every output row is copied below.
        let mut y = tensor::reuse::f32_buffer(planes * oh * ow);
        for (xs, out) in xv.chunks_exact(h * w).zip(y.chunks_exact_mut(oh * ow)) {
            phases.load(&g, xs);
            fast32::max_taps(&mut acc, &phases.data, &offs);
            for (orow, arow) in out.chunks_exact_mut(ow).zip(acc.chunks_exact(phases.wq)) {
                orow.copy_from_slice(&arow[..ow]);
            }
        }
        Ok(Some(y))
    }

    /// What `make` derives from the weights (input 1): kept in the node's state across runs when
    /// the weights are constant, else made for this run in `local`.
    fn weight_state<'s, 'r: 's, T: std::any::Any + Send + Sync>(
        cx: &RunCx<'r>,
        local: &'s mut Option<T>,
        make: impl Fn() -> T,
    ) -> KResult<&'s T> {
        if cx.is_constant(1) {
            if let Some(kept) = cx.prepared(|| Ok(make()))? {
                return Ok(kept);
            }
        }
        Ok(local.insert(make()))
    }

    /// Winograd pays off from this many input and output channels on (below, the transforms
    /// cost more than the multiplications they save).
    const WINOGRAD_MIN_CHANNELS: usize = 16;
    /// ... and this many 2×2 output tiles (fewer make its 16 products too narrow to run fast).
    const WINOGRAD_MIN_TILES: usize = 100;

    /// im2col values built at a time (256 KiB: well inside an L2 cache)...
    const COL_BLOCK: usize = 1 << 16;
    /// ... but never fewer output positions than this, so that each product stays wide.
    const MIN_COLS: usize = 384;

    /// The float32 convolution of `x` by `w` plus `b`; `fuse` lets it apply the node's
    /// epilogue (off when the node's own type is not float32: its chain must then round to
    /// that type between nodes).
    pub(super) fn conv_f32(
        cx: &RunCx,
        x: &Tensor,
        w: &Tensor,
        b: Option<&Tensor>,
        fuse: bool,
    ) -> KResult<Tensor> {
        let finish = |y: &mut [f32], shape: &[usize], bias: Option<&[f32]>| {
            if fuse {
                cx.finish_f32_biased(y, shape, bias);
            } else {
                crate::exec::epilogue::apply_f32_biased(bias, &[], y, shape);
            }
        };
        let p = conv_geom(cx, x.shape(), w.shape())?;
        let mut shape = vec![p.n, p.m];
        shape.extend(&p.out_sp);
        let osz = common::numel(cx, &p.out_sp)?;
        let total = common::numel(cx, &shape)?;
        let insz: usize = p.in_sp.iter().product();
        let ksz: usize = p.k_sp.iter().product();
        let (cg, mg) = (p.c / p.group, p.m / p.group);
        let rows = cg * ksz;
        let xv = elems(x)?;
        let wv = elems(w)?;
        let bias = match b {
            None => None,
            Some(b) => {
                if b.len() != p.m {
                    return Err(cx.invalid(format!(
                        "bias must hold {} values (one per output channel), got shape {:?}",
                        p.m,
                        b.shape()
                    )));
                }
                Some(elems(b)?)
            }
        };
        if total == 0 {
            return Ok(Tensor::from_vec(shape, Vec::<f32>::new())?);
        }
        // Every path below writes every output value (Winograd adds onto zeros or the bias).
        let mut y = tensor::reuse::f32_buffer(total);
        let threads = gemm::threads();
        let g2 = G2::of(&p);
        // Depthwise: one input channel per group and one output channel per group. Each plane
        // is split into its stride phases; then every tap is one long multiply-add over output
        // rows kept `wq` wide, and the valid `ow` columns of each row are added to the output.
        if let (Some(g), true) = (&g2, cg == 1 && mg == 1) {
            let oh = osz / g.ow;
            // Small planes: 16 channels at a time, each tap one vector of the 16.
            if g.ph >= 0 && g.pw >= 0 {
                let geo = depthwise::Geometry {
                    c: p.m,
                    h: g.h,
                    w: g.w,
                    kh: g.kh,
                    kw: g.kw,
                    sh: g.sh,
                    sw: g.sw,
                    dh: g.dh,
                    dw: g.dw,
                    ph: g.ph as usize,
                    pw: g.pw as usize,
                    oh,
                    ow: g.ow,
                };
                if depthwise::applies(&geo) {
                    let mut local = None;
                    let packed =
                        weight_state(cx, &mut local, || depthwise::pack_weights(&wv, &geo))?;
                    depthwise::conv(&geo, packed, bias.as_deref(), &xv, &mut y);
                    finish(&mut y, &shape, None);
                    return Ok(Tensor::from_vec(shape, y)?);
                }
            }
            let probe = Phases::new(g, oh, 0.0);
            let offs: Vec<usize> = (0..g.kh * g.kw)
                .map(|t| probe.tap_offset(g, t / g.kw, t % g.kw))
                .collect();
            let plane = |ph: &mut (Phases, Vec<f32>), (idx, out): (usize, &mut [f32])| {
                let (phases, acc) = ph;
                let ch = idx % p.m;
                phases.load(g, &xv[idx * insz..(idx + 1) * insz]);
                let b = bias.as_ref().map_or(0.0, |b| b[ch]);
                let w = &wv[ch * ksz..(ch + 1) * ksz];
                fast32::depthwise_plane(out, g.ow, phases.wq, &phases.data, &offs, w, b, acc);
            };
            let init = || (Phases::new(g, oh, 0.0), Vec::new());
            if threads > 1 && total >= gemm::PAR_MIN_TAPPED {
                y.par_chunks_exact_mut(osz)
                    .enumerate()
                    .for_each_init(init, plane);
            } else {
                let mut scratch = init();
                y.chunks_exact_mut(osz)
                    .enumerate()
                    .for_each(|item| plane(&mut scratch, item));
            }
            finish(&mut y, &shape, None);
            return Ok(Tensor::from_vec(shape, y)?);
        }
        // 3×3 unit-stride convolutions with enough channels: Winograd F(2×2, 3×3), with the
        // transformed filters kept across runs when the weights are an initializer.
        if let Some(g) = &g2 {
            let winograd = g.kh == 3
                && g.kw == 3
                && (g.sh, g.sw, g.dh, g.dw) == (1, 1, 1, 1)
                && p.group == 1
                && p.c >= WINOGRAD_MIN_CHANNELS
                && p.m >= WINOGRAD_MIN_CHANNELS
                && g.ph >= 0
                && g.pw >= 0
                && (osz / g.ow).div_ceil(2) * g.ow.div_ceil(2) >= WINOGRAD_MIN_TILES;
            if winograd {
                // The tiles' sums are added onto each output plane's bias.
                for (i, plane) in y.chunks_exact_mut(osz).enumerate() {
                    fast32::fill(plane, bias.as_ref().map_or(0.0, |b| b[i % p.m]));
                }
                let geo = winograd::Geometry {
                    c: p.c,
                    m: p.m,
                    h: g.h,
                    w: g.w,
                    oh: osz / g.ow,
                    ow: g.ow,
                    ph: g.ph as usize,
                    pw: g.pw as usize,
                };
                let mut local = None;
                let filters = weight_state(cx, &mut local, || winograd::filters(&wv, p.m, p.c))?;
                for (xn, yn) in xv
                    .chunks_exact(p.c * insz)
                    .zip(y.chunks_exact_mut(p.m * osz))
                {
                    winograd::conv(&geo, filters, xn, yn);
                }
                finish(&mut y, &shape, None);
                return Ok(Tensor::from_vec(shape, y)?);
            }
        }
        let pointwise = ksz == 1
            && p.strides.iter().all(|&s| s == 1)
            && p.pads_begin.iter().chain(&p.pads_end).all(|&v| v == 0);
        // Pointwise products vectorised over output channels, with the weights packed once.
        if pointwise && p.group == 1 && pointwise::applies(p.m, p.c, osz) {
            let mut local = None;
            let packed = weight_state(cx, &mut local, || pointwise::pack(&wv, p.m, p.c))?;
            for (xn, yn) in xv
                .chunks_exact(p.c * insz)
                .zip(y.chunks_exact_mut(p.m * osz))
            {
                pointwise::conv(packed, bias.as_deref(), xn, osz, yn);
            }
            finish(&mut y, &shape, None);
            return Ok(Tensor::from_vec(shape, y)?);
        }
        let tab = if pointwise || g2.is_some() {
            Vec::new()
        } else {
            window_table(
                cx,
                &p.out_sp,
                &p.k_sp,
                &p.strides,
                &p.dilations,
                &p.pads_begin,
                &p.pads_end,
                &p.in_sp,
            )?
        };
        // im2col one block of output positions at a time, sized so the column block stays in
        // the L2 cache while the product reads it (2-D blocks are whole output rows).
        let cols = (COL_BLOCK / rows.max(1)).max(MIN_COLS);
        // A pointwise product reads its input in place: one block, no columns.
        let step = match &g2 {
            _ if pointwise => osz,
            Some(g) => cols.div_ceil(g.ow) * g.ow,
            None => cols,
        }
        .min(osz);
        let mut col = if pointwise {
            Vec::new()
        } else {
            vec![0f32; rows * step]
        };
        for n in 0..p.n {
            for gi in 0..p.group {
                let xg = &xv[(n * p.c + gi * cg) * insz..(n * p.c + (gi + 1) * cg) * insz];
                let wg = &wv[gi * mg * rows..(gi + 1) * mg * rows];
                let ob = (n * p.m + gi * mg) * osz;
                for o0 in (0..osz).step_by(step) {
                    let nb = step.min(osz - o0);
                    let b = if pointwise {
                        Operand::rows(xg, osz)
                    } else {
                        let col = &mut col[..rows * nb];
                        let fill = |(r, dst): (usize, &mut [f32])| {
                            let (c, k) = (r / ksz, r % ksz);
                            let xs = &xg[c * insz..(c + 1) * insz];
                            match &g2 {
                                Some(g) => g.im2col_row(xs, dst, k / g.kw, k % g.kw, o0 / g.ow),
                                None => {
                                    let t = &tab[k * osz + o0..k * osz + o0 + nb];
                                    for (d, &o) in dst.iter_mut().zip(t) {
                                        *d = if o < PAD { xs[o] } else { 0.0 };
                                    }
                                }
                            }
                        };
                        if threads > 1 && rows * nb >= 1 << 15 {
                            col.par_chunks_exact_mut(nb).enumerate().for_each(fill);
                        } else {
                            col.chunks_exact_mut(nb).enumerate().for_each(fill);
                        }
                        Operand::rows(col, nb)
                    };
                    gemm::gemm_ldc(
                        mg,
                        rows,
                        nb,
                        Operand::rows(wg, rows),
                        b,
                        &mut y[ob + o0..ob + (mg - 1) * osz + o0 + nb],
                        osz,
                        false,
                        1.0,
                    );
                }
            }
        }
        // The bias, then the epilogue, in one pass over the output.
        finish(&mut y, &shape, bias.as_deref());
        Ok(Tensor::from_vec(shape, y)?)
    }
}

/// ConvInteger: integer convolution of (x - x_zero_point) by (w - w_zero_point) into int32.
fn conv_integer(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let w = cx.input(1)?;
    for t in [x, w] {
        if !matches!(t.dtype(), DataType::Int8 | DataType::Uint8) {
            return Err(cx.unsupported(t.dtype()));
        }
    }
    let p = conv_plan(cx, x.shape(), w.shape())?;
    let xz = zero_point(cx, 2, 1)?;
    let wz = zero_point(cx, 3, p.m)?;
    let xv: Vec<f64> = load_f64(x)?.into_iter().map(|v| v - xz[0]).collect();
    let mut wv = load_f64(w)?;
    let per = wv.len() / p.m.max(1);
    for (i, v) in wv.iter_mut().enumerate() {
        *v -= wz[if wz.len() == 1 { 0 } else { i / per }];
    }
    let y = conv_compute::<f64>(&p, &xv, &wv, None);
    let mut shape = vec![p.n, p.m];
    shape.extend(&p.out_sp);
    let y: Vec<i32> = y.into_iter().map(|v| v as i32).collect();
    Ok(vec![Tensor::from_vec(shape, y)?.into()])
}

/// Optional zero point input `i`: one value or `per` values (zeros when absent).
fn zero_point(cx: &RunCx, i: usize, per: usize) -> KResult<Vec<f64>> {
    match cx.opt_input(i)? {
        None => Ok(vec![0.0]),
        Some(t) => {
            let v = load_f64(t)?;
            if v.len() == 1 || v.len() == per {
                Ok(v)
            } else {
                Err(cx.invalid(format!(
                    "zero point/scale input {i} must hold 1 or {per} values, got shape {:?}",
                    t.shape()
                )))
            }
        }
    }
}

/// QLinearConv: quantized convolution (dequantize, convolve, requantize with rounding half to even).
fn qlinear_conv(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let w = cx.input(3)?;
    for t in [x, w] {
        if !matches!(t.dtype(), DataType::Int8 | DataType::Uint8) {
            return Err(cx.unsupported(t.dtype()));
        }
    }
    let p = conv_plan(cx, x.shape(), w.shape())?;
    let xs = zero_point(cx, 1, 1)?;
    let xz = zero_point(cx, 2, 1)?;
    let ws = zero_point(cx, 4, p.m)?;
    let wz = zero_point(cx, 5, p.m)?;
    let ys = zero_point(cx, 6, 1)?;
    let yz_t = cx.input(7)?;
    let yz = zero_point(cx, 7, 1)?;
    let xv: Vec<f64> = load_f64(x)?.into_iter().map(|v| v - xz[0]).collect();
    let mut wv = load_f64(w)?;
    let per = wv.len() / p.m.max(1);
    for (i, v) in wv.iter_mut().enumerate() {
        *v -= wz[if wz.len() == 1 { 0 } else { i / per }];
    }
    let b = match cx.opt_input(8)? {
        Some(b) if b.len() == p.m => Some(load_f64(b)?),
        Some(b) => {
            return Err(cx.invalid(format!(
                "B must hold {} values, got shape {:?}",
                p.m,
                b.shape()
            )))
        }
        None => None,
    };
    let acc = conv_compute::<f64>(&p, &xv, &wv, b.as_deref());
    let osz: usize = p.out_sp.iter().product();
    let (lo, hi) = match yz_t.dtype() {
        DataType::Uint8 => (0.0, 255.0),
        DataType::Int8 => (-128.0, 127.0),
        other => return Err(cx.unsupported(other)),
    };
    let q: Vec<f64> = acc
        .iter()
        .enumerate()
        .map(|(i, &a)| {
            let oc = (i / osz) % p.m;
            let scale = xs[0] * ws[if ws.len() == 1 { 0 } else { oc }] / ys[0];
            // The reference computes in float32.
            let v = (a as f32 * scale as f32) as f64;
            (v.round_ties_even() + yz[0]).clamp(lo, hi)
        })
        .collect();
    let mut shape = vec![p.n, p.m];
    shape.extend(&p.out_sp);
    let t = match yz_t.dtype() {
        DataType::Uint8 => Tensor::from_vec(shape, q.into_iter().map(|v| v as u8).collect())?,
        _ => Tensor::from_vec(shape, q.into_iter().map(|v| v as i8).collect())?,
    };
    Ok(vec![t.into()])
}

/// ConvTranspose: N-d grouped transposed convolution with output_padding / output_shape.
fn conv_transpose(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let w = cx.input(1)?;
    let xs = x.shape();
    let ws = w.shape();
    if xs.len() < 3 || ws.len() != xs.len() {
        return Err(cx.invalid(format!(
            "X must have rank >= 3 and W the same rank, got X {xs:?} and W {ws:?}"
        )));
    }
    let nsp = xs.len() - 2;
    let group = cx.int("group", 1)?;
    if group < 1 {
        return Err(cx.invalid(format!("group must be >= 1, got {group}")));
    }
    let group = group as usize;
    let c = xs[1];
    if group > c.max(1) {
        return Err(cx.invalid(format!("group {group} exceeds the {c} input channels")));
    }
    if ws[0] != c || c % group != 0 {
        return Err(cx.invalid(format!(
            "W.shape[0] ({}) must equal X channels ({c}), divisible by group {group}",
            ws[0]
        )));
    }
    let mg = ws[1];
    let m = mg * group;
    let k_sp = ws[2..].to_vec();
    let s = common::positive_n(cx, "strides", nsp)?;
    let d = common::positive_n(cx, "dilations", nsp)?;
    let op = match cx.attr_ints("output_padding")? {
        Some(v) if v.len() >= nsp => v[..nsp].to_vec(),
        Some([]) => vec![0; nsp],
        None => vec![0; nsp],
        Some(v) => {
            return Err(cx.invalid(format!("output_padding must hold {nsp} values, got {v:?}")))
        }
    };
    let in_sp = xs[2..].to_vec();
    let keff: Vec<i64> = (0..nsp)
        .map(|i| ((k_sp[i].max(1) - 1) * d[i] + 1) as i64)
        .collect();
    let out_attr = match cx.attr_ints("output_shape")? {
        Some(v) if v.len() == nsp => Some(v.to_vec()),
        Some(v) if v.len() == nsp + 2 => Some(v[2..].to_vec()),
        Some([]) => None,
        None => None,
        Some(v) => {
            return Err(cx.invalid(format!("output_shape must hold {nsp} values, got {v:?}")))
        }
    };
    if op
        .iter()
        .chain(out_attr.iter().flatten())
        .any(|v| v.unsigned_abs() > common::LIMIT)
    {
        return Err(cx.invalid(format!(
            "output_padding {op:?} / output_shape {out_attr:?} must lie within ±{}",
            common::LIMIT
        )));
    }
    let ap = auto_pad(cx)?;
    let has_pads = cx.attr_ints("pads")?.is_some_and(|p| !p.is_empty());
    let (pb, pe, out_sp): (Vec<i64>, Vec<i64>, Vec<i64>) = if !has_pads && ap.starts_with("SAME") {
        let out: Vec<i64> = out_attr
            .clone()
            .unwrap_or_else(|| (0..nsp).map(|i| (in_sp[i] * s[i]) as i64).collect());
        let mut pb = vec![0; nsp];
        let mut pe = vec![0; nsp];
        for i in 0..nsp {
            let total = s[i] as i64 * (in_sp[i] as i64 - 1) + op[i] + keff[i] - out[i];
            if ap == "SAME_UPPER" {
                pb[i] = total.div_euclid(2); // floor, as the reference (total may be negative)
            } else {
                pb[i] = total - total.div_euclid(2);
            }
            pe[i] = total - pb[i];
        }
        (pb, pe, out)
    } else {
        let (pb, pe) = if ap == "VALID" {
            (vec![0; nsp], vec![0; nsp])
        } else {
            explicit_pads(cx, nsp)?
        };
        let out = out_attr.clone().unwrap_or_else(|| {
            (0..nsp)
                .map(|i| s[i] as i64 * (in_sp[i] as i64 - 1) + op[i] + keff[i] - pb[i] - pe[i])
                .collect()
        });
        (pb, pe, out)
    };
    if out_sp.iter().any(|&o| o < 0) {
        return Err(cx.invalid(format!("computed output shape {out_sp:?} is negative")));
    }
    let out_sp: Vec<usize> = out_sp.iter().map(|&o| o as usize).collect();
    let tab = window_table(cx, &in_sp, &k_sp, &s, &d, &pb, &pe, &out_sp)?;
    let n = xs[0];
    let mut shape = vec![n, m];
    shape.extend(&out_sp);
    common::numel(cx, &shape)?;
    crate::with_real!(cx, x.dtype(), F => {
        let b = bias_of::<F>(cx, 2, m)?;
        let xv = load::<F>(x)?;
        let wv = load::<F>(w)?;
        let insz: usize = in_sp.iter().product();
        let osz: usize = out_sp.iter().product();
        let ksz: usize = k_sp.iter().product();
        let cg = c / group;
        let mut y = vec![F::zero(); n * m * osz];
        let mut col = vec![F::zero(); insz];
        for nn in 0..n {
            for g in 0..group {
                for mm in 0..mg {
                    let oc = g * mg + mm;
                    let out = &mut y[(nn * m + oc) * osz..(nn * m + oc + 1) * osz];
                    let bias = b.as_ref().map_or(F::zero(), |b| b[oc]);
                    out.iter_mut().for_each(|v| *v = bias);
                    for k in 0..ksz {
                        col.iter_mut().for_each(|v| *v = F::zero());
                        for ci in 0..cg {
                            let ic = g * cg + ci;
                            let wv = wv[(ic * mg + mm) * ksz + k];
                            if wv == F::zero() {
                                continue;
                            }
                            let xr = &xv[(nn * c + ic) * insz..(nn * c + ic + 1) * insz];
                            for (cv, &xv) in col.iter_mut().zip(xr) {
                                *cv += wv * xv;
                            }
                        }
                        let t = &tab[k * insz..(k + 1) * insz];
                        for (&o, &cv) in t.iter().zip(col.iter()) {
                            if o < PAD {
                                out[o] += cv;
                            }
                        }
                    }
                }
            }
        }
        Ok(vec![store(x.dtype(), shape, y)?.into()])
    })
}

// ---------------------------------------------------------------------------------------------
// Pooling

/// Pooling kinds.
#[derive(Clone, Copy, PartialEq)]
enum PoolKind {
    Avg,
    Max,
    Lp(f64),
}

/// Reads LpPool's `p` (a float before opset 2, an int after).
fn p_attr(cx: &RunCx) -> KResult<f64> {
    match cx.attr("p") {
        None => Ok(2.0),
        Some(a) if a.r#type == Some(onnx_proto::attribute_proto::AttributeType::Float as i32) => {
            Ok(a.f() as f64)
        }
        Some(a) => Ok(a.i() as f64),
    }
}

/// AveragePool / MaxPool / LpPool over an N,C,spatial... input.
fn pool(cx: &RunCx, kind: PoolKind) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let in_sp = spatial_of(cx, x, "X")?.to_vec();
    let nsp = in_sp.len();
    let k_sp: Vec<usize> = match cx.attr_ints("kernel_shape")? {
        Some(k) if k.len() == nsp && k.iter().all(|&v| v >= 1 && v as u64 <= common::LIMIT) => {
            k.iter().map(|&v| v as usize).collect()
        }
        other => {
            return Err(cx.invalid(format!(
                "kernel_shape must hold {nsp} positive values, got {other:?}"
            )))
        }
    };
    let s = common::positive_n(cx, "strides", nsp)?;
    let d = common::positive_n(cx, "dilations", nsp)?;
    let keff: Vec<usize> = (0..nsp).map(|i| (k_sp[i] - 1) * d[i] + 1).collect();
    let (pb, pe, out_sp) = pool_geometry(cx, &in_sp, &keff, &s)?;
    if kind == PoolKind::Max
        && x.dtype() == DataType::Float
        && !cx.wants_output(1)
        && nsp == 2
        && d.iter().all(|&v| v == 1)
    {
        let mut shape = vec![x.shape()[0], x.shape()[1]];
        shape.extend(&out_sp);
        common::numel(cx, &shape)?;
        if let Some(y) = fast::max_pool_2d(x, &k_sp, &s, &pb, &out_sp)? {
            return Ok(vec![Tensor::from_vec(shape, y)?.into()]);
        }
    }
    let tab = window_table(cx, &out_sp, &k_sp, &s, &d, &pb, &pe, &in_sp)?;
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let insz: usize = in_sp.iter().product();
    let osz: usize = out_sp.iter().product();
    let ksz: usize = k_sp.iter().product();
    let mut shape = vec![n, c];
    shape.extend(&out_sp);
    common::numel(cx, &shape)?;
    let include_pad = cx.int("count_include_pad", 0)? != 0;
    let want_idx = kind == PoolKind::Max && cx.wants_output(1);
    let storage_order = cx.int("storage_order", 0)?;
    let is_float = matches!(
        x.dtype(),
        DataType::Float | DataType::Double | DataType::Float16 | DataType::Bfloat16
    );
    let int_ok = kind == PoolKind::Max && matches!(x.dtype(), DataType::Int8 | DataType::Uint8);
    if !is_float && !int_ok {
        return Err(cx.unsupported(x.dtype()));
    }
    let xv = load_f64(x)?;
    let mut y = vec![0f64; n * c * osz];
    let mut idx = if want_idx {
        vec![-1i64; n * c * osz]
    } else {
        vec![]
    };
    for nc in 0..n * c {
        let xs = &xv[nc * insz..(nc + 1) * insz];
        for o in 0..osz {
            let yo = nc * osz + o;
            match kind {
                PoolKind::Max => {
                    let mut best: Option<(f64, usize)> = None;
                    for k in 0..ksz {
                        let t = tab[k * osz + o];
                        if t < PAD && best.is_none_or(|(b, _)| xs[t] > b) {
                            best = Some((xs[t], t));
                        }
                    }
                    if let Some((b, t)) = best {
                        y[yo] = b;
                        if want_idx {
                            let sp = if storage_order == 0 {
                                t
                            } else {
                                col_major(t, &in_sp)
                            };
                            idx[yo] = (nc * insz + sp) as i64;
                        }
                    }
                }
                PoolKind::Avg => {
                    let (mut sum, mut cnt) = (0f64, 0usize);
                    for k in 0..ksz {
                        let t = tab[k * osz + o];
                        if t < PAD {
                            sum += xs[t];
                            cnt += 1;
                        } else if t == PAD && include_pad {
                            cnt += 1;
                        }
                    }
                    y[yo] = sum / cnt as f64;
                }
                PoolKind::Lp(p) => {
                    // As PyTorch and the reference: kernel size * mean over the window's
                    // elements inside the padded input (pads count as zeros; a ceil-mode
                    // overhang does not count).
                    let (mut sum, mut cnt) = (0f64, 0usize);
                    for k in 0..ksz {
                        let t = tab[k * osz + o];
                        if t < PAD {
                            sum += xs[t].abs().powf(p);
                            cnt += 1;
                        } else if t == PAD {
                            cnt += 1;
                        }
                    }
                    let scaled = if cnt == 0 {
                        0.0
                    } else {
                        sum * ksz as f64 / cnt as f64
                    };
                    y[yo] = scaled.powf(1.0 / p);
                }
            }
        }
    }
    let yt = numeric_store(cx, x.dtype(), shape.clone(), y)?;
    let mut outs = vec![yt.into()];
    if want_idx {
        outs.push(Tensor::from_vec(shape, idx)?.into());
    }
    Ok(outs)
}

/// Column-major (storage_order=1) spatial index of row-major offset `t` over `sp`.
fn col_major(t: usize, sp: &[usize]) -> usize {
    let st = crate::exec::util::strides(sp);
    let mut r = 0;
    let mut mul = 1;
    for i in 0..sp.len() {
        let c = (t / st[i]) % sp[i];
        r += c * mul;
        mul *= sp[i];
    }
    r
}

/// Stores f64 values as a float or 8-bit integer tensor of `dtype`.
fn numeric_store(cx: &RunCx, dtype: DataType, shape: Vec<usize>, v: Vec<f64>) -> KResult<Tensor> {
    match dtype {
        DataType::Int8 => Ok(Tensor::from_vec(
            shape,
            v.into_iter().map(|x| x as i8).collect(),
        )?),
        DataType::Uint8 => Ok(Tensor::from_vec(
            shape,
            v.into_iter().map(|x| x as u8).collect(),
        )?),
        d => crate::for_float!(d, T => {
            Ok(Tensor::from_vec(shape, v.into_iter().map(<T as FloatConv>::from_f64).collect::<Vec<T>>())?)
        } else Err(cx.unsupported(d))),
    }
}

/// AveragePool.
fn average_pool(cx: &RunCx) -> KResult<Vec<Value>> {
    pool(cx, PoolKind::Avg)
}

/// MaxPool (with the optional Indices output).
fn max_pool(cx: &RunCx) -> KResult<Vec<Value>> {
    pool(cx, PoolKind::Max)
}

/// LpPool.
fn lp_pool(cx: &RunCx) -> KResult<Vec<Value>> {
    pool(cx, PoolKind::Lp(p_attr(cx)?))
}

/// Global pooling over all spatial dims.
fn global_pool(cx: &RunCx, kind: PoolKind) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let in_sp = spatial_of(cx, x, "X")?;
    let insz: usize = in_sp.iter().product();
    let (n, c) = (x.shape()[0], x.shape()[1]);
    let mut shape = vec![n, c];
    shape.extend(std::iter::repeat_n(1, in_sp.len()));
    if kind == PoolKind::Avg && x.dtype() == DataType::Float {
        // Summed in double precision over eight independent lanes (so the loop vectorises).
        let xv = crate::kernels::fast32::elems(x)?;
        let y: Vec<f32> = (0..n * c)
            .map(|i| {
                let s = &xv[i * insz..(i + 1) * insz];
                let mut lanes = [0f64; 8];
                let mut chunks = s.chunks_exact(8);
                for ch in &mut chunks {
                    for (l, &v) in lanes.iter_mut().zip(ch) {
                        *l += v as f64;
                    }
                }
                let tail: f64 = chunks.remainder().iter().map(|&v| v as f64).sum();
                ((lanes.iter().sum::<f64>() + tail) / insz as f64) as f32
            })
            .collect();
        return Ok(vec![Tensor::from_vec(shape, y)?.into()]);
    }
    crate::with_real!(cx, x.dtype(), F => {
        let xv = load::<F>(x)?;
        let y: Vec<F> = (0..n * c)
            .map(|i| {
                let s = &xv[i * insz..(i + 1) * insz];
                match kind {
                    PoolKind::Avg => {
                        let sum: f64 = s.iter().map(|v| v.f()).sum();
                        F::of(sum / insz as f64)
                    }
                    PoolKind::Max => s.iter().copied().fold(F::neg_infinity(), |a, b| if b > a { b } else { a }),
                    PoolKind::Lp(p) => {
                        let sum: f64 = s.iter().map(|v| v.f().abs().powf(p)).sum();
                        F::of(sum.powf(1.0 / p))
                    }
                }
            })
            .collect();
        Ok(vec![store(x.dtype(), shape, y)?.into()])
    })
}

/// GlobalAveragePool.
fn global_average_pool(cx: &RunCx) -> KResult<Vec<Value>> {
    global_pool(cx, PoolKind::Avg)
}

/// GlobalMaxPool.
fn global_max_pool(cx: &RunCx) -> KResult<Vec<Value>> {
    global_pool(cx, PoolKind::Max)
}

/// GlobalLpPool.
fn global_lp_pool(cx: &RunCx) -> KResult<Vec<Value>> {
    global_pool(cx, PoolKind::Lp(p_attr(cx)?))
}

// ---------------------------------------------------------------------------------------------
// MaxUnpool, RoiAlign, MaxRoiPool, DeformConv, CausalConvWithState

/// MaxUnpool: scatters X to the positions `I` names (output_shape input optional).
fn max_unpool(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let ind = cx.input(1)?;
    let in_sp = spatial_of(cx, x, "X")?.to_vec();
    let nsp = in_sp.len();
    if ind.shape() != x.shape() {
        return Err(cx.invalid(format!(
            "I must have X's shape {:?}, got {:?}",
            x.shape(),
            ind.shape()
        )));
    }
    let k: Vec<i64> = match cx.attr_ints("kernel_shape")? {
        Some(k) if k.len() == nsp && k.iter().all(|&v| v >= 1 && v as u64 <= common::LIMIT) => {
            k.to_vec()
        }
        other => {
            return Err(cx.invalid(format!(
                "kernel_shape must hold {nsp} positive values, got {other:?}"
            )))
        }
    };
    let s = common::positive_n(cx, "strides", nsp)?;
    let (pb, pe) = explicit_pads(cx, nsp)?;
    let mut inferred = vec![x.shape()[0], x.shape()[1]];
    for i in 0..nsp {
        let v = (in_sp[i] as i64 - 1) * s[i] as i64 - (pb[i] + pe[i]) + k[i];
        if v < 0 {
            return Err(cx.invalid(format!("inferred output dim {v} is negative")));
        }
        inferred.push(v as usize);
    }
    let shape: Vec<usize> = match cx.opt_input(2)? {
        Some(t) => {
            let v = crate::exec::util::to_i64s(t)?;
            if v.len() != inferred.len() || v.iter().zip(&inferred).any(|(&a, &b)| a < b as i64) {
                return Err(cx.invalid(format!(
                    "output_shape must hold {} values no smaller than the inferred shape {inferred:?}, got {v:?}",
                    inferred.len()
                )));
            }
            v.into_iter().map(|d| d as usize).collect()
        }
        None => inferred.clone(),
    };
    let total = common::numel(cx, &inferred)?;
    common::numel(cx, &shape)?;
    let iv = crate::exec::util::to_i64s(ind)?;
    let mut offs = vec![usize::MAX; total];
    for (src, &i) in iv.iter().enumerate() {
        if i < 0 || i as usize >= total {
            return Err(cx.invalid(format!(
                "index {i} in I is out of range for the output of {total} elements"
            )));
        }
        offs[i as usize] = src;
    }
    // Place the inferred-shape result at the top-left corner of `shape`.
    let ist = crate::exec::util::strides(&inferred);
    let mut full = vec![usize::MAX; shape.iter().product()];
    let ost = crate::exec::util::strides(&shape);
    common::for_each_index(&inferred, |idx| {
        let a: usize = idx.iter().zip(&ist).map(|(i, s)| i * s).sum();
        let b: usize = idx.iter().zip(&ost).map(|(i, s)| i * s).sum();
        full[b] = offs[a];
    });
    // Gather (missing positions get zero).
    let n = x.len();
    let zero = crate::exec::util::zeros(x.dtype(), vec![1])?;
    let ext = crate::exec::util::concat_flat(&[x, &zero], x.dtype(), vec![n + 1])?;
    let offs: Vec<usize> = full
        .into_iter()
        .map(|o| if o == usize::MAX { n } else { o })
        .collect();
    Ok(vec![crate::exec::util::take(&ext, &offs, shape)?.into()])
}

/// RoiAlign (avg / max, half_pixel or output_half_pixel coordinates).
fn roi_align(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let rois = cx.input(1)?;
    let bi = crate::exec::util::to_i64s(cx.input(2)?)?;
    if x.rank() != 4 || rois.rank() != 2 || rois.shape()[1] != 4 || rois.shape()[0] != bi.len() {
        return Err(cx.invalid(format!(
            "X must be (N, C, H, W), rois (R, 4) and batch_indices (R), got {:?}, {:?}, {}",
            x.shape(),
            rois.shape(),
            bi.len()
        )));
    }
    let mode = cx.string("mode", "avg")?.to_ascii_lowercase();
    if mode != "avg" && mode != "max" {
        return Err(cx.invalid(format!("mode must be avg or max, got '{mode}'")));
    }
    let ctm = cx.string(
        "coordinate_transformation_mode",
        if cx.opset < 16 {
            "output_half_pixel"
        } else {
            "half_pixel"
        },
    )?;
    let half_pixel = match ctm.as_str() {
        "half_pixel" => true,
        "output_half_pixel" => false,
        _ => {
            return Err(cx.invalid(format!(
            "coordinate_transformation_mode must be half_pixel or output_half_pixel, got '{ctm}'"
        )))
        }
    };
    let oh = cx.int("output_height", 1)?;
    let ow = cx.int("output_width", 1)?;
    if oh < 1 || ow < 1 {
        return Err(cx.invalid(format!(
            "output_height/width must be positive, got {oh}x{ow}"
        )));
    }
    let (oh, ow) = (oh as usize, ow as usize);
    let sr = cx.int("sampling_ratio", 0)?;
    let scale = cx.float("spatial_scale", 1.0)? as f64;
    let [n, c, h, w] = [x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]];
    let nr = bi.len();
    if h == 0 || w == 0 {
        return Err(cx.invalid(format!(
            "X spatial dims must be non-empty, got {:?}",
            x.shape()
        )));
    }
    let shape = vec![nr, c, oh, ow];
    common::numel(cx, &shape)?;
    if !matches!(
        x.dtype(),
        DataType::Float | DataType::Double | DataType::Float16 | DataType::Bfloat16
    ) {
        return Err(cx.unsupported(x.dtype()));
    }
    let xv = load_f64(x)?;
    let rv = load_f64(rois)?;
    let mut y = vec![0f64; nr * c * oh * ow];
    for r in 0..nr {
        let b = bi[r];
        if b < 0 || b as usize >= n {
            return Err(cx.invalid(format!("batch index {b} is out of range for batch {n}")));
        }
        let b = b as usize;
        let off = if half_pixel { 0.5 } else { 0.0 };
        let sw = rv[r * 4] * scale - off;
        let sh = rv[r * 4 + 1] * scale - off;
        let ew = rv[r * 4 + 2] * scale - off;
        let eh = rv[r * 4 + 3] * scale - off;
        let (mut rw, mut rh) = (ew - sw, eh - sh);
        if !half_pixel {
            rw = rw.max(1.0);
            rh = rh.max(1.0);
        }
        let bh = rh / oh as f64;
        let bw = rw / ow as f64;
        let gh = if sr > 0 {
            sr as usize
        } else {
            (rh / oh as f64).ceil().max(0.0) as usize
        };
        let gw = if sr > 0 {
            sr as usize
        } else {
            (rw / ow as f64).ceil().max(0.0) as usize
        };
        if gh.saturating_mul(gw).saturating_mul(oh * ow) > 1 << 26 {
            return Err(cx.invalid("RoiAlign sampling grid too large"));
        }
        let count = (gh * gw).max(1) as f64;
        // Precompute the bilinear taps per (ph, pw, iy, ix).
        let mut pre: Vec<([usize; 4], [f64; 4])> = Vec::with_capacity(oh * ow * gh * gw);
        for ph in 0..oh {
            for pw in 0..ow {
                for iy in 0..gh {
                    let yy = sh + ph as f64 * bh + (iy as f64 + 0.5) * bh / gh as f64;
                    for ix in 0..gw {
                        let xx = sw + pw as f64 * bw + (ix as f64 + 0.5) * bw / gw as f64;
                        let (mut yv, mut xq) = (yy, xx);
                        if yv < -1.0 || yv > h as f64 || xq < -1.0 || xq > w as f64 {
                            pre.push(([0; 4], [0.0; 4]));
                            continue;
                        }
                        yv = yv.max(0.0);
                        xq = xq.max(0.0);
                        let (mut yl, mut xl) = (yv as usize, xq as usize);
                        let (yh, xh);
                        if yl >= h - 1 {
                            yl = h - 1;
                            yh = yl;
                            yv = yl as f64;
                        } else {
                            yh = yl + 1;
                        }
                        if xl >= w - 1 {
                            xl = w - 1;
                            xh = xl;
                            xq = xl as f64;
                        } else {
                            xh = xl + 1;
                        }
                        let (ly, lx) = (yv - yl as f64, xq - xl as f64);
                        let (hy, hx) = (1.0 - ly, 1.0 - lx);
                        pre.push((
                            [yl * w + xl, yl * w + xh, yh * w + xl, yh * w + xh],
                            [hy * hx, hy * lx, ly * hx, ly * lx],
                        ));
                    }
                }
            }
        }
        for ch in 0..c {
            let src = &xv[(b * c + ch) * h * w..(b * c + ch + 1) * h * w];
            for p in 0..oh * ow {
                let taps = &pre[p * gh * gw..(p + 1) * gh * gw];
                let v = if mode == "avg" {
                    taps.iter()
                        .map(|(pos, wt)| (0..4).map(|k| wt[k] * src[pos[k]]).sum::<f64>())
                        .sum::<f64>()
                        / count
                } else {
                    let mut best: Option<f64> = None;
                    for (pos, wt) in taps {
                        let v = (0..4)
                            .map(|k| wt[k] * src[pos[k]])
                            .fold(f64::NEG_INFINITY, f64::max);
                        best = Some(best.map_or(v, |b: f64| b.max(v)));
                    }
                    best.unwrap_or(0.0)
                };
                y[(r * c + ch) * oh * ow + p] = v;
            }
        }
    }
    Ok(vec![numeric_store(cx, x.dtype(), shape, y)?.into()])
}

/// `round(v) + start` clamped to `0..=len` (saturating).
fn edge(v: f64, round: fn(f64) -> f64, start: i64, len: usize) -> usize {
    (round(v) as i64).saturating_add(start).clamp(0, len as i64) as usize
}

/// MaxRoiPool: Caffe-style max pooling over each region of interest.
fn max_roi_pool(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let rois = cx.input(1)?;
    if x.rank() != 4 || rois.rank() != 2 || rois.shape()[1] != 5 {
        return Err(cx.invalid(format!(
            "X must be (N, C, H, W) and rois (R, 5), got {:?} and {:?}",
            x.shape(),
            rois.shape()
        )));
    }
    let ps = match cx.attr_ints("pooled_shape")? {
        Some(p) if p.len() == 2 && p.iter().all(|&v| v >= 1) => [p[0] as usize, p[1] as usize],
        other => {
            return Err(cx.invalid(format!(
                "pooled_shape must hold 2 positive values, got {other:?}"
            )))
        }
    };
    let scale = cx.float("spatial_scale", 1.0)? as f64;
    let [n, c, h, w] = [x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]];
    let nr = rois.shape()[0];
    let shape = vec![nr, c, ps[0], ps[1]];
    common::numel(cx, &shape)?;
    if !matches!(
        x.dtype(),
        DataType::Float | DataType::Double | DataType::Float16 | DataType::Bfloat16
    ) {
        return Err(cx.unsupported(x.dtype()));
    }
    let xv = load_f64(x)?;
    let rv = load_f64(rois)?;
    let mut y = vec![0f64; nr * c * ps[0] * ps[1]];
    for r in 0..nr {
        let roi = &rv[r * 5..r * 5 + 5];
        let b = roi[0] as i64;
        if b < 0 || b as usize >= n {
            return Err(cx.invalid(format!("roi batch index {b} is out of range for batch {n}")));
        }
        let b = b as usize;
        let sw = (roi[1] * scale).round() as i64;
        let sh = (roi[2] * scale).round() as i64;
        let ew = (roi[3] * scale).round() as i64;
        let eh = (roi[4] * scale).round() as i64;
        let rh = eh.saturating_sub(sh).saturating_add(1).max(1) as f64;
        let rw = ew.saturating_sub(sw).saturating_add(1).max(1) as f64;
        let bh = rh / ps[0] as f64;
        let bw = rw / ps[1] as f64;
        for ch in 0..c {
            let src = &xv[(b * c + ch) * h * w..(b * c + ch + 1) * h * w];
            for ph in 0..ps[0] {
                let hs = edge(ph as f64 * bh, f64::floor, sh, h);
                let he = edge((ph + 1) as f64 * bh, f64::ceil, sh, h);
                for pw in 0..ps[1] {
                    let ws = edge(pw as f64 * bw, f64::floor, sw, w);
                    let we = edge((pw + 1) as f64 * bw, f64::ceil, sw, w);
                    let mut m = f64::NEG_INFINITY;
                    for yy in hs..he {
                        for xx in ws..we {
                            m = m.max(src[yy * w + xx]);
                        }
                    }
                    y[((r * c + ch) * ps[0] + ph) * ps[1] + pw] =
                        if hs >= he || ws >= we { 0.0 } else { m };
                }
            }
        }
    }
    Ok(vec![numeric_store(cx, x.dtype(), shape, y)?.into()])
}

/// DeformConv (2-D): convolution sampling X bilinearly at offset positions, with optional mask.
fn deform_conv(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let w = cx.input(1)?;
    let off = cx.input(2)?;
    if x.rank() != 4 {
        return Err(cx.unsupported(format!(
            "{} with rank-{} input (only 2-D is implemented)",
            x.dtype(),
            x.rank()
        )));
    }
    if w.rank() != 4 || off.rank() != 4 {
        return Err(cx.invalid(format!(
            "W and offset must have rank 4, got {:?} and {:?}",
            w.shape(),
            off.shape()
        )));
    }
    let [n, ic, ih, iw] = [x.shape()[0], x.shape()[1], x.shape()[2], x.shape()[3]];
    let oc = w.shape()[0];
    let group = cx.int("group", 1)?.max(1) as usize;
    let og = cx.int("offset_group", 1)?.max(1) as usize;
    let (kh, kw) = (w.shape()[2], w.shape()[3]);
    if kh == 0 || kw == 0 || group > ic.max(1) || og > ic.max(1) {
        return Err(cx.invalid(format!(
            "W must have a non-empty kernel and group/offset_group at most the {ic} channels, got W {:?}, group {group}, offset_group {og}",
            w.shape()
        )));
    }
    if ic != w.shape()[1] * group || oc % group != 0 || ic % og != 0 {
        return Err(cx.invalid(format!(
            "inconsistent shapes: X {:?}, W {:?}, group {group}, offset_group {og}",
            x.shape(),
            w.shape()
        )));
    }
    let s = common::positive_n(cx, "strides", 2)?;
    let d = common::positive_n(cx, "dilations", 2)?;
    let (pb, pe) = explicit_pads(cx, 2)?;
    let khe = (kh - 1) * d[0] + 1;
    let kwe = (kw - 1) * d[1] + 1;
    let oh_i = (ih as i64 + pb[0] + pe[0] - khe as i64) / s[0] as i64 + 1;
    let ow_i = (iw as i64 + pb[1] + pe[1] - kwe as i64) / s[1] as i64 + 1;
    let (oh, ow) = (off.shape()[2], off.shape()[3]);
    let k = kh * kw;
    if oh_i != oh as i64 || ow_i != ow as i64 || off.shape()[0] != n || off.shape()[1] != og * k * 2
    {
        return Err(cx.invalid(format!(
            "offset must be {:?}, got {:?}",
            [n, og * k * 2, oh_i.max(0) as usize, ow_i.max(0) as usize],
            off.shape()
        )));
    }
    let mask = match cx.opt_input(4)? {
        Some(m) => {
            if m.shape() != [n, og * k, oh, ow] {
                return Err(cx.invalid(format!(
                    "mask must be {:?}, got {:?}",
                    [n, og * k, oh, ow],
                    m.shape()
                )));
            }
            Some(load_f64(m)?)
        }
        None => None,
    };
    crate::with_real!(cx, x.dtype(), F => {
        let b = bias_of::<F>(cx, 3, oc)?;
        let xv = load_f64(x)?;
        let wv = load_f64(w)?;
        let ov = load_f64(off)?;
        let icg = ic / group;
        let ocg = oc / group;
        let icog = ic / og;
        let osz = oh * ow;
        // Sample every input channel at every (kernel pos, output pos): col[(c*k + kk)*osz + o].
        let mut y = vec![0f64; n * oc * osz];
        let mut col = vec![0f64; ic * k * osz];
        for bn in 0..n {
            for c in 0..ic {
                let g = c / icog;
                let src = &xv[(bn * ic + c) * ih * iw..(bn * ic + c + 1) * ih * iw];
                for ki in 0..kh {
                    for kj in 0..kw {
                        let kk = ki * kw + kj;
                        for i in 0..oh {
                            for j in 0..ow {
                                let o = i * ow + j;
                                let obase = ((bn * og + g) * k + kk) * 2;
                                let dy = ov[obase * osz + o];
                                let dx = ov[(obase + 1) * osz + o];
                                let py = -pb[0] as f64 + (s[0] * i) as f64 + (ki * d[0]) as f64 + dy;
                                let px = -pb[1] as f64 + (s[1] * j) as f64 + (kj * d[1]) as f64 + dx;
                                let y0 = py.floor();
                                let x0 = px.floor();
                                let (fy, fx) = (py - y0, px - x0);
                                let at = |yy: f64, xx: f64| -> f64 {
                                    if yy >= 0.0 && yy < ih as f64 && xx >= 0.0 && xx < iw as f64 {
                                        src[yy as usize * iw + xx as usize]
                                    } else {
                                        0.0
                                    }
                                };
                                let mut v = (1.0 - fy) * ((1.0 - fx) * at(y0, x0) + fx * at(y0, x0 + 1.0))
                                    + fy * ((1.0 - fx) * at(y0 + 1.0, x0) + fx * at(y0 + 1.0, x0 + 1.0));
                                if let Some(m) = &mask {
                                    v *= m[((bn * og + g) * k + kk) * osz + o];
                                }
                                col[(c * k + kk) * osz + o] = v;
                            }
                        }
                    }
                }
            }
            for m in 0..oc {
                let g = m / ocg;
                let out = &mut y[(bn * oc + m) * osz..(bn * oc + m + 1) * osz];
                let bias = b.as_ref().map_or(0.0, |b| b[m].f());
                out.iter_mut().for_each(|v| *v = bias);
                for ci in 0..icg {
                    let c = g * icg + ci;
                    for kk in 0..k {
                        let wt = wv[(m * icg + ci) * k + kk];
                        let cr = &col[(c * k + kk) * osz..(c * k + kk + 1) * osz];
                        for (o, &cv) in out.iter_mut().zip(cr) {
                            *o += wt * cv;
                        }
                    }
                }
            }
        }
        let y: Vec<F> = y.into_iter().map(F::of).collect();
        Ok(vec![store(x.dtype(), vec![n, oc, oh, ow], y)?.into()])
    })
}

/// CausalConvWithState: causal depthwise 1-D convolution carrying the last k-1 positions.
fn causal_conv_with_state(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let w = cx.input(1)?;
    let act = cx.string("activation", "none")?;
    if !matches!(act.as_str(), "none" | "silu" | "swish") {
        return Err(cx.invalid(format!(
            "activation must be none, silu or swish, got '{act}'"
        )));
    }
    if x.rank() != 3
        || w.rank() != 3
        || w.shape()[0] != x.shape()[1]
        || w.shape()[1] != 1
        || w.shape()[2] < 1
    {
        return Err(cx.invalid(format!(
            "input must be (B, C, L) and weight (C, 1, k), got {:?} and {:?}",
            x.shape(),
            w.shape()
        )));
    }
    let [b, c, l] = [x.shape()[0], x.shape()[1], x.shape()[2]];
    let k = w.shape()[2];
    crate::with_real!(cx, x.dtype(), F => {
        let xv = load::<F>(x)?;
        let wv = load::<F>(w)?;
        let bias = bias_of::<F>(cx, 2, c)?;
        let past = match cx.opt_input(3)? {
            Some(p) => {
                if p.shape() != [b, c, k - 1] {
                    return Err(cx.invalid(format!(
                        "past_state must be {:?}, got {:?}",
                        [b, c, k - 1],
                        p.shape()
                    )));
                }
                load::<F>(p)?
            }
            None => vec![F::zero(); b * c * (k - 1)],
        };
        let pl = l + k - 1;
        let mut out = vec![F::zero(); b * c * l];
        let mut state = vec![F::zero(); b * c * (k - 1)];
        let mut padded = vec![F::zero(); pl];
        for bc in 0..b * c {
            let ch = bc % c;
            padded[..k - 1].copy_from_slice(&past[bc * (k - 1)..(bc + 1) * (k - 1)]);
            padded[k - 1..].copy_from_slice(&xv[bc * l..(bc + 1) * l]);
            for t in 0..l {
                let mut acc = bias.as_ref().map_or(F::zero(), |b| b[ch]);
                for j in 0..k {
                    acc += wv[ch * k + j] * padded[t + j];
                }
                // Round to the tensor type before the activation, as the reference does.
                let mut v = <F as Real>::of(acc.f());
                if x.dtype() == DataType::Float16 {
                    v = F::of(half::f16::from_f64(v.f()).to_f64());
                } else if x.dtype() == DataType::Bfloat16 {
                    v = F::of(half::bf16::from_f64(v.f()).to_f64());
                }
                if act != "none" {
                    let vf = v.f() as f32;
                    v = F::of((vf * (1.0 / (1.0 + (-vf).exp()))) as f64);
                }
                out[bc * l + t] = v;
            }
            state[bc * (k - 1)..(bc + 1) * (k - 1)].copy_from_slice(&padded[pl - (k - 1)..]);
        }
        Ok(vec![
            store(x.dtype(), vec![b, c, l], out)?.into(),
            store(x.dtype(), vec![b, c, k - 1], state)?.into(),
        ])
    })
}

pub const KERNELS: &[KernelDef] = &[
    kernel("Conv", 1, conv),
    kernel("ConvInteger", 10, conv_integer),
    kernel("QLinearConv", 10, qlinear_conv),
    kernel("ConvTranspose", 1, conv_transpose),
    kernel("AveragePool", 1, average_pool),
    kernel("MaxPool", 1, max_pool),
    kernel("LpPool", 1, lp_pool),
    kernel("GlobalAveragePool", 1, global_average_pool),
    kernel("GlobalMaxPool", 1, global_max_pool),
    kernel("GlobalLpPool", 1, global_lp_pool),
    kernel("MaxUnpool", 9, max_unpool),
    kernel("RoiAlign", 10, roi_align),
    kernel("MaxRoiPool", 1, max_roi_pool),
    kernel("DeformConv", 19, deform_conv),
    kernel("CausalConvWithState", 27, causal_conv_with_state),
];

#[cfg(test)]
mod fast_tests {
    use crate::kernels::reduce::testutil::{out, run, t, A};

    /// The float32 fast Conv against the general (double) one on varied geometries.
    #[test]
    #[allow(clippy::type_complexity)]
    fn fast_conv_matches_the_general_one() {
        // (c, m, group, h, w, kh, kw, strides, dilations, pads)
        let cases: &[(
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            usize,
            [i64; 2],
            [i64; 2],
            [i64; 4],
        )] = &[
            (4, 4, 4, 7, 9, 3, 3, [1, 1], [1, 1], [1, 1, 1, 1]),
            (4, 4, 4, 7, 9, 5, 5, [2, 2], [1, 1], [2, 2, 2, 2]),
            (3, 3, 3, 8, 6, 3, 3, [1, 2], [2, 1], [0, 1, 2, 0]),
            (2, 2, 2, 5, 5, 3, 3, [1, 1], [1, 1], [0, 0, 0, 0]),
            (6, 4, 2, 7, 8, 3, 3, [2, 1], [1, 2], [1, 0, 1, 2]),
            (5, 3, 1, 6, 6, 1, 1, [1, 1], [1, 1], [0, 0, 0, 0]),
            (5, 3, 1, 6, 6, 1, 1, [2, 2], [1, 1], [0, 0, 0, 0]),
            (4, 6, 2, 9, 7, 2, 3, [3, 2], [1, 1], [1, 1, 0, 0]),
        ];
        for &(c, m, group, h, w, kh, kw, st, dil, pads) in cases {
            let xn = 2 * c * h * w;
            let wn = m * (c / group) * kh * kw;
            let xv: Vec<f64> = (0..xn)
                .map(|i| ((i * 37 % 101) as f64 - 50.0) / 25.0)
                .collect();
            let wv: Vec<f64> = (0..wn)
                .map(|i| ((i * 53 % 97) as f64 - 48.0) / 30.0)
                .collect();
            let bv: Vec<f64> = (0..m).map(|i| i as f64 * 0.25 - 0.5).collect();
            let attrs = || {
                vec![
                    ("group", A::I(group as i64)),
                    ("strides", A::Is(st.to_vec())),
                    ("dilations", A::Is(dil.to_vec())),
                    ("pads", A::Is(pads.to_vec())),
                ]
            };
            let xs = [2, c, h, w];
            let ws = [m, c / group, kh, kw];
            let f32s = |v: &[f64]| v.iter().map(|&x| x as f32).collect::<Vec<f32>>();
            let want = run(
                "Conv",
                11,
                attrs(),
                &[t(&xs, &xv), t(&ws, &wv), t(&[m], &bv)],
                1,
            )
            .unwrap();
            let got = run(
                "Conv",
                11,
                attrs(),
                &[t(&xs, &f32s(&xv)), t(&ws, &f32s(&wv)), t(&[m], &f32s(&bv))],
                1,
            )
            .unwrap();
            let (ws_, wv_) = out::<f64>(&want, 0);
            let (gs, gv) = out::<f32>(&got, 0);
            assert_eq!(ws_, gs);
            for (a, b) in gv.iter().zip(&wv_) {
                assert!((*a as f64 - b).abs() < 1e-4 * (1.0 + b.abs()), "{a} vs {b}");
            }
            // float16 runs through the float32 kernels: within float16's rounding of the sums.
            let f16s = |shape: &[usize], v: &[f64]| {
                let h: Vec<half::f16> = v.iter().map(|&x| half::f16::from_f64(x)).collect();
                Some(tensor::Tensor::from_vec(shape.to_vec(), h).unwrap())
            };
            let rounded = |v: &[f64]| -> Vec<f64> {
                v.iter().map(|&x| half::f16::from_f64(x).to_f64()).collect()
            };
            let want16 = run(
                "Conv",
                11,
                attrs(),
                &[
                    t(&xs, &rounded(&xv)),
                    t(&ws, &rounded(&wv)),
                    t(&[m], &rounded(&bv)),
                ],
                1,
            )
            .unwrap();
            let got16 = run(
                "Conv",
                11,
                attrs(),
                &[f16s(&xs, &xv), f16s(&ws, &wv), f16s(&[m], &bv)],
                1,
            )
            .unwrap();
            assert_eq!(
                got16[0].as_tensor().unwrap().dtype(),
                tensor::DataType::Float16
            );
            let (_, w16) = out::<f64>(&want16, 0);
            let g16: Vec<f64> = got16[0]
                .as_tensor()
                .unwrap()
                .to_vec::<half::f16>()
                .unwrap()
                .into_iter()
                .map(|h| h.to_f64())
                .collect();
            for (a, b) in g16.iter().zip(&w16) {
                assert!(
                    (a - b).abs() <= 1e-3 * (1.0 + b.abs()),
                    "float16: {a} vs {b}"
                );
            }
        }
    }
}

#[cfg(test)]
mod fast_pool_tests {
    use crate::kernels::reduce::testutil::{out, run, t, A};

    /// The float32 MaxPool against the general (double) one, ceil mode and pads included.
    #[test]
    #[allow(clippy::type_complexity)]
    fn fast_max_pool_matches_the_general_one() {
        let cases: &[([i64; 2], [i64; 2], [i64; 4], i64)] = &[
            ([3, 3], [2, 2], [1, 1, 1, 1], 0),
            ([3, 3], [1, 1], [0, 0, 0, 0], 0),
            ([2, 3], [2, 1], [0, 1, 1, 0], 1),
            ([3, 2], [3, 2], [1, 0, 0, 0], 1),
        ];
        for &(k, st, pads, ceil) in cases {
            let xs = [2, 3, 7, 8];
            let xv: Vec<f64> = (0..2 * 3 * 7 * 8)
                .map(|i| ((i * 37 % 101) as f64 - 50.0) / 25.0)
                .collect();
            let attrs = || {
                vec![
                    ("kernel_shape", A::Is(k.to_vec())),
                    ("strides", A::Is(st.to_vec())),
                    ("pads", A::Is(pads.to_vec())),
                    ("ceil_mode", A::I(ceil)),
                ]
            };
            let want = run("MaxPool", 12, attrs(), &[t(&xs, &xv)], 1).unwrap();
            let xf: Vec<f32> = xv.iter().map(|&v| v as f32).collect();
            let got = run("MaxPool", 12, attrs(), &[t(&xs, &xf)], 1).unwrap();
            let (ws, wv) = out::<f64>(&want, 0);
            let (gs, gv) = out::<f32>(&got, 0);
            assert_eq!(ws, gs);
            let wv: Vec<f32> = wv.iter().map(|&v| v as f32).collect();
            assert_eq!(gv, wv, "{k:?} {st:?} {pads:?} {ceil}");
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use crate::exec::{KResult, RunCx, Subgraphs, Value};
    use onnx_proto::{AttributeProto, GraphProto};
    use tensor::Tensor;

    struct NoGraphs;
    impl Subgraphs for NoGraphs {
        fn run(&self, _: &GraphProto, _: Vec<Value>) -> KResult<Vec<Value>> {
            unreachable!("no subgraphs in these tests")
        }
    }

    /// Runs kernel `f` as op `op` at `opset` with `inputs` (None = omitted) and `nout` outputs.
    pub(crate) fn run(
        f: crate::exec::KernelFn,
        op: &str,
        opset: i64,
        attrs: Vec<AttributeProto>,
        inputs: Vec<Option<Tensor>>,
        nout: usize,
    ) -> KResult<Vec<Tensor>> {
        let names: Vec<String> = (0..inputs.len())
            .map(|i| {
                if inputs[i].is_some() {
                    format!("i{i}")
                } else {
                    String::new()
                }
            })
            .collect();
        let outs: Vec<String> = (0..nout).map(|i| format!("o{i}")).collect();
        let n = crate::families::testing::node(
            op,
            &names.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            &outs.iter().map(|s| s.as_str()).collect::<Vec<_>>(),
            attrs,
        );
        let vals: Vec<Option<Value>> = inputs.into_iter().map(|t| t.map(Value::from)).collect();
        let refs: Vec<Option<&Value>> = vals.iter().map(|v| v.as_ref()).collect();
        let cx = RunCx::new(&n, opset, &refs, &NoGraphs);
        Ok(f(&cx)?
            .into_iter()
            .map(|v| v.as_tensor().unwrap().clone())
            .collect())
    }

    #[test]
    fn max_roi_pool_takes_quadrant_maxima() {
        use crate::families::testing::ais;
        let x = Tensor::from_vec(vec![1, 1, 4, 4], (0..16).map(|v| v as f32).collect()).unwrap();
        let rois = Tensor::from_vec(vec![1, 5], vec![0f32, 0.0, 0.0, 3.0, 3.0]).unwrap();
        let y = run(
            super::max_roi_pool,
            "MaxRoiPool",
            22,
            vec![ais("pooled_shape", &[2, 2])],
            vec![Some(x), Some(rois)],
            1,
        )
        .unwrap();
        assert_eq!(y[0].shape(), &[1, 1, 2, 2]);
        assert_eq!(y[0].to_vec::<f32>().unwrap(), vec![5.0, 7.0, 13.0, 15.0]);
    }

    #[test]
    fn bad_conv_shapes_are_errors_not_panics() {
        let x = Tensor::from_vec(vec![1, 3, 4, 4], vec![0f32; 48]).unwrap();
        let w = Tensor::from_vec(vec![2, 2, 3, 3], vec![0f32; 36]).unwrap();
        assert!(run(
            super::conv,
            "Conv",
            22,
            vec![],
            vec![Some(x.clone()), Some(w)],
            1
        )
        .is_err());
        let w = Tensor::from_vec(vec![2, 3, 5, 5], vec![0f32; 150]).unwrap();
        assert!(run(super::conv, "Conv", 22, vec![], vec![Some(x), Some(w)], 1).is_err());
    }
}
