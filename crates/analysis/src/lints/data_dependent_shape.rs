//! Flags operators whose output shape depends on the values of their inputs.
//!
//! ## What it does
//! Reports NonZero, Unique, NonMaxSuppression and Compress nodes, and TopK nodes whose `K` is
//! computed (not an initializer or Constant), once per target that implements the op, with the
//! severity the target's profile gives `data-dependent-shape`. Targets that lack the op get
//! `target-op-unsupported` instead.
//!
//! ## Why is this bad?
//! The output size is only known after the node ran: engines that plan memory ahead (TensorRT)
//! need an output allocator and cannot fuse across the node; shape inference stops at it.
//!
//! ## Example
//! `x[mask]` or `torch.nonzero(x)` exports NonZero; `x.topk(n // 2)` with `n = x.shape[0]`
//! exports TopK with a computed K.
//!
//! ## Fix
//! PyTorch side: keep shapes static (`torch.where(mask, x, 0)` instead of `x[mask]`; a constant k).
//! ONNX side: fold K to a constant with onnxsim when the input shape is fixed.

use super::{module_suffix, node_label, push, severity, Cx, Finding};
use crate::targets::Support;
use crate::Code;

const ALWAYS: &[&str] = &["NonZero", "Unique", "NonMaxSuppression", "Compress"];

pub(super) fn run(cx: &Cx, out: &mut Vec<Finding>) {
    for n in cx.nodes.iter().filter(|n| super::default_domain(n)) {
        let op = n.op_type();
        let why = if ALWAYS.contains(&op) {
            "its output size depends on the input values".to_string()
        } else if op == "TopK" && cx.opset >= 10 {
            match n.input.get(1) {
                Some(k) if !cx.constants.contains_key(k.as_str()) => {
                    format!("its K ('{k}') is computed at run time")
                }
                _ => continue,
            }
        } else {
            continue;
        };
        for &p in cx.targets {
            if !matches!(p.support("", op, cx.opset), Support::Yes(_)) {
                continue;
            }
            let Some(h) = p.hazard("data-dependent-shape") else {
                continue;
            };
            push(
                out,
                Some(p),
                Code::DataDependentShape,
                severity(&h.severity),
                cx.node_location(n),
                format!("{}{}: {why}; {}", node_label(n), module_suffix(n), h.note),
                format!("keep the shape static on the PyTorch side (torch.where instead of boolean indexing, a constant k); {}", super::cite(p, &h.source)),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{fixture::*, lint};

    #[test]
    fn nonzero_and_computed_topk_are_flagged_but_constant_k_is_not() {
        let m = model(
            13,
            vec![
                node("NonZero", "/mask/NonZero", &["x"], &["idx"]),
                node("TopK", "/head/TopK", &["x", "k_dyn"], &["v", "i"]),
                node("TopK", "/head/TopK_1", &["x", "k"], &["v2", "i2"]),
            ],
            vec![int64("k", &[3])],
        );
        let f: Vec<_> = summary(&lint(
            &m,
            "m.onnx",
            &targets("tensorrt-8.6,onnxruntime-cpu"),
        ))
        .into_iter()
        .filter(|s| s.1 == "ODT020")
        .collect();
        assert_eq!(
            f,
            vec![
                (
                    "tensorrt-8.6".into(),
                    "ODT020".into(),
                    "warning".into(),
                    "/mask/NonZero".into()
                ),
                (
                    "onnxruntime-cpu".into(),
                    "ODT020".into(),
                    "info".into(),
                    "/mask/NonZero".into()
                ),
                (
                    "tensorrt-8.6".into(),
                    "ODT020".into(),
                    "warning".into(),
                    "/head/TopK".into()
                ),
                (
                    "onnxruntime-cpu".into(),
                    "ODT020".into(),
                    "info".into(),
                    "/head/TopK".into()
                ),
            ]
        );
    }
}
