//! Kernels of the control family (inference: `families/control.rs`): If, Loop, Scan. Their
//! subgraphs run through [`RunCx::run_graph`]; outer-scope values stay visible to them.

use crate::exec::util::{concat_flat, norm_axis, take};
use crate::exec::{kernel, KResult, KernelDef, RunCx, Value};
use onnx_proto::{type_proto, GraphProto, TypeProto};
use tensor::{DataType, Tensor};

/// Iterations a Loop may run before it is deemed runaway (guards memory for scan outputs).
const MAX_ITERATIONS: i64 = 1 << 31;

/// If: runs `then_branch` or `else_branch` by the one-element boolean condition.
fn if_op(cx: &RunCx) -> KResult<Vec<Value>> {
    let cond = cx.input(0)?;
    let c = truth(cx, cond, "If condition")?;
    let name = if c { "then_branch" } else { "else_branch" };
    let out = cx.run_subgraph(name, vec![])?;
    if out.len() < cx.num_outputs() {
        return Err(cx.invalid(format!(
            "If declares {} outputs but its {name} produced {}",
            cx.num_outputs(),
            out.len()
        )));
    }
    Ok(out)
}

/// The value of a one-element boolean (or numeric) tensor.
fn truth(cx: &RunCx, t: &Tensor, what: &str) -> KResult<bool> {
    if t.len() != 1 {
        return Err(cx.invalid(format!(
            "{what} must hold exactly one element, got shape {:?}",
            t.shape()
        )));
    }
    match t.dtype() {
        DataType::Bool => Ok(t.to_vec::<bool>()?[0]),
        _ => Ok(crate::exec::util::to_f64s(t)
            .map_err(|_| cx.invalid(format!("{what} must be bool, got {}", t.dtype())))?[0]
            != 0.0),
    }
}

/// Loop: runs `body` while the trip count and condition allow, threading loop-carried values
/// and stacking scan outputs along a new axis 0.
fn loop_op(cx: &RunCx) -> KResult<Vec<Value>> {
    let body = cx
        .attr_g("body")?
        .ok_or_else(|| cx.invalid("Loop needs a 'body' graph attribute"))?;
    let max_trip = match cx.opt_input(0)? {
        Some(t) => Some(crate::exec::util::scalar_i64(t, "Loop trip count M")?),
        None => None,
    };
    let cond_given = cx.has_input(1);
    let mut cond = match cx.opt_input(1)? {
        Some(t) => truth(cx, t, "Loop condition")?,
        None => true,
    };
    // With a trip count and no condition input the body's condition output is ignored (a for
    // loop). With neither, the spec's loop never ends; like onnxruntime we stop when the
    // body's condition turns false rather than spin forever.
    let use_body_cond = cond_given || max_trip.is_none();
    let n_carried = cx.num_inputs().saturating_sub(2);
    if body.input.len() != n_carried + 2 {
        return Err(cx.invalid(format!(
            "Loop body must take 2 + {n_carried} inputs (iteration, condition, loop-carried), it declares {}",
            body.input.len()
        )));
    }
    if body.output.len() < 1 + n_carried {
        return Err(cx.invalid(format!(
            "Loop body must produce at least 1 + {n_carried} outputs, it declares {}",
            body.output.len()
        )));
    }
    let n_scan = body.output.len() - 1 - n_carried;
    let mut carried: Vec<Value> = (0..n_carried)
        .map(|i| cx.value(2 + i).cloned().unwrap_or(Value::Optional(None)))
        .collect();
    let mut scans: Vec<Vec<Tensor>> = vec![Vec::new(); n_scan];
    let limit = max_trip.unwrap_or(i64::MAX);
    let mut it: i64 = 0;
    while cond && it < limit {
        if it >= MAX_ITERATIONS {
            return Err(cx.invalid(format!(
                "Loop ran {MAX_ITERATIONS} iterations without stopping; refusing to go on"
            )));
        }
        let mut inputs = Vec::with_capacity(2 + n_carried);
        inputs.push(Value::Tensor(Tensor::scalar(it)));
        inputs.push(Value::Tensor(Tensor::scalar(cond)));
        for (i, v) in carried.iter().enumerate() {
            inputs.push(as_declared(v, body.input[2 + i].r#type.as_ref()));
        }
        let mut out = cx.run_graph(body, inputs)?.into_iter();
        let c = out
            .next()
            .ok_or_else(|| cx.invalid("Loop body produced no condition output"))?;
        if use_body_cond {
            let ct = c.as_tensor().ok_or_else(|| {
                cx.invalid(format!(
                    "Loop body condition must be a tensor, got {}",
                    c.describe()
                ))
            })?;
            cond = truth(cx, ct, "Loop body condition output")?;
        }
        for slot in carried.iter_mut() {
            *slot = out
                .next()
                .ok_or_else(|| cx.invalid("Loop body produced too few outputs"))?;
        }
        for (k, acc) in scans.iter_mut().enumerate() {
            match out.next() {
                Some(Value::Tensor(t)) => {
                    if let Some(first) = acc.first() {
                        if first.shape() != t.shape() || first.dtype() != t.dtype() {
                            return Err(cx.invalid(format!(
                                "Loop scan output {k} changed from tensor({}){:?} to tensor({}){:?} between iterations",
                                first.dtype(),
                                first.shape(),
                                t.dtype(),
                                t.shape()
                            )));
                        }
                    }
                    acc.push(t)
                }
                Some(other) => {
                    return Err(cx.invalid(format!(
                        "Loop scan output {k} must be a tensor, got {}",
                        other.describe()
                    )))
                }
                None => return Err(cx.invalid("Loop body produced too few outputs")),
            }
        }
        it += 1;
    }
    let mut result = carried;
    for (k, acc) in scans.into_iter().enumerate() {
        if acc.is_empty() {
            let decl = &body.output[1 + n_carried + k];
            result.push(Value::Tensor(empty_scan(cx, decl.r#type.as_ref(), 0)?));
        } else {
            result.push(Value::Tensor(stack(&acc, 0)?));
        }
    }
    Ok(result)
}

/// `v` wrapped in an optional when the body input it binds to is declared optional and `v`
/// is a plain tensor or sequence (a loop-carried optional comes back from the body unwrapped).
fn as_declared(v: &Value, ty: Option<&TypeProto>) -> Value {
    let declared_optional = matches!(
        ty.and_then(|t| t.value.as_ref()),
        Some(type_proto::Value::OptionalType(_))
    );
    match v {
        Value::Optional(_) => v.clone(),
        _ if declared_optional => Value::Optional(Some(Box::new(v.clone()))),
        _ => v.clone(),
    }
}

/// An empty scan output (no iterations ran): shape `[0]` inserted at `axis` into the body's
/// declared per-iteration shape (unknown dims become 0), of the declared element type.
fn empty_scan(cx: &RunCx, ty: Option<&TypeProto>, axis: i64) -> KResult<Tensor> {
    let Some(type_proto::Value::TensorType(tt)) = ty.and_then(|t| t.value.as_ref()) else {
        return Err(cx.invalid(
            "no iteration ran and the body does not declare its scan output as a tensor type",
        ));
    };
    let dtype = tt.elem_type.and_then(DataType::from_onnx).ok_or_else(|| {
        cx.invalid("no iteration ran and the body's scan output declares no element type")
    })?;
    let mut shape: Vec<usize> = tt
        .shape
        .as_ref()
        .map(|s| {
            s.dim
                .iter()
                .map(|d| match d.value {
                    Some(onnx_proto::tensor_shape_proto::dimension::Value::DimValue(v))
                        if v >= 0 =>
                    {
                        v as usize
                    }
                    _ => 0,
                })
                .collect()
        })
        .unwrap_or_default();
    let a = norm_axis(axis, shape.len() + 1)?;
    shape.insert(a, 0);
    crate::exec::util::zeros(dtype, shape)
}

/// Stacks equal-shaped tensors along a new axis `axis` (in `0..=rank`).
fn stack(items: &[Tensor], axis: usize) -> KResult<Tensor> {
    let first = &items[0];
    let dtype = first.dtype();
    let inner_shape = first.shape().to_vec();
    let parts: Vec<&Tensor> = items.iter().collect();
    let n = items.len();
    let mut stacked_shape = vec![n];
    stacked_shape.extend_from_slice(&inner_shape);
    let flat = concat_flat(&parts, dtype, stacked_shape)?;
    if axis == 0 {
        return Ok(flat);
    }
    let outer: usize = inner_shape[..axis].iter().product();
    let inner: usize = inner_shape[axis..].iter().product();
    let per = outer * inner;
    let mut offs = Vec::with_capacity(n * per);
    for o in 0..outer {
        for j in 0..n {
            for i in 0..inner {
                offs.push(j * per + o * inner + i);
            }
        }
    }
    let mut shape = inner_shape[..axis].to_vec();
    shape.push(n);
    shape.extend_from_slice(&inner_shape[axis..]);
    take(&flat, &offs, shape)
}

/// The slice `index` of `t` along `axis`, with that axis removed.
fn select(t: &Tensor, axis: usize, index: usize) -> KResult<Tensor> {
    let shape = t.shape();
    let outer: usize = shape[..axis].iter().product();
    let inner: usize = shape[axis + 1..].iter().product();
    let d = shape[axis];
    let mut offs = Vec::with_capacity(outer * inner);
    for o in 0..outer {
        let base = (o * d + index) * inner;
        offs.extend(base..base + inner);
    }
    let mut out = shape[..axis].to_vec();
    out.extend_from_slice(&shape[axis + 1..]);
    take(t, &offs, out)
}

/// Scan: iterates `body` over slices of the scan inputs, threading state variables
/// (v8: with a leading batch axis and optional `sequence_lens`; v9+: per-input axes and
/// directions).
fn scan(cx: &RunCx) -> KResult<Vec<Value>> {
    let body = cx
        .attr_g("body")?
        .ok_or_else(|| cx.invalid("Scan needs a 'body' graph attribute"))?;
    let m = cx.int("num_scan_inputs", -1)?;
    if cx.opset < 9 {
        return scan8(cx, body, m);
    }
    let total = cx.num_inputs();
    if m <= 0 || m as usize > total {
        return Err(cx.invalid(format!(
            "Scan num_scan_inputs must be in 1..={total}, got {m}"
        )));
    }
    let m = m as usize;
    let n = total - m;
    if body.input.len() != n + m {
        return Err(cx.invalid(format!(
            "Scan body must take {} inputs ({n} states + {m} scan slices), it declares {}",
            n + m,
            body.input.len()
        )));
    }
    if body.output.len() < n {
        return Err(cx.invalid(format!(
            "Scan body must produce at least {n} state outputs, it declares {}",
            body.output.len()
        )));
    }
    let k = body.output.len() - n;
    let in_axes = cx.attr_ints("scan_input_axes")?.unwrap_or(&[]);
    let in_dirs = cx.attr_ints("scan_input_directions")?.unwrap_or(&[]);
    let out_axes = cx.attr_ints("scan_output_axes")?.unwrap_or(&[]);
    let out_dirs = cx.attr_ints("scan_output_directions")?.unwrap_or(&[]);
    let mut states: Vec<Value> = Vec::with_capacity(n);
    for i in 0..n {
        states.push(
            cx.value(i)
                .cloned()
                .ok_or_else(|| cx.invalid(format!("Scan state input {i} is missing")))?,
        );
    }
    let mut scan_in: Vec<(&Tensor, usize, bool)> = Vec::with_capacity(m);
    let mut len: Option<usize> = None;
    for j in 0..m {
        let t = cx.input(n + j)?;
        if t.rank() == 0 {
            return Err(cx.invalid(format!(
                "Scan input {} must have rank >= 1 to be scanned, got a scalar",
                n + j
            )));
        }
        let axis = norm_axis(in_axes.get(j).copied().unwrap_or(0), t.rank())?;
        let rev = in_dirs.get(j).copied().unwrap_or(0) != 0;
        let l = t.shape()[axis];
        match len {
            Some(prev) if prev != l => {
                return Err(cx.invalid(format!(
                    "Scan inputs disagree on the sequence length: {prev} and {l} (input {})",
                    n + j
                )))
            }
            _ => len = Some(l),
        }
        scan_in.push((t, axis, rev));
    }
    let len = len.unwrap_or(0);
    let mut outs: Vec<Vec<Tensor>> = vec![Vec::with_capacity(len); k];
    for it in 0..len {
        let mut inputs = states.clone();
        for &(t, axis, rev) in &scan_in {
            let idx = if rev { len - 1 - it } else { it };
            inputs.push(Value::Tensor(select(t, axis, idx)?));
        }
        let mut out = cx.run_graph(body, inputs)?.into_iter();
        for s in states.iter_mut() {
            *s = out
                .next()
                .ok_or_else(|| cx.invalid("Scan body produced too few outputs"))?;
        }
        for (q, acc) in outs.iter_mut().enumerate() {
            let t = match out.next() {
                Some(Value::Tensor(t)) => t,
                Some(other) => {
                    return Err(cx.invalid(format!(
                        "Scan output {q} must be a tensor, got {}",
                        other.describe()
                    )))
                }
                None => return Err(cx.invalid("Scan body produced too few outputs")),
            };
            check_same(cx, acc.first(), &t, q)?;
            acc.push(t);
        }
    }
    let mut result = states;
    for (q, mut acc) in outs.into_iter().enumerate() {
        let axis = out_axes.get(q).copied().unwrap_or(0);
        if acc.is_empty() {
            result.push(Value::Tensor(empty_scan(
                cx,
                body.output[n + q].r#type.as_ref(),
                axis,
            )?));
            continue;
        }
        if out_dirs.get(q).copied().unwrap_or(0) != 0 {
            acc.reverse();
        }
        let a = norm_axis(axis, acc[0].rank() + 1)?;
        result.push(Value::Tensor(stack(&acc, a)?));
    }
    Ok(result)
}

/// Errors if a scan output's type or shape changed between iterations.
fn check_same(cx: &RunCx, first: Option<&Tensor>, t: &Tensor, q: usize) -> KResult<()> {
    if let Some(f) = first {
        if f.shape() != t.shape() || f.dtype() != t.dtype() {
            return Err(cx.invalid(format!(
                "Scan output {q} changed from tensor({}){:?} to tensor({}){:?} between iterations",
                f.dtype(),
                f.shape(),
                t.dtype(),
                t.shape()
            )));
        }
    }
    Ok(())
}

/// Scan-8: inputs are `sequence_lens` (optional), states `[batch, ...]` and scan inputs
/// `[batch, seq, ...]`; each batch entry is scanned separately, outputs padded with zeros past
/// its sequence length.
fn scan8(cx: &RunCx, body: &GraphProto, m: i64) -> KResult<Vec<Value>> {
    let total = cx.num_inputs().saturating_sub(1);
    if m <= 0 || m as usize > total {
        return Err(cx.invalid(format!(
            "Scan num_scan_inputs must be in 1..={total}, got {m}"
        )));
    }
    let m = m as usize;
    let n = total - m;
    if body.input.len() != n + m || body.output.len() < n {
        return Err(cx.invalid(format!(
            "Scan body must take {} inputs and produce at least {n} outputs, it declares {} and {}",
            n + m,
            body.input.len(),
            body.output.len()
        )));
    }
    let k = body.output.len() - n;
    let dirs = cx.attr_ints("directions")?.unwrap_or(&[]);
    let states: Vec<&Tensor> = (0..n).map(|i| cx.input(1 + i)).collect::<KResult<_>>()?;
    let scans: Vec<&Tensor> = (0..m)
        .map(|j| cx.input(1 + n + j))
        .collect::<KResult<_>>()?;
    let batch = scans[0].shape().first().copied().unwrap_or(0);
    let max_len = scans[0].shape().get(1).copied().unwrap_or(0);
    for (j, t) in scans.iter().enumerate() {
        if t.rank() < 2 || t.shape()[0] != batch || t.shape()[1] != max_len {
            return Err(cx.invalid(format!(
                "Scan-8 scan input {j} must have shape [batch={batch}, seq={max_len}, ...], got {:?}",
                t.shape()
            )));
        }
    }
    for (i, t) in states.iter().enumerate() {
        if t.rank() < 1 || t.shape()[0] != batch {
            return Err(cx.invalid(format!(
                "Scan-8 state input {i} must have leading batch dim {batch}, got {:?}",
                t.shape()
            )));
        }
    }
    let lens: Vec<usize> = match cx.opt_input(0)? {
        Some(t) => {
            let v = crate::exec::util::to_i64s(t)?;
            if v.len() != batch {
                return Err(cx.invalid(format!(
                    "Scan sequence_lens must have {batch} entries, got {}",
                    v.len()
                )));
            }
            v.iter()
                .map(|&l| {
                    if l < 0 || l as usize > max_len {
                        Err(cx.invalid(format!(
                            "Scan sequence_lens entry {l} is outside 0..={max_len}"
                        )))
                    } else {
                        Ok(l as usize)
                    }
                })
                .collect::<KResult<_>>()?
        }
        None => vec![max_len; batch],
    };
    let mut state_out: Vec<Vec<Tensor>> = vec![Vec::with_capacity(batch); n];
    let mut scan_out: Vec<Vec<Tensor>> = vec![Vec::with_capacity(batch); k];
    for (b, &len) in lens.iter().enumerate() {
        let mut st: Vec<Value> = states
            .iter()
            .map(|t| select(t, 0, b).map(Value::Tensor))
            .collect::<KResult<_>>()?;
        let per_b: Vec<Tensor> = scans
            .iter()
            .map(|t| select(t, 0, b))
            .collect::<KResult<_>>()?;
        let mut outs: Vec<Vec<Tensor>> = vec![Vec::with_capacity(max_len); k];
        for it in 0..len {
            let mut inputs = st.clone();
            for (j, t) in per_b.iter().enumerate() {
                let rev = dirs.get(j).copied().unwrap_or(0) != 0;
                let idx = if rev { len - 1 - it } else { it };
                inputs.push(Value::Tensor(select(t, 0, idx)?));
            }
            let mut out = cx.run_graph(body, inputs)?.into_iter();
            for s in st.iter_mut() {
                *s = out
                    .next()
                    .ok_or_else(|| cx.invalid("Scan body produced too few outputs"))?;
            }
            for (q, acc) in outs.iter_mut().enumerate() {
                match out.next() {
                    Some(Value::Tensor(t)) => {
                        check_same(cx, acc.first(), &t, q)?;
                        acc.push(t)
                    }
                    _ => return Err(cx.invalid(format!("Scan output {q} must be a tensor"))),
                }
            }
        }
        for (i, s) in st.into_iter().enumerate() {
            match s {
                Value::Tensor(t) => state_out[i].push(t),
                other => {
                    return Err(cx.invalid(format!(
                        "Scan-8 states must be tensors, got {}",
                        other.describe()
                    )))
                }
            }
        }
        for (q, mut acc) in outs.into_iter().enumerate() {
            // Pad to max_len with zeros of the element shape.
            let (dtype, elem_shape) = match (acc.first(), scan_out[q].first()) {
                (Some(t), _) => (t.dtype(), t.shape().to_vec()),
                (None, Some(t)) => (t.dtype(), t.shape()[1..].to_vec()),
                (None, None) => {
                    let e = empty_scan(cx, body.output[n + q].r#type.as_ref(), 0)?;
                    (e.dtype(), e.shape()[1..].to_vec())
                }
            };
            while acc.len() < max_len {
                acc.push(crate::exec::util::zeros(dtype, elem_shape.clone())?);
            }
            if acc.is_empty() {
                let mut shape = vec![0usize];
                shape.extend_from_slice(&elem_shape);
                scan_out[q].push(crate::exec::util::zeros(dtype, shape)?);
            } else {
                scan_out[q].push(stack(&acc, 0)?);
            }
        }
    }
    let mut result = Vec::with_capacity(n + k);
    for (i, v) in state_out.into_iter().enumerate() {
        if v.is_empty() {
            let mut shape = states[i].shape().to_vec();
            shape[0] = 0;
            result.push(Value::Tensor(crate::exec::util::zeros(
                states[i].dtype(),
                shape,
            )?));
        } else {
            result.push(Value::Tensor(stack(&v, 0)?));
        }
    }
    for (q, v) in scan_out.into_iter().enumerate() {
        if v.is_empty() {
            // No batch entries: [0, seq, declared element dims...].
            let e = empty_scan(cx, body.output[n + q].r#type.as_ref(), 0)?;
            let mut shape = e.shape().to_vec();
            shape.insert(1, max_len);
            result.push(Value::Tensor(crate::exec::util::zeros(e.dtype(), shape)?));
        } else {
            result.push(Value::Tensor(stack(&v, 0)?));
        }
    }
    Ok(result)
}

pub const KERNELS: &[KernelDef] = &[
    kernel("If", 1, if_op),
    kernel("Loop", 1, loop_op),
    kernel("Scan", 8, scan),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Subgraphs;
    use onnx_proto::attribute_proto::AttributeType;
    use onnx_proto::{AttributeProto, NodeProto, ValueInfoProto};

    /// Runs every body as a Rust function of its inputs.
    struct Fake(fn(&[Value]) -> Vec<Value>);

    impl Subgraphs for Fake {
        fn run(&self, _graph: &GraphProto, inputs: Vec<Value>) -> KResult<Vec<Value>> {
            Ok((self.0)(&inputs))
        }
    }

    fn f32s(v: &Value) -> Vec<f32> {
        v.as_tensor().unwrap().to_vec::<f32>().unwrap()
    }

    fn t(shape: Vec<usize>, v: Vec<f32>) -> Value {
        Value::Tensor(Tensor::from_vec(shape, v).unwrap())
    }

    fn tensor_type(dtype: DataType, dims: &[i64]) -> TypeProto {
        use onnx_proto::tensor_shape_proto::{dimension, Dimension};
        TypeProto {
            value: Some(type_proto::Value::TensorType(type_proto::Tensor {
                elem_type: Some(dtype as i32),
                shape: Some(onnx_proto::TensorShapeProto {
                    dim: dims
                        .iter()
                        .map(|&d| Dimension {
                            value: Some(dimension::Value::DimValue(d)),
                            ..Default::default()
                        })
                        .collect(),
                }),
            })),
            ..Default::default()
        }
    }

    /// A body declaring `n_in` untyped inputs and the given output types.
    fn body(n_in: usize, outs: Vec<TypeProto>) -> GraphProto {
        GraphProto {
            name: Some("body".into()),
            input: (0..n_in)
                .map(|i| ValueInfoProto {
                    name: Some(format!("in{i}")),
                    ..Default::default()
                })
                .collect(),
            output: outs
                .into_iter()
                .enumerate()
                .map(|(i, ty)| ValueInfoProto {
                    name: Some(format!("out{i}")),
                    r#type: Some(ty),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn node(
        op: &str,
        n_in: usize,
        n_out: usize,
        g: GraphProto,
        ints: &[(&str, &[i64])],
    ) -> NodeProto {
        let mut attribute = vec![AttributeProto {
            name: Some("body".into()),
            r#type: Some(AttributeType::Graph as i32),
            g: Some(g),
            ..Default::default()
        }];
        for (name, v) in ints {
            attribute.push(if name.ends_with('!') {
                AttributeProto {
                    name: Some(name.trim_end_matches('!').into()),
                    r#type: Some(AttributeType::Int as i32),
                    i: Some(v[0]),
                    ..Default::default()
                }
            } else {
                AttributeProto {
                    name: Some(name.to_string()),
                    r#type: Some(AttributeType::Ints as i32),
                    ints: v.to_vec(),
                    ..Default::default()
                }
            });
        }
        NodeProto {
            op_type: Some(op.into()),
            input: (0..n_in).map(|i| format!("x{i}")).collect(),
            output: (0..n_out).map(|i| format!("y{i}")).collect(),
            attribute,
            ..Default::default()
        }
    }

    /// `s + x` for equal-shaped f32 tensors, returned as state and as two scan outputs.
    fn accumulate(v: &[Value]) -> Vec<Value> {
        let s = f32s(&v[0]);
        let x = f32s(&v[1]);
        let shape = v[0].as_tensor().unwrap().shape().to_vec();
        let r: Vec<f32> = s.iter().zip(&x).map(|(a, b)| a + b).collect();
        vec![
            t(shape.clone(), r.clone()),
            t(shape.clone(), r.clone()),
            t(shape, r),
        ]
    }

    #[test]
    fn scan9_axes_and_directions() {
        let f = tensor_type(DataType::Float, &[2]);
        let g = body(2, vec![f.clone(), f.clone(), f]);
        let n = node(
            "Scan",
            2,
            3,
            g,
            &[
                ("num_scan_inputs!", &[1]),
                ("scan_input_axes", &[1]),
                ("scan_input_directions", &[1]),
                ("scan_output_axes", &[1, 0]),
                ("scan_output_directions", &[0, 1]),
            ],
        );
        let s0 = t(vec![2], vec![0.0, 0.0]);
        let x = t(vec![2, 3], vec![1.0, 2.0, 3.0, 10.0, 20.0, 30.0]);
        let inputs = [Some(&s0), Some(&x)];
        let fake = Fake(accumulate);
        let cx = RunCx::new(&n, 16, &inputs, &fake);
        let out = scan(&cx).unwrap();
        assert_eq!(f32s(&out[0]), vec![6.0, 60.0]);
        assert_eq!(out[1].as_tensor().unwrap().shape(), &[2, 3]);
        assert_eq!(f32s(&out[1]), vec![3.0, 5.0, 6.0, 30.0, 50.0, 60.0]);
        assert_eq!(out[2].as_tensor().unwrap().shape(), &[3, 2]);
        assert_eq!(f32s(&out[2]), vec![6.0, 60.0, 5.0, 50.0, 3.0, 30.0]);
    }

    #[test]
    fn scan8_batches_with_sequence_lens() {
        let f = tensor_type(DataType::Float, &[1]);
        let g = body(2, vec![f.clone(), f]);
        let n = node("Scan", 3, 2, g, &[("num_scan_inputs!", &[1])]);
        let lens = Value::Tensor(Tensor::from_vec(vec![2], vec![3i32, 1]).unwrap());
        let s0 = t(vec![2, 1], vec![0.0, 0.0]);
        let x = t(vec![2, 3, 1], vec![1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
        let inputs = [Some(&lens), Some(&s0), Some(&x)];
        let fake = Fake(|v| accumulate(v)[..2].to_vec());
        let cx = RunCx::new(&n, 8, &inputs, &fake);
        let out = scan(&cx).unwrap();
        assert_eq!(out[0].as_tensor().unwrap().shape(), &[2, 1]);
        assert_eq!(f32s(&out[0]), vec![6.0, 4.0]);
        assert_eq!(out[1].as_tensor().unwrap().shape(), &[2, 3, 1]);
        assert_eq!(f32s(&out[1]), vec![1.0, 3.0, 6.0, 4.0, 0.0, 0.0]);
    }

    #[test]
    fn loop_zero_iterations_gives_typed_empty_scan_outputs() {
        let g = body(
            3,
            vec![
                tensor_type(DataType::Bool, &[]),
                tensor_type(DataType::Float, &[]),
                tensor_type(DataType::Float, &[2]),
            ],
        );
        let n = node("Loop", 3, 2, g, &[]);
        let m = Value::Tensor(Tensor::scalar(0i64));
        let c = Value::Tensor(Tensor::scalar(true));
        let v = Value::Tensor(Tensor::scalar(5f32));
        let inputs = [Some(&m), Some(&c), Some(&v)];
        let fake = Fake(|_| panic!("the body must not run"));
        let cx = RunCx::new(&n, 13, &inputs, &fake);
        let out = loop_op(&cx).unwrap();
        assert_eq!(f32s(&out[0]), vec![5.0]);
        let s = out[1].as_tensor().unwrap();
        assert_eq!((s.dtype(), s.shape()), (DataType::Float, &[0usize, 2][..]));
    }

    #[test]
    fn loop_stops_on_condition_and_stacks_scan_outputs() {
        let g = body(
            3,
            vec![
                tensor_type(DataType::Bool, &[]),
                tensor_type(DataType::Float, &[]),
                tensor_type(DataType::Float, &[]),
            ],
        );
        let n = node("Loop", 3, 2, g, &[]);
        let c = Value::Tensor(Tensor::scalar(true));
        let v = Value::Tensor(Tensor::scalar(0f32));
        let inputs = [None, Some(&c), Some(&v)];
        let fake = Fake(|v| {
            let i = v[0].as_tensor().unwrap().to_vec::<i64>().unwrap()[0];
            let x = f32s(&v[2])[0] + 1.0;
            vec![
                Value::Tensor(Tensor::scalar(i < 2)),
                Value::Tensor(Tensor::scalar(x)),
                Value::Tensor(Tensor::scalar(x)),
            ]
        });
        let cx = RunCx::new(&n, 13, &inputs, &fake);
        let out = loop_op(&cx).unwrap();
        assert_eq!(f32s(&out[0]), vec![3.0]);
        assert_eq!(out[1].as_tensor().unwrap().shape(), &[3]);
        assert_eq!(f32s(&out[1]), vec![1.0, 2.0, 3.0]);
        // Neither M nor cond: the body's condition still ends the loop.
        let inputs = [None, None, Some(&v)];
        let cx = RunCx::new(&n, 13, &inputs, &fake);
        assert_eq!(f32s(&loop_op(&cx).unwrap()[0]), vec![3.0]);
        // M without cond: a for loop, the body's condition is ignored.
        let m = Value::Tensor(Tensor::scalar(5i64));
        let inputs = [Some(&m), None, Some(&v)];
        let cx = RunCx::new(&n, 13, &inputs, &fake);
        assert_eq!(f32s(&loop_op(&cx).unwrap()[0]), vec![5.0]);
    }
}
