//! `onnx-doctor check MODEL [--format human|json|sarif]`
//!
//! The spec checker (crate `analysis`): IR and opset imports, every node against its operator
//! schema (existence at the imported opset, arity, attributes, type constraints), scoping, single
//! assignment, topological order, initializers, functions; warnings for unused values and dead
//! nodes. Exit 1 when a finding is an error, 0 otherwise, 2 when the file cannot be read.

use crate::format::FindingsFormat;
use anyhow::Result;
use diagnostics::{RuleInfo, Severity};
use onnx_ir::Model;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The .onnx file.
    pub model: PathBuf,
    #[arg(long, value_enum, default_value_t)]
    pub format: FindingsFormat,
    /// Fix a graph input's dims for shape inference: NAME=1x3x224x224 (repeatable).
    #[arg(long = "input-shape", value_name = "NAME=DIMS", value_parser = crate::input_shape::parse)]
    pub input_shape: Vec<(String, Vec<i64>)>,
    /// Also check deployment on backends: comma-separated profile names (`onnx-doctor targets`), or `all`.
    #[arg(long, value_name = "TARGETS")]
    pub target: Option<String>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let file = args.model.display().to_string();
    let model = Model::load(&args.model)?;
    let shapes = crate::input_shape::resolve(&model, &args.input_shape)?;
    let targets = match &args.target {
        Some(list) => analysis::targets::resolve(list).map_err(anyhow::Error::msg)?,
        None => Vec::new(),
    };
    // One shape inference serves the spec check and the deployment lints. The lints judge the
    // model as declared: with `--input-shape` pinning a dim they get their own inference, since a
    // pinned dim would hide the dynamic-axis hazards they look for.
    let inference = analysis::infer(&model, &file, &shapes);
    let declared =
        (!shapes.is_empty()).then(|| analysis::infer(&model, &file, &Default::default()));
    let mut findings = analysis::check_with(&model, &file, &inference);
    let spec = findings.clone();
    let mut target_of: Vec<Option<String>> = vec![None; findings.len()];
    let lint_inference = declared.as_ref().unwrap_or(&inference);
    for f in analysis::lint_with(&model, &file, &targets, lint_inference, &spec) {
        findings.push(f.diagnostic);
        target_of.push(f.target);
    }
    match args.format {
        FindingsFormat::Human => {
            print!("{}", diagnostics::render_human(&findings, &|_| None));
            let count = |s| findings.iter().filter(|d| d.severity == s).count();
            let (errors, warnings) = (count(Severity::Error), count(Severity::Warning));
            if findings.is_empty() {
                println!("{file}: all checks passed");
            } else {
                println!("{file}: {errors} error(s), {warnings} warning(s)");
            }
            if !targets.is_empty() {
                print!("{}", target_table(&targets, &findings, &target_of));
            }
        }
        FindingsFormat::Json => {
            let mut v = diagnostics::render_json(&findings);
            v["file"] = file.into();
            if let Some(list) = v["diagnostics"].as_array_mut() {
                for (d, t) in list.iter_mut().zip(&target_of) {
                    d["target"] = t.clone().into();
                    // Flat fields for tools that do not want to walk `location`.
                    let node = d["location"]["node"].clone();
                    let op = d["location"]["op"].clone();
                    d["node"] = node;
                    d["op_type"] = op;
                }
            }
            if !targets.is_empty() {
                v["targets"] = targets
                    .iter()
                    .map(|p| serde_json::json!({"target": p.name, "verdict": verdict(p, &findings, &target_of)}))
                    .collect();
            }
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        FindingsFormat::Sarif => {
            // SARIF has no target field of its own: each result carries it in its property bag
            // (`properties.target`, null when target-independent) with the flat `node`,
            // `op_type` and `help` the JSON output has; the message names the target too.
            let rules: Vec<RuleInfo> = analysis::ALL_CODES
                .iter()
                .map(|c| RuleInfo {
                    code: c.code().into(),
                    name: c.name().into(),
                    summary: c.summary().into(),
                })
                .collect();
            let mut v = diagnostics::render_sarif(&findings, &rules, env!("CARGO_PKG_VERSION"));
            if let Some(results) = v["runs"][0]["results"].as_array_mut() {
                for ((r, t), d) in results.iter_mut().zip(&target_of).zip(&findings) {
                    let (node, op) = match &d.location {
                        diagnostics::Location::Node { node, op, .. } => {
                            (Some(node.as_str()), Some(op.as_str()))
                        }
                        _ => (None, None),
                    };
                    r["properties"] = serde_json::json!({
                        "target": t, "node": node, "op_type": op, "help": d.help,
                    });
                }
            }
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    }
    Ok(ExitCode::from(diagnostics::exit_code(&findings)))
}

/// A target's verdict: `will fail` when a finding is an error for it or for every target (a
/// target-independent error), `runs with warnings` when any warning concerns it, else `runs`.
fn verdict(
    p: &analysis::targets::Profile,
    findings: &[diagnostics::Diagnostic],
    target_of: &[Option<String>],
) -> &'static str {
    let worst = findings
        .iter()
        .zip(target_of)
        .filter(|(_, t)| t.as_deref().is_none_or(|t| t == p.name))
        .map(|(d, _)| d.severity)
        .max();
    match worst {
        Some(Severity::Error) => "will fail",
        Some(Severity::Warning) => "runs with warnings",
        _ => "runs",
    }
}

/// The table that ends human output when targets are given.
fn target_table(
    targets: &[&analysis::targets::Profile],
    findings: &[diagnostics::Diagnostic],
    target_of: &[Option<String>],
) -> String {
    let width = targets
        .iter()
        .map(|p| p.name.len())
        .max()
        .unwrap_or(0)
        .max(6);
    let mut out = format!("\n{:width$}  verdict\n", "target");
    for p in targets {
        out.push_str(&format!(
            "{:width$}  {}\n",
            p.name,
            verdict(p, findings, target_of)
        ));
    }
    out
}
