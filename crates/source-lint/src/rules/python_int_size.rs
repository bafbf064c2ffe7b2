//! ## What it does
//! Flags shape arguments that went through Python numbers in model code: `len(x)`,
//! `int(x.size(0))`, `math.ceil(h / 2)`, `t.item()`/`.tolist()` values (directly or through a
//! local) passed to `torch.arange`, `zeros`, `ones`, `full`, `empty`, `linspace`, `torch.tensor`,
//! or to `view`, `reshape`, `expand`, `repeat`, `new_zeros`, `narrow`, `split`. Only the
//! arguments that set a size count: `linspace`'s `steps`, not its start and end; `full`'s size,
//! not its fill value (a frozen value there is ODL004's). `torch.tensor([W - 1, H - 1])` is
//! reported for frozen sizes, not for a tensor's values made numbers (`torch.tensor([area])` of
//! an `.item()`, which ODL004 reports where it left the graph). `min`/`max` of frozen sizes and
//! `T, b, h = [int(s) for s in x.size()]` are frozen too, and so are `max([len(i) for i in
//! idx])` and the numbers a helper of the project returns after making them with `int()` or
//! `math` from a size (`xs, n_chunks = pad_to_multiple(xs, 4)`, or a method of the class:
//! `sal, n = self.salience(audio)`). Sizes read through `.data` (`x.data.size(0)`, `B, C, H, W =
//! x.data.shape`) or counted by `torch.Size.numel()` (`x.shape.numel()`) are Python numbers as
//! well: the tracer does not record them (pytorch#77410). A shape written as `(b, c) +
//! tuple(rest)` is read element by element. Sizes also cross calls inside a file as arguments: a helper's parameter is a
//! frozen number when a caller passes one (`self._shape(q, int(q.size(0)))`), and a traced size
//! when a caller passes `x.size()[2:]` or `B, N, C = x.shape`'s `N`, so the helper's own `int()`
//! of it freezes it. A cache the module refreshes (`self.grid = self.make_grid(n)`) is left alone,
//! and so are the sizes of the module's own weights (`s = int(math.sqrt(self.pos_embed.shape[1]))`
//! with `pos_embed` an `nn.Parameter` or buffer of `__init__` that no other method stores again,
//! `len(self.embed.weight)`, a helper's parameter that every call of the method fills with one,
//! `self.resize(self.pos_embed, h, w)`, and a slice of it by numbers, `pos[:, 1:]`):
//! they are constants of the model, whatever size the input has.
//!
//! ## Why is this bad?
//! The tracer records `x.size(i)` and `x.shape[i]` as graph values, but a Python `int` is a
//! constant: `len()` and `int()` return plain numbers, so the exported `Reshape`/`Range`/
//! `ConstantOfShape` uses the example's size forever. With dynamic axes the model then fails
//! ("The input tensor cannot be reshaped to the requested shape") or silently works on the
//! example size only. The PyTorch ONNX docs list "avoid Python types and numpy" for this reason.
//! A size used as it is (`B, C, H, W = x.shape` then `x.view(B, C, -1)`, `torch.arange(x.size(1))`,
//! `torch.linspace(-1, 1, h)`, `tok.expand(x.size(0), -1, -1)`) stays dynamic:
//! `scripts/check_traced_sizes.py` exports each such form with dynamic axes and runs it in
//! onnxruntime at another size (torch 2.15: all dynamic; `int()` and `len()` frozen). Such a size
//! is still reported, as an info watch point rather than an error, where it sizes a torch factory
//! (`torch.arange(T)`, `torch.zeros(B, 4)`, `torch.linspace(-1, 1, h)`; `randint`'s size, not its
//! bounds): issue 7 lists it among the hazards, and a factory is where a size that froze later
//! (an `int()` added upstream, a batch-1 example under the dynamo exporter) goes unnoticed, since
//! the new tensor broadcasts or indexes without error. A `view`/`reshape`/`expand` with a frozen
//! size fails at run time instead, and the tensor's own `x.new_zeros(...)` and sizes a caller
//! hands to a helper (`def make_grid(b, h: int, w: int)`) are not reported: together they would
//! add about 70 findings to torchvision's model sources.
//!
//! ## Example
//! ```python
//! def forward(self, x):
//!     n = len(x)
//!     return x.view(n, -1)
//! ```
//!
//! ## Fix
//! Pass the size as the tracer sees it, without converting it:
//! ```python
//! def forward(self, x):
//!     return x.view(x.size(0), -1)
//! ```

use crate::checker::Checker;
use crate::registry::{FixKind, Rule};
use diagnostics::Severity;
use ruff_python_ast::{self as ast, Expr};
use ruff_text_size::Ranged;

pub(crate) const RULE: Rule = Rule {
    code: "ODL016",
    name: "python-int-size",
    severity: Severity::Error,
    fix: FixKind::None,
    summary: "size turned into a Python int (`len(x)`, `int(x.size(0))`) feeding `arange`/`zeros`/`view`/`reshape` (info: a tensor's size sizing a factory)",
    source: include_str!("python_int_size.rs"),
};

const TORCH_FACTORIES: &[&str] = &[
    "arange",
    "zeros",
    "ones",
    "empty",
    "full",
    "rand",
    "randn",
    "randint",
    "linspace",
    "eye",
    "tensor",
    "as_tensor",
    "range",
    "logspace",
    "split",
    "narrow",
    "reshape",
];
const METHODS: &[&str] = &[
    "view",
    "reshape",
    "expand",
    "repeat",
    "new_zeros",
    "new_ones",
    "new_empty",
    "new_full",
    "narrow",
    "split",
    "unflatten",
    "tile",
    "resize_",
];

/// The ops that make a new tensor of a given size, where a frozen size goes unnoticed:
/// `torch.zeros(B, 4) + x` broadcasts, and `torch.arange(T)` of the example's length indexes
/// without error. (`view`/`reshape` with a frozen size fail at run time instead.)
const FACTORIES: &[&str] = &[
    "torch.arange",
    "torch.zeros",
    "torch.ones",
    "torch.empty",
    "torch.full",
    "torch.rand",
    "torch.randn",
    "torch.randint",
    "torch.linspace",
    "torch.logspace",
    "torch.eye",
    "torch.range",
];

/// The first `positional` arguments of a call and its keywords named in `names`.
fn value_arguments<'c>(
    call: &'c ast::ExprCall,
    positional: usize,
    names: &[&str],
) -> Vec<&'c Expr> {
    call.arguments
        .args
        .iter()
        .take(positional)
        .chain(
            call.arguments
                .keywords
                .iter()
                .filter(|k| {
                    k.arg
                        .as_ref()
                        .is_some_and(|a| names.contains(&a.id.as_str()))
                })
                .map(|k| &k.value),
        )
        .collect()
}

/// Whether a size is only ever a parameter of the function (`h` in `def grid(b, h: int, w)`),
/// or arithmetic on parameters (`h // 8`).
fn only_parameters(ch: &Checker, e: &Expr) -> bool {
    match e {
        Expr::Name(n) => ch.state().size_params.contains(n.id.as_str()),
        Expr::BinOp(b) => {
            let side = |e: &Expr| e.is_number_literal_expr() || only_parameters(ch, e);
            side(&b.left) && side(&b.right)
        }
        _ => false,
    }
}

/// The elements of a shape argument: `(b, c)`, `[b, c]`, `*dims`, and `(b, c) + tuple(rest)`.
fn spread<'e>(e: &'e Expr, v: &mut Vec<&'e Expr>) {
    match e {
        Expr::Tuple(t) => v.extend(t.elts.iter()),
        Expr::List(t) => v.extend(t.elts.iter()),
        Expr::Starred(s) => v.push(&s.value),
        Expr::BinOp(b) if matches!(b.op, ast::Operator::Add) && is_sequence(&b.left) => {
            spread(&b.left, v);
            spread(&b.right, v);
        }
        e => v.push(e),
    }
}

fn is_sequence(e: &Expr) -> bool {
    match e {
        Expr::Tuple(_) | Expr::List(_) => true,
        Expr::BinOp(b) => matches!(b.op, ast::Operator::Add) && is_sequence(&b.left),
        _ => false,
    }
}

fn args_of(call: &ast::ExprCall) -> Vec<&Expr> {
    let mut v: Vec<&Expr> = Vec::new();
    for a in call.arguments.args.iter() {
        spread(a, &mut v);
    }
    for k in call.arguments.keywords.iter() {
        if k.arg
            .as_ref()
            .is_some_and(|a| matches!(a.id.as_str(), "size" | "end" | "start" | "steps" | "shape"))
        {
            match &k.value {
                Expr::Starred(_) => {}
                e => spread(e, &mut v),
            }
        }
    }
    v
}

pub(crate) fn check_call(ch: &mut Checker, call: &ast::ExprCall) {
    if !ch.in_model() {
        return;
    }
    let op = if let Some(q) = ch.torch_fn(call) {
        let last = q.rsplit('.').next().unwrap_or("");
        if q.matches('.').count() != 1 || !TORCH_FACTORIES.contains(&last) {
            return;
        }
        format!("torch.{last}")
    } else if let Some((m, recv)) = ch.method(call) {
        if !METHODS.contains(&m) || !ch.is_tensor(recv) {
            return;
        }
        format!(".{m}()")
    } else {
        return;
    };
    // `torch.tensor(x.shape)` / `torch.tensor([h, w])` with sizes: a constant of the example's sizes.
    let tensor_of_sizes = matches!(op.as_str(), "torch.tensor" | "torch.as_tensor")
        && args_of(call).iter().any(|a| ch.is_size(a));
    // `torch.linspace(near, far, steps)`, `torch.full(size, value)`: only the count / size
    // fixes a shape; a frozen start, end or fill value is a value (ODL004's business).
    let mut args = args_of(call);
    let value_args: Vec<&Expr> = match op.as_str() {
        "torch.linspace" | "torch.logspace" => value_arguments(call, 2, &["start", "end"]),
        "torch.full" => call.arguments.args.get(1).into_iter().collect(),
        // `torch.randint(0, W, (B, 2))`: the bounds are values; the size is the last argument,
        // or `size=` (then every positional argument is a bound).
        "torch.randint" => {
            let n = call.arguments.args.len();
            let sized = crate::rules::keyword(call, "size").is_some();
            value_arguments(
                call,
                if sized { n } else { n.saturating_sub(1) },
                &["low", "high"],
            )
        }
        _ => Vec::new(),
    };
    args.retain(|a| !value_args.iter().any(|v| std::ptr::eq(*v, *a)));
    // `torch.tensor(...)` holds data: a frozen number there is a shape only when it came from
    // one (`torch.tensor([W - 1, H - 1])`); `torch.tensor([area])` of an `.item()` is ODL004's.
    let data = matches!(op.as_str(), "torch.tensor" | "torch.as_tensor");
    // Reported at the op (`torch.full(` or `.view(`), where a call spread over lines starts.
    let at = match call.func.as_ref() {
        Expr::Attribute(a) if ch.method(call).is_some() => a.attr.range(),
        f => f.range(),
    };
    let Some(arg) = args.iter().copied().find(|a| {
        (ch.is_frozen_int(a) && (!data || ch.is_frozen_size(a)))
            || (tensor_of_sizes && ch.is_size(a))
    }) else {
        // A factory sized by a size read from a tensor (`torch.zeros(B, 4)` with
        // `B, C, H, W = x.shape`, `torch.arange(x.size(1))`): the graph recomputes it while
        // the tracer sees a tensor size, but if it ever freezes, the new tensor silently keeps
        // the example's shape. Reported as a watch point (info), not as a frozen size.
        if !FACTORIES.contains(&op.as_str()) {
            return;
        }
        // A size a caller hands to a helper (`def make_grid(b, h: int, w: int)`) is left to
        // the callers: the helper reads no tensor's size itself.
        let Some(arg) = args
            .into_iter()
            .find(|a| ch.is_size(a) && !only_parameters(ch, a))
        else {
            return;
        };
        let text = ch.text(arg.range()).to_string();
        let i = ch.report(
            &RULE,
            at,
            format!(
                "`{op}` sized by `{text}`, a size read from a tensor: it stays dynamic only while the tracer records it; if it freezes, this tensor silently keeps the example's shape"
            ),
        );
        ch.findings[i].diagnostic.severity = Severity::Info;
        ch.help(
            i,
            "keep the size away from `int()`, `len()`, `math.*` and Python branches, export with dynamic axes, and check other sizes with `onnx-doctor verify MODEL.onnx`",
        );
        return;
    };
    let text = ch.text(arg.range()).to_string();
    let i = ch.report(
        &RULE,
        at,
        format!("`{text}` is a Python number passed to `{op}`: the exported shape is frozen to the example's"),
    );
    ch.help(i, "pass `x.size(i)` / `x.shape[i]` directly (the tracer records them); avoid `len()`, `int()`, `math.*`, `.item()`");
}
