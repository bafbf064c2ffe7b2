//! ## What it does
//! Flags `F.interpolate(...)` and `nn.Upsample(...)` in a linear mode (`linear`, `bilinear`,
//! `bicubic`, `trilinear`) without an explicit `align_corners`, and the deprecated
//! `F.upsample(...)` likewise (ODL013 also reports it; fixing both gives
//! `F.interpolate(..., align_corners=False)`); also bound by `functools.partial(F.interpolate,
//! mode="bilinear")` or written in a lambda that model code calls (`self.up = lambda t:
//! F.interpolate(t, ...)`, which every rule reads as model code). The mode may be a literal or a
//! name bound to one, such as a parameter's default (`def resize(x, size, mode="bilinear")`, a
//! string the module binds once, `mode: str = DEFAULT_UP_MODE`, or a config field's: `mode: str =
//! DEFAULT_OPS.resize_mode`);
//! `self.mode` (also copied to a local first, `mode = self.mode`, not a parameter of that name)
//! read from a config class's field default or from an `__init__` parameter's
//! default (`def __init__(self, mode="bilinear"): self.mode = mode`) when some construction in
//! the file leaves it out or passes a linear one, literally or as such a config field
//! (`Decoder(64, cfg.upsample_mode)`) or an argparse option's default (`UNet(up_mode=args.up_mode)`
//! with `add_argument("--up-mode", default="bilinear")`), or such a parameter put in a dict the
//! class keeps (`self.cfg = {"resample": resample}`, then `mode=self.cfg["resample"]`); the fix
//! is then only suggested. A
//! config dict spliced in (`F.interpolate(x, scale_factor=2, **self.upsample_cfg)` with
//! `self.upsample_cfg = dict(mode="bilinear")`, MMCV's idiom) is read too, with no fix (the
//! dict is where `align_corners` goes).
//! `F.interpolate` in functions beside a model that export does not reach (data augmentation,
//! evaluation) is left alone, and so is one a constructor runs (a dataset's `__init__` resizing
//! its images once).
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
use crate::rules::{
    append_argument, argument, bound_values, config_field_default, dict_value,
    init_parameter_strings, keyword, string_literal,
};
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
    // `partial(F.interpolate, scale_factor=2, mode="bilinear")`: the arguments it binds, each
    // positional one a place further on.
    let (q, shift) = match ch.torch_fn(call) {
        Some(q) => (q, 0),
        None => match crate::rules::partial_of_torch(ch, call) {
            Some(q) => (q, 1),
            None => return,
        },
    };
    let (mode_pos, corners_pos) = match q.as_str() {
        // `F.upsample` is `F.interpolate` under its deprecated name (ODL013 renames it), with
        // the same arguments and the same implicit default.
        "torch.nn.functional.interpolate" | "torch.nn.functional.upsample" => {
            (3 + shift, 4 + shift)
        }
        "torch.nn.Upsample" | "torch.nn.modules.upsampling.Upsample" => (2 + shift, 3 + shift),
        _ => return,
    };
    // Resizing in data or evaluation code does not reach the exported graph, nor does a resize
    // a constructor runs (a dataset's `__init__` resizing its images; not a partial it binds for
    // `forward`).
    let in_constructor = ch
        .fns
        .last()
        .is_some_and(|f| f.name == "__init__" && !f.in_model);
    if mode_pos == 3 + shift && (ch.in_side_code() || (in_constructor && shift == 0)) {
        return;
    }
    // A literal, or a name bound to one (a parameter's default: `mode="bilinear"`).
    let mode_arg = argument(call, "mode", mode_pos);
    // MMCV's `F.interpolate(x, scale_factor=2, **self.upsample_cfg)` with `self.upsample_cfg =
    // dict(mode="bilinear")` (or a choice of such dicts): the mode and corners it holds.
    if mode_arg.is_none() && argument(call, "align_corners", corners_pos).is_none() {
        if let Some(mode) = spliced_config_mode(ch, call) {
            report(
                ch,
                call,
                mode,
                "add `align_corners=False` (the default) or `True` to the config dict",
            );
            return;
        }
    }
    // A mode that is not written at the call may be another at run time (a config, a flag): it
    // is reported when its linear value is the default or one of the choices, and the fix is
    // then only suggested (`align_corners` with a non-linear mode raises).
    let mut certain = true;
    let Some(mode) = mode_arg.and_then(|m| match m {
        // `mode = "nearest" if self.fast else "bilinear"`: one choice is linear.
        // `def resize_like(x, ref, mode: str = DEFAULT_OPS.resize_mode)`: a parameter whose
        // default is a config field.
        ast::Expr::Name(n) if ch.literal(n.id.as_str()).is_none() => {
            let def = ch.defs.last()?;
            // `mode = self.mode` then `mode=mode`: the attribute it was bound to, once (not a
            // parameter the caller may pass: `def resize(self, x, mode=None)`).
            let parameter = def.parameters.iter().any(|p| p.name().id == n.id);
            if let (false, [ast::Expr::Attribute(a)]) =
                (parameter, &bound_values(&def.body, n.id.as_str())[..])
            {
                certain = false;
                return config_mode(ch, a);
            }
            let default = def.parameters.iter().find_map(|p| {
                (p.name().id.as_str() == n.id.as_str())
                    .then(|| p.default())
                    .flatten()
            })?;
            certain = false;
            let ast::Expr::Attribute(a) = default else {
                return None;
            };
            // `DEFAULT_OPS = OpsConfig(resize_mode="nearest")`: what the instance was built
            // with, when the module builds it (unknown with positional arguments).
            let built = match a.value.as_ref() {
                ast::Expr::Name(inst) => bound_values(ch.bodies[0], inst.id.as_str())
                    .into_iter()
                    .find_map(|v| v.as_call_expr()),
                _ => None,
            };
            match built {
                Some(c) if !c.arguments.args.is_empty() => None,
                Some(c) if c.arguments.keywords.iter().any(|k| k.arg.is_none()) => None,
                Some(c) => match keyword(c, a.attr.id.as_str()) {
                    Some(k) => string_literal(&k.value),
                    None => config_mode(ch, a),
                },
                None => config_mode(ch, a),
            }
        }
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
        // `mode=self.cfg["resize_mode"]` with `self.cfg = {**DEFAULT_CFG, **(cfg or {})}`,
        // `mode=CFG["up_mode"]`: the key's value in the dict the module spells out.
        ast::Expr::Subscript(s) => {
            certain = false;
            let key = string_literal(&s.slice)?;
            dict_value(ch, &s.value, key, 0).or_else(|| self_dict_parameter(ch, &s.value, key))
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
    // A partial's calls may pass the mode or `align_corners` themselves (`resize(mask,
    // mode="nearest")`): then it is left alone, and the fix is never safe.
    if shift == 1 {
        certain = false;
        if partial_calls_override(ch, call) {
            return;
        }
    }
    let mode = mode.to_string();
    let i = report(
        ch,
        call,
        &mode,
        "pass `align_corners=False` (the default) or `True` explicitly",
    );
    // A mode read from a config default may be set otherwise at run time: then adding
    // `align_corners` to a non-linear mode would raise, so the fix is only suggested.
    // So is one after `**kw`, which may hold `align_corners` already.
    let edit = append_argument(ch.source, call, "align_corners=False");
    let safe = certain && !crate::rules::splices_arguments(call);
    ch.fix(i, "add `align_corners=False`", safe, vec![edit]);
}

/// Whether a call of what the partial `call` is bound to (`resize = partial(...)` or
/// `self.up = partial(...)`), anywhere in the file, passes `mode` or `align_corners`.
fn partial_calls_override(ch: &Checker, call: &ast::ExprCall) -> bool {
    use ruff_python_ast::visitor::{self, Visitor};
    let mut stmts = Vec::new();
    crate::checker::flatten(
        ch.bodies.last().copied().unwrap_or(ch.bodies[0]),
        &mut stmts,
    );
    let target = stmts.iter().find_map(|s| match s {
        ast::Stmt::Assign(a) if a.value.range() == call.range() && a.targets.len() == 1 => {
            Some(ch.text(a.targets[0].range()))
        }
        _ => None,
    });
    let Some(target) = target else { return false };
    struct Find<'t> {
        ch: &'t Checker<'t>,
        target: &'t str,
        found: bool,
    }
    impl<'a> Visitor<'a> for Find<'_> {
        fn visit_expr(&mut self, e: &'a ast::Expr) {
            if let ast::Expr::Call(c) = e {
                if self.ch.text(c.func.range()) == self.target
                    && c.arguments.keywords.iter().any(|k| {
                        k.arg
                            .as_ref()
                            .is_none_or(|a| matches!(a.id.as_str(), "mode" | "align_corners"))
                    })
                {
                    self.found = true;
                }
            }
            if !self.found {
                visitor::walk_expr(self, e);
            }
        }
    }
    let mut f = Find {
        ch,
        target,
        found: false,
    };
    f.visit_body(ch.bodies[0]);
    f.found
}

/// Reports a linear `mode` used without `align_corners`, with `help`.
fn report(ch: &mut Checker, call: &ast::ExprCall, mode: &str, help: &str) -> usize {
    let i = ch.report(
        &RULE,
        call.func.range(),
        format!("mode=\"{mode}\" without `align_corners`: the exported Resize coordinate mode is left implicit"),
    );
    ch.help(i, help);
    i
}

fn linear(mode: &str) -> bool {
    matches!(mode, "linear" | "bilinear" | "bicubic" | "trilinear")
}

/// `mode=self.cfg["resample"]` with `self.cfg = {"resample": resample, ...}` the class's only
/// store of it and `resample` a parameter of its `__init__` (`resample: str = "bilinear"`): a
/// linear mode the parameter can hold ([`init_parameter_strings`]).
fn self_dict_parameter<'a>(ch: &Checker<'a>, e: &'a ast::Expr, key: &str) -> Option<&'a str> {
    let attr = crate::checker::self_attr(e)?;
    let module = ch.bodies[0];
    let class = module_class(module, ch.classes.last()?)?;
    let values: Vec<&ast::Expr> = self_assignments(&class.body)
        .into_iter()
        .filter(|(a, _)| *a == attr)
        .map(|(_, v)| v)
        .collect();
    let [ast::Expr::Dict(d)] = values[..] else {
        return None;
    };
    // `self.cfg["resample"] = "nearest"` or `self.cfg.update(...)` anywhere in the class.
    let changed = class.body.iter().any(|st| {
        crate::rules::any_sub_stmt_expr(st, |e| match e {
            ast::Expr::Subscript(x) => {
                !matches!(x.ctx, ast::ExprContext::Load)
                    && crate::checker::self_attr(&x.value) == Some(attr)
            }
            ast::Expr::Call(c) => matches!(c.func.as_ref(), ast::Expr::Attribute(m)
                if crate::checker::self_attr(&m.value) == Some(attr)
                    && matches!(m.attr.id.as_str(), "update" | "setdefault" | "__setitem__")),
            _ => false,
        })
    });
    if changed {
        return None;
    }
    let value = d.items.iter().rev().find_map(|i| {
        i.key
            .as_ref()
            .is_some_and(|k| string_literal(k) == Some(key))
            .then_some(&i.value)
    })?;
    let ast::Expr::Name(p) = value else {
        return None;
    };
    init_parameter_strings(module, class, p.id.as_str())
        .into_iter()
        .find(|m| linear(m))
}

/// The mode an attribute holds by default: `cfg.upsample_mode` / `self.cfg.upsample_mode` from a
/// config class of the file declaring `upsample_mode: str = "bilinear"`, and `self.mode` from
/// what the class's methods assign it, once: a literal or such a config field (`self.mode =
/// cfg.upsample_mode`).
fn config_mode<'a>(ch: &Checker<'a>, a: &'a ast::ExprAttribute) -> Option<&'a str> {
    let module = ch.bodies[0];
    let field = || config_field_default(module, a.attr.id.as_str());
    let own = || module_class(module, ch.classes.last()?);
    let class = if is_self(&a.value) {
        own()?
    } else {
        // `self.fpn.up_mode` with `self.fpn = TinyFPN(c, up_mode)`: the submodule's class.
        let ast::Expr::Attribute(s) = a.value.as_ref() else {
            return field();
        };
        if !is_self(&s.value) {
            return field();
        }
        let built = own().and_then(|own| {
            self_assignments(&own.body)
                .into_iter()
                .find_map(|(attr, v)| match v {
                    ast::Expr::Call(c) if attr == s.attr.id.as_str() => match c.func.as_ref() {
                        ast::Expr::Name(n) => module_class(module, n.id.as_str()),
                        _ => None,
                    },
                    _ => None,
                })
        });
        match built {
            Some(c) => c,
            None => return field(),
        }
    };
    // The class's own assignments, else those of its base classes of the file, in the order
    // Python looks them up (left to right, depth first): `self.mode = mode` in
    // `DecoderStage.__init__`, read in a subclass.
    let assigned = |c: &'a ast::StmtClassDef| -> Vec<&'a ast::Expr> {
        self_assignments(&c.body)
            .into_iter()
            .filter(|(attr, _)| *attr == a.attr.id.as_str())
            .map(|(_, v)| v)
            .collect()
    };
    let order = method_resolution_order(module, class);
    // A value set in the class body (`up_mode = "nearest"`, a dataclass field's default) of the
    // nearest class that has one; a property or method of that name is no string we can read.
    let in_body = |c: &'a ast::StmtClassDef| -> Option<Option<&'a str>> {
        c.body.iter().find_map(|s| match s {
            ast::Stmt::AnnAssign(x) => match (x.target.as_ref(), x.value.as_deref()) {
                (ast::Expr::Name(n), v) if n.id.as_str() == a.attr.id.as_str() => {
                    Some(v.and_then(string_literal))
                }
                _ => None,
            },
            ast::Stmt::Assign(x) => match &x.targets[..] {
                [ast::Expr::Name(n)] if n.id.as_str() == a.attr.id.as_str() => {
                    Some(string_literal(&x.value))
                }
                _ => None,
            },
            ast::Stmt::FunctionDef(f) if f.name.id.as_str() == a.attr.id.as_str() => Some(None),
            _ => None,
        })
    };
    let Some((class, values)) = order
        .iter()
        .map(|c| (*c, assigned(c)))
        .find(|(_, v)| !v.is_empty())
    else {
        // `self.cfg.upsample_mode` with `self.cfg = HeadCfg()`: the field's default in the class.
        return order.into_iter().find_map(in_body).flatten();
    };
    match values[..] {
        [ast::Expr::Attribute(v)] if !is_self(&v.value) => {
            config_field_default(module, v.attr.id.as_str())
        }
        // `def __init__(self, ..., mode: str = "bilinear"): self.mode = mode`.
        [ast::Expr::Name(p)] => init_parameter_strings(module, class, p.id.as_str())
            .into_iter()
            .find(|m| linear(m)),
        // `self.mode = interp_modes["smooth"]` with `interp_modes` a dict the module spells out,
        // or `self.up_mode = cfg["up_mode"]` with `def __init__(self, cfg=CFG)`.
        [ast::Expr::Subscript(s)] => {
            let key = string_literal(&s.slice)?;
            let default = match s.value.as_ref() {
                ast::Expr::Name(p) => class.body.iter().find_map(|x| match x {
                    ast::Stmt::FunctionDef(f) if f.name.id.as_str() == "__init__" => f
                        .parameters
                        .iter()
                        .find(|q| q.name().id == p.id)
                        .map(|q| q.default()),
                    _ => None,
                }),
                _ => None,
            };
            match default {
                Some(Some(d)) => dict_value(ch, d, key, 0),
                Some(None) => None,
                None => dict_value(ch, &s.value, key, 0),
            }
        }
        [v] => string_literal(v),
        _ => None,
    }
}

/// A class of the module and its base classes of the module in Python's method resolution
/// order (C3: `class D(L, R)` with `L(B)`, `R(B)` is D, L, R, B), bases the module does not
/// define left out; the class alone when the bases admit no order.
fn method_resolution_order<'a>(
    module: &'a [ast::Stmt],
    class: &'a ast::StmtClassDef,
) -> Vec<&'a ast::StmtClassDef> {
    fn linearize<'a>(
        module: &'a [ast::Stmt],
        class: &'a ast::StmtClassDef,
        depth: usize,
    ) -> Option<Vec<&'a ast::StmtClassDef>> {
        if depth > 16 {
            return None;
        }
        let bases: Vec<&ast::StmtClassDef> = class
            .bases()
            .iter()
            .filter_map(|b| match b {
                ast::Expr::Name(n) => module_class(module, n.id.as_str()),
                _ => None,
            })
            .filter(|b| !std::ptr::eq(*b, class))
            .collect();
        let mut seqs: Vec<Vec<&ast::StmtClassDef>> = Vec::new();
        for b in &bases {
            seqs.push(linearize(module, b, depth + 1)?);
        }
        seqs.push(bases);
        let mut out = vec![class];
        loop {
            seqs.retain(|s| !s.is_empty());
            if seqs.is_empty() {
                return Some(out);
            }
            // The first head that is in no other sequence's tail.
            let head = seqs.iter().map(|s| s[0]).find(|h| {
                !seqs
                    .iter()
                    .any(|s| s[1..].iter().any(|t| std::ptr::eq(*t, *h)))
            })?;
            out.push(head);
            for s in seqs.iter_mut() {
                if std::ptr::eq(s[0], head) {
                    s.remove(0);
                }
            }
        }
    }
    linearize(module, class, 0).unwrap_or_else(|| vec![class])
}

/// The linear mode a `**self.<attr>` spliced into the call sets, when the module's methods
/// assign `<attr>` only dicts (`dict(mode="bilinear")`, `{"mode": "bilinear"}`, or a choice of
/// them: `dict(mode="bilinear") if cfg is None else dict(cfg)`) and one such dict has a linear
/// mode and no `align_corners`.
fn spliced_config_mode<'a>(ch: &Checker<'a>, call: &ast::ExprCall) -> Option<&'a str> {
    let attr = call
        .arguments
        .keywords
        .iter()
        .find_map(|k| match (&k.arg, &k.value) {
            (None, ast::Expr::Attribute(a)) if is_self(&a.value) => Some(a.attr.id.as_str()),
            _ => None,
        })?;
    let module = ch.bodies[0];
    let class = module_class(module, ch.classes.last()?)?;
    fn dict_mode(e: &ast::Expr) -> Option<Option<&str>> {
        match e {
            // `dict(base, ...)`, `dict(mode=..., **cfg)`: what is spliced may hold the corners.
            ast::Expr::Call(c)
                if matches!(c.func.as_ref(), ast::Expr::Name(n) if n.id.as_str() == "dict")
                    && (!c.arguments.args.is_empty()
                        || c.arguments.keywords.iter().any(|k| k.arg.is_none())) =>
            {
                Some(None)
            }
            ast::Expr::Dict(d) if d.items.iter().any(|i| i.key.is_none()) => Some(None),
            ast::Expr::Call(c) if matches!(c.func.as_ref(), ast::Expr::Name(n) if n.id.as_str() == "dict") =>
            {
                let get = |k: &str| {
                    c.arguments
                        .keywords
                        .iter()
                        .find(|kw| kw.arg.as_ref().is_some_and(|a| a.id.as_str() == k))
                };
                if get("align_corners").is_some() {
                    return Some(None);
                }
                Some(get("mode").and_then(|k| string_literal(&k.value)))
            }
            ast::Expr::Dict(d) => {
                let get = |k: &str| {
                    d.items
                        .iter()
                        .find(|i| i.key.as_ref().and_then(string_literal) == Some(k))
                };
                if get("align_corners").is_some() {
                    return Some(None);
                }
                Some(get("mode").and_then(|i| string_literal(&i.value)))
            }
            _ => None,
        }
    }
    // `self.up.update(align_corners=False)`, `self.up["align_corners"] = False`: changed after
    // it is built, so not known from its assignments.
    let source = &ch.source[class.range()];
    let spelled = format!("self.{attr}");
    if [".update(", ".setdefault(", "["]
        .iter()
        .any(|m| source.contains(&format!("{spelled}{m}")))
    {
        return None;
    }
    let mut found = None;
    for (a, value) in self_assignments(&class.body) {
        if a != attr {
            continue;
        }
        // `self.up = dict(self.up, align_corners=False)` replaces what came before.
        let built_from_own = |e: &ast::Expr| match e {
            ast::Expr::Call(c) => crate::rules::dict_call_copies(c)
                .any(|x| matches!(x, ast::Expr::Attribute(x) if is_self(&x.value))),
            ast::Expr::Dict(d) => d.items.iter().any(|i| {
                i.key.is_none() && matches!(&i.value, ast::Expr::Attribute(x) if is_self(&x.value))
            }),
            _ => false,
        };
        if built_from_own(value) {
            return None;
        }
        let choices: Vec<&ast::Expr> = match value {
            ast::Expr::If(i) => vec![i.body.as_ref(), i.orelse.as_ref()],
            v => vec![v],
        };
        for c in choices {
            // Anything but a dict (a config handed in) may hold `align_corners`: only dicts
            // written here are read.
            if let Some(Some(mode)) = dict_mode(c) {
                if linear(mode) {
                    found = Some(mode);
                }
            }
        }
    }
    found
}
