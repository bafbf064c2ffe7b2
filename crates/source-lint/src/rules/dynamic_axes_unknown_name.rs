//! ## What it does
//! Flags `dynamic_axes` keys of a `torch.onnx.export` call that are neither in its
//! `input_names` nor in its `output_names` (literals, or locals bound to literals).
//!
//! ## Why is this bad?
//! The exporter matches `dynamic_axes` by name. A key that names no input or output is ignored
//! with only a warning ("Provided key x for dynamic axes is not a valid input/output name",
//! `torch/onnx/_internal/torchscript_exporter/utils.py`), so the axis the user meant to be dynamic
//! is exported fixed, and the model rejects any other batch size or sequence length at run time.
//!
//! ## Example
//! ```python
//! torch.onnx.export(model, (x,), "m.onnx",
//!                   input_names=["input"], output_names=["logits"],
//!                   dynamic_axes={"x": {0: "batch"}})
//! ```
//!
//! ## Fix
//! Use the names given in `input_names`/`output_names`:
//! ```python
//! torch.onnx.export(model, (x,), "m.onnx",
//!                   input_names=["input"], output_names=["logits"],
//!                   dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use crate::rules::export_without_eval::is_export;
use crate::rules::{keyword, string_literal};
use diagnostics::Severity;
use ruff_python_ast::{self as ast, Expr};
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL018",
    name: "dynamic-axes-unknown-name",
    severity: Severity::Error,
    fix: FixKind::None,
    summary:
        "`dynamic_axes` key not in `input_names`/`output_names`: the axis silently stays fixed",
    source: include_str!("dynamic_axes_unknown_name.rs"),
};

fn resolve<'e>(ch: &'e Checker, e: &'e Expr) -> Option<&'e Expr> {
    match e {
        Expr::Name(n) => ch.literal(n.id.as_str()),
        e => Some(e),
    }
}

fn names(ch: &Checker, call: &ast::ExprCall, kw: &str) -> Option<Vec<String>> {
    let v = resolve(ch, &keyword(call, kw)?.value)?;
    let elts = match v {
        Expr::List(l) => &l.elts,
        Expr::Tuple(t) => &t.elts,
        _ => return None,
    };
    elts.iter()
        .map(|e| string_literal(e).map(str::to_string))
        .collect()
}

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    if !is_export(ch, call) {
        return;
    }
    let Some(axes) = keyword(call, "dynamic_axes") else {
        return;
    };
    let Some(Expr::Dict(dict)) = resolve(ch, &axes.value) else {
        return;
    };
    let (Some(inputs), Some(outputs)) = (
        names(ch, call, "input_names"),
        names(ch, call, "output_names"),
    ) else {
        return;
    };
    let mut hits = Vec::new();
    for item in &dict.items {
        let Some(key) = item.key.as_ref() else {
            continue;
        };
        let Some(k) = string_literal(key) else {
            continue;
        };
        if !inputs.iter().any(|n| n == k) && !outputs.iter().any(|n| n == k) {
            hits.push((k.to_string(), key.range()));
        }
    }
    // A key of a dict bound elsewhere points at that dict; report at the call's keyword then.
    let local = matches!(axes.value, Expr::Dict(_));
    for (k, range) in hits {
        let at = if local { range } else { axes.range() };
        let i = ch.report(
            &RULE,
            at,
            format!("dynamic_axes key \"{k}\" is not in input_names {inputs:?} or output_names {outputs:?}: that axis stays fixed"),
        );
        ch.help(
            i,
            "use exactly a name from `input_names`/`output_names` as the key",
        );
    }
}
