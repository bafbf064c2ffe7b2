//! ## What it does
//! Flags Python control flow on tensor values in model code: `if x.sum() > 0:`,
//! `while (x > eps).any():`, `a if mask.all() else b`.
//!
//! ## Why is this bad?
//! Tracing evaluates the condition once on the example input and records only the branch it
//! took (`TracerWarning: Converting a tensor to a Python boolean might cause the trace to be
//! incorrect`). The exported graph contains no `If`: for inputs that would take the other branch
//! it silently computes the wrong thing. A `while` is unrolled to the example's trip count.
//!
//! ## Example
//! ```python
//! def forward(self, x):
//!     if x.mean() > 0:
//!         return x * 2
//!     return x
//! ```
//!
//! ## Fix
//! Compute both branches and select with `torch.where`, or script the function
//! (`torch.jit.script`) so the exporter emits ONNX `If`/`Loop`:
//! ```python
//! def forward(self, x):
//!     return torch.where(x.mean() > 0, x * 2, x)
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use diagnostics::Severity;
use ruff_python_ast::Expr;
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL005",
    name: "tensor-condition",
    severity: Severity::Error,
    fix: FixKind::None,
    summary: "Python `if`/`while`/conditional expression on a tensor value in model code",
    source: include_str!("tensor_condition.rs"),
};

pub(crate) fn check_test(ch: &mut Checker, test: &Expr, kind: &str) {
    if !ch.in_model() || !ch.is_tensor(test) || ch.is_constant_tensor(test) {
        return;
    }
    // `if flag:` / `if not flag:` on a parameter: far more often a Python option than a tensor.
    let bare = match test {
        Expr::Name(n) => Some(n.id.as_str()),
        Expr::UnaryOp(u) => match u.operand.as_ref() {
            Expr::Name(n) => Some(n.id.as_str()),
            _ => None,
        },
        _ => None,
    };
    if bare.is_some_and(|n| ch.is_param(n)) {
        return;
    }
    let text = ch.text(test.range()).to_string();
    let i = ch.report(
        &RULE,
        test.range(),
        format!("`{kind} {text}` branches on a tensor value: the trace keeps only the branch the example took"),
    );
    ch.help(
        i,
        "select with `torch.where(cond, a, b)` or move the branch out of the exported code",
    );
}
