//! ## What it does
//! Flags in-place indexed writes in model code: `x.scatter_(...)`, `x.index_put_(...)`,
//! `x.index_add_(...)`, `x.index_copy_(...)`, `x.masked_scatter_(...)`, and augmented
//! assignment into an indexed tensor: `x[idx] += v`, `canvas[:, :, y0:y1, x0:x1] += tile`,
//! `x[..., 1:3] += 0.5`, `x[:, 0] -= 1`.
//!
//! ## Why is this bad?
//! These trace to `index_put`/`scatter` on an existing buffer. The exporter needs opset 11 for
//! `ScatterElements`/`ScatterND` (`symbolic_opset11.scatter`, `index_put`) and opset 16 for a
//! reduction attribute (`symbolic_opset16.scatter_add`); below that `scatter_add` is emulated by
//! scattering into zeros and adding. ONNX leaves duplicate indices undefined for scatters without
//! reduction, so `x[idx] += v` with repeated indices may differ between runtimes, and in-place
//! updates of a view are not reflected in other aliases of the tensor in the exported graph.
//!
//! ## Example
//! ```python
//! def forward(self, x, idx, v):
//!     x[idx] += v
//!     return x
//! ```
//!
//! ## Fix
//! Use the out-of-place form so the graph has one explicit data flow, and an accumulate form
//! for repeated indices:
//! ```python
//! def forward(self, x, idx, v):
//!     return x.index_add(0, idx, v)
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use crate::rules::index_elements;
use diagnostics::Severity;
use ruff_python_ast::{self as ast, Expr};
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL003",
    name: "inplace-index-write",
    severity: Severity::Warning,
    fix: FixKind::None,
    summary: "in-place `scatter_`/`index_put_`/`index_add_` or indexed `+=` in model code",
    source: include_str!("inplace_index_write.rs"),
};

const METHODS: &[&str] = &[
    "scatter_",
    "scatter_add_",
    "scatter_reduce_",
    "index_put_",
    "index_add_",
    "index_copy_",
    "index_fill_",
    "index_reduce_",
    "masked_scatter_",
    "put_",
];

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    if !ch.in_model() {
        return;
    }
    let Some((m, _)) = ch.method(call) else {
        return;
    };
    if !METHODS.contains(&m) {
        return;
    }
    let (line, _) = ch
        .index
        .line_col(ch.source, call.range().start().to_usize());
    ch.facts.needs.push(crate::OpsetNeed {
        op: "scatter/index_put".into(),
        min_opset: 11,
        file: ch.file.to_string(),
        line,
    });
    let out_of_place = m.trim_end_matches('_');
    let i = ch.report(
        &RULE,
        call.func.range(),
        format!("in-place `.{m}(...)` exports as a scatter into the existing tensor"),
    );
    ch.help(
        i,
        format!("use the out-of-place `.{out_of_place}(...)` and bind its result"),
    );
}

pub(crate) fn check_aug_store(ch: &mut Checker, target: &ast::ExprSubscript) {
    if !ch.in_model() {
        return;
    }
    let tensor_index = index_elements(&target.slice)
        .iter()
        .any(|e| !matches!(e, Expr::Slice(_) | Expr::EllipsisLiteral(_)) && ch.is_tensor(e));
    // `x[idx] += v` with a tensor index, or any indexed update of a tensor in place:
    // `coords[n, j] += d`, `canvas[:, :, y0:y1] += tile`, `tok[:, :, 0] += t`.
    if !(tensor_index || ch.is_tensor(&target.value)) {
        return;
    }
    let text = ch.text(target.range()).to_string();
    let i = ch.report(
        &RULE,
        target.range(),
        format!("indexed in-place update `{text} op= ...` exports as aten::index_put"),
    );
    ch.help(
        i,
        "use `x.index_add(dim, idx, v)` / `x.scatter_add(dim, idx, v)` (opset >= 16 for a reduction) out of place",
    );
}
