//! One file per rule. Each file's `//!` comment is the rule's documentation (sections
//! `## What it does`, `## Why is this bad?`, `## Example`, `## Fix`), its `RULE` constant the
//! row of the registry, and its `check_*` functions the hooks the checker calls.

pub(crate) mod autograd_function_without_symbolic;
pub(crate) mod data_dependent_shape;
pub(crate) mod deprecated_upsample;
pub(crate) mod device_literal;
pub(crate) mod dynamic_axes_unknown_name;
pub(crate) mod einsum;
pub(crate) mod export_without_eval;
pub(crate) mod grid_sample;
pub(crate) mod inplace_index_write;
pub(crate) mod interpolate_align_corners;
pub(crate) mod keep_initializers_as_inputs;
pub(crate) mod loop_slice_assignment;
pub(crate) mod mask_index_assignment;
pub(crate) mod mha_fast_path;
pub(crate) mod opset_too_low;
pub(crate) mod python_int_size;
pub(crate) mod repeat_interleave;
pub(crate) mod syntax_error;
pub(crate) mod tensor_condition;
pub(crate) mod tensor_to_python;
pub(crate) mod training_branch;

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, Stmt};

/// The value of keyword argument `name`.
pub(crate) fn keyword<'a>(call: &'a ast::ExprCall, name: &str) -> Option<&'a ast::Keyword> {
    call.arguments
        .keywords
        .iter()
        .find(|k| k.arg.as_ref().is_some_and(|a| a.id.as_str() == name))
}

/// The value of keyword argument `name` of a call, looking through `**kwargs` splices of a
/// dict the file binds by name (`EXPORT_KW = dict(opset_version=13)` or `{"opset_version": 13}`,
/// then `torch.onnx.export(..., **EXPORT_KW)`) or writes inline, through what such a dict was
/// given afterwards (`kw.update(opset_version=12)`, `kw["dynamic_axes"] = axes`), and through
/// the arguments a `functools.partial` of the exporter binds (`export = partial(torch.onnx.export,
/// opset_version=11)`, then `export(model, args, path)`): the value and the range to report (the
/// keyword, or the dict entry).
pub(crate) fn spliced_keyword(
    ch: &crate::checker::Checker,
    call: &ast::ExprCall,
    name: &str,
) -> Option<(Expr, ruff_text_size::TextRange)> {
    use ruff_text_size::Ranged;
    let before = call.range().start();
    let mut seen = Vec::new();
    call_keyword(ch, call, name, 0, before, &mut seen)
        .or_else(|| {
            let partial = bound_partial(ch, call)?;
            call_keyword(ch, partial, name, 0, before, &mut seen)
        })
        .or_else(|| {
            let value = positional_export_argument(ch, call, name)?;
            Some((value.clone(), value.range()))
        })
}

/// An argument of `torch.onnx.export` given by position, as code from before torch 2.5 (when the
/// arguments after `f` became keyword-only) passes them: `torch.onnx.export(model, x, path, True,
/// False, TrainingMode.EVAL, ["image"], ["logits"], OperatorExportTypes.ONNX, 11)`.
/// `input_names` and `output_names` are the 7th and 8th arguments in every release. The later ones
/// are read only after an export type in the 9th place (1.4–1.9 put `aten` and `export_raw_ir`
/// there): `opset_version` 10th; then torch 1.10 has `_retain_param_name`, `do_constant_folding`,
/// `example_outputs`, `strip_doc_string`, `dynamic_axes` (15th), `keep_initializers_as_inputs`,
/// and 1.11–2.4 `do_constant_folding`, `dynamic_axes` (12th), `keep_initializers_as_inputs`. A
/// Boolean literal 12th is 1.10's `do_constant_folding`.
pub(crate) fn positional_export_argument<'e>(
    ch: &crate::checker::Checker,
    call: &'e ast::ExprCall,
    name: &str,
) -> Option<&'e Expr> {
    let args = &call.arguments.args;
    // Most calls have fewer arguments than the first one read: no name to resolve.
    if args.len() < 7 || args.iter().any(|a| matches!(a, Expr::Starred(_))) {
        return None;
    }
    if ch.qualify(&call.func).as_deref() != Some("torch.onnx.export") {
        return None;
    }
    let export_type = || {
        args.get(8).is_some_and(|a| {
            ch.qualify(a)
                .is_some_and(|q| q.contains("OperatorExportTypes"))
        })
    };
    let torch_1_10 = || args.get(11).is_some_and(|a| a.is_boolean_literal_expr());
    let index = match name {
        "input_names" => 6,
        "output_names" => 7,
        "opset_version" if export_type() => 9,
        "dynamic_axes" if export_type() => {
            if torch_1_10() {
                14
            } else {
                11
            }
        }
        "keep_initializers_as_inputs" if export_type() => {
            if torch_1_10() {
                15
            } else {
                12
            }
        }
        _ => return None,
    };
    args.get(index)
}

/// How deep [`spliced_keyword`] follows splices of splices.
const SPLICE_DEPTH: usize = 6;

/// `name=` among a call's keywords, then in the dicts its `**` splices and (for `dict(base,
/// ...)`) its positional mapping show; a keyword wins over a splice, as at run time. `seen`
/// holds the names already searched: each is searched once (`a = dict(**b)`, `b = dict(**a)`,
/// or `kw.update(other)` written many times, must neither loop nor multiply the work).
fn call_keyword<'e>(
    ch: &'e crate::checker::Checker,
    call: &'e ast::ExprCall,
    name: &str,
    depth: usize,
    before: ruff_text_size::TextSize,
    seen: &mut Vec<&'e str>,
) -> Option<(Expr, ruff_text_size::TextRange)> {
    use ruff_text_size::Ranged;
    if let Some(k) = keyword(call, name) {
        return Some((k.value.clone(), k.range()));
    }
    if depth >= SPLICE_DEPTH {
        return None;
    }
    let splices = call.arguments.keywords.iter().filter(|k| k.arg.is_none());
    let positional = call
        .arguments
        .args
        .first()
        .filter(|_| is_dict_like_call(call));
    for e in splices.map(|k| &k.value).rev().chain(positional) {
        if let Some(found) = dict_keyword(ch, e, name, depth + 1, before, seen) {
            return Some(found);
        }
    }
    None
}

/// `dict(...)` or `<dict>.update(...)`: a call whose keywords are dict entries.
fn is_dict_like_call(call: &ast::ExprCall) -> bool {
    match call.func.as_ref() {
        Expr::Name(f) => f.id.as_str() == "dict",
        Expr::Attribute(a) => a.attr.id.as_str() == "update",
        _ => false,
    }
}

/// `name` in the dict `e` shows (a display, a `dict(...)` call, a name bound to one, or a
/// `.update(...)` call a grown dict holds); the last entry wins. Entries a dict was given after
/// offset `before` (`kw["opset_version"] = 17` below the export) do not reach it.
fn dict_keyword<'e>(
    ch: &'e crate::checker::Checker,
    e: &'e Expr,
    name: &str,
    depth: usize,
    before: ruff_text_size::TextSize,
    seen: &mut Vec<&'e str>,
) -> Option<(Expr, ruff_text_size::TextRange)> {
    use ruff_text_size::{Ranged, TextRange};
    if depth > SPLICE_DEPTH {
        return None;
    }
    let dict = match e {
        Expr::Name(n) => {
            if seen.contains(&n.id.as_str()) {
                return None;
            }
            seen.push(n.id.as_str());
            ch.literal(n.id.as_str())?
        }
        e => e,
    };
    match dict {
        Expr::Call(c) if is_dict_like_call(c) => call_keyword(ch, c, name, depth, before, seen),
        Expr::Dict(d) => {
            for item in d.items.iter().rev() {
                if grown_after(d, item, before) {
                    continue;
                }
                let found = match &item.key {
                    Some(key) => (string_literal(key) == Some(name)).then(|| {
                        let range = TextRange::new(key.range().start(), item.value.range().end());
                        (item.value.clone(), range)
                    }),
                    None => dict_keyword(ch, &item.value, name, depth + 1, before, seen),
                };
                if found.is_some() {
                    return found;
                }
            }
            None
        }
        _ => None,
    }
}

/// Whether `item` was given to dict `d` after it was written (it lies outside the display:
/// `kw["k"] = v`, `kw.update(...)`), below offset `before`.
pub(crate) fn grown_after(
    d: &ast::ExprDict,
    item: &ast::DictItem,
    before: ruff_text_size::TextSize,
) -> bool {
    use ruff_text_size::Ranged;
    let at = item.value.range().start();
    !d.range().contains(at) && at > before
}

/// Whether every `**` splice of a call (and of the partial it calls through) shows its dict,
/// so that a keyword not found is really absent. Each name is looked at once.
pub(crate) fn splices_shown(ch: &crate::checker::Checker, call: &ast::ExprCall) -> bool {
    fn shown<'e>(
        ch: &'e crate::checker::Checker,
        e: &'e Expr,
        depth: usize,
        seen: &mut Vec<&'e str>,
    ) -> bool {
        if depth > SPLICE_DEPTH {
            return false;
        }
        let dict = match e {
            Expr::Name(n) => {
                if seen.contains(&n.id.as_str()) {
                    return true;
                }
                seen.push(n.id.as_str());
                match ch.literal(n.id.as_str()) {
                    Some(d) => d,
                    None => return false,
                }
            }
            e => e,
        };
        match dict {
            Expr::Call(c) if is_dict_like_call(c) => call_shown(ch, c, depth + 1, seen),
            Expr::Dict(d) => d
                .items
                .iter()
                .all(|i| i.key.is_some() || shown(ch, &i.value, depth + 1, seen)),
            _ => false,
        }
    }
    fn call_shown<'e>(
        ch: &'e crate::checker::Checker,
        call: &'e ast::ExprCall,
        depth: usize,
        seen: &mut Vec<&'e str>,
    ) -> bool {
        let positional = call
            .arguments
            .args
            .first()
            .filter(|_| is_dict_like_call(call));
        call.arguments
            .keywords
            .iter()
            .filter(|k| k.arg.is_none())
            .map(|k| &k.value)
            .chain(positional)
            .all(|e| shown(ch, e, depth, seen))
    }
    let mut seen = Vec::new();
    call_shown(ch, call, 0, &mut seen)
        && bound_partial(ch, call).is_none_or(|p| call_shown(ch, p, 0, &mut seen))
}

/// The `functools.partial(torch.onnx.export, ...)` a call goes through: `export(model, ...)`
/// with `export` bound to one.
pub(crate) fn bound_partial<'e>(
    ch: &'e crate::checker::Checker,
    call: &ast::ExprCall,
) -> Option<&'e ast::ExprCall> {
    let Expr::Name(f) = call.func.as_ref() else {
        return None;
    };
    if !ch.has_partial {
        return None;
    }
    use ruff_text_size::Ranged;
    match ch.literal_before(f.id.as_str(), call.range().start())? {
        Expr::Call(p) if is_export_partial(ch, p) => Some(p),
        _ => None,
    }
}

/// The torch function a `functools.partial(...)` call binds (`partial(F.interpolate,
/// mode="bilinear")`), qualified.
pub(crate) fn partial_of_torch(
    ch: &crate::checker::Checker,
    call: &ast::ExprCall,
) -> Option<String> {
    let spelled = match call.func.as_ref() {
        Expr::Name(n) => n.id.as_str(),
        Expr::Attribute(a) => a.attr.id.as_str(),
        _ => return None,
    };
    // Cheap tests first: this runs for every call that is not a torch function.
    if !ch.has_partial
        || call.arguments.args.is_empty()
        || !spelled.contains("partial")
        || ch.qualify(&call.func).as_deref() != Some("functools.partial")
    {
        return None;
    }
    ch.qualify(&call.arguments.args[0])
        .filter(|q| q.starts_with("torch."))
}

/// `functools.partial(torch.onnx.export, opset_version=11, ...)`.
pub(crate) fn is_export_partial(ch: &crate::checker::Checker, call: &ast::ExprCall) -> bool {
    ch.qualify(&call.func).as_deref() == Some("functools.partial")
        && matches!(
            call.arguments.args.first(),
            Some(Expr::Name(_) | Expr::Attribute(_))
        )
        && ch.qualify(&call.arguments.args[0]).is_some_and(|q| {
            matches!(
                q.as_str(),
                "torch.onnx.export" | "torch.onnx.utils.export" | "torch.onnx.dynamo_export"
            )
        })
}

/// The argument bound to parameter `name` at `position` (keyword first, then positional).
pub(crate) fn argument<'a>(
    call: &'a ast::ExprCall,
    name: &str,
    position: usize,
) -> Option<&'a Expr> {
    keyword(call, name)
        .map(|k| &k.value)
        .or_else(|| call.arguments.args.get(position))
}

pub(crate) fn string_literal(e: &Expr) -> Option<&str> {
    match e {
        Expr::StringLiteral(s) => Some(s.value.to_str()),
        _ => None,
    }
}

pub(crate) fn int_literal(e: &Expr) -> Option<u32> {
    match e {
        Expr::NumberLiteral(n) => match &n.value {
            ast::Number::Int(i) => i.as_u64().and_then(|v| u32::try_from(v).ok()),
            _ => None,
        },
        _ => None,
    }
}

/// Finds whether some visited expression satisfies a predicate.
struct AnyExpr<P>(P, bool);

impl<'a, P: Fn(&Expr) -> bool> Visitor<'a> for AnyExpr<P> {
    fn visit_expr(&mut self, e: &'a Expr) {
        self.1 |= (self.0)(e);
        visitor::walk_expr(self, e);
    }
}

/// Whether some sub-expression of `e` (itself included) satisfies `pred`.
pub(crate) fn any_sub_expr(e: &Expr, pred: impl Fn(&Expr) -> bool) -> bool {
    let mut f = AnyExpr(pred, false);
    f.visit_expr(e);
    f.1
}

/// Whether some expression of a statement (of its nested blocks too) satisfies `pred`.
pub(crate) fn any_sub_stmt_expr(s: &Stmt, pred: impl Fn(&Expr) -> bool) -> bool {
    let mut f = AnyExpr(pred, false);
    f.visit_stmt(s);
    f.1
}

/// Whether the expression mentions a name in `names`.
pub(crate) fn mentions(e: &Expr, names: &[String]) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    struct Find<'n> {
        names: &'n [String],
        found: bool,
    }
    impl<'a> Visitor<'a> for Find<'_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Name(n) = e {
                if self.names.iter().any(|x| x == n.id.as_str()) {
                    self.found = true;
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find {
        names,
        found: false,
    };
    f.visit_expr(e);
    f.found
}

/// The elements of a subscript's index (`x[a, b:c]` → `[a, b:c]`).
pub(crate) fn index_elements(slice: &Expr) -> Vec<&Expr> {
    match slice {
        Expr::Tuple(t) => t.elts.iter().collect(),
        e => vec![e],
    }
}

/// Whether a call splices arguments (`*args`, `**kw`), which may already hold one a fix would
/// append (`got multiple values for argument` at run time): such fixes are only suggested.
pub(crate) fn splices_arguments(call: &ast::ExprCall) -> bool {
    call.arguments
        .args
        .iter()
        .any(|a| matches!(a, Expr::Starred(_)))
        || call.arguments.keywords.iter().any(|k| k.arg.is_none())
}

/// An edit that appends `arg` (e.g. `align_corners=False`) to a call's argument list, right after
/// the last argument (before a trailing comma or a comment that follows it: `scale_factor=2  #
/// doubled` must not swallow the new argument).
pub(crate) fn append_argument(source: &str, call: &ast::ExprCall, arg: &str) -> crate::Edit {
    use ruff_text_size::Ranged;
    let a = &call.arguments;
    // `F.upsample_bilinear(s for s in sizes)`: the lone generator needs its own parentheses
    // once another argument follows.
    if let ([Expr::Generator(g)], []) = (&a.args[..], &a.keywords[..]) {
        if !g.parenthesized {
            let (start, end) = (g.range().start().to_usize(), g.range().end().to_usize());
            return crate::Edit {
                start,
                end,
                content: format!("({}), {arg}", &source[start..end]),
            };
        }
    }
    let last = a
        .args
        .iter()
        .map(|e| e.range().end())
        .chain(a.keywords.iter().map(|k| k.range().end()))
        .max();
    let (at, content) = match last {
        Some(end) => {
            // Past the closing parentheses of a parenthesized last argument (`(2)`: its range
            // leaves them out) and any comments, up to a trailing comma or the call's `)`.
            let close = a.range().end().to_usize() - 1;
            let mut at = end.to_usize();
            let mut comma = None;
            let bytes = source.as_bytes();
            let mut i = at;
            while i < close {
                match bytes[i] {
                    b'#' => {
                        while i < close && bytes[i] != b'\n' {
                            i += 1;
                        }
                        continue;
                    }
                    b')' => at = i + 1,
                    b',' => {
                        comma = Some(i + 1);
                        break;
                    }
                    _ => {}
                }
                i += 1;
            }
            match comma {
                Some(after) => (after, format!(" {arg}")),
                None => (at, format!(", {arg}")),
            }
        }
        None => (a.range().start().to_usize() + 1, arg.to_string()),
    };
    crate::Edit {
        start: at,
        end: at,
        content,
    }
}

/// Calls `f` on every statement of a body and of the bodies nested in it (functions, classes,
/// `if`/`for`/`while`/`with`/`try` blocks), each compound statement before its body.
pub(crate) fn each_stmt<'s>(body: &'s [Stmt], f: &mut dyn FnMut(&'s Stmt)) {
    for s in body {
        f(s);
        match s {
            Stmt::FunctionDef(d) => each_stmt(&d.body, f),
            Stmt::ClassDef(c) => each_stmt(&c.body, f),
            Stmt::If(i) => {
                each_stmt(&i.body, f);
                i.elif_else_clauses
                    .iter()
                    .for_each(|c| each_stmt(&c.body, f));
            }
            Stmt::For(x) => {
                each_stmt(&x.body, f);
                each_stmt(&x.orelse, f);
            }
            Stmt::While(x) => {
                each_stmt(&x.body, f);
                each_stmt(&x.orelse, f);
            }
            Stmt::With(x) => each_stmt(&x.body, f),
            Stmt::Try(t) => {
                each_stmt(&t.body, f);
                each_stmt(&t.orelse, f);
                each_stmt(&t.finalbody, f);
            }
            _ => {}
        }
    }
}

/// The values assigned to `name` by plain assignments in a function body, annotated ones too
/// (`opset: int = A if legacy else B`), not in nested functions or classes.
pub(crate) fn bound_values<'a>(body: &'a [Stmt], name: &str) -> Vec<&'a Expr> {
    assigned_values(body, name, false)
}

/// The values `name` is unpacked from, as a plain element of a tuple or list target (`ys, xs =
/// torch.where(m)`), in a function body, not in nested functions or classes.
pub(crate) fn unpacked_values<'a>(body: &'a [Stmt], name: &str) -> Vec<&'a Expr> {
    assigned_values(body, name, true)
}

fn assigned_values<'a>(body: &'a [Stmt], name: &str, unpacked: bool) -> Vec<&'a Expr> {
    struct Bindings<'a, 'n> {
        name: &'n str,
        unpacked: bool,
        values: Vec<&'a Expr>,
    }
    impl<'a> Visitor<'a> for Bindings<'a, '_> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            let is_name = |t: &Expr| matches!(t, Expr::Name(n) if n.id.as_str() == self.name);
            match s {
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
                Stmt::Assign(a) => {
                    let binds = a.targets.iter().any(|t| match t {
                        Expr::Tuple(ast::ExprTuple { elts, .. })
                        | Expr::List(ast::ExprList { elts, .. })
                            if self.unpacked =>
                        {
                            elts.iter().any(is_name)
                        }
                        t => !self.unpacked && is_name(t),
                    });
                    if binds {
                        self.values.push(&a.value);
                    }
                }
                Stmt::AnnAssign(a) if !self.unpacked => {
                    if let (true, Some(v)) = (is_name(&a.target), a.value.as_deref()) {
                        self.values.push(v);
                    }
                }
                s => visitor::walk_stmt(self, s),
            }
        }
    }
    let mut b = Bindings {
        name,
        unpacked,
        values: Vec::new(),
    };
    b.visit_body(body);
    b.values
}

/// How many times a body stores to `name` outside nested functions and classes (assignments,
/// annotated ones, `+=`, loop and `with` targets, comprehension variables, imports).
pub(crate) fn store_count(body: &[Stmt], name: &str) -> usize {
    struct Count<'n>(&'n str, usize);
    impl<'a> Visitor<'a> for Count<'_> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            match s {
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
                Stmt::Import(i) => {
                    self.1 += i
                        .names
                        .iter()
                        .filter(|a| {
                            a.asname.as_ref().map_or_else(
                                || a.name.id.split('.').next() == Some(self.0),
                                |n| n.id.as_str() == self.0,
                            )
                        })
                        .count()
                }
                Stmt::ImportFrom(i) => {
                    self.1 += i
                        .names
                        .iter()
                        .filter(|a| a.asname.as_ref().unwrap_or(&a.name).id.as_str() == self.0)
                        .count()
                }
                s => visitor::walk_stmt(self, s),
            }
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            if matches!(e, Expr::Name(n) if n.id.as_str() == self.0 && n.ctx.is_store()) {
                self.1 += 1;
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut count = Count(name, 0);
    count.visit_body(body);
    count.1
}

/// Whether a function body stores to `name` anywhere outside nested functions and classes
/// (an assignment, a loop or `with` target, a comprehension's variable, `:=`, a lambda's
/// parameter): the name is then the function's own, not the module's.
pub(crate) fn stores_name(body: &[Stmt], name: &str) -> bool {
    struct Stores<'n>(&'n str, bool);
    impl<'a> Visitor<'a> for Stores<'_> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if !matches!(s, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) && !self.1 {
                visitor::walk_stmt(self, s);
            }
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            match e {
                Expr::Name(n) if n.ctx.is_store() && n.id.as_str() == self.0 => self.1 = true,
                Expr::Lambda(l)
                    if l.parameters
                        .as_ref()
                        .is_some_and(|p| p.iter().any(|p| p.name().id.as_str() == self.0)) =>
                {
                    self.1 = true
                }
                e => visitor::walk_expr(self, e),
            }
        }
    }
    let mut v = Stores(name, false);
    v.visit_body(body);
    v.1
}

/// A string, or a choice among strings (`"cuda" if ok else "mps" if mps else "cpu"`).
pub(crate) fn string_choice(e: &Expr) -> bool {
    match e {
        Expr::StringLiteral(_) => true,
        Expr::If(i) => string_choice(&i.body) && string_choice(&i.orelse),
        _ => false,
    }
}

/// The strings a parameter of the class's `__init__` can hold (`mode="bilinear"`,
/// `device="cuda"`): its string default first, when some construction of the class (or of a
/// subclass, through `super().__init__` or `functools.partial`) in the file leaves it out or none
/// is seen, then the strings constructions pass (`Up(8)` and `Up(8, mode="nearest")` both in the
/// file: the default counts), literally or as a config field whose default it is
/// (`Decoder(64, cfg.upsample_mode)`). Empty when the `__init__` rebinds the parameter.
pub(crate) fn init_parameter_strings<'a>(
    module: &'a [ast::Stmt],
    class: &'a ast::StmtClassDef,
    param: &'a str,
) -> Vec<&'a str> {
    init_parameter_strings_at(module, class, param, 0)
}

/// [`init_parameter_strings`], `depth` constructions deep: a construction that forwards a
/// parameter of its own class's `__init__` (`AttentionGate(c, c, m, gate_mode)` in
/// `DecoderStage.__init__(self, ..., gate_mode)`) passes what that class's constructions pass,
/// up to three classes up.
fn init_parameter_strings_at<'a>(
    module: &'a [ast::Stmt],
    class: &'a ast::StmtClassDef,
    param: &'a str,
    depth: u32,
) -> Vec<&'a str> {
    let Some(init) = class.body.iter().find_map(|s| match s {
        ast::Stmt::FunctionDef(f) if f.name.id.as_str() == "__init__" => Some(f),
        _ => None,
    }) else {
        return Vec::new();
    };
    let Some((index, p)) = init
        .parameters
        .iter_non_variadic_params()
        .enumerate()
        .find(|(_, p)| p.parameter.name.id.as_str() == param)
    else {
        return Vec::new();
    };
    // `mode: str` with no default: only what constructions pass counts.
    let default = p.default.as_deref().and_then(string_literal);
    // `mode = "nearest" if ... else mode` before `self.mode = mode`: not the default any more.
    if crate::checker::name_bindings(&init.body).contains_key(param) {
        return Vec::new();
    }
    // Callers do not pass `self`.
    let Some(position) = index.checked_sub(1) else {
        return Vec::new();
    };
    // The class and the classes of the file deriving from it (which run its `__init__`).
    let mut family: Vec<&str> = vec![class.name.id.as_str()];
    loop {
        let before = family.len();
        for s in module {
            let ast::Stmt::ClassDef(c) = s else { continue };
            let derives = c
                .arguments
                .iter()
                .flat_map(|a| a.args.iter())
                .any(|b| matches!(b, ast::Expr::Name(n) if family.contains(&n.id.as_str())));
            if derives && !family.contains(&c.name.id.as_str()) {
                family.push(c.name.id.as_str());
            }
        }
        if family.len() == before {
            break;
        }
    }
    let own_init: Vec<&str> = module
        .iter()
        .filter_map(|s| match s {
            ast::Stmt::ClassDef(c) if family[1..].contains(&c.name.id.as_str()) => c
                .body
                .iter()
                .any(|b| matches!(b, ast::Stmt::FunctionDef(f) if f.name.id.as_str() == "__init__"))
                .then_some(c.name.id.as_str()),
            _ => None,
        })
        .collect();
    struct Passed<'n> {
        module: &'n [ast::Stmt],
        family: Vec<&'n str>,
        param: &'n str,
        position: usize,
        /// Literals constructions pass; `None` for one that leaves the parameter out.
        passed: Vec<Option<&'n str>>,
        constructions: usize,
        /// The classes the visitor is inside (`super().__init__` counts in a subclass only).
        inside: Vec<&'n str>,
        /// Subclasses that define their own `__init__`.
        own_init: Vec<&'n str>,
        depth: u32,
        /// The functions the visitor is inside, innermost last (`""` for a class body).
        functions: Vec<&'n str>,
    }
    impl<'n> Passed<'n> {
        fn check(&mut self, args: &'n [ast::Expr], keywords: &'n [ast::Keyword], positional: bool) {
            let value = keywords
                .iter()
                .find(|k| k.arg.as_ref().is_some_and(|a| a.id.as_str() == self.param))
                .map(|k| &k.value)
                .or(if positional {
                    args.get(self.position)
                } else {
                    None
                });
            self.constructions += 1;
            match value {
                None => self.passed.push(None),
                Some(v) => {
                    // `FPNDecoder(c.widths, 64, c.upsample_mode)`: a config field's default.
                    // `DamageUNet(up_mode=args.up_mode)`: an argparse option's default.
                    let m = string_literal(v).or_else(|| match v {
                        ast::Expr::Attribute(a) if !crate::checker::is_self(&a.value) => {
                            config_field_default(self.module, a.attr.id.as_str()).or_else(|| {
                                matches!(a.value.as_ref(), ast::Expr::Name(r)
                                    if matches!(r.id.as_str(), "args" | "opts" | "opt"))
                                .then(|| {
                                    argparse_default(self.module, a.attr.id.as_str(), |d| {
                                        d.and_then(string_literal)
                                    })
                                })
                                .flatten()
                            })
                        }
                        _ => None,
                    });
                    if let Some(m) = m {
                        self.passed.push(Some(m));
                    } else if let (ast::Expr::Name(n), Some(outer), true) = (
                        v,
                        self.inside.last(),
                        self.depth < 3 && self.functions.last() == Some(&"__init__"),
                    ) {
                        // A parameter of the enclosing class's `__init__`, handed on (not
                        // the class building itself with its own parameter: nothing new).
                        let itself =
                            self.family.first() == Some(outer) && n.id.as_str() == self.param;
                        if let Some(outer) =
                            crate::checker::module_class(self.module, outer).filter(|_| !itself)
                        {
                            let forwarded = init_parameter_strings_at(
                                self.module,
                                outer,
                                n.id.as_str(),
                                self.depth + 1,
                            );
                            self.passed.extend(forwarded.into_iter().map(Some));
                        }
                    }
                }
            }
        }
    }
    impl<'v> Visitor<'v> for Passed<'v> {
        fn visit_stmt(&mut self, s: &'v ast::Stmt) {
            match s {
                ast::Stmt::ClassDef(c) => {
                    self.inside.push(c.name.id.as_str());
                    // A class body is not inside the function around it.
                    self.functions.push("");
                    visitor::walk_stmt(self, s);
                    self.functions.pop();
                    self.inside.pop();
                }
                ast::Stmt::FunctionDef(f) => {
                    self.functions.push(f.name.id.as_str());
                    visitor::walk_stmt(self, s);
                    self.functions.pop();
                }
                _ => visitor::walk_stmt(self, s),
            }
        }
        fn visit_expr(&mut self, e: &'v ast::Expr) {
            if let ast::Expr::Call(c) = e {
                let a = &c.arguments;
                match c.func.as_ref() {
                    // `Up(8, mode="nearest")`, or a subclass that inherits `__init__`; a
                    // subclass with its own `__init__` is counted at its `super().__init__`.
                    ast::Expr::Name(n)
                        if self.family.contains(&n.id.as_str())
                            && !self.own_init.contains(&n.id.as_str()) =>
                    {
                        self.check(&a.args, &a.keywords, true);
                    }
                    // `super().__init__(ch, mode="nearest")` in a subclass (positions as the
                    // class's own); `Up.__init__(self, ...)` by keyword only.
                    ast::Expr::Attribute(f)
                        if f.attr.id.as_str() == "__init__"
                            && self
                                .inside
                                .last()
                                .is_some_and(|c| self.family[1..].contains(c)) =>
                    {
                        let through_super = matches!(f.value.as_ref(), ast::Expr::Call(s)
                            if matches!(s.func.as_ref(), ast::Expr::Name(n) if n.id.as_str() == "super"));
                        self.check(&a.args, &a.keywords, through_super);
                    }
                    // `functools.partial(Up, mode="nearest")` (not `super(Up, self)`).
                    ast::Expr::Name(_) | ast::Expr::Attribute(_)
                        if !matches!(c.func.as_ref(), ast::Expr::Name(f) if f.id.as_str() == "super")
                            && matches!(a.args.first(), Some(ast::Expr::Name(n))
                            if self.family.contains(&n.id.as_str())) =>
                    {
                        self.check(&a.args[1..], &a.keywords, true);
                    }
                    _ => {}
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut passed = Passed {
        module,
        family,
        param,
        position,
        passed: Vec::new(),
        constructions: 0,
        inside: Vec::new(),
        own_init,
        depth,
        functions: Vec::new(),
    };
    passed.visit_body(module);
    let leaves_out = passed.constructions == 0 || passed.passed.contains(&None);
    default
        .filter(|_| leaves_out)
        .into_iter()
        .chain(passed.passed.into_iter().flatten())
        .collect()
}

/// Whether a class is decorated `@dataclass` (also `@dataclass(frozen=True)`,
/// `@dataclasses.dataclass`).
pub(crate) fn is_dataclass(c: &ast::StmtClassDef) -> bool {
    c.decorator_list.iter().any(|d| {
        let e = match &d.expression {
            ast::Expr::Call(call) => call.func.as_ref(),
            e => e,
        };
        matches!(e, ast::Expr::Name(n) if n.id.as_str() == "dataclass")
            || matches!(e, ast::Expr::Attribute(a) if a.attr.id.as_str() == "dataclass")
    })
}

/// The string every config class of the module gives a field as its default (`upsample_mode:
/// str = "bilinear"` in a dataclass or a class named `*Config`/`*Cfg`), when they agree.
pub(crate) fn config_field_default<'a>(module: &'a [ast::Stmt], field: &str) -> Option<&'a str> {
    let mut found: Option<&str> = None;
    for s in module {
        let ast::Stmt::ClassDef(c) = s else { continue };
        let name = c.name.id.to_ascii_lowercase();
        if !(is_dataclass(c) || name.ends_with("config") || name.ends_with("cfg")) {
            continue;
        }
        for s in &c.body {
            // A Hugging Face–style config: `def __init__(self, ..., grasp_upsample="bilinear",
            // **kwargs): self.grasp_upsample = grasp_upsample`.
            if let ast::Stmt::FunctionDef(init) = s {
                if init.name.id.as_str() != "__init__" {
                    continue;
                }
                for stmt in &init.body {
                    let ast::Stmt::Assign(a) = stmt else { continue };
                    let ([ast::Expr::Attribute(t)], ast::Expr::Name(param)) =
                        (&a.targets[..], a.value.as_ref())
                    else {
                        continue;
                    };
                    if t.attr.id.as_str() != field || !crate::checker::is_self(&t.value) {
                        continue;
                    }
                    let default = init
                        .parameters
                        .iter_non_variadic_params()
                        .find(|p| p.parameter.name.id == param.id)
                        .and_then(|p| p.default.as_deref())
                        .and_then(string_literal);
                    let Some(v) = default else { continue };
                    if found.is_some_and(|f| f != v) {
                        return None;
                    }
                    found = Some(v);
                }
                continue;
            }
            let (target, value) = match s {
                ast::Stmt::AnnAssign(a) => (a.target.as_ref(), a.value.as_deref()),
                ast::Stmt::Assign(a) if a.targets.len() == 1 => {
                    (&a.targets[0], Some(a.value.as_ref()))
                }
                _ => continue,
            };
            if !matches!(target, ast::Expr::Name(n) if n.id.as_str() == field) {
                continue;
            }
            let v = string_literal(value?)?;
            if found.is_some_and(|f| f != v) {
                return None;
            }
            found = Some(v);
        }
    }
    found
}

/// The default every `add_argument` of the module gives the option stored as `attr` (its `dest=`,
/// or the first long option: `--up-mode` is `up_mode`), read by `value` (`None` for an option
/// that gives none, which argparse stores as `None`), when they all agree and nothing changes it
/// afterwards (`set_defaults(...)`, `args.attr = ...`). Not for a required option
/// (`required=True`, or a module constant bound once to `True`), whose default is never used.
pub(crate) fn argparse_default<'m, T: PartialEq + Copy>(
    module: &'m [Stmt],
    attr: &str,
    value: impl Fn(Option<&'m Expr>) -> Option<T>,
) -> Option<T> {
    struct Find<'n, 'm> {
        module: &'m [Stmt],
        attr: &'n str,
        defaults: Vec<Option<&'m Expr>>,
        overridden: bool,
    }
    impl<'m> Visitor<'m> for Find<'_, 'm> {
        fn visit_expr(&mut self, e: &'m Expr) {
            // `args.opset = ...` or `args.opset += 1` anywhere in the file (a module's own
            // `self.up_mode = up_mode` is another value).
            if let Expr::Attribute(a) = e {
                if a.attr.id.as_str() == self.attr
                    && matches!(a.ctx, ast::ExprContext::Store)
                    && !crate::checker::is_self(&a.value)
                {
                    self.overridden = true;
                }
            }
            if let Expr::Call(c) = e {
                let method = match c.func.as_ref() {
                    Expr::Attribute(a) => a.attr.id.as_str(),
                    _ => "",
                };
                if method == "set_defaults"
                    && c.arguments
                        .keywords
                        .iter()
                        .any(|k| k.arg.as_ref().is_none_or(|a| a.id.as_str() == self.attr))
                {
                    self.overridden = true;
                }
                if method == "add_argument" {
                    let options: Vec<String> = c
                        .arguments
                        .args
                        .iter()
                        .filter_map(|a| match a {
                            Expr::StringLiteral(s) => Some(s.value.to_str().to_string()),
                            _ => None,
                        })
                        .collect();
                    let dest = keyword(c, "dest")
                        .and_then(|k| match &k.value {
                            Expr::StringLiteral(s) => Some(s.value.to_str().to_string()),
                            _ => None,
                        })
                        .or_else(|| {
                            options
                                .iter()
                                .find(|o| o.starts_with("--"))
                                .or(options.first())
                                .map(|o| o.trim_start_matches('-').replace('-', "_"))
                        });
                    if dest.as_deref() == Some(self.attr) {
                        self.defaults.push(keyword(c, "default").map(|k| &k.value));
                        // `required=True`, also through a module constant (`required=REQUIRED`
                        // with `REQUIRED = True` bound once).
                        if keyword(c, "required").is_some_and(|k| match &k.value {
                            Expr::BooleanLiteral(b) => b.value,
                            Expr::Name(n) => matches!(bound_values(self.module, n.id.as_str())[..],
                                [Expr::BooleanLiteral(b)] if b.value),
                            _ => false,
                        }) {
                            self.overridden = true;
                        }
                    }
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut find = Find {
        module,
        attr,
        defaults: Vec::new(),
        overridden: false,
    };
    find.visit_body(module);
    let values: Vec<Option<T>> = find.defaults.iter().map(|d| value(*d)).collect();
    let first = *values.first()?;
    (!find.overridden && values.iter().all(|d| *d == first))
        .then_some(first)
        .flatten()
}

/// The string a config dict holds under `key`, where the module spells the dict out: a dict
/// literal or `dict(...)` (the last binding of the key wins; a splat the module spells out,
/// `**DEFAULT_CFG`, is read in its place, one it does not, `**(cfg or {})`, is passed over), a
/// module-level name bound once to one, a local bound once to one in the function, or
/// `self.<attr>` assigned one (or such a local) once by the class.
pub(crate) fn dict_value<'a>(
    ch: &crate::checker::Checker<'a>,
    e: &'a ast::Expr,
    key: &str,
    depth: u32,
) -> Option<&'a str> {
    if depth > 4 {
        return None;
    }
    let module = ch.bodies[0];
    let once = |body: &'a [ast::Stmt], name: &str| match bound_values(body, name)[..] {
        [v] => Some(v),
        _ => None,
    };
    match e {
        ast::Expr::Dict(d) => d.items.iter().rev().find_map(|i| match &i.key {
            Some(k) => (string_literal(k) == Some(key))
                .then(|| string_literal(&i.value))
                .flatten(),
            None => dict_value(ch, &i.value, key, depth + 1),
        }),
        ast::Expr::Call(c) if matches!(c.func.as_ref(), ast::Expr::Name(n) if n.id.as_str() == "dict") =>
        {
            // `dict(mode=...)`, else what `dict(base, **extra)` copies, the last first.
            match keyword(c, key) {
                Some(k) => string_literal(&k.value),
                None => dict_call_copies(c)
                    .rev()
                    .find_map(|v| dict_value(ch, v, key, depth + 1)),
            }
        }
        // A parameter or a local of the name hides the module's (`def resize(self, x, cfg)`).
        ast::Expr::Name(n) => {
            let def = ch.defs.last().copied();
            let value = match def {
                Some(f) if f.parameters.iter().any(|p| p.name().id == n.id) => return None,
                Some(f) if store_count(&f.body, n.id.as_str()) > 0 => once(&f.body, n.id.as_str())
                    .filter(|_| store_count(&f.body, n.id.as_str()) == 1)?,
                _ => once(module, n.id.as_str())?,
            };
            dict_value(ch, value, key, depth + 1)
        }
        ast::Expr::Attribute(a) if crate::checker::is_self(&a.value) => {
            let class = crate::checker::module_class(module, ch.classes.last()?)?;
            let values: Vec<&ast::Expr> = crate::checker::self_assignments(&class.body)
                .into_iter()
                .filter(|(attr, _)| *attr == a.attr.id.as_str())
                .map(|(_, v)| v)
                .collect();
            let [value] = values[..] else {
                return None;
            };
            // `cfg = {**DEFAULT_CFG, **(cfg or {})}; self.cfg = cfg` in `__init__`.
            let value = match value {
                ast::Expr::Name(n) => class.body.iter().find_map(|s| match s {
                    ast::Stmt::FunctionDef(f) if f.name.id.as_str() == "__init__" => {
                        once(&f.body, n.id.as_str())
                    }
                    _ => None,
                })?,
                v => v,
            };
            dict_value(ch, value, key, depth + 1)
        }
        _ => None,
    }
}

/// The mappings a `dict(...)` call copies, in order: its positional argument and its `**`
/// splats (`dict(base, **extra)`).
pub(crate) fn dict_call_copies(c: &ast::ExprCall) -> impl DoubleEndedIterator<Item = &Expr> {
    c.arguments.args.iter().chain(
        c.arguments
            .keywords
            .iter()
            .filter(|k| k.arg.is_none())
            .map(|k| &k.value),
    )
}

/// The value of a module-level name bound once and bound nowhere else: not by a function of the
/// file through `global`, nor shadowed by the functions the reading code is in.
pub(crate) fn module_constant<'a>(
    ch: &crate::checker::Checker<'a>,
    name: &str,
) -> Option<&'a Expr> {
    if ch.defs.iter().any(|f| {
        f.parameters.iter().any(|p| p.name().id.as_str() == name) || stores_name(&f.body, name)
    }) {
        return None;
    }
    let module = ch.bodies[0];
    struct Global<'n>(&'n str, bool);
    impl<'a> Visitor<'a> for Global<'_> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if let Stmt::Global(g) = s {
                self.1 |= g.names.iter().any(|n| n.id.as_str() == self.0);
            }
            visitor::walk_stmt(self, s);
        }
    }
    let mut global = Global(name, false);
    global.visit_body(module);
    if global.1 {
        return None;
    }
    match bound_values(module, name)[..] {
        [v] if store_count(module, name) == 1 => Some(v),
        _ => None,
    }
}
