//! Sequences and optionals: SequenceEmpty, SequenceConstruct, SequenceInsert, SequenceErase,
//! SequenceAt, SequenceLength, ConcatFromSequence, SequenceMap (body inferred per element),
//! Optional, OptionalGetElement, OptionalHasElement. A sequence's element type is the union of the
//! tensors it may hold (dims that differ become unknown).
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (each op's section).

use super::control::union;
use crate::infer::{axis, InferCx, InferError};
use crate::{bail, op, OpDef, Ty};
use onnx_ir::ValueType;
use tensor::DataType;

fn elem(t: Option<&Ty>) -> Ty {
    match t {
        Some(Ty::Sequence(e)) => (**e).clone(),
        _ => Ty::Unknown,
    }
}

fn sequence_empty(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = match cx.attr_i("dtype") {
        Some(d) => DataType::from_onnx(d as i32),
        None => Some(DataType::Float),
    };
    cx.set(0, Ty::Sequence(Box::new(Ty::tensor(dtype, None))));
    Ok(())
}

fn sequence_construct(cx: &mut InferCx) -> Result<(), InferError> {
    let mut acc: Option<Ty> = None;
    for i in 0..cx.num_inputs() {
        let t = cx.ty(i).cloned().unwrap_or_default();
        acc = Some(match acc {
            None => t,
            Some(a) => union(&a, &t)
                .map_err(|e| InferError(format!("SequenceConstruct inputs differ: {}", e.0)))?,
        });
    }
    let Some(e) = acc else {
        bail!("SequenceConstruct needs at least one input")
    };
    cx.set(0, Ty::Sequence(Box::new(e)));
    Ok(())
}

fn sequence_insert(cx: &mut InferCx) -> Result<(), InferError> {
    let (s, t) = (elem(cx.ty(0)), cx.ty(1).cloned().unwrap_or_default());
    let e = union(&s, &t).map_err(|e| {
        InferError(format!(
            "SequenceInsert tensor does not match the sequence: {}",
            e.0
        ))
    })?;
    cx.set(0, Ty::Sequence(Box::new(e)));
    Ok(())
}

fn sequence_erase(cx: &mut InferCx) -> Result<(), InferError> {
    cx.pass_through(0, 0);
    Ok(())
}

fn sequence_at(cx: &mut InferCx) -> Result<(), InferError> {
    let e = elem(cx.ty(0));
    cx.set(0, e);
    Ok(())
}

fn sequence_length(cx: &mut InferCx) -> Result<(), InferError> {
    cx.set_tensor(0, Some(DataType::Int64), Some(vec![]));
    Ok(())
}

fn concat_from_sequence(cx: &mut InferCx) -> Result<(), InferError> {
    let e = elem(cx.ty(0));
    let new_axis = cx.attr_i("new_axis").unwrap_or(0) != 0;
    let Some(a) = cx.attr_i("axis") else {
        bail!("ConcatFromSequence has no 'axis' attribute")
    };
    let shape = match e.shape() {
        Some(s) => {
            let mut out = s.clone();
            if new_axis {
                out.insert(axis(a, s.len() + 1)?, None);
            } else {
                if s.is_empty() {
                    bail!("ConcatFromSequence cannot concatenate scalars without new_axis");
                }
                out[axis(a, s.len())?] = None;
            }
            Some(out)
        }
        None => None,
    };
    cx.set_tensor(0, e.dtype(), shape);
    Ok(())
}

fn sequence_map(cx: &mut InferCx) -> Result<(), InferError> {
    let Some(g) = cx.attr_g("body") else {
        bail!("SequenceMap has no 'body' graph attribute")
    };
    if g.input.len() != cx.num_inputs() || g.output.len() != cx.node.output.len() {
        bail!(
            "SequenceMap body has {} inputs and {} outputs, the node {} and {}",
            g.input.len(),
            g.output.len(),
            cx.num_inputs(),
            cx.node.output.len()
        );
    }
    let inputs: Vec<Ty> = (0..cx.num_inputs())
        .map(|i| match cx.ty(i) {
            Some(Ty::Sequence(e)) => (**e).clone(),
            Some(t) if i > 0 => t.clone(),
            _ => Ty::Unknown,
        })
        .collect();
    let Some(f) = cx.subgraph else { return Ok(()) };
    let outs = f(g, &inputs);
    for (k, t) in outs.into_iter().enumerate() {
        cx.set(k, Ty::Sequence(Box::new(t)));
    }
    Ok(())
}

fn optional(cx: &mut InferCx) -> Result<(), InferError> {
    let t = if cx.has_input(0) {
        cx.ty(0).cloned().unwrap_or_default()
    } else {
        match cx.attr("type").and_then(|a| a.tp.as_ref()) {
            Some(tp) => Ty::from_value_type(&ValueType::from_proto(Some(tp))),
            None => bail!("Optional without an input needs the 'type' attribute"),
        }
    };
    cx.set(0, Ty::Optional(Box::new(t)));
    Ok(())
}

fn optional_get_element(cx: &mut InferCx) -> Result<(), InferError> {
    let t = match cx.ty(0) {
        Some(Ty::Optional(e)) => (**e).clone(),
        Some(t @ (Ty::Tensor { .. } | Ty::Sequence(_))) if cx.opset >= 18 => t.clone(),
        _ => Ty::Unknown,
    };
    cx.set(0, t);
    Ok(())
}

fn optional_has_element(cx: &mut InferCx) -> Result<(), InferError> {
    cx.set_tensor(0, Some(DataType::Bool), Some(vec![]));
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("SequenceEmpty", 11, sequence_empty),
    op("SequenceConstruct", 11, sequence_construct),
    op("SequenceInsert", 11, sequence_insert),
    op("SequenceErase", 11, sequence_erase),
    op("SequenceAt", 11, sequence_at),
    op("SequenceLength", 11, sequence_length),
    op("ConcatFromSequence", 11, concat_from_sequence),
    op("SequenceMap", 17, sequence_map),
    op("Optional", 15, optional),
    op("OptionalGetElement", 15, optional_get_element),
    op("OptionalHasElement", 15, optional_has_element),
];

#[cfg(test)]
mod tests {
    use super::*;
    use crate::families::testing::{ai, node, run, t};
    use crate::infer::Info;

    #[test]
    fn construct_unions_and_concat_adds_an_unknown_dim() {
        let a = Info::of(t(DataType::Float, &[2, 3]));
        let b = Info::of(t(DataType::Float, &[2, 5]));
        let n = node("SequenceConstruct", &["a", "b"], &["s"], vec![]);
        let s = run(sequence_construct, &n, 11, &[Some(&a), Some(&b)]);
        assert_eq!(
            s[0].ty,
            Ty::Sequence(Box::new(t(DataType::Float, &[2, -1])))
        );
        let n = node(
            "ConcatFromSequence",
            &["s"],
            &["y"],
            vec![ai("axis", -1), ai("new_axis", 1)],
        );
        assert_eq!(
            run(concat_from_sequence, &n, 11, &[Some(&s[0])])[0].ty,
            t(DataType::Float, &[2, -1, -1])
        );
        let i = Info::of(t(DataType::Int64, &[2]));
        let n = node("SequenceInsert", &["s", "i"], &["y"], vec![]);
        assert!(crate::families::testing::try_run(
            sequence_insert,
            &n,
            11,
            &[Some(&s[0]), Some(&i)]
        )
        .is_err());
    }
}
