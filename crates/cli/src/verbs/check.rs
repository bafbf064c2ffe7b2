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
}

pub fn run(args: Args) -> Result<ExitCode> {
    let file = args.model.display().to_string();
    let model = Model::load(&args.model)?;
    let shapes = crate::input_shape::resolve(&model, &args.input_shape)?;
    let findings = analysis::check(&model, &file, &shapes);
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
        }
        FindingsFormat::Json => {
            let mut v = diagnostics::render_json(&findings);
            v["file"] = file.into();
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        FindingsFormat::Sarif => {
            let rules: Vec<RuleInfo> = analysis::ALL_CODES
                .iter()
                .map(|c| RuleInfo {
                    code: c.code().into(),
                    name: c.name().into(),
                    summary: c.summary().into(),
                })
                .collect();
            let v = diagnostics::render_sarif(&findings, &rules, env!("CARGO_PKG_VERSION"));
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    }
    Ok(ExitCode::from(diagnostics::exit_code(&findings)))
}
