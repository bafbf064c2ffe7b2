//! float32 fast paths shared by the elementwise and normalization kernels: broadcasting binary
//! maps that walk collapsed dims with a tight inner loop, unary maps monomorphised per op,
//! softmax along the last axis and layer normalization. Not an operator family: the family
//! kernels call these first for float32 inputs and keep their general code for everything else.

use crate::exec::util::{broadcast_shapes, broadcast_strides};
use crate::exec::KResult;
use std::borrow::Cow;
use tensor::{DataType, Tensor};

/// A float32 tensor's elements, borrowed when aligned.
pub(crate) fn elems(t: &Tensor) -> KResult<Cow<'_, [f32]>> {
    Ok(match t.as_slice::<f32>() {
        Some(s) => Cow::Borrowed(s),
        None => Cow::Owned(t.to_vec::<f32>()?),
    })
}

/// Whether every tensor is float32.
pub(crate) fn all_f32(ts: &[&Tensor]) -> bool {
    ts.iter().all(|t| t.dtype() == DataType::Float)
}

/// `f` elementwise over float32 `a` and `b` with numpy broadcasting.
pub(crate) fn binary(
    a: &Tensor,
    b: &Tensor,
    f: impl Fn(f32, f32) -> f32 + Sync,
) -> KResult<Tensor> {
    let out_shape = broadcast_shapes(&[a.shape(), b.shape()])?;
    let av = elems(a)?;
    let bv = elems(b)?;
    let total: usize = out_shape.iter().product();
    // Every element is written below.
    let mut out = tensor::reuse::f32_buffer(total);
    if a.shape() == b.shape() {
        let f = &f;
        par_chunks(&mut out, |start, dst| {
            zip_into(
                dst,
                &av[start..start + dst.len()],
                &bv[start..start + dst.len()],
                f,
            )
        });
        return Ok(Tensor::from_vec(out_shape, out)?);
    }
    if total == 0 {
        return Ok(Tensor::from_vec(out_shape, out)?);
    }
    // Collapse adjacent dims along which both operands advance contiguously (or both stay).
    let sa = broadcast_strides(a.shape(), &out_shape);
    let sb = broadcast_strides(b.shape(), &out_shape);
    let mut dims: Vec<(usize, usize, usize)> = Vec::new(); // (size, stride a, stride b)
    for i in 0..out_shape.len() {
        let d = out_shape[i];
        if d == 1 {
            continue;
        }
        match dims.last_mut() {
            Some(last) if last.1 == sa[i] * d && last.2 == sb[i] * d => {
                last.0 *= d;
                last.1 = sa[i];
                last.2 = sb[i];
            }
            _ => dims.push((d, sa[i], sb[i])),
        }
    }
    let (inner, ia, ib) = dims.pop().unwrap_or((1, 0, 0));
    let mut idx = vec![0usize; dims.len()];
    let (mut oa, mut ob) = (0usize, 0usize);
    for row in out.chunks_exact_mut(inner) {
        match (ia, ib) {
            (1, 1) => zip_into(row, &av[oa..oa + inner], &bv[ob..ob + inner], &f),
            (1, 0) => {
                let y = bv[ob];
                map_into(row, &av[oa..oa + inner], |x| f(x, y));
            }
            (0, 1) => {
                let x = av[oa];
                map_into(row, &bv[ob..ob + inner], |y| f(x, y));
            }
            _ => {
                // Strides other than 0/1 cannot occur innermost after collapsing, but stay
                // correct if they do.
                for (j, d) in row.iter_mut().enumerate() {
                    *d = f(av[oa + j * ia], bv[ob + j * ib]);
                }
            }
        }
        for d in (0..dims.len()).rev() {
            idx[d] += 1;
            oa += dims[d].1;
            ob += dims[d].2;
            if idx[d] < dims[d].0 {
                break;
            }
            oa -= dims[d].1 * dims[d].0;
            ob -= dims[d].2 * dims[d].0;
            idx[d] = 0;
        }
    }
    Ok(Tensor::from_vec(out_shape, out)?)
}

/// Defines `$name` (runtime dispatch) over a body compiled three times: for AVX-512, for AVX2
/// and for the baseline target. The arithmetic is the same in every version: no instruction
/// fuses operations that the source keeps apart, so results do not depend on the CPU.
macro_rules! multiversion {
    ($(#[$doc:meta])* fn $name:ident $(<$($g:ident: $b:path),*>)? ($($arg:ident: $ty:ty),*) $(-> $ret:ty)? $body:block) => {
        $(#[$doc])*
        #[allow(clippy::too_many_arguments)]
        pub(crate) fn $name $(<$($g: $b),*>)? ($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn plain $(<$($g: $b),*>)? ($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx512f")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn avx512 $(<$($g: $b),*>)? ($($arg: $ty),*) $(-> $ret)? { plain($($arg),*) }
            #[cfg(target_arch = "x86_64")]
            #[target_feature(enable = "avx2")]
            #[allow(clippy::too_many_arguments)]
            unsafe fn avx2 $(<$($g: $b),*>)? ($($arg: $ty),*) $(-> $ret)? { plain($($arg),*) }
            #[cfg(target_arch = "x86_64")]
            {
                if std::is_x86_feature_detected!("avx512f") {
                    // SAFETY: the CPU has the features the function is compiled for.
                    return unsafe { avx512($($arg),*) };
                }
                if std::is_x86_feature_detected!("avx2") {
                    // SAFETY: as above.
                    return unsafe { avx2($($arg),*) };
                }
            }
            plain($($arg),*)
        }
    };
}

/// One plane of a depthwise convolution over a flat source: with the outputs of row `r` kept
/// `wq` wide, `out[r][x] = fma(w[T-1], src[offs[T-1] + r*wq + x], … fma(w[0], src[offs[0] + r*wq
/// + x], bias))` for `r < out.len() / ow` and `x < ow` — a chain of fused multiply-adds in tap
/// order from the bias, the same on every CPU. The sums are computed for whole rows of `wq`
/// (rounded up to 16 lanes) into `acc`, then the `ow` valid columns of each row copied out.
/// Every tap must read inside `src` (checked: a shorter `src` panics).
#[allow(clippy::too_many_arguments)]
pub(crate) fn depthwise_plane(
    out: &mut [f32],
    ow: usize,
    wq: usize,
    src: &[f32],
    offs: &[usize],
    w: &[f32],
    bias: f32,
    acc: &mut Vec<f32>,
) {
    if ow == 0 {
        return;
    }
    let oh = out.len() / ow;
    assert!(ow <= wq, "depthwise_plane: rows wider than their stride");
    let l = (oh * wq).div_ceil(16) * 16;
    let taps = offs.len().min(w.len());
    assert!(
        offs[..taps].iter().all(|&o| o + l <= src.len()),
        "depthwise_plane: a tap reads past the source"
    );
    acc.resize(l, 0.0);
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        // SAFETY: the CPU has AVX-512F; every read was bounds-checked above, `acc` holds `l`
        // values and `out` holds `oh` rows of `ow`, each copied from a row of `acc`.
        unsafe {
            taps_avx512(acc, src, &offs[..taps], &w[..taps], bias);
            rows_avx512_strided(out, ow, acc, wq, oh, ow);
        }
        return;
    }
    for (f, a) in acc.iter_mut().enumerate() {
        let mut v = bias;
        for (&o, &wt) in offs[..taps].iter().zip(w) {
            v = wt.mul_add(src[o + f], v);
        }
        *a = v;
    }
    for (orow, arow) in out.chunks_exact_mut(ow).zip(acc.chunks_exact(wq)) {
        orow.copy_from_slice(&arow[..ow]);
    }
}

/// `acc[f] = fma chain of the taps from `bias``, 16-lane vectors in blocks of up to eight (their
/// independent chains hide the multiply-adds' latency).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn taps_avx512(acc: &mut [f32], src: &[f32], offs: &[usize], w: &[f32], bias: f32) {
    let n = acc.len() / 16;
    let (d, s) = (acc.as_mut_ptr(), src.as_ptr());
    let mut v = 0;
    while v + 8 <= n {
        taps_block::<8>(d.add(16 * v), s.add(16 * v), offs, w, bias);
        v += 8;
    }
    let (d, s) = (d.add(16 * v), s.add(16 * v));
    match n - v {
        1 => taps_block::<1>(d, s, offs, w, bias),
        2 => taps_block::<2>(d, s, offs, w, bias),
        3 => taps_block::<3>(d, s, offs, w, bias),
        4 => taps_block::<4>(d, s, offs, w, bias),
        5 => taps_block::<5>(d, s, offs, w, bias),
        6 => taps_block::<6>(d, s, offs, w, bias),
        7 => taps_block::<7>(d, s, offs, w, bias),
        _ => {}
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn taps_block<const NV: usize>(
    d: *mut f32,
    s: *const f32,
    offs: &[usize],
    w: &[f32],
    bias: f32,
) {
    use std::arch::x86_64::*;
    let mut a = [_mm512_set1_ps(bias); NV];
    for (&o, &wt) in offs.iter().zip(w) {
        let (p, wv) = (s.add(o), _mm512_set1_ps(wt));
        for (k, a) in a.iter_mut().enumerate() {
            *a = _mm512_fmadd_ps(wv, _mm512_loadu_ps(p.add(16 * k)), *a);
        }
    }
    for (k, a) in a.iter().enumerate() {
        _mm512_storeu_ps(d.add(16 * k), *a);
    }
}

multiversion! {
    /// `dst[i] += a * x[i]`.
    fn axpy(dst: &mut [f32], a: f32, x: &[f32]) {
        for (d, &v) in dst.iter_mut().zip(x) {
            *d += a * v;
        }
    }
}

multiversion! {
    /// `Σ a[i] * b[i]` over the shorter length, in 32 partial sums (then added in order).
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        let mut acc = [0f32; 32];
        let (ca, cb) = (a.chunks_exact(32), b.chunks_exact(32));
        let mut tail = 0f32;
        for (&x, &y) in ca.remainder().iter().zip(cb.remainder()) {
            tail += x * y;
        }
        for (x, y) in ca.zip(cb) {
            for l in 0..32 {
                acc[l] += x[l] * y[l];
            }
        }
        acc.iter().sum::<f32>() + tail
    }
}

/// [`dot`] of `a` with four vectors at once (four streams in flight, `a` loaded once), each
/// result summed exactly as `dot` sums it.
pub(crate) fn dot4(a: &[f32], b0: &[f32], b1: &[f32], b2: &[f32], b3: &[f32]) -> [f32; 4] {
    let n = [b0.len(), b1.len(), b2.len(), b3.len()]
        .into_iter()
        .fold(a.len(), usize::min);
    let (a, bs) = (&a[..n], [&b0[..n], &b1[..n], &b2[..n], &b3[..n]]);
    #[cfg(target_arch = "x86_64")]
    if std::is_x86_feature_detected!("avx512f") {
        // SAFETY: AVX-512F is present; every slice holds `n` values.
        return unsafe { dot4_avx512(a, bs) };
    }
    bs.map(|b| dot(a, b))
}

/// `dot`'s order: 32 lane sums (`acc[l] += x[l] * y[l]`, multiply then add), added in lane
/// order, plus the tail summed in order.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn dot4_avx512(a: &[f32], bs: [&[f32]; 4]) -> [f32; 4] {
    use std::arch::x86_64::*;
    let n = a.len();
    let full = n - n % 32;
    let mut lo = [_mm512_setzero_ps(); 4];
    let mut hi = [_mm512_setzero_ps(); 4];
    let ap = a.as_ptr();
    let mut c = 0;
    while c < full {
        let (xl, xh) = (_mm512_loadu_ps(ap.add(c)), _mm512_loadu_ps(ap.add(c + 16)));
        for r in 0..4 {
            let bp = bs[r].as_ptr().add(c);
            lo[r] = _mm512_add_ps(lo[r], _mm512_mul_ps(xl, _mm512_loadu_ps(bp)));
            hi[r] = _mm512_add_ps(hi[r], _mm512_mul_ps(xh, _mm512_loadu_ps(bp.add(16))));
        }
        c += 32;
    }
    let mut out = [0f32; 4];
    for r in 0..4 {
        let mut lanes = [0f32; 32];
        _mm512_storeu_ps(lanes.as_mut_ptr(), lo[r]);
        _mm512_storeu_ps(lanes.as_mut_ptr().add(16), hi[r]);
        let mut tail = 0f32;
        for (&x, &y) in a[full..].iter().zip(&bs[r][full..]) {
            tail += x * y;
        }
        out[r] = lanes.iter().sum::<f32>() + tail;
    }
    out
}

multiversion! {
    /// `dst[f] = max_t src[offs[t] + f]` for every `f` (the first tap's value where later ones
    /// are not greater; `src` must hold `offs[t] + dst.len()` values for every tap).
    fn max_taps(dst: &mut [f32], src: &[f32], offs: &[usize]) {
        let n = dst.len();
        if let Some((&first, rest)) = offs.split_first() {
            dst.copy_from_slice(&src[first..first + n]);
            for &o in rest {
                for (d, &v) in dst.iter_mut().zip(&src[o..o + n]) {
                    *d = if v > *d { v } else { *d };
                }
            }
        }
    }
}

multiversion! {
    /// Winograd F(2×2, 3×3) input transform of one row of tiles (see `winograd.rs`): tile
    /// `tx` reads rows `2ty..2ty+4`, columns `2tx..2tx+4` of `plane` (rows `wp >= 2tw + 3`
    /// wide, `wp >= 2tw + 2`); position `xi` (of 16) goes to `v[base + xi * stride + tx]`.
    /// `t`: scratch of `4·wp + 2·(tw + 1)` values.
    fn winograd_input_row(plane: &[f32], wp: usize, ty: usize, tw: usize, t: &mut [f32], v: &mut [f32], base: usize, stride: usize) {
        let r = |i: usize| &plane[(2 * ty + i) * wp..(2 * ty + i + 1) * wp];
        let (r0, r1, r2, r3) = (r(0), r(1), r(2), r(3));
        // Rows combined by Bᵀ: t0 = r0 - r2, t1 = r1 + r2, t2 = r2 - r1, t3 = r1 - r3.
        for x in 0..wp {
            t[x] = r0[x] - r2[x];
            t[wp + x] = r1[x] + r2[x];
            t[2 * wp + x] = r2[x] - r1[x];
            t[3 * wp + x] = r1[x] - r3[x];
        }
        let (rows, eo) = t.split_at_mut(4 * wp);
        let (ev, od) = eo.split_at_mut(tw + 1);
        for i in 0..4 {
            let ti = &rows[i * wp..(i + 1) * wp];
            // ev[k] = ti[2k], od[k] = ti[2k+1], k = 0..=tw.
            for ((e, o), p) in ev.iter_mut().zip(od.iter_mut()).zip(ti.chunks_exact(2)) {
                *e = p[0];
                *o = p[1];
            }
            let (o0, rest) = v[base + i * 4 * stride..].split_at_mut(stride);
            let (o1, rest) = rest.split_at_mut(stride);
            let (o2, o3) = rest.split_at_mut(stride);
            // Columns combined: e - e', o + e', e' - o, o - o' (' = the next tile's pair).
            for tx in 0..tw {
                let (e, o, e1, o1v) = (ev[tx], od[tx], ev[tx + 1], od[tx + 1]);
                o0[tx] = e - e1;
                o1[tx] = o + e1;
                o2[tx] = e1 - o;
                o3[tx] = o - o1v;
            }
        }
    }
}

multiversion! {
    /// Winograd F(2×2, 3×3) output transform of one row of tiles, added to `y` (one or two
    /// output rows `ow` wide): position `xi`'s values over the tiles at
    /// `mx[base + xi * stride..]`. `u`: 8·tw scratch.
    fn winograd_output_row(mx: &[f32], base: usize, stride: usize, tw: usize, u: &mut [f32], y: &mut [f32], ow: usize) {
        let m = |xi: usize| &mx[base + xi * stride..base + xi * stride + tw];
        // Rows combined by Aᵀ: u0j = m0j + m1j + m2j, u1j = m1j - m2j - m3j.
        for j in 0..4 {
            let (m0, m1, m2, m3) = (m(j), m(4 + j), m(8 + j), m(12 + j));
            for tx in 0..tw {
                u[j * tw + tx] = m0[tx] + m1[tx] + m2[tx];
                u[(4 + j) * tw + tx] = m1[tx] - m2[tx] - m3[tx];
            }
        }
        let pairs = ow / 2;
        for (i, row) in y.chunks_exact_mut(ow).enumerate().take(2) {
            let q = |j: usize| &u[(i * 4 + j) * tw..(i * 4 + j + 1) * tw];
            let (q0, q1, q2, q3) = (q(0), q(1), q(2), q(3));
            // y_i0 = u_i0 + u_i1 + u_i2 at column 2tx, y_i1 = u_i1 - u_i2 - u_i3 at 2tx + 1.
            for (tx, pair) in row[..2 * pairs].chunks_exact_mut(2).enumerate() {
                pair[0] += q0[tx] + q1[tx] + q2[tx];
                pair[1] += q1[tx] - q2[tx] - q3[tx];
            }
            if ow % 2 == 1 {
                row[2 * pairs] += q0[pairs] + q1[pairs] + q2[pairs];
            }
        }
    }
}

multiversion! {
    /// `dst[i] = v`.
    fn fill(dst: &mut [f32], v: f32) {
        for d in dst.iter_mut() {
            *d = v;
        }
    }
}

multiversion! {
    /// `Σ a[i] * b[i]` in double precision over the shorter length, in 16 partial sums (then
    /// added in order).
    fn dot64(a: &[f64], b: &[f64]) -> f64 {
        let n = a.len().min(b.len());
        let (a, b) = (&a[..n], &b[..n]);
        let mut acc = [0f64; 16];
        let (ca, cb) = (a.chunks_exact(16), b.chunks_exact(16));
        let mut tail = 0f64;
        for (&x, &y) in ca.remainder().iter().zip(cb.remainder()) {
            tail += x * y;
        }
        for (x, y) in ca.zip(cb) {
            for l in 0..16 {
                acc[l] += x[l] * y[l];
            }
        }
        acc.iter().sum::<f64>() + tail
    }
}

/// `dst[r*dst_stride + k] = src[r*src_stride + k*step]` for r < rows, k < n; rows in bounds
/// for both slices (checked: out-of-bounds rows panic).
#[allow(clippy::too_many_arguments)]
pub(crate) fn copy_rows(
    dst: &mut [f32],
    dst_stride: usize,
    src: &[f32],
    src_stride: usize,
    rows: usize,
    n: usize,
    step: usize,
) {
    // Short unit-step rows (depthwise planes of 7 to 28 values) as masked vector copies rather
    // than a memcpy call per row; stride-2 rows through a permute of whole vectors.
    #[cfg(target_arch = "x86_64")]
    if (step == 1 || step == 2)
        && n <= 64
        && rows > 0
        && n > 0
        && std::is_x86_feature_detected!("avx512f")
    {
        assert!(
            (rows - 1) * dst_stride + n <= dst.len(),
            "copy_rows: dst too short"
        );
        let last = (rows - 1) * src_stride + (n - 1) * step;
        assert!(last < src.len(), "copy_rows: src too short");
        // SAFETY: AVX-512F is present and every row was bounds-checked above.
        unsafe {
            if step == 1 {
                rows_avx512_strided(dst, dst_stride, src, src_stride, rows, n)
            } else {
                even_rows_avx512(dst, dst_stride, src, src_stride, rows, n)
            }
        };
        return;
    }
    copy_rows_any(dst, dst_stride, src, src_stride, rows, n, step)
}

/// The mask of the first `n` of 16 lanes (all of them from 16 on).
pub(crate) fn mask16(n: usize) -> u16 {
    if n >= 16 {
        u16::MAX
    } else {
        (1u16 << n) - 1
    }
}

/// `dst[r*ds + k] = src[r*ss + k]` for r < rows, k < n, in masked 16-lane copies.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn rows_avx512_strided(
    dst: &mut [f32],
    ds: usize,
    src: &[f32],
    ss: usize,
    rows: usize,
    n: usize,
) {
    use std::arch::x86_64::*;
    let (o, a) = (dst.as_mut_ptr(), src.as_ptr());
    for r in 0..rows {
        let (o, a) = (o.add(r * ds), a.add(r * ss));
        let mut x = 0;
        while x + 16 <= n {
            _mm512_storeu_ps(o.add(x), _mm512_loadu_ps(a.add(x)));
            x += 16;
        }
        if x < n {
            let m = mask16(n - x);
            _mm512_mask_storeu_ps(o.add(x), m, _mm512_maskz_loadu_ps(m, a.add(x)));
        }
    }
}

/// `dst[r*ds + k] = src[r*ss + 2k]` for r < rows, k < n: each 16 outputs from (masked) loads
/// of the 31 source values they span, their even lanes picked by one two-source permute.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn even_rows_avx512(
    dst: &mut [f32],
    ds: usize,
    src: &[f32],
    ss: usize,
    rows: usize,
    n: usize,
) {
    use std::arch::x86_64::*;
    let even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    let (o, a) = (dst.as_mut_ptr(), src.as_ptr());
    for r in 0..rows {
        let (o, a) = (o.add(r * ds), a.add(r * ss));
        let mut x = 0;
        while x < n {
            let k = (n - x).min(16);
            // Source values 2x .. 2x + 2k - 1 (the last one read is 2(x + k - 1)).
            let span = 2 * k - 1;
            let lo = _mm512_maskz_loadu_ps(mask16(span), a.add(2 * x));
            let hi = if span > 16 {
                _mm512_maskz_loadu_ps(mask16(span - 16), a.add(2 * x + 16))
            } else {
                _mm512_setzero_ps()
            };
            let v = _mm512_permutex2var_ps(lo, even, hi);
            _mm512_mask_storeu_ps(o.add(x), mask16(k), v);
            x += k;
        }
    }
}

multiversion! {
    /// [`copy_rows`] for any step (unit and stride-2 steps unrolled, so the copies vectorise).
    fn copy_rows_any(dst: &mut [f32], dst_stride: usize, src: &[f32], src_stride: usize, rows: usize, n: usize, step: usize) {
        for r in 0..rows {
            let d = &mut dst[r * dst_stride..r * dst_stride + n];
            let s = &src[r * src_stride..];
            match step {
                1 => d.copy_from_slice(&s[..n]),
                2 => {
                    let pairs = (s.len() / 2).min(n);
                    for (o, p) in d[..pairs].iter_mut().zip(s.chunks_exact(2)) {
                        *o = p[0];
                    }
                    for (k, o) in d.iter_mut().enumerate().skip(pairs) {
                        *o = s[2 * k];
                    }
                }
                _ => {
                    for (k, o) in d.iter_mut().enumerate() {
                        *o = s[k * step];
                    }
                }
            }
        }
    }
}

multiversion! {
    /// `y[i] = f(y[i], t[i])`.
    fn zip_inplace<F: Fn(f32, f32) -> f32>(y: &mut [f32], t: &[f32], f: F) {
        for (v, &w) in y.iter_mut().zip(t) {
            *v = f(*v, w);
        }
    }
}

multiversion! {
    /// `y[i] = f(y[i])`.
    fn map_inplace<F: Fn(f32) -> f32>(y: &mut [f32], f: F) {
        for v in y.iter_mut() {
            *v = f(*v);
        }
    }
}

multiversion! {
    /// `dst[i] = f(x[i])`.
    fn map_into<F: Fn(f32) -> f32>(dst: &mut [f32], x: &[f32], f: F) {
        for (d, &v) in dst.iter_mut().zip(x) {
            *d = f(v);
        }
    }
}

multiversion! {
    /// `dst[i] = f(a[i], b[i])`.
    fn zip_into<F: Fn(f32, f32) -> f32>(dst: &mut [f32], a: &[f32], b: &[f32], f: F) {
        for ((d, &x), &y) in dst.iter_mut().zip(a).zip(b) {
            *d = f(x, y);
        }
    }
}

/// Runs `f(offset, chunk)` over `out` in chunks, on the engine's threads when there are
/// several and `out` is large enough to be worth splitting.
fn par_chunks(out: &mut [f32], f: impl Fn(usize, &mut [f32]) + Sync) {
    const CHUNK: usize = 1 << 15;
    if crate::kernels::gemm::threads() > 1 && out.len() >= 4 * CHUNK {
        use rayon::prelude::*;
        out.par_chunks_mut(CHUNK)
            .enumerate()
            .for_each(|(i, c)| f(i * CHUNK, c));
    } else {
        f(0, out);
    }
}

/// `f` elementwise over a float32 tensor.
pub(crate) fn unary(x: &Tensor, f: impl Fn(f32) -> f32 + Sync) -> KResult<Tensor> {
    let xv = elems(x)?;
    let mut out = tensor::reuse::f32_buffer(xv.len());
    let f = &f;
    par_chunks(&mut out, |start, dst| {
        map_into(dst, &xv[start..start + dst.len()], f)
    });
    Ok(Tensor::from_vec(x.shape().to_vec(), out)?)
}

/// The logistic function in float32 (the Sigmoid kernel's float32 path): `1 / (1 + e^-x)`
/// for x ≥ 0 and `e^x / (1 + e^x)` below, both from `e = e^-|x|` by [`exp`], branch-free so
/// loops over it vectorise.
#[inline(always)]
pub(crate) fn sigmoid(x: f32) -> f32 {
    let e = exp(-x.abs());
    let r = 1.0 / (1.0 + e);
    if x >= 0.0 {
        r
    } else {
        e * r
    }
}

/// e^x in float32 arithmetic (Cephes `expf`: range reduction by ln 2, degree-6 polynomial),
/// branch-free and without float-to-int conversions so loops over it vectorise; within 2 ulp,
/// saturating outside [e^-87.3, e^88.3].
#[inline(always)]
pub(crate) fn exp(x: f32) -> f32 {
    // Adding 1.5·2^23 rounds to an integer held in the low mantissa bits.
    const MAGIC: f32 = 12_582_912.0;
    let x = x.clamp(-87.3, 88.3);
    let t = x * std::f32::consts::LOG2_E + MAGIC;
    let n = t - MAGIC;
    let ni = (t.to_bits() as i32).wrapping_sub(MAGIC.to_bits() as i32);
    let r = x - n * 0.693_359_4 + n * 2.121_944_4e-4;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 0.166_666_65;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    y * f32::from_bits(((ni + 127) as u32) << 23)
}

/// tanh in float32, branch-free so loops over it vectorise: below |x| = 0.625 the odd
/// polynomial of Cephes `tanhf`, above `1 - 2 / (e^(2|x|) + 1)` with e by [`exp`].
#[inline(always)]
pub(crate) fn tanh(x: f32) -> f32 {
    let z = x.abs();
    let big = (1.0 - 2.0 / (exp(2.0 * z) + 1.0)).copysign(x);
    let x2 = x * x;
    let mut p = -5.704_988_7e-3f32;
    p = p * x2 + 2.063_909e-2;
    p = p * x2 - 5.373_971_6e-2;
    p = p * x2 + 0.133_314_42;
    p = p * x2 - 0.333_332_8;
    let small = p * x2 * x + x;
    if z < 0.625 {
        small
    } else {
        big
    }
}

/// erf in float32, branch-free: the Maclaurin series below |x| = 0.5, 1 - erfc beyond (erfc
/// by the Chebyshev fit of Numerical Recipes, fractional error < 1.2e-7).
#[inline(always)]
pub(crate) fn erf(x: f32) -> f32 {
    let z = x.abs();
    let z2 = x * x;
    // 2/sqrt(pi) * (x - x^3/3 + x^5/10 - x^7/42 + x^9/216 - x^11/1320 + x^13/9360)
    let mut q = 1.205_533_3e-4f32;
    q = q * z2 - 8.548_327e-4;
    q = q * z2 + 5.223_977_6e-3;
    q = q * z2 - 2.686_617e-2;
    q = q * z2 + 0.112_837_92;
    q = q * z2 - 0.376_126_39;
    q = q * z2 + std::f32::consts::FRAC_2_SQRT_PI;
    let small = x * q;
    let t = 1.0 / (1.0 + 0.5 * z);
    let mut p = 0.170_872_77f32;
    p = p * t - 0.822_152_23;
    p = p * t + 1.488_515_9;
    p = p * t - 1.135_204;
    p = p * t + 0.278_868_07;
    p = p * t - 0.186_288_06;
    p = p * t + 0.096_784_18;
    p = p * t + 0.374_091_96;
    p = p * t + 1.000_023_7;
    p = p * t - 1.265_512_2;
    let erfc = t * exp(-z2 + p);
    let big = (1.0 - erfc).copysign(x);
    if z < 0.5 {
        small
    } else {
        big
    }
}

/// Softmax (or log-softmax) over contiguous rows of `n` float32 values (vectorised: max,
/// [`exp`], sum in eight partial sums, scale).
pub(crate) fn softmax_rows(x: &Tensor, n: usize, log: bool) -> KResult<Tensor> {
    let xv = elems(x)?;
    // Every row is written below (and there are none when `n` is 0).
    let mut out = tensor::reuse::f32_buffer(xv.len());
    if n > 0 {
        for (row, o) in xv.chunks_exact(n).zip(out.chunks_exact_mut(n)) {
            let mx = max8(row);
            map_into(o, row, |v| exp(v - mx));
            let s = sum8(o, |v| v);
            if log {
                let ls = s.ln();
                map_into(o, row, |v| v - mx - ls);
            } else {
                let inv = 1.0 / s;
                o.iter_mut().for_each(|d| *d *= inv);
            }
        }
    }
    Ok(Tensor::from_vec(x.shape().to_vec(), out)?)
}

/// The largest of `v` in eight partial maxima; NaN is skipped as `f32::max` skips it (the
/// general kernel's fold does the same).
fn max8(v: &[f32]) -> f32 {
    let mut acc = [f32::NEG_INFINITY; 8];
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        for l in 0..8 {
            acc[l] = acc[l].max(c[l]);
        }
    }
    let m = acc.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    chunks.remainder().iter().copied().fold(m, f32::max)
}

/// Σ f(v) in eight interleaved float32 partial sums (so the loop vectorises).
#[inline(always)]
fn sum8(v: &[f32], f: impl Fn(f32) -> f32) -> f32 {
    let mut acc = [0f32; 8];
    let mut chunks = v.chunks_exact(8);
    for c in &mut chunks {
        for l in 0..8 {
            acc[l] += f(c[l]);
        }
    }
    acc.iter().sum::<f32>() + chunks.remainder().iter().map(|&x| f(x)).sum::<f32>()
}

/// Layer normalization of contiguous rows of `cols` float32 values by per-column scale and
/// optional bias; statistics in float32 (two passes). Returns Y, the means and the inverse standard deviations.
pub(crate) fn layer_norm_rows(
    x: &Tensor,
    cols: usize,
    scale: &[f32],
    bias: Option<&[f32]>,
    eps: f64,
) -> KResult<(Vec<f32>, Vec<f32>, Vec<f32>)> {
    let xv = elems(x)?;
    let mut y = if cols > 0 && xv.len().is_multiple_of(cols) {
        // Every row is written below.
        tensor::reuse::f32_buffer(xv.len())
    } else {
        vec![0f32; xv.len()]
    };
    let rows = xv.len().checked_div(cols).unwrap_or(0);
    let mut means = Vec::with_capacity(rows);
    let mut invs = Vec::with_capacity(rows);
    if cols > 0 {
        for (row, o) in xv.chunks_exact(cols).zip(y.chunks_exact_mut(cols)) {
            let m = sum8(row, |v| v) / cols as f32;
            let var = sum8(row, |v| (v - m) * (v - m)) / cols as f32;
            let inv = 1.0 / (var as f64 + eps).sqrt();
            let (mf, invf) = (m, inv as f32);
            match bias {
                Some(b) => {
                    for (((d, &v), &s), &bb) in o.iter_mut().zip(row).zip(scale).zip(b) {
                        *d = (v - mf) * invf * s + bb;
                    }
                }
                None => {
                    for ((d, &v), &s) in o.iter_mut().zip(row).zip(scale) {
                        *d = (v - mf) * invf * s;
                    }
                }
            }
            means.push(mf);
            invs.push(invf);
        }
    }
    Ok((y, means, invs))
}

#[cfg(test)]
mod taps_tests {
    #[test]
    fn depthwise_plane_is_the_fma_chain_in_tap_order() {
        let src: Vec<f32> = (0..400)
            .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013)
            .collect();
        // (ow, wq, rows): row widths below, at and above one 16-lane vector, many blocks.
        for (ow, wq, rows) in [(7, 11, 7), (16, 18, 3), (5, 5, 1), (21, 25, 9)] {
            for taps in [0usize, 1, 2, 5, 9, 25] {
                let offs: Vec<usize> = (0..taps).map(|t| (t * 7) % 90).collect();
                let w: Vec<f32> = (0..taps).map(|t| 0.3 - t as f32 * 0.05).collect();
                let mut out = vec![f32::NAN; ow * rows];
                let mut acc = Vec::new();
                super::depthwise_plane(&mut out, ow, wq, &src, &offs, &w, 0.25, &mut acc);
                for r in 0..rows {
                    for x in 0..ow {
                        let mut v = 0.25f32;
                        for t in 0..taps {
                            v = w[t].mul_add(src[offs[t] + r * wq + x], v);
                        }
                        assert_eq!(out[r * ow + x], v, "ow {ow}, taps {taps}, ({r}, {x})");
                    }
                }
            }
        }
    }

    #[test]
    fn copy_rows_matches_indexing_for_every_width_and_step() {
        let src: Vec<f32> = (0..2000).map(|i| i as f32).collect();
        for step in 1..=3 {
            for n in [1usize, 7, 15, 16, 17, 31, 32, 33, 64, 65, 100] {
                let (rows, ss, ds) = (3, n * step + 5, n + 2);
                let mut dst = vec![-1f32; rows * ds];
                super::copy_rows(&mut dst, ds, &src[3..], ss, rows, n, step);
                for r in 0..rows {
                    for k in 0..ds {
                        let want = if k < n {
                            src[3 + r * ss + k * step]
                        } else {
                            -1.0
                        };
                        assert_eq!(dst[r * ds + k], want, "step {step}, n {n}, ({r}, {k})");
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tanh_matches_double_precision() {
        let mut worst = 0f64;
        for i in -200000..=200000 {
            let x = i as f32 * 1e-4;
            let want = (x as f64).tanh();
            let got = tanh(x) as f64;
            worst = worst.max((got - want).abs() / want.abs().max(1e-30));
        }
        assert!(worst < 4e-7, "tanh relative error {worst}");
        assert_eq!(tanh(f32::INFINITY), 1.0);
        assert_eq!(tanh(f32::NEG_INFINITY), -1.0);
        assert_eq!(tanh(0.0), 0.0);
        assert!(tanh(f32::NAN).is_nan());
    }

    #[test]
    fn dot4_sums_each_vector_exactly_as_dot() {
        for n in [0usize, 5, 32, 77, 1024] {
            let a: Vec<f32> = (0..n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.013)
                .collect();
            let bs: Vec<Vec<f32>> = (0..4)
                .map(|r| {
                    (0..n)
                        .map(|i| ((i * 53 + r * 7) % 97) as f32 * 0.021 - 1.0)
                        .collect()
                })
                .collect();
            let got = dot4(&a, &bs[0], &bs[1], &bs[2], &bs[3]);
            for r in 0..4 {
                assert_eq!(
                    got[r].to_bits(),
                    dot(&a, &bs[r]).to_bits(),
                    "n {n}, row {r}"
                );
            }
        }
    }

    #[test]
    fn erf_and_exp_match_double_precision() {
        let mut worst_erf = 0f64;
        let mut worst_exp = 0f64;
        for i in -60000..=60000 {
            let x = i as f32 * 1e-4;
            let want = crate::kernels::elementwise::erf(x as f64);
            let got = erf(x) as f64;
            worst_erf = worst_erf.max((got - want).abs() / want.abs().max(1e-30));
            let y = x * 10.0;
            let want = (y as f64).exp();
            worst_exp = worst_exp.max((exp(y) as f64 - want).abs() / want);
        }
        assert!(worst_erf < 1e-6, "erf relative error {worst_erf}");
        assert!(worst_exp < 3e-7, "exp relative error {worst_exp}");
        assert_eq!(erf(f32::INFINITY), 1.0);
        assert_eq!(erf(f32::NEG_INFINITY), -1.0);
        assert!(erf(f32::NAN).is_nan());
        assert_eq!(erf(0.0), 0.0);
    }

    #[test]
    fn binary_broadcasts_like_the_general_path() {
        let shapes: &[(&[usize], &[usize])] = &[
            (&[2, 3, 4], &[2, 3, 4]),
            (&[2, 3, 4], &[]),
            (&[], &[2, 3]),
            (&[1, 3, 2, 2], &[1, 3, 1, 1]),
            (&[2, 1, 4], &[3, 1]),
            (&[4], &[2, 3, 4]),
            (&[2, 3, 1], &[1, 3, 4]),
        ];
        for (sa, sb) in shapes {
            let na: usize = sa.iter().product();
            let nb: usize = sb.iter().product();
            let a = Tensor::from_vec(sa.to_vec(), (0..na).map(|i| i as f32).collect()).unwrap();
            let b =
                Tensor::from_vec(sb.to_vec(), (0..nb).map(|i| 100.0 * i as f32).collect()).unwrap();
            let fast = binary(&a, &b, |x, y| x - y).unwrap();
            let slow = crate::exec::util::binary(&a, &b, |x: f32, y: f32| x - y).unwrap();
            assert_eq!(fast, slow, "{sa:?} {sb:?}");
        }
    }
}
