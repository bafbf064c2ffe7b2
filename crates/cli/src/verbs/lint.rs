//! `onnx-doctor lint PATH... [--select CODES] [--ignore CODES] [--min-severity info|warning|error] [--fix]
//! [--format human|json|sarif]`
//!
//! Lints PyTorch source for ONNX export hazards (rules in `source-lint`, table in docs/rules.md).
//! Directories are walked respecting `.gitignore`; files are parsed in parallel. A file named
//! directly is read with its neighbours (`source_lint::context`), which are not reported. `--fix` applies
//! safe fixes in place and reports what is left; unsafe fixes are only shown. Each file's own
//! findings are cached in `--cache-dir` (default `.onnx-doctor-cache`) by its path and a hash of
//! its text, like ruff's cache; `--no-cache` turns that off.
//!
//! JSON schema: `{"diagnostics": [{"file", "line", "column", "code", "name", "severity",
//! "message", "help"?, "fix": null | {"description", "safe", "edits": [{"line", "column",
//! "end_line", "end_column", "content"}]}}], "summary": {"files", "error", "warning", "info",
//! "fixable", "fixed"}}`.

use crate::format::FindingsFormat;
use anyhow::{bail, Context as _};
use diagnostics::{Diagnostic, Severity};
use source_lint::{Finding, LineIndex, Selection};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// Python files or directories to lint (directories are walked, honouring .gitignore).
    #[arg(required = true)]
    pub paths: Vec<PathBuf>,
    /// Only report these rule codes or prefixes (comma-separated, e.g. ODL001,ODL01).
    #[arg(long, value_delimiter = ',')]
    pub select: Vec<String>,
    /// Do not report these rule codes or prefixes (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub ignore: Vec<String>,
    /// Apply safe fixes in place; unsafe fixes are only shown.
    #[arg(long)]
    pub fix: bool,
    #[arg(long, value_enum, default_value_t)]
    pub format: FindingsFormat,
    /// Do not read or write the cache (each file's own findings, kept by its path and a hash
    /// of its text, so unchanged files are not parsed again).
    #[arg(long)]
    pub no_cache: bool,
    /// Where to keep the cache.
    #[arg(long, value_name = "DIR", default_value = ".onnx-doctor-cache")]
    pub cache_dir: PathBuf,
    /// Report only findings of this severity or above: `warning` leaves out the info watch
    /// points (ODL014's implicit `align_corners`, ODL016's factories sized by a tensor's size).
    /// `--fix` then applies only the fixes of the findings reported.
    #[arg(long, value_enum, default_value_t = MinSeverity::Info)]
    pub min_severity: MinSeverity,
}

#[derive(Clone, Copy, Debug, Default, clap::ValueEnum)]
pub enum MinSeverity {
    /// Every finding.
    #[default]
    Info,
    /// Warnings and errors.
    Warning,
    /// Errors only.
    Error,
}

impl MinSeverity {
    fn severity(self) -> Severity {
        match self {
            MinSeverity::Info => Severity::Info,
            MinSeverity::Warning => Severity::Warning,
            MinSeverity::Error => Severity::Error,
        }
    }
}

/// Drops the findings below `--min-severity` (before `--fix`, which then fixes only what is shown).
fn keep_severe(reports: &mut [source_lint::FileReport], min: MinSeverity) {
    for r in reports {
        r.findings
            .retain(|f| f.diagnostic.severity >= min.severity());
    }
}

pub fn run(args: Args) -> anyhow::Result<ExitCode> {
    let selection = Selection {
        select: args
            .select
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
        ignore: args
            .ignore
            .iter()
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect(),
    };
    if let Err(e) = selection.validate() {
        bail!(e);
    }
    let files = source_lint::discover(&args.paths).map_err(|e| anyhow::anyhow!(e.message))?;
    let mut cache =
        (!args.no_cache).then(|| source_lint::LintCache::open(&args.cache_dir, &args.paths));
    // Files named directly are read with their neighbours (not reported), so a pre-commit hook
    // that passes only the changed files reports what a run over the project reports there.
    let context = source_lint::context(&args.paths, &files);
    let (mut reports, errors) =
        source_lint::lint_files_with_context(&files, &context, &selection, cache.as_mut());
    keep_severe(&mut reports, args.min_severity);
    // Every unreadable file is an input error, named on one line: alone when nothing could be
    // read; after the report of the files that could (as ruff goes on past a file it cannot
    // read: one Latin-1 file must not hide a repository's findings).
    let unreadable = (!errors.is_empty()).then(|| {
        let all: Vec<String> = errors.iter().map(|e| e.message.clone()).collect();
        all.join("; ")
    });
    if let Some(all) = unreadable.as_ref().filter(|_| reports.is_empty()) {
        bail!("{all}");
    }

    let mut fixed = 0;
    if args.fix {
        // Apply every file's safe edits, re-lint the same files with the same neighbours (the
        // project-level and cross-file findings depend on them), repeat while something changed
        // (at most 4 rounds).
        for _ in 0..4 {
            let mut changed = false;
            for rep in &reports {
                let safe: Vec<&Finding> = rep
                    .findings
                    .iter()
                    .filter(|f| {
                        f.diagnostic.fix.as_ref().is_some_and(|x| x.safe) && !f.edits.is_empty()
                    })
                    .collect();
                let edits: Vec<&source_lint::Edit> = safe.iter().flat_map(|f| &f.edits).collect();
                if edits.is_empty() {
                    continue;
                }
                let (text, applied) = source_lint::apply_edits(&rep.source, &edits);
                if applied == 0 || text == rep.source {
                    continue;
                }
                fixed += safe.len();
                changed = true;
                write_fixed(&rep.path, &text)?;
            }
            if !changed {
                break;
            }
            let (again, errs) =
                source_lint::lint_files_with_context(&files, &context, &selection, None);
            // The files unreadable before are reported below; one that became so is an error.
            if let Some(e) = errs
                .iter()
                .find(|e| !errors.iter().any(|before| before.path == e.path))
            {
                bail!("{}", e.message);
            }
            reports = again;
            keep_severe(&mut reports, args.min_severity);
        }
    }

    let findings: Vec<(&source_lint::FileReport, &Finding)> = reports
        .iter()
        .flat_map(|r| r.findings.iter().map(move |f| (r, f)))
        .collect();
    let diags: Vec<Diagnostic> = findings.iter().map(|(_, f)| f.diagnostic.clone()).collect();
    let count = |s: Severity| diags.iter().filter(|d| d.severity == s).count();
    let fixable = findings
        .iter()
        .filter(|(_, f)| f.diagnostic.fix.as_ref().is_some_and(|x| x.safe) && !f.edits.is_empty())
        .count();

    match args.format {
        FindingsFormat::Human => {
            let sources: HashMap<&str, &str> = reports
                .iter()
                .map(|r| (r.display.as_str(), r.source.as_str()))
                .collect();
            let text =
                diagnostics::render_human(&diags, &|f| sources.get(f).map(|s| s.to_string()));
            print!("{text}");
            if diags.is_empty() {
                println!("All checks passed ({} files).", reports.len());
            } else {
                println!(
                    "Found {} finding{} in {} files ({} error, {} warning, {} info).",
                    diags.len(),
                    if diags.len() == 1 { "" } else { "s" },
                    reports.len(),
                    count(Severity::Error),
                    count(Severity::Warning),
                    count(Severity::Info)
                );
                if fixable > 0 {
                    println!("[*] {fixable} fixable with `--fix`.");
                }
            }
            if fixed > 0 {
                println!(
                    "Fixed {fixed} finding{}.",
                    if fixed == 1 { "" } else { "s" }
                );
            }
        }
        FindingsFormat::Json => {
            // One line index per file, its lines found on its first fix (a fresh one per
            // finding scanned the file again for every finding).
            let mut indexes: std::collections::HashMap<&str, LineIndex> = Default::default();
            let items: Vec<serde_json::Value> = findings
                .iter()
                .map(|(r, f)| json_item(r, f, indexes.entry(r.display.as_str()).or_default()))
                .collect();
            let v = serde_json::json!({
                "diagnostics": items,
                "summary": {
                    "files": reports.len(),
                    "error": count(Severity::Error),
                    "warning": count(Severity::Warning),
                    "info": count(Severity::Info),
                    "fixable": fixable,
                    "fixed": fixed,
                }
            });
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        FindingsFormat::Sarif => {
            let rules: Vec<diagnostics::RuleInfo> =
                source_lint::RULES.iter().map(|r| r.info()).collect();
            let v = diagnostics::render_sarif(&diags, &rules, env!("CARGO_PKG_VERSION"));
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    }
    if let Some(all) = unreadable {
        eprintln!("error: {all}");
        return Ok(ExitCode::from(2));
    }
    Ok(ExitCode::from(diagnostics::exit_code(&diags)))
}

/// Writes a fixed file: the file a symlink names, through a temporary file beside it, renamed
/// into place once written and synced, with the file's permissions and owner, so a failure
/// never leaves half of it. Only when the directory takes no new file is the file written in
/// place. A file the user cannot write is an error, not replaced.
fn write_fixed(path: &std::path::Path, text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    use std::os::unix::fs::MetadataExt as _;
    let target = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    let meta = std::fs::metadata(&target)
        .with_context(|| format!("{}: cannot read the file to fix", path.display()))?;
    // Opening for writing (no truncation) asks the system, not the mode bits, whether we may.
    if meta.permissions().readonly()
        || std::fs::OpenOptions::new()
            .write(true)
            .open(&target)
            .is_err()
    {
        bail!("{}: the file is not writable; not fixed", path.display());
    }
    let name = target
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = target.with_file_name(format!(".{name}.onnx-doctor-fix-{}", std::process::id()));
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp);
    let mut file = match file {
        Ok(f) => f,
        // A directory that takes no new file: in place, as an editor would.
        Err(e)
            if matches!(
                e.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::ReadOnlyFilesystem
            ) =>
        {
            return std::fs::write(&target, text)
                .with_context(|| format!("{}: cannot write the fixed file", path.display()));
        }
        Err(e) => {
            return Err(e)
                .with_context(|| format!("{}: cannot write the fixed file", path.display()))
        }
    };
    let written = file
        .write_all(text.as_bytes())
        .and_then(|_| file.sync_all())
        .and_then(|_| std::fs::set_permissions(&tmp, meta.permissions()))
        .and_then(|_| {
            // The owner stays (root fixing another user's file); refused for anyone else, who
            // can only have written a file they own.
            let _ = std::os::unix::fs::chown(&tmp, Some(meta.uid()), Some(meta.gid()));
            std::fs::rename(&tmp, &target)
        });
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("{}: cannot write the fixed file", path.display()));
    }
    Ok(())
}

fn json_item(rep: &source_lint::FileReport, f: &Finding, index: &LineIndex) -> serde_json::Value {
    let d = &f.diagnostic;
    let (line, column) = match d.location {
        diagnostics::Location::Source { line, column, .. } => (line, column),
        _ => (0, 0),
    };
    let fix = d.fix.as_ref().map(|x| {
        let edits: Vec<serde_json::Value> = f
            .edits
            .iter()
            .map(|e| {
                let (l, c) = index.line_col(&rep.source, e.start);
                let (el, ec) = index.line_col(&rep.source, e.end);
                serde_json::json!({"line": l, "column": c, "end_line": el, "end_column": ec, "content": e.content})
            })
            .collect();
        serde_json::json!({"description": x.description, "safe": x.safe, "edits": edits})
    });
    let mut v = serde_json::json!({
        "file": rep.display,
        "line": line,
        "column": column,
        "code": d.code,
        "name": source_lint::rule(&d.code).map(|r| r.name).unwrap_or(""),
        "severity": d.severity.as_str(),
        "message": d.message,
        "fix": fix,
    });
    if let Some(h) = &d.help {
        v["help"] = serde_json::Value::String(h.clone());
    }
    v
}
