//! Flags a graph input named as a batch whose leading (batch) dimension is a fixed number.
//!
//! ## What it does
//! Looks at the main graph's inputs (initializers excluded) of rank 2 or more whose name says they
//! hold a batch — a word `batch`, `batches` or `batched` in it (`batch_images`, `input_batch`,
//! `imgBatch`), not followed by a word that makes it a property of a batch (`batch_indices`,
//! `batch_size`, `batchIds`: RoiAlign's `batch_indices` is a list of indices) — and reports, as
//! info, each one whose leading dimension is a fixed number instead of a symbol.
//! Inputs with other names are not reported: a static shape is a legitimate choice (a batch-1
//! TensorRT engine, a static GRU), and the shape alone cannot tell it from a forgotten
//! `dynamic_axes`; the name is the one place the model states the intent.
//!
//! ## Why is this bad?
//! The model only accepts that batch size: ONNX Runtime refuses any other ("Got invalid dimensions
//! for input: batch_images"), and static-shape backends build engines for that size only. It is
//! what `torch.onnx.export` writes when no `dynamic_axes` / `dynamic_shapes` names the batch axis:
//! the example input's batch (usually 1) becomes part of the model.
//!
//! ## Example
//! `torch.onnx.export(model, torch.randn(1, 3, 224, 224), "m.onnx", input_names=["batch_images"])`
//! gives the input `batch_images: float[1,3,224,224]`.
//!
//! ## Fix
//! PyTorch side: `dynamic_axes={"batch_images": {0: "batch"}}` (TorchScript exporter) or
//! `dynamic_shapes={"x": {0: torch.export.Dim("batch")}}` (dynamo). ONNX side: set the input's dim 0
//! to a `dim_param` (and check the graph has no shape constants that assume it: ODT033).

use super::{push, Cx, Finding};
use crate::Code;
use diagnostics::Severity;
use onnx_ir::ValueType;
use ops::infer::show;
use ops::Ty;
use std::collections::HashSet;

/// Does `name` contain the word batch / batches / batched (`_`, `-`, `.`, `/`, digits or a
/// camelCase boundary separate words), not followed by a word that makes it a property of the
/// batch (`batch_indices`, `batch_size`, `batchIds`)?
fn names_a_batch(name: &str) -> bool {
    let mut words: Vec<String> = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if !c.is_ascii_alphabetic() {
            words.push(std::mem::take(&mut cur));
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower {
            words.push(std::mem::take(&mut cur));
        }
        prev_lower = c.is_ascii_lowercase();
        cur.push(c.to_ascii_lowercase());
    }
    words.push(cur);
    words.retain(|w| !w.is_empty());
    words.iter().enumerate().any(|(i, w)| {
        matches!(w.as_str(), "batch" | "batches" | "batched")
            && !words.get(i + 1).is_some_and(|next| {
                matches!(
                    next.as_str(),
                    "index"
                        | "indices"
                        | "idx"
                        | "id"
                        | "ids"
                        | "size"
                        | "sizes"
                        | "dim"
                        | "dims"
                        | "num"
                        | "count"
                        | "len"
                        | "length"
                        | "first"
                        | "norm"
                )
            })
    })
}

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    let g = cx.model.graph();
    let inits: HashSet<&str> = g.initializer.iter().map(|t| t.name()).collect();
    for v in g.input.iter().filter(|v| !inits.contains(v.name())) {
        if !names_a_batch(v.name()) {
            continue;
        }
        let ty = Ty::from_value_type(&ValueType::from_proto(v.r#type.as_ref()));
        let Some(shape) = ty.shape().filter(|s| s.len() >= 2) else {
            continue;
        };
        let Some(k) = shape.first().and_then(|d| d.as_ref()?.as_known()) else {
            continue;
        };
        push(
            out,
            None,
            Code::FixedBatchDim,
            Severity::Info,
            cx.value_location(v.name()),
            format!(
                "input '{}' {} is named as a batch but its leading dim is fixed to {k}: the model only accepts batches of {k}",
                v.name(),
                show(shape)
            ),
            format!(
                "if it should take any batch size, export with dynamic_axes={{\"{}\": {{0: \"batch\"}}}} (or dynamic_shapes with torch.export.Dim)",
                v.name()
            ),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::super::{fixture::*, lint};
    use super::names_a_batch;
    use onnx_proto::ValueInfoProto;
    use ops::infer::fixed;
    use ops::{SymDim, Ty};
    use tensor::DataType;

    fn with_input(name: &str, dims: &[&str]) -> onnx_ir::Model {
        let mut m = model(17, vec![node("Relu", "/Relu", &[name], &["y"])], vec![]);
        let shape = dims
            .iter()
            .map(|d| match d.parse::<i64>() {
                Ok(n) => fixed(n),
                Err(_) => Some(SymDim::sym(d)),
            })
            .collect();
        m.proto.graph.as_mut().unwrap().input = vec![ValueInfoProto {
            name: Some(name.into()),
            r#type: crate::type_proto(&Ty::tensor(Some(DataType::Float), Some(shape))),
            ..Default::default()
        }];
        onnx_ir::Model::from_proto(m.proto)
    }

    fn odt036(m: &onnx_ir::Model) -> Vec<(String, String, String, String)> {
        summary(&lint(m, "m.onnx", &[]))
            .into_iter()
            .filter(|s| s.1 == "ODT036")
            .collect()
    }

    #[test]
    fn a_batch_named_input_with_a_fixed_leading_dim_is_info() {
        assert_eq!(
            odt036(&with_input("batch_images", &["1", "3", "8", "8"])),
            vec![(
                String::new(),
                "ODT036".into(),
                "info".into(),
                "batch_images".into()
            )]
        );
    }

    #[test]
    fn a_symbolic_batch_or_another_name_is_not_reported() {
        assert!(odt036(&with_input("batch_images", &["batch", "3", "8", "8"])).is_empty());
        // A static model is a legitimate choice (clean_cnn_ts, clean_gru_ts): no intent stated.
        assert!(odt036(&with_input("x", &["1", "3", "16", "16"])).is_empty());
        assert!(odt036(&with_input("images", &["2", "6", "8"])).is_empty());
        // RoiAlign's batch_indices (rank 1, and an index list) is not a batch.
        assert!(odt036(&with_input("batch_indices", &["3"])).is_empty());
        assert!(odt036(&with_input("batch", &["3"])).is_empty());
    }

    #[test]
    fn batch_is_a_word_of_the_name() {
        for n in [
            "batch",
            "batch_images",
            "input_batch",
            "imgBatch",
            "img-batched",
            "Batches.0",
        ] {
            assert!(names_a_batch(n), "{n}");
        }
        for n in [
            "x",
            "images",
            "batchnorm_in",
            "microbatching",
            "mybatch",
            "batch_indices",
            "batchIds",
            "batch_size",
        ] {
            assert!(!names_a_batch(n), "{n}");
        }
    }
}
