//! Normalizations, the softmax family, Dropout and the losses: BatchNormalization (with its
//! training-mode outputs), InstanceNormalization, LayerNormalization (with Mean/InvStdDev),
//! GroupNormalization, RMSNormalization, LpNormalization, MeanVarianceNormalization, LRN,
//! Softmax, LogSoftmax, Hardmax, Dropout (mask), NegativeLogLikelihoodLoss,
//! SoftmaxCrossEntropyLoss.
//!
//! Spec: https://github.com/onnx/onnx/blob/main/docs/Operators.md (each op's section).

use crate::infer::{axis, fixed, known, show, InferCx, InferError, Shape};
use crate::{bail, op, OpDef};
use tensor::DataType;

fn same_as_input(cx: &mut InferCx) -> Result<(), InferError> {
    cx.pass_through(0, 0);
    Ok(())
}

/// Softmax, LogSoftmax, Hardmax: same type; the axis (default 1 before opset 13, -1 from 13)
/// must be in range.
fn softmax(cx: &mut InferCx) -> Result<(), InferError> {
    if let Some(r) = cx.rank(0) {
        let a = cx
            .attr_i("axis")
            .unwrap_or(if cx.opset < 13 { 1 } else { -1 });
        axis(a, r)?;
    }
    cx.pass_through(0, 0);
    Ok(())
}

/// Output 0 is X; outputs 1.. (mean and variance and, before opset 14, saved mean and variance)
/// are per-channel.
fn batch_norm(cx: &mut InferCx) -> Result<(), InferError> {
    cx.pass_through(0, 0);
    let x = cx.shape(0);
    let channels = match x {
        Some(x) if x.len() > 1 => x[1].clone(),
        Some(_) => fixed(1),
        None => None,
    };
    // Scale, B, mean and var are [C]: a known C there fills an unknown or symbolic one.
    let channels = if known(&channels).is_some() {
        channels
    } else {
        (1..=4)
            .filter_map(|i| {
                cx.shape(i)
                    .filter(|s| s.len() == 1)
                    .and_then(|s| known(&s[0]))
            })
            .next()
            .map_or(channels, fixed)
    };
    for i in 1..=4 {
        if let (Some(s), Some(c)) = (cx.shape(i), known(&channels)) {
            // Before opset 9, `spatial = 0` gives per-activation statistics.
            let spatial = cx.opset >= 9 || cx.attr_i("spatial").unwrap_or(1) != 0;
            if spatial && s.len() == 1 && known(&s[0]).is_some_and(|n| n != c) {
                bail!(
                    "BatchNormalization input {i} has shape {}, X has {c} channels",
                    show(s)
                );
            }
        }
    }
    if cx.outputs.len() <= 1 {
        return Ok(());
    }
    if cx.opset >= 14 {
        // running_mean, running_var: the types of inputs 3 and 4, shape [C].
        for (k, i) in [(1, 3), (2, 4)] {
            let dtype = cx.dtype(i);
            cx.set_tensor(k, dtype, Some(vec![channels.clone()]));
        }
    } else {
        let spatial = cx.opset >= 9 || cx.attr_i("spatial").unwrap_or(1) != 0;
        let shape = if spatial { Some(vec![channels]) } else { None };
        for k in 1..cx.outputs.len().min(5) {
            let dtype = cx.dtype(if k % 2 == 1 { 3 } else { 4 });
            cx.set_tensor(k, dtype, shape.clone());
        }
    }
    Ok(())
}

/// Y is X; Mean and InvStdDev keep the dims before `axis` and have 1 after it, of `stash_type`.
fn layer_norm(cx: &mut InferCx) -> Result<(), InferError> {
    cx.pass_through(0, 0);
    if cx.outputs.len() <= 1 {
        return Ok(());
    }
    let stash = cx.attr_i("stash_type").unwrap_or(1);
    let dtype = DataType::from_onnx(stash as i32);
    let shape = match cx.shape(0) {
        Some(x) => {
            let a = axis(cx.attr_i("axis").unwrap_or(-1), x.len())?;
            Some(
                x.iter()
                    .enumerate()
                    .map(|(i, d)| if i < a { d.clone() } else { fixed(1) })
                    .collect::<Shape>(),
            )
        }
        None => None,
    };
    for k in 1..cx.outputs.len().min(3) {
        cx.set_tensor(k, dtype, shape.clone());
    }
    Ok(())
}

/// The mask: bool from opset 10, the input's type before.
fn dropout(cx: &mut InferCx) -> Result<(), InferError> {
    cx.pass_through(0, 0);
    if cx.outputs.len() > 1 {
        let shape = cx.shape(0).cloned();
        let dtype = if cx.opset >= 10 {
            Some(DataType::Bool)
        } else {
            cx.dtype(0)
        };
        cx.set_tensor(1, dtype, shape);
    }
    Ok(())
}

/// The per-element loss shape (`reduction = none`): the target's, filled in from the input's
/// `[N, C, d1, ...]`.
fn loss_shape(cx: &InferCx, input: usize, target: usize) -> Result<Option<Shape>, InferError> {
    let (x, t) = (cx.shape(input), cx.shape(target));
    if let (Some(x), Some(t)) = (x, t) {
        if x.len() < 2 || t.len() + 1 != x.len() {
            bail!(
                "{} input {} and target {} do not fit: target must have the input's rank - 1",
                cx.node.op_type(),
                show(x),
                show(t)
            );
        }
        let mut out = Shape::with_capacity(t.len());
        for (i, d) in t.iter().enumerate() {
            let xd = &x[if i == 0 { 0 } else { i + 1 }];
            match (known(d), known(xd)) {
                (Some(a), Some(b)) if a != b => bail!(
                    "{} target {} does not match input {} at dim {i}",
                    cx.node.op_type(),
                    show(t),
                    show(x)
                ),
                (Some(_), _) => out.push(d.clone()),
                (_, Some(_)) => out.push(xd.clone()),
                _ => out.push(d.clone().or_else(|| xd.clone())),
            }
        }
        return Ok(Some(out));
    }
    Ok(t.cloned().or_else(|| {
        x.map(|x| {
            x.iter()
                .enumerate()
                .filter(|&(i, _)| i != 1)
                .map(|(_, d)| d.clone())
                .collect()
        })
    }))
}

fn loss_output(cx: &mut InferCx) -> Result<(), InferError> {
    let dtype = cx.dtype(0);
    let reduction = cx.attr_s("reduction").unwrap_or("mean");
    let shape = match reduction {
        "none" => loss_shape(cx, 0, 1)?,
        "mean" | "sum" => {
            loss_shape(cx, 0, 1)?;
            Some(vec![])
        }
        r => bail!(
            "{} reduction '{r}' is not none, sum or mean",
            cx.node.op_type()
        ),
    };
    cx.set_tensor(0, dtype, shape);
    Ok(())
}

fn nll_loss(cx: &mut InferCx) -> Result<(), InferError> {
    loss_output(cx)
}

/// Output 0 the loss, output 1 (optional) the log-probabilities, shaped as the scores.
fn softmax_cross_entropy(cx: &mut InferCx) -> Result<(), InferError> {
    loss_output(cx)?;
    if cx.outputs.len() > 1 {
        cx.pass_through(0, 1);
    }
    Ok(())
}

pub const OPS: &[OpDef] = &[
    op("BatchNormalization", 1, batch_norm),
    op("InstanceNormalization", 1, same_as_input),
    op("LayerNormalization", 17, layer_norm),
    op("GroupNormalization", 18, same_as_input),
    op("RMSNormalization", 23, same_as_input),
    op("LpNormalization", 1, same_as_input),
    op("MeanVarianceNormalization", 9, same_as_input),
    op("LRN", 1, same_as_input),
    op("Softmax", 1, softmax),
    op("LogSoftmax", 1, softmax),
    op("Hardmax", 1, softmax),
    op("Dropout", 1, dropout),
    op("NegativeLogLikelihoodLoss", 12, nll_loss),
    op("SoftmaxCrossEntropyLoss", 12, softmax_cross_entropy),
];

/// Builds one node and runs an infer function on it, for the families' unit tests.
#[cfg(test)]
pub(crate) mod test_util {
    use crate::infer::{fixed, InferCx, InferError, Info, Shape, Ty};
    use crate::{InferFn, SymDim};
    use onnx_proto::{AttributeProto, NodeProto};
    use tensor::{DataType, Tensor};

    pub enum A {
        I(i64),
        Is(Vec<i64>),
        S(&'static str),
    }

    /// `-1` = unknown dim, `-2` = the symbol `n`.
    pub fn dims(d: &[i64]) -> Shape {
        d.iter()
            .map(|&v| match v {
                -1 => None,
                -2 => Some(SymDim::sym("n")),
                v => fixed(v),
            })
            .collect()
    }

    pub fn t(dtype: DataType, d: &[i64]) -> Option<Info> {
        Some(Info::of(Ty::tensor(Some(dtype), Some(dims(d)))))
    }

    pub fn f32s(d: &[i64]) -> Option<Info> {
        t(DataType::Float, d)
    }

    pub fn known_i64(v: &[i64]) -> Option<Info> {
        Some(Info::known(
            Tensor::from_vec(vec![v.len()], v.to_vec()).unwrap(),
        ))
    }

    pub fn known_f32(v: &[f32]) -> Option<Info> {
        Some(Info::known(
            Tensor::from_vec(vec![v.len()], v.to_vec()).unwrap(),
        ))
    }

    /// Runs `f` on a node with `inputs` (None = omitted) and `n_out` outputs.
    pub fn run(
        f: InferFn,
        opset: i64,
        inputs: &[Option<Info>],
        n_out: usize,
        attrs: Vec<(&str, A)>,
    ) -> Result<Vec<Ty>, InferError> {
        let attribute = attrs
            .into_iter()
            .map(|(name, a)| {
                let mut p = AttributeProto {
                    name: Some(name.to_string()),
                    ..Default::default()
                };
                match a {
                    A::I(v) => p.i = Some(v),
                    A::Is(v) => p.ints = v,
                    A::S(v) => p.s = Some(v.as_bytes().to_vec().into()),
                }
                p
            })
            .collect();
        let node = NodeProto {
            input: inputs
                .iter()
                .enumerate()
                .map(|(i, x)| {
                    if x.is_some() {
                        format!("i{i}")
                    } else {
                        String::new()
                    }
                })
                .collect(),
            output: (0..n_out).map(|k| format!("o{k}")).collect(),
            attribute,
            ..Default::default()
        };
        let mut cx = InferCx::new(&node, opset, inputs.iter().map(Option::as_ref).collect());
        f(&mut cx)?;
        Ok(cx.outputs.into_iter().map(|o| o.ty).collect())
    }

    pub fn shape_of(t: &Ty) -> Option<Shape> {
        t.shape().cloned()
    }
}

#[cfg(test)]
mod tests {
    use super::test_util::*;
    use super::*;
    use crate::Ty;

    #[test]
    fn layer_norm_statistics_keep_leading_dims_in_stash_type() {
        let out = run(
            layer_norm,
            17,
            &[t(DataType::Float16, &[2, 3, 4]), t(DataType::Float16, &[4])],
            3,
            vec![("axis", A::I(1))],
        )
        .unwrap();
        assert_eq!(
            out[0],
            Ty::tensor(Some(DataType::Float16), Some(dims(&[2, 3, 4])))
        );
        assert_eq!(
            out[1],
            Ty::tensor(Some(DataType::Float), Some(dims(&[2, 1, 1])))
        );
        assert_eq!(out[2], out[1]);
    }

    #[test]
    fn batch_norm_training_outputs_are_per_channel() {
        let c = f32s(&[3]);
        let d = t(DataType::Double, &[3]);
        let out = run(
            batch_norm,
            15,
            &[f32s(&[-2, 3, 4]), c.clone(), c.clone(), d.clone(), d],
            3,
            vec![("training_mode", A::I(1))],
        )
        .unwrap();
        assert_eq!(out[1], Ty::tensor(Some(DataType::Double), Some(dims(&[3]))));
        assert!(run(
            batch_norm,
            15,
            &[f32s(&[2, 4, 4]), c.clone(), c.clone(), c.clone(), c],
            1,
            vec![]
        )
        .is_err());
    }

    #[test]
    fn dropout_mask_is_bool_from_opset_10() {
        let out = run(dropout, 13, &[f32s(&[2, 3])], 2, vec![]).unwrap();
        assert_eq!(
            out[1],
            Ty::tensor(Some(DataType::Bool), Some(dims(&[2, 3])))
        );
        let out = run(dropout, 7, &[f32s(&[2, 3])], 2, vec![]).unwrap();
        assert_eq!(out[1].dtype(), Some(DataType::Float));
    }

    #[test]
    fn softmax_default_axis_changes_at_13() {
        assert!(run(softmax, 13, &[f32s(&[5])], 1, vec![]).is_ok());
        assert!(run(softmax, 11, &[f32s(&[5])], 1, vec![]).is_err());
    }

    #[test]
    fn losses() {
        let x = f32s(&[-2, 5, 7]);
        let y = t(DataType::Int64, &[-1, 7]);
        let out = run(
            nll_loss,
            13,
            &[x.clone(), y.clone()],
            1,
            vec![("reduction", A::S("none"))],
        )
        .unwrap();
        assert_eq!(shape_of(&out[0]), Some(dims(&[-2, 7])));
        let out = run(softmax_cross_entropy, 13, &[x.clone(), y], 2, vec![]).unwrap();
        assert_eq!(shape_of(&out[0]), Some(dims(&[])));
        assert_eq!(shape_of(&out[1]), Some(dims(&[-2, 5, 7])));
        assert!(run(nll_loss, 13, &[x, t(DataType::Int64, &[3, 8])], 1, vec![]).is_err());
    }
}
