//! Depthwise 2-D convolution (float32, AVX-512) over blocks of 16 channels.
//!
//! One block at a time, the 16 channels' planes are transposed into a zero-padded buffer that
//! holds, per pixel, one 16-lane vector of the block's channels (`[row][col][16]`). Every tap of
//! every output pixel is then one aligned vector load and one fused multiply-add with the tap's
//! 16 weights, whatever the stride, dilation or plane size; eight output pixels of a row are
//! summed at once so that the weights are loaded once per eight. The results are transposed
//! back into the channels' planes. The buffers of one block stay in the L1/L2 cache.
//!
//! Each output is `fma(w[T-1], x, … fma(w[0], x, bias))`, taps in row-major order from the
//! bias: exactly the chain [`fast32::depthwise_plane`](super::fast32::depthwise_plane)
//! computes, so the two paths give the same bits.

/// Padded planes above this many pixels are left to the per-plane path (a block's buffer
/// would outgrow the L1/L2 caches, and the transposes cost more than large planes lose there).
const MAX_PADDED_PIXELS: usize = 1600;
/// Unit-stride outputs up to this many pixels come here (above, the per-plane path's vectors
/// are full enough that the transposes do not pay; strided ones always do, as the per-plane
/// path must split the plane into its stride phases).
const MAX_UNIT_STRIDE_PIXELS: usize = 256;

/// A depthwise convolution's 2-D geometry (leading pads non-negative).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    /// Channels (one group each).
    pub c: usize,
    pub h: usize,
    pub w: usize,
    pub kh: usize,
    pub kw: usize,
    pub sh: usize,
    pub sw: usize,
    pub dh: usize,
    pub dw: usize,
    pub ph: usize,
    pub pw: usize,
    pub oh: usize,
    pub ow: usize,
}

impl Geometry {
    /// Rows and columns of the padded plane the taps read.
    fn padded(&self) -> (usize, usize) {
        (
            (self.oh - 1) * self.sh + (self.kh - 1) * self.dh + 1,
            (self.ow - 1) * self.sw + (self.kw - 1) * self.dw + 1,
        )
    }

    fn blocks(&self) -> usize {
        self.c.div_ceil(16)
    }
}

use super::fast32::mask16;
use super::gemm::SyncPtr;

/// Whether [`conv`] runs here: AVX-512F, a non-empty output and a padded plane small enough.
pub(crate) fn applies(g: &Geometry) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        if g.oh == 0 || g.ow == 0 || g.kh == 0 || g.kw == 0 || g.c == 0 {
            return false;
        }
        let (hp, wp) = g.padded();
        let strided = g.sh > 1 || g.sw > 1;
        hp.saturating_mul(wp) <= MAX_PADDED_PIXELS
            && (strided || g.oh * g.ow <= MAX_UNIT_STRIDE_PIXELS)
            && std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = g;
        false
    }
}

/// Weights laid out for [`conv`].
pub(crate) struct Packed(Vec<f32>);

/// Weights `[c][kh*kw]` laid out per block and tap as 16 lanes (zeros past the last channel).
pub(crate) fn pack_weights(w: &[f32], g: &Geometry) -> Packed {
    let taps = g.kh * g.kw;
    let mut out = vec![0f32; g.blocks() * taps * 16];
    for (ch, wc) in w.chunks_exact(taps).take(g.c).enumerate() {
        let (b, lane) = (ch / 16, ch % 16);
        for (t, &v) in wc.iter().enumerate() {
            out[(b * taps + t) * 16 + lane] = v;
        }
    }
    Packed(out)
}

/// `y` = the depthwise convolution of every image of `x` (`[n][c][h][w]`) by the packed
/// weights plus `bias`, as `[n][c][oh][ow]`. Call only where [`applies`] holds.
pub(crate) fn conv(g: &Geometry, packed: &Packed, bias: Option<&[f32]>, x: &[f32], y: &mut [f32]) {
    assert!(applies(g), "depthwise::conv outside its geometry");
    let packed = &packed.0;
    let (plane, oplane) = (g.h * g.w, g.oh * g.ow);
    let images = x.len() / (g.c * plane).max(1);
    assert!(
        x.len() == images * g.c * plane
            && y.len() == images * g.c * oplane
            && packed.len() == g.blocks() * g.kh * g.kw * 16
            && bias.is_none_or(|b| b.len() >= g.c),
        "depthwise::conv: buffers do not match the geometry"
    );
    let mut lanes = vec![0f32; g.blocks() * 16];
    if let Some(b) = bias {
        lanes[..g.c].copy_from_slice(&b[..g.c]);
    }
    let jobs = images * g.blocks();
    let (out, out_len) = (SyncPtr(y.as_mut_ptr()), y.len());
    let run = |scratch: &mut Scratch, job: usize| {
        let (n, b) = (job / g.blocks(), job % g.blocks());
        let c0 = b * 16;
        let nc = (g.c - c0).min(16);
        let xs = &x[(n * g.c + c0) * plane..(n * g.c + c0 + nc) * plane];
        let ys = (n * g.c + c0) * oplane;
        let taps = g.kh * g.kw;
        // SAFETY: `applies` checked AVX-512F; the scratch buffers are sized for `g` by
        // `Scratch::for_geometry`, `xs` holds `nc` input planes, the output planes
        // `ys..ys + nc * oplane` lie inside `y` (checked above) and belong to this job alone.
        unsafe {
            block(
                g,
                scratch,
                xs,
                nc,
                &packed[b * taps * 16..(b + 1) * taps * 16],
                &lanes[c0..c0 + 16],
                out.offset(ys),
            )
        };
    };
    let init = || Scratch::for_geometry(g);
    if jobs > 1 && super::gemm::threads() > 1 && out_len >= super::gemm::PAR_MIN_TAPPED {
        use rayon::prelude::*;
        (0..jobs)
            .into_par_iter()
            .for_each_init(init, |s, j| run(s, j));
    } else {
        let mut s = init();
        (0..jobs).for_each(|j| run(&mut s, j));
    }
}

/// One thread's buffers: the padded input block and the output block, both `[pixel][16]`.
struct Scratch {
    input: Vec<f32>,
    output: Vec<f32>,
}

impl Scratch {
    fn for_geometry(g: &Geometry) -> Scratch {
        let (hp, wp) = g.padded();
        // The padding is written here once: the blocks only ever write inside the plane.
        Scratch {
            input: vec![0f32; hp * wp * 16],
            output: vec![0f32; g.oh * g.ow * 16],
        }
    }
}

#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Transposes the 16×16 matrix whose rows are `v` in place.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
pub(crate) unsafe fn transpose16(v: &mut [__m512; 16]) {
    // Within each 128-bit lane: rows 4i..4i+3 of column 4L+j end up in u[4i+j].
    let mut t = [_mm512_setzero_ps(); 16];
    for i in 0..8 {
        t[2 * i] = _mm512_unpacklo_ps(v[2 * i], v[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(v[2 * i], v[2 * i + 1]);
    }
    let mut u = [_mm512_setzero_ps(); 16];
    for i in 0..4 {
        let d = |k: usize| _mm512_castps_pd(t[4 * i + k]);
        u[4 * i] = _mm512_castpd_ps(_mm512_unpacklo_pd(d(0), d(2)));
        u[4 * i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(d(0), d(2)));
        u[4 * i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(d(1), d(3)));
        u[4 * i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(d(1), d(3)));
    }
    // Then gather lane L of u[j], u[4+j], u[8+j], u[12+j] into row 4L+j.
    for j in 0..4 {
        let p = _mm512_shuffle_f32x4::<0x88>(u[j], u[4 + j]);
        let q = _mm512_shuffle_f32x4::<0xDD>(u[j], u[4 + j]);
        let p2 = _mm512_shuffle_f32x4::<0x88>(u[8 + j], u[12 + j]);
        let q2 = _mm512_shuffle_f32x4::<0xDD>(u[8 + j], u[12 + j]);
        v[j] = _mm512_shuffle_f32x4::<0x88>(p, p2);
        v[8 + j] = _mm512_shuffle_f32x4::<0xDD>(p, p2);
        v[4 + j] = _mm512_shuffle_f32x4::<0x88>(q, q2);
        v[12 + j] = _mm512_shuffle_f32x4::<0xDD>(q, q2);
    }
}

/// One block of `nc` (≤ 16) channels: transpose in, taps, transpose out.
///
/// # Safety
/// AVX-512F; `s` sized for `g`; `x` holds `nc` planes of `h*w`; `y` points at `nc` writable
/// output planes of `oh*ow`; `w` holds `kh*kw*16` weights and `bias` 16 values.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn block(
    g: &Geometry,
    s: &mut Scratch,
    x: &[f32],
    nc: usize,
    w: &[f32],
    bias: &[f32],
    y: SyncPtr<f32>,
) {
    let (hp, wp) = g.padded();
    let plane = g.h * g.w;
    let xb = s.input.as_mut_ptr();
    // Input rows and columns that land inside the padded plane.
    let rows = g.h.min(hp.saturating_sub(g.ph));
    let cols = g.w.min(wp.saturating_sub(g.pw));
    let xp = x.as_ptr();
    for iy in 0..rows {
        let mut x0 = 0;
        while x0 < cols {
            let n = (cols - x0).min(16);
            let mut v = [_mm512_setzero_ps(); 16];
            for (c, v) in v.iter_mut().enumerate().take(nc) {
                *v = _mm512_maskz_loadu_ps(mask16(n), xp.add(c * plane + iy * g.w + x0));
            }
            transpose16(&mut v);
            let dst = xb.add(((iy + g.ph) * wp + x0 + g.pw) * 16);
            for (j, v) in v.iter().enumerate().take(n) {
                _mm512_storeu_ps(dst.add(j * 16), *v);
            }
            x0 += n;
        }
    }
    // Taps: eight output pixels of a row at a time.
    let ob = s.output.as_mut_ptr();
    let bv = _mm512_loadu_ps(bias.as_ptr());
    for oy in 0..g.oh {
        let mut ox = 0;
        while ox < g.ow {
            let r = (g.ow - ox).min(8);
            let src = xb.add((oy * g.sh * wp + ox * g.sw) * 16);
            let dst = ob.add((oy * g.ow + ox) * 16);
            match r {
                8 => taps::<8>(g, wp, src, w, bv, dst),
                7 => taps::<7>(g, wp, src, w, bv, dst),
                6 => taps::<6>(g, wp, src, w, bv, dst),
                5 => taps::<5>(g, wp, src, w, bv, dst),
                4 => taps::<4>(g, wp, src, w, bv, dst),
                3 => taps::<3>(g, wp, src, w, bv, dst),
                2 => taps::<2>(g, wp, src, w, bv, dst),
                _ => taps::<1>(g, wp, src, w, bv, dst),
            }
            ox += r;
        }
    }
    // Transpose out: 16 pixels of a row at a time into the channels' planes.
    let oplane = g.oh * g.ow;
    for oy in 0..g.oh {
        let mut x0 = 0;
        while x0 < g.ow {
            let n = (g.ow - x0).min(16);
            let mut v = [_mm512_setzero_ps(); 16];
            for (j, v) in v.iter_mut().enumerate().take(n) {
                *v = _mm512_loadu_ps(ob.add((oy * g.ow + x0 + j) * 16));
            }
            transpose16(&mut v);
            for (c, v) in v.iter().enumerate().take(nc) {
                _mm512_mask_storeu_ps(y.get().add(c * oplane + oy * g.ow + x0), mask16(n), *v);
            }
            x0 += n;
        }
    }
}

/// `R` output pixels starting at `src` (the padded pixel their first tap reads).
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn taps<const R: usize>(
    g: &Geometry,
    wp: usize,
    src: *const f32,
    w: &[f32],
    bias: __m512,
    dst: *mut f32,
) {
    let mut acc = [bias; R];
    let wv = w.as_ptr();
    for ky in 0..g.kh {
        let row = src.add(ky * g.dh * wp * 16);
        for kx in 0..g.kw {
            let wt = _mm512_loadu_ps(wv.add((ky * g.kw + kx) * 16));
            let p = row.add(kx * g.dw * 16);
            for (k, a) in acc.iter_mut().enumerate() {
                *a = _mm512_fmadd_ps(wt, _mm512_loadu_ps(p.add(k * g.sw * 16)), *a);
            }
        }
    }
    for (k, a) in acc.iter().enumerate() {
        _mm512_storeu_ps(dst.add(k * 16), *a);
    }
}

#[cfg(not(target_arch = "x86_64"))]
unsafe fn block(
    _: &Geometry,
    _: &mut Scratch,
    _: &[f32],
    _: usize,
    _: &[f32],
    _: &[f32],
    _: SyncPtr<f32>,
) {
    unreachable!("applies() is false off x86-64")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The fma chain of `fast32::depthwise_plane`, written out.
    fn reference(g: &Geometry, w: &[f32], bias: &[f32], x: &[f32]) -> Vec<f32> {
        let images = x.len() / (g.c * g.h * g.w);
        let mut y = Vec::new();
        for n in 0..images {
            for c in 0..g.c {
                for oy in 0..g.oh {
                    for ox in 0..g.ow {
                        let mut v = bias[c];
                        for ky in 0..g.kh {
                            for kx in 0..g.kw {
                                let iy = (oy * g.sh + ky * g.dh) as i64 - g.ph as i64;
                                let ix = (ox * g.sw + kx * g.dw) as i64 - g.pw as i64;
                                let xv = if iy >= 0
                                    && ix >= 0
                                    && (iy as usize) < g.h
                                    && (ix as usize) < g.w
                                {
                                    x[((n * g.c + c) * g.h + iy as usize) * g.w + ix as usize]
                                } else {
                                    0.0
                                };
                                v = w[c * g.kh * g.kw + ky * g.kw + kx].mul_add(xv, v);
                            }
                        }
                        y.push(v);
                    }
                }
            }
        }
        y
    }

    #[test]
    fn blocks_match_the_fma_chain_bit_for_bit() {
        // (c, h, w, k, stride, dilation, pad, images): partial blocks, strides, dilations,
        // rows longer than 16 and than 8, pads that make the output smaller or larger.
        let cases = [
            (576, 7, 7, 5, 1, 1, 2, 1),
            (33, 14, 14, 5, 2, 1, 2, 2),
            (16, 28, 28, 3, 2, 1, 1, 1),
            (5, 9, 20, 3, 1, 2, 2, 1),
            (18, 6, 11, 3, 1, 1, 0, 1),
            (7, 5, 5, 3, 3, 1, 3, 1),
        ];
        for (c, h, w, k, s, d, p, images) in cases {
            let oh = (h + 2 * p - d * (k - 1) - 1) / s + 1;
            let ow = (w + 2 * p - d * (k - 1) - 1) / s + 1;
            let g = Geometry {
                c,
                h,
                w,
                kh: k,
                kw: k,
                sh: s,
                sw: s,
                dh: d,
                dw: d,
                ph: p,
                pw: p,
                oh,
                ow,
            };
            if !std::is_x86_feature_detected!("avx512f") {
                eprintln!("no AVX-512F: the blocked path is not used here");
                return;
            }
            assert!(applies(&g), "{g:?}");
            let x: Vec<f32> = (0..images * c * h * w)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.031)
                .collect();
            let wv: Vec<f32> = (0..c * k * k)
                .map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.017)
                .collect();
            let bias: Vec<f32> = (0..c).map(|i| i as f32 * 0.25 - 1.0).collect();
            let mut y = vec![f32::NAN; images * c * oh * ow];
            conv(&g, &pack_weights(&wv, &g), Some(&bias), &x, &mut y);
            let want = reference(&g, &wv, &bias, &x);
            for (i, (a, b)) in y.iter().zip(&want).enumerate() {
                assert_eq!(a.to_bits(), b.to_bits(), "{g:?}: output {i}: {a} vs {b}");
            }
        }
    }

    #[test]
    fn transpose16_transposes() {
        if !std::is_x86_feature_detected!("avx512f") {
            return;
        }
        let m: Vec<f32> = (0..256).map(|i| i as f32).collect();
        let mut out = [0f32; 256];
        // SAFETY: AVX-512F is present; every load and store is inside `m` / `out`.
        unsafe {
            let mut v = [_mm512_setzero_ps(); 16];
            for (r, v) in v.iter_mut().enumerate() {
                *v = _mm512_loadu_ps(m.as_ptr().add(16 * r));
            }
            transpose16(&mut v);
            for (r, v) in v.iter().enumerate() {
                _mm512_storeu_ps(out.as_mut_ptr().add(16 * r), *v);
            }
        }
        for r in 0..16 {
            for c in 0..16 {
                assert_eq!(out[16 * r + c], m[16 * c + r]);
            }
        }
    }
}
