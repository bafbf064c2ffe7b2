//! `onnx-doctor targets [--format human|json]`
//!
//! Lists the deployment target profiles `check --target` knows: name, backend, version, how many
//! ops each accepts, its opset range and the sources its facts come from.

use crate::format::Format;
use anyhow::Result;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let profiles = analysis::targets::profiles();
    match args.format {
        Format::Human => {
            for p in profiles {
                let range = match (p.opset_min, p.opset_max) {
                    (None, None) => "per op".to_string(),
                    (a, b) => format!(
                        "{}..{}",
                        a.map(|v| v.to_string()).unwrap_or_default(),
                        b.map(|v| v.to_string()).unwrap_or_default()
                    ),
                };
                println!(
                    "{}  {} {} — {} ops, opsets {range}",
                    p.name,
                    p.backend,
                    p.version,
                    p.op_count()
                );
                for s in &p.sources {
                    println!("  [{}] {} <{}> ({})", s.id, s.title, s.url, s.version);
                }
            }
        }
        Format::Json => {
            let v: Vec<serde_json::Value> = profiles
                .iter()
                .map(|p| {
                    serde_json::json!({
                        "name": p.name,
                        "backend": p.backend,
                        "version": p.version,
                        "ops": p.op_count(),
                        "opset_min": p.opset_min,
                        "opset_max": p.opset_max,
                        "sources": p.sources.iter().map(|s| serde_json::json!({
                            "id": s.id, "title": s.title, "url": s.url, "version": s.version,
                        })).collect::<Vec<_>>(),
                    })
                })
                .collect();
            println!("{}", serde_json::to_string_pretty(&v)?);
        }
    }
    Ok(ExitCode::SUCCESS)
}
