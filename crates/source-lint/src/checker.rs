//! One walk over a parsed module: name resolution through imports, which functions are model
//! code (`forward` and what it calls), a small flow-insensitive guess of which local names hold
//! tensors, booleans masks, traced sizes or frozen Python ints, and the hooks rules attach to.

use crate::registry::Rule;
use crate::rules;
use crate::{Edit, Finding, LineIndex, OpsetNeed};
use crate::{HashMap, HashSet};
use diagnostics::{Diagnostic, Location};
use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, Stmt};
use ruff_text_size::{TextRange, TextSize};
use serde::{Deserialize, Serialize};

/// What a project-level rule needs to know about one export call site.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExportSite {
    pub line: usize,
    pub column: usize,
    /// The `opset_version=` literal and its byte range, when given as an integer literal.
    pub opset: Option<(u32, TextRange)>,
    /// The classes the exported module is built from, as this file names them, and whether
    /// this file defines them: `IFNet` for `model = IFNet(cfg).eval()`, `Wrapper` then `IFNet`
    /// for `Wrapper(IFNet(cfg))`. Empty when not read from the text.
    pub model_classes: Vec<(String, bool)>,
    /// The linted files those classes come from, with whether what they import counts too
    /// (for an imported class; this file's own classes bring only this file's ops). `None`
    /// when one of them is not resolved (project pass).
    pub model_files: Option<Vec<(String, bool)>>,
    /// Whether the call splices a dict it could not read the opset from (`**kw`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub splices: bool,
}

/// Facts one file contributes to project-level rules.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Facts {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub needs: Vec<OpsetNeed>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exports: Vec<ExportSite>,
    /// The linted files this file imports (display names), filled in by the project pass.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub imports: Vec<String>,
    /// Whether the file defines model code of its own (a `forward`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub defines_models: bool,
    /// `opset_version` values written in dicts of export arguments (`{"opset_version": 13,
    /// "do_constant_folding": True}`, `dict(opset_version=13, ...)`), with their ranges: the
    /// dict may be spliced into an export in another file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kwargs_opsets: Vec<(u32, TextRange)>,
    /// Module-level modules a function of this file exports with nothing in the file calling it
    /// (ODL017): another file importing one by name decides its mode.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exported_globals: Vec<String>,
    /// Functions of this file that move their parameter and export it with nothing in the file
    /// using them (ODL017): another file importing one by name is a caller.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub preparing_exporters: Vec<String>,
}

impl Facts {
    /// Whether the file contributes nothing to project-level rules.
    pub fn is_empty(&self) -> bool {
        self.needs.is_empty()
            && self.exports.is_empty()
            && self.kwargs_opsets.is_empty()
            && self.imports.is_empty()
            && self.exported_globals.is_empty()
            && self.preparing_exporters.is_empty()
            && !self.defines_models
    }
}

#[derive(Default)]
pub(crate) struct FnState {
    pub in_model: bool,
    /// Depth of branches of model code that are not model code themselves (training-only,
    /// eager-only): `in_model` is false inside them, this is not zero.
    pub guarded: u32,
    /// The function's name (empty for the module).
    pub name: String,
    pub tensors: HashSet<String>,
    pub bools: HashSet<String>,
    /// Lists of masks (`masks = [prob > t for t in ts]`): a loop over one yields masks.
    pub mask_lists: HashSet<String>,
    /// Local names bound to a torch function (`oe = torch.einsum` in `forward`): calls through
    /// them are calls of what they name, from the binding on.
    pub torch_aliases: HashMap<String, String>,
    pub sizes: HashSet<String>,
    /// Parameters that are sizes because a caller fills them with one (`make_grid(b, h, w)`
    /// called with `x.shape`'s): the function's own code reads no tensor's size for them.
    pub size_params: HashSet<String>,
    /// Parameters every caller of this file fills with one of the module's weights
    /// (`self.get_absolute_positions(self.position_embeddings, ...)`), and locals bound to a
    /// slice of one: their sizes are constants.
    pub weight_params: HashSet<String>,
    pub frozen: HashSet<String>,
    /// The frozen names bound at least once to a size made a Python number (`n = len(x)`,
    /// `h, w = [int(s) for s in x.shape[2:]]`, a helper's frozen result, a parameter a caller
    /// froze), not only to a tensor's values (`area = mask.sum().item()`, `x0, y0 =
    /// box.tolist()`). Names are kept per function, so one such binding anywhere counts.
    pub frozen_sizes: HashSet<String>,
    /// Names bound to a tensor that does not depend on the inputs (`torch.tensor(0.5)`,
    /// `torch.rand(1)`), and names bound at least once to one that does.
    pub consts: HashSet<String>,
    pub non_consts: HashSet<String>,
    /// Names holding containers of tensors (`outputs: Dict[str, Tensor]`, `feats: List[Tensor]`):
    /// their items are tensors.
    pub containers: HashSet<String>,
    /// Parameters annotated as dicts whose values are tensors (`feats: Dict[str, Tensor]`):
    /// `.items()` and `.values()` give tensors.
    pub tensor_dicts: HashSet<String>,
    /// Containers the function builds itself from tensors (`feats.append(x)` in a loop over
    /// `self.layers`, `[self.head(h) for h in hs]`), not handed in.
    pub built_lists: HashSet<String>,
    /// Names bound to a submodule (`m = self.model`): calling them applies a module.
    pub modules: HashSet<String>,
    /// Names bound to NumPy arrays (`present = np.unique(...)`, `a = t.numpy()`): their
    /// `.tolist()` is host code, already reported where the tensor left the graph.
    pub arrays: HashSet<String>,
    /// The function's own parameters (a bare `if flag:` on one is usually a Python flag).
    pub params: HashSet<String>,
    /// Local names bound to literals (lists of strings for export arguments).
    pub literals: HashMap<String, Expr>,
    /// Names holding an instance of a record class of this file (`out: SegOutput`, `out =
    /// self.forward(x)` with `-> SegOutput`): its tensor fields are tensors.
    pub records: HashMap<String, String>,
}

pub(crate) struct LoopInfo {
    pub targets: Vec<String>,
    /// Names bound in the loop body: values computed per iteration.
    pub assigned: Vec<String>,
    /// `for k in range(B)` with `B` a traced or frozen size: a loop over the samples.
    pub over_samples: bool,
    /// Targets bound to rows of a tensor: `row` in `for row in x` or `for row, n in zip(x,
    /// lengths)`; a write into one is a write into the tensor.
    pub rows: Vec<String>,
    /// The rows of a tensor that depends on the inputs (not `torch.tensor([0, 4, 12])`, nor a
    /// buffer of the module).
    pub data_rows: Vec<String>,
}

/// Every name a function body binds, outside nested functions and classes, read in one pass:
/// the values plain (and annotated) assignments give it ([`rules::bound_values`]), the values it
/// is unpacked from ([`rules::unpacked_values`]), and how many times the body stores to it
/// ([`rules::store_count`]). Rules that ask about many names of one function read these instead
/// of walking the body for each.
#[derive(Default)]
pub(crate) struct LocalBindings<'a> {
    /// Whether the body was read (model code only).
    pub read: bool,
    values: HashMap<&'a str, Vec<&'a Expr>>,
    unpacked: HashMap<&'a str, Vec<&'a Expr>>,
    stores: HashMap<&'a str, usize>,
}

/// One pass over a body: see [`LocalBindings`].
impl<'a> Visitor<'a> for LocalBindings<'a> {
    fn visit_stmt(&mut self, s: &'a Stmt) {
        match s {
            Stmt::FunctionDef(_) | Stmt::ClassDef(_) => return,
            Stmt::Import(i) => {
                for a in &i.names {
                    let name = match &a.asname {
                        Some(n) => n.id.as_str(),
                        None => a.name.id.split('.').next().unwrap_or_default(),
                    };
                    *self.stores.entry(name).or_default() += 1;
                }
                return;
            }
            Stmt::ImportFrom(i) => {
                for a in &i.names {
                    let name = a.asname.as_ref().unwrap_or(&a.name).id.as_str();
                    *self.stores.entry(name).or_default() += 1;
                }
                return;
            }
            Stmt::Assign(a) => {
                let (mut plain, mut unpacked): (Vec<&str>, Vec<&str>) = Default::default();
                for t in &a.targets {
                    match t {
                        Expr::Name(n) => plain.push(n.id.as_str()),
                        Expr::Tuple(ast::ExprTuple { elts, .. })
                        | Expr::List(ast::ExprList { elts, .. }) => {
                            unpacked.extend(elts.iter().filter_map(|e| match e {
                                Expr::Name(n) => Some(n.id.as_str()),
                                _ => None,
                            }))
                        }
                        _ => {}
                    }
                }
                plain.sort_unstable();
                plain.dedup();
                unpacked.sort_unstable();
                unpacked.dedup();
                for n in plain {
                    self.values.entry(n).or_default().push(&a.value);
                }
                for n in unpacked {
                    self.unpacked.entry(n).or_default().push(&a.value);
                }
            }
            Stmt::AnnAssign(a) => {
                if let (Expr::Name(n), Some(v)) = (a.target.as_ref(), a.value.as_deref()) {
                    self.values.entry(n.id.as_str()).or_default().push(v);
                }
            }
            _ => {}
        }
        visitor::walk_stmt(self, s);
    }
    fn visit_expr(&mut self, e: &'a Expr) {
        if let Expr::Name(n) = e {
            if n.ctx.is_store() {
                *self.stores.entry(n.id.as_str()).or_default() += 1;
            }
        }
        visitor::walk_expr(self, e);
    }
}

impl<'a> LocalBindings<'a> {
    fn of(body: &'a [Stmt]) -> Self {
        let mut b = LocalBindings {
            read: true,
            ..Default::default()
        };
        b.visit_body(body);
        b
    }

    /// What plain assignments bind `name` to, in order.
    pub(crate) fn values(&self, name: &str) -> &[&'a Expr] {
        self.values.get(name).map_or(&[], |v| &v[..])
    }

    /// What `name` is unpacked from, in order.
    pub(crate) fn unpacked(&self, name: &str) -> &[&'a Expr] {
        self.unpacked.get(name).map_or(&[], |v| &v[..])
    }

    /// How many times the body stores to `name`.
    pub(crate) fn stores(&self, name: &str) -> usize {
        self.stores.get(name).copied().unwrap_or(0)
    }
}

/// The names plain assignments in a loop's body bind (values computed per iteration).
fn assigned_names(body: &[Stmt]) -> Vec<String> {
    let mut stmts = Vec::new();
    flatten(body, &mut stmts);
    let mut assigned = Vec::new();
    for s in stmts {
        if let Stmt::Assign(a) = s {
            for t in &a.targets {
                collect_names(t, &mut assigned);
            }
        }
    }
    assigned
}

/// Whether a `while` body steps a counter up by a number (`i += 1`) at its top level and
/// binds it nowhere else.
fn counts_up(body: &[Stmt], counter: &Expr) -> bool {
    let Expr::Name(n) = counter else {
        return false;
    };
    let steps = body.iter().any(|s| {
        matches!(s, Stmt::AugAssign(a) if matches!(a.op, ast::Operator::Add)
            && matches!(a.target.as_ref(), Expr::Name(t) if t.id == n.id)
            && a.value.is_number_literal_expr())
    });
    steps && rules::store_count(body, n.id.as_str()) == 1
}

/// A class's weight attributes ([`weight_attributes`]), computed when first asked, and the
/// bodies of the class and of its base classes of the file they are read from.
type LazyWeights<'a> = (std::cell::OnceCell<HashSet<String>>, Vec<&'a [Stmt]>);

/// A function of the file that calls the exporter, and that call.
pub(crate) type ExportWrapper<'a> = (&'a ast::StmtFunctionDef, &'a ast::ExprCall);

pub(crate) struct Checker<'a> {
    pub source: &'a str,
    pub file: &'a str,
    pub index: &'a LineIndex,
    pub imports: HashMap<String, String>,
    pub torch_imported: bool,
    /// What the file's text holds at all, so that per-call and per-statement checks for rare
    /// forms cost nothing in files without them: `partial` (partials of torch functions), `:=`
    /// (walrus bindings).
    pub has_partial: bool,
    /// Whether any function of the file has bound a local alias of a torch function.
    has_local_aliases: bool,
    pub has_walrus: bool,
    /// The statements after the `if` being visited, in its block: after `if not
    /// self.training: return x` they are the training side.
    rest_after_if: &'a [Stmt],
    /// Depth of branches that only run in eval mode (`if not self.training [and ...]:`, the
    /// else of `if self.training:`): code there is meant for inference, the mode export traces.
    pub eval_only: u32,
    model_fns: HashSet<(Option<String>, String)>,
    pub classes: Vec<String>,
    /// Method names of each enclosing class: `self.m(x)` calls a method, not a submodule.
    class_methods: Vec<HashMap<String, &'a [Stmt]>>,
    /// The base classes each class of the file names ([`class_bases`]).
    class_bases: HashMap<&'a str, Vec<&'a str>>,
    /// Attributes of each enclosing class that hold tensors: buffers, parameters and tensors
    /// assigned to `self.<name>`.
    class_tensor_attrs: Vec<HashSet<String>>,
    /// Attributes of each enclosing class that hold boolean tensors
    /// (`self.register_buffer("disabled", torch.zeros(n, dtype=torch.bool))`).
    class_bool_attrs: Vec<HashSet<String>>,
    /// Attributes of each enclosing class that only ever hold its weights: `nn.Parameter`s and
    /// registered buffers, never reassigned. Their sizes are constants of the model.
    /// Computed when first asked: most classes never read a size of `self.<attr>`. Beside
    /// each, the bodies of the class and of its base classes of the file.
    class_weight_attrs: Vec<LazyWeights<'a>>,
    /// Functions (class `None`) and methods whose return annotation names `Tensor`.
    /// For a tuple annotation, which elements are tensors (empty: the whole value is one).
    returns_tensor: HashMap<(Option<String>, String), Vec<bool>>,
    /// Module-level functions of this file without a return annotation: called on tensors,
    /// they most likely return one (`heat = _nms(hm)`).
    unannotated_fns: HashSet<String>,
    /// Methods of this file's classes without a return annotation: `self.span_scores(words)`.
    unannotated_methods: HashSet<(String, String)>,
    /// Record classes of this file (a dataclass, a `NamedTuple`) and their fields annotated as
    /// tensors: `seg_logits: torch.Tensor`.
    record_fields: HashMap<String, Record>,
    /// The part of `record_fields` this file defines (for importers).
    own_records: HashMap<String, Record>,
    /// Functions (class `None`) and methods of this file annotated to return a list or dict of
    /// tensors (`-> Dict[str, Tensor]`, `-> List[torch.Tensor]`).
    returns_container: HashSet<(Option<String>, String)>,
    /// The same for imported callees, as this file spells them.
    imported_containers: HashSet<String>,
    /// Functions (class `None`) and methods annotated to return one of those records.
    returns_record: HashMap<(Option<String>, String), String>,
    /// [`Checker::torch_built_tuple`] per callee, as it is asked at every unpacking.
    #[allow(clippy::type_complexity)]
    torch_built: std::cell::RefCell<HashMap<(Option<String>, String), Option<Vec<bool>>>>,
    imported_unannotated: HashSet<String>,
    /// The same for imported callees, as this file spells them (`pad_mask`, `U.decode`).
    imported_returns: HashMap<String, Vec<bool>>,
    /// This file's functions that return Python numbers made from sizes, and imported ones (as
    /// called here): `xs, n_chunks = pad_to_multiple(xs, 4)`.
    frozen_returns: HashMap<String, Vec<bool>>,
    /// The part of `frozen_returns` this file defines (for importers).
    own_frozen_returns: HashMap<String, Vec<bool>>,
    /// This file's functions that return masks, by element (`bad, offenders =
    /// flag_bad_data(r)`), and imported ones (as called here).
    mask_returns: HashMap<String, Vec<bool>>,
    /// The part of `mask_returns` this file defines (for importers).
    own_mask_returns: HashMap<String, Vec<bool>>,
    /// Imported functions that leave a module in eval mode ([`Project::eval_helpers`]).
    imported_eval_helpers: HashSet<String>,
    /// [`Project::imported_elsewhere`].
    imported_elsewhere: HashSet<String>,
    /// [`argument_seeds`] of this file, read when the first model function is entered (or when
    /// the project pass asks for [`Checker::imported_argument_kinds`]).
    argument_seeds: std::cell::OnceCell<FileArguments>,
    /// [`self_method_arguments`] of this file, read when first asked.
    self_method_arguments: std::cell::OnceCell<HashMap<String, SelfMethodArguments>>,
    /// [`Project::argument_kinds`]: how other files' callers fill this file's functions.
    imported_argument_kinds: HashMap<String, ArgumentKinds>,
    /// Module-level functions of this file that call the exporter, with that call
    /// ([`Checker::export_wrapper`]), found when first asked.
    /// (Indexes into the module's statements: a cell of references would tie `'a`.)
    export_wrappers: std::cell::OnceCell<HashMap<String, usize>>,
    pub fns: Vec<FnState>,
    /// [`LocalBindings`] of the enclosing functions of model code, innermost last (empty for
    /// other functions), read once when each is entered.
    pub local_bindings: Vec<LocalBindings<'a>>,
    pub loops: Vec<LoopInfo>,
    /// Statements of the innermost function (or the module) that encloses the current node.
    pub bodies: Vec<&'a [Stmt]>,
    /// The functions that enclose the current node, outermost first.
    pub defs: Vec<&'a ast::StmtFunctionDef>,
    pub findings: Vec<Finding>,
    pub facts: Facts,
}

/// Functions and methods that return Python values, not tensors.
const NON_TENSOR_METHODS: &[&str] = &[
    "size",
    "dim",
    "ndimension",
    "item",
    "tolist",
    "numel",
    "nelement",
    "numpy",
    "is_contiguous",
    "data_ptr",
    "element_size",
    "get_device",
    "stride",
    "is_floating_point",
    "is_complex",
    "storage_offset",
    "type",
    "__len__",
    "keys",
    "values",
    "items",
    "format",
    "join",
    "split_with_sizes_",
];

/// torch functions that build a tensor from Python values or draw random numbers: with inert
/// arguments their result does not depend on the model's inputs.
const CONSTANT_FACTORIES: &[&str] = &[
    "torch.tensor",
    "torch.as_tensor",
    "torch.scalar_tensor",
    "torch.from_numpy",
    "torch.rand",
    "torch.randn",
    "torch.randint",
    "torch.randperm",
    "torch.empty",
    "torch.zeros",
    "torch.ones",
    "torch.full",
    "torch.arange",
    "torch.linspace",
    "torch.logspace",
    "torch.eye",
];

/// Methods that keep a boolean mask boolean (they move, copy or select its elements).
const SHAPE_ONLY_METHODS: &[&str] = &[
    "clone",
    "detach",
    "scatter",
    "gather",
    "roll",
    "flip",
    "index_select",
    "repeat",
    "repeat_interleave",
    "narrow",
    "unsqueeze",
    "squeeze",
    "triu",
    "tril",
    "triu_",
    "tril_",
    "t",
    "expand",
    "expand_as",
    "view",
    "reshape",
    "flatten",
    "logical_not",
    "logical_and",
    "logical_or",
    "logical_xor",
    "bool",
    "permute",
    "transpose",
    "contiguous",
    "to",
    "cuda",
    "cpu",
    "eq",
    "ne",
    "gt",
    "ge",
    "lt",
    "le",
    "isnan",
    "isinf",
    "isfinite",
];

/// What the other files of a project tell one file.
#[derive(Debug, Clone, Default)]
pub(crate) struct Project {
    /// Module-level functions and classes of this file that other files' model code calls
    /// (see [`imported_model_calls`]).
    pub roots: HashSet<String>,
    /// Imported callables (as called here: `pad_mask`, `U.decode`) whose defining file annotates
    /// them as returning tensors; the flags as in `returns_tensor`.
    pub returns: HashMap<String, Vec<bool>>,
    /// Imported callables (as called here) whose defining file gives no return annotation.
    pub unannotated: HashSet<String>,
    /// Imported functions (as called here) that return sizes as Python numbers; the flags as in
    /// [`frozen_returning_functions`].
    pub frozen_returns: HashMap<String, Vec<bool>>,
    /// Imported functions (as called here) that return masks; the flags as in
    /// [`mask_returning_tuples`].
    pub mask_returns: HashMap<String, Vec<bool>>,
    /// Methods that model code of files importing this one calls on submodules
    /// (`self.model.score_masked(...)`): this file's methods of those names are model code.
    pub methods: HashSet<String>,
    /// Imported functions (as called here) that leave a module in eval mode in their defining
    /// file (`load_detector(path)` ending in `model.eval(); return model`).
    pub eval_helpers: HashSet<String>,
    /// Names of this file that another file imports (`from nb import model, export_onnx`):
    /// what that file does with them is not seen here.
    pub imported_elsewhere: HashSet<String>,
    /// This file's module-level functions that model code of another file calls with frozen
    /// numbers or traced sizes (`stations_to_grid(v, rows, cols, H, W)` after
    /// `H = int(x.shape[-2])`), as [`argument_seeds`] finds them in the calling file.
    pub argument_kinds: HashMap<String, ArgumentKinds>,
    /// Record classes other files define that this one imports, as it spells them
    /// (`StrikeOutput`, `mops.Pyramid`), and the records their fields name.
    pub records: HashMap<String, Record>,
    /// Imported functions (as called here) annotated to return a list or dict of tensors
    /// (`-> Dict[str, Tensor]`).
    pub container_returns: HashSet<String>,
}

impl Project {
    /// Whether other files told this one nothing (it needs no second check).
    pub fn is_empty(&self) -> bool {
        self.roots.is_empty()
            && self.returns.is_empty()
            && self.unannotated.is_empty()
            && self.frozen_returns.is_empty()
            && self.mask_returns.is_empty()
            && self.methods.is_empty()
            && self.eval_helpers.is_empty()
            && self.imported_elsewhere.is_empty()
            && self.argument_kinds.is_empty()
            && self.records.is_empty()
            && self.container_returns.is_empty()
    }

    /// A hash of what other files told this one, the same for the same facts in any order (the
    /// cache keeps a file's second check by it).
    pub fn digest(&self) -> u64 {
        use std::hash::{Hash, Hasher};
        fn sorted<T: Ord>(items: impl Iterator<Item = T>) -> Vec<T> {
            let mut v: Vec<T> = items.collect();
            v.sort();
            v
        }
        let mut h = rustc_hash::FxHasher::default();
        sorted(self.roots.iter()).hash(&mut h);
        sorted(self.returns.iter()).hash(&mut h);
        sorted(self.unannotated.iter()).hash(&mut h);
        sorted(self.frozen_returns.iter()).hash(&mut h);
        sorted(self.mask_returns.iter()).hash(&mut h);
        sorted(self.methods.iter()).hash(&mut h);
        sorted(self.eval_helpers.iter()).hash(&mut h);
        sorted(self.imported_elsewhere.iter()).hash(&mut h);
        for name in sorted(self.argument_kinds.keys()) {
            let kinds = &self.argument_kinds[name];
            name.hash(&mut h);
            sorted(kinds.frozen.iter()).hash(&mut h);
            sorted(kinds.sizes.iter()).hash(&mut h);
            sorted(kinds.masks.iter()).hash(&mut h);
        }
        for name in sorted(self.records.keys()) {
            let r = &self.records[name];
            name.hash(&mut h);
            sorted(r.tensors.iter()).hash(&mut h);
            sorted(r.optional.iter()).hash(&mut h);
            sorted(r.records.iter()).hash(&mut h);
            r.getitem.hash(&mut h);
        }
        sorted(self.container_returns.iter()).hash(&mut h);
        h.finish()
    }
}

impl<'a> Checker<'a> {
    pub fn new(
        source: &'a str,
        file: &'a str,
        index: &'a LineIndex,
        module: &'a [Stmt],
        project: &Project,
    ) -> Self {
        let mut imports = HashMap::default();
        collect_imports(module, &mut imports);
        collect_torch_aliases(module, &mut imports);
        let torch_imported = imports
            .values()
            .any(|q| q == "torch" || q.starts_with("torch."));
        let class_bases = class_bases(module);
        let model_fns = model_functions(
            module,
            &class_bases,
            &imports,
            &project.roots,
            &project.methods,
        );
        let returns_tensor = tensor_returning_functions(module);
        let (own_records, returns_record) = record_classes(module, &project.records);
        let mut record_fields = own_records.clone();
        for (name, r) in &project.records {
            record_fields
                .entry(name.clone())
                .or_insert_with(|| r.clone());
        }
        let own_frozen_returns = frozen_returning_functions(module);
        let own_mask_returns = mask_returning_tuples(module);
        // Functions that return sizes as Python numbers are read like annotated ones: called on
        // a tensor, they do not give one.
        let size_valued = size_valued_functions(module);
        let unannotated_fns = module
            .iter()
            .filter_map(|s| match s {
                Stmt::FunctionDef(f)
                    if f.returns.is_none() && !size_valued.contains(f.name.id.as_str()) =>
                {
                    Some(f.name.id.to_string())
                }
                _ => None,
            })
            .collect();
        let mut unannotated_methods = HashSet::default();
        for s in module {
            let Stmt::ClassDef(c) = s else { continue };
            for m in &c.body {
                if let Stmt::FunctionDef(f) = m {
                    if f.returns.is_none()
                        && !f.name.id.starts_with("__")
                        && (size_valued.is_empty()
                            || !size_valued.contains(&format!("{}.{}", c.name.id, f.name.id)))
                    {
                        unannotated_methods.insert((c.name.id.to_string(), f.name.id.to_string()));
                    }
                }
            }
        }
        let has =
            |needle: &str| memchr::memmem::find(source.as_bytes(), needle.as_bytes()).is_some();
        Checker {
            source,
            file,
            index,
            imports,
            torch_imported,
            has_partial: has("partial"),
            has_local_aliases: false,
            has_walrus: has(":="),
            rest_after_if: &[],
            eval_only: 0,
            model_fns,
            classes: Vec::new(),
            class_methods: Vec::new(),
            class_bases,
            class_tensor_attrs: Vec::new(),
            class_bool_attrs: Vec::new(),
            class_weight_attrs: Vec::new(),
            returns_tensor,
            unannotated_fns,
            unannotated_methods,
            record_fields,
            own_records,
            returns_container: container_returning_functions(module),
            imported_containers: project.container_returns.clone(),
            returns_record,
            torch_built: Default::default(),
            imported_unannotated: project.unannotated.clone(),
            imported_returns: project.returns.clone(),
            frozen_returns: {
                let mut all = own_frozen_returns.clone();
                all.extend(project.frozen_returns.clone());
                all
            },
            own_frozen_returns,
            mask_returns: {
                let mut all = own_mask_returns.clone();
                all.extend(project.mask_returns.clone());
                all
            },
            own_mask_returns,
            imported_eval_helpers: project.eval_helpers.clone(),
            imported_elsewhere: project.imported_elsewhere.clone(),
            argument_seeds: std::cell::OnceCell::new(),
            self_method_arguments: std::cell::OnceCell::new(),
            export_wrappers: std::cell::OnceCell::new(),
            imported_argument_kinds: project.argument_kinds.clone(),
            fns: Vec::new(),
            local_bindings: Vec::new(),
            loops: Vec::new(),
            bodies: vec![module],
            defs: Vec::new(),
            findings: Vec::new(),
            facts: Facts::default(),
        }
    }

    /// Module-level functions of this file annotated to return a list or dict of tensors (for
    /// importers).
    pub fn module_container_returns(&self) -> HashSet<String> {
        self.returns_container
            .iter()
            .filter(|(class, _)| class.is_none())
            .map(|(_, name)| name.clone())
            .collect()
    }

    /// Whether a call returns a list or dict of tensors by its callee's annotation: a function
    /// of this file, a method of this class, or an imported one (`mops.guard(feats)`).
    fn returns_container(&self, c: &ast::ExprCall) -> bool {
        if self.returns_container.is_empty() && self.imported_containers.is_empty() {
            return false;
        }
        let own = match c.func.as_ref() {
            Expr::Name(n) => Some((None, n.id.to_string())),
            f => self_attr(f).map(|m| (self.classes.last().cloned(), m.to_string())),
        };
        own.is_some_and(|k| self.returns_container.contains(&k))
            || imported_callee(c).is_some_and(|k| self.imported_containers.contains(&k))
    }

    /// This file's record classes (for importers).
    pub fn module_records(&self) -> &HashMap<String, Record> {
        &self.own_records
    }

    /// Module-level functions of this file annotated as returning tensors (for importers).
    pub fn module_returns(&self) -> HashMap<String, Vec<bool>> {
        self.returns_tensor
            .iter()
            .filter(|((class, _), _)| class.is_none())
            .map(|((_, name), flags)| (name.clone(), flags.clone()))
            .collect()
    }

    /// Functions (and methods, as `Class.method`) of this file that return frozen sizes (for
    /// importers).
    pub fn module_frozen_returns(&self) -> HashMap<String, Vec<bool>> {
        self.own_frozen_returns.clone()
    }

    /// Functions (and methods, as `Class.method`) of this file that return masks (for
    /// importers).
    pub fn module_mask_returns(&self) -> HashMap<String, Vec<bool>> {
        self.own_mask_returns.clone()
    }

    /// Which elements of a call's result are masks (one flag for a single value).
    pub fn mask_return(&self, c: &ast::ExprCall) -> Option<&[bool]> {
        if self.mask_returns.is_empty() {
            return None;
        }
        let key = match self_attr(&c.func) {
            Some(m) => format!("{}.{m}", self.classes.last()?),
            None => imported_callee(c)?,
        };
        self.mask_returns.get(&key).map(Vec::as_slice)
    }

    /// Whether `name` (as called here) is an imported function that leaves a module in eval
    /// mode in the file that defines it.
    pub fn imported_eval_helper(&self, name: &str) -> bool {
        self.imported_eval_helpers.contains(name)
    }

    /// Whether a class derives `torch.autograd.Function` (through the file's imports:
    /// `from torch.autograd import Function as AF`).
    /// Also through a base class of this file (`class LeakyFloor(SoftClamp)` with `class
    /// SoftClamp(torch.autograd.Function)`).
    pub fn is_autograd_function(&self, class: &ast::StmtClassDef) -> bool {
        std::iter::once(class)
            .chain(self.file_ancestors(class))
            .flat_map(|c| c.bases())
            .any(|b| {
                self.qualify(b).is_some_and(|q| {
                    q == "torch.autograd.Function" || q == "torch.autograd.function.Function"
                })
            })
    }

    /// The module-level classes of this file `class` derives from, directly or not ([`lineage`]
    /// of each base it names; `class` itself may be nested in a function).
    pub fn file_ancestors(&self, class: &ast::StmtClassDef) -> Vec<&'a ast::StmtClassDef> {
        let name = class.name.id.as_str();
        let mut names: Vec<&str> = Vec::new();
        for b in class.bases() {
            if let Expr::Name(n) = b {
                for c in lineage(&self.class_bases, n.id.as_str()) {
                    if c != name && !names.contains(&c) {
                        names.push(c);
                    }
                }
            }
        }
        names
            .into_iter()
            .filter_map(|c| module_class(self.bodies[0], c))
            .collect()
    }

    /// Whether another file imports `name` from this one.
    pub fn imported_elsewhere(&self, name: &str) -> bool {
        self.imported_elsewhere.contains(name)
    }

    /// Which elements of a call's result are sizes frozen into Python numbers by the callee
    /// (one flag for a single value).
    pub fn frozen_return(&self, c: &ast::ExprCall) -> Option<&[bool]> {
        if self.frozen_returns.is_empty() {
            return None;
        }
        let key = match self_attr(&c.func) {
            Some(m) => format!("{}.{m}", self.classes.last()?),
            None => imported_callee(c)?,
        };
        self.frozen_returns.get(&key).map(Vec::as_slice)
    }

    /// Module-level functions of this file without a return annotation (for importers).
    pub fn unannotated_functions(&self) -> &HashSet<String> {
        &self.unannotated_fns
    }

    /// The functions and methods this file's checks treat as model code.
    pub fn model_functions(&self) -> &HashSet<(Option<String>, String)> {
        &self.model_fns
    }

    pub fn run(&mut self, module: &'a [Stmt]) {
        self.fns.push(FnState::default());
        scan_locals(self, module, None);
        self.visit_body(module);
        self.fns.pop();
    }

    // ---- reporting -------------------------------------------------------------------------

    pub fn report(&mut self, rule: &Rule, range: TextRange, message: impl Into<String>) -> usize {
        let (line, column) = self.index.line_col(self.source, range.start().to_usize());
        let d = Diagnostic::new(
            rule.code,
            rule.severity,
            message,
            Location::Source {
                file: self.file.to_string(),
                line,
                column,
            },
        );
        self.findings.push(Finding {
            diagnostic: d,
            edits: Vec::new(),
        });
        self.findings.len() - 1
    }

    pub fn help(&mut self, i: usize, help: impl Into<String>) {
        self.findings[i].diagnostic.help = Some(help.into());
    }

    pub fn fix(&mut self, i: usize, description: impl Into<String>, safe: bool, edits: Vec<Edit>) {
        self.findings[i].diagnostic = self.findings[i]
            .diagnostic
            .clone()
            .with_fix(description, safe);
        self.findings[i].edits = edits;
    }

    pub fn text(&self, range: TextRange) -> &'a str {
        &self.source[range.start().to_usize()..range.end().to_usize()]
    }

    /// The source text of `range` with its line breaks and indentation closed up into single
    /// spaces, for messages quoting code spread over several lines.
    pub fn text_on_one_line(&self, range: TextRange) -> String {
        self.text(range)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Whether `to` is on a later line than `from` (a call or test spread over several lines).
    pub fn on_later_line(&self, from: TextSize, to: TextSize) -> bool {
        self.text(TextRange::new(from, to)).contains('\n')
    }

    // ---- context -----------------------------------------------------------------------------

    /// Whether `name` is an unannotated parameter of the current function never rebound.
    pub fn is_param(&self, name: &str) -> bool {
        self.fns.last().is_some_and(|f| f.params.contains(name))
    }

    pub fn in_model(&self) -> bool {
        self.fns.last().is_some_and(|f| f.in_model)
    }

    /// Whether the visitor is in a branch of model code that export does not take (`if
    /// self.training:`, `if not torch.onnx.is_in_onnx_export():`).
    pub fn in_guarded_branch(&self) -> bool {
        self.fns.last().is_some_and(|f| f.guarded > 0)
    }

    /// Inside a function that is not model code and does not build modules (not `__init__`),
    /// in a file that has model code: data, training, loss and evaluation code beside a model,
    /// where export hazards do not apply. (In a file of helpers alone nothing says which of
    /// them a model uses, so none is side code.)
    pub fn in_side_code(&self) -> bool {
        !self.model_fns.is_empty()
            && self.fns.len() > 1
            && self
                .fns
                .last()
                .is_some_and(|f| !f.in_model && f.name != "__init__")
    }

    pub(crate) fn state(&self) -> &FnState {
        self.fns.last().expect("a scope")
    }

    /// The [`LocalBindings`] of the innermost enclosing function, when it was read (model code).
    pub(crate) fn read_local_bindings(&self) -> Option<&LocalBindings<'a>> {
        self.local_bindings
            .last()
            .filter(|b| b.read && self.bodies.len() == self.local_bindings.len() + 1)
    }

    /// The qualified name an expression refers to through the file's imports
    /// (`F.interpolate` → `torch.nn.functional.interpolate`), builtins as `builtins.len`.
    pub fn qualify(&self, e: &Expr) -> Option<String> {
        let mut out = String::new();
        self.qualify_into(e, &mut out).then_some(out)
    }

    /// Writes `qualify`'s answer into `out` (one allocation per name, not one per attribute);
    /// false when the expression does not resolve.
    fn qualify_into(&self, e: &Expr, out: &mut String) -> bool {
        match e {
            Expr::Name(n) => {
                let id = n.id.as_str();
                if let Some(q) = self
                    .has_local_aliases
                    .then(|| self.fns.last()?.torch_aliases.get(id))
                    .flatten()
                {
                    out.push_str(q);
                    return true;
                }
                if let Some(q) = self.imports.get(id) {
                    out.push_str(q);
                    return true;
                }
                if matches!(
                    id,
                    "len"
                        | "int"
                        | "float"
                        | "bool"
                        | "range"
                        | "isinstance"
                        | "list"
                        | "tuple"
                        | "min"
                        | "max"
                        | "abs"
                        | "round"
                ) && !self.state().tensors.contains(id)
                {
                    out.push_str("builtins.");
                    out.push_str(id);
                    return true;
                }
                false
            }
            Expr::Attribute(a) => {
                if !self.qualify_into(&a.value, out) || out.starts_with("builtins.") {
                    return false;
                }
                out.push('.');
                out.push_str(a.attr.id.as_str());
                true
            }
            _ => false,
        }
    }

    /// `torch.x.y` for a call of a torch function, through imports.
    /// `def _to_onnx(module, args, path, input_names, output_names, axes)` of this file and the
    /// `torch.onnx.export(...)` call in it, for a function named `name` (files that do not
    /// mention `onnx` have none).
    pub fn export_wrapper(&self, name: &str) -> Option<ExportWrapper<'a>> {
        struct Find<'c, 'a> {
            ch: &'c Checker<'a>,
            found: Option<&'a ast::ExprCall>,
        }
        impl<'a> Visitor<'a> for Find<'_, 'a> {
            fn visit_stmt(&mut self, s: &'a Stmt) {
                if self.found.is_none() && !matches!(s, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                    visitor::walk_stmt(self, s);
                }
            }
            fn visit_expr(&mut self, e: &'a Expr) {
                if self.found.is_some() {
                    return;
                }
                if let Expr::Call(c) = e {
                    if crate::rules::export_without_eval::is_export(self.ch, c) {
                        self.found = Some(c);
                        return;
                    }
                }
                visitor::walk_expr(self, e);
            }
        }
        let module: &'a [Stmt] = self.bodies[0];
        let export_in = |f: &'a ast::StmtFunctionDef| {
            let mut find = Find {
                ch: self,
                found: None,
            };
            find.visit_body(&f.body);
            find.found
        };
        let wrappers = self.export_wrappers.get_or_init(|| {
            let mut out = HashMap::default();
            // Read once per file, not per call.
            if !self.source.contains("onnx") {
                return out;
            }
            for (i, s) in module.iter().enumerate() {
                if let Stmt::FunctionDef(f) = s {
                    if export_in(f).is_some() {
                        out.insert(f.name.id.to_string(), i);
                    }
                }
            }
            out
        });
        let Stmt::FunctionDef(f) = &module[*wrappers.get(name)?] else {
            return None;
        };
        Some((f, export_in(f)?))
    }

    pub fn torch_fn(&self, call: &ast::ExprCall) -> Option<String> {
        self.qualify(&call.func)
            .filter(|q| q == "torch" || q.starts_with("torch."))
    }

    /// `(method, receiver)` for a method call on a value (not a module function).
    pub fn method<'b>(&self, call: &'b ast::ExprCall) -> Option<(&'b str, &'b Expr)> {
        let Expr::Attribute(a) = call.func.as_ref() else {
            return None;
        };
        if self.qualify(&a.value).is_some() {
            return None;
        }
        Some((a.attr.id.as_str(), &a.value))
    }

    /// Inside the `__init__` of a class with a `forward`: what it builds is what forward runs on.
    pub fn in_module_init(&self) -> bool {
        self.fns.last().is_some_and(|f| f.name == "__init__")
            && self.own_method("forward").is_some()
    }

    /// The body of a method of the innermost enclosing class (`self.NAME(...)`).
    pub fn own_method(&self, name: &str) -> Option<&'a [Stmt]> {
        self.class_methods.last().and_then(|m| m.get(name).copied())
    }

    /// The methods of the innermost enclosing class, by name.
    pub fn class_methods(&self) -> Option<&HashMap<String, &'a [Stmt]>> {
        self.class_methods.last()
    }

    pub fn is_self_attr(e: &Expr, attr: &str) -> bool {
        self_attr(e) == Some(attr)
    }

    // ---- value guesses -----------------------------------------------------------------------

    /// Whether every value the current function puts in the list `name` (`name = [...]`,
    /// `name.append(x)`, `insert`, `extend([...])`, `+= [...]`) is a tensor computed from data,
    /// not one built from Python numbers, and none of them is popped from the list itself.
    fn holds_only_tensors(&self, name: &str) -> bool {
        let Some(body) = self.bodies.last() else {
            return false;
        };
        let mut stmts = Vec::new();
        flatten(body, &mut stmts);
        let mut items: Vec<&Expr> = Vec::new();
        let is_list = |t: &Expr| matches!(t, Expr::Name(n) if n.id.as_str() == name);
        for s in stmts {
            // What the statement puts in the list, when it is a list display.
            let put = match s {
                Stmt::Assign(a) if a.targets.iter().any(is_list) => Some(a.value.as_ref()),
                Stmt::AugAssign(a) if is_list(&a.target) => Some(a.value.as_ref()),
                Stmt::Expr(x) => match x.value.as_ref() {
                    Expr::Call(c) => match (c.func.as_ref(), &c.arguments.args[..]) {
                        (Expr::Attribute(f), args) if is_list(&f.value) => {
                            match (f.attr.id.as_str(), args) {
                                ("append", [x]) | ("insert", [_, x]) => {
                                    items.push(x);
                                    None
                                }
                                ("extend", [xs]) => Some(xs),
                                _ => None,
                            }
                        }
                        _ => None,
                    },
                    _ => None,
                },
                _ => None,
            };
            match put {
                Some(Expr::List(l)) => items.extend(l.elts.iter()),
                Some(_) => return false,
                None => {}
            }
        }
        // `skips.append(skips.pop())` would ask this again.
        let pops = |x: &Expr| {
            crate::rules::any_sub_expr(x, |e| {
                matches!(e, Expr::Call(c) if matches!(c.func.as_ref(), Expr::Attribute(f)
                    if f.attr.id.as_str() == "pop" && is_list(&f.value)))
            })
        };
        !items.is_empty()
            && items
                .iter()
                .all(|x| !pops(x) && self.is_tensor(x) && !self.is_constant_tensor(x))
    }

    /// Whether an expression most likely evaluates to a `torch.Tensor` (data, not a size).
    pub fn is_tensor(&self, e: &Expr) -> bool {
        let st = self.state();
        match e {
            Expr::Name(n) => st.tensors.contains(n.id.as_str()),
            Expr::Call(c) => {
                if let Some(q) = self.torch_fn(c) {
                    return torch_returns_tensor(&q);
                }
                // `ClampSTE.apply(hm)`: an autograd Function applied to a tensor gives one.
                // Also a class of this file named in lower case (`clampy.apply(x, lo, hi)`).
                if matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.id.as_str() == "apply"
                    && matches!(a.value.as_ref(), Expr::Name(f) if class_like(f.id.as_str())
                        || module_class(self.bodies[0], f.id.as_str()).is_some()))
                    && c.arguments.args.iter().any(|a| self.is_tensor(a))
                {
                    return true;
                }
                if let Expr::Name(n) = c.func.as_ref() {
                    if self.returns_tensor.contains_key(&(None, n.id.to_string())) {
                        return true;
                    }
                    // `hard_peak = _HardPeak.apply`, then `hard_peak(p, k)`, with `_HardPeak` an
                    // autograd Function of this file (not any class with an `apply`).
                    if matches!(self.literal(n.id.as_str()), Some(Expr::Attribute(a))
                    if a.attr.id.as_str() == "apply"
                        && matches!(a.value.as_ref(), Expr::Name(f)
                            if module_class(self.bodies[0], f.id.as_str())
                                .is_some_and(|k| self.is_autograd_function(k))))
                        && c.arguments.args.iter().any(|a| self.is_tensor(a))
                    {
                        return true;
                    }
                    if self.unannotated_fns.contains(n.id.as_str())
                        && c.arguments.args.iter().any(|a| self.is_tensor(a))
                    {
                        return true;
                    }
                    // `def _gate(t): ...` inside the function, then `_gate(torch.sigmoid(y))`:
                    // a local helper without a return annotation, handed a tensor.
                    let local_helper = self.fns.len() > 1
                        && self.bodies.last().is_some_and(|body| {
                            body.iter().any(|s| {
                                matches!(s, Stmt::FunctionDef(f)
                                if f.name.id == n.id && f.returns.is_none()
                                    && returns_no_number(&f.body))
                            })
                        });
                    if local_helper && c.arguments.args.iter().any(|a| self.is_tensor(a)) {
                        return true;
                    }
                }
                if let Some(callee) = imported_callee(c) {
                    if self.imported_returns.contains_key(&callee)
                        || (self.imported_unannotated.contains(&callee)
                            && c.arguments.args.iter().any(|a| self.is_tensor(a)))
                    {
                        return true;
                    }
                }
                // `BinarizeSTE.apply(p - t)` (also with the class imported from a helper
                // module), `ops.StraightThroughPenState.apply(p)`: an autograd Function (a class,
                // by its capitalised name) applied to a tensor.
                if let Expr::Attribute(a) = c.func.as_ref() {
                    let function = match a.value.as_ref() {
                        Expr::Name(n) => class_like(n.id.as_str()),
                        Expr::Attribute(f) => {
                            class_like(f.attr.id.as_str())
                                && !self
                                    .qualify(&a.value)
                                    .is_some_and(|q| q.starts_with("torch."))
                        }
                        _ => false,
                    };
                    if a.attr.id.as_str() == "apply"
                        && function
                        && c.arguments.args.iter().any(|x| self.is_tensor(x))
                    {
                        return true;
                    }
                }
                if self.qualify(&c.func).is_some() {
                    return false;
                }
                // `self.refine_heads[i](x)`: a member of a ModuleList applied to a tensor.
                if matches!(c.func.as_ref(), Expr::Subscript(sub) if is_self_chain(&sub.value))
                    && c.arguments.args.iter().any(|a| self.is_tensor(a))
                {
                    return true;
                }
                // `for layer, ramp in zip(self.layers, self.ramps): logits = ramp(h)`.
                if matches!(c.func.as_ref(), Expr::Name(n) if st.modules.contains(n.id.as_str()))
                    && c.arguments.args.iter().any(|a| self.is_tensor(a))
                {
                    return true;
                }
                if let Some((m, recv)) = self.method(c) {
                    // `y = skips.pop()` with `skips` a list the function fills with tensors
                    // only: one of them.
                    if m == "pop" {
                        if let Expr::Name(n) = recv {
                            if st.containers.contains(n.id.as_str()) {
                                return self.holds_only_tensors(n.id.as_str());
                            }
                        }
                    }
                    // `self.join(feats)` is a submodule named `join`, not `str.join`.
                    if NON_TENSOR_METHODS.contains(&m) && !(m == "join" && is_self(recv)) {
                        return false;
                    }
                    // `super().forward(x)`: the parent module's computation.
                    // `super().forward(*inputs)` too.
                    if matches!(recv, Expr::Call(r) if matches!(r.func.as_ref(), Expr::Name(n) if n.id.as_str() == "super"))
                        && c.arguments
                            .args
                            .iter()
                            .any(|a| self.is_tensor(a) || a.is_starred_expr())
                    {
                        return true;
                    }
                    // `StakeNet.forward(s, img, lengths)` in a subclass of `StakeNet`: the parent
                    // class's `forward` called unbound on the module, as `super().forward(img,
                    // lengths)` is.
                    if m == "forward"
                        && matches!(recv, Expr::Name(n) if self.classes.last().is_some_and(|class| {
                            lineage(&self.class_bases, class)
                                .iter()
                                .skip(1)
                                .any(|c| *c == n.id.as_str())
                        }))
                        && matches!(c.arguments.args.first(), Some(Expr::Name(_)))
                        && c.arguments
                            .args
                            .iter()
                            .skip(1)
                            .any(|a| self.is_tensor(a) || a.is_starred_expr())
                    {
                        return true;
                    }
                    if is_self(recv)
                        && self.classes.last().is_some_and(|class| {
                            self.returns_tensor
                                .contains_key(&(Some(class.clone()), m.to_string()))
                                || (self
                                    .unannotated_methods
                                    .contains(&(class.clone(), m.to_string()))
                                    && c.arguments.args.iter().any(|a| self.is_tensor(a)))
                        })
                    {
                        return true;
                    }
                    if self.is_tensor(recv) {
                        return true;
                    }
                    // `self.conv(x)`, `self.blocks.attn(x)`: a submodule applied to a tensor.
                    let own_method = matches!(recv, Expr::Name(n) if n.id.as_str() == "self")
                        && self
                            .class_methods
                            .last()
                            .is_some_and(|m| m.contains_key(m_name(c)));
                    // `hm = self.peaks(hm)` with `peaks` transforming and returning what it is
                    // handed: a tensor for a tensor.
                    if own_method
                        && self
                            .own_method(m_name(c))
                            .is_some_and(returns_what_it_is_handed)
                        && c.arguments.args.iter().any(|x| self.is_tensor(x))
                    {
                        return true;
                    }
                    let alias = |e: &Expr| match e {
                        Expr::Name(n) => st.modules.contains(n.id.as_str()),
                        Expr::Attribute(a) => {
                            matches!(a.value.as_ref(), Expr::Name(n) if st.modules.contains(n.id.as_str()))
                        }
                        _ => false,
                    };
                    // `self.sampler(x.shape[0])`: a submodule handed a traced size builds a
                    // tensor from it.
                    // `self.neck(feats)` with `feats` a list of tensors the function built (an
                    // FPN's levels) too; not one handed in, which torchvision's detection
                    // heads take and return as lists.
                    if !own_method && (is_self_chain(recv) || alias(recv)) {
                        return c.arguments.args.iter().any(|x| {
                            self.is_tensor(x)
                                || self.is_size(x)
                                || matches!(x, Expr::Name(n) if st.built_lists.contains(n.id.as_str()))
                                // `self.fpn(*self.encoder(x))`: the levels a submodule just
                                // computed, spread.
                                || matches!(x, Expr::Starred(s) if matches!(s.value.as_ref(), Expr::Call(_))
                                    && self.is_tensor(&s.value))
                                // `self.fpn([c3, c4, c5])`: a list the call writes out, of tensors.
                                || matches!(x, Expr::List(l) if !l.elts.is_empty()
                                    && l.elts.iter().all(|e| self.is_tensor(e)))
                        });
                    }
                    return false;
                }
                false
            }
            Expr::Attribute(a) => {
                // `self.query_embed.weight`, `self.proj.bias`: a submodule's parameters.
                if matches!(a.attr.id.as_str(), "weight" | "bias")
                    && matches!(a.value.as_ref(), Expr::Attribute(_))
                    && is_self_chain(&a.value)
                {
                    return true;
                }
                if let Some(attr) = self_attr(e) {
                    return self
                        .class_tensor_attrs
                        .last()
                        .is_some_and(|attrs| attrs.contains(attr))
                        // `self.num_boxes` in a property of a record class.
                        || self.record_field_is_tensor(&a.value, Some(attr), false) == Some(true);
                }
                // `out.seg_logits` with `out` a record whose field is a tensor.
                if let Some(tensor) =
                    self.record_field_is_tensor(&a.value, Some(a.attr.id.as_str()), false)
                {
                    return tensor;
                }
                // `x.max(-1).values`, `t.topk(k).indices`: fields of a tensor op's result.
                matches!(
                    a.attr.id.as_str(),
                    "T" | "mT" | "data" | "real" | "imag" | "grad" | "values" | "indices"
                ) && self.is_tensor(&a.value)
            }
            Expr::Subscript(s) => {
                self.is_tensor(&s.value)
                    || matches!(s.value.as_ref(), Expr::Name(n) if st.containers.contains(n.id.as_str()))
                    // `track["freqs"]` with `track` a `TypedDict` record, or any item of a record
                    // whose `__getitem__` gives tensors.
                    || self.record_field_is_tensor(
                        &s.value,
                        match s.slice.as_ref() {
                            Expr::StringLiteral(k) => Some(k.value.to_str()),
                            _ => None,
                        },
                        true,
                    ) == Some(true)
            }
            Expr::BinOp(b) => self.is_tensor(&b.left) || self.is_tensor(&b.right),
            Expr::UnaryOp(u) => !matches!(u.op, ast::UnaryOp::Not) && self.is_tensor(&u.operand),
            Expr::Compare(c) => {
                // `padding_type == 'reflect'`: a parameter compared with a string is an option.
                let string = |x: &Expr| {
                    matches!(
                        x,
                        Expr::StringLiteral(_) | Expr::FString(_) | Expr::NoneLiteral(_)
                    )
                };
                c.ops.iter().all(|op| {
                    !matches!(
                        op,
                        ast::CmpOp::Is | ast::CmpOp::IsNot | ast::CmpOp::In | ast::CmpOp::NotIn
                    )
                }) && !string(&c.left)
                    && !c.comparators.iter().any(string)
                    && (self.is_tensor(&c.left) || c.comparators.iter().any(|x| self.is_tensor(x)))
            }
            Expr::BoolOp(b) => b.values.iter().any(|v| self.is_tensor(v)),
            Expr::Named(n) => self.is_tensor(&n.value),
            // `-d / t if self.training else -d`
            Expr::If(i) => self.is_tensor(&i.body) || self.is_tensor(&i.orelse),
            _ => false,
        }
    }

    /// The record class of this file an annotation names: `SegOutput`, `"SegOutput"`,
    /// `Optional[SegOutput]`.
    fn record_named(&self, a: &Expr) -> Option<&str> {
        if let Expr::Attribute(at) = a {
            // `pyr: mops.Pyramid`, a record of an imported module.
            if let Expr::Name(m) = at.value.as_ref() {
                let key = format!("{}.{}", m.id, at.attr.id);
                return self
                    .record_fields
                    .get_key_value(&key)
                    .map(|(k, _)| k.as_str());
            }
            return None;
        }
        self.record_fields
            .get_key_value(annotated_class(a)?)
            .map(|(k, _)| k.as_str())
    }

    /// For a value holding a record: whether what is read of it is a tensor, a field (`field`,
    /// an attribute or a string key) annotated as one or, for a subscript (`item`), any item of
    /// a record whose `__getitem__` gives tensors. `None` when the value holds no record.
    fn record_field_is_tensor(
        &self,
        value: &Expr,
        field: Option<&str>,
        item: bool,
    ) -> Option<bool> {
        let r = self.record_fields.get(self.record_of(value)?)?;
        Some((item && r.getitem) || field.is_some_and(|f| r.tensors.contains(f)))
    }

    /// Whether an expression builds a record with a tensor field computed there:
    /// `dataclasses.replace(out, image=out.image.clamp(0, 1))` (not `hole=hole`).
    pub fn builds_record_from_tensors(&self, e: &Expr) -> bool {
        matches!(e, Expr::Call(c) if self.record_of(e).is_some()
            && c.arguments.keywords.iter().any(|k| !k.value.is_name_expr() && self.is_tensor(&k.value)))
    }

    /// Whether an expression reads a record's field annotated `Optional[...]` (`out.aux`,
    /// `track["mask"]`): a bare test of one (`if out.aux:`) asks whether it was filled.
    pub fn is_optional_field(&self, e: &Expr) -> bool {
        let (value, field) = match e {
            Expr::Attribute(a) => (a.value.as_ref(), a.attr.id.as_str()),
            Expr::Subscript(s) => match s.slice.as_ref() {
                Expr::StringLiteral(k) => (s.value.as_ref(), k.value.to_str()),
                _ => return false,
            },
            _ => return false,
        };
        self.record_of(value)
            .and_then(|class| self.record_fields.get(class))
            .is_some_and(|r| r.optional.contains(field))
    }

    /// The record class of this file an expression holds: a name bound to one, a call of its
    /// constructor, or a call of a function or method annotated to return it, or a field of
    /// another record annotated with it (`out.partials` with `partials: PartialTrack`).
    fn record_of(&self, e: &Expr) -> Option<&str> {
        if self.record_fields.is_empty() {
            return None;
        }
        match e {
            Expr::Name(n) => match self.state().records.get(n.id.as_str()) {
                Some(class) => Some(class),
                // `self` in a method of a record class.
                None if n.id.as_str() == "self" => self
                    .classes
                    .last()
                    .and_then(|c| self.record_fields.get_key_value(c.as_str()))
                    .map(|(k, _)| k.as_str()),
                None => None,
            },
            Expr::Attribute(a) => {
                let outer = self.record_of(&a.value)?;
                self.record_fields
                    .get(outer)?
                    .records
                    .get(a.attr.id.as_str())
                    .map(String::as_str)
            }
            Expr::Subscript(s) => {
                let Expr::StringLiteral(k) = s.slice.as_ref() else {
                    return None;
                };
                let outer = self.record_of(&s.value)?;
                self.record_fields
                    .get(outer)?
                    .records
                    .get(k.value.to_str())
                    .map(String::as_str)
            }
            Expr::Call(c) => {
                // `dataclasses.replace(out, image=y)`, `out._replace(logits=y)`: the same record.
                if let Some(first) = c.arguments.args.first() {
                    if self
                        .qualify(&c.func)
                        .is_some_and(|q| q == "dataclasses.replace")
                    {
                        return self.record_of(first);
                    }
                }
                if let Expr::Attribute(a) = c.func.as_ref() {
                    if a.attr.id.as_str() == "_replace" {
                        return self.record_of(&a.value);
                    }
                }
                let key = match c.func.as_ref() {
                    Expr::Name(n) => {
                        if let Some((class, _)) = self.record_fields.get_key_value(n.id.as_str()) {
                            return Some(class);
                        }
                        (None, n.id.to_string())
                    }
                    Expr::Attribute(a) if matches!(a.value.as_ref(), Expr::Name(m) if m.id.as_str() != "self") =>
                    {
                        return self.record_named(&c.func);
                    }
                    // `out = super().forward(x)`: the method as a base class of the file
                    // annotates it.
                    Expr::Attribute(a)
                        if matches!(a.value.as_ref(), Expr::Call(r)
                            if matches!(r.func.as_ref(), Expr::Name(n) if n.id.as_str() == "super")) =>
                    {
                        let class = self.classes.last()?;
                        let method = a.attr.id.as_str();
                        // The first base that defines the method, in declaration order (`class
                        // C(A, B)` reaches `A.forward` first); it decides even when it returns
                        // no record.
                        let owner = declared_order(&self.class_bases, class.as_str())
                            .into_iter()
                            .skip(1)
                            .find_map(|base| match self.class_defines(base, method) {
                                // A base of another file: what it defines is not known here.
                                None => Some(None),
                                Some(true) => Some(Some(base)),
                                Some(false) => None,
                            })??;
                        return self
                            .returns_record
                            .get(&(Some(owner.to_string()), method.to_string()))
                            .map(String::as_str);
                    }
                    f => (self.classes.last().cloned(), self_attr(f)?.to_string()),
                };
                self.returns_record
                    .get(&key)
                    .or_else(|| {
                        // `res = self.slate(x)` with `self.slate = ThicknessGrader(cfg)`: what the
                        // submodule's `forward` is annotated to return.
                        let class = self.submodule_class(key.0.as_deref()?, &key.1)?;
                        self.returns_record
                            .get(&(Some(class.to_string()), "forward".to_string()))
                    })
                    .map(String::as_str)
            }
            _ => None,
        }
    }

    /// The class of the file that `self.attr` is built as in `class` (`self.slate =
    /// ThicknessGrader(cfg)`), when `attr` is bound once.
    fn submodule_class(&self, class: &str, attr: &str) -> Option<&'a str> {
        let module: &'a [Stmt] = self.bodies[0];
        let c = module.iter().find_map(|s| match s {
            Stmt::ClassDef(c) if c.name.id.as_str() == class => Some(c),
            _ => None,
        })?;
        let mut built = self_assignments(&c.body)
            .into_iter()
            .filter(|(a, _)| *a == attr)
            .map(|(_, value)| match value {
                Expr::Call(call) => match call.func.as_ref() {
                    Expr::Name(ctor) => Some(ctor.id.as_str()),
                    _ => None,
                },
                _ => None,
            });
        let ctor = built.next()??;
        if built.next().is_some() {
            return None;
        }
        module
            .iter()
            .any(|s| matches!(s, Stmt::ClassDef(k) if k.name.id.as_str() == ctor))
            .then_some(ctor)
    }

    /// Whether the file's class `class` defines `method` itself; `None` when the file has no
    /// such class.
    fn class_defines(&self, class: &str, method: &str) -> Option<bool> {
        self.bodies[0].iter().find_map(|s| match s {
            Stmt::ClassDef(c) if c.name.id.as_str() == class => Some(
                c.body
                    .iter()
                    .any(|m| matches!(m, Stmt::FunctionDef(f) if f.name.id.as_str() == method)),
            ),
            _ => None,
        })
    }

    /// Which elements of a call's tuple result are tensors, from the callee's annotation
    /// (`-> Tuple[int, Tensor]`), for a function of this file or a method of this class.
    pub fn tuple_return(&self, c: &ast::ExprCall) -> Option<&[bool]> {
        if let Some(v) = imported_callee(c)
            .and_then(|callee| self.imported_returns.get(&callee))
            .filter(|v| !v.is_empty())
        {
            return Some(v);
        }
        let key = match c.func.as_ref() {
            Expr::Name(n) => (None, n.id.to_string()),
            f => (self.classes.last().cloned(), self_attr(f)?.to_string()),
        };
        self.returns_tensor
            .get(&key)
            .map(Vec::as_slice)
            .filter(|v| !v.is_empty())
    }

    /// For an unannotated function of this file or method of this class whose every `return`
    /// builds elements with torch (`return torch.cat(boxes, 1), torch.cat(scores, 1)`): which
    /// elements are tensors, whatever the call was handed (a list of feature maps).
    pub fn torch_built_tuple(&self, c: &ast::ExprCall) -> Option<Vec<bool>> {
        let key = match c.func.as_ref() {
            Expr::Name(n) if self.unannotated_fns.contains(n.id.as_str()) => {
                (None, n.id.to_string())
            }
            f => {
                let name = self_attr(f)?;
                let class = self.classes.last()?;
                if !self
                    .unannotated_methods
                    .contains(&(class.clone(), name.to_string()))
                {
                    return None;
                }
                (Some(class.clone()), name.to_string())
            }
        };
        if let Some(known) = self.torch_built.borrow().get(&key) {
            return known.clone();
        }
        let body = match &key {
            (None, name) => self.bodies[0].iter().find_map(|s| match s {
                Stmt::FunctionDef(f) if f.name.id.as_str() == name => Some(&f.body[..]),
                _ => None,
            }),
            (Some(_), name) => self.own_method(name),
        };
        let flags = body.and_then(|b| self.torch_built_returns(b));
        self.torch_built.borrow_mut().insert(key, flags.clone());
        flags
    }

    /// Which elements of a body's returned tuple are built by a torch function that gives a
    /// tensor (`torch.cat(...)`, `F.softmax(...)`), every `return` agreeing; None when none is,
    /// when a `return` is not a tuple of the same length, or when there is no `return`.
    fn torch_built_returns(&self, body: &[Stmt]) -> Option<Vec<bool>> {
        let mut stmts = Vec::new();
        flatten(body, &mut stmts);
        let mut flags: Option<Vec<bool>> = None;
        for s in stmts {
            let Stmt::Return(r) = s else { continue };
            let Some(Expr::Tuple(t)) = r.value.as_deref() else {
                return None;
            };
            // Not a factory (`torch.tensor(strides)`, `torch.zeros(n)`): what those build need
            // not depend on the inputs.
            let these = t.elts.iter().map(|e| {
                matches!(e, Expr::Call(c)
                    if self.torch_fn(c).is_some_and(|q| torch_returns_tensor(&q)
                        && !CONSTANT_FACTORIES.contains(&q.as_str())))
            });
            match &mut flags {
                None => flags = Some(these.collect()),
                Some(f) if f.len() == t.elts.len() => {
                    f.iter_mut().zip(these).for_each(|(a, b)| *a &= b);
                }
                Some(_) => return None,
            }
        }
        flags.filter(|f| f.iter().any(|&b| b))
    }

    /// Whether a value comes from the model's inputs: a tensor that is not a constant one, a
    /// traced size, or a number frozen from either (what filling a constant tensor in place
    /// with makes it depend on the inputs).
    pub fn depends_on_inputs(&self, e: &Expr) -> bool {
        (self.is_tensor(e) || self.is_size(e) || self.is_frozen_int(e))
            && !self.is_constant_tensor(e)
    }

    /// Whether a tensor expression is built only from Python values, constants and random
    /// draws (`torch.tensor(scale).log2()`, `torch.rand(1) < self.p`,
    /// `torch.empty(1).uniform_(lo, hi)`): nothing in it depends on the model's inputs, so
    /// turning it into a Python number or branching on it freezes nothing the inputs decide.
    pub fn is_constant_tensor(&self, e: &Expr) -> bool {
        let st = self.state();
        // Each operand is judged once (a chain `a + b + c + ...` stays linear): whether it is a
        // constant tensor, and whether it is inert, i.e. either that or a Python value (not a
        // tensor, not a traced size).
        let judge = |x: &Expr| {
            let constant = self.is_constant_tensor(x);
            // `torch.tensor([c.shape[0] for c in cands])`: a list of the inputs' sizes.
            let sizes_list = matches!(x, Expr::ListComp(_) | Expr::List(_) | Expr::Tuple(_))
                && (reads_size(x) || self.lengths_of_tensors(x));
            let inert = constant
                || (!self.is_tensor(x)
                    && !self.is_size(x)
                    && !self.is_frozen_int(x)
                    && !sizes_list);
            (constant, inert)
        };
        let all = |xs: &mut dyn Iterator<Item = &Expr>| {
            let (mut any_constant, mut all_inert) = (false, true);
            for x in xs {
                let (c, i) = judge(x);
                any_constant |= c;
                all_inert &= i;
                if !all_inert {
                    break;
                }
            }
            (any_constant, all_inert)
        };
        match e {
            Expr::Name(n) => {
                let id = n.id.as_str();
                st.consts.contains(id) && !st.non_consts.contains(id) && !st.params.contains(id)
            }
            Expr::Call(c) => {
                let (_, keywords_inert) = all(&mut c.arguments.keywords.iter().map(|k| &k.value));
                if !keywords_inert {
                    return false;
                }
                if let Some(q) = self.torch_fn(c) {
                    if !torch_returns_tensor(&q) {
                        return false;
                    }
                    let (any_constant, args_inert) = all(&mut c.arguments.args.iter());
                    // Factories and random draws make a tensor from Python values; any other
                    // function is constant when it has a constant tensor operand.
                    return args_inert
                        && (CONSTANT_FACTORIES.contains(&q.as_str()) || any_constant);
                }
                if let Some((m, recv)) = self.method(c) {
                    return !NON_TENSOR_METHODS.contains(&m)
                        && self.is_constant_tensor(recv)
                        && all(&mut c.arguments.args.iter()).1;
                }
                false
            }
            Expr::Attribute(a) => {
                matches!(a.attr.id.as_str(), "T" | "mT" | "data" | "real" | "imag")
                    && self.is_constant_tensor(&a.value)
            }
            Expr::Subscript(s) => self.is_constant_tensor(&s.value) && judge(&s.slice).1,
            Expr::BinOp(b) => {
                let (any_constant, all_inert) =
                    all(&mut [b.left.as_ref(), b.right.as_ref()].into_iter());
                any_constant && all_inert
            }
            Expr::UnaryOp(u) => self.is_constant_tensor(&u.operand),
            Expr::Compare(c) => {
                let (any_constant, all_inert) =
                    all(&mut std::iter::once(c.left.as_ref()).chain(c.comparators.iter()));
                any_constant && all_inert
            }
            Expr::BoolOp(b) => {
                let (any_constant, all_inert) = all(&mut b.values.iter());
                any_constant && all_inert
            }
            Expr::Named(n) => self.is_constant_tensor(&n.value),
            _ => false,
        }
    }

    /// Whether an expression is a NumPy array: a `numpy.*` call, `t.numpy()`, or a name bound
    /// to one.
    pub fn is_array(&self, e: &Expr) -> bool {
        match e {
            Expr::Name(n) => self.state().arrays.contains(n.id.as_str()),
            // OpenCV's Python API returns NumPy arrays: `pts = cv2.boxPoints(rect)`.
            Expr::Call(c) => {
                self.qualify(&c.func)
                    .is_some_and(|q| q.starts_with("numpy.") || q.starts_with("cv2."))
                    || matches!(self.method(c), Some(("numpy", _)))
            }
            _ => false,
        }
    }

    /// Whether a name was bound in this function to a mask computed from tensors.
    pub fn is_computed_mask(&self, e: &Expr) -> bool {
        matches!(e, Expr::Name(n) if self.state().bools.contains(n.id.as_str()))
    }

    /// Whether an expression is most likely a boolean mask tensor.
    pub fn is_bool_mask(&self, e: &Expr) -> bool {
        let st = self.state();
        match e {
            Expr::Name(n) => {
                let id = n.id.as_str();
                st.bools.contains(id)
                    || (names_a_mask(id) && !st.sizes.contains(id) && !st.frozen.contains(id))
            }
            Expr::Compare(c) => {
                compares_values(c)
                    && (self.is_tensor(&c.left) || c.comparators.iter().any(|x| self.is_tensor(x)))
            }
            // `~t` only applies to bool (or integer) tensors: on a tensor it is a mask.
            Expr::UnaryOp(u) => {
                matches!(u.op, ast::UnaryOp::Invert)
                    && (self.is_bool_mask(&u.operand) || self.is_tensor(&u.operand))
            }
            Expr::BinOp(b) => {
                matches!(
                    b.op,
                    ast::Operator::BitAnd | ast::Operator::BitOr | ast::Operator::BitXor
                ) && (self.is_bool_mask(&b.left) || self.is_bool_mask(&b.right))
            }
            Expr::Call(c) => {
                if let Some(q) = self.torch_fn(c) {
                    // `torch.ones_like(x, dtype=torch.bool)`
                    if c.arguments.keywords.iter().any(|k| {
                        k.arg.as_ref().is_some_and(|a| a.as_str() == "dtype")
                            && self.qualify(&k.value).is_some_and(|d| d == "torch.bool")
                    }) {
                        return true;
                    }
                    // `torch.full((n, n), True)`: filled with a Boolean, no dtype given.
                    if q == "torch.full" && fills_bool(c) {
                        return true;
                    }
                    // `F.pad(diff < eps, (1, 0), value=False)`, `torch.roll(valid, 1, -1)`:
                    // a mask rearranged is a mask.
                    if matches!(
                        q.as_str(),
                        "torch.nn.functional.pad"
                            | "torch.roll"
                            | "torch.flip"
                            | "torch.triu"
                            | "torch.tril"
                            | "torch.t"
                            | "torch.transpose"
                    ) {
                        return c
                            .arguments
                            .args
                            .first()
                            .is_some_and(|a| self.is_bool_mask(a));
                    }
                    // `torch.cat([ones, scores >= thr], dim=1)`: joining masks gives a mask.
                    if matches!(q.as_str(), "torch.cat" | "torch.concat" | "torch.stack") {
                        return c.arguments.args.first().is_some_and(|a| match a {
                            Expr::List(l) => l.elts.iter().any(|e| self.is_bool_mask(e)),
                            Expr::Tuple(t) => t.elts.iter().any(|e| self.is_bool_mask(e)),
                            _ => false,
                        });
                    }
                    return matches!(
                        q.as_str(),
                        "torch.isnan"
                            | "torch.isinf"
                            | "torch.isfinite"
                            | "torch.logical_not"
                            | "torch.logical_and"
                            | "torch.logical_or"
                            | "torch.logical_xor"
                            | "torch.eq"
                            | "torch.ne"
                            | "torch.gt"
                            | "torch.ge"
                            | "torch.lt"
                            | "torch.le"
                            | "torch.isin"
                    );
                }
                // `make_pad_mask(lens, T)`, `self._sequence_mask(x)`: helpers named for masks,
                // also a submodule's (`self.scheduler.night_mask(hour)`).
                let helper = match c.func.as_ref() {
                    Expr::Name(n) => Some(n.id.as_str()),
                    Expr::Attribute(a) if is_self_chain(&a.value) => Some(a.attr.id.as_str()),
                    _ => None,
                };
                // `self._out_of_frame(flow)`, `keep = gops.valid_rows(r)`: a function of this
                // file or of a helper module whose every `return` is a comparison.
                if self.mask_return(c) == Some(&[true][..]) {
                    return true;
                }
                if helper.is_some_and(|h| h.to_ascii_lowercase().ends_with("mask"))
                    && self
                        .qualify(&c.func)
                        .is_none_or(|q| q != "torch" && !q.starts_with("torch."))
                {
                    return true;
                }
                if let Some((m, recv)) = self.method(c) {
                    if m == "bool" {
                        return self.is_tensor(recv) || self.is_bool_mask(recv);
                    }
                    // `(x > 0).all(dim=1)`: a reduction over a dim keeps a mask.
                    if matches!(m, "any" | "all")
                        && !(c.arguments.args.is_empty() && c.arguments.keywords.is_empty())
                    {
                        return self.is_tensor(recv) || self.is_bool_mask(recv);
                    }
                    if matches!(
                        m,
                        "isnan" | "isinf" | "isfinite" | "eq" | "ne" | "gt" | "ge" | "lt" | "le"
                    ) {
                        return self.is_tensor(recv);
                    }
                    // `alive.logical_not()`, `a.logical_and(b)`: always a mask.
                    if matches!(
                        m,
                        "logical_not" | "logical_and" | "logical_or" | "logical_xor"
                    ) {
                        return self.is_tensor(recv) || self.is_bool_mask(recv);
                    }
                    // `.to(torch.long)`, `.view(torch.int8)`: cast to another dtype.
                    let cast = matches!(m, "to" | "view" | "type")
                        && c.arguments
                            .args
                            .iter()
                            .chain(c.arguments.keywords.iter().map(|k| &k.value))
                            .any(|a| {
                                self.qualify(a).is_some_and(|q| {
                                    q.starts_with("torch.")
                                        && q != "torch.bool"
                                        && torch_dtype_name(&q[6..])
                                })
                            });
                    if SHAPE_ONLY_METHODS.contains(&m) && !cast {
                        return self.is_bool_mask(recv);
                    }
                }
                false
            }
            Expr::Subscript(s) => self.is_bool_mask(&s.value),
            // `mask.data`: the same mask, outside autograd (PyTorch 0.4-era code); `mask.T`.
            Expr::Attribute(a)
                if matches!(a.attr.id.as_str(), "data" | "T" | "mT")
                    && self.is_bool_mask(&a.value) =>
            {
                true
            }
            // `self.bad_mask`, `self.valid`: a mask kept on the module, by name or by dtype.
            Expr::Attribute(a) => {
                is_self_chain(e)
                    && (names_a_mask(a.attr.id.as_str())
                        || (self_attr(e).is_some()
                            && self
                                .class_bool_attrs
                                .last()
                                .is_some_and(|b| b.contains(a.attr.id.as_str()))))
            }
            _ => false,
        }
    }

    /// Whether an expression is one of the module's weights: a parameter or buffer of its
    /// class (`self.pos_embed`), or a submodule's (`self.embed.weight`). Their sizes are the
    /// model's constants, whatever the input.
    pub fn is_weight(&self, e: &Expr) -> bool {
        match e {
            Expr::Attribute(a)
                if matches!(a.attr.id.as_str(), "weight" | "bias")
                    && matches!(a.value.as_ref(), Expr::Attribute(_))
                    && is_self_chain(&a.value) =>
            {
                true
            }
            Expr::Name(n) => self.state().weight_params.contains(n.id.as_str()),
            e => self_attr(e).is_some_and(|attr| self.is_weight_attr(attr)),
        }
    }

    /// Whether a list holds lengths of tensors: `[len(k) for k in keeps]` over a list of
    /// tensors, `[len(boxes), len(scores)]` (not of Python lists, `len(self.anchors)`).
    fn lengths_of_tensors(&self, e: &Expr) -> bool {
        let mut over_tensors: Vec<&str> = Vec::new();
        let elts: Vec<&Expr> = match e {
            Expr::ListComp(l) => {
                for g in &l.generators {
                    let tensors = self.is_tensor(&g.iter)
                        || matches!(&g.iter, Expr::Name(n) if self.state().containers.contains(n.id.as_str()));
                    if let (true, Expr::Name(t)) = (tensors, &g.target) {
                        over_tensors.push(t.id.as_str());
                    }
                }
                vec![&l.elt]
            }
            Expr::List(l) => l.elts.iter().collect(),
            Expr::Tuple(t) => t.elts.iter().collect(),
            _ => return false,
        };
        elts.into_iter().any(|x| {
            rules::any_sub_expr(x, |e| {
                matches!(e, Expr::Call(c) if matches!(c.func.as_ref(), Expr::Name(f) if f.id.as_str() == "len")
                    && matches!(&c.arguments.args[..], [a] if self.is_tensor(a)
                        || matches!(a, Expr::Name(n) if over_tensors.contains(&n.id.as_str()))))
            })
        })
    }

    /// Whether `self.<attr>` is one of the class's parameters or buffers.
    fn is_weight_attr(&self, attr: &str) -> bool {
        self.class_weight_attrs
            .last()
            .is_some_and(|(weights, bodies)| {
                weights
                    .get_or_init(|| {
                        let mut stored = HashSet::default();
                        let mut w = HashSet::default();
                        for body in bodies {
                            w.extend(weight_attributes(self, body, &mut stored));
                        }
                        w.retain(|a| !stored.contains(a));
                        w
                    })
                    .contains(attr)
            })
    }

    /// Whether an expression reads the shape of the module's weights (`self.pos_embed.shape`,
    /// `self.table.size(1)`): a constant, not a size of the inputs.
    pub fn is_weight_shape(&self, e: &Expr) -> bool {
        match e {
            Expr::Subscript(s) => self.is_weight_shape(&s.value),
            Expr::Attribute(a) => a.attr.id.as_str() == "shape" && self.is_weight(&a.value),
            Expr::Call(c) => {
                matches!(self.method(c), Some(("size" | "numel", recv)) if self.is_weight(recv))
            }
            _ => false,
        }
    }

    /// Whether an expression is a tensor size the tracer records (`x.shape[0]`, `x.size(1)`).
    pub fn is_size(&self, e: &Expr) -> bool {
        if self.is_weight_shape(e) {
            return false;
        }
        match e {
            Expr::Name(n) => self.state().sizes.contains(n.id.as_str()),
            Expr::Subscript(s) => match s.value.as_ref() {
                Expr::Attribute(a) => a.attr.id.as_str() == "shape",
                Expr::Call(c) => matches!(self.method(c), Some(("size", _))),
                // `shape = x.shape; shape[0]`
                Expr::Name(n) => self.state().sizes.contains(n.id.as_str()),
                _ => false,
            },
            Expr::Attribute(a) => a.attr.id.as_str() == "shape",
            Expr::Call(c) => {
                matches!(self.method(c), Some(("size" | "numel", _)))
                    // `max(H - overlap, 1)`: still a size.
                    || (matches!(
                        self.qualify(&c.func).as_deref(),
                        Some("builtins.min" | "builtins.max")
                    ) && c.arguments.args.iter().any(|a| self.is_size(a)))
            }
            Expr::BinOp(b) => self.is_size(&b.left) || self.is_size(&b.right),
            _ => false,
        }
    }

    /// Whether an expression reads sizes the tracer does not record: through `.data`
    /// (`x.data.size(0)`, `x.data.shape[1]`, pytorch#77410) or `torch.Size.numel()`
    /// (`x.shape.numel()`): Python numbers of the example (`scripts/check_traced_sizes.py`).
    pub fn is_untraced_size(&self, e: &Expr) -> bool {
        // `x.data` of a tensor; not a `PackedSequence`'s `.data` field (`out, _ = self.rnn(packed)`
        // then `out.data.size(0)` stays traced): not in a function that packs sequences.
        let through_data = |r: &Expr| {
            matches!(r, Expr::Attribute(d) if d.attr.id.as_str() == "data"
                && self.is_tensor(&d.value)
                && !self.packs_sequences())
        };
        let shape_of_data = |e: &Expr| match e {
            Expr::Attribute(a) => a.attr.id.as_str() == "shape" && through_data(&a.value),
            Expr::Call(c) => matches!(c.func.as_ref(), Expr::Attribute(a)
                if a.attr.id.as_str() == "size" && through_data(&a.value)),
            _ => false,
        };
        match e {
            Expr::Subscript(s) => shape_of_data(&s.value),
            Expr::Call(c) => {
                shape_of_data(e)
                    || matches!(c.func.as_ref(), Expr::Attribute(a)
                    if a.attr.id.as_str() == "numel"
                        && c.arguments.args.is_empty()
                        && match a.value.as_ref() {
                            Expr::Attribute(s) => s.attr.id.as_str() == "shape",
                            Expr::Call(sc) => sc.arguments.args.is_empty()
                                && matches!(sc.func.as_ref(), Expr::Attribute(s) if s.attr.id.as_str() == "size"),
                            _ => false,
                        })
            }
            e => shape_of_data(e),
        }
    }

    /// Whether the enclosing function works with packed sequences (`pack_padded_sequence`,
    /// `PackedSequence`), whose `.data` is a field, not `Tensor.data`.
    fn packs_sequences(&self) -> bool {
        let Some(body) = self.bodies.last() else {
            return false;
        };
        let (Some(first), Some(last)) = (body.first(), body.last()) else {
            return false;
        };
        let text = &self.source[ruff_text_size::Ranged::start(first).to_usize()
            ..ruff_text_size::Ranged::end(last).to_usize()];
        text.contains("pack_") || text.contains("PackedSequence")
    }

    /// Whether an expression is a size or tensor value already turned into a Python number,
    /// which the tracer records as a constant: `len(x)`, `int(x.size(0))`, `t.item()`.
    pub fn is_frozen_int(&self, e: &Expr) -> bool {
        if self.is_untraced_size(e) {
            return true;
        }
        match e {
            Expr::Name(n) => self.state().frozen.contains(n.id.as_str()),
            // `s = x.data.size()` then `s[0]`.
            Expr::Subscript(s) => {
                matches!(s.value.as_ref(), Expr::Name(n) if self.state().frozen_sizes.contains(n.id.as_str()))
            }
            Expr::Call(c) => {
                if self.frozen_return(c) == Some(&[true][..]) {
                    return true;
                }
                if let Some(q) = self.qualify(&c.func) {
                    let arg = c.arguments.args.first();
                    return match q.as_str() {
                        // `len(counts)` with `counts = sizes.tolist()`: the length of a
                        // tensor's values as a list.
                        "builtins.len" => arg.is_some_and(|a| {
                            (self.is_tensor(a) && !self.is_weight(a)) || self.is_frozen_int(a)
                        }),
                        // `min(len(boxes), len(slots))`: still a frozen number.
                        // `max([len(idx) for idx in indexes])` (BEVFormer): lengths of the
                        // elements as Python numbers; `max(x.size(0) for x in xs)` stays traced.
                        "builtins.min" | "builtins.max" => c.arguments.args.iter().any(|a| {
                            let elt = match a {
                                Expr::ListComp(l) => Some(&l.elt),
                                Expr::Generator(g) => Some(&g.elt),
                                _ => None,
                            };
                            self.is_frozen_int(a)
                                || elt.is_some_and(|e| {
                                    matches!(e.as_ref(), Expr::Call(ec)
                                    if matches!(self.qualify(&ec.func).as_deref(), Some("builtins.len" | "builtins.int")))
                                })
                        }),
                        "builtins.int" | "builtins.float" => arg.is_some_and(|a| {
                            ((self.is_size(a) || self.is_tensor(a)) && !self.is_constant_tensor(a))
                                || self.is_frozen_int(a)
                        }),
                        _ if q.starts_with("math.") || q.starts_with("numpy.") => c
                            .arguments
                            .args
                            .iter()
                            .any(|a| self.is_size(a) || self.is_frozen_int(a)),
                        _ => false,
                    };
                }
                if let Some((m, recv)) = self.method(c) {
                    return matches!(m, "item" | "tolist")
                        && self.is_tensor(recv)
                        && !self.is_constant_tensor(recv);
                }
                false
            }
            Expr::BinOp(b) => self.is_frozen_int(&b.left) || self.is_frozen_int(&b.right),
            Expr::UnaryOp(u) => self.is_frozen_int(&u.operand),
            // `0 if past is None else int(past[0][0].shape[1])`
            Expr::If(i) => self.is_frozen_int(&i.body) || self.is_frozen_int(&i.orelse),
            _ => false,
        }
    }

    /// Whether a frozen number (`is_frozen_int`) holds a size rather than a tensor's values:
    /// `len(x)`, `int(x.size(0))`, `W - 1` with `W = int(x.shape[-1])`; not `mask.sum().item()`,
    /// `float(score)` or what `box.tolist()` unpacks to. A number whose origin is not known (a
    /// helper's result, a parameter a caller froze) counts as a size.
    pub fn is_frozen_size(&self, e: &Expr) -> bool {
        if self.is_untraced_size(e) {
            return true;
        }
        match e {
            Expr::Name(n) => {
                let st = self.state();
                st.frozen_sizes.contains(n.id.as_str())
            }
            Expr::Subscript(s) => {
                matches!(s.value.as_ref(), Expr::Name(n) if self.state().frozen_sizes.contains(n.id.as_str()))
            }
            Expr::Call(c) => {
                if self
                    .method(c)
                    .is_some_and(|(m, _)| matches!(m, "item" | "tolist"))
                {
                    return false;
                }
                match self.qualify(&c.func).as_deref() {
                    Some("builtins.int" | "builtins.float") => c
                        .arguments
                        .args
                        .first()
                        .is_some_and(|a| self.is_size(a) || self.is_frozen_size(a)),
                    // `max(w - 1, 1)`, `max([len(i) for i in idx])`; not `max(area, 1)`.
                    Some("builtins.min" | "builtins.max") => {
                        self.is_frozen_int(e)
                            && c.arguments.args.iter().any(|a| {
                                matches!(a, Expr::ListComp(_) | Expr::Generator(_))
                                    || self.is_size(a)
                                    || self.is_frozen_size(a)
                            })
                    }
                    // `np.linspace(-1, 1, prof.shape[0])`, `np.zeros(n)`: arrays of values made
                    // to a size, not sizes.
                    Some(
                        "numpy.linspace" | "numpy.arange" | "numpy.zeros" | "numpy.ones"
                        | "numpy.empty" | "numpy.full" | "numpy.eye" | "numpy.polyfit"
                        | "numpy.interp",
                    ) => false,
                    Some(q) if q.starts_with("math.") || q.starts_with("numpy.") => c
                        .arguments
                        .args
                        .iter()
                        .any(|a| self.is_size(a) || self.is_frozen_size(a)),
                    _ => self.is_frozen_int(e),
                }
            }
            Expr::BinOp(b) => self.is_frozen_size(&b.left) || self.is_frozen_size(&b.right),
            Expr::UnaryOp(u) => self.is_frozen_size(&u.operand),
            Expr::If(i) => self.is_frozen_size(&i.body) || self.is_frozen_size(&i.orelse),
            _ => false,
        }
    }

    // ---- lookups in the enclosing body -------------------------------------------------------

    /// The value a local name was last bound to as a literal (list, tuple, dict, string).
    /// How this file's functions call names it does not define (`ops.stations_to_grid(...)`,
    /// keyed by that spelling): which arguments are frozen numbers or traced sizes, for the
    /// project pass. Computed once with the seeds the checker reads itself.
    pub fn imported_argument_kinds(&self) -> HashMap<String, ArgumentKinds> {
        self.argument_seeds
            .get_or_init(|| argument_seeds(self.bodies[0]))
            .1
            .clone()
    }

    pub fn literal(&self, name: &str) -> Option<&Expr> {
        let (last, outer) = self.fns.split_last()?;
        if let Some(e) = last.literals.get(name) {
            return Some(e);
        }
        // A parameter or any other binding of the function shadows the module's (`def
        // get_grid(self, shape, device)`, `device = x.device` beside `device =
        // torch.device("cuda")`).
        let found = outer.iter().rev().find_map(|f| f.literals.get(name))?;
        (!self.binds_locally(name)).then_some(found)
    }

    /// Whether the enclosing function binds `name` itself: a parameter, or any store in its
    /// body (an assignment, a loop target, a comprehension's variable, a lambda's parameter).
    pub fn binds_locally(&self, name: &str) -> bool {
        self.defs.last().is_some_and(|f| {
            f.parameters.iter().any(|p| p.name().id.as_str() == name)
                || rules::stores_name(&f.body, name)
        })
    }

    /// [`Checker::literal`], but a binding of the enclosing function written after offset `at`
    /// does not count (`save = torch.save; save(m, p)`, later `save = partial(...)`); an outer
    /// scope's binding runs before the function does, wherever it is written.
    pub fn literal_before(&self, name: &str, at: TextSize) -> Option<&Expr> {
        let (last, outer) = self.fns.split_last()?;
        if let Some(e) = last.literals.get(name) {
            return (ruff_text_size::Ranged::start(e) < at).then_some(e);
        }
        outer.iter().rev().find_map(|f| f.literals.get(name))
    }
}

/// Whether `torch.<name>` is a dtype (`long`, `int64`, `float16`, `uint8`, ...).
fn torch_dtype_name(name: &str) -> bool {
    matches!(
        name,
        "long"
            | "int"
            | "short"
            | "half"
            | "float"
            | "double"
            | "bfloat16"
            | "cfloat"
            | "cdouble"
            | "complex64"
            | "complex128"
    ) || ["int", "uint", "float"].iter().any(|p| {
        name.strip_prefix(p)
            .is_some_and(|b| b.parse::<u32>().is_ok())
    })
}

/// Whether `torch.<q>(...)` returns a tensor.
fn torch_returns_tensor(q: &str) -> bool {
    const NOT: &[&str] = &[
        "torch.jit.",
        "torch._C.",
        "torch.onnx.",
        "torch.cuda.",
        "torch.backends.",
        "torch.compiler.",
        "torch.distributed.",
        "torch.is_",
        "torch.get_",
        "torch.set_",
        "torch.Size",
        "torch.device",
        "torch.finfo",
        "torch.iinfo",
        "torch.no_grad",
        "torch.enable_grad",
        "torch.inference_mode",
        "torch.autocast",
        "torch.manual_seed",
        "torch.load",
        "torch.save",
        "torch.numel",
        "torch._assert",
        "torch.nn.Module",
        "torch.nn.Parameter",
        "torch.utils.",
        "torch.fx.",
        "torch.export.",
        "torch.library.",
        "torch.ops.",
        "torch.overrides.",
        "torch.typename",
        "torch.use_deterministic",
        "torch.Generator",
        "torch.Tensor",
        "torch.dtype",
        // `torch.__version__.split(".")`, `torch.version.cuda.split(".")`: strings.
        "torch.__version__",
        "torch.version.",
    ];
    if NOT.iter().any(|p| q.starts_with(p)) {
        return false;
    }
    // Module constructors (`nn.Linear(...)`) build modules, not tensors.
    if let Some(last) = q.rsplit('.').next() {
        if last.chars().next().is_some_and(char::is_uppercase) {
            return false;
        }
    }
    true
}

// ---- pre-passes --------------------------------------------------------------------------------

fn collect_imports(body: &[Stmt], out: &mut HashMap<String, String>) {
    for stmt in body {
        match stmt {
            Stmt::Import(i) => {
                for a in &i.names {
                    let full = a.name.id.as_str();
                    match &a.asname {
                        Some(alias) => {
                            out.insert(alias.id.to_string(), full.to_string());
                        }
                        None => {
                            let top = full.split('.').next().unwrap_or(full);
                            out.insert(top.to_string(), top.to_string());
                        }
                    }
                }
            }
            Stmt::ImportFrom(i) if i.level == 0 => {
                let Some(module) = &i.module else { continue };
                for a in &i.names {
                    if a.name.id.as_str() == "*" {
                        continue;
                    }
                    let local = a.asname.as_ref().unwrap_or(&a.name).id.to_string();
                    out.insert(local, format!("{}.{}", module.id, a.name.id));
                }
            }
            Stmt::FunctionDef(f) => collect_imports(&f.body, out),
            Stmt::ClassDef(c) => collect_imports(&c.body, out),
            Stmt::If(s) => {
                collect_imports(&s.body, out);
                for c in &s.elif_else_clauses {
                    collect_imports(&c.body, out);
                }
            }
            Stmt::Try(t) => {
                collect_imports(&t.body, out);
                for ast::ExceptHandler::ExceptHandler(h) in &t.handlers {
                    collect_imports(&h.body, out);
                }
                collect_imports(&t.orelse, out);
                collect_imports(&t.finalbody, out);
            }
            Stmt::With(w) => collect_imports(&w.body, out),
            Stmt::Match(m) => {
                for c in &m.cases {
                    collect_imports(&c.body, out);
                }
            }
            _ => {}
        }
    }
}

/// Module-level names bound once to a torch function or class (`es = T.einsum`, `Up =
/// nn.Upsample`): calls through them are calls of what they name.
fn collect_torch_aliases(module: &[Stmt], imports: &mut HashMap<String, String>) {
    fn dotted(e: &Expr, imports: &HashMap<String, String>) -> Option<String> {
        match e {
            Expr::Name(n) => imports.get(n.id.as_str()).cloned(),
            Expr::Attribute(a) => Some(format!("{}.{}", dotted(&a.value, imports)?, a.attr.id)),
            _ => None,
        }
    }
    // The candidates first (most files have none): `name = <torch attribute chain>` at the top.
    let mut aliases: Vec<(String, String)> = Vec::new();
    for stmt in module {
        let Stmt::Assign(a) = stmt else { continue };
        let ([Expr::Name(n)], Expr::Attribute(_)) = (&a.targets[..], a.value.as_ref()) else {
            continue;
        };
        if imports.contains_key(n.id.as_str()) {
            continue;
        }
        if let Some(q) = dotted(&a.value, imports).filter(|q| q.starts_with("torch.")) {
            aliases.push((n.id.to_string(), q));
        }
    }
    if aliases.is_empty() {
        return;
    }
    // Bindings at module level (in `if`/`try` blocks too) and in every function (parameters
    // and locals): an alias some scope rebinds is not the torch function there.
    let mut counts: HashMap<&str, usize> = name_bindings(module);
    fn scopes<'m>(body: &'m [Stmt], counts: &mut HashMap<&'m str, usize>) {
        let mut stmts = Vec::new();
        flatten(body, &mut stmts);
        for s in stmts {
            match s {
                Stmt::FunctionDef(f) => {
                    *counts.entry(f.name.id.as_str()).or_default() += 1;
                    for p in parameters(f) {
                        *counts.entry(p.parameter.name.id.as_str()).or_default() += 1;
                    }
                    for (n, c) in name_bindings(&f.body) {
                        *counts.entry(n).or_default() += c;
                    }
                    scopes(&f.body, counts);
                }
                Stmt::ClassDef(c) => {
                    *counts.entry(c.name.id.as_str()).or_default() += 1;
                    scopes(&c.body, counts);
                }
                _ => {}
            }
        }
    }
    scopes(module, &mut counts);
    aliases.retain(|(n, _)| counts.get(n.as_str()) == Some(&1));
    imports.extend(aliases);
}

/// Walks the parts of a body that export traces: `if self.training:` bodies, the else of
/// `if not self.training:` (and what follows its `return`) and the training side of `a if
/// self.training else b` are left out. Export-aware branches are left out too, both of them
/// (this file's model code written with export in mind), or with `export_path` only the side
/// that does not run under export: the body of `if not torch.jit.is_tracing():`, the else of
/// `if torch.onnx.is_in_onnx_export():` and what follows its `return`. Every expression on the
/// way is given to `on_expr`, outermost first.
struct ModelPath<F> {
    on_expr: F,
    export_path: bool,
}

/// The value a test has under export, when the test says: `torch.jit.is_tracing()` and
/// `torch.onnx.is_in_onnx_export()` are true, `torch.jit.is_scripting()` is false, `not`
/// negates, and `and`/`or` combine them as Python does (`not is_tracing() and x.any()` is false
/// whatever `x`). `None` when it depends on something else (`self.flag and is_tracing()`).
fn export_polarity(test: &Expr) -> Option<bool> {
    match test {
        Expr::Call(c) => {
            let name = match c.func.as_ref() {
                Expr::Attribute(a) => a.attr.id.as_str(),
                Expr::Name(n) => n.id.as_str(),
                _ => return None,
            };
            match name {
                "is_tracing" | "_is_tracing" | "is_in_onnx_export" | "_get_tracing_state"
                | EXPORT_FLAG => Some(true),
                "is_scripting" => Some(false),
                _ => None,
            }
        }
        Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::Not) => {
            export_polarity(&u.operand).map(|v| !v)
        }
        Expr::BoolOp(b) => {
            let values: Vec<Option<bool>> = b.values.iter().map(export_polarity).collect();
            let decisive = matches!(b.op, ast::BoolOp::Or);
            if values.contains(&Some(decisive)) {
                Some(decisive)
            } else if values.iter().all(|v| *v == Some(!decisive)) {
                Some(!decisive)
            } else {
                None
            }
        }
        _ => None,
    }
}

/// Whether Python settles `test` under export without evaluating an operand whose value export
/// does not fix: `not torch.jit.is_tracing() and x.any()` never reads the tensor, `x.any() and
/// not torch.jit.is_tracing()` reads it first (and the dynamo exporter cannot branch on it).
fn decided_unread(test: &Expr) -> bool {
    match test {
        Expr::BoolOp(b) => {
            let decisive = matches!(b.op, ast::BoolOp::Or);
            for v in &b.values {
                // The mode is no read of the inputs (`self.training or is_tracing()`).
                if rules::training_branch::mode_in_eval(v).is_some() {
                    continue;
                }
                match export_polarity(v) {
                    Some(_) if !decided_unread(v) => return false,
                    Some(value) if value == decisive => return true,
                    Some(_) => {}
                    None => return false,
                }
            }
            true
        }
        Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::Not) => decided_unread(&u.operand),
        _ => export_polarity(test).is_some(),
    }
}

impl<'a, F: FnMut(&'a Expr)> ModelPath<F> {
    /// The `elif`/`else` clauses of an `if`, tests and bodies.
    fn visit_clauses(&mut self, i: &'a ast::StmtIf) {
        for c in &i.elif_else_clauses {
            if let Some(t) = &c.test {
                self.visit_expr(t);
            }
            self.visit_body(&c.body);
        }
    }
}

impl<'a, F: FnMut(&'a Expr)> Visitor<'a> for ModelPath<F> {
    fn visit_body(&mut self, body: &'a [Stmt]) {
        for stmt in body {
            self.visit_stmt(stmt);
            // `if not self.training: return x`: the rest of the block runs in training;
            // `if torch.onnx.is_in_onnx_export(): return x`: the rest only outside export, on
            // either path (the checker reads such a rest as eager code too).
            if let Stmt::If(i) = stmt {
                let exits = i.elif_else_clauses.is_empty() && always_exits(&i.body);
                if exits
                    && (guard_of(&i.test) == Guard::NotTraining
                        || export_polarity(&i.test) == Some(true))
                {
                    return;
                }
            }
        }
    }
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        if let Stmt::If(i) = stmt {
            let guard = guard_of(&i.test);
            // `if self.training and not torch.jit.is_scripting():` is a training branch first.
            let training = || {
                Checker::is_self_attr(&i.test, "training")
                    || matches!(&*i.test, Expr::BoolOp(b) if matches!(b.op, ast::BoolOp::And)
                        && b.values.iter().any(|v| Checker::is_self_attr(v, "training")))
            };
            if self.export_path && guard == Guard::ExportAware && !training() {
                self.visit_expr(&i.test);
                match export_polarity(&i.test) {
                    Some(true) => self.visit_body(&i.body),
                    Some(false) => self.visit_clauses(i),
                    None => {
                        self.visit_body(&i.body);
                        self.visit_clauses(i);
                    }
                }
                return;
            }
            // `if not torch.compiler.is_compiling(): return self.eager(y)`: either exporter's
            // branch, so both.
            if guard == Guard::ExportAware && exporter_dependent(&i.test) {
                self.visit_expr(&i.test);
                self.visit_body(&i.body);
                self.visit_clauses(i);
                return;
            }
            // `if self.export: return self.decode_export(x)`: what the branch export takes
            // calls is model code, for the flags and helpers the export code sets (torch's own
            // guards keep what either branch calls out, as before: torchvision's tracing
            // branches call ONNX-specific helpers).
            if guard == Guard::ExportAware && !training() && mentions_export_flag(&i.test) {
                self.visit_expr(&i.test);
                match traced_polarity(&i.test) {
                    Some(true) => self.visit_body(&i.body),
                    Some(false) => self.visit_clauses(i),
                    None => {}
                }
                return;
            }
            if guard == Guard::ExportAware {
                self.visit_expr(&i.test);
                return;
            }
            if visit_traced_branches(self, i) {
                return;
            }
        }
        visitor::walk_stmt(self, stmt);
    }
    fn visit_expr(&mut self, e: &'a Expr) {
        // `self.nll(x, tags) if self.training else self.decode(x)`: the side export takes.
        if let Expr::If(i) = e {
            if self.export_path {
                match export_polarity(&i.test) {
                    Some(true) => {
                        self.visit_expr(&i.test);
                        return self.visit_expr(&i.body);
                    }
                    Some(false) => {
                        self.visit_expr(&i.test);
                        return self.visit_expr(&i.orelse);
                    }
                    None => {}
                }
            }
            match guard_of(&i.test) {
                Guard::Training => {
                    self.visit_expr(&i.test);
                    return self.visit_expr(&i.orelse);
                }
                Guard::NotTraining => {
                    self.visit_expr(&i.test);
                    return self.visit_expr(&i.body);
                }
                _ => {}
            }
        }
        (self.on_expr)(e);
        visitor::walk_expr(self, e);
    }
}

/// The `self.` methods and plain names a body calls on its model path ([`ModelPath`]).
fn called_names(body: &[Stmt]) -> (HashSet<String>, HashSet<String>) {
    let mut methods = HashSet::default();
    let mut funcs = HashSet::default();
    let mut v = ModelPath {
        export_path: false,
        on_expr: |e: &Expr| {
            if let Expr::Call(c) = e {
                match c.func.as_ref() {
                    Expr::Attribute(a) if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") =>
                    {
                        methods.insert(a.attr.id.to_string());
                    }
                    // `getattr(self, f"_score_{self.cfg.scorer}")(z, h)`: every method named
                    // so, written `_score_*`.
                    Expr::Call(g)
                        if matches!(g.func.as_ref(), Expr::Name(n) if n.id.as_str() == "getattr")
                            && matches!(g.arguments.args.first(), Some(Expr::Name(n)) if n.id.as_str() == "self") =>
                    {
                        match g.arguments.args.get(1) {
                            Some(Expr::StringLiteral(s)) => {
                                methods.insert(s.value.to_str().to_string());
                            }
                            Some(e) => {
                                // `f"_score_{kind}"`, not `f"_{mode}"` (every private method).
                                if let Some(prefix) = fstring_prefix(e).filter(|p| {
                                    p.trim_matches('_').len() >= 2 && !p.starts_with("_init")
                                }) {
                                    methods.insert(format!("{prefix}*"));
                                }
                            }
                            None => {}
                        }
                    }
                    Expr::Name(n) => {
                        funcs.insert(n.id.to_string());
                    }
                    _ => {}
                }
            }
        },
    };
    v.visit_body(body);
    (methods, funcs)
}

/// Model code: every `forward` (and `forward_*`/`_forward*`) method, plus — transitively —
/// the methods of the same class it calls through `self.` and the module functions it calls.
fn model_functions(
    module: &[Stmt],
    bases: &HashMap<&str, Vec<&str>>,
    imports: &HashMap<String, String>,
    extra_roots: &HashSet<String>,
    extra_methods: &HashSet<String>,
) -> HashSet<(Option<String>, String)> {
    let mut module_fns: HashMap<String, &[Stmt]> = HashMap::default();
    let mut classes: Vec<(String, HashMap<String, &[Stmt]>)> = Vec::new();
    // Parameters of each class's `forward` after its first input: the targets a loss takes.
    let mut forward_targets: HashMap<String, Vec<String>> = HashMap::default();
    // The module functions each function decorates itself with (`@check_finite`): their
    // wrappers run in the trace around a model function.
    let mut decorators: HashMap<(Option<String>, String), Vec<String>> = HashMap::default();
    // Plain decorators only: a factory's parameters (`@maybe_checkpoint(USE_CKPT)`) are
    // settings bound when it is applied, which model code would read as tensors.
    let decorator_names = |f: &ast::StmtFunctionDef| -> Vec<String> {
        f.decorator_list
            .iter()
            .filter_map(|d| match &d.expression {
                Expr::Name(n) => Some(n.id.to_string()),
                _ => None,
            })
            .collect()
    };
    // `@property` methods by name, with their classes: `out.total_defects` in model code runs
    // the property's body in the trace.
    let mut properties: HashMap<String, Vec<String>> = HashMap::default();
    // Classes that annotate fields and define no `forward`: records.
    let mut record_like: HashSet<&str> = HashSet::default();
    for stmt in module {
        match stmt {
            Stmt::FunctionDef(f) => {
                module_fns.insert(f.name.id.to_string(), &f.body);
                decorators.insert((None, f.name.id.to_string()), decorator_names(f));
            }
            Stmt::ClassDef(c) => {
                if c.body.iter().any(|s| matches!(s, Stmt::AnnAssign(_)))
                    && !c.body.iter().any(
                        |s| matches!(s, Stmt::FunctionDef(f) if f.name.id.as_str() == "forward"),
                    )
                {
                    record_like.insert(c.name.id.as_str());
                }
                let mut methods = HashMap::default();
                for s in &c.body {
                    if let Stmt::FunctionDef(f) = s {
                        // `@end2end.setter`: the getter is what reading the name runs.
                        if is_property_setter(f) {
                            continue;
                        }
                        decorators.insert(
                            (Some(c.name.id.to_string()), f.name.id.to_string()),
                            decorator_names(f),
                        );
                        methods.insert(f.name.id.to_string(), &f.body[..]);
                        if is_property(f) {
                            properties
                                .entry(f.name.id.to_string())
                                .or_default()
                                .push(c.name.id.to_string());
                        }
                        if f.name.id.as_str() == "forward" {
                            let params: Vec<String> = f
                                .parameters
                                .iter_non_variadic_params()
                                .map(|p| p.parameter.name.id.to_string())
                                .filter(|n| n != "self")
                                .skip(1)
                                .collect();
                            forward_targets.insert(c.name.id.to_string(), params);
                        }
                    }
                }
                classes.push((c.name.id.to_string(), methods));
            }
            _ => {}
        }
    }
    // The class of this file whose method `self.<name>` calls in `class`: its own, or one
    // inherited from a base class of this file (`self.occupancy_map(heat)` in a subclass).
    let owner = |class: &str, name: &str| -> Option<String> {
        lineage(bases, class)
            .into_iter()
            .find(|c| {
                classes
                    .iter()
                    .find(|(k, _)| k == c)
                    .is_some_and(|(_, m)| m.contains_key(name))
            })
            .map(str::to_string)
    };
    // Whether `class` has `base` among its ancestors in this file.
    let inherits = |class: &str, base: &str| -> bool {
        lineage(bases, class).iter().skip(1).any(|c| *c == base)
    };
    // `forward_train` (mmdet), `forward_with_aux` (deep supervision): training-time siblings of
    // `forward`, not what export calls (still model code when `forward` calls them).
    let is_root = |n: &str| {
        (n == "forward" || n.starts_with("forward_") || n.starts_with("_forward"))
            && !n
                .trim_start_matches('_')
                .trim_start_matches("forward")
                .split('_')
                .any(|w| matches!(w, "train" | "training" | "aux" | "auxiliary"))
    };
    let mut out: HashSet<(Option<String>, String)> = HashSet::default();
    let mut work: Vec<(Option<String>, String)> = Vec::new();
    // Losses, metrics and matchers: never roots, and not what a wrapper's `self.net.forward(x)`
    // calls when `self.net` came in as an argument.
    let mut beside_model: HashSet<&str> = HashSet::default();
    for (class, methods) in &classes {
        // Losses and metrics are modules too, but they run beside the exported model; so do
        // heads whose `forward` always computes a loss (`AAMSoftmax`, `OhemCrossEntropy`).
        let lower = class.to_ascii_lowercase();
        // `LabelSmoothingCE`, `MaskedNLL`, `MDNNegLogLikelihood`: cross-entropy and likelihood
        // criteria by name.
        if names_loss(class)
            || class.ends_with("CE")
            || class.ends_with("MSE")
            || class.ends_with("MAE")
            || class.ends_with("NLL")
            || lower.contains("loglikelihood")
            || lower.contains("criterion")
            // `SegMetric`, `IoUMetric`, `iou_metric`; not `Radiometric` (a calibration layer).
            || ["Metric", "Metrics", "_metric", "_metrics"].iter().any(|m| class.ends_with(m))
            || matches!(lower.as_str(), "metric" | "metrics")
            // DETR's `HungarianMatcher.forward(outputs, targets)`, a detector's label
            // assigner: training-time target assignment (not a `VarnishMatcher` taking the
            // `target_lab` colour to match at inference).
            || ((class.ends_with("Matcher") || class.ends_with("Assigner"))
                && forward_targets.get(class).is_some_and(|params| {
                    // `targets`, `target_boxes`, `gt_bboxes`, `gtboxes`; not `target_lab`.
                    params.iter().any(|p| {
                        matches!(p.as_str(), "target" | "targets")
                            || (p.starts_with("target_") && p.ends_with('s'))
                            || p.starts_with("gt")
                    })
                }))
            || methods.get("forward").is_some_and(|b| {
                is_loss_forward(b, forward_targets.get(class).map_or(&[][..], |v| &v[..]))
            })
        {
            beside_model.insert(class.as_str());
            continue;
        }
        for name in methods.keys() {
            if is_root(name) {
                work.push((Some(class.clone()), name.clone()));
            }
        }
    }
    if module_fns.contains_key("forward") {
        work.push((None, "forward".into()));
    }
    // In an export script (a file that calls the exporter or the tracer), every module-level
    // function may be what gets exported (directly, through a lambda or a wrapper), so they are
    // model code, except the script's own driver code: functions that call the exporter or
    // check the result on a runtime, and whatever they or the module-level statements call
    // (`main()`, `parse_args()`, `to_numpy()`). Elsewhere only the functions handed to the
    // exporter by name are model code.
    let aliases = exporter_aliases(imports);
    let exported = exported_functions(module, &aliases);
    let mut handed_to_wrappers: Vec<String> = Vec::new();
    if exported.script {
        let mut driver_work: Vec<String> = module_fns
            .iter()
            .filter(|(_, body)| {
                exported_functions(body, &aliases).script || checks_on_runtime(body)
            })
            .map(|(name, _)| name.clone())
            .collect();
        // Functions that export through a wrapper of the file (`return _export(model, args,
        // path)` with `_export` calling the exporter) are driver code too.
        let mut exporters: HashSet<String> = module_fns
            .iter()
            .filter(|(_, body)| exported_functions(body, &aliases).script)
            .map(|(name, _)| name.clone())
            .collect();
        loop {
            let more: Vec<String> = module_fns
                .iter()
                .filter(|(name, body)| {
                    !exporters.contains(*name)
                        && called_names(body).1.iter().any(|f| exporters.contains(f))
                })
                .map(|(name, _)| name.clone())
                .collect();
            if more.is_empty() {
                break;
            }
            driver_work.extend(more.iter().cloned());
            exporters.extend(more);
        }
        // A function of the file handed to such a wrapper (`_export(model_fn, x, path)`) is
        // what gets exported, as one handed to the exporter itself.
        struct Handed<'e, 'f> {
            exporters: &'e HashSet<String>,
            module_fns: &'e HashMap<String, &'f [Stmt]>,
            out: Vec<String>,
        }
        impl<'a> Visitor<'a> for Handed<'_, '_> {
            fn visit_expr(&mut self, e: &'a Expr) {
                if let Expr::Call(c) = e {
                    if matches!(c.func.as_ref(), Expr::Name(f) if self.exporters.contains(f.id.as_str()))
                    {
                        for a in c.arguments.args.iter() {
                            if let Expr::Name(n) = a {
                                if self.module_fns.contains_key(n.id.as_str()) {
                                    self.out.push(n.id.to_string());
                                }
                            }
                        }
                    }
                }
                visitor::walk_expr(self, e);
            }
        }
        let mut handed = Handed {
            exporters: &exporters,
            module_fns: &module_fns,
            out: Vec::new(),
        };
        handed.visit_body(module);
        handed_to_wrappers = handed.out;
        for stmt in module {
            if !matches!(stmt, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                let (_, funcs) = called_names(std::slice::from_ref(stmt));
                driver_work.extend(funcs.into_iter().filter(|f| module_fns.contains_key(f)));
                driver_work.extend(
                    dispatched_names(std::slice::from_ref(stmt), module)
                        .filter(|f| module_fns.contains_key(f)),
                );
            }
        }
        let mut drivers: HashSet<String> = HashSet::default();
        while let Some(name) = driver_work.pop() {
            if !drivers.insert(name.clone()) {
                continue;
            }
            if let Some(body) = module_fns.get(&name) {
                let (_, funcs) = called_names(body);
                driver_work.extend(funcs.into_iter().filter(|f| module_fns.contains_key(f)));
                // `crit = ohem_cross_entropy` then `crit(logits, y)`: an alias the driver calls.
                driver_work.extend(function_aliases(body).filter(|f| module_fns.contains_key(f)));
                // `{"train": train, "eval": run_eval}[args.cmd](args)`: a dispatch table.
                driver_work
                    .extend(dispatched_names(body, module).filter(|f| module_fns.contains_key(f)));
            }
        }
        // What is left may still be traced when it is handed around as a value (a wrapper's
        // argument, `functools.partial`); a function only ever called directly is reached
        // from the `forward` that calls it, or not traced at all.
        let referenced = referenced_names(module);
        for name in module_fns.keys() {
            if !training_only_name(name) && !drivers.contains(name) && referenced.contains(name) {
                work.push((None, name.clone()));
            }
        }
    }
    for name in exported.names.into_iter().chain(handed_to_wrappers) {
        if module_fns.contains_key(&name) {
            work.push((None, name));
        }
    }
    // For each class, its attributes bound to an instance of another class of this file.
    let class_names: HashSet<&str> = classes.iter().map(|(c, _)| c.as_str()).collect();
    let mut submodule_classes: HashMap<String, HashMap<String, String>> = HashMap::default();
    for stmt in module {
        let Stmt::ClassDef(c) = stmt else { continue };
        let mut attrs = HashMap::default();
        // `def __init__(self, net: BranchSegmenter)`: the parameters annotated with a class of
        // this file.
        let annotated: HashMap<&str, &str> = c
            .body
            .iter()
            .filter_map(|s| match s {
                Stmt::FunctionDef(f) if f.name.id.as_str() == "__init__" => Some(f),
                _ => None,
            })
            .flat_map(|f| f.parameters.iter_non_variadic_params())
            .filter_map(|p| {
                let class = annotated_class(p.parameter.annotation.as_deref()?)?;
                class_names
                    .contains(class)
                    .then_some((p.parameter.name.id.as_str(), class))
            })
            .collect();
        for (attr, value) in self_assignments(&c.body) {
            match value {
                Expr::Call(call) => {
                    if let Expr::Name(ctor) = call.func.as_ref() {
                        if class_names.contains(ctor.id.as_str()) {
                            attrs.insert(attr.to_string(), ctor.id.to_string());
                        }
                    }
                }
                Expr::Name(n) => {
                    if let Some(class) = annotated.get(n.id.as_str()) {
                        attrs.insert(attr.to_string(), class.to_string());
                    }
                }
                _ => {}
            }
        }
        submodule_classes.insert(c.name.id.to_string(), attrs);
    }
    // Helpers another file's model code calls (`from .utils import make_pad_mask`).
    for name in extra_roots {
        if module_fns.contains_key(name) {
            work.push((None, name.clone()));
        } else if let Some((class, methods)) = classes.iter().find(|(c, _)| c == name) {
            for m in ["__init__", "__call__"] {
                if methods.contains_key(m) {
                    work.push((Some(class.clone()), m.to_string()));
                }
            }
        }
    }
    // Methods another file's model code calls on a submodule (`self.model.score_masked(x)`),
    // some named with the submodule's class (`SensorMixer.pooled`).
    for (class, methods) in &classes {
        for m in extra_methods {
            let method = match m.split_once('.') {
                Some((c, method)) if c == class => method,
                Some(_) => continue,
                None => m,
            };
            if methods.contains_key(method) {
                work.push((Some(class.clone()), method.to_string()));
            }
        }
    }
    // The module classes of this file (with a `forward`, deriving a `Module`, or inheriting
    // from one of this file's), by the names of their methods.
    let mut module_like: HashSet<&str> = module
        .iter()
        .filter_map(|s| match s {
            Stmt::ClassDef(c) if derives_module(c) => Some(c.name.id.as_str()),
            _ => None,
        })
        .chain(
            classes
                .iter()
                .filter(|(_, m)| m.contains_key("forward"))
                .map(|(c, _)| c.as_str()),
        )
        .collect();
    let inherited: Vec<&str> = classes
        .iter()
        .map(|(c, _)| c.as_str())
        .filter(|c| lineage(bases, c).iter().any(|a| module_like.contains(a)))
        .collect();
    module_like.extend(inherited);
    let mut element_methods: HashSet<String> = HashSet::default();
    let mut handed_methods: HashSet<String> = HashSet::default();
    let mut by_method: HashMap<&str, Vec<&str>> = HashMap::default();
    for (c, methods) in &classes {
        if module_like.contains(c.as_str()) {
            for m in methods.keys() {
                by_method.entry(m.as_str()).or_default().push(c.as_str());
            }
        }
    }
    while let Some(item) = work.pop() {
        if !out.insert(item.clone()) {
            continue;
        }
        for d in decorators.get(&item).into_iter().flatten() {
            if module_fns.contains_key(d) && !training_only_name(d) {
                work.push((None, d.clone()));
            }
        }
        let body = match &item.0 {
            Some(class) => classes
                .iter()
                .find(|(c, _)| c == class)
                .and_then(|(_, m)| m.get(&item.1).copied()),
            None => module_fns.get(&item.1).copied(),
        };
        let Some(body) = body else { continue };
        let (methods, funcs) = called_names(body);
        if !properties.is_empty() {
            for (on_self, attr) in attributes_read(body, &properties) {
                if on_self {
                    // `self.hw`: the property as this class defines or inherits it.
                    if let Some(o) = item.0.as_deref().and_then(|c| owner(c, &attr)) {
                        if properties[&attr].contains(&o) {
                            work.push((Some(o), attr));
                        }
                    }
                } else if !COMMON_ATTRIBUTES.contains(&attr.as_str()) {
                    // `out.total_defects`: a property of a record class of the file (one that
                    // annotates fields and is no module).
                    for class in properties[&attr]
                        .iter()
                        .filter(|c| record_like.contains(c.as_str()))
                    {
                        work.push((Some(class.clone()), attr.clone()));
                    }
                }
            }
        }
        if let Some(class) = &item.0 {
            // `self.revin.normalize(x)` where `self.revin = RevIN(...)`: a method of a
            // submodule defined in this file, other than its `forward`, runs in the trace too.
            if let Some(attrs) = submodule_classes.get(class) {
                for (attr, method) in submodule_calls(body) {
                    if let Some(sub) = attrs.get(&attr) {
                        // The method as the class defines or inherits it, and as its subclasses
                        // of this file override it (`net: BaseSeg` handed a `Seg`).
                        if let Some(o) = owner(sub, &method) {
                            work.push((Some(o), method.clone()));
                        }
                        for (c, m) in &classes {
                            if m.contains_key(&method) && inherits(c, sub) {
                                work.push((Some(c.clone()), method.clone()));
                            }
                        }
                    } else if !method.starts_with("__")
                        && !training_only_name(&method)
                        && handed_methods.insert(method.clone())
                    {
                        // `self.ac.split_heads(x)` where `self.ac = ac` came in as an argument:
                        // the classes of this file that define that method (for `forward`,
                        // not a loss's or a metric's); each name once.
                        for (c, m) in &classes {
                            if m.contains_key(&method)
                                && !(method == "forward" && beside_model.contains(c.as_str()))
                            {
                                work.push((Some(c.clone()), method.clone()));
                            }
                        }
                    }
                }
            }
            // `for down, cell in zip(self.downs, self.cells): cell.init_hidden(b, h, w)`,
            // `self.heads["flow"].warp(x)`: a method of the submodules a loop over the module's
            // containers, or an element taken from one, runs: the module classes of this file
            // that define it (not a tokenizer's `decode`, nor a loss's `forward`).
            // (What a name reaches does not depend on the caller: each name once.)
            for method in loop_submodule_calls(body) {
                if method.starts_with("__")
                    || training_only_name(&method)
                    || !element_methods.insert(method.clone())
                {
                    continue;
                }
                for c in by_method.get(method.as_str()).into_iter().flatten() {
                    if !(method == "forward" && beside_model.contains(c)) {
                        work.push((Some(c.to_string()), method.clone()));
                    }
                }
            }
            // `_score_*`: the methods of the class and its ancestors named so.
            let methods: Vec<String> = methods
                .into_iter()
                .flat_map(|name| match name.strip_suffix('*') {
                    Some(prefix) => lineage(bases, class)
                        .into_iter()
                        .filter_map(|c| classes.iter().find(|(k, _)| k == c))
                        .flat_map(|(_, m)| m.keys())
                        .filter(|m| m.starts_with(prefix))
                        .cloned()
                        .collect(),
                    None => vec![name],
                })
                .collect();
            for name in methods {
                if name.starts_with("__") || training_only_name(&name) {
                    continue;
                }
                // A subclass of this file that overrides the method (`NeuralMinSumDecoder`'s
                // `check_update`, run by the `forward` it inherits) runs its own.
                for (c, m) in &classes {
                    if c != class && m.contains_key(&name) && inherits(c, class) {
                        work.push((Some(c.clone()), name.clone()));
                    }
                }
                if let Some(c) = owner(class, &name) {
                    work.push((Some(c), name));
                }
            }
        }
        // `corr_fn = CorrBlock(fmaps)` then `corr_fn.sample(coords)`: methods of a helper
        // object built in model code run in the trace too.
        for (class, method) in local_instance_calls(body, &class_names) {
            if !training_only_name(&method) {
                work.push((Some(class), method));
            }
        }
        for name in funcs {
            if module_fns.contains_key(&name) && !training_only_name(&name) {
                work.push((None, name));
            } else if let Some((class, methods)) = classes.iter().find(|(c, _)| *c == name) {
                // A helper object built in model code (RAFT's `CorrBlock(f1, f2)`): its
                // constructor and `__call__` run in the trace.
                for m in ["__init__", "__call__"] {
                    if methods.contains_key(m) {
                        work.push((Some(class.clone()), m.to_string()));
                    }
                }
            }
        }
    }
    out
}

/// The class of this name the module defines at its top level.
pub(crate) fn module_class<'m>(module: &'m [Stmt], name: &str) -> Option<&'m ast::StmtClassDef> {
    module.iter().find_map(|s| match s {
        Stmt::ClassDef(c) if c.name.id.as_str() == name => Some(c),
        _ => None,
    })
}

/// A capitalised name, private ones included (`STEBinarize`, `_STEThreshold`): a class by
/// Python's naming conventions.
pub(crate) fn class_like(name: &str) -> bool {
    name.trim_start_matches('_')
        .starts_with(|ch: char| ch.is_ascii_uppercase())
}

/// `(Class, method)` for each `name.method(...)` in a body where `name = Class(...)` is bound in
/// the same body to a class of `classes`.
fn local_instance_calls(body: &[Stmt], classes: &HashSet<&str>) -> Vec<(String, String)> {
    struct Find<'c> {
        classes: &'c HashSet<&'c str>,
        bound: HashMap<String, String>,
        calls: Vec<(String, String)>,
    }
    impl<'a> Visitor<'a> for Find<'_> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if let Stmt::Assign(a) = s {
                if let ([Expr::Name(t)], Expr::Call(c)) = (&a.targets[..], a.value.as_ref()) {
                    if let Expr::Name(ctor) = c.func.as_ref() {
                        if self.classes.contains(ctor.id.as_str()) {
                            self.bound.insert(t.id.to_string(), ctor.id.to_string());
                        }
                    }
                }
            }
            visitor::walk_stmt(self, s);
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                if let Expr::Attribute(a) = c.func.as_ref() {
                    if let Expr::Name(n) = a.value.as_ref() {
                        self.calls.push((n.id.to_string(), a.attr.id.to_string()));
                    }
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find {
        classes,
        bound: HashMap::default(),
        calls: Vec::new(),
    };
    f.visit_body(body);
    if f.bound.is_empty() {
        return Vec::new();
    }
    f.calls
        .into_iter()
        .filter_map(|(name, method)| Some((f.bound.get(&name)?.clone(), method)))
        .filter(|(_, method)| !method.starts_with("__"))
        .collect()
}

/// Methods this file's model code calls on submodules (`self.model.score_masked(x)`), other than
/// dunders, training-only names and `forward` (already model code): for the files it imports.
pub(crate) fn submodule_method_calls(
    module: &[Stmt],
    roots: &HashSet<(Option<String>, String)>,
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    // `built`: the class each attribute of the module was built from by name (`self.mix =
    // ops.SensorMixer(d)`), for the calls also named with their class (`SensorMixer.pooled`).
    let mut visit = |body: &[Stmt], built: &HashMap<&str, &str>| {
        for (attr, method) in submodule_calls(body) {
            if method.starts_with("__") || method == "forward" || training_only_name(&method) {
                continue;
            }
            if let Some(class) = built.get(attr.as_str()) {
                let qualified = format!("{class}.{method}");
                if !out.contains(&qualified) {
                    out.push(qualified);
                }
            }
            if !out.contains(&method) {
                out.push(method);
            }
        }
    };
    for stmt in module {
        match stmt {
            Stmt::FunctionDef(f) if roots.contains(&(None, f.name.id.to_string())) => {
                visit(&f.body, &HashMap::default())
            }
            Stmt::ClassDef(c) => {
                let built: HashMap<&str, &str> = self_assignments(&c.body)
                    .into_iter()
                    .filter_map(|(attr, v)| match v {
                        Expr::Call(call) => match call.func.as_ref() {
                            Expr::Name(n) => Some((attr, n.id.as_str())),
                            Expr::Attribute(a) => Some((attr, a.attr.id.as_str())),
                            _ => None,
                        },
                        _ => None,
                    })
                    .filter(|(_, class)| class_like(class))
                    .collect();
                for s in &c.body {
                    if let Stmt::FunctionDef(f) = s {
                        if roots.contains(&(Some(c.name.id.to_string()), f.name.id.to_string())) {
                            visit(&f.body, &built);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// Methods of this file's module classes (classes with a `forward`), other than dunders; and,
/// as `Class.method`, those of classes deriving `nn.Module` without a `forward` of their own.
pub(crate) fn module_methods(module: &[Stmt]) -> HashSet<String> {
    let mut out = HashSet::default();
    for stmt in module {
        let Stmt::ClassDef(c) = stmt else { continue };
        let names: Vec<&str> = c
            .body
            .iter()
            .filter_map(|s| match s {
                Stmt::FunctionDef(f) => Some(f.name.id.as_str()),
                _ => None,
            })
            .collect();
        // A module without a `forward` of its own holds helpers another module calls
        // (`self.mix.pooled(z, valid)` with `class SensorMixer(nn.Module)`).
        if names.contains(&"forward") {
            out.extend(
                names
                    .into_iter()
                    .filter(|n| !n.starts_with("__") && *n != "forward")
                    .map(str::to_string),
            );
        } else if derives_module(c) {
            // By class only: its methods are model code when model code calls them on a
            // submodule built from this class by name (`self.mix = ops.SensorMixer(d)`).
            out.extend(
                names
                    .into_iter()
                    .filter(|n| !n.starts_with("__"))
                    .map(|n| format!("{}.{n}", c.name.id)),
            );
        }
    }
    out
}

/// Whether a class derives a module by its base's name (`nn.Module`, `Module`,
/// `pl.LightningModule`).
fn derives_module(c: &ast::StmtClassDef) -> bool {
    c.bases().iter().any(|b| match b {
        Expr::Name(n) => n.id.ends_with("Module"),
        Expr::Attribute(a) => a.attr.id.ends_with("Module"),
        _ => false,
    })
}

/// A call from this file's model code to a name imported from another module:
/// `from .utils import pad_mask` (level 1, module `utils`, name `pad_mask`) or
/// `import box_ops as B` then `B.decode(...)` (level 0, module `box_ops`, name `decode`).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(
    from = "(u32, String, String, String)",
    into = "(u32, String, String, String)"
)]
pub(crate) struct ImportedCall {
    pub level: u32,
    pub module: String,
    pub name: String,
    /// How this file spells the callee (`pad_mask`, `U.decode`).
    pub callee: String,
}

/// Rewrites `self.training == False` (`is False`, `!= True`, `False == self.training`) as `not
/// self.training`, and `self.training == True` (`is True`, `!= False`) as `self.training`, so
/// the rules, which read the mode from `self.training` and `not self.training`, see the test
/// whichever way it is written; the result spans the whole comparison, so findings quote and
/// point at the test as written. Files without `training` and a boolean literal are not walked.
pub(crate) fn spell_training(module: &mut [Stmt], source: &str) {
    use ruff_python_ast::visitor::transformer::{self as t, Transformer};
    // `contains` has a vectorised path; searching each `training` for a comparison nearby cost
    // more than walking every file that has both words.
    if !source.contains("training") || !(source.contains("True") || source.contains("False")) {
        return;
    }
    struct Spell;
    impl Transformer for Spell {
        fn visit_expr(&self, expr: &mut Expr) {
            t::walk_expr(self, expr);
            let Expr::Compare(c) = expr else { return };
            let ([op], [right]) = (&c.ops[..], &c.comparators[..]) else {
                return;
            };
            let (attr, value) = match (c.left.as_ref(), right) {
                (a, Expr::BooleanLiteral(b)) if Checker::is_self_attr(a, "training") => {
                    (a, b.value)
                }
                (Expr::BooleanLiteral(b), a) if Checker::is_self_attr(a, "training") => {
                    (a, b.value)
                }
                _ => return,
            };
            let training = match op {
                ast::CmpOp::Eq | ast::CmpOp::Is => value,
                ast::CmpOp::NotEq | ast::CmpOp::IsNot => !value,
                _ => return,
            };
            let mut attr = attr.clone();
            let range = c.range;
            if let Expr::Attribute(a) = &mut attr {
                a.range = range;
            }
            *expr = if training {
                attr
            } else {
                Expr::UnaryOp(ast::ExprUnaryOp {
                    node_index: Default::default(),
                    range,
                    op: ast::UnaryOp::Not,
                    operand: Box::new(attr),
                })
            };
        }
    }
    for s in module.iter_mut() {
        Spell.visit_stmt(s);
    }
}

/// Rewrites, in `if`/`elif` tests, what the code uses to ask whether it is being exported as
/// `torch.onnx.is_in_onnx_export()` (the range kept, so findings quote the test as written), so
/// the export guard is read as one: a module flag the export code sets (`self.exporting`,
/// `self.export_mode`, `self.onnx_export`), a module-level constant (`EXPORTING`), and a
/// function of the file that only returns an export check (`def is_capturing(): return
/// torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()`). Only statements are walked, down
/// to each `if`'s test.
pub(crate) fn spell_export_flags(module: &mut [Stmt]) {
    // `def is_capturing(): return torch.jit.is_tracing() or torch.onnx.is_in_onnx_export()`.
    let helpers: Vec<String> = module
        .iter()
        .filter_map(|s| match s {
            Stmt::FunctionDef(f)
                if f.parameters.is_empty()
                    && matches!(f.body.iter().filter(|s| !is_docstring(s)).collect::<Vec<_>>()[..],
                        [Stmt::Return(r)]
                        if r.value.as_deref().is_some_and(|v| export_polarity(v) == Some(true))) =>
            {
                Some(f.name.id.to_string())
            }
            _ => None,
        })
        .collect();
    // Names that say the export mode itself (not `export_peaks`, an option to output peaks).
    fn flag_name(name: &str) -> bool {
        matches!(
            name.trim_start_matches('_').to_ascii_lowercase().as_str(),
            "export"
                | "exporting"
                | "export_mode"
                | "exporting_mode"
                | "is_export"
                | "is_exporting"
                | "in_export"
                | "for_export"
                | "onnx_export"
                | "onnx_exporting"
                | "onnx_mode"
                | "export_onnx"
                | "exporting_onnx"
                | "is_onnx"
                | "is_onnx_export"
                | "for_onnx"
        )
    }
    struct Spell<'h> {
        helpers: &'h [String],
    }
    impl Spell<'_> {
        fn is_flag(&self, e: &Expr) -> bool {
            match e {
                Expr::Attribute(a) => is_self(&a.value) && flag_name(a.attr.id.as_str()),
                Expr::Name(n) => {
                    let id = n.id.as_str();
                    id.chars().all(|c| c.is_ascii_uppercase() || c == '_') && flag_name(id)
                }
                Expr::Call(c) => {
                    c.arguments.is_empty()
                        && matches!(c.func.as_ref(), Expr::Name(f)
                            if self.helpers.iter().any(|h| h == f.id.as_str()))
                }
                _ => false,
            }
        }
        fn has_flag(&self, e: &Expr) -> bool {
            match e {
                Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::Not) => self.has_flag(&u.operand),
                Expr::BoolOp(b) => b.values.iter().any(|v| self.has_flag(v)),
                e => self.is_flag(e),
            }
        }
        fn test(&self, e: &mut Expr) {
            let range = ruff_text_size::Ranged::range(&*e);
            let flag = match &*e {
                Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::Not) => {
                    if let Expr::UnaryOp(u) = e {
                        self.test(&mut u.operand);
                    }
                    return;
                }
                Expr::BoolOp(_) => {
                    if let Expr::BoolOp(b) = e {
                        b.values.iter_mut().for_each(|v| self.test(v));
                    }
                    return;
                }
                e => self.is_flag(e),
            };
            if flag {
                *e = Expr::Call(ast::ExprCall {
                    node_index: Default::default(),
                    range_start: range.start(),
                    func: Box::new(Expr::Name(ast::ExprName {
                        node_index: Default::default(),
                        range,
                        id: ast::name::Name::new_static(EXPORT_FLAG),
                        ctx: ast::ExprContext::Load,
                    })),
                    arguments: ast::Arguments {
                        node_index: Default::default(),
                        range,
                        args: Box::new([]),
                        keywords: Default::default(),
                    },
                });
            }
        }
    }
    // Only a test whose outcome under export the flag decides is rewritten (`if not
    // self.exporting:`, `if VERBOSE and not EXPORTING:`); `if self.export and (x > 0).any():`
    // stays a test like any other, its branches checked.
    fn spell_test(spell: &Spell<'_>, test: &mut Expr) {
        if !spell.has_flag(test) {
            return;
        }
        let mut t = test.clone();
        spell.test(&mut t);
        if export_polarity(&t).is_some() {
            *test = t;
        }
    }
    fn walk(spell: &Spell<'_>, body: &mut [Stmt]) {
        for stmt in body {
            match stmt {
                Stmt::If(i) => {
                    spell_test(spell, &mut i.test);
                    walk(spell, &mut i.body);
                    for c in i.elif_else_clauses.iter_mut() {
                        if let Some(t) = c.test.as_mut() {
                            spell_test(spell, t);
                        }
                        walk(spell, &mut c.body);
                    }
                }
                Stmt::FunctionDef(f) => walk(spell, &mut f.body),
                Stmt::ClassDef(c) => walk(spell, &mut c.body),
                Stmt::For(f) => {
                    walk(spell, &mut f.body);
                    walk(spell, &mut f.orelse);
                }
                Stmt::While(w) => {
                    walk(spell, &mut w.body);
                    walk(spell, &mut w.orelse);
                }
                Stmt::With(w) => walk(spell, &mut w.body),
                Stmt::Try(t) => {
                    walk(spell, &mut t.body);
                    for h in t.handlers.iter_mut() {
                        let ast::ExceptHandler::ExceptHandler(h) = h;
                        walk(spell, &mut h.body);
                    }
                    walk(spell, &mut t.orelse);
                    walk(spell, &mut t.finalbody);
                }
                Stmt::Match(m) => {
                    for c in m.cases.iter_mut() {
                        walk(spell, &mut c.body);
                    }
                }
                _ => {}
            }
        }
    }
    walk(&Spell { helpers: &helpers }, module);
}

/// Replaces a local that only ever holds the mode (`is_train = self.training`, then `if
/// is_train:`) by `self.training` where it is read, in every method, so the rules see the
/// training branch. Only names bound by such assignments alone, and never a parameter. A local
/// bound once to the mode and a further condition (`use_noise = self.training and p > 0`, `not
/// self.training and fuse`, `self.training or tta`, then `if use_noise:`) is read as that test,
/// placed where it is written. Files without a line that binds `... = ...training`, `... =
/// ...training and ...` or `... = ...training or ...` are not walked.
pub(crate) fn spell_mode_locals(module: &mut [Stmt], source: &str) {
    use ruff_python_ast::visitor::transformer::{self as t, Transformer};
    let bound_to_mode = memchr::memmem::find_iter(source.as_bytes(), b".training").any(|at| {
        let rest = &source[at + ".training".len()..];
        let line_end = rest.find('\n').unwrap_or(rest.len());
        let after = rest[..line_end]
            .split('#')
            .next()
            .unwrap_or_default()
            .trim();
        let line_start = source[..at].rfind('\n').map_or(0, |k| k + 1);
        (after.is_empty() || after.starts_with("and ") || after.starts_with("or "))
            && source[line_start..at].contains('=')
    });
    if !bound_to_mode {
        return;
    }
    /// `self.training and p > 0`, `not self.training and fuse`, `self.training or tta`: the
    /// mode and further conditions.
    fn mode_and_more(e: &Expr) -> bool {
        let mode = |v: &Expr| {
            Checker::is_self_attr(v, "training")
                || matches!(v, Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::Not)
                    && Checker::is_self_attr(&u.operand, "training"))
        };
        matches!(e, Expr::BoolOp(b) if b.values.iter().any(mode))
    }
    /// Every name the body binds, with how many of its bindings are `name = self.training`, and
    /// the value of those bound to `self.training and ...`.
    #[derive(Default)]
    struct Bindings<'a> {
        all: HashMap<&'a str, usize>,
        mode: HashMap<&'a str, usize>,
        tests: HashMap<&'a str, &'a Expr>,
    }
    impl<'a> Visitor<'a> for Bindings<'a> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            let mut bind = |name: &'a str| *self.all.entry(name).or_default() += 1;
            match s {
                // A nested function's names are its own; its name is bound here.
                Stmt::FunctionDef(f) => return bind(f.name.id.as_str()),
                Stmt::ClassDef(c) => return bind(c.name.id.as_str()),
                Stmt::Import(i) => {
                    for a in &i.names {
                        let name = a.asname.as_ref().unwrap_or(&a.name).id.as_str();
                        bind(name.split('.').next().unwrap_or(name));
                    }
                }
                Stmt::ImportFrom(i) => {
                    for a in &i.names {
                        bind(a.asname.as_ref().unwrap_or(&a.name).id.as_str());
                    }
                }
                Stmt::Global(g) => g.names.iter().for_each(|n| bind(n.id.as_str())),
                Stmt::Nonlocal(n) => n.names.iter().for_each(|n| bind(n.id.as_str())),
                Stmt::Assign(a) => {
                    if let [Expr::Name(n)] = &a.targets[..] {
                        if Checker::is_self_attr(&a.value, "training") {
                            *self.mode.entry(n.id.as_str()).or_default() += 1;
                        } else if mode_and_more(&a.value) {
                            self.tests.insert(n.id.as_str(), &a.value);
                        }
                    }
                }
                _ => {}
            }
            visitor::walk_stmt(self, s);
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Name(n) = e {
                if matches!(n.ctx, ast::ExprContext::Store | ast::ExprContext::Del) {
                    *self.all.entry(n.id.as_str()).or_default() += 1;
                }
            }
            visitor::walk_expr(self, e);
        }
        fn visit_except_handler(&mut self, h: &'a ast::ExceptHandler) {
            let ast::ExceptHandler::ExceptHandler(h2) = h;
            if let Some(name) = &h2.name {
                *self.all.entry(name.id.as_str()).or_default() += 1;
            }
            visitor::walk_except_handler(self, h);
        }
        fn visit_pattern(&mut self, p: &'a ast::Pattern) {
            let name = match p {
                ast::Pattern::MatchAs(m) => m.name.as_ref(),
                ast::Pattern::MatchStar(m) => m.name.as_ref(),
                ast::Pattern::MatchMapping(m) => m.rest.as_ref(),
                _ => None,
            };
            if let Some(name) = name {
                *self.all.entry(name.id.as_str()).or_default() += 1;
            }
            visitor::walk_pattern(self, p);
        }
    }
    /// Names read as the mode (`None`) or as the test they were bound to.
    struct Spell<'n>(&'n HashMap<String, Option<Expr>>);
    impl Transformer for Spell<'_> {
        fn visit_stmt(&self, stmt: &mut Stmt) {
            if matches!(stmt, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                return;
            }
            t::walk_stmt(self, stmt);
        }
        fn visit_expr(&self, expr: &mut Expr) {
            if let Expr::Name(n) = expr {
                if let (ast::ExprContext::Load, Some(Some(test))) =
                    (n.ctx, self.0.get(n.id.as_str()))
                {
                    *expr = test.clone();
                    return;
                }
                if matches!(n.ctx, ast::ExprContext::Load) && self.0.contains_key(n.id.as_str()) {
                    let range = n.range;
                    *expr = Expr::Attribute(ast::ExprAttribute {
                        node_index: Default::default(),
                        range,
                        value: Box::new(Expr::Name(ast::ExprName {
                            node_index: Default::default(),
                            range,
                            id: ast::name::Name::new_static("self"),
                            ctx: ast::ExprContext::Load,
                        })),
                        attr: ast::Identifier::new("training", range),
                        ctx: ast::ExprContext::Load,
                    });
                    return;
                }
            }
            t::walk_expr(self, expr);
        }
    }
    for s in module.iter_mut() {
        let Stmt::ClassDef(c) = s else { continue };
        for m in c.body.iter_mut() {
            let Stmt::FunctionDef(f) = m else { continue };
            let names: HashMap<String, Option<Expr>> = {
                let mut b = Bindings::default();
                b.visit_body(&f.body);
                let parameter =
                    |name: &str| f.parameters.iter().any(|p| p.name().id.as_str() == name);
                let modes = b
                    .mode
                    .iter()
                    .filter(|(name, n)| b.all.get(*name) == Some(*n) && !parameter(name))
                    .map(|(name, _)| (name.to_string(), None));
                let tests = b
                    .tests
                    .iter()
                    .filter(|(name, _)| b.all.get(*name) == Some(&1) && !parameter(name))
                    .map(|(name, test)| (name.to_string(), Some((*test).clone())));
                modes.chain(tests).collect()
            };
            if names.is_empty() {
                continue;
            }
            let spell = Spell(&names);
            for s in f.body.iter_mut() {
                spell.visit_stmt(s);
            }
        }
    }
}

/// Renames the first parameter of every method to `self` when it is spelled otherwise
/// (`def forward(s, x): ... s.training`), with every use of it in the method, so the rules,
/// which read `self.`, see the module (not for `@staticmethod`s and `@classmethod`s). A nested
/// function that binds the same name keeps its own.
pub(crate) fn spell_self(module: &mut [Stmt]) {
    use ruff_python_ast::visitor::transformer::{self as t, Transformer};
    struct Rename<'n>(&'n str);
    impl Transformer for Rename<'_> {
        fn visit_stmt(&self, stmt: &mut Stmt) {
            if let Stmt::FunctionDef(f) = stmt {
                if f.parameters.iter().any(|p| p.name().id.as_str() == self.0) {
                    return;
                }
            }
            t::walk_stmt(self, stmt);
        }
        fn visit_expr(&self, expr: &mut Expr) {
            if let Expr::Name(n) = expr {
                if n.id.as_str() == self.0 {
                    n.id = ast::name::Name::new_static("self");
                }
            }
            t::walk_expr(self, expr);
        }
    }
    for s in module {
        match s {
            Stmt::ClassDef(c) => {
                for m in c.body.iter_mut() {
                    let Stmt::FunctionDef(f) = m else { continue };
                    let plain = !f.decorator_list.iter().any(|d| {
                        matches!(&d.expression, Expr::Name(n)
                            if matches!(n.id.as_str(), "staticmethod" | "classmethod"))
                    });
                    let params = &mut f.parameters;
                    let first = params.posonlyargs.first_mut().or(params.args.first_mut());
                    let Some(first) = first.filter(|_| plain) else {
                        continue;
                    };
                    let old = first.parameter.name.id.to_string();
                    if old == "self" || old == "cls" {
                        continue;
                    }
                    first.parameter.name.id = ast::name::Name::new_static("self");
                    let rename = Rename(&old);
                    for s in f.body.iter_mut() {
                        rename.visit_stmt(s);
                    }
                }
                spell_self(&mut c.body);
            }
            Stmt::If(i) => {
                spell_self(&mut i.body);
                for c in i.elif_else_clauses.iter_mut() {
                    spell_self(&mut c.body);
                }
            }
            Stmt::Try(tr) => {
                spell_self(&mut tr.body);
                spell_self(&mut tr.orelse);
            }
            _ => {}
        }
    }
}

/// Whether every `return` of a method body gives back one name that the body reads before it
/// binds it (a parameter it transforms: `def peaks(self, hm): ...; hm = hm * keep; return hm`).
fn returns_what_it_is_handed(body: &[Stmt]) -> bool {
    let mut stmts = Vec::new();
    flatten(body, &mut stmts);
    let mut returned: Option<&str> = None;
    for s in &stmts {
        if let Stmt::Return(r) = s {
            match r.value.as_deref() {
                Some(Expr::Name(n)) if returned.is_none_or(|x| x == n.id.as_str()) => {
                    returned = Some(n.id.as_str());
                }
                _ => return false,
            }
        }
    }
    let Some(name) = returned else { return false };
    let names = [name.to_string()];
    // The first statement that mentions it must read it.
    let reads = |e: &Expr| rules::mentions(e, &names).then_some(true);
    stmts
        .iter()
        .find_map(|s| match s {
            Stmt::Assign(a) if rules::mentions(&a.value, &names) => Some(true),
            Stmt::Assign(a) if a.targets.iter().any(|t| rules::mentions(t, &names)) => Some(false),
            Stmt::AugAssign(a) => reads(&a.target).or_else(|| reads(&a.value)),
            Stmt::Expr(e) => reads(&e.value),
            Stmt::If(i) => reads(&i.test),
            Stmt::While(w) => reads(&w.test),
            Stmt::For(f) => reads(&f.iter),
            Stmt::Return(_) => Some(false),
            _ => None,
        })
        .unwrap_or(false)
}

/// Names a body calls a tensor-only method on (`macro_size.sum()`, `lengths.unsqueeze(1)`): a
/// parameter named like a size (`macro_size`) that gets one is a tensor of sizes, not a size.
fn tensor_method_receivers(body: &[Stmt]) -> HashSet<String> {
    struct Find(HashSet<String>);
    impl<'a> Visitor<'a> for Find {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                if let Expr::Attribute(a) = c.func.as_ref() {
                    if let Expr::Name(n) = a.value.as_ref() {
                        if matches!(
                            a.attr.id.as_str(),
                            "sum"
                                | "mean"
                                | "prod"
                                | "cumsum"
                                | "amax"
                                | "amin"
                                | "float"
                                | "long"
                                | "half"
                                | "unsqueeze"
                                | "squeeze"
                                | "view"
                                | "reshape"
                                | "flatten"
                                | "clamp"
                                | "numel"
                                | "expand"
                                | "repeat"
                                | "sqrt"
                                | "log"
                                | "exp"
                                | "type_as"
                                | "new_zeros"
                                | "new_ones"
                                | "new_full"
                                | "masked_fill"
                                | "gather"
                        ) {
                            self.0.insert(n.id.to_string());
                        }
                    }
                }
            }
            visitor::walk_expr(self, e);
        }
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if !matches!(s, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                visitor::walk_stmt(self, s);
            }
        }
    }
    let mut f = Find(HashSet::default());
    f.visit_body(body);
    f.0
}

/// Cached as a tuple: a file's imports are most of what the lint cache holds.
impl From<(u32, String, String, String)> for ImportedCall {
    fn from((level, module, name, callee): (u32, String, String, String)) -> Self {
        ImportedCall {
            level,
            module,
            name,
            callee,
        }
    }
}

impl From<ImportedCall> for (u32, String, String, String) {
    fn from(c: ImportedCall) -> Self {
        (c.level, c.module, c.name, c.callee)
    }
}

/// `f` for `f(...)`, `M.f` for `M.f(...)`: how an imported callee is spelled at a call.
fn imported_callee(c: &ast::ExprCall) -> Option<String> {
    match c.func.as_ref() {
        Expr::Name(n) => Some(n.id.to_string()),
        Expr::Attribute(a) => match a.value.as_ref() {
            Expr::Name(m) if m.id.as_str() != "self" => Some(format!("{}.{}", m.id, a.attr.id)),
            _ => None,
        },
        _ => None,
    }
}

/// What a module's imports bind, for [`imported_model_calls`]: `from M import name [as local]`,
/// `import M [as local]`, star imports, and the names the module binds itself.
pub(crate) struct ImportMaps<'m> {
    from_imports: HashMap<String, (u32, String, String)>,
    module_imports: HashMap<String, String>,
    star_imports: Vec<(u32, String)>,
    local: HashSet<&'m str>,
}

/// The module's [`ImportMaps`]; `None` when it imports nothing.
pub(crate) fn import_maps(module: &[Stmt]) -> Option<ImportMaps<'_>> {
    // local name -> (level, module, name) for `from M import name [as local]`;
    // local name -> module for `import M [as local]`.
    let mut from_imports: HashMap<String, (u32, String, String)> = HashMap::default();
    let mut module_imports: HashMap<String, String> = HashMap::default();
    // `from cyto_ops import *`: (level, module) of each, for the names this file does not bind.
    let mut star_imports: Vec<(u32, String)> = Vec::new();
    // `try: from .ops import f` / `except ImportError: from ops import f`: imports in the
    // module's blocks count too.
    let mut top = Vec::new();
    flatten(module, &mut top);
    for stmt in top {
        match stmt {
            Stmt::ImportFrom(i) => {
                let m = from_module(i);
                for a in &i.names {
                    if a.name.id.as_str() == "*" {
                        star_imports.push((i.level, m.clone()));
                        continue;
                    }
                    let local = a.asname.as_ref().unwrap_or(&a.name).id.to_string();
                    from_imports.insert(local, (i.level, m.clone(), a.name.id.to_string()));
                }
            }
            Stmt::Import(i) => {
                for a in &i.names {
                    if let Some(asname) = &a.asname {
                        module_imports.insert(asname.id.to_string(), a.name.id.to_string());
                    } else if !a.name.id.contains('.') {
                        module_imports.insert(a.name.id.to_string(), a.name.id.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    // `ops = hazard_cablecars_ops` at the top level: another name for an imported module.
    for s in module {
        if let Stmt::Assign(a) = s {
            if let ([Expr::Name(alias)], Expr::Name(m)) = (&a.targets[..], a.value.as_ref()) {
                if let Some(full) = module_imports.get(m.id.as_str()).cloned() {
                    module_imports.entry(alias.id.to_string()).or_insert(full);
                }
            }
        }
    }
    if from_imports.is_empty() && module_imports.is_empty() && star_imports.is_empty() {
        return None;
    }
    // Names the module binds itself (functions, classes, assignments): not from a star import.
    let local: HashSet<&str> = module
        .iter()
        .filter(|_| !star_imports.is_empty())
        .flat_map(|s| match s {
            Stmt::FunctionDef(f) => vec![f.name.id.as_str()],
            Stmt::ClassDef(c) => vec![c.name.id.as_str()],
            Stmt::Assign(a) => a
                .targets
                .iter()
                .filter_map(|t| match t {
                    Expr::Name(n) => Some(n.id.as_str()),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        })
        .collect();
    Some(ImportMaps {
        from_imports,
        module_imports,
        star_imports,
        local,
    })
}

/// The imported functions and classes this file's model code calls, so that the project pass
/// can treat them as model code in the files that define them.
pub(crate) fn imported_model_calls(
    module: &[Stmt],
    maps: Option<&ImportMaps<'_>>,
    roots: &HashSet<(Option<String>, String)>,
) -> Vec<ImportedCall> {
    let Some(maps) = maps else {
        return Vec::new();
    };
    let mut out: HashSet<ImportedCall> = HashSet::default();
    // Only the model path of each root: a helper called under `if self.training:` is not
    // model code in the file that defines it.
    for stmt in module {
        match stmt {
            Stmt::FunctionDef(f) if roots.contains(&(None, f.name.id.to_string())) => {
                calls_in(maps, &f.body, &mut out);
            }
            Stmt::ClassDef(c) => {
                for s in &c.body {
                    if let Stmt::FunctionDef(f) = s {
                        if roots.contains(&(Some(c.name.id.to_string()), f.name.id.to_string())) {
                            calls_in(maps, &f.body, &mut out);
                        }
                    }
                }
            }
            _ => {}
        }
    }
    out.into_iter()
        .filter(|c| c.module != "torch" && !c.module.starts_with("torch."))
        .collect()
}

/// The imported calls on the model path of `body` (an export-aware branch's export side).
fn calls_in(maps: &ImportMaps<'_>, body: &[Stmt], out: &mut HashSet<ImportedCall>) {
    let ImportMaps {
        from_imports,
        module_imports,
        star_imports,
        local,
    } = maps;
    // Another file's helper follows the export path of an export-aware branch: written
    // with export in mind applies to this file's own code, not to what it calls.
    let mut calls = ModelPath {
        export_path: true,
        on_expr: |e: &Expr| {
            let Expr::Call(c) = e else { return };
            match c.func.as_ref() {
                Expr::Name(n) => {
                    if let Some((level, module, name)) = from_imports.get(n.id.as_str()) {
                        out.insert(ImportedCall {
                            level: *level,
                            module: module.clone(),
                            name: name.clone(),
                            callee: n.id.to_string(),
                        });
                    } else if !local.contains(n.id.as_str()) {
                        // Perhaps from a star import: the file that defines it is told.
                        for (level, module) in star_imports.iter() {
                            out.insert(ImportedCall {
                                level: *level,
                                module: module.clone(),
                                name: n.id.to_string(),
                                callee: n.id.to_string(),
                            });
                        }
                    }
                }
                Expr::Attribute(a) => {
                    if let Expr::Name(n) = a.value.as_ref() {
                        if let Some(module) = module_imports.get(n.id.as_str()) {
                            out.insert(ImportedCall {
                                level: 0,
                                module: module.clone(),
                                name: a.attr.id.to_string(),
                                callee: format!("{}.{}", n.id, a.attr.id),
                            });
                        } else if let Some((level, module, name)) = from_imports.get(n.id.as_str())
                        {
                            // `from pkg import ops as O` then `O.keep(...)`.
                            let module = if module.is_empty() {
                                name.clone()
                            } else {
                                format!("{module}.{name}")
                            };
                            out.insert(ImportedCall {
                                level: *level,
                                module,
                                name: a.attr.id.to_string(),
                                callee: format!("{}.{}", n.id, a.attr.id),
                            });
                        }
                    }
                }
                _ => {}
            }
        },
    };
    calls.visit_body(body);
}

/// The module of `from M import ...` (empty for `from . import x`).
fn from_module(i: &ast::StmtImportFrom) -> String {
    i.module
        .as_ref()
        .map(|m| m.id.to_string())
        .unwrap_or_default()
}

/// The statements of every block, function and class of a module, without walking expressions
/// (where import statements sit).
fn all_statements(module: &[Stmt]) -> Vec<&Stmt> {
    fn statements<'s>(body: &'s [Stmt], out: &mut Vec<&'s Stmt>) {
        let start = out.len();
        flatten(body, out);
        for k in start..out.len() {
            match out[k] {
                Stmt::FunctionDef(f) => statements(&f.body, out),
                Stmt::ClassDef(c) => statements(&c.body, out),
                _ => {}
            }
        }
    }
    let mut out = Vec::new();
    statements(module, &mut out);
    out
}

/// The names this file imports with `from M import name [as local]`, anywhere in it, with the
/// local name as `callee` (for the project pass to look them up in the files they resolve to).
pub(crate) fn imported_names(module: &[Stmt]) -> Vec<ImportedCall> {
    let mut out = Vec::new();
    for s in all_statements(module) {
        // `import hazard_litho as litho`: the module by the name it is bound to (`litho`).
        if let Stmt::Import(i) = s {
            for a in &i.names {
                let m = a.name.id.to_string();
                if m != "torch" && !m.starts_with("torch.") {
                    out.push(ImportedCall {
                        level: 0,
                        module: m,
                        name: String::new(),
                        callee: a.asname.as_ref().unwrap_or(&a.name).id.to_string(),
                    });
                }
            }
            continue;
        }
        let Stmt::ImportFrom(i) = s else { continue };
        let m = from_module(i);
        if m == "torch" || m.starts_with("torch.") {
            continue;
        }
        for a in &i.names {
            out.push(ImportedCall {
                level: i.level,
                module: m.clone(),
                name: a.name.id.to_string(),
                callee: a.asname.as_ref().unwrap_or(&a.name).id.to_string(),
            });
        }
    }
    out
}

/// The names a module takes from others at its top level (`from .ops import warp_by_flow as
/// warp`, `from .attention import *`, also in `try` blocks), read from its [`ImportMaps`]: a
/// package's `__init__.py` re-exports so. `name` is the name in the other module (`*` for a star
/// import), `callee` the name here.
pub(crate) fn reexports(maps: Option<&ImportMaps<'_>>) -> Vec<ImportedCall> {
    let Some(maps) = maps else {
        return Vec::new();
    };
    let named = maps
        .from_imports
        .iter()
        .map(|(local, (level, module, name))| ImportedCall {
            level: *level,
            module: module.clone(),
            name: name.clone(),
            callee: local.clone(),
        });
    let stars = maps
        .star_imports
        .iter()
        .map(|(level, module)| ImportedCall {
            level: *level,
            module: module.clone(),
            name: "*".into(),
            callee: "*".into(),
        });
    named.chain(stars).collect()
}

/// Every import of a module other than torch's, anywhere in the file (`from .ops import f`,
/// `import box_ops as B`, `from . import utils`), as a module path to resolve against the
/// linted files: for `from M import n` both `M` and `M.n` (which may name a submodule).
pub(crate) fn project_imports(module: &[Stmt]) -> Vec<ImportedCall> {
    let mut out = Vec::new();
    let mut push = |level: u32, module: String| {
        if module != "torch" && !module.starts_with("torch.") {
            out.push(ImportedCall {
                level,
                module,
                name: String::new(),
                callee: String::new(),
            });
        }
    };
    for s in all_statements(module) {
        match s {
            Stmt::ImportFrom(i) => {
                let m = from_module(i);
                for a in &i.names {
                    if m.is_empty() {
                        push(i.level, a.name.id.to_string());
                    } else {
                        push(i.level, format!("{m}.{}", a.name.id));
                    }
                }
                if !m.is_empty() {
                    push(i.level, m);
                }
            }
            Stmt::Import(i) => {
                for a in &i.names {
                    push(0, a.name.id.to_string());
                }
            }
            _ => {}
        }
    }
    out
}

/// What a module hands to the exporter: whether it calls `*.onnx.export(...)`,
/// `*.jit.trace(...)` or `*.export.export(...)` at all, and the names passed as their first
/// argument (or called inside a lambda passed there).
struct Exported {
    script: bool,
    names: Vec<String>,
}

/// Local names bound to the exporter or the tracer by imports
/// (`from torch.onnx import export as onnx_export`, `from torch.jit import trace`), from the
/// file's import map.
fn exporter_aliases(imports: &HashMap<String, String>) -> HashSet<String> {
    imports
        .iter()
        .filter(|(_, q)| {
            matches!(
                q.as_str(),
                "torch.onnx.export"
                    | "torch.onnx.utils.export"
                    | "torch.onnx.dynamo_export"
                    | "torch.jit.trace"
                    | "torch.export.export"
            )
        })
        .map(|(local, _)| local.clone())
        .collect()
}

fn exported_functions(module: &[Stmt], aliases: &HashSet<String>) -> Exported {
    struct Find<'s> {
        out: Exported,
        aliases: &'s HashSet<String>,
    }
    impl<'a> Visitor<'a> for Find<'_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                let hit = match c.func.as_ref() {
                    Expr::Attribute(a) => {
                        let owner = match a.value.as_ref() {
                            Expr::Attribute(o) => o.attr.id.as_str(),
                            Expr::Name(n) => n.id.as_str(),
                            _ => "",
                        };
                        matches!(
                            (owner, a.attr.id.as_str()),
                            ("onnx", "export")
                                | ("jit", "trace")
                                | ("export", "export")
                                | ("onnx", "dynamo_export")
                        )
                    }
                    Expr::Name(n) => self.aliases.contains(n.id.as_str()),
                    _ => false,
                };
                if hit {
                    self.out.script = true;
                    match c.arguments.args.first() {
                        Some(Expr::Name(n)) => self.out.names.push(n.id.to_string()),
                        Some(Expr::Lambda(l)) => {
                            let (_, funcs) = called_names_expr(&l.body);
                            self.out.names.extend(funcs);
                        }
                        _ => {}
                    }
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find {
        out: Exported {
            script: false,
            names: Vec::new(),
        },
        aliases,
    };
    f.visit_body(module);
    f.out
}

/// `self.<attr>.<method>(...)` calls in a body.
fn submodule_calls(body: &[Stmt]) -> HashSet<(String, String)> {
    struct Find {
        out: HashSet<(String, String)>,
    }
    impl<'a> Visitor<'a> for Find {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if !matches!(s, Stmt::If(i) if visit_traced_branches(self, i)) {
                visitor::walk_stmt(self, s);
            }
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                if let Expr::Attribute(m) = c.func.as_ref() {
                    if let Some(attr) = self_attr(&m.value) {
                        self.out.insert((attr.to_string(), m.attr.id.to_string()));
                    }
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find {
        out: HashSet::default(),
    };
    f.visit_body(body);
    f.out
}

/// Visits the parts of an `if` that an export in eval mode runs: `if self.training:` without its
/// body, `if not self.training:` without its other branches. `false`, having visited nothing,
/// for any other `if`.
fn visit_traced_branches<'a, V: Visitor<'a>>(v: &mut V, i: &'a ast::StmtIf) -> bool {
    match guard_of(&i.test) {
        Guard::Training => {
            v.visit_expr(&i.test);
            for c in &i.elif_else_clauses {
                if let Some(t) = &c.test {
                    v.visit_expr(t);
                }
                v.visit_body(&c.body);
            }
            true
        }
        Guard::NotTraining => {
            v.visit_expr(&i.test);
            v.visit_body(&i.body);
            true
        }
        _ => false,
    }
}

/// Methods called on the targets of loops over the module's own lists
/// (`for blk in self.blocks: blk.reset(x)`, `for a, b in zip(self.downs, self.cells)`), and on
/// their elements taken by key (`self.heads["flow"].warp(x)`).
fn loop_submodule_calls(body: &[Stmt]) -> HashSet<String> {
    struct Find {
        targets: Vec<String>,
        out: HashSet<String>,
    }
    fn on_self(e: &Expr) -> bool {
        match e {
            Expr::Attribute(a) => self_attr(e).is_some() || on_self(&a.value),
            Expr::Call(c) => c.arguments.args.iter().any(on_self),
            _ => false,
        }
    }
    impl<'a> Visitor<'a> for Find {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if matches!(s, Stmt::If(i) if visit_traced_branches(self, i)) {
                return;
            }
            if let Stmt::For(f) = s {
                if on_self(&f.iter) {
                    let before = self.targets.len();
                    collect_names(&f.target, &mut self.targets);
                    visitor::walk_body(self, &f.body);
                    self.targets.truncate(before);
                    visitor::walk_body(self, &f.orelse);
                    return;
                }
            }
            visitor::walk_stmt(self, s);
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            // `[cell.init_hidden(x) for cell in self.cells]`: a comprehension over them too.
            let generators = match e {
                Expr::ListComp(l) => &l.generators[..],
                Expr::Generator(g) => &g.generators[..],
                Expr::SetComp(g) => &g.generators[..],
                Expr::DictComp(g) => &g.generators[..],
                _ => &[],
            };
            if generators.iter().any(|g| on_self(&g.iter)) {
                let before = self.targets.len();
                for g in generators.iter().filter(|g| on_self(&g.iter)) {
                    collect_names(&g.target, &mut self.targets);
                }
                visitor::walk_expr(self, e);
                self.targets.truncate(before);
                return;
            }
            if let Expr::Call(c) = e {
                if let Expr::Attribute(m) = c.func.as_ref() {
                    // `self.heads["flow"].warp(prev, disp)`, `self.blocks[i].reset(x)`: an
                    // element of one of them, taken by its key.
                    let element = matches!(m.value.as_ref(), Expr::Subscript(s)
                        if self_attr(&s.value).is_some());
                    if element
                        || matches!(m.value.as_ref(), Expr::Name(n) if self.targets.iter().any(|t| t == n.id.as_str()))
                    {
                        self.out.insert(m.attr.id.to_string());
                    }
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find {
        targets: Vec::new(),
        out: HashSet::default(),
    };
    f.visit_body(body);
    f.out
}

/// Names used as values anywhere in a module (not as the function of a call).
fn referenced_names(module: &[Stmt]) -> HashSet<String> {
    struct Find {
        out: HashSet<String>,
        /// The names each enclosing function binds itself (`fit = self.profile(...)` is a
        /// local, not the module's `fit`).
        locals: Vec<Vec<String>>,
    }
    impl<'a> Visitor<'a> for Find {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            let Stmt::FunctionDef(f) = s else {
                return visitor::walk_stmt(self, s);
            };
            let mut bound: Vec<String> = f
                .parameters
                .iter()
                .map(|p| p.name().id.to_string())
                .collect();
            let mut stmts = Vec::new();
            flatten(&f.body, &mut stmts);
            for st in stmts {
                match st {
                    Stmt::Assign(a) => a.targets.iter().for_each(|t| collect_names(t, &mut bound)),
                    Stmt::AnnAssign(a) => collect_names(&a.target, &mut bound),
                    Stmt::For(l) => collect_names(&l.target, &mut bound),
                    _ => {}
                }
            }
            self.locals.push(bound);
            visitor::walk_stmt(self, s);
            self.locals.pop();
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            match e {
                Expr::Call(c) => {
                    if !matches!(c.func.as_ref(), Expr::Name(_)) {
                        self.visit_expr(&c.func);
                    }
                    for a in &c.arguments.args {
                        self.visit_expr(a);
                    }
                    for k in &c.arguments.keywords {
                        // `DataLoader(ds, collate_fn=pad_collate)`: data-pipeline hooks.
                        let data_hook = k.arg.as_ref().is_some_and(|a| {
                            matches!(
                                a.id.as_str(),
                                "collate_fn"
                                    | "worker_init_fn"
                                    | "transform"
                                    | "transforms"
                                    | "target_transform"
                                    | "key"
                            )
                        });
                        if !data_hook {
                            self.visit_expr(&k.value);
                        }
                    }
                }
                Expr::Name(n) => {
                    let local = self
                        .locals
                        .last()
                        .is_some_and(|l| l.iter().any(|b| b == n.id.as_str()));
                    if n.ctx.is_load() && !local {
                        self.out.insert(n.id.to_string());
                    }
                }
                _ => visitor::walk_expr(self, e),
            }
        }
    }
    let mut f = Find {
        out: HashSet::default(),
        locals: Vec::new(),
    };
    f.visit_body(module);
    f.out
}

/// Whether a body runs the exported model on a runtime or compares outputs
/// (`onnxruntime.InferenceSession`, `np.testing.assert_allclose`): checking code, not model code.
fn checks_on_runtime(body: &[Stmt]) -> bool {
    struct Find {
        hit: bool,
    }
    impl<'a> Visitor<'a> for Find {
        fn visit_expr(&mut self, e: &'a Expr) {
            let id = match e {
                Expr::Name(n) => n.id.as_str(),
                Expr::Attribute(a) => a.attr.id.as_str(),
                _ => "",
            };
            if matches!(
                id,
                "onnxruntime"
                    | "InferenceSession"
                    | "assert_allclose"
                    | "assert_almost_equal"
                    | "assert_array_almost_equal"
            ) {
                self.hit = true;
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find { hit: false };
    f.visit_body(body);
    f.hit
}

pub(crate) fn called_names_expr(e: &Expr) -> (HashSet<String>, HashSet<String>) {
    called_names(std::slice::from_ref(&expr_stmt(e)))
}

/// An expression as a statement, for checks written over statement bodies.
pub(crate) fn expr_stmt(e: &Expr) -> Stmt {
    Stmt::Expr(ast::StmtExpr {
        node_index: Default::default(),
        range: Default::default(),
        value: Box::new(e.clone()),
    })
}

/// Whether a `forward` body always computes a loss: a statement of its own (not one under an
/// `if`, like a model's `if labels is not None: loss = ...`) calls `F.cross_entropy`,
/// `F.nll_loss`, `self.criterion(...)` or the like.
fn computes_loss(body: &[Stmt]) -> bool {
    loss_statements(body).next().is_some()
}

/// The statements of a body (not under an `if`) that compute a loss.
fn loss_statements(body: &[Stmt]) -> impl Iterator<Item = &Stmt> {
    body.iter()
        .filter(|s| {
            matches!(
                s,
                Stmt::Assign(_)
                    | Stmt::AugAssign(_)
                    | Stmt::AnnAssign(_)
                    | Stmt::Expr(_)
                    | Stmt::Return(_)
            )
        })
        .filter(|s| {
            let (methods, funcs) = called_names(std::slice::from_ref(s));
            let mut attrs = HashSet::default();
            struct Find<'h> {
                out: &'h mut HashSet<String>,
            }
            impl<'a> Visitor<'a> for Find<'_> {
                fn visit_expr(&mut self, e: &'a Expr) {
                    if let Expr::Call(c) = e {
                        if let Expr::Attribute(a) = c.func.as_ref() {
                            self.out.insert(a.attr.id.to_string());
                        }
                    }
                    visitor::walk_expr(self, e);
                }
            }
            Find { out: &mut attrs }.visit_stmt(s);
            methods.iter().chain(&funcs).chain(&attrs).any(|n| {
                let n = n.to_ascii_lowercase();
                n.ends_with("_loss")
                    || n.contains("cross_entropy")
                    || matches!(n.as_str(), "kl_div" | "criterion" | "loss_fn")
            })
        })
}

/// Whether a class's `forward` is a loss's: it always computes a loss (`computes_loss`), and
/// either that loss takes a target handed to `forward` (`def forward(self, logits, labels)`) or
/// every `return` gives back one value. A vector quantizer that adds its commitment loss
/// (`return zq, idx, commit`) or a mixture-of-experts layer with an auxiliary loss is a model.
fn is_loss_forward(body: &[Stmt], targets: &[String]) -> bool {
    if !computes_loss(body) {
        return false;
    }
    struct Scan<'t> {
        targets: &'t [String],
        mentions_target: bool,
        tuple_return: bool,
    }
    impl<'a> Visitor<'a> for Scan<'_> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if let Stmt::Return(r) = s {
                if matches!(r.value.as_deref(), Some(Expr::Tuple(t)) if t.elts.len() > 1) {
                    self.tuple_return = true;
                }
            }
            if !matches!(s, Stmt::FunctionDef(_) | Stmt::ClassDef(_)) {
                visitor::walk_stmt(self, s);
            }
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Name(n) = e {
                if self.targets.iter().any(|t| t == n.id.as_str()) {
                    self.mentions_target = true;
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    // Returns anywhere in the body; targets only in the statements that compute the loss.
    let mut whole = Scan {
        targets,
        mentions_target: false,
        tuple_return: false,
    };
    whole.visit_body(body);
    let mut loss = Scan {
        targets,
        mentions_target: false,
        tuple_return: false,
    };
    loss_statements(body).for_each(|s| loss.visit_stmt(s));
    loss.mentions_target || !whole.tuple_return
}

/// Whether a name says "loss" as a word of its own (`FocalLoss`, `compute_loss`, `bceloss`,
/// `losses`), not inside another word (`GlossAligner`, `decode_glosses`).
pub(crate) fn names_loss(name: &str) -> bool {
    let mut words: Vec<String> = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in name.chars() {
        if c == '_' || c == '.' || c == '-' || c == ' ' {
            words.push(std::mem::take(&mut word));
            prev_lower = false;
            continue;
        }
        if c.is_ascii_uppercase() && prev_lower {
            words.push(std::mem::take(&mut word));
        }
        prev_lower = c.is_ascii_lowercase() || c.is_ascii_digit();
        word.push(c.to_ascii_lowercase());
    }
    words.push(word);
    words.iter().any(|w| {
        (w.ends_with("loss") && !w.ends_with("gloss"))
            || w.ends_with("losses") && !w.ends_with("glosses")
            || w.starts_with("loss")
    })
}

/// The functions a body calls through a dispatch table: `{"train": train, "eval":
/// run_eval}[args.cmd](args)`, or `COMMANDS[args.cmd](args)` with `COMMANDS` bound to such a
/// dict literal in the body or at the module's top level.
fn dispatched_names<'a>(body: &'a [Stmt], module: &'a [Stmt]) -> impl Iterator<Item = String> + 'a {
    struct Dispatch<'a> {
        tables: Vec<&'a Expr>,
    }
    impl<'a> Visitor<'a> for Dispatch<'a> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                if let Expr::Subscript(sub) = c.func.as_ref() {
                    self.tables.push(&sub.value);
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut d = Dispatch { tables: Vec::new() };
    d.visit_body(body);
    d.tables.into_iter().flat_map(move |table| {
        let dicts: Vec<&ast::ExprDict> = match table {
            Expr::Dict(dict) => vec![dict],
            // A named table counts only when the file uses it for nothing but such calls outside
            // classes (`TASKS.items()` handed to an exporter, `ACTS[self.act](x)` in a `forward`:
            // the functions may be traced).
            Expr::Name(n) if !only_dispatched(module, n.id.as_str()) => Vec::new(),
            Expr::Name(n) => crate::rules::bound_values(body, n.id.as_str())
                .into_iter()
                .chain(crate::rules::bound_values(module, n.id.as_str()))
                .filter_map(|v| match v {
                    Expr::Dict(dict) => Some(dict),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        dicts
            .into_iter()
            .flat_map(|dict| dict.items.iter())
            .filter_map(|item| match &item.value {
                Expr::Name(f) => Some(f.id.to_string()),
                _ => None,
            })
            .collect::<Vec<_>>()
    })
}

/// Whether every read of `name` in the module is the table of a call `name[key](...)` outside
/// class bodies, or reads only its keys (`sorted(TARGETS)`, `choices=list(TARGETS)`, `for name
/// in TARGETS`, `name in TARGETS`, `TARGETS.keys()`), which hands no function out.
fn only_dispatched(module: &[Stmt], name: &str) -> bool {
    struct Uses<'n> {
        name: &'n str,
        reads: usize,
        dispatches: usize,
        in_class: u32,
    }
    impl Uses<'_> {
        fn is_table(&self, e: &Expr) -> bool {
            matches!(e, Expr::Name(n) if n.id.as_str() == self.name)
        }
    }
    impl<'a> Visitor<'a> for Uses<'_> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if let Stmt::ClassDef(_) = s {
                self.in_class += 1;
                visitor::walk_stmt(self, s);
                self.in_class -= 1;
                return;
            }
            if let Stmt::For(f) = s {
                if self.is_table(&f.iter) {
                    self.dispatches += 1;
                }
            }
            visitor::walk_stmt(self, s);
        }
        fn visit_comprehension(&mut self, c: &'a ast::Comprehension) {
            if self.is_table(&c.iter) {
                self.dispatches += 1;
            }
            visitor::walk_comprehension(self, c);
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            match e {
                // Reads of the keys only.
                Expr::Call(c)
                    if (matches!(c.func.as_ref(), Expr::Name(f)
                        if matches!(f.id.as_str(), "sorted" | "list" | "set" | "tuple" | "len" | "enumerate"))
                        // `", ".join(TARGETS)`
                        || matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.id.as_str() == "join"))
                        && matches!(&c.arguments.args[..], [t] if self.is_table(t)) =>
                {
                    self.dispatches += 1
                }
                Expr::Call(c)
                    if matches!(c.func.as_ref(), Expr::Attribute(a)
                        if a.attr.id.as_str() == "keys" && self.is_table(&a.value)) =>
                {
                    self.dispatches += 1
                }
                Expr::Compare(c)
                    if c.ops
                        .iter()
                        .all(|o| matches!(o, ast::CmpOp::In | ast::CmpOp::NotIn))
                        && c.comparators.iter().any(|t| self.is_table(t)) =>
                {
                    self.dispatches += 1
                }
                Expr::Name(n)
                    if n.id.as_str() == self.name && matches!(n.ctx, ast::ExprContext::Load) =>
                {
                    self.reads += 1
                }
                Expr::Call(c) if self.in_class == 0 => {
                    if let Expr::Subscript(sub) = c.func.as_ref() {
                        if matches!(sub.value.as_ref(), Expr::Name(n) if n.id.as_str() == self.name)
                        {
                            self.dispatches += 1;
                        }
                    }
                }
                _ => {}
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut u = Uses {
        name,
        reads: 0,
        dispatches: 0,
        in_class: 0,
    };
    u.visit_body(module);
    u.reads > 0 && u.reads == u.dispatches
}

/// The functions a body binds to a local name (`crit = ohem_cross_entropy`) and calls
/// through it (`crit(logits, y)`).
fn function_aliases(body: &[Stmt]) -> impl Iterator<Item = String> {
    let mut stmts = Vec::new();
    flatten(body, &mut stmts);
    let aliases: HashMap<String, String> = stmts
        .iter()
        .filter_map(|s| match s {
            Stmt::Assign(a) => match (&a.targets[..], a.value.as_ref()) {
                ([Expr::Name(alias)], Expr::Name(f)) => {
                    Some((alias.id.to_string(), f.id.to_string()))
                }
                _ => None,
            },
            _ => None,
        })
        .collect();
    let (_, called) = called_names(body);
    aliases
        .into_iter()
        .filter(move |(alias, _)| called.contains(alias))
        .map(|(_, f)| f)
}

/// Functions that by name only run in training (losses, target assignment, sampling).
pub(crate) fn training_only_name(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    names_loss(name)
        || n.contains("training")
        || n.contains("assign_targets")
        || n.contains("collate")
        || n.starts_with("train")
}

/// Binds local names of a function (or the module) to what they most likely hold.
/// `function`: the function whose body it is (`None` for the module).
fn scan_locals(ch: &mut Checker, body: &[Stmt], function: Option<&ast::StmtFunctionDef>) {
    // Counted only when a loop over frozen numbers needs it (rare).
    let bindings: std::cell::OnceCell<HashMap<&str, usize>> = std::cell::OnceCell::new();
    let bound_once = |name: &str| {
        let counts = bindings.get_or_init(|| {
            let mut counts = name_bindings(body);
            for p in function.into_iter().flat_map(parameters) {
                *counts.entry(p.parameter.name.id.as_str()).or_default() += 1;
            }
            counts
        });
        counts.get(name) == Some(&1)
    };
    // `for n in (d, h, w)` / `[... for n in (d, h, w)]` with each a frozen number (`d, h, w =
    // [int(s) for s in x.shape[2:]]`): so is `n`, when the function binds that name nowhere else
    // (names are kept per function, not per loop or comprehension).
    let frozen_loop = |ch: &mut Checker, target: &Expr, iter: &Expr| {
        let Expr::Name(n) = target else { return };
        let elts = match iter {
            Expr::Tuple(t) => &t.elts[..],
            Expr::List(l) => &l.elts[..],
            _ => &[],
        };
        if !elts.is_empty() && elts.iter().all(|e| ch.is_frozen_int(e)) && bound_once(n.id.as_str())
        {
            let st = ch.fns.last_mut().expect("scope");
            st.frozen.insert(n.id.to_string());
            st.frozen_sizes.insert(n.id.to_string());
        }
    };
    // Two rounds so that `b = a + 1` after `a = torch.zeros(3)` is seen whatever the order.
    for _ in 0..2 {
        let mut stmts: Vec<&Stmt> = Vec::new();
        flatten(body, &mut stmts);
        for stmt in stmts {
            // `if (n := len(x)) > 1:`: the walrus binds in the function's scope.
            if ch.has_walrus {
                for named in walrus_bindings(stmt) {
                    bind(ch, &named.target, &named.value);
                }
            }
            match stmt {
                Stmt::Assign(a) => {
                    let generators = match a.value.as_ref() {
                        Expr::ListComp(l) => &l.generators[..],
                        Expr::Generator(g) => &g.generators[..],
                        _ => &[],
                    };
                    for g in generators {
                        frozen_loop(ch, &g.target, &g.iter);
                    }
                    for t in &a.targets {
                        bind(ch, t, &a.value);
                        // `canvas[ys, xs] = v` with `v` or the indices from the inputs.
                        if let Expr::Subscript(sub) = t {
                            // `kw["dynamic_axes"] = axes` on a dict of export arguments.
                            if let (Expr::Name(n), Some(_)) =
                                (sub.value.as_ref(), rules::string_literal(&sub.slice))
                            {
                                grow_dict(
                                    ch,
                                    n.id.as_str(),
                                    vec![ast::DictItem {
                                        key: Some((*sub.slice).clone()),
                                        value: (*a.value).clone(),
                                    }],
                                );
                            }
                            written_from_inputs(ch, sub, &a.value);
                        }
                    }
                }
                Stmt::AnnAssign(a) => {
                    if let Some(v) = &a.value {
                        bind(ch, &a.target, v);
                    }
                    // `out: StrikeOutput = self.net(cqt)`: the annotation names the record.
                    if let (Expr::Name(n), Some(class)) =
                        (a.target.as_ref(), ch.record_named(&a.annotation))
                    {
                        let class = class.to_string();
                        let st = ch.fns.last_mut().expect("scope");
                        st.records.insert(n.id.to_string(), class);
                    }
                }
                // `kw |= {"opset_version": 12}` on a dict of export arguments.
                Stmt::AugAssign(a) if matches!(a.op, ast::Operator::BitOr) => {
                    if let Expr::Name(n) = a.target.as_ref() {
                        let item = ast::DictItem {
                            key: None,
                            value: (*a.value).clone(),
                        };
                        grow_dict(ch, n.id.as_str(), vec![item]);
                    }
                }
                Stmt::For(f) => {
                    frozen_loop(ch, &f.target, &f.iter);
                    bind_loop(ch, &f.target, &f.iter);
                }
                // `hist = torch.zeros(bins)` then `hist.index_add_(0, idx, ones)` or
                // `hist[idx] = v`: filled from the inputs in place, no longer a constant.
                Stmt::Expr(e) => {
                    if let Expr::Call(c) = e.value.as_ref() {
                        // `kw.update(opset_version=12)` or `kw.update({...})` on a dict of
                        // export arguments: what it adds, read as `**` entries.
                        let update = matches!(c.func.as_ref(), Expr::Attribute(a)
                            if a.attr.id.as_str() == "update" && a.value.is_name_expr());
                        if let Some(("update", Expr::Name(n))) =
                            update.then(|| ch.method(c)).flatten()
                        {
                            let item = if c.arguments.keywords.is_empty() {
                                c.arguments.args.first().cloned()
                            } else {
                                Some(e.value.as_ref().clone())
                            };
                            if let Some(value) = item.filter(|_| c.arguments.args.len() <= 1) {
                                grow_dict(
                                    ch,
                                    n.id.as_str(),
                                    vec![ast::DictItem { key: None, value }],
                                );
                            }
                        }
                        // `outs = []` then `outs.append(self.head(h))`: a list of tensors.
                        if let (Some(("append", Expr::Name(n))), [item]) =
                            (ch.method(c), &c.arguments.args[..])
                        {
                            let tensor = ch.is_tensor(item)
                                || matches!(item, Expr::Call(m) if is_self_chain(&m.func));
                            let st = ch.fns.last_mut().expect("scope");
                            if tensor && !st.tensors.contains(n.id.as_str()) {
                                st.containers.insert(n.id.to_string());
                                // What the function computed (`x = layer(x)`), not pieces of
                                // its inputs (`proposals[i][pos]`).
                                if matches!(item, Expr::Name(_) | Expr::Call(_)) {
                                    st.built_lists.insert(n.id.to_string());
                                }
                            }
                        }
                        if let Some((m, Expr::Name(n))) = ch.method(c) {
                            let filled = m.ends_with('_')
                                && !m.starts_with("__")
                                && m != "requires_grad_"
                                && c.arguments
                                    .args
                                    .iter()
                                    .chain(c.arguments.keywords.iter().map(|k| &k.value))
                                    .any(|a| ch.depends_on_inputs(a));
                            if filled {
                                let id = n.id.to_string();
                                ch.fns.last_mut().expect("scope").non_consts.insert(id);
                            }
                        }
                    }
                }
                Stmt::AugAssign(a) => {
                    if let Expr::Name(n) = a.target.as_ref() {
                        if ch.is_tensor(&a.value) {
                            let constant = ch.is_constant_tensor(&a.value);
                            let id = n.id.to_string();
                            let st = ch.fns.last_mut().expect("scope");
                            if !constant {
                                st.non_consts.insert(id.clone());
                            }
                            st.tensors.insert(id);
                        }
                    }
                    // `hist[bucket] += 1` with an index or value from the inputs: the tensor
                    // is no longer the constant it was made as, as with `hist[i] = v`.
                    if let Expr::Subscript(sub) = a.target.as_ref() {
                        written_from_inputs(ch, sub, &a.value);
                    }
                }
                _ => {}
            }
        }
    }
}

/// How many times a body binds each name by assignment, loop or comprehension (nested
/// functions and classes left out).
pub(crate) fn name_bindings(body: &[Stmt]) -> HashMap<&str, usize> {
    use ruff_python_ast::visitor::{self, Visitor};
    #[derive(Default)]
    struct Count<'a>(HashMap<&'a str, usize>);
    impl<'a> Count<'a> {
        fn target(&mut self, t: &'a Expr) {
            match t {
                Expr::Name(n) => *self.0.entry(n.id.as_str()).or_default() += 1,
                Expr::Tuple(t) => t.elts.iter().for_each(|e| self.target(e)),
                Expr::List(t) => t.elts.iter().for_each(|e| self.target(e)),
                Expr::Starred(s) => self.target(&s.value),
                _ => {}
            }
        }
    }
    impl<'a> Visitor<'a> for Count<'a> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            match s {
                Stmt::FunctionDef(f) => {
                    *self.0.entry(f.name.id.as_str()).or_default() += 1;
                    return;
                }
                Stmt::ClassDef(c) => {
                    *self.0.entry(c.name.id.as_str()).or_default() += 1;
                    return;
                }
                Stmt::Import(i) => {
                    for a in &i.names {
                        let name = a.asname.as_ref().unwrap_or(&a.name).id.as_str();
                        *self
                            .0
                            .entry(name.split('.').next().unwrap_or(name))
                            .or_default() += 1;
                    }
                }
                Stmt::ImportFrom(i) => {
                    for a in &i.names {
                        *self
                            .0
                            .entry(a.asname.as_ref().unwrap_or(&a.name).id.as_str())
                            .or_default() += 1;
                    }
                }
                Stmt::Assign(a) => a.targets.iter().for_each(|t| self.target(t)),
                Stmt::AnnAssign(a) => self.target(&a.target),
                Stmt::AugAssign(a) => self.target(&a.target),
                Stmt::For(f) => self.target(&f.target),
                Stmt::With(w) => w
                    .items
                    .iter()
                    .filter_map(|i| i.optional_vars.as_deref())
                    .for_each(|t| self.target(t)),
                _ => {}
            }
            visitor::walk_stmt(self, s);
        }
        fn visit_comprehension(&mut self, c: &'a ast::Comprehension) {
            self.target(&c.target);
            visitor::walk_comprehension(self, c);
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Named(n) = e {
                self.target(&n.target);
            }
            visitor::walk_expr(self, e);
        }
        fn visit_except_handler(&mut self, h: &'a ast::ExceptHandler) {
            let ast::ExceptHandler::ExceptHandler(h2) = h;
            if let Some(name) = &h2.name {
                *self.0.entry(name.id.as_str()).or_default() += 1;
            }
            visitor::walk_except_handler(self, h);
        }
    }
    let mut count = Count::default();
    count.visit_body(body);
    count.0
}

/// Whether a function is decorated `@staticmethod` (called through `self` without it).
fn is_static_method(f: &ast::StmtFunctionDef) -> bool {
    f.decorator_list
        .iter()
        .any(|d| matches!(&d.expression, Expr::Name(n) if n.id.as_str() == "staticmethod"))
}

/// The expressions a statement evaluates itself (compound statements: their header only;
/// [`flatten`] lists the statements of their bodies).
pub(crate) fn own_exprs(s: &Stmt) -> Vec<&Expr> {
    match s {
        Stmt::Assign(a) => vec![&a.value],
        Stmt::AnnAssign(a) => a.value.as_deref().into_iter().collect(),
        Stmt::AugAssign(a) => vec![&a.value],
        Stmt::Expr(e) => vec![&e.value],
        Stmt::Return(r) => r.value.as_deref().into_iter().collect(),
        Stmt::If(i) => vec![&i.test],
        Stmt::While(w) => vec![&w.test],
        Stmt::For(f) => vec![&f.iter],
        Stmt::With(w) => w.items.iter().map(|i| &i.context_expr).collect(),
        Stmt::Match(m) => vec![&m.subject],
        _ => Vec::new(),
    }
}

pub(crate) fn flatten<'s>(body: &'s [Stmt], out: &mut Vec<&'s Stmt>) {
    for s in body {
        out.push(s);
        match s {
            Stmt::If(i) => {
                flatten(&i.body, out);
                for c in &i.elif_else_clauses {
                    flatten(&c.body, out);
                }
            }
            Stmt::For(f) => {
                flatten(&f.body, out);
                flatten(&f.orelse, out);
            }
            Stmt::While(w) => {
                flatten(&w.body, out);
                flatten(&w.orelse, out);
            }
            Stmt::With(w) => flatten(&w.body, out),
            Stmt::Match(m) => {
                for c in &m.cases {
                    flatten(&c.body, out);
                }
            }
            Stmt::Try(t) => {
                flatten(&t.body, out);
                for ast::ExceptHandler::ExceptHandler(h) in &t.handlers {
                    flatten(&h.body, out);
                }
                flatten(&t.orelse, out);
                flatten(&t.finalbody, out);
            }
            _ => {}
        }
    }
}

/// Names a body hands over as a padding mask (`key_padding_mask=pad`, `src_key_padding_mask=m`):
/// boolean masks by the callee's word (not `attn_mask=`, which may be an additive float mask).
fn mask_keyword_names(body: &[Stmt]) -> Vec<String> {
    struct Find(Vec<String>);
    impl<'a> Visitor<'a> for Find {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                for k in &c.arguments.keywords {
                    if let (Some(arg), Expr::Name(n)) = (&k.arg, &k.value) {
                        if arg.id.as_str().ends_with("padding_mask") {
                            self.0.push(n.id.to_string());
                        }
                    }
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find(Vec::new());
    f.visit_body(body);
    f.0
}

/// Whether every `return` of a body gives something other than a Python number, a test or a
/// size (`return t.shape[1]`, `return t.dim() == 4`, `return len(x)`), and one gives a value:
/// a local helper that may return a tensor.
fn returns_no_number(body: &[Stmt]) -> bool {
    let mut stmts = Vec::new();
    flatten(body, &mut stmts);
    let mut any = false;
    for s in stmts {
        let Stmt::Return(r) = s else { continue };
        let Some(v) = r.value.as_deref() else {
            return false;
        };
        let numeric = match v {
            Expr::Compare(_)
            | Expr::BoolOp(_)
            | Expr::NumberLiteral(_)
            | Expr::BooleanLiteral(_)
            | Expr::StringLiteral(_)
            | Expr::NoneLiteral(_)
            | Expr::Tuple(_)
            | Expr::List(_) => true,
            Expr::UnaryOp(u) => matches!(u.op, ast::UnaryOp::Not),
            Expr::Attribute(a) => a.attr.id.as_str() == "shape",
            Expr::Subscript(sub) => {
                matches!(sub.value.as_ref(), Expr::Attribute(a) if a.attr.id.as_str() == "shape")
            }
            Expr::Call(c) => match c.func.as_ref() {
                Expr::Name(f) => matches!(
                    f.id.as_str(),
                    "len" | "int" | "float" | "bool" | "round" | "max" | "min"
                ),
                Expr::Attribute(a) => matches!(
                    a.attr.id.as_str(),
                    "size" | "dim" | "ndimension" | "numel" | "item" | "tolist" | "__len__"
                ),
                _ => false,
            },
            _ => false,
        };
        if numeric {
            return false;
        }
        any = true;
    }
    any
}

/// Whether a body calls `<receiver>.<attr>(...)`.
fn calls_attribute(body: &[Stmt], receiver: &str, attr: &str) -> bool {
    struct Find<'s> {
        receiver: &'s str,
        attr: &'s str,
        found: bool,
    }
    impl<'a> Visitor<'a> for Find<'_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                // Handed a value of `forward`'s (`self.up(x)`), not a setting (`self.pad(3)`,
                // `self.pad(self.k)`).
                let value = |a: &Expr| {
                    !a.is_literal_expr() && !matches!(a, Expr::Attribute(_) if is_self_chain(a))
                };
                if matches!(c.func.as_ref(), Expr::Attribute(a)
                    if a.attr.id.as_str() == self.attr
                        && matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == self.receiver))
                    && c.arguments.args.first().is_some_and(value)
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
        receiver,
        attr,
        found: false,
    };
    f.visit_body(body);
    f.found
}

/// The text an f-string starts with before its first interpolation (`"_score_"` of
/// `f"_score_{kind}"`).
fn fstring_prefix(e: &Expr) -> Option<String> {
    use rules::dynamic_axes_unknown_name::{name_pattern, ANY};
    if !matches!(e, Expr::FString(_)) {
        return None;
    }
    let pattern = name_pattern(e, None);
    Some(pattern.split(ANY).next().unwrap_or_default().to_string())
}

/// The assignment expressions (`n := len(x)`) in what a statement evaluates itself (a compound
/// statement's header; [`flatten`] lists the statements of its body), outside lambdas.
fn walrus_bindings(stmt: &Stmt) -> Vec<&ast::ExprNamed> {
    struct Find<'a>(Vec<&'a ast::ExprNamed>);
    impl<'a> Visitor<'a> for Find<'a> {
        fn visit_expr(&mut self, e: &'a Expr) {
            match e {
                Expr::Named(n) => self.0.push(n),
                Expr::Lambda(_) => return,
                _ => {}
            }
            visitor::walk_expr(self, e);
        }
    }
    let header: Vec<&Expr> = match stmt {
        Stmt::Assign(a) => vec![&a.value],
        Stmt::AnnAssign(a) => a.value.as_deref().into_iter().collect(),
        Stmt::AugAssign(a) => vec![&a.value],
        Stmt::Expr(e) => vec![&e.value],
        Stmt::Return(r) => r.value.as_deref().into_iter().collect(),
        Stmt::If(i) => std::iter::once(&*i.test)
            .chain(i.elif_else_clauses.iter().filter_map(|c| c.test.as_ref()))
            .collect(),
        Stmt::While(w) => vec![&w.test],
        Stmt::For(f) => vec![&f.iter],
        Stmt::With(w) => w.items.iter().map(|i| &i.context_expr).collect(),
        Stmt::Match(m) => vec![&m.subject],
        _ => return Vec::new(),
    };
    // Most statements hold none: only walk those whose text could.
    let mut f = Find(Vec::new());
    for e in header {
        f.visit_expr(e);
    }
    f.0
}

/// A dict of export arguments bound by name (`kw = dict(...)` or `{...}`) given more entries
/// afterwards (`kw["dynamic_axes"] = axes`, `kw.update(...)`): its literal grows, so that a
/// `**kw` splice shows what the call gets, later entries last. Read in the order the
/// statements are written, whichever branch holds them.
fn grow_dict(ch: &mut Checker, name: &str, mut items: Vec<ast::DictItem>) {
    // `kw.update(kw)`, `kw |= kw`: nothing new.
    items.retain(|i| !matches!(&i.value, Expr::Name(n) if n.id.as_str() == name));
    if items.is_empty() {
        return;
    }
    let st = ch.fns.last_mut().expect("scope");
    let Some(old) = st.literals.get_mut(name) else {
        return;
    };
    match old {
        Expr::Dict(d) => d.items.extend(items),
        Expr::Call(c) if matches!(c.func.as_ref(), Expr::Name(f) if f.id.as_str() == "dict") => {
            let range = ruff_text_size::Ranged::range(&*c);
            let first = ast::DictItem {
                key: None,
                value: old.clone(),
            };
            *old = Expr::Dict(ast::ExprDict {
                node_index: Default::default(),
                range,
                items: std::iter::once(first).chain(items).collect(),
            });
        }
        _ => {}
    }
}

fn bind(ch: &mut Checker, target: &Expr, value: &Expr) {
    match target {
        Expr::Name(n) => {
            let id = n.id.to_string();
            // `oe = torch.einsum`: a local alias of a torch function (or module).
            let imported_root = |mut e: &Expr| loop {
                match e {
                    Expr::Attribute(a) => e = &a.value,
                    Expr::Name(n) => break ch.imports.contains_key(n.id.as_str()),
                    _ => break false,
                }
            };
            let alias = match value {
                Expr::Attribute(_) if imported_root(value) => ch
                    .qualify(value)
                    .filter(|q| q.starts_with("torch.") && !ch.is_tensor(value)),
                _ => None,
            };
            // Only a name the function binds once, and not as a parameter, is an alias (as at
            // module level): the checker reads bindings before it visits the statements.
            let alias = alias.filter(|_| {
                ch.bodies.len() > 1
                    && ch.bodies.last().is_some_and(|body| {
                        name_bindings(body).get(id.as_str()) == Some(&1)
                            && !ch.defs.last().is_some_and(|f| {
                                parameters(f).any(|p| p.parameter.name.id.as_str() == id)
                            })
                    })
            });
            let st = ch.fns.last_mut().expect("scope");
            match alias {
                Some(q) => {
                    st.torch_aliases.insert(id.clone(), q);
                    ch.has_local_aliases = true;
                }
                None if !st.torch_aliases.is_empty() => {
                    st.torch_aliases.remove(&id);
                }
                None => {}
            }
            // `abs_pos = abs_pos[:, 1:]` on a weight parameter: still the weight's sizes.
            if ch.fns.last().is_some_and(|st| !st.weight_params.is_empty()) {
                // A slice by numbers (`[:, 1:]`, `[:, self.num_prefix_tokens:]`) keeps the
                // weight's sizes; `pos[:, : x.shape[1]]` or `table[idx]` take the input's.
                let literal_slice = |e: &Expr| {
                    !rules::any_sub_expr(e, |x| {
                        matches!(x, Expr::Call(_)) || ch.is_size(x) || ch.is_tensor(x)
                    })
                };
                let weight = ch.is_weight(value)
                    || matches!(value, Expr::Subscript(s) if ch.is_weight(&s.value) && literal_slice(&s.slice));
                let st = ch.fns.last_mut().expect("scope");
                if weight {
                    st.weight_params.insert(id.clone());
                } else {
                    st.weight_params.remove(&id);
                }
            }
            let tensor = ch.is_tensor(value);
            let mask = ch.is_bool_mask(value) && !matches!(value, Expr::Name(_));
            let mask_list = match value {
                Expr::ListComp(l) => ch.is_bool_mask(&l.elt),
                Expr::List(l) => !l.elts.is_empty() && l.elts.iter().all(|e| ch.is_bool_mask(e)),
                _ => false,
            };
            let size = ch.is_size(value) && !tensor;
            let frozen = ch.is_frozen_int(value);
            let frozen_size = frozen && ch.is_frozen_size(value);
            let constant = tensor && ch.is_constant_tensor(value);
            let module = matches!(value, Expr::Attribute(_)) && is_self_chain(value) && !tensor;
            let literal = matches!(
                value,
                Expr::List(_)
                    | Expr::Tuple(_)
                    | Expr::Dict(_)
                    | Expr::StringLiteral(_)
                    | Expr::NumberLiteral(_)
            ) || matches!(value, Expr::DictComp(_))
                // `out_names = ["logits", "boxes"] + (["masks"] if with_masks else [])`
                // `hen_names = names + ["hens_per_pair"]` with `names` a list bound before.
                || matches!(value, Expr::BinOp(b) if matches!(b.op, ast::Operator::Add)
                    && (matches!(b.left.as_ref(), Expr::List(_))
                        || matches!(b.left.as_ref(), Expr::Name(n)
                            if matches!(ch.literal(n.id.as_str()), Some(Expr::List(_) | Expr::Tuple(_))))))
                // `names = ["mel", "f0"] if nsf else ["mel"]`, `mode = "nearest" if fast else
                // "bilinear"`
                || matches!(value, Expr::If(i) if matches!(i.body.as_ref(), Expr::List(_))
                    && matches!(i.orelse.as_ref(), Expr::List(_)))
                || (value.is_if_expr() && rules::string_choice(value))
                || matches!(value, Expr::Call(c) if matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "dict"))
                // `export = partial(torch.onnx.export, opset_version=11)`, `MHA =
                // partial(nn.MultiheadAttention, batch_first=True)`: the bound arguments.
                || matches!(value, Expr::Call(c) if rules::partial_of_torch(ch, c).is_some())
                // `hard_peak = _HardPeak.apply`: an autograd Function's apply, called by name.
                || matches!(value, Expr::Attribute(a) if a.attr.id.as_str() == "apply"
                    && a.value.is_name_expr())
                // `cache_in = [f"cache{i}_in" for i in range(n)]`: names by a pattern.
                || matches!(value, Expr::ListComp(l)
                    if matches!(l.elt.as_ref(), Expr::FString(_) | Expr::StringLiteral(_)))
                // `DEVICE = torch.device("cuda")`, `torch.device("cuda" if ... else "cpu")`, or
                // of a name bound to one (`DEV = "cuda" if ... else "cpu"`; `torch.device(DEV)`).
                || matches!(value, Expr::Call(c) if ch.torch_fn(c).is_some_and(|q| q == "torch.device")
                    && c.arguments.args.first().is_some_and(|a| rules::string_choice(a)
                        || matches!(a, Expr::Name(n) if n.id.as_str() != id.as_str()
                            && ch.literal(n.id.as_str())
                            .is_some_and(|v| rules::string_choice(v) || v.is_call_expr()))));
            let array = ch.is_array(value);
            let record = ch.record_of(value).map(str::to_string);
            // `outputs_class = [self.class_embed(h) for h in hs]`: a list of tensors, whose
            // items (`outputs_class[-1]`) are tensors.
            let container = matches!(value, Expr::ListComp(l)
                if ch.is_tensor(&l.elt)
                    || matches!(l.elt.as_ref(), Expr::Call(c) if is_self_chain(&c.func)))
                // `keeps = [s[s > 0.5] for s in scores]`: a list of what is read from the rows
                // of a tensor.
                || matches!(value, Expr::ListComp(l) if matches!(&l.generators[..],
                    [g] if ch.is_tensor(&g.iter)
                        && matches!(&g.target, Expr::Name(t) if value_root(&l.elt) == Some(t.id.as_str()))))
                // `feats = [x, y]`: a list of tensors.
                || matches!(value, Expr::List(l)
                    if !l.elts.is_empty() && l.elts.iter().all(|e| ch.is_tensor(e)))
                // `feats = guard(self.backbone(img))` with `-> Dict[str, Tensor]`: computed
                // here from tensors, as a list the function builds.
                || matches!(value, Expr::Call(c) if ch.returns_container(c)
                    && c.arguments.args.iter().any(|a| ch.is_tensor(a)));
            let st = ch.fns.last_mut().expect("scope");
            if array {
                st.arrays.insert(id.clone());
            } else {
                st.arrays.remove(&id);
            }
            // Read for the whole function, as `tensors` are: any binding to a record counts.
            if let Some(class) = record {
                st.records.insert(id.clone(), class);
            }
            if container {
                st.containers.insert(id.clone());
                st.built_lists.insert(id.clone());
            }
            if tensor {
                st.tensors.insert(id.clone());
                if constant {
                    st.consts.insert(id.clone());
                } else {
                    st.non_consts.insert(id.clone());
                }
            }
            if mask {
                st.bools.insert(id.clone());
            }
            if mask_list {
                st.mask_lists.insert(id.clone());
            } else if !st.mask_lists.is_empty() {
                st.mask_lists.remove(&id);
            }
            if size {
                st.sizes.insert(id.clone());
            }
            if frozen {
                st.frozen.insert(id.clone());
            }
            if frozen_size {
                st.frozen_sizes.insert(id.clone());
            }
            if module {
                st.modules.insert(id.clone());
            }
            if literal {
                st.literals.insert(id, value.clone());
            } else {
                st.literals.remove(&id);
            }
        }
        Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) => {
            let shape = !ch.is_weight_shape(value)
                && (matches!(value, Expr::Attribute(a) if a.attr.id.as_str() == "shape")
                    || matches!(value, Expr::Call(c) if matches!(ch.method(c), Some(("size", _))))
                    || matches!(value, Expr::Subscript(s) if matches!(s.value.as_ref(), Expr::Attribute(a) if a.attr.id.as_str() == "shape")));
            let tensor = ch.is_tensor(value);
            // `x.tolist()`, `[int(s) for s in x.size()]`, `(int(s) for s in x.shape[2:])`,
            // `map(int, x.shape)`: the sizes as Python numbers.
            let int_of = |elt: &Expr, generators: &[ast::Comprehension]| {
                matches!(elt, Expr::Call(c)
                    if matches!(ch.qualify(&c.func).as_deref(), Some("builtins.int" | "builtins.float")))
                    && generators
                        .first()
                        .is_some_and(|g| ch.is_size(&g.iter) || ch.is_tensor(&g.iter))
            };
            // `B, C, H, W = x.data.shape`: sizes the tracer does not record.
            let untraced = ch.is_untraced_size(value);
            let frozen = untraced
                || match value {
                    Expr::Call(c) if matches!(ch.method(c), Some(("tolist", _))) => true,
                    // `d, h, w = dims` with `dims` a tuple of frozen numbers (a parameter a caller
                    // filled with `(dp, hp, wp)` made by `int()`).
                    Expr::Name(n) => ch.state().frozen.contains(n.id.as_str()),
                    Expr::ListComp(l) => int_of(&l.elt, &l.generators),
                    Expr::Generator(g) => int_of(&g.elt, &g.generators),
                    Expr::Call(c) => {
                        matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "map")
                            && matches!(&c.arguments.args[..], [Expr::Name(f), it]
                            if matches!(f.id.as_str(), "int" | "float")
                                && (ch.is_size(it) || ch.is_tensor(it)))
                    }
                    _ => false,
                };
            // `x0, y0, x1, y1 = box.tolist()`, `[int(v) for v in counts]`: values, not sizes.
            let values = frozen
                && !untraced
                && match value {
                    Expr::Name(n) => !ch.state().frozen_sizes.contains(n.id.as_str()),
                    Expr::ListComp(l) => !l.generators.first().is_some_and(|g| ch.is_size(&g.iter)),
                    Expr::Generator(g) => {
                        !g.generators.first().is_some_and(|g| ch.is_size(&g.iter))
                    }
                    Expr::Call(c) => match ch.method(c) {
                        Some(("tolist", _)) => true,
                        _ => !c.arguments.args.get(1).is_some_and(|it| ch.is_size(it)),
                    },
                    _ => false,
                };
            let elts_values: Option<&[Expr]> = match value {
                Expr::Tuple(v) if v.elts.len() == elts.len() => Some(&v.elts),
                _ => None,
            };
            if let Expr::Call(c) = value {
                // `xs, n_chunks = pad_to_multiple(xs, chunk)`: the callee froze `n_chunks`.
                if let Some(flags) = ch.frozen_return(c).filter(|f| f.len() == elts.len()) {
                    let flags = flags.to_vec();
                    for (elt, frozen) in elts.iter().zip(flags) {
                        if let (Expr::Name(n), true) = (elt, frozen) {
                            let st = ch.fns.last_mut().expect("scope");
                            st.frozen.insert(n.id.to_string());
                            st.frozen_sizes.insert(n.id.to_string());
                        }
                    }
                }
                // `bad, offenders = gops.flag_bad_data(r_norm)`: the callee returns a mask first.
                if let Some(flags) = ch.mask_return(c).filter(|f| f.len() == elts.len()) {
                    let flags = flags.to_vec();
                    for (elt, mask) in elts.iter().zip(flags) {
                        if let (Expr::Name(n), true) = (elt, mask) {
                            let st = ch.fns.last_mut().expect("scope");
                            st.bools.insert(n.id.to_string());
                        }
                    }
                }
                let flags = ch.tuple_return(c).map(<[bool]>::to_vec).or_else(|| {
                    // Handed no tensor (a list of them): the returns tell.
                    (!tensor).then(|| ch.torch_built_tuple(c)).flatten()
                });
                if let Some(flags) = flags.filter(|f| f.len() == elts.len()) {
                    for (elt, tensor) in elts.iter().zip(flags) {
                        if let (Expr::Name(n), true) = (elt, tensor) {
                            let st = ch.fns.last_mut().expect("scope");
                            st.tensors.insert(n.id.to_string());
                            st.non_consts.insert(n.id.to_string());
                        }
                    }
                    return;
                }
            }
            for (i, elt) in elts.iter().enumerate() {
                if let Some(vals) = elts_values {
                    bind(ch, elt, &vals[i]);
                    continue;
                }
                if let Expr::Name(n) = elt {
                    let id = n.id.to_string();
                    let st = ch.fns.last_mut().expect("scope");
                    if shape && !frozen {
                        st.sizes.insert(id);
                    } else if frozen {
                        if !values {
                            st.frozen_sizes.insert(id.clone());
                        }
                        st.frozen.insert(id);
                    } else if tensor {
                        st.non_consts.insert(id.clone());
                        st.tensors.insert(id);
                    }
                } else if tensor && matches!(elt, Expr::Tuple(_) | Expr::List(_)) {
                    // `_, (h, c) = self.lstm(x, state)`: the nested names are tensors too.
                    let mut names = Vec::new();
                    collect_names(elt, &mut names);
                    let st = ch.fns.last_mut().expect("scope");
                    for id in names {
                        st.non_consts.insert(id.clone());
                        st.tensors.insert(id);
                    }
                }
            }
        }
        _ => {}
    }
}

/// `t[i] = v` or `t[i] += v` with the index or the value from the inputs: the local `t` is no
/// longer the constant it was made as.
fn written_from_inputs(ch: &mut Checker, sub: &ast::ExprSubscript, value: &Expr) {
    let Expr::Name(n) = sub.value.as_ref() else {
        return;
    };
    let from_inputs = |e: &Expr| ch.depends_on_inputs(e);
    let index_from_inputs = match sub.slice.as_ref() {
        Expr::Tuple(t) => t.elts.iter().any(from_inputs),
        i => from_inputs(i),
    };
    if from_inputs(value) || index_from_inputs {
        let id = n.id.to_string();
        ch.fns.last_mut().expect("scope").non_consts.insert(id);
    }
}

/// Whether iterating `e` yields tensors: a tensor (rows) or a container of tensors.
fn yields_tensors(ch: &Checker, e: &Expr) -> bool {
    ch.is_tensor(e)
        || matches!(e, Expr::Name(n) if ch.state().containers.contains(n.id.as_str()))
        || matches!(e, Expr::Subscript(s) if matches!(s.value.as_ref(), Expr::Name(n) if ch.state().containers.contains(n.id.as_str())))
}

/// Binds `for` targets that receive tensors: `for t in feats`, `for a, b in zip(x, y)`,
/// `for i, t in enumerate(feats)`.
fn bind_loop(ch: &mut Checker, target: &Expr, iter: &Expr) {
    let mark = |ch: &mut Checker, t: &Expr| {
        if let Expr::Name(n) = t {
            let st = ch.fns.last_mut().expect("scope");
            st.tensors.insert(n.id.to_string());
            st.non_consts.insert(n.id.to_string());
        }
    };
    // `for blk in self.blocks`, `zip(self.layers, self.heads)`: submodules of a ModuleList.
    let submodules = |ch: &Checker, e: &Expr| {
        matches!(e, Expr::Attribute(_)) && is_self_chain(e) && !ch.is_tensor(e)
    };
    let mark_module = |ch: &mut Checker, t: &Expr| {
        if let Expr::Name(n) = t {
            ch.fns
                .last_mut()
                .expect("scope")
                .modules
                .insert(n.id.to_string());
        }
    };
    if let Expr::Call(c) = iter {
        let func = match c.func.as_ref() {
            Expr::Name(n) if !ch.imports.contains_key(n.id.as_str()) => n.id.as_str(),
            _ => "",
        };
        match (func, target) {
            ("zip", Expr::Tuple(t)) if t.elts.len() == c.arguments.args.len() => {
                for (elt, arg) in t.elts.iter().zip(c.arguments.args.iter()) {
                    if yields_tensors(ch, arg) {
                        mark(ch, elt);
                    } else if submodules(ch, arg) {
                        mark_module(ch, elt);
                    }
                }
                return;
            }
            // `for i, (o, s) in enumerate(zip(outs, strides))`: the second target as the
            // iterable's own target.
            ("enumerate", Expr::Tuple(t)) if t.elts.len() == 2 => {
                if let Some(a) = c.arguments.args.first() {
                    bind_loop(ch, &t.elts[1], a);
                }
                return;
            }
            _ => {}
        }
        // `for name, f in feats.items()`, `for f in feats.values()` over a dict of tensors.
        if let Some((m @ ("items" | "values"), Expr::Name(d))) = ch.method(c) {
            if c.arguments.is_empty() && ch.state().tensor_dicts.contains(d.id.as_str()) {
                match (m, target) {
                    ("items", Expr::Tuple(t)) if t.elts.len() == 2 => mark(ch, &t.elts[1]),
                    ("values", t) => mark(ch, t),
                    _ => {}
                }
                return;
            }
        }
    }
    // `for t in (h_acc, h_baro)`, `for name, t in (("acc", h_acc), ("baro", h_baro))`: a
    // literal sequence whose items (or whose items' same position) are all tensors.
    if let Expr::Tuple(ast::ExprTuple { elts, .. }) | Expr::List(ast::ExprList { elts, .. }) = iter
    {
        if !elts.is_empty() {
            match target {
                Expr::Name(_) if elts.iter().all(|e| ch.is_tensor(e)) => mark(ch, target),
                Expr::Tuple(t) => {
                    for (j, elt) in t.elts.iter().enumerate() {
                        let all = elts.iter().all(|e| match e {
                            Expr::Tuple(ast::ExprTuple { elts: row, .. })
                            | Expr::List(ast::ExprList { elts: row, .. }) => {
                                row.len() == t.elts.len() && ch.is_tensor(&row[j])
                            }
                            _ => false,
                        });
                        if all {
                            mark(ch, elt);
                        }
                    }
                }
                _ => {}
            }
            return;
        }
    }
    // `masks = [prob > t for t in self.thresholds]` then `for m in masks`: each a mask.
    if let (Expr::Name(t), Expr::Name(it)) = (target, iter) {
        if ch.state().mask_lists.contains(it.id.as_str()) {
            mark(ch, target);
            let st = ch.fns.last_mut().expect("scope");
            st.bools.insert(t.id.to_string());
            return;
        }
    }
    if matches!(target, Expr::Name(_)) && yields_tensors(ch, iter) {
        mark(ch, target);
    } else if submodules(ch, iter) {
        mark_module(ch, target);
    }
}

/// Whether an annotation names `Tensor` anywhere (`List[Tensor]`, `Dict[str, torch.Tensor]`).
fn mentions_tensor_anywhere(e: &Expr) -> bool {
    match e {
        Expr::Name(n) => n.id.as_str() == "Tensor",
        Expr::Attribute(a) => a.attr.id.as_str() == "Tensor",
        Expr::Subscript(s) => mentions_tensor_anywhere(&s.slice),
        Expr::Tuple(t) => t.elts.iter().any(mentions_tensor_anywhere),
        Expr::List(l) => l.elts.iter().any(mentions_tensor_anywhere),
        Expr::BinOp(b) => mentions_tensor_anywhere(&b.left) || mentions_tensor_anywhere(&b.right),
        Expr::StringLiteral(l) => l.value.to_str().contains("Tensor"),
        _ => false,
    }
}

/// `Tuple` for `Tuple[...]` / `typing.Tuple[...]`.
fn generic_name(s: &ast::ExprSubscript) -> &str {
    match s.value.as_ref() {
        Expr::Name(n) => n.id.as_str(),
        Expr::Attribute(a) => a.attr.id.as_str(),
        _ => "",
    }
}

/// Functions and methods of a module whose return annotation is a tensor or a tuple of tensors
/// (`-> Tensor`, `-> Tuple[Tensor, Tensor]`, `-> Optional[Tensor]`), not a list or dict of them.
fn tensor_returning_functions(module: &[Stmt]) -> HashMap<(Option<String>, String), Vec<bool>> {
    // `-> Tuple[int, Tensor, Tensor]`: which elements are tensors.
    fn elements(f: &ast::StmtFunctionDef) -> Vec<bool> {
        let Some(Expr::Subscript(s)) = f.returns.as_deref() else {
            return Vec::new();
        };
        match (generic_name(s), s.slice.as_ref()) {
            ("Tuple" | "tuple", Expr::Tuple(t))
                if !t.elts.iter().any(|e| matches!(e, Expr::EllipsisLiteral(_))) =>
            {
                t.elts.iter().map(mentions_tensor_anywhere).collect()
            }
            _ => Vec::new(),
        }
    }
    fn returns_tensor(f: &ast::StmtFunctionDef) -> bool {
        f.returns.as_deref().is_some_and(annotation_names_a_tensor)
    }
    functions_and_methods(module)
        .filter(|(_, f)| returns_tensor(f))
        .map(|(class, f)| {
            (
                (class.map(str::to_string), f.name.id.to_string()),
                elements(f),
            )
        })
        .collect()
}

/// Whether an annotation is a tensor or a tuple of them (`Tensor`, `Optional[torch.Tensor]`,
/// `Tuple[int, Tensor]`), not a container of them (`List[Tensor]`, `Dict[str, Tensor]`).
fn annotation_names_a_tensor(r: &Expr) -> bool {
    if let Expr::Subscript(s) = r {
        if matches!(
            generic_name(s),
            "List" | "list" | "Dict" | "dict" | "Sequence" | "Mapping" | "Iterable" | "Iterator"
        ) {
            return false;
        }
    }
    mentions_tensor_anywhere(r)
}

/// The class an annotation names: `Seg`, `"Seg"`, `Optional[Seg]`.
fn annotated_class(a: &Expr) -> Option<&str> {
    match a {
        Expr::Name(n) => Some(n.id.as_str()),
        Expr::StringLiteral(s) => Some(s.value.to_str()),
        Expr::Subscript(s) if generic_name(s) == "Optional" => annotated_class(&s.slice),
        _ => None,
    }
}

/// Functions and methods of a module annotated to return a list or dict of tensors.
fn container_returning_functions(module: &[Stmt]) -> HashSet<(Option<String>, String)> {
    functions_and_methods(module)
        .filter(|(_, f)| {
            matches!(f.returns.as_deref(), Some(Expr::Subscript(s))
                if matches!(generic_name(s), "List" | "list" | "Dict" | "dict" | "Sequence" | "Mapping")
                    && mentions_tensor_anywhere(&s.slice))
        })
        .map(|(class, f)| (class.map(str::to_string), f.name.id.to_string()))
        .collect()
}

/// The record classes of a module (classes whose body annotates fields, as a dataclass or a
/// `NamedTuple` does) with their fields annotated as tensors (`pruning_heatmap: torch.Tensor`,
/// `Optional[Tensor]`; not `List[Tensor]`), and the functions and methods annotated to return
/// one of them (`-> BranchSegOutput`).
#[allow(clippy::type_complexity)]
fn record_classes(
    module: &[Stmt],
    imported: &HashMap<String, Record>,
) -> (
    HashMap<String, Record>,
    HashMap<(Option<String>, String), String>,
) {
    let classes: Vec<&ast::StmtClassDef> = module
        .iter()
        .filter_map(|s| match s {
            Stmt::ClassDef(c) => Some(c),
            _ => None,
        })
        .collect();
    // Each class's annotated fields, and its properties with their return annotation.
    fn annotated(c: &ast::StmtClassDef) -> Vec<(&str, &Expr)> {
        c.body
            .iter()
            .filter_map(|s| match s {
                Stmt::AnnAssign(a) => match a.target.as_ref() {
                    Expr::Name(n) => Some((n.id.as_str(), a.annotation.as_ref())),
                    _ => None,
                },
                Stmt::FunctionDef(f) if is_property(f) => {
                    Some((f.name.id.as_str(), f.returns.as_deref()?))
                }
                _ => None,
            })
            .collect()
    }
    let mut fields: HashMap<String, Record> = HashMap::default();
    let mut all: Vec<(&str, Vec<(&str, &Expr)>)> = Vec::new();
    for c in &classes {
        let fs = annotated(c);
        let getitem = c.body.iter().any(|s| {
            matches!(s, Stmt::FunctionDef(f) if f.name.id.as_str() == "__getitem__"
                && f.returns.as_deref().is_some_and(|r| !annotation_is_non_tensor(r)))
        });
        if fs.is_empty() && !getitem {
            continue;
        }
        let tensors: HashSet<String> = fs
            .iter()
            .filter(|(_, ann)| field_is_tensor(ann))
            .map(|(n, _)| n.to_string())
            .collect();
        let optional: HashSet<String> = fs
            .iter()
            .filter(|(_, ann)| annotation_is_optional(ann))
            .map(|(n, _)| n.to_string())
            .collect();
        if !tensors.is_empty() || getitem {
            fields.insert(
                c.name.id.to_string(),
                Record {
                    tensors,
                    optional,
                    records: HashMap::default(),
                    getitem,
                },
            );
        }
        all.push((c.name.id.as_str(), fs));
    }
    // Fields annotated with another record (`partials: PartialTrack`), a class deep at most.
    for _ in 0..2 {
        for (class, fs) in &all {
            let nested: HashMap<String, String> = fs
                .iter()
                .filter_map(|(n, ann)| {
                    let c = annotated_class(ann)?;
                    (fields.contains_key(c) || imported.contains_key(c))
                        .then(|| (n.to_string(), c.to_string()))
                })
                .collect();
            if !nested.is_empty() {
                let r = fields.entry(class.to_string()).or_default();
                r.records = nested;
                r.optional = fs
                    .iter()
                    .filter(|(_, ann)| annotation_is_optional(ann))
                    .map(|(n, _)| n.to_string())
                    .collect();
            }
        }
    }
    let mut returns = HashMap::default();
    if !fields.is_empty() {
        for (class, f) in functions_and_methods(module) {
            let Some(name) = f.returns.as_deref().and_then(annotated_class) else {
                continue;
            };
            if fields.contains_key(name) {
                returns.insert(
                    (class.map(str::to_string), f.name.id.to_string()),
                    name.to_string(),
                );
            }
        }
    }
    (fields, returns)
}

/// The attributes among `names` a body reads on its way to export (not in training-only or
/// export-guarded branches), with whether it reads them on `self`: `out.total_defects`,
/// `self.hw`.
fn attributes_read(body: &[Stmt], names: &HashMap<String, Vec<String>>) -> Vec<(bool, String)> {
    let mut out: Vec<(bool, String)> = Vec::new();
    let mut v = ModelPath {
        export_path: false,
        on_expr: |e: &Expr| {
            if let Expr::Attribute(a) = e {
                let attr = a.attr.id.as_str();
                if names.contains_key(attr) {
                    let on_self = is_self(&a.value);
                    if !out.iter().any(|(s, o)| *s == on_self && o == attr) {
                        out.push((on_self, attr.to_string()));
                    }
                }
            }
        },
    };
    v.visit_body(body);
    out
}

/// Whether a field's annotation is a tensor: `Tensor`, `torch.Tensor`, `Optional[Tensor]`,
/// `Tensor | None`, or such a string (not `Union[float, Tensor]`, not containers).
fn field_is_tensor(a: &Expr) -> bool {
    match a {
        Expr::Name(n) => n.id.as_str() == "Tensor",
        Expr::Attribute(at) => at.attr.id.as_str() == "Tensor",
        Expr::StringLiteral(s) => matches!(
            s.value.to_str().trim(),
            "Tensor" | "torch.Tensor" | "Optional[Tensor]" | "Optional[torch.Tensor]"
        ),
        Expr::Subscript(sub) if generic_name(sub) == "Optional" => field_is_tensor(&sub.slice),
        Expr::BinOp(b) if matches!(b.op, ast::Operator::BitOr) => {
            (field_is_tensor(&b.left) && b.right.is_none_literal_expr())
                || (b.left.is_none_literal_expr() && field_is_tensor(&b.right))
        }
        _ => false,
    }
}

/// Whether an annotation is a dict whose values are tensors: `Dict[str, Tensor]`,
/// `Mapping[str, torch.Tensor]` (not `Dict[str, List[Tensor]]`).
fn dict_of_tensors(a: &Expr) -> bool {
    matches!(a, Expr::Subscript(sub)
        if matches!(generic_name(sub), "Dict" | "dict" | "Mapping" | "MutableMapping" | "OrderedDict")
            && matches!(sub.slice.as_ref(), Expr::Tuple(t)
                if t.elts.len() == 2 && field_is_tensor(&t.elts[1])))
}

/// Whether an annotation allows `None`: `Optional[X]`, `X | None`, `Union[X, None]`.
fn annotation_is_optional(a: &Expr) -> bool {
    match a {
        Expr::Subscript(sub) => match generic_name(sub) {
            "Optional" => true,
            "Union" => matches!(sub.slice.as_ref(), Expr::Tuple(t)
                if t.elts.iter().any(|e| e.is_none_literal_expr())),
            _ => false,
        },
        Expr::BinOp(b) if matches!(b.op, ast::Operator::BitOr) => {
            b.left.is_none_literal_expr()
                || b.right.is_none_literal_expr()
                || annotation_is_optional(&b.left)
                || annotation_is_optional(&b.right)
        }
        Expr::StringLiteral(s) => {
            let t = s.value.to_str();
            t.starts_with("Optional[") || t.ends_with("| None")
        }
        _ => false,
    }
}

/// Calls `f` on an expression and each expression inside it.
pub(crate) fn for_each_sub_expr<'e>(e: &'e Expr, f: &mut dyn FnMut(&'e Expr)) {
    struct Each<'f, 'e> {
        f: &'f mut dyn FnMut(&'e Expr),
    }
    impl<'e> Visitor<'e> for Each<'_, 'e> {
        fn visit_expr(&mut self, e: &'e Expr) {
            (self.f)(e);
            visitor::walk_expr(self, e);
        }
    }
    Each { f }.visit_expr(e);
}

/// Calls `f` on every annotation of a module: parameters', returns', annotated assignments', in
/// functions and classes at any depth.
pub(crate) fn for_each_annotation<'m>(body: &'m [Stmt], f: &mut dyn FnMut(&'m Expr)) {
    let mut stmts = Vec::new();
    flatten(body, &mut stmts);
    for s in stmts {
        match s {
            Stmt::FunctionDef(d) => {
                for p in d.parameters.iter() {
                    if let Some(a) = p.annotation() {
                        f(a);
                    }
                }
                if let Some(r) = d.returns.as_deref() {
                    f(r);
                }
                for_each_annotation(&d.body, f);
            }
            Stmt::ClassDef(c) => for_each_annotation(&c.body, f),
            Stmt::AnnAssign(a) => f(&a.annotation),
            _ => {}
        }
    }
}

/// Attribute names model code reads on tensors and modules all the time: a property of that name
/// on some record class is not what they read.
const COMMON_ATTRIBUTES: &[&str] = &[
    "shape",
    "dtype",
    "device",
    "weight",
    "bias",
    "data",
    "grad",
    "T",
    "ndim",
    "training",
    "is_cuda",
    "requires_grad",
    "layout",
    "real",
    "imag",
];

/// A record class of the file: its fields (and properties) annotated as tensors, and those
/// annotated with another record class.
#[derive(Default, Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Record {
    pub tensors: HashSet<String>,
    /// Fields annotated `Optional[...]` (or `... | None`): a bare test of one asks whether it
    /// was filled.
    #[serde(default)]
    pub optional: HashSet<String>,
    pub records: HashMap<String, String>,
    /// `def __getitem__(self, key) -> Tensor`: every item is a tensor.
    #[serde(default)]
    pub getitem: bool,
}

/// Whether a statement is a bare string (a docstring).
fn is_docstring(s: &Stmt) -> bool {
    matches!(s, Stmt::Expr(e) if e.value.is_string_literal_expr())
}

/// Whether a method is a property's setter or deleter (`@end2end.setter`).
pub(crate) fn is_property_setter(f: &ast::StmtFunctionDef) -> bool {
    f.decorator_list.iter().any(|d| {
        matches!(&d.expression, Expr::Attribute(a)
            if matches!(a.attr.id.as_str(), "setter" | "deleter") && a.value.is_name_expr())
    })
}

/// Whether a method is a `@property` (or `functools.cached_property`).
pub(crate) fn is_property(f: &ast::StmtFunctionDef) -> bool {
    f.decorator_list.iter().any(|d| match &d.expression {
        Expr::Name(n) => matches!(n.id.as_str(), "property" | "cached_property"),
        Expr::Attribute(a) => a.attr.id.as_str() == "cached_property",
        _ => false,
    })
}

/// The module-level functions of a module, with class `None`, and the methods of its classes,
/// with their class's name.
pub(crate) fn functions_and_methods(
    module: &[Stmt],
) -> impl Iterator<Item = (Option<&str>, &ast::StmtFunctionDef)> {
    module.iter().flat_map(|stmt| {
        let defs: Vec<(Option<&str>, &ast::StmtFunctionDef)> = match stmt {
            Stmt::FunctionDef(f) => vec![(None, f)],
            Stmt::ClassDef(c) => c
                .body
                .iter()
                .filter_map(|s| match s {
                    Stmt::FunctionDef(f) => Some((Some(c.name.id.as_str()), f)),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        defs
    })
}

/// Whether an expression reads a tensor's size (`x.shape`, `x.size(0)`) anywhere.
fn reads_size(e: &Expr) -> bool {
    rules::any_sub_expr(e, |e| match e {
        Expr::Attribute(a) => a.attr.id.as_str() == "shape",
        Expr::Call(c) => {
            matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.id.as_str() == "size")
        }
        _ => false,
    })
}

/// `int(...)`, `float(...)`, `round(...)` or `math.<f>(...)`: a call that makes a Python number.
fn makes_number(c: &ast::ExprCall) -> bool {
    match c.func.as_ref() {
        Expr::Name(n) => matches!(n.id.as_str(), "int" | "float" | "round"),
        Expr::Attribute(a) => matches!(a.value.as_ref(), Expr::Name(m) if m.id.as_str() == "math"),
        _ => false,
    }
}

/// The name a value is read from through subscripts, attributes and method calls: `batch` for
/// `batch[-1]`, `lengths.max()`, `x.sum(0)[1]`.
fn value_root(e: &Expr) -> Option<&str> {
    match e {
        Expr::Name(n) => Some(n.id.as_str()),
        Expr::Subscript(s) => value_root(&s.value),
        Expr::Attribute(a) => value_root(&a.value),
        Expr::Call(c) => match c.func.as_ref() {
            Expr::Attribute(a) => value_root(&a.value),
            _ => None,
        },
        _ => None,
    }
}

/// Whether an expression is, by its spelling alone, a size or tensor value turned into a Python
/// number (`int(x.size(0))`, `t.item()`, or a name in `names` bound to one): the pre-passes'
/// cheap version of [`Checker::is_frozen_int`].
fn frozen(e: &Expr, names: &HashSet<String>) -> bool {
    match e {
        Expr::Name(n) => names.contains(n.id.as_str()),
        // `(dp, hp, wp)`: a shape made of frozen numbers.
        Expr::Tuple(t) => t.elts.iter().any(|e| frozen(e, names)),
        Expr::List(l) => l.elts.iter().any(|e| frozen(e, names)),
        Expr::BinOp(b) => frozen(&b.left, names) || frozen(&b.right, names),
        Expr::Call(c) => {
            let item = matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.id.as_str() == "item")
                && c.arguments.args.is_empty();
            item || (makes_number(c)
                && c.arguments
                    .args
                    .iter()
                    .any(|a| reads_size(a) || frozen(a, names)))
        }
        _ => false,
    }
}

/// Functions (and methods, keyed `Class.method`) that return a tensor size as a Python number,
/// by element of the returned tuple (one flag for a single value):
/// `n_chunks = int(math.ceil(x.size(1) / c))` then `return y, n_chunks`. Read from the text alone: `int()`, `float()`, `round()` or a
/// `math` function over an expression that reads `.shape` or `.size()`, `.item()`, and names
/// bound to those in the function.
fn frozen_returning_functions(module: &[Stmt]) -> HashMap<String, Vec<bool>> {
    returned_flags(module, |e, bound| frozen(e, &bound.kind), false, false)
}

/// Functions (and methods, keyed `Class.method`) whose every `return` gives a mask, by element
/// of the returned tuple (one flag for a single value): `bad = r_norm > thresh` then `return
/// bad, offenders`, `self._out_of_frame(flow)`. A comparison of values, or `~`, `|`, `&`, `^`
/// over one, a reduction of one over a dim, `torch.isnan(x)`, and names bound to those.
fn mask_returning_tuples(module: &[Stmt]) -> HashMap<String, Vec<bool>> {
    fn mask(e: &Expr, bound: &Bound) -> bool {
        // `mode == "train"`, `cache is None`: a Python flag.
        let literal = |e: &Expr| {
            e.is_string_literal_expr() || e.is_none_literal_expr() || e.is_boolean_literal_expr()
        };
        match e {
            Expr::Name(n) => bound.kind.contains(n.id.as_str()),
            // `pad > 0` after `pad = (m - x.shape[-1] % m) % m`, `x.shape[-1] % 2 == 1`: Python
            // numbers compared, a flag decided at trace time like the same test written inline.
            Expr::Compare(c) => {
                compares_values(c)
                    && !literal(&c.left)
                    && !c.comparators.iter().any(literal)
                    && !compares_sizes(c, &bound.sizes)
            }
            // `((v >= lo) & (v <= hi)).all(dim=-1)`: a reduction over a dim keeps a mask;
            // `torch.isnan(x)`.
            Expr::Call(c) => match c.func.as_ref() {
                Expr::Attribute(a) => match a.attr.id.as_str() {
                    "any" | "all" => {
                        !(c.arguments.args.is_empty() && c.arguments.keywords.is_empty())
                            && mask(&a.value, bound)
                    }
                    _ => tests_values(a),
                },
                _ => false,
            },
            Expr::UnaryOp(u) => matches!(u.op, ast::UnaryOp::Invert) && mask(&u.operand, bound),
            // `~theirs.any(dim=1)[:, None] & self.hit_mask[None, :]`: masks on both sides, one
            // of them possibly only by its name (`bool | int64` gives integers).
            Expr::BinOp(b) => {
                let named = |e: &Expr| {
                    let mut e = e;
                    loop {
                        match e {
                            Expr::Subscript(s) => e = &s.value,
                            Expr::Attribute(a) => break names_a_mask(a.attr.id.as_str()),
                            Expr::Name(n) => break names_a_mask(n.id.as_str()),
                            _ => break false,
                        }
                    }
                };
                let (l, r) = (mask(&b.left, bound), mask(&b.right, bound));
                matches!(
                    b.op,
                    ast::Operator::BitAnd | ast::Operator::BitOr | ast::Operator::BitXor
                ) && ((l && (r || named(&b.right))) || (r && named(&b.left)))
            }
            // `keep[:, None]`: a mask indexed or sliced is a mask.
            Expr::Subscript(s) => mask(&s.value, bound),
            _ => false,
        }
    }
    returned_flags(module, mask, true, true)
}

/// What a function has bound so far, as the pre-passes read it: the names of the kind asked
/// for, and the names holding a Python number computed from a size (see [`size_number`]).
struct Bound<'f> {
    kind: HashSet<String>,
    /// Python numbers computed from sizes, and other Python numbers (see [`size_number`]).
    sizes: Sizes<'f>,
}

/// The names a function holds Python numbers in: `sizes`, computed from a size, and `numbers`,
/// any other Python number (a local bound to a number literal, or a parameter of `params`
/// defaulted to or annotated as one, or named like an axis or a count). Without `params` nothing
/// is tracked.
struct Sizes<'f> {
    sizes: HashSet<String>,
    numbers: HashSet<String>,
    params: Option<&'f ast::Parameters>,
}

impl Sizes<'_> {
    fn is_number(&self, name: &str) -> bool {
        self.numbers.contains(name) || self.params.is_some_and(|p| number_parameter(p, name))
    }
}

impl Bound<'_> {
    fn bind(&mut self, name: &str, value: &Expr, is: fn(&Expr, &Bound<'_>) -> bool) {
        let kind = is(value, self);
        let size = self.sizes.params.is_some() && size_number(value, &self.sizes);
        let number = self.sizes.params.is_some() && matches!(value, Expr::NumberLiteral(_));
        for (set, yes) in [
            (&mut self.kind, kind),
            (&mut self.sizes.sizes, size),
            (&mut self.sizes.numbers, number),
        ] {
            if yes {
                set.insert(name.to_string());
            } else if !set.is_empty() {
                set.remove(name);
            }
        }
    }

    /// A name bound otherwise (unpacked from a call, a loop target, `with ... as`) holds no
    /// number the pre-pass knows of.
    fn unbind(&mut self, name: &str) {
        for set in [&mut self.sizes.sizes, &mut self.sizes.numbers] {
            if !set.is_empty() {
                set.remove(name);
            }
        }
    }
}

/// Whether an expression is, by its spelling, a Python number computed from a size: a size read
/// (`x.shape[-1]`, `x.size(1)`, `len(x)`), a name bound to one, or arithmetic and
/// `int()`/`math.*` over such numbers, number literals, settings (`self.stride`) and names known
/// to hold numbers (`(multiple - x.shape[-1] % multiple) % multiple` with `multiple: int`),
/// reading at least one size. Not `q * q.shape[-1] ** -0.5`: `q` may be a tensor.
fn size_number(e: &Expr, sizes: &Sizes<'_>) -> bool {
    fn leaves_ok(e: &Expr, sizes: &Sizes<'_>, seen: &mut bool) -> bool {
        match e {
            Expr::NumberLiteral(_) => true,
            Expr::Name(n) => {
                let size = sizes.sizes.contains(n.id.as_str());
                *seen |= size;
                size || sizes.is_number(n.id.as_str())
            }
            Expr::Attribute(a) if a.attr.id.as_str() == "shape" => {
                *seen = true;
                true
            }
            // `self.max_len`: a setting.
            Expr::Attribute(a) => {
                matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self")
            }
            Expr::Subscript(s) => {
                matches!(s.value.as_ref(), Expr::Attribute(a) if a.attr.id.as_str() == "shape")
                    && leaves_ok(&s.value, sizes, seen)
                    && leaves_ok(&s.slice, sizes, seen)
            }
            Expr::Call(c) => {
                let size_call = match c.func.as_ref() {
                    Expr::Attribute(a) => a.attr.id.as_str() == "size",
                    Expr::Name(n) => n.id.as_str() == "len",
                    _ => false,
                };
                if size_call {
                    *seen = true;
                    return true;
                }
                makes_number(c)
                    && c.arguments.keywords.is_empty()
                    && c.arguments.args.iter().all(|a| leaves_ok(a, sizes, seen))
            }
            Expr::BinOp(b) => leaves_ok(&b.left, sizes, seen) && leaves_ok(&b.right, sizes, seen),
            Expr::UnaryOp(u) => {
                matches!(u.op, ast::UnaryOp::USub | ast::UnaryOp::UAdd)
                    && leaves_ok(&u.operand, sizes, seen)
            }
            _ => false,
        }
    }
    let mut seen = false;
    leaves_ok(e, sizes, &mut seen) && seen
}

/// `pad > 0`, `x.shape[-1] % 2 == 1`, `h != w`: sizes as Python numbers compared with each other
/// or with number literals.
fn compares_sizes(c: &ast::ExprCompare, sizes: &Sizes<'_>) -> bool {
    let operands = || std::iter::once(&*c.left).chain(&c.comparators);
    operands().all(|e| e.is_number_literal_expr() || size_number(e, sizes))
        && operands().any(|e| size_number(e, sizes))
}

/// Functions (and methods, keyed `Class.method`) whose every `return` gives Python numbers or
/// flags computed from sizes (`return pad > 0` after `pad = (m - x.shape[-1] % m) % m`;
/// `return h // s, w // s`): called on a tensor they do not give one, and a test of their
/// result is decided at trace time like the same test written inline.
fn size_valued_functions(module: &[Stmt]) -> HashSet<String> {
    fn size_value(e: &Expr, bound: &Bound) -> bool {
        match e {
            Expr::Name(n) => {
                bound.kind.contains(n.id.as_str()) || bound.sizes.sizes.contains(n.id.as_str())
            }
            Expr::Compare(c) => compares_values(c) && compares_sizes(c, &bound.sizes),
            Expr::BoolOp(b) => b.values.iter().all(|v| size_value(v, bound)),
            Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::Not) => size_value(&u.operand, bound),
            e => size_number(e, &bound.sizes),
        }
    }
    returned_flags(module, size_value, true, true)
        .into_iter()
        .filter(|(_, flags)| flags.iter().all(|x| *x))
        .map(|(key, _)| key)
        .collect()
}

/// Whether a parameter of a function holds a Python number by its default (`multiple=8`), its
/// annotation (`multiple: int`) or its name (`dim`, `*_channels`, `iters`).
fn number_parameter(p: &ast::Parameters, name: &str) -> bool {
    p.posonlyargs
        .iter()
        .chain(&p.args)
        .chain(&p.kwonlyargs)
        .find(|a| a.parameter.name.id.as_str() == name)
        .is_some_and(|a| {
            matches!(a.default.as_deref(), Some(Expr::NumberLiteral(_)))
                || matches!(a.parameter.annotation.as_deref(),
                    Some(Expr::Name(n)) if matches!(n.id.as_str(), "int" | "float"))
                || names_a_number(name)
        })
}

/// Which elements of each function's returned value (one flag for a single value) are of a
/// kind `is` tells from the text, with the names the function binds to that kind: in any of
/// its `return`s, or (`every`) in all of them.
fn returned_flags(
    module: &[Stmt],
    is: fn(&Expr, &Bound) -> bool,
    every: bool,
    sizes: bool,
) -> HashMap<String, Vec<bool>> {
    let analyse = |f: &ast::StmtFunctionDef| -> Option<Vec<bool>> {
        let mut stmts = Vec::new();
        flatten(&f.body, &mut stmts);
        let mut names = Bound {
            kind: HashSet::default(),
            sizes: Sizes {
                sizes: HashSet::default(),
                numbers: HashSet::default(),
                // Only the readings that compare sizes track them.
                params: sizes.then_some(&f.parameters),
            },
        };
        let mut flags: Option<Vec<bool>> = None;
        for s in stmts {
            match s {
                Stmt::Assign(a) if a.targets.len() == 1 => {
                    match (&a.targets[0], a.value.as_ref()) {
                        (Expr::Name(n), v) => names.bind(n.id.as_str(), v, is),
                        (Expr::Tuple(t), Expr::Tuple(v)) if t.elts.len() == v.elts.len() => {
                            for (target, value) in t.elts.iter().zip(&v.elts) {
                                if let Expr::Name(n) = target {
                                    if is(value, &names) {
                                        names.kind.insert(n.id.to_string());
                                    }
                                    names.unbind(n.id.as_str());
                                }
                            }
                        }
                        (target, _) => {
                            let mut bound = Vec::new();
                            collect_names(target, &mut bound);
                            bound.iter().for_each(|n| names.unbind(n));
                        }
                    }
                }
                // `pad += 1` keeps a number a number; other bindings (`n, idx = x.max(-1)` above,
                // loop targets, `with ... as n`) hold something else.
                Stmt::AugAssign(a) => {
                    if let Expr::Name(n) = a.target.as_ref() {
                        if !(matches!(a.value.as_ref(), Expr::NumberLiteral(_))
                            || size_number(&a.value, &names.sizes))
                        {
                            names.unbind(n.id.as_str());
                        }
                    }
                }
                Stmt::AnnAssign(a) => {
                    if let Expr::Name(n) = a.target.as_ref() {
                        match a.value.as_deref() {
                            Some(v) => names.bind(n.id.as_str(), v, is),
                            None => names.unbind(n.id.as_str()),
                        }
                    }
                }
                Stmt::For(l) => {
                    let mut bound = Vec::new();
                    collect_names(&l.target, &mut bound);
                    bound.iter().for_each(|n| names.unbind(n));
                }
                Stmt::With(w) => {
                    let mut bound = Vec::new();
                    for item in &w.items {
                        if let Some(v) = item.optional_vars.as_deref() {
                            collect_names(v, &mut bound);
                        }
                    }
                    bound.iter().for_each(|n| names.unbind(n));
                }
                Stmt::Return(r) => {
                    let Some(v) = r.value.as_deref() else {
                        // A bare `return` gives none of the kind, which matters when every
                        // `return` must.
                        if every {
                            flags = Some(vec![false; flags.as_ref().map_or(1, Vec::len)]);
                        }
                        continue;
                    };
                    let these: Vec<bool> = match v {
                        Expr::Tuple(t) => t.elts.iter().map(|e| is(e, &names)).collect(),
                        v => vec![is(v, &names)],
                    };
                    flags = Some(match flags {
                        Some(prev) if prev.len() == these.len() => prev
                            .iter()
                            .zip(&these)
                            .map(|(a, b)| if every { *a && *b } else { *a || *b })
                            .collect(),
                        Some(prev) => prev,
                        None => these,
                    });
                }
                _ => {}
            }
        }
        flags.filter(|f| f.iter().any(|x| *x))
    };
    // Methods as `Class.method`, for `self.method(...)` inside the class.
    functions_and_methods(module)
        .filter_map(|(class, f)| {
            let flags = analyse(f)?;
            let key = match class {
                Some(c) => format!("{c}.{}", f.name.id),
                None => f.name.id.to_string(),
            };
            Some((key, flags))
        })
        .collect()
}

/// Parameters that calls in the same file fill with sizes. `self._shape(q, bsz)` after
/// `bsz = int(x.size(0))` makes `bsz` a frozen Python number inside `_shape`, so its
/// `q.view(bsz, ...)` freezes the batch; `flow_warp(x, flow, x.size()[2:])` makes `size` a traced
/// size there, so `int(size[0])` freezes it. One caller is enough: the export traces that path.
/// Read from the text alone, like [`frozen_returning_functions`]; keyed by the callee's `def`
/// offset.
#[derive(Default)]
struct ArgumentSeeds {
    frozen: HashSet<String>,
    sizes: HashSet<String>,
    masks: HashSet<String>,
}

/// A parameter as a caller fills it: by position or by keyword.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub(crate) enum ArgumentRef {
    Position(usize),
    Keyword(String),
}

/// The arguments callers in another file fill with frozen numbers, traced sizes or masks.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub(crate) struct ArgumentKinds {
    pub frozen: HashSet<ArgumentRef>,
    pub sizes: HashSet<ArgumentRef>,
    pub masks: HashSet<ArgumentRef>,
}

impl ArgumentKinds {
    pub fn merge(&mut self, other: &ArgumentKinds) {
        self.frozen.extend(other.frozen.iter().cloned());
        self.sizes.extend(other.sizes.iter().cloned());
        self.masks.extend(other.masks.iter().cloned());
    }

    fn is_empty(&self) -> bool {
        self.frozen.is_empty() && self.sizes.is_empty() && self.masks.is_empty()
    }
}

/// An attribute of the module an argument names (`self.pos_embed`), or `None` for a submodule's
/// `.weight`/`.bias`.
type WeightRef = Option<String>;

/// How the calls of a method of the file fill its arguments with the module's attributes, by
/// position (counting from the first argument a call passes) or keyword; `None` for an argument
/// some call fills with anything else.
#[derive(Default)]
pub(crate) struct SelfMethodArguments {
    /// The classes (`None`: another receiver) where the method is used otherwise: passed as a
    /// value (`map(self.to_grid, xs)`), or called with `*args`/`**kwargs`.
    escapes: HashSet<Option<String>>,
    /// By the class of the calling method (`None`: a call on another receiver,
    /// `self.block.square(x)`, `super().square(x)`, which may reach any class's method).
    fills: HashMap<Option<String>, HashMap<ArgumentRef, Option<Vec<WeightRef>>>>,
}

impl SelfMethodArguments {
    /// The attributes every call that may reach `class`'s method fills the parameter at
    /// `position` (counted from the first argument a call passes) or named `name` with, when
    /// some call fills it and every one fills it with an attribute of the module. A call
    /// through `self` reaches the method of its own class, of a base class, or a subclass's
    /// override.
    fn fills(
        &self,
        class: &str,
        bases: &HashMap<&str, Vec<&str>>,
        position: Option<usize>,
        name: &str,
    ) -> Option<Vec<WeightRef>> {
        // A use in the class, in a subclass (inherited), or in a base class (which an override
        // answers).
        let related = |caller: &Option<String>| {
            caller.as_deref().is_none_or(|c| {
                c == class
                    || lineage(bases, c).contains(&class)
                    || lineage(bases, class).contains(&c)
            })
        };
        if self.escapes.iter().any(related) {
            return None;
        }
        let mut attrs = Vec::new();
        for (caller, fills) in &self.fills {
            if !related(caller) {
                continue;
            }
            let by_position = position.and_then(|p| fills.get(&ArgumentRef::Position(p)));
            let by_keyword = fills.get(&ArgumentRef::Keyword(name.to_string()));
            for fill in [by_position, by_keyword].into_iter().flatten() {
                attrs.extend(fill.as_ref()?.iter().cloned());
            }
        }
        (!attrs.is_empty()).then_some(attrs)
    }
}

/// The calls of the file's methods that take an argument, keyed by the method's name and the
/// calling class: through `self`, a submodule, `super()` or a local (not an imported module); see
/// [`SelfMethodArguments`].
fn self_method_arguments<'m>(
    module: &'m [Stmt],
    imported: &'m HashMap<String, String>,
) -> HashMap<String, SelfMethodArguments> {
    struct Calls<'m> {
        methods: HashMap<String, SelfMethodArguments>,
        class: Option<String>,
        /// The names of the file's methods that take an argument: calls of others are not
        /// recorded.
        defined: HashSet<&'m str>,
        /// The names the file imports ([`Checker::imports`]): modules and their functions.
        imported: &'m HashMap<String, String>,
    }
    impl<'a> Visitor<'a> for Calls<'_> {
        fn visit_stmt(&mut self, s: &'a Stmt) {
            if let Stmt::ClassDef(c) = s {
                let outer = self.class.replace(c.name.id.to_string());
                visitor::walk_stmt(self, s);
                self.class = outer;
                return;
            }
            visitor::walk_stmt(self, s);
        }
        fn visit_expr(&mut self, e: &'a Expr) {
            match e {
                Expr::Call(c) => {
                    if let Expr::Attribute(a) = c.func.as_ref() {
                        if !self.defined.contains(a.attr.id.as_str()) {
                            visitor::walk_expr(self, e);
                            return;
                        }
                        // Through `self`: the calling class's method. Through a submodule
                        // (`self.block.square(x)`), `super()` or a local: any class's.
                        let caller = if is_self(&a.value) {
                            Some(self.class.clone())
                        } else if is_self_chain(&a.value)
                            || matches!(a.value.as_ref(), Expr::Call(s) if matches!(s.func.as_ref(), Expr::Name(n) if n.id.as_str() == "super"))
                            // `blk.to_grid(x)` in `for blk in self.blocks`: a local may hold a
                            // module (not an imported module: `F.interpolate(...)`).
                            || matches!(a.value.as_ref(), Expr::Name(n) if !self.imported.contains_key(n.id.as_str()))
                        {
                            Some(None)
                        } else {
                            None
                        };
                        let Some(caller) = caller else {
                            visitor::walk_expr(self, e);
                            return;
                        };
                        let method = self.methods.entry(a.attr.id.to_string()).or_default();
                        let mut escapes = false;
                        let entry = method.fills.entry(caller.clone()).or_default();
                        let attr_of = |x: &Expr| match x {
                            Expr::Attribute(v) if is_self_chain(x) => match v.value.as_ref() {
                                Expr::Name(_) => Some(Some(v.attr.id.to_string())),
                                Expr::Attribute(_)
                                    if matches!(v.attr.id.as_str(), "weight" | "bias") =>
                                {
                                    Some(None)
                                }
                                _ => None,
                            },
                            _ => None,
                        };
                        let mut fill = |r: ArgumentRef, x: &Expr| {
                            let slot = entry.entry(r).or_insert_with(|| Some(Vec::new()));
                            match (attr_of(x), slot.as_mut()) {
                                (Some(attr), Some(attrs)) => attrs.push(attr),
                                _ => *slot = None,
                            }
                        };
                        for (i, x) in c.arguments.args.iter().enumerate() {
                            if x.is_starred_expr() {
                                escapes = true;
                                break;
                            }
                            fill(ArgumentRef::Position(i), x);
                        }
                        for k in &c.arguments.keywords {
                            match &k.arg {
                                Some(name) => {
                                    fill(ArgumentRef::Keyword(name.to_string()), &k.value)
                                }
                                None => escapes = true,
                            }
                        }
                        if escapes {
                            method.escapes.insert(caller);
                        }
                        // The receiver, not the method as a value.
                        self.visit_expr(&a.value);
                        for x in &c.arguments.args {
                            self.visit_expr(x);
                        }
                        for k in &c.arguments.keywords {
                            self.visit_expr(&k.value);
                        }
                        return;
                    }
                }
                // `map(self.to_grid, xs)`, `fn = self.to_grid`: called with what cannot be seen.
                Expr::Attribute(a)
                    if is_self(&a.value) && self.defined.contains(a.attr.id.as_str()) =>
                {
                    let class = self.class.clone();
                    self.methods
                        .entry(a.attr.id.to_string())
                        .or_default()
                        .escapes
                        .insert(class);
                }
                _ => {}
            }
            visitor::walk_expr(self, e);
        }
    }
    let defined: HashSet<&str> = functions_and_methods(module)
        .filter(|(class, f)| {
            let static_method = is_static_method(f);
            let params = f.parameters.posonlyargs.len()
                + f.parameters.args.len()
                + f.parameters.kwonlyargs.len();
            class.is_some() && params > usize::from(!static_method)
        })
        .map(|(_, f)| f.name.id.as_str())
        .collect();
    if defined.is_empty() {
        return HashMap::default();
    }
    let mut calls = Calls {
        methods: HashMap::default(),
        class: None,
        defined,
        imported,
    };
    for s in module {
        calls.visit_stmt(s);
    }
    calls.methods
}

/// What [`argument_seeds`] reads from a file: the seeds of its own functions (by `def` offset),
/// and how it fills the arguments of functions it does not define (by the callee's spelling).
type FileArguments = (
    HashMap<TextSize, ArgumentSeeds>,
    HashMap<String, ArgumentKinds>,
);

fn argument_seeds(module: &[Stmt]) -> FileArguments {
    /// A traced size by its spelling: `x.shape`, `x.shape[2:]`, `x.size(0)`, `x.size()[-2:]`,
    /// names bound to one, and arithmetic on them with number literals.
    fn size(e: &Expr, names: &HashSet<String>) -> bool {
        match e {
            Expr::Name(n) => names.contains(n.id.as_str()),
            Expr::Attribute(a) => a.attr.id.as_str() == "shape",
            Expr::Call(c) => {
                matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.id.as_str() == "size")
            }
            Expr::Subscript(s) => size(&s.value, names),
            Expr::BinOp(b) => {
                let side = |e: &Expr| size(e, names) || e.is_number_literal_expr();
                (size(&b.left, names) || size(&b.right, names)) && side(&b.left) && side(&b.right)
            }
            _ => false,
        }
    }
    /// `int(...)` (or `float`, `round`, `math.*`) of each element of a comprehension that reads
    /// sizes, in its element or in what it iterates over.
    fn int_over_sizes(
        elt: &Expr,
        generators: &[ast::Comprehension],
        names: &HashSet<String>,
    ) -> bool {
        let numeric = matches!(elt, Expr::Call(c) if makes_number(c));
        let reads = |e: &Expr| {
            reads_size(e)
                || rules::any_sub_expr(
                    e,
                    |e| matches!(e, Expr::Name(n) if names.contains(n.id.as_str())),
                )
        };
        numeric && (reads(elt) || generators.iter().any(|g| reads(&g.iter)))
    }
    /// A mask by its spelling: a comparison of values (`y.abs() >= 1.0`), `~`, `&`, `|`, `^`
    /// over one, `.any(-1)` / `.all()` / `logical_*` of one, `torch.isnan(x)`, a name bound to
    /// one or named for one (`pad_mask`), a slice of one.
    fn mask(e: &Expr, names: &HashSet<String>) -> bool {
        match e {
            Expr::Name(n) => names.contains(n.id.as_str()) || names_a_mask(n.id.as_str()),
            // `self.own_ship`, a Boolean buffer of the class by its value (`SELF_BOOL`
            // entries; not by its name: `self.mask_token_id` is a number).
            Expr::Attribute(a) if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") => {
                names.contains(&format!("{SELF_BOOL}{}", a.attr.id))
            }
            Expr::Compare(c) => {
                let literal = |e: &Expr| {
                    e.is_string_literal_expr()
                        || e.is_none_literal_expr()
                        || e.is_boolean_literal_expr()
                };
                compares_values(c) && !literal(&c.left) && !c.comparators.iter().any(literal)
            }
            Expr::UnaryOp(u) => matches!(u.op, ast::UnaryOp::Invert) && mask(&u.operand, names),
            // `linear_fill(own[..., 0], miss[..., 0])`: a slice of a mask bound here, or of a
            // name that ends in one (`mask[..., 0]` of a parameter), is a mask (not of a name that
            // only looks like one: `valid_lens[b]` is a length).
            Expr::Subscript(s) => {
                let mut v = s.value.as_ref();
                while let Expr::Subscript(inner) = v {
                    v = inner.value.as_ref();
                }
                matches!(v, Expr::Name(n) if names.contains(n.id.as_str()) || ends_in_mask(n.id.as_str()))
            }
            Expr::BinOp(b) => {
                matches!(
                    b.op,
                    ast::Operator::BitAnd | ast::Operator::BitOr | ast::Operator::BitXor
                ) && (mask(&b.left, names) || mask(&b.right, names))
            }
            Expr::Call(c) => match c.func.as_ref() {
                Expr::Attribute(a) => match a.attr.id.as_str() {
                    "any" | "all" | "logical_not" | "logical_and" | "logical_or" => {
                        mask(&a.value, names)
                            || c.arguments.args.first().is_some_and(|x| mask(x, names))
                    }
                    _ => tests_values(a),
                },
                _ => false,
            },
            _ => false,
        }
    }
    struct Calls<'a>(Vec<&'a ast::ExprCall>);
    impl<'a> Visitor<'a> for Calls<'a> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                self.0.push(c);
            }
            visitor::walk_expr(self, e);
        }
    }
    let defs: HashMap<(Option<&str>, &str), &ast::StmtFunctionDef> = functions_and_methods(module)
        .map(|(class, f)| ((class, f.name.id.as_str()), f))
        .collect();
    // Each class of the file with the names of its bases, for overrides in subclasses.
    let bases = class_bases(module);
    // The overrides of each method in subclasses of the file: `(Base, name)` → the subclasses
    // and their defs.
    let mut overrides_of: HashMap<(&str, &str), Vec<(&str, &ast::StmtFunctionDef)>> =
        HashMap::default();
    // Each class's ancestors in the file, once per class.
    let mut ancestors: HashMap<&str, Vec<&str>> = HashMap::default();
    for (class, f) in functions_and_methods(module) {
        let Some(class) = class else { continue };
        let up = ancestors.entry(class).or_insert_with(|| {
            let mut seen: Vec<&str> = vec![class];
            let mut i = 0;
            while i < seen.len() {
                for b in bases.get(seen[i]).into_iter().flatten() {
                    if !seen.contains(b) {
                        seen.push(b);
                    }
                }
                i += 1;
            }
            seen.split_off(1)
        });
        for b in up.iter() {
            if defs.contains_key(&(Some(*b), f.name.id.as_str())) {
                overrides_of
                    .entry((*b, f.name.id.as_str()))
                    .or_default()
                    .push((class, f));
            }
        }
    }
    let mut seeds: HashMap<TextSize, ArgumentSeeds> = HashMap::default();
    let mut elsewhere: HashMap<String, ArgumentKinds> = HashMap::default();
    let mut bool_attrs_of: HashMap<&str, Vec<&str>> = HashMap::default();
    for (class, f) in functions_and_methods(module) {
        let mut stmts = Vec::new();
        flatten(&f.body, &mut stmts);
        let mut frozen_names: HashSet<String> = HashSet::default();
        let mut size_names: HashSet<String> = HashSet::default();
        let mut mask_names: HashSet<String> = HashSet::default();
        if let Some(class) = class {
            // Once per class, not per method: the attributes read every method of the class.
            let attrs = bool_attrs_of
                .entry(class)
                .or_insert_with(|| class_bool_attributes(module, class));
            mask_names.extend(attrs.iter().map(|a| format!("{SELF_BOOL}{a}")));
        }
        // `batch = len(seq)` with `seq` a parameter taken for a tensor (no default, unannotated
        // or annotated `Tensor`): the batch as a Python number.
        let tensor_params: HashSet<&str> = f
            .parameters
            .posonlyargs
            .iter()
            .chain(&f.parameters.args)
            .skip(usize::from(class.is_some()))
            .filter(|p| {
                p.default.is_none()
                    && p.parameter
                        .annotation
                        .as_deref()
                        .is_none_or(mentions_tensor_anywhere)
            })
            .map(|p| p.parameter.name.id.as_str())
            .collect();
        let len_of_tensor = |e: &Expr| {
            matches!(e, Expr::Call(c) if matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "len")
                && matches!(&c.arguments.args[..], [Expr::Name(a)] if tensor_params.contains(a.id.as_str())))
        };
        // `int(batch[-1]) + 1`, `float(lengths.max())`: a number made of a value read from a
        // tensor parameter (not of the bare parameter: `int(scale)` is most likely a number
        // already).
        fn number_of_tensor(e: &Expr, tensor_params: &HashSet<&str>) -> bool {
            match e {
                Expr::BinOp(b) => {
                    number_of_tensor(&b.left, tensor_params)
                        || number_of_tensor(&b.right, tensor_params)
                }
                Expr::Call(c) if makes_number(c) => match &c.arguments.args[..] {
                    [a @ (Expr::Subscript(_) | Expr::Call(_) | Expr::Attribute(_))] => {
                        value_root(a).is_some_and(|r| tensor_params.contains(r))
                    }
                    _ => false,
                },
                _ => false,
            }
        }
        // A frozen number here: by its spelling, `len()` of a tensor parameter, or a number read
        // from one.
        let frozen_here = |e: &Expr, names: &HashSet<String>| {
            frozen(e, names) || len_of_tensor(e) || number_of_tensor(e, &tensor_params)
        };
        for s in stmts {
            // `self.rel_indices = self.get_rel_indices(N)` (timm's ConViT): a cache the module
            // refreshes when the size changes, built from the size on purpose.
            let caches = matches!(s, Stmt::Assign(a) if matches!(&a.targets[..], [Expr::Attribute(t)]
                if matches!(t.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self")));
            for e in own_exprs(s).into_iter().filter(|_| !caches) {
                let mut calls = Calls(Vec::new());
                calls.visit_expr(e);
                for c in calls.0 {
                    // `self._zupt(vel, still)`: the class's method, and the overrides of
                    // subclasses of the file that run under the same call.
                    // (Not a subclass that overrides the calling method too: the base's
                    // caller never runs for it.)
                    let mut overrides: Vec<&ast::StmtFunctionDef> = Vec::new();
                    let (callee, method) = match c.func.as_ref() {
                        Expr::Attribute(a) if matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self") =>
                        {
                            if let Some(o) =
                                class.and_then(|own| overrides_of.get(&(own, a.attr.id.as_str())))
                            {
                                overrides.extend(o.iter().filter_map(|(sub, def)| {
                                    (!defs.contains_key(&(Some(*sub), f.name.id.as_str())))
                                        .then_some(*def)
                                }));
                            }
                            // The class's own method, else the nearest base's of the file
                            // (`self._zero(x, self.dead)` in a subclass).
                            (
                                class.and_then(|c| {
                                    defs.get(&(Some(c), a.attr.id.as_str())).or_else(|| {
                                        ancestors
                                            .get(c)?
                                            .iter()
                                            .find_map(|b| defs.get(&(Some(*b), a.attr.id.as_str())))
                                    })
                                }),
                                true,
                            )
                        }
                        Expr::Name(n) => (defs.get(&(None, n.id.as_str())), false),
                        // `cell.init_hidden(batch, h, w)`, `self.gate.mask_foreign(cost, a != b)`
                        // on a submodule: the one method of this file's classes by that name.
                        Expr::Attribute(a)
                            if (matches!(a.value.as_ref(), Expr::Name(_))
                                || matches!(a.value.as_ref(), Expr::Attribute(s)
                                    if matches!(s.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self")))
                                && !a.attr.id.starts_with("__") =>
                        {
                            let mut named = defs
                                .iter()
                                .filter(|((c, m), _)| c.is_some() && *m == a.attr.id.as_str());
                            match (named.next(), named.next()) {
                                (Some((_, f)), None) => (Some(f), true),
                                _ => (None, false),
                            }
                        }
                        _ => (None, false),
                    };
                    let Some(callee) = callee else {
                        // `stations_to_grid(v, r, c, H, W)`, `ops.warp(x, flow, size)`: a
                        // function of another file, told in the project pass.
                        let Some(spelling) = imported_callee(c) else {
                            continue;
                        };
                        let mut kinds = ArgumentKinds::default();
                        let args = c
                            .arguments
                            .args
                            .iter()
                            .take_while(|a| !a.is_starred_expr())
                            .enumerate()
                            .map(|(i, a)| (ArgumentRef::Position(i), a));
                        let keywords = c.arguments.keywords.iter().filter_map(|k| {
                            Some((
                                ArgumentRef::Keyword(k.arg.as_ref()?.id.to_string()),
                                &k.value,
                            ))
                        });
                        for (r, arg) in args.chain(keywords) {
                            if frozen_here(arg, &frozen_names) {
                                kinds.frozen.insert(r);
                            } else if size(arg, &size_names) {
                                kinds.sizes.insert(r);
                            } else if mask(arg, &mask_names) {
                                kinds.masks.insert(r);
                            }
                        }
                        if !kinds.is_empty() {
                            elsewhere.entry(spelling).or_default().merge(&kinds);
                        }
                        continue;
                    };
                    for callee in std::iter::once(*callee).chain(overrides.iter().copied()) {
                        let static_method = is_static_method(callee);
                        let mut bind = |name: &str, arg: &Expr| {
                            if frozen_here(arg, &frozen_names) {
                                let seed = seeds.entry(callee.range.start()).or_default();
                                seed.frozen.insert(name.to_string());
                            } else if size(arg, &size_names) {
                                let seed = seeds.entry(callee.range.start()).or_default();
                                seed.sizes.insert(name.to_string());
                            } else if mask(arg, &mask_names) {
                                let seed = seeds.entry(callee.range.start()).or_default();
                                seed.masks.insert(name.to_string());
                            }
                        };
                        let positional = callee
                            .parameters
                            .posonlyargs
                            .iter()
                            .chain(&callee.parameters.args)
                            .skip(usize::from(method && !static_method));
                        for (p, arg) in positional.zip(&c.arguments.args) {
                            if arg.is_starred_expr() {
                                break;
                            }
                            bind(p.parameter.name.id.as_str(), arg);
                        }
                        for k in &c.arguments.keywords {
                            let Some(name) = &k.arg else { continue };
                            if parameters(callee).any(|p| p.parameter.name.id == name.id) {
                                bind(name.id.as_str(), &k.value);
                            }
                        }
                    }
                }
            }
            let Stmt::Assign(a) = s else { continue };
            let [target] = &a.targets[..] else { continue };
            match (target, a.value.as_ref()) {
                (Expr::Name(n), v) => {
                    let name = n.id.to_string();
                    if mask(v, &mask_names) {
                        mask_names.insert(name.clone());
                    } else {
                        mask_names.remove(&name);
                    }
                    if frozen_here(v, &frozen_names) {
                        size_names.remove(&name);
                        frozen_names.insert(name);
                    } else if size(v, &size_names) {
                        frozen_names.remove(&name);
                        size_names.insert(name);
                    } else {
                        frozen_names.remove(&name);
                        size_names.remove(&name);
                    }
                }
                (Expr::Tuple(t), v) => {
                    // `B, C, H, W = x.shape`: every element a traced size.
                    let whole_size = size(v, &size_names);
                    // `dp, hp, wp = [int(-(-s // k) * k) for s, k in zip((d, h, w), ws)]`
                    // (Swin's padded window grid): every element a frozen number.
                    let whole_frozen = match v {
                        Expr::ListComp(l) => int_over_sizes(&l.elt, &l.generators, &size_names),
                        Expr::Generator(g) => int_over_sizes(&g.elt, &g.generators, &size_names),
                        _ => false,
                    };
                    let values = match v {
                        Expr::Tuple(vt) if vt.elts.len() == t.elts.len() => Some(&vt.elts),
                        _ => None,
                    };
                    for (i, target) in t.elts.iter().enumerate() {
                        let Expr::Name(n) = target else { continue };
                        let name = n.id.to_string();
                        frozen_names.remove(&name);
                        size_names.remove(&name);
                        mask_names.remove(&name);
                        match values.map(|vs| &vs[i]) {
                            Some(v) if frozen_here(v, &frozen_names) => {
                                frozen_names.insert(name);
                            }
                            Some(v) if size(v, &size_names) => {
                                size_names.insert(name);
                            }
                            None if whole_frozen => {
                                frozen_names.insert(name);
                            }
                            None if whole_size => {
                                size_names.insert(name);
                            }
                            _ => {}
                        }
                    }
                }
                _ => {}
            }
        }
    }
    (seeds, elsewhere)
}

/// Whether a comparison compares values (`==`, `!=`, `<`, ...), which on tensors gives a mask;
/// `is` and `in` do not.
fn compares_values(c: &ast::ExprCompare) -> bool {
    c.ops.iter().all(|op| {
        matches!(
            op,
            ast::CmpOp::Eq
                | ast::CmpOp::NotEq
                | ast::CmpOp::Lt
                | ast::CmpOp::LtE
                | ast::CmpOp::Gt
                | ast::CmpOp::GtE
        )
    })
}

/// `torch.isnan(x)`, `T.isnan(x)` (`import torch as T`; the pre-passes do not read the file's
/// imports), and NumPy's, which masks all the same; not `math.isnan(v)`, a Python flag.
fn tests_values(a: &ast::ExprAttribute) -> bool {
    matches!(
        a.attr.id.as_str(),
        "isnan" | "isinf" | "isfinite" | "isneginf" | "isposinf"
    ) && matches!(a.value.as_ref(), Expr::Name(n) if !matches!(n.id.as_str(), "math" | "cmath"))
}

/// The base classes each class of a module names by a plain name
/// (`class PalletNetWithSlots(PalletNet)`).
fn class_bases(module: &[Stmt]) -> HashMap<&str, Vec<&str>> {
    module
        .iter()
        .filter_map(|s| match s {
            Stmt::ClassDef(c) => Some((
                c.name.id.as_str(),
                c.arguments
                    .iter()
                    .flat_map(|a| a.args.iter())
                    .filter_map(|b| match b {
                        Expr::Name(n) => Some(n.id.as_str()),
                        _ => None,
                    })
                    .collect(),
            )),
            _ => None,
        })
        .collect()
}

/// A class and its ancestors in the order Python looks a method up for single inheritance and
/// simple mixins: depth first, bases from left to right.
fn declared_order<'s>(bases: &HashMap<&'s str, Vec<&'s str>>, class: &'s str) -> Vec<&'s str> {
    ancestors(bases, class, true)
}

/// `class` and its ancestors by [`class_bases`], nearest first along each line of bases, each
/// once (names of classes the file does not define included).
fn lineage<'s>(bases: &HashMap<&'s str, Vec<&'s str>>, class: &'s str) -> Vec<&'s str> {
    ancestors(bases, class, false)
}

/// `class` and its ancestors depth first, each once; `left_first`: a class's first base before
/// its second (else the last base first).
fn ancestors<'s>(
    bases: &HashMap<&'s str, Vec<&'s str>>,
    class: &'s str,
    left_first: bool,
) -> Vec<&'s str> {
    let mut seen: Vec<&str> = Vec::new();
    let mut work = vec![class];
    while let Some(c) = work.pop() {
        if seen.contains(&c) {
            continue;
        }
        seen.push(c);
        if let Some(b) = bases.get(c) {
            if left_first {
                work.extend(b.iter().rev().copied());
            } else {
                work.extend(b.iter().copied());
            }
        }
    }
    seen
}

/// Attributes a class body binds to tensors: `self.register_buffer("name", ...)`,
/// `self.register_parameter("name", ...)`, `self.name = nn.Parameter(...)` or a torch tensor.
fn tensor_attributes(ch: &Checker, class_body: &[Stmt]) -> HashSet<String> {
    let is_tensor_call = |v: &Expr| {
        let Expr::Call(c) = v else { return false };
        is_parameter_call(ch, v)
            || ch.qualify(&c.func).is_some_and(|q| {
                (q == "torch" || q.starts_with("torch.")) && torch_returns_tensor(&q)
            })
    };
    let mut out: HashSet<String> = self_assignments(class_body)
        .into_iter()
        .filter(|(_, value)| is_tensor_call(value))
        .map(|(attr, _)| attr.to_string())
        .collect();
    out.extend(
        registrations(class_body)
            .into_iter()
            .map(|(name, _)| name.to_string()),
    );
    out
}

/// `nn.Parameter(...)` (also imported bare as `Parameter`).
fn is_parameter_call(ch: &Checker, v: &Expr) -> bool {
    let Expr::Call(c) = v else { return false };
    ch.qualify(&c.func)
        .is_some_and(|q| q.ends_with("nn.Parameter"))
        || matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "Parameter")
}

/// Attributes a class body binds only to its weights: registered with
/// `self.register_parameter("name", ...)` / `self.register_buffer("name", ...)` or assigned an
/// `nn.Parameter(...)` while the module is built (in `__init__` or a method only `__init__`
/// calls: `self._build_pos_embed(n, d)`), and never stored again by a method that runs later
/// (`self.grid = make_grid(x)`, `self.anchors, self.strides = make_anchors(x)`, a buffer
/// registered in `forward`, or `self.pos_embed = nn.Parameter(resize(...))` in a `forward`).
/// A placeholder while building (`self.pos_embed = None` in a base class) does not count, and
/// elsewhere a new `nn.Parameter` (timm's `set_input_size`) is still a weight of the export.
/// `stored` gathers what the later methods store, so that a subclass's or base class's
/// reassignment counts too.
fn weight_attributes(
    ch: &Checker,
    class_body: &[Stmt],
    stored: &mut HashSet<String>,
) -> HashSet<String> {
    struct Stores<'s>(&'s mut HashSet<String>);
    impl<'a> Visitor<'a> for Stores<'_> {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Attribute(a) = e {
                if matches!(a.ctx, ast::ExprContext::Store | ast::ExprContext::Del)
                    && matches!(a.value.as_ref(), Expr::Name(n) if n.id.as_str() == "self")
                {
                    self.0.insert(a.attr.id.to_string());
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let methods = || {
        class_body.iter().filter_map(|s| match s {
            Stmt::FunctionDef(f) => Some((s, f)),
            _ => None,
        })
    };
    // `self.<name>(...)` calls in a method's body.
    let calls = |f: &ast::StmtFunctionDef| -> HashSet<String> {
        struct Calls(HashSet<String>);
        impl<'a> Visitor<'a> for Calls {
            fn visit_expr(&mut self, e: &'a Expr) {
                if let Expr::Call(c) = e {
                    if let Some(m) = self_attr(&c.func) {
                        self.0.insert(m.to_string());
                    }
                }
                visitor::walk_expr(self, e);
            }
        }
        let mut v = Calls(HashSet::default());
        v.visit_body(&f.body);
        v.0
    };
    // Building: `__init__` and the methods it calls that no other method calls.
    let from_init = methods()
        .find(|(_, f)| f.name.id.as_str() == "__init__")
        .map(|(_, f)| calls(f))
        .unwrap_or_default();
    let later_calls: HashSet<String> = methods()
        .filter(|(_, f)| f.name.id.as_str() != "__init__")
        .flat_map(|(_, f)| calls(f))
        .collect();
    let mut weights = HashSet::default();
    for (stmt, f) in methods() {
        let name = f.name.id.as_str();
        let building =
            name == "__init__" || (from_init.contains(name) && !later_calls.contains(name));
        let body = std::slice::from_ref(stmt);
        let registered = registrations(body).into_iter().map(|(n, _)| n.to_string());
        if building {
            weights.extend(registered);
        } else {
            stored.extend(registered);
        }
        let mut others = HashSet::default();
        Stores(&mut others).visit_body(&f.body);
        // A new `nn.Parameter` keeps the attribute a weight, except in `forward`; so does a
        // placeholder `None` while building.
        let keeps_parameters = building || !name.starts_with("forward");
        for (attr, value) in self_assignments(body) {
            let parameter = is_parameter_call(ch, value);
            if (parameter && keeps_parameters) || (building && value.is_none_literal_expr()) {
                others.remove(attr);
            }
            if parameter && building {
                weights.insert(attr.to_string());
            }
        }
        stored.extend(others);
    }
    weights
}

/// Attributes a class body binds to boolean tensors: a buffer or attribute made with
/// `dtype=torch.bool`, by `.bool()`, or from a comparison.
fn bool_attributes(ch: &Checker, class_body: &[Stmt]) -> HashSet<String> {
    let boolean = |v: &Expr| match dtype_source(v) {
        Expr::Compare(_) => true,
        Expr::Call(c) => {
            c.arguments.keywords.iter().any(|k| {
                k.arg.as_ref().is_some_and(|a| a.as_str() == "dtype")
                    && ch.qualify(&k.value).is_some_and(|d| d == "torch.bool")
            }) || matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.id.as_str() == "bool")
                || (ch.qualify(&c.func).as_deref() == Some("torch.full") && fills_bool(c))
                // `self.register_buffer("own_ship", own_ship_mask())`: a helper of the project
                // named for a mask, or one whose every `return` is a comparison.
                || matches!(c.func.as_ref(), Expr::Name(n) if helper_builds_mask(ch.bodies[0], n.id.as_str())
                    && ch.qualify(&c.func).is_none_or(|q| !q.starts_with("torch")))
                || ch.mask_return(c) == Some(&[true][..])
                // `torch.tensor(CFG.disabled_outputs)` of `[False, True, ...]`, with no other
                // dtype given; a name the class's methods bind (a parameter, a local) is theirs.
                || c.arguments.args.first().is_some_and(|a| {
                    matches!(
                        a,
                        Expr::List(_) | Expr::Tuple(_) | Expr::Name(_) | Expr::Attribute(_)
                    ) && crate::rules::keyword(c, "dtype").is_none()
                        && matches!(
                            ch.qualify(&c.func).as_deref(),
                            Some("torch.tensor" | "torch.as_tensor" | "torch.BoolTensor")
                        )
                        && !matches!(a, Expr::Name(n) if bound_in_methods(class_body, n.id.as_str()))
                        && bool_list(ch.bodies[0], a)
                })
                // `torch.tensor([h < OPEN or h >= CLOSE for h in range(SLOTS)])`: a list of
                // comparisons of Python values.
                || c.arguments.args.first().is_some_and(|a| {
                    matches!(a, Expr::ListComp(l) if match l.elt.as_ref() {
                        Expr::Compare(_) => true,
                        Expr::BoolOp(b) => b.values.iter().all(|v| v.is_compare_expr()),
                        _ => false,
                    }) && crate::rules::keyword(c, "dtype").is_none()
                        && c.arguments.args.len() == 1
                        && matches!(
                            ch.qualify(&c.func).as_deref(),
                            Some("torch.tensor" | "torch.as_tensor" | "torch.BoolTensor")
                        )
                })
        }
        _ => false,
    };
    self_assignments(class_body)
        .into_iter()
        .chain(
            registrations(class_body)
                .into_iter()
                .filter_map(|(name, value)| Some((name, value?))),
        )
        .filter(|(_, value)| {
            boolean(value)
                // `mask = torch.zeros(n, dtype=torch.bool)` ... `self.register_buffer("m", mask)`,
                // also `mask.triu(1)`
                || matches!(dtype_source(value), Expr::Name(n) if local_values(class_body, n.id.as_str())
                    .into_iter()
                    .any(&boolean))
                || mask_named_parameter(class_body, value)
        })
        .map(|(attr, _)| attr.to_string())
        .collect()
}

/// `def __init__(self, bathy, land_mask): ... self.register_buffer("land", land_mask)` (also
/// `land_mask.clone()`): a value that is a name the class's methods never assign, named a mask
/// (a parameter), as `self.land_mask` would be.
fn mask_named_parameter(class_body: &[Stmt], value: &Expr) -> bool {
    // `torch.from_numpy(land_mask)`, `torch.as_tensor(land_mask)`: the same values as a tensor.
    let value = match dtype_source(value) {
        Expr::Call(c)
            if matches!(c.func.as_ref(), Expr::Attribute(a)
                if matches!(a.attr.id.as_str(), "from_numpy" | "as_tensor"))
                && c.arguments.args.len() == 1
                && c.arguments.keywords.is_empty() =>
        {
            &c.arguments.args[0]
        }
        v => v,
    };
    matches!(dtype_source(value), Expr::Name(n) if ends_in_mask(n.id.as_str())
        && local_values(class_body, n.id.as_str()).is_empty())
}

/// Named a mask (`land_mask`, `pad_masks`), not for something about masking (`mask_ratio`,
/// `mask_token`, `mask_idx`) nor a bit set (`channel_bitmask`, integer flags).
fn ends_in_mask(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    (n.ends_with("mask") || n.ends_with("masks"))
        && !n.contains("bitmask")
        && !n.contains("bit_mask")
}

/// Whether a method of a class body binds `name` (as a parameter or a local).
fn bound_in_methods(class_body: &[Stmt], name: &str) -> bool {
    class_body.iter().any(|s| {
        matches!(s, Stmt::FunctionDef(f)
            if parameters(f).any(|p| p.parameter.name.id.as_str() == name)
                || name_bindings(&f.body).contains_key(name))
    })
}

/// Whether an expression is a list or tuple of Boolean literals, written there, bound to a
/// module-level name, or to a class attribute of a module-level class (`CFG.disabled_outputs`).
fn bool_list(module: &[Stmt], e: &Expr) -> bool {
    let literal = |e: &Expr| match e {
        Expr::List(ast::ExprList { elts, .. }) | Expr::Tuple(ast::ExprTuple { elts, .. }) => {
            !elts.is_empty() && elts.iter().all(Expr::is_boolean_literal_expr)
        }
        _ => false,
    };
    let assigned = |body: &[Stmt], name: &str| {
        body.iter().rev().find_map(|s| match s {
            Stmt::Assign(a) => match &a.targets[..] {
                [Expr::Name(n)] if n.id.as_str() == name => Some(literal(&a.value)),
                _ => None,
            },
            Stmt::AnnAssign(a) => match (a.target.as_ref(), a.value.as_deref()) {
                (Expr::Name(n), Some(v)) if n.id.as_str() == name => Some(literal(v)),
                _ => None,
            },
            _ => None,
        })
    };
    match e {
        Expr::Name(n) => assigned(module, n.id.as_str()) == Some(true),
        Expr::Attribute(a) => {
            let Expr::Name(class) = a.value.as_ref() else {
                return false;
            };
            module.iter().any(|s| {
                matches!(s, Stmt::ClassDef(c) if c.name.id == class.id
                    && assigned(&c.body, a.attr.id.as_str()) == Some(true))
            })
        }
        e => literal(e),
    }
}

/// The statements of the methods of a class body, blocks flattened.
fn method_statements(class_body: &[Stmt]) -> Vec<&Stmt> {
    let mut stmts = Vec::new();
    for s in class_body {
        if let Stmt::FunctionDef(f) = s {
            flatten(&f.body, &mut stmts);
        }
    }
    stmts
}

/// The values assigned to a local `name` (`name = value`) in the methods of a class body.
fn local_values<'s>(class_body: &'s [Stmt], name: &str) -> Vec<&'s Expr> {
    method_statements(class_body)
        .into_iter()
        .filter_map(|stmt| match stmt {
            Stmt::Assign(a) if matches!(&a.targets[..], [Expr::Name(t)] if t.id.as_str() == name) => {
                Some(a.value.as_ref())
            }
            _ => None,
        })
        .collect()
}

/// The prefix of a class's Boolean attributes among a function's mask names in
/// [`argument_seeds`] (`self.` cannot start a local's name).
const SELF_BOOL: &str = "self.";

/// The attributes a class of the module (by name) sets or registers as Boolean tensors, read
/// from their spelling alone: a comparison, `dtype=torch.bool`, `.bool()`, or a helper named
/// for a mask (`self.register_buffer("own_ship", own_ship_mask())`).
fn class_bool_attributes<'a>(module: &'a [Stmt], class: &str) -> Vec<&'a str> {
    let class_def = |name: &str| {
        module.iter().find_map(|s| match s {
            Stmt::ClassDef(c) if c.name.id.as_str() == name => Some(c),
            _ => None,
        })
    };
    // The class and its bases of this file (`class Child(Base)` reading `self.dead`).
    let mut lineage: Vec<&ast::StmtClassDef> = class_def(class).into_iter().collect();
    let mut i = 0;
    while i < lineage.len() {
        for b in lineage[i].bases() {
            if let Some(d) = b.as_name_expr().and_then(|n| class_def(n.id.as_str())) {
                if !lineage.iter().any(|c| c.name.id == d.name.id) {
                    lineage.push(d);
                }
            }
        }
        i += 1;
    }
    let boolean = |v: &Expr| {
        spells_bool(v)
            || matches!(v, Expr::Call(c) if matches!(c.func.as_ref(),
                Expr::Name(n) if helper_builds_mask(module, n.id.as_str())))
    };
    lineage
        .iter()
        .flat_map(|c| {
            self_assignments(&c.body)
                .into_iter()
                .chain(
                    registrations(&c.body)
                        .into_iter()
                        .filter_map(|(name, value)| Some((name, value?))),
                )
                .filter(|(_, v)| {
                    boolean(v)
                        // `dead = torch.zeros(n, dtype=torch.bool)` ... `register_buffer("dead", dead)`
                        || matches!(v, Expr::Name(n) if local_values(&c.body, n.id.as_str())
                            .into_iter()
                            .any(&boolean))
                        || mask_named_parameter(&c.body, v)
                })
        })
        .map(|(attr, _)| attr)
        .collect()
}

/// Whether a function of the module (by name) builds a Boolean mask: every `return` gives a
/// comparison, a `.bool()`, or a local bound only to such values or to a tensor made with
/// `dtype=torch.bool` (`mask = torch.zeros(n, dtype=torch.bool)` ... `return mask`; not
/// `return keep.nonzero().squeeze(1)`, nor `return torch.arange(0, c, g)`). A helper of another
/// file is read by the project pass instead ([`Checker::mask_return`]).
fn helper_builds_mask(module: &[Stmt], name: &str) -> bool {
    let Some(f) = module.iter().find_map(|s| match s {
        Stmt::FunctionDef(f) if f.name.id.as_str() == name => Some(f),
        _ => None,
    }) else {
        return false;
    };
    let mut stmts = Vec::new();
    flatten(&f.body, &mut stmts);
    let returns: Vec<&Expr> = stmts
        .iter()
        .filter_map(|s| match s {
            Stmt::Return(r) => Some(r.value.as_deref()),
            _ => None,
        })
        .collect::<Option<Vec<_>>>()
        .unwrap_or_default();
    let bool_value = |v: &Expr| match v {
        Expr::Name(n) => {
            let values = rules::bound_values(&f.body, n.id.as_str());
            !values.is_empty() && values.iter().all(|v| spells_bool(v))
        }
        v => spells_bool(v),
    };
    // `land = (yy - 20) ** 2 + (xx - 18) ** 2 < 90` on NumPy grids, then `return
    // torch.from_numpy(land)`: the array's Boolean dtype is kept.
    let converted = |v: &Expr| {
        matches!(v, Expr::Call(c) if c.arguments.keywords.is_empty()
            && c.arguments.args.len() == 1
            && matches!(c.func.as_ref(), Expr::Attribute(a)
                if a.attr.id.as_str() == "from_numpy"
                    || (matches!(a.attr.id.as_str(), "as_tensor" | "tensor")
                        && matches!(a.value.as_ref(), Expr::Name(m) if m.id.as_str() == "torch")))
            && bool_value(&c.arguments.args[0]))
    };
    !returns.is_empty() && returns.iter().all(|v| bool_value(v) || converted(v))
}

/// A Boolean tensor by its spelling alone (no imports at hand): a comparison of values, masks
/// combined with `|`, `&` or `^`, `dtype=torch.bool`, `.bool()`, also through methods that keep
/// the dtype ([`dtype_source`]).
fn spells_bool(v: &Expr) -> bool {
    match dtype_source(v) {
        Expr::Compare(c) => compares_values(c),
        // `(d < 90) | (xx > 58)`: masks combined.
        Expr::BinOp(b)
            if matches!(
                b.op,
                ast::Operator::BitOr | ast::Operator::BitAnd | ast::Operator::BitXor
            ) =>
        {
            spells_bool(&b.left) && spells_bool(&b.right)
        }
        Expr::Call(c) => {
            c.arguments.keywords.iter().any(|k| {
                k.arg.as_ref().is_some_and(|a| a.as_str() == "dtype")
                    && matches!(&k.value, Expr::Attribute(d) if d.attr.id.as_str() == "bool")
            }) || matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.id.as_str() == "bool")
                || (matches!(c.func.as_ref(), Expr::Attribute(a) if a.attr.id.as_str() == "full")
                    && fills_bool(c))
        }
        _ => false,
    }
}

/// `torch.full((n, n), True)`, `torch.full(size, fill_value=False)`: a fill of a Boolean literal
/// with no dtype given makes a Boolean tensor (`full_like` keeps its input's dtype instead).
fn fills_bool(c: &ast::ExprCall) -> bool {
    let fill = c
        .arguments
        .args
        .get(1)
        .or_else(|| rules::keyword(c, "fill_value").map(|k| &k.value));
    matches!(fill, Some(Expr::BooleanLiteral(_))) && rules::keyword(c, "dtype").is_none()
}

/// The tensor whose dtype a value keeps: the receiver of methods that keep a mask a mask
/// ([`SHAPE_ONLY_METHODS`] but `.to(...)`: `torch.ones(n, n, dtype=torch.bool).triu(1)`,
/// `.view(...)`, `.t()`) and the operand of a negation (`~keep`), repeatedly; the value itself
/// otherwise.
fn dtype_source(mut v: &Expr) -> &Expr {
    loop {
        v = match v {
            Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::Invert) => &u.operand,
            Expr::Attribute(a) if matches!(a.attr.id.as_str(), "T" | "mT") => &a.value,
            // `.view(torch.int8)`, `.type(torch.long)`: cast.
            Expr::Call(c)
                if c.arguments.args.iter().any(|a| {
                    matches!(a, Expr::Attribute(d) if d.attr.id.as_str() != "bool"
                        && torch_dtype_name(d.attr.id.as_str()))
                }) =>
            {
                return v
            }
            Expr::Call(c) => match c.func.as_ref() {
                // `.to(...)` may cast; `.bool()`, comparisons and logical ops make a mask of
                // any tensor (read by the caller); the others keep the dtype.
                Expr::Attribute(a)
                    if SHAPE_ONLY_METHODS.contains(&a.attr.id.as_str())
                        && !matches!(
                            a.attr.id.as_str(),
                            "to" | "bool"
                                | "eq"
                                | "ne"
                                | "gt"
                                | "ge"
                                | "lt"
                                | "le"
                                | "isnan"
                                | "isinf"
                                | "isfinite"
                        )
                        && !a.attr.id.as_str().starts_with("logical_") =>
                {
                    &a.value
                }
                _ => return v,
            },
            _ => return v,
        };
    }
}

/// `self.register_buffer("name", value)` / `self.register_parameter("name", value)` calls in the
/// methods of a class body: the name and, when given, the value.
fn registrations(class_body: &[Stmt]) -> Vec<(&str, Option<&Expr>)> {
    let mut out = Vec::new();
    for stmt in method_statements(class_body) {
        let Stmt::Expr(e) = stmt else { continue };
        let Expr::Call(c) = e.value.as_ref() else {
            continue;
        };
        if !self_attr(&c.func)
            .is_some_and(|m| matches!(m, "register_buffer" | "register_parameter"))
        {
            continue;
        }
        if let Some(name) = c.arguments.args.first().and_then(rules::string_literal) {
            out.push((name, c.arguments.args.get(1)));
        }
    }
    out
}

/// `self.<attr> = <value>` assignments in the methods of a class body, including
/// `self.a, self.b = va, vb`.
pub(crate) fn self_assignments(class_body: &[Stmt]) -> Vec<(&str, &Expr)> {
    let mut out = Vec::new();
    for stmt in method_statements(class_body) {
        let Stmt::Assign(a) = stmt else { continue };
        for t in &a.targets {
            match (t, a.value.as_ref()) {
                (Expr::Tuple(ts), Expr::Tuple(vs)) if ts.elts.len() == vs.elts.len() => {
                    for (t, v) in ts.elts.iter().zip(vs.elts.iter()) {
                        if let Some(attr) = self_attr(t) {
                            out.push((attr, v));
                        }
                    }
                }
                (t, v) => {
                    if let Some(attr) = self_attr(t) {
                        out.push((attr, v));
                    }
                }
            }
        }
    }
    out
}

/// Names that by convention hold boolean masks: `mask`, `pad_mask`, `valid`, `is_valid`,
/// `done` (reinforcement learning's episode ends), `key_padding` (attention's
/// `key_padding_mask`).
fn names_a_mask(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    n.contains("mask")
        || n.ends_with("key_padding")
        || matches!(n.as_str(), "valid" | "done" | "dones" | "terminated")
        || n.starts_with("valid_")
        || n.ends_with("_valid")
        || (n.starts_with("is_") && n.len() > 3)
}

/// Parameter names that by convention hold Python sizes (`size`, `target_size`, `x_shape`,
/// `img_hw`):
/// torchvision, timm and mmcv pass tuples of ints under these names.
fn names_a_size(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(n.as_str(), "size" | "shape" | "hw")
        || n.ends_with("_size")
        || n.ends_with("_shape")
        // `img_hw`, `feat_hw`: (height, width) pairs.
        || n.ends_with("_hw")
}

/// Parameter names PyTorch code gives to Python numbers of its configuration: an axis (`dim`,
/// `axis`, `feat_dim`), a width (`in_channels`) or an iteration count (`iters`, `max_iter`).
/// `if dim == -1:` branches on the call, not on data. (Not `num_*`, `deg`, `groups` or `bits`:
/// `num_boxes`, a graph's node degrees, a sample's group ids are as often tensors.)
fn names_a_number(name: &str) -> bool {
    let n = name.to_ascii_lowercase();
    matches!(
        n.as_str(),
        "dim"
            | "axis"
            | "ndim"
            | "channels"
            | "iters"
            | "n_iters"
            | "num_iters"
            | "max_iter"
            | "max_iters"
    ) || n.ends_with("_dim")
        || n.ends_with("_axis")
        || n.ends_with("_channels")
}

/// Names a function tests with `isinstance(name, int | float | numbers.Number ...)` or passes
/// as `scale_factor=`, `kernel_size=`, `stride=`, `dilation=`, `groups=`: it expects Python
/// numbers there.
fn number_checked_names(body: &[Stmt]) -> HashSet<String> {
    struct Find {
        out: HashSet<String>,
    }
    fn is_number_type(e: &Expr) -> bool {
        match e {
            Expr::Name(n) => matches!(
                n.id.as_str(),
                "int" | "float" | "Number" | "Integral" | "Real"
            ),
            Expr::Attribute(a) => matches!(a.attr.id.as_str(), "Number" | "Integral" | "Real"),
            Expr::Tuple(t) => !t.elts.is_empty() && t.elts.iter().all(is_number_type),
            _ => false,
        }
    }
    impl<'a> Visitor<'a> for Find {
        fn visit_expr(&mut self, e: &'a Expr) {
            if let Expr::Call(c) = e {
                if matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "isinstance") {
                    if let [Expr::Name(v), t] = &c.arguments.args[..] {
                        if is_number_type(t) {
                            self.out.insert(v.id.to_string());
                        }
                    }
                }
                // `F.interpolate(flow, scale_factor=factor)`, `F.avg_pool2d(x, kernel_size=k)`:
                // arguments that take Python numbers.
                for k in &c.arguments.keywords {
                    let number_arg = k.arg.as_ref().is_some_and(|a| {
                        matches!(
                            a.id.as_str(),
                            "scale_factor" | "kernel_size" | "stride" | "dilation" | "groups"
                        )
                    });
                    if let (true, Expr::Name(v)) = (number_arg, &k.value) {
                        self.out.insert(v.id.to_string());
                    }
                }
            }
            visitor::walk_expr(self, e);
        }
    }
    let mut f = Find {
        out: HashSet::default(),
    };
    f.visit_body(body);
    f.out
}

/// A function's named parameters (positional-only, ordinary, keyword-only), in order.
fn parameters(f: &ast::StmtFunctionDef) -> impl Iterator<Item = &ast::ParameterWithDefault> {
    f.parameters
        .posonlyargs
        .iter()
        .chain(&f.parameters.args)
        .chain(&f.parameters.kwonlyargs)
}

fn is_literal_non_tensor_default(e: &Expr) -> bool {
    matches!(
        e,
        Expr::NumberLiteral(_)
            | Expr::BooleanLiteral(_)
            | Expr::StringLiteral(_)
            | Expr::Tuple(_)
            | Expr::List(_)
            | Expr::Dict(_)
            | Expr::UnaryOp(_)
    )
}

fn annotation_is_non_tensor(e: &Expr) -> bool {
    // Only annotations that mention `Tensor` (`Tensor`, `torch.Tensor`, `Optional[Tensor]`)
    // keep a parameter a tensor; `int`, `List[Tensor]`, `ImageList`, ... do not.
    fn mentions_tensor(e: &Expr) -> bool {
        match e {
            Expr::Name(n) => n.id.as_str() == "Tensor",
            Expr::Attribute(a) => a.attr.id.as_str() == "Tensor",
            Expr::Subscript(s) => {
                let outer = match s.value.as_ref() {
                    Expr::Name(n) => n.id.as_str(),
                    Expr::Attribute(a) => a.attr.id.as_str(),
                    _ => "",
                };
                matches!(outer, "Optional" | "Union") && mentions_tensor(&s.slice)
            }
            Expr::Tuple(t) => t.elts.iter().any(mentions_tensor),
            Expr::BinOp(b) => mentions_tensor(&b.left) || mentions_tensor(&b.right),
            Expr::StringLiteral(l) => {
                l.value.to_str().contains("Tensor") && !l.value.to_str().contains('[')
            }
            _ => false,
        }
    }
    !mentions_tensor(e)
}

/// Whether a block always ends in `return` or `raise`.
pub(crate) fn always_exits(body: &[Stmt]) -> bool {
    matches!(body.last(), Some(Stmt::Return(_) | Stmt::Raise(_)))
}

impl<'a> Visitor<'a> for Checker<'a> {
    fn visit_body(&mut self, body: &'a [Stmt]) {
        for (i, stmt) in body.iter().enumerate() {
            self.rest_after_if = &body[i + 1..];
            self.visit_stmt(stmt);
            // `if torch.jit.is_tracing(): return traced_version(...)`: what follows in this
            // block is the eager path, never exported; after `if not self.training: return`,
            // the training path.
            if let Stmt::If(s) = stmt {
                // `if not self.training: return x`: what follows only runs in training.
                let eval_exit = guard_of(&s.test) == Guard::NotTraining;
                // `if torch.jit.is_tracing(): return ...`, and a test that mixes a guard with
                // other conditions (`if not is_exporting() and size == old: return x`), as
                // before; not `if torch.jit.is_scripting(): return x`, after which the trace
                // goes on.
                let positive = !matches!(s.test.as_ref(), Expr::UnaryOp(_));
                let export_exit = guard_of(&s.test) == Guard::ExportAware
                    && !exporter_dependent(&s.test)
                    && match traced_polarity(&s.test) {
                        Some(p) => p,
                        None => positive,
                    };
                if (export_exit || eval_exit)
                    && s.elif_else_clauses.is_empty()
                    && always_exits(&s.body)
                {
                    self.visit_guarded(&body[i + 1..], false);
                    return;
                }
            }
        }
    }

    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(f) => {
                let class = self.classes.last().cloned();
                let direct = self
                    .model_fns
                    .contains(&(class.clone(), f.name.id.to_string()));
                let nested_in_model = self.in_model() && self.fns.len() > 1;
                let scripted = f.decorator_list.iter().any(|d| {
                    self.qualify(&d.expression).is_some_and(|q| {
                        matches!(
                            q.as_str(),
                            "torch.jit.script"
                                | "torch.jit._script_if_tracing"
                                | "torch.jit.script_if_tracing"
                        )
                    })
                });
                // A property's setter shares its name, not its place in the trace.
                let in_model = self.torch_imported
                    && (direct || nested_in_model)
                    && !scripted
                    && !is_property_setter(f);
                let mut st = FnState {
                    in_model,
                    name: f.name.id.to_string(),
                    ..FnState::default()
                };
                // Inherit the enclosing function's view of names (closures).
                if let Some(outer) = self.fns.last() {
                    if self.fns.len() > 1 {
                        st.tensors = outer.tensors.clone();
                        st.bools = outer.bools.clone();
                        st.sizes = outer.sizes.clone();
                        st.frozen = outer.frozen.clone();
                        st.frozen_sizes = outer.frozen_sizes.clone();
                        st.containers = outer.containers.clone();
                        st.records = outer.records.clone();
                        st.torch_aliases = outer.torch_aliases.clone();
                        // Its own parameters and names shadow the enclosing function's (`def
                        // helper(pair, a=True)` inside a function with a tensor `a`).
                        if !st.torch_aliases.is_empty() {
                            let own = name_bindings(&f.body);
                            st.torch_aliases
                                .retain(|n, _| !own.contains_key(n.as_str()));
                        }
                        for p in parameters(f) {
                            let name = p.parameter.name.id.as_str();
                            st.torch_aliases.remove(name);
                            st.frozen.remove(name);
                            st.frozen_sizes.remove(name);
                            st.tensors.remove(name);
                            st.bools.remove(name);
                            st.sizes.remove(name);
                            st.containers.remove(name);
                            st.records.remove(name);
                        }
                    }
                }
                // `def resize(x, size, mode="bilinear")`: a string default is what the
                // callers that leave the argument out get; so is a string the module binds once
                // (`mode: str = DEFAULT_UP_MODE`).
                for p in parameters(f) {
                    let default = match p.default.as_deref() {
                        Some(d @ Expr::StringLiteral(_)) => Some(d),
                        // Bound once in the module (`UP: str = "bilinear"` too), for a `def`
                        // of the module or of a class that does not bind the name itself: the
                        // value the `def` saw.
                        // (The map lookup first: the counts walk the module.)
                        Some(Expr::Name(n)) if self.defs.is_empty() => self
                            .fns
                            .first()
                            .and_then(|m| m.literals.get(n.id.as_str()))
                            .filter(|v| {
                                v.is_string_literal_expr()
                                    && rules::store_count(self.bodies[0], n.id.as_str()) == 1
                                    && self
                                        .classes
                                        .last()
                                        .and_then(|c| module_class(self.bodies[0], c))
                                        .is_none_or(|c| {
                                            rules::store_count(&c.body, n.id.as_str()) == 0
                                        })
                            }),
                        _ => None,
                    };
                    if let Some(d) = default {
                        st.literals
                            .insert(p.parameter.name.id.to_string(), d.clone());
                    }
                }
                if in_model {
                    let number_checked = number_checked_names(&f.body);
                    let tensor_used = tensor_method_receivers(&f.body);
                    let seeds = self
                        .argument_seeds
                        .get_or_init(|| argument_seeds(self.bodies[0]))
                        .0
                        .get(&f.range.start());
                    // Filled by callers in other files (module-level functions only).
                    let elsewhere = (self.classes.is_empty())
                        .then(|| self.imported_argument_kinds.get(f.name.id.as_str()))
                        .flatten();
                    let positional: Vec<&str> = f
                        .parameters
                        .posonlyargs
                        .iter()
                        .chain(&f.parameters.args)
                        .map(|p| p.parameter.name.id.as_str())
                        .collect();
                    let filled = |kinds: &HashSet<ArgumentRef>, name: &str| {
                        kinds.iter().any(|r| match r {
                            ArgumentRef::Position(i) => positional.get(*i) == Some(&name),
                            ArgumentRef::Keyword(k) => k == name,
                        })
                    };
                    for p in parameters(f) {
                        let name = p.parameter.name.id.as_str();
                        if name == "self" || name == "cls" {
                            continue;
                        }
                        let annotation = p.parameter.annotation.as_deref();
                        let annotated_tensor =
                            annotation.is_some_and(|a| !annotation_is_non_tensor(a));
                        // `get_absolute_positions(self, abs_pos_embeddings, ...)` called with
                        // `self.position_embeddings` alone: a weight, whose sizes are constants.
                        // Counted from the first argument a call passes: after `self`/`cls`,
                        // from the first parameter of a static method.
                        let static_method = is_static_method(f);
                        let shift = usize::from(!static_method);
                        if let Some(class) = self.classes.last().filter(|_| {
                            static_method || matches!(positional.first(), Some(&("self" | "cls")))
                        }) {
                            let position = positional
                                .iter()
                                .position(|p| *p == name)
                                .and_then(|p| p.checked_sub(shift));
                            let fills = self
                                .self_method_arguments
                                .get_or_init(|| {
                                    self_method_arguments(self.bodies[0], &self.imports)
                                })
                                .get(f.name.id.as_str())
                                .and_then(|m| m.fills(class, &self.class_bases, position, name));
                            if fills.is_some_and(|attrs| {
                                attrs
                                    .iter()
                                    .all(|a| a.as_deref().is_none_or(|a| self.is_weight_attr(a)))
                            }) {
                                st.weight_params.insert(name.to_string());
                            }
                        }
                        // `apply_dirichlet(out, on_bnd, 0.0)` with `on_bnd = (y.abs() >= 1).any(-1)`:
                        // a parameter some caller fills with a mask is one.
                        if seeds.is_some_and(|s| s.masks.contains(name))
                            || elsewhere.is_some_and(|k| filled(&k.masks, name))
                        {
                            st.bools.insert(name.to_string());
                        }
                        // Filled with sizes by a caller in this file (`argument_seeds`).
                        if let Some(seeds) = seeds.filter(|_| !annotated_tensor) {
                            if seeds.frozen.contains(name) {
                                st.frozen.insert(name.to_string());
                                st.frozen_sizes.insert(name.to_string());
                                continue;
                            }
                            if seeds.sizes.contains(name) {
                                st.sizes.insert(name.to_string());
                                st.size_params.insert(name.to_string());
                                continue;
                            }
                        }
                        if let Some(kinds) = elsewhere.filter(|_| !annotated_tensor) {
                            if filled(&kinds.frozen, name) {
                                st.frozen.insert(name.to_string());
                                st.frozen_sizes.insert(name.to_string());
                                continue;
                            }
                            if filled(&kinds.sizes, name) {
                                st.sizes.insert(name.to_string());
                                st.size_params.insert(name.to_string());
                                continue;
                            }
                        }
                        // `img_hw`: an image's (height, width), most likely `x.shape[-2:]`
                        // handed down, so `int(img_hw[0])` freezes a traced size.
                        let n = name.to_ascii_lowercase();
                        if (n == "hw" || n.ends_with("_hw")) && !annotated_tensor {
                            st.sizes.insert(name.to_string());
                        }
                        if p.default
                            .as_deref()
                            .is_some_and(is_literal_non_tensor_default)
                            || ((names_a_size(name) || names_a_number(name))
                                && !annotated_tensor
                                && !tensor_used.contains(name))
                            || number_checked.contains(name)
                        {
                            continue;
                        }
                        if annotation.is_some_and(annotation_is_non_tensor) {
                            // `out: SegOutput`, a record of this file.
                            if let Some(class) = annotation.and_then(|a| self.record_named(a)) {
                                st.records.insert(name.to_string(), class.to_string());
                            }
                            // `bitmap: np.ndarray`
                            if matches!(annotation, Some(Expr::Attribute(a)) if a.attr.id.as_str() == "ndarray")
                            {
                                st.arrays.insert(name.to_string());
                            }
                            if annotation.is_some_and(mentions_tensor_anywhere) {
                                st.containers.insert(name.to_string());
                            }
                            if annotation.is_some_and(dict_of_tensors) {
                                st.tensor_dicts.insert(name.to_string());
                            }
                            continue;
                        }
                        st.tensors.insert(name.to_string());
                        st.params.insert(name.to_string());
                    }
                    // `self.attn(q, h, h, key_padding_mask=pad)`: `pad` is a boolean mask.
                    st.bools.extend(mask_keyword_names(&f.body));
                }
                for d in &f.decorator_list {
                    self.visit_expr(&d.expression);
                }
                let in_model = st.in_model;
                self.fns.push(st);
                // The body is the enclosing one while its locals are read, too.
                self.bodies.push(&f.body);
                self.local_bindings.push(if in_model {
                    LocalBindings::of(&f.body)
                } else {
                    LocalBindings::default()
                });
                self.defs.push(f);
                scan_locals(self, &f.body, Some(f));
                let loops = std::mem::take(&mut self.loops);
                self.visit_body(&f.body);
                self.defs.pop();
                self.local_bindings.pop();
                self.bodies.pop();
                self.loops = loops;
                self.fns.pop();
            }
            Stmt::ClassDef(c) => {
                rules::autograd_function_without_symbolic::check_class(self, c);
                if let Some(args) = &c.arguments {
                    self.visit_arguments(args);
                }
                self.classes.push(c.name.id.to_string());
                self.class_methods.push(
                    c.body
                        .iter()
                        .filter_map(|s| match s {
                            Stmt::FunctionDef(f) => Some((f.name.id.to_string(), &f.body[..])),
                            _ => None,
                        })
                        .collect(),
                );
                // The buffers and parameters a base class of this file registers are the
                // subclass's too (`class FastWarp(Warp)` reading `self.grids`).
                let mut tensor_attrs = tensor_attributes(self, &c.body);
                let mut bool_attrs = bool_attributes(self, &c.body);
                let mut lineage_bodies: Vec<&'a [Stmt]> = vec![&c.body];
                for base in lineage(&self.class_bases, c.name.id.as_str())
                    .into_iter()
                    .skip(1)
                {
                    let defined = self.bodies[0].iter().find_map(|s| match s {
                        Stmt::ClassDef(d) if d.name.id.as_str() == base => Some(d),
                        _ => None,
                    });
                    if let Some(d) = defined {
                        tensor_attrs.extend(tensor_attributes(self, &d.body));
                        bool_attrs.extend(bool_attributes(self, &d.body));
                        lineage_bodies.push(&d.body);
                    }
                }
                self.class_tensor_attrs.push(tensor_attrs);
                self.class_bool_attrs.push(bool_attrs);
                self.class_weight_attrs
                    .push((std::cell::OnceCell::new(), lineage_bodies));
                self.visit_body(&c.body);
                self.class_weight_attrs.pop();
                self.class_bool_attrs.pop();
                self.class_tensor_attrs.pop();
                self.class_methods.pop();
                self.classes.pop();
            }
            Stmt::For(f) => {
                self.visit_expr(&f.iter);
                let mut targets = Vec::new();
                collect_names(&f.target, &mut targets);
                let assigned = assigned_names(&f.body);
                // (Only model code has per-sample writes to report.)
                let over_samples = match f.iter.as_ref() {
                    Expr::Call(c)
                        if self.in_model()
                            && self.qualify(&c.func).as_deref() == Some("builtins.range")
                            && c.arguments.keywords.is_empty() =>
                    {
                        match &c.arguments.args[..] {
                            [n] | [Expr::NumberLiteral(_), n] => {
                                self.is_size(n) || self.is_frozen_int(n)
                            }
                            _ => false,
                        }
                    }
                    // `for b, feats in enumerate(features)` over a tensor: over its first dim.
                    Expr::Call(c)
                        if self.in_model()
                            && matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == "enumerate")
                            && !self.imports.contains_key("enumerate") =>
                    {
                        matches!(&c.arguments.args[..], [t @ Expr::Name(n)]
                            if self.is_tensor(t) && !self.state().containers.contains(n.id.as_str()))
                    }
                    _ => false,
                };
                let mut rows = Vec::new();
                let mut data_rows = Vec::new();
                if self.in_model() {
                    let mut row = |n: &ast::ExprName, it: &Expr| {
                        rows.push(n.id.to_string());
                        // (Not a buffer of the module, `self.starts`: its state, not the input.)
                        if !self.is_constant_tensor(it) && self_attr(it).is_none() {
                            data_rows.push(n.id.to_string());
                        }
                    };
                    match (f.target.as_ref(), f.iter.as_ref()) {
                        (Expr::Name(n), it) if self.is_tensor(it) => row(n, it),
                        (Expr::Tuple(t), Expr::Call(c))
                            if matches!(c.func.as_ref(), Expr::Name(z) if z.id.as_str() == "zip")
                                && !self.imports.contains_key("zip") =>
                        {
                            for (elt, arg) in t.elts.iter().zip(&c.arguments.args) {
                                if let (Expr::Name(n), true) = (elt, self.is_tensor(arg)) {
                                    row(n, arg);
                                }
                            }
                        }
                        _ => {}
                    }
                }
                self.loops.push(LoopInfo {
                    targets,
                    assigned,
                    over_samples,
                    rows,
                    data_rows,
                });
                self.visit_body(&f.body);
                self.loops.pop();
                self.visit_body(&f.orelse);
            }
            Stmt::Assign(a) => {
                // `x["k"] = y["k"] = True`: reported (and fixed) once.
                let mut stored = false;
                for t in &a.targets {
                    if let Expr::Subscript(s) = t {
                        if !stored {
                            stored =
                                rules::keep_initializers_as_inputs::check_store(self, s, &a.value);
                        }
                        self.on_subscript_store(s, stmt, false);
                    }
                }
                // `self.up = lambda t: F.interpolate(t, ...)` in `__init__`, called as
                // `self.up(x)` by model code: the lambda's body runs in the trace.
                if let (Expr::Lambda(l), [Expr::Attribute(t)]) = (a.value.as_ref(), &a.targets[..])
                {
                    if !self.in_model() && self.model_calls_attribute(t) {
                        self.visit_lambda(l, true);
                    }
                }
                visitor::walk_stmt(self, stmt);
            }
            Stmt::AugAssign(a) => {
                if let Expr::Subscript(s) = a.target.as_ref() {
                    self.on_subscript_store(s, stmt, true);
                }
                visitor::walk_stmt(self, stmt);
            }
            Stmt::If(i) => {
                let rest = std::mem::take(&mut self.rest_after_if);
                let orelse: &[Stmt] = match i.elif_else_clauses.first() {
                    Some(c) => &c.body,
                    // `if not self.training: return x`: the rest of the block is the else.
                    None if always_exits(&i.body) => rest,
                    None => &[],
                };
                self.on_test(&i.test, "if", &i.body, orelse, i.range.start());
                let guard = guard_of(&i.test);
                let (body_on, else_on) = match guard {
                    Guard::Training => (false, true),
                    Guard::NotTraining => (true, false),
                    // `is_compiling()`/`is_exporting()`: the two exporters take different branches.
                    Guard::ExportAware if exporter_dependent(&i.test) => (true, true),
                    // `if torch.onnx.is_in_onnx_export(): rows = torch.nonzero(m)`: the branch
                    // export takes is traced like any other code; after `if
                    // torch.jit.is_scripting():` that is the `else`.
                    Guard::ExportAware => match traced_polarity(&i.test) {
                        Some(true) => (true, false),
                        Some(false) => (false, true),
                        None => (false, false),
                    },
                    Guard::None => (true, true),
                };
                self.visit_expr(&i.test);
                let not_training = |e: &Expr| {
                    matches!(e, Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::Not)
                        && Checker::is_self_attr(&u.operand, "training"))
                };
                let eval_body = not_training(&i.test)
                    || matches!(&*i.test, Expr::BoolOp(b) if matches!(b.op, ast::BoolOp::And)
                        && b.values.iter().any(not_training));
                let eval_else = Checker::is_self_attr(&i.test, "training");
                self.eval_only += u32::from(eval_body);
                self.visit_guarded(&i.body, body_on);
                self.eval_only -= u32::from(eval_body);
                self.eval_only += u32::from(eval_else);
                for (k, c) in i.elif_else_clauses.iter().enumerate() {
                    if let Some(t) = &c.test {
                        if else_on {
                            // `elif self.training: ... else: ...`: the next clause is its else.
                            // With no clause after it, an `elif` that returns has the rest
                            // of the block as its else.
                            let next: &[Stmt] = match i.elif_else_clauses.get(k + 1) {
                                Some(n) => &n.body,
                                None if always_exits(&c.body) => rest,
                                None => &[],
                            };
                            self.on_test(t, "elif", &c.body, next, c.range.start());
                        }
                        self.visit_expr(t);
                    }
                    self.visit_guarded(&c.body, else_on);
                }
                self.eval_only -= u32::from(eval_else);
            }
            // `case "auto" if lengths.min() < 8:`: a guard is a test like an `if`'s, and an arm
            // guarded by `self.training` is training-only code.
            Stmt::Match(m) => {
                self.visit_expr(&m.subject);
                for c in &m.cases {
                    self.visit_pattern(&c.pattern);
                    let mut training = false;
                    if let Some(guard) = &c.guard {
                        let at = ruff_text_size::Ranged::start(&**guard);
                        self.on_test(guard, "case ... if", &c.body, &[], at);
                        self.visit_expr(guard);
                        training = guard_of(guard) == Guard::Training;
                    }
                    if training {
                        self.visit_guarded(&c.body, false);
                    } else {
                        self.visit_body(&c.body);
                    }
                }
            }
            Stmt::While(w) => {
                self.on_test(&w.test, "while", &[], &[], w.range.start());
                // `i = 0; while i < x.size(0): h[i, :warm[i]] = 0; i += 1`: a loop over `i`, as
                // `for i in range(x.size(0))` is.
                let counted = match w.test.as_ref() {
                    Expr::Compare(c)
                        if matches!(c.ops[..], [ast::CmpOp::Lt | ast::CmpOp::LtE])
                            && counts_up(&w.body, &c.left) =>
                    {
                        c.left
                            .as_name_expr()
                            .map(|n| (n.id.to_string(), &c.comparators[0]))
                    }
                    _ => None,
                };
                let Some((counter, bound)) = counted else {
                    return visitor::walk_stmt(self, stmt);
                };
                self.visit_expr(&w.test);
                let over_samples =
                    self.in_model() && (self.is_size(bound) || self.is_frozen_int(bound));
                self.loops.push(LoopInfo {
                    targets: vec![counter],
                    assigned: assigned_names(&w.body),
                    over_samples,
                    rows: Vec::new(),
                    data_rows: Vec::new(),
                });
                self.visit_body(&w.body);
                self.loops.pop();
                self.visit_body(&w.orelse);
            }
            _ => visitor::walk_stmt(self, stmt),
        }
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Call(c) => self.on_call(c),
            // `a if self.training else b`: the two sides play the branches' part.
            Expr::If(i) if self.torch_imported => {
                let (body, orelse) = ([expr_stmt(&i.body)], [expr_stmt(&i.orelse)]);
                self.on_test(
                    &i.test,
                    "conditional expression",
                    &body,
                    &orelse,
                    i.range.start(),
                );
            }
            Expr::Subscript(s) if matches!(s.ctx, ast::ExprContext::Load) => {
                rules::data_dependent_shape::check_subscript_load(self, s)
            }
            // A lambda in model code (`widen = lambda t: t.repeat_interleave(2, -1)`) runs in
            // the trace when it is called; elsewhere it is not model code.
            Expr::Lambda(l) => {
                if self.in_model() {
                    self.visit_lambda(l, false);
                }
                return;
            }
            // Export arguments may be built in a file that does not import torch.
            Expr::Dict(d) => {
                rules::keep_initializers_as_inputs::check_dict(self, d);
                rules::opset_too_low::check_dict(self, d);
            }
            // `self.training and torch.rand(1).item() < p`: what follows the guard is only
            // evaluated in training, so it is not model code.
            Expr::BoolOp(b)
                if matches!(b.op, ast::BoolOp::And)
                    && b.values
                        .iter()
                        .any(|v| Checker::is_self_attr(v, "training")) =>
            {
                let guard = b
                    .values
                    .iter()
                    .position(|v| Checker::is_self_attr(v, "training"))
                    .unwrap_or(0);
                for v in &b.values[..=guard] {
                    self.visit_expr(v);
                }
                let was = self.fns.last().is_some_and(|f| f.in_model);
                if let Some(f) = self.fns.last_mut() {
                    f.in_model = false;
                }
                for v in &b.values[guard + 1..] {
                    self.visit_expr(v);
                }
                if let Some(f) = self.fns.last_mut() {
                    f.in_model = was;
                }
                return;
            }
            // `[int(c) for c in valid.sum(1)]`: the variable of a comprehension over a tensor is
            // a tensor (its elements) inside the comprehension.
            Expr::ListComp(ast::ExprListComp { generators, .. })
            | Expr::SetComp(ast::ExprSetComp { generators, .. })
            | Expr::DictComp(ast::ExprDictComp { generators, .. })
            | Expr::Generator(ast::ExprGenerator { generators, .. })
                if self.in_model() =>
            {
                // Also `for h, m in zip(hours, mins)` and `for i, row in enumerate(x)`.
                let builtin = |c: &ast::ExprCall, name: &str| {
                    matches!(c.func.as_ref(), Expr::Name(f) if f.id.as_str() == name)
                        && !self.imports.contains_key(name)
                };
                // Generator by generator, so that `for r in row` after `for row in x` knows
                // `row` for a tensor.
                let mut added: Vec<String> = Vec::new();
                // `[s for s in self.strides if s > 4]` after `s = x.softmax(-1)`: the variable
                // shadows the function's tensor inside the comprehension.
                let mut shadowed_tensors: Vec<String> = Vec::new();
                for g in generators {
                    let mut over: Vec<(&Expr, &Expr)> = Vec::new();
                    match (&g.target, &g.iter) {
                        (Expr::Tuple(t), Expr::Call(c))
                            if builtin(c, "zip") && t.elts.len() == c.arguments.args.len() =>
                        {
                            over.extend(t.elts.iter().zip(c.arguments.args.iter()));
                        }
                        (Expr::Tuple(t), Expr::Call(c))
                            if builtin(c, "enumerate") && t.elts.len() == 2 =>
                        {
                            if let Some(a) = c.arguments.args.first() {
                                over.push((&t.elts[1], a));
                            }
                        }
                        (target, iter) => over.push((target, iter)),
                    }
                    // `[k for k, v in outs.items() if v.sum() > 0]` over a dict of tensors: its
                    // values are tensors.
                    let mut dict_values: Vec<&Expr> = Vec::new();
                    if let Expr::Call(c) = &g.iter {
                        if let Some((m @ ("items" | "values"), Expr::Name(d))) = self.method(c) {
                            if c.arguments.is_empty()
                                && self.state().tensor_dicts.contains(d.id.as_str())
                            {
                                match (m, &g.target) {
                                    ("items", Expr::Tuple(t)) if t.elts.len() == 2 => {
                                        dict_values.push(&t.elts[1]);
                                    }
                                    ("values", t) => dict_values.push(t),
                                    _ => {}
                                }
                            }
                        }
                    }
                    // Over a tensor, or a list of tensors: a container handed in (`feats:
                    // List[Tensor]`) or bound to lists (`[x, y]`, `sorted(feats)`, `feats +
                    // [z]`); not a dict of tensors (`tensor_dicts`), whose iteration gives keys.
                    let list_of_tensors = |n: &str| {
                        self.state().containers.contains(n)
                            && !self.state().tensor_dicts.contains(n)
                            && self.bodies.last().is_some_and(|body| {
                                rules::bound_values(body, n).iter().all(|v| {
                                    matches!(v, Expr::List(_) | Expr::ListComp(_) | Expr::Tuple(_) | Expr::BinOp(_))
                                        || matches!(v, Expr::Call(c) if matches!(c.func.as_ref(),
                                            Expr::Name(f) if matches!(f.id.as_str(), "sorted" | "list" | "tuple" | "reversed")))
                                })
                            })
                    };
                    let of_tensors = |iter: &Expr| {
                        self.is_tensor(iter)
                            || matches!(iter, Expr::Name(n) if list_of_tensors(n.id.as_str()))
                            || matches!(iter, Expr::List(l) if !l.elts.is_empty() && l.elts.iter().all(|e| self.is_tensor(e)))
                    };
                    let mut tensor_targets: Vec<String> = Vec::new();
                    for v in dict_values {
                        collect_names(v, &mut tensor_targets);
                    }
                    for (target, iter) in over {
                        match target {
                            Expr::Name(n) if of_tensors(iter) => {
                                tensor_targets.push(n.id.to_string());
                            }
                            // `for start, end in spans` over a tensor: its rows unpacked.
                            Expr::Tuple(_) | Expr::List(_) if self.is_tensor(iter) => {
                                collect_names(target, &mut tensor_targets);
                            }
                            _ => {}
                        }
                    }
                    let mut names = Vec::new();
                    collect_names(&g.target, &mut names);
                    if let Some(f) = self.fns.last_mut() {
                        for n in names {
                            let tensor = tensor_targets.contains(&n);
                            let known = f.tensors.contains(&n);
                            if tensor && !known {
                                f.tensors.insert(n.clone());
                                added.push(n);
                            } else if !tensor && known && !added.contains(&n) {
                                f.tensors.remove(&n);
                                shadowed_tensors.push(n);
                            }
                        }
                    }
                }
                // `[int(c.score) for c in self.cfgs]`: the variable shadows a record `c`.
                let mut shadowed: Vec<(String, String)> = Vec::new();
                if !self.state().records.is_empty() {
                    let mut names = Vec::new();
                    for g in generators {
                        collect_names(&g.target, &mut names);
                    }
                    if let Some(f) = self.fns.last_mut() {
                        shadowed.extend(
                            names
                                .into_iter()
                                .filter_map(|n| f.records.remove(&n).map(|c| (n, c))),
                        );
                    }
                }
                // `[j for j in range(n) if labels[j] < 2]`: a filter on a tensor's value keeps
                // the items the example kept.
                for g in generators {
                    for cond in &g.ifs {
                        rules::tensor_condition::check_test(
                            self,
                            cond,
                            "for ... if",
                            ruff_text_size::Ranged::start(cond),
                        );
                    }
                }
                visitor::walk_expr(self, expr);
                if let Some(f) = self.fns.last_mut() {
                    for n in &added {
                        f.tensors.remove(n);
                    }
                    f.tensors.extend(shadowed_tensors);
                    f.records.extend(shadowed);
                }
                return;
            }
            _ => {}
        }
        visitor::walk_expr(self, expr);
    }
}

/// How an `if` test splits model code: branches only run in training, or only outside export.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Guard {
    /// `if self.training [and ...]`: the body is training-only.
    Training,
    /// `if not self.training`: the else branch is training-only.
    NotTraining,
    /// `torch.jit.is_tracing()`, `torch.onnx.is_in_onnx_export()`, `is_scripting()`, ...:
    /// the code is written with export in mind; neither branch is flagged.
    ExportAware,
    None,
}

/// `Some(true)` for a test that is `torch.jit.is_scripting()` alone, `Some(false)` for its `not`:
/// neither exporter scripts, so the trace takes the other branch.
fn scripting_test(test: &Expr) -> Option<bool> {
    lone_check(test)
        .filter(|(name, _)| *name == "is_scripting")
        .map(|(_, negated)| !negated)
}

/// The name of the call [`spell_export_flags`] puts in place of a module flag named for export.
pub(crate) const EXPORT_FLAG: &str = "__onnx_doctor_export_flag__";

/// Whether a test reads such a flag.
fn mentions_export_flag(test: &Expr) -> bool {
    rules::any_sub_expr(
        test,
        |e| matches!(e, Expr::Call(c) if matches!(c.func.as_ref(), Expr::Name(n) if n.id.as_str() == EXPORT_FLAG)),
    )
}

/// Whether a test is `torch.compiler.is_compiling()`/`is_exporting()` alone (or negated): false
/// in the TorchScript exporter's trace, true in the dynamo exporter's, so either branch may be
/// exported and both are checked.
pub(crate) fn exporter_dependent(test: &Expr) -> bool {
    lone_check(test).is_some_and(|(name, _)| {
        matches!(
            name,
            "is_compiling" | "is_dynamo_compiling" | "is_exporting"
        )
    })
}

/// A test that is one argument-less call alone, or its `not`: the function's name, and whether
/// it is negated (`not torch.jit.is_scripting()` → `("is_scripting", true)`).
fn lone_check(test: &Expr) -> Option<(&str, bool)> {
    match test {
        Expr::Call(c) if c.arguments.is_empty() => match c.func.as_ref() {
            Expr::Attribute(a) => Some((a.attr.id.as_str(), false)),
            Expr::Name(n) => Some((n.id.as_str(), false)),
            _ => None,
        },
        Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::Not) => {
            lone_check(&u.operand).map(|(name, negated)| (name, !negated))
        }
        _ => None,
    }
}

/// The value an export-aware test has in the TorchScript exporter's trace, when the test says
/// ([`export_polarity`], then `is_scripting()` alone, which is false there).
fn traced_polarity(test: &Expr) -> Option<bool> {
    export_polarity(test).or_else(|| scripting_test(test).map(|v| !v))
}

pub(crate) fn guard_of(test: &Expr) -> Guard {
    fn is_training(e: &Expr) -> bool {
        Checker::is_self_attr(e, "training")
    }
    fn export_check(e: &Expr) -> bool {
        match e {
            Expr::Call(c) => {
                let name = match c.func.as_ref() {
                    Expr::Attribute(a) => a.attr.id.as_str(),
                    Expr::Name(n) => n.id.as_str(),
                    _ => return false,
                };
                matches!(
                    name,
                    "is_tracing"
                        | "_is_tracing"
                        | "is_in_onnx_export"
                        | "_get_tracing_state"
                        | "is_scripting"
                        | "is_compiling"
                        | "is_exporting"
                        | "is_dynamo_compiling"
                        | EXPORT_FLAG
                )
            }
            Expr::UnaryOp(u) => export_check(&u.operand),
            Expr::BoolOp(b) => b.values.iter().any(export_check),
            _ => false,
        }
    }
    if export_check(test) {
        return Guard::ExportAware;
    }
    // `if targets is not None:`: ground truth is only given when training or evaluating a loss.
    fn targets_given(e: &Expr) -> bool {
        match e {
            Expr::Compare(c) if c.ops.len() == 1 && matches!(c.ops[0], ast::CmpOp::IsNot) => {
                matches!(c.comparators[0], Expr::NoneLiteral(_))
                    && matches!(c.left.as_ref(), Expr::Name(n) if {
                        let id = n.id.as_str();
                        id.starts_with("target") || id.starts_with("gt_") || id == "labels" || id == "ground_truth"
                    })
            }
            _ => false,
        }
    }
    match test {
        e if is_training(e) || targets_given(e) => Guard::Training,
        Expr::BoolOp(b) if matches!(b.op, ast::BoolOp::And) && b.values.iter().any(is_training) => {
            Guard::Training
        }
        Expr::UnaryOp(u) if matches!(u.op, ast::UnaryOp::Not) && is_training(&u.operand) => {
            Guard::NotTraining
        }
        // `if not self.training or self.p == 0.0: return x`: true whenever in eval mode.
        Expr::BoolOp(b)
            if matches!(b.op, ast::BoolOp::Or)
                && b.values.iter().any(|v| guard_of(v) == Guard::NotTraining) =>
        {
            Guard::NotTraining
        }
        _ => Guard::None,
    }
}

fn m_name(c: &ast::ExprCall) -> &str {
    match c.func.as_ref() {
        Expr::Attribute(a) => a.attr.id.as_str(),
        _ => "",
    }
}

/// `x` for `self.x`.
pub(crate) fn self_attr(e: &Expr) -> Option<&str> {
    match e {
        Expr::Attribute(a) if is_self(&a.value) => Some(a.attr.id.as_str()),
        _ => None,
    }
}

pub(crate) fn is_self(e: &Expr) -> bool {
    matches!(e, Expr::Name(n) if n.id.as_str() == "self")
}

fn is_self_chain(e: &Expr) -> bool {
    match e {
        Expr::Name(n) => n.id.as_str() == "self",
        // `super().forward(*inputs)`: the module's own method, as `self.forward` is.
        Expr::Call(c) => {
            matches!(c.func.as_ref(), Expr::Name(f) if f.id.as_str() == "super")
                && c.arguments.is_empty()
        }
        Expr::Attribute(a) => is_self_chain(&a.value),
        Expr::Subscript(s) => is_self_chain(&s.value),
        _ => false,
    }
}

fn collect_names(e: &Expr, out: &mut Vec<String>) {
    match e {
        Expr::Name(n) => out.push(n.id.to_string()),
        Expr::Tuple(t) => t.elts.iter().for_each(|x| collect_names(x, out)),
        Expr::List(t) => t.elts.iter().for_each(|x| collect_names(x, out)),
        Expr::Starred(s) => collect_names(&s.value, out),
        _ => {}
    }
}

impl<'a> Checker<'a> {
    /// Visits a lambda's body as model code, seeing the enclosing function's names. With
    /// `tensor_params` (a lambda model code calls as a submodule, `self.up(x)`) its parameters
    /// are tensors unless named for sizes or numbers; a lambda written in `forward` may be a
    /// `key=` over names or numbers, so its parameters are not taken for anything.
    fn visit_lambda(&mut self, l: &'a ast::ExprLambda, tensor_params: bool) {
        let mut st = FnState {
            in_model: true,
            name: "<lambda>".into(),
            ..FnState::default()
        };
        if let Some(outer) = self.fns.last().filter(|f| f.in_model) {
            st.tensors = outer.tensors.clone();
            st.bools = outer.bools.clone();
            st.sizes = outer.sizes.clone();
            st.frozen = outer.frozen.clone();
            st.frozen_sizes = outer.frozen_sizes.clone();
            st.containers = outer.containers.clone();
            st.records = outer.records.clone();
        }
        if let Some(outer) = self.fns.last() {
            st.torch_aliases = outer.torch_aliases.clone();
        }
        if let Some(params) = &l.parameters {
            for p in params.iter_non_variadic_params() {
                let name = p.parameter.name.id.as_str();
                st.torch_aliases.remove(name);
                st.frozen.remove(name);
                st.frozen_sizes.remove(name);
                st.sizes.remove(name);
                st.tensors.remove(name);
                st.bools.remove(name);
                st.containers.remove(name);
                st.records.remove(name);
                if !tensor_params
                    || p.default.is_some()
                    || names_a_size(name)
                    || names_a_number(name)
                {
                    continue;
                }
                st.tensors.insert(name.to_string());
                st.params.insert(name.to_string());
            }
        }
        self.fns.push(st);
        self.visit_expr(&l.body);
        self.fns.pop();
    }

    /// Whether `<self>.<attr>` (the enclosing method's first parameter, `self` or `s`) is called
    /// by a method of the class that is model code (`self.up(x)` in `forward`).
    fn model_calls_attribute(&self, target: &ast::ExprAttribute) -> bool {
        let (Some(class), Some(def)) = (self.classes.last(), self.defs.last()) else {
            return false;
        };
        let Some(first) = def.parameters.args.first() else {
            return false;
        };
        if !matches!(target.value.as_ref(), Expr::Name(n) if n.id == first.parameter.name.id) {
            return false;
        }
        let Some(methods) = self.class_methods.last() else {
            return false;
        };
        let attr = target.attr.id.as_str();
        // Called on the same receiver name (`self.up(x)`; `s.up(x)` in a class written with
        // `s`), not `x.clip(-1, 1)` on a tensor.
        let receiver = first.parameter.name.id.as_str();
        methods.iter().any(|(name, body)| {
            self.model_fns
                .contains(&(Some(class.clone()), name.clone()))
                && calls_attribute(body, receiver, attr)
        })
    }

    /// Visits a branch; with `on == false` the branch is not model code (training-only or
    /// eager-only), so no rule that needs model code fires inside it.
    fn visit_guarded(&mut self, body: &'a [Stmt], on: bool) {
        let was = self.fns.last().is_some_and(|f| f.in_model);
        let guards = !on && was;
        if let Some(f) = self.fns.last_mut() {
            if !on {
                f.in_model = false;
            }
            f.guarded += u32::from(guards);
        }
        self.visit_body(body);
        if let Some(f) = self.fns.last_mut() {
            f.in_model = was;
            f.guarded -= u32::from(guards);
        }
    }

    fn on_call(&mut self, call: &'a ast::ExprCall) {
        if !self.torch_imported {
            // `ONNX_KW = dict(opset_version=11, ...)` in a config module without torch.
            rules::keep_initializers_as_inputs::check_call(self, call);
            rules::opset_too_low::check_call(self, call);
            return;
        }
        rules::tensor_to_python::check_call(self, call);
        rules::inplace_index_write::check_call(self, call);
        rules::data_dependent_shape::check_call(self, call);
        rules::repeat_interleave::check_call(self, call);
        rules::einsum::check_call(self, call);
        rules::mha_fast_path::check_call(self, call);
        rules::grid_sample::check_call(self, call);
        rules::deprecated_upsample::check_call(self, call);
        rules::interpolate_align_corners::check_call(self, call);
        rules::device_literal::check_call(self, call);
        rules::python_int_size::check_call(self, call);
        rules::export_without_eval::check_call(self, call);
        rules::dynamic_axes_unknown_name::check_call(self, call);
        rules::keep_initializers_as_inputs::check_call(self, call);
        rules::opset_too_low::check_call(self, call);
    }

    fn on_subscript_store(&mut self, target: &'a ast::ExprSubscript, stmt: &'a Stmt, aug: bool) {
        if !self.torch_imported {
            return;
        }
        if rules::mask_index_assignment::check_store(self, target, stmt, aug) {
            // `x[mask] += v` is an indexed in-place update as well as a masked write.
            if aug {
                rules::inplace_index_write::check_aug_store(self, target);
            }
            return;
        }
        if rules::loop_slice_assignment::check_store(self, target, aug) {
            return;
        }
        if aug {
            rules::inplace_index_write::check_aug_store(self, target);
        }
    }

    /// `keyword`: where the `if`, `elif` or `while` starts (where the whole expression starts,
    /// for a conditional expression), the line a test spread over several lines is reported on.
    fn on_test(
        &mut self,
        test: &Expr,
        kind: &str,
        body: &[Stmt],
        orelse: &[Stmt],
        keyword: TextSize,
    ) {
        // A test whose value under export is known before it reads anything else (`if not
        // torch.jit.is_tracing() and (p < 0).any():`, `if torch.jit.is_tracing() or
        // self.training:`) never reads a tensor or picks a mode there.
        if !self.torch_imported || decided_unread(test) {
            return;
        }
        if rules::training_branch::check_test(self, test, kind, body, orelse) {
            // `if not self.training and (a - b).abs().mean() > t:` tests a tensor in eval mode,
            // the mode export traces.
            for operand in rules::training_branch::eval_operands(test) {
                rules::tensor_condition::check_test(self, operand, kind, keyword);
            }
            return;
        }
        rules::tensor_condition::check_test(self, test, kind, keyword);
    }
}
