//! ## What it does
//! Flags `torch.onnx.export(model, ...)` where `model` is a local built in the same scope and
//! nothing before the call puts it in eval mode (`model.eval()`, `model.train(False)`,
//! `model = Net().eval()`), unless the call asks for the TorchScript exporter (`dynamo=False`),
//! which switches to eval mode itself.
//!
//! ## Why is this bad?
//! A module in training mode exports dropout as active and batch norm with batch statistics
//! (and takes every `if self.training:` branch). Since PyTorch 2.9 `torch.onnx.export` defaults to
//! `dynamo=True`, whose exporter does not change the module's mode: it only warns "Calling
//! model.eval() before export is recommended" (`torch/onnx/_internal/exporter/_compat.py`). The
//! `training=` argument that made the TorchScript exporter switch modes is deprecated.
//!
//! ## Example
//! ```python
//! model = Net()
//! model.load_state_dict(torch.load("w.pt"))
//! torch.onnx.export(model, (x,), "net.onnx")
//! ```
//!
//! ## Fix
//! Put the model in eval mode first:
//! ```python
//! model = Net()
//! model.load_state_dict(torch.load("w.pt"))
//! model.eval()
//! torch.onnx.export(model, (x,), "net.onnx")
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use crate::rules::keyword;
use diagnostics::Severity;
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL017",
    name: "export-without-eval",
    severity: Severity::Warning,
    fix: FixKind::None,
    summary: "`torch.onnx.export` of a module never put in eval mode",
    source: include_str!("export_without_eval.rs"),
};

pub(crate) fn is_export(ch: &Checker, call: &ast::ExprCall) -> bool {
    ch.torch_fn(call).is_some_and(|q| {
        matches!(
            q.as_str(),
            "torch.onnx.export" | "torch.onnx.utils.export" | "torch.onnx.dynamo_export"
        )
    })
}

/// Whether `e` mentions `<name>.eval()`, `<name>.train(False)`, or (with `on_calls`) `.eval()`
/// on a call (`Net().eval()`).
fn has_eval(e: &Expr, name: &str, on_calls: bool) -> bool {
    struct Find<'n> {
        name: &'n str,
        on_calls: bool,
        found: bool,
    }
    impl<'a> Visitor<'a> for Find<'_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                if let Expr::Attribute(a) = c.func.as_ref() {
                    let on_name =
                        matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == self.name);
                    let on_call = self.on_calls && matches!(a.value.as_ref(), Expr::Call(_));
                    let eval = a.attr.id.as_str() == "eval";
                    let train_false = a.attr.id.as_str() == "train"
                        && matches!(c.arguments.args.first(), Some(Expr::BooleanLiteral(b)) if !b.value);
                    if (eval || train_false) && (on_name || on_call) {
                        self.found = true;
                    }
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find {
        name,
        on_calls,
        found: false,
    };
    f.visit_expr(e);
    f.found
}

/// Whether a function of this file puts something in eval mode (`def load(m, path): ...;
/// m.eval(); return m`): handing the model to it counts as switching modes.
fn helper_evals(ch: &Checker, e: &Expr) -> bool {
    fn calls_eval(body: &[Stmt]) -> bool {
        struct Find {
            found: bool,
        }
        impl<'a> Visitor<'a> for Find {
            fn visit_expr(&mut self, e: &'a Expr) {
                if let Expr::Call(c) = e {
                    if let Expr::Attribute(a) = c.func.as_ref() {
                        let m = a.attr.id.as_str();
                        if m == "eval"
                            || (m == "train"
                                && matches!(c.arguments.args.first(), Some(Expr::BooleanLiteral(b)) if !b.value))
                        {
                            self.found = true;
                        }
                    }
                }
                visitor::walk_expr(self, e);
            }
        }
        let mut f = Find { found: false };
        f.visit_body(body);
        f.found
    }
    let Some(module) = ch.bodies.first() else {
        return false;
    };
    let mut called = Vec::new();
    struct Names<'v> {
        out: &'v mut Vec<String>,
    }
    impl<'a> Visitor<'a> for Names<'_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                if let Expr::Name(n) = c.func.as_ref() {
                    self.out.push(n.id.to_string());
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    Names { out: &mut called }.visit_expr(e);
    module.iter().any(|s| {
        matches!(s, Stmt::FunctionDef(f) if called.iter().any(|c| *c == f.name.id.as_str()) && calls_eval(&f.body))
    })
}

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    if !is_export(ch, call) {
        return;
    }
    if keyword(call, "dynamo")
        .is_some_and(|k| matches!(k.value, Expr::BooleanLiteral(ref b) if !b.value))
    {
        return;
    }
    let Some(model) = call
        .arguments
        .args
        .first()
        .or_else(|| keyword(call, "model").map(|k| &k.value))
    else {
        return;
    };
    let Expr::Name(n) = model else { return };
    let name = n.id.as_str();
    let at = call.range().start();
    let Some(body) = ch.bodies.last().copied() else {
        return;
    };
    let mut stmts = Vec::new();
    collect(body, &mut stmts);
    let mut assigned = false;
    let mut evaluated = false;
    for s in stmts.iter().filter(|s| s.range().start() < at) {
        if let Stmt::Assign(a) = s {
            if a.targets
                .iter()
                .any(|t| matches!(t, Expr::Name(t) if t.id.as_str() == name))
            {
                assigned = true;
                evaluated |= has_eval(&a.value, name, true) || helper_evals(ch, &a.value);
                continue;
            }
        }
        let mut exprs: Vec<&Expr> = Vec::new();
        match s {
            Stmt::Expr(e) => exprs.push(&e.value),
            Stmt::Assign(a) => exprs.push(&a.value),
            Stmt::With(w) => exprs.extend(w.items.iter().map(|i| &i.context_expr)),
            _ => {}
        }
        evaluated |= exprs
            .iter()
            .any(|e| has_eval(e, name, false) || (mentions(e, name) && helper_evals(ch, e)));
    }
    if !assigned || evaluated {
        return;
    }
    let i = ch.report(
        &RULE,
        call.func.range(),
        format!("`{name}` is exported without `{name}.eval()`: dropout and batch-norm statistics export in training mode"),
    );
    ch.help(i, format!("call `{name}.eval()` before `torch.onnx.export` (the default dynamo exporter does not switch modes)"));
}

/// Whether `e` mentions the name (`prepare(model)`).
fn mentions(e: &Expr, name: &str) -> bool {
    struct Find<'n> {
        name: &'n str,
        found: bool,
    }
    impl<'a> Visitor<'a> for Find<'_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if matches!(e, Expr::Name(n) if n.id.as_str() == self.name) {
                self.found = true;
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find { name, found: false };
    f.visit_expr(e);
    f.found
}

/// The statements of a body and of its nested blocks (not nested functions), in order.
pub(crate) fn collect<'s>(body: &'s [Stmt], out: &mut Vec<&'s Stmt>) {
    for s in body {
        out.push(s);
        match s {
            Stmt::If(i) => {
                collect(&i.body, out);
                for c in &i.elif_else_clauses {
                    collect(&c.body, out);
                }
            }
            Stmt::With(w) => collect(&w.body, out),
            Stmt::Try(t) => {
                collect(&t.body, out);
                collect(&t.orelse, out);
                collect(&t.finalbody, out);
            }
            Stmt::For(f) => collect(&f.body, out),
            _ => {}
        }
    }
}
