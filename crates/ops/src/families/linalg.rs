//! Matrix products: MatMul, MatMulInteger, QLinearMatMul (numpy matmul shapes with batch
//! broadcasting), Gemm, and Einsum (equation parsing, implicit output, ellipsis broadcasting).
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (MatMul, MatMulInteger,
//! QLinearMatMul, Gemm, Einsum).

use crate::infer::{broadcast, fixed, known, show, InferCx, InferError, Shape};
use crate::{bail, op, OpDef};
use tensor::DataType;

/// The numpy `matmul` result shape: 1-D operands are promoted and the promoted dim removed, the
/// leading (batch) dims broadcast, and the contracted dims must agree.
pub(crate) fn matmul_shape(a: &Shape, b: &Shape) -> Result<Shape, InferError> {
    if a.is_empty() || b.is_empty() {
        bail!(
            "MatMul operands must have rank >= 1, got {} and {}",
            show(a),
            show(b)
        );
    }
    let (a1, b1) = (a.len() == 1, b.len() == 1);
    let a2: Shape = if a1 {
        vec![fixed(1), a[0].clone()]
    } else {
        a.clone()
    };
    let b2: Shape = if b1 {
        vec![b[0].clone(), fixed(1)]
    } else {
        b.clone()
    };
    let (ka, kb) = (&a2[a2.len() - 1], &b2[b2.len() - 2]);
    if let (Some(x), Some(y)) = (known(ka), known(kb)) {
        if x != y {
            bail!(
                "MatMul contracted dims differ: {x} ({}) vs {y} ({})",
                show(a),
                show(b)
            );
        }
    }
    let mut out = broadcast(&a2[..a2.len() - 2].to_vec(), &b2[..b2.len() - 2].to_vec())?;
    if !a1 {
        out.push(a2[a2.len() - 2].clone());
    }
    if !b1 {
        out.push(b2[b2.len() - 1].clone());
    }
    Ok(out)
}

/// Output `0` = matmul of inputs `ia` and `ib`, with element type `dtype`.
fn matmul_of(
    cx: &mut InferCx,
    ia: usize,
    ib: usize,
    dtype: Option<DataType>,
) -> Result<(), InferError> {
    let shape = match (cx.shape(ia), cx.shape(ib)) {
        (Some(a), Some(b)) => Some(matmul_shape(a, b)?),
        _ => None,
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn matmul(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0).or(cx.dtype(1));
    matmul_of(cx, 0, 1, dtype)
}

fn matmul_integer(cx: &mut InferCx) -> Result<(), InferError> {
    matmul_of(cx, 0, 1, Some(DataType::Int32))
}

/// Inputs: a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point.
fn qlinear_matmul(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(7);
    matmul_of(cx, 0, 3, dtype)
}

fn gemm(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0).or(cx.dtype(1));
    let shape = match (cx.shape(0), cx.shape(1)) {
        (Some(a), Some(b)) => {
            if a.len() != 2 || b.len() != 2 {
                bail!(
                    "Gemm operands must have rank 2, got {} and {}",
                    show(a),
                    show(b)
                );
            }
            let ta = cx.attr_i("transA").unwrap_or(0) != 0;
            let tb = cx.attr_i("transB").unwrap_or(0) != 0;
            let m = if ta { a[1].clone() } else { a[0].clone() };
            let n = if tb { b[0].clone() } else { b[1].clone() };
            Some(vec![m, n])
        }
        _ => None,
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

/// One term of an Einsum equation: its labels, and where the ellipsis sits (if any).
#[derive(Debug, PartialEq)]
struct Term {
    labels: Vec<char>,
    ellipsis: Option<usize>,
}

fn parse_term(s: &str) -> Result<Term, InferError> {
    let mut labels = Vec::new();
    let mut ellipsis = None;
    let mut rest = s;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("...") {
            if ellipsis.replace(labels.len()).is_some() {
                bail!("Einsum term '{s}' has more than one ellipsis");
            }
            rest = r;
            continue;
        }
        let c = rest.chars().next().unwrap_or_default();
        if !c.is_ascii_alphabetic() {
            bail!("Einsum term '{s}' has an invalid character '{c}'");
        }
        labels.push(c);
        rest = &rest[c.len_utf8()..];
    }
    Ok(Term { labels, ellipsis })
}

/// Parses an equation into its input terms and its (explicit or implicit) output term.
fn parse_equation(eq: &str) -> Result<(Vec<Term>, Term), InferError> {
    let eq: String = eq.chars().filter(|c| *c != ' ').collect();
    let (lhs, rhs) = match eq.split_once("->") {
        Some((l, r)) => (l.to_string(), Some(r.to_string())),
        None => (eq.clone(), None),
    };
    let inputs: Vec<Term> = lhs.split(',').map(parse_term).collect::<Result<_, _>>()?;
    let output = match rhs {
        Some(r) => parse_term(&r)?,
        None => {
            let mut counts = std::collections::BTreeMap::new();
            for t in &inputs {
                for &c in &t.labels {
                    *counts.entry(c).or_insert(0) += 1;
                }
            }
            let labels = counts
                .into_iter()
                .filter(|&(_, n)| n == 1)
                .map(|(c, _)| c)
                .collect();
            let ellipsis = inputs.iter().any(|t| t.ellipsis.is_some()).then_some(0);
            Term { labels, ellipsis }
        }
    };
    Ok((inputs, output))
}

fn einsum(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let Some(eq) = cx.attr_s("equation") else {
        bail!("Einsum has no equation")
    };
    let (terms, out) = parse_equation(eq)?;
    if terms.len() != cx.num_inputs() {
        bail!(
            "Einsum equation '{eq}' has {} operands but the node has {} inputs",
            terms.len(),
            cx.num_inputs()
        );
    }
    // The number of dims every ellipsis stands for, and their broadcast.
    let mut ell_rank: Option<usize> = None;
    let mut ell_dims: Option<Shape> = Some(Vec::new());
    let mut label_dims: std::collections::HashMap<char, Vec<Option<crate::SymDim>>> =
        Default::default();
    for (i, t) in terms.iter().enumerate() {
        let Some(s) = cx.shape(i) else {
            if t.ellipsis.is_some() {
                ell_dims = None;
            }
            continue;
        };
        if s.len() < t.labels.len() || (t.ellipsis.is_none() && s.len() != t.labels.len()) {
            bail!(
                "Einsum term {i} has {} labels but its input has shape {}",
                t.labels.len(),
                show(s)
            );
        }
        let n_ell = s.len() - t.labels.len();
        let at = t.ellipsis.unwrap_or(t.labels.len());
        if t.ellipsis.is_some() {
            if let Some(r) = ell_rank.filter(|&r| r != n_ell) {
                bail!("Einsum ellipsis of input {i} stands for {n_ell} dims, of an earlier input for {r}");
            }
            ell_rank = Some(n_ell);
            if let Some(e) = ell_dims.as_mut() {
                *e = broadcast(e, &s[at..at + n_ell].to_vec())?;
            }
        }
        for (j, &c) in t.labels.iter().enumerate() {
            let d = if j < at { &s[j] } else { &s[j + n_ell] };
            label_dims.entry(c).or_default().push(d.clone());
        }
    }
    let dim_of = |c: char| -> Option<crate::SymDim> {
        let ds = label_dims.get(&c)?;
        let knowns: Vec<i64> = ds.iter().filter_map(known).collect();
        if let Some(&k) = knowns.first() {
            return if knowns.iter().all(|&x| x == k) {
                fixed(k)
            } else {
                None
            };
        }
        let first = ds.first()?.clone()?;
        ds.iter()
            .all(|d| d.as_ref() == Some(&first))
            .then_some(first)
    };
    for &c in &out.labels {
        if !terms.iter().any(|t| t.labels.contains(&c)) {
            bail!("Einsum output label '{c}' appears in no input");
        }
    }
    let shape = if out.ellipsis.is_some() && ell_rank.is_some_and(|r| r > 0) {
        match ell_dims {
            Some(e) => {
                let at = out.ellipsis.unwrap_or(0);
                let mut v: Shape = out.labels[..at].iter().map(|&c| dim_of(c)).collect();
                v.extend(e);
                v.extend(out.labels[at..].iter().map(|&c| dim_of(c)));
                Some(v)
            }
            None => Some(vec![None; out.labels.len() + ell_rank.unwrap_or(0)]),
        }
    } else if out.ellipsis.is_some()
        && ell_rank.is_none()
        && terms
            .iter()
            .enumerate()
            .any(|(i, t)| t.ellipsis.is_some() && cx.shape(i).is_none())
    {
        None
    } else {
        Some(out.labels.iter().map(|&c| dim_of(c)).collect())
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("MatMul", 1, matmul),
    op("MatMulInteger", 10, matmul_integer),
    op("QLinearMatMul", 10, qlinear_matmul),
    op("Gemm", 1, gemm),
    op("Einsum", 12, einsum),
];

#[cfg(test)]
mod tests {
    use super::*;

    fn s(dims: &[i64]) -> Shape {
        dims.iter()
            .map(|&d| if d < 0 { None } else { fixed(d) })
            .collect()
    }

    #[test]
    fn matmul_promotes_and_broadcasts() {
        assert_eq!(
            matmul_shape(&s(&[2, 1, 3, 4]), &s(&[5, 4, 6])).unwrap(),
            s(&[2, 5, 3, 6])
        );
        assert_eq!(matmul_shape(&s(&[4]), &s(&[2, 4, 6])).unwrap(), s(&[2, 6]));
        assert_eq!(matmul_shape(&s(&[3, 4]), &s(&[4])).unwrap(), s(&[3]));
        assert_eq!(matmul_shape(&s(&[4]), &s(&[4])).unwrap(), s(&[]));
        assert_eq!(
            matmul_shape(&s(&[-1, 4]), &s(&[-1, 7])).unwrap(),
            s(&[-1, 7])
        );
        assert!(matmul_shape(&s(&[3, 4]), &s(&[5, 6])).is_err());
        assert!(matmul_shape(&s(&[]), &s(&[5, 6])).is_err());
    }

    #[test]
    fn einsum_implicit_output_is_sorted_singletons_after_ellipsis() {
        let (_, out) = parse_equation("b j i ,jk").unwrap();
        assert_eq!(
            out,
            Term {
                labels: vec!['b', 'i', 'k'],
                ellipsis: None
            }
        );
        let (_, out) = parse_equation("...ij,...jk").unwrap();
        assert_eq!(
            out,
            Term {
                labels: vec!['i', 'k'],
                ellipsis: Some(0)
            }
        );
        let (_, out) = parse_equation("Ba,aB->").unwrap();
        assert_eq!(
            out,
            Term {
                labels: vec![],
                ellipsis: None
            }
        );
        assert!(parse_equation("i...j...").is_err());
    }
}
