//! ## What it does
//! Flags branches on `self.training` in model code where the two modes compute or return
//! different things, so what an export gets depends on the mode the module is in (not when the
//! test's value under export is fixed: `if torch.jit.is_tracing() or self.training:`, timm's
//! attention-bias cache, takes the same side in either mode):
//! - the training side draws random numbers (`torch.rand*`, `randn_like`, `bernoulli`,
//!   `dropout`, `normal_`, `F.gumbel_softmax`, helpers named like `drop_path`, `dropout`,
//!   `drop_block`, `stochastic_depth`) or updates module state (`self.x = ...`, `self.x += ...`,
//!   `self.x.mul_(...)`), itself or in a method of the module it calls
//!   (`self._momentum_update_key_encoder()`, which sets `param.data`); a random draw in the
//!   test itself counts (layer drop: `if self.training and torch.rand(1).item() < p: return x`),
//!   and so does `if not self.training: return x` (or `if p == 0.0 or not self.training:
//!   return x`) followed by training-only randomness (SpecAugment, drop path); so does an eval
//!   body that updates module state (`if not self.training: self.last_counts = y.tolist()`);
//! - the training side returns early with outputs other than losses (`if self.training:
//!   return outputs` before the eval path decodes them, `return x, aux`, also from an
//!   `elif self.training:` with no clause after it: the rest of the block is its else);
//! - the eval side computes on tensors (`else: v = self.agg_inference(v)`,
//!   `if not self.training: y = y.clamp_min(0)`, `out[out < floor] = 0`, a record rebuilt around
//!   a computed tensor: `out = dataclasses.replace(out, image=out.image.clamp(0, 1))`);
//! - the training side transforms a tensor the code goes on with (`x = self.shuffle_unit(x)`);
//! - a conditional expression picks between two values (`r = self.mask_ratio if self.training
//!   else 0.0`), except a dropout probability that is zero in eval mode
//!   (`dropout_p=self.attn_drop if self.training else 0.0`), which is what `nn.Dropout` does,
//!   or computes an output in one mode only (`self.aux(x) if self.training else None`);
//! - the training side ends a loop iteration early (`if self.training: outs.append(y);
//!   continue`), skipping what eval mode runs after it.
//!
//! Branches that only compute or return losses (`return losses`, `self.loss(...)`), pick
//! training targets (`proposals = self.select_training_samples(proposals, targets)`), check
//! arguments or return configuration (`return self._pre_nms_top_n["training"]`) are left alone:
//! an eval-mode export drops them, and torchvision's detection models are full of them. The mode
//! read into a local that holds nothing else (`is_train = self.training`, then `if is_train:`)
//! is read as the mode; a local bound once to the mode and more (`use_noise = self.training and
//! self.jitter > 0`, then `if use_noise:`) as that test, reported where it is written.
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

use crate::checker::{always_exits, expr_stmt, Checker};
use crate::registry::{FixKind, Rule};
use crate::rules::any_sub_expr;
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
                    // `self.drop(x)`, `self.attn_drop(x)`: dropout submodules by their usual names.
                    let lower = m.to_ascii_lowercase();
                    let dropping = RANDOM_HELPERS.iter().any(|d| lower.contains(d))
                        || ((lower == "drop" || lower.ends_with("_drop")) && on_self(&a.value));
                    // `random.random()`, `np.random.rand()`: Python's and NumPy's generators.
                    let python_random = match a.value.as_ref() {
                        Expr::Name(n) => n.id.as_str() == "random",
                        Expr::Attribute(r) => r.attr.id.as_str() == "random",
                        _ => false,
                    };
                    // `self.eps.normal_()`, `self.ret_rms.update(v)`: state of the module updated.
                    let state = ((m.ends_with('_') && !m.starts_with('_')) || m == "update")
                        && on_self(&a.value);
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

/// Whether a body switches a submodule to training mode (`self.drop.train()`: Monte Carlo
/// dropout at inference). On the eval side only: in training the submodule already is.
fn trains_submodule(body: &[ast::Stmt]) -> bool {
    body.iter().any(|s| {
        crate::rules::any_sub_stmt_expr(s, |e| {
            matches!(e, Expr::Call(c) if matches!(c.func.as_ref(), Expr::Attribute(a)
            if a.attr.id.as_str() == "train"
                && crate::checker::self_attr(&a.value).is_some()
                && c.arguments.keywords.is_empty()
                && match &c.arguments.args[..] {
                    [] => true,
                    [Expr::BooleanLiteral(b)] => b.value,
                    _ => false,
                }))
        })
    })
}

fn mentions_training(e: &Expr) -> bool {
    match e {
        Expr::Attribute(_) => Checker::is_self_attr(e, "training"),
        Expr::BoolOp(b) => b.values.iter().any(mentions_training),
        Expr::UnaryOp(u) => matches!(u.op, ast::UnaryOp::Not) && mentions_training(&u.operand),
        _ => false,
    }
}

/// The value in eval mode of an operand that is the mode itself: `self.training` is false,
/// `not self.training` true; `None` for anything else.
pub(crate) fn mode_in_eval(v: &Expr) -> Option<bool> {
    if Checker::is_self_attr(v, "training") {
        Some(false)
    } else if matches!(v, Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::Not)
        && Checker::is_self_attr(&u.operand, "training"))
    {
        Some(true)
    } else {
        None
    }
}

/// The operands of a test on `self.training` that Python evaluates in eval mode, the mode
/// export traces, left to right until the mode decides: the rest of `not self.training and X`
/// or of `self.training or X`, and what comes before the mode (`X and self.training`: `X` is
/// read before `self.training` stops the test).
pub(crate) fn eval_operands(test: &Expr) -> Vec<&Expr> {
    let Expr::BoolOp(b) = test else {
        return Vec::new();
    };
    let and = matches!(b.op, ast::BoolOp::And);
    let mut out = Vec::new();
    for v in &b.values {
        match mode_in_eval(v) {
            // `and` stops at a false operand, `or` at a true one.
            Some(value) if value != and => break,
            Some(_) => {}
            None if mentions_training(v) => {}
            None => out.push(v),
        }
    }
    out
}

/// Why a branch on `self.training` changes what an export gets.
enum Why {
    /// The training side draws random numbers or updates module state.
    Numerics,
    /// The two modes return different outputs (raw head outputs in training, decoded ones in
    /// eval).
    Outputs,
    /// The two modes compute different values on the way (`x = self.shuffle(x)` only in
    /// training, `y.clamp_min(0)` only in eval, `a if self.training else b`).
    Values,
}

/// Whether an expression names a loss (`losses`, `self.compute_loss(...)`, `{"loss": l}`).
fn loss_like(e: &Expr) -> bool {
    any_sub_expr(e, |e| {
        let word = match e {
            Expr::Name(n) => n.id.as_str(),
            Expr::Attribute(a) => a.attr.id.as_str(),
            Expr::StringLiteral(s) => s.value.to_str(),
            _ => return false,
        };
        crate::checker::names_loss(word)
    })
}

/// `self.attention_dropout if self.training else 0.0`: a dropout probability handed to an
/// attention kernel, off in eval mode. It is what `nn.Dropout` does, which is not reported either.
fn dropout_rate(train: &Expr, eval: &Expr) -> bool {
    fn names_drop(e: &Expr) -> bool {
        match e {
            Expr::Name(n) => n.id.to_ascii_lowercase().contains("drop"),
            Expr::Attribute(a) => {
                a.attr.id.to_ascii_lowercase().contains("drop") || names_drop(&a.value)
            }
            _ => false,
        }
    }
    let zero = |e: &Expr| matches!(e, Expr::NumberLiteral(_));
    names_drop(train) && zero(eval)
}

/// A value fixed by configuration, not computed: `None`, a literal, `self.attr`,
/// `self.attr["training"]`.
fn config_value(e: &Expr) -> bool {
    match e {
        Expr::NoneLiteral(_)
        | Expr::NumberLiteral(_)
        | Expr::BooleanLiteral(_)
        | Expr::StringLiteral(_) => true,
        Expr::Attribute(a) => matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self"),
        Expr::Subscript(s) => config_value(&s.value) && config_value(&s.slice),
        Expr::UnaryOp(u) => config_value(&u.operand),
        _ => false,
    }
}

/// Whether an expression mentions training targets (`targets`, `labels`, `gt_boxes`): picking
/// training samples is training-only work, not a different exported computation.
fn mentions_targets(e: &Expr) -> bool {
    any_sub_expr(e, |e| {
        let Expr::Name(n) = e else { return false };
        let w = n.id.to_ascii_lowercase();
        w.contains("target") || w.contains("label") || w.starts_with("gt")
    })
}

/// The value a branch side returns when it ends in `return VALUE`.
fn returned(side: &[ast::Stmt]) -> Option<&Expr> {
    match side.last() {
        Some(ast::Stmt::Return(r)) => r.value.as_deref(),
        _ => None,
    }
}

/// Whether the eval side of a branch computes something on tensors that the training side does
/// not: an assignment of a computed value, an in-place or appending call.
fn computes(ch: &Checker, side: &[ast::Stmt]) -> bool {
    side.iter().any(|s| match s {
        ast::Stmt::Assign(a) => {
            // `x[x < floor] = 0.0`: a write into a tensor, whatever the value.
            a.targets
                .iter()
                .any(|t| matches!(t, Expr::Subscript(s) if ch.is_tensor(&s.value)))
                || (!config_value(&a.value)
                    && !mentions_targets(&a.value)
                    && (ch.is_tensor(&a.value) || ch.builds_record_from_tensors(&a.value)))
        }
        ast::Stmt::AugAssign(a) => ch.is_tensor(&a.value) || ch.is_tensor(&a.target),
        ast::Stmt::Expr(e) => match e.value.as_ref() {
            Expr::Call(c) => {
                !mentions_targets(&e.value)
                    && (c.arguments.args.iter().any(|a| ch.is_tensor(a))
                        || matches!(c.func.as_ref(), Expr::Attribute(a)
                            if a.attr.id.ends_with('_') && ch.is_tensor(&a.value)))
            }
            _ => false,
        },
        _ => false,
    })
}

/// Whether both sides bind a common name, the eval side to a computed value: `w = mu + sigma *
/// eps` in training and `w, b = self.mu_w, self.mu_b` in eval (not `else: labels = None`).
fn rebinds_same(train: &[ast::Stmt], eval: &[ast::Stmt]) -> bool {
    fn bound(side: &[ast::Stmt], computed_only: bool) -> Vec<String> {
        let mut names = Vec::new();
        for s in side {
            let ast::Stmt::Assign(a) = s else { continue };
            let values: Vec<&Expr> = match (&a.targets[..], a.value.as_ref()) {
                ([Expr::Tuple(t)], Expr::Tuple(v)) if t.elts.len() == v.elts.len() => {
                    v.elts.iter().collect()
                }
                ([Expr::Tuple(t)], v) => t.elts.iter().map(|_| v).collect(),
                (_, v) => vec![v],
            };
            let targets: Vec<&Expr> = match &a.targets[..] {
                [Expr::Tuple(t)] => t.elts.iter().collect(),
                ts => ts.iter().collect(),
            };
            for (t, v) in targets.into_iter().zip(values) {
                let literal = matches!(
                    v,
                    Expr::NoneLiteral(_) | Expr::NumberLiteral(_) | Expr::BooleanLiteral(_)
                );
                if let Expr::Name(n) = t {
                    if !(computed_only && (literal || mentions_targets(v))) {
                        names.push(n.id.to_string());
                    }
                }
            }
        }
        names
    }
    let eval_names = bound(eval, true);
    !eval_names.is_empty() && bound(train, false).iter().any(|n| eval_names.contains(n))
}

/// Whether the training side transforms a tensor the rest of the code goes on with:
/// `x = self.shuffle_unit(x)` (not `proposals = self.select_training_samples(proposals, targets)`).
fn transforms_tensor(ch: &Checker, side: &[ast::Stmt]) -> bool {
    side.iter().any(|s| match s {
        ast::Stmt::Assign(a) => {
            let [Expr::Name(target)] = &a.targets[..] else {
                return false;
            };
            any_sub_expr(
                &a.value,
                |e| matches!(e, Expr::Name(n) if n.id == target.id),
            ) && matches!(a.value.as_ref(), Expr::Call(_) | Expr::BinOp(_))
                && !mentions_targets(&a.value)
                && ch.is_tensor(&Expr::Name(target.clone()))
        }
        _ => false,
    })
}

/// Whether the training side calls a method of the same class that draws random numbers or
/// updates parameters (`self._momentum_update_key_encoder()`: `param_k.data = ...`).
fn calls_numeric_method(ch: &Checker, side: &[ast::Stmt]) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    struct Calls<'c, 'a>(&'c Checker<'a>, bool);
    impl<'v> Visitor<'v> for Calls<'_, '_> {
        fn visit_expr(&mut self, e: &'v Expr) {
            if let Expr::Call(c) = e {
                if let Expr::Attribute(a) = c.func.as_ref() {
                    if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") {
                        if let Some(body) = self.0.own_method(a.attr.id.as_str()) {
                            if changes_numerics(body) || assigns_data(body) {
                                self.1 = true;
                            }
                        }
                    }
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut v = Calls(ch, false);
    v.visit_body(side);
    v.1
}

/// `p.data = ...`, `p.data.mul_(m)`, `p.copy_(...)`: parameters updated in place.
fn assigns_data(body: &[ast::Stmt]) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    struct Find(bool);
    impl<'a> Visitor<'a> for Find {
        fn visit_stmt(&mut self, s: &'a ast::Stmt) {
            if let ast::Stmt::Assign(a) = s {
                if a.targets
                    .iter()
                    .any(|t| matches!(t, Expr::Attribute(x) if x.attr.id.as_str() == "data"))
                {
                    self.0 = true;
                }
            }
            visitor::walk_stmt(self, s);
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                if let Expr::Attribute(a) = c.func.as_ref() {
                    let m = a.attr.id.as_str();
                    let on_data = matches!(a.value.as_ref(), Expr::Attribute(x) if x.attr.id.as_str() == "data");
                    if (on_data && m.ends_with('_')) || matches!(m, "copy_" | "lerp_") {
                        self.0 = true;
                    }
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find(false);
    f.visit_body(body);
    f.0
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
    // `if self.refine and not self.training:` runs its body in eval mode too.
    let negated = match test {
        Expr::UnaryOp(_) => true,
        Expr::BoolOp(b) => {
            b.values.iter().any(|v| {
                matches!(v, Expr::UnaryOp(u)
                if matches!(u.op, ast::UnaryOp::Not) && mentions_training(&u.operand))
            }) && (matches!(b.op, ast::BoolOp::Or)
                || !b
                    .values
                    .iter()
                    .any(|v| Checker::is_self_attr(v, "training")))
        }
        _ => false,
    };
    let (train, eval) = if negated {
        (orelse, body)
    } else {
        (body, orelse)
    };
    // `if self.training and torch.rand(1).item() < p:` (layer drop) draws in the test itself.
    let test_draws = changes_numerics(&[expr_stmt(test)]);
    // Either side drawing random numbers or updating module state (`if not self.training:
    // self.last_counts = ...`) makes the two modes differ. (The eval side only when it is the
    // body: an else taken from the rest of the block holds whatever follows.)
    let why = if test_draws
        || changes_numerics(train)
        || (negated && changes_numerics(eval))
        || calls_numeric_method(ch, train)
        || trains_submodule(eval)
    {
        Why::Numerics
    } else if kind == "conditional expression" {
        // `a if self.training else b`: two values, unless one side is nothing or a loss.
        let side = |s: &[ast::Stmt]| match s.first() {
            Some(ast::Stmt::Expr(e)) => Some(e.value.as_ref().clone()),
            _ => None,
        };
        match (side(train), side(eval)) {
            (Some(t), Some(e))
                if !matches!(t, Expr::NoneLiteral(_))
                    && !matches!(e, Expr::NoneLiteral(_))
                    && !loss_like(&t)
                    && !loss_like(&e)
                    && !dropout_rate(&t, &e) =>
            {
                Why::Values
            }
            // `self.aux_head(x) if self.training else None`: an output only one mode computes.
            (Some(t), Some(e))
                if matches!(t, Expr::NoneLiteral(_)) != matches!(e, Expr::NoneLiteral(_))
                    && [&t, &e].into_iter().any(|v| {
                        matches!(v, Expr::Call(_) | Expr::BinOp(_))
                            && !loss_like(v)
                            && !mentions_targets(v)
                    }) =>
            {
                Why::Values
            }
            _ => return true,
        }
    } else if (!negated
        && orelse.is_empty()
        && matches!(
            train.last(),
            Some(ast::Stmt::Continue(_) | ast::Stmt::Break(_))
        ))
        || (negated
            && matches!(
                body.last(),
                Some(ast::Stmt::Continue(_) | ast::Stmt::Break(_))
            ))
    {
        // `if self.training and deep_supervision: outs.append(...); continue`: training skips
        // the rest of the loop body, which eval mode runs; `if not self.training and
        // delta.abs().max() < tol: break` stops early in eval mode only.
        Why::Values
    } else if returned(train).is_some_and(|v| !loss_like(v) && !config_value(v)) && !eval.is_empty()
    {
        // `if self.training: return outputs` before the eval path decodes them.
        Why::Outputs
    } else if (negated || !always_exits(body)) && (computes(ch, eval) || rebinds_same(train, eval))
    {
        // `else: V = self.agg_inference(v)`, `if not self.training: y = y.clamp_min(0)`.
        Why::Values
    } else if !negated && !always_exits(body) && transforms_tensor(ch, train) {
        Why::Values
    } else {
        return true;
    };
    let text = ch.text_on_one_line(test.range());
    let message = match why {
        Why::Numerics => {
            format!("`{kind} {text}`: only the branch of the mode at export time is exported")
        }
        Why::Outputs => format!(
            "`{kind} {text}`: training returns other outputs; only the mode at export time is exported"
        ),
        Why::Values => format!(
            "`{kind} {text}`: training and eval compute different values; only the mode at export time is exported"
        ),
    };
    let i = ch.report(&RULE, test.range(), message);
    ch.help(i, "call `model.eval()` before `torch.onnx.export` (the dynamo exporter does not switch modes)");
    true
}
