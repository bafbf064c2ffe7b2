//! ## What it does
//! Flags `torch.einsum` in model code.
//!
//! ## Why is this bad?
//! `einsum` exports as the ONNX `Einsum` operator, added in opset 12
//! (`symbolic_opset12.einsum`; there is no lower-opset fallback). Backends support it
//! unevenly: TensorRT's ONNX parser implements only a subset of equations (no ellipsis, limited
//! broadcasting, floating-point inputs), and many edge runtimes have no Einsum kernel, so a model
//! that runs in ONNX Runtime fails to build elsewhere.
//!
//! ## Example
//! ```python
//! def forward(self, q, k):
//!     return torch.einsum("bhqd,bhkd->bhqk", q, k)
//! ```
//!
//! ## Fix
//! Spell the contraction with `matmul`, `transpose` and `reshape`, which every backend has:
//! ```python
//! def forward(self, q, k):
//!     return q @ k.transpose(-1, -2)
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use crate::OpsetNeed;
use diagnostics::Severity;
use ruff_python_ast as ast;
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL009",
    name: "einsum",
    severity: Severity::Warning,
    fix: FixKind::None,
    summary: "`torch.einsum` needs opset >= 12 and is unevenly supported by backends",
    source: include_str!("einsum.rs"),
};

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    if ch
        .torch_fn(call)
        .is_none_or(|q| q != "torch.einsum" && q != "torch.functional.einsum")
    {
        return;
    }
    let (line, _) = ch
        .index
        .line_col(ch.source, call.range().start().to_usize());
    ch.facts.needs.push(OpsetNeed {
        op: "einsum".into(),
        min_opset: 12,
        file: ch.file.to_string(),
        line,
    });
    if !ch.in_model() {
        return;
    }
    let i = ch.report(
        &RULE,
        call.func.range(),
        "`torch.einsum` exports as ONNX Einsum (opset >= 12), which TensorRT and edge runtimes support only partly",
    );
    ch.help(
        i,
        "rewrite the contraction with `matmul`/`transpose`/`reshape`",
    );
}
