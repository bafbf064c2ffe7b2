//! Kernels of the sequence family (inference: `families/sequence.rs`): sequences of tensors and
//! optionals.

use crate::exec::util::{concat_flat, norm_axis, scalar_i64, take};
use crate::exec::{kernel, KResult, KernelDef, RunCx, Value};
use onnx_proto::{type_proto, TypeProto};
use tensor::{DataType, Tensor};

/// Input `i` as a sequence: (element type, items).
fn seq_input<'a>(cx: &RunCx<'a>, i: usize) -> KResult<(DataType, &'a [Tensor])> {
    match cx.value(i) {
        Some(Value::Sequence { elem_type, items }) => Ok((*elem_type, items)),
        Some(other) => Err(cx.invalid(format!(
            "input {i} must be a sequence, got {}",
            other.describe()
        ))),
        None => Err(cx.invalid(format!("required input {i} (a sequence) is missing"))),
    }
}

/// A position input normalised against `n` items, accepting `-n..n + extra`.
fn position(cx: &RunCx, t: &Tensor, n: usize, extra: usize, what: &str) -> KResult<usize> {
    let p = scalar_i64(t, what)?;
    let n_i = n as i64;
    let hi = n_i + extra as i64;
    if p < -n_i || p >= hi {
        return Err(cx.invalid(format!(
            "{what} {p} is out of range for a sequence of {n} items (expected {}..={})",
            -n_i,
            hi - 1
        )));
    }
    Ok(if p < 0 {
        (p + n_i) as usize
    } else {
        p as usize
    })
}

/// SequenceEmpty: an empty sequence of the `dtype` attribute's type (default float).
fn sequence_empty(cx: &RunCx) -> KResult<Vec<Value>> {
    let code = cx.int("dtype", DataType::Float as i64)?;
    let elem_type = DataType::from_onnx(code as i32)
        .ok_or_else(|| cx.invalid(format!("SequenceEmpty dtype {code} is not a tensor type")))?;
    Ok(vec![Value::Sequence {
        elem_type,
        items: vec![],
    }])
}

/// SequenceConstruct: a sequence of its (same-typed) tensor inputs.
fn sequence_construct(cx: &RunCx) -> KResult<Vec<Value>> {
    let mut items = Vec::with_capacity(cx.num_inputs());
    for i in 0..cx.num_inputs() {
        items.push(cx.input(i)?.clone());
    }
    let elem_type = items
        .first()
        .map(|t| t.dtype())
        .ok_or_else(|| cx.invalid("SequenceConstruct needs at least one input"))?;
    if let Some(t) = items.iter().find(|t| t.dtype() != elem_type) {
        return Err(cx.invalid(format!(
            "SequenceConstruct inputs must share one element type: {elem_type} and {}",
            t.dtype()
        )));
    }
    Ok(vec![Value::Sequence { elem_type, items }])
}

/// SequenceInsert: the sequence with a tensor inserted at `position` (default: at the end).
fn sequence_insert(cx: &RunCx) -> KResult<Vec<Value>> {
    let (elem_type, items) = seq_input(cx, 0)?;
    let t = cx.input(1)?;
    if t.dtype() != elem_type {
        return Err(cx.invalid(format!(
            "SequenceInsert: tensor of type {} into a sequence of {elem_type}",
            t.dtype()
        )));
    }
    let pos = match cx.opt_input(2)? {
        Some(p) => position(cx, p, items.len(), 1, "SequenceInsert position")?,
        None => items.len(),
    };
    let mut items = items.to_vec();
    items.insert(pos, t.clone());
    Ok(vec![Value::Sequence { elem_type, items }])
}

/// SequenceErase: the sequence without the item at `position` (default: the last).
fn sequence_erase(cx: &RunCx) -> KResult<Vec<Value>> {
    let (elem_type, items) = seq_input(cx, 0)?;
    if items.is_empty() {
        return Err(cx.invalid("SequenceErase on an empty sequence"));
    }
    let pos = match cx.opt_input(1)? {
        Some(p) => position(cx, p, items.len(), 0, "SequenceErase position")?,
        None => items.len() - 1,
    };
    let mut items = items.to_vec();
    items.remove(pos);
    Ok(vec![Value::Sequence { elem_type, items }])
}

/// SequenceAt: the item at `position`.
fn sequence_at(cx: &RunCx) -> KResult<Vec<Value>> {
    let (_, items) = seq_input(cx, 0)?;
    let pos = position(cx, cx.input(1)?, items.len(), 0, "SequenceAt position")?;
    Ok(vec![Value::Tensor(items[pos].clone())])
}

/// SequenceLength: the number of items, as an int64 scalar.
fn sequence_length(cx: &RunCx) -> KResult<Vec<Value>> {
    let (_, items) = seq_input(cx, 0)?;
    Ok(vec![Value::Tensor(Tensor::scalar(items.len() as i64))])
}

/// Concatenates tensors of one dtype and rank along `axis` (other dims must agree).
fn concat_along(cx: &RunCx, items: &[&Tensor], axis: usize) -> KResult<Tensor> {
    let first = items[0];
    let rank = first.rank();
    let dtype = first.dtype();
    let mut total = 0usize;
    for t in items {
        if t.dtype() != dtype || t.rank() != rank {
            return Err(cx.invalid(format!(
                "cannot concatenate tensor({}){:?} with tensor({dtype}){:?}",
                t.dtype(),
                t.shape(),
                first.shape()
            )));
        }
        for d in 0..rank {
            if d != axis && t.shape()[d] != first.shape()[d] {
                return Err(cx.invalid(format!(
                    "cannot concatenate shapes {:?} and {:?} along axis {axis}",
                    first.shape(),
                    t.shape()
                )));
            }
        }
        total += t.shape()[axis];
    }
    let outer: usize = first.shape()[..axis].iter().product();
    let inner: usize = first.shape()[axis + 1..].iter().product();
    let mut shape = first.shape().to_vec();
    shape[axis] = total;
    let flat_len: usize = items.iter().map(|t| t.len()).sum();
    let flat = concat_flat(items, dtype, vec![flat_len])?;
    let mut starts = Vec::with_capacity(items.len());
    let mut acc = 0;
    for t in items {
        starts.push(acc);
        acc += t.len();
    }
    let mut offs = Vec::with_capacity(flat_len);
    for o in 0..outer {
        for (t, &s) in items.iter().zip(&starts) {
            let chunk = t.shape()[axis] * inner;
            let base = s + o * chunk;
            offs.extend(base..base + chunk);
        }
    }
    take(&flat, &offs, shape)
}

/// ConcatFromSequence: the items concatenated along `axis`, or stacked on a new axis when
/// `new_axis` is 1.
fn concat_from_sequence(cx: &RunCx) -> KResult<Vec<Value>> {
    let (_, items) = seq_input(cx, 0)?;
    let axis = cx
        .attr_i("axis")?
        .ok_or_else(|| cx.invalid("ConcatFromSequence needs the 'axis' attribute"))?;
    let new_axis = cx.int("new_axis", 0)? != 0;
    if items.is_empty() {
        return Err(cx.invalid("ConcatFromSequence of an empty sequence"));
    }
    let rank = items[0].rank();
    if new_axis {
        let a = norm_axis(axis, rank + 1)?;
        let expanded: Vec<Tensor> = items
            .iter()
            .map(|t| {
                let mut s = t.shape().to_vec();
                s.insert(a.min(s.len()), 1);
                t.reshape(s)
            })
            .collect::<Result<_, _>>()?;
        let refs: Vec<&Tensor> = expanded.iter().collect();
        Ok(vec![concat_along(cx, &refs, a)?.into()])
    } else {
        if rank == 0 {
            return Err(
                cx.invalid("ConcatFromSequence cannot concatenate scalars without new_axis")
            );
        }
        let a = norm_axis(axis, rank)?;
        let refs: Vec<&Tensor> = items.iter().collect();
        Ok(vec![concat_along(cx, &refs, a)?.into()])
    }
}

/// Optional: wraps its input in an optional, or the empty optional of the `type` attribute.
fn optional(cx: &RunCx) -> KResult<Vec<Value>> {
    match cx.value(0) {
        Some(v) => Ok(vec![Value::Optional(Some(Box::new(v.clone())))]),
        None => {
            if cx.attr("type").is_none() {
                return Err(cx.invalid("Optional without an input needs the 'type' attribute"));
            }
            Ok(vec![Value::Optional(None)])
        }
    }
}

/// OptionalGetElement: the optional's value (v18+: a plain tensor or sequence passes through).
fn optional_get_element(cx: &RunCx) -> KResult<Vec<Value>> {
    match cx.value(0) {
        Some(Value::Optional(Some(v))) => Ok(vec![(**v).clone()]),
        Some(Value::Optional(None)) | None => {
            Err(cx.invalid("OptionalGetElement: the optional input is empty"))
        }
        Some(v) => {
            if cx.opset < 18 {
                return Err(cx.invalid(format!(
                    "OptionalGetElement-15 needs an optional input, got {}",
                    v.describe()
                )));
            }
            Ok(vec![v.clone()])
        }
    }
}

/// OptionalHasElement: whether the input holds a value (an omitted input holds none).
fn optional_has_element(cx: &RunCx) -> KResult<Vec<Value>> {
    let has = match cx.value(0) {
        Some(Value::Optional(o)) => o.is_some(),
        Some(_) => true,
        None => false,
    };
    Ok(vec![Value::Tensor(Tensor::scalar(has))])
}

/// The element type a graph output declares (tensor, or a sequence's/optional's tensor).
fn declared_elem(ty: Option<&TypeProto>) -> Option<DataType> {
    match ty?.value.as_ref()? {
        type_proto::Value::TensorType(t) => DataType::from_onnx(t.elem_type?),
        type_proto::Value::SequenceType(s) => declared_elem(s.elem_type.as_deref()),
        type_proto::Value::OptionalType(o) => declared_elem(o.elem_type.as_deref()),
        _ => None,
    }
}

/// SequenceMap: runs `body` once per item of the input sequence (additional sequence inputs
/// are indexed alongside, additional tensors passed whole) and collects each output as a
/// sequence.
fn sequence_map(cx: &RunCx) -> KResult<Vec<Value>> {
    let body = cx
        .attr_g("body")?
        .ok_or_else(|| cx.invalid("SequenceMap needs a 'body' graph attribute"))?;
    let (_, items) = seq_input(cx, 0)?;
    let n = items.len();
    let mut extra: Vec<&Value> = Vec::new();
    for i in 1..cx.num_inputs() {
        let v = cx
            .value(i)
            .ok_or_else(|| cx.invalid(format!("SequenceMap input {i} is missing")))?;
        if let Value::Sequence { items: s, .. } = v {
            if s.len() != n {
                return Err(cx.invalid(format!(
                    "SequenceMap input {i} has {} items, the input sequence {n}",
                    s.len()
                )));
            }
        }
        extra.push(v);
    }
    if body.input.len() != 1 + extra.len() {
        return Err(cx.invalid(format!(
            "SequenceMap body must take {} inputs, it declares {}",
            1 + extra.len(),
            body.input.len()
        )));
    }
    let k = body.output.len();
    let mut outs: Vec<Vec<Tensor>> = vec![Vec::with_capacity(n); k];
    for (it, item) in items.iter().enumerate() {
        let mut inputs = Vec::with_capacity(1 + extra.len());
        inputs.push(Value::Tensor(item.clone()));
        for v in &extra {
            inputs.push(match v {
                Value::Sequence { items: s, .. } => Value::Tensor(s[it].clone()),
                other => (*other).clone(),
            });
        }
        let out = cx.run_graph(body, inputs)?;
        for (q, v) in out.into_iter().take(k).enumerate() {
            match v {
                Value::Tensor(t) => outs[q].push(t),
                other => {
                    return Err(cx.invalid(format!(
                        "SequenceMap body output {q} must be a tensor, got {}",
                        other.describe()
                    )))
                }
            }
        }
    }
    let mut result = Vec::with_capacity(k);
    for (q, acc) in outs.into_iter().enumerate() {
        let elem_type = match acc.first() {
            Some(t) => t.dtype(),
            None => declared_elem(body.output[q].r#type.as_ref()).ok_or_else(|| {
                cx.invalid(format!(
                    "SequenceMap over an empty sequence: body output {q} declares no element type"
                ))
            })?,
        };
        result.push(Value::Sequence {
            elem_type,
            items: acc,
        });
    }
    Ok(result)
}

pub const KERNELS: &[KernelDef] = &[
    kernel("SequenceEmpty", 11, sequence_empty),
    kernel("SequenceConstruct", 11, sequence_construct),
    kernel("SequenceInsert", 11, sequence_insert),
    kernel("SequenceErase", 11, sequence_erase),
    kernel("SequenceAt", 11, sequence_at),
    kernel("SequenceLength", 11, sequence_length),
    kernel("ConcatFromSequence", 11, concat_from_sequence),
    kernel("SequenceMap", 17, sequence_map),
    kernel("Optional", 15, optional),
    kernel("OptionalGetElement", 15, optional_get_element),
    kernel("OptionalHasElement", 15, optional_has_element),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::exec::Subgraphs;
    use onnx_proto::attribute_proto::AttributeType;
    use onnx_proto::{AttributeProto, GraphProto, NodeProto};

    struct NoGraphs;

    impl Subgraphs for NoGraphs {
        fn run(&self, _: &GraphProto, _: Vec<Value>) -> KResult<Vec<Value>> {
            panic!("no subgraphs here")
        }
    }

    fn node(op: &str, n_in: usize, ints: &[(&str, i64)]) -> NodeProto {
        NodeProto {
            op_type: Some(op.into()),
            input: (0..n_in).map(|i| format!("x{i}")).collect(),
            output: vec!["y".into()],
            attribute: ints
                .iter()
                .map(|(n, v)| AttributeProto {
                    name: Some(n.to_string()),
                    r#type: Some(AttributeType::Int as i32),
                    i: Some(*v),
                    ..Default::default()
                })
                .collect(),
            ..Default::default()
        }
    }

    fn seq(items: &[&[f32]]) -> Value {
        Value::Sequence {
            elem_type: DataType::Float,
            items: items
                .iter()
                .map(|v| Tensor::from_slice(vec![v.len()], v).unwrap())
                .collect(),
        }
    }

    fn firsts(v: &Value) -> Vec<f32> {
        match v {
            Value::Sequence { items, .. } => items
                .iter()
                .map(|t| t.to_vec::<f32>().unwrap()[0])
                .collect(),
            other => panic!("not a sequence: {other:?}"),
        }
    }

    fn run(f: KernelFnLocal, n: &NodeProto, inputs: &[Option<&Value>]) -> KResult<Vec<Value>> {
        let cx = RunCx::new(n, 17, inputs, &NoGraphs);
        f(&cx)
    }

    type KernelFnLocal = fn(&RunCx) -> KResult<Vec<Value>>;

    #[test]
    fn insert_and_erase_positions() {
        let s = seq(&[&[1.0], &[2.0]]);
        let t = Value::Tensor(Tensor::from_vec(vec![1], vec![9f32]).unwrap());
        let n = node("SequenceInsert", 3, &[]);
        let at = |p: i64| Value::Tensor(Tensor::scalar(p));
        let p2 = at(2);
        let out = run(sequence_insert, &n, &[Some(&s), Some(&t), Some(&p2)]).unwrap();
        assert_eq!(firsts(&out[0]), vec![1.0, 2.0, 9.0], "position n appends");
        let pm1 = at(-1);
        let out = run(sequence_insert, &n, &[Some(&s), Some(&t), Some(&pm1)]).unwrap();
        assert_eq!(firsts(&out[0]), vec![1.0, 9.0, 2.0]);
        let p3 = at(3);
        assert!(run(sequence_insert, &n, &[Some(&s), Some(&t), Some(&p3)]).is_err());
        let n = node("SequenceErase", 2, &[]);
        let out = run(sequence_erase, &n, &[Some(&s)]).unwrap();
        assert_eq!(firsts(&out[0]), vec![1.0], "default erases the last");
        let pm2 = at(-2);
        let out = run(sequence_erase, &n, &[Some(&s), Some(&pm2)]).unwrap();
        assert_eq!(firsts(&out[0]), vec![2.0]);
    }

    #[test]
    fn concat_from_sequence_new_axis_last() {
        let s = seq(&[&[1.0, 2.0], &[3.0, 4.0]]);
        let n = node("ConcatFromSequence", 1, &[("axis", -1), ("new_axis", 1)]);
        let out = run(concat_from_sequence, &n, &[Some(&s)]).unwrap();
        let t = out[0].as_tensor().unwrap();
        assert_eq!(t.shape(), &[2, 2]);
        assert_eq!(t.to_vec::<f32>().unwrap(), vec![1.0, 3.0, 2.0, 4.0]);
        let n = node("ConcatFromSequence", 1, &[("axis", 0)]);
        let out = run(concat_from_sequence, &n, &[Some(&s)]).unwrap();
        assert_eq!(
            out[0].as_tensor().unwrap().to_vec::<f32>().unwrap(),
            vec![1.0, 2.0, 3.0, 4.0]
        );
    }
}
