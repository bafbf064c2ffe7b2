//! 1×1 convolution (float32, AVX-512) as a product vectorised over output channels.
//!
//! `y[i][j] = bias[i] + Σ_p w[i][p] · x[p][j]` for `m` output channels `i`, `k` input channels
//! `p` and `n` pixels `j` (one image, planes row-major). The weights are packed once into
//! panels of 32 output channels (`[panel][p][32]`, zeros past `m`); a tile of up to 12 pixels
//! × 32 channels is summed in 24 registers, each step one pair of weight vectors and one
//! broadcast input value per pixel, and written to the output planes through 16×16
//! transposes. Vectorising over channels rather than pixels keeps the small planes of late
//! network stages (7×7, 14×14) free of partly empty vectors.
//!
//! Each output is the fused multiply-add chain over `p` in order from the bias.

use super::depthwise::transpose16;
use super::fast32::mask16;
use super::gemm::SyncPtr;
#[cfg(target_arch = "x86_64")]
use std::arch::x86_64::*;

/// Output channels per panel.
const PANEL: usize = 32;
/// Pixels per tile.
const TILE: usize = 12;

/// Weights laid out for [`conv`].
pub(crate) struct Packed {
    m: usize,
    k: usize,
    data: Vec<f32>,
}

/// Input channels from which [`conv`] is used: with fewer, each tile's two transposes cost
/// more than its sums...
const MIN_K: usize = 32;
/// ... and pixels up to which it is: on larger planes the general product's vectors over
/// pixels are full, and it wastes nothing on channel counts that are not multiples of 32...
const MAX_N: usize = 256;
/// ... and input channels up to which it is (a panel's weights, `k` × 128 bytes, stay in
/// the L1/L2 caches; beyond, the general product's blocking wins).
const MAX_K: usize = 640;

/// Whether [`conv`] is the faster path (AVX-512F, a non-empty product, enough input
/// channels, a small plane).
pub(crate) fn applies(m: usize, k: usize, n: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        m > 0
            && (MIN_K..=MAX_K).contains(&k)
            && n > 0
            && n <= MAX_N
            && std::is_x86_feature_detected!("avx512f")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (m, k, n);
        false
    }
}

/// Packs row-major weights `[m][k]`.
pub(crate) fn pack(w: &[f32], m: usize, k: usize) -> Packed {
    let panels = m.div_ceil(PANEL);
    let mut data = vec![0f32; panels * k * PANEL];
    for (i, row) in w.chunks_exact(k).take(m).enumerate() {
        let (b, lane) = (i / PANEL, i % PANEL);
        for (p, &v) in row.iter().enumerate() {
            data[(b * k + p) * PANEL + lane] = v;
        }
    }
    Packed { m, k, data }
}

/// `y` (`[m][n]`) = packed weights × `x` (`[k][n]`) + `bias`. Call only where [`applies`]
/// holds for the packed `m`, `k` and this `n`.
pub(crate) fn conv(w: &Packed, bias: Option<&[f32]>, x: &[f32], n: usize, y: &mut [f32]) {
    let (m, k) = (w.m, w.k);
    assert!(applies(m, k, n), "pointwise::conv outside its domain");
    assert!(
        x.len() >= k * n && y.len() >= m * n && bias.is_none_or(|b| b.len() >= m),
        "pointwise::conv: buffers do not match {m}x{k}x{n}"
    );
    let panels = m.div_ceil(PANEL);
    let mut lanes = vec![0f32; panels * PANEL];
    if let Some(b) = bias {
        lanes[..m].copy_from_slice(&b[..m]);
    }
    let tiles = n.div_ceil(TILE);
    // Panels write disjoint rows of the output.
    let out = SyncPtr(y.as_mut_ptr());
    // A panel's weights stay in the cache while every tile of pixels passes them.
    let run = |b: usize| {
        for t in 0..tiles {
            let j0 = t * TILE;
            let r = (n - j0).min(TILE);
            // SAFETY: AVX-512F (`applies`); the panel holds `k * PANEL` weights, `x` holds
            // `k` rows of `n` with `j0 + r <= n`, and the tile writes rows `b*PANEL..` (up
            // to `m`) at columns `j0..j0 + r` of `y`, which no other panel or tile writes.
            unsafe {
                tile(
                    &w.data[b * k * PANEL..(b + 1) * k * PANEL],
                    &lanes[b * PANEL..(b + 1) * PANEL],
                    x.as_ptr().add(j0),
                    n,
                    k,
                    r,
                    out.offset(b * PANEL * n + j0).get(),
                    (m - b * PANEL).min(PANEL),
                )
            };
        }
    };
    if panels > 1 && super::gemm::threads() > 1 && m * k * n >= super::gemm::PAR_MIN_WORK {
        use rayon::prelude::*;
        (0..panels).into_par_iter().for_each(run);
    } else {
        (0..panels).for_each(run);
    }
}

/// One tile: `r` pixels (columns of `x` from `xp`, rows `n` apart) × one panel.
///
/// # Safety
/// AVX-512F; `w` holds `k * PANEL` values; `xp` reads `k` rows of `r` values `n` apart; `yp`
/// may be written at `c * n + j` for `c < rows`, `j < r`.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[allow(clippy::too_many_arguments)]
unsafe fn tile(
    w: &[f32],
    bias: &[f32],
    xp: *const f32,
    n: usize,
    k: usize,
    r: usize,
    yp: *mut f32,
    rows: usize,
) {
    let mut acc = [[_mm512_setzero_ps(); 2]; TILE];
    let b0 = _mm512_loadu_ps(bias.as_ptr());
    let b1 = _mm512_loadu_ps(bias.as_ptr().add(16));
    match r {
        12 => sums::<12>(&mut acc, w, b0, b1, xp, n, k),
        11 => sums::<11>(&mut acc, w, b0, b1, xp, n, k),
        10 => sums::<10>(&mut acc, w, b0, b1, xp, n, k),
        9 => sums::<9>(&mut acc, w, b0, b1, xp, n, k),
        8 => sums::<8>(&mut acc, w, b0, b1, xp, n, k),
        7 => sums::<7>(&mut acc, w, b0, b1, xp, n, k),
        6 => sums::<6>(&mut acc, w, b0, b1, xp, n, k),
        5 => sums::<5>(&mut acc, w, b0, b1, xp, n, k),
        4 => sums::<4>(&mut acc, w, b0, b1, xp, n, k),
        3 => sums::<3>(&mut acc, w, b0, b1, xp, n, k),
        2 => sums::<2>(&mut acc, w, b0, b1, xp, n, k),
        _ => sums::<1>(&mut acc, w, b0, b1, xp, n, k),
    }
    // acc[j][h] holds channels 16h..16h+16 of pixel j: transpose each half into rows.
    let m = mask16(r);
    for h in 0..2 {
        let mut v = [_mm512_setzero_ps(); 16];
        for (v, a) in v.iter_mut().zip(&acc).take(r) {
            *v = a[h];
        }
        transpose16(&mut v);
        for (c, v) in v
            .iter()
            .enumerate()
            .take(rows.saturating_sub(16 * h).min(16))
        {
            _mm512_mask_storeu_ps(yp.add((16 * h + c) * n), m, *v);
        }
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
#[inline]
unsafe fn sums<const R: usize>(
    acc: &mut [[__m512; 2]; TILE],
    w: &[f32],
    b0: __m512,
    b1: __m512,
    xp: *const f32,
    n: usize,
    k: usize,
) {
    let mut a = [[b0, b1]; R];
    let wp = w.as_ptr();
    for p in 0..k {
        let w0 = _mm512_loadu_ps(wp.add(p * PANEL));
        let w1 = _mm512_loadu_ps(wp.add(p * PANEL + 16));
        let row = xp.add(p * n);
        for (j, a) in a.iter_mut().enumerate() {
            let xv = _mm512_set1_ps(*row.add(j));
            a[0] = _mm512_fmadd_ps(w0, xv, a[0]);
            a[1] = _mm512_fmadd_ps(w1, xv, a[1]);
        }
    }
    acc[..R].copy_from_slice(&a);
}

#[cfg(not(target_arch = "x86_64"))]
#[allow(clippy::too_many_arguments)]
unsafe fn tile(
    _: &[f32],
    _: &[f32],
    _: *const f32,
    _: usize,
    _: usize,
    _: usize,
    _: *mut f32,
    _: usize,
) {
    unreachable!("applies() is false off x86-64")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiles_match_the_fma_chain_bit_for_bit() {
        if !std::is_x86_feature_detected!("avx512f") {
            eprintln!("no AVX-512F: the pointwise path is not used here");
            return;
        }
        // (m, k, n): partial panels and tiles, one pixel, one channel.
        for (m, k, n) in [
            (72, 32, 49),
            (32, 40, 12),
            (1, 32, 1),
            (33, 37, 13),
            (576, 96, 49),
        ] {
            let x: Vec<f32> = (0..k * n)
                .map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.031)
                .collect();
            let w: Vec<f32> = (0..m * k)
                .map(|i| ((i * 53 % 97) as f32 - 48.0) * 0.017)
                .collect();
            let bias: Vec<f32> = (0..m).map(|i| i as f32 * 0.25 - 1.0).collect();
            let mut y = vec![f32::NAN; m * n];
            conv(&pack(&w, m, k), Some(&bias), &x, n, &mut y);
            for i in 0..m {
                for j in 0..n {
                    let mut v = bias[i];
                    for p in 0..k {
                        v = w[i * k + p].mul_add(x[p * n + j], v);
                    }
                    assert_eq!(
                        y[i * n + j].to_bits(),
                        v.to_bits(),
                        "{m}x{k}x{n} at ({i}, {j})"
                    );
                }
            }
        }
    }
}
