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
