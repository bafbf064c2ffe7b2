//! The rule table: one row per rule, dispatched from here. A rule's documentation is the `//!`
//! comment at the top of its own file (`src/rules/<name>.rs`), read through `include_str!`.

use crate::rules;
use diagnostics::{RuleInfo, Severity};

/// Whether a rule can rewrite the code for the user.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FixKind {
    /// Findings carry no edit.
    None,
    /// The edit keeps what the code computes; `lint --fix` applies it.
    Safe,
    /// The edit may change behaviour; it is shown as a suggestion and never applied.
    Unsafe,
}

impl FixKind {
    pub fn as_str(self) -> &'static str {
        match self {
            FixKind::None => "none",
            FixKind::Safe => "safe",
            FixKind::Unsafe => "unsafe",
        }
    }
}

/// One lint rule.
#[derive(Debug)]
pub struct Rule {
    /// Stable code, `ODL` + three digits.
    pub code: &'static str,
    /// Kebab-case name of the pattern the rule flags.
    pub name: &'static str,
    pub severity: Severity,
    pub fix: FixKind,
    /// One line: what the rule flags.
    pub summary: &'static str,
    /// The text of the rule's own source file; its leading `//!` block is the documentation.
    pub source: &'static str,
}

/// The documentation sections every rule must have, in order.
pub const SECTIONS: [&str; 4] = ["What it does", "Why is this bad?", "Example", "Fix"];

impl Rule {
    /// The rule's documentation: the leading `//!` lines of its file, markers stripped.
    pub fn doc(&self) -> String {
        let mut out = String::new();
        for line in self.source.lines() {
            let Some(rest) = line.strip_prefix("//!") else {
                break;
            };
            out.push_str(rest.strip_prefix(' ').unwrap_or(rest));
            out.push('\n');
        }
        out
    }

    /// The body of one `## <name>` section of the documentation, if present and not empty.
    pub fn section(&self, name: &str) -> Option<String> {
        let doc = self.doc();
        let header = format!("## {name}");
        let mut lines = doc.lines().skip_while(|l| l.trim_end() != header);
        lines.next()?;
        let body: Vec<&str> = lines.take_while(|l| !l.starts_with("## ")).collect();
        let body = body.join("\n").trim().to_string();
        (!body.is_empty()).then_some(body)
    }

    pub fn info(&self) -> RuleInfo {
        RuleInfo {
            code: self.code.into(),
            name: self.name.into(),
            summary: self.summary.into(),
        }
    }
}

/// Every rule, in code order.
pub static RULES: &[&Rule] = &[
    &rules::syntax_error::RULE,
    &rules::mask_index_assignment::RULE,
    &rules::loop_slice_assignment::RULE,
    &rules::inplace_index_write::RULE,
    &rules::tensor_to_python::RULE,
    &rules::tensor_condition::RULE,
    &rules::training_branch::RULE,
    &rules::data_dependent_shape::RULE,
    &rules::repeat_interleave::RULE,
    &rules::einsum::RULE,
    &rules::grid_sample::RULE,
    &rules::mha_fast_path::RULE,
    &rules::autograd_function_without_symbolic::RULE,
    &rules::deprecated_upsample::RULE,
    &rules::interpolate_align_corners::RULE,
    &rules::device_literal::RULE,
    &rules::python_int_size::RULE,
    &rules::export_without_eval::RULE,
    &rules::dynamic_axes_unknown_name::RULE,
    &rules::keep_initializers_as_inputs::RULE,
    &rules::opset_too_low::RULE,
];

/// Looks a rule up by code (case-insensitive) or by name.
pub fn rule(code_or_name: &str) -> Option<&'static Rule> {
    RULES
        .iter()
        .copied()
        .find(|r| r.code.eq_ignore_ascii_case(code_or_name) || r.name == code_or_name)
}

/// The rule table of docs/rules.md, generated from the registry.
pub fn rules_markdown() -> String {
    let mut out = String::from(
        "# Source lint rules\n\n\
         Generated from the rule registry (`crates/source-lint/src/registry.rs`); a test keeps this \
         file in step with it. `onnx-doctor explain CODE` prints a rule's full documentation \
         (What it does / Why is this bad? / Example / Fix), which is the `//!` comment of \
         `crates/source-lint/src/rules/<name>.rs`.\n\n\
         ```\nonnx-doctor lint PATH... [--select CODES] [--ignore CODES] [--min-severity info|warning|error] [--fix] [--format human|json|sarif] [--no-cache] [--cache-dir DIR]\n```\n\n\
         - Directories are walked for `*.py`/`*.pyi`, honouring `.gitignore`, `.ignore` and hidden \
         files; files are parsed in parallel with `ruff_python_parser`. Files that do not import \
         `torch` are parsed (syntax errors are ODL000) but not checked.\n\
         - A file named on the command line (as a pre-commit hook or an editor names the changed \
         files) is read with the other Python files of its directory and of the package \
         directories above it (as far as the path given reaches, up to four levels and 2,000 files), which are not reported: so \
         `lint ops.py` reports in `ops.py` what `lint .` reports there, helpers that a model \
         beside it calls and an export script's opset against the models it imports included. A \
         script outside any package is also read with the modules it imports from the \
         directories above it, up to three levels (`tools/export.py` importing `models.net` of \
         the repository root).\n\
         - Names resolve through imports: `import torch.nn.functional as F`, `from torch import where` \
         and the like, and through a module-level alias of a torch function no scope binds again \
         (`es = T.einsum`), so rules see what the code calls.\n\
         - **Model code** is what export traces: every `forward` (and `forward_*`, `_forward*`, \
         except training siblings such as `forward_train` and `forward_with_aux`, which count only \
         when `forward` calls them) method, the methods and module functions it calls (and `__init__`/`__call__` of helper \
         objects it builds and the methods it calls on them: `corr = CorrBlock(f); corr.sample(x)`, \
         and methods called on submodules: `self.head.split(x)` (whose parameters take what the call passes: `self.gate.mask_other(cost, a != b)` hands it a mask; for a submodule handed to `__init__`, the method of the class its parameter is annotated with, as that class inherits it and as its subclasses of the file override it, or else of every class of the file that defines it, except a loss's or a metric's `forward`), also through a loop over the module's lists: `for cell in self.cells: cell.init_hidden(b, h, w)`, and `@property` getters that model code reads outside training-only branches: its own class's (`self.peak`, also inherited) and, on other values, those of the file's record classes (`out.total_defects`), and methods a class inherits from a base class of the same file, or overrides in a subclass \
         of it; a method's first parameter is the module whatever its name: `def forward(s, x)`), functions and \
         classes of other linted files it calls through imports \
         (`from .utils import make_pad_mask`, `import box_ops as B; B.decode(...)`), functions \
         handed to the exporter, and, in a file that calls \
         `torch.onnx.export`/`torch.jit.trace`, every module-level function passed around as a \
         value. Branches taken only in training (`if self.training:`, also written `self.training == True`, `if targets is not None:`), \
         the branch of an export guard that export does not take (the `else` of `if torch.onnx.is_in_onnx_export():` or `torch.jit.is_tracing()`, the body of `if torch.jit.is_scripting():`, which neither exporter's trace is; under `torch.compiler.is_compiling()` or `is_exporting()`, true for the dynamo exporter and false for the TorchScript one, both branches are checked; in an `if`/`elif` test, a module flag or constant named for export (`self.exporting`, `self.export_mode`, `EXPORTING`), which the export code sets, and a function of the file whose body only returns such a check count as guards when they decide the test; the branch export takes is checked like any other code, and under such a flag or function what it calls is model code too (under torch's own guards, only its own lines: torchvision's tracing branches call ONNX-specific helpers); when the outcome under export also depends on other conditions, neither branch is) \
         and what is called only there (in this file or another: a helper of another file called under \
         `if self.training:` is not model code there), \
         functions compiled with `torch.jit.script`, functions named like losses (\"loss\" as a word of \
         its own: `compute_loss`, not `decode_glosses`), `*Loss`/`*Criterion`/`*Metric` (the word, not `Radiometric`)/`*CE`/`*NLL` \
         modules, `*Matcher`/`*Assigner` modules whose `forward` takes targets (DETR's `HungarianMatcher`), and modules whose `forward` always computes a loss (`F.cross_entropy(...)`), code \
         after `if not self.training: return x`, and an export script's driver code (functions that call the exporter or check the \
         result on onnxruntime, and what they or module-level statements call, also through a command table: \
         `{\"train\": train, \"eval\": run_eval}[args.cmd](args)`) are not model code.\n\
         - Values are guessed from the code: parameters are tensors unless annotated or defaulted \
         otherwise, named like sizes (`size`, `*_shape`), axes, widths or iteration counts (`dim`, `*_channels`, `iters`, `max_iter`), checked with `isinstance(p, (int, float))` \
         or passed as `scale_factor=`, `kernel_size=`, `stride=`, `dilation=` or `groups=`, and \
         parameters a caller fills with a traced size or a frozen number (`int(x.size(0))`, or `len()` of the caller's own tensor parameter) are those, for callers in the same file and, for module-level functions, model code of another linted file that imports them; items of `List[Tensor]`/`Dict[str, Tensor]` \
         parameters and of lists built from tensors (`[self.head(h) for h in hs]`, `outs.append(self.head(h))`, or returned for tensors by a function of the project annotated as a list or dict naming tensors: `-> Dict[str, Tensor]`, `-> List[Tensor]`), loop variables over tensors (also a comprehension's: `[int(c) for c in valid.sum(1)]`, and pairs over `zip` of tensors or rows of `enumerate`: `[(int(h), int(m)) for h, m in zip(hours, mins)]`), buffers and `nn.Parameter`s on `self`, results of \
         functions annotated `-> Tensor` (here or in another linted file), of unannotated ones \
         called on tensors (and, unpacked from a tuple, the elements that every `return` of one builds with a torch operation other than a factory of Python values, whatever it is handed: `boxes, scores = self.decode(outs)` after `return torch.cat(boxes, 1), torch.cat(scores, 1)`), of submodules called on tensors or traced sizes, and the fields and properties annotated as tensors of a record class (a class of the file, or of another linted file it imports by name or names through its module in an annotation, that annotates its fields: a dataclass, a `NamedTuple`, a `TypedDict`; fields annotated `Tensor` or `Optional[Tensor]`: `out.heatmap` with `out: SegOutput`, `\"SegOutput\"`, `Optional[SegOutput]` or `recs.SegOutput`, `out: SegOutput = self.net(x)`, `out = self.forward(x)` annotated `-> SegOutput` (also `out = super().forward(x)`, from the first base class that defines it, and `out = self.net(x)` with `self.net` built once as a class of the file whose `forward` is so annotated), `out = SegOutput(...)`, `track[\"freqs\"]` of a `TypedDict`, every item of a class whose `__getitem__` returns a tensor, and fields of records held in a record's field) are tensors, except in a bare test of a field annotated `Optional[...]` (`if out.aux:` asks whether it was filled); so are the values of a parameter annotated as a dict of tensors (`for name, f in feats.items()` with `feats: Dict[str, Tensor]`); names like `mask`, `valid`, `is_*` and `done` hold boolean \
         masks, and so do buffers made with `dtype=torch.bool` (directly, through a local or through a helper of the file that builds one, or registered from a parameter named for a mask: `register_buffer(\"land\", land_mask)`; also handed to a method, a base class's or a function of another file, or sliced: `fill(x, miss[..., 0])`) and results of functions of the file \
         that return comparisons (not of Python numbers: `return pad > 0` after `pad = (m - x.shape[-1] % m) % m` is a flag, and such a helper called on a tensor gives no tensor); a comparison with a string is a Python option, and `np.*` and \
         `cv2.*` results and `np.ndarray` parameters are arrays; `img_hw`-style parameters are an \
         image's traced (height, width), and a Python number that a function of the project returns \
         after `int()`/`math.*` of a size (`xs, n = pad_to_multiple(xs, 4)`) is a frozen size. \
         Tensors built only from Python numbers or random \
         draws (`torch.tensor(0.5)`, `torch.rand(1)`) do not depend on the inputs and are not frozen data, except that ODL004 reports a random draw turned into a Python number in a branch that only runs in eval mode (`if not self.training and self.shift > 0: offset = int(torch.randint(0, s, (1,)))`): export traces that mode and keeps the example's draw.\n\
         - `# noqa` on a line silences it; `# noqa: ODL001, ODL004` silences those codes (prefixes \
         work too). `--select`/`--ignore` take codes or prefixes (`ODL01`). `--min-severity warning` leaves out \
         the info watch points (ODL006's training branches, ODL014's implicit `align_corners`, ODL016's factories sized by a \
         tensor's size); `--min-severity error` keeps errors only; `--fix` applies only the fixes of the findings reported.\n\
         - `--fix` applies **safe** fixes in place and re-lints; **unsafe** fixes are shown as \
         suggestions (`= unsafe fix: ...`) and in JSON, never applied.\n\
         - Each file's findings are cached in `.onnx-doctor-cache/` (or `--cache-dir DIR`; `--no-cache` \
         to turn it off), like ruff's cache: a file is checked again when its length or modification \
         time changes, the project-level passes run again on the cached results, and a run on the same \
         files, none changed, reads only the files that have findings. The directory holds a \
         `.gitignore` of `*`.\n\
         - Exit code 1 when an error-level finding remains, 0 otherwise, 2 for unreadable input \
         (a file that is not UTF-8, say): the files that could be read are still reported, then \
         one line on stderr names every file that could not.\n\
         - JSON: `{\"diagnostics\": [{\"file\", \"line\", \"column\", \"code\", \"name\", \
         \"severity\", \"message\", \"help\"?, \"fix\": null | {\"description\", \"safe\", \"edits\": \
         [{\"line\", \"column\", \"end_line\", \"end_column\", \"content\"}]}}], \"summary\": \
         {\"files\", \"error\", \"warning\", \"info\", \"fixable\", \"fixed\"}}`.\n\n\
         | code | name | what it flags | severity | fix |\n|---|---|---|---|---|\n",
    );
    for r in RULES {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            r.code,
            r.name,
            r.summary.replace('|', "\\|"),
            r.severity.as_str(),
            r.fix.as_str()
        ));
    }
    out
}
