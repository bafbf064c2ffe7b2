//! ## What it does
//! Flags `repeat_interleave` (`torch.repeat_interleave(x, r, dim)` and `x.repeat_interleave(r)`)
//! in model code.
//!
//! ## Why is this bad?
//! ONNX has no RepeatInterleave operator: the exporter expands it into Split/Concat or
//! Tile/Expand/Reshape chains (`symbolic_opset9.repeat_interleave`,
//! `symbolic_opset13.repeat_interleave`). It refuses repeats whose rank or size is unknown at
//! export ("Unsupported: ONNX export of repeat_interleave for unknown repeats rank"), older
//! PyTorch releases refuse it at opset 11 ("Exporting the operator aten::repeat_interleave to
//! ONNX opset version 11 is not supported"), and tensor-valued repeats give a data-dependent
//! output length.
//!
//! ## Example
//! ```python
//! def forward(self, x):
//!     return x.repeat_interleave(2, dim=1)
//! ```
//!
//! ## Fix
//! For a constant repeat count, insert an axis, expand, and merge it back; this exports as
//! `Unsqueeze` + `Expand` + `Reshape` on every opset:
//! ```python
//! def forward(self, x):
//!     return x.unsqueeze(2).expand(-1, -1, 2, -1, -1).flatten(1, 2)
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use diagnostics::Severity;
use ruff_python_ast as ast;
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL008",
    name: "repeat-interleave",
    severity: Severity::Warning,
    fix: FixKind::None,
    summary: "`repeat_interleave` has no ONNX op and exports as a fragile expansion",
    source: include_str!("repeat_interleave.rs"),
};

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    if !ch.in_model() {
        return;
    }
    let hit = ch
        .torch_fn(call)
        .is_some_and(|q| q == "torch.repeat_interleave")
        || matches!(ch.method(call), Some(("repeat_interleave", _)));
    if !hit {
        return;
    }
    let i = ch.report(
        &RULE,
        call.func.range(),
        "`repeat_interleave` has no ONNX operator; the exporter expands it and refuses unknown repeats",
    );
    ch.help(i, "for a constant count r on dim d: `x.unsqueeze(d + 1).expand(..., r, ...).flatten(d, d + 1)`");
}
