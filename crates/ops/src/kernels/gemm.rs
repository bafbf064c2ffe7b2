//! Fast dense matrix multiplication for the kernels that reduce to it (MatMul, Gemm, Conv via
//! im2col). Not an operator family: it has no registry entries.
//!
//! Products go through the `gemm` crate, which picks AVX-512 / AVX2+FMA / NEON kernels at run
//! time. Intra-op parallelism comes from the rayon pool the engine runs the graph in (see
//! [`threads`]); outside any pool every kernel runs on the calling thread.

use crate::kernels::linalg::MatPlan;
use gemm::Parallelism;

/// Threads a kernel may use: the size of the rayon pool it runs in, or 1 outside any pool (so
/// a kernel called directly, as in the unit tests, never spawns work).
pub(crate) fn threads() -> usize {
    if rayon::current_thread_index().is_some() {
        rayon::current_num_threads()
    } else {
        1
    }
}

/// Below this many multiply-adds a product is not worth splitting across threads (measured on
/// the transformer shapes of the benchmark models: smaller products got slower with 2 threads).
pub(crate) const PAR_MIN_WORK: usize = 1 << 22;
/// Outputs of a depthwise convolution (9 to 25 multiply-adds each) below which it stays on one
/// thread, for the same reason.
pub(crate) const PAR_MIN_TAPPED: usize = 1 << 17;

/// The element types the fast path handles.
pub(crate) trait Dense: num_traits::Float + Send + Sync + Default + 'static {
    const ONE: Self;
    /// `y[i] += a * x[i]`.
    fn axpy(y: &mut [Self], a: Self, x: &[Self]);
    /// `Σ a[i] * b[i]` (over the shorter length).
    fn dot(a: &[Self], b: &[Self]) -> Self;
    /// [`dot`](Self::dot) of `a` with four vectors (each result exactly as `dot` gives it).
    fn dot4(a: &[Self], b: [&[Self]; 4]) -> [Self; 4] {
        b.map(|b| Self::dot(a, b))
    }
}
impl Dense for f32 {
    const ONE: f32 = 1.0;
    fn axpy(y: &mut [f32], a: f32, x: &[f32]) {
        crate::kernels::fast32::axpy(y, a, x)
    }
    fn dot(a: &[f32], b: &[f32]) -> f32 {
        crate::kernels::fast32::dot(a, b)
    }
    fn dot4(a: &[f32], b: [&[f32]; 4]) -> [f32; 4] {
        crate::kernels::fast32::dot4(a, b[0], b[1], b[2], b[3])
    }
}
impl Dense for f64 {
    const ONE: f64 = 1.0;
    fn axpy(y: &mut [f64], a: f64, x: &[f64]) {
        for (v, &w) in y.iter_mut().zip(x) {
            *v += a * w;
        }
    }
    fn dot(a: &[f64], b: &[f64]) -> f64 {
        crate::kernels::fast32::dot64(a, b)
    }
}

/// A read-only matrix operand: `data[i * rs + j * cs]` is element (i, j).
#[derive(Clone, Copy)]
pub(crate) struct Operand<'a, T> {
    pub data: &'a [T],
    pub rs: usize,
    pub cs: usize,
}

impl<'a, T> Operand<'a, T> {
    /// A contiguous row-major matrix with `cols` columns.
    pub(crate) fn rows(data: &'a [T], cols: usize) -> Self {
        Operand {
            data,
            rs: cols,
            cs: 1,
        }
    }

    /// Whether every element of an `r`×`c` view lies inside `data`.
    fn fits(&self, r: usize, c: usize) -> bool {
        if r == 0 || c == 0 {
            return true;
        }
        (r - 1)
            .checked_mul(self.rs)
            .and_then(|x| (c - 1).checked_mul(self.cs).and_then(|y| x.checked_add(y)))
            .is_some_and(|last| last < self.data.len())
    }
}

/// `c[m×n]` (row-major, contiguous) = `scale`·A·B, or `c += scale`·A·B when `accumulate`.
///
/// Panics when an operand is too short for its view (a bug in the caller, caught by the engine
/// as a kernel error).
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm<T: Dense>(
    m: usize,
    k: usize,
    n: usize,
    a: Operand<T>,
    b: Operand<T>,
    c: &mut [T],
    accumulate: bool,
    scale: T,
) {
    gemm_ldc(m, k, n, a, b, c, n, accumulate, scale)
}

/// [`gemm`] into a row-major `c` whose rows are `ldc` apart (`ldc >= n`): a column block of a
/// wider matrix.
#[allow(clippy::too_many_arguments)]
pub(crate) fn gemm_ldc<T: Dense>(
    m: usize,
    k: usize,
    n: usize,
    a: Operand<T>,
    b: Operand<T>,
    c: &mut [T],
    ldc: usize,
    accumulate: bool,
    scale: T,
) {
    assert!(
        a.fits(m, k)
            && b.fits(k, n)
            && ldc >= n
            && (m == 0 || n == 0 || c.len() >= (m - 1) * ldc + n),
        "gemm operands too short for {m}x{k}x{n} (ldc {ldc})"
    );
    if m == 0 || n == 0 {
        return;
    }
    if k == 0 {
        if !accumulate {
            for row in c.chunks_mut(ldc).take(m) {
                row[..n].iter_mut().for_each(|v| *v = T::zero());
            }
        }
        return;
    }
    if m == 1 && (b.cs == 1 || b.rs == 1) && n * k < 1 << 22 {
        vector_matrix(k, n, a, b, &mut c[..n], accumulate, scale);
        return;
    }
    if n == 1 && a.cs == 1 && b.rs == 1 && m * k < 1 << 22 {
        // Matrix-vector (a 1×1 convolution of a pooled vector): one dot product per row.
        let x = &b.data[..k];
        let row = |i: usize| &a.data[i * a.rs..i * a.rs + k];
        let put = |i: usize, d: T| {
            let cv = &mut c[i * ldc];
            *cv = if accumulate {
                *cv + d * scale
            } else {
                d * scale
            };
        };
        dots(x, m, row, put);
        return;
    }
    let t = threads();
    if t > 1 && m.saturating_mul(n).saturating_mul(k) >= PAR_MIN_WORK {
        // Split the output into one block of rows (or columns) per thread, each a product of
        // its own on one thread: the gemm crate's own splitting scales poorly on the tall and
        // wide shapes of networks.
        use rayon::prelude::*;
        if m >= 16 * t {
            let rows = m.div_ceil(t).next_multiple_of(8);
            c.par_chunks_mut(rows * ldc)
                .enumerate()
                .for_each(|(part, cp)| {
                    let i0 = part * rows;
                    let mr = rows.min(m - i0);
                    let ap = Operand {
                        data: &a.data[i0 * a.rs..],
                        ..a
                    };
                    gemm_raw(
                        mr,
                        k,
                        n,
                        ap,
                        b,
                        cp,
                        ldc,
                        accumulate,
                        scale,
                        Parallelism::None,
                    );
                });
            return;
        }
        if n >= 64 * t {
            let cols = n.div_ceil(t).next_multiple_of(16);
            let parts: Vec<usize> = (0..n).step_by(cols).collect();
            // Column blocks of C interleave in memory: hand each thread a raw view.
            let cptr = SyncPtr(c.as_mut_ptr());
            let clen = c.len();
            parts.into_par_iter().for_each(|j0| {
                let nc = cols.min(n - j0);
                let bp = Operand {
                    data: &b.data[j0 * b.cs..],
                    ..b
                };
                assert!(bp.fits(k, nc) && (m - 1) * ldc + j0 + nc <= clen);
                // SAFETY: each thread writes only columns j0..j0+nc of the m rows, disjoint
                // from every other thread's, all inside `c` (asserted); no reference to the
                // shared output is made, only this raw view.
                unsafe {
                    gemm_ptr(
                        m,
                        k,
                        nc,
                        a,
                        bp,
                        cptr.get().add(j0),
                        ldc,
                        accumulate,
                        scale,
                        Parallelism::None,
                    )
                };
            });
            return;
        }
    }
    let par = if t > 1 && m.saturating_mul(n).saturating_mul(k) >= PAR_MIN_WORK {
        Parallelism::Rayon(t)
    } else {
        Parallelism::None
    };
    gemm_raw(m, k, n, a, b, c, ldc, accumulate, scale, par);
}

/// A raw pointer shared by threads that write disjoint parts of its buffer (column blocks in
/// `gemm_ldc`, channel planes in the depthwise and pointwise convolutions).
#[derive(Clone, Copy)]
pub(crate) struct SyncPtr<T>(pub(crate) *mut T);
// SAFETY: every user hands each thread a part of the buffer no other thread touches.
unsafe impl<T> Send for SyncPtr<T> {}
unsafe impl<T> Sync for SyncPtr<T> {}
impl<T> SyncPtr<T> {
    pub(crate) fn get(self) -> *mut T {
        self.0
    }

    /// # Safety
    /// `n` elements past the pointer must lie in the same allocation.
    pub(crate) unsafe fn offset(self, n: usize) -> SyncPtr<T> {
        SyncPtr(self.0.add(n))
    }
}

/// The gemm crate's product; the caller has checked the views (as [`gemm_ldc`] does).
#[allow(clippy::too_many_arguments)]
fn gemm_raw<T: Dense>(
    m: usize,
    k: usize,
    n: usize,
    a: Operand<T>,
    b: Operand<T>,
    c: &mut [T],
    ldc: usize,
    accumulate: bool,
    scale: T,
    par: Parallelism,
) {
    assert!(
        a.fits(m, k) && b.fits(k, n) && (m == 0 || n == 0 || c.len() >= (m - 1) * ldc + n),
        "gemm operands too short for {m}x{k}x{n} (ldc {ldc})"
    );
    // SAFETY: the views were checked to lie inside their slices above, `c` is exclusively
    // borrowed and does not alias `a` or `b`.
    unsafe { gemm_ptr(m, k, n, a, b, c.as_mut_ptr(), ldc, accumulate, scale, par) }
}

/// The gemm crate's product into the row-major view at `c` (rows `ldc` apart).
///
/// # Safety
/// `a` and `b` must fit their `m×k` and `k×n` views, every element of the `m×n` view at `c`
/// must be valid for writes (and reads when `accumulate`), and no other thread may touch it.
#[allow(clippy::too_many_arguments)]
unsafe fn gemm_ptr<T: Dense>(
    m: usize,
    k: usize,
    n: usize,
    a: Operand<T>,
    b: Operand<T>,
    c: *mut T,
    ldc: usize,
    accumulate: bool,
    scale: T,
    par: Parallelism,
) {
    // SAFETY: as the caller promises; the strides are non-negative.
    unsafe {
        gemm::gemm(
            m,
            n,
            k,
            c,
            1,
            ldc as isize,
            accumulate,
            a.data.as_ptr(),
            a.cs as isize,
            a.rs as isize,
            b.data.as_ptr(),
            b.cs as isize,
            b.rs as isize,
            T::ONE,
            scale,
            false,
            false,
            false,
            par,
        )
    }
}

/// `c[1×n] (+)= scale · a[1×k] · B[k×n]` without packing: row-by-row AXPY when B's rows are
/// contiguous, dot products when its columns are (B stored transposed, as in Gemm transB).
fn vector_matrix<T: Dense>(
    k: usize,
    n: usize,
    a: Operand<T>,
    b: Operand<T>,
    c: &mut [T],
    accumulate: bool,
    scale: T,
) {
    if !accumulate {
        c.fill(T::zero());
    }
    if b.cs == 1 {
        for p in 0..k {
            let av = a.data[p * a.cs] * scale;
            T::axpy(c, av, &b.data[p * b.rs..p * b.rs + n]);
        }
        return;
    }
    let av: Vec<T> = (0..k).map(|p| a.data[p * a.cs]).collect();
    let col = |j: usize| &b.data[j * b.cs..j * b.cs + k];
    dots(&av, n, col, |j, d| c[j] = c[j] + d * scale);
}

/// `put(i, x · vector(i))` for `i < count`, four vectors at a time (four streams in flight,
/// `x` loaded once); each product summed exactly as [`Dense::dot`] sums it.
fn dots<'v, T: Dense>(
    x: &[T],
    count: usize,
    vector: impl Fn(usize) -> &'v [T],
    mut put: impl FnMut(usize, T),
) {
    let quads = count - count % 4;
    for i in (0..quads).step_by(4) {
        let d = T::dot4(x, [vector(i), vector(i + 1), vector(i + 2), vector(i + 3)]);
        for (r, d) in d.into_iter().enumerate() {
            put(i + r, d);
        }
    }
    for i in quads..count {
        put(i, T::dot(x, vector(i)));
    }
}

/// The batched product of `plan` over flat A and B data (numpy matmul broadcasting).
pub(crate) fn matmul_batched<T: Dense>(plan: &MatPlan, a: &[T], b: &[T]) -> Vec<T> {
    let (m, k, n) = (plan.m, plan.k, plan.n);
    let batches = plan.a_offs.len();
    let mut out = vec![T::default(); batches * m * n];
    if m * n == 0 {
        return out;
    }
    // One B shared by every batch and A's batches laid end to end: one tall product.
    let shared_b = plan.b_offs.iter().all(|&o| o == plan.b_offs[0]);
    let packed_a = plan.a_offs.iter().enumerate().all(|(i, &o)| o == i * m * k);
    if batches > 1 && shared_b && packed_a {
        let bo = plan.b_offs[0];
        gemm(
            batches * m,
            k,
            n,
            Operand::rows(&a[..batches * m * k], k),
            Operand::rows(&b[bo..bo + k * n], n),
            &mut out,
            false,
            T::ONE,
        );
        return out;
    }
    let one = |(bi, c): (usize, &mut [T])| {
        let (ao, bo) = (plan.a_offs[bi], plan.b_offs[bi]);
        gemm(
            m,
            k,
            n,
            Operand::rows(&a[ao..ao + m * k], k),
            Operand::rows(&b[bo..bo + k * n], n),
            c,
            false,
            T::ONE,
        );
    };
    // Many small products (attention heads): one per thread rather than each split.
    if threads() > 1 && batches > 1 && m * n * k < PAR_MIN_WORK {
        use rayon::prelude::*;
        out.par_chunks_exact_mut(m * n).enumerate().for_each(one);
    } else {
        out.chunks_exact_mut(m * n).enumerate().for_each(one);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(m: usize, k: usize, n: usize, a: &[f32], b: &[f32]) -> Vec<f32> {
        let mut c = vec![0f32; m * n];
        crate::kernels::linalg::gemm_into(a, b, &mut c, m, k, n);
        c
    }

    #[test]
    fn matches_the_naive_product_on_odd_shapes() {
        for &(m, k, n) in &[
            (1, 1, 1),
            (1, 37, 19),
            (3, 5, 7),
            (17, 33, 9),
            (64, 1, 65),
            (2, 0, 3),
        ] {
            let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 - 6.0).collect();
            let b: Vec<f32> = (0..k * n).map(|i| (i % 7) as f32 * 0.5).collect();
            let mut c = vec![1f32; m * n];
            gemm(
                m,
                k,
                n,
                Operand::rows(&a, k),
                Operand::rows(&b, n),
                &mut c,
                false,
                1.0,
            );
            assert_eq!(c, naive(m, k, n, &a, &b), "{m}x{k}x{n}");
        }
    }

    #[test]
    fn matrix_vector_products() {
        for &(m, k) in &[(1usize, 1usize), (7, 33), (144, 576)] {
            let a: Vec<f32> = (0..m * k).map(|i| (i % 13) as f32 - 6.0).collect();
            let b: Vec<f32> = (0..k).map(|i| (i % 7) as f32 * 0.5).collect();
            let mut c = vec![1f32; m];
            gemm(
                m,
                k,
                1,
                Operand::rows(&a, k),
                Operand::rows(&b, 1),
                &mut c,
                true,
                1.0,
            );
            let want: Vec<f32> = naive(m, k, 1, &a, &b).iter().map(|v| v + 1.0).collect();
            assert_eq!(c, want, "{m}x{k}");
        }
    }

    #[test]
    fn column_blocks_of_a_wider_output() {
        let (m, k, n, ldc) = (5, 7, 3, 11);
        let a: Vec<f32> = (0..m * k).map(|i| (i % 5) as f32 - 2.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i % 3) as f32 * 0.25).collect();
        let mut c = vec![9f32; m * ldc];
        gemm_ldc(
            m,
            k,
            n,
            Operand::rows(&a, k),
            Operand::rows(&b, n),
            &mut c[2..],
            ldc,
            false,
            1.0,
        );
        let want = naive(m, k, n, &a, &b);
        for i in 0..m {
            assert_eq!(&c[i * ldc + 2..i * ldc + 2 + n], &want[i * n..(i + 1) * n]);
            // Untouched outside the block.
            assert!(c[i * ldc..i * ldc + 2].iter().all(|&v| v == 9.0));
            assert!(c[i * ldc + 2 + n..(i + 1) * ldc].iter().all(|&v| v == 9.0));
        }
    }

    #[test]
    fn transposed_views_and_accumulation() {
        for (m, k, n) in [(4, 3, 5), (1, 19, 6)] {
            transposed_case(m, k, n);
        }
    }

    fn transposed_case(m: usize, k: usize, n: usize) {
        let a: Vec<f32> = (0..m * k).map(|i| i as f32).collect();
        let b: Vec<f32> = (0..k * n).map(|i| (i as f32) - 3.0).collect();
        // A stored transposed (k×m), B stored transposed (n×k).
        let at: Vec<f32> = (0..k * m).map(|i| a[(i % m) * k + i / m]).collect();
        let bt: Vec<f32> = (0..n * k).map(|i| b[(i % k) * n + i / k]).collect();
        let mut c = vec![1f32; m * n];
        gemm(
            m,
            k,
            n,
            Operand {
                data: &at,
                rs: 1,
                cs: m,
            },
            Operand {
                data: &bt,
                rs: 1,
                cs: k,
            },
            &mut c,
            true,
            2.0,
        );
        let want: Vec<f32> = naive(m, k, n, &a, &b)
            .into_iter()
            .map(|v| 1.0 + 2.0 * v)
            .collect();
        assert_eq!(c, want);
    }
}
