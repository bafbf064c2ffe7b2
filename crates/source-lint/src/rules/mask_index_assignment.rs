//! ## What it does
//! Flags writes through a boolean mask: `x[mask] = v`, `x[x < 0] = 0`, `x[~m] += v`, when the index
//! is a comparison, an inverted or combined mask, a name the function also hands over as a padding
//! mask (`key_padding_mask=pad`), or a local bound to one (also a loop's target over a list of
//! masks: `for m in [p > t for t in ts]: x[m] = v`, or a parameter a caller fills with a mask or a
//! slice of one (`fill(x, miss[..., 0])`, of a parameter named a mask too: `fill(x, mask[...,
//! 0])`), also in a subclass's override of the method called, or a Boolean buffer of the module:
//! `self.register_buffer("dead", torch.zeros(n, dtype=torch.bool))`, or one registered from a
//! parameter named for a mask (`register_buffer("land", land_mask)`, also through
//! `torch.from_numpy` or `torch.as_tensor`; not a `channel_bitmask` or `bit_mask` of integer
//! flags), also through a method that keeps the dtype or a negation (`torch.ones(n, n,
//! dtype=torch.bool).triu(1)`, `~keep`), or a list of Python comparisons (`torch.tensor([h < OPEN
//! for h in range(N)])`), one a helper named for a mask builds, indexed here or handed to a helper
//! of this or another file, `clamp_dead(x, self.dead)`), or a tensor parameter (of `forward`
//! without a default, or annotated `Tensor`) written through into a tensor the function made (`cost
//! = cost.clone(); cost[forbidden] = 1e4`, a mask or indices: either exports as index_put; not a
//! parameter named for indices, positions, classes, steps or keys, nor a dict the function reads by
//! string keys); also through a mask's indices, `x[torch.where(m)] = v` (one-argument `where`, also
//! through a name bound only to it: `dead = torch.where(m); x[dead] = v`), which is the same write.
//!
//! ## Why is this bad?
//! A masked write traces to `aten::index_put`. The exporter has no `index_put` before opset 11
//! (`symbolic_opset9.index_put` refuses tensor indices), and from opset 11 it lowers a boolean
//! index to `masked_fill` for a scalar value or to `NonZero` + `ScatterND` otherwise
//! (`symbolic_opset11.index_put`): a data-dependent shape inside the graph that TensorRT and
//! many edge runtimes handle poorly or not at all. Combined with other indices the exporter
//! stops with "Only consecutive 1-d tensor indices are supported in exporting aten::index_put".
//!
//! ## Example
//! ```python
//! def forward(self, logits, mask):
//!     logits[~mask] = float("-inf")
//!     return logits
//! ```
//!
//! ## Fix
//! Compute the result with `torch.where` (or `masked_fill`), which export as a single `Where`.
//! Mind broadcasting: `torch.where` aligns the mask from the right, indexing from the left, so a
//! `[B, T]` mask over a `[B, T, D]` tensor needs `mask.unsqueeze(-1)`.
//! ```python
//! def forward(self, logits, mask):
//!     return logits.masked_fill(~mask, float("-inf"))
//! ```

use crate::checker::{flatten, own_exprs, Checker};
use crate::registry::{FixKind, Rule};
use crate::rules::{any_sub_expr, bound_values, index_elements};
use crate::Edit;
use diagnostics::Severity;
use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL001",
    name: "mask-index-assignment",
    severity: Severity::Warning,
    fix: FixKind::Unsafe,
    summary: "assignment through a boolean mask (`x[mask] = v`) exports as aten::index_put",
    source: include_str!("mask_index_assignment.rs"),
};

/// Returns whether it reported, so other store rules stay quiet on the same line.
pub(crate) fn check_store(
    ch: &mut Checker,
    target: &ast::ExprSubscript,
    stmt: &Stmt,
    aug: bool,
) -> bool {
    if !ch.in_model() {
        return false;
    }
    let elements = index_elements(&target.slice);
    // `x[cloud.expand_as(x)] = fill`: an index of the receiver's own shape is a mask.
    // `pad = key_padding.unsqueeze(1).expand_as(scores)` then `scores[pad] = v`: the same,
    // through a name bound in this function.
    let expands_to_receiver = |e: &Expr| {
        matches!(e, Expr::Call(c)
            if matches!(ch.method(c), Some(("expand_as", _)))
                && c.arguments.args.first().is_some_and(|a| ch.text(a.range()) == ch.text(target.value.range())))
    };
    let receiver_shaped = |e: &Expr| match e {
        Expr::Name(n) => ch.bodies.last().is_some_and(|body| {
            bound_values(body, n.id.as_str())
                .iter()
                .any(|v| expands_to_receiver(v))
        }),
        e => expands_to_receiver(e),
    };
    // `x[torch.where(m)] = v`: the indices of a mask, the same write as `x[m] = v`.
    let where_indices = |e: &Expr| {
        matches!(e, Expr::Call(c)
            if c.arguments.args.len() == 1
                && c.arguments.keywords.is_empty()
                && ch.torch_fn(c).is_some_and(|q| q == "torch.where"))
    };
    // `dead = torch.where(spec < 0)` then `spec[dead] = 0.0`: the same, through a name bound
    // to them in this function.
    let bound_to_where = |e: &Expr| match e {
        Expr::Name(n) => ch.bodies.last().is_some_and(|body| {
            let values = bound_values(body, n.id.as_str());
            !values.is_empty() && values.iter().all(|v| where_indices(v))
        }),
        _ => false,
    };
    let via_where = elements
        .iter()
        .any(|e| where_indices(e) || bound_to_where(e));
    // `change[change < 0.1] = 0.0`: a comparison of the tensor itself (a NumPy array in a
    // helper does the same, which is not traced).
    let self_compared = |e: &Expr| {
        matches!(e, Expr::Compare(c)
            if c.comparators.len() == 1
                && matches!(c.ops[0], ast::CmpOp::Lt | ast::CmpOp::LtE | ast::CmpOp::Gt
                    | ast::CmpOp::GtE | ast::CmpOp::Eq | ast::CmpOp::NotEq)
                && ch.text(c.left.range()) == ch.text(target.value.range()))
            && ch.is_tensor(&target.value)
    };
    // `cost[forbidden] = 1e4` in `forward(self, ..., forbidden)`, written to a tensor the
    // function made (`cost = cost.clone()`): a tensor parameter as the whole index is a mask or
    // indices, a write through either exports as index_put. Not a parameter named for indices,
    // positions or keys, nor a write into a parameter (`out[out_name] = v` fills a dict handed in).
    // Only parameters known to be tensors: of `forward` (the model's inputs) or annotated
    // `Tensor` (a helper's `_zero_col(x, col)` is as often handed a Python int or a slice).
    let body = ch.bodies.last().copied().unwrap_or_default();
    let def = ch.defs.last();
    // (A `forward` parameter with a default is an option unless annotated as a tensor.)
    let tensor_parameter = |name: &str| {
        ch.state().params.contains(name)
            && def.is_some_and(|f| {
                f.parameters.iter().any(|p| {
                    p.name().id.as_str() == name
                        && (p
                            .annotation()
                            .is_some_and(|a| ch.text(a.range()).contains("Tensor"))
                            || (f.name.id.as_str() == "forward"
                                && p.annotation().is_none()
                                && p.default().is_none()))
                })
            })
    };
    // The receiver is a tensor the function binds (`cost = cost.clone()`), not one handed in,
    // and not a dict it reads by string keys (`feats = self.backbone(x)`, `feats["p3"]`).
    let local_tensor = |r: &str| {
        if bound_values(body, r).is_empty() {
            return false;
        }
        let mut stmts = Vec::new();
        flatten(body, &mut stmts);
        !stmts.into_iter().flat_map(own_exprs).any(|e| {
            any_sub_expr(e, |x| {
                matches!(x, Expr::Subscript(k)
                    if matches!(k.value.as_ref(), Expr::Name(n) if n.id.as_str() == r)
                        && k.slice.is_string_literal_expr())
            })
        })
    };
    let param_index = |e: &Expr| {
        !aug && matches!(e, Expr::Name(n) if tensor_parameter(n.id.as_str())
            && !names_indices(n.id.as_str()))
            && matches!(target.value.as_ref(), Expr::Name(r) if local_tensor(r.id.as_str()))
            && ch.is_tensor(&target.value)
    };
    let by_mask = elements
        .iter()
        .any(|e| ch.is_bool_mask(e) || receiver_shaped(e) || self_compared(e));
    let by_param = !by_mask && elements.iter().any(|e| param_index(e));
    if !via_where && !by_mask && !by_param {
        return false;
    }
    let (line, _) = ch
        .index
        .line_col(ch.source, target.range().start().to_usize());
    ch.facts.needs.push(crate::OpsetNeed {
        op: "index_put".into(),
        min_opset: 11,
        file: ch.file.to_string(),
        line,
    });
    let base = ch.text(target.value.range()).to_string();
    let mask = ch.text(target.slice.range()).to_string();
    let i = ch.report(
        &RULE,
        target.range(),
        if by_param {
            format!(
                "`{base}[{mask}] =` writes through a tensor index handed in (a boolean mask or indices): exports as aten::index_put"
            )
        } else {
            format!(
                "`{base}[{mask}] {}` writes through a boolean mask: exports as aten::index_put",
                if aug { "op=" } else { "=" }
            )
        },
    );
    ch.help(
        i,
        "compute the result out of place: `x = torch.where(mask, value, x)` or `x = x.masked_fill(mask, value)`",
    );
    // A suggested rewrite for the plain single-mask case; unsafe: it is no longer in place and
    // `torch.where` broadcasts the mask from the right.
    if let (Stmt::Assign(a), false, Expr::Name(_)) = (stmt, aug, target.value.as_ref()) {
        if a.targets.len() == 1 && elements.len() == 1 && !via_where && !by_param {
            let value = ch.text(a.value.range()).to_string();
            let content = format!("{base} = torch.where({mask}, {value}, {base})");
            ch.fix(
                i,
                format!("replace with `{content}`"),
                false,
                vec![Edit {
                    start: a.range().start().to_usize(),
                    end: a.range().end().to_usize(),
                    content,
                }],
            );
        }
    }
    true
}

/// Parameter names that hold indices, positions, steps or keys rather than masks (`idx`,
/// `slot_ids`, `positions`, `perm`, `out_name`, `stage`, `step`).
fn names_indices(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    [
        "idx", "index", "ids", "indices", "pos", "perm", "order", "name", "key", "stage", "level",
        "layer", "step", "head", "task", "mode", "kind", "type", "field", "class", "start",
        "offset", "time", "count", "num",
    ]
    .iter()
    .any(|w| n.contains(w))
        || n.ends_with("_i")
        || n.len() == 1
}
