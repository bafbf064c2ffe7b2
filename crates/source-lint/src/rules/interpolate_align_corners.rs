//! ## What it does
//! Flags `F.interpolate(...)` and `nn.Upsample(...)` in a linear mode (`linear`, `bilinear`,
//! `bicubic`, `trilinear`) without an explicit `align_corners`, and the deprecated
//! `F.upsample(...)` likewise (ODL013 also reports it; fixing both gives
//! `F.interpolate(..., align_corners=False)`). The mode may be a literal or a
//! name bound to one, such as a parameter's default (`def resize(x, size, mode="bilinear")`);
//! `self.mode` read from a config class's field default or from an `__init__` parameter's
//! default (`def __init__(self, mode="bilinear"): self.mode = mode`) when some construction in
//! the file leaves it out or passes a linear one (the fix is then only suggested).
//! `F.interpolate` in functions beside a model that export does not reach (data augmentation,
//! evaluation) is left alone.
//!
//! ## Why is this bad?
//! `align_corners` decides the ONNX `Resize` attribute `coordinate_transformation_mode`
//! (`align_corners` or `half_pixel`/`pytorch_half_pixel`). Leaving it implicit relies on a
//! default that PyTorch warns about and that changed in 0.4.0; when the model is re-implemented
//! or compared against another framework (TensorRT plugins, OpenCV, TF) the unstated mode is the
//! usual source of off-by-half-pixel output differences after export.
//!
//! ## Example
//! ```python
//! y = F.interpolate(x, scale_factor=2, mode="bilinear")
//! ```
//!
//! ## Fix
//! State the default explicitly (safe fix: `align_corners=False` is what PyTorch uses when it
//! is omitted):
//! ```python
//! y = F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False)
//! ```

use crate::checker::{is_self, module_class, self_assignments, Checker};
use crate::registry::{FixKind, Rule};
use crate::rules::{append_argument, argument, string_literal};
use diagnostics::Severity;
use ruff_python_ast as ast;
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL014",
    name: "interpolate-align-corners",
    severity: Severity::Info,
    fix: FixKind::Safe,
    summary: "`F.interpolate`/`nn.Upsample` in a linear mode without explicit `align_corners`",
    source: include_str!("interpolate_align_corners.rs"),
};

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    let Some(q) = ch.torch_fn(call) else { return };
    let (mode_pos, corners_pos) = match q.as_str() {
        // `F.upsample` is `F.interpolate` under its deprecated name (ODL013 renames it), with
        // the same arguments and the same implicit default.
        "torch.nn.functional.interpolate" | "torch.nn.functional.upsample" => (3, 4),
        "torch.nn.Upsample" | "torch.nn.modules.upsampling.Upsample" => (2, 3),
        _ => return,
    };
    // Resizing in data or evaluation code does not reach the exported graph.
    if mode_pos == 3 && ch.in_side_code() {
        return;
    }
    // A literal, or a name bound to one (a parameter's default: `mode="bilinear"`).
    let mode_arg = argument(call, "mode", mode_pos);
    // A mode that is not written at the call may be another at run time (a config, a flag): it
    // is reported when its linear value is the default or one of the choices, and the fix is
    // then only suggested (`align_corners` with a non-linear mode raises).
    let mut certain = true;
    let Some(mode) = mode_arg.and_then(|m| match m {
        // `mode = "nearest" if self.fast else "bilinear"`: one choice is linear.
        ast::Expr::Name(n) => match ch.literal(n.id.as_str())? {
            ast::Expr::If(i) => {
                certain = false;
                [i.body.as_ref(), i.orelse.as_ref()]
                    .into_iter()
                    .filter_map(string_literal)
                    .find(|m| linear(m))
            }
            e => string_literal(e),
        },
        ast::Expr::Attribute(a) => {
            certain = false;
            config_mode(ch, a)
        }
        m => string_literal(m),
    }) else {
        return;
    };
    if !linear(mode) {
        return;
    }
    if argument(call, "align_corners", corners_pos).is_some() {
        return;
    }
    let mode = mode.to_string();
    let i = ch.report(
        &RULE,
        call.func.range(),
        format!("mode=\"{mode}\" without `align_corners`: the exported Resize coordinate mode is left implicit"),
    );
    ch.help(
        i,
        "pass `align_corners=False` (the default) or `True` explicitly",
    );
    // A mode read from a config default may be set otherwise at run time: then adding
    // `align_corners` to a non-linear mode would raise, so the fix is only suggested.
    let edit = append_argument(ch.source, call, "align_corners=False");
    ch.fix(i, "add `align_corners=False`", certain, vec![edit]);
}

fn linear(mode: &str) -> bool {
    matches!(mode, "linear" | "bilinear" | "bicubic" | "trilinear")
}

/// The mode an attribute holds by default: `cfg.upsample_mode` / `self.cfg.upsample_mode` from a
/// config class of the file declaring `upsample_mode: str = "bilinear"`, and `self.mode` from
/// what the class's methods assign it, once: a literal or such a config field (`self.mode =
/// cfg.upsample_mode`).
fn config_mode<'a>(ch: &Checker<'a>, a: &'a ast::ExprAttribute) -> Option<&'a str> {
    let module = ch.bodies[0];
    if !is_self(&a.value) {
        return config_field_default(module, a.attr.id.as_str());
    }
    let class = module_class(module, ch.classes.last()?)?;
    let values: Vec<&ast::Expr> = self_assignments(&class.body)
        .into_iter()
        .filter(|(attr, _)| *attr == a.attr.id.as_str())
        .map(|(_, v)| v)
        .collect();
    match values[..] {
        [ast::Expr::Attribute(v)] if !is_self(&v.value) => {
            config_field_default(module, v.attr.id.as_str())
        }
        // `def __init__(self, ..., mode: str = "bilinear"): self.mode = mode`.
        [ast::Expr::Name(p)] => init_parameter_default(module, class, p.id.as_str()),
        [v] => string_literal(v),
        _ => None,
    }
}

/// A linear mode a parameter of the class's `__init__` can hold: its string default, when some
/// construction of the class (or of a subclass, through `super().__init__` or
/// `functools.partial`) in the file leaves it out or none is seen, or a linear literal a
/// construction passes (`Up(8)` and `Up(8, mode="nearest")` both in the file: the default counts).
fn init_parameter_default<'a>(
    module: &'a [ast::Stmt],
    class: &'a ast::StmtClassDef,
    param: &'a str,
) -> Option<&'a str> {
    use ruff_python_ast::visitor::{self, Visitor};
    let init = class.body.iter().find_map(|s| match s {
        ast::Stmt::FunctionDef(f) if f.name.id.as_str() == "__init__" => Some(f),
        _ => None,
    })?;
    let (index, p) = init
        .parameters
        .iter_non_variadic_params()
        .enumerate()
        .find(|(_, p)| p.parameter.name.id.as_str() == param)?;
    let default = string_literal(p.default.as_deref()?)?;
    // `mode = "nearest" if ... else mode` before `self.mode = mode`: not the default any more.
    if crate::checker::name_bindings(&init.body).contains_key(param) {
        return None;
    }
    // Callers do not pass `self`.
    let position = index.checked_sub(1)?;
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
                    if let Some(m) = string_literal(v) {
                        self.passed.push(Some(m));
                    }
                }
            }
        }
    }
    impl<'v> Visitor<'v> for Passed<'v> {
        fn visit_stmt(&mut self, s: &'v ast::Stmt) {
            if let ast::Stmt::ClassDef(c) = s {
                self.inside.push(c.name.id.as_str());
                visitor::walk_stmt(self, s);
                self.inside.pop();
                return;
            }
            visitor::walk_stmt(self, s);
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
                    // `functools.partial(Up, mode="nearest")`.
                    ast::Expr::Name(_) | ast::Expr::Attribute(_)
                        if matches!(a.args.first(), Some(ast::Expr::Name(n))
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
        family,
        param,
        position,
        passed: Vec::new(),
        constructions: 0,
        inside: Vec::new(),
        own_init,
    };
    passed.visit_body(module);
    if (passed.constructions == 0 || passed.passed.contains(&None)) && linear(default) {
        return Some(default);
    }
    passed.passed.into_iter().flatten().find(|m| linear(m))
}

/// The string every config class of the module gives a field as its default (`upsample_mode:
/// str = "bilinear"` in a dataclass or a class named `*Config`/`*Cfg`), when they agree.
fn config_field_default<'a>(module: &'a [ast::Stmt], field: &str) -> Option<&'a str> {
    let mut found: Option<&str> = None;
    for s in module {
        let ast::Stmt::ClassDef(c) = s else { continue };
        let dataclass = c.decorator_list.iter().any(|d| {
            let e = match &d.expression {
                ast::Expr::Call(call) => call.func.as_ref(),
                e => e,
            };
            matches!(e, ast::Expr::Name(n) if n.id.as_str() == "dataclass")
                || matches!(e, ast::Expr::Attribute(a) if a.attr.id.as_str() == "dataclass")
        });
        let name = c.name.id.to_ascii_lowercase();
        if !(dataclass || name.ends_with("config") || name.ends_with("cfg")) {
            continue;
        }
        for s in &c.body {
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
