//! ## What it does
//! Flags `nn.MultiheadAttention`, `nn.TransformerEncoderLayer` and `nn.TransformerEncoder`
//! built with `batch_first=True` (also through keyword arguments unpacked from a dict of the same
//! function: `enc_kw = dict(..., batch_first=True)`, `nn.TransformerEncoderLayer(**enc_kw)`, or
//! bound by a `functools.partial`: `MHA = partial(nn.MultiheadAttention, batch_first=True)`, then
//! `MHA(d, heads)`), the configuration that can take PyTorch's fused "fast path".
//!
//! ## Why is this bad?
//! In eval mode, with autograd off (`torch.no_grad()`/`inference_mode`, or parameters that do
//! not require grad), batch-first self-attention dispatches to `aten::_native_multi_head_attention`
//! (`torch/nn/modules/activation.py`, `MultiheadAttention.forward`, the `why_not_fast_path`
//! checks). The TorchScript exporter has no symbolic for it and stops with "Exporting the operator
//! 'aten::_native_multi_head_attention' to ONNX opset version N is not supported" (pytorch#143107).
//!
//! ## Example
//! ```python
//! self.attn = nn.MultiheadAttention(256, 8, batch_first=True)
//! ...
//! with torch.no_grad():
//!     torch.onnx.export(model.eval(), (x,), "m.onnx")
//! ```
//!
//! ## Fix
//! Turn the fast path off around the export (`torch.backends.mha.set_fastpath_enabled`), or
//! export with autograd enabled, or use the `dynamo=True` exporter which decomposes attention:
//! ```python
//! torch.backends.mha.set_fastpath_enabled(False)
//! torch.onnx.export(model.eval(), (x,), "m.onnx")
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use crate::rules::{bound_values, keyword};
use diagnostics::Severity;
use ruff_python_ast::{self as ast, Expr};
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL011",
    name: "mha-fast-path",
    severity: Severity::Warning,
    fix: FixKind::None,
    summary: "batch-first `nn.MultiheadAttention`/`TransformerEncoderLayer` can hit `_native_multi_head_attention`, which does not export",
    source: include_str!("mha_fast_path.rs"),
};

/// The `super().__init__(...)` call of a class's `__init__`.
fn super_init_call(class: &ast::StmtClassDef) -> Option<&ast::ExprCall> {
    let init = class.body.iter().find_map(|s| match s {
        ast::Stmt::FunctionDef(f) if f.name.id.as_str() == "__init__" => Some(f),
        _ => None,
    })?;
    init.body.iter().find_map(|s| match s {
        ast::Stmt::Expr(e) => match e.value.as_ref() {
            Expr::Call(c) => match c.func.as_ref() {
                Expr::Attribute(a)
                    if a.attr.id.as_str() == "__init__"
                        && matches!(a.value.as_ref(), Expr::Call(s)
                            if matches!(s.func.as_ref(), Expr::Name(n) if n.id.as_str() == "super")) =>
                {
                    Some(c)
                }
                _ => None,
            },
            _ => None,
        },
        _ => None,
    })
}

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    // `MHA = partial(nn.MultiheadAttention, batch_first=True)` at module level, then
    // `MHA(d, heads)`: the constructor, with the arguments the partial binds.
    let partial = match call.func.as_ref() {
        Expr::Name(n) if ch.has_partial && ch.torch_fn(call).is_none() => {
            match ch.literal(n.id.as_str()) {
                Some(Expr::Call(p)) => crate::rules::partial_of_torch(ch, p).map(|q| (q, p)),
                _ => None,
            }
        }
        _ => None,
    };
    // `class CausalMHA(nn.MultiheadAttention)` of this file, then `CausalMHA(d, h,
    // batch_first=True)` (or with `super().__init__(..., batch_first=True)` in its `__init__`):
    // its `forward` hands over to the torch module's.
    let subclass_init: std::cell::Cell<Option<&ast::ExprCall>> = std::cell::Cell::new(None);
    let subclass = || match call.func.as_ref() {
        Expr::Name(n) => {
            let class = crate::checker::module_class(ch.bodies[0], n.id.as_str())?;
            let q = class.bases().iter().find_map(|b| {
                ch.qualify(b).filter(|q| {
                    matches!(
                        q.as_str(),
                        "torch.nn.MultiheadAttention"
                            | "torch.nn.modules.activation.MultiheadAttention"
                    )
                })
            })?;
            subclass_init.set(super_init_call(class));
            Some(q)
        }
        _ => None,
    };
    let (q, bound) = match (ch.torch_fn(call), partial) {
        (Some(q), _) => (q, None),
        (None, Some((q, p))) => (q, Some(p)),
        (None, None) => match subclass() {
            Some(q) => (q, None),
            None => return,
        },
    };
    let short = match q.as_str() {
        "torch.nn.MultiheadAttention" | "torch.nn.modules.activation.MultiheadAttention" => {
            "MultiheadAttention"
        }
        "torch.nn.TransformerEncoderLayer" => "TransformerEncoderLayer",
        "torch.nn.TransformerEncoder" => "TransformerEncoder",
        _ => return,
    };
    // What a subclass hands its base decides over what it is given.
    let batch_first = subclass_init
        .get()
        .and_then(|c| keyword(c, "batch_first"))
        .or_else(|| keyword(call, "batch_first"))
        .or_else(|| bound.and_then(|p| keyword(p, "batch_first")))
        .is_some_and(|k| match &k.value {
        // `batch_first=BATCH_FIRST` with `BATCH_FIRST = True` in the function or the module.
        Expr::Name(n) => values_of(ch, n.id.as_str(), call).into_iter().any(is_true),
        v => is_true(v),
    })
        // `nn.TransformerEncoderLayer(**enc_kw)` with `enc_kw = dict(..., batch_first=True)`,
        // also a module-level `ATTN_DEFAULTS = {"batch_first": True}`.
        || call
            .arguments
            .keywords
            .iter()
            .filter(|k| k.arg.is_none())
            .any(|k| match &k.value {
                Expr::Name(n) => values_of(ch, n.id.as_str(), call)
                    .into_iter()
                    .any(sets_batch_first),
                e => sets_batch_first(e),
            });
    if !batch_first {
        return;
    }
    let i = ch.report(
        &RULE,
        call.func.range(),
        format!("batch-first `nn.{short}` takes the `_native_multi_head_attention` fast path in eval/no-grad, which the exporter cannot export"),
    );
    ch.help(i, "call `torch.backends.mha.set_fastpath_enabled(False)` before exporting, or export with `dynamo=True`");
}

/// The values a name is bound to where the call reads it: in the enclosing body, or else, for a
/// module constant by its spelling (`BATCH_FIRST`, `ATTN_DEFAULTS`), at the module's top level.
/// (A lower-case name the function does not bind may be one of its parameters.) In the body,
/// bindings written after the call do not reach it (`bf = False`, the call, `bf = True`), unless
/// none comes before it (a loop may carry a later one back).
fn values_of<'a>(ch: &Checker<'a>, name: &str, call: &ast::ExprCall) -> Vec<&'a Expr> {
    let mut local = ch
        .bodies
        .last()
        .map(|body| bound_values(body, name))
        .unwrap_or_default();
    if local.iter().any(|v| v.start() < call.start()) {
        // A binding after the call in a loop around both reaches it on the next iteration.
        let loops = ch
            .bodies
            .last()
            .map(|body| loops_around(body, call.start()))
            .unwrap_or_default();
        local.retain(|v| v.start() < call.start() || loops.iter().any(|l| l.contains(v.start())));
    }
    let constant = name.chars().any(|c| c.is_ascii_uppercase())
        && !name.chars().any(|c| c.is_ascii_lowercase());
    if !local.is_empty() || !constant {
        return local;
    }
    bound_values(ch.bodies[0], name)
}

/// The ranges of the `for`/`while` statements of a body (not of nested functions) that contain
/// `at`.
fn loops_around(
    body: &[ast::Stmt],
    at: ruff_text_size::TextSize,
) -> Vec<ruff_text_size::TextRange> {
    use ruff_python_ast::visitor::{self, Visitor};
    use ruff_python_ast::Stmt;
    struct Find {
        at: ruff_text_size::TextSize,
        out: Vec<ruff_text_size::TextRange>,
    }
    impl<'a> Visitor<'a> for Find {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            match s {
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => return,
                Stmt::For(_) | Stmt::While(_) if s.range().contains(self.at) => {
                    self.out.push(s.range())
                }
                _ => {}
            }
            visitor::walk_stmt(self, s);
        }
    }
    let mut f = Find {
        at,
        out: Vec::new(),
    };
    f.visit_body(body);
    f.out
}

fn is_true(v: &Expr) -> bool {
    matches!(v, Expr::BooleanLiteral(b) if b.value)
}

/// `dict(..., batch_first=True)` or `{"batch_first": True, ...}`.
fn sets_batch_first(e: &Expr) -> bool {
    match e {
        Expr::Call(c) if matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "dict") => {
            keyword(c, "batch_first").is_some_and(|k| is_true(&k.value))
        }
        Expr::Dict(d) => d.items.iter().any(|item| {
            matches!(&item.key, Some(Expr::StringLiteral(s)) if s.value.to_str() == "batch_first")
                && is_true(&item.value)
        }),
        _ => false,
    }
}
