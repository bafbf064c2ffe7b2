//! Control flow: If (the union of both branches' output types), Loop and Scan (loop-carried and
//! state values iterate the body to a fixed point of their types; scan outputs get the iteration
//! dim: unknown for Loop, the scanned length for Scan). Subgraphs are inferred through the graph
//! driver's `cx.subgraph` callback.
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (If, Loop, Scan).

use crate::infer::{axis, known, show, DimOf, InferCx, InferError, Shape};
use crate::{bail, op, OpDef, Ty};
use onnx_proto::GraphProto;
use tensor::DataType;

/// The most specific type that both `a` and `b` are instances of: dims that agree stay, others
/// become unknown; a rank mismatch loses the shape. Element types that differ are an error.
pub fn union(a: &Ty, b: &Ty) -> Result<Ty, InferError> {
    Ok(match (a, b) {
        (
            Ty::Tensor {
                dtype: da,
                shape: sa,
            },
            Ty::Tensor {
                dtype: db,
                shape: sb,
            },
        ) => Ty::Tensor {
            dtype: union_dtype(*da, *db)?,
            shape: union_shape(sa, sb),
        },
        (
            Ty::SparseTensor {
                dtype: da,
                shape: sa,
            },
            Ty::SparseTensor {
                dtype: db,
                shape: sb,
            },
        ) => Ty::SparseTensor {
            dtype: union_dtype(*da, *db)?,
            shape: union_shape(sa, sb),
        },
        (Ty::Sequence(x), Ty::Sequence(y)) => Ty::Sequence(Box::new(union(x, y)?)),
        (Ty::Optional(x), Ty::Optional(y)) => Ty::Optional(Box::new(union(x, y)?)),
        (Ty::Unknown, _) | (_, Ty::Unknown) => Ty::Unknown,
        _ if a == b => a.clone(),
        _ => bail!("incompatible types {a:?} and {b:?}"),
    })
}

fn union_dtype(a: Option<DataType>, b: Option<DataType>) -> Result<Option<DataType>, InferError> {
    match (a, b) {
        (Some(x), Some(y)) if x != y => bail!("element types {x:?} and {y:?} differ"),
        (Some(x), Some(_)) => Ok(Some(x)),
        _ => Ok(None),
    }
}

fn union_shape(a: &Option<Shape>, b: &Option<Shape>) -> Option<Shape> {
    match (a, b) {
        (Some(x), Some(y)) if x.len() == y.len() => Some(
            x.iter()
                .zip(y)
                .map(|(p, q)| if p == q { p.clone() } else { None })
                .collect(),
        ),
        _ => None,
    }
}

/// The type with its shapes forgotten (element types kept).
fn shapeless(t: &Ty) -> Ty {
    match t {
        Ty::Tensor { dtype, .. } => Ty::Tensor {
            dtype: *dtype,
            shape: None,
        },
        Ty::SparseTensor { dtype, .. } => Ty::SparseTensor {
            dtype: *dtype,
            shape: None,
        },
        Ty::Sequence(e) => Ty::Sequence(Box::new(shapeless(e))),
        Ty::Optional(e) => Ty::Optional(Box::new(shapeless(e))),
        other => other.clone(),
    }
}

fn body<'a>(cx: &InferCx<'a>, name: &str) -> Result<&'a GraphProto, InferError> {
    match cx.attr_g(name) {
        Some(g) => Ok(g),
        None => bail!("{} has no '{name}' graph attribute", cx.node.op_type()),
    }
}

fn run_body(cx: &InferCx, g: &GraphProto, inputs: &[Ty]) -> Option<Vec<Ty>> {
    let f = cx.subgraph?;
    Some(f(g, inputs))
}

fn if_op(cx: &mut InferCx) -> Result<(), InferError> {
    let then_g = body(cx, "then_branch")?;
    let else_g = body(cx, "else_branch")?;
    if then_g.output.len() != else_g.output.len() || then_g.output.len() != cx.node.output.len() {
        bail!(
            "If branches have {} and {} outputs, the node {}",
            then_g.output.len(),
            else_g.output.len(),
            cx.node.output.len()
        );
    }
    let (Some(a), Some(b)) = (run_body(cx, then_g, &[]), run_body(cx, else_g, &[])) else {
        return Ok(());
    };
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        let t = union(x, y).map_err(|e| {
            InferError(format!(
                "If output {k}: then and else branches disagree: {}",
                e.0
            ))
        })?;
        cx.set(k, t);
    }
    Ok(())
}

/// Runs a body whose first `prefix.len()` inputs are fixed and whose next `state.len()` inputs
/// come back as outputs `skip..skip + state.len()`, until the state types stop changing. Returns
/// the final state types and the body outputs of the last run (`None` without a subgraph callback).
type StateAndOutputs = Option<(Vec<Ty>, Vec<Ty>)>;

fn fixed_point(
    cx: &InferCx,
    g: &GraphProto,
    prefix: &[Ty],
    mut state: Vec<Ty>,
    suffix: &[Ty],
    skip: usize,
) -> Result<StateAndOutputs, InferError> {
    let n = state.len();
    for round in 0..6 {
        if round == 5 {
            state = state.iter().map(shapeless).collect();
        }
        let inputs: Vec<Ty> = prefix.iter().chain(&state).chain(suffix).cloned().collect();
        let Some(outs) = run_body(cx, g, &inputs) else {
            return Ok(None);
        };
        if outs.len() < skip + n {
            bail!(
                "{} body has {} outputs, fewer than its {n} carried values",
                cx.node.op_type(),
                outs.len()
            );
        }
        let next: Vec<Ty> = state
            .iter()
            .zip(&outs[skip..skip + n])
            .map(|(s, o)| match union(s, o) {
                // A body that turns an optional (or other kind) into another kind: onnx takes the
                // body's output type, and so do we.
                Err(_) if std::mem::discriminant(s) != std::mem::discriminant(o) => Ok(o.clone()),
                r => r,
            })
            .collect::<Result<_, _>>()
            .map_err(|e| {
                InferError(format!(
                    "{} carried value changes type: {}",
                    cx.node.op_type(),
                    e.0
                ))
            })?;
        if next == state || round == 5 {
            return Ok(Some((next, outs)));
        }
        state = next;
    }
    Ok(None)
}

fn with_dim(t: &Ty, at: Option<i64>, d: DimOf) -> Result<Ty, InferError> {
    Ok(match t {
        Ty::Tensor { dtype, shape } => Ty::Tensor {
            dtype: *dtype,
            shape: match shape {
                Some(s) => {
                    let a = axis(at.unwrap_or(0), s.len() + 1)?;
                    let mut s = s.clone();
                    s.insert(a, d);
                    Some(s)
                }
                None => None,
            },
        },
        _ => Ty::Unknown,
    })
}

fn loop_op(cx: &mut InferCx) -> Result<(), InferError> {
    let g = body(cx, "body")?;
    let n = cx.node.input.len().saturating_sub(2);
    if g.input.len() != n + 2 {
        bail!(
            "Loop body takes {} inputs, expected {} (iteration, condition and {n} carried values)",
            g.input.len(),
            n + 2
        );
    }
    let k = cx.node.output.len().checked_sub(n).ok_or_else(|| {
        InferError(format!(
            "Loop has {} outputs, fewer than its {n} carried values",
            cx.node.output.len()
        ))
    })?;
    if g.output.len() != 1 + n + k {
        bail!(
            "Loop body has {} outputs, expected {} (condition, {n} carried, {k} scan outputs)",
            g.output.len(),
            1 + n + k
        );
    }
    let initial: Vec<Ty> = (0..n)
        .map(|i| cx.ty(2 + i).cloned().unwrap_or_default())
        .collect();
    let prefix = [
        Ty::tensor(Some(DataType::Int64), Some(vec![])),
        Ty::tensor(Some(DataType::Bool), Some(vec![])),
    ];
    let Some((state, outs)) = fixed_point(cx, g, &prefix, initial, &[], 1)? else {
        return Ok(());
    };
    for (i, t) in state.into_iter().enumerate() {
        cx.set(i, t);
    }
    for j in 0..k {
        let t = with_dim(&outs[1 + n + j], Some(0), None)?;
        cx.set(n + j, t);
    }
    Ok(())
}

fn scan(cx: &mut InferCx) -> Result<(), InferError> {
    let g = body(cx, "body")?;
    let v8 = cx.opset < 9;
    let first = usize::from(v8);
    let total = cx.node.input.len().saturating_sub(first);
    let m = cx.attr_i("num_scan_inputs").unwrap_or(0);
    if m < 1 || m as usize > total {
        bail!("Scan num_scan_inputs {m} is not in 1..={total}");
    }
    let m = m as usize;
    let n = total - m;
    let k = cx.node.output.len().checked_sub(n).ok_or_else(|| {
        InferError(format!(
            "Scan has {} outputs, fewer than its {n} state values",
            cx.node.output.len()
        ))
    })?;
    if g.input.len() != n + m || g.output.len() != n + k {
        bail!(
            "Scan body has {} inputs and {} outputs, expected {} and {}",
            g.input.len(),
            g.output.len(),
            n + m,
            n + k
        );
    }
    let in_axes: Vec<i64> = if v8 {
        vec![1; m]
    } else {
        cx.attr_ints("scan_input_axes")
            .map_or_else(|| vec![0; m], <[i64]>::to_vec)
    };
    let out_axes: Vec<i64> = if v8 {
        vec![1; k]
    } else {
        cx.attr_ints("scan_output_axes")
            .map_or_else(|| vec![0; k], <[i64]>::to_vec)
    };
    if in_axes.len() != m || out_axes.len() != k {
        bail!("Scan scan_input_axes {in_axes:?} / scan_output_axes {out_axes:?} do not match {m} scan inputs and {k} scan outputs");
    }
    // Scan-8 has a leading batch dim on every state and scan value.
    let strip = |t: Option<&Ty>, dims: usize| -> Result<(Ty, Option<Shape>), InferError> {
        match t {
            Some(Ty::Tensor {
                dtype,
                shape: Some(s),
            }) => {
                if s.len() < dims {
                    bail!(
                        "Scan input {} has rank {}, needs at least {dims}",
                        show(s),
                        s.len()
                    );
                }
                Ok((
                    Ty::tensor(*dtype, Some(s[dims..].to_vec())),
                    Some(s.clone()),
                ))
            }
            Some(Ty::Tensor { dtype, shape: None }) => Ok((Ty::tensor(*dtype, None), None)),
            _ => Ok((Ty::Unknown, None)),
        }
    };
    let mut batch: DimOf = None;
    let mut state = Vec::with_capacity(n);
    for i in 0..n {
        let t = cx.ty(first + i);
        if v8 {
            let (ty, full) = strip(t, 1)?;
            if batch.is_none() {
                batch = full.and_then(|s| s[0].clone());
            }
            state.push(ty);
        } else {
            state.push(t.cloned().unwrap_or_default());
        }
    }
    let mut seq_len: DimOf = None;
    let mut scans = Vec::with_capacity(m);
    for (j, &in_axis) in in_axes.iter().enumerate() {
        let t = cx.ty(first + n + j);
        let (ty, s) = if v8 {
            let (ty, full) = strip(t, 2)?;
            if batch.is_none() {
                batch = full.as_ref().and_then(|s| s[0].clone());
            }
            (ty, full.map(|s| (1, s)))
        } else {
            match t {
                Some(Ty::Tensor {
                    dtype,
                    shape: Some(s),
                }) => {
                    let a = axis(in_axis, s.len())?;
                    if s.is_empty() {
                        bail!("Scan input {j} is a scalar");
                    }
                    let mut e = s.clone();
                    e.remove(a);
                    (Ty::tensor(*dtype, Some(e)), Some((a, s.clone())))
                }
                Some(Ty::Tensor { dtype, shape: None }) => (Ty::tensor(*dtype, None), None),
                _ => (Ty::Unknown, None),
            }
        };
        if let Some((a, s)) = s {
            let d = s[a].clone();
            match (known(&seq_len), known(&d)) {
                (Some(x), Some(y)) if x != y => {
                    bail!("Scan inputs disagree on the sequence length: {x} vs {y}")
                }
                _ if seq_len.is_none() => seq_len = d,
                _ => {}
            }
        }
        scans.push(ty);
    }
    let Some((state, outs)) = fixed_point(cx, g, &[], state, &scans, 0)? else {
        return Ok(());
    };
    let add_batch = |t: Ty| -> Result<Ty, InferError> {
        if v8 {
            with_dim(&t, Some(0), batch.clone())
        } else {
            Ok(t)
        }
    };
    for (i, t) in state.into_iter().enumerate() {
        let t = add_batch(t)?;
        cx.set(i, t);
    }
    for j in 0..k {
        let t = with_dim(
            &outs[n + j],
            Some(if v8 { 0 } else { out_axes[j] }),
            seq_len.clone(),
        )?;
        let t = add_batch(t)?;
        cx.set(n + j, t);
    }
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("If", 1, if_op),
    op("Loop", 1, loop_op),
    op("Scan", 8, scan),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::testing::{ag, ai, node, run_with_subgraph, t};
    use crate::infer::Info;
    use onnx_proto::ValueInfoProto;

    fn graph(inputs: usize, outputs: usize) -> GraphProto {
        let v = |i: usize| ValueInfoProto {
            name: Some(format!("v{i}")),
            ..Default::default()
        };
        GraphProto {
            input: (0..inputs).map(v).collect(),
            output: (0..outputs).map(v).collect(),
            ..Default::default()
        }
    }

    #[test]
    fn if_takes_the_union_of_its_branches() {
        let mut then_g = graph(0, 1);
        then_g.name = Some("then".into());
        let n = node(
            "If",
            &["c"],
            &["y"],
            vec![ag("then_branch", then_g), ag("else_branch", graph(0, 1))],
        );
        let c = Info::of(t(DataType::Bool, &[]));
        let answer = |g: &GraphProto, _: &[Ty]| {
            if g.name.is_some() {
                vec![t(DataType::Float, &[2, 3])]
            } else {
                vec![t(DataType::Float, &[2, 4])]
            }
        };
        let out = run_with_subgraph(if_op, &n, 13, &[Some(&c)], &answer).unwrap();
        assert_eq!(out[0].ty, t(DataType::Float, &[2, -1]));
        let answer = |g: &GraphProto, _: &[Ty]| {
            if g.name.is_some() {
                vec![t(DataType::Float, &[2])]
            } else {
                vec![t(DataType::Int64, &[2])]
            }
        };
        assert!(run_with_subgraph(if_op, &n, 13, &[Some(&c)], &answer).is_err());
    }

    #[test]
    fn loop_state_reaches_a_fixed_point_and_scan_outputs_get_a_leading_dim() {
        // Body: x -> concat(x, x) along 0 (a growing carried value), scan output [3].
        let n = node(
            "Loop",
            &["m", "", "x"],
            &["x_out", "s"],
            vec![ag("body", graph(3, 3))],
        );
        let x = Info::of(t(DataType::Float, &[1, 4]));
        let answer = |_: &GraphProto, ins: &[Ty]| {
            let grown = match ins[2].shape() {
                Some(s) => Ty::tensor(
                    Some(DataType::Float),
                    Some(vec![
                        s[0].as_ref()
                            .and_then(|d| d.as_known())
                            .and_then(|d| crate::infer::fixed(2 * d)),
                        s[1].clone(),
                    ]),
                ),
                None => Ty::tensor(Some(DataType::Float), None),
            };
            vec![t(DataType::Bool, &[]), grown, t(DataType::Int64, &[3])]
        };
        let out = run_with_subgraph(loop_op, &n, 13, &[None, None, Some(&x)], &answer).unwrap();
        assert_eq!(out[0].ty, t(DataType::Float, &[-1, 4]));
        assert_eq!(out[1].ty, t(DataType::Int64, &[-1, 3]));
    }

    #[test]
    fn scan_outputs_take_the_scanned_length() {
        let n = node(
            "Scan",
            &["s", "x"],
            &["s_out", "y"],
            vec![
                ag("body", graph(2, 2)),
                ai("num_scan_inputs", 1),
                crate::families::testing::ais("scan_output_axes", &[-1]),
            ],
        );
        let s = Info::of(t(DataType::Float, &[2]));
        let x = Info::of(t(DataType::Float, &[5, 2]));
        let answer = |_: &GraphProto, ins: &[Ty]| {
            assert_eq!(ins[1], t(DataType::Float, &[2]));
            vec![t(DataType::Float, &[2]), t(DataType::Float, &[3])]
        };
        let out = run_with_subgraph(scan, &n, 16, &[Some(&s), Some(&x)], &answer).unwrap();
        assert_eq!(out[0].ty, t(DataType::Float, &[2]));
        assert_eq!(out[1].ty, t(DataType::Float, &[3, 5]));
    }
}
