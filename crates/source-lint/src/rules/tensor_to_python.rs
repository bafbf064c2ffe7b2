//! ## What it does
//! Flags tensor values turned into Python values inside model code: `.item()`, `.tolist()`,
//! `.numpy()`, and `int(t)`, `float(t)`, `bool(t)` on a tensor. Tensors made only from Python
//! numbers or random draws (`torch.tensor(scale).log2().item()`, a transform's
//! `int(torch.randint(n, ()))`) are not reported: nothing the inputs decide is frozen. In a branch
//! that only runs in eval mode (`if not self.training and self.shift > 0:`), the mode export
//! traces, a random draw turned into a number is reported: export keeps the example's draw, so
//! the exported model uses the same value on every run. Neither is `int()` of arithmetic on
//! sizes (`int(windows.shape[0] / (h * w))`): that freezes a shape, which ODL016 reports where
//! the number is used.
//!
//! ## Why is this bad?
//! The tracer cannot record a Python number: it reads the example's value once and bakes it into
//! the graph as a constant (`TracerWarning: Converting a tensor to a Python number might cause
//! the trace to be incorrect`). The exported model then computes with the example input's value
//! for every input. `.numpy()` additionally leaves the graph altogether. `torch.export`
//! (`dynamo=True`) instead stops on the data-dependent value ("Could not guard on
//! data-dependent expression").
//!
//! ## Example
//! ```python
//! def forward(self, x):
//!     k = int(x.max())
//!     return x[:, :k]
//! ```
//!
//! ## Fix
//! Keep the value a tensor and use tensor ops (`torch.where`, `narrow` with tensor sizes,
//! masks), or move the computation out of the exported module.
//! ```python
//! def forward(self, x):
//!     keep = torch.arange(x.size(1)) < x.max()
//!     return x * keep
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use diagnostics::Severity;
use ruff_python_ast::{self as ast, Expr};
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL004",
    name: "tensor-to-python",
    severity: Severity::Error,
    fix: FixKind::None,
    summary: "`.item()`, `.tolist()`, `.numpy()`, `int(t)`, `float(t)` on a tensor in model code",
    source: include_str!("tensor_to_python.rs"),
};

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    if !ch.in_model() {
        return;
    }
    if let Some((m, recv)) = ch.method(call) {
        if matches!(m, "item" | "tolist" | "numpy")
            && call.arguments.args.is_empty()
            && !ch.is_array(recv)
        {
            if ch.eval_only > 0 && draws_random(ch, recv) {
                report_random_draw(ch, call, &format!("`.{m}()`"));
            } else if !ch.is_constant_tensor(recv) {
                let i = ch.report(
                    &RULE,
                    call.func.range(),
                    format!("`.{m}()` in model code: the value is frozen into the exported graph"),
                );
                ch.help(i, "keep it a tensor and use tensor ops; the tracer records Python numbers as constants");
            }
        }
        return;
    }
    let Some(q) = ch.qualify(&call.func) else {
        return;
    };
    let func = match q.as_str() {
        "builtins.int" => "int",
        "builtins.float" => "float",
        "builtins.bool" => "bool",
        _ => return,
    };
    let Some(arg) = call.arguments.args.first() else {
        return;
    };
    if call.arguments.args.len() != 1 || !ch.is_tensor(arg) {
        return;
    }
    if ch.eval_only > 0 && draws_random(ch, arg) {
        report_random_draw(ch, call, &format!("`{func}()`"));
        return;
    }
    if ch.is_constant_tensor(arg) {
        return;
    }
    // `int(windows.shape[0] / (h * w / ws / ws))`: arithmetic on a size is a Python number the
    // tracer records; where it feeds a shape, ODL016 reports the consumer.
    if matches!(arg, Expr::BinOp(_)) && size_arithmetic(ch, arg) == Some(true) {
        return;
    }
    let text = ch.text(arg.range()).to_string();
    let i = ch.report(
        &RULE,
        call.range(),
        format!("`{func}({text})` turns a tensor into a Python number: frozen at export"),
    );
    ch.help(
        i,
        "keep it a tensor; compare or mask with tensor ops instead",
    );
}

/// Whether an expression calls one of torch's random draws (`torch.randint(0, s, (1,))`,
/// `torch.rand(1) * 4`).
fn draws_random(ch: &Checker, e: &Expr) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    struct Find<'c, 'a> {
        ch: &'c Checker<'a>,
        found: bool,
    }
    impl<'v> Visitor<'v> for Find<'_, '_> {
        fn visit_expr(&mut self, e: &'v Expr) {
            if let Expr::Call(c) = e {
                if let Some(q) = self.ch.torch_fn(c) {
                    self.found |= matches!(
                        q.as_str(),
                        "torch.rand"
                            | "torch.randn"
                            | "torch.randint"
                            | "torch.randperm"
                            | "torch.rand_like"
                            | "torch.randn_like"
                            | "torch.randint_like"
                            | "torch.bernoulli"
                            | "torch.multinomial"
                            | "torch.normal"
                    );
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find { ch, found: false };
    f.visit_expr(e);
    f.found
}

/// `int(torch.randint(...))` in an eval-only branch: export keeps one draw.
fn report_random_draw(ch: &mut Checker, call: &ast::ExprCall, what: &str) {
    let i = ch.report(
        &RULE,
        call.range(),
        format!("{what} of a random draw in eval-mode code: export keeps the example's draw, so the exported model uses one fixed value"),
    );
    ch.help(
        i,
        "draw inside the graph and keep it a tensor (`torch.rand_like`), or move the randomness out of the exported module",
    );
}

/// Whether an expression is arithmetic on sizes, names and numbers only (`None` when an operand
/// computes a tensor's values, as `mask.numel() / mask.sum()` does), and if so whether it reads a
/// size.
fn size_arithmetic(ch: &Checker, e: &Expr) -> Option<bool> {
    match e {
        Expr::BinOp(b) => Some(size_arithmetic(ch, &b.left)? | size_arithmetic(ch, &b.right)?),
        Expr::UnaryOp(u) => size_arithmetic(ch, &u.operand),
        Expr::NumberLiteral(_) => Some(false),
        // `frac * prob[0, 0].numel()` with `frac` a tensor the function computed: not a size's
        // arithmetic (a parameter, `h` in `windows.shape[0] / (h * w)`, may be a number).
        // A tensor made only from Python numbers (`ratio = torch.tensor(0.3)`) is a constant;
        // a random draw (`ratio = torch.rand(1)`) is no number either: frozen at export.
        Expr::Name(n)
            if !ch.is_param(n.id.as_str())
                && !ch.is_size(e)
                && ch.is_tensor(e)
                && (!ch.is_constant_tensor(e)
                    || ch.bodies.last().is_some_and(|body| {
                        crate::rules::bound_values(body, n.id.as_str())
                            .into_iter()
                            .any(|v| draws_random(ch, v))
                    })) =>
        {
            None
        }
        Expr::Name(_) => Some(ch.is_size(e)),
        e => ch.is_size(e).then_some(true),
    }
}
