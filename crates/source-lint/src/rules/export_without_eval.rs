//! ## What it does
//! Flags `torch.onnx.export(model, ...)` where `model` is a local built in the same scope (or a
//! loop variable over models) and nothing before the call puts it in eval mode (`model.eval()`,
//! `model.train(False)`, `model = Net().eval()`), unless the call asks for the TorchScript exporter
//! (`dynamo=False`), which switches to eval mode itself. A module built anew under the name after
//! its `eval()` (`net = train(); evaluate(net)`, then `net = Net()`) is a new module, in training
//! mode (not `model = model.cuda()`, nor `model = ema`: the same one or a copy). A `model.train()`
//! after the `eval()` (to re-estimate batch norm statistics, say; also `train(mode=True)`, or
//! `m.train()` in `for m in (model, ema):`) puts it back in training mode, and so does a helper of
//! the file that calls `model.eval()` and then `model.train()` before returning (an accuracy
//! function); an `eval()` in another clause of the `if` that holds the export does not count, and
//! after an `if` before the export the module is in eval mode only when every clause that reaches
//! the export leaves it so (`if cmd == "export": model.eval()` alone does not: another command
//! exports it in training mode; nor does `net = base` in one clause and `net = NetV3()` in the
//! other). A clause that returns, raises, exits (also `assert False`, a parser's `error()` or
//! `exit()`, a function of the file that always raises) or, in the loop that holds the export,
//! continues or breaks does not reach it (a helper that returns before its final `raise` does); a
//! `match` without a catch-all arm is an `if` without `else`. After a false test of the module's
//! own flag (`if model.training: model.eval()`, `was_training = model.training; if was_training:
//! model.eval()`, also `not`, `or`, `is True`, an `elif` chain), the clauses that follow, written
//! or missing, are in eval mode already (not when the flag was read before a later
//! `model.train()`); after a test of its being a module (`if isinstance(model, nn.Module):`, `if
//! model is not None:`) the missing `else` never exports it. After a loop that does not hold the
//! export, the module is in the mode of the loop's ways out, read over two rounds
//! (`validate(model)` before `while True: if step >= n: break; model.train()` exports in training
//! mode): its `break`s (also at the end of a `try:` or `with` body, or in an `except
//! StopIteration:`), a `continue` that may come in the last round (not `if epoch < start_epoch:
//! continue`), the body's end unless it is a `while True:`, and the loop's `else:` after the ways
//! out that are not `break`s; `for phase in ["train", "val"]:` is read one round per value with its
//! tests of `phase` decided, `model.train(phase == "train")` included. An evaluation helper called
//! in an `if` test runs before the clauses (`if validate(model) < best: break`), not behind `and`.
//! A parameter replaced in one clause (`if model is None: model = Net().eval()`) is left to the
//! callers on the other path, and one moved or cast (`if device: model = model.to(device)`) stays
//! theirs on every path. Another name for a module in eval mode is in eval mode, also moved or cast
//! (`cpu = model.to("cpu")`) or unwrapped (`net = model.module if hasattr(model, "module") else
//! model`, `getattr(model, "module", model)`), and so is a part of it (`model.module.fc`,
//! `model.blocks[1]`). The exporter may be imported under another name (`from torch.onnx import
//! export as onnx_export`) or called through a `functools.partial` of it, and Lightning's
//! `model.to_onnx(path, sample)` is an export too (it does not switch modes). A module built by a
//! constructor inside the call (`torch.onnx.export(Wrapper(Net()), ...)`) without `.eval()` on it
//! is flagged too, also when handed through a function of the same file that never calls `.eval()`
//! (`torch.onnx.export(_load(Net(), ckpt), ...)`), and so is a submodule of a local (`reg.matcher`)
//! when neither the local nor the submodule was put in eval mode. When the exported module is a
//! parameter of a function of the file (`def _export(module, path): torch.onnx.export(module,
//! ...)`), the callers in the file decide: it is flagged when one of them passes a local it never
//! put in eval mode (also moved or cast on the way, `export_model(net.cpu())`, which returns the
//! module in the mode it was in) or the result of a function of the file that returns a module it
//! built and never put in eval mode (`export_serve(train_serve())`), and left alone when no caller
//! is seen (unless the function prepares the module for export itself, `model = model.cpu()`, and
//! leaves out `.eval()`); a module built in the call (`export_quick(Net().to(dev))`) counts as one
//! never put in eval mode. A function of the file that trains the module it is handed and does not
//! evaluate it afterwards (`model = fine_tune(model, data)`) puts it back in training mode. A
//! module-level module (`model = Net()` at the top of a notebook turned module, moved or cast there
//! too: `model = model.to(device)`, also in an `if` clause, or built by a function that declares
//! it `global`) exported from a function is judged where that function is called (a device read
//! from its parameters, `next(model.parameters()).device`, does not hold the module): flagged when
//! a caller reaches the call with it in training mode, following the calls before it into the
//! file's functions and classes; with
//! no caller in the file, flagged only when nothing anywhere may put it in eval mode and no other
//! file imports its module. A loader imported from another linted file that ends in `model.eval()`
//! (`det = load_detector(path)`) counts as putting the model in eval mode, as one of the same file
//! does. A module a class keeps (`torch.onnx.export(self.model, ...)` in a trainer's or service's
//! method) is judged by the mode the method's statements before the export leave it in, in order,
//! following the class's own methods it calls: flagged after a `train()` (`self.model.train()`,
//! `self.train()`, or a method that ends in it, such as a validation step that restores training
//! mode). When the method sets no mode, the callers in the class decide: one that calls it after
//! `train()` (a `fit` that exports at its end) is flagged; with no caller in the class, another
//! method that trains the module makes the mode depend on what ran before, which is flagged too;
//! with neither, a call of it on a new instance (`svc = AirflowService(cfg)`, also annotated, then
//! `svc.export_onnx(path)` with only methods called between that switch no module's mode in any
//! way, nothing taken from them used further; or `AirflowService(cfg).export_onnx(path)`) exports
//! the module `__init__` built with a constructor (`self.model = AirflowEstimator(cfg)`, stored
//! nowhere else), in training mode. An
//! `eval()` before the export (also `self.model.cpu().eval()`, `train(False)`, `train(mode=False)`)
//! clears it, in loops, `try` handlers and `else` blocks too; the clauses of an `if` count when
//! they agree. What cannot be followed leaves it alone: an inherited method named for a mode
//! change, a function of the file that switches modes handed the module, a new module stored under
//! the name, a context manager of the class, a mode set in one clause only, an exporting method
//! handed out as a value (a hook), a framework's hook (`on_validation_end`).
//!
//! ## Why is this bad?
//! A module in training mode exports dropout as active and batch norm with batch statistics
//! (and takes every `if self.training:` branch). Since PyTorch 2.9 `torch.onnx.export` defaults to
//! `dynamo=True`, whose exporter does not change the module's mode: it only warns "Calling
//! model.eval() before export is recommended" (`torch/onnx/_internal/exporter/_compat.py`). The
//! `training=` argument that made the TorchScript exporter switch modes is deprecated.
//!
//! ## Example
//! ```python
//! model = Net()
//! model.load_state_dict(torch.load("w.pt"))
//! torch.onnx.export(model, (x,), "net.onnx")
//! ```
//!
//! ## Fix
//! Put the model in eval mode first:
//! ```python
//! model = Net()
//! model.load_state_dict(torch.load("w.pt"))
//! model.eval()
//! torch.onnx.export(model, (x,), "net.onnx")
//! ```

use crate::checker::{called_names_expr, own_exprs, Checker};
use crate::registry::{FixKind, Rule};
use crate::rules::{keyword, mentions};
use diagnostics::Severity;
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::{Ranged, TextSize};

pub(crate) const RULE: Rule = Rule {
    code: "ODL017",
    name: "export-without-eval",
    severity: Severity::Warning,
    fix: FixKind::None,
    summary: "`torch.onnx.export` of a module never put in eval mode",
    source: include_str!("export_without_eval.rs"),
};

/// An export: `torch.onnx.export(...)` under any name it is imported as, a call through a
/// `functools.partial` of it (`export = partial(torch.onnx.export, opset_version=17)`, then
/// `export(model, args, path)`), or a module's own `to_onnx(path, sample, **kwargs)` method
/// (PyTorch Lightning's `LightningModule.to_onnx`, which hands its keyword arguments to
/// `torch.onnx.export` and does not put the module in eval mode: lightning 2.5,
/// `lightning/pytorch/core/module.py`).
pub(crate) fn is_export(ch: &Checker, call: &ast::ExprCall) -> bool {
    ch.torch_fn(call).is_some_and(|q| {
        matches!(
            q.as_str(),
            "torch.onnx.export" | "torch.onnx.utils.export" | "torch.onnx.dynamo_export"
        )
    }) || crate::rules::bound_partial(ch, call).is_some()
        || is_to_onnx(ch, call)
}

/// `model.to_onnx(path, sample, ...)`: a method of a value, not a function of an imported
/// package (`skl2onnx.to_onnx(...)` converts a scikit-learn model). Not skl2onnx's algebra
/// (`OnnxMul(...).to_onnx({"X": x})`: a dict of inputs first, in a file importing skl2onnx),
/// nor a class of this file with its own `to_onnx` (which is what runs).
fn is_to_onnx(ch: &Checker, call: &ast::ExprCall) -> bool {
    if !matches!(call.func.as_ref(), Expr::Attribute(a) if a.attr.id.as_str() == "to_onnx")
        || !matches!(ch.method(call), Some(("to_onnx", _)))
    {
        return false;
    }
    let path = call
        .arguments
        .args
        .first()
        .or_else(|| keyword(call, "file_path").map(|k| &k.value));
    if matches!(
        path,
        None | Some(Expr::Dict(_) | Expr::List(_) | Expr::Tuple(_))
    ) {
        return false;
    }
    let converters = ch.imports.values().any(|q| {
        q.starts_with("skl2onnx") || q.starts_with("onnxmltools") || q.starts_with("onnxconverter")
    });
    // `exporter = OnnxExporter(net)` with `class OnnxExporter` of this file defining `to_onnx`.
    let own_class = |name: &str| {
        ch.bodies[0].iter().any(|s| {
            matches!(s, Stmt::ClassDef(c) if c.name.id.as_str() == name
                && c.body.iter().any(|m|
                    matches!(m, Stmt::FunctionDef(f) if f.name.id.as_str() == "to_onnx")))
        })
    };
    let own = match call.func.as_ref() {
        Expr::Attribute(a) => match a.value.as_ref() {
            Expr::Name(n) => ch.bodies.last().is_some_and(|body| {
                crate::rules::bound_values(body, n.id.as_str())
                    .iter()
                    .any(|v| {
                        matches!(v, Expr::Call(c)
                        if matches!(c.func.as_ref(), Expr::Name(f) if own_class(f.id.as_str())))
                    })
            }),
            Expr::Call(c) => matches!(c.func.as_ref(), Expr::Name(f) if own_class(f.id.as_str())),
            _ => false,
        },
        _ => false,
    };
    !converters && !own
}

/// Which receivers of `.eval()` / `.train(False)` count.
#[derive(Clone, Copy)]
enum Receiver<'n> {
    /// `<name>.eval()`.
    Name(&'n str),
    /// `<name>.eval()` or `.eval()` on a call (`Net().eval()`).
    NameOrCall(&'n str),
    /// `<name>.<attr>.eval()`: a submodule of a local (`reg.matcher.eval()`).
    Attribute(&'n str, &'n str),
    /// Any (`m.eval()` inside a helper the model is handed to).
    Any,
}

struct EvalFind<'n> {
    receiver: Receiver<'n>,
    found: bool,
}

impl<'a> Visitor<'a> for EvalFind<'_> {
    fn visit_expr(&mut self, e: &'a Expr) {
        if let Expr::Call(c) = e {
            if let Expr::Attribute(a) = c.func.as_ref() {
                // Lightning's `model.freeze()` calls `self.eval()` (lightning 2.5,
                // `lightning/pytorch/core/module.py`).
                let eval =
                    matches!(a.attr.id.as_str(), "eval" | "freeze") && c.arguments.args.is_empty();
                let train_false = a.attr.id.as_str() == "train" && trains_false(c);
                let on_name =
                    |name: &str| matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == name);
                let receiver = match self.receiver {
                    Receiver::Name(name) => on_name(name),
                    Receiver::NameOrCall(name) => {
                        on_name(name) || matches!(a.value.as_ref(), Expr::Call(_))
                    }
                    Receiver::Attribute(name, attr) => matches!(a.value.as_ref(),
                        Expr::Attribute(inner) if inner.attr.id.as_str() == attr
                            && matches!(inner.value.as_ref(), Expr::Name(n) if n.id.as_str() == name)),
                    Receiver::Any => true,
                };
                if (eval || train_false) && receiver {
                    self.found = true;
                }
            }
        }
        visitor::walk_expr(self, e);
    }
}

/// Whether `e` switches a receiver to eval mode (`.eval()` or `.train(False)`).
fn has_eval(e: &Expr, receiver: Receiver) -> bool {
    let mut f = EvalFind {
        receiver,
        found: false,
    };
    f.visit_expr(e);
    f.found
}

/// The module an export call exports: its first argument, or `model=`.
pub(crate) fn exported_module<'e>(ch: &'e Checker, call: &'e ast::ExprCall) -> Option<&'e Expr> {
    // `model.to_onnx(path, sample)` exports its receiver.
    if let Expr::Attribute(a) = call.func.as_ref() {
        if a.attr.id.as_str() == "to_onnx" {
            return Some(&a.value);
        }
    }
    // `export = partial(torch.onnx.export, net, ...)` then `export(sample, path)`: the model
    // the partial binds.
    if let Some(p) = crate::rules::bound_partial(ch, call) {
        if let Some(m) = p
            .arguments
            .args
            .get(1)
            .or_else(|| keyword(p, "model").map(|k| &k.value))
        {
            return Some(m);
        }
    }
    call.arguments
        .args
        .first()
        .or_else(|| keyword(call, "model").map(|k| &k.value))
}

/// The module a chain of moves and casts starts from: `net` in `net.cpu()`,
/// `model.encoder.to(device).float()`; `None` for anything else (a chain with `.eval()` too).
fn moved(e: &Expr) -> Option<&Expr> {
    let start = unmoved(e);
    (!std::ptr::eq(start, e) && matches!(start, Expr::Name(_) | Expr::Attribute(_)))
        .then_some(start)
}

/// A module's methods that move or cast it and return it, in the mode it was in.
fn moves(method: &str) -> bool {
    matches!(
        method,
        "cpu" | "cuda" | "to" | "float" | "half" | "double" | "bfloat16" | "requires_grad_"
    )
}

/// What a value is before the moves and casts that end it: `Net()` in `Net().to(device)`,
/// `net` in `net.cpu().float()`, the value itself when it ends in none.
fn unmoved(e: &Expr) -> &Expr {
    let mut e = e;
    while let Expr::Call(c) = e {
        match c.func.as_ref() {
            Expr::Attribute(a) if moves(a.attr.id.as_str()) => e = a.value.as_ref(),
            _ => break,
        }
    }
    e
}

/// What binding `name = value` makes of a module-level module: built in training mode
/// (`Net()`, `Net().to(device)`), kept in the mode it had (`model = model.to(device)`), put in
/// eval mode (`model = model.to(device).eval()`, `Net().eval()`); `None` for anything else (a
/// wrapper built around the module: `model = Wrapper(model)`).
fn rebinding(value: &Expr, name: &str) -> Option<Effect> {
    if chain_evals(value)
        && (chain_root(value) == Some(name)
            || matches!(chain_start(value), Expr::Call(c) if is_constructor(c)))
    {
        return Some(Effect::Eval);
    }
    match unmoved(value) {
        // `net = None` at the top, built later by a function that declares it `global`.
        Expr::NoneLiteral(_) => Some(Effect::Unknown),
        // `model = WithSoftmax(model).to(dev)`: a wrapper around the module, in the mode the
        // module had (its own flag changes nothing without layers of its own): not followed.
        Expr::Call(c) if is_constructor(c) && mentions(value, &[name.to_string()]) => None,
        Expr::Call(c) if is_constructor(c) => Some(Effect::Train),
        Expr::Name(n) if n.id.as_str() == name && !std::ptr::eq(unmoved(value), value) => {
            Some(Effect::Same)
        }
        _ => None,
    }
}

/// Whether a `.train(...)` call's argument is `False`: `train(False)`, `train(mode=False)`.
fn trains_false(c: &ast::ExprCall) -> bool {
    let is_false = |e: &Expr| matches!(e, Expr::BooleanLiteral(b) if !b.value);
    c.arguments.args.first().is_some_and(is_false)
        || c.arguments
            .keywords
            .iter()
            .any(|k| k.arg.as_ref().is_some_and(|a| a.as_str() == "mode") && is_false(&k.value))
}

/// Whether a chain of method calls ends in eval mode whatever it starts from:
/// `encoder = model.encoder.eval()`, `net = nets["student"].eval().to(device)`.
fn chain_evals(e: &Expr) -> bool {
    let mut e = e;
    while let Expr::Call(c) = e {
        let Expr::Attribute(a) = c.func.as_ref() else {
            return false;
        };
        match a.attr.id.as_str() {
            "eval" => return true,
            "train" => return trains_false(c),
            _ => e = a.value.as_ref(),
        }
    }
    false
}

/// The name a chain of method calls starts from: `model` in
/// `model.requires_grad_(False).eval()`.
fn chain_root(e: &Expr) -> Option<&str> {
    let mut e = e;
    loop {
        match e {
            Expr::Call(c) => match c.func.as_ref() {
                Expr::Attribute(a) => e = a.value.as_ref(),
                _ => return None,
            },
            Expr::Name(n) => return Some(n.id.as_str()),
            _ => return None,
        }
    }
}

/// What a chain of method calls starts from: `_load(model, ckpt)` in
/// `_load(model, ckpt).eval().to(device)`.
fn chain_start(e: &Expr) -> &Expr {
    let mut e = e;
    while let Expr::Call(c) = e {
        match c.func.as_ref() {
            Expr::Attribute(a) => e = a.value.as_ref(),
            _ => break,
        }
    }
    e
}

/// `Net(...)`, `nn.Sequential(...)`, a local `_Wrapper(...)`: a call of a class, by its name.
fn is_constructor(c: &ast::ExprCall) -> bool {
    match c.func.as_ref() {
        Expr::Name(f) => {
            f.id.trim_start_matches('_')
                .starts_with(|ch: char| ch.is_ascii_uppercase())
        }
        Expr::Attribute(a) => a.attr.id.starts_with(|ch: char| ch.is_ascii_uppercase()),
        _ => false,
    }
}

/// `build_model("fibreseg", **cfg)`, `timm.create_model(...)`, `get_model(...)`: a registry's
/// or a library's factory, imported (a function of a module, or a name imported from one),
/// which returns a module in training mode as `nn.Module` leaves it. Not a method of a value
/// (`self.get_model()`, `trainer.get_model()`: a getter), not a function this file defines (what
/// it returns is read from its body elsewhere), and not one of a linted file that ends in
/// `.eval()` (an eval helper, checked by the caller).
fn is_factory(ch: &Checker, c: &ast::ExprCall) -> bool {
    let name = match c.func.as_ref() {
        Expr::Name(f) => f.id.as_str(),
        Expr::Attribute(a) => a.attr.id.as_str(),
        _ => return false,
    };
    if !matches!(
        name,
        "build_model" | "create_model" | "get_model" | "make_model" | "build_detector"
    ) {
        return false;
    }
    // Imported by name (`from kit.models import build_model`), or a library's
    // (`timm.create_model`); not a project module's by attribute (`M.build_model`, whose
    // package may re-export a factory that evaluates).
    let Some(q) = ch.qualify(&c.func) else {
        return false;
    };
    match c.func.as_ref() {
        Expr::Name(_) => true,
        _ => {
            let package = q.split('.').next().unwrap_or_default();
            matches!(
                package,
                "timm"
                    | "torchvision"
                    | "segmentation_models_pytorch"
                    | "mmdet"
                    | "mmseg"
                    | "detectron2"
                    | "ultralytics"
                    | "torch"
            )
        }
    }
}

/// Whether a `.train(...)` call puts the module in training mode: `train()`, `train(True)`,
/// `train(mode=True)`.
fn trains_true(c: &ast::ExprCall) -> bool {
    let is_true = |e: &Expr| matches!(e, Expr::BooleanLiteral(b) if b.value);
    match (&c.arguments.args[..], &c.arguments.keywords[..]) {
        ([], []) => true,
        ([a], []) => is_true(a),
        ([], [k]) => k.arg.as_ref().is_some_and(|a| a.as_str() == "mode") && is_true(&k.value),
        _ => false,
    }
}

/// Whether `e` calls `<name>.train()`, `<name>.train(True)` or `<name>.train(mode=True)`.
fn has_train(e: &Expr, name: &str) -> bool {
    struct Find<'n> {
        name: &'n str,
        found: bool,
    }
    impl<'a> Visitor<'a> for Find<'_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                if let Expr::Attribute(a) = c.func.as_ref() {
                    if a.attr.id.as_str() == "train"
                        && matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == self.name)
                        && trains_true(c)
                    {
                        self.found = true;
                    }
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find { name, found: false };
    f.visit_expr(e);
    f.found
}

/// Whether a function of this file that `e` calls puts something in eval mode (`def load(m,
/// path): ...; m.eval(); return m`), or one of another linted file imported here
/// (`from .model import load_detector`): handing the model to it counts as switching modes.
fn helper_evals(ch: &Checker, e: &Expr) -> bool {
    let Some(module) = ch.bodies.first() else {
        return false;
    };
    let (_, called) = called_names_expr(e);
    if called.iter().any(|c| ch.imported_eval_helper(c)) {
        return true;
    }
    // `blade.load_model(path)`: a helper of a module imported by name.
    let module_helper = crate::rules::any_sub_expr(e, |x| {
        matches!(x, Expr::Call(c) if matches!(c.func.as_ref(), Expr::Attribute(a)
            if matches!(a.value.as_ref(), Expr::Name(m)
                if ch.imported_eval_helper(&format!("{}.{}", m.id, a.attr.id)))))
    });
    if module_helper {
        return true;
    }
    module.iter().any(|s| match s {
        Stmt::FunctionDef(f) if called.contains(f.name.id.as_str()) => leaves_in_eval(f),
        _ => false,
    })
}

/// The values of a function's expression statements, assignments and returns, in the order they
/// run (every clause of an `if`: an offset at the function's end is inside none of them).
fn statement_values(f: &ast::StmtFunctionDef) -> Vec<&Expr> {
    let mut stmts = Vec::new();
    collect(&f.body, f.range().end(), &mut stmts);
    stmts
        .into_iter()
        .filter_map(|s| match s {
            Stmt::Expr(x) => Some(x.value.as_ref()),
            Stmt::Assign(a) => Some(a.value.as_ref()),
            Stmt::Return(r) => r.value.as_deref(),
            _ => None,
        })
        .collect()
}

/// Whether an expression puts any module in eval mode (`.eval()`, `.train(False)`, `.freeze()`).
fn evaluates_any(e: &Expr) -> bool {
    let mut find = EvalFind {
        receiver: Receiver::Any,
        found: false,
    };
    find.visit_expr(e);
    find.found
}

/// Whether a function puts a module in eval mode and leaves it there: `def accuracy(model, dl):
/// model.eval() ... model.train()` puts it back in training before returning.
fn leaves_in_eval(f: &ast::StmtFunctionDef) -> bool {
    let params: Vec<&str> = f
        .parameters
        .iter_non_variadic_params()
        .map(|p| p.parameter.name.id.as_str())
        .collect();
    let mut evaluated = false;
    for e in statement_values(f) {
        if evaluates_any(e) {
            evaluated = true;
        } else if params.iter().any(|p| has_train(e, p)) {
            evaluated = false;
        }
    }
    evaluated
}

/// Whether `e` hands `name` to a function of this file that puts that parameter in training
/// mode and leaves it there: `model = train(model, data)` with `def train(model, ...):
/// model.train() ... return model`. Not when the function puts it in eval mode after (its own
/// `.eval()` or a helper of the file that leaves a module in eval mode, `val = evaluate(model)`
/// at the end of each epoch).
fn helper_trains(ch: &Checker, e: &Expr, name: &str) -> bool {
    let Some(module) = ch.bodies.first() else {
        return false;
    };
    crate::rules::any_sub_expr(e, |x| {
        let Expr::Call(c) = x else { return false };
        let Expr::Name(f) = c.func.as_ref() else {
            return false;
        };
        let Some(at) = c
            .arguments
            .args
            .iter()
            .position(|a| matches!(a, Expr::Name(n) if n.id.as_str() == name))
        else {
            return false;
        };
        let Some(def) = last_def(module, f.id.as_str()) else {
            return false;
        };
        let Some(param) = def
            .parameters
            .posonlyargs
            .iter()
            .chain(&def.parameters.args)
            .nth(at)
            .map(|p| p.parameter.name.id.as_str())
        else {
            return false;
        };
        // `net = copy.deepcopy(net)`: the function trains its own copy (`net = net.to(device)`
        // is the same module).
        let same_module =
            |v: &Expr| matches!(moved(v), Some(Expr::Name(n)) if n.id.as_str() == param);
        let values = crate::rules::bound_values(&def.body, param);
        if crate::rules::store_count(&def.body, param) > values.len()
            || !values.iter().all(|v| same_module(v))
        {
            return false;
        }
        // `net.train(was)`: the mode the caller had, put back.
        let restores = |e: &Expr| {
            crate::rules::any_sub_expr(e, |x| {
                matches!(x, Expr::Call(c) if matches!(c.func.as_ref(), Expr::Attribute(a)
                    if a.attr.id.as_str() == "train"
                        && matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == param))
                    && (c.arguments.args.iter().any(|a| !a.is_boolean_literal_expr())
                        || !c.arguments.keywords.is_empty()))
            })
        };
        let mut trained = false;
        for e in statement_values(def) {
            let (_, called) = called_names_expr(e);
            let evaluates = evaluates_any(e)
                || module.iter().any(|s| {
                    matches!(s, Stmt::FunctionDef(h) if h.name.id != def.name.id
                        && called.contains(h.name.id.as_str()) && leaves_in_eval(h))
                });
            if evaluates || restores(e) {
                trained = false;
            } else if has_train(e, param) {
                trained = true;
            }
        }
        trained
    })
}

/// The module-level functions of a file that leave a module in eval mode (for the files that
/// import them: `model = load_detector(path)` then `torch.onnx.export(model, ...)`).
pub(crate) fn eval_helpers(source: &str, module: &[Stmt]) -> crate::HashSet<String> {
    if !source.contains(".eval(") && !source.contains(".train(False") {
        return Default::default();
    }
    module
        .iter()
        .filter_map(|s| match s {
            Stmt::FunctionDef(f) if leaves_in_eval(f) => Some(f.name.id.to_string()),
            _ => None,
        })
        .collect()
}

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    if !is_export(ch, call) {
        return;
    }
    if crate::rules::spliced_keyword(ch, call, "dynamo")
        .is_some_and(|(v, _)| matches!(v, Expr::BooleanLiteral(ref b) if !b.value))
    {
        return;
    }
    // Owned: a module bound by a partial lives in the checker, which reports below.
    let exported = exported_module(ch, call).cloned();
    let Some(model) = exported.as_ref() else {
        return;
    };
    // `torch.onnx.export(net.cpu(), ...)`: moving or casting a module keeps its mode, so the
    // export is judged by `net`.
    let model = moved(model).unwrap_or(model);
    // `torch.onnx.export(BagWrapper(TopKMIL(cfg)), ...)`: a module built inline in the call,
    // by a constructor (not a helper, which may load weights and call `.eval()` itself).
    if let Expr::Call(c) = model {
        // `export(_Wrapper(detector), ...)` after `detector.eval()`: the wrapped module is in
        // eval mode, which is what matters.
        let wrapped_evaluated = |c: &ast::ExprCall| {
            c.arguments.args.iter().any(|a| {
                matches!(a, Expr::Name(n) if mode_before(ch, n.id.as_str(), None, call.range().start()).evaluated)
            })
        };
        // `export(_load(TLNet(), ckpt), ...)`: a module built inline and handed through a
        // function of this file (which `helper_evals` then reads).
        let local_helper = matches!(c.func.as_ref(), Expr::Name(f)
            if ch.bodies.first().is_some_and(|m| m.iter().any(|s|
                matches!(s, Stmt::FunctionDef(d) if d.name.id == f.id))));
        let built = if is_constructor(c) || is_factory(ch, c) {
            Some(c)
        } else if local_helper {
            c.arguments.args.iter().find_map(|a| match a {
                Expr::Call(inner) if is_constructor(inner) || is_factory(ch, inner) => Some(inner),
                _ => None,
            })
        } else {
            None
        };
        if let Some(c) = built.filter(|b| {
            !has_eval(model, Receiver::Any) && !helper_evals(ch, model) && !wrapped_evaluated(b)
        }) {
            let text = ch.text(c.func.range()).to_string();
            let i = ch.report(
                &RULE,
                call.func.range(),
                format!("the `{text}(...)` built in the call is exported in training mode: nothing calls `.eval()` on it"),
            );
            ch.help(i, "build the module first, call `.eval()` on it, then export it (the default dynamo exporter does not switch modes)");
        }
        return;
    }
    // `torch.onnx.export(reg.matcher, ...)`: a submodule of a local is in eval mode once the
    // local (or the submodule itself) is.
    let (name, sub) = match model {
        Expr::Name(n) => (n.id.as_str(), None),
        Expr::Attribute(a) => match a.value.as_ref() {
            Expr::Name(n) if n.id.as_str() != "self" => (n.id.as_str(), Some(a.attr.id.as_str())),
            Expr::Name(_) => return check_self_attribute(ch, call, a.attr.id.as_str()),
            _ => return,
        },
        _ => return,
    };
    let Mode {
        assigned,
        evaluated,
    } = mode_before(ch, name, sub, call.range().start());
    if evaluated {
        return;
    }
    if !assigned && sub.is_none() {
        let mode = global_in_training(ch, name, call);
        if matches!(
            mode,
            GlobalMode::NeverEvaluated | GlobalMode::ImportedElsewhere
        ) && !ch.facts.exported_globals.iter().any(|g| g == name)
        {
            ch.facts.exported_globals.push(name.to_string());
        }
        let message = match mode {
            GlobalMode::Unknown | GlobalMode::ImportedElsewhere => None,
            GlobalMode::NeverEvaluated => Some(format!("`{name}` is exported without `.eval()`: the module-level `{name}` is built in training mode and nothing in the file puts it in eval mode")),
            GlobalMode::TrainingAt(caller) => Some(format!("`{name}` is exported without `.eval()`: {caller} calls this function with the module-level `{name}` in training mode")),
        };
        if let Some(message) = message {
            let i = ch.report(&RULE, call.func.range(), message);
            ch.help(i, format!("call `{name}.eval()` before `torch.onnx.export` (the default dynamo exporter does not switch modes)"));
            return;
        }
    }
    if !assigned {
        // `def _export(module, ...): torch.onnx.export(module, ...)`: judged by what the
        // callers in this file hand it.
        if let Some((caller, passed)) = sub
            .is_none()
            .then(|| caller_without_eval(ch, name))
            .flatten()
        {
            let i = ch.report(
                &RULE,
                call.func.range(),
                format!("`{name}` is exported without `.eval()`: `{caller}` passes it `{passed}`, still in training mode"),
            );
            ch.help(i, format!("call `{passed}.eval()` before handing it over, or `{name}.eval()` here (the default dynamo exporter does not switch modes)"));
            return;
        }
        // `def export_for_det(model, path): model = model.cpu(); torch.onnx.export(model, ...)`
        // with no caller in the file: the function prepares the module for export itself and
        // leaves out `.eval()`, judged as a module of its own (with callers, they decide).
        let Some(function) = sub
            .is_none()
            .then(|| prepared_without_callers(ch, name, call.range().start()))
            .flatten()
        else {
            return;
        };
        // Another file that imports the function is a caller too (learnt on a second pass).
        if !ch.facts.preparing_exporters.contains(&function) {
            ch.facts.preparing_exporters.push(function.clone());
        }
        if ch.imported_elsewhere(&function) {
            return;
        }
    }
    let i = ch.report(
        &RULE,
        call.func.range(),
        format!("`{shown}` is exported without `{name}.eval()`: dropout and batch-norm statistics export in training mode", shown = ch.text(model.range())),
    );
    let help = if is_to_onnx(ch, call) {
        format!("call `{name}.eval()` before `to_onnx` (Lightning's `to_onnx` exports the module in the mode it is in)")
    } else {
        format!("call `{name}.eval()` before `torch.onnx.export` (the default dynamo exporter does not switch modes)")
    };
    ch.help(i, help);
}

/// Whether a function exports a module-level name (`model = QuenchNet()` at the top of a
/// notebook turned module, `def export_tablet(): torch.onnx.export(model, ...)`) that the module
/// binds only to modules it builds, in training mode. Judged where the exporting function is
/// called: a caller that reaches the call with the module in training mode (the top level after
/// `model.train()`, or after a function of the file that trains it). With no call in the file,
/// only when nothing in the file may put it in eval mode and no other file imports this one.
/// Any switch that cannot be followed (an `.eval()` through another name, `m.train(flag)`, a
/// `global model` rebinding it) leaves it alone.
fn global_in_training(ch: &Checker, name: &str, call: &ast::ExprCall) -> GlobalMode {
    let Some(module) = ch.bodies.first() else {
        return GlobalMode::Unknown;
    };
    if ch.defs.is_empty()
        || ch.binds_locally(name)
        || ch
            .defs
            .iter()
            .any(|d| d.parameters.iter().any(|p| p.name().id.as_str() == name))
    {
        return GlobalMode::Unknown;
    }
    let mut built = false;
    for s in module.iter() {
        match s {
            Stmt::Assign(a) if a.targets.iter().any(|t| mentions(t, &[name.to_string()])) => {
                let effect = matches!(&a.targets[..], [Expr::Name(_)])
                    .then(|| rebinding(&a.value, name))
                    .flatten();
                match effect {
                    Some(Effect::Train) => built = true,
                    // Moved, cast or evaluated where it is bound again, or a placeholder
                    // (`net = None`): judged by the walk.
                    Some(Effect::Same | Effect::Eval | Effect::Unknown) => {}
                    None => return GlobalMode::Unknown,
                }
            }
            // `if torch.cuda.is_available(): net = net.to(DEVICE)`: moved or cast in a clause,
            // the same module either way.
            Stmt::If(i)
                if crate::rules::store_count(std::slice::from_ref(s), name) > 0
                    && std::iter::once(&i.body[..])
                        .chain(i.elif_else_clauses.iter().map(|c| &c.body[..]))
                        .all(|body| {
                            let mut stmts = Vec::new();
                            crate::checker::flatten(body, &mut stmts);
                            stmts.iter().all(|st| {
                                crate::rules::store_count(std::slice::from_ref(*st), name) == 0
                                    || matches!(st, Stmt::Assign(a)
                                        if matches!(&a.targets[..], [Expr::Name(_)])
                                            && rebinding(&a.value, name) == Some(Effect::Same))
                            })
                        }) => {}
            // Bound otherwise, also in a block (`if __name__ == "__main__": model = load()`).
            Stmt::AnnAssign(_)
            | Stmt::AugAssign(_)
            | Stmt::For(_)
            | Stmt::With(_)
            | Stmt::Import(_)
            | Stmt::ImportFrom(_)
            | Stmt::If(_)
            | Stmt::While(_)
            | Stmt::Try(_)
                if crate::rules::store_count(std::slice::from_ref(s), name) > 0 =>
            {
                return GlobalMode::Unknown;
            }
            _ => {}
        }
    }
    // Functions that declare it `global` and bind it: each binding one the walk reads
    // (`net = FlowNet().to(DEVICE)` in `train()`), else nothing is known.
    match global_bindings(module, name) {
        Some(constructs) => built |= constructs,
        None => return GlobalMode::Unknown,
    }
    if !built {
        return GlobalMode::Unknown;
    }
    let holding = holders(module, name);
    // `prep = lambda: model.eval()`: a lambda switching a name that may hold the module.
    let lambda_switches = module.iter().any(|s| {
        crate::rules::any_sub_stmt_expr(s, |e| {
            matches!(e, Expr::Lambda(l) if crate::rules::any_sub_expr(&l.body, |x| {
                matches!(x, Expr::Call(c) if matches!(c.func.as_ref(), Expr::Attribute(a)
                    if matches!(a.attr.id.as_str(), "eval" | "train" | "freeze")
                        && mentions(&a.value, &holding)))
            }))
        })
    });
    let modes = GlobalModes {
        ch,
        module,
        name,
        names: [name.to_string()],
        holders: holding,
        lambda_switches,
        memo: Default::default(),
        active: Default::default(),
        callers: Default::default(),
        definitions: Default::default(),
    };
    // What the exporting function itself does before the export.
    let Some(exporting) = ch.defs.first() else {
        return GlobalMode::Unknown;
    };
    match modes.fold(&exporting.body, call.range().start(), Effect::Same, 0) {
        Effect::Eval | Effect::Unknown => return GlobalMode::Unknown,
        Effect::Train => return GlobalMode::TrainingAt(format!("{}()", exporting.name.id)),
        Effect::Same => {}
    }
    let mut seen_call = false;
    if ch.defs.len() == 1 {
        let mut followed = crate::HashSet::default();
        match modes.training_caller(exporting.name.id.as_str(), 0, &mut followed) {
            Callers::TrainingAt(caller) => return GlobalMode::TrainingAt(caller),
            Callers::Seen => seen_call = true,
            Callers::None => {}
        }
    }
    if seen_call {
        return GlobalMode::Unknown;
    }
    // No caller in the file: reported only when nothing anywhere may put it in eval mode.
    if modes.any_switch() {
        GlobalMode::Unknown
    } else if ch.imported_elsewhere(name) {
        GlobalMode::ImportedElsewhere
    } else {
        GlobalMode::NeverEvaluated
    }
}

/// What [`GlobalModes::training_caller`] found of the calls of a module-level function.
enum Callers {
    /// No call in the file.
    None,
    /// Calls, none known to reach it with the module in training mode.
    Seen,
    /// This caller reaches a call with the module in training mode.
    TrainingAt(String),
}

/// What the functions that declare `global name` bind to it: `Some(true)` when one of them
/// builds a module (`net = FlowNet().to(dev)`), `Some(false)` when none binds it, `None` when
/// one binds it in a way [`rebinding`] does not read (`net = load(path)`, a tuple target, a
/// nested block's `global`).
fn global_bindings(module: &[Stmt], name: &str) -> Option<bool> {
    let mut constructs = false;
    let mut known = true;
    crate::rules::each_stmt(module, &mut |s| {
        let body = match s {
            Stmt::FunctionDef(d) => &d.body[..],
            Stmt::ClassDef(c) => {
                // `global` in a class body: not followed.
                known &= !declares_global(&c.body, name);
                return;
            }
            _ => return,
        };
        if !declares_global(body, name) {
            return;
        }
        let mut stmts = Vec::new();
        crate::checker::flatten(body, &mut stmts);
        for st in stmts {
            match st {
                Stmt::Assign(a) if a.targets.iter().any(|t| mentions(t, &[name.to_string()])) => {
                    let effect = matches!(&a.targets[..], [Expr::Name(_)])
                        .then(|| rebinding(&a.value, name))
                        .flatten();
                    match effect {
                        Some(Effect::Train) => constructs = true,
                        Some(Effect::Same | Effect::Eval) => {}
                        _ => known = false,
                    }
                }
                // Bound otherwise by the statement itself (a loop's target, `with ... as`,
                // an annotated or augmented assignment, an import).
                Stmt::For(f) if mentions(&f.target, &[name.to_string()]) => known = false,
                Stmt::With(w)
                    if w.items.iter().any(|i| {
                        i.optional_vars
                            .as_deref()
                            .is_some_and(|v| mentions(v, &[name.to_string()]))
                    }) =>
                {
                    known = false
                }
                Stmt::AnnAssign(_) | Stmt::AugAssign(_) | Stmt::Import(_) | Stmt::ImportFrom(_)
                    if crate::rules::store_count(std::slice::from_ref(st), name) > 0 =>
                {
                    known = false
                }
                _ => {}
            }
        }
    });
    known.then_some(constructs)
}

/// Whether a body's own statements (not nested functions') declare `global name`.
fn declares_global(body: &[Stmt], name: &str) -> bool {
    let mut stmts = Vec::new();
    crate::checker::flatten(body, &mut stmts);
    stmts
        .into_iter()
        .any(|s| matches!(s, Stmt::Global(g) if g.names.iter().any(|n| n.id.as_str() == name)))
}

/// What [`global_in_training`] knows of a module-level module at an export.
enum GlobalMode {
    Unknown,
    /// Nothing in the file puts it in eval mode.
    NeverEvaluated,
    /// Nothing in the file puts it in eval mode, but another file imports it by name.
    ImportedElsewhere,
    /// This caller calls the exporting function with the module in training mode.
    TrainingAt(String),
}

/// What running some statements does to the mode of a module-level module: nothing, eval mode,
/// training mode, or something that cannot be followed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Effect {
    Same,
    Eval,
    Train,
    Unknown,
}

/// Follows the mode of the module-level module `name` through statements, and through the
/// functions and classes of the file they call (a few levels deep).
struct GlobalModes<'c, 'a> {
    ch: &'c Checker<'a>,
    module: &'c [Stmt],
    name: &'c str,
    names: [String; 1],
    /// `name` and the names bound anywhere in the module from values that mention one of them
    /// (`models = {"net": model}`, `for m in models.values()`).
    holders: Vec<String>,
    /// Whether a lambda of the module switches a mode (`prep = lambda: model.eval()`).
    lambda_switches: bool,
    /// Each followed function's effect, by where it starts.
    memo: std::cell::RefCell<crate::HashMap<TextSize, Effect>>,
    /// The functions being followed (a call back into one is not followed).
    active: std::cell::RefCell<crate::HashSet<TextSize>>,
    /// The module's callers and their calls by name, read once when first needed.
    callers: std::cell::OnceCell<Vec<Caller<'c>>>,
    /// The module's functions, and its classes' `__init__`, by name (the last definition).
    definitions: std::cell::OnceCell<crate::HashMap<&'c str, &'c ast::StmtFunctionDef>>,
}

/// A caller of the module's functions: the top level (no name) or a function or method.
struct Caller<'c> {
    /// The module-level function (not a method, not the top level), whose callers may be
    /// followed in turn.
    function: Option<&'c ast::StmtFunctionDef>,
    name: &'c str,
    body: &'c [Stmt],
    /// Where its own statements call each name.
    calls: crate::HashMap<&'c str, Vec<TextSize>>,
}

/// `name` and the names the module binds (in any scope, by assignment or as a `for` target)
/// from a value that mentions one of them, a few steps deep; not what calling one returns (`q
/// = net(x)`, then `loss = pinball(q, y)`: the module's output, not the module).
fn holders(module: &[Stmt], name: &str) -> Vec<String> {
    fn mentions_uncalled(e: &Expr, names: &[String]) -> bool {
        struct Find<'n> {
            names: &'n [String],
            found: bool,
        }
        impl<'a> Visitor<'a> for Find<'_> {
            fn visit_expr(&mut self, e: &'a Expr) {
                match e {
                    Expr::Name(n) if self.names.iter().any(|x| x == n.id.as_str()) => {
                        self.found = true;
                    }
                    Expr::Call(c) if matches!(c.func.as_ref(), Expr::Name(_)) => {
                        visitor::walk_arguments(self, &c.arguments);
                    }
                    // `next(net.parameters()).device`: its tensors, not the module or a part.
                    Expr::Call(c)
                        if matches!(c.func.as_ref(), Expr::Attribute(a) if matches!(
                            a.attr.id.as_str(),
                            "parameters" | "named_parameters" | "buffers" | "named_buffers"
                                | "state_dict"
                        )) =>
                    {
                        visitor::walk_arguments(self, &c.arguments);
                    }
                    e => visitor::walk_expr(self, e),
                }
            }
        }
        let mut f = Find {
            names,
            found: false,
        };
        f.visit_expr(e);
        f.found
    }
    let mut bindings: Vec<(&Expr, &Expr)> = Vec::new();
    crate::rules::each_stmt(module, &mut |s| match s {
        Stmt::For(f) => bindings.push((&f.target, &f.iter)),
        Stmt::Assign(a) => a.targets.iter().for_each(|t| bindings.push((t, &a.value))),
        _ => {}
    });
    let mut out = vec![name.to_string()];
    for _ in 0..4 {
        let before = out.len();
        for (target, value) in &bindings {
            if mentions_uncalled(value, &out) {
                fn names_in(t: &Expr, out: &mut Vec<String>) {
                    match t {
                        Expr::Name(n) => out.push(n.id.to_string()),
                        Expr::Tuple(x) => x.elts.iter().for_each(|e| names_in(e, out)),
                        Expr::List(x) => x.elts.iter().for_each(|e| names_in(e, out)),
                        Expr::Starred(x) => names_in(&x.value, out),
                        _ => {}
                    }
                }
                let mut names = Vec::new();
                names_in(target, &mut names);
                for n in names {
                    if !out.contains(&n) {
                        out.push(n);
                    }
                }
            }
        }
        if out.len() == before {
            break;
        }
    }
    out
}

impl GlobalModes<'_, '_> {
    /// The mode after the statements of `body` that run before offset `at`, starting from
    /// `start` (`Same` when nothing is known yet).
    fn fold(&self, body: &[Stmt], at: TextSize, start: Effect, depth: u32) -> Effect {
        let mut stmts = Vec::new();
        // To a call or an export: clauses that leave first never reach it. (For what a whole
        // function does, `follow` reads every clause.)
        if at < body.last().map_or(at, |l| l.range().end()) {
            collect_reaching(body, at, &mut stmts);
        } else {
            collect(body, at, &mut stmts);
        }
        let mut mode = start;
        for s in stmts.into_iter().filter(|s| s.range().start() < at) {
            if let Stmt::Assign(a) = s {
                if a.targets.iter().any(|t| mentions(t, &self.names)) {
                    let rebound = matches!(&a.targets[..], [Expr::Name(_)])
                        .then(|| rebinding(&a.value, self.name))
                        .flatten();
                    mode = match rebound {
                        Some(Effect::Same) => mode,
                        Some(effect) => effect,
                        None => Effect::Unknown,
                    };
                    continue;
                }
            }
            for e in own_exprs(s) {
                let mut calls = Vec::new();
                collect_calls(e, &mut calls);
                for c in calls {
                    match self.call(c, depth) {
                        Effect::Same => {}
                        effect => mode = effect,
                    }
                }
            }
        }
        mode
    }

    /// Whether the receiver of a mode switch may be the module under another name: it
    /// mentions a name that may hold it (`nn.Sequential(pre, model).eval()`,
    /// `model.train(was)`, `for m in models.values(): m.eval()` with `models = {"net": model}`).
    /// Not `self.<attr>`, nor another module of the file (`tablet.eval()`).
    fn may_hold(&self, receiver: &Expr) -> bool {
        mentions(receiver, &self.holders)
    }

    /// Whether an argument hands over the module (or a part of it, or a container holding it):
    /// `Predictor(model)`, `fit(model.encoder)`, `run([model, other])`, `save(model.cpu())`;
    /// not what calling it returns (`metrics(net(x), y)`), nor `model.parameters()`.
    fn passes(&self, a: &Expr) -> bool {
        match a {
            Expr::Name(_) => mentions(a, &self.holders),
            Expr::Attribute(x) => self.passes(&x.value),
            Expr::Subscript(x) => self.passes(&x.value),
            Expr::Starred(x) => self.passes(&x.value),
            Expr::List(l) => l.elts.iter().any(|e| self.passes(e)),
            Expr::Tuple(t) => t.elts.iter().any(|e| self.passes(e)),
            Expr::Set(t) => t.elts.iter().any(|e| self.passes(e)),
            Expr::Dict(d) => d.items.iter().any(|i| self.passes(&i.value)),
            Expr::Call(c) => {
                moved(a).is_some_and(|m| self.passes(m))
                    || c.arguments
                        .args
                        .iter()
                        .chain(c.arguments.keywords.iter().map(|k| &k.value))
                        .any(|x| !matches!(x, Expr::Call(_)) && self.passes(x))
            }
            _ => false,
        }
    }

    /// What one call does to the module's mode.
    fn call(&self, c: &ast::ExprCall, depth: u32) -> Effect {
        let name = self.name;
        let e = Expr::Call(c.clone());
        if has_eval(&e, Receiver::Name(name)) || (chain_evals(&e) && chain_root(&e) == Some(name)) {
            return Effect::Eval;
        }
        if has_train(&e, name) {
            return Effect::Train;
        }
        if let Expr::Attribute(a) = c.func.as_ref() {
            let m = a.attr.id.as_str();
            let switch =
                (matches!(m, "eval" | "freeze") && c.arguments.args.is_empty()) || m == "train";
            // `m.eval()` through another name that may hold it (a loop over modules, a
            // wrapper built around it, `model.train(was)`), `model.apply(fn)`, a method named
            // for a mode change on another object (`runner.prepare()`): not followed.
            let own = matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self")
                || matches!(a.value.as_ref(), Expr::Attribute(x)
                    if matches!(x.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self"));
            if (switch && self.may_hold(&a.value)) || (m == "apply" && self.may_hold(&a.value)) {
                return Effect::Unknown;
            }
            // `runner.prepare()` with `runner = Runner()` of this file: its method is followed.
            if !own && !switch {
                if let Some(method) = self.instance_method(&a.value, m) {
                    return self.follow(method, depth);
                }
            }
        }
        if mentions(&e, &self.names) && helper_evals(self.ch, &e) {
            return Effect::Eval;
        }
        // The module handed to a call (`Predictor(model)`, `prepare(model)`): what the callee
        // does with it is not followed, unless it is a torch function or a builtin that only
        // reads it.
        let handed = c
            .arguments
            .args
            .iter()
            .chain(c.arguments.keywords.iter().map(|k| &k.value))
            .any(|a| self.passes(a));
        if handed {
            let reads = self
                .ch
                .qualify(&c.func)
                .is_some_and(|q| q.starts_with("torch."))
                || matches!(c.func.as_ref(), Expr::Name(f) if matches!(f.id.as_str(),
                    "print" | "len" | "isinstance" | "str" | "repr" | "id" | "type" | "sum"
                        | "getattr" | "hasattr" | "list" | "dict" | "sorted"));
            return if reads { Effect::Same } else { Effect::Unknown };
        }
        let Expr::Name(f) = c.func.as_ref() else {
            return Effect::Same;
        };
        // A function of the file, or a class of the file whose `__init__` runs (the last
        // definition of the name; the module's definitions are read once).
        let target = self
            .definitions
            .get_or_init(|| {
                let mut out = crate::HashMap::default();
                for s in self.module {
                    let def = match s {
                        Stmt::FunctionDef(d) => Some((d.name.id.as_str(), d)),
                        Stmt::ClassDef(k) => k.body.iter().find_map(|m| match m {
                            Stmt::FunctionDef(i) if i.name.id.as_str() == "__init__" => {
                                Some((k.name.id.as_str(), i))
                            }
                            _ => None,
                        }),
                        _ => None,
                    };
                    if let Some((name, d)) = def {
                        out.insert(name, d);
                    }
                }
                out
            })
            .get(f.id.as_str())
            .copied();
        let Some(def) = target else {
            // A lambda bound to the name, or anything else called: followed only if no lambda
            // of the module switches a mode.
            return if self.lambda_switches {
                Effect::Unknown
            } else {
                Effect::Same
            };
        };
        self.follow(def, depth)
    }

    /// A method `m` of the class of this file whose instance the module binds to the name
    /// `receiver` (`runner = Runner(...)`, in any scope).
    fn instance_method(&self, receiver: &Expr, m: &str) -> Option<&ast::StmtFunctionDef> {
        let Expr::Name(r) = receiver else {
            return None;
        };
        let mut class = None;
        for s in self.module.iter() {
            if let Stmt::Assign(a) = s {
                if matches!(&a.targets[..], [Expr::Name(t)] if t.id == r.id) {
                    if let Expr::Call(c) = a.value.as_ref() {
                        if let Expr::Name(k) = c.func.as_ref() {
                            class = crate::checker::module_class(self.module, k.id.as_str());
                        }
                    }
                }
            }
        }
        class?.body.iter().find_map(|s| match s {
            Stmt::FunctionDef(d) if d.name.id.as_str() == m => Some(d),
            _ => None,
        })
    }

    /// What running a function of the file does to the module's mode, each function once (its
    /// effect does not depend on the caller; recursion, or a chain deeper than a few calls, is
    /// not followed).
    fn follow(&self, def: &ast::StmtFunctionDef, depth: u32) -> Effect {
        let name = self.name;
        // A function binding a local of the name leaves the module alone; one declaring it
        // `global` binds the module itself (read by the walk).
        if def.parameters.iter().any(|p| p.name().id.as_str() == name)
            || (crate::rules::stores_name(&def.body, name) && !declares_global(&def.body, name))
        {
            return Effect::Same;
        }
        let key = def.range().start();
        if let Some(known) = self.memo.borrow().get(&key) {
            return *known;
        }
        if depth >= 8 || !self.active.borrow_mut().insert(key) {
            return Effect::Unknown;
        }
        let effect = self.fold(&def.body, def.range().end(), Effect::Same, depth + 1);
        self.active.borrow_mut().remove(&key);
        self.memo.borrow_mut().insert(key, effect);
        effect
    }

    /// The callers of the module-level function `callee`, each in the mode the module is in
    /// where it calls: the top level from its own statements (which build the module), another
    /// function from what it sets itself before the call, and, when a module-level function
    /// sets nothing, where it is called in turn, a few levels up (`model.train()` at the top
    /// level, then `main()`, which calls the exporting function).
    fn training_caller(
        &self,
        callee: &str,
        depth: u32,
        followed: &mut crate::HashSet<String>,
    ) -> Callers {
        if !followed.insert(callee.to_string()) {
            return Callers::Seen;
        }
        if self.callers.get().is_none() {
            // Every caller's calls by name, read once: the module's top level and every
            // function and method (its own statements).
            let all = std::iter::once((None, "", self.module))
                .chain(
                    crate::checker::functions_and_methods(self.module).map(|(class, g)| {
                        (
                            class.is_none().then_some(g),
                            g.name.id.as_str(),
                            &g.body[..],
                        )
                    }),
                )
                .map(|(function, name, body)| Caller {
                    function,
                    name,
                    body,
                    calls: named_calls(body),
                })
                .collect();
            let _ = self.callers.set(all);
        }
        let mut seen = false;
        for c in self.callers.get().into_iter().flatten() {
            if !c.name.is_empty() && c.name == callee {
                continue;
            }
            let label = if c.name.is_empty() {
                "the module's top level".to_string()
            } else {
                format!("{}()", c.name)
            };
            for &at in c.calls.get(callee).into_iter().flatten() {
                seen = true;
                match self.fold(c.body, at, Effect::Same, 0) {
                    Effect::Train => return Callers::TrainingAt(label),
                    Effect::Same if depth < 4 => {
                        let Some(g) = c.function else { continue };
                        if let Callers::TrainingAt(up) =
                            self.training_caller(g.name.id.as_str(), depth + 1, followed)
                        {
                            return Callers::TrainingAt(format!("{up}, through {label},"));
                        }
                    }
                    _ => {}
                }
            }
        }
        if seen {
            Callers::Seen
        } else {
            Callers::None
        }
    }

    /// Whether any call anywhere in the module (every scope) may switch the module's mode.
    fn any_switch(&self) -> bool {
        let mut calls = Vec::new();
        crate::rules::each_stmt(self.module, &mut |s| {
            for e in own_exprs(s) {
                collect_calls(e, &mut calls);
            }
        });
        calls
            .into_iter()
            .any(|c| matches!(self.call(c, 0), Effect::Eval | Effect::Unknown))
    }
}

/// The calls `f(...)` of plain names in a body's own statements (nested blocks too, not nested
/// functions or classes), by name.
fn named_calls(body: &[Stmt]) -> crate::HashMap<&str, Vec<TextSize>> {
    struct Find<'a>(crate::HashMap<&'a str, Vec<TextSize>>);
    impl<'a> Visitor<'a> for Find<'a> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if !matches!(s, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                visitor::walk_stmt(self, s);
            }
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                if let Expr::Name(n) = c.func.as_ref() {
                    self.0
                        .entry(n.id.as_str())
                        .or_default()
                        .push(c.range().start());
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find(Default::default());
    f.visit_body(body);
    f.0
}

/// `torch.onnx.export(self.model, ...)` in a method (a trainer's or a service's `export_onnx`).
/// The mode at the export is read from the exporting method's statements before it, in order
/// (following the class's own methods it calls): a `train()` last means training mode. With no
/// mode set there, the callers in the class decide: one that calls the exporting method after
/// `self.model.train()` exports in training mode; with no caller in the class, another method
/// that trains `self.model` makes the mode depend on what ran before; with neither, a new
/// instance whose exporting method is called first ([`fresh_instance_export`]). Anything that
/// cannot be followed (an inherited method named for a mode change, a function of the file that
/// switches modes handed the module, a new module stored under the name, a generator method such
/// as a context manager, a mode set in one branch of an `if` only) leaves it alone.
fn check_self_attribute(ch: &mut Checker, call: &ast::ExprCall, attr: &str) {
    let Some(method) = ch.defs.last().copied() else {
        return;
    };
    let Some(methods) = ch.class_methods() else {
        return;
    };
    // A method of the class itself, not a function nested in one.
    if !methods
        .get(method.name.id.as_str())
        .is_some_and(|b| std::ptr::eq(b.as_ptr(), method.body.as_ptr()))
    {
        return;
    }
    let name = method.name.id.as_str();
    // The attributes the class stores (`self.criterion = ...`): calling one is not calling a
    // method. Whether the exporting method is used as a value (`hooks.append(self.export)`):
    // then its callers are not all seen.
    let mut stored: crate::HashSet<&str> = crate::HashSet::default();
    let mut used_as_value = false;
    for body in methods.values() {
        for s in body.iter() {
            collect_self_stores(s, &mut stored);
            used_as_value |= method_used_as_value(s, name);
        }
    }
    if used_as_value {
        return;
    }
    // Functions of the file that switch a module's mode (`def freeze(m): m.eval()`).
    let mode_helpers: crate::HashSet<&str> = ch
        .bodies
        .first()
        .map(|m| {
            m.iter()
                .filter_map(|s| match s {
                    Stmt::FunctionDef(f)
                        if f.body.iter().any(|s| {
                            crate::rules::any_sub_stmt_expr(s, |e| {
                                matches!(e, Expr::Call(c) if matches!(c.func.as_ref(),
                                    Expr::Attribute(a) if matches!(a.attr.id.as_str(), "eval" | "train" | "freeze")))
                            })
                        }) =>
                    {
                        Some(f.name.id.as_str())
                    }
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default();
    let cx = ModeContext {
        attr,
        methods,
        stored: &stored,
        mode_helpers: &mode_helpers,
        memo: Default::default(),
    };
    let at = call.range().start();
    let here = cx.mode(&method.body, Some(at), &mut vec![name]);
    let (message, help) = match here {
        SelfMode::Eval | SelfMode::Unknown => return,
        SelfMode::Training => (
            format!("`self.{attr}` is exported in training mode: `{name}` puts it in training mode before the export"),
            format!("call `self.{attr}.eval()` right before the export (the default dynamo exporter does not switch modes)"),
        ),
        SelfMode::Unset => {
            // The callers in the class, and the mode each leaves at its call.
            let mut callers: Vec<(&str, SelfMode, TextSize)> = Vec::new();
            for (m, body) in methods.iter() {
                if m.as_str() == name {
                    continue;
                }
                for site in call_sites(body, name) {
                    let mode = cx.mode(body, Some(site), &mut vec![m.as_str(), name]);
                    callers.push((m.as_str(), mode, site));
                }
            }
            callers.sort_by_key(|(_, _, at)| *at);
            if let Some((caller, _, _)) = callers.iter().find(|(_, m, _)| *m == SelfMode::Training) {
                (
                    format!("`self.{attr}` is exported in training mode: `{caller}` calls `{name}` with `self.{attr}` in training mode"),
                    format!("call `self.{attr}.eval()` in `{name}` before the export (the default dynamo exporter does not switch modes)"),
                )
            } else if !callers.is_empty() || name.starts_with("on_") {
                // A framework's hook (`on_validation_end`) runs in the mode the framework
                // chose.
                return;
            } else {
                // The first method in source order that trains the module.
                let mut training: Vec<(&String, &&[Stmt])> = methods
                    .iter()
                    .filter(|(m, body)| {
                        m.as_str() != name && cx.trains(body, &mut vec![m.as_str()])
                    })
                    .collect();
                training.sort_by_key(|(_, body)| body.first().map(|s| s.range().start()));
                if let Some((trainer, _)) = training.first() {
                    (
                        format!("`self.{attr}` is exported without `.eval()` in `{name}`: `{trainer}` puts it in training mode, so the exported mode depends on what ran before"),
                        format!("call `self.{attr}.eval()` in `{name}` before the export (the default dynamo exporter does not switch modes)"),
                    )
                } else if let Some(instance) = fresh_instance_export(ch, &cx, name) {
                    let class = ch.classes.last().map_or("", String::as_str);
                    (
                        format!("`self.{attr}` is exported in training mode: `{class}.__init__` builds it (a new module is in training mode) and `{instance}.{name}(...)` exports it with nothing putting it in eval mode"),
                        format!("call `self.{attr}.eval()` in `{name}` before the export (the default dynamo exporter does not switch modes)"),
                    )
                } else {
                    return;
                }
            }
        }
    };
    let i = ch.report(&RULE, call.func.range(), message);
    ch.help(i, help);
}

/// A service class's exporting method called on a new instance: `svc = AirflowService(cfg)`,
/// then `svc.export_onnx(path)`, where the class's `__init__` builds `self.<attr>` with a
/// constructor (`self.model = AirflowEstimator(cfg)`, the only store of it in the class) and leaves
/// its mode alone, and between the two the instance is only used to call methods of the class
/// that set no mode (not handed anywhere, not reached into). Not for a class with a base class of
/// the file (whose `__init__` may set the mode) nor an exporting method with a decorator other
/// than `no_grad`/`inference_mode`. The instance's name, when such a call is in the file (at
/// module level, in a function or a method).
fn fresh_instance_export<'c>(ch: &Checker<'c>, cx: &ModeContext<'c>, name: &str) -> Option<String> {
    let class = ch.classes.last()?.as_str();
    let init = *cx.methods.get("__init__")?;
    // A base class of the file may set the mode in its own `__init__`, and a decorator of the
    // exporting method (`@in_eval_mode`) around the export: not followed.
    let module = ch.bodies[0];
    let own = crate::checker::module_class(module, class)?;
    if own.bases().iter().any(|b| {
        matches!(b, Expr::Name(n) if crate::checker::module_class(module, n.id.as_str()).is_some())
    }) {
        return None;
    }
    let exporting = own.body.iter().find_map(|st| match st {
        Stmt::FunctionDef(f) if f.name.id.as_str() == name => Some(f),
        _ => None,
    })?;
    if exporting.decorator_list.iter().any(|d| {
        let e = match &d.expression {
            Expr::Call(c) => c.func.as_ref(),
            e => e,
        };
        !matches!(e, Expr::Attribute(a) if matches!(a.attr.id.as_str(), "no_grad" | "inference_mode"))
            && !matches!(e, Expr::Name(n) if matches!(n.id.as_str(), "no_grad" | "inference_mode"))
    }) {
        return None;
    }
    // `self.<attr>` stored once in the class: in `__init__`, by a statement of its own.
    struct Stores<'a>(&'a str, usize);
    impl<'s> Visitor<'s> for Stores<'_> {
        fn visit_expr(&mut self, e: &'s Expr) {
            if matches!(e, Expr::Attribute(a) if matches!(a.ctx, ast::ExprContext::Store))
                && crate::checker::self_attr(e) == Some(self.0)
            {
                self.1 += 1;
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut stores = Stores(cx.attr, 0);
    for body in cx.methods.values() {
        stores.visit_body(body);
    }
    if stores.1 != 1 {
        return None;
    }
    let at = init.iter().position(|st| match st {
        Stmt::Assign(a) => {
            matches!(&a.targets[..], [t] if crate::checker::self_attr(t) == Some(cx.attr))
                && matches!(unmoved(&a.value), Expr::Call(c) if is_constructor(c))
                && !chain_evals(&a.value)
        }
        _ => false,
    })?;
    // A class of the file that puts itself in eval mode when built.
    if let Some(Expr::Call(c)) = init[at].as_assign_stmt().map(|a| unmoved(&a.value)) {
        if let Expr::Name(f) = c.func.as_ref() {
            if crate::checker::module_class(ch.bodies[0], f.id.as_str()).is_some_and(|k| {
                k.body
                    .iter()
                    .any(|st| crate::rules::any_sub_stmt_expr(st, evaluates_any))
            }) {
                return None;
            }
        }
    }
    if cx.mode(&init[at + 1..], None, &mut vec!["__init__"]) != SelfMode::Unset {
        return None;
    }
    // Methods the instance may call before the export: those that set no mode, and switch no
    // module's mode in any other way either (`net = self.model; net.eval()`,
    // `self.model.apply(set_eval)`, `for m in self.model.modules(): m.eval()`), nor call a
    // method of the class that might.
    fn switches_modes(
        methods: &crate::HashMap<String, &[Stmt]>,
        body: &[Stmt],
        depth: u32,
    ) -> bool {
        body.iter().any(|st| {
            crate::rules::any_sub_stmt_expr(st, |e| {
                let Expr::Call(c) = e else { return false };
                let Expr::Attribute(a) = c.func.as_ref() else {
                    return false;
                };
                let m = a.attr.id.as_str();
                matches!(
                    m,
                    "eval"
                        | "train"
                        | "apply"
                        | "freeze"
                        | "modules"
                        | "children"
                        | "named_modules"
                ) || (crate::checker::is_self(&a.value)
                    && methods
                        .get(m)
                        .is_some_and(|b| depth >= 3 || switches_modes(methods, b, depth + 1)))
            })
        })
    }
    let neutral = |m: &str| {
        m != name
            && cx.methods.get_key_value(m).is_some_and(|(k, body)| {
                cx.mode(body, None, &mut vec![k.as_str()]) == SelfMode::Unset
                    && !cx.trains(body, &mut vec![k.as_str()])
                    && !switches_modes(cx.methods, body, 0)
            })
    };
    fn suites<'s>(body: &'s [Stmt], out: &mut Vec<&'s [Stmt]>) {
        out.push(body);
        for st in body {
            match st {
                Stmt::FunctionDef(f) => suites(&f.body, out),
                Stmt::ClassDef(c) => suites(&c.body, out),
                Stmt::If(i) => {
                    suites(&i.body, out);
                    for c in &i.elif_else_clauses {
                        suites(&c.body, out);
                    }
                }
                Stmt::For(ast::StmtFor { body, orelse, .. })
                | Stmt::While(ast::StmtWhile { body, orelse, .. }) => {
                    suites(body, out);
                    suites(orelse, out);
                }
                Stmt::With(w) => suites(&w.body, out),
                Stmt::Try(t) => {
                    suites(&t.body, out);
                    for h in &t.handlers {
                        let ast::ExceptHandler::ExceptHandler(h) = h;
                        suites(&h.body, out);
                    }
                    suites(&t.orelse, out);
                    suites(&t.finalbody, out);
                }
                _ => {}
            }
        }
    }
    /// How a statement uses the instance `v`: the methods it calls on it, in order, and
    /// whether it uses it any other way (handed on, reached into, bound again).
    struct Uses<'v, 's> {
        v: &'v str,
        calls: Vec<&'s str>,
        other: bool,
    }
    impl<'s> Visitor<'s> for Uses<'_, 's> {
        fn visit_expr(&mut self, e: &'s Expr) {
            match e {
                // `svc.get_model().eval()`: what a method returns, used further.
                Expr::Attribute(a)
                    if matches!(a.value.as_ref(), Expr::Call(c)
                        if matches!(c.func.as_ref(), Expr::Attribute(f)
                            if matches!(f.value.as_ref(), Expr::Name(n) if n.id.as_str() == self.v))) =>
                {
                    self.other = true;
                }
                Expr::Call(c) => {
                    if let Expr::Attribute(a) = c.func.as_ref() {
                        if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == self.v) {
                            for x in &c.arguments.args {
                                self.visit_expr(x);
                            }
                            for k in &c.arguments.keywords {
                                self.visit_expr(&k.value);
                            }
                            self.calls.push(a.attr.id.as_str());
                            return;
                        }
                    }
                }
                Expr::Name(n) if n.id.as_str() == self.v => self.other = true,
                _ => {}
            }
            visitor::walk_expr(self, e);
        }
    }
    // `AirflowService(cfg).export_onnx(path)`: called on the instance as it is made.
    let direct = ch.bodies[0].iter().any(|st| {
        crate::rules::any_sub_stmt_expr(st, |e| {
            matches!(e, Expr::Call(c) if matches!(c.func.as_ref(), Expr::Attribute(a)
                if a.attr.id.as_str() == name
                    && matches!(a.value.as_ref(), Expr::Call(k)
                        if matches!(k.func.as_ref(), Expr::Name(f) if f.id.as_str() == class))))
        })
    });
    if direct {
        return Some(format!("{class}(...)"));
    }
    let mut all = Vec::new();
    suites(ch.bodies[0], &mut all);
    for body in all {
        for (i, st) in body.iter().enumerate() {
            // `svc = AirflowService(cfg)`, also annotated (`svc: AirflowService = ...`).
            let (v, value) = match st {
                Stmt::Assign(a) => match &a.targets[..] {
                    [Expr::Name(v)] => (v, a.value.as_ref()),
                    _ => continue,
                },
                Stmt::AnnAssign(a) => match (a.target.as_ref(), a.value.as_deref()) {
                    (Expr::Name(v), Some(value)) => (v, value),
                    _ => continue,
                },
                _ => continue,
            };
            let Expr::Call(c) = value else {
                continue;
            };
            if !matches!(c.func.as_ref(), Expr::Name(f) if f.id.as_str() == class) {
                continue;
            }
            for later in &body[i + 1..] {
                let mut uses = Uses {
                    v: v.id.as_str(),
                    calls: Vec::new(),
                    other: false,
                };
                uses.visit_stmt(later);
                if let Some(k) = uses.calls.iter().position(|m| *m == name) {
                    if uses.calls[..k].iter().all(|m| neutral(m)) {
                        return Some(v.id.to_string());
                    }
                }
                if uses.other || !uses.calls.iter().all(|m| neutral(m)) {
                    break;
                }
            }
        }
    }
    None
}

/// The attributes a statement stores on `self` (`self.x = ...`, `self.a, self.b = ...`).
fn collect_self_stores<'s>(s: &'s Stmt, out: &mut crate::HashSet<&'s str>) {
    struct Stores<'o, 's>(&'o mut crate::HashSet<&'s str>);
    impl<'s> Visitor<'s> for Stores<'_, 's> {
        fn visit_expr(&mut self, e: &'s Expr) {
            if let Expr::Attribute(a) = e {
                if matches!(a.ctx, ast::ExprContext::Store) && crate::checker::is_self(&a.value) {
                    self.0.insert(a.attr.id.as_str());
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    Stores(out).visit_stmt(s);
}

/// Whether a statement uses `self.<name>` other than by calling it (`hooks.append(self.export)`).
fn method_used_as_value(s: &Stmt, name: &str) -> bool {
    struct Uses<'n> {
        name: &'n str,
        found: bool,
    }
    impl<'a> Visitor<'a> for Uses<'_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            match e {
                Expr::Call(c)
                    if matches!(c.func.as_ref(), Expr::Attribute(a)
                    if a.attr.id.as_str() == self.name && crate::checker::is_self(&a.value)) =>
                {
                    for a in &c.arguments.args {
                        self.visit_expr(a);
                    }
                    for k in &c.arguments.keywords {
                        self.visit_expr(&k.value);
                    }
                    return;
                }
                Expr::Attribute(a)
                    if a.attr.id.as_str() == self.name && crate::checker::is_self(&a.value) =>
                {
                    self.found = true;
                }
                _ => {}
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut u = Uses { name, found: false };
    u.visit_stmt(s);
    u.found
}

/// The offsets of the calls `self.<name>(...)` in a body (its nested blocks too, not nested
/// functions).
fn call_sites(body: &[Stmt], name: &str) -> Vec<TextSize> {
    let mut stmts = Vec::new();
    crate::checker::flatten(body, &mut stmts);
    let mut calls = Vec::new();
    for s in stmts {
        for e in own_exprs(s) {
            collect_calls(e, &mut calls);
        }
    }
    calls
        .into_iter()
        .filter(|c| {
            matches!(c.func.as_ref(), Expr::Attribute(a)
                if a.attr.id.as_str() == name && crate::checker::is_self(&a.value))
        })
        .map(|c| c.range().start())
        .collect()
}

/// What a method's statements leave `self.<attr>` in, as far as they can be followed.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum SelfMode {
    /// Nothing in the method changes it.
    Unset,
    Training,
    Eval,
    /// Something the method does cannot be followed.
    Unknown,
}

/// What [`ModeContext::mode`] needs to know of the class and the file, and the modes of the
/// class's methods already followed (each is followed once per export: a chain of helpers
/// calling each other several times stays linear).
struct ModeContext<'c> {
    attr: &'c str,
    methods: &'c crate::HashMap<String, &'c [Stmt]>,
    stored: &'c crate::HashSet<&'c str>,
    mode_helpers: &'c crate::HashSet<&'c str>,
    memo: std::cell::RefCell<crate::HashMap<&'c str, SelfMode>>,
}

/// Names whose words say they may switch a module's mode (`self.prepare_for_export()`,
/// `freeze(model)`; not `log_model`, `upload_artifacts`).
fn names_a_mode_change(name: &str) -> bool {
    name.to_ascii_lowercase().split('_').any(|w| {
        matches!(
            w,
            "eval"
                | "train"
                | "freeze"
                | "export"
                | "prepare"
                | "deploy"
                | "infer"
                | "inference"
                | "fuse"
                | "mode"
                | "setup"
                | "load"
                | "restore"
                | "switch"
        )
    })
}

impl<'c> ModeContext<'c> {
    /// The mode `self.<attr>` is left in by `body` (before `before`, when given).
    fn mode(
        &self,
        body: &'c [Stmt],
        before: Option<TextSize>,
        stack: &mut Vec<&'c str>,
    ) -> SelfMode {
        let mut mode = SelfMode::Unset;
        self.walk(
            body,
            before.unwrap_or(TextSize::new(u32::MAX)),
            stack,
            &mut mode,
            &mut false,
        );
        mode
    }

    /// Whether a method puts `self.<attr>` in training mode somewhere (`fit`, or a validation
    /// step that ends in `train()`).
    fn trains(&self, body: &'c [Stmt], stack: &mut Vec<&'c str>) -> bool {
        let mut mode = SelfMode::Unset;
        let mut trained = false;
        self.walk(
            body,
            TextSize::new(u32::MAX),
            stack,
            &mut mode,
            &mut trained,
        );
        trained
    }

    /// The mode of a method of the class called from another, followed once.
    fn method_mode(&self, name: &'c str, body: &'c [Stmt], stack: &mut Vec<&'c str>) -> SelfMode {
        if stack.contains(&name) {
            return SelfMode::Unset;
        }
        if let Some(m) = self.memo.borrow().get(name) {
            return *m;
        }
        // A generator (`@contextmanager def eval_mode(self)`) runs in parts around the
        // caller's block.
        let generator = body.iter().any(|s| {
            crate::rules::any_sub_stmt_expr(s, |e| matches!(e, Expr::Yield(_) | Expr::YieldFrom(_)))
        });
        let mode = if generator {
            SelfMode::Unknown
        } else {
            stack.push(name);
            let mode = self.mode(body, None, stack);
            stack.pop();
            mode
        };
        // Remembered even when a call back into a method being followed was cut (mutual
        // recursion): following each method once keeps a class of helpers that call each other
        // linear, at the price of an answer read from one order of the calls.
        self.memo.borrow_mut().insert(name, mode);
        mode
    }

    /// Follows `body`'s statements before `at` in order, updating `mode` (and `trained` when
    /// any step puts the module in training mode).
    fn walk(
        &self,
        body: &'c [Stmt],
        at: TextSize,
        stack: &mut Vec<&'c str>,
        mode: &mut SelfMode,
        trained: &mut bool,
    ) {
        use crate::checker::self_attr;
        let holds = |b: &[Stmt]| holds_offset(b, at);
        for s in body {
            if s.range().start() >= at {
                break;
            }
            for e in own_exprs(s) {
                self.expr(e, at, stack, mode, trained);
            }
            match s {
                // `self.model = load(ckpt)`, `self.model, meta = load(ckpt)`: another module
                // (not `self.model = self.model.cpu()`).
                Stmt::Assign(a) => {
                    let stores = a.targets.iter().any(|t| match t {
                        Expr::Tuple(ast::ExprTuple { elts, .. })
                        | Expr::List(ast::ExprList { elts, .. }) => {
                            elts.iter().any(|e| self_attr(e) == Some(self.attr))
                        }
                        t => self_attr(t) == Some(self.attr),
                    });
                    if stores
                        && !(matches!(a.value.as_ref(), Expr::Call(_))
                            && on_module(&a.value, self.attr))
                    {
                        *mode = SelfMode::Unknown;
                    }
                }
                Stmt::AnnAssign(a) if self_attr(&a.target) == Some(self.attr) => {
                    *mode = SelfMode::Unknown;
                }
                // Clauses are alternatives: the one holding `at` is followed; otherwise the
                // mode after the `if` is theirs when they agree, unknown when they differ.
                Stmt::If(i) => {
                    let clauses: Vec<&'c [Stmt]> = std::iter::once(&i.body[..])
                        .chain(i.elif_else_clauses.iter().map(|c| &c.body[..]))
                        .collect();
                    let complete = i.elif_else_clauses.last().is_some_and(|c| c.test.is_none());
                    self.alternatives(&clauses, complete, at, holds, stack, mode, trained);
                }
                Stmt::Match(m) => {
                    let clauses: Vec<&'c [Stmt]> = m.cases.iter().map(|c| &c.body[..]).collect();
                    // `case _:` (unguarded) makes the cases complete.
                    let complete = m.cases.last().is_some_and(|c| {
                        c.guard.is_none()
                            && matches!(&c.pattern, ast::Pattern::MatchAs(p) if p.pattern.is_none())
                    });
                    self.alternatives(&clauses, complete, at, holds, stack, mode, trained);
                }
                // A loop's body taken once, then its `else`. A loop left by `break` may leave
                // it in the mode of any point of its body; an `else` that exits the method
                // (`return`, `raise`) does not reach what follows.
                Stmt::For(ast::StmtFor { body, orelse, .. })
                | Stmt::While(ast::StmtWhile { body, orelse, .. }) => {
                    let before = *mode;
                    self.walk(body, at, stack, mode, trained);
                    if !holds(body) && *mode != before && breaks(body) {
                        *mode = SelfMode::Unknown;
                    }
                    if holds(orelse) || !crate::checker::always_exits(orelse) {
                        self.walk(orelse, at, stack, mode, trained);
                    }
                }
                Stmt::With(w) => self.walk(&w.body, at, stack, mode, trained),
                Stmt::Try(t) => {
                    self.walk(&t.body, at, stack, mode, trained);
                    let handlers: Vec<&'c [Stmt]> = t
                        .handlers
                        .iter()
                        .map(|h| {
                            let ast::ExceptHandler::ExceptHandler(h) = h;
                            &h.body[..]
                        })
                        .collect();
                    if let Some(h) = handlers.iter().find(|h| holds(h)) {
                        self.walk(h, at, stack, mode, trained);
                    }
                    if holds(&t.orelse) || !crate::checker::always_exits(&t.orelse) {
                        self.walk(&t.orelse, at, stack, mode, trained);
                    }
                    self.walk(&t.finalbody, at, stack, mode, trained);
                }
                _ => {}
            }
        }
    }

    /// An `if`'s clauses (or a `match`'s cases): see [`ModeContext::walk`].
    #[allow(clippy::too_many_arguments)]
    fn alternatives(
        &self,
        clauses: &[&'c [Stmt]],
        complete: bool,
        at: TextSize,
        holds: impl Fn(&[Stmt]) -> bool,
        stack: &mut Vec<&'c str>,
        mode: &mut SelfMode,
        trained: &mut bool,
    ) {
        if let Some(c) = clauses.iter().find(|c| holds(c)) {
            return self.walk(c, at, stack, mode, trained);
        }
        let mut after: Option<SelfMode> = None;
        let mut agree = true;
        // A clause that leaves the method (`return`, `raise`) does not reach what follows.
        for c in clauses.iter().filter(|c| !crate::checker::always_exits(c)) {
            let mut m = *mode;
            self.walk(c, at, stack, &mut m, trained);
            match after {
                None => after = Some(m),
                Some(a) if a != m => agree = false,
                Some(_) => {}
            }
        }
        // Without an `else`, the mode may also pass through unchanged.
        if !complete && after.is_some_and(|a| a != *mode) {
            agree = false;
        }
        *mode = match (agree, after) {
            (true, Some(a)) => a,
            (true, None) => *mode,
            (false, _) => SelfMode::Unknown,
        };
    }

    /// The steps of one expression, in the order its calls finish.
    fn expr(
        &self,
        e: &'c Expr,
        at: TextSize,
        stack: &mut Vec<&'c str>,
        mode: &mut SelfMode,
        trained: &mut bool,
    ) {
        use crate::checker::{is_self, self_attr};
        let mut calls = Vec::new();
        collect_calls(e, &mut calls);
        calls.sort_by_key(|c| c.range().end());
        for c in calls {
            if c.range().end() > at {
                continue;
            }
            let mut step = SelfMode::Unset;
            if let Expr::Attribute(a) = c.func.as_ref() {
                let m = a.attr.id.as_str();
                // `self.train()` in a class with its own `train` method calls that method.
                let own = is_self(&a.value)
                    .then(|| self.methods.get_key_value(m))
                    .flatten();
                if own.is_none() && on_module(&a.value, self.attr) {
                    let flag = match (&c.arguments.args[..], &c.arguments.keywords[..]) {
                        ([], []) => Some(true),
                        ([Expr::BooleanLiteral(b)], []) => Some(b.value),
                        ([], [k]) if k.arg.as_ref().is_some_and(|n| n.as_str() == "mode") => {
                            match &k.value {
                                Expr::BooleanLiteral(b) => Some(b.value),
                                _ => None,
                            }
                        }
                        _ => None,
                    };
                    step = match (m, flag) {
                        ("eval" | "freeze", _) if c.arguments.args.is_empty() => SelfMode::Eval,
                        ("train", Some(true)) => SelfMode::Training,
                        ("train", Some(false)) => SelfMode::Eval,
                        // `self.model.train(training)`: set, to what is not known.
                        ("train", None) => SelfMode::Unknown,
                        _ => SelfMode::Unset,
                    };
                }
                if let Some((key, body)) = own {
                    step = self.method_mode(key.as_str(), body, stack);
                } else if is_self(&a.value)
                    && !matches!(m, "eval" | "train" | "freeze")
                    && m != self.attr
                    && !self.stored.contains(m)
                    && names_a_mode_change(m)
                {
                    // An inherited method named for a mode change.
                    step = SelfMode::Unknown;
                }
            }
            // `freeze(self.model)`: a function that switches modes, handed the module (not
            // `print(self.model)`, `wandb.watch(self.model)` or another export).
            let handed = c
                .arguments
                .args
                .iter()
                .chain(c.arguments.keywords.iter().map(|k| &k.value))
                .any(|x| self_attr(x) == Some(self.attr) || is_self(x));
            if handed && step == SelfMode::Unset {
                let callee = match c.func.as_ref() {
                    Expr::Name(n) => Some(n.id.as_str()),
                    Expr::Attribute(a) => Some(a.attr.id.as_str()),
                    _ => None,
                };
                if callee.is_some_and(|f| {
                    f != "export" && (self.mode_helpers.contains(f) || names_a_mode_change(f))
                }) {
                    step = SelfMode::Unknown;
                }
            }
            if step == SelfMode::Training {
                *trained = true;
            }
            if step != SelfMode::Unset {
                *mode = step;
            }
        }
    }
}

/// Whether a block always leaves the function: it ends in `return`, `raise` or `sys.exit(...)`,
/// or in an `if` whose every clause (with an `else`) does.
fn leaves(body: &[Stmt]) -> bool {
    match body.last() {
        Some(Stmt::Return(_) | Stmt::Raise(_)) => true,
        Some(Stmt::Expr(e)) => matches!(e.value.as_ref(), Expr::Call(c) if match c.func.as_ref() {
            Expr::Name(n) => matches!(n.id.as_str(), "exit" | "quit"),
            Expr::Attribute(a) => matches!(a.attr.id.as_str(), "exit" | "_exit")
                && matches!(a.value.as_ref(), Expr::Name(m) if matches!(m.id.as_str(), "sys" | "os")),
            _ => false,
        }),
        Some(Stmt::If(i)) => {
            i.elif_else_clauses.last().is_some_and(|c| c.test.is_none())
                && leaves(&i.body)
                && i.elif_else_clauses.iter().all(|c| leaves(&c.body))
        }
        _ => false,
    }
}

/// Whether a loop's body has a `break` of its own (not of a nested loop).
fn breaks(body: &[Stmt]) -> bool {
    body.iter().any(|s| match s {
        Stmt::Break(_) => true,
        Stmt::If(i) => breaks(&i.body) || i.elif_else_clauses.iter().any(|c| breaks(&c.body)),
        Stmt::With(w) => breaks(&w.body),
        Stmt::Try(t) => {
            breaks(&t.body)
                || breaks(&t.orelse)
                || breaks(&t.finalbody)
                || t.handlers.iter().any(|h| {
                    let ast::ExceptHandler::ExceptHandler(h) = h;
                    breaks(&h.body)
                })
        }
        Stmt::Match(m) => m.cases.iter().any(|c| breaks(&c.body)),
        _ => false,
    })
}

/// Whether an expression is `self.<attr>` (or `self`), or a chain of the module's methods that
/// return it (`self.model.cpu()`, `self.model.requires_grad_(False)`).
fn on_module(e: &Expr, attr: &str) -> bool {
    use crate::checker::{is_self, self_attr};
    match e {
        Expr::Call(c) => match c.func.as_ref() {
            Expr::Attribute(a)
                if moves(a.attr.id.as_str()) || matches!(a.attr.id.as_str(), "eval" | "train") =>
            {
                on_module(&a.value, attr)
            }
            _ => false,
        },
        e => self_attr(e) == Some(attr) || is_self(e),
    }
}

/// The calls in an expression, not inside lambdas (which run when called, elsewhere).
fn collect_calls<'e>(e: &'e Expr, out: &mut Vec<&'e ast::ExprCall>) {
    struct Calls<'o, 'e>(&'o mut Vec<&'e ast::ExprCall>);
    impl<'e> Visitor<'e> for Calls<'_, 'e> {
        fn visit_expr(&mut self, e: &'e Expr) {
            if matches!(e, Expr::Lambda(_)) {
                return;
            }
            if let Expr::Call(c) = e {
                self.0.push(c);
            }
            visitor::walk_expr(self, e);
        }
    }
    Calls(out).visit_expr(e);
}

/// What the statements of the enclosing function before `at` do to a local `name` (or to its
/// submodule `sub`).
#[derive(Clone, Copy, PartialEq)]
struct Mode {
    /// It is bound in this scope (assigned, or a `for` target).
    assigned: bool,
    /// It was last put in eval mode, not back in training mode.
    evaluated: bool,
}

fn mode_before(ch: &Checker, name: &str, sub: Option<&str>, at: TextSize) -> Mode {
    match ch.bodies.last().copied() {
        Some(body) => mode_in(ch, body, name, sub, at),
        None => Mode {
            assigned: false,
            evaluated: false,
        },
    }
}

/// When the model an export receives is a parameter `name` of a module-level function of this
/// file, the first call of that function in the file that passes it a module left in training
/// mode: the caller's name and what it passes. `None` when every caller evaluates it, or when
/// no caller in the file is seen (the module may come from anywhere).
fn caller_without_eval(ch: &Checker, name: &str) -> Option<(String, String)> {
    let module = *ch.bodies.first()?;
    let body = *ch.bodies.last()?;
    let f = module.iter().find_map(|s| match s {
        Stmt::FunctionDef(f) if std::ptr::eq(f.body.as_ptr(), body.as_ptr()) => Some(f),
        _ => None,
    })?;
    let position = f
        .parameters
        .posonlyargs
        .iter()
        .chain(&f.parameters.args)
        .position(|p| p.parameter.name.id.as_str() == name);
    let keyword_only = f
        .parameters
        .kwonlyargs
        .iter()
        .any(|p| p.parameter.name.id.as_str() == name);
    if position.is_none() && !keyword_only {
        return None;
    }
    struct Calls<'a, 'n> {
        callee: &'n str,
        found: Vec<&'a ast::ExprCall>,
    }
    impl<'a> Visitor<'a> for Calls<'a, '_> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if !matches!(s, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                visitor::walk_stmt(self, s);
            }
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                if matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == self.callee) {
                    self.found.push(c);
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let callers = std::iter::once(("the module's top level".to_string(), module)).chain(
        crate::checker::functions_and_methods(module)
            .map(|(_, g)| (format!("{}()", g.name.id), &g.body[..])),
    );
    for (caller, caller_body) in callers {
        let mut calls = Calls {
            callee: f.name.id.as_str(),
            found: Vec::new(),
        };
        for s in caller_body {
            calls.visit_stmt(s);
        }
        for c in calls.found {
            let arg = match position {
                Some(i) if i < c.arguments.args.len() => &c.arguments.args[i],
                _ => match keyword(c, name) {
                    Some(k) => &k.value,
                    None => continue,
                },
            };
            // `export_cab_model(net.cpu())`: moving or casting a module returns the module,
            // in the mode it was in.
            let arg = moved(arg).unwrap_or(arg);
            if let Expr::Name(n) = arg {
                let mode = mode_in(ch, caller_body, n.id.as_str(), None, c.range().start());
                if mode.assigned && !mode.evaluated {
                    return Some((caller, n.id.to_string()));
                }
            }
            // `export_serve(train_serve())`: a function of the file that ends returning a
            // module it built and left in training mode.
            if let Expr::Call(inner) = arg {
                if returns_training_module(ch, module, inner) {
                    return Some((caller, ch.text(arg.range()).to_string()));
                }
            }
            // `export_quick(DamageUNetTTA().to(DEV))`: a module built in the call, in training
            // mode unless the chain evaluates it or it wraps a module already in eval mode.
            if let Expr::Call(built) = chain_start(arg) {
                // `Wrapper(model)` after `model.eval()`; `Wrapper(load(p))` with `load` ending in
                // `.eval()`.
                let wraps_evaluated = built.arguments.args.iter().any(|a| match a {
                    Expr::Name(n) => {
                        mode_in(ch, caller_body, n.id.as_str(), None, c.range().start()).evaluated
                    }
                    Expr::Call(_) => chain_evals(a) || helper_evals(ch, a),
                    _ => false,
                });
                if is_constructor(built)
                    && !chain_evals(arg)
                    && !has_eval(arg, Receiver::Any)
                    && !wraps_evaluated
                {
                    return Some((caller, ch.text(arg.range()).to_string()));
                }
            }
        }
    }
    None
}

/// The function being checked, when it moves or casts its parameter `name` in its own body,
/// unconditionally, before `at` (`model = model.cpu()`), and nothing in the file uses it.
fn prepared_without_callers(ch: &Checker, name: &str, at: TextSize) -> Option<String> {
    let module = ch.bodies.first()?;
    let body = ch.bodies.last()?;
    let f = crate::checker::functions_and_methods(module)
        .map(|(_, f)| f)
        .find(|f| std::ptr::eq(f.body.as_ptr(), body.as_ptr()))?;
    let moves = |target: &Expr, value: &Expr| {
        matches!(target, Expr::Name(t) if t.id.as_str() == name)
            && matches!(moved(value), Some(Expr::Name(n)) if n.id.as_str() == name)
    };
    // `model = model.cpu()`, `model: nn.Module = model.cpu()`.
    let moved_here = body
        .iter()
        .take_while(|s| s.range().end() <= at)
        .any(|s| match s {
            Stmt::Assign(a) => matches!(&a.targets[..], [t] if moves(t, &a.value)),
            Stmt::AnnAssign(a) => a.value.as_ref().is_some_and(|v| moves(&a.target, v)),
            _ => false,
        });
    if !moved_here {
        return None;
    }
    // Used anywhere as a value (called, put in a table of exporters, wrapped in a partial): it
    // has callers.
    struct Used<'n> {
        name: &'n str,
        found: bool,
    }
    impl<'a> Visitor<'a> for Used<'_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            self.found |= matches!(e, Expr::Name(n) if n.id.as_str() == self.name);
            visitor::walk_expr(self, e);
        }
    }
    let name_of_fn = f.name.id.as_str();
    let mut used = Used {
        name: name_of_fn,
        found: false,
    };
    for s in module.iter() {
        used.visit_stmt(s);
    }
    (!used.found).then(|| name_of_fn.to_string())
}

/// The module-level function `name`: its last definition, the one Python calls.
fn last_def<'m>(module: &'m [Stmt], name: &str) -> Option<&'m ast::StmtFunctionDef> {
    module.iter().rev().find_map(|s| match s {
        Stmt::FunctionDef(d) if d.name.id.as_str() == name => Some(d),
        _ => None,
    })
}

/// Whether `call` calls a function of the module whose last statement returns a name it bound
/// to a module and left in training mode (`snet = ServeNet()` ... `return snet`, with no
/// `snet.eval()`).
fn returns_training_module(ch: &Checker, module: &[Stmt], call: &ast::ExprCall) -> bool {
    let Expr::Name(f) = call.func.as_ref() else {
        return false;
    };
    let Some(def) = last_def(module, f.id.as_str()) else {
        return false;
    };
    let Some(Stmt::Return(ast::StmtReturn {
        value: Some(v),
        range,
        ..
    })) = def.body.last()
    else {
        return false;
    };
    let Expr::Name(n) = v.as_ref() else {
        return false;
    };
    // Built there (`snet = ServeNet()`), not handed in (`model = model.to(device)` of a
    // parameter keeps the caller's mode) nor loaded (`from_pretrained` evaluates).
    let name = n.id.as_str();
    if def.parameters.iter().any(|p| p.name().id.as_str() == name)
        || !crate::rules::bound_values(&def.body, name)
            .iter()
            .any(|v| matches!(chain_start(v), Expr::Call(c) if is_constructor(c)))
    {
        return false;
    }
    let mode = mode_in(ch, &def.body, name, None, range.start());
    mode.assigned && !mode.evaluated
}

fn mode_in<'a>(
    ch: &Checker,
    body: &'a [Stmt],
    name: &'a str,
    sub: Option<&str>,
    at: TextSize,
) -> Mode {
    mode_in_depth(
        ch,
        body,
        name,
        sub,
        at,
        0,
        &std::cell::Cell::new(SUBMODULE_WALKS),
    )
}

/// How deep [`mode_in`] follows the modules a submodule is taken from (`blk = enc.block0`
/// after `enc = model.encoder`): names taken from each other in turns (`a = b.fc; b = a.fc;
/// ...`) would be followed in exponential time.
const SUBMODULE_DEPTH: u8 = 3;
/// How many such walks one question may take in all: three deep, a long chain of names taken in
/// turns would still cost the cube of its length.
const SUBMODULE_WALKS: u32 = 64;

fn mode_in_depth<'a>(
    ch: &Checker,
    body: &'a [Stmt],
    name: &'a str,
    sub: Option<&str>,
    at: TextSize,
    depth: u8,
    walks: &std::cell::Cell<u32>,
) -> Mode {
    let mut mode = Mode {
        assigned: false,
        evaluated: false,
    };
    let mut stmts = Vec::new();
    collect_reaching(body, at, &mut stmts);
    // Modules built around `name` (`wrapped = TowerWrapper(model, norm)`): `wrapped.eval()`
    // puts `name`, a submodule, in eval mode too. Not averaging wrappers, which hold a copy
    // (`AveragedModel(model)`, timm's `ModelEmaV2(model)`).
    let copies = |c: &ast::ExprCall| {
        let class = match c.func.as_ref() {
            Expr::Name(n) => n.id.as_str(),
            Expr::Attribute(a) => a.attr.id.as_str(),
            _ => "",
        }
        .to_ascii_lowercase();
        ["ema", "averaged", "swa", "copy", "teacher"]
            .iter()
            .any(|w| class.contains(w))
    };
    let step = |s: &'a Stmt, mode: &mut Mode, holders: &mut Vec<&'a str>| {
        if let Stmt::Assign(a) = s {
            let wraps = matches!(chain_start(&a.value), Expr::Call(c) if is_constructor(c)
                && !copies(c)
                && c.arguments.args.iter().any(|x| matches!(x, Expr::Name(n) if n.id.as_str() == name)));
            if let (true, [Expr::Name(h)]) = (wraps, &a.targets[..]) {
                if h.id.as_str() != name {
                    holders.push(h.id.as_str());
                    mode.evaluated |= chain_evals(&a.value);
                }
            }
        }
        // `for name, model in candidates.items(): ... export(model, ...)`: built in this scope too.
        if let Stmt::For(f) = s {
            if mentions(&f.target, &[name.to_string()]) {
                mode.assigned = true;
            }
            // `for m in (model, ema): m.eval()`: each module of the literal is put in eval mode.
            let listed = match f.iter.as_ref() {
                Expr::List(ast::ExprList { elts, .. })
                | Expr::Tuple(ast::ExprTuple { elts, .. }) => elts
                    .iter()
                    .any(|e| matches!(e, Expr::Name(n) if n.id.as_str() == name)),
                _ => false,
            };
            // `for m in models.values(): m.eval()` (also `for m in models:`, `for k, m in
            // models.items():`): every module the container holds.
            let over_container = match f.iter.as_ref() {
                Expr::Name(n) => n.id.as_str() == name,
                Expr::Call(c) => {
                    c.arguments.is_empty()
                        && matches!(c.func.as_ref(), Expr::Attribute(a)
                        if matches!(a.attr.id.as_str(), "values" | "items")
                            && matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == name))
                }
                _ => false,
            };
            let target = match f.target.as_ref() {
                Expr::Tuple(ast::ExprTuple { elts, .. }) if over_container => elts.last(),
                t => Some(t),
            };
            // Read only when every round evaluates: no `continue`, `break` or `train()` of it.
            let every_round = |t: &str| {
                let mut inner = Vec::new();
                crate::checker::flatten(&f.body, &mut inner);
                !inner.iter().any(|s| match s {
                    Stmt::Continue(_) | Stmt::Break(_) => true,
                    Stmt::Expr(e) => has_train(&e.value, t),
                    _ => false,
                })
            };
            let over_container = match target {
                Some(Expr::Name(t)) => over_container && every_round(t.id.as_str()),
                _ => false,
            };
            if let (true, Some(Expr::Name(t))) = (listed || over_container, target) {
                let t = t.id.as_str();
                if f.body
                    .iter()
                    .any(|b| matches!(b, Stmt::Expr(e) if has_eval(&e.value, Receiver::Name(t))))
                {
                    mode.evaluated = true;
                } else if f
                    .body
                    .iter()
                    .any(|b| matches!(b, Stmt::Expr(e) if has_train(&e.value, t)))
                {
                    mode.evaluated = false;
                }
            }
        }
        // `model = Net()`, also annotated: `model: Net = NetHiRes() if hires else Net()`.
        let assignment: Option<(&'a [Expr], &'a Expr)> = match s {
            Stmt::Assign(a) => Some((&a.targets[..], a.value.as_ref())),
            Stmt::AnnAssign(a) => a
                .value
                .as_deref()
                .map(|v| (std::slice::from_ref(a.target.as_ref()), v)),
            _ => None,
        };
        if let Some((targets, value)) = assignment {
            // `fire = models["fire_risk"]` with `models = {"fire_risk": load(FireNet(), ckpt),
            // ...}`: the entry's value.
            let value = dict_entry(body, value)
                .filter(|(d, _)| !dict_used(&stmts, d, s.range().start()))
                .map_or(value, |(_, v)| v);
            // `model, meta = load_perfume(ckpt)`: bound by unpacking a helper's result too.
            let unpacked = |t: &Expr| match t {
                Expr::Tuple(ast::ExprTuple { elts, .. })
                | Expr::List(ast::ExprList { elts, .. }) => {
                    elts.iter()
                        .any(|e| matches!(e, Expr::Name(n) if n.id.as_str() == name))
                        && matches!(value, Expr::Call(_))
                }
                _ => false,
            };
            if targets
                .iter()
                .any(|t| matches!(t, Expr::Name(t) if t.id.as_str() == name) || unpacked(t))
            {
                // `model = model.to(device)`: the same module, moved, in the mode it had; a
                // parameter stays the callers' to judge.
                let moved_itself =
                    matches!(moved(value), Some(Expr::Name(n)) if n.id.as_str() == name);
                mode.assigned |= !moved_itself;
                // `encoder = model.encoder` after `model.eval()`: a submodule of a module in
                // eval mode is in eval mode (or one put in it later, seen below).
                let submodule_of_evaluated = |root: &str| {
                    if depth >= SUBMODULE_DEPTH || walks.get() == 0 {
                        return false;
                    }
                    walks.set(walks.get() - 1);
                    mode_in_depth(ch, body, root, None, s.range().start(), depth + 1, walks)
                        .evaluated
                };
                // `module = model` after `model.eval()`: another name for a module in eval mode.
                // Read from the statements before, not followed further (a chain of names
                // bound to each other in turns would be followed in exponential time).
                let alias_of_evaluated = |other: &str| {
                    stmts
                        .iter()
                        .filter(|b| b.range().start() < s.range().start())
                        .any(|b| match b {
                            Stmt::Expr(e) => {
                                has_eval(&e.value, Receiver::Name(other))
                                    || (chain_evals(&e.value)
                                        && chain_root(&e.value) == Some(other))
                            }
                            Stmt::Assign(x) => {
                                matches!(&x.targets[..], [Expr::Name(t)] if t.id.as_str() == other)
                                    && (chain_evals(&x.value)
                                        || has_eval(&x.value, Receiver::NameOrCall(other)))
                            }
                            _ => false,
                        })
                };
                // What the value is another name for, moved or cast (`net = model.to("cpu")`),
                // on each side of a conditional expression (`net = model.module if
                // hasattr(model, "module") else model`): in eval mode when every side is.
                let mut sources = Vec::new();
                module_sources(value, &mut sources);
                let from_evaluated = !sources.is_empty()
                    && sources.iter().all(|v| match v {
                        Expr::Name(o) if o.id.as_str() != name => alias_of_evaluated(o.id.as_str()),
                        // `model.backbone`, `model.module.backbone`, `model.heads[1]`.
                        Expr::Attribute(_) | Expr::Subscript(_) => {
                            let mut root = *v;
                            while let Expr::Attribute(ast::ExprAttribute { value, .. })
                            | Expr::Subscript(ast::ExprSubscript { value, .. }) = root
                            {
                                root = value.as_ref();
                            }
                            matches!(root, Expr::Name(r) if r.id.as_str() != name
                                && submodule_of_evaluated(r.id.as_str()))
                        }
                        _ => false,
                    });
                let evaluated_now = has_eval(value, Receiver::NameOrCall(name))
                    || chain_evals(value)
                    || helper_evals(ch, value)
                    || from_evaluated;
                // `net = train(); check(net)` (which calls `net.eval()`), then `net = Net()`: a
                // new module, in training mode until put in eval mode itself. Not `model =
                // model.cuda()` or `model = torch.jit.script(model)`: the same module.
                // Only a module built anew (`Net()`, not `ema`, `get_model()`, a trace or a
                // copy of it) is known to be another, in training mode.
                let constructed = |e: &Expr| matches!(e, Expr::Call(c) if is_constructor(c));
                let built_anew = (constructed(value) || constructed(chain_start(value)))
                    && !mentions(value, &[name.to_string()]);
                mode.evaluated = evaluated_now
                    || (!built_anew && mode.evaluated && !helper_trains(ch, value, name));
                return;
            }
        }
        let mut exprs: Vec<&Expr> = Vec::new();
        match s {
            Stmt::Expr(e) => exprs.push(&e.value),
            Stmt::Assign(a) => exprs.push(&a.value),
            Stmt::With(w) => exprs.extend(w.items.iter().map(|i| &i.context_expr)),
            // `if validate(model, loader) < target: break`: the test runs before any clause
            // (of `a and b`, only `a` surely runs).
            Stmt::If(i) => exprs.push(match i.test.as_ref() {
                Expr::BoolOp(b) => &b.values[0],
                t => t,
            }),
            _ => {}
        }
        // `_load(model, ckpt).eval()` as a statement: the helper hands back the module it was
        // given (else the `.eval()` of a discarded result would do nothing).
        let handed_back = |e: &Expr| {
            matches!(s, Stmt::Expr(_))
                && chain_evals(e)
                && matches!(chain_start(e), Expr::Call(c) if matches!(c.func.as_ref(), Expr::Name(_))
                    && matches!(c.arguments.args.first(), Some(Expr::Name(n)) if n.id.as_str() == name))
        };
        let evals = exprs.iter().any(|e| {
            has_eval(e, Receiver::Name(name))
                || (chain_evals(e) && chain_root(e).is_some_and(|r| r == name))
                || handed_back(e)
                || (mentions(e, &[name.to_string()]) && helper_evals(ch, e))
                || sub.is_some_and(|attr| has_eval(e, Receiver::Attribute(name, attr)))
                || holders.iter().any(|h| {
                    has_eval(e, Receiver::Name(h))
                        || (chain_evals(e) && chain_root(e).is_some_and(|r| r == *h))
                })
        });
        // `model.eval()` then `model.train()` (to recalibrate batch norm): back in training;
        // so is a module built around it by `wrapped.train()`.
        if !evals
            && exprs.iter().any(|e| {
                has_train(e, name)
                    || holders.iter().any(|h| has_train(e, h))
                    || helper_trains(ch, e, name)
            })
        {
            mode.evaluated = false;
        }
        mode.evaluated |= evals;
    };
    let mut holders: Vec<&str> = Vec::new();
    // Names bound to the module's own flag (`was_training = model.training`), with where.
    let flags: Vec<(&str, TextSize)> = stmts
        .iter()
        .filter_map(|s| match s {
            Stmt::Assign(a) => match (&a.targets[..], a.value.as_ref()) {
                ([Expr::Name(t)], Expr::Attribute(f))
                    if f.attr.id.as_str() == "training"
                        && matches!(f.value.as_ref(), Expr::Name(n) if n.id.as_str() == name) =>
                {
                    Some((t.id.as_str(), s.range().end()))
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    // A flag read before the module was put back in training mode says nothing of it now.
    let trained_between = |from: TextSize, to: TextSize| {
        stmts.iter().any(|s| {
            from <= s.range().start()
                && s.range().start() < to
                && matches!(s, Stmt::Expr(e) if has_train(&e.value, name)
                    || helper_trains(ch, &e.value, name))
        })
    };
    let walk = Walk {
        ch,
        at,
        name,
        flags: &flags,
        trained_between: &trained_between,
        step: &step,
        loops: std::cell::Cell::new(0),
        literal: std::cell::Cell::new(None),
    };
    walk.walk(body, &mut Within::Nothing, &mut mode, &mut holders);
    mode
}

/// The modules a value is another name for: `model` in `model.to("cpu")`, both sides of `m.module
/// if hasattr(m, "module") else m`.
fn module_sources<'e>(e: &'e Expr, out: &mut Vec<&'e Expr>) {
    match unmoved(e) {
        Expr::If(x) => {
            module_sources(&x.body, out);
            module_sources(&x.orelse, out);
        }
        // `getattr(model, "module", model)`: a submodule of `model`, or the default.
        Expr::Call(c)
            if matches!(c.func.as_ref(), Expr::Name(f) if f.id.as_str() == "getattr")
                && c.arguments.args.len() == 3
                && c.arguments.keywords.is_empty() =>
        {
            out.push(&c.arguments.args[0]);
            module_sources(&c.arguments.args[2], out);
        }
        v => out.push(v),
    }
}

/// What an `if` tests of the module: its own flag (`if model.training:`, `if was_training:`, `if
/// not model.training:`), so that the clause taken when the flag is false, written or missing,
/// starts in eval mode; or whether it is a module at all (`if isinstance(model, nn.Module):`, `if
/// model is not None:`), so that a missing `else` never exports it.
#[derive(PartialEq)]
enum Guard {
    Training,
    NotTraining,
    IsModule,
}

/// The walk of [`mode_in`] over the statements before `at`, with what it needs of the name.
struct Walk<'w, 'a> {
    ch: &'w Checker<'w>,
    at: TextSize,
    name: &'w str,
    flags: &'w [(&'w str, TextSize)],
    /// Whether the module is put in training mode between two offsets.
    trained_between: &'w dyn Fn(TextSize, TextSize) -> bool,
    step: &'w dyn Fn(&'a Stmt, &mut Mode, &mut Vec<&'a str>),
    /// How many loops not holding `at` the walk is in (their bodies are read twice, up to
    /// [`LOOP_PASSES_DEPTH`] deep).
    loops: std::cell::Cell<u32>,
    /// The target of the literal loop being read and its value in this round.
    literal: std::cell::Cell<Option<(&'a str, &'a Expr)>>,
}

/// Loops nested deeper than this are read once (each level reads its body twice).
const LOOP_PASSES_DEPTH: u32 = 4;

impl<'a> Walk<'_, 'a> {
    fn guard(&self, test: &Expr) -> Option<Guard> {
        self.guard_at(test, test.range().start())
    }

    /// [`Walk::guard`] of a test at offset `at` (a flag read before it holds when the module was
    /// not put back in training mode in between).
    fn guard_at(&self, test: &Expr, at: TextSize) -> Option<Guard> {
        let is_name = |e: &Expr| matches!(e, Expr::Name(n) if n.id.as_str() == self.name);
        match test {
            Expr::Attribute(a) if a.attr.id.as_str() == "training" && is_name(&a.value) => {
                Some(Guard::Training)
            }
            Expr::Name(n) => self
                .flags
                .iter()
                .filter(|(f, set)| *f == n.id.as_str() && *set <= at)
                .map(|(_, set)| *set)
                .max()
                .filter(|set| !(self.trained_between)(*set, at))
                .map(|_| Guard::Training),
            // `if not model.training:`: the body is the path in eval mode.
            Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => match self.guard_at(&u.operand, at) {
                Some(Guard::Training) => Some(Guard::NotTraining),
                _ => None,
            },
            // `model.training or force_eval` is false only when the flag is; `not
            // model.training and ...` is true only when it is not.
            Expr::BoolOp(b) => {
                let want = match b.op {
                    ast::BoolOp::Or => Guard::Training,
                    ast::BoolOp::And => Guard::NotTraining,
                };
                b.values
                    .iter()
                    .any(|v| self.guard_at(v, at).is_some_and(|g| g == want))
                    .then_some(want)
            }
            // `model.training is True`, `was_training == False`.
            Expr::Compare(c)
                if matches!(&c.ops[..], [ast::CmpOp::Is | ast::CmpOp::Eq])
                    && matches!(self.guard_at(&c.left, at), Some(Guard::Training)) =>
            {
                match &c.comparators[..] {
                    [Expr::BooleanLiteral(b)] if b.value => Some(Guard::Training),
                    [Expr::BooleanLiteral(_)] => Some(Guard::NotTraining),
                    _ => None,
                }
            }
            // `isinstance(model, nn.Module)` (not `isinstance(model, str)`, a path or a module,
            // nor `nn.DataParallel`, a module either way).
            Expr::Call(c)
                if matches!(c.func.as_ref(), Expr::Name(f) if f.id.as_str() == "isinstance")
                    && c.arguments.args.first().is_some_and(is_name)
                    && (matches!(c.arguments.args.get(1), Some(Expr::Name(t)) if t.id.as_str() == "Module")
                        || matches!(c.arguments.args.get(1), Some(Expr::Attribute(t)) if t.attr.id.as_str() == "Module")) =>
            {
                Some(Guard::IsModule)
            }
            Expr::Compare(c)
                if is_name(&c.left)
                    && matches!(&c.ops[..], [ast::CmpOp::IsNot])
                    && matches!(&c.comparators[..], [Expr::NoneLiteral(_)]) =>
            {
                Some(Guard::IsModule)
            }
            _ => None,
        }
    }

    /// Runs `step` over the statements of `body` before `at`, as [`collect_reaching`] orders
    /// them, but with the clauses of an `if` (or the arms of a `match`) wholly before `at` as
    /// alternatives: the module is left in training mode after the `if` when it is so after one
    /// clause that can reach `at` (`if args.report: report(model)` evaluates only when asked;
    /// `if cam: net = NetV3() else: net = base` builds a module in training mode in one clause);
    /// a missing `else` (or a `match` with no catch-all arm) is a clause that does nothing,
    /// except after a test of its being a module (`if isinstance(model, nn.Module):
    /// model.eval()`); after a false test of the module's own flag (`if model.training:
    /// model.eval()`) the clauses that follow, written or missing, start in eval mode. A path on
    /// which the name is not bound here (a parameter replaced in one clause: `if model is None:
    /// model = Net().eval()`) leaves the callers to decide, as before the `if`. Loops are read
    /// by [`Walk::read_loop`].
    fn walk(
        &self,
        body: &'a [Stmt],
        within: &mut Within<'a>,
        mode: &mut Mode,
        holders: &mut Vec<&'a str>,
    ) {
        let at = self.at;
        let holds = |b: &[Stmt]| holds_offset(b, at);
        for s in body {
            if s.range().start() >= at {
                break;
            }
            (self.step)(s, mode, holders);
            // In a round of `for phase in ["train", "val"]:`, `model.train(phase == "train")`.
            if let (Some((target, value)), Stmt::Expr(e)) = (self.literal.get(), s) {
                if let Expr::Call(c) = e.value.as_ref() {
                    let decided = match (c.func.as_ref(), &c.arguments.args[..]) {
                        (Expr::Attribute(a), [arg])
                            if a.attr.id.as_str() == "train"
                                && matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == self.name) =>
                        {
                            decide(arg, target, value)
                        }
                        _ => None,
                    };
                    if let Some(training) = decided {
                        mode.evaluated = !training;
                    }
                }
            }
            // The clauses, each with whether it starts in eval mode and the test that takes it
            // (for the first clause of an `if`).
            let alternatives: Vec<(&'a [Stmt], bool, Option<&'a Expr>)> = match s {
                Stmt::If(i) => {
                    let mut clauses: Vec<&'a [Stmt]> = std::iter::once(&i.body[..])
                        .chain(i.elif_else_clauses.iter().map(|c| &c.body[..]))
                        .collect();
                    if let Some(b) = clauses.iter().find(|b| holds(b)) {
                        self.walk(b, within, mode, holders);
                        continue;
                    }
                    // In a round of `for phase in ["train", "val"]:`, `if phase == "train":`.
                    if let Some(k) = self.decided_clause(i) {
                        let b: &'a [Stmt] = k.map_or(&[], |k| clauses[k]);
                        vec![(b, false, None)]
                    } else {
                        let guard = self.guard(&i.test);
                        let is_module_test = i.elif_else_clauses.is_empty()
                            && matches!(guard, Some(Guard::IsModule));
                        if i.elif_else_clauses.last().is_none_or(|c| c.test.is_some())
                            && !is_module_test
                        {
                            clauses.push(&[]);
                        }
                        // Tests of the module's own flag: the clauses after one that is false are
                        // in eval mode, whatever they do (`else: log.info("already in eval
                        // mode")`), and so is one taken when a test says so (`if not
                        // model.training:`).
                        let tests: Vec<Option<&'a Expr>> = std::iter::once(Some(&*i.test))
                            .chain(i.elif_else_clauses.iter().map(|c| c.test.as_ref()))
                            .chain(std::iter::repeat(None))
                            .take(clauses.len())
                            .collect();
                        let mut flag_false = false;
                        let mut alternatives = Vec::with_capacity(clauses.len());
                        for (k, (b, test)) in clauses.into_iter().zip(tests).enumerate() {
                            let guard = test.and_then(|t| self.guard(t));
                            let in_eval = flag_false || matches!(guard, Some(Guard::NotTraining));
                            flag_false |= matches!(guard, Some(Guard::Training));
                            alternatives.push((b, in_eval, (k == 0).then_some(&*i.test)));
                        }
                        alternatives
                    }
                }
                Stmt::Match(m) => {
                    if let Some(c) = m.cases.iter().find(|c| holds(&c.body)) {
                        self.walk(&c.body, within, mode, holders);
                        continue;
                    }
                    let mut arms: Vec<&'a [Stmt]> = m.cases.iter().map(|c| &c.body[..]).collect();
                    if !m
                        .cases
                        .iter()
                        .any(|c| c.guard.is_none() && c.pattern.is_irrefutable())
                    {
                        arms.push(&[]);
                    }
                    arms.into_iter().map(|b| (b, false, None)).collect()
                }
                Stmt::With(w) => {
                    self.walk(&w.body, within, mode, holders);
                    continue;
                }
                Stmt::Try(t) => {
                    let before = *mode;
                    self.walk(&t.body, within, mode, holders);
                    let after_body = *mode;
                    // The body's own path, through `else:` when it completes; a round it ends
                    // (`try: load(); model.eval(); break`) ends after the `finally:`.
                    let mut normal = None;
                    let body_ends = ends_iteration(&t.body) && !holds(&t.body);
                    if body_ends {
                        let mut m = after_body;
                        self.walk(&t.finalbody, within, &mut m, holders);
                        within.end_round(&t.body, m, None);
                    } else {
                        let mut m = after_body;
                        self.walk(&t.orelse, within, &mut m, holders);
                        if ends_iteration(&t.orelse) && !holds(&t.orelse) {
                            self.walk(&t.finalbody, within, &mut m, holders);
                            within.end_round(&t.orelse, m, None);
                        } else if !leaves_function(self.ch, &t.orelse) {
                            normal = Some(m);
                        }
                    }
                    // The handlers, from any point of the body: one that ends a round of the
                    // loop being read (`except StopIteration: break`) is one of its ways out;
                    // one that falls through is read when the body's path does not.
                    let mut falls = Vec::new();
                    for h in &t.handlers {
                        let ast::ExceptHandler::ExceptHandler(h) = h;
                        if holds(&h.body) || leaves_function(self.ch, &h.body) {
                            continue;
                        }
                        let ends = ends_iteration(&h.body);
                        if !((ends && matches!(within, Within::Loop { .. }))
                            || (!ends && normal.is_none()))
                        {
                            continue;
                        }
                        let mut m = join(&[before, after_body]);
                        self.walk(&h.body, within, &mut m, holders);
                        if ends {
                            self.walk(&t.finalbody, within, &mut m, holders);
                            within.end_round(&h.body, m, None);
                        } else {
                            falls.push(m);
                        }
                    }
                    if let Some(m) = normal {
                        *mode = m;
                    } else if !falls.is_empty() {
                        *mode = join(&falls);
                    }
                    self.walk(&t.finalbody, within, mode, holders);
                    continue;
                }
                // A loop's body; within the body that holds `at`, a clause that ends the
                // iteration (`continue`, `break`) does not reach it; after a loop that does not
                // hold it, the module is in the mode of the loop's exits, read over two rounds.
                Stmt::For(ast::StmtFor {
                    body: b, orelse, ..
                })
                | Stmt::While(ast::StmtWhile {
                    body: b, orelse, ..
                }) => {
                    if holds(b) {
                        self.walk(b, &mut Within::LoopHolding, mode, holders);
                        continue;
                    }
                    *mode = self.read_loop(s, b, orelse, *mode, within, holders);
                    continue;
                }
                _ => continue,
            };
            let before = *mode;
            let mut ends: Vec<Mode> = Vec::new();
            for (b, in_eval, test) in alternatives {
                let ends_loop = ends_iteration(b);
                if leaves_function(self.ch, b)
                    || (ends_loop && matches!(within, Within::LoopHolding))
                {
                    continue;
                }
                let mut m = Mode {
                    evaluated: before.evaluated || in_eval,
                    ..before
                };
                self.walk(b, within, &mut m, holders);
                if ends_loop && matches!(within, Within::Loop { .. }) {
                    within.end_round(b, m, test.map(|t| (self.ch, t)));
                } else {
                    ends.push(m);
                }
            }
            if !ends.is_empty() {
                *mode = join(&ends);
            }
        }
    }

    /// The mode after a loop that does not hold `at`, entered in mode `first`: the join of its
    /// exits (`break`s, a `continue` that may come in the last round, the body's end unless it
    /// is a `while True:`) over two rounds, the second starting where the first ended or
    /// continued (`validate(model)` before `while True: if done: break; model.train(); ...`
    /// leaves the loop in training mode from the second round on). The loop's `else:` clause,
    /// read in `outer`, follows the exits that are not `break`s.
    fn read_loop(
        &self,
        s: &'a Stmt,
        body: &'a [Stmt],
        orelse: &'a [Stmt],
        first: Mode,
        outer: &mut Within<'a>,
        holders: &mut Vec<&'a str>,
    ) -> Mode {
        // `while True:`, `for step in itertools.count():`.
        let forever = match s {
            Stmt::While(w) => always_true(&w.test),
            Stmt::For(f) => matches!(f.iter.as_ref(), Expr::Call(c)
                if self.ch.qualify(&c.func).as_deref() == Some("itertools.count")),
            _ => false,
        };
        let last_round = match s {
            Stmt::For(f) => range_bound(&f.target, &f.iter),
            _ => None,
        };
        let depth = self.loops.get();
        self.loops.set(depth + 1);
        // `for phase in ["train", "val"]:`.
        let unrolled = match s {
            Stmt::For(f) => match (f.target.as_ref(), literal_elements(&f.iter)) {
                (Expr::Name(t), Some(values)) => Some((t.id.as_str(), values)),
                _ => None,
            },
            _ => None,
        };
        let (breaks, exits) = match unrolled {
            Some((target, values)) => self.unrolled_rounds(target, values, body, first, holders),
            None => self.two_rounds(body, forever, last_round, first, depth, holders),
        };
        self.loops.set(depth);
        let mut ends = breaks;
        if !exits.is_empty() {
            let mut m = join(&exits);
            self.walk(orelse, outer, &mut m, holders);
            if holds_offset(orelse, self.at)
                || !(leaves_function(self.ch, orelse) || ends_iteration(orelse))
            {
                ends.push(m);
            } else if ends_iteration(orelse) {
                outer.end_round(orelse, m, None);
            }
        }
        if ends.is_empty() {
            first
        } else {
            join(&ends)
        }
    }

    /// The modes at the `break`s and at the other ways out of a loop's body, read over two
    /// rounds, the second starting where the first ended or continued.
    fn two_rounds(
        &self,
        body: &'a [Stmt],
        forever: bool,
        last_round: Option<(&'a str, &'a Expr)>,
        first: Mode,
        depth: u32,
        holders: &mut Vec<&'a str>,
    ) -> (Vec<Mode>, Vec<Mode>) {
        let mut breaks: Vec<Mode> = Vec::new();
        let mut exits: Vec<Mode> = Vec::new();
        let mut start = first;
        for pass in 0..2 {
            let Round {
                breaks: mut broke,
                exits: mut out,
                rounds,
            } = self.one_round(body, forever, last_round, start, holders);
            breaks.append(&mut broke);
            exits.append(&mut out);
            if pass == 1 || rounds.is_empty() || depth >= LOOP_PASSES_DEPTH {
                break;
            }
            let next = join(&rounds);
            if next == first {
                break;
            }
            start = next;
        }
        (breaks, exits)
    }

    /// One round of a loop's body from mode `start`, with where it ends: the body's end leaves
    /// the loop unless it is a `while True:` going round, and starts the next round unless it is
    /// a `break`.
    fn one_round(
        &self,
        body: &'a [Stmt],
        forever: bool,
        last_round: Option<(&'a str, &'a Expr)>,
        start: Mode,
        holders: &mut Vec<&'a str>,
    ) -> Round {
        let mut within = Within::Loop {
            forever,
            last_round,
            breaks: Vec::new(),
            exits: Vec::new(),
            rounds: Vec::new(),
        };
        let mut mode = start;
        self.walk(body, &mut within, &mut mode, holders);
        let Within::Loop {
            mut breaks,
            mut exits,
            mut rounds,
            ..
        } = within
        else {
            unreachable!("the walk keeps its `Within`")
        };
        if ends_in_break(body) {
            breaks.push(mode);
        } else {
            rounds.push(mode);
            if !forever {
                exits.push(mode);
            }
        }
        Round {
            breaks,
            exits,
            rounds,
        }
    }

    /// [`Walk::two_rounds`] of `for target in ["train", "val"]:`, one round per value in order,
    /// with the tests of `target` against literals decided (`if phase == "train": model.train()
    /// else: model.eval()` leaves the loop in eval mode).
    fn unrolled_rounds(
        &self,
        target: &'a str,
        values: &'a [Expr],
        body: &'a [Stmt],
        first: Mode,
        holders: &mut Vec<&'a str>,
    ) -> (Vec<Mode>, Vec<Mode>) {
        let saved = self.literal.get();
        let mut breaks = Vec::new();
        let mut starts = vec![first];
        for value in values {
            if starts.is_empty() {
                break;
            }
            self.literal.set(Some((target, value)));
            let Round {
                breaks: mut broke,
                rounds,
                ..
            } = self.one_round(body, false, None, join(&starts), holders);
            breaks.append(&mut broke);
            starts = rounds;
        }
        self.literal.set(saved);
        (breaks, starts)
    }

    /// Which clause of an `if` runs when its tests compare the target of the literal loop being
    /// read with literals (`if phase == "train":`): `Some(Some(k))`, `Some(None)` for none, `None`
    /// when a test is not of that kind.
    fn decided_clause(&self, i: &ast::StmtIf) -> Option<Option<usize>> {
        let (target, value) = self.literal.get()?;
        let tests = std::iter::once(Some(&*i.test))
            .chain(i.elif_else_clauses.iter().map(|c| c.test.as_ref()));
        for (k, test) in tests.enumerate() {
            match test {
                None => return Some(Some(k)),
                Some(t) if decide(t, target, value)? => return Some(Some(k)),
                Some(_) => {}
            }
        }
        Some(None)
    }
}

/// The values of `for x in ["train", "val"]:` (a list or tuple of up to eight literals).
fn literal_elements(iter: &Expr) -> Option<&[Expr]> {
    let elts = match iter {
        Expr::List(ast::ExprList { elts, .. }) | Expr::Tuple(ast::ExprTuple { elts, .. }) => elts,
        _ => return None,
    };
    (!elts.is_empty()
        && elts.len() <= 8
        && elts.iter().all(|e| {
            matches!(
                e,
                Expr::StringLiteral(_) | Expr::NumberLiteral(_) | Expr::BooleanLiteral(_)
            )
        }))
    .then_some(&elts[..])
}

/// Whether two literals are equal, when both are strings or both are numbers.
fn same_literal(a: &Expr, b: &Expr) -> Option<bool> {
    match (a, b) {
        (Expr::StringLiteral(x), Expr::StringLiteral(y)) => {
            Some(x.value.to_str() == y.value.to_str())
        }
        (Expr::NumberLiteral(x), Expr::NumberLiteral(y)) => Some(x.value == y.value),
        (Expr::BooleanLiteral(x), Expr::BooleanLiteral(y)) => Some(x.value == y.value),
        _ => None,
    }
}

/// The value of a test of `target` bound to the literal `value` (`phase == "train"`, `phase !=
/// "val"`, `phase in ("val", "test")`, `not ...`); `None` for any other test.
fn decide(test: &Expr, target: &str, value: &Expr) -> Option<bool> {
    let is_target = |e: &Expr| matches!(e, Expr::Name(n) if n.id.as_str() == target);
    match test {
        Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => {
            decide(&u.operand, target, value).map(|b| !b)
        }
        Expr::Compare(c) => {
            let ([op], [right]) = (&c.ops[..], &c.comparators[..]) else {
                return None;
            };
            let left = c.left.as_ref();
            let other = if is_target(left) {
                right
            } else if is_target(right) && matches!(op, ast::CmpOp::Eq | ast::CmpOp::NotEq) {
                left
            } else {
                return None;
            };
            match op {
                ast::CmpOp::Eq => same_literal(other, value),
                ast::CmpOp::NotEq => same_literal(other, value).map(|b| !b),
                ast::CmpOp::In | ast::CmpOp::NotIn => {
                    let (Expr::List(ast::ExprList { elts, .. })
                    | Expr::Tuple(ast::ExprTuple { elts, .. })
                    | Expr::Set(ast::ExprSet { elts, .. })) = other
                    else {
                        return None;
                    };
                    let mut found = false;
                    for e in elts {
                        found |= same_literal(e, value)?;
                    }
                    Some(found == (*op == ast::CmpOp::In))
                }
                _ => None,
            }
        }
        _ => None,
    }
}

/// The name `d` and the value of `d["key"]` when `d` is bound once in `body`, to a dict
/// literal with that string key (`{"fire": FireNet(), ...}`) or to `dict(fire=FireNet(), ...)`.
fn dict_entry<'a, 'e>(body: &'a [Stmt], e: &'e Expr) -> Option<(&'e str, &'a Expr)> {
    let Expr::Subscript(sub) = e else {
        return None;
    };
    let (Expr::Name(d), Expr::StringLiteral(key)) = (sub.value.as_ref(), sub.slice.as_ref()) else {
        return None;
    };
    let key = key.value.to_str();
    let [bound] = crate::rules::bound_values(body, d.id.as_str())[..] else {
        return None;
    };
    let value = match bound {
        Expr::Dict(items) => items.items.iter().find_map(|item| match &item.key {
            Some(Expr::StringLiteral(k)) if k.value.to_str() == key => Some(&item.value),
            _ => None,
        }),
        Expr::Call(c) if matches!(c.func.as_ref(), Expr::Name(f) if f.id.as_str() == "dict") => c
            .arguments
            .keywords
            .iter()
            .find(|k| k.arg.as_ref().is_some_and(|a| a.id.as_str() == key))
            .map(|k| &k.value),
        _ => None,
    };
    value.map(|v| (d.id.as_str(), v))
}

/// Whether a statement before `at`, other than its binding and reads of its entries (`fire =
/// models["fire"]`), uses the dict `d` (`for m in models.values(): m.eval()`, `models["fire"]
/// = ...`): its entries may then be in another mode than they were built in.
fn dict_used(stmts: &[&Stmt], d: &str, at: TextSize) -> bool {
    let names = [d.to_string()];
    let reads_entry = |e: &Expr| {
        matches!(e, Expr::Subscript(x)
            if matches!(x.value.as_ref(), Expr::Name(n) if n.id.as_str() == d))
    };
    stmts
        .iter()
        .filter(|s| s.range().start() < at)
        .any(|s| match s {
            Stmt::Assign(a) => {
                let binds_d = matches!(&a.targets[..], [Expr::Name(t)] if t.id.as_str() == d);
                !binds_d
                    && !reads_entry(&a.value)
                    && (mentions(&a.value, &names) || a.targets.iter().any(|t| mentions(t, &names)))
            }
            Stmt::AnnAssign(a) => a.value.as_ref().is_some_and(|v| {
                !matches!(a.target.as_ref(), Expr::Name(t) if t.id.as_str() == d)
                    && !reads_entry(v)
                    && mentions(v, &names)
            }),
            Stmt::Expr(e) => mentions(&e.value, &names),
            Stmt::For(f) => mentions(&f.iter, &names),
            Stmt::If(i) => mentions(&i.test, &names),
            Stmt::With(w) => w.items.iter().any(|i| mentions(&i.context_expr, &names)),
            _ => false,
        })
}

/// The modes where a round of a loop's body ends: at its `break`s, at its other ways out of the
/// loop, and at the starts of the next round.
struct Round {
    breaks: Vec<Mode>,
    exits: Vec<Mode>,
    rounds: Vec<Mode>,
}

/// Where [`Walk::walk`] is as to loops: in the body of the loop that holds `at` (a clause that
/// ends the iteration does not reach it), in one that does not (collecting the modes at its
/// exits and at the starts of its next rounds), or in neither.
enum Within<'a> {
    Nothing,
    LoopHolding,
    Loop {
        /// A `while True:`, left only by `break`.
        forever: bool,
        /// Of `for target in range(..., stop)`: the target and the bound.
        last_round: Option<(&'a str, &'a Expr)>,
        /// At its `break`s.
        breaks: Vec<Mode>,
        /// At the other ways out, which go through its `else:` clause.
        exits: Vec<Mode>,
        /// At the starts of next rounds.
        rounds: Vec<Mode>,
    },
}

impl<'a> Within<'a> {
    /// A clause `b` of the loop being read ends the round in mode `m`: a `break` leaves the
    /// loop; a `continue` starts the next round, and leaves the loop when it may come in the
    /// last round (not `if epoch < start_epoch: continue`, nor `if (epoch + 1) % k and epoch + 1
    /// != epochs: continue`), never in a `while True:`.
    fn end_round(&mut self, b: &[Stmt], m: Mode, test: Option<(&Checker, &Expr)>) {
        let Within::Loop {
            forever,
            last_round,
            breaks,
            exits,
            rounds,
        } = self
        else {
            return;
        };
        if ends_in_break(b) {
            breaks.push(m);
            return;
        }
        rounds.push(m);
        let spared = match (test, *last_round) {
            (Some((ch, t)), Some((target, stop))) => spares_last_round(ch, t, target, stop),
            _ => false,
        };
        if !*forever && !spared {
            exits.push(m);
        }
    }
}

/// Of `for target in range(...)`: the target's name and the loop's bound.
fn range_bound<'a>(target: &'a Expr, iter: &'a Expr) -> Option<(&'a str, &'a Expr)> {
    let Expr::Name(t) = target else {
        return None;
    };
    let Expr::Call(c) = iter else {
        return None;
    };
    if !matches!(c.func.as_ref(), Expr::Name(f) if f.id.as_str() == "range")
        || !c.arguments.keywords.is_empty()
    {
        return None;
    }
    let stop = match &c.arguments.args[..] {
        [stop] | [_, stop] | [_, stop, _] => stop,
        _ => return None,
    };
    Some((t.id.as_str(), stop))
}

/// Whether `if test: continue` cannot be taken in the last round of `for target in
/// range(..., stop)`: one of the conditions joined by `and` holds only in early rounds
/// (`epoch < start_epoch`) or compares the round with the bound (`epoch + 1 != epochs`).
fn spares_last_round(ch: &Checker, test: &Expr, target: &str, stop: &Expr) -> bool {
    let conditions: Vec<&Expr> = match test {
        Expr::BoolOp(b) if b.op == ast::BoolOp::And => b.values.iter().collect(),
        e => vec![e],
    };
    // `epoch`, `epoch + 1`, `epoch - 1`.
    let is_round = |e: &Expr| match e {
        Expr::Name(n) => n.id.as_str() == target,
        Expr::BinOp(b) if matches!(b.op, ast::Operator::Add | ast::Operator::Sub) => {
            matches!(b.left.as_ref(), Expr::Name(n) if n.id.as_str() == target)
                && matches!(b.right.as_ref(), Expr::NumberLiteral(_))
        }
        _ => false,
    };
    // `epochs`, `epochs - 1`.
    let stop_text = ch.text(stop.range());
    let is_bound = |e: &Expr| match e {
        Expr::BinOp(b) if b.op == ast::Operator::Sub => {
            ch.text(b.left.range()) == stop_text
                && matches!(b.right.as_ref(), Expr::NumberLiteral(_))
        }
        e => ch.text(e.range()) == stop_text,
    };
    conditions.iter().any(|c| {
        let Expr::Compare(cmp) = c else {
            return false;
        };
        let ([op], [right]) = (&cmp.ops[..], &cmp.comparators[..]) else {
            return false;
        };
        let left = cmp.left.as_ref();
        match op {
            ast::CmpOp::Lt | ast::CmpOp::LtE => is_round(left),
            ast::CmpOp::Gt | ast::CmpOp::GtE => is_round(right),
            ast::CmpOp::NotEq => {
                (is_round(left) && is_bound(right)) || (is_round(right) && is_bound(left))
            }
            _ => false,
        }
    })
}

/// The mode after paths that meet: one that binds the name here and leaves it in training mode
/// decides; otherwise the name is bound here only when every path binds it.
fn join(ends: &[Mode]) -> Mode {
    if ends.iter().any(|m| m.assigned && !m.evaluated) {
        Mode {
            assigned: true,
            evaluated: false,
        }
    } else {
        Mode {
            assigned: ends.iter().all(|m| m.assigned),
            evaluated: ends.iter().all(|m| m.evaluated),
        }
    }
}

/// `True` or `1`, the test of a loop that only a `break` ends.
fn always_true(test: &Expr) -> bool {
    match test {
        Expr::BooleanLiteral(b) => b.value,
        Expr::NumberLiteral(n) => matches!(&n.value, ast::Number::Int(i) if i.as_u8() == Some(1)),
        _ => false,
    }
}

/// Whether a clause never falls through to what follows its `if`: [`leaves`], also through
/// `assert False`, a `with` block that leaves, an argument parser's `error()` (which exits), or
/// a call of a function of this file that always leaves (`die("need ckpt")`).
fn leaves_function(ch: &Checker, body: &[Stmt]) -> bool {
    if leaves(body) {
        return true;
    }
    match body.last() {
        Some(Stmt::Assert(a)) => {
            matches!(a.test.as_ref(), Expr::BooleanLiteral(b) if !b.value)
                || matches!(a.test.as_ref(), Expr::NumberLiteral(n)
                    if matches!(&n.value, ast::Number::Int(i) if i.as_u8() == Some(0)))
        }
        Some(Stmt::With(w)) => leaves_function(ch, &w.body),
        Some(Stmt::If(i)) => {
            i.elif_else_clauses.last().is_some_and(|c| c.test.is_none())
                && leaves_function(ch, &i.body)
                && i.elif_else_clauses
                    .iter()
                    .all(|c| leaves_function(ch, &c.body))
        }
        Some(Stmt::Expr(e)) => match e.value.as_ref() {
            Expr::Call(c) => match c.func.as_ref() {
                Expr::Attribute(a) => {
                    matches!(a.attr.id.as_str(), "error" | "exit")
                        && matches!(a.value.as_ref(), Expr::Name(n)
                            if n.id.contains("parser") || matches!(n.id.as_str(), "ap" | "p"))
                }
                Expr::Name(n) => ch.bodies.first().is_some_and(|module| {
                    module.iter().any(|s| {
                        matches!(s, Stmt::FunctionDef(f)
                        if f.name.id == n.id && never_returns(&f.body))
                    })
                }),
                _ => false,
            },
            _ => false,
        },
        _ => false,
    }
}

/// Whether a function's body never returns to its caller: it has no `return` (which hands back
/// control, unlike in a clause; `if ok: return` before a final `raise` returns) and [`leaves`]
/// through `raise` or an exit, on every way through its last statement.
fn never_returns(body: &[Stmt]) -> bool {
    let mut stmts = Vec::new();
    crate::checker::flatten(body, &mut stmts);
    !stmts.iter().any(|s| matches!(s, Stmt::Return(_))) && leaves(body)
}

/// Whether a clause ends the loop iteration it is in (`continue`, `break`), also through a
/// `with` block or an `if`/`else` whose every clause does.
fn ends_iteration(body: &[Stmt]) -> bool {
    ends_with(body, |s| matches!(s, Stmt::Continue(_) | Stmt::Break(_)))
}

/// Whether a clause ends in `break` on every path, as [`ends_iteration`].
fn ends_in_break(body: &[Stmt]) -> bool {
    ends_with(body, |s| matches!(s, Stmt::Break(_)))
}

/// Whether every path of a clause ends in a statement `last` accepts.
fn ends_with(body: &[Stmt], last: fn(&Stmt) -> bool) -> bool {
    match body.last() {
        Some(Stmt::With(w)) => ends_with(&w.body, last),
        Some(Stmt::If(i)) => {
            i.elif_else_clauses.last().is_some_and(|c| c.test.is_none())
                && ends_with(&i.body, last)
                && i.elif_else_clauses.iter().all(|c| ends_with(&c.body, last))
        }
        Some(s) => last(s),
        None => false,
    }
}

/// Whether a block holds offset `at` (a statement of it starts at or before `at`, and `at` comes
/// before the block's end).
fn holds_offset(b: &[Stmt], at: TextSize) -> bool {
    b.first().is_some_and(|f| f.range().start() <= at)
        && b.last().is_some_and(|l| at < l.range().end())
}

/// The statements of a body and of its nested blocks (not nested functions), in order, that can
/// run on the way to offset `at`: of an `if`/`elif`/`else` holding `at`, only the clause that
/// holds it (`if cmd == "eval": evaluate(m) else: export(m)` never evaluates before exporting).
pub(crate) fn collect<'s>(body: &'s [Stmt], at: TextSize, out: &mut Vec<&'s Stmt>) {
    collect_to(body, at, out, false)
}

/// [`collect`] for a walk to a statement at `at` (an export, a call): a clause after which the
/// function has left (`if not args.export: train(model); return`) never runs on the way to what
/// follows its `if`. (Not for what a whole function does, where such a clause is one way out.)
fn collect_reaching<'s>(body: &'s [Stmt], at: TextSize, out: &mut Vec<&'s Stmt>) {
    collect_to(body, at, out, true)
}

fn collect_to<'s>(body: &'s [Stmt], at: TextSize, out: &mut Vec<&'s Stmt>, reaching: bool) {
    let collect = |b: &'s [Stmt], out: &mut Vec<&'s Stmt>| collect_to(b, at, out, reaching);
    for s in body {
        out.push(s);
        match s {
            Stmt::If(i) => {
                let holds = |b: &[Stmt]| holds_offset(b, at);
                let clauses = std::iter::once(&i.body[..])
                    .chain(i.elif_else_clauses.iter().map(|c| &c.body[..]));
                match clauses.clone().find(|b| holds(b)) {
                    Some(b) => collect(b, out),
                    None => clauses
                        .filter(|b| !(reaching && i.range().end() <= at && leaves(b)))
                        .for_each(|b| collect(b, out)),
                }
            }
            Stmt::With(w) => collect(&w.body, out),
            // `match args.cmd: case "export": ...`: the arms are alternatives, as an `if`'s
            // clauses are.
            Stmt::Match(m) => {
                let holds = |b: &[Stmt]| holds_offset(b, at);
                match m.cases.iter().find(|c| holds(&c.body)) {
                    Some(c) => collect(&c.body, out),
                    None => m.cases.iter().for_each(|c| collect(&c.body, out)),
                }
            }
            Stmt::Try(t) => {
                collect(&t.body, out);
                collect(&t.orelse, out);
                collect(&t.finalbody, out);
            }
            Stmt::For(f) => collect(&f.body, out),
            _ => {}
        }
    }
}
