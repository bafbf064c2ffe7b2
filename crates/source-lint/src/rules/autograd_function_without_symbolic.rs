//! ## What it does
//! Flags classes deriving from `torch.autograd.Function` that define no `symbolic` static
//! method.
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
    let Some(args) = &class.arguments else { return };
    let is_function = args.args.iter().any(|b| {
        ch.qualify(b).is_some_and(|q| {
            q == "torch.autograd.Function" || q == "torch.autograd.function.Function"
        })
    });
    if !is_function {
        return;
    }
    let has_symbolic = class.body.iter().any(|s| match s {
        Stmt::FunctionDef(f) => f.name.id.as_str() == "symbolic",
        Stmt::Assign(a) => a
            .targets
            .iter()
            .any(|t| matches!(t, ast::Expr::Name(n) if n.id.as_str() == "symbolic")),
        _ => false,
    });
    if has_symbolic {
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
