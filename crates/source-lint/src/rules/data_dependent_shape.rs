//! ## What it does
//! Flags ops whose output shape depends on tensor values, in model code: `torch.nonzero` /
//! `x.nonzero()`, `torch.argwhere`, `masked_select`, `torch.unique` / `unique_consecutive`,
//! one-argument `torch.where(cond)`, and reading through a boolean mask `x[mask]`.
//!
//! ## Why is this bad?
//! They export (`NonZero` since opset 9, `Unique` since opset 11: `symbolic_opset9._unique2`
//! refuses opset < 11), but the graph gets a dimension no shape inference can know. TensorRT
//! builds need bounded shapes and its ONNX parser lists `Unique` as unsupported; downstream
//! `Reshape`/`Expand` on such values is where ONNX Runtime and TensorRT shape errors come from,
//! and `torch.export` stops on the unbacked size unless it is constrained.
//!
//! ## Example
//! ```python
//! def forward(self, scores):
//!     keep = torch.nonzero(scores > 0.5)
//!     return scores[keep[:, 0]]
//! ```
//!
//! ## Fix
//! Keep shapes static: select with masks and `torch.where(cond, a, b)`, or take a fixed number
//! of elements with `topk`, and filter after inference.
//! ```python
//! def forward(self, scores):
//!     return torch.where(scores > 0.5, scores, torch.zeros_like(scores))
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use crate::rules::index_elements;
use diagnostics::Severity;
use ruff_python_ast as ast;
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL007",
    name: "data-dependent-shape",
    severity: Severity::Warning,
    fix: FixKind::None,
    summary: "`nonzero`, `masked_select`, `unique`, one-argument `torch.where`, `x[mask]` reads: value-dependent output shapes",
    source: include_str!("data_dependent_shape.rs"),
};

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    if !ch.in_model() {
        return;
    }
    let name = if let Some(q) = ch.torch_fn(call) {
        match q.as_str() {
            "torch.nonzero"
            | "torch.argwhere"
            | "torch.masked_select"
            | "torch.unique"
            | "torch.unique_consecutive"
            | "torch.nonzero_static" => {
                if q == "torch.nonzero_static" {
                    return;
                }
                q
            }
            "torch.where"
                if call.arguments.args.len() == 1 && call.arguments.keywords.is_empty() =>
            {
                "torch.where(cond)".to_string()
            }
            _ => return,
        }
    } else if let Some((m, _)) = ch.method(call) {
        match m {
            "nonzero" | "argwhere" | "masked_select" | "unique" | "unique_consecutive" => {
                format!(".{m}()")
            }
            _ => return,
        }
    } else {
        return;
    };
    let i = ch.report(
        &RULE,
        call.func.range(),
        format!("`{name}` has an output shape that depends on tensor values"),
    );
    ch.help(
        i,
        "keep shapes static: `torch.where(cond, a, b)`, masks, or `topk` with a fixed k; filter after inference",
    );
}

pub(crate) fn check_subscript_load(ch: &mut Checker, s: &ast::ExprSubscript) {
    if !ch.in_model() {
        return;
    }
    // A mask computed from tensors in this function (`l_mask = c_mask.expand_as(boxes)`)
    // selects from a tensor even when the receiver's type is unknown (`boxes[l_mask]`,
    // `out_m.vertices[is_male]`).
    let elements = index_elements(&s.slice);
    let computed_mask = elements.iter().any(|e| ch.is_computed_mask(e));
    // Not a Python list written out here (`scales = [1.0, 2.0]; scales[padded]`).
    let literal =
        matches!(s.value.as_ref(), ast::Expr::Name(n) if ch.literal(n.id.as_str()).is_some());
    if !(ch.is_tensor(&s.value)
        || (computed_mask
            && !literal
            && matches!(
                s.value.as_ref(),
                ast::Expr::Name(_) | ast::Expr::Attribute(_)
            )))
    {
        return;
    }
    if !elements.iter().any(|e| ch.is_bool_mask(e)) {
        return;
    }
    let text = ch.text(s.range()).to_string();
    let i = ch.report(
        &RULE,
        s.range(),
        format!("`{text}` selects through a boolean mask: the result's length depends on the data"),
    );
    ch.help(i, "keep the shape: `torch.where(mask, x, 0)` or `x * mask`, and reduce over the masked values");
}
