//! Kernels of the linear-algebra family (inference: `families/linalg.rs`): MatMul, Gemm,
//! MatMulInteger, QLinearMatMul and Einsum.
//!
//! One batched core ([`MatPlan`] + [`gemm_into`], i-k-j loop order) serves every matrix
//! product. f16/bf16 compute in f32; integers wrap in their own width like numpy.

use crate::exec::util::{
    broadcast_offsets, broadcast_shapes, broadcast_strides, broadcast_to, to_f64s, to_i64s,
    FloatConv,
};
use crate::exec::{kernel, KResult, KernelDef, RunCx, Value};
use crate::kernels::gemm;
use crate::kernels::reduce::checked_len;
use crate::{for_float, for_int};
use half::{bf16, f16};
use tensor::{DataType, Element, Tensor};

/// Multiply-accumulate for the element types the core computes in.
pub(crate) trait Mac: Element + Default {
    fn mac(self, a: Self, b: Self) -> Self;
}

macro_rules! mac_float {
    ($($t:ty),*) => {$(
        impl Mac for $t {
            #[inline(always)]
            fn mac(self, a: Self, b: Self) -> Self {
                self + a * b
            }
        }
    )*};
}
macro_rules! mac_int {
    ($($t:ty),*) => {$(
        impl Mac for $t {
            #[inline(always)]
            fn mac(self, a: Self, b: Self) -> Self {
                self.wrapping_add(a.wrapping_mul(b))
            }
        }
    )*};
}
mac_float!(f32, f64);
mac_int!(i8, i16, i32, i64, u8, u16, u32, u64);

/// C[m×n] += A[m×k] · B[k×n], row-major, i-k-j order.
pub(crate) fn gemm_into<T: Mac>(a: &[T], b: &[T], c: &mut [T], m: usize, k: usize, n: usize) {
    for i in 0..m {
        let crow = &mut c[i * n..(i + 1) * n];
        let arow = &a[i * k..(i + 1) * k];
        for (p, &aip) in arow.iter().enumerate() {
            let brow = &b[p * n..(p + 1) * n];
            for (cv, &bv) in crow.iter_mut().zip(brow) {
                *cv = cv.mac(aip, bv);
            }
        }
    }
}

/// The batched, broadcast layout of `A @ B` (numpy matmul semantics, 1-D operands included).
pub(crate) struct MatPlan {
    pub m: usize,
    pub k: usize,
    pub n: usize,
    /// Per output batch: the offsets of the A and B matrices.
    pub a_offs: Vec<usize>,
    pub b_offs: Vec<usize>,
    pub out_shape: Vec<usize>,
}

impl MatPlan {
    pub(crate) fn new(a: &[usize], b: &[usize]) -> Result<MatPlan, String> {
        if a.is_empty() || b.is_empty() {
            return Err(format!(
                "MatMul operands must have rank >= 1, got {a:?} and {b:?}"
            ));
        }
        let a2: Vec<usize> = if a.len() == 1 {
            vec![1, a[0]]
        } else {
            a.to_vec()
        };
        let b2: Vec<usize> = if b.len() == 1 {
            vec![b[0], 1]
        } else {
            b.to_vec()
        };
        let (m, k) = (a2[a2.len() - 2], a2[a2.len() - 1]);
        let (k2, n) = (b2[b2.len() - 2], b2[b2.len() - 1]);
        if k != k2 {
            return Err(format!("inner dimensions differ: A {a:?} and B {b:?}"));
        }
        let ab = &a2[..a2.len() - 2];
        let bb = &b2[..b2.len() - 2];
        let batch = broadcast_shapes(&[ab, bb]).map_err(|e| e.to_string())?;
        let a_offs = broadcast_offsets(&batch, &broadcast_strides(ab, &batch))
            .into_iter()
            .map(|o| o * m * k)
            .collect();
        let b_offs = broadcast_offsets(&batch, &broadcast_strides(bb, &batch))
            .into_iter()
            .map(|o| o * k * n)
            .collect();
        let mut out_shape = batch;
        if a.len() > 1 {
            out_shape.push(m);
        }
        if b.len() > 1 {
            out_shape.push(n);
        }
        Ok(MatPlan {
            m,
            k,
            n,
            a_offs,
            b_offs,
            out_shape,
        })
    }

    /// Runs the batched product over flat A and B data.
    pub(crate) fn run<T: Mac>(&self, a: &[T], b: &[T]) -> Vec<T> {
        let (m, k, n) = (self.m, self.k, self.n);
        let mut out = vec![T::default(); self.a_offs.len() * m * n];
        if m * n == 0 {
            return out;
        }
        for (bi, c) in out.chunks_exact_mut(m * n).enumerate() {
            let (ao, bo) = (self.a_offs[bi], self.b_offs[bi]);
            gemm_into(&a[ao..ao + m * k], &b[bo..bo + k * n], c, m, k, n);
        }
        out
    }
}

/// A tensor's elements, borrowed when its bytes are aligned (no copy of large weights).
fn elems<T: Element>(t: &Tensor) -> KResult<std::borrow::Cow<'_, [T]>> {
    Ok(match t.as_slice::<T>() {
        Some(s) => std::borrow::Cow::Borrowed(s),
        None => std::borrow::Cow::Owned(t.to_vec::<T>()?),
    })
}

/// Batched product of two tensors of one dtype (f16/bf16 via f32).
fn matmul_tensors(cx: &RunCx, a: &Tensor, b: &Tensor) -> KResult<Tensor> {
    if a.dtype() != b.dtype() {
        return Err(cx.invalid(format!(
            "A and B must share a type, got {} and {}",
            a.dtype(),
            b.dtype()
        )));
    }
    let plan = MatPlan::new(a.shape(), b.shape()).map_err(|e| cx.invalid(e))?;
    checked_len(cx, &plan.out_shape, "MatMul output")?;
    let shape = plan.out_shape.clone();
    macro_rules! native {
        ($t:ty) => {
            Tensor::from_vec(shape, plan.run::<$t>(&elems::<$t>(a)?, &elems::<$t>(b)?))?
        };
    }
    Ok(match a.dtype() {
        DataType::Float => {
            let mut y = gemm::matmul_batched::<f32>(&plan, &elems::<f32>(a)?, &elems::<f32>(b)?);
            cx.finish_f32(&mut y, &shape);
            Tensor::from_vec(shape, y)?
        }
        DataType::Double => Tensor::from_vec(
            shape,
            gemm::matmul_batched::<f64>(&plan, &elems::<f64>(a)?, &elems::<f64>(b)?),
        )?,
        DataType::Float16 | DataType::Bfloat16 => {
            let av = f32s(a)?;
            let bv = f32s(b)?;
            let r = plan.run::<f32>(&av, &bv);
            from_f32s(a.dtype(), shape, r)?
        }
        d => for_int!(d, T => { native!(T) } else { return Err(cx.unsupported(d)) }),
    })
}

fn f32s(t: &Tensor) -> KResult<Vec<f32>> {
    Ok(match t.dtype() {
        DataType::Float16 => t.to_vec::<f16>()?.into_iter().map(f32::from).collect(),
        DataType::Bfloat16 => t.to_vec::<bf16>()?.into_iter().map(f32::from).collect(),
        _ => t.to_vec::<f32>()?,
    })
}

fn from_f32s(dtype: DataType, shape: Vec<usize>, v: Vec<f32>) -> KResult<Tensor> {
    Ok(match dtype {
        DataType::Float16 => {
            Tensor::from_vec(shape, v.into_iter().map(f16::from_f32).collect::<Vec<_>>())?
        }
        DataType::Bfloat16 => {
            Tensor::from_vec(shape, v.into_iter().map(bf16::from_f32).collect::<Vec<_>>())?
        }
        _ => Tensor::from_vec(shape, v)?,
    })
}

/// MatMul: all versions; numpy matmul semantics for every numeric type.
fn matmul(cx: &RunCx) -> KResult<Vec<Value>> {
    Ok(vec![matmul_tensors(cx, cx.input(0)?, cx.input(1)?)?.into()])
}

/// Transposes a row-major r×c matrix.
fn transpose<T: Copy>(v: &[T], r: usize, c: usize) -> Vec<T> {
    let mut out = Vec::with_capacity(v.len());
    for j in 0..c {
        for i in 0..r {
            out.push(v[i * c + j]);
        }
    }
    out
}

/// Gemm: all versions; alpha·op(A)·op(B) + beta·C with C broadcast to (M, N).
fn gemm(cx: &RunCx) -> KResult<Vec<Value>> {
    let a = cx.input(0)?;
    let b = cx.input(1)?;
    let c = cx.opt_input(2)?;
    if a.rank() != 2 || b.rank() != 2 {
        return Err(cx.invalid(format!(
            "A and B must be 2-D, got {:?} and {:?}",
            a.shape(),
            b.shape()
        )));
    }
    if a.dtype() != b.dtype() {
        return Err(cx.invalid(format!(
            "A and B must share a type, got {} and {}",
            a.dtype(),
            b.dtype()
        )));
    }
    let ta = cx.int("transA", 0)? != 0;
    let tb = cx.int("transB", 0)? != 0;
    let alpha = cx.float("alpha", 1.0)?;
    let beta = cx.float("beta", 1.0)?;
    let (m, k) = if ta {
        (a.shape()[1], a.shape()[0])
    } else {
        (a.shape()[0], a.shape()[1])
    };
    let (k2, n) = if tb {
        (b.shape()[1], b.shape()[0])
    } else {
        (b.shape()[0], b.shape()[1])
    };
    if k != k2 {
        return Err(cx.invalid(format!(
            "inner dimensions differ: op(A) is {m}x{k}, op(B) is {k2}x{n}"
        )));
    }
    if let Some(c) = c {
        let ok = broadcast_shapes(&[&[m, n], c.shape()]).is_ok_and(|s| s == [m, n]);
        if !ok {
            return Err(cx.invalid(format!(
                "C of shape {:?} does not broadcast to ({m}, {n})",
                c.shape()
            )));
        }
    }
    let dt = a.dtype();
    if dt == DataType::Float {
        let mut y = gemm_f32(a, b, c, (ta, tb), (alpha, beta), (m, k, n))?;
        cx.finish_f32(&mut y, &[m, n]);
        return Ok(vec![Tensor::from_vec(vec![m, n], y)?.into()]);
    }
    macro_rules! run {
        ($t:ty, $av:expr, $bv:expr, $cv:expr, $scale:expr, $add:expr) => {{
            let mut av: Vec<$t> = $av;
            let mut bv: Vec<$t> = $bv;
            if ta {
                av = transpose(&av, k, m);
            }
            if tb {
                bv = transpose(&bv, n, k);
            }
            let mut y = vec![<$t>::default(); m * n];
            gemm_into(&av, &bv, &mut y, m, k, n);
            let cv: Option<Vec<$t>> = $cv;
            for (i, v) in y.iter_mut().enumerate() {
                *v = $scale(*v);
                if let Some(cv) = &cv {
                    *v = $add(*v, cv[i]);
                }
            }
            y
        }};
    }
    let out = match dt {
        DataType::Float | DataType::Float16 | DataType::Bfloat16 => {
            let cv = match c {
                Some(c) if beta != 0.0 => Some(bcast_f32(c, m, n)?),
                _ => None,
            };
            let y = run!(
                f32,
                f32s(a)?,
                f32s(b)?,
                cv,
                |v: f32| v * alpha,
                |v: f32, c: f32| v + c * beta
            );
            from_f32s(dt, vec![m, n], y)?
        }
        DataType::Double => {
            let cv = match c {
                Some(c) if beta != 0.0 => Some(broadcast_to::<f64>(c, &[m, n])?),
                _ => None,
            };
            let (al, be) = (alpha as f64, beta as f64);
            let y = run!(
                f64,
                a.to_vec()?,
                b.to_vec()?,
                cv,
                |v: f64| v * al,
                |v: f64, c: f64| v + c * be
            );
            Tensor::from_vec(vec![m, n], y)?
        }
        d => for_int!(d, T => {
            if alpha.fract() != 0.0 || beta.fract() != 0.0 {
                return Err(cx.unsupported(format!("{d} with non-integral alpha/beta")));
            }
            let cv = match c {
                Some(c) if beta != 0.0 => {
                    if c.dtype() != d {
                        return Err(cx.invalid(format!("C must be {d}, got {}", c.dtype())));
                    }
                    Some(broadcast_to::<T>(c, &[m, n])?)
                }
                _ => None,
            };
            let (al, be) = (alpha as i64 as T, beta as i64 as T);
            let y = run!(T, a.to_vec()?, b.to_vec()?, cv, |v: T| v.wrapping_mul(al), |v: T, c: T| v.wrapping_add(c.wrapping_mul(be)));
            Tensor::from_vec(vec![m, n], y)?
        } else {
            return Err(cx.unsupported(d))
        }),
    };
    Ok(vec![out.into()])
}

/// Gemm on float32 through the fast product: transposes become strides, C (times beta) seeds
/// the output and alpha scales the product.
fn gemm_f32(
    a: &Tensor,
    b: &Tensor,
    c: Option<&Tensor>,
    (ta, tb): (bool, bool),
    (alpha, beta): (f32, f32),
    (m, k, n): (usize, usize, usize),
) -> KResult<Vec<f32>> {
    let av = elems::<f32>(a)?;
    let bv = elems::<f32>(b)?;
    let opa = if ta {
        gemm::Operand {
            data: &av,
            rs: 1,
            cs: m,
        }
    } else {
        gemm::Operand::rows(&av, k)
    };
    let opb = if tb {
        gemm::Operand {
            data: &bv,
            rs: 1,
            cs: k,
        }
    } else {
        gemm::Operand::rows(&bv, n)
    };
    let mut y = match c {
        Some(c) if beta != 0.0 => {
            let mut y = bcast_f32(c, m, n)?;
            if beta != 1.0 {
                y.iter_mut().for_each(|v| *v *= beta);
            }
            y
        }
        // Overwritten by the product.
        _ => tensor::reuse::f32_buffer(m * n),
    };
    let seeded = c.is_some() && beta != 0.0;
    gemm::gemm(m, k, n, opa, opb, &mut y, seeded, alpha);
    Ok(y)
}

/// A float tensor broadcast to (m, n), as f32.
fn bcast_f32(c: &Tensor, m: usize, n: usize) -> KResult<Vec<f32>> {
    let v = for_float!(c.dtype(), T => {
        broadcast_to::<T>(c, &[m, n])?.into_iter().map(FloatConv::to_f32).collect()
    } else {
        return Err(crate::exec::KernelError::Invalid(format!("C must be a float tensor, got {}", c.dtype())))
    });
    Ok(v)
}

/// 8- and 16-bit integer elements as i32 (exact), or None for other types.
fn ints32(t: &Tensor) -> Option<Vec<i32>> {
    fn conv<T: Element + Into<i32>>(t: &Tensor) -> Option<Vec<i32>> {
        t.to_vec::<T>()
            .ok()
            .map(|v| v.into_iter().map(Into::into).collect())
    }
    match t.dtype() {
        DataType::Int8 => conv::<i8>(t),
        DataType::Uint8 => conv::<u8>(t),
        DataType::Int16 => conv::<i16>(t),
        DataType::Uint16 => conv::<u16>(t),
        _ => None,
    }
}

/// A zero point (or scale) that is a scalar or one value per row (`rows`) of a 2-D operand.
fn per_index<T: Copy>(cx: &RunCx, v: Vec<T>, rows: usize, what: &str) -> KResult<Vec<T>> {
    if v.len() == 1 {
        return Ok(vec![v[0]; rows]);
    }
    if v.len() == rows {
        return Ok(v);
    }
    Err(cx.invalid(format!(
        "{what} must be a scalar or hold {rows} values, got {}",
        v.len()
    )))
}

/// (A - a_zp) @ (B - b_zp) in i32, with scalar / per-row (A) / per-column (B) zero points.
fn int_matmul(
    cx: &RunCx,
    a: &Tensor,
    b: &Tensor,
    azp: Option<&Tensor>,
    bzp: Option<&Tensor>,
) -> KResult<(MatPlan, Vec<i32>)> {
    let plan = MatPlan::new(a.shape(), b.shape()).map_err(|e| cx.invalid(e))?;
    checked_len(cx, &plan.out_shape, "MatMul output")?;
    let mut av = ints32(a).ok_or_else(|| cx.unsupported(a.dtype()))?;
    let mut bv = ints32(b).ok_or_else(|| cx.unsupported(b.dtype()))?;
    let (m, k, n) = (plan.m, plan.k, plan.n);
    if let Some(z) = azp {
        let z = ints32(z).ok_or_else(|| cx.unsupported(z.dtype()))?;
        let z = per_index(cx, z, m, "a_zero_point")?;
        for (i, v) in av.iter_mut().enumerate() {
            *v -= z[(i / k.max(1)) % m.max(1)];
        }
    }
    if let Some(z) = bzp {
        let z = ints32(z).ok_or_else(|| cx.unsupported(z.dtype()))?;
        let z = per_index(cx, z, n, "b_zero_point")?;
        for (i, v) in bv.iter_mut().enumerate() {
            *v -= z[i % n.max(1)];
        }
    }
    let r = plan.run::<i32>(&av, &bv);
    Ok((plan, r))
}

/// MatMulInteger (10): int32 product of 8-bit operands minus their zero points.
fn matmul_integer(cx: &RunCx) -> KResult<Vec<Value>> {
    let (plan, r) = int_matmul(
        cx,
        cx.input(0)?,
        cx.input(1)?,
        cx.opt_input(2)?,
        cx.opt_input(3)?,
    )?;
    Ok(vec![Tensor::from_vec(plan.out_shape, r)?.into()])
}

/// Rounds half to even.
fn rint(x: f64) -> f64 {
    let r = x.round();
    if (x - x.trunc()).abs() == 0.5 {
        2.0 * (x / 2.0).round()
    } else {
        r
    }
}

/// Scale values as f64 after rounding each step in the scale's own type.
fn scale_values(cx: &RunCx, t: &Tensor) -> KResult<Vec<f64>> {
    for_float!(t.dtype(), T => {
        Ok(t.to_vec::<T>()?.into_iter().map(FloatConv::to_f64).collect())
    } else {
        Err(cx.unsupported(t.dtype()))
    })
}

/// Rounds an f64 to the precision of float type `d`.
fn round_to(d: DataType, v: f64) -> f64 {
    match d {
        DataType::Float16 => f16::from_f64(v).to_f64(),
        DataType::Bfloat16 => bf16::from_f64(v).to_f64(),
        DataType::Float => v as f32 as f64,
        _ => v,
    }
}

/// QLinearMatMul (10, 21): quantized product, requantized with half-to-even rounding.
fn qlinear_matmul(cx: &RunCx) -> KResult<Vec<Value>> {
    let a = cx.input(0)?;
    let b = cx.input(3)?;
    let (plan, c) = int_matmul(cx, a, b, Some(cx.input(2)?), Some(cx.input(5)?))?;
    let (m, n) = (plan.m, plan.n);
    let st = cx.input(1)?.dtype();
    let asc = per_index(cx, scale_values(cx, cx.input(1)?)?, m, "a_scale")?;
    let bsc = per_index(cx, scale_values(cx, cx.input(4)?)?, n, "b_scale")?;
    let ysc = scale_values(cx, cx.input(6)?)?;
    let [ysc] = ysc[..] else {
        return Err(cx.invalid("y_scale must be a scalar"));
    };
    let yzp_t = cx.input(7)?;
    let yzp = to_i64s(yzp_t)?;
    let [yzp] = yzp[..] else {
        return Err(cx.invalid("y_zero_point must be a scalar"));
    };
    let (lo, hi) = match yzp_t.dtype() {
        DataType::Uint8 => (0.0, 255.0),
        DataType::Int8 => (-128.0, 127.0),
        d => return Err(cx.unsupported(d)),
    };
    let y: Vec<f64> = c
        .iter()
        .enumerate()
        .map(|(i, &v)| {
            let row = (i / n.max(1)) % m.max(1);
            let col = i % n.max(1);
            let f = round_to(st, round_to(st, asc[row] * bsc[col]) / ysc);
            rint(v as f64 * f + yzp as f64).clamp(lo, hi)
        })
        .collect();
    let out = if yzp_t.dtype() == DataType::Uint8 {
        Tensor::from_vec(
            plan.out_shape,
            y.into_iter().map(|v| v as u8).collect::<Vec<_>>(),
        )?
    } else {
        Tensor::from_vec(
            plan.out_shape,
            y.into_iter().map(|v| v as i8).collect::<Vec<_>>(),
        )?
    };
    Ok(vec![out.into()])
}

/// A parsed einsum term: one label per dim (ellipsis expanded to internal labels).
fn parse_term(
    cx: &RunCx,
    term: &str,
    rank: Option<usize>,
    ell: &mut Option<usize>,
) -> KResult<Vec<u32>> {
    let letters: Vec<char> = term.chars().filter(|c| !c.is_whitespace()).collect();
    let s: String = letters.iter().collect();
    let dots = s.matches("...").count();
    if dots > 1 || (s.contains('.') && dots == 0) {
        return Err(cx.invalid(format!("bad einsum term '{term}'")));
    }
    let named = s.replace("...", "");
    if let Some(c) = named.chars().find(|c| !c.is_ascii_alphabetic()) {
        return Err(cx.invalid(format!("bad einsum label '{c}' in '{term}'")));
    }
    let n_ell = if dots == 1 {
        match rank {
            Some(r) => {
                if r < named.len() {
                    return Err(cx.invalid(format!(
                        "term '{term}' has more labels than the operand's rank {r}"
                    )));
                }
                let e = r - named.len();
                match ell {
                    Some(prev) if *prev != e => {
                        // Ellipses broadcast; keep the widest.
                        *prev = (*prev).max(e);
                    }
                    None => *ell = Some(e),
                    _ => {}
                }
                e
            }
            None => ell.unwrap_or(0),
        }
    } else {
        0
    };
    let mut out = Vec::new();
    let (pre, post) = match s.find("...") {
        Some(p) => (&s[..p], &s[p + 3..]),
        None => (s.as_str(), ""),
    };
    out.extend(pre.chars().map(|c| c as u32));
    // Ellipsis dims are labelled 1000+i counted from the right so operands of different
    // ellipsis rank line up.
    for i in (0..n_ell).rev() {
        out.push(1000 + i as u32);
    }
    out.extend(post.chars().map(|c| c as u32));
    Ok(out)
}

/// Einsum: all versions, by direct summation over every label (floats in f64, bf16/f16 via
/// f64, integers wrapping in i64).
#[allow(clippy::unnecessary_cast)] // the cast is the identity for i64 only
fn einsum(cx: &RunCx) -> KResult<Vec<Value>> {
    let eq = cx
        .attr_s("equation")?
        .ok_or_else(|| cx.invalid("Einsum needs the 'equation' attribute"))?;
    let eq: String = eq.chars().filter(|c| !c.is_whitespace()).collect();
    let n_in = cx.num_inputs();
    let inputs: Vec<&Tensor> = (0..n_in).map(|i| cx.input(i)).collect::<KResult<_>>()?;
    if inputs.is_empty() {
        return Err(cx.invalid("Einsum needs at least one input"));
    }
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l, Some(r)),
        None => (eq.as_str(), None),
    };
    let terms: Vec<&str> = lhs.split(',').collect();
    if terms.len() != inputs.len() {
        return Err(cx.invalid(format!(
            "equation '{eq}' names {} operands, got {} inputs",
            terms.len(),
            inputs.len()
        )));
    }
    let mut ell = None;
    let mut labels = Vec::new();
    for (t, x) in terms.iter().zip(&inputs) {
        let l = parse_term(cx, t, Some(x.rank()), &mut ell)?;
        if l.len() != x.rank() {
            return Err(cx.invalid(format!(
                "term '{t}' has {} labels for an operand of rank {}",
                l.len(),
                x.rank()
            )));
        }
        labels.push(l);
    }
    // Label sizes (size-1 ellipsis dims broadcast).
    let mut size: std::collections::BTreeMap<u32, usize> = Default::default();
    for (l, x) in labels.iter().zip(&inputs) {
        for (&lab, &d) in l.iter().zip(x.shape()) {
            let e = size.entry(lab).or_insert(d);
            if *e != d {
                if *e == 1 && lab >= 1000 {
                    *e = d;
                } else if !(d == 1 && lab >= 1000) {
                    return Err(cx.invalid(format!(
                        "label '{}' has sizes {} and {d}",
                        char::from_u32(lab).unwrap_or('?'),
                        *e
                    )));
                }
            }
        }
    }
    let out_labels: Vec<u32> = match rhs {
        Some(r) => parse_term(cx, r, None, &mut ell)?,
        None => {
            // Implicit: ellipsis dims, then labels appearing once, alphabetically.
            let mut o: Vec<u32> = (0..ell.unwrap_or(0))
                .rev()
                .map(|i| 1000 + i as u32)
                .collect();
            let mut counts: std::collections::BTreeMap<u32, usize> = Default::default();
            for l in &labels {
                for &x in l {
                    if x < 1000 {
                        *counts.entry(x).or_default() += 1;
                    }
                }
            }
            o.extend(counts.into_iter().filter(|(_, c)| *c == 1).map(|(l, _)| l));
            o
        }
    };
    for (i, l) in out_labels.iter().enumerate() {
        if out_labels[..i].contains(l) {
            return Err(cx.invalid(format!(
                "output label '{}' appears twice in '{eq}'",
                char::from_u32(*l).unwrap_or('?')
            )));
        }
        if !size.contains_key(l) {
            return Err(cx.invalid(format!(
                "output label '{}' is not in any input",
                char::from_u32(*l).unwrap_or('?')
            )));
        }
    }
    let sum_labels: Vec<u32> = size
        .keys()
        .copied()
        .filter(|l| !out_labels.contains(l))
        .collect();
    let all: Vec<u32> = out_labels.iter().chain(&sum_labels).copied().collect();
    let dims: Vec<usize> = all.iter().map(|l| size[l]).collect();
    // Per operand, its stride along each label of `all` (repeated labels add: diagonals).
    let op_strides: Vec<Vec<usize>> = labels
        .iter()
        .zip(&inputs)
        .map(|(l, x)| {
            let st = crate::exec::util::strides(x.shape());
            all.iter()
                .map(|a| {
                    l.iter()
                        .enumerate()
                        .filter(|(i, lab)| *lab == a && x.shape()[*i] != 1)
                        .map(|(i, _)| st[i])
                        .sum()
                })
                .collect()
        })
        .collect();
    let out_shape: Vec<usize> = out_labels.iter().map(|l| size[l]).collect();
    let n_out = checked_len(cx, &out_shape, "Einsum output")?;
    let n_sum: usize = sum_labels.iter().map(|l| size[l]).product();
    let total = n_out
        .checked_mul(n_sum)
        .ok_or_else(|| cx.invalid(format!("Einsum iteration space of dims {dims:?} overflows")))?;
    let dt = inputs[0].dtype();
    if inputs.iter().any(|x| x.dtype() != dt) {
        return Err(cx.invalid("Einsum inputs must share one type"));
    }
    macro_rules! run {
        ($vals:expr, $zero:expr, $one:expr, $mul:expr, $add:expr) => {{
            let vals = $vals;
            let mut out = vec![$zero; n_out];
            if total > 0 {
                let mut idx = vec![0usize; all.len()];
                let mut offs = vec![0usize; inputs.len()];
                for flat in 0..total {
                    let mut p = $one;
                    for (v, &o) in vals.iter().zip(&offs) {
                        p = $mul(p, v[o]);
                    }
                    let oi = flat / n_sum.max(1);
                    out[oi] = $add(out[oi], p);
                    for d in (0..all.len()).rev() {
                        idx[d] += 1;
                        for (o, st) in offs.iter_mut().zip(&op_strides) {
                            *o += st[d];
                        }
                        if idx[d] < dims[d] {
                            break;
                        }
                        for (o, st) in offs.iter_mut().zip(&op_strides) {
                            *o -= st[d] * dims[d];
                        }
                        idx[d] = 0;
                    }
                }
            }
            out
        }};
    }
    let out = for_float!(dt, T => {
        let vals: Vec<Vec<f64>> = inputs.iter().map(|x| to_f64s(x)).collect::<KResult<_>>()?;
        let r = run!(vals, 0f64, 1f64, |a: f64, b: f64| a * b, |a: f64, b: f64| a + b);
        Tensor::from_vec(out_shape, r.into_iter().map(T::from_f64).collect::<Vec<T>>())?
    } else {
        for_int!(dt, T => {
            let vals: Vec<Vec<i64>> = inputs
                .iter()
                .map(|x| Ok(x.to_vec::<T>()?.into_iter().map(|v| v as i64).collect()))
                .collect::<KResult<_>>()?;
            let r = run!(vals, 0i64, 1i64, |a: i64, b: i64| a.wrapping_mul(b), |a: i64, b: i64| a.wrapping_add(b));
            Tensor::from_vec(out_shape, r.into_iter().map(|v| v as T).collect::<Vec<T>>())?
        } else {
            return Err(cx.unsupported(dt))
        })
    });
    Ok(vec![out.into()])
}

pub const KERNELS: &[KernelDef] = &[
    kernel("MatMul", 1, matmul),
    kernel("Gemm", 1, gemm),
    kernel("MatMulInteger", 10, matmul_integer),
    kernel("QLinearMatMul", 10, qlinear_matmul),
    kernel("Einsum", 12, einsum),
];

#[cfg(test)]
mod tests {
    use crate::kernels::reduce::testutil::{out, run, t, A};

    #[test]
    fn matmul_integer_per_row_and_column_zero_points() {
        let a = t(&[2, 2], &[1u8, 2, 3, 4]);
        let b = t(&[2, 2], &[5u8, 6, 7, 8]);
        let azp = t(&[2], &[1u8, 2]);
        let bzp = t(&[2], &[3u8, 4]);
        let r = run("MatMulInteger", 10, vec![], &[a, b, azp, bzp], 1).unwrap();
        assert_eq!(out::<i32>(&r, 0), (vec![2, 2], vec![4, 4, 10, 10]));
    }

    #[test]
    fn einsum_implicit_ellipsis_and_diagonal() {
        let a = t(&[2, 2], &[1f32, 2., 3., 4.]);
        let r = run(
            "Einsum",
            12,
            vec![("equation", A::S("ij,jk"))],
            &[a.clone(), a.clone()],
            1,
        )
        .unwrap();
        assert_eq!(out::<f32>(&r, 0).1, vec![7., 10., 15., 22.]);
        let r = run(
            "Einsum",
            12,
            vec![("equation", A::S("ii->i"))],
            std::slice::from_ref(&a),
            1,
        )
        .unwrap();
        assert_eq!(out::<f32>(&r, 0).1, vec![1., 4.]);
        let x: Vec<f32> = (0..12).map(|v| v as f32).collect();
        let y = t(&[2, 2], &[0f32, 1., 2., 3.]);
        let r = run(
            "Einsum",
            12,
            vec![("equation", A::S("...ij,...jk->...ik"))],
            &[t(&[3, 2, 2], &x), y],
            1,
        )
        .unwrap();
        assert_eq!(
            out::<f32>(&r, 0),
            (
                vec![3, 2, 2],
                vec![2., 3., 6., 11., 10., 19., 14., 27., 18., 35., 22., 43.]
            )
        );
    }

    #[test]
    fn gemm_on_integers_and_bad_shapes() {
        let a = t(&[1, 2], &[1i32, 2]);
        let b = t(&[2, 1], &[3i32, 4]);
        let c = t(&[1], &[1i32]);
        let r = run("Gemm", 13, vec![("beta", A::F(2.0))], &[a.clone(), b, c], 1).unwrap();
        assert_eq!(out::<i32>(&r, 0), (vec![1, 1], vec![13]));
        assert!(run("Gemm", 13, vec![], &[a.clone(), a], 1).is_err());
    }
}
