//! ## What it does
//! Flags tensors placed on a device spelled as a literal inside model code: `torch.zeros(n,
//! device="cuda")`, `torch.tensor(v, device=torch.device("cuda:0"))`, `t.cuda()`, `t.to("cuda")`,
//! also through a name bound to such a literal in the function or at module level (`DEVICE =
//! "cuda"`, `GPU = torch.device("cuda:0")`, `GPU2 = torch.device(GPU)`, and `DEV = "cuda" if
//! torch.cuda.is_available() else "cpu"`, the machine's accelerator rather than the input's device;
//! a choice that reads the input, `"cuda" if x.is_cuda else "cpu"`, or that the function makes from
//! its own locals and parameters may follow it and is left alone; a parameter or local of the same
//! name shadows the module's) or through an attribute set once from an `__init__` parameter whose
//! accelerator default some construction in the file keeps (`def __init__(self, device="cuda"):
//! self.device_str = device`) or a config class's field whose default is an accelerator
//! (`device=self.cfg.deploy_device` with `deploy_device: str = "cuda"`) or a config dict's entry
//! the module spells out (`device=CFG["dev"]`), and the legacy CUDA
//! tensor types (`t.type(torch.cuda.FloatTensor)`,
//! `torch.cuda.LongTensor(n)`). The `__init__` of a module counts as model code here: `self.disp =
//! torch.arange(d).cuda()` there is a plain attribute, not a buffer, so it stays on that device
//! whatever `model.to(...)` does. A device the machine chooses counts there only for such plain
//! attributes: buffers, parameters and submodules built on it follow `model.to(...)`, and it is
//! "cpu" on a host without an accelerator. A call spread over several lines is reported on its
//! first line.
//!
//! ## Why is this bad?
//! The trace records the device of every tensor it creates. A literal device ties the module to
//! one machine: exporting on a CPU-only host fails ("Torch not compiled with CUDA enabled" /
//! "Expected all tensors to be on the same device"), and a model moved to another device mixes
//! devices inside `forward`. The ONNX graph itself has no devices; the literal only makes the
//! export and the PyTorch model fragile.
//!
//! ## Example
//! ```python
//! def forward(self, x):
//!     pos = torch.arange(x.size(1), device="cuda")
//!     return x + pos
//! ```
//!
//! ## Fix
//! Follow the input's device (or a registered buffer's):
//! ```python
//! def forward(self, x):
//!     pos = torch.arange(x.size(1), device=x.device)
//!     return x + pos
//! ```

use crate::checker::{is_self, module_class, self_assignments, Checker};
use crate::registry::{FixKind, Rule};
use crate::rules::{init_parameter_strings, keyword, string_literal};
use diagnostics::Severity;
use ruff_python_ast::{self as ast, Expr};
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL015",
    name: "device-literal",
    severity: Severity::Warning,
    fix: FixKind::None,
    summary:
        "tensor created or moved with a literal device (`device=\"cuda\"`, `.cuda()`) in model code",
    source: include_str!("device_literal.rs"),
};

/// The device a literal names: `"cuda:0"`, `torch.device("cuda")`, or a name bound to such a
/// string in this function or at module level (`DEVICE = "cuda"`).
fn literal_device(ch: &Checker, e: &Expr) -> Option<String> {
    literal_device_at(ch, e, 0)
}

/// [`literal_device`], `depth` names deep: names bound to one another
/// (`device = torch.device(device)` in a function whose parameter defaults to a string, or two
/// module names bound to each other) stop after a few steps.
fn literal_device_at(ch: &Checker, e: &Expr, depth: u32) -> Option<String> {
    if depth > 4 {
        return None;
    }
    let s = match e {
        Expr::StringLiteral(_) => string_literal(e)?,
        Expr::Call(c) if ch.torch_fn(c).is_some_and(|q| q == "torch.device") => {
            return literal_device_at(ch, c.arguments.args.first()?, depth + 1);
        }
        // `DEV = "cuda" if torch.cuda.is_available() else "cpu"`: the machine's accelerator when
        // it has one, not the input's device (`"cuda" if x.is_cuda else "cpu"` follows it).
        // A choice made in the function from its own values (`on_gpu = x.is_cuda`, a
        // `use_cuda` parameter) may follow the input as well.
        Expr::If(i)
            if !crate::rules::any_sub_expr(&i.test, |t| match t {
                Expr::Attribute(a) => {
                    matches!(
                        a.attr.id.as_str(),
                        "is_cuda" | "device" | "get_device" | "is_mps"
                    )
                }
                Expr::Name(n) => ch.binds_locally(n.id.as_str()),
                _ => false,
            }) =>
        {
            let body = literal_device_at(ch, &i.body, depth + 1);
            let orelse = literal_device_at(ch, &i.orelse, depth + 1);
            return body
                .clone()
                .filter(|d| !d.starts_with("cpu"))
                .or(orelse.clone().filter(|d| !d.starts_with("cpu")))
                .or(body)
                .or(orelse);
        }
        Expr::Name(n) => {
            return ch
                .literal(n.id.as_str())
                .filter(|v| !matches!(v, Expr::Name(_)))
                .and_then(|v| literal_device_at(ch, v, depth + 1))
        }
        // `self.device_str` set once from `def __init__(self, ..., device: str = "cuda")`, the
        // default some construction in the file keeps (or the literal one passes).
        Expr::Attribute(a) if is_self(&a.value) => {
            let module = ch.bodies[0];
            let class = module_class(module, ch.classes.last()?)?;
            let values: Vec<&Expr> = self_assignments(&class.body)
                .into_iter()
                .filter(|(attr, _)| *attr == a.attr.id.as_str())
                .map(|(_, v)| v)
                .collect();
            let [Expr::Name(p)] = values[..] else {
                return None;
            };
            return init_parameter_strings(module, class, p.id.as_str())
                .into_iter()
                .find(|s| is_device(s) && !s.starts_with("cpu"))
                .map(str::to_string);
        }
        // `device=self.cfg.deploy_device` with `deploy_device: str = "cuda"` in a config class
        // of the file: the accelerator the config names by default.
        // The receiver is named for a config (`cfg`, `self.config`, `hparams`), not a tensor
        // (`x.device`).
        Expr::Attribute(a)
            if !ch.is_tensor(&a.value)
                && match a.value.as_ref() {
                    Expr::Name(n) => Some(n.id.as_str()),
                    Expr::Attribute(r) => Some(r.attr.id.as_str()),
                    _ => None,
                }
                .is_some_and(|r| {
                    let r = r.to_ascii_lowercase();
                    ["cfg", "conf", "settings", "opts", "hparams", "params"]
                        .iter()
                        .any(|w| r.contains(w))
                }) =>
        {
            let s = crate::rules::config_field_default(ch.bodies[0], a.attr.id.as_str())?;
            return (is_device(s) && !s.starts_with("cpu")).then(|| s.to_string());
        }
        // `device=CFG["dev"]` with `CFG = dict(dev="cuda:0", ...)` spelled out in the module.
        Expr::Subscript(s) => {
            let key = string_literal(&s.slice)?;
            let s = crate::rules::dict_value(ch, &s.value, key, 0)?;
            return (is_device(s) && !s.starts_with("cpu")).then(|| s.to_string());
        }
        _ => return None,
    };
    is_device(s).then(|| s.to_string())
}

/// Whether the device is the machine's choice (`"cuda" if torch.cuda.is_available() else
/// "cpu"`, directly, through `torch.device(...)` or a name bound to one): in `__init__` it
/// builds buffers and submodules on the host's device, which `model.to(...)` moves as a whole
/// and which is "cpu" on a host without an accelerator.
fn chosen_device(ch: &Checker, e: &Expr) -> bool {
    chosen_device_at(ch, e, 0)
}

/// [`chosen_device`], `depth` names deep (see [`literal_device_at`]).
fn chosen_device_at(ch: &Checker, e: &Expr, depth: u32) -> bool {
    if depth > 4 {
        return false;
    }
    match e {
        Expr::If(_) => true,
        Expr::Call(c) if ch.torch_fn(c).is_some_and(|q| q == "torch.device") => c
            .arguments
            .args
            .first()
            .is_some_and(|a| chosen_device_at(ch, a, depth + 1)),
        Expr::Name(n) => ch
            .literal(n.id.as_str())
            .filter(|v| !matches!(v, Expr::Name(_)))
            .is_some_and(|v| chosen_device_at(ch, v, depth + 1)),
        _ => false,
    }
}

/// Whether a call builds a plain tensor attribute of the module (`self.grid = torch.arange(n,
/// device=DEV)`), not a buffer or a parameter: such a tensor stays where it was built whatever
/// `model.to(...)` does.
fn plain_attribute(ch: &Checker, call: &ast::ExprCall) -> bool {
    let Some(class) = ch
        .classes
        .last()
        .and_then(|c| module_class(ch.bodies[0], c))
    else {
        return false;
    };
    // Not a module built there (`nn.Linear(..., device=DEV)`, the project's `Block(d,
    // device=DEV)`), which follows `model.to(...)`: torch.nn's classes, and classes of the
    // project by their capital, except those of this file that are not modules and torch's
    // others (`torch.distributions.Normal(...)` holds tensors `model.to()` does not move).
    let constructor = |c: &ast::ExprCall| {
        let name = match c.func.as_ref() {
            Expr::Name(n) => n.id.as_str(),
            Expr::Attribute(a) => a.attr.id.as_str(),
            _ => "",
        };
        match ch.qualify(&c.func) {
            Some(q) if q.starts_with("torch.") => {
                q.starts_with("torch.nn.") && !q.starts_with("torch.nn.functional.")
            }
            _ => {
                name.starts_with(|c: char| c.is_ascii_uppercase())
                    && module_class(ch.bodies[0], name).is_none_or(|d| {
                        d.bases().iter().any(|b| {
                            let t = ch.text(b.range());
                            t.ends_with("Module") || module_class(ch.bodies[0], t).is_some()
                        })
                    })
            }
        }
    };
    self_assignments(&class.body).into_iter().any(|(_, v)| {
        v.range().contains_range(call.range()) && !matches!(v, Expr::Call(c) if constructor(c))
    })
}

/// Whether a string names a device (`"cuda:0"`, `"cpu"`).
fn is_device(s: &str) -> bool {
    let kind = s.split(':').next().unwrap_or(s);
    matches!(kind, "cuda" | "cpu" | "mps" | "xpu" | "npu" | "hip")
}

/// `torch.cuda.FloatTensor` (or its name as a string): a tensor type tied to the GPU.
fn cuda_tensor_type(ch: &Checker, e: &Expr) -> bool {
    let name = match e {
        Expr::StringLiteral(_) => string_literal(e).map(str::to_string),
        _ => ch.qualify(e),
    };
    name.is_some_and(|n| n.starts_with("torch.cuda.") && n.ends_with("Tensor"))
}

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    if !ch.in_model() && !ch.in_module_init() {
        return;
    }
    // In `__init__` only what ties the module to an accelerator: `device="cpu"` there builds
    // configuration (`torch.arange(n, device="cpu").tolist()`), and `self.cuda()` or
    // `.cuda(rank)` place the whole module the way the caller asks.
    let init = !ch.in_model();
    if let Some(k) = keyword(call, "device") {
        if let Some(dev) = literal_device(ch, &k.value).filter(|d| {
            !(init
                && (d.starts_with("cpu")
                    || (chosen_device(ch, &k.value) && !plain_attribute(ch, call))))
        }) {
            // A call spread over several lines is reported on its first line (where readers
            // and reviewers look for the call), the keyword's own line otherwise.
            let range = if ch.on_later_line(call.range().start(), k.range().start()) {
                call.func.range()
            } else {
                k.range()
            };
            let i = ch.report(&RULE, range, format!("device \"{dev}\" is a literal in model code: the export is tied to that device"));
            ch.help(i, "use the input's device: `device=x.device`");
        }
        return;
    }
    // `torch.cuda.FloatTensor(n)`: a GPU tensor built in model code.
    if ch
        .qualify(&call.func)
        .is_some_and(|q| q.starts_with("torch.cuda.") && q.ends_with("Tensor"))
    {
        let i = ch.report(
            &RULE,
            call.func.range(),
            "a `torch.cuda` tensor type is built in model code: the export is tied to the GPU",
        );
        ch.help(
            i,
            "build it with `x.new_tensor(...)` or `torch.tensor(..., device=x.device)`",
        );
        return;
    }
    let Some((m, recv)) = ch.method(call) else {
        return;
    };
    if init && matches!(recv, Expr::Name(n) if n.id.as_str() == "self") {
        return;
    }
    let hit = match m {
        "cuda" => {
            !init
                || call
                    .arguments
                    .args
                    .iter()
                    .all(|a| matches!(a, Expr::NumberLiteral(_) | Expr::StringLiteral(_)))
        }
        // `.type(torch.cuda.FloatTensor)`: a cast that also moves to the GPU.
        "type" => call
            .arguments
            .args
            .first()
            .is_some_and(|a| cuda_tensor_type(ch, a)),
        "to" => call
            .arguments
            .args
            .first()
            .and_then(|a| literal_device(ch, a).map(|d| (a, d)))
            .is_some_and(|(a, d)| !(init && (d.starts_with("cpu") || chosen_device(ch, a)))),
        _ => false,
    };
    // In model code whatever is moved (a tensor, a buffer, a submodule) ends up on that device.
    if !hit {
        return;
    }
    let i = ch.report(
        &RULE,
        call.func.range(),
        format!("`.{m}(...)` moves a tensor to a literal device in model code"),
    );
    ch.help(
        i,
        "use `.to(x.device)` with an input tensor `x`, or register the tensor as a buffer",
    );
}
