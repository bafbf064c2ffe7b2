//! `onnx-doctor rule CODE [--format human|json]`
//!
//! Prints what a finding code means, whichever verb reports it: a source lint rule (`ODL…`, its
//! full documentation), a deployment lint (`ODT…`, its documentation from the rule's file), or a
//! spec-check code (`ODC…`, name, severity and meaning).
//! JSON: `{"code", "name", "severity", "summary", "doc"}` (`doc` is null for ODC codes); lint rules
//! print the same document as `explain CODE`.

use crate::format::Format;
use anyhow::{bail, Result};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// A finding code: ODL001 (lint), ODT001 (check --target), ODC050 (check).
    pub code: String,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let code = args.code.trim().to_ascii_uppercase();
    if let Some(rule) = source_lint::rule(&code) {
        super::explain::print_rule(rule, args.format)?;
        return Ok(ExitCode::SUCCESS);
    }
    let Some(c) = analysis::ALL_CODES.iter().find(|c| c.code() == code) else {
        bail!("unknown code '{}': expected a code listed in docs/checks.md (ODC…, ODT…) or docs/rules.md (ODL…)", args.code);
    };
    let doc = analysis::RULES
        .iter()
        .find(|r| r.code == *c)
        .map(|r| r.doc());
    match args.format {
        Format::Json => {
            let v = serde_json::json!({
                "code": c.code(), "name": c.name(), "severity": c.severity().as_str(),
                "summary": c.summary(), "doc": doc,
            });
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
        Format::Human => {
            println!(
                "{} ({}) [{}]\n{}",
                c.code(),
                c.name(),
                c.severity().as_str(),
                c.summary()
            );
            if let Some(doc) = doc {
                println!("\n{}", doc.trim_end());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}
