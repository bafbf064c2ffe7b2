//! ## What it does
//! Flags `dynamic_axes` keys of a `torch.onnx.export` call that are neither in its
//! `input_names` nor in its `output_names` (literals, or locals bound to literals and grown with
//! `.append("name")`, `.extend([...])` or `+= [...]` before the export; lists added together and
//! `[...] if opt else [...]` give every name either way, as does an element `"a" if opt else "b"`,
//! an f-string `f"hm_{t}"` is a pattern,
//! `list(Wrapper.KEYS)` reads a tuple a class of the file declares, `self.cfg.output_names` the
//! default of a config dataclass's field when the file builds it so and nothing in it sets the
//! field otherwise, also from data: `setattr`, `vars(...)`, OmegaConf, `from_dict`). The dict may
//! be a display, a `dict(name=...)` call, a comprehension over names written out (`{n: {0:
//! "batch"} for n in names_in + ["probs", "mask"]}`) or a local extended with `axes["name"] =
//! {...}`, also either of two (`axes if dynamic else None`, `... else hw_axes`); the finding is
//! on the key. A call without `output_names` gives its outputs generated names, so there every
//! key that is not an input name is flagged. A call of a function of the file that hands its
//! parameters to the export (`def _to_onnx(m, args, path, inputs, outputs, axes)`), or
//! its `**kw` (`def _export(m, args, path, **kw): torch.onnx.export(m, args, path, **kw)`, when
//! the function leaves the three names in `kw` alone), is checked with what the call passes.
//!
//! ## Why is this bad?
//! The exporter matches `dynamic_axes` by name. A key that names no input or output is ignored
//! with only a warning ("Provided key x for dynamic axes is not a valid input/output name",
//! `torch/onnx/_internal/torchscript_exporter/utils.py`), so the axis the user meant to be dynamic
//! is exported fixed, and the model rejects any other batch size or sequence length at run time.
//!
//! ## Example
//! ```python
//! torch.onnx.export(model, (x,), "m.onnx",
//!                   input_names=["input"], output_names=["logits"],
//!                   dynamic_axes={"x": {0: "batch"}})
//! ```
//!
//! ## Fix
//! Use the names given in `input_names`/`output_names`:
//! ```python
//! torch.onnx.export(model, (x,), "m.onnx",
//!                   input_names=["input"], output_names=["logits"],
//!                   dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use crate::rules::export_without_eval::{collect, is_export};
use crate::rules::{spliced_keyword, string_literal};
use diagnostics::Severity;
use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};

pub(crate) const RULE: Rule = Rule {
    code: "ODL018",
    name: "dynamic-axes-unknown-name",
    severity: Severity::Error,
    fix: FixKind::None,
    summary:
        "`dynamic_axes` key not in `input_names`/`output_names`: the axis silently stays fixed",
    source: include_str!("dynamic_axes_unknown_name.rs"),
};

fn resolve<'e>(ch: &'e Checker, e: &'e Expr) -> Option<&'e Expr> {
    match e {
        Expr::Name(n) => ch.literal(n.id.as_str()),
        e => Some(e),
    }
}

/// The statements of the export's enclosing body that run before offset `before` (of an
/// `if` holding it, only its clause).
fn statements_before<'s>(ch: &Checker<'s>, before: TextSize) -> Vec<&'s Stmt> {
    let mut stmts = Vec::new();
    if let Some(body) = ch.bodies.last() {
        collect(body, before, &mut stmts);
    }
    stmts.retain(|s| s.range().start() < before);
    stmts
}

/// Stands for the text an f-string's `{...}` (or a name not known) puts in an input or output
/// name: `f"hm_{t}"` is `hm_` then [`ANY`].
pub(crate) const ANY: char = '\u{0}';

/// The names of an `input_names`/`output_names` value: a list or tuple of strings, or a name
/// bound to one (every binding before the export counts, in whichever branch) and grown with
/// `.append(...)`, `.extend([...])`, `.insert(i, ...)` or `+= [...]` before the export (`None`
/// when it is not a list display). An f-string element is a pattern with [`ANY`] for each
/// interpolation; any other element matches every key.
fn names(ch: &Checker, call: &ast::ExprCall, kw: &str) -> Option<Vec<String>> {
    // `**io_names` with `io_names = dict(input_names=[...], ...)` spliced into the call too.
    let (value, _) = spliced_keyword(ch, call, kw)?;
    names_of(ch, &value, call.range().start())
}

/// [`names`] of a value written before offset `before`.
fn names_of(ch: &Checker, value: &Expr, before: TextSize) -> Option<Vec<String>> {
    let mut out = literal_names(ch, resolve(ch, value)?)?;
    if let Expr::Name(n) = value {
        let is_list = |e: &Expr| matches!(e, Expr::Name(m) if m.id == n.id);
        for s in statements_before(ch, before) {
            match s {
                Stmt::Expr(e) => {
                    let Expr::Call(c) = e.value.as_ref() else {
                        continue;
                    };
                    let Expr::Attribute(a) = c.func.as_ref() else {
                        continue;
                    };
                    if !is_list(&a.value) {
                        continue;
                    }
                    match (a.attr.id.as_str(), &c.arguments.args[..]) {
                        ("append", [x]) | ("insert", [_, x]) => out.push(name_pattern(x, None)),
                        ("extend", [xs]) => out
                            .extend(literal_names(ch, xs).unwrap_or_else(|| vec![ANY.to_string()])),
                        _ => {}
                    }
                }
                Stmt::AugAssign(a) if is_list(&a.target) => {
                    out.extend(literal_names(ch, &a.value).unwrap_or_else(|| vec![ANY.to_string()]))
                }
                // `if with_buildings: outputs = [..., "building_score"] else: outputs = [...]`:
                // the names of every binding the export may see.
                Stmt::Assign(a) if matches!(&a.targets[..], [t] if is_list(t)) => {
                    out.extend(literal_names(ch, &a.value).unwrap_or_else(|| vec![ANY.to_string()]))
                }
                _ => {}
            }
        }
    }
    Some(out)
}

fn literal_names(ch: &Checker, v: &Expr) -> Option<Vec<String>> {
    literal_names_at(ch, v, 0, &std::cell::Cell::new(256))
}

/// The names a field of a dataclass of the module defaults to (`output_names: List[str] =
/// field(default_factory=lambda: ["verdict", "set_mm"])`, or a tuple written as the default), when
/// one dataclass alone has the field, the file builds it at that default and nothing in the file
/// can set it otherwise: no construction of the class nor `dataclasses.replace` passes a keyword
/// of that name or splices `**` or `*`, no construction passes as many positional arguments as
/// reach the field, no code stores `<...>.field` or reads it other than into `input_names=` /
/// `output_names=`, and nothing sets fields from data (`setattr`, `vars(...)`, `__dict__`,
/// OmegaConf, `from_dict`, `parse_args(namespace=...)`).
fn config_field_names<'m>(module: &'m [Stmt], field: &str) -> Option<&'m Expr> {
    use ruff_python_ast::visitor::{self, Visitor};
    let mut found: Option<(&ast::StmtClassDef, usize, &Expr)> = None;
    for s in module {
        let Stmt::ClassDef(c) = s else { continue };
        if !crate::rules::is_dataclass(c) {
            continue;
        }
        let fields = c.body.iter().filter_map(|s| match s {
            Stmt::AnnAssign(x) => match x.target.as_ref() {
                Expr::Name(t) => Some((t.id.as_str(), x.value.as_deref())),
                _ => None,
            },
            _ => None,
        });
        for (index, (name, value)) in fields.enumerate() {
            if name != field {
                continue;
            }
            if found.is_some() {
                return None;
            }
            let names = match value? {
                v @ Expr::Tuple(_) => v,
                Expr::Call(call) => {
                    let factory = crate::rules::keyword(call, "default_factory")?;
                    match &factory.value {
                        Expr::Lambda(l)
                            if matches!(l.body.as_ref(), Expr::List(_) | Expr::Tuple(_)) =>
                        {
                            l.body.as_ref()
                        }
                        _ => return None,
                    }
                }
                _ => return None,
            };
            found = Some((c, index, names));
        }
    }
    let (class, index, names) = found?;
    struct Overrides<'n> {
        class: &'n str,
        field: &'n str,
        index: usize,
        found: bool,
        /// Constructions of the class that leave the field at its default.
        built: bool,
        /// Reads of `<...>.field` handed straight to an `input_names=`/`output_names=` keyword.
        handed: Vec<ruff_text_size::TextRange>,
        reads: Vec<ruff_text_size::TextRange>,
    }
    impl<'a> Visitor<'a> for Overrides<'_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            match e {
                // Names that set fields from data at run time: `setattr(cfg, k, v)`,
                // `vars(cfg).update(...)`, `cfg.__dict__`, OmegaConf, dacite's `from_dict`.
                Expr::Name(n)
                    if matches!(
                        n.id.as_str(),
                        "setattr" | "vars" | "OmegaConf" | "from_dict" | "dacite"
                    ) =>
                {
                    self.found = true;
                }
                Expr::Attribute(a)
                    if matches!(
                        a.attr.id.as_str(),
                        "__setattr__" | "__dict__" | "from_dict" | "merge" | "structure"
                    ) =>
                {
                    self.found = true;
                }
                Expr::Call(c) => {
                    for k in &c.arguments.keywords {
                        let names = k
                            .arg
                            .as_ref()
                            .is_some_and(|a| matches!(a.as_str(), "input_names" | "output_names"));
                        // `output_names=cfg.output_names`, also through `list(...)`/`tuple(...)`.
                        let value = match &k.value {
                            Expr::Call(l)
                                if matches!(l.func.as_ref(), Expr::Name(f)
                                    if matches!(f.id.as_str(), "list" | "tuple"))
                                    && l.arguments.args.len() == 1 =>
                            {
                                &l.arguments.args[0]
                            }
                            v => v,
                        };
                        if names
                            && matches!(value, Expr::Attribute(x) if x.attr.id.as_str() == self.field)
                        {
                            self.handed.push(value.range());
                        }
                        // `parser.parse_args(namespace=cfg)`.
                        if k.arg.as_ref().is_some_and(|a| a.as_str() == "namespace") {
                            self.found = true;
                        }
                    }
                    let callee = match c.func.as_ref() {
                        Expr::Name(f) => f.id.as_str(),
                        Expr::Attribute(f) => f.attr.id.as_str(),
                        _ => "",
                    };
                    // A construction of the class, or `dataclasses.replace(cfg, ...)`.
                    if (callee == self.class || callee == "replace")
                        && c.arguments
                            .keywords
                            .iter()
                            .any(|k| k.arg.as_ref().is_none_or(|a| a.as_str() == self.field))
                    {
                        self.found = true;
                    }
                    if callee == self.class {
                        if c.arguments.args.len() > self.index
                            || c.arguments.args.iter().any(Expr::is_starred_expr)
                        {
                            self.found = true;
                        } else {
                            self.built = true;
                        }
                    }
                    // `cfg.output_names.append("extra")`.
                    if matches!(c.func.as_ref(), Expr::Attribute(m)
                        if matches!(m.value.as_ref(), Expr::Attribute(f) if f.attr.id.as_str() == self.field))
                    {
                        self.found = true;
                    }
                }
                Expr::Attribute(a) if a.attr.id.as_str() == self.field => {
                    if matches!(a.ctx, ast::ExprContext::Load) {
                        self.reads.push(a.range());
                    } else {
                        self.found = true;
                    }
                }
                _ => {}
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut overrides = Overrides {
        class: class.name.id.as_str(),
        field,
        index,
        found: false,
        built: false,
        handed: Vec::new(),
        reads: Vec::new(),
    };
    overrides.visit_body(module);
    // Built in the file at its default, and read only to be handed to the exporter (not through
    // another name that may be grown, `names = cfg.output_names; names.append(...)`).
    let only_handed = overrides.reads.iter().all(|r| overrides.handed.contains(r));
    (!overrides.found && overrides.built && only_handed).then_some(names)
}

/// Whether a list bound to `name` is grown or rebound in place somewhere in this function or at
/// module level (`names.append("extra")`, `names += more`): then what it holds is not read from
/// its binding alone.
fn grown(ch: &Checker, name: &str) -> bool {
    let mut found = false;
    for body in [ch.bodies.last().copied(), ch.bodies.first().copied()]
        .into_iter()
        .flatten()
    {
        crate::rules::each_stmt(body, &mut |s| match s {
            Stmt::Expr(e) => {
                if let Expr::Call(c) = e.value.as_ref() {
                    if let Expr::Attribute(a) = c.func.as_ref() {
                        found |= matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == name)
                            && matches!(
                                a.attr.id.as_str(),
                                "append" | "extend" | "insert" | "pop" | "remove" | "clear"
                            );
                    }
                }
            }
            Stmt::AugAssign(a) => {
                found |= matches!(a.target.as_ref(), Expr::Name(n) if n.id.as_str() == name);
            }
            _ => {}
        });
    }
    found
}

/// [`literal_names`], `depth` steps deep and within a budget of steps in all (`a = b + ["x"];
/// b = a + ["y"]` and `names = [*names, *names, ...]` stop).
fn literal_names_at(
    ch: &Checker,
    v: &Expr,
    depth: u32,
    budget: &std::cell::Cell<u32>,
) -> Option<Vec<String>> {
    if depth > 8 || budget.get() == 0 {
        return None;
    }
    budget.set(budget.get() - 1);
    match v {
        // `["logits", "boxes"] + (["masks"] if with_masks else [])`: every name either way.
        Expr::BinOp(b) if matches!(b.op, ast::Operator::Add) => {
            let mut out = literal_names_at(ch, &b.left, depth + 1, budget)?;
            out.extend(literal_names_at(ch, &b.right, depth + 1, budget)?);
            Some(out)
        }
        Expr::If(i) => {
            let mut out = literal_names_at(ch, &i.body, depth + 1, budget)?;
            out.extend(literal_names_at(ch, &i.orelse, depth + 1, budget)?);
            Some(out)
        }
        // `list(WimOnnxWrapper.KEYS)`, `tuple(names)`: the names themselves.
        Expr::Call(c)
            if matches!(c.func.as_ref(), Expr::Name(f) if matches!(f.id.as_str(), "list" | "tuple"))
                && c.arguments.keywords.is_empty() =>
        {
            let [arg] = &c.arguments.args[..] else {
                return None;
            };
            literal_names_at(ch, arg, depth + 1, budget)
        }
        // `WimOnnxWrapper.KEYS` with `KEYS = ("axle_kN", ...)` in a class of this file.
        Expr::Attribute(a) => {
            let class = match a.value.as_ref() {
                Expr::Name(class) => crate::checker::module_class(ch.bodies[0], class.id.as_str()),
                _ => None,
            };
            let Some(class) = class else {
                // `self.cfg.output_names`: a config dataclass's field default.
                let names = config_field_names(ch.bodies[0], a.attr.id.as_str())?;
                return literal_names_at(ch, names, depth + 1, budget);
            };
            let mut bound = class.body.iter().filter_map(|s| match s {
                Stmt::Assign(x) => match &x.targets[..] {
                    [Expr::Name(t)] if t.id == a.attr.id => Some(x.value.as_ref()),
                    _ => None,
                },
                Stmt::AnnAssign(x) => match x.target.as_ref() {
                    Expr::Name(t) if t.id == a.attr.id => x.value.as_deref(),
                    _ => None,
                },
                _ => None,
            });
            match (bound.next(), bound.next()) {
                // A tuple, which nothing can grow (a list may be appended to elsewhere).
                (Some(v @ Expr::Tuple(_)), None) => literal_names_at(ch, v, depth + 1, budget),
                _ => None,
            }
        }
        // `NOWCAST_INPUTS + ["region_ids"]` with `NOWCAST_INPUTS` a list bound at module level
        // or in this function.
        Expr::Name(n) => match ch.literal(n.id.as_str()) {
            Some(bound) if !matches!(bound, Expr::Name(_)) && !grown(ch, n.id.as_str()) => {
                literal_names_at(ch, bound, depth + 1, budget)
            }
            _ => None,
        },
        Expr::List(ast::ExprList { elts, .. }) | Expr::Tuple(ast::ExprTuple { elts, .. }) => {
            let mut out = Vec::new();
            for e in elts {
                match e {
                    // `["chunk", *cache_in]` with `cache_in` a list bound in this function.
                    Expr::Starred(s) => match s.value.as_ref() {
                        Expr::Name(n) => match ch.literal(n.id.as_str()) {
                            Some(bound)
                                if !matches!(bound, Expr::Name(_)) && !grown(ch, n.id.as_str()) =>
                            {
                                out.extend(
                                    literal_names_at(ch, bound, depth + 1, budget)
                                        .unwrap_or_else(|| vec![ANY.to_string()]),
                                )
                            }
                            _ => out.push(ANY.to_string()),
                        },
                        _ => out.push(ANY.to_string()),
                    },
                    // `["jam_prob", "overlay" if tracker else "votes"]`: either name.
                    Expr::If(i) => {
                        out.push(name_pattern(&i.body, None));
                        out.push(name_pattern(&i.orelse, None));
                    }
                    e => out.push(name_pattern(e, None)),
                }
            }
            Some(out)
        }
        // `[f"{k}_{t}" for k in ("reg", "hm")]`: one pattern per string the loop runs over;
        // `[f"cache{i}_in" for i in range(n)]`: one pattern.
        Expr::ListComp(l) => {
            let [g] = &l.generators[..] else { return None };
            let (
                Expr::Name(var),
                Expr::List(ast::ExprList { elts, .. }) | Expr::Tuple(ast::ExprTuple { elts, .. }),
            ) = (&g.target, &g.iter)
            else {
                return Some(vec![name_pattern(&l.elt, None)]);
            };
            if !g.ifs.is_empty() {
                return Some(vec![name_pattern(&l.elt, None)]);
            }
            elts.iter()
                .map(|e| {
                    let value = string_literal(e)?;
                    Some(name_pattern(&l.elt, Some((var.id.as_str(), value))))
                })
                .collect()
        }
        _ => None,
    }
}

/// A name as written: a string literal itself, an f-string with [`ANY`] for its interpolations
/// (but `value` for an interpolation of the comprehension variable `var`), anything else [`ANY`].
pub(crate) fn name_pattern(e: &Expr, bound: Option<(&str, &str)>) -> String {
    match e {
        Expr::StringLiteral(s) => s.value.to_str().to_string(),
        Expr::FString(f) => {
            let mut out = String::new();
            for part in f.value.iter() {
                match part {
                    ast::FStringPart::Literal(l) => out.push_str(&l.value),
                    ast::FStringPart::FString(f) => {
                        for element in f.elements.iter() {
                            match element {
                                ast::InterpolatedStringElement::Literal(l) => {
                                    out.push_str(&l.value)
                                }
                                ast::InterpolatedStringElement::Interpolation(i) => {
                                    match (&*i.expression, bound) {
                                        (Expr::Name(n), Some((var, value)))
                                            if n.id.as_str() == var
                                                && i.format_spec.is_none()
                                                && i.conversion == ast::ConversionFlag::None =>
                                        {
                                            out.push_str(value)
                                        }
                                        _ => out.push(ANY),
                                    }
                                }
                            }
                        }
                    }
                }
            }
            out
        }
        _ => ANY.to_string(),
    }
}

/// Whether a `dynamic_axes` key is one of the names (with [`ANY`] matching any text).
fn matches_name(key: &str, pattern: &str) -> bool {
    let mut pieces = pattern.split(ANY);
    let first = pieces.next().unwrap_or("");
    let Some(mut rest) = key.strip_prefix(first) else {
        return false;
    };
    let pieces: Vec<&str> = pieces.collect();
    let Some((last, middle)) = pieces.split_last() else {
        return rest.is_empty();
    };
    for piece in middle {
        match rest.find(piece) {
            Some(i) => rest = &rest[i + piece.len()..],
            None => return false,
        }
    }
    rest.len() >= last.len() && rest.ends_with(last)
}

/// Names for a message: each interpolation shown as `{…}`.
fn shown(names: &[String]) -> Vec<String> {
    names.iter().map(|n| n.replace(ANY, "{…}")).collect()
}

/// The keys of a `dynamic_axes` value with where each is written: a dict display, a
/// `dict(name={...})` call, or a name bound to one of them and extended with
/// `axes["name"] = {...}` or `axes.update({...})` before the export.
/// The items a comprehension iterates when they are written out: a list, tuple or set, a name
/// bound to one, or lists joined with `+` (`names_in + ["probs", "mask"]`).
fn listed<'e>(ch: &'e Checker, e: &'e Expr, depth: usize) -> Option<Vec<&'e Expr>> {
    if depth > 4 {
        return None;
    }
    match e {
        Expr::List(l) => Some(l.elts.iter().collect()),
        Expr::Tuple(t) => Some(t.elts.iter().collect()),
        Expr::Set(s) => Some(s.elts.iter().collect()),
        Expr::BinOp(b) if matches!(b.op, ast::Operator::Add) => {
            let mut items = listed(ch, &b.left, depth + 1)?;
            items.extend(listed(ch, &b.right, depth + 1)?);
            Some(items)
        }
        Expr::Name(_) => {
            let bound = resolve(ch, e)?;
            (!std::ptr::eq(bound, e))
                .then(|| listed(ch, bound, depth + 1))
                .flatten()
        }
        _ => None,
    }
}

fn keys(ch: &Checker, value: &Expr, before: TextSize) -> Option<Vec<(String, TextRange)>> {
    let mut out = Vec::new();
    let bound = resolve(ch, value)?;
    // `axes if settings.batch_dynamic else None` (also bound to a local first, or against `{}` or
    // another dict): the keys of either side.
    if let Expr::If(i) = bound {
        for side in [i.body.as_ref(), i.orelse.as_ref()] {
            match side {
                Expr::NoneLiteral(_) => {}
                Expr::Dict(d) if d.items.is_empty() => {}
                side => out.extend(keys(ch, side, before)?),
            }
        }
        return Some(out);
    }
    match bound {
        Expr::Dict(dict) => {
            for item in &dict.items {
                // `axes = dict(frame={0: "b"})` grown afterwards (`axes["depth"] = ...`) holds
                // the `dict(...)` it started as, and `axes.update(depth=...)` the update: their
                // keywords are keys (an update below the export is not).
                if item.key.is_none() {
                    if let Expr::Call(c) = &item.value {
                        let grown_update = matches!(c.func.as_ref(), Expr::Attribute(a)
                            if a.attr.id.as_str() == "update")
                            && !crate::rules::grown_after(dict, item, before);
                        let original = matches!(c.func.as_ref(), Expr::Name(f) if f.id.as_str() == "dict")
                            && c.arguments.args.is_empty();
                        if grown_update || original {
                            for k in &c.arguments.keywords {
                                let arg = k.arg.as_ref()?;
                                out.push((arg.id.to_string(), k.range()));
                            }
                        }
                    }
                }
                // `**{n: {0: "batch"} for n in names}` splices keys it cannot name: skipped.
                let Some(key) = item.key.as_ref() else {
                    continue;
                };
                // Keys given afterwards are read from the statements before the export below.
                if !dict.range.contains(key.range().start()) {
                    continue;
                }
                out.push((string_literal(key)?.to_string(), key.range()));
            }
        }
        Expr::Call(c)
            if matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "dict")
                && c.arguments.args.is_empty() =>
        {
            for k in &c.arguments.keywords {
                let arg = k.arg.as_ref()?;
                out.push((arg.id.to_string(), k.range()));
            }
        }
        // `{name: {0: "batch"} for name in ("clip", "keypoints")}`: the names listed; over
        // another value (`for name in input_names`), keys checked only when added later.
        Expr::DictComp(comp) => {
            if let ([g], Some(Expr::Name(key))) = (&comp.generators[..], comp.key.as_deref()) {
                let over_key = matches!(&g.target, Expr::Name(t) if t.id == key.id);
                let listed = listed(ch, &g.iter, 0);
                if let (Some(elts), true, true) = (listed, over_key, g.ifs.is_empty()) {
                    for e in elts {
                        out.push((string_literal(e)?.to_string(), e.range()));
                    }
                }
            }
        }
        _ => return None,
    }
    if let Expr::Name(n) = value {
        for s in statements_before(ch, before) {
            // `axes |= {"ukc": {0: "batch"}}`
            if let Stmt::AugAssign(a) = s {
                if let (Expr::Name(m), ast::Operator::BitOr, Expr::Dict(d)) =
                    (a.target.as_ref(), a.op, a.value.as_ref())
                {
                    if m.id == n.id {
                        for key in d.items.iter().filter_map(|i| i.key.as_ref()) {
                            if let Some(k) = string_literal(key) {
                                out.push((k.to_string(), key.range()));
                            }
                        }
                    }
                }
                continue;
            }
            // `axes.update({"gauge_values": {0: "batch"}, ...})`
            if let Stmt::Expr(e) = s {
                if let Expr::Call(c) = e.value.as_ref() {
                    let on_axes = matches!(c.func.as_ref(), Expr::Attribute(a)
                        if a.attr.id.as_str() == "update"
                            && matches!(a.value.as_ref(), Expr::Name(m) if m.id == n.id));
                    if let (true, [Expr::Dict(d)]) = (on_axes, &c.arguments.args[..]) {
                        for key in d.items.iter().filter_map(|i| i.key.as_ref()) {
                            if let Some(k) = string_literal(key) {
                                out.push((k.to_string(), key.range()));
                            }
                        }
                    }
                }
                continue;
            }
            let Stmt::Assign(a) = s else { continue };
            for t in &a.targets {
                let Expr::Subscript(sub) = t else { continue };
                if !matches!(sub.value.as_ref(), Expr::Name(m) if m.id == n.id) {
                    continue;
                }
                if let Some(k) = string_literal(&sub.slice) {
                    out.push((k.to_string(), sub.slice.range()));
                }
            }
        }
    }
    Some(out)
}

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    if !is_export(ch, call) {
        check_wrapper_call(ch, call);
        return;
    }
    let Some((axes, _)) = spliced_keyword(ch, call, "dynamic_axes") else {
        return;
    };
    let Some(keys) = keys(ch, &axes, call.range().start()) else {
        return;
    };
    // Without `output_names` (and no `**kwargs` that could hold it) the outputs get generated
    // names, so a key naming an output matches nothing.
    let unnamed_outputs = spliced_keyword(ch, call, "output_names").is_none()
        && crate::rules::splices_shown(ch, call);
    let outputs = if unnamed_outputs {
        Some(Vec::new())
    } else {
        names(ch, call, "output_names")
    };
    let (Some(inputs), Some(outputs)) = (names(ch, call, "input_names"), outputs) else {
        return;
    };
    report(ch, keys, inputs, outputs, unnamed_outputs);
}

/// `_to_onnx(model, args, path, ["image"], ["logits"], axes)` with `def _to_onnx(module, args,
/// path, input_names, output_names, axes)` of this file passing its parameters to the export:
/// the keys and names the call hands in, checked where it is written.
fn check_wrapper_call(ch: &mut Checker, call: &ast::ExprCall) {
    let Expr::Name(f) = call.func.as_ref() else {
        return;
    };
    let Some((def, export)) = ch.export_wrapper(f.id.as_str()) else {
        return;
    };
    // The export's own `**extra` cannot hold a name the call also gives as a keyword (that is a
    // TypeError): only when one of the three is missing may it come from there.
    let names_given = ["input_names", "output_names", "dynamic_axes"]
        .iter()
        .all(|k| export.arguments.find_keyword(k).is_some());
    // `def _export(module, args, path, **kw): ...; torch.onnx.export(module, args, path, **kw)`:
    // the call's own keywords reach the export, when the wrapper splices nothing else and
    // leaves those three alone.
    let through_kwargs = def.parameters.kwarg.as_ref().is_some_and(|kw| {
        let kw = kw.name.id.as_str();
        let mut splices = export
            .arguments
            .keywords
            .iter()
            .filter(|k| k.arg.is_none())
            .peekable();
        splices.peek().is_some()
            && splices.all(|k| matches!(&k.value, Expr::Name(n) if n.id.as_str() == kw))
            && !kwargs_touch_names(ch, &def.body, kw)
    });
    if crate::rules::splices_arguments(call)
        || (export.arguments.keywords.iter().any(|k| k.arg.is_none())
            && !names_given
            && !through_kwargs)
    {
        return;
    }
    // A local function, name or parameter of the calling scope is not the module's wrapper
    // (checked only for names of wrappers: most calls are not).
    if ch.defs.iter().any(|d| {
        d.parameters
            .iter()
            .any(|p| p.name().id.as_str() == f.id.as_str())
    }) {
        return;
    }
    for scope in ch.bodies.iter().skip(1) {
        let local_def = scope
            .iter()
            .any(|s| matches!(s, Stmt::FunctionDef(d) if d.name.id.as_str() == f.id.as_str()));
        if local_def || crate::checker::name_bindings(scope).contains_key(f.id.as_str()) {
            return;
        }
    }
    // The wrapper changes what it hands on (`input_names = input_names + ["mask"]`,
    // `axes.update(...)`): not known from the call.
    // `input_names=list(input_names)`: the parameter itself, copied; `dynamic_axes=axes or {}`:
    // the parameter, or nothing.
    fn copied(e: &Expr) -> &Expr {
        match e {
            Expr::BoolOp(b)
                if matches!(b.op, ast::BoolOp::Or)
                    && b.values.len() == 2
                    && matches!(&b.values[1], Expr::Dict(d) if d.items.is_empty())
                        | matches!(&b.values[1], Expr::List(l) if l.elts.is_empty())
                        | b.values[1].is_none_literal_expr() =>
            {
                &b.values[0]
            }
            Expr::Call(c)
                if matches!(c.func.as_ref(), Expr::Name(f) if matches!(f.id.as_str(), "list" | "tuple"))
                    && c.arguments.keywords.is_empty()
                    && c.arguments.args.len() == 1 =>
            {
                &c.arguments.args[0]
            }
            e => e,
        }
    }
    let handed_on: Vec<&str> = ["input_names", "output_names", "dynamic_axes"]
        .iter()
        .filter_map(
            |kw| match copied(&export.arguments.find_keyword(kw)?.value) {
                Expr::Name(n) => Some(n.id.as_str()),
                _ => None,
            },
        )
        .collect();
    if changes_before(&def.body, export, |n| handed_on.contains(&n)) {
        return;
    }
    // What the call gives a parameter: its argument, or the default.
    let given = |param: &str| -> Option<&Expr> {
        if let Some(k) = call
            .arguments
            .keywords
            .iter()
            .find(|k| k.arg.as_ref().is_some_and(|a| a.id.as_str() == param))
        {
            return Some(&k.value);
        }
        let positional = def
            .parameters
            .posonlyargs
            .iter()
            .chain(&def.parameters.args);
        for (i, p) in positional.enumerate() {
            if p.parameter.name.id.as_str() == param {
                return call.arguments.args.get(i).or(p.default.as_deref());
            }
        }
        def.parameters
            .kwonlyargs
            .iter()
            .find(|p| p.parameter.name.id.as_str() == param)
            .and_then(|p| p.default.as_deref())
    };
    let is_param = |e: &Expr| match e {
        Expr::Name(n) => def
            .parameters
            .iter()
            .any(|p| p.name().id.as_str() == n.id.as_str()),
        _ => false,
    };
    // Each export argument as the call site sees it: a parameter's argument, or a literal the
    // wrapper writes itself.
    let value = |kw: &str| -> Option<Option<&Expr>> {
        let Some(k) = export.arguments.find_keyword(kw) else {
            if through_kwargs {
                return Some(call.arguments.find_keyword(kw).map(|k| &k.value));
            }
            return Some(None);
        };
        match copied(&k.value) {
            v @ Expr::Name(n) if is_param(v) => given(n.id.as_str()).map(Some),
            v @ (Expr::List(_) | Expr::Tuple(_) | Expr::Dict(_)) => Some(Some(v)),
            _ => None,
        }
    };
    let axes_from_caller = match export.arguments.find_keyword("dynamic_axes") {
        Some(k) => is_param(copied(&k.value)),
        None => through_kwargs && call.arguments.find_keyword("dynamic_axes").is_some(),
    };
    if !axes_from_caller {
        return;
    }
    let (Some(Some(axes)), Some(inputs), Some(outputs)) = (
        value("dynamic_axes"),
        value("input_names"),
        value("output_names"),
    ) else {
        return;
    };
    if matches!(axes, Expr::NoneLiteral(_)) {
        return;
    }
    let before = call.range().start();
    let Some(keys) = keys(ch, axes, before) else {
        return;
    };
    let Some(inputs) = inputs.and_then(|v| names_of(ch, v, before)) else {
        return;
    };
    let unnamed_outputs = outputs.is_none();
    let outputs = match outputs {
        None => Vec::new(),
        Some(v) => match names_of(ch, v, before) {
            Some(names) => names,
            None => return,
        },
    };
    report(ch, keys, inputs, outputs, unnamed_outputs);
}

/// Whether a wrapper's body may change the names its `**kw` hands on. Only these uses of `kw`
/// leave them alone: splices into exports, `kw.get(k)` and `"k" in kw`; `kw[k]`,
/// `kw.setdefault(k, v)` and `kw.pop(k, ...)` with a literal key other than the three names
/// (`kw.setdefault("opset_version", 17)`, `kw["opset_version"] = 17`), and `kw` shown by `print`
/// or a logger. Any other (a loop filling defaults, `kw` handed to a helper or aliased, `del kw[...]`,
/// `kw["input_names"].append(...)`, a nested function using it) may change them.
fn kwargs_touch_names(ch: &Checker, body: &[Stmt], kw: &str) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    struct Uses<'c, 'a, 'n> {
        ch: &'c Checker<'a>,
        kw: &'n str,
        all: usize,
        allowed: usize,
    }
    impl Uses<'_, '_, '_> {
        fn is_kw(&self, e: &Expr) -> bool {
            matches!(e, Expr::Name(n) if n.id.as_str() == self.kw)
        }
    }
    fn other_key(k: Option<&Expr>) -> bool {
        k.and_then(string_literal)
            .is_some_and(|k| !matches!(k, "input_names" | "output_names" | "dynamic_axes"))
    }
    fn shows(c: &ast::ExprCall) -> bool {
        match c.func.as_ref() {
            Expr::Name(f) => f.id.as_str() == "print",
            Expr::Attribute(a) => {
                matches!(
                    a.attr.id.as_str(),
                    "debug" | "info" | "warning" | "warn" | "error" | "critical" | "exception"
                ) && matches!(a.value.as_ref(), Expr::Name(l)
                    if l.id.to_ascii_lowercase().contains("log"))
            }
            _ => false,
        }
    }
    impl<'v> Visitor<'v> for Uses<'_, '_, '_> {
        fn visit_expr(&mut self, e: &'v Expr) {
            match e {
                Expr::Name(n) if n.id.as_str() == self.kw => self.all += 1,
                Expr::Call(c) => {
                    if is_export(self.ch, c) || shows(c) {
                        self.allowed += c
                            .arguments
                            .args
                            .iter()
                            .chain(c.arguments.keywords.iter().map(|k| &k.value))
                            .filter(|v| self.is_kw(v))
                            .count();
                    }
                    if let Expr::Attribute(a) = c.func.as_ref() {
                        let key = c.arguments.args.first();
                        if self.is_kw(&a.value)
                            && match a.attr.id.as_str() {
                                "get" => key.is_some_and(|k| string_literal(k).is_some()),
                                "setdefault" | "pop" => other_key(key),
                                _ => false,
                            }
                        {
                            self.allowed += 1;
                        }
                    }
                    visitor::walk_expr(self, e);
                }
                Expr::Subscript(sub)
                    if !sub.ctx.is_del()
                        && self.is_kw(&sub.value)
                        && other_key(Some(&sub.slice)) =>
                {
                    self.allowed += 1;
                    visitor::walk_expr(self, e);
                }
                // `"opset_version" in kw`
                Expr::Compare(cmp)
                    if cmp.ops.len() == 1
                        && matches!(cmp.ops[0], ast::CmpOp::In | ast::CmpOp::NotIn)
                        && self.is_kw(&cmp.comparators[0]) =>
                {
                    self.allowed += 1;
                    visitor::walk_expr(self, e);
                }
                e => visitor::walk_expr(self, e),
            }
        }
    }
    let mut uses = Uses {
        ch,
        kw,
        all: 0,
        allowed: 0,
    };
    uses.visit_body(body);
    uses.all != uses.allowed
}

/// Whether a body binds, or grows in place, a name `param` accepts before the call `export`:
/// `x = ...`, `x += ...`, `x[k] = ...`, `x.append(...)`, `x.update(...)`.
fn changes_before(body: &[Stmt], export: &ast::ExprCall, param: impl Fn(&str) -> bool) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    struct Find<'p, P: Fn(&str) -> bool> {
        param: &'p P,
        before: TextSize,
        found: bool,
    }
    impl<'a, P: Fn(&str) -> bool> Visitor<'a> for Find<'_, P> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if e.range().start() >= self.before {
                return;
            }
            match e {
                Expr::Name(n)
                    if matches!(n.ctx, ast::ExprContext::Store) && (self.param)(n.id.as_str()) =>
                {
                    self.found = true
                }
                Expr::Subscript(sub)
                    if matches!(sub.ctx, ast::ExprContext::Store)
                        && matches!(sub.value.as_ref(), Expr::Name(n) if (self.param)(n.id.as_str())) =>
                {
                    self.found = true
                }
                Expr::Call(c) => {
                    if let Expr::Attribute(a) = c.func.as_ref() {
                        let grows = matches!(
                            a.attr.id.as_str(),
                            "append"
                                | "extend"
                                | "insert"
                                | "update"
                                | "setdefault"
                                | "pop"
                                | "remove"
                        );
                        if grows
                            && matches!(a.value.as_ref(), Expr::Name(n) if (self.param)(n.id.as_str()))
                        {
                            self.found = true;
                        }
                    }
                }
                _ => {}
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut find = Find {
        param: &param,
        before: export.range().start(),
        found: false,
    };
    find.visit_body(body);
    find.found
}

fn report(
    ch: &mut Checker,
    keys: Vec<(String, TextRange)>,
    mut inputs: Vec<String>,
    mut outputs: Vec<String>,
    unnamed_outputs: bool,
) {
    // A list bound and then read again gives its names twice; each is shown once.
    for names in [&mut inputs, &mut outputs] {
        let mut seen = crate::HashSet::default();
        names.retain(|n| seen.insert(n.clone()));
    }
    let known = |k: &str| inputs.iter().chain(&outputs).any(|n| matches_name(k, n));
    let (inputs, outputs) = (shown(&inputs), shown(&outputs));
    for (k, range) in keys {
        if known(&k) {
            continue;
        }
        if unnamed_outputs {
            let i = ch.report(
                &RULE,
                range,
                format!("dynamic_axes key \"{k}\" is not in input_names {inputs:?}, and without `output_names` the outputs get generated names: that axis stays fixed"),
            );
            ch.help(
                i,
                format!("name the outputs: `output_names=[\"{k}\", ...]`"),
            );
            continue;
        }
        // Reported at the key itself, where the fix goes, even when the dict is bound earlier.
        let i = ch.report(
            &RULE,
            range,
            format!("dynamic_axes key \"{k}\" is not in input_names {inputs:?} or output_names {outputs:?}: that axis stays fixed"),
        );
        ch.help(
            i,
            "use exactly a name from `input_names`/`output_names` as the key",
        );
    }
}
