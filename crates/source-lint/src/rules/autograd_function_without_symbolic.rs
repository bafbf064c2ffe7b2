//! ## What it does
//! Flags classes deriving from `torch.autograd.Function` (also through a class of the file) that
//! define no `symbolic` static method and inherit none from a class of the file; not in a file
//! that registers a symbolic for every Python op (`torch.onnx.register_custom_op_symbolic(
//! "prim::PythonOp", ...)`). A Function the file uses only in side code is not reported: export
//! never records it. Side code here is functions named for training, losses or evaluation (a Dice loss, a
//! training step, a `*Loss` class's methods) and helpers only they call (a distributed gather
//! for a contrastive loss); a Function used in model code, at module level, in a constructor or
//! in a helper nothing in the file calls is reported.
//!
//! ## Why is this bad?
//! The TorchScript exporter records a custom autograd Function as a `prim::PythonOp` and can only
//! translate it through the class's `symbolic(g, ...)`; without one the export fails with
//! "Couldn't export Python operator <Name>" (or the op is exported as an opaque node when
//! `operator_export_type=ONNX_FALLTHROUGH`, which no runtime can execute).
//!
//! ## Example
//! ```python
//! class Clamp(torch.autograd.Function):
//!     @staticmethod
//!     def forward(ctx, x):
//!         return x.clamp(0, 1)
//! ```
//!
//! ## Fix
//! Add a `symbolic` that emits standard ONNX ops (or register one with
//! `torch.onnx.register_custom_op_symbolic`):
//! ```python
//! class Clamp(torch.autograd.Function):
//!     @staticmethod
//!     def forward(ctx, x):
//!         return x.clamp(0, 1)
//!
//!     @staticmethod
//!     def symbolic(g, x):
//!         return g.op("Clip", x, g.op("Constant", value_t=torch.tensor(0.0)),
//!                     g.op("Constant", value_t=torch.tensor(1.0)))
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use diagnostics::Severity;
use ruff_python_ast::{self as ast, Stmt};
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL012",
    name: "autograd-function-without-symbolic",
    severity: Severity::Error,
    fix: FixKind::None,
    summary: "`torch.autograd.Function` subclass without a `symbolic` static method",
    source: include_str!("autograd_function_without_symbolic.rs"),
};

pub(crate) fn check_class(ch: &mut Checker, class: &ast::StmtClassDef) {
    if !ch.is_autograd_function(class) {
        return;
    }
    // Defined in the class or inherited from a base class of the file.
    let has_symbolic = std::iter::once(class)
        .chain(ch.file_ancestors(class))
        .flat_map(|c| c.body.iter())
        .any(|s| match s {
            Stmt::FunctionDef(f) => f.name.id.as_str() == "symbolic",
            Stmt::Assign(a) => a
                .targets
                .iter()
                .any(|t| matches!(t, ast::Expr::Name(n) if n.id.as_str() == "symbolic")),
            _ => false,
        });
    // `register_custom_op_symbolic("prim::PythonOp", ...)`: the file gives every Python op a
    // symbolic itself.
    let python_op_symbolic = ch.bodies[0].iter().any(|st| {
        crate::rules::any_sub_stmt_expr(st, |e| {
            matches!(e, ast::Expr::Call(c)
                if (matches!(c.func.as_ref(), ast::Expr::Attribute(a) if a.attr.id.as_str() == "register_custom_op_symbolic")
                    || matches!(c.func.as_ref(), ast::Expr::Name(n) if n.id.as_str() == "register_custom_op_symbolic"))
                    && c.arguments.args.first().and_then(crate::rules::string_literal) == Some("prim::PythonOp"))
        })
    });
    if python_op_symbolic {
        return;
    }
    if has_symbolic || used_only_in_side_code(ch, class.name.id.as_str()) {
        return;
    }
    let i = ch.report(
        &RULE,
        class.name.range(),
        format!("autograd Function `{}` has no `symbolic`: export fails with \"Couldn't export Python operator {}\"", class.name.id, class.name.id),
    );
    ch.help(
        i,
        "add `@staticmethod def symbolic(g, *inputs)` emitting ONNX ops with `g.op(...)`",
    );
}

/// Whether the file uses `class`, and only in side code: in functions that are not model code
/// and are named for training, losses or evaluation (`itc_loss`, `train_epoch`, `evaluate`, a
/// method of a `*Loss` class),
/// or that only such functions call (`gather_features` called by `clip_loss`, `chamfer` by
/// `crown_loss`), in a file that has model code. A function a model function calls, even on its
/// training side (`grad_reverse(feat)` under `if self.training:`), or that nothing in the file
/// calls (a factory used in `__init__`, a hook torch calls, a helper another file imports) may
/// reach the trace: still reported, as is a Function the file never uses.
fn used_only_in_side_code(ch: &Checker, class: &str) -> bool {
    use crate::checker::{functions_and_methods, names_loss, training_only_name};
    use ruff_python_ast::visitor::{self, Visitor};
    /// Whether a body names `name`, as a name or (`self.name`) an attribute.
    struct Names<'n> {
        name: &'n str,
        attribute: bool,
        found: bool,
    }
    impl<'v> Visitor<'v> for Names<'_> {
        fn visit_expr(&mut self, e: &'v ast::Expr) {
            match e {
                ast::Expr::Name(n) if n.id.as_str() == self.name => self.found = true,
                ast::Expr::Attribute(a) if self.attribute && a.attr.id.as_str() == self.name => {
                    self.found = true
                }
                _ => {}
            }
            visitor::walk_expr(self, e);
        }
    }
    let names = |body: &[Stmt], name: &str, attribute: bool| {
        let mut v = Names {
            name,
            attribute,
            found: false,
        };
        v.visit_body(body);
        v.found
    };
    let model = ch.model_functions();
    if model.is_empty() {
        return false;
    }
    let Some(module) = ch.bodies.first() else {
        return false;
    };
    // Named anywhere outside a function (a module-level alias, a class attribute): not side code.
    for stmt in module.iter() {
        match stmt {
            Stmt::ClassDef(c) if c.name.id.as_str() != class => {
                let outside = c.body.iter().any(|s| {
                    !matches!(s, Stmt::FunctionDef(_))
                        && names(std::slice::from_ref(s), class, false)
                });
                if outside {
                    return false;
                }
            }
            Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
            s if names(std::slice::from_ref(s), class, false) => return false,
            _ => {}
        }
    }
    let functions: Vec<(Option<&str>, &ast::StmtFunctionDef)> = functions_and_methods(module)
        .filter(|(owner, _)| *owner != Some(class))
        .collect();
    // Training, loss and evaluation code by its name.
    let training_named = |owner: Option<&str>, f: &ast::StmtFunctionDef| {
        let n = f.name.id.to_ascii_lowercase();
        let unprefixed = n.strip_prefix('_').unwrap_or(&n);
        training_only_name(&n)
            || ["eval", "valid", "metric", "test"]
                .iter()
                .any(|w| n.starts_with(w) || unprefixed.starts_with(w))
            || owner.is_some_and(names_loss)
    };
    let mut used = false;
    for &(owner, f) in &functions {
        if !names(&f.body, class, false) {
            continue;
        }
        let is_model = model.contains(&(owner.map(str::to_string), f.name.id.to_string()));
        if is_model || f.name.id.as_str() == "__init__" {
            return false;
        }
        if !training_named(owner, f) {
            let callers: Vec<&(Option<&str>, &ast::StmtFunctionDef)> = functions
                .iter()
                .filter(|(_, g)| names(&g.body, f.name.id.as_str(), owner.is_some()))
                .collect();
            if callers.is_empty() || !callers.iter().all(|&&(o, g)| training_named(o, g)) {
                return false;
            }
        }
        used = true;
    }
    used
}
