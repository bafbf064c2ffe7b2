//! ## What it does
//! Flags `torch.onnx.export(..., keep_initializers_as_inputs=True)` (also through a name bound
//! once to `True`: `KEEP_INIT = True`), and the same setting in a
//! dict of export arguments wherever it is written (`EXPORT_KW = dict(keep_initializers_as_inputs=
//! True)` spliced into the call as `**EXPORT_KW`, or `{"keep_initializers_as_inputs": True, ...}`
//! returned by a helper that another file's export splices, `kw.update(keep_initializers_as_inputs=
//! True)`, `kw["keep_initializers_as_inputs"] = True`), reported at the dict entry: the argument
//! belongs to `torch.onnx.export` alone. So is the keyword handed to whatever passes it on to the
//! exporter: `functools.partial(torch.onnx.export, ...)`, a wrapper of the project, Lightning's
//! `model.to_onnx(path, sample, ...)`.
//!
//! ## Why is this bad?
//! Every weight becomes a graph input as well as an initializer. Since IR version 4 ONNX does not
//! need this, and runtimes treat such initializers as overridable defaults: ONNX Runtime cannot
//! constant-fold through them (its graph optimizer warns that the initializer "appears in graph
//! inputs and will not be treated as constant value/weight"), TensorRT sees them as network
//! inputs, and `onnxsim`/constant folding are blocked. The model gets slower and harder to
//! optimise for no benefit.
//!
//! ## Example
//! ```python
//! torch.onnx.export(model, (x,), "m.onnx", keep_initializers_as_inputs=True)
//! ```
//!
//! ## Fix
//! Drop the argument or pass `False` (unsafe fix: it changes the model's input list, which
//! matters only if a caller feeds weights as inputs):
//! ```python
//! torch.onnx.export(model, (x,), "m.onnx", keep_initializers_as_inputs=False)
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use crate::rules::{keyword, string_literal};
use crate::Edit;
use diagnostics::Severity;
use ruff_python_ast::{self as ast, Expr};
use ruff_text_size::{Ranged, TextRange};

pub(crate) const RULE: Rule = Rule {
    code: "ODL019",
    name: "keep-initializers-as-inputs",
    severity: Severity::Warning,
    fix: FixKind::Unsafe,
    summary:
        "`keep_initializers_as_inputs=True` makes weights graph inputs and blocks optimisation",
    source: include_str!("keep_initializers_as_inputs.rs"),
};

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    // The keyword is the exporter's alone: wherever a call is handed it (the export, `dict(...)`,
    // `kw.update(...)`, a partial or wrapper of the export, `model.to_onnx(...)`), it ends up
    // there. A dict spliced into the export (`**EXPORT_KW`) is reported where it is written.
    if let Some(k) = keyword(call, "keep_initializers_as_inputs") {
        report(ch, &k.value, k.range());
        return;
    }
    // `torch.onnx.export(model, x, path, True, False, ..., OperatorExportTypes.ONNX, 11, True,
    // axes, True)`: given by position, as before torch 2.5.
    if let Some(value) =
        crate::rules::positional_export_argument(ch, call, "keep_initializers_as_inputs")
    {
        report(ch, value, value.range());
    }
}

/// `kw["keep_initializers_as_inputs"] = True`; whether it reported.
pub(crate) fn check_store(ch: &mut Checker, target: &ast::ExprSubscript, value: &Expr) -> bool {
    if string_literal(&target.slice) == Some("keep_initializers_as_inputs")
        && matches!(value, Expr::BooleanLiteral(b) if b.value)
    {
        report(
            ch,
            value,
            TextRange::new(target.slice.range().start(), value.range().end()),
        );
        return true;
    }
    false
}

/// `{"keep_initializers_as_inputs": True, ...}`.
pub(crate) fn check_dict(ch: &mut Checker, dict: &ast::ExprDict) {
    for item in &dict.items {
        let Some(key) = &item.key else { continue };
        if string_literal(key) == Some("keep_initializers_as_inputs") {
            report(
                ch,
                &item.value,
                TextRange::new(key.range().start(), item.value.range().end()),
            );
        }
    }
}

fn report(ch: &mut Checker, value: &Expr, range: TextRange) {
    // `keep_initializers_as_inputs=KEEP_INIT` with `KEEP_INIT = True` bound once.
    let literal = match value {
        Expr::Name(n) => crate::rules::module_constant(ch, n.id.as_str()),
        e => Some(e),
    };
    let Some(Expr::BooleanLiteral(b)) = literal else {
        return;
    };
    if !b.value {
        return;
    }
    let i = ch.report(
        &RULE,
        range,
        "`keep_initializers_as_inputs=True` exports every weight as a graph input",
    );
    ch.help(
        i,
        "drop it (or pass False) unless a caller really feeds weights at run time",
    );
    ch.fix(
        i,
        "set `keep_initializers_as_inputs=False`",
        false,
        vec![Edit {
            start: value.range().start().to_usize(),
            end: value.range().end().to_usize(),
            content: "False".into(),
        }],
    );
}
