//! Kernels of the elementwise family (inference: `families/elementwise.rs`).
//!
//! Floats are computed in their own precision (`float16`/`bfloat16` through `f32`, rounding each
//! result back), integers through `i128` and truncated back, so overflow wraps like numpy.

use crate::exec::util::{
    binary, broadcast_offsets, broadcast_shapes, broadcast_strides, concat_flat, take, unary,
    FloatConv,
};
use crate::exec::{kernel, KResult, KernelDef, RunCx, Value};
use crate::kernels::fast32;
use crate::{for_float, for_int, for_numeric};
use half::{bf16, f16};
use num_traits::{AsPrimitive, Float, NumCast, Zero};
use tensor::{DataType, Element, Tensor};

// ---------------------------------------------------------------------------------------------
// Element helpers

/// A float element type and the type it is computed in.
pub(crate) trait Fl: FloatConv + PartialOrd {
    type C: Float + NumCast + 'static;
    fn up(self) -> Self::C;
    fn down(c: Self::C) -> Self;
    fn c(v: f64) -> Self::C {
        <Self::C as NumCast>::from(v).unwrap_or_else(Self::C::nan)
    }
}

impl Fl for f32 {
    type C = f32;
    fn up(self) -> f32 {
        self
    }
    fn down(c: f32) -> f32 {
        c
    }
}
impl Fl for f64 {
    type C = f64;
    fn up(self) -> f64 {
        self
    }
    fn down(c: f64) -> f64 {
        c
    }
}
impl Fl for f16 {
    type C = f32;
    fn up(self) -> f32 {
        self.to_f32()
    }
    fn down(c: f32) -> f16 {
        f16::from_f32(c)
    }
}
impl Fl for bf16 {
    type C = f32;
    fn up(self) -> f32 {
        self.to_f32()
    }
    fn down(c: f32) -> bf16 {
        bf16::from_f32(c)
    }
}

/// An integer element type, computed through `i128` and wrapped back.
pub(crate) trait Int: Element + PartialOrd + AsPrimitive<i128> {
    const SIGNED: bool;
    fn wrap(v: i128) -> Self;
    fn w(self) -> i128 {
        self.as_()
    }
}

macro_rules! int_impl {
    ($($t:ty => $signed:expr),*) => {$(
        impl Int for $t {
            const SIGNED: bool = $signed;
            fn wrap(v: i128) -> Self {
                v as $t
            }
        }
    )*};
}
int_impl!(i8 => true, i16 => true, i32 => true, i64 => true,
          u8 => false, u16 => false, u32 => false, u64 => false);

/// Round half to even.
fn round_even<C: Float>(x: C) -> C {
    let r = x.round();
    let half = C::from(0.5).unwrap();
    if (r - x).abs() == half {
        let two = C::from(2.0).unwrap();
        two * (x / two).round()
    } else {
        r
    }
}

/// erf in double precision (FreeBSD msun `s_erf.c`, via the `libm` crate).
#[allow(clippy::excessive_precision)]
pub(crate) fn erf(x: f64) -> f64 {
    const ERX: f64 = 8.45062911510467529297e-01;
    const EFX8: f64 = 1.02703333676410069053e+00;
    const PP: [f64; 5] = [
        1.28379167095512558561e-01,
        -3.25042107247001499370e-01,
        -2.84817495755985104766e-02,
        -5.77027029648944159157e-03,
        -2.37630166566501626084e-05,
    ];
    const QQ: [f64; 5] = [
        3.97917223959155352819e-01,
        6.50222499887672944485e-02,
        5.08130628187576562776e-03,
        1.32494738004321644526e-04,
        -3.96022827877536812320e-06,
    ];
    const PA: [f64; 7] = [
        -2.36211856075265944077e-03,
        4.14856118683748331666e-01,
        -3.72207876035701323847e-01,
        3.18346619901161753674e-01,
        -1.10894694282396677476e-01,
        3.54783043256182359371e-02,
        -2.16637559486879084300e-03,
    ];
    const QA: [f64; 6] = [
        1.06420880400844228286e-01,
        5.40397917702171048937e-01,
        7.18286544141962662868e-02,
        1.26171219808761642112e-01,
        1.36370839120290507362e-02,
        1.19844998467991074170e-02,
    ];
    const RA: [f64; 8] = [
        -9.86494403484714822705e-03,
        -6.93858572707181764372e-01,
        -1.05586262253232909814e+01,
        -6.23753324503260060396e+01,
        -1.62396669462573470355e+02,
        -1.84605092906711035994e+02,
        -8.12874355063065934246e+01,
        -9.81432934416914548592e+00,
    ];
    const SA: [f64; 8] = [
        1.96512716674392571292e+01,
        1.37657754143519042600e+02,
        4.34565877475229228821e+02,
        6.45387271733267880336e+02,
        4.29008140027567833386e+02,
        1.08635005541779435134e+02,
        6.57024977031928170135e+00,
        -6.04244152148580987438e-02,
    ];
    const RB: [f64; 7] = [
        -9.86494292470009928597e-03,
        -7.99283237680523006574e-01,
        -1.77579549177547519889e+01,
        -1.60636384855821916062e+02,
        -6.37566443368389627722e+02,
        -1.02509513161107724954e+03,
        -4.83519191608651397019e+02,
    ];
    const SB: [f64; 7] = [
        3.03380607434824582924e+01,
        3.25792512996573918826e+02,
        1.53672958608443695994e+03,
        3.19985821950859553908e+03,
        2.55305040643316442583e+03,
        4.74528541206955367215e+02,
        -2.24409524465858183362e+01,
    ];
    fn poly(c: &[f64], s: f64) -> f64 {
        c.iter().rev().fold(0.0, |acc, &k| acc * s + k)
    }
    let hi = (x.to_bits() >> 32) as u32;
    let sign = hi >> 31 != 0;
    let ix = hi & 0x7fff_ffff;
    if ix >= 0x7ff0_0000 {
        return if x.is_nan() {
            x
        } else if sign {
            -1.0
        } else {
            1.0
        };
    }
    if ix < 0x3feb_0000 {
        if ix < 0x3e30_0000 {
            return 0.125 * (8.0 * x + EFX8 * x);
        }
        let z = x * x;
        let r = poly(&PP, z);
        let s = 1.0 + z * poly(&QQ, z);
        return x + x * (r / s);
    }
    let y = if ix < 0x4018_0000 {
        let erfc = if ix < 0x3ff4_0000 {
            let s = x.abs() - 1.0;
            let p = poly(&PA, s);
            let q = 1.0 + s * poly(&QA, s);
            1.0 - ERX - p / q
        } else {
            let ax = x.abs();
            let s = 1.0 / (ax * ax);
            let (r, bs) = if ix < 0x4006_db6d {
                (poly(&RA, s), 1.0 + s * poly(&SA, s))
            } else {
                (poly(&RB, s), 1.0 + s * poly(&SB, s))
            };
            let z = f64::from_bits(ax.to_bits() & 0xffff_ffff_0000_0000);
            (-z * z - 0.5625).exp() * ((z - ax) * (z + ax) + r / bs).exp() / ax
        };
        1.0 - erfc
    } else {
        1.0 - f64::from_bits(0x0010_0000_0000_0000)
    };
    if sign {
        -y
    } else {
        y
    }
}

fn same_dtype(cx: &RunCx, a: &Tensor, b: &Tensor) -> KResult<()> {
    if a.dtype() != b.dtype() {
        return Err(cx.invalid(format!(
            "{} inputs must share one type, got {} and {}",
            cx.op(),
            a.dtype(),
            b.dtype()
        )));
    }
    Ok(())
}

/// The two inputs of a binary op; before opset 7 applies the `broadcast`/`axis` attributes
/// (B broadcast onto A, aligned at `axis`, or equal shapes when `broadcast` is 0).
fn two_inputs(cx: &RunCx) -> KResult<(Tensor, Tensor)> {
    let a = cx.input(0)?;
    let b = cx.input(1)?;
    if cx.opset >= 7 {
        return Ok((a.clone(), b.clone()));
    }
    if cx.int("broadcast", 0)? == 0 {
        if a.shape() != b.shape() {
            return Err(cx.invalid(format!(
                "{} v{} without broadcast=1 needs equal shapes, got {:?} and {:?}",
                cx.op(),
                cx.opset,
                a.shape(),
                b.shape()
            )));
        }
        return Ok((a.clone(), b.clone()));
    }
    let (ra, rb) = (a.rank(), b.rank());
    if rb > ra {
        return Err(cx.invalid(format!(
            "{} broadcast: B (rank {rb}) must not have a higher rank than A (rank {ra})",
            cx.op()
        )));
    }
    let axis = match cx.attr_i("axis")? {
        None => ra - rb,
        Some(ax) => {
            let ax = if ax < 0 { ax + ra as i64 } else { ax };
            if ax < 0 || ax as usize + rb > ra {
                return Err(cx.invalid(format!(
                    "{} broadcast axis {ax} does not fit B shape {:?} into A shape {:?}",
                    cx.op(),
                    b.shape(),
                    a.shape()
                )));
            }
            ax as usize
        }
    };
    let mut shape = vec![1usize; ra];
    for (i, &d) in b.shape().iter().enumerate() {
        if d != 1 && d != a.shape()[axis + i] {
            return Err(cx.invalid(format!(
                "{} broadcast: B shape {:?} at axis {axis} does not match A shape {:?}",
                cx.op(),
                b.shape(),
                a.shape()
            )));
        }
        shape[axis + i] = d;
    }
    Ok((a.clone(), b.reshape(shape)?))
}

// ---------------------------------------------------------------------------------------------
// Binary arithmetic

#[derive(Clone, Copy, PartialEq)]
enum Ar {
    Add,
    Sub,
    Mul,
    Div,
}

fn arith_f<C: Float>(op: Ar, x: C, y: C) -> C {
    match op {
        Ar::Add => x + y,
        Ar::Sub => x - y,
        Ar::Mul => x * y,
        Ar::Div => x / y,
    }
}

fn arith_i<T: Int>(op: Ar, x: T, y: T) -> T {
    let (a, b) = (x.w(), y.w());
    T::wrap(match op {
        Ar::Add => a.wrapping_add(b),
        Ar::Sub => a.wrapping_sub(b),
        Ar::Mul => a.wrapping_mul(b),
        // y != 0 is checked before; truncation toward zero like C (and the reference).
        Ar::Div => a / b,
    })
}

fn has_zero<T: Int>(t: &Tensor) -> KResult<bool> {
    Ok(t.to_vec::<T>()?.iter().any(|&v| v.w() == 0))
}

fn arith(cx: &RunCx, op: Ar) -> KResult<Vec<Value>> {
    let (a, b) = two_inputs(cx)?;
    same_dtype(cx, &a, &b)?;
    if fast32::all_f32(&[&a, &b]) {
        return Ok(vec![arith_f32(&a, &b, op)?.into()]);
    }
    let out = for_float!(a.dtype(), T => {
        binary::<T, T, T>(&a, &b, |x, y| T::down(arith_f(op, x.up(), y.up())))?
    } else for_int!(a.dtype(), T => {
        if op == Ar::Div && has_zero::<T>(&b)? {
            return Err(cx.invalid("integer Div by zero"));
        }
        binary::<T, T, T>(&a, &b, |x, y| arith_i(op, x, y))?
    } else {
        return Err(cx.unsupported(a.dtype()));
    }));
    Ok(vec![out.into()])
}

/// float32 arithmetic through the fast broadcasting map (same results as [`arith_f`]).
fn arith_f32(a: &Tensor, b: &Tensor, op: Ar) -> KResult<Tensor> {
    match op {
        Ar::Add => fast32::binary(a, b, |x, y| x + y),
        Ar::Sub => fast32::binary(a, b, |x, y| x - y),
        Ar::Mul => fast32::binary(a, b, |x, y| x * y),
        Ar::Div => fast32::binary(a, b, |x, y| x / y),
    }
}

/// Add (with the pre-7 `broadcast`/`axis` form).
fn add(cx: &RunCx) -> KResult<Vec<Value>> {
    arith(cx, Ar::Add)
}
/// Sub (with the pre-7 `broadcast`/`axis` form).
fn sub(cx: &RunCx) -> KResult<Vec<Value>> {
    arith(cx, Ar::Sub)
}
/// Mul (with the pre-7 `broadcast`/`axis` form).
fn mul(cx: &RunCx) -> KResult<Vec<Value>> {
    arith(cx, Ar::Mul)
}
/// Div (integers truncate toward zero; with the pre-7 `broadcast`/`axis` form).
fn div(cx: &RunCx) -> KResult<Vec<Value>> {
    arith(cx, Ar::Div)
}

/// Mod: numpy `mod` (sign of the divisor) or, with `fmod=1`, C `fmod` (sign of the dividend).
fn modulo(cx: &RunCx) -> KResult<Vec<Value>> {
    let a = cx.input(0)?;
    let b = cx.input(1)?;
    same_dtype(cx, a, b)?;
    let fmod = cx.int("fmod", 0)? != 0;
    let out = for_float!(a.dtype(), T => {
        binary::<T, T, T>(a, b, |x, y| {
            let (x, y) = (x.up(), y.up());
            let z = <T as Fl>::C::zero();
            let r = x % y;
            T::down(if !fmod && r != z && ((y < z) != (r < z)) { r + y } else { r })
        })?
    } else for_int!(a.dtype(), T => {
        if has_zero::<T>(b)? {
            return Err(cx.invalid("integer Mod by zero"));
        }
        binary::<T, T, T>(a, b, |x, y| {
            let (x, y) = (x.w(), y.w());
            let r = if fmod { x % y } else { x.rem_euclid(y) + if y < 0 && x.rem_euclid(y) != 0 { y } else { 0 } };
            T::wrap(r)
        })?
    } else {
        return Err(cx.unsupported(a.dtype()));
    }));
    Ok(vec![out.into()])
}

fn pow_int<T: Int>(base: T, e: i128) -> T {
    let mut result: i128 = 1;
    let mut b = base.w();
    let mut e = e;
    while e > 0 {
        if e & 1 == 1 {
            result = result.wrapping_mul(b);
        }
        b = b.wrapping_mul(b);
        e >>= 1;
    }
    T::wrap(result)
}

/// Pow: the result has the base's type; a float on either side computes in double.
fn pow(cx: &RunCx) -> KResult<Vec<Value>> {
    let (a, b) = two_inputs(cx)?;
    let (ta, tb) = (a.dtype(), b.dtype());
    if ta.is_int() && tb.is_int() {
        let e = crate::exec::util::to_i64s(&b)?;
        if e.iter().any(|&v| v < 0) {
            return Err(cx.invalid("integer Pow with a negative integer exponent"));
        }
        let b = Tensor::from_vec(b.shape().to_vec(), e)?;
        let out = for_int!(ta, T => {
            binary::<T, i64, T>(&a, &b, |x, y| pow_int(x, y as i128))?
        } else {
            return Err(cx.unsupported(ta));
        });
        return Ok(vec![out.into()]);
    }
    let bf = crate::exec::util::to_f64s(&b).map_err(|_| cx.unsupported(tb))?;
    let same_f32 = matches!((ta, tb), (DataType::Float, DataType::Float));
    let b = Tensor::from_vec(b.shape().to_vec(), bf)?;
    let out = for_float!(ta, T => {
        if same_f32 {
            binary::<T, f64, T>(&a, &b, |x, y| T::from_f32(x.to_f32().powf(y as f32)))?
        } else {
            binary::<T, f64, T>(&a, &b, |x, y| T::from_f64(x.to_f64().powf(y)))?
        }
    } else for_int!(ta, T => {
        binary::<T, f64, T>(&a, &b, |x, y| {
            let r = (x.w() as f64).powf(y);
            T::wrap(if r.is_finite() { r as i128 } else { 0 })
        })?
    } else {
        return Err(cx.unsupported(ta));
    }));
    Ok(vec![out.into()])
}

// ---------------------------------------------------------------------------------------------
// Comparisons, logic, bits

#[derive(Clone, Copy)]
enum Cmp {
    Eq,
    Gt,
    Ge,
    Lt,
    Le,
}

fn cmp<T: PartialOrd>(op: Cmp, x: T, y: T) -> bool {
    match op {
        Cmp::Eq => x == y,
        Cmp::Gt => x > y,
        Cmp::Ge => x >= y,
        Cmp::Lt => x < y,
        Cmp::Le => x <= y,
    }
}

fn compare(cx: &RunCx, op: Cmp) -> KResult<Vec<Value>> {
    let (a, b) = two_inputs(cx)?;
    same_dtype(cx, &a, &b)?;
    let out = for_numeric!(a.dtype(), T => {
        binary::<T, T, bool>(&a, &b, |x, y| cmp(op, x, y))?
    } else match (a.dtype(), op) {
        (DataType::Bool, _) => binary::<bool, bool, bool>(&a, &b, |x, y| cmp(op, x, y))?,
        (DataType::String, Cmp::Eq) => {
            let shape = broadcast_shapes(&[a.shape(), b.shape()])?;
            let (sa, sb) = (a.strings().unwrap_or(&[]), b.strings().unwrap_or(&[]));
            let oa = broadcast_offsets(&shape, &broadcast_strides(a.shape(), &shape));
            let ob = broadcast_offsets(&shape, &broadcast_strides(b.shape(), &shape));
            let v: Vec<bool> = oa.iter().zip(&ob).map(|(&i, &j)| sa[i] == sb[j]).collect();
            Tensor::from_vec(shape, v)?
        }
        (dt, _) => return Err(cx.unsupported(dt)),
    });
    Ok(vec![out.into()])
}

/// Equal (numbers, bool, strings).
fn equal(cx: &RunCx) -> KResult<Vec<Value>> {
    compare(cx, Cmp::Eq)
}
/// Greater.
fn greater(cx: &RunCx) -> KResult<Vec<Value>> {
    compare(cx, Cmp::Gt)
}
/// GreaterOrEqual.
fn greater_equal(cx: &RunCx) -> KResult<Vec<Value>> {
    compare(cx, Cmp::Ge)
}
/// Less.
fn less(cx: &RunCx) -> KResult<Vec<Value>> {
    compare(cx, Cmp::Lt)
}
/// LessOrEqual.
fn less_equal(cx: &RunCx) -> KResult<Vec<Value>> {
    compare(cx, Cmp::Le)
}

fn logic(cx: &RunCx, f: fn(bool, bool) -> bool) -> KResult<Vec<Value>> {
    let (a, b) = two_inputs(cx)?;
    if a.dtype() != DataType::Bool || b.dtype() != DataType::Bool {
        return Err(cx.unsupported(format!("{} and {}", a.dtype(), b.dtype())));
    }
    Ok(vec![binary::<bool, bool, bool>(&a, &b, f)?.into()])
}

/// And (bool).
fn and(cx: &RunCx) -> KResult<Vec<Value>> {
    logic(cx, |x, y| x & y)
}
/// Or (bool).
fn or(cx: &RunCx) -> KResult<Vec<Value>> {
    logic(cx, |x, y| x | y)
}
/// Xor (bool).
fn xor(cx: &RunCx) -> KResult<Vec<Value>> {
    logic(cx, |x, y| x ^ y)
}

/// Not (bool).
fn not(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    if x.dtype() != DataType::Bool {
        return Err(cx.unsupported(x.dtype()));
    }
    Ok(vec![unary::<bool, bool>(x, |v| !v)?.into()])
}

fn bitwise(cx: &RunCx, f: fn(i128, i128) -> i128) -> KResult<Vec<Value>> {
    let a = cx.input(0)?;
    let b = cx.input(1)?;
    same_dtype(cx, a, b)?;
    let out = for_int!(a.dtype(), T => {
        binary::<T, T, T>(a, b, |x, y| T::wrap(f(x.w(), y.w())))?
    } else {
        return Err(cx.unsupported(a.dtype()));
    });
    Ok(vec![out.into()])
}

/// BitwiseAnd.
fn bitwise_and(cx: &RunCx) -> KResult<Vec<Value>> {
    bitwise(cx, |x, y| x & y)
}
/// BitwiseOr.
fn bitwise_or(cx: &RunCx) -> KResult<Vec<Value>> {
    bitwise(cx, |x, y| x | y)
}
/// BitwiseXor.
fn bitwise_xor(cx: &RunCx) -> KResult<Vec<Value>> {
    bitwise(cx, |x, y| x ^ y)
}

/// BitwiseNot.
fn bitwise_not(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let out = for_int!(x.dtype(), T => {
        unary::<T, T>(x, |v| T::wrap(!v.w()))?
    } else {
        return Err(cx.unsupported(x.dtype()));
    });
    Ok(vec![out.into()])
}

/// BitShift (LEFT/RIGHT; shifts of the bit width or more give 0, or -1 for negative signed).
fn bit_shift(cx: &RunCx) -> KResult<Vec<Value>> {
    let a = cx.input(0)?;
    let b = cx.input(1)?;
    same_dtype(cx, a, b)?;
    let left = match cx.string("direction", "")?.as_str() {
        "LEFT" => true,
        "RIGHT" => false,
        d => {
            return Err(cx.invalid(format!(
                "BitShift direction must be LEFT or RIGHT, got '{d}'"
            )))
        }
    };
    let out = for_int!(a.dtype(), T => {
        binary::<T, T, T>(a, b, |x, s| {
            let (x, s) = (x.w(), s.w());
            if s < 0 || s >= T::BITS as i128 {
                T::wrap(if !left && x < 0 { -1 } else { 0 })
            } else if left {
                T::wrap(x << s)
            } else {
                T::wrap(x >> s)
            }
        })?
    } else {
        return Err(cx.unsupported(a.dtype()));
    });
    Ok(vec![out.into()])
}

// ---------------------------------------------------------------------------------------------
// Variadic

#[derive(Clone, Copy, PartialEq)]
enum Va {
    Max,
    Min,
    Sum,
    Mean,
}

fn maxmin<T: PartialOrd + Copy>(max: bool, x: T, y: T) -> T {
    #[allow(clippy::eq_op)]
    if x != x {
        return x;
    }
    #[allow(clippy::eq_op)]
    if y != y {
        return y;
    }
    if (max && y > x) || (!max && y < x) {
        y
    } else {
        x
    }
}

fn variadic(cx: &RunCx, op: Va) -> KResult<Vec<Value>> {
    let n = cx.num_inputs();
    let mut ts = Vec::with_capacity(n);
    for i in 0..n {
        if cx.has_input(i) {
            ts.push(cx.input(i)?);
        }
    }
    let Some(&first) = ts.first() else {
        return Err(cx.invalid(format!("{} needs at least one input", cx.op())));
    };
    for t in &ts[1..] {
        same_dtype(cx, first, t)?;
        if cx.opset < 8 && t.shape() != first.shape() {
            return Err(cx.invalid(format!(
                "{} v{} needs equal shapes, got {:?} and {:?}",
                cx.op(),
                cx.opset,
                first.shape(),
                t.shape()
            )));
        }
    }
    let dt = first.dtype();
    let float = matches!(
        dt,
        DataType::Float | DataType::Double | DataType::Float16 | DataType::Bfloat16
    );
    let int = for_int!(dt, _T => { true } else { false });
    if !(float || (int && matches!(op, Va::Max | Va::Min))) {
        return Err(cx.unsupported(dt));
    }
    let mut acc = first.clone();
    for t in &ts[1..] {
        acc = for_float!(dt, T => {
            match op {
                Va::Max => binary::<T, T, T>(&acc, t, |x, y| maxmin(true, x, y))?,
                Va::Min => binary::<T, T, T>(&acc, t, |x, y| maxmin(false, x, y))?,
                Va::Sum | Va::Mean => binary::<T, T, T>(&acc, t, |x, y| T::down(x.up() + y.up()))?,
            }
        } else for_int!(dt, T => {
            match op {
                Va::Max => binary::<T, T, T>(&acc, t, |x, y| maxmin(true, x, y))?,
                Va::Min => binary::<T, T, T>(&acc, t, |x, y| maxmin(false, x, y))?,
                _ => return Err(cx.unsupported(dt)),
            }
        } else {
            return Err(cx.unsupported(dt));
        }));
    }
    if op == Va::Mean {
        let k = ts.len() as f64;
        acc = for_float!(dt, T => {
            unary::<T, T>(&acc, |x| T::down(x.up() / T::c(k)))?
        } else {
            return Err(cx.unsupported(dt));
        });
    }
    Ok(vec![acc.into()])
}

/// Max (NaN propagates).
fn max(cx: &RunCx) -> KResult<Vec<Value>> {
    variadic(cx, Va::Max)
}
/// Min (NaN propagates).
fn min(cx: &RunCx) -> KResult<Vec<Value>> {
    variadic(cx, Va::Min)
}
/// Sum.
fn sum(cx: &RunCx) -> KResult<Vec<Value>> {
    variadic(cx, Va::Sum)
}
/// Mean.
fn mean(cx: &RunCx) -> KResult<Vec<Value>> {
    variadic(cx, Va::Mean)
}

/// Where: `x` where `cond`, else `y`, broadcast three ways (any element type).
fn where_op(cx: &RunCx) -> KResult<Vec<Value>> {
    let c = cx.input(0)?;
    let x = cx.input(1)?;
    let y = cx.input(2)?;
    if c.dtype() != DataType::Bool {
        return Err(cx.invalid(format!("Where condition must be bool, got {}", c.dtype())));
    }
    same_dtype(cx, x, y)?;
    let shape = broadcast_shapes(&[c.shape(), x.shape(), y.shape()])?;
    let cv = c.to_vec::<bool>()?;
    let oc = broadcast_offsets(&shape, &broadcast_strides(c.shape(), &shape));
    let ox = broadcast_offsets(&shape, &broadcast_strides(x.shape(), &shape));
    let oy = broadcast_offsets(&shape, &broadcast_strides(y.shape(), &shape));
    let nx = x.len();
    let picks: Vec<usize> = (0..oc.len())
        .map(|i| if cv[oc[i]] { ox[i] } else { nx + oy[i] })
        .collect();
    let both = concat_flat(&[x, y], x.dtype(), vec![nx + y.len()])?;
    Ok(vec![take(&both, &picks, shape)?.into()])
}

// ---------------------------------------------------------------------------------------------
// Unary

#[derive(Clone, Copy, PartialEq)]
pub(crate) enum U {
    Abs,
    Acos,
    Acosh,
    Asin,
    Asinh,
    Atan,
    Atanh,
    Ceil,
    Celu,
    Cos,
    Cosh,
    Elu,
    Erf,
    Exp,
    Floor,
    GeluErf,
    GeluTanh,
    HardSigmoid,
    HardSwish,
    LeakyRelu,
    Log,
    Mish,
    Neg,
    Reciprocal,
    Relu,
    Round,
    Selu,
    Shrink,
    Sigmoid,
    Sign,
    Sin,
    Sinh,
    Softplus,
    Softsign,
    Sqrt,
    Swish,
    Tan,
    Tanh,
    ThresholdedRelu,
}

/// numpy `maximum`/`minimum`: NaN propagates.
fn nmax<C: Float>(x: C, y: C) -> C {
    if x.is_nan() || y.is_nan() {
        C::nan()
    } else {
        x.max(y)
    }
}
fn nmin<C: Float>(x: C, y: C) -> C {
    if x.is_nan() || y.is_nan() {
        C::nan()
    } else {
        x.min(y)
    }
}

fn softplus<C: Float>(x: C) -> C {
    // logaddexp(0, x)
    x.max(C::zero()) + (-x.abs()).exp().ln_1p()
}

fn sigmoid<C: Float>(x: C) -> C {
    if x > C::zero() {
        C::one() / (C::one() + (-x).exp())
    } else {
        let e = x.exp();
        e / (C::one() + e)
    }
}

// Inlined so that a loop over one fixed `op` (see `unary_f32`) keeps only that op's arm.
#[inline(always)]
pub(crate) fn ufloat<C: Float>(op: U, x: C, a: C, b: C) -> C {
    let zero = C::zero();
    let one = C::one();
    let cf = |v: f64| C::from(v).unwrap();
    match op {
        U::Abs => x.abs(),
        U::Acos => x.acos(),
        U::Acosh => x.acosh(),
        U::Asin => x.asin(),
        U::Asinh => x.asinh(),
        U::Atan => x.atan(),
        U::Atanh => x.atanh(),
        U::Ceil => x.ceil(),
        U::Celu => nmax(x, zero) + nmin(a * (x / a).exp_m1(), zero),
        U::Cos => x.cos(),
        U::Cosh => x.cosh(),
        U::Elu => {
            if x >= zero {
                x
            } else {
                a * x.exp_m1()
            }
        }
        U::Erf => C::from(erf(x.to_f64().unwrap_or(f64::NAN))).unwrap_or(x),
        U::Exp => x.exp(),
        U::Floor => x.floor(),
        U::GeluErf => {
            let e = C::from(erf(
                x.to_f64().unwrap_or(f64::NAN) / std::f64::consts::SQRT_2
            ))
            .unwrap_or(x);
            cf(0.5) * x * (one + e)
        }
        U::GeluTanh => {
            let k = cf((2.0 / std::f64::consts::PI).sqrt());
            cf(0.5) * x * (one + (k * (x + cf(0.044715) * x * x * x)).tanh())
        }
        U::HardSigmoid => nmax(nmin(a * x + b, one), zero),
        // The spec: x * max(0, min(1, alpha * x + beta)) with alpha = 1/6, beta = 0.5.
        U::HardSwish => x * nmax(nmin(cf(1.0 / 6.0) * x + cf(0.5), one), zero),
        U::LeakyRelu => {
            if x >= zero {
                x
            } else {
                a * x
            }
        }
        U::Log => x.ln(),
        U::Mish => x * softplus(x).tanh(),
        U::Neg => -x,
        U::Reciprocal => one / x,
        U::Relu => {
            if x < zero {
                zero
            } else {
                x
            }
        }
        U::Round => round_even(x),
        U::Selu => {
            if x > zero {
                b * x
            } else {
                b * (a * x.exp_m1())
            }
        }
        U::Shrink => {
            if x < -b {
                x + a
            } else if x > b {
                x - a
            } else {
                zero
            }
        }
        U::Sigmoid => sigmoid(x),
        U::Sign => {
            if x.is_nan() {
                x
            } else if x > zero {
                one
            } else if x < zero {
                -one
            } else {
                zero
            }
        }
        U::Sin => x.sin(),
        U::Sinh => x.sinh(),
        U::Softplus => softplus(x),
        U::Softsign => x / (one + x.abs()),
        U::Sqrt => x.sqrt(),
        U::Swish => x * (one / (one + (-a * x).exp())),
        U::Tan => x.tan(),
        U::Tanh => x.tanh(),
        U::ThresholdedRelu => {
            if x > a {
                x
            } else {
                zero
            }
        }
    }
}

fn uint_op<T: Int>(op: U, x: T, a: f64, b: f64) -> Option<T> {
    let v = x.w();
    Some(T::wrap(match op {
        U::Abs => v.abs(),
        U::Neg => v.wrapping_neg(),
        U::Sign => v.signum(),
        U::Relu => v.max(0),
        U::Shrink => {
            let f = v as f64;
            let r = if f < -b {
                f + a
            } else if f > b {
                f - a
            } else {
                0.0
            };
            r as i128
        }
        _ => return None,
    }))
}

fn unary_op(cx: &RunCx, op: U) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let (a, b) = match op {
        U::Celu | U::Elu | U::Swish | U::ThresholdedRelu => (cx.float("alpha", 1.0)? as f64, 0.0),
        U::HardSigmoid => (
            cx.float("alpha", 0.2)? as f64,
            cx.float("beta", 0.5)? as f64,
        ),
        U::LeakyRelu => (cx.float("alpha", 0.01)? as f64, 0.0),
        U::Selu => (
            cx.float("alpha", 1.673_263_2)? as f64,
            cx.float("gamma", 1.050_701)? as f64,
        ),
        U::Shrink => (
            cx.float("bias", 0.0)? as f64,
            cx.float("lambd", 0.5)? as f64,
        ),
        _ => (0.0, 0.0),
    };
    if x.dtype() == DataType::Float {
        return Ok(vec![unary_f32(x, op, a as f32, b as f32)?.into()]);
    }
    let out = for_float!(x.dtype(), T => {
        let (ca, cb) = (T::c(a), T::c(b));
        unary::<T, T>(x, |v| T::down(ufloat(op, v.up(), ca, cb)))?
    } else for_int!(x.dtype(), T => {
        if uint_op::<T>(op, T::wrap(0), a, b).is_none() || (op == U::Neg && !T::SIGNED) {
            return Err(cx.unsupported(x.dtype()));
        }
        unary::<T, T>(x, |v| uint_op(op, v, a, b).unwrap_or(v))?
    } else {
        return Err(cx.unsupported(x.dtype()));
    }));
    Ok(vec![out.into()])
}

/// float32 unary ops with the op fixed per loop (so each loop is specialised and can
/// vectorise); the same arithmetic as [`ufloat`], except erf (and exact Gelu), computed in
/// float32 by [`fast32::erf`], and Sigmoid, by [`fast32::sigmoid`].
fn unary_f32(x: &Tensor, op: U, a: f32, b: f32) -> KResult<Tensor> {
    match op {
        U::Erf => return fast32::unary(x, fast32::erf),
        U::Sigmoid => return fast32::unary(x, fast32::sigmoid),
        U::GeluErf => {
            return fast32::unary(x, |v| {
                0.5 * v * (1.0 + fast32::erf(v * std::f32::consts::FRAC_1_SQRT_2))
            })
        }
        _ => {}
    }
    macro_rules! mono {
        ($($o:ident),*) => {
            match op {
                $(U::$o => fast32::unary(x, |v| ufloat(U::$o, v, a, b)),)*
            }
        };
    }
    mono!(
        Abs,
        Acos,
        Acosh,
        Asin,
        Asinh,
        Atan,
        Atanh,
        Ceil,
        Celu,
        Cos,
        Cosh,
        Elu,
        Erf,
        Exp,
        Floor,
        GeluErf,
        GeluTanh,
        HardSigmoid,
        HardSwish,
        LeakyRelu,
        Log,
        Mish,
        Neg,
        Reciprocal,
        Relu,
        Round,
        Selu,
        Shrink,
        Sigmoid,
        Sign,
        Sin,
        Sinh,
        Softplus,
        Softsign,
        Sqrt,
        Swish,
        Tan,
        Tanh,
        ThresholdedRelu
    )
}

macro_rules! unary_kernels {
    ($($f:ident => $op:ident),* $(,)?) => {$(
        #[doc = concat!(stringify!($op), " (elementwise).")]
        fn $f(cx: &RunCx) -> KResult<Vec<Value>> {
            unary_op(cx, U::$op)
        }
    )*};
}

unary_kernels!(
    abs => Abs, acos => Acos, acosh => Acosh, asin => Asin, asinh => Asinh, atan => Atan,
    atanh => Atanh, ceil => Ceil, celu => Celu, cos => Cos, cosh => Cosh, elu => Elu,
    erf_op => Erf, exp => Exp, floor => Floor, hard_sigmoid => HardSigmoid,
    hard_swish => HardSwish, leaky_relu => LeakyRelu, log => Log, mish => Mish, neg => Neg,
    reciprocal => Reciprocal, relu => Relu, round => Round, selu => Selu, shrink => Shrink,
    sigmoid_op => Sigmoid, sign => Sign, sin => Sin, sinh => Sinh, softplus_op => Softplus,
    softsign => Softsign, sqrt => Sqrt, swish => Swish, tan => Tan, tanh => Tanh,
    thresholded_relu => ThresholdedRelu,
);

/// Gelu (`approximate` = none or tanh).
fn gelu(cx: &RunCx) -> KResult<Vec<Value>> {
    match cx.string("approximate", "none")?.as_str() {
        "none" => unary_op(cx, U::GeluErf),
        "tanh" => unary_op(cx, U::GeluTanh),
        other => Err(cx.invalid(format!(
            "Gelu approximate must be 'none' or 'tanh', got '{other}'"
        ))),
    }
}

/// The values of a float8 tensor (IsNaN/IsInf accept them from opset 20); `None` otherwise.
fn small_float_values(x: &Tensor) -> KResult<Option<Vec<f64>>> {
    if !matches!(
        x.dtype(),
        DataType::Float8e4m3fn
            | DataType::Float8e4m3fnuz
            | DataType::Float8e5m2
            | DataType::Float8e5m2fnuz
    ) {
        return Ok(None);
    }
    let Some(f) = super::cast::mini(x.dtype()) else {
        return Ok(None);
    };
    Ok(Some(x.codes()?.into_iter().map(|c| f.decode(c)).collect()))
}

/// IsNaN (floats, and float8 from opset 20).
fn is_nan(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    if let Some(v) = small_float_values(x)? {
        let out: Vec<bool> = v.iter().map(|f| f.is_nan()).collect();
        return Ok(vec![Tensor::from_vec(x.shape().to_vec(), out)?.into()]);
    }
    let out = for_float!(x.dtype(), T => {
        unary::<T, bool>(x, |v| v.up().is_nan())?
    } else {
        return Err(cx.unsupported(x.dtype()));
    });
    Ok(vec![out.into()])
}

/// IsInf (`detect_negative`, `detect_positive`; floats, and float8 from opset 20).
fn is_inf(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let neg = cx.int("detect_negative", 1)? != 0;
    let pos = cx.int("detect_positive", 1)? != 0;
    if let Some(v) = small_float_values(x)? {
        let out: Vec<bool> = v
            .iter()
            .map(|&f| f.is_infinite() && ((f > 0.0 && pos) || (f < 0.0 && neg)))
            .collect();
        return Ok(vec![Tensor::from_vec(x.shape().to_vec(), out)?.into()]);
    }
    let out = for_float!(x.dtype(), T => {
        unary::<T, bool>(x, |v| {
            let v = v.up();
            v.is_infinite() && ((v > <T as Fl>::C::zero() && pos) || (v < <T as Fl>::C::zero() && neg))
        })?
    } else {
        return Err(cx.unsupported(x.dtype()));
    });
    Ok(vec![out.into()])
}

fn clip_scalar<T: Element>(cx: &RunCx, i: usize) -> KResult<Option<T>> {
    match cx.opt_input(i)? {
        None => Ok(None),
        Some(t) => {
            if t.dtype() != T::DTYPE {
                return Err(cx.invalid(format!(
                    "Clip bound {i} must have the input's type {}, got {}",
                    T::DTYPE,
                    t.dtype()
                )));
            }
            match t.to_vec::<T>()?.as_slice() {
                [] if t.rank() > 0 => Ok(None),
                [v] => Ok(Some(*v)),
                _ => Err(cx.invalid(format!(
                    "Clip bound {i} must be a scalar, got shape {:?}",
                    t.shape()
                ))),
            }
        }
    }
}

fn clip_apply<T: PartialOrd + Copy>(x: T, lo: Option<T>, hi: Option<T>) -> T {
    let mut y = x;
    if let Some(lo) = lo {
        if y < lo {
            y = lo;
        }
    }
    if let Some(hi) = hi {
        if y > hi {
            y = hi;
        }
    }
    y
}

/// Clip: bounds are attributes `min`/`max` before opset 11, optional inputs from 11.
fn clip(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let out = for_float!(x.dtype(), T => {
        let (lo, hi) = if cx.opset < 11 {
            (cx.attr_f("min")?.map(T::from_f32), cx.attr_f("max")?.map(T::from_f32))
        } else {
            (clip_scalar::<T>(cx, 1)?, clip_scalar::<T>(cx, 2)?)
        };
        unary::<T, T>(x, |v| clip_apply(v, lo, hi))?
    } else for_int!(x.dtype(), T => {
        if cx.opset < 12 {
            return Err(cx.unsupported(x.dtype()));
        }
        let (lo, hi) = (clip_scalar::<T>(cx, 1)?, clip_scalar::<T>(cx, 2)?);
        unary::<T, T>(x, |v| clip_apply(v, lo, hi))?
    } else {
        return Err(cx.unsupported(x.dtype()));
    }));
    Ok(vec![out.into()])
}

/// PRelu: `x` where positive, else `x * slope` (slope broadcast to x; a 1-D slope matching
/// exactly one dim of x is aligned there, like the reference).
fn prelu(cx: &RunCx) -> KResult<Vec<Value>> {
    let x = cx.input(0)?;
    let mut s = cx.input(1)?.clone();
    same_dtype(cx, x, &s)?;
    let fits = broadcast_shapes(&[x.shape(), s.shape()]).is_ok_and(|o| o == x.shape());
    if !fits {
        let mut ok = false;
        if s.rank() == 1 {
            let d = s.shape()[0];
            let hits = x.shape().iter().filter(|&&k| k == d).count();
            if hits == 1 {
                let shape: Vec<usize> = x
                    .shape()
                    .iter()
                    .map(|&k| if k == d { d } else { 1 })
                    .collect();
                s = s.reshape(shape)?;
                ok = true;
            }
        }
        if !ok {
            return Err(cx.invalid(format!(
                "PRelu slope shape {:?} does not broadcast to input shape {:?}",
                s.shape(),
                x.shape()
            )));
        }
    }
    let out = for_float!(x.dtype(), T => {
        binary::<T, T, T>(x, &s, |v, k| {
            let (v, k) = (v.up(), k.up());
            T::down(if v > <T as Fl>::C::zero() { v } else { v * k })
        })?
    } else for_int!(x.dtype(), T => {
        binary::<T, T, T>(x, &s, |v, k| if v.w() > 0 { v } else { T::wrap(v.w().wrapping_mul(k.w())) })?
    } else {
        return Err(cx.unsupported(x.dtype()));
    }));
    Ok(vec![out.into()])
}

pub const KERNELS: &[KernelDef] = &[
    kernel("Add", 1, add),
    kernel("Sub", 1, sub),
    kernel("Mul", 1, mul),
    kernel("Div", 1, div),
    kernel("Mod", 10, modulo),
    kernel("Pow", 1, pow),
    kernel("Equal", 1, equal),
    kernel("Greater", 1, greater),
    kernel("GreaterOrEqual", 12, greater_equal),
    kernel("Less", 1, less),
    kernel("LessOrEqual", 12, less_equal),
    kernel("And", 1, and),
    kernel("Or", 1, or),
    kernel("Xor", 1, xor),
    kernel("Not", 1, not),
    kernel("BitwiseAnd", 18, bitwise_and),
    kernel("BitwiseOr", 18, bitwise_or),
    kernel("BitwiseXor", 18, bitwise_xor),
    kernel("BitwiseNot", 18, bitwise_not),
    kernel("BitShift", 11, bit_shift),
    kernel("Max", 1, max),
    kernel("Min", 1, min),
    kernel("Sum", 1, sum),
    kernel("Mean", 1, mean),
    kernel("Where", 9, where_op),
    kernel("Abs", 1, abs),
    kernel("Acos", 7, acos),
    kernel("Acosh", 9, acosh),
    kernel("Asin", 7, asin),
    kernel("Asinh", 9, asinh),
    kernel("Atan", 7, atan),
    kernel("Atanh", 9, atanh),
    kernel("Ceil", 1, ceil),
    kernel("Celu", 12, celu),
    kernel("Clip", 1, clip),
    kernel("Cos", 7, cos),
    kernel("Cosh", 9, cosh),
    kernel("Elu", 1, elu),
    kernel("Erf", 9, erf_op),
    kernel("Exp", 1, exp),
    kernel("Floor", 1, floor),
    kernel("Gelu", 20, gelu),
    kernel("HardSigmoid", 1, hard_sigmoid),
    kernel("HardSwish", 14, hard_swish),
    kernel("IsInf", 10, is_inf),
    kernel("IsNaN", 9, is_nan),
    kernel("LeakyRelu", 1, leaky_relu),
    kernel("Log", 1, log),
    kernel("Mish", 18, mish),
    kernel("Neg", 1, neg),
    kernel("PRelu", 1, prelu),
    kernel("Reciprocal", 1, reciprocal),
    kernel("Relu", 1, relu),
    kernel("Round", 11, round),
    kernel("Selu", 1, selu),
    kernel("Shrink", 9, shrink),
    kernel("Sigmoid", 1, sigmoid_op),
    kernel("Sign", 9, sign),
    kernel("Sin", 7, sin),
    kernel("Sinh", 9, sinh),
    kernel("Softplus", 1, softplus_op),
    kernel("Softsign", 1, softsign),
    kernel("Sqrt", 1, sqrt),
    kernel("Swish", 24, swish),
    kernel("Tan", 7, tan),
    kernel("Tanh", 1, tanh),
    kernel("ThresholdedRelu", 10, thresholded_relu),
];

#[cfg(test)]
mod tests {
    use super::super::cast::test_util::*;
    use super::*;

    fn f32s(shape: &[usize], v: &[f32]) -> Tensor {
        Tensor::from_slice(shape.to_vec(), v).unwrap()
    }

    #[test]
    fn legacy_broadcast_aligns_at_axis() {
        let a = f32s(&[2, 3, 2], &[0.0; 12]);
        let b = f32s(&[3], &[1.0, 2.0, 3.0]);
        let out = run1(
            "Add",
            vec![int_attr("broadcast", 1), int_attr("axis", 1)],
            6,
            &[a.clone(), b.clone()],
        )
        .unwrap();
        assert_eq!(out.shape(), &[2, 3, 2]);
        assert_eq!(
            &out.to_vec::<f32>().unwrap()[..6],
            &[1.0, 1.0, 2.0, 2.0, 3.0, 3.0]
        );
        // Without broadcast=1 the old versions need equal shapes.
        assert!(run1("Add", vec![], 6, &[a.clone(), b.clone()]).is_err());
        // A B that does not fit at the axis is refused.
        assert!(run1(
            "Mul",
            vec![int_attr("broadcast", 1), int_attr("axis", 2)],
            6,
            &[a, b]
        )
        .is_err());
    }

    #[test]
    fn integer_arithmetic_wraps_and_truncates() {
        let a = Tensor::from_vec(vec![4], vec![7i32, -7, 7, -7]).unwrap();
        let b = Tensor::from_vec(vec![4], vec![2i32, 2, -2, -2]).unwrap();
        let d = run1("Div", vec![], 14, &[a.clone(), b.clone()]).unwrap();
        assert_eq!(d.to_vec::<i32>().unwrap(), vec![3, -3, -3, 3]);
        let m = run1("Mod", vec![], 13, &[a.clone(), b.clone()]).unwrap();
        assert_eq!(m.to_vec::<i32>().unwrap(), vec![1, 1, -1, -1]);
        let f = run1("Mod", vec![int_attr("fmod", 1)], 13, &[a.clone(), b]).unwrap();
        assert_eq!(f.to_vec::<i32>().unwrap(), vec![1, -1, 1, -1]);
        let zero = Tensor::from_vec(vec![4], vec![0i32; 4]).unwrap();
        assert!(run1("Div", vec![], 14, &[a, zero]).is_err());
        let x = Tensor::from_vec(vec![1], vec![200u8]).unwrap();
        let s = run1("Add", vec![], 14, &[x.clone(), x]).unwrap();
        assert_eq!(s.to_vec::<u8>().unwrap(), vec![144]);
    }

    #[test]
    fn bit_shift_out_of_range_is_zero() {
        let a = Tensor::from_vec(vec![3], vec![1u8, 128, 3]).unwrap();
        let b = Tensor::from_vec(vec![3], vec![7u8, 8, 1]).unwrap();
        let l = run1(
            "BitShift",
            vec![str_attr("direction", "LEFT")],
            11,
            &[a.clone(), b.clone()],
        )
        .unwrap();
        assert_eq!(l.to_vec::<u8>().unwrap(), vec![128, 0, 6]);
        let r = run1(
            "BitShift",
            vec![str_attr("direction", "RIGHT")],
            11,
            &[a, b],
        )
        .unwrap();
        assert_eq!(r.to_vec::<u8>().unwrap(), vec![0, 0, 1]);
    }

    #[test]
    fn clip_before_11_reads_attributes() {
        let x = f32s(&[3], &[-5.0, 0.5, 5.0]);
        let out = run1(
            "Clip",
            vec![float_attr("min", -1.0), float_attr("max", 1.0)],
            6,
            &[x],
        )
        .unwrap();
        assert_eq!(out.to_vec::<f32>().unwrap(), vec![-1.0, 0.5, 1.0]);
    }

    #[test]
    fn prelu_aligns_a_1d_slope_on_its_unique_dim() {
        let x = f32s(&[1, 2, 3], &[-1.0, -1.0, -1.0, -1.0, -1.0, 2.0]);
        let s = f32s(&[2], &[0.5, 0.25]);
        let out = run1("PRelu", vec![], 9, &[x, s]).unwrap();
        assert_eq!(
            out.to_vec::<f32>().unwrap(),
            vec![-0.5, -0.5, -0.5, -0.25, -0.25, 2.0]
        );
    }

    #[test]
    fn pow_mixes_types_and_rounds_half_even() {
        let b = Tensor::from_vec(vec![2], vec![2i64, 3]).unwrap();
        let e = f32s(&[2], &[0.5, 2.0]);
        let out = run1("Pow", vec![], 15, &[b.clone(), e]).unwrap();
        assert_eq!(out.to_vec::<i64>().unwrap(), vec![1, 9]);
        let neg = Tensor::from_vec(vec![1], vec![-1i64]).unwrap();
        assert!(run1("Pow", vec![], 15, &[b, neg]).is_err());
        let r = run1("Round", vec![], 11, &[f32s(&[4], &[2.5, 3.5, -2.5, 0.4])]).unwrap();
        assert_eq!(r.to_vec::<f32>().unwrap(), vec![2.0, 4.0, -2.0, 0.0]);
    }

    #[test]
    fn isnan_isinf_read_float8() {
        // e5m2: 0x7C = +inf, 0xFC = -inf, 0x7E = NaN, 0x3C = 1.0.
        let x =
            Tensor::from_codes(DataType::Float8e5m2, vec![4], &[0x7C, 0xFC, 0x7E, 0x3C]).unwrap();
        let n = run1("IsNaN", vec![], 20, std::slice::from_ref(&x)).unwrap();
        assert_eq!(n.to_vec::<bool>().unwrap(), vec![false, false, true, false]);
        let i = run1("IsInf", vec![int_attr("detect_negative", 0)], 20, &[x]).unwrap();
        assert_eq!(i.to_vec::<bool>().unwrap(), vec![true, false, false, false]);
    }

    #[test]
    fn activations_propagate_nan() {
        for op in [
            "HardSigmoid",
            "HardSwish",
            "Celu",
            "Relu",
            "Softplus",
            "Selu",
            "Elu",
        ] {
            let opset = if op == "Celu" { 12 } else { 14 };
            let out = run1(op, vec![], opset, &[f32s(&[1], &[f32::NAN])]).unwrap();
            assert!(out.to_vec::<f32>().unwrap()[0].is_nan(), "{op}");
        }
    }

    #[test]
    fn erf_matches_known_values() {
        assert!((erf(0.5) - 0.520_499_877_813_046_5).abs() < 1e-15);
        assert!((erf(-2.0) + 0.995_322_265_018_952_7).abs() < 1e-15);
        assert_eq!(erf(f64::INFINITY), 1.0);
    }
}
