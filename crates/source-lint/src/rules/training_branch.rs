//! ## What it does
//! Flags branches on `self.training` in model code whose training side changes the numbers the
//! model computes: random ops (`torch.rand*`, `randn_like`, `bernoulli`, `dropout`, `normal_`)
//! or updates of module state (`self.x = ...`, `self.x += ...`, `self.x.mul_(...)`). Branches
//! that only compute losses or pick training targets are left alone (an eval-mode export drops
//! them, and torchvision's detection models are full of them). Conditional expressions count too:
//! `x + noise if self.training else x`; so do a random draw in the test itself (layer drop:
//! `if self.training and torch.rand(1).item() < p: return x`) and `if not self.training: return x`
//! (or `if p == 0.0 or not self.training: return x`) followed by training-only randomness
//! (SpecAugment, drop path). Random ops include `F.gumbel_softmax` and helpers named like
//! `drop_path`, `dropout`, `drop_block`, `stochastic_depth`.
//!
//! ## Why is this bad?
//! The branch is resolved when the model is traced: only the side matching the module's mode at
//! export time reaches the graph. The TorchScript exporter switches the model to eval mode by
//! default (`training=TrainingMode.EVAL`), but that option is deprecated since PyTorch 2.7 and
//! the default `dynamo=True` exporter does not change the mode: it only warns "Calling
//! model.eval() before export is recommended" (`torch/onnx/_internal/exporter/_compat.py`). A
//! model exported in training mode keeps dropout, batch statistics and training-only outputs.
//!
//! ## Example
//! ```python
//! def forward(self, x):
//!     if self.training:
//!         x = x + torch.randn_like(x) * 0.1
//!     return self.head(x)
//! ```
//!
//! ## Fix
//! Call `model.eval()` before `torch.onnx.export`; keep training-only work out of the exported
//! path, e.g. in the training loop or a separate method.
//! ```python
//! model.eval()
//! torch.onnx.export(model, (x,), "model.onnx")
//! ```

use crate::checker::{expr_stmt, Checker};
use crate::registry::{FixKind, Rule};
use diagnostics::Severity;
use ruff_python_ast::{self as ast, Expr};
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL006",
    name: "training-branch",
    severity: Severity::Info,
    fix: FixKind::None,
    summary: "branch on `self.training` in model code: resolved once at export",
    source: include_str!("training_branch.rs"),
};

/// Names of helpers that draw random numbers (`drop_path(x, p)`, `self._drop_tokens(x)`).
const RANDOM_HELPERS: &[&str] = &[
    "dropout",
    "drop_path",
    "droppath",
    "drop_block",
    "dropblock",
    "drop_token",
    "stochastic_depth",
    "gumbel",
];

/// Whether a branch body draws random numbers or updates module state.
fn changes_numerics(body: &[ast::Stmt]) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    struct Find {
        found: bool,
    }
    fn on_self(e: &Expr) -> bool {
        match e {
            Expr::Name(n) => n.id.as_str() == "self",
            Expr::Attribute(a) => on_self(&a.value),
            Expr::Subscript(s) => on_self(&s.value),
            _ => false,
        }
    }
    impl<'a> Visitor<'a> for Find {
        fn visit_stmt(&mut self, s: &'a ast::Stmt) {
            match s {
                ast::Stmt::Assign(a)
                    if a.targets
                        .iter()
                        .any(|t| matches!(t, Expr::Attribute(_)) && on_self(t)) =>
                {
                    self.found = true
                }
                ast::Stmt::AugAssign(a) if on_self(&a.target) => self.found = true,
                _ => {}
            }
            visitor::walk_stmt(self, s);
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                if let Expr::Attribute(a) = c.func.as_ref() {
                    let m = a.attr.id.as_str();
                    let random = matches!(
                        m,
                        "rand"
                            | "randn"
                            | "randint"
                            | "randperm"
                            | "rand_like"
                            | "randn_like"
                            | "randint_like"
                            | "bernoulli"
                            | "multinomial"
                            | "normal"
                            | "dropout"
                            | "dropout2d"
                            | "dropout1d"
                            | "dropout3d"
                            | "alpha_dropout"
                            | "feature_alpha_dropout"
                            | "normal_"
                            | "uniform_"
                            | "bernoulli_"
                            | "exponential_"
                            | "random_"
                            | "gumbel_softmax"
                    );
                    // `self.drop_path(x)`, `self._drop_tokens(x)`: stochastic-depth helpers;
                    // `random.random()`, `np.random.rand()`: Python's and NumPy's generators.
                    let lower = m.to_ascii_lowercase();
                    let dropping = RANDOM_HELPERS.iter().any(|d| lower.contains(d));
                    let python_random = match a.value.as_ref() {
                        Expr::Name(n) => n.id.as_str() == "random",
                        Expr::Attribute(r) => r.attr.id.as_str() == "random",
                        _ => false,
                    };
                    let state = m.ends_with('_') && !m.starts_with('_') && on_self(&a.value);
                    if random || dropping || python_random || state {
                        self.found = true;
                    }
                }
                if let Expr::Name(n) = c.func.as_ref() {
                    let lower = n.id.to_ascii_lowercase();
                    if matches!(
                        lower.as_str(),
                        "randn" | "rand" | "randn_like" | "rand_like" | "bernoulli"
                    ) || RANDOM_HELPERS.iter().any(|d| lower.contains(d))
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

fn mentions_training(e: &Expr) -> bool {
    match e {
        Expr::Attribute(_) => Checker::is_self_attr(e, "training"),
        Expr::BoolOp(b) => b.values.iter().any(mentions_training),
        Expr::UnaryOp(u) => matches!(u.op, ast::UnaryOp::Not) && mentions_training(&u.operand),
        _ => false,
    }
}

pub(crate) fn check_test(
    ch: &mut Checker,
    test: &Expr,
    kind: &str,
    body: &[ast::Stmt],
    orelse: &[ast::Stmt],
) -> bool {
    if !ch.in_model() || !mentions_training(test) {
        return false;
    }
    // `if not self.training:` and `if p == 0.0 or not self.training:` run their body in eval
    // mode: the training side is the else branch (or the rest of the block after a return).
    let negated = match test {
        Expr::UnaryOp(_) => true,
        Expr::BoolOp(b) => {
            matches!(b.op, ast::BoolOp::Or)
                && b.values.iter().any(|v| {
                    matches!(v, Expr::UnaryOp(u)
                    if matches!(u.op, ast::UnaryOp::Not) && mentions_training(&u.operand))
                })
        }
        _ => false,
    };
    // `if self.training and torch.rand(1).item() < p:` (layer drop) draws in the test itself.
    let test_draws = changes_numerics(&[expr_stmt(test)]);
    if !test_draws && !changes_numerics(if negated { orelse } else { body }) {
        return true;
    }
    let text = ch.text(test.range()).to_string();
    let i = ch.report(
        &RULE,
        test.range(),
        format!("`{kind} {text}`: only the branch of the mode at export time is exported"),
    );
    ch.help(i, "call `model.eval()` before `torch.onnx.export` (the dynamo exporter does not switch modes)");
    true
}
