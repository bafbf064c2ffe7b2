//! ## What it does
//! Flags Python control flow on tensor values in model code: `if x.sum() > 0:`,
//! `while (x > eps).any():`, `a if mask.all() else b`, `if not valid.all():`, a `match` arm's
//! guard (`case "auto" if lengths.min() < 8:`), a comprehension's filter (`[j for j in
//! range(n) if labels[j] < 2]`, which keeps the items the example kept), and conditions
//! that read a tensor through Python (`if bool(t.any()):`, `if t.item() < 0.01:`, `if conf <
//! thr:` with `conf = probs.max().item()`, `if abs(float(s) - target) > tol:`) or count what a
//! data-dependent selection kept (`if len(bad[0]) > 0:` with `bad = torch.where(x < 0)`, `if
//! keep.numel() == 0:` with `keep = scores.nonzero()`, `if len(ys) == 0:` with `ys, xs =
//! torch.where(m)`; not the rank, `len(bad)`). Tensors made only from Python numbers or random
//! draws (`if torch.rand(1) < self.p:`) do not depend on the inputs and are left alone, unless
//! the function writes values or indices from the inputs into them (`hist = torch.zeros(8);
//! hist[bucket] += 1`); so is a test export never evaluates (`if not torch.jit.is_tracing() and
//! (p < 0).any():`), and a bare test of a record's field annotated `Optional[...]` (`if
//! out.aux:`, whether it was filled). A test spread over several lines is reported on the line
//! of its `if`, `elif` or `while`.
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
use ruff_python_ast::{self as ast, Expr};
use ruff_text_size::{Ranged, TextRange, TextSize};

pub(crate) const RULE: Rule = Rule {
    code: "ODL005",
    name: "tensor-condition",
    severity: Severity::Error,
    fix: FixKind::None,
    summary: "Python `if`/`while`/conditional expression on a tensor value in model code",
    source: include_str!("tensor_condition.rs"),
};

/// Whether a condition reads a tensor's value through Python: `bool(t)`, `t.item()`,
/// `float(t)`, `int(t)` on a tensor that depends on the inputs.
fn reads_tensor_value(ch: &Checker, e: &Expr) -> bool {
    reads_tensor_value_at(ch, e, 0)
}

/// [`reads_tensor_value`], `depth` names deep (`a = abs(b); b = abs(a)` stops).
fn reads_tensor_value_at(ch: &Checker, e: &Expr, depth: u32) -> bool {
    match e {
        // `bad.shape[0]`: the length of a tensor whose length depends on the data (its first
        // dimension; `nonzero()`'s second is the input's rank).
        Expr::Subscript(s) => matches!(s.value.as_ref(), Expr::Attribute(a)
            if a.attr.id.as_str() == "shape"
                && is_zero(&s.slice)
                && value_dependent_length(ch, &a.value, 0)),
        Expr::Call(c) => {
            if let Some((m, recv)) = ch.method(c) {
                if m == "item" && ch.is_tensor(recv) && !ch.is_constant_tensor(recv) {
                    return true;
                }
                // `busy.numel() == 0`, `idx.size(0)`.
                let counts = match m {
                    "numel" | "nelement" => true,
                    "size" => c.arguments.args.first().is_some_and(is_zero),
                    _ => false,
                };
                if counts && value_dependent_length(ch, recv, 0) {
                    return true;
                }
            } else if let Some(q) = ch.qualify(&c.func) {
                // `len(bad[0]) > 0` with `bad = torch.where(x < 0)`, `torch.numel(keep)`.
                if q == "builtins.len" || q == "torch.numel" {
                    return c
                        .arguments
                        .args
                        .first()
                        .is_some_and(|a| value_dependent_length(ch, a, 0));
                }
                // `abs(float(spi[0]) - target) > tol`.
                if matches!(q.as_str(), "builtins.abs" | "builtins.round") {
                    return c
                        .arguments
                        .args
                        .first()
                        .is_some_and(|a| reads_tensor_value_at(ch, a, depth));
                }
                if matches!(
                    q.as_str(),
                    "builtins.bool" | "builtins.int" | "builtins.float"
                ) {
                    return c
                        .arguments
                        .args
                        .first()
                        .is_some_and(|a| ch.is_tensor(a) && !ch.is_constant_tensor(a));
                }
            }
            false
        }
        Expr::UnaryOp(u) => reads_tensor_value_at(ch, &u.operand, depth),
        // `conf = probs.max().item()`, then `if conf < thr:`: the number read from the tensor.
        Expr::Name(n) if depth < 3 => bound_only_to(ch, n.id.as_str(), |v| {
            matches!(v, Expr::Call(_)) && reads_tensor_value_at(ch, v, depth + 1)
        }),
        // `step < n and not done.all()`: each operand is a condition of its own.
        Expr::BoolOp(b) => b.values.iter().any(|v| {
            let inner = match v {
                Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::Not) => u.operand.as_ref(),
                v => v,
            };
            let bare_param = matches!(inner, Expr::Name(n) if ch.is_param(n.id.as_str()))
                || ch.is_optional_field(inner);
            (!bare_param && ch.is_tensor(inner) && !ch.is_constant_tensor(inner))
                || reads_tensor_value_at(ch, v, depth)
        }),
        Expr::Compare(c) => {
            reads_tensor_value_at(ch, &c.left, depth)
                || c.comparators
                    .iter()
                    .any(|x| reads_tensor_value_at(ch, x, depth))
        }
        Expr::BinOp(b) => {
            reads_tensor_value_at(ch, &b.left, depth) || reads_tensor_value_at(ch, &b.right, depth)
        }
        _ => false,
    }
}

/// Whether a tensor's length depends on the values of the inputs: what `nonzero`, `argwhere`,
/// `masked_select` or `unique` return, an element of the tuple one-argument `torch.where` or
/// `nonzero(as_tuple=True)` return (`idx[0]`; not the tuple, whose length is the rank), reshaped
/// or cast, directly or through a name bound only to one in this function.
fn value_dependent_length(ch: &Checker, e: &Expr, depth: u32) -> bool {
    match e {
        Expr::Call(c) => {
            let as_tuple = crate::rules::keyword(c, "as_tuple")
                .is_some_and(|k| matches!(k.value, Expr::BooleanLiteral(ref b) if b.value));
            // `torch.unique(x, return_counts=True)`: a tuple.
            let tuple = as_tuple
                || crate::rules::keyword(c, "return_counts").is_some()
                || crate::rules::keyword(c, "return_inverse").is_some();
            if let Some(q) = ch.torch_fn(c) {
                return matches!(
                    q.as_str(),
                    "torch.nonzero"
                        | "torch.argwhere"
                        | "torch.masked_select"
                        | "torch.unique"
                        | "torch.unique_consecutive"
                ) && !tuple;
            }
            match ch.method(c) {
                Some((
                    "nonzero" | "argwhere" | "masked_select" | "unique" | "unique_consecutive",
                    recv,
                )) => !tuple && (ch.is_tensor(recv) || ch.is_bool_mask(recv)),
                Some((m, recv)) if keeps_length(m) => value_dependent_length(ch, recv, depth),
                _ => false,
            }
        }
        // `bad[0]` of `bad = torch.where(x < 0)`.
        Expr::Subscript(s) if s.slice.is_number_literal_expr() => index_tuple(ch, &s.value, depth),
        Expr::Name(n) if depth < 4 => {
            bound_only_to(ch, n.id.as_str(), |v| {
                value_dependent_length(ch, v, depth + 1)
            }) || unpacked_from_index_tuple(ch, n.id.as_str(), depth)
        }
        _ => false,
    }
}

/// Whether every binding of `name` in this function unpacks it from an index tuple (`ys, xs =
/// torch.where(m)`): each element is one index tensor, as long as the selection.
fn unpacked_from_index_tuple(ch: &Checker, name: &str, depth: u32) -> bool {
    let Some((values, stores)) = local_bindings(ch, name, true) else {
        return false;
    };
    !values.is_empty()
        && stores == values.len()
        && values.iter().all(|v| index_tuple(ch, v, depth + 1))
}

/// Methods that keep a tensor's first dimension (`keep.squeeze(1)`, `idx.long()`).
fn keeps_length(method: &str) -> bool {
    matches!(
        method,
        "squeeze"
            | "view"
            | "reshape"
            | "flatten"
            | "long"
            | "int"
            | "float"
            | "to"
            | "contiguous"
            | "clone"
    )
}

/// What a local of the enclosing function is bound to, by plain assignments or (`unpacked`) by
/// unpackings (`ys, xs = ...`), and how many times the function stores to it; `None` for a
/// parameter, which may come in as anything (`if idx is None: idx = x.nonzero()`).
fn local_bindings<'a>(
    ch: &Checker<'a>,
    name: &str,
    unpacked: bool,
) -> Option<(Vec<&'a Expr>, usize)> {
    let body = *ch.bodies.last()?;
    if ch
        .defs
        .last()
        .is_some_and(|f| f.parameters.iter().any(|p| p.name().id.as_str() == name))
    {
        return None;
    }
    Some(match ch.read_local_bindings() {
        Some(b) if unpacked => (b.unpacked(name).to_vec(), b.stores(name)),
        Some(b) => (b.values(name).to_vec(), b.stores(name)),
        None if unpacked => (
            crate::rules::unpacked_values(body, name),
            crate::rules::store_count(body, name),
        ),
        None => (
            crate::rules::bound_values(body, name),
            crate::rules::store_count(body, name),
        ),
    })
}

/// Whether every binding of `name` in this function is an assignment whose value `is` accepts,
/// a value that only reshapes or casts the name itself (`keep = keep.squeeze(1)`) aside, with
/// at least one such assignment and no other binding (a loop's target, an unpacking).
fn bound_only_to(ch: &Checker, name: &str, is: impl Fn(&Expr) -> bool) -> bool {
    let Some((values, stores)) = local_bindings(ch, name, false) else {
        return false;
    };
    if values.is_empty() || stores != values.len() {
        return false;
    }
    let itself = |v: &Expr| {
        let mut v = v;
        while let Expr::Call(c) = v {
            match ch.method(c) {
                Some((m, recv)) if keeps_length(m) => v = recv,
                _ => return false,
            }
        }
        matches!(v, Expr::Name(x) if x.id.as_str() == name)
    };
    let own: Vec<&&Expr> = values.iter().filter(|v| !itself(v)).collect();
    !own.is_empty() && own.into_iter().all(|v| is(v))
}

/// Whether an index is the literal `0`.
fn is_zero(e: &Expr) -> bool {
    matches!(e, Expr::NumberLiteral(n) if matches!(&n.value, ast::Number::Int(i) if *i == 0))
}

/// Whether a value is the tuple of index tensors one-argument `torch.where` or
/// `nonzero(as_tuple=True)` return, directly or through a name bound only to one.
fn index_tuple(ch: &Checker, e: &Expr, depth: u32) -> bool {
    match e {
        Expr::Call(c) => {
            let as_tuple = crate::rules::keyword(c, "as_tuple")
                .is_some_and(|k| matches!(k.value, Expr::BooleanLiteral(ref b) if b.value));
            match ch.torch_fn(c).as_deref() {
                Some("torch.where") => {
                    c.arguments.args.len() == 1 && c.arguments.keywords.is_empty()
                }
                Some("torch.nonzero") => as_tuple,
                Some(_) => false,
                None => as_tuple && matches!(ch.method(c), Some(("nonzero", _))),
            }
        }
        Expr::Name(n) if depth < 4 => {
            bound_only_to(ch, n.id.as_str(), |v| index_tuple(ch, v, depth + 1))
        }
        _ => false,
    }
}

pub(crate) fn check_test(ch: &mut Checker, test: &Expr, kind: &str, keyword: TextSize) {
    if !ch.in_model() {
        return;
    }
    // `if not mask.all():` branches on the tensor as much as `if mask.all():` does.
    let inner = match test {
        Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::Not) => u.operand.as_ref(),
        e => e,
    };
    // `if out.aux or out.mask:`: each operand a test of an optional record field.
    let on_tensor = match inner {
        Expr::BoolOp(b) => b
            .values
            .iter()
            .any(|v| ch.is_tensor(v) && !ch.is_constant_tensor(v) && !ch.is_optional_field(v)),
        _ => ch.is_tensor(inner) && !ch.is_constant_tensor(inner),
    };
    if !on_tensor && !reads_tensor_value(ch, inner) {
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
    // `if out.aux:` / `if not track["valid"]:`: whether a record's optional field was filled.
    if ch.is_optional_field(inner) {
        return;
    }
    let text = ch.text_on_one_line(test.range());
    // A test spread over several lines is reported on the line of its `if`/`while`.
    let range = if ch.on_later_line(keyword, test.range().start()) {
        TextRange::new(keyword, keyword)
    } else {
        test.range()
    };
    let message = if kind == "for ... if" {
        format!("comprehension filter `if {text}` tests a tensor value: the trace keeps only the items the example kept")
    } else {
        format!("`{kind} {text}` branches on a tensor value: the trace keeps only the branch the example took")
    };
    let i = ch.report(&RULE, range, message);
    ch.help(
        i,
        "select with `torch.where(cond, a, b)` or move the branch out of the exported code",
    );
}
