//! PyTorch source rules for ONNX export hazards, on `ruff_python_parser`, and the knowledge base
//! behind `onnx-doctor explain`.
//!
//! A file is parsed once; one walk ([`checker`]) resolves names through the file's imports,
//! decides which functions are model code (`forward` and what it calls) and calls each rule's
//! hook. Rules live one per file under `rules/` with their documentation as the file's `//!`
//! comment; [`registry::RULES`] is the one table of codes, severities and fix safety.
//! Project-level rules (an export's `opset_version` against ops used anywhere in the linted
//! files) run after every file is checked.
//!
//! **Architecture Invariant:** this crate knows nothing of ONNX models; it reads Python source
//! and error text and produces `diagnostics::Diagnostic`s.

mod cache;
mod checker;
pub mod explain;
pub mod registry;
mod rules;

pub use cache::LintCache;
pub use checker::{ExportSite, Facts};
pub use registry::{rule, FixKind, Rule, RULES, SECTIONS};

use diagnostics::{Diagnostic, Location};
use rayon::prelude::*;
use ruff_python_ast::{Expr, Stmt};
/// Every table the checker keeps is keyed by identifiers: FxHash instead of SipHash (hashing was
/// about 5 % of `lint` on the torch package; see docs/performance.md).
pub(crate) use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// One replacement of a byte range of a file's text.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Edit {
    pub start: usize,
    pub end: usize,
    pub content: String,
}

/// A diagnostic and the edits of its fix (empty when the fix is only described).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Finding {
    pub diagnostic: Diagnostic,
    pub edits: Vec<Edit>,
}

impl Finding {
    pub fn line(&self) -> usize {
        match self.diagnostic.location {
            Location::Source { line, .. } => line,
            _ => 0,
        }
    }
}

/// A use of an op that needs at least `min_opset` to export.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct OpsetNeed {
    pub op: std::borrow::Cow<'static, str>,
    pub min_opset: u32,
    pub file: String,
    pub line: usize,
}

/// Byte offsets of line starts, for 1-based line/column positions in one text. The starts are
/// found on the first position asked for: most files have no finding, and scanning every file
/// for its lines was 6 % of `lint` on the torch package.
#[derive(Debug, Clone, Default)]
pub struct LineIndex {
    starts: std::cell::OnceCell<Vec<usize>>,
}

impl LineIndex {
    /// 1-based line and column (in characters) of a byte offset of `text` (always the same text
    /// for one index).
    pub fn line_col(&self, text: &str, offset: usize) -> (usize, usize) {
        let starts = self.starts.get_or_init(|| {
            let mut starts = vec![0];
            starts.extend(
                text.bytes()
                    .enumerate()
                    .filter(|&(_, b)| b == b'\n')
                    .map(|(i, _)| i + 1),
            );
            starts
        });
        let line = starts.partition_point(|&s| s <= offset).max(1);
        let start = starts[line - 1];
        let col = text
            .get(start..offset.min(text.len()))
            .map_or(1, |s| s.chars().count() + 1);
        (line, col)
    }
}

/// The findings of one file, before noqa and selection.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct FileLint {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub findings: Vec<Finding>,
    #[serde(default, skip_serializing_if = "Facts::is_empty")]
    pub facts: Facts,
    /// Helpers of other files this file's model code calls (for the project pass).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    calls: Vec<checker::ImportedCall>,
    /// This file's module-level functions annotated as returning tensors (for importers).
    #[serde(default, skip_serializing_if = "crate::HashMap::is_empty")]
    returns: crate::HashMap<String, Vec<bool>>,
    /// This file's module-level functions without a return annotation (for importers: called on
    /// tensors, they most likely return one).
    #[serde(default, skip_serializing_if = "crate::HashSet::is_empty")]
    unannotated: crate::HashSet<String>,
    /// This file's functions (and methods, as `Class.method`) that return sizes as Python numbers
    /// (for importers, which look up the functions).
    #[serde(default, skip_serializing_if = "crate::HashMap::is_empty")]
    frozen_returns: crate::HashMap<String, Vec<bool>>,
    /// This file's functions (and methods) that return masks, by element (for importers).
    #[serde(default, skip_serializing_if = "crate::HashMap::is_empty")]
    mask_returns: crate::HashMap<String, Vec<bool>>,
    /// Every import of another module (for the project-level opset check).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    imports: Vec<checker::ImportedCall>,
    /// Methods this file's model code calls on submodules (for the files it imports), also as
    /// `Class.method` when the submodule was built from a class by name.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    method_calls: Vec<String>,
    /// Methods of this file's module classes (those with a `forward`), other than dunders, and
    /// as `Class.method` those of `nn.Module` classes without a `forward`.
    #[serde(default, skip_serializing_if = "crate::HashSet::is_empty")]
    module_methods: crate::HashSet<String>,
    /// This file's module-level functions that leave a module in eval mode (for importers' ODL017).
    #[serde(default, skip_serializing_if = "crate::HashSet::is_empty")]
    eval_helpers: crate::HashSet<String>,
    /// Names this file imports from other modules, when it exports (for ODL017's helpers).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    imported_names: Vec<checker::ImportedCall>,
    /// How this file's functions fill the arguments of functions it does not define, by the
    /// callee's spelling here (for the files defining them).
    #[serde(default, skip_serializing_if = "crate::HashMap::is_empty")]
    argument_kinds: crate::HashMap<String, checker::ArgumentKinds>,
    /// Names this file takes from other modules at its top level (`from .ops import *`, `from
    /// .ops import warp_by_flow as warp`): a package's re-exports, followed by importers.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    reexports: Vec<checker::ImportedCall>,
    /// This file's module-level functions annotated to return a list or dict of tensors (for
    /// importers).
    #[serde(default, skip_serializing_if = "crate::HashSet::is_empty")]
    container_returns: crate::HashSet<String>,
    /// This file's record classes: dataclasses, `NamedTuple`s, `TypedDict`s with tensor fields
    /// (for importers).
    #[serde(default, skip_serializing_if = "crate::HashMap::is_empty")]
    records: crate::HashMap<String, checker::Record>,
    /// Classes and modules this file's model code may take records from (`from .ops import
    /// PartialTrack`, `import ops as mops`), when it defines models.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    record_imports: Vec<checker::ImportedCall>,
}

/// Lints one file's text. `file` is the name findings carry. Unparseable Python is a finding
/// (`ODL000`), never a panic.
pub fn lint_source(file: &str, source: &str) -> FileLint {
    let lint = || lint_parsed(file, source, parse(source), &checker::Project::default());
    match lint_pool() {
        Some(pool) => pool.install(lint),
        // Called from outside the global pool, `join` runs on one of its threads.
        None => rayon::join(lint, || ()).0,
    }
}

type Parsed =
    Result<ruff_python_parser::Parsed<ruff_python_ast::ModModule>, ruff_python_parser::ParseError>;

fn parse(source: &str) -> Parsed {
    // The parser grows its own stack; the checks and the syntax tree's drop recurse as deep as
    // the code nests, on [`LINT_STACK`]. A file cannot nest deeper than it has bytes, so only
    // long ones are measured.
    // The tree is measured whether or not the file has syntax errors: a partial tree is
    // dropped too.
    let parsed =
        ruff_python_parser::parse_unchecked_source(source, ruff_python_ast::PySourceType::Python);
    let too_deep = if source.len() > NEST_FREE_BYTES {
        nested_too_deeply(parsed.syntax())
    } else {
        None
    };
    if let Some(at) = too_deep {
        // Dropping the tree would recurse as deep as it nests: it is left to the end of the
        // process (a file no CPython compiles).
        std::mem::forget(parsed);
        return Err(ruff_python_parser::ParseError {
            error: ruff_python_parser::ParseErrorType::OtherError(format!(
                "nested more than {MAX_NESTING} levels deep (CPython refuses such nesting)"
            )),
            location: ruff_text_size::TextRange::empty(at),
        });
    }
    match parsed.errors().first() {
        None => Ok(parsed),
        Some(e) => Err(e.clone()),
    }
}

/// Files up to this long are not measured by [`nested_too_deeply`]: 64 Ki levels fit in
/// [`LINT_STACK`] with room to spare (100,000 unary minuses lint in a debug build).
const NEST_FREE_BYTES: usize = 64 << 10;
/// How deep statements and expressions may nest in a long file: past what CPython compiles
/// (3.11 and 3.12 stop at about 3,000 levels, 3.13 short of 10,000), well short of what
/// [`LINT_STACK`] holds.
const MAX_NESTING: usize = 10_000;

/// Where a syntax tree first nests deeper than [`MAX_NESTING`], measured on a stack that grows
/// as needed.
fn nested_too_deeply(module: &ruff_python_ast::ModModule) -> Option<ruff_text_size::TextSize> {
    use ruff_python_ast::visitor::{self, Visitor};
    use ruff_text_size::Ranged as _;
    struct Depth {
        depth: usize,
        at: Option<ruff_text_size::TextSize>,
    }
    impl Depth {
        fn enter(&mut self, at: ruff_text_size::TextSize, walk: impl FnOnce(&mut Self)) {
            if self.at.is_some() {
                return;
            }
            self.depth += 1;
            if self.depth > MAX_NESTING {
                self.at = Some(at);
            } else {
                stacker::maybe_grow(64 << 10, 1 << 20, || walk(self));
            }
            self.depth -= 1;
        }
    }
    impl<'a> Visitor<'a> for Depth {
        fn visit_stmt(&mut self, s: &'a ruff_python_ast::Stmt) {
            self.enter(s.range().start(), |v| visitor::walk_stmt(v, s));
        }
        fn visit_expr(&mut self, e: &'a ruff_python_ast::Expr) {
            self.enter(e.range().start(), |v| visitor::walk_expr(v, e));
        }
        fn visit_pattern(&mut self, p: &'a ruff_python_ast::Pattern) {
            self.enter(p.range().start(), |v| visitor::walk_pattern(v, p));
        }
    }
    let mut d = Depth { depth: 0, at: None };
    d.visit_body(&module.body);
    d.at
}

/// Lints a parsed file; `project` says which of its functions and classes other files' model code
/// calls.
fn lint_parsed(file: &str, source: &str, parsed: Parsed, project: &checker::Project) -> FileLint {
    let index = LineIndex::default();
    let mut module = match parsed {
        Ok(p) => p.into_syntax(),
        Err(e) => {
            let (line, column) = index.line_col(source, e.location.start().to_usize());
            let d = Diagnostic::new(
                rules::syntax_error::RULE.code,
                rules::syntax_error::RULE.severity,
                format!("cannot parse Python: {}", e.error),
                Location::Source {
                    file: file.to_string(),
                    line,
                    column,
                },
            );
            return FileLint {
                findings: vec![Finding {
                    diagnostic: d,
                    edits: vec![],
                }],
                facts: Facts::default(),
                calls: Vec::new(),
                returns: Default::default(),
                unannotated: Default::default(),
                frozen_returns: Default::default(),
                mask_returns: Default::default(),
                imports: Vec::new(),
                method_calls: Vec::new(),
                module_methods: Default::default(),
                eval_helpers: Default::default(),
                imported_names: Vec::new(),
                argument_kinds: Default::default(),
                reexports: Vec::new(),
                records: Default::default(),
                record_imports: Vec::new(),
                container_returns: Default::default(),
            };
        }
    };
    checker::spell_self(&mut module.body);
    checker::spell_training(&mut module.body, source);
    checker::spell_export_flags(&mut module.body);
    checker::spell_mode_locals(&mut module.body, source);
    let module = &module;
    let mut ch = checker::Checker::new(source, file, &index, &module.body, project);
    // What the module's imports bind, read once for its model code's calls and its re-exports.
    let import_maps = checker::import_maps(&module.body);
    let calls =
        checker::imported_model_calls(&module.body, import_maps.as_ref(), ch.model_functions());
    let returns = ch.module_returns();
    let unannotated = ch.unannotated_functions().clone();
    let frozen_returns = ch.module_frozen_returns();
    let mask_returns = ch.module_mask_returns();
    let imports = checker::project_imports(&module.body);
    let method_calls = checker::submodule_method_calls(&module.body, ch.model_functions());
    let module_methods = checker::module_methods(&module.body);
    let defines_models = !ch.model_functions().is_empty();
    let eval_helpers = rules::export_without_eval::eval_helpers(source, &module.body);
    let records = ch.module_records().clone();
    let container_returns = ch.module_container_returns();
    // Only model code's calls to other files' helpers are told to them.
    let argument_kinds = if calls.is_empty() {
        Default::default()
    } else {
        ch.imported_argument_kinds()
    };
    ch.run(&module.body);
    let mut facts = ch.facts;
    facts.defines_models = defines_models;
    let imported_names = if facts.exports.is_empty() {
        Vec::new()
    } else {
        checker::imported_names(&module.body)
    };
    // Class-like names a model file imports (`from .ops import StrikeOutput`), and those its
    // annotations read through a module it imports (`import ops as mops` then `pyr:
    // mops.Pyramid`), as imports of that name.
    let record_imports = if defines_models {
        let all = if facts.exports.is_empty() {
            checker::imported_names(&module.body)
        } else {
            imported_names.clone()
        };
        record_imports(&module.body, all)
    } else {
        Vec::new()
    };
    FileLint {
        findings: ch.findings,
        facts,
        calls,
        returns,
        unannotated,
        frozen_returns,
        mask_returns,
        imports,
        method_calls,
        module_methods,
        eval_helpers,
        imported_names,
        argument_kinds,
        reexports: checker::reexports(import_maps.as_ref()),
        records,
        record_imports,
        container_returns,
    }
}

/// The imports a file may take records from: class-like names it imports (`from .ops import
/// Track`; the project pass resolves only names some file defines a record by), and class-like
/// names its annotations read through a module it imports (`pyr: mops.Pyramid` after `import
/// ops as mops`), as imports of that name.
fn record_imports(
    module: &[Stmt],
    imports: Vec<checker::ImportedCall>,
) -> Vec<checker::ImportedCall> {
    let (mut out, modules): (Vec<_>, Vec<_>) = imports
        .into_iter()
        .filter(|i| i.name.is_empty() || checker::class_like(&i.name))
        .partition(|i| !i.name.is_empty());
    if modules.is_empty() {
        return out;
    }
    let mut through: Vec<(usize, String)> = Vec::new();
    let mut note = |e: &Expr| {
        checker::for_each_sub_expr(e, &mut |e| {
            let (alias, name) = match e {
                Expr::Attribute(a) => match a.value.as_ref() {
                    Expr::Name(m) => (m.id.as_str(), a.attr.id.as_str()),
                    _ => return,
                },
                // `"mops.Pyramid"`
                Expr::StringLiteral(s) => match s.value.to_str().split_once('.') {
                    Some((m, n)) if !n.contains(['.', '[']) => (m, n),
                    _ => return,
                },
                _ => return,
            };
            if !checker::class_like(name) {
                return;
            }
            if let Some(k) = modules.iter().position(|m| m.callee == alias) {
                if !through.iter().any(|(j, n)| *j == k && n == name) {
                    through.push((k, name.to_string()));
                }
            }
        });
    };
    checker::for_each_annotation(module, &mut note);
    out.extend(through.into_iter().map(|(k, name)| checker::ImportedCall {
        level: modules[k].level,
        module: modules[k].module.clone(),
        callee: format!("{}.{name}", modules[k].callee),
        name,
    }));
    out
}

/// Tells a file the record `name` of file `i` under `spelled`, with the records its fields hold
/// under their `i#Class` names, a few levels deep.
fn tell_record(
    told: &mut crate::HashMap<String, checker::Record>,
    spelled: String,
    i: usize,
    name: &str,
    defined: &crate::HashMap<String, checker::Record>,
    depth: usize,
) {
    let Some(rec) = defined.get(name) else { return };
    let mut rec = rec.clone();
    for nested in rec.records.values_mut() {
        let key = format!("{i}#{nested}");
        if depth < 3 && !told.contains_key(&key) {
            tell_record(told, key.clone(), i, nested, defined, depth + 1);
        }
        *nested = key;
    }
    told.insert(spelled, rec);
}

/// Whether `from <call.module> import ...` written in `importer` (relative when `call.level` > 0)
/// names the file `target`: `from .utils import f` in `pkg/model.py` is `pkg/utils.py`,
/// `from pkg.utils import f` is any `.../pkg/utils.py` (or `pkg/utils/__init__.py`).
fn import_resolves_to(importer: &Path, call: &checker::ImportedCall, target: &Path) -> bool {
    if target == importer || call.module.is_empty() {
        return false;
    }
    let parts: Vec<&str> = call.module.split('.').collect();
    let stem_matches = |t: &Path| -> Option<PathBuf> {
        // The directory that must hold the module's first component.
        let mut dir = if t.file_name().is_some_and(|n| n == "__init__.py") {
            t.parent()?.to_path_buf()
        } else {
            t.with_extension("")
        };
        for part in parts.iter().rev() {
            if dir.file_name().is_none_or(|n| n != *part) {
                return None;
            }
            dir = dir.parent().map(Path::to_path_buf).unwrap_or_default();
        }
        Some(dir)
    };
    let Some(base) = stem_matches(target) else {
        return false;
    };
    if call.level == 0 {
        return true;
    }
    // Relative: the module's base directory is the importer's package, `level - 1` levels up.
    let mut package = importer.parent().map(Path::to_path_buf).unwrap_or_default();
    for _ in 1..call.level {
        package = package.parent().map(Path::to_path_buf).unwrap_or_default();
    }
    normalize(&package) == normalize(&base)
}

fn normalize(p: &Path) -> PathBuf {
    p.components()
        .filter(|c| !matches!(c, std::path::Component::CurDir))
        .collect()
}

/// Which rules to report: `select` and `ignore` hold codes or code prefixes (`ODL0`).
#[derive(Debug, Clone, Default)]
pub struct Selection {
    pub select: Vec<String>,
    pub ignore: Vec<String>,
}

impl Selection {
    pub fn enabled(&self, code: &str) -> bool {
        let matches = |p: &String| code.starts_with(p.to_ascii_uppercase().as_str());
        (self.select.is_empty() || self.select.iter().any(matches))
            && !self.ignore.iter().any(matches)
    }

    /// Errors on a code or prefix that matches no rule.
    pub fn validate(&self) -> Result<(), String> {
        for p in self.select.iter().chain(&self.ignore) {
            let up = p.to_ascii_uppercase();
            if up.is_empty() || !RULES.iter().any(|r| r.code.starts_with(&up)) {
                return Err(format!(
                    "unknown rule code '{p}': expected a code or prefix such as ODL001 or ODL0 (see docs/rules.md)"
                ));
            }
        }
        Ok(())
    }
}

/// Codes a `# noqa` comment on a line suppresses: `None` when there is none, an empty list for
/// a bare `# noqa` (all codes).
pub fn noqa_codes(line: &str) -> Option<Vec<String>> {
    let pos = line.find("# noqa").or_else(|| line.find("#noqa"))?;
    let rest = &line[pos..];
    let rest = rest.trim_start_matches('#').trim_start();
    let rest = &rest["noqa".len()..];
    let Some(list) = rest.strip_prefix(':') else {
        return Some(Vec::new());
    };
    // Codes are letters then digits (`ODL001`, `ODL0`); the list ends at the first other word.
    let is_code = |s: &str| {
        let letters = s.chars().take_while(char::is_ascii_alphabetic).count();
        letters > 0 && s.len() > letters && s[letters..].chars().all(|c| c.is_ascii_digit())
    };
    let codes: Vec<String> = list
        .split(|c: char| c == ',' || c.is_whitespace())
        .filter(|s| !s.is_empty())
        .take_while(|s| is_code(s))
        .map(str::to_ascii_uppercase)
        .collect();
    Some(codes)
}

/// Drops findings suppressed by `# noqa` on their line.
pub fn apply_noqa(source: &str, findings: Vec<Finding>) -> Vec<Finding> {
    if findings.is_empty() {
        return findings;
    }
    let lines: Vec<&str> = source.lines().collect();
    findings
        .into_iter()
        .filter(|f| {
            let Some(text) = lines.get(f.line().saturating_sub(1)) else {
                return true;
            };
            match noqa_codes(text) {
                None => true,
                Some(codes) if codes.is_empty() => false,
                Some(codes) => !codes
                    .iter()
                    .any(|c| f.diagnostic.code.starts_with(c.as_str())),
            }
        })
        .collect()
}

/// Applies non-overlapping edits (later ones that overlap an earlier one are skipped).
/// Returns the new text and how many edits were applied.
pub fn apply_edits(source: &str, edits: &[&Edit]) -> (String, usize) {
    let mut sorted: Vec<&Edit> = edits.to_vec();
    sorted.sort_by_key(|e| (e.start, e.end));
    let mut out = String::with_capacity(source.len());
    let mut pos = 0;
    let mut applied = 0;
    for e in sorted {
        if e.start < pos || e.end > source.len() || e.start > e.end {
            continue;
        }
        out.push_str(&source[pos..e.start]);
        out.push_str(&e.content);
        pos = e.end;
        applied += 1;
    }
    out.push_str(&source[pos..]);
    (out, applied)
}

/// One linted file: its path, text and surviving findings.
#[derive(Debug, Clone)]
pub struct FileReport {
    pub path: PathBuf,
    /// The path as findings name it.
    pub display: String,
    /// The file's text; empty for a file the cache answered that has no finding (not read).
    pub source: String,
    pub findings: Vec<Finding>,
}

/// A file that could not be read.
#[derive(Debug, Clone)]
pub struct ReadError {
    pub path: PathBuf,
    pub message: String,
}

/// The Python files under `paths`: files given directly are kept whatever their extension;
/// directories are walked for `*.py`/`*.pyi`, respecting `.gitignore`, `.ignore` and hidden files.
pub fn discover(paths: &[PathBuf]) -> Result<Vec<PathBuf>, ReadError> {
    let mut files = Vec::new();
    for p in paths {
        if p.is_file() {
            files.push(p.clone());
            continue;
        }
        if !p.is_dir() {
            return Err(ReadError {
                path: p.clone(),
                message: format!(
                    "{}: No such file or directory (expected a Python file or a directory)",
                    p.display()
                ),
            });
        }
        // Walked on every core (as ruff does): one thread took a twentieth of a run on torch.
        let found = std::sync::Mutex::new((Vec::new(), None));
        ignore::WalkBuilder::new(p)
            .require_git(false)
            .follow_links(false)
            .build_parallel()
            .run(|| {
                let found = &found;
                Box::new(move |entry| {
                    let mut found = found.lock().unwrap_or_else(|e| e.into_inner());
                    match entry {
                        Ok(entry) => {
                            let path = entry.path();
                            if entry.file_type().is_some_and(|t| t.is_file())
                                && path.extension().is_some_and(|e| e == "py" || e == "pyi")
                            {
                                found.0.push(entry.into_path());
                            }
                            ignore::WalkState::Continue
                        }
                        Err(e) => {
                            found.1.get_or_insert(e.to_string());
                            ignore::WalkState::Quit
                        }
                    }
                })
            });
        let (walked, error) = found.into_inner().unwrap_or_else(|e| e.into_inner());
        if let Some(e) = error {
            return Err(ReadError {
                path: p.clone(),
                message: format!("{}: {e}", p.display()),
            });
        }
        files.extend(walked);
    }
    files.sort();
    files.dedup();
    // `e.py ./e.py`, or `e.py link.py` for a symlink to it: one file, however spelled (only
    // files named directly can repeat so).
    // The spelling kept is the file's own path when one names it so, not a symlink's: relative
    // imports resolve from where the file is.
    if paths.len() > 1 {
        let mut kept: HashMap<PathBuf, (usize, bool)> = HashMap::default();
        let mut once: Vec<PathBuf> = Vec::with_capacity(files.len());
        for f in files {
            let canonical = std::fs::canonicalize(&f).ok();
            let real = canonical
                .as_ref()
                .is_some_and(|c| std::path::absolute(&f).is_ok_and(|a| &a == c));
            let key = canonical.unwrap_or_else(|| normalize(&f));
            match kept.get_mut(&key) {
                None => {
                    kept.insert(key, (once.len(), real));
                    once.push(f);
                }
                Some((at, was_real)) => {
                    if real && !*was_real {
                        once[*at] = f;
                        *was_real = true;
                    }
                }
            }
        }
        once.sort();
        files = once;
    }
    Ok(files)
}

/// At most this many package levels above a named file are read with it.
const CONTEXT_LEVELS: usize = 4;
/// At most this many directories above a script are searched for the modules it imports.
const SCRIPT_LEVELS: usize = 3;
/// At most this many files are read as context, the nearest directories first.
const CONTEXT_FILES: usize = 2_000;
/// A walk of the package at `dir`: its files and its subpackages' (directories with an
/// `__init__.py`), honouring `.gitignore`, not following links.
fn package_walk(dir: &Path) -> ignore::WalkBuilder {
    let mut walk = ignore::WalkBuilder::new(dir);
    walk.require_git(false)
        .follow_links(false)
        .filter_entry(|e| {
            e.depth() == 0
                || !e.file_type().is_some_and(|t| t.is_dir())
                || e.path().join("__init__.py").is_file()
        });
    walk
}

/// Whether the package at `dir` holds at most `limit` Python files: counted until one more is
/// seen.
fn package_files_at_most(dir: &Path, limit: usize) -> bool {
    package_walk(dir)
        .build()
        .flatten()
        .filter(|e| {
            e.file_type().is_some_and(|t| t.is_file())
                && e.path().extension().is_some_and(|x| x == "py")
        })
        .nth(limit)
        .is_none()
}

/// At most this many rounds of checking files again with what other files' model code calls.
const SECOND_ROUNDS: usize = 4;
/// A file named alone is read with its top package's other subpackages only when the package
/// holds at most this many Python files (a large one would make every single-file run slow,
/// and a part of it chosen by name would be arbitrary).
const TOP_PACKAGE_FILES: usize = 400;

/// Files read with the linted ones but not reported. For each Python file named directly (as a
/// pre-commit hook or an editor does, rather than a directory walked): the other Python files
/// of its directory, and of each package directory above it (a directory with `__init__.py`,
/// and the one holding the top package), up to four levels and as far as the path given
/// reaches (`conv.py` named from inside its package is read with its directory only). These
/// hold the helpers a model file imports, the models that call an ops module's functions, the
/// export script that imports them: so `lint ops.py` reports in `ops.py` what `lint .` reports
/// there; then, for a script outside any package, the modules it imports that sit in a
/// directory above its own, up to three levels and as far as the path given reaches
/// (`tools/export.py` importing `models.net` of the repository root); then the packages below each named file's directory (`pkg/models/net.py` calling
/// `pkg/ops.py`); last, for a file of a project's package (not in site-packages) holding at
/// most 400 Python files, the package's other subpackages (`kit/models/` calling a helper of
/// `kit/ops/masks.py`). Directories are listed, and those packages walked, honouring `.gitignore`;
/// files already in `files` are left out.
pub fn context(paths: &[PathBuf], files: &[PathBuf]) -> Vec<PathBuf> {
    let python = |p: &Path| p.extension().is_some_and(|e| e == "py" || e == "pyi");
    // Directories by level: every named file's own directory first, then the package
    // directories above, nearest first, so that one named file's neighbours never crowd out
    // another's under the limit.
    let mut levels: Vec<Vec<PathBuf>> = vec![Vec::new(); CONTEXT_LEVELS + 1];
    let mut packages_below: Vec<PathBuf> = Vec::new();
    // The top package of each named file of a project's package (`kit/` for
    // `kit/ops/masks.py`): its other subpackages hold the models that call the file's helpers.
    let mut top_packages: Vec<PathBuf> = Vec::new();
    let installed = |d: &Path| {
        d.components().any(|c| {
            matches!(c, std::path::Component::Normal(n) if n == "site-packages" || n == "dist-packages")
        })
    };
    for p in paths.iter().filter(|p| p.is_file() && python(p)) {
        let mut dir = p.parent().map(Path::to_path_buf).unwrap_or_default();
        packages_below.push(if dir.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            dir.clone()
        });
        let mut top: Option<PathBuf> = None;
        for level in levels.iter_mut() {
            let listed = if dir.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                dir.clone()
            };
            level.push(listed.clone());
            // Past `..`, `.` or the root the path given does not say what lies above.
            if dir.file_name().is_none() || !listed.join("__init__.py").is_file() {
                break;
            }
            top = Some(listed.clone());
            match dir.parent() {
                Some(up) => dir = up.to_path_buf(),
                None => break,
            }
        }
        if let Some(top) = top {
            let real = std::fs::canonicalize(&top).unwrap_or_else(|_| top.clone());
            if !installed(&top)
                && !installed(&real)
                && package_files_at_most(&top, TOP_PACKAGE_FILES)
            {
                top_packages.push(top);
            }
        }
    }
    // Modules a script imports from directories above its own (`tools/export.py` importing
    // `models.net` of the repository root, as it does when run from there or after
    // `sys.path.insert`): the nearest directory above that holds each, up to the project's root
    // (a directory with `.git`, `pyproject.toml`, `setup.py` or `setup.cfg`, or the current
    // directory), so an absolute path reads what the relative one does. Only for scripts, files
    // outside any package, and not in installed packages: a file of a package imports the rest
    // of its package, read above, and third-party packages (`numpy` beside `torch` in
    // site-packages) are not the project.
    let root_marked = |d: &Path| {
        [".git", "pyproject.toml", "setup.py", "setup.cfg"]
            .iter()
            .any(|m| d.join(m).exists())
    };
    let cwd = std::env::current_dir()
        .ok()
        .and_then(|c| std::fs::canonicalize(c).ok());
    let mut imported: Vec<PathBuf> = Vec::new();
    for p in paths.iter().filter(|p| p.is_file() && python(p)) {
        let own = p.parent().map(Path::to_path_buf).unwrap_or_default();
        let listed = |d: &Path| {
            if d.as_os_str().is_empty() {
                PathBuf::from(".")
            } else {
                d.to_path_buf()
            }
        };
        // Where the path points, not how it is spelled (`onnx/fuzz/x.py` named from inside
        // site-packages), and the current directory as `getcwd` gives it (symlinks resolved).
        let real = |d: &Path| std::fs::canonicalize(listed(d)).ok();
        let is_cwd = |d: &Path| cwd.is_some() && real(d) == cwd;
        if listed(&own).join("__init__.py").is_file()
            || installed(&own)
            || real(&own).is_some_and(|r| installed(&r))
            || root_marked(&listed(&own))
            || is_cwd(&own)
        {
            continue;
        }
        let mut above: Vec<PathBuf> = Vec::new();
        let mut dir = own.clone();
        while above.len() < SCRIPT_LEVELS && dir.file_name().is_some() {
            let Some(up) = dir.parent() else { break };
            dir = up.to_path_buf();
            let here = listed(&dir);
            above.push(here.clone());
            if root_marked(&here) || is_cwd(&dir) {
                break;
            }
        }
        if above.is_empty() {
            continue;
        }
        let Ok(text) = std::fs::read_to_string(p) else {
            continue;
        };
        let own = listed(&own);
        for module in imported_top_modules(&text) {
            let at = |d: &Path| {
                let file = d.join(format!("{module}.py"));
                if file.is_file() {
                    Some(file)
                } else {
                    let package = d.join(&module);
                    package.is_dir().then_some(package)
                }
            };
            if at(&own).is_some() {
                continue;
            }
            if let Some(found) = above.iter().find_map(|d| at(d)) {
                imported.push(found);
            }
        }
    }
    let mut once: HashSet<PathBuf> = HashSet::default();
    imported.retain(|d| once.insert(normalize(d)));
    let mut seen: HashSet<PathBuf> = files.iter().map(|f| normalize(f)).collect();
    let mut walked: HashSet<PathBuf> = HashSet::default();
    let mut found: Vec<PathBuf> = Vec::new();
    // The files of each directory first, nearest first; then the packages below each named
    // file's own directory (`pkg/models/net.py` calling a helper of `pkg/ops.py`), which could
    // be many.
    let below = levels.len();
    let mut once: HashSet<PathBuf> = HashSet::default();
    packages_below.retain(|d| once.insert(normalize(d)));
    levels.push(imported);
    levels.push(packages_below);
    let mut once: HashSet<PathBuf> = HashSet::default();
    top_packages.retain(|d| once.insert(normalize(d)));
    levels.push(top_packages);
    for (depth, dirs) in levels.into_iter().enumerate() {
        let mut lists: Vec<std::vec::IntoIter<PathBuf>> = Vec::new();
        for dir in dirs {
            let walk = if depth >= below {
                package_walk(&dir)
            } else {
                if !walked.insert(normalize(&dir)) {
                    continue;
                }
                let mut walk = ignore::WalkBuilder::new(&dir);
                walk.require_git(false)
                    .follow_links(false)
                    .max_depth(Some(1));
                walk
            };
            let mut here: Vec<PathBuf> = walk
                .build()
                .flatten()
                .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
                .map(|e| e.into_path())
                .filter(|p| python(p))
                .map(|p| match p.strip_prefix(".") {
                    Ok(rel) if dir == Path::new(".") => rel.to_path_buf(),
                    _ => p,
                })
                .collect();
            here.sort();
            lists.push(here.into_iter());
        }
        // The directories of a level in turns, one file each, so a crowded one cannot take the
        // whole limit.
        loop {
            let mut took = false;
            for list in lists.iter_mut() {
                let Some(p) = list.next() else { continue };
                took = true;
                if found.len() == CONTEXT_FILES {
                    return found;
                }
                if seen.insert(normalize(&p)) {
                    found.push(p);
                }
            }
            if !took {
                break;
            }
        }
    }
    found
}

/// The first names of the modules `text` imports absolutely (`models` for `from models.net
/// import Net`, `utils` and `ops` for `import utils.io, ops as o`), read line by line without
/// parsing: a name that is no module beside the file is simply not found.
fn imported_top_modules(text: &str) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    let mut add = |dotted: &str| {
        let top = dotted.split('.').next().unwrap_or_default();
        if !top.is_empty()
            && top.chars().all(|c| c.is_alphanumeric() || c == '_')
            && !names.iter().any(|n| n == top)
        {
            names.push(top.to_string());
        }
    };
    for line in text.lines() {
        let line = line.trim_start();
        if let Some(rest) = line.strip_prefix("from ") {
            let module = rest.split_whitespace().next().unwrap_or_default();
            if !module.starts_with('.') {
                add(module);
            }
        } else if let Some(rest) = line.strip_prefix("import ") {
            let rest = rest.split('#').next().unwrap_or_default();
            for item in rest.split(',') {
                add(item.split_whitespace().next().unwrap_or_default());
            }
        }
    }
    names
}

/// [`lint_files_cached`] over `files` and `context` (see [`context`]) together, reporting only
/// `files`: a context file's findings and read errors are dropped.
pub fn lint_files_with_context(
    files: &[PathBuf],
    context: &[PathBuf],
    selection: &Selection,
    cache: Option<&mut LintCache>,
) -> (Vec<FileReport>, Vec<ReadError>) {
    if context.is_empty() {
        return lint_all(files, files.len(), selection, cache);
    }
    let all: Vec<PathBuf> = files.iter().chain(context).cloned().collect();
    lint_all(&all, files.len(), selection, cache)
}

/// A file's text, or an error that names the file and what was expected.
fn read_source(path: &Path) -> Result<String, ReadError> {
    let bytes = std::fs::read(path).map_err(|e| ReadError {
        path: path.to_path_buf(),
        message: format!("{}: {e}", path.display()),
    })?;
    String::from_utf8(bytes).map_err(|e| ReadError {
        path: path.to_path_buf(),
        message: format!(
            "{}: not UTF-8 text (byte {}); expected a Python source file",
            path.display(),
            e.utf8_error().valid_up_to()
        ),
    })
}

fn display_path(p: &Path) -> String {
    let s = p.to_string_lossy();
    s.strip_prefix("./").unwrap_or(&s).to_string()
}

/// Lints files in parallel, then runs project-level rules, then applies noqa and selection.
/// Files that cannot be read (or are not UTF-8) are returned as errors, the rest still linted.
pub fn lint_files(files: &[PathBuf], selection: &Selection) -> (Vec<FileReport>, Vec<ReadError>) {
    lint_files_cached(files, selection, None)
}

/// [`lint_files`], taking each unchanged file's first pass from `cache` and storing this run's
/// in it.
pub fn lint_files_cached(
    files: &[PathBuf],
    selection: &Selection,
    cache: Option<&mut LintCache>,
) -> (Vec<FileReport>, Vec<ReadError>) {
    lint_all(files, files.len(), selection, cache)
}

/// Stack of the threads that parse and check files: parsing and the checks recurse as deep as
/// expressions nest (`1 + 1 + ...` a thousand times is valid Python), past the 2 MiB a thread
/// gets by default. Only the pages used are committed.
const LINT_STACK: usize = 256 << 20;

/// The threads files are linted on ([`LINT_STACK`]), one per core: rayon's global pool, built
/// with that stack on first use (`None`: lint there), or, when something built the global pool
/// before, a pool of their own. (Installing every run into a pool of its own cost 15 % of a
/// run over torch against the global pool: the run's serial work moved onto a worker.)
fn lint_pool() -> Option<&'static rayon::ThreadPool> {
    static POOL: std::sync::OnceLock<Option<rayon::ThreadPool>> = std::sync::OnceLock::new();
    POOL.get_or_init(|| {
        let builder = || {
            rayon::ThreadPoolBuilder::new()
                .stack_size(LINT_STACK)
                .thread_name(|i| format!("lint-{i}"))
        };
        match builder().build_global() {
            Ok(()) => None,
            Err(_) => builder().build().ok(),
        }
    })
    .as_ref()
}

/// Lints `files`, reporting the first `named` of them (the rest are context: read, not reported,
/// nor are their read errors).
fn lint_all(
    files: &[PathBuf],
    named: usize,
    selection: &Selection,
    cache: Option<&mut LintCache>,
) -> (Vec<FileReport>, Vec<ReadError>) {
    match lint_pool() {
        Some(pool) => pool.install(|| lint_on_pool(files, named, selection, cache)),
        None => lint_on_pool(files, named, selection, cache),
    }
}

/// [`lint_all`], on the current thread pool.
fn lint_on_pool(
    files: &[PathBuf],
    named: usize,
    selection: &Selection,
    mut cache: Option<&mut LintCache>,
) -> (Vec<FileReport>, Vec<ReadError>) {
    let keep = |reports: &mut Vec<FileReport>, errors: &mut Vec<ReadError>| {
        if named < files.len() {
            let reported: HashSet<&Path> = files[..named].iter().map(PathBuf::as_path).collect();
            reports.retain(|r| reported.contains(r.path.as_path()));
            errors.retain(|e| reported.contains(e.path.as_path()));
        }
    };
    let displays: Vec<String> = files.iter().map(|p| display_path(p)).collect();
    // Each file's length and modification time, taken before anything is read: the cache's key.
    let stamps: Vec<Option<cache::Stamp>> = match cache {
        Some(_) => files.par_iter().map(|p| cache::Stamp::of(p)).collect(),
        None => vec![None; files.len()],
    };
    // The same files, none changed since the last run: its findings stand as they were after
    // the project pass; only the files with findings are read (for noqa and to show them).
    if let Some(found) = cache
        .as_deref()
        .and_then(|c| c.unchanged_run(&displays, &stamps))
    {
        let results: Vec<Result<FileReport, ReadError>> = files
            .par_iter()
            .zip(&displays)
            .map(|(path, display)| {
                let findings = found.get(display.as_str()).cloned().unwrap_or_default();
                let source = if findings.is_empty() {
                    String::new()
                } else {
                    read_source(path)?
                };
                Ok(FileReport {
                    path: path.clone(),
                    display: display.clone(),
                    source,
                    findings,
                })
            })
            .collect();
        let mut reports = Vec::new();
        let mut errors = Vec::new();
        for r in results {
            match r {
                Ok(rep) => reports.push(rep),
                Err(e) => errors.push(e),
            }
        }
        keep(&mut reports, &mut errors);
        finish(&mut reports, selection);
        return (reports, errors);
    }
    if let Some(c) = cache.as_deref_mut() {
        c.load_files();
    }
    // Pass 1: read, parse and check every file, and note which imported helpers its model code
    // calls. The syntax tree is dropped right away: only files whose helpers turn out to be
    // model code elsewhere are parsed and checked again (pass 2), which keeps memory flat and
    // the cost close to one pass. A file the cache knows unchanged is not even read (its
    // length and modification time, taken before reading, are the cache's key, as ruff's).
    struct Read {
        path: PathBuf,
        display: String,
        /// `None` for a file the cache answered (read later only if needed).
        source: Option<String>,
        lint: FileLint,
        stamp: Option<cache::Stamp>,
    }
    let from_cache = cache.as_deref();
    let read: Vec<Result<Read, ReadError>> = files
        .par_iter()
        .zip(displays)
        .zip(stamps)
        .map(|((path, display), stamp)| {
            let known = stamp.and_then(|s| from_cache?.get(&display, s));
            let (source, lint) = match known {
                Some(lint) => (None, lint.clone()),
                None => {
                    let source = read_source(path)?;
                    let lint = lint_parsed(
                        &display,
                        &source,
                        parse(&source),
                        &checker::Project::default(),
                    );
                    (Some(source), lint)
                }
            };
            Ok(Read {
                display,
                path: path.clone(),
                source,
                lint,
                stamp,
            })
        })
        .collect();
    // Which names each file must treat as model code because another file's model code calls
    // them through an import that resolves to it.
    let paths: Vec<Option<&Path>> = read
        .iter()
        .map(|r| r.as_ref().ok().map(|r| r.path.as_path()))
        .collect();
    // Files by module name (`utils` for `utils.py` and `utils/__init__.py`).
    let mut by_stem: crate::HashMap<String, Vec<usize>> = Default::default();
    for (i, p) in paths.iter().enumerate() {
        let Some(p) = p else { continue };
        let stem = if p.file_name().is_some_and(|n| n == "__init__.py") {
            p.parent().and_then(Path::file_name)
        } else {
            p.file_stem()
        };
        if let Some(stem) = stem {
            by_stem
                .entry(stem.to_string_lossy().into_owned())
                .or_default()
                .push(i);
        }
    }
    // Directories that are packages (hold a linted `__init__.py`).
    let packages: HashSet<PathBuf> = paths
        .iter()
        .flatten()
        .filter(|p| p.file_name().is_some_and(|n| n == "__init__.py"))
        .filter_map(|p| Some(normalize(p.parent()?)))
        .collect();
    // Each file's import root, computed when first needed.
    let roots: Vec<std::cell::OnceCell<PathBuf>> = vec![std::cell::OnceCell::new(); paths.len()];
    // The linted files an import of file `j` names (by its level and module only: a package's
    // re-exports are resolved for every name its importers call, so the answers are kept).
    let resolved: std::cell::RefCell<crate::HashMap<(usize, u32, String), Vec<usize>>> =
        Default::default();
    let resolve_uncached = |j: usize, imp: &checker::ImportedCall| -> Vec<usize> {
        let Some(from) = paths[j] else {
            return Vec::new();
        };
        let last = imp.module.rsplit('.').next().unwrap_or_default();
        let found: Vec<usize> = by_stem
            .get(last)
            .into_iter()
            .flatten()
            .copied()
            .filter(|&i| i != j && paths[i].is_some_and(|p| import_resolves_to(from, imp, p)))
            .collect();
        if found.len() < 2 || imp.level > 0 {
            return found;
        }
        // `from utils import f` with a `utils.py` in several projects linted together: the one
        // under the importer's import root, where Python looks (the script's directory, or the
        // directory holding its top package), when there is one.
        let root = roots[j].get_or_init(|| {
            let mut root = normalize(from.parent().unwrap_or(Path::new("")));
            // `pop` fails at `""` and `/`, which may be packages too (`./__init__.py`).
            while packages.contains(&root) && root.pop() {}
            root
        });
        let base = |i: usize| {
            let p = normalize(paths[i]?);
            let up = imp.module.split('.').count() - usize::from(!p.ends_with("__init__.py"));
            let mut base = p.parent()?.to_path_buf();
            for _ in 0..up {
                base.pop();
            }
            Some(base)
        };
        let rooted: Vec<usize> = found
            .iter()
            .copied()
            .filter(|&i| base(i).as_ref() == Some(root))
            .collect();
        if !rooted.is_empty() {
            return rooted;
        }
        // None there (`sys.path.insert(0, "..")`): the nearest to the importer.
        let shared = |i: usize| {
            paths[i].map_or(0, |p| {
                normalize(from)
                    .components()
                    .zip(normalize(p).components())
                    .take_while(|(a, b)| a == b)
                    .count()
            })
        };
        let nearest = found.iter().map(|&i| shared(i)).max().unwrap_or(0);
        found
            .into_iter()
            .filter(|&i| shared(i) == nearest)
            .collect()
    };
    let resolve = |j: usize, imp: &checker::ImportedCall| -> Vec<usize> {
        let key = (j, imp.level, imp.module.clone());
        if let Some(found) = resolved.borrow().get(&key) {
            return found.clone();
        }
        let found = resolve_uncached(j, imp);
        resolved.borrow_mut().insert(key, found.clone());
        found
    };
    // Each file learns which of its helpers other files' model code calls, and which of the
    // helpers its own model code imports are annotated as returning tensors.
    // `from pkg.ops import peaks` where `pkg/ops/__init__.py` has `from .detect import *` (or
    // `from .detect import find_peaks as peaks`): the files that define the name, through the
    // re-exports of the files an import names (a few steps; a name may pass several packages).
    // Each file's re-exports by the name they bind here, and its star imports.
    type Reexports<'r> = (
        crate::HashMap<&'r str, Vec<&'r checker::ImportedCall>>,
        Vec<&'r checker::ImportedCall>,
    );
    let reexports: Vec<Reexports> = read
        .iter()
        .map(|r| {
            let mut named: crate::HashMap<&str, Vec<&checker::ImportedCall>> = Default::default();
            let mut stars = Vec::new();
            for re in r.iter().flat_map(|r| &r.lint.reexports) {
                if re.name == "*" {
                    stars.push(re);
                } else {
                    named.entry(re.callee.as_str()).or_default().push(re);
                }
            }
            (named, stars)
        })
        .collect();
    let resolve_through = |j: usize, call: &checker::ImportedCall| -> Vec<(usize, String)> {
        let mut out: Vec<(usize, String)> = Vec::new();
        // The third field: whether the name was reached through a star re-export, where a
        // module that does not define it is not where it comes from.
        let mut work: Vec<(usize, checker::ImportedCall, usize, bool)> =
            vec![(j, call.clone(), 0, false)];
        while let Some((from, call, depth, starred)) = work.pop() {
            let found = resolve(from, &call);
            // `from ..ops import masks as fmask`, then `fmask.center(...)`, with `masks` a
            // submodule alias of `ops/__init__.py` (`from . import hazard_masks as masks`):
            // the package's file names the module.
            if found.is_empty() && depth < 4 {
                if let Some((parent, last)) = call.module.rsplit_once('.') {
                    let up = checker::ImportedCall {
                        module: parent.to_string(),
                        ..call.clone()
                    };
                    for p in resolve(from, &up) {
                        for re in reexports[p].0.get(last).into_iter().flatten() {
                            let module = if re.module.is_empty() {
                                re.name.clone()
                            } else {
                                format!("{}.{}", re.module, re.name)
                            };
                            let next = checker::ImportedCall {
                                level: re.level,
                                module,
                                ..call.clone()
                            };
                            work.push((p, next, depth + 1, false));
                        }
                    }
                }
            }
            for i in found {
                if out.iter().any(|(k, n)| *k == i && *n == call.name) {
                    continue;
                }
                let Ok(target) = &read[i] else { continue };
                // A name the file defines itself is that definition, whatever it imports.
                let defines = target.lint.unannotated.contains(&call.name)
                    || target.lint.returns.contains_key(&call.name)
                    || target.lint.records.contains_key(&call.name);
                let gives = !starred || defines || target.lint.module_methods.contains(&call.name);
                if gives {
                    out.push((i, call.name.clone()));
                }
                if depth >= 4 || defines {
                    continue;
                }
                let (named, stars) = &reexports[i];
                let via = named
                    .get(call.name.as_str())
                    .into_iter()
                    .flatten()
                    .map(|re| (*re, false))
                    .chain(stars.iter().map(|re| (*re, true)));
                for (re, star) in via {
                    let name = if star {
                        call.name.clone()
                    } else {
                        re.name.clone()
                    };
                    let next = checker::ImportedCall {
                        level: re.level,
                        module: re.module.clone(),
                        name,
                        callee: call.callee.clone(),
                    };
                    work.push((i, next, depth + 1, star));
                }
            }
        }
        out
    };
    let mut extra: Vec<checker::Project> = vec![checker::Project::default(); read.len()];
    for (j, r) in read.iter().enumerate() {
        let Ok(r) = r else { continue };
        for call in &r.lint.calls {
            for (i, name) in resolve_through(j, call) {
                let call = &checker::ImportedCall {
                    name,
                    ..call.clone()
                };
                extra[i].roots.insert(call.name.clone());
                // `stations_to_grid(v, r, c, H, W)` with `H = int(x.shape[-2])`: the defining
                // file learns which of its parameters are frozen numbers or sizes.
                if let Some(kinds) = r.lint.argument_kinds.get(&call.callee) {
                    extra[i]
                        .argument_kinds
                        .entry(call.name.clone())
                        .or_default()
                        .merge(kinds);
                }
                if let Ok(defining) = &read[i] {
                    if let Some(flags) = defining.lint.frozen_returns.get(&call.name) {
                        extra[j]
                            .frozen_returns
                            .insert(call.callee.clone(), flags.clone());
                    }
                    if let Some(flags) = defining.lint.mask_returns.get(&call.name) {
                        extra[j]
                            .mask_returns
                            .insert(call.callee.clone(), flags.clone());
                    }
                    if let Some(flags) = defining.lint.returns.get(&call.name) {
                        if r.lint.facts.defines_models {
                            extra[j].returns.insert(call.callee.clone(), flags.clone());
                        }
                    } else if defining.lint.container_returns.contains(&call.name) {
                        if r.lint.facts.defines_models {
                            extra[j].container_returns.insert(call.callee.clone());
                        }
                    } else if defining.lint.unannotated.contains(&call.name)
                        && r.lint.facts.defines_models
                    {
                        extra[j].unannotated.insert(call.callee.clone());
                    }
                }
            }
        }
    }
    // Methods model code calls on submodules (`self.model.score_masked(x)`) are model code in
    // the files it imports, where the submodule's class most likely lives; only names some
    // module class of the project defines are worth resolving imports for.
    let defined: crate::HashSet<&str> = read
        .iter()
        .flatten()
        .flat_map(|r| r.lint.module_methods.iter().map(String::as_str))
        .collect();
    for (j, r) in read.iter().enumerate() {
        let Ok(r) = r else { continue };
        let calls: Vec<&String> = r
            .lint
            .method_calls
            .iter()
            .filter(|m| defined.contains(m.as_str()))
            .collect();
        if calls.is_empty() {
            continue;
        }
        let mut seen_imports: HashSet<(u32, &str)> = HashSet::default();
        for imp in &r.lint.imports {
            if !seen_imports.insert((imp.level, imp.module.as_str())) {
                continue;
            }
            // `from ..layers import SegmentPool` with `layers/__init__.py` re-exporting it:
            // the modules a package's `__init__.py` takes names from count too.
            // Only the names this file imports from the package (`from pkg.models import
            // Vocoder` is `pkg.models.Vocoder` among the imports), and star re-exports.
            let names: Vec<&str> = r
                .lint
                .imports
                .iter()
                .filter(|other| other.level == imp.level)
                .filter_map(|other| {
                    other
                        .module
                        .strip_prefix(imp.module.as_str())
                        .and_then(|rest| rest.strip_prefix('.'))
                })
                .collect();
            let mut targets = resolve(j, imp);
            let mut followed: HashSet<(usize, u32, String)> = HashSet::default();
            let mut k = 0;
            while k < targets.len() && k < 32 {
                let i = targets[k];
                k += 1;
                let Ok(t) = &read[i] else { continue };
                if !t.path.ends_with("__init__.py") {
                    continue;
                }
                let (named, stars) = &reexports[i];
                let via = names
                    .iter()
                    .flat_map(|n| named.get(n).into_iter().flatten())
                    .chain(stars.iter());
                for re in via {
                    let module = if re.module.is_empty() {
                        re.name.clone()
                    } else {
                        re.module.clone()
                    };
                    if !followed.insert((i, re.level, module.clone())) {
                        continue;
                    }
                    let next = checker::ImportedCall {
                        level: re.level,
                        module,
                        name: String::new(),
                        callee: String::new(),
                    };
                    for n in resolve(i, &next) {
                        if !targets.contains(&n) {
                            targets.push(n);
                        }
                    }
                }
            }
            for i in targets {
                if let Ok(target) = &read[i] {
                    for m in &calls {
                        if target.lint.module_methods.contains(*m) {
                            extra[i].methods.insert((*m).clone());
                        }
                    }
                }
            }
        }
    }
    // `from nb import model, export_onnx` in any file: `nb` cannot tell what that file does with
    // its module-level module (ODL017). Names taken by `from` imports only (an `import nb` is
    // not followed to the attributes it reads).
    let exported_globals: crate::HashSet<&str> = read
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .flat_map(|t| t.lint.facts.exported_globals.iter().map(String::as_str))
        .collect();
    // Functions that move and export their parameter (ODL017): imported by name elsewhere, they
    // have callers there.
    let preparing: crate::HashSet<&str> = read
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .flat_map(|t| t.lint.facts.preparing_exporters.iter().map(String::as_str))
        .collect();
    for (j, r) in read.iter().enumerate() {
        let Ok(r) = r else { continue };
        if exported_globals.is_empty() && preparing.is_empty() {
            break;
        }
        for imp in &r.lint.imports {
            // `import nb` (then `nb.model.eval()`): every module-level module it exports.
            for i in resolve(j, imp) {
                if i == j {
                    continue;
                }
                if let Ok(t) = &read[i] {
                    for g in &t.lint.facts.exported_globals {
                        extra[i].imported_elsewhere.insert(g.clone());
                    }
                }
            }
            let Some((parent, name)) = imp.module.rsplit_once('.') else {
                continue;
            };
            if !exported_globals.contains(name) && !preparing.contains(name) {
                continue;
            }
            let from = checker::ImportedCall {
                level: imp.level,
                module: parent.to_string(),
                name: String::new(),
                callee: String::new(),
            };
            for i in resolve(j, &from) {
                let exported = read[i].as_ref().is_ok_and(|t| {
                    t.lint.facts.exported_globals.iter().any(|g| g == name)
                        || t.lint.facts.preparing_exporters.iter().any(|g| g == name)
                });
                if i != j && exported {
                    extra[i].imported_elsewhere.insert(name.to_string());
                }
            }
        }
    }
    // `model = load_detector(path)` with `load_detector` imported from a linted file that puts
    // the model in eval mode: the exporting file learns it (ODL017). Only exporting files
    // record their imported names.
    for (j, r) in read.iter().enumerate() {
        let Ok(r) = r else { continue };
        for imp in &r.lint.imported_names {
            if imp.name.is_empty() {
                for i in resolve(j, imp) {
                    let Ok(t) = &read[i] else { continue };
                    // `import hazard_blade as blade` then `blade.load_model(path)`.
                    for helper in &t.lint.eval_helpers {
                        extra[j]
                            .eval_helpers
                            .insert(format!("{}.{helper}", imp.callee));
                    }
                }
                continue;
            }
            // `from kit.models import build_model` with `models/__init__.py` re-exporting it
            // from the file that defines it.
            for (i, name) in resolve_through(j, imp) {
                let Ok(t) = &read[i] else { continue };
                if t.lint.eval_helpers.contains(&name) {
                    extra[j].eval_helpers.insert(imp.callee.clone());
                }
            }
        }
    }
    // `from .ops import PartialTrack`, `mops.Pyramid` through `import ops as mops`: the record
    // classes other files define, under the name the importer spells them; the records their
    // fields hold go under names no Python code spells (`3#Track`, the defining file's index),
    // so they never meet the importer's own names.
    let record_names: crate::HashSet<&str> = read
        .iter()
        .flatten()
        .flat_map(|r| r.lint.records.keys().map(String::as_str))
        .collect();
    for (j, r) in read.iter().enumerate() {
        let Ok(r) = r else { continue };
        if record_names.is_empty() {
            break;
        }
        for imp in &r.lint.record_imports {
            if !record_names.contains(imp.name.as_str()) {
                continue;
            }
            for (i, name) in resolve_through(j, imp) {
                let Ok(t) = &read[i] else { continue };
                if t.lint.records.contains_key(&name) {
                    tell_record(
                        &mut extra[j].records,
                        imp.callee.clone(),
                        i,
                        &name,
                        &t.lint.records,
                        0,
                    );
                }
            }
        }
    }
    // The linted files each file imports, for the opset check (which ops an export can reach):
    // resolved only for the files that export and what they import, transitively.
    let mut imports: Vec<Vec<String>> = vec![Vec::new(); read.len()];
    let mut work: Vec<usize> = read
        .iter()
        .enumerate()
        .filter(|(_, r)| r.as_ref().is_ok_and(|r| !r.lint.facts.exports.is_empty()))
        .map(|(j, _)| j)
        .collect();
    let mut resolved = vec![false; read.len()];
    while let Some(j) = work.pop() {
        let Ok(r) = &read[j] else { continue };
        if std::mem::replace(&mut resolved[j], true) {
            continue;
        }
        for imp in &r.lint.imports {
            for i in resolve(j, imp) {
                if let Ok(target) = &read[i] {
                    if !imports[j].contains(&target.display) {
                        imports[j].push(target.display.clone());
                    }
                    work.push(i);
                }
            }
        }
    }
    // The file each export's model class is imported from (`from .rife import IFNet`), for
    // the opset check: such an export reaches that file's ops, not every import's.
    type ModelFiles = Option<Vec<(String, bool)>>;
    let mut model_files: Vec<Vec<ModelFiles>> = vec![Vec::new(); read.len()];
    for (j, r) in read.iter().enumerate() {
        let Ok(r) = r else { continue };
        for site in &r.lint.facts.exports {
            let files: ModelFiles = (!site.model_classes.is_empty())
                .then(|| {
                    site.model_classes
                        .iter()
                        .map(|(class, here)| {
                            if *here {
                                return Some((r.display.clone(), false));
                            }
                            // `litho.HotspotNet` with `from . import hazard_litho as litho`
                            // (or `import hazard_litho as litho`): the module it names.
                            let module_of = |alias: &str| {
                                let imp =
                                    r.lint.imported_names.iter().find(|i| i.callee == alias)?;
                                let module = match (imp.module.is_empty(), imp.name.is_empty()) {
                                    (_, true) => imp.module.clone(),
                                    (true, false) => imp.name.clone(),
                                    (false, false) => format!("{}.{}", imp.module, imp.name),
                                };
                                Some(checker::ImportedCall {
                                    module,
                                    name: String::new(),
                                    ..imp.clone()
                                })
                            };
                            let imp = match class.split_once('.') {
                                Some((alias, _)) => module_of(alias)?,
                                None => r
                                    .lint
                                    .imported_names
                                    .iter()
                                    .find(|i| &i.callee == class)?
                                    .clone(),
                            };
                            resolve(j, &imp).into_iter().find_map(|i| {
                                read[i].as_ref().ok().map(|t| (t.display.clone(), true))
                            })
                        })
                        .collect::<Option<Vec<_>>>()
                })
                .flatten();
            model_files[j].push(files);
        }
    }
    // Pass 2 and after: the files with extra roots are checked again; what their new model code
    // calls in other files (a helper of a helper: a model calls `profile_edges` of one ops file,
    // which calls `zero_invalid` of another) is model code there, checked again in turn, for a
    // few rounds. Files no other file's model code reaches are checked once.
    // A file checked again with what other files told it (the cache keeps that check too, by a
    // digest of what it was told): the digest, the check, and whether it was computed now.
    let check_again =
        |r: &Read, extra: &checker::Project| -> Result<(u64, FileLint, bool), ReadError> {
            let digest = extra.digest();
            if let Some(lint) = r
                .stamp
                .and_then(|s| from_cache?.get_second(&r.display, s, digest))
            {
                return Ok((digest, lint.clone(), false));
            }
            let text = match &r.source {
                Some(s) => std::borrow::Cow::Borrowed(s.as_str()),
                None => std::borrow::Cow::Owned(read_source(&r.path)?),
            };
            let lint = lint_parsed(&r.display, &text, parse(&text), extra);
            Ok((digest, lint, true))
        };
    let mut seconds: Vec<Option<(u64, FileLint, bool)>> = (0..read.len()).map(|_| None).collect();
    let mut dirty: Vec<bool> = extra.iter().map(|e| !e.is_empty()).collect();
    for round in 0..SECOND_ROUNDS {
        let checked: Vec<(usize, (u64, FileLint, bool))> = (0..read.len())
            .into_par_iter()
            .filter(|&i| dirty[i])
            // A file that cannot be read now is reported by the last pass.
            .filter_map(|i| Some((i, check_again(read[i].as_ref().ok()?, &extra[i]).ok()?)))
            .collect();
        dirty.iter_mut().for_each(|d| *d = false);
        let last = round + 1 == SECOND_ROUNDS;
        for (i, second) in checked {
            if !last {
                // What this check found new model code calling, in the files that define it.
                let before: crate::HashSet<&checker::ImportedCall> = read[i]
                    .as_ref()
                    .map(|r| r.lint.calls.iter().collect())
                    .unwrap_or_default();
                let old: crate::HashSet<&checker::ImportedCall> = seconds[i]
                    .as_ref()
                    .map(|(_, l, _)| l.calls.iter().collect())
                    .unwrap_or_default();
                let mut grown: Vec<(usize, String)> = Vec::new();
                for call in &second.1.calls {
                    if before.contains(call) || old.contains(call) {
                        continue;
                    }
                    grown.extend(resolve_through(i, call));
                }
                for (k, name) in grown {
                    if extra[k].roots.insert(name) {
                        dirty[k] = true;
                    }
                }
            }
            let prior = seconds[i].take();
            let computed = second.2 || prior.is_some_and(|p| p.2);
            seconds[i] = Some((second.0, second.1, computed));
        }
        if !dirty.iter().any(|d| *d) {
            break;
        }
    }
    // What each file reports: its last check.
    struct Kept {
        stamp: Option<cache::Stamp>,
        first: FileLint,
        second: Option<(u64, FileLint)>,
        /// Whether either check was computed now rather than taken from the cache.
        computed: bool,
    }
    /// A file's report, its facts for the project pass, and (with a cache) what to store.
    type Checked = (FileReport, Facts, Option<Kept>);
    let caching = from_cache.is_some();
    let results: Vec<Result<Checked, ReadError>> = read
        .into_par_iter()
        .zip(extra.into_par_iter())
        .zip(imports.into_par_iter())
        .zip(model_files.into_par_iter())
        .zip(seconds.into_par_iter())
        .map(|((((r, extra), imports), model_files), checked)| {
            let r = r?;
            let mut computed = r.source.is_some();
            let second = if let Some((digest, lint, now)) = checked {
                computed |= now;
                Some((digest, lint))
            } else if extra.is_empty() {
                None
            } else {
                // Only a file the rounds above could not read: its error is reported here.
                let (digest, lint, now) = check_again(&r, &extra)?;
                computed |= now;
                Some((digest, lint))
            };
            let source = r.source;
            let lint = second.as_ref().map_or(&r.lint, |(_, l)| l);
            // The text is needed to place findings and the opset check's export lines, and for
            // noqa comments; a file the cache answered without either is never read.
            let needed = !lint.findings.is_empty()
                || lint.facts.exports.iter().any(|s| s.opset.is_some())
                || !lint.facts.kwargs_opsets.is_empty();
            let source = match source {
                Some(s) => s,
                None if needed => read_source(&r.path)?,
                None => String::new(),
            };
            // With a cache both checks are kept to store; without one they are moved, not copied.
            let (findings, mut facts, kept) = if caching {
                let (findings, facts) = (lint.findings.clone(), lint.facts.clone());
                let kept = Kept {
                    stamp: r.stamp,
                    first: r.lint,
                    second,
                    computed,
                };
                (findings, facts, Some(kept))
            } else {
                let lint = second.map_or(r.lint, |(_, l)| l);
                (lint.findings, lint.facts, None)
            };
            facts.imports = imports;
            for (site, files) in facts.exports.iter_mut().zip(model_files) {
                site.model_files = files;
            }
            Ok((
                FileReport {
                    path: r.path,
                    display: r.display,
                    source,
                    findings,
                },
                facts,
                kept,
            ))
        })
        .collect();
    let mut reports = Vec::new();
    let mut facts = Vec::new();
    let mut kept = Vec::new();
    let mut errors = Vec::new();
    for r in results {
        match r {
            Ok((rep, f, k)) => {
                facts.push(f);
                reports.push(rep);
                kept.extend(k);
            }
            Err(e) => errors.push(e),
        }
    }
    rules::opset_too_low::check_project(&mut reports, &facts);
    if let Some(cache) = cache {
        let entries: Vec<cache::Stored<'_>> = reports
            .iter()
            .zip(&kept)
            .filter_map(|(rep, k)| {
                Some(cache::Stored {
                    display: rep.display.as_str(),
                    stamp: k.stamp?,
                    first: &k.first,
                    second: k.second.as_ref().map(|(d, l)| (*d, l)),
                    findings: &rep.findings,
                })
            })
            .collect();
        let changed = kept.iter().any(|k| k.computed);
        // An unreadable neighbour keeps the run from being recorded whole, as any unreadable file.
        cache.store(entries, changed, errors.is_empty());
    }
    keep(&mut reports, &mut errors);
    finish(&mut reports, selection);
    (reports, errors)
}

/// Applies noqa comments and the selection, and puts each file's findings in order.
fn finish(reports: &mut [FileReport], selection: &Selection) {
    for rep in reports {
        let findings = std::mem::take(&mut rep.findings);
        let mut kept: Vec<Finding> = apply_noqa(&rep.source, findings)
            .into_iter()
            .filter(|f| selection.enabled(&f.diagnostic.code))
            .collect();
        kept.sort_by_key(|f| match f.diagnostic.location {
            Location::Source { line, column, .. } => (line, column),
            _ => (0, 0),
        });
        kept.dedup_by(|a, b| {
            a.diagnostic.code == b.diagnostic.code && a.diagnostic.location == b.diagnostic.location
        });
        rep.findings = kept;
    }
}
