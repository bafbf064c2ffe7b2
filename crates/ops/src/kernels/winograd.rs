//! Winograd F(2×2, 3×3) for float32 3×3 convolutions with unit strides and dilations (Lavin &
//! Gray, "Fast Algorithms for Convolutional Neural Networks", 2015): each 2×2 output tile comes
//! from a 4×4 input tile with 16 multiplications per channel pair instead of 36, as 16 matrix
//! products (one per transformed position) between the transformed filters and the
//! transformed input tiles. Not an operator family: Conv's float32 path calls it.
//!
//! With G = [[1,0,0],[½,½,½],[½,-½,½],[0,0,1]], Bᵀ = [[1,0,-1,0],[0,1,1,0],[0,-1,1,0],
//! [0,1,0,-1]] and Aᵀ = [[1,1,1,0],[0,1,-1,-1]]: U = G g Gᵀ per (output, input) channel,
//! V = Bᵀ d Bᵀᵀ per input tile and channel, Y = Aᵀ (Σ_c U ⊙ V) A.
//!
//! The transforms run over whole rows of tiles at once (contiguous slices, so they vectorise);
//! tiles are processed in blocks sized so the transformed block stays in the L2 cache.

use crate::kernels::fast32;
use crate::kernels::gemm::{self, Operand};

/// The geometry Winograd handles: 2-D, 3×3, unit strides and dilations, one group.
pub(crate) struct Geometry {
    pub c: usize,
    pub m: usize,
    pub h: usize,
    pub w: usize,
    pub oh: usize,
    pub ow: usize,
    pub ph: usize,
    pub pw: usize,
}

impl Geometry {
    fn tiles(&self) -> (usize, usize) {
        (self.oh.div_ceil(2), self.ow.div_ceil(2))
    }
}

/// The transformed filters: 16 row-major M×C matrices, one per position of the 4×4 tile.
pub(crate) struct Filters {
    pub u: Vec<f32>,
}

/// Transforms `w` (M×C×3×3).
pub(crate) fn filters(w: &[f32], m: usize, c: usize) -> Filters {
    let mut u = vec![0f32; 16 * m * c];
    for (mc, g) in w.chunks_exact(9).enumerate().take(m * c) {
        // t = G g (4×3), then u = t Gᵀ (4×4).
        let mut t = [[0f32; 3]; 4];
        for j in 0..3 {
            let (g0, g1, g2) = (g[j], g[3 + j], g[6 + j]);
            t[0][j] = g0;
            t[1][j] = 0.5 * (g0 + g1 + g2);
            t[2][j] = 0.5 * (g0 - g1 + g2);
            t[3][j] = g2;
        }
        for (i, row) in t.iter().enumerate() {
            let v = [
                row[0],
                0.5 * (row[0] + row[1] + row[2]),
                0.5 * (row[0] - row[1] + row[2]),
                row[2],
            ];
            for (j, &x) in v.iter().enumerate() {
                u[(i * 4 + j) * m * c + mc] = x;
            }
        }
    }
    Filters { u }
}

thread_local! {
    /// Transformed tiles and products, kept per thread between calls.
    static SCRATCH: std::cell::RefCell<Vec<f32>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// Bytes of transformed input tiles per block.
const BLOCK: usize = 1 << 20;

/// Convolves one image `x` (C×H×W) into `y` (M×OH×OW, holding the bias, which is added to).
pub(crate) fn conv(g: &Geometry, f: &Filters, x: &[f32], y: &mut [f32]) {
    let (th, tw) = g.tiles();
    // Zero-padded input: tile (ty, tx) reads rows 2ty..2ty+4 and columns 2tx..2tx+4.
    // Two more columns than the tiles read, for the odd-column deinterleave's last pair.
    let (hp, wp) = (2 * th + 2, 2 * tw + 4);
    let mut xp = vec![0f32; g.c * hp * wp];
    for (plane, src) in xp.chunks_exact_mut(hp * wp).zip(x.chunks_exact(g.h * g.w)) {
        for iy in 0..g.h.min(hp - g.ph) {
            let row = &mut plane[(iy + g.ph) * wp..][..wp];
            let n = g.w.min(wp - g.pw);
            row[g.pw..g.pw + n].copy_from_slice(&src[iy * g.w..iy * g.w + n]);
        }
    }
    let rows_per_block = (BLOCK / (64 * g.c.max(1) * tw)).clamp(1, th);
    let tb_max = rows_per_block * tw;
    // Every element of `v` and `mx` is written before it is read: reused without zeroing.
    let mut buf = SCRATCH.with(|s| std::mem::take(&mut *s.borrow_mut()));
    let need = 16 * (g.c + g.m) * tb_max + (8 * tw).max(4 * wp + 2 * tw + 2);
    if buf.len() < need {
        buf.resize(need, 0.0);
    }
    let (v, rest) = buf.split_at_mut(16 * g.c * tb_max);
    let (mx, scratch) = rest.split_at_mut(16 * g.m * tb_max);
    for ty0 in (0..th).step_by(rows_per_block) {
        let rows = rows_per_block.min(th - ty0);
        let tb = rows * tw;
        for c in 0..g.c {
            let plane = &xp[c * hp * wp..(c + 1) * hp * wp];
            for r in 0..rows {
                let (base, stride) = (c * tb + r * tw, g.c * tb);
                fast32::winograd_input_row(plane, wp, ty0 + r, tw, scratch, v, base, stride);
            }
        }
        let product = |(xi, out): (usize, &mut [f32])| {
            gemm::gemm(
                g.m,
                g.c,
                tb,
                Operand::rows(&f.u[xi * g.m * g.c..(xi + 1) * g.m * g.c], g.c),
                Operand::rows(&v[xi * g.c * tb..(xi + 1) * g.c * tb], tb),
                out,
                false,
                1.0,
            )
        };
        let mx_block = &mut mx[..16 * g.m * tb];
        if gemm::threads() > 1 {
            use rayon::prelude::*;
            mx_block
                .par_chunks_exact_mut(g.m * tb)
                .enumerate()
                .for_each(product);
        } else {
            mx_block
                .chunks_exact_mut(g.m * tb)
                .enumerate()
                .for_each(product);
        }
        let osz = g.oh * g.ow;
        for (m, ym) in y.chunks_exact_mut(osz).enumerate().take(g.m) {
            for r in 0..rows {
                // Output rows 2ty and 2ty+1 (one at the bottom edge of an odd height).
                let ty = ty0 + r;
                let out = &mut ym[2 * ty * g.ow..(2 * ty + (g.oh - 2 * ty).min(2)) * g.ow];
                let (base, stride) = (m * tb + r * tw, g.m * tb);
                fast32::winograd_output_row(mx, base, stride, tw, scratch, out, g.ow);
            }
        }
    }
    SCRATCH.with(|s| *s.borrow_mut() = buf);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Direct convolution (pad ph/pw, unit stride) in f64 for reference.
    fn direct(g: &Geometry, w: &[f32], x: &[f32]) -> Vec<f64> {
        let mut y = vec![0f64; g.m * g.oh * g.ow];
        for m in 0..g.m {
            for oy in 0..g.oh {
                for ox in 0..g.ow {
                    let mut s = 0f64;
                    for c in 0..g.c {
                        for i in 0..3 {
                            for j in 0..3 {
                                let iy = (oy + i) as i64 - g.ph as i64;
                                let ix = (ox + j) as i64 - g.pw as i64;
                                if iy >= 0 && ix >= 0 && (iy as usize) < g.h && (ix as usize) < g.w
                                {
                                    s += w[((m * g.c + c) * 3 + i) * 3 + j] as f64
                                        * x[(c * g.h + iy as usize) * g.w + ix as usize] as f64;
                                }
                            }
                        }
                    }
                    y[(m * g.oh + oy) * g.ow + ox] = s;
                }
            }
        }
        y
    }

    #[test]
    fn matches_direct_convolution_on_odd_and_even_sizes() {
        for &(c, m, h, w, p) in &[
            (3, 5, 7, 7, 1),
            (4, 2, 8, 6, 1),
            (2, 3, 5, 9, 0),
            (17, 9, 14, 14, 1),
            (1, 1, 4, 4, 0),
            (6, 4, 3, 3, 1),
        ] {
            let (oh, ow) = (h + 2 * p - 2, w + 2 * p - 2);
            let g = Geometry {
                c,
                m,
                h,
                w,
                oh,
                ow,
                ph: p,
                pw: p,
            };
            let wv: Vec<f32> = (0..m * c * 9)
                .map(|i| ((i * 29 % 17) as f32 - 8.0) * 0.07)
                .collect();
            let xv: Vec<f32> = (0..c * h * w)
                .map(|i| ((i * 13 % 23) as f32 - 11.0) * 0.11)
                .collect();
            let mut y = vec![0.25f32; m * oh * ow];
            conv(&g, &filters(&wv, m, c), &xv, &mut y);
            let want = direct(&g, &wv, &xv);
            for (i, (&a, &b)) in y.iter().zip(&want).enumerate() {
                assert!(
                    (a as f64 - (b + 0.25)).abs() < 1e-4 * (1.0 + b.abs()),
                    "c{c} m{m} {h}x{w} p{p}: element {i}: {a} vs {}",
                    b + 0.25
                );
            }
        }
    }
}
