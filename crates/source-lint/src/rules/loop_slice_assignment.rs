//! ## What it does
//! Flags per-sample writes inside a Python loop whose slice bound depends on the loop variable
//! or on data: `for i in range(B): x[i, n[i]:] = 0`. In a loop over the samples
//! (`for k in range(B)` with `B` a size) a write indexed first by the loop variable counts with
//! any named bound (`logits[k, ts_begin:] = -inf`), and so does a write with several indices and
//! no bound at all (`out[k, :, :] = x[k, idx[k]]`): the loop itself is frozen to the batch.
//! A row the loop takes from a tensor counts too: `for row, n in zip(x, lengths): row[n:] = 0`,
//! and so does a bound read from a tensor by the loop variable (`base[offsets[a]:offsets[a] +
//! counts[a]] = v`), unless the tensor is made only from Python numbers, and so does a bound
//! that is an element of a tensor the loop walks (`for n in valid_counts: out[b, n:] = 0`). A
//! `while` loop that steps a counter (`i = 0; while i < x.size(0): ...; i += 1`) is read as the
//! `for` loop it spells.
//!
//! ## Why is this bad?
//! Tracing runs the loop and records every iteration: the loop count is frozen to the example
//! batch, and each `n[i]` used as a slice bound is read as a Python number, so the exported graph
//! holds the example's lengths as constants (the exporter warns "Converting a tensor to a Python
//! index"). Exporting the ragged per-row writes also yields `index_put` chains that fail with
//! "Only consecutive 1-d tensor indices are supported". The model exports, or fails, but never
//! generalises to another batch.
//!
//! ## Example
//! ```python
//! def forward(self, x, lengths):
//!     for i in range(x.size(0)):
//!         x[i, lengths[i]:] = 0
//!     return x
//! ```
//!
//! ## Fix
//! Build the whole mask at once by broadcasting positions against lengths:
//! ```python
//! def forward(self, x, lengths):
//!     pos = torch.arange(x.size(1), device=x.device).unsqueeze(0)
//!     keep = pos < lengths.unsqueeze(1)
//!     return x * keep.unsqueeze(-1).to(x.dtype)
//! ```

use crate::checker::{flatten, Checker};
use crate::registry::{FixKind, Rule};
use crate::rules::{index_elements, mentions};
use diagnostics::Severity;
use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL002",
    name: "loop-slice-assignment",
    severity: Severity::Error,
    fix: FixKind::None,
    summary: "per-sample slice assignment in a Python loop (`for i in range(B): x[i, n[i]:] = 0`)",
    source: include_str!("loop_slice_assignment.rs"),
};

fn is_constant(e: &Expr) -> bool {
    matches!(e, Expr::NumberLiteral(_))
        || matches!(e, Expr::UnaryOp(u) if matches!(u.operand.as_ref(), Expr::NumberLiteral(_)))
}

/// Whether the enclosing function binds `name` to a new tensor (`out = torch.zeros(...)`,
/// `x.new_empty(...)`, `torch.zeros_like(x)`): a buffer filled in place.
fn allocated_here(ch: &Checker, name: &str) -> bool {
    let Some(body) = ch.bodies.last() else {
        return false;
    };
    let mut stmts = Vec::new();
    flatten(body, &mut stmts);
    stmts.iter().any(|s| {
        let Stmt::Assign(a) = s else { return false };
        let [Expr::Name(n)] = &a.targets[..] else {
            return false;
        };
        let Expr::Call(c) = a.value.as_ref() else {
            return false;
        };
        let factory = |f: &str| {
            matches!(
                f,
                "zeros" | "ones" | "empty" | "full" | "zeros_like" | "ones_like" | "empty_like"
                    | "full_like"
            )
        };
        n.id.as_str() == name
            && (ch.torch_fn(c).is_some_and(|q| factory(q.trim_start_matches("torch.")))
                || matches!(c.func.as_ref(), Expr::Attribute(m)
                    if matches!(m.attr.id.as_str(), "new_zeros" | "new_ones" | "new_empty" | "new_full")))
    })
}

pub(crate) fn check_store(ch: &mut Checker, target: &ast::ExprSubscript, aug: bool) -> bool {
    if !ch.in_model() || ch.loops.is_empty() {
        return false;
    }
    let loop_vars: Vec<String> = ch.loops.iter().flat_map(|l| l.targets.clone()).collect();
    // `n = len(keep)` / `y0, y1 = bbox(mask[i])` inside the loop: a bound computed per sample.
    let per_iteration: Vec<String> = ch.loops.iter().flat_map(|l| l.assigned.clone()).collect();
    // `x[i, n[i]:]` and the chained spelling `x[i][n[i]:]` alike.
    let mut elements = index_elements(&target.slice);
    let mut base = target.value.as_ref();
    while let Expr::Subscript(inner) = base {
        elements.extend(index_elements(&inner.slice));
        base = inner.value.as_ref();
    }
    // `aff[i * k:(i + 1) * k, ..., :roi[i]] = 0` in a loop over the samples: a block of rows
    // per sample, selected by a slice of the loop variable (an overlap-add `+=` over such
    // slices is ODL003's in-place write).
    let samples_vars: Vec<String> = ch
        .loops
        .iter()
        .filter(|l| l.over_samples)
        .flat_map(|l| l.targets.clone())
        .collect();
    let indexed_by_loop = elements.iter().any(|e| match e {
        Expr::Slice(_) => !aug && !samples_vars.is_empty() && mentions(e, &samples_vars),
        e => mentions(e, &loop_vars),
    });
    // `for k in range(B): logits[k, ts_begin:] = -inf` (Whisper's timestamp rules): a write per
    // sample, whatever its bound, when the loop runs over the samples and indexes with its
    // variable first.
    let per_sample = ch.loops.iter().any(|l| {
        l.over_samples
            && elements.first().is_some_and(
                |e| matches!(e, Expr::Name(n) if l.targets.iter().any(|t| t == n.id.as_str())),
            )
    });
    let variable_slice = elements.iter().any(|e| match e {
        Expr::Slice(s) => [&s.lower, &s.upper].into_iter().flatten().any(|b| {
            !is_constant(b)
                && (per_sample && matches!(b.as_ref(), Expr::Name(_) | Expr::Attribute(_))
                    || mentions(b, &loop_vars)
                    || mentions(b, &per_iteration)
                    || ch.is_tensor(b)
                    || ch.is_size(b)
                    || ch.is_frozen_int(b)
                    || matches!(b.as_ref(), Expr::Subscript(_)))
        }),
        _ => false,
    });
    // `out[b, :, :] = x[b, idx[b]]`: a per-sample write into a tensor (several indices, or one
    // into a buffer the function allocated; a list's `images[i] = image` has one) freezes the
    // loop to the batch whatever its bounds. An indexed `+=` without a bound is ODL003's
    // in-place write.
    let per_sample_write = per_sample
        && !aug
        && (elements.len() >= 2
            || matches!(base, Expr::Name(n) if allocated_here(ch, n.id.as_str())));
    // `x0, x1 = boxes[f, 0], boxes[f, 2]` then `out[0, :, y0:y1, x0:x1] = patch`: bounds read
    // from a tensor in each iteration, whatever the write is indexed by; also read there
    // (`base[offsets[a]:offsets[a] + counts[a]] = v` with `offsets` a tensor).
    let tensor_bounds = elements.iter().any(|e| match e {
        Expr::Slice(s) => [&s.lower, &s.upper].into_iter().flatten().any(|b| {
            (mentions(b, &per_iteration) && ch.is_tensor(b))
                || crate::rules::any_sub_expr(b, |x| {
                    matches!(x, Expr::Subscript(r) if mentions(&r.slice, &loop_vars)
                        && !mentions(&r.value, &loop_vars)
                        && ch.is_tensor(&r.value)
                        && !ch.is_constant_tensor(&r.value))
                })
        }),
        _ => false,
    });
    // `for row, n in zip(x, lengths): row[n:] = 0`: a row of a tensor written with a bound the
    // loop reads per sample.
    let row_write = matches!(base, Expr::Name(n)
        if ch.loops.iter().any(|l| l.rows.iter().any(|r| r == n.id.as_str())
            && !l.assigned.iter().any(|a| a == n.id.as_str())))
        && variable_slice;
    // `b = 0; for n in valid_counts: out[b, n:] = 0; b += 1`: a bound that is an element of a
    // tensor the loop walks, read as a Python number in each iteration.
    // The element itself, arithmetic on it (`n - 1`) or its value as a number (`int(n)`,
    // `n.item()`, `min(n, 5)`), not its size (`:t.shape[-1]`, `len(t)`).
    let row_vars: Vec<String> = ch.loops.iter().flat_map(|l| l.data_rows.clone()).collect();
    fn element_of(e: &Expr, rows: &[String]) -> bool {
        match e {
            Expr::Name(n) => rows.iter().any(|r| r == n.id.as_str()),
            Expr::BinOp(b) => element_of(&b.left, rows) || element_of(&b.right, rows),
            Expr::UnaryOp(u) => element_of(&u.operand, rows),
            Expr::Call(c) => match c.func.as_ref() {
                Expr::Name(f) => {
                    matches!(
                        f.id.as_str(),
                        "int" | "float" | "round" | "abs" | "min" | "max"
                    ) && c.arguments.args.iter().any(|a| element_of(a, rows))
                }
                Expr::Attribute(m) => {
                    matches!(
                        m.attr.id.as_str(),
                        "item" | "long" | "int" | "clamp" | "cpu"
                    ) && element_of(&m.value, rows)
                }
                _ => false,
            },
            _ => false,
        }
    }
    let row_bound = !aug
        && elements.iter().any(|e| match e {
            Expr::Slice(s) => [&s.lower, &s.upper]
                .into_iter()
                .flatten()
                .any(|b| element_of(b, &row_vars)),
            _ => false,
        });
    if !(((indexed_by_loop || tensor_bounds) && (variable_slice || per_sample_write))
        || row_write
        || row_bound)
    {
        return false;
    }
    let text = ch.text(target.range()).to_string();
    let message = if variable_slice {
        format!("`{text} = ...` in a loop: the loop and each slice bound are frozen at export")
    } else {
        format!("`{text} = ...` once per sample in a loop over the batch: the loop is unrolled to the example's batch size at export")
    };
    let i = ch.report(&RULE, target.range(), message);
    ch.help(
        i,
        if variable_slice {
            "build a [B, T] mask with `torch.arange(T) < lengths.unsqueeze(1)` and apply it with `torch.where` or a multiply"
        } else {
            "compute all samples at once with batched tensor ops (`torch.gather`, `index_select`, broadcasting) instead of a Python loop over the batch"
        },
    );
    true
}
