//! Ops that pick, place, split and repeat elements: TopK, CumSum, CumProd, GatherElements,
//! GatherND, Scatter, ScatterElements, ScatterND, TensorScatter, Split, SplitToSequence, Tile,
//! Trilu, OneHot, NonZero, Compress, Unique, NonMaxSuppression, ReverseSequence, EyeLike, Det,
//! BitCast. Data-dependent dims (NonZero, Compress, Unique, NonMaxSuppression) stay unknown.
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (each op's section).

use crate::infer::{axis, fixed, known, show, DimOf, InferCx, InferError, Shape};
use crate::sym::SymDim;
use crate::{bail, op, OpDef, Ty};
use tensor::DataType;

fn same_as_input(cx: &mut InferCx) -> Result<(), InferError> {
    let (dtype, shape) = (cx.dtype(0), cx.shape(0).cloned());
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn topk(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let k = if cx.opset < 10 {
        cx.attr_i("k")
    } else {
        cx.single_int(1)
    };
    let shape = match cx.shape(0) {
        Some(s) => {
            let a = axis(cx.attr_i("axis").unwrap_or(-1), s.len())?;
            if s.is_empty() {
                bail!("TopK needs an input of rank >= 1");
            }
            if let Some(k) = k {
                if k < 0 {
                    bail!("TopK k = {k} is negative");
                }
                if let Some(d) = known(&s[a]).filter(|&d| k > d) {
                    bail!("TopK k = {k} exceeds dim {a} of {} ({d})", show(s));
                }
            }
            let mut out = s.clone();
            out[a] = k.and_then(fixed);
            Some(out)
        }
        None => None,
    };
    cx.set_tensor(0, dtype, shape.clone());
    cx.set_tensor(1, Some(DataType::Int64), shape);
    Ok(())
}

fn gather_elements(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    if let (Some(d), Some(i)) = (cx.shape(0), cx.shape(1)) {
        if d.len() != i.len() {
            bail!(
                "GatherElements data {} and indices {} differ in rank",
                show(d),
                show(i)
            );
        }
        axis(cx.attr_i("axis").unwrap_or(0), d.len())?;
    }
    let shape = cx.shape(1).cloned();
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn gather_nd(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let b = if cx.opset >= 12 {
        cx.attr_i("batch_dims").unwrap_or(0)
    } else {
        0
    };
    let (Some(data), Some(idx)) = (cx.shape(0).cloned(), cx.shape(1).cloned()) else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    if b < 0 {
        bail!("GatherND batch_dims {b} is negative");
    }
    let b = b as usize;
    if data.is_empty() || idx.is_empty() {
        bail!(
            "GatherND data {} and indices {} must have rank >= 1",
            show(&data),
            show(&idx)
        );
    }
    if b >= data.len().min(idx.len()) {
        bail!(
            "GatherND batch_dims {b} must be smaller than the ranks of data {} and indices {}",
            show(&data),
            show(&idx)
        );
    }
    let Some(last) = known(&idx[idx.len() - 1]) else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    if last < 1 || last as usize > data.len() - b {
        bail!(
            "GatherND indices' last dim {last} must be in 1..={} (data {}, batch_dims {b})",
            data.len() - b,
            show(&data)
        );
    }
    let out: Shape = idx[..idx.len() - 1]
        .iter()
        .chain(&data[b + last as usize..])
        .cloned()
        .collect();
    cx.set_tensor(0, dtype, Some(out));
    Ok(())
}

fn split(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let n = cx.node.output.len();
    let Some(s) = cx.shape(0).cloned() else {
        for k in 0..n {
            cx.set_tensor(k, dtype, None);
        }
        return Ok(());
    };
    let a = axis(cx.attr_i("axis").unwrap_or(0), s.len())?;
    if s.is_empty() {
        bail!("Split needs an input of rank >= 1");
    }
    // `Some(None)`: split sizes come from an input whose value is unknown.
    let sizes: Option<Option<Vec<i64>>> = match cx.opset {
        1 if cx.has_input(1) => Some(cx.ints(1)),
        ..=12 => cx
            .attr_ints("split")
            .filter(|v| !v.is_empty())
            .map(|v| Some(v.to_vec())),
        _ if cx.has_input(1) => Some(cx.ints(1)),
        _ => None,
    };
    let dim = s[a].clone();
    let parts: Vec<DimOf> = match sizes {
        Some(Some(sizes)) => {
            if sizes.len() != n {
                bail!("Split has {} outputs but split sizes {sizes:?}", n);
            }
            if let Some(sz) = sizes.iter().find(|&&v| v < 0) {
                bail!("Split size {sz} is negative");
            }
            if let Some(d) = known(&dim).filter(|&d| d != sizes.iter().sum::<i64>()) {
                bail!(
                    "Split sizes {sizes:?} do not add up to dim {a} of {} ({d})",
                    show(&s)
                );
            }
            sizes.iter().map(|&v| fixed(v)).collect()
        }
        Some(None) => vec![None; n],
        None => {
            let num = if cx.opset >= 18 {
                match cx.attr_i("num_outputs") {
                    Some(m) if m as usize == n && m > 0 => Some(m),
                    Some(m) => bail!("Split num_outputs {m} does not match its {n} outputs"),
                    None => {
                        bail!("Split needs either the 'split' input or the 'num_outputs' attribute")
                    }
                }
            } else {
                None
            };
            let nn = n as i64;
            match known(&dim) {
                Some(d) if d % nn == 0 => vec![fixed(d / nn); n],
                Some(d) if num.is_some() => {
                    // Opset 18 on: chunks of ceil(d/n), the last one takes the rest.
                    // A last chunk that would be negative has no size onnx agrees on (its
                    // inference says negative, its reference runs it empty): leave it unknown.
                    let chunk = d / nn + 1;
                    let last = d - chunk * (nn - 1);
                    let mut v = vec![fixed(chunk); n];
                    v[n - 1] = if last >= 0 { fixed(last) } else { None };
                    v
                }
                Some(d) => bail!(
                    "Split dim {a} of {} ({d}) does not divide into {n} equal parts",
                    show(&s)
                ),
                None => vec![dim.as_ref().and_then(|d| d.div_exact(&SymDim::known(nn))); n],
            }
        }
    };
    for (k, p) in parts.into_iter().enumerate() {
        let mut o = s.clone();
        o[a] = p;
        cx.set_tensor(k, dtype, Some(o));
    }
    Ok(())
}

fn split_to_sequence(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let keepdims = cx.attr_i("keepdims").unwrap_or(1) != 0;
    let elem_shape = match cx.shape(0) {
        Some(s) => {
            if s.is_empty() {
                bail!("SplitToSequence needs an input of rank >= 1");
            }
            let a = axis(cx.attr_i("axis").unwrap_or(0), s.len())?;
            let mut out = s.clone();
            if !cx.has_input(1) {
                if keepdims {
                    out[a] = fixed(1);
                } else {
                    out.remove(a);
                }
                Some(out)
            } else {
                let scalar = cx.rank(1) == Some(0);
                out[a] = match cx.ints(1) {
                    // Chunks of `v`: all of that size when it divides the dim.
                    Some(v) if scalar && v.len() == 1 => known(&s[a])
                        .filter(|&d| v[0] > 0 && d % v[0] == 0)
                        .map(|_| SymDim::known(v[0])),
                    Some(v) if !v.is_empty() => {
                        if let Some(d) = known(&s[a]).filter(|&d| d != v.iter().sum::<i64>()) {
                            bail!(
                                "SplitToSequence sizes {v:?} do not add up to dim {a} of {} ({d})",
                                show(s)
                            );
                        }
                        v.iter().all(|&x| x == v[0]).then(|| SymDim::known(v[0]))
                    }
                    _ => None,
                };
                Some(out)
            }
        }
        None => None,
    };
    cx.set(0, Ty::Sequence(Box::new(Ty::tensor(dtype, elem_shape))));
    Ok(())
}

fn tile(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let Some(s) = cx.shape(0).cloned() else {
        cx.set_tensor(0, dtype, None);
        return Ok(());
    };
    if cx.opset < 6 {
        // Tile-1: inputs (input, tiles, axis), both scalars.
        let mut out = s.clone();
        match (cx.single_int(1), cx.single_int(2)) {
            (Some(tiles), Some(ax)) => {
                let a = axis(ax, s.len())?;
                out[a] = out[a].as_ref().map(|d| d.mul(&SymDim::known(tiles)));
            }
            (_, Some(ax)) => out[axis(ax, s.len())?] = None,
            _ => out = vec![None; s.len()],
        }
        cx.set_tensor(0, dtype, Some(out));
        return Ok(());
    }
    let out = match cx.ints(1) {
        Some(reps) => {
            if reps.len() != s.len() {
                bail!(
                    "Tile repeats {reps:?} do not match the rank of input {}",
                    show(&s)
                );
            }
            if let Some(r) = reps.iter().find(|&&r| r < 0) {
                bail!("Tile repeat {r} is negative");
            }
            s.iter()
                .zip(&reps)
                .map(|(d, &r)| d.as_ref().map(|d| d.mul(&SymDim::known(r))))
                .collect()
        }
        None => vec![None; s.len()],
    };
    cx.set_tensor(0, dtype, Some(out));
    Ok(())
}

fn trilu(cx: &mut InferCx) -> Result<(), InferError> {
    if let Some(r) = cx.rank(0).filter(|&r| r < 2) {
        bail!("Trilu needs an input of rank >= 2, got rank {r}");
    }
    same_as_input(cx)
}

fn one_hot(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(2);
    if let Some(r) = cx.shape(2).map(Vec::len).filter(|&r| r != 1) {
        bail!("OneHot values must have rank 1 (two elements), got rank {r}");
    }
    let depth = cx
        .ints(1)
        .or_else(|| {
            cx.floats(1)
                .filter(|f| f.iter().all(|x| x.fract() == 0.0))
                .map(|f| f.into_iter().map(|x| x as i64).collect())
        })
        .filter(|v| v.len() == 1)
        .map(|v| v[0]);
    let shape = match cx.shape(0) {
        Some(s) => {
            let r = s.len() + 1;
            let a = axis(cx.attr_i("axis").unwrap_or(-1), r)?;
            let mut out = s.clone();
            out.insert(a, depth.and_then(|d| if d > 0 { fixed(d) } else { None }));
            Some(out)
        }
        None => None,
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn non_zero(cx: &mut InferCx) -> Result<(), InferError> {
    let r = cx.rank(0).and_then(|r| fixed(r as i64));
    cx.set_tensor(0, Some(DataType::Int64), Some(vec![r, None]));
    Ok(())
}

fn compress(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    if let Some(r) = cx.rank(1).filter(|&r| r != 1) {
        bail!("Compress condition must have rank 1, got rank {r}");
    }
    let Some(s) = cx.shape(0).cloned() else {
        let shape = if cx.attr_i("axis").is_none() {
            Some(vec![None])
        } else {
            None
        };
        cx.set_tensor(0, dtype, shape);
        return Ok(());
    };
    let shape = match cx.attr_i("axis") {
        Some(a) => {
            let a = axis(a, s.len())?;
            let mut out = s.clone();
            out[a] = None;
            out
        }
        None => vec![None],
    };
    cx.set_tensor(0, dtype, Some(shape));
    Ok(())
}

fn unique(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let s = cx.shape(0).cloned();
    let (y, inverse) = match (cx.attr_i("axis"), &s) {
        (Some(a), Some(s)) => {
            let a = axis(a, s.len())?;
            let mut y = s.clone();
            y[a] = None;
            (Some(y), s[a].clone())
        }
        (Some(_), None) => (None, None),
        (None, s) => (
            Some(vec![None]),
            s.as_ref().and_then(|s| {
                s.iter()
                    .try_fold(SymDim::known(1), |acc, d| d.as_ref().map(|d| acc.mul(d)))
            }),
        ),
    };
    cx.set_tensor(0, dtype, y);
    cx.set_tensor(1, Some(DataType::Int64), Some(vec![None]));
    cx.set_tensor(2, Some(DataType::Int64), Some(vec![inverse]));
    cx.set_tensor(3, Some(DataType::Int64), Some(vec![None]));
    Ok(())
}

fn non_max_suppression(cx: &mut InferCx) -> Result<(), InferError> {
    cx.set_tensor(0, Some(DataType::Int64), Some(vec![None, fixed(3)]));
    Ok(())
}

fn reverse_sequence(cx: &mut InferCx) -> Result<(), InferError> {
    if let Some(r) = cx.rank(0).filter(|&r| r < 2) {
        bail!("ReverseSequence needs an input of rank >= 2, got rank {r}");
    }
    same_as_input(cx)
}

fn eye_like(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = match cx.attr_i("dtype") {
        Some(d) => DataType::from_onnx(d as i32),
        None => cx.dtype(0),
    };
    if let Some(r) = cx.rank(0).filter(|&r| r != 2) {
        bail!("EyeLike needs an input of rank 2, got rank {r}");
    }
    let shape = cx.shape(0).cloned();
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn det(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let shape = match cx.shape(0) {
        Some(s) => {
            if s.len() < 2 {
                bail!("Det needs an input of rank >= 2, got {}", show(s));
            }
            let (m, n) = (&s[s.len() - 2], &s[s.len() - 1]);
            if let (Some(m), Some(n)) = (known(m), known(n)) {
                if m != n {
                    bail!("Det needs square matrices, got {}", show(s));
                }
            }
            Some(s[..s.len() - 2].to_vec())
        }
        None => None,
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn bit_cast(cx: &mut InferCx) -> Result<(), InferError> {
    let to = cx.attr_i("to").and_then(|t| DataType::from_onnx(t as i32));
    let shape = cx.shape(0).cloned();
    cx.set_tensor(0, to, shape);
    Ok(())
}

fn cumulative(cx: &mut InferCx) -> Result<(), InferError> {
    if let Some(r) = cx.rank(1).filter(|&r| r > 1) {
        bail!(
            "{} axis must be a scalar or one element, got rank {r}",
            cx.node.op_type()
        );
    }
    if let (Some(a), Some(r)) = (cx.single_int(1), cx.rank(0)) {
        axis(a, r)?;
    }
    same_as_input(cx)
}

fn scatter(cx: &mut InferCx) -> Result<(), InferError> {
    if let (Some(i), Some(u)) = (cx.shape(1), cx.shape(2)) {
        if cx.node.op_type() != "ScatterND" && i.len() != u.len() {
            bail!(
                "{} indices {} and updates {} differ in rank",
                cx.node.op_type(),
                show(i),
                show(u)
            );
        }
    }
    same_as_input(cx)
}

pub const OPS: &[OpDef] = &[
    op("TopK", 1, topk),
    op("CumSum", 11, cumulative),
    op("CumProd", 26, cumulative),
    op("GatherElements", 11, gather_elements),
    op("GatherND", 11, gather_nd),
    op("Scatter", 9, scatter),
    op("ScatterElements", 11, scatter),
    op("ScatterND", 11, scatter),
    op("TensorScatter", 24, same_as_input),
    op("Split", 1, split),
    op("SplitToSequence", 11, split_to_sequence),
    op("Tile", 1, tile),
    op("Trilu", 14, trilu),
    op("OneHot", 9, one_hot),
    op("NonZero", 9, non_zero),
    op("Compress", 9, compress),
    op("Unique", 11, unique),
    op("NonMaxSuppression", 10, non_max_suppression),
    op("ReverseSequence", 10, reverse_sequence),
    op("EyeLike", 9, eye_like),
    op("Det", 11, det),
    op("BitCast", 26, bit_cast),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::testing::{ai, ais, int_scalar, ints_info, node, run, t, try_run};
    use crate::infer::Info;

    #[test]
    fn split_equal_uneven_and_given_sizes() {
        let x = Info::of(t(DataType::Float, &[7, 4]));
        let n = node(
            "Split",
            &["x"],
            &["a", "b", "c"],
            vec![ai("num_outputs", 3)],
        );
        let out = run(split, &n, 18, &[Some(&x)]);
        assert_eq!(out[0].ty, t(DataType::Float, &[3, 4]));
        assert_eq!(out[2].ty, t(DataType::Float, &[1, 4]));
        // 5 into 4 chunks of 2 leaves no valid last chunk: unknown, not an error.
        let x5 = Info::of(t(DataType::Float, &[5]));
        let n = node(
            "Split",
            &["x"],
            &["a", "b", "c", "d"],
            vec![ai("num_outputs", 4)],
        );
        assert_eq!(
            run(split, &n, 18, &[Some(&x5)])[3].ty,
            t(DataType::Float, &[-1])
        );
        // Before 18 an uneven equal split is an error.
        let n = node("Split", &["x"], &["a", "b", "c"], vec![]);
        assert!(try_run(split, &n, 13, &[Some(&x)]).is_err());
        let n = node("Split", &["x"], &["a", "b"], vec![ais("split", &[2, 5])]);
        assert_eq!(
            run(split, &n, 11, &[Some(&x)])[1].ty,
            t(DataType::Float, &[5, 4])
        );
        let n = node("Split", &["x", "s"], &["a", "b"], vec![]);
        let bad = ints_info(&[2, 4]);
        assert!(try_run(split, &n, 13, &[Some(&x), Some(&bad)]).is_err());
        // Symbolic dims split exactly when they divide.
        let b = Info::of(Ty::tensor(
            Some(DataType::Float),
            Some(vec![Some(SymDim::sym("n").mul(&2.into()))]),
        ));
        let n = node("Split", &["x"], &["a", "b"], vec![]);
        assert_eq!(
            run(split, &n, 13, &[Some(&b)])[0].ty.shape(),
            Some(&vec![Some(SymDim::sym("n"))])
        );
    }

    #[test]
    fn gather_nd_batch_dims() {
        let d = Info::of(t(DataType::Float, &[2, 3, 4, 5]));
        let i = Info::of(t(DataType::Int64, &[2, 6, 2]));
        let n = node("GatherND", &["d", "i"], &["y"], vec![ai("batch_dims", 1)]);
        assert_eq!(
            run(gather_nd, &n, 13, &[Some(&d), Some(&i)])[0].ty,
            t(DataType::Float, &[2, 6, 5])
        );
        let i = Info::of(t(DataType::Int64, &[2, 4]));
        assert!(try_run(gather_nd, &n, 13, &[Some(&d), Some(&i)]).is_err());
    }

    #[test]
    fn topk_tile_onehot_unique() {
        let x = Info::of(t(DataType::Float, &[3, 4]));
        let k = ints_info(&[2]);
        let n = node("TopK", &["x", "k"], &["v", "i"], vec![]);
        let out = run(topk, &n, 11, &[Some(&x), Some(&k)]);
        assert_eq!(out[1].ty, t(DataType::Int64, &[3, 2]));
        let big = ints_info(&[5]);
        assert!(try_run(topk, &n, 11, &[Some(&x), Some(&big)]).is_err());
        let n = node("Tile", &["x", "r"], &["y"], vec![]);
        let r = ints_info(&[2, 1]);
        assert_eq!(
            run(tile, &n, 13, &[Some(&x), Some(&r)])[0].ty,
            t(DataType::Float, &[6, 4])
        );
        let idx = Info::of(t(DataType::Int64, &[5]));
        let depth = int_scalar(10);
        let vals = Info::of(t(DataType::Int32, &[2]));
        let n = node("OneHot", &["i", "d", "v"], &["y"], vec![ai("axis", 0)]);
        assert_eq!(
            run(one_hot, &n, 11, &[Some(&idx), Some(&depth), Some(&vals)])[0].ty,
            t(DataType::Int32, &[10, 5])
        );
        let n = node("Unique", &["x"], &["y", "i", "inv", "c"], vec![]);
        let out = run(unique, &n, 11, &[Some(&x)]);
        assert_eq!(out[0].ty, t(DataType::Float, &[-1]));
        assert_eq!(out[2].ty, t(DataType::Int64, &[12]));
    }

    #[test]
    fn det_needs_square_matrices() {
        let n = node("Det", &["x"], &["y"], vec![]);
        let x = Info::of(t(DataType::Float, &[5, 3, 3]));
        assert_eq!(
            run(det, &n, 11, &[Some(&x)])[0].ty,
            t(DataType::Float, &[5])
        );
        let x = Info::of(t(DataType::Float, &[3, 2]));
        assert!(try_run(det, &n, 11, &[Some(&x)]).is_err());
    }
}
