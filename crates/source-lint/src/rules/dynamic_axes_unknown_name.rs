//! ## What it does
//! Flags `dynamic_axes` keys of a `torch.onnx.export` call that are neither in its
//! `input_names` nor in its `output_names` (literals, or locals bound to literals). The dict may
//! be a display, a `dict(name=...)` call or a local extended with `axes["name"] = {...}`; the
//! finding is on the key. A call without `output_names` gives its outputs generated names, so
//! there every key that is not an input name is flagged.
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
use crate::rules::export_without_eval::{collect, is_export};
use crate::rules::{keyword, spliced_dict, spliced_keyword, string_literal};
use diagnostics::Severity;
use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};

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

/// The keys of a `dynamic_axes` value with where each is written: a dict display, a
/// `dict(name={...})` call, or a name bound to one of them and extended with
/// `axes["name"] = {...}` before the export.
fn keys(ch: &Checker, value: &Expr, before: TextSize) -> Option<Vec<(String, TextRange)>> {
    let mut out = Vec::new();
    let bound = resolve(ch, value)?;
    match bound {
        Expr::Dict(dict) => {
            for item in &dict.items {
                // `**{n: {0: "batch"} for n in names}` splices keys it cannot name: skipped.
                let Some(key) = item.key.as_ref() else {
                    continue;
                };
                out.push((string_literal(key)?.to_string(), key.range()));
            }
        }
        Expr::Call(c)
            if matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "dict")
                && c.arguments.args.is_empty() =>
        {
            for k in &c.arguments.keywords {
                let arg = k.arg.as_ref()?;
                out.push((arg.id.to_string(), k.range()));
            }
        }
        // `{name: {0: "batch"} for name in input_names}`: keys checked only when added later.
        Expr::DictComp(_) => {}
        _ => return None,
    }
    if let Expr::Name(n) = value {
        let mut stmts = Vec::new();
        for body in ch.bodies.iter().rev().take(1) {
            collect(body, before, &mut stmts);
        }
        for s in stmts.into_iter().filter(|s| s.range().start() < before) {
            let Stmt::Assign(a) = s else { continue };
            for t in &a.targets {
                let Expr::Subscript(sub) = t else { continue };
                if !matches!(sub.value.as_ref(), Expr::Name(m) if m.id == n.id) {
                    continue;
                }
                if let Some(k) = string_literal(&sub.slice) {
                    out.push((k.to_string(), sub.slice.range()));
                }
            }
        }
    }
    Some(out)
}

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    if !is_export(ch, call) {
        return;
    }
    let Some(axes) = keyword(call, "dynamic_axes") else {
        return;
    };
    let Some(keys) = keys(ch, &axes.value, call.range().start()) else {
        return;
    };
    // Without `output_names` (and no `**kwargs` that could hold it) the outputs get generated
    // names, so a key naming an output matches nothing.
    let unnamed_outputs = spliced_keyword(ch, call, "output_names").is_none()
        && call
            .arguments
            .keywords
            .iter()
            .filter(|k| k.arg.is_none())
            .all(|k| spliced_dict(ch, &k.value).is_some());
    let outputs = if unnamed_outputs {
        Some(Vec::new())
    } else {
        names(ch, call, "output_names")
    };
    let (Some(inputs), Some(outputs)) = (names(ch, call, "input_names"), outputs) else {
        return;
    };
    for (k, range) in keys {
        if inputs.contains(&k) || outputs.contains(&k) {
            continue;
        }
        if unnamed_outputs {
            let i = ch.report(
                &RULE,
                range,
                format!("dynamic_axes key \"{k}\" is not in input_names {inputs:?}, and without `output_names` the outputs get generated names: that axis stays fixed"),
            );
            ch.help(
                i,
                format!("name the outputs: `output_names=[\"{k}\", ...]`"),
            );
            continue;
        }
        // Reported at the key itself, where the fix goes, even when the dict is bound earlier.
        let i = ch.report(
            &RULE,
            range,
            format!("dynamic_axes key \"{k}\" is not in input_names {inputs:?} or output_names {outputs:?}: that axis stays fixed"),
        );
        ch.help(
            i,
            "use exactly a name from `input_names`/`output_names` as the key",
        );
    }
}
