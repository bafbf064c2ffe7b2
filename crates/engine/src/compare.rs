//! Comparing values the way the ONNX backend tests do: dtypes and shapes must match; floats
//! within `atol + rtol * |expected|` (NaN equals NaN); integers, bools, strings and the narrow
//! float formats bit-exact.

use crate::Value;
use tensor::{DataType, Tensor};

/// Tolerances for float comparisons.
#[derive(Debug, Clone, Copy)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
}

fn close(a: f64, b: f64, tol: Tolerance) -> bool {
    (a.is_nan() && b.is_nan()) || a == b || (a - b).abs() <= tol.atol + tol.rtol * b.abs()
}

/// `Err` says how `got` differs from `want`.
pub fn compare_tensor(got: &Tensor, want: &Tensor, tol: Tolerance) -> Result<(), String> {
    if got.dtype() != want.dtype() {
        return Err(format!(
            "dtype {} but expected {}",
            got.dtype(),
            want.dtype()
        ));
    }
    if got.shape() != want.shape() {
        return Err(format!(
            "shape {:?} but expected {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let d = want.dtype();
    if d == DataType::String {
        return if got.strings() == want.strings() {
            Ok(())
        } else {
            Err("strings differ".into())
        };
    }
    let is_float = matches!(
        d,
        DataType::Float | DataType::Double | DataType::Float16 | DataType::Bfloat16
    );
    if is_float {
        let g = ops::exec::util::to_f64s(got).unwrap();
        let w = ops::exec::util::to_f64s(want).unwrap();
        let mut bad = 0usize;
        let mut first = None;
        let mut worst = 0f64;
        for (i, (&x, &y)) in g.iter().zip(&w).enumerate() {
            if !close(x, y, tol) {
                bad += 1;
                first.get_or_insert((i, x, y));
                if (x - y).abs().is_finite() {
                    worst = worst.max((x - y).abs());
                }
            }
        }
        return match first {
            None => Ok(()),
            Some((i, x, y)) => Err(format!(
                "{bad} of {} elements differ (first at {i}: got {x}, expected {y}; max abs err {worst:.3e})",
                w.len()
            )),
        };
    }
    if d == DataType::Complex64 || d == DataType::Complex128 {
        let (g, w) = if d == DataType::Complex64 {
            let f = |t: &Tensor| -> Vec<f64> {
                t.to_vec::<tensor::Complex<f32>>()
                    .unwrap()
                    .into_iter()
                    .flat_map(|c| [c.re as f64, c.im as f64])
                    .collect()
            };
            (f(got), f(want))
        } else {
            let f = |t: &Tensor| -> Vec<f64> {
                t.to_vec::<tensor::Complex<f64>>()
                    .unwrap()
                    .into_iter()
                    .flat_map(|c| [c.re, c.im])
                    .collect()
            };
            (f(got), f(want))
        };
        return if g.iter().zip(&w).all(|(&x, &y)| close(x, y, tol)) {
            Ok(())
        } else {
            Err("complex values differ".into())
        };
    }
    // Integers, bools and the narrow float formats: bit-exact.
    if got.bytes() == want.bytes() {
        Ok(())
    } else {
        let n = ops::exec::util::to_i64s(got)
            .ok()
            .zip(ops::exec::util::to_i64s(want).ok())
            .and_then(|(g, w)| {
                g.iter()
                    .zip(&w)
                    .position(|(a, b)| a != b)
                    .map(|i| (i, g[i], w[i]))
            });
        match n {
            Some((i, g, w)) => Err(format!(
                "values differ (first at {i}: got {g}, expected {w})"
            )),
            None => Err("values differ".into()),
        }
    }
}

/// `Err` says how `got` differs from `want`.
pub fn compare_value(got: &Value, want: &Value, tol: Tolerance) -> Result<(), String> {
    match (got, want) {
        (Value::Tensor(g), Value::Tensor(w)) => compare_tensor(g, w, tol),
        (Value::Sequence { items: g, .. }, Value::Sequence { items: w, .. }) => {
            if g.len() != w.len() {
                return Err(format!(
                    "sequence of {} items, expected {}",
                    g.len(),
                    w.len()
                ));
            }
            for (i, (a, b)) in g.iter().zip(w).enumerate() {
                compare_tensor(a, b, tol).map_err(|e| format!("item {i}: {e}"))?;
            }
            Ok(())
        }
        (Value::Optional(g), Value::Optional(w)) => match (g, w) {
            (None, None) => Ok(()),
            (Some(a), Some(b)) => compare_value(a, b, tol),
            _ => Err("optional emptiness differs".into()),
        },
        // An optional output holding a tensor may be stored as the tensor itself.
        (Value::Optional(Some(g)), w) => compare_value(g, w, tol),
        (g, w) => Err(format!("got {}, expected {}", g.describe(), w.describe())),
    }
}

/// Error statistics of `got` against `want` (the reference), over elements viewed as f64.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Stats {
    pub elements: usize,
    /// max |got - want|
    pub max_abs: f64,
    /// max |got - want| / |want| over elements where want != 0
    pub max_rel: f64,
    pub mean_abs: f64,
    /// 99th percentile of |got - want|
    pub p99_abs: f64,
    /// cosine similarity of the two tensors as vectors (1 when both are all zero)
    pub cosine: f64,
    /// signal-to-quantization-noise ratio in dB: 10·log10(Σwant² / Σ(got-want)²); infinite when equal
    pub sqnr_db: f64,
    /// elements with |got - want| > atol + rtol·|want| (NaN against non-NaN counts)
    pub out_of_tolerance: usize,
}

/// Statistics of two tensors of one shape; `Err` when shapes or types make them incomparable.
pub fn stats(got: &Tensor, want: &Tensor, tol: Tolerance) -> Result<Stats, String> {
    if got.shape() != want.shape() {
        return Err(format!(
            "shape {:?} but the reference has {:?}",
            got.shape(),
            want.shape()
        ));
    }
    let g = ops::exec::util::to_f64s(got)
        .map_err(|_| format!("{} values cannot be compared numerically", got.dtype()))?;
    let w = ops::exec::util::to_f64s(want)
        .map_err(|_| format!("{} values cannot be compared numerically", want.dtype()))?;
    let n = w.len();
    let mut s = Stats {
        elements: n,
        ..Stats::default()
    };
    let mut errs = Vec::with_capacity(n);
    let (mut dot, mut gg, mut ww, mut noise) = (0f64, 0f64, 0f64, 0f64);
    for (&x, &y) in g.iter().zip(&w) {
        if x.is_nan() || y.is_nan() {
            if x.is_nan() != y.is_nan() {
                s.out_of_tolerance += 1;
                errs.push(f64::INFINITY);
            } else {
                errs.push(0.0);
            }
            continue;
        }
        let d = if x == y { 0.0 } else { (x - y).abs() };
        errs.push(d);
        s.max_abs = s.max_abs.max(d);
        if y != 0.0 && d.is_finite() {
            s.max_rel = s.max_rel.max(d / y.abs());
        }
        if d > tol.atol + tol.rtol * y.abs() {
            s.out_of_tolerance += 1;
        }
        if d.is_finite() {
            s.mean_abs += d;
            noise += d * d;
        }
        if x.is_finite() && y.is_finite() {
            dot += x * y;
            gg += x * x;
            ww += y * y;
        }
    }
    if n > 0 {
        s.mean_abs /= n as f64;
        errs.sort_by(|a, b| a.total_cmp(b));
        let idx = ((n as f64) * 0.99).ceil() as usize;
        s.p99_abs = errs[idx.clamp(1, n) - 1];
    }
    s.cosine = if gg == 0.0 && ww == 0.0 {
        1.0
    } else if gg == 0.0 || ww == 0.0 {
        0.0
    } else {
        dot / (gg.sqrt() * ww.sqrt())
    };
    s.sqnr_db = if noise == 0.0 {
        f64::INFINITY
    } else {
        10.0 * (ww / noise).log10()
    };
    Ok(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stats_of_a_known_difference() {
        let want = Tensor::from_vec(vec![4], vec![1.0f32, 2.0, -4.0, 0.0]).unwrap();
        let got = Tensor::from_vec(vec![4], vec![1.0f32, 2.5, -4.0, 0.0]).unwrap();
        let tol = Tolerance {
            rtol: 1e-3,
            atol: 1e-4,
        };
        let s = stats(&got, &want, tol).unwrap();
        assert_eq!(s.out_of_tolerance, 1);
        assert_eq!(s.max_abs, 0.5);
        assert_eq!(s.max_rel, 0.25);
        assert_eq!(s.mean_abs, 0.125);
        assert_eq!(s.p99_abs, 0.5);
        // Σwant² = 21, noise 0.25
        assert!((s.sqnr_db - 10.0 * (21.0f64 / 0.25).log10()).abs() < 1e-12);
        assert!(s.cosine > 0.99 && s.cosine < 1.0);
        let same = stats(&want, &want, tol).unwrap();
        assert_eq!(same.out_of_tolerance, 0);
        assert!(same.sqnr_db.is_infinite());
        assert!(stats(
            &Tensor::from_vec(vec![2], vec![1.0f32, 2.0]).unwrap(),
            &want,
            tol
        )
        .is_err());
    }
}
