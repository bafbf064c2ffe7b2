//! Flags Dropout and BatchNormalization nodes exported in training mode.
//!
//! ## What it does
//! Reports BatchNormalization with `training_mode=1` (opset 14+) or, before opset 14, with the
//! training outputs (running mean/var, saved mean/var) connected; and Dropout whose
//! `training_mode` input is a constant true or is not a constant at all, or (opset < 7) whose
//! `is_test` attribute is 0.
//!
//! ## Why is this bad?
//! Inference then drops activations at random and normalises with batch statistics: outputs
//! differ from run to run and from PyTorch's `eval()` results. TensorRT 10 requires Dropout's
//! `is_training` input to be an initializer that evaluates to false.
//!
//! ## Example
//! `torch.onnx.export(model, x, "m.onnx", training=torch.onnx.TrainingMode.TRAINING)`, or
//! exporting without calling `model.eval()` first under `TrainingMode.PRESERVE`.
//!
//! ## Fix
//! PyTorch side: call `model.eval()` and export with the default `training=TrainingMode.EVAL`.
//! ONNX side: set `training_mode` to false / 0 and drop the training outputs.

use super::{module_suffix, node_label, push, Cx, Finding};
use crate::Code;
use diagnostics::Severity;

fn is_true(cx: &Cx, name: &str) -> Option<bool> {
    let t = cx.constants.get(name)?;
    let v = tensor::Tensor::from_proto(t).ok()?;
    let b = v.to_vec::<bool>().ok()?;
    Some(b.first().copied().unwrap_or(false))
}

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    for n in cx.nodes.iter().filter(|n| super::default_domain(n)) {
        let int_attr = |name: &str| {
            n.attribute
                .iter()
                .find(|a| a.name() == name)
                .and_then(|a| a.i)
        };
        let why = match n.op_type() {
            "BatchNormalization" if cx.opset >= 14 => match int_attr("training_mode") {
                Some(1) => "training_mode=1: it normalises with the batch's statistics",
                _ => continue,
            },
            "BatchNormalization" => {
                if n.output.iter().skip(1).any(|o| !o.is_empty()) {
                    "its training outputs (running/saved mean and variance) are connected"
                } else {
                    continue;
                }
            }
            "Dropout" if cx.opset < 7 => match int_attr("is_test") {
                Some(0) => "is_test=0: it drops activations at inference",
                _ => continue,
            },
            "Dropout" => match n.input.get(2).filter(|s| !s.is_empty()) {
                None => continue,
                Some(t) => match is_true(cx, t) {
                    Some(false) => continue,
                    Some(true) => {
                        "training_mode is constant true: it drops activations at inference"
                    }
                    None => "training_mode is computed at run time, not a constant false",
                },
            },
            _ => continue,
        };
        push(
            out,
            None,
            Code::TrainingModeExport,
            Severity::Warning,
            cx.node_location(n),
            format!(
                "{}{} was exported in training mode: {why}",
                node_label(n),
                module_suffix(n)
            ),
            "call model.eval() before torch.onnx.export and keep training=TrainingMode.EVAL".into(),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::{fixture::*, lint};

    #[test]
    fn training_dropout_and_batchnorm_are_flagged_eval_ones_are_not() {
        let mut bn = node(
            "BatchNormalization",
            "/bn/BatchNormalization",
            &["x", "s", "b", "m", "v"],
            &["y", "rm", "rv"],
        );
        bn.attribute.push(attr_i("training_mode", 1));
        let m = model(
            15,
            vec![
                bn,
                node("Dropout", "/drop/Dropout", &["y", "ratio", "t"], &["z"]),
                node("Dropout", "/drop2/Dropout", &["z", "ratio", "f"], &["w"]),
                node(
                    "BatchNormalization",
                    "/bn2/BatchNormalization",
                    &["w", "s", "b", "m", "v"],
                    &["o"],
                ),
            ],
            vec![bool_scalar("t", true), bool_scalar("f", false)],
        );
        let f: Vec<_> = summary(&lint(&m, "m.onnx", &[]))
            .into_iter()
            .filter(|s| s.1 == "ODT031")
            .map(|s| s.3)
            .collect();
        assert_eq!(
            f,
            vec!["/bn/BatchNormalization".to_string(), "/drop/Dropout".into()]
        );
    }
}
