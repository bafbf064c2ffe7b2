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

/// The dict a `**kwargs` splice expands, when the file shows it: a `{...}` display or a
/// `dict(...)` call, written inline or bound to the spliced name.
pub(crate) fn spliced_dict<'e>(ch: &'e crate::checker::Checker, e: &'e Expr) -> Option<&'e Expr> {
    let dict = match e {
        Expr::Name(n) => ch.literal(n.id.as_str())?,
        e => e,
    };
    let shown = matches!(dict, Expr::Dict(_))
        || matches!(dict, Expr::Call(c) if matches!(c.func.as_ref(), Expr::Name(f) if f.id.as_str() == "dict"));
    shown.then_some(dict)
}

/// The value of keyword argument `name` of a call, looking through `**kwargs` splices of a
/// dict the file binds by name (`EXPORT_KW = dict(opset_version=13)` or `{"opset_version": 13}`,
/// then `torch.onnx.export(..., **EXPORT_KW)`) or writes inline: the value and the range to
/// report (the keyword, or the dict entry).
pub(crate) fn spliced_keyword(
    ch: &crate::checker::Checker,
    call: &ast::ExprCall,
    name: &str,
) -> Option<(Expr, ruff_text_size::TextRange)> {
    use ruff_text_size::{Ranged, TextRange};
    if let Some(k) = keyword(call, name) {
        return Some((k.value.clone(), k.range()));
    }
    for k in call.arguments.keywords.iter().filter(|k| k.arg.is_none()) {
        match spliced_dict(ch, &k.value) {
            Some(Expr::Call(c)) if matches!(c.func.as_ref(), Expr::Name(f) if f.id.as_str() == "dict") => {
                if let Some(k) = keyword(c, name) {
                    return Some((k.value.clone(), k.range()));
                }
            }
            Some(Expr::Dict(d)) => {
                for item in &d.items {
                    if let Some(key) = &item.key {
                        if string_literal(key) == Some(name) {
                            let range =
                                TextRange::new(key.range().start(), item.value.range().end());
                            return Some((item.value.clone(), range));
                        }
                    }
                }
            }
            _ => {}
        }
    }
    None
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

/// Whether some sub-expression of `e` (itself included) satisfies `pred`.
pub(crate) fn any_sub_expr(e: &Expr, pred: impl Fn(&Expr) -> bool) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    struct Find<P>(P, bool);
    impl<'a, P: Fn(&Expr) -> bool> Visitor<'a> for Find<P> {
        fn visit_expr(&mut self, e: &'a Expr) {
            self.1 |= (self.0)(e);
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find(pred, false);
    f.visit_expr(e);
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

/// An edit that appends `arg` (e.g. `align_corners=False`) to a call's argument list, after the
/// last argument, with or without a separating comma as the call needs.
pub(crate) fn append_argument(source: &str, call: &ast::ExprCall, arg: &str) -> crate::Edit {
    use ruff_text_size::Ranged;
    let r = call.arguments.range();
    let (start, end) = (r.start().to_usize(), r.end().to_usize());
    let inner = &source[start + 1..end - 1];
    let trimmed = inner.trim_end();
    let at = start + 1 + trimmed.len();
    let content = if trimmed.trim_start().is_empty() {
        arg.to_string()
    } else if trimmed.ends_with(',') {
        format!(" {arg}")
    } else {
        format!(", {arg}")
    };
    crate::Edit {
        start: at,
        end: at,
        content,
    }
}

/// The values assigned to `name` by plain assignments in a function body (not in nested
/// functions or classes).
pub(crate) fn bound_values<'a>(body: &'a [Stmt], name: &str) -> Vec<&'a Expr> {
    struct Bindings<'a, 'n> {
        name: &'n str,
        values: Vec<&'a Expr>,
    }
    impl<'a> Visitor<'a> for Bindings<'a, '_> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            match s {
                Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
                Stmt::Assign(a) => {
                    if a.targets
                        .iter()
                        .any(|t| matches!(t, Expr::Name(n) if n.id.as_str() == self.name))
                    {
                        self.values.push(&a.value);
                    }
                }
                s => visitor::walk_stmt(self, s),
            }
        }
    }
    let mut b = Bindings {
        name,
        values: Vec::new(),
    };
    b.visit_body(body);
    b.values
}
