//! ## What it does
//! Compares each `torch.onnx.export(..., opset_version=N)` with the ops the export can reach, and
//! flags the call when one of them needs a newer opset. Reachable are the ops of the exporting
//! file and of the linted files it imports, transitively; when the exported module is read to be
//! built from a class imported from a linted file (`model = load(IFNet(cfg), ckpt).eval()`, also
//! inside a wrapper of the exporting file), only the ops of that file and what it imports (and of
//! the exporting file, for its wrapper). An export script that imports none of them and defines
//! no model (models built from a registry or loaded by name) is held to the ops of every linted
//! file. Needs recorded (each
//! the first opset with a symbolic in `torch/onnx/.../symbolic_opsetN.py`): `F.grid_sample` 16,
//! `scatter_reduce` 16, `torch.einsum` 12, `unique` 11, `tril`/`triu` 14,
//! `F.scaled_dot_product_attention` 14, `F.fold` 18. The `opset_version` may be a literal, a
//! name bound to one (also through module constants: `BOARD_OPSET = OPSET`), a choice of two
//! (`LEGACY_OPSET if legacy else EDGE_OPSET`, the lower counts), a constant offset from one
//! (`LEGACY_OPSET + 1`), written there or bound to a local
//! first (`opset = LEGACY_OPSET if legacy else OPSET`), a parameter's default when no call in the
//! file passes that parameter (`def export(model, path, opset: int = 13)`, also `opset=EUV_OPSET`;
//! also through a table of jobs, `jobs = {"euv": export_euv}` then `fn(ckpt, out)` for each,
//! unless the function or the table is handed on; not for a function a command-line framework
//! calls, `@click.option(...)`), the fallback of `opset or 13` when `opset` defaults to `None`
//! and no call passes it (also `opset = opset or 13` first), of `args.opset or 11` when the
//! argparse option gives no default or `None` and is not required (`required=True`, also through
//! a module constant; `or` also takes the fallback after a `0`), an entry of a module-level dict
//! the file only reads (`CFG["opset"]` with `CFG = {"opset": 14}`), an argparse option's default
//! (`opset_version=args.opset` with `add_argument("--opset", type=int, default=11)`), a dict
//! spliced into the call (`**EXPORT_KW`), or from the caller of a function of the file that
//! exports with the opset it is given (`def _export(m, args, path, **kw): torch.onnx.export(m,
//! args, path, **kw)` called as `_export(critic, args, path, opset_version=11)`): then that call
//! is the export. A dict of export arguments no export reads its opset from (`def
//! export_kwargs(): return {"opset_version": 13, "do_constant_folding": True}`, or a config
//! module without torch) is held to the ops that the exports which splice a dict they cannot read
//! (`**ops.export_kwargs()`, `**kw`) reach from its file, and reported at its entry.
//!
//! ## Why is this bad?
//! The export fails with "Exporting the operator 'aten::grid_sampler' to ONNX opset version 11
//! is not supported" only after tracing the whole model, often in a CI job far from the code that
//! introduced the op; or, for ops with an emulation at the lower opset, the model exports with a
//! slower or less exact lowering.
//!
//! ## Example
//! ```python
//! # model.py
//! y = F.grid_sample(x, grid, align_corners=False)
//! # export.py
//! torch.onnx.export(model, (x,), "m.onnx", opset_version=11)
//! ```
//!
//! ## Fix
//! Raise `opset_version` to the highest need (suggested as an unsafe fix: the target runtime must
//! support that opset):
//! ```python
//! torch.onnx.export(model, (x,), "m.onnx", opset_version=16)
//! ```

use crate::checker::{Checker, ExportSite};
use crate::registry::{FixKind, Rule};
use crate::rules::export_without_eval::{collect, exported_module, is_export};
use crate::rules::{int_literal, spliced_keyword, string_literal};
use crate::{Edit, Facts, FileReport, Finding, LineIndex, OpsetNeed};
use diagnostics::Severity;
use diagnostics::{Diagnostic, Location};
use ruff_python_ast as ast;
use ruff_text_size::{Ranged, TextRange};

pub(crate) const RULE: Rule = Rule {
    code: "ODL020",
    name: "opset-too-low",
    severity: Severity::Error,
    fix: FixKind::Unsafe,
    summary: "`opset_version` lower than an op used in the project needs (e.g. grid_sample < 16)",
    source: include_str!("opset_too_low.rs"),
};

/// Records export sites and the opset needs of ops the other rules do not track.
pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    // Placed only for what is recorded: most calls are neither.
    let place = |ch: &Checker| {
        ch.index
            .line_col(ch.source, call.range().start().to_usize())
    };
    if matches!(call.func.as_ref(), ruff_python_ast::Expr::Name(f) if f.id.as_str() == "dict") {
        let keys = || {
            call.arguments
                .keywords
                .iter()
                .filter_map(|k| Some((k.arg.as_ref()?.id.as_str(), &k.value)))
        };
        kwargs_opset(ch, Some(call), keys);
        return;
    }
    let export = is_export(ch, call);
    let forwarded = if export {
        None
    } else {
        forwarded_opset(ch, call)
    };
    if export || forwarded.is_some() {
        let given = match forwarded {
            Some(k) => Some((k.value.clone(), k.range())),
            None => spliced_keyword(ch, call, "opset_version"),
        };
        let opset = given
            .and_then(|(value, _)| {
                let v = opset_value(ch, call, &value, 0);
                v.map(|v| (v, value.range()))
            })
            .or_else(|| {
                call.arguments
                    .args
                    .get(10)
                    .and_then(|a| int_literal(a).map(|v| (v, a.range())))
            });
        let model_classes = exported_classes(ch, call);
        // `**kw` from somewhere this file cannot read, not the enclosing function's own
        // `**kwargs` parameter (whose callers are the exports, see `forwards_opset`).
        let splices = opset.is_none()
            && call.arguments.keywords.iter().any(|k| {
                k.arg.is_none()
                    && !matches!(&k.value, ruff_python_ast::Expr::Name(n)
                        if enclosing_kwarg(ch.bodies[0], call.range()) == Some(n.id.as_str()))
            });
        let (line, column) = place(ch);
        ch.facts.exports.push(ExportSite {
            line,
            column,
            opset,
            model_classes,
            model_files: None,
            splices,
        });
        return;
    }
    let need = if let Some(q) = ch.torch_fn(call) {
        match q.as_str() {
            "torch.unique" | "torch.unique_consecutive" => Some(("unique", 11)),
            "torch.tril" | "torch.triu" => Some(("tril/triu", 14)),
            "torch.nn.functional.scaled_dot_product_attention" => {
                Some(("scaled_dot_product_attention", 14))
            }
            "torch.nn.functional.fold" => Some(("fold (Col2Im)", 18)),
            "torch.scatter_reduce" => Some(("scatter_reduce", 16)),
            _ => None,
        }
    } else if let Some((m, _)) = ch.method(call) {
        match m {
            "unique" => Some(("unique", 11)),
            "tril" | "triu" | "tril_" | "triu_" => Some(("tril/triu", 14)),
            "scatter_reduce" | "scatter_reduce_" => Some(("scatter_reduce", 16)),
            _ => None,
        }
    } else {
        None
    };
    if let Some((op, min_opset)) = need {
        let (line, _) = place(ch);
        ch.facts.needs.push(OpsetNeed {
            op: op.into(),
            min_opset,
            file: ch.file.to_string(),
            line,
        });
    }
}

/// The `**kwargs` parameter of the innermost function around `range`.
fn enclosing_kwarg(
    body: &[ruff_python_ast::Stmt],
    range: ruff_text_size::TextRange,
) -> Option<&str> {
    for s in body {
        if !s.range().contains_range(range) {
            continue;
        }
        return match s {
            ruff_python_ast::Stmt::FunctionDef(f) => enclosing_kwarg(&f.body, range)
                .or_else(|| f.parameters.kwarg.as_ref().map(|k| k.name.id.as_str())),
            ruff_python_ast::Stmt::ClassDef(c) => enclosing_kwarg(&c.body, range),
            _ => None,
        };
    }
    None
}

/// `{"opset_version": 13, "do_constant_folding": True, ...}`: export arguments built apart from
/// the call.
pub(crate) fn check_dict(ch: &mut Checker, dict: &ruff_python_ast::ExprDict) {
    let keys = || {
        dict.items
            .iter()
            .filter_map(|i| Some((string_literal(i.key.as_ref()?)?, &i.value)))
    };
    kwargs_opset(ch, None, keys);
}

/// Records the opset of a dict of export arguments: one with `opset_version` and another
/// argument only `torch.onnx.export` takes.
fn kwargs_opset<'e, I: Iterator<Item = (&'e str, &'e ruff_python_ast::Expr)>>(
    ch: &mut Checker,
    call: Option<&ast::ExprCall>,
    keys: impl Fn() -> I,
) {
    const EXPORT_ONLY: &[&str] = &[
        "do_constant_folding",
        "keep_initializers_as_inputs",
        "input_names",
        "output_names",
        "dynamic_axes",
        "export_params",
        "operator_export_type",
    ];
    let Some((_, value)) = keys().find(|(k, _)| *k == "opset_version") else {
        return;
    };
    if !keys().any(|(k, _)| EXPORT_ONLY.contains(&k)) {
        return;
    }
    let opset = match (value, call) {
        // `dict(opset_version=opset or 13, ...)`: read as the export's own keyword is.
        (ruff_python_ast::Expr::BoolOp(_), Some(call)) => opset_value(ch, call, value, 0),
        (ruff_python_ast::Expr::Name(n), _) => named_int(ch, n.id.as_str()),
        (e, _) => int_literal(e),
    };
    if let Some(v) = opset {
        ch.facts.kwargs_opsets.push((v, value.range()));
    }
}

/// The opset an `opset_version=` value gives: a number, a name bound to one, an argparse
/// default, or a choice of two (`LEGACY_OPSET if legacy else EDGE_OPSET`: the lower of the two is
/// exported when the test picks it), written there or bound once to a local of the function
/// (`opset = OPSET_LEGACY if legacy else OPSET`), or a constant offset from one (`LEGACY_OPSET +
/// 1`). `opset if opset is not None else 11`: the
/// fallback is for a caller passing `None`; the name's own value is what the export gets.
fn opset_value(
    ch: &Checker,
    call: &ast::ExprCall,
    e: &ruff_python_ast::Expr,
    depth: u32,
) -> Option<u32> {
    use ruff_python_ast::Expr;
    let guarded = |i: &ruff_python_ast::ExprIf, branch: &Expr| {
        matches!((i.test.as_ref(), branch), (
            Expr::Compare(c),
            Expr::Name(b),
        ) if c.comparators.len() == 1
            && c.comparators[0].is_none_literal_expr()
            && matches!(c.left.as_ref(), Expr::Name(a) if a.id == b.id))
    };
    match e {
        Expr::If(i) if guarded(i, &i.body) => opset_value(ch, call, &i.body, depth + 1),
        Expr::If(i) if guarded(i, &i.orelse) => opset_value(ch, call, &i.orelse, depth + 1),
        Expr::If(i) => match (
            opset_value(ch, call, &i.body, depth + 1),
            opset_value(ch, call, &i.orelse, depth + 1),
        ) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        },
        Expr::Name(n) => named_int(ch, n.id.as_str())
            .or_else(|| parameter_default(ch, call, n.id.as_str()))
            .or_else(|| {
                // A name the function (or the module, for a script's top level) binds once, to
                // a choice; `opset += 5` or a loop over opsets binds it again.
                let body = ch.defs.last().map_or(ch.bodies[0], |f| &f.body[..]);
                match crate::rules::bound_values(body, n.id.as_str())[..] {
                    [v @ Expr::If(_)]
                        if depth < 3 && crate::rules::store_count(body, n.id.as_str()) == 1 =>
                    {
                        opset_value(ch, call, v, depth + 1)
                    }
                    // `opset = opset or 13`: the parameter's fallback; `opset = args.opset or
                    // 11`: the option's.
                    [v @ Expr::BoolOp(b)]
                        if depth < 3
                            && crate::rules::store_count(body, n.id.as_str()) == 1
                            && (matches!(b.values.first(), Some(Expr::Name(m)) if m.id == n.id)
                                || matches!(b.values.first(), Some(Expr::Attribute(_)))) =>
                    {
                        opset_value(ch, call, v, depth + 1)
                    }
                    _ => None,
                }
            }),
        Expr::Attribute(a) => argparse_default(ch, a),
        // `CFG["opset"]` with `CFG = {"opset": 14, ...}` bound once at module level and only
        // read ([`constant_dict_entry`]).
        Expr::Subscript(sub) if depth < 3 => {
            let (Expr::Name(n), Some(key)) = (sub.value.as_ref(), string_literal(&sub.slice))
            else {
                return None;
            };
            let value = constant_dict_entry(ch, n.id.as_str(), key)?;
            opset_value(ch, call, value, depth + 1)
        }
        // `opset or 13`: the name's value, or the fallback when the name is a parameter that
        // defaults to `None` and no call of the file passes it, or an argparse option left at
        // `None` (`args.opset or 11`).
        Expr::BoolOp(b) if matches!(b.op, ast::BoolOp::Or) && b.values.len() == 2 && depth < 3 => {
            // A first value of 0 is false: `or` gives the fallback (`default=0`, then
            // `args.opset or 17`).
            let first = opset_value(ch, call, &b.values[0], depth + 1);
            if first == Some(0) {
                return opset_value(ch, call, &b.values[1], depth + 1);
            }
            first.or_else(|| {
                match &b.values[0] {
                    Expr::Name(n) => parameter_default_with(ch, call, n.id.as_str(), true, |d| {
                        d.is_none_literal_expr().then_some(())
                    })?,
                    // `args.opset or 11`: an option that defaults to `None` (or gives none).
                    Expr::Attribute(a) => argparse_default_with(ch, a, |d| {
                        d.is_none_or(|d| d.is_none_literal_expr()).then_some(())
                    })?,
                    _ => return None,
                }
                opset_value(ch, call, &b.values[1], depth + 1)
            })
        }
        // `LEGACY_OPSET + 1`: a constant offset from a known opset.
        Expr::BinOp(b) if depth < 3 => {
            let (l, r) = (
                opset_value(ch, call, &b.left, depth + 1)?,
                int_literal(&b.right).or_else(|| opset_value(ch, call, &b.right, depth + 1))?,
            );
            match b.op {
                ast::Operator::Add => l.checked_add(r),
                ast::Operator::Sub => l.checked_sub(r),
                _ => None,
            }
        }
        e => int_literal(e),
    }
}

/// The value of `key` in a dict literal bound once to the module-level `name`, when the file only
/// reads it (`CFG["opset"]`, `CFG.get(...)`): not written to (`CFG["opset"] = args.opset`,
/// `CFG.update(...)`, `global CFG`), handed anywhere or bound to another name, and not bound by
/// the reading function itself.
fn constant_dict_entry<'a>(
    ch: &Checker<'a>,
    name: &str,
    key: &str,
) -> Option<&'a ruff_python_ast::Expr> {
    use ruff_python_ast::visitor::{self, Visitor};
    use ruff_python_ast::{Expr, Stmt};
    let module: &'a [Stmt] = ch.bodies[0];
    let Expr::Dict(d) = crate::rules::module_constant(ch, name)? else {
        return None;
    };
    struct Writes<'n>(&'n str, bool);
    impl<'v> Visitor<'v> for Writes<'_> {
        fn visit_expr(&mut self, e: &'v Expr) {
            let on_name = |v: &Expr| matches!(v, Expr::Name(n) if n.id.as_str() == self.0);
            match e {
                // `CFG["opset"]`, `CFG.get("opset")`: reads.
                Expr::Subscript(s)
                    if on_name(&s.value) && matches!(s.ctx, ruff_python_ast::ExprContext::Load) =>
                {
                    return self.visit_expr(&s.slice);
                }
                Expr::Attribute(a) if on_name(&a.value) && a.attr.id.as_str() == "get" => return,
                // Anything else may write to it: `CFG["opset"] = 17`, `CFG.update(...)`, handed
                // to a function or an object that does (`apply_overrides(CFG, args)`), or to
                // another name (`cfg = CFG`).
                Expr::Name(n)
                    if n.id.as_str() == self.0
                        && !matches!(n.ctx, ruff_python_ast::ExprContext::Store) =>
                {
                    self.1 = true
                }
                _ => {}
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut writes = Writes(name, false);
    writes.visit_body(module);
    if writes.1 {
        return None;
    }
    // The last entry of a key wins, as in Python.
    d.items
        .iter()
        .rev()
        .find_map(|i| (string_literal(i.key.as_ref()?) == Some(key)).then_some(&i.value))
}

/// The integer a name is bound to, directly or through module-level constants bound once
/// (`BOARD_OPSET = OPSET` with `OPSET = 13`; upper-case names only, which a function does not
/// rebind by convention).
fn named_int(ch: &Checker, name: &str) -> Option<u32> {
    if let Some(v) = ch.literal(name) {
        return int_literal(v);
    }
    let mut name = name;
    // A few steps: `A = B` and `B = A` must not loop. After the first, a name is read where the
    // module binds it once, not where it is used (`EXPORT_OPSET = OPSET` keeps the value `OPSET`
    // had at that line).
    for _ in 0..4 {
        if !name
            .bytes()
            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_')
        {
            return None;
        }
        let mut bound = ch.bodies[0].iter().filter_map(|s| match s {
            ruff_python_ast::Stmt::Assign(a) => match &a.targets[..] {
                [ruff_python_ast::Expr::Name(t)] if t.id.as_str() == name => Some(&*a.value),
                _ => None,
            },
            ruff_python_ast::Stmt::AnnAssign(a) => match a.target.as_ref() {
                ruff_python_ast::Expr::Name(t) if t.id.as_str() == name => a.value.as_deref(),
                _ => None,
            },
            _ => None,
        });
        match (bound.next(), bound.next()) {
            (Some(ruff_python_ast::Expr::Name(n)), None) => name = n.id.as_str(),
            (Some(v), None) => return int_literal(v),
            _ => return None,
        }
    }
    None
}

/// `opset_version=opset` in `def export_model(model, path, opset: int = 13)`: the default, when
/// the file calls the function and no call passes the parameter. Not when the body rebinds it
/// (`opset = max(opset, 16)`), the function is handed around as a value (`functools.partial(f,
/// opset=16)`), or it is a dunder method (called through its class or instance).
fn parameter_default(ch: &Checker, call: &ast::ExprCall, name: &str) -> Option<u32> {
    parameter_default_with(ch, call, name, false, |d| match d {
        ast::Expr::Name(n) => named_int(ch, n.id.as_str()),
        d => int_literal(d),
    })
}

/// A decorator through which a command-line framework calls the function with the values it
/// parses: `@click.option(...)`, `@click.command()`, `@app.command()`, `@hydra.main(...)`.
fn cli_decorator(e: &ast::Expr) -> bool {
    let e = match e {
        ast::Expr::Call(c) => c.func.as_ref(),
        e => e,
    };
    let mut root = e;
    while let ast::Expr::Attribute(a) = root {
        root = a.value.as_ref();
    }
    matches!(e, ast::Expr::Attribute(a) if matches!(a.attr.id.as_str(), "option" | "argument" | "command" | "main"))
        || matches!(e, ast::Expr::Name(n) if matches!(n.id.as_str(), "option" | "argument" | "command"))
        || matches!(root, ast::Expr::Name(n) if matches!(n.id.as_str(), "click" | "typer" | "hydra"))
}

/// [`parameter_default`], with the default read by `read`; `rebound`: the body may rebind the
/// name (`opset = opset or 13` is the reading itself). Not for a function a command-line
/// framework calls with the values it parses ([`cli_decorator`]).
fn parameter_default_with<T>(
    ch: &Checker,
    call: &ast::ExprCall,
    name: &str,
    rebound: bool,
    read: impl Fn(&ast::Expr) -> Option<T>,
) -> Option<T> {
    use ruff_python_ast::visitor::{self, Visitor};
    use ruff_python_ast::{Expr, Stmt};
    fn innermost(
        body: &[Stmt],
        at: ruff_text_size::TextSize,
        in_class: bool,
    ) -> Option<(&ast::StmtFunctionDef, bool)> {
        body.iter().find_map(|s| match s {
            Stmt::FunctionDef(f) if f.range().contains(at) => {
                innermost(&f.body, at, false).or(Some((f, in_class)))
            }
            Stmt::ClassDef(c) if c.range().contains(at) => innermost(&c.body, at, true),
            _ => None,
        })
    }
    let module = ch.bodies[0];
    let (def, method) = innermost(module, call.start(), false)?;
    let function = def.name.id.as_str();
    if function.starts_with("__")
        || def
            .decorator_list
            .iter()
            .any(|d| cli_decorator(&d.expression))
    {
        return None;
    }
    let (index, param) = def
        .parameters
        .iter_non_variadic_params()
        .enumerate()
        .find(|(_, p)| p.parameter.name.id.as_str() == name)?;
    let default = param.default.as_deref().and_then(read)?;
    if !rebound && rebinds(&def.body, name) {
        return None;
    }
    // A method's callers do not pass `self`.
    let positional = if method {
        index.checked_sub(1)
    } else {
        Some(index)
    };
    struct Calls<'c, 'a, 'n> {
        ch: &'c Checker<'a>,
        function: &'n str,
        method: bool,
        name: &'n str,
        positional: Option<usize>,
        calls: usize,
        passed: bool,
        tabled: bool,
    }
    impl<'v> Visitor<'v> for Calls<'_, '_, '_> {
        fn visit_expr(&mut self, e: &'v Expr) {
            match e {
                Expr::Call(c) if !is_export(self.ch, c) => {
                    // `export_model(...)` for a function; `self.export(...)`/`cls.export(...)`
                    // for a method.
                    let callee = match c.func.as_ref() {
                        Expr::Name(n) if !self.method => n.id.as_str() == self.function,
                        Expr::Attribute(a) if self.method => {
                            a.attr.id.as_str() == self.function
                                && matches!(a.value.as_ref(), Expr::Name(r) if matches!(r.id.as_str(), "self" | "cls"))
                        }
                        _ => false,
                    };
                    if callee {
                        self.calls += 1;
                        self.passed |= c
                            .arguments
                            .keywords
                            .iter()
                            .any(|k| k.arg.as_ref().is_none_or(|a| a.id.as_str() == self.name))
                            || self.positional.is_some_and(|i| {
                                c.arguments.args.len() > i
                                    || c.arguments
                                        .args
                                        .iter()
                                        .any(|a| matches!(a, Expr::Starred(_)))
                            });
                        // The arguments may hand the function around (`run(export_model)`).
                        for a in &c.arguments.args {
                            self.visit_expr(a);
                        }
                        for k in &c.arguments.keywords {
                            self.visit_expr(&k.value);
                        }
                        return;
                    }
                }
                // A table of jobs (`jobs = {"occupancy": export_occupancy, ...}`, then
                // `fn(ckpt, out)` for each): called through a name, read below.
                Expr::Dict(d) if !self.method => {
                    for item in &d.items {
                        match &item.value {
                            Expr::Name(n) if n.id.as_str() == self.function => {
                                self.calls += 1;
                                self.tabled = true;
                            }
                            v => self.visit_expr(v),
                        }
                        if let Some(k) = &item.key {
                            self.visit_expr(k);
                        }
                    }
                    return;
                }
                // The function as a value: `partial(export_model, opset=16)`, `target=...`.
                Expr::Name(n) if !self.method && n.id.as_str() == self.function => {
                    self.passed = true
                }
                Expr::Attribute(a)
                    if self.method
                        && a.attr.id.as_str() == self.function
                        && matches!(a.value.as_ref(), Expr::Name(r) if matches!(r.id.as_str(), "self" | "cls")) =>
                {
                    self.passed = true
                }
                _ => {}
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut calls = Calls {
        ch,
        function,
        method,
        name,
        positional,
        calls: 0,
        passed: false,
        tabled: false,
    };
    calls.visit_body(module);
    if calls.tabled && !calls.passed {
        calls.passed = table_call_passes(module, function, name, positional);
    }
    (calls.calls > 0 && !calls.passed).then_some(default)
}

/// For a function listed in a table of jobs (`jobs = {"occupancy": export_occupancy}`), whether a
/// call through the table may pass the parameter `name`: by its keyword, by `**`, or with more
/// positional arguments than come before it. The calls through the table are of `jobs[key]`, and
/// of names bound from it (`for key, fn in jobs.items(): fn(ckpt, out)`, `fn = jobs.get(key)`). A
/// table that is not bound to a name is handed elsewhere: it may pass anything.
fn table_call_passes(
    module: &[ruff_python_ast::Stmt],
    function: &str,
    name: &str,
    positional: Option<usize>,
) -> bool {
    use crate::rules::any_sub_stmt_expr;
    use ruff_python_ast::visitor::{self, Visitor};
    use ruff_python_ast::{Expr, Stmt};
    let lists_function = |e: &Expr| matches!(e, Expr::Dict(d) if d.items.iter().any(|i| matches!(&i.value, Expr::Name(n) if n.id.as_str() == function)));
    let mut tables: Vec<String> = Vec::new();
    let mut inline = false;
    let mut find_tables = |s: &Stmt| {
        if let Stmt::Assign(a) = s {
            if lists_function(&a.value) {
                match &a.targets[..] {
                    [Expr::Name(t)] => tables.push(t.id.to_string()),
                    _ => inline = true,
                }
                return;
            }
        }
        // A statement's own expressions (a compound statement's body is walked on its own).
        inline |= crate::checker::own_exprs(s)
            .into_iter()
            .any(|e| crate::rules::any_sub_expr(e, lists_function));
    };
    crate::rules::each_stmt(module, &mut find_tables);
    if inline || tables.is_empty() {
        return true;
    }
    let from_table = |e: &Expr| {
        crate::rules::any_sub_expr(
            e,
            |x| matches!(x, Expr::Name(n) if tables.iter().any(|t| t == n.id.as_str())),
        )
    };
    // Names bound from a table: loop targets over it, assignments from it.
    let mut callers: Vec<String> = Vec::new();
    fn names_of(t: &Expr, out: &mut Vec<String>) {
        match t {
            Expr::Name(n) => out.push(n.id.to_string()),
            Expr::Tuple(tp) => tp.elts.iter().for_each(|e| {
                if let Expr::Name(n) = e {
                    out.push(n.id.to_string())
                }
            }),
            _ => {}
        }
    }
    let mut bind = |s: &Stmt| match s {
        Stmt::Assign(a) if from_table(&a.value) && !lists_function(&a.value) => {
            a.targets.iter().for_each(|t| names_of(t, &mut callers))
        }
        _ => {}
    };
    crate::rules::each_stmt(module, &mut bind);
    let mut fors = Vec::new();
    crate::rules::each_stmt(module, &mut |s| {
        if let Stmt::For(f) = s {
            fors.push(f);
        }
    });
    for f in fors {
        if from_table(&f.iter) {
            // `for key, fn in jobs.items()`: the value; `for fn in jobs.values()`: the target;
            // `for key in jobs`: keys, no function.
            let method = match f.iter.as_ref() {
                Expr::Call(c) => match c.func.as_ref() {
                    Expr::Attribute(a) if matches!(a.value.as_ref(), Expr::Name(t) if tables.iter().any(|x| x == t.id.as_str())) => {
                        Some(a.attr.id.as_str())
                    }
                    _ => None,
                },
                Expr::Name(_) => Some("keys"),
                _ => None,
            };
            match (method, f.target.as_ref()) {
                (Some("items"), Expr::Tuple(t)) if t.elts.len() == 2 => {
                    names_of(&t.elts[1], &mut callers)
                }
                (Some("keys"), _) => {}
                _ => names_of(&f.target, &mut callers),
            }
        }
    }
    // Handed on rather than called (`ex.submit(fn, ckpt, out, 17)`, `Process(target=fn)`,
    // `partial(fn, opset=17)`, `run_all(jobs, opset)`): the parameter may be passed anywhere.
    struct Uses<'n> {
        tables: &'n [String],
        callers: &'n [String],
        loads: usize,
        allowed: usize,
    }
    impl<'a> Visitor<'a> for Uses<'_> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            // `fn = jobs[name]`, `fn = jobs.get(name)`: bound, then read as `fn` is.
            if let Stmt::Assign(a) = s {
                let from_table = match a.value.as_ref() {
                    Expr::Subscript(x) => {
                        matches!(x.value.as_ref(), Expr::Name(n) if self.tables.iter().any(|t| t == n.id.as_str()))
                    }
                    Expr::Call(g) => {
                        matches!(g.func.as_ref(), Expr::Attribute(at) if at.attr.id.as_str() == "get"
                        && matches!(at.value.as_ref(), Expr::Name(n) if self.tables.iter().any(|t| t == n.id.as_str())))
                    }
                    _ => false,
                };
                if from_table {
                    self.allowed += 1;
                }
            }
            if let Stmt::For(f) = s {
                if matches!(f.iter.as_ref(), Expr::Name(n) if self.tables.iter().any(|t| t == n.id.as_str()))
                {
                    self.allowed += 1;
                }
            }
            visitor::walk_stmt(self, s);
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            let named = |e: &Expr, list: &[String]| matches!(e, Expr::Name(n) if list.iter().any(|t| t == n.id.as_str()));
            match e {
                Expr::Name(n)
                    if n.ctx.is_load()
                        && (self.tables.iter().any(|t| t == n.id.as_str())
                            || self.callers.iter().any(|t| t == n.id.as_str())) =>
                {
                    self.loads += 1
                }
                Expr::Call(c) if named(&c.func, self.callers) => self.allowed += 1,
                // `jobs[name](...)`, `jobs.get(name)(...)`: called through the table.
                Expr::Call(c)
                    if matches!(c.func.as_ref(), Expr::Subscript(x) if named(&x.value, self.tables))
                        || matches!(c.func.as_ref(), Expr::Call(g) if matches!(g.func.as_ref(),
                            Expr::Attribute(a) if a.attr.id.as_str() == "get" && named(&a.value, self.tables))) =>
                {
                    self.allowed += 1
                }
                Expr::Attribute(a)
                    if named(&a.value, self.tables)
                        && matches!(a.attr.id.as_str(), "items" | "values" | "keys") =>
                {
                    self.allowed += 1
                }
                Expr::Compare(c) if c.comparators.iter().any(|x| named(x, self.tables)) => {
                    self.allowed += 1
                }
                // `", ".join(EXPORTERS)`, `sorted(jobs)`, `len(jobs)`: its keys read.
                Expr::Call(c)
                    if (matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.id.as_str() == "join")
                        || matches!(c.func.as_ref(), Expr::Name(f) if matches!(f.id.as_str(),
                            "len" | "sorted" | "list" | "set" | "tuple" | "print" | "repr" | "str")))
                        && c.arguments.args.iter().any(|x| named(x, self.tables)) =>
                {
                    self.allowed += c
                        .arguments
                        .args
                        .iter()
                        .filter(|x| named(x, self.tables))
                        .count()
                }
                _ => {}
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut uses = Uses {
        tables: &tables,
        callers: &callers,
        loads: 0,
        allowed: 0,
    };
    uses.visit_body(module);
    if uses.loads > uses.allowed {
        return true;
    }
    let through_table = |c: &ast::ExprCall| match c.func.as_ref() {
        Expr::Name(f) => callers.iter().any(|c| c == f.id.as_str()),
        Expr::Subscript(sub) => {
            matches!(sub.value.as_ref(), Expr::Name(t) if tables.iter().any(|x| x == t.id.as_str()))
        }
        _ => false,
    };
    module.iter().any(|s| {
        any_sub_stmt_expr(s, |e| {
            matches!(e, Expr::Call(c) if through_table(c)
                && (c.arguments.keywords.iter().any(|k| k.arg.as_ref().is_none_or(|a| a.id.as_str() == name))
                    || positional.is_none_or(|i| c.arguments.args.len() > i)
                    || c.arguments.args.iter().any(|a| matches!(a, Expr::Starred(_)))))
        })
    })
}

/// Whether a body assigns `name` (`opset = max(opset, 16)`, `opset += 1`, `for opset in ...`).
fn rebinds(body: &[ruff_python_ast::Stmt], name: &str) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    use ruff_python_ast::{Expr, ExprContext};
    struct Find<'n> {
        name: &'n str,
        found: bool,
    }
    impl<'v> Visitor<'v> for Find<'_> {
        fn visit_expr(&mut self, e: &'v Expr) {
            if let Expr::Name(n) = e {
                if n.id.as_str() == self.name && matches!(n.ctx, ExprContext::Store) {
                    self.found = true;
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut find = Find { name, found: false };
    find.visit_body(body);
    find.found
}

/// `opset_version=args.opset` with `args = parser.parse_args()` and `parser.add_argument("--opset",
/// type=int, default=11)` in the file (the destination is `dest=` or the first long option, dashes
/// made underscores). Not when options of that destination disagree on the default (subparsers),
/// `set_defaults` names it, or the file assigns `<args>.<dest>` (`args.opset = max(args.opset, 16)`).
fn argparse_default(ch: &Checker, value: &ast::ExprAttribute) -> Option<u32> {
    argparse_default_with(ch, value, |d| d.and_then(int_literal))
}

/// [`argparse_default`] with the default read by `read` (`None` when the option gives none).
fn argparse_default_with<T: PartialEq + Copy>(
    ch: &Checker,
    value: &ast::ExprAttribute,
    read: impl Fn(Option<&ast::Expr>) -> Option<T>,
) -> Option<T> {
    use ruff_python_ast::Expr;
    let Expr::Name(receiver) = value.value.as_ref() else {
        return None;
    };
    let module = ch.bodies[0];
    let attr = value.attr.id.as_str();
    // The receiver holds parsed arguments where it is read: bound from `.parse_args(...)`,
    // `.parse_known_args(...)[0]` or a `parse_*()` helper in the enclosing function or at the
    // top level.
    let parsed = |e: &Expr| {
        let call = match e {
            Expr::Subscript(s) => s.value.as_ref(),
            e => e,
        };
        // `parser.parse_args()`, or the script's own `parse_args()` / `get_args()` helper.
        matches!(call, Expr::Call(c) if match c.func.as_ref() {
            Expr::Attribute(a) => matches!(a.attr.id.as_str(), "parse_args" | "parse_known_args"),
            Expr::Name(n) => {
                let f = n.id.as_str();
                f.starts_with("parse_") || f.starts_with("get_arg") || f.starts_with("get_opt")
            }
            _ => false,
        })
    };
    let local = ch
        .bodies
        .last()
        .map(|b| crate::rules::bound_values(b, receiver.id.as_str()))
        .unwrap_or_default();
    let bindings = if local.is_empty() {
        crate::rules::bound_values(module, receiver.id.as_str())
    } else {
        local
    };
    let from_parser = !bindings.is_empty() && bindings.iter().all(|v| parsed(v));
    // `def export(args):` called with parsed arguments is common too: a parameter named `args`.
    let parameter = bindings.is_empty() && matches!(receiver.id.as_str(), "args" | "opts" | "opt");
    if !from_parser && !parameter {
        return None;
    }
    crate::rules::argparse_default(module, attr, read)
}

/// The classes an export's module is built from: `IFNet` in `torch.onnx.export(IFNet(), ...)`,
/// or for a name, in its last binding before the call (`model = load(IFNet(cfg), ckpt).eval()`);
/// a wrapper's first argument is followed too (`Padded(net)` with `net = IFNet()`). Method
/// chains are followed to their receiver and a lower-case helper to its first argument. Each
/// with whether this file defines it.
/// The keyword by which `call` hands the opset to a function of this file that exports with
/// it: `opset_version=<a parameter>` (the caller's keyword named as the parameter: `opset=12`
/// for `def export_onnx(..., opset=17): torch.onnx.export(..., opset_version=opset)`), or the
/// caller's `opset_version=` when the function splices its `**kwargs` into an export that names
/// no opset.
fn forwarded_opset<'c>(ch: &Checker, call: &'c ast::ExprCall) -> Option<&'c ast::Keyword> {
    use ruff_python_ast::visitor::{self, Visitor};
    use ruff_python_ast::{Expr, Stmt};
    let Expr::Name(f) = call.func.as_ref() else {
        return None;
    };
    // Only calls that pass a keyword can forward one (most calls pass none).
    if !call.arguments.keywords.iter().any(|k| k.arg.is_some()) {
        return None;
    }
    let def = ch.bodies.first().and_then(|m| {
        m.iter().find_map(|s| match s {
            Stmt::FunctionDef(d) if d.name.id == f.id => Some(d),
            _ => None,
        })
    })?;
    struct Find<'c, 'a> {
        ch: &'c Checker<'a>,
        params: Vec<&'c str>,
        kwargs: Option<&'c str>,
        /// The parameter the export's `opset_version=` names, or `opset_version` for `**kwargs`.
        found: Option<&'c str>,
    }
    impl<'v> Visitor<'v> for Find<'_, '_> {
        fn visit_expr(&mut self, e: &'v Expr) {
            if let Expr::Call(c) = e {
                if self.found.is_none() && is_export(self.ch, c) {
                    self.found = match crate::rules::keyword(c, "opset_version") {
                        Some(k) => match &k.value {
                            Expr::Name(n) => {
                                self.params.iter().copied().find(|p| *p == n.id.as_str())
                            }
                            _ => None,
                        },
                        None => self
                            .kwargs
                            .filter(|kw| {
                                c.arguments.keywords.iter().any(|k| {
                                    k.arg.is_none()
                                        && matches!(&k.value, Expr::Name(n) if n.id.as_str() == *kw)
                                })
                            })
                            .map(|_| "opset_version"),
                    };
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut find = Find {
        ch,
        params: def
            .parameters
            .iter_non_variadic_params()
            .map(|p| p.parameter.name.id.as_str())
            .collect(),
        kwargs: def.parameters.kwarg.as_deref().map(|k| k.name.id.as_str()),
        found: None,
    };
    find.visit_body(&def.body);
    let param = find.found?;
    // `opset = max(opset, 16)` before the export: not what the caller passes.
    if param != "opset_version" && rebinds(&def.body, param) {
        return None;
    }
    crate::rules::keyword(call, param)
}

fn exported_classes(ch: &Checker, call: &ast::ExprCall) -> Vec<(String, bool)> {
    use ruff_python_ast::{Expr, Stmt};
    let Some(module) = exported_module(ch, call) else {
        return Vec::new();
    };
    let mut stmts = Vec::new();
    if let Some(body) = ch.bodies.last() {
        collect(body, call.range().start(), &mut stmts);
    }
    // The last binding of `name` before `at` (`net = load(net, ckpt)` reads the `net` bound
    // before it), with where it starts.
    let binding = |name: &str, at: ruff_text_size::TextSize| {
        stmts
            .iter()
            .rev()
            .filter(|s| s.range().start() < at)
            .find_map(|s| match s {
                Stmt::Assign(a) if matches!(&a.targets[..], [Expr::Name(t)] if t.id.as_str() == name) => {
                    Some((a.value.as_ref(), s.range().start()))
                }
                _ => None,
            })
    };
    let local = |class: &str| {
        ch.bodies
            .first()
            .is_some_and(|m| crate::checker::module_class(m, class).is_some())
    };
    let mut out = Vec::new();
    let mut e: &Expr = module;
    let mut at = call.range().start();
    for _ in 0..16 {
        match e {
            Expr::Name(n) => match binding(n.id.as_str(), at) {
                Some((v, start)) => {
                    e = v;
                    at = start;
                }
                None => break,
            },
            Expr::Call(c) => match c.func.as_ref() {
                // `litho.HotspotNet()`: a class of a module, by the name it is imported as (the
                // project pass finds the file, or holds the export to everything as before).
                Expr::Attribute(a)
                    if a.attr.id.starts_with(|c: char| c.is_ascii_uppercase())
                        && matches!(a.value.as_ref(), Expr::Name(m) if binding(m.id.as_str(), at).is_none()) =>
                {
                    out.push((ch.text(c.func.range()).to_string(), false));
                    return out;
                }
                Expr::Attribute(a) => e = a.value.as_ref(),
                Expr::Name(f) if f.id.starts_with(|c: char| c.is_ascii_uppercase()) => {
                    let defined_here = local(f.id.as_str());
                    out.push((f.id.to_string(), defined_here));
                    // An imported class is the model; a wrapper of this file holds one.
                    if !defined_here {
                        return out;
                    }
                    match c.arguments.args.first() {
                        Some(arg) => e = arg,
                        None => break,
                    }
                }
                Expr::Name(_) => match c.arguments.args.first() {
                    Some(arg) => e = arg,
                    None => break,
                },
                _ => break,
            },
            _ => break,
        }
    }
    // A chain that ends in a class of this file (a model defined here, or a wrapper of
    // something unread): the file and all it imports, as for any export.
    if out.last().is_some_and(|(_, here)| *here) {
        return Vec::new();
    }
    out
}

/// After every file is linted: flag export sites whose opset is below a need anywhere.
pub(crate) fn check_project(reports: &mut [FileReport], facts: &[Facts]) {
    let all_needs: Vec<&OpsetNeed> = facts.iter().flat_map(|f| &f.needs).collect();
    let displays: Vec<String> = reports.iter().map(|r| r.display.clone()).collect();
    let by_display: crate::HashMap<&str, &Facts> =
        displays.iter().map(String::as_str).zip(facts).collect();
    // What each file with an export it could not read the opset of reaches (the exports that
    // may splice another file's dict of export arguments), computed once.
    let splicing_reaches: Vec<crate::HashSet<&str>> =
        if facts.iter().any(|f| !f.kwargs_opsets.is_empty()) {
            displays
                .iter()
                .zip(facts)
                .filter(|(_, f)| f.exports.iter().any(|s| s.splices))
                .map(|(d, _)| reachable(d, &by_display).into_iter().collect())
                .collect()
        } else {
            Vec::new()
        };
    for ((rep, f), display) in reports.iter_mut().zip(facts).zip(&displays) {
        // Dicts of export arguments (`return {"opset_version": 13, ...}` in a helper or config
        // module, `EXPORT_KW = dict(opset_version=11, ...)` spliced with overrides): when no
        // export of this file reads the opset from that entry, and some export of this file or
        // another could splice it (its opset unread).
        let kwargs: Vec<(u32, TextRange)> = f
            .kwargs_opsets
            .iter()
            .copied()
            .filter(|(_, r)| {
                !f.exports
                    .iter()
                    .any(|s| s.opset.is_some_and(|(_, o)| o == *r))
            })
            .collect();
        let kwargs_reach: crate::HashSet<&str> = if kwargs.is_empty() {
            Default::default()
        } else {
            let mut reach: crate::HashSet<&str> = std::iter::once(display.as_str()).collect();
            for r in &splicing_reaches {
                if r.contains(display.as_str()) {
                    reach.extend(r.iter().copied());
                }
            }
            reach
        };
        let spliced = kwargs_reach.len() > 1 || f.exports.iter().any(|s| s.splices);
        let kwargs_only = spliced && !kwargs.is_empty();
        if f.exports.iter().all(|site| site.opset.is_none()) && !kwargs_only {
            continue;
        }
        // An export reaches the ops of its own file and of the linted files it imports,
        // transitively; a script that imports none of them and defines no model (models built
        // from a registry or loaded by name) could reach any, so it is held to every op of the
        // project.
        let needs: Vec<&OpsetNeed> = if f.imports.is_empty() && !f.defines_models {
            all_needs.clone()
        } else {
            let reach = reachable(display, &by_display);
            all_needs
                .iter()
                .copied()
                .filter(|n| reach.contains(&n.file.as_str()))
                .collect()
        };
        let index = LineIndex::default();
        // Held to the ops the exports that may splice them reach.
        let kwargs_sites: Vec<ExportSite> = kwargs
            .iter()
            .filter(|_| kwargs_only)
            .map(|&(v, r)| ExportSite {
                line: 0,
                column: 0,
                opset: Some((v, r)),
                model_classes: Vec::new(),
                model_files: None,
                splices: false,
            })
            .collect();
        for (site, kwargs_only) in f
            .exports
            .iter()
            .map(|s| (s, false))
            .chain(kwargs_sites.iter().map(|s| (s, true)))
        {
            let Some((opset, range)) = site.opset else {
                continue;
            };
            // A model imported from another linted file reaches the ops of that file and
            // what it imports, not those of every model the script imports.
            let model_needs: Vec<&OpsetNeed>;
            let needs: &Vec<&OpsetNeed> = match &site.model_files {
                Some(files) => {
                    let mut reach: Vec<&str> = Vec::new();
                    for (file, transitive) in files {
                        if *transitive {
                            reach.extend(reachable(file, &by_display));
                        } else {
                            reach.push(file.as_str());
                        }
                    }
                    model_needs = all_needs
                        .iter()
                        .copied()
                        .filter(|n| reach.contains(&n.file.as_str()))
                        .collect();
                    &model_needs
                }
                None if kwargs_only => {
                    model_needs = all_needs
                        .iter()
                        .copied()
                        .filter(|n| kwargs_reach.contains(n.file.as_str()))
                        .collect();
                    &model_needs
                }
                None => &needs,
            };
            let mut too_high: Vec<&&OpsetNeed> =
                needs.iter().filter(|n| n.min_opset > opset).collect();
            if too_high.is_empty() {
                continue;
            }
            too_high.sort_by_key(|n| (std::cmp::Reverse(n.min_opset), n.file.clone(), n.line));
            let top = too_high[0];
            let mut ops: Vec<String> = Vec::new();
            for n in &too_high {
                let s = format!("{} (>= {}, {}:{})", n.op, n.min_opset, n.file, n.line);
                if !ops.iter().any(|o| o.starts_with(&format!("{} ", n.op))) {
                    ops.push(s);
                }
            }
            let (line, column) = index.line_col(&rep.source, range.start().to_usize());
            let d = Diagnostic::new(
                RULE.code,
                RULE.severity,
                format!("opset_version={opset} is too low for {}", ops.join(", ")),
                Location::Source {
                    file: rep.display.clone(),
                    line,
                    column,
                },
            )
            .with_help(format!(
                "export with opset_version={} or later",
                top.min_opset
            ))
            .with_fix(format!("set opset_version={}", top.min_opset), false);
            rep.findings.push(Finding {
                diagnostic: d,
                edits: vec![Edit {
                    start: range.start().to_usize(),
                    end: range.end().to_usize(),
                    content: top.min_opset.to_string(),
                }],
            });
        }
    }
}

/// A linted file and the linted files it imports, transitively.
fn reachable<'a>(file: &'a str, by_display: &crate::HashMap<&'a str, &'a Facts>) -> Vec<&'a str> {
    let mut reach: Vec<&str> = vec![file];
    let mut seen: crate::HashSet<&str> = std::iter::once(file).collect();
    let mut i = 0;
    while i < reach.len() {
        if let Some(g) = by_display.get(reach[i]) {
            for d in &g.imports {
                if seen.insert(d.as_str()) {
                    reach.push(d.as_str());
                }
            }
        }
        i += 1;
    }
    reach
}
