//! ## What it does
//! Flags `F.grid_sample` (and `torch.grid_sampler`) and records that the project needs
//! opset 16 for it. Calls in functions beside a model that export does not reach (data
//! augmentation, evaluation) record the need but are not reported.
//!
//! ## Why is this bad?
//! ONNX added `GridSample` in opset 16, and the exporter maps `aten::grid_sampler` only from
//! there (`symbolic_opset16.grid_sampler`): exporting with a lower `opset_version` fails with
//! "Exporting the operator 'aten::grid_sampler' to ONNX opset version N is not supported".
//! TensorRT supports `GridSample` from TensorRT 8.6 on, and `GridSample`-20 (opset 20) changed
//! the attribute values (`linear`/`cubic` instead of `bilinear`/`bicubic`), so older runtimes
//! may reject models exported at opset 20.
//!
//! ## Example
//! ```python
//! out = F.grid_sample(feat, grid, align_corners=False)
//! torch.onnx.export(model, (x,), "m.onnx", opset_version=11)
//! ```
//!
//! ## Fix
//! Export with `opset_version=16` or later (and a runtime that has GridSample):
//! ```python
//! torch.onnx.export(model, (x,), "m.onnx", opset_version=17)
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use crate::OpsetNeed;
use diagnostics::Severity;
use ruff_python_ast as ast;
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL010",
    name: "grid-sample",
    severity: Severity::Info,
    fix: FixKind::None,
    summary: "`F.grid_sample` exports only at opset >= 16 (GridSample)",
    source: include_str!("grid_sample.rs"),
};

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    let Some(q) = ch.torch_fn(call) else { return };
    if !matches!(
        q.as_str(),
        "torch.nn.functional.grid_sample" | "torch.grid_sampler" | "torch.grid_sampler_2d"
    ) {
        return;
    }
    let (line, _) = ch
        .index
        .line_col(ch.source, call.range().start().to_usize());
    ch.facts.needs.push(OpsetNeed {
        op: "grid_sample".into(),
        min_opset: 16,
        file: ch.file.to_string(),
        line,
    });
    // Data augmentation warps images with grid_sample too; only the exported path matters.
    if ch.in_side_code() {
        return;
    }
    let i = ch.report(
        &RULE,
        call.func.range(),
        "`grid_sample` exports as ONNX GridSample, which needs opset_version >= 16",
    );
    ch.help(
        i,
        "export with `opset_version=16` or later; TensorRT has GridSample from 8.6",
    );
}
