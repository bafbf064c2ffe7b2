//! `onnx-doctor shapes MODEL -o OUT.onnx [--input-shape NAME=DIMS]...`
//!
//! Writes the model with every inferred type filled in (value_info for intermediate values, graph
//! outputs made as specific as inference allows), as `onnx.shape_inference.infer_shapes_path`
//! does, so any tool can read the shapes. Symbolic dims are kept and combined (`batch`,
//! `3*batch`, `seq+1`). Prints what could not be inferred.

use anyhow::{Context, Result};
use onnx_ir::{Model, SaveOptions};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The .onnx file.
    pub model: PathBuf,
    /// Where to write the model with shapes.
    #[arg(short = 'o', long = "output")]
    pub output: PathBuf,
    /// Fix a graph input's dims: NAME=1x3x224x224 (repeatable).
    #[arg(long = "input-shape", value_name = "NAME=DIMS", value_parser = crate::input_shape::parse)]
    pub input_shape: Vec<(String, Vec<i64>)>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let file = args.model.display().to_string();
    let mut model = Model::load(&args.model)?;
    let shapes = crate::input_shape::resolve(&model, &args.input_shape)?;
    let inference = analysis::infer(&model, &file, &shapes);
    analysis::apply(&mut model.proto, &inference);
    model
        .save(&args.output, &SaveOptions::default())
        .with_context(|| format!("writing {}", args.output.display()))?;
    for d in &inference.findings {
        eprintln!("{file}: {} {}", d.code, d.message);
    }
    if !inference.uninferred.is_empty() {
        let ops: Vec<String> = inference
            .uninferred
            .iter()
            .map(|(op, n)| format!("{op} ({n})"))
            .collect();
        eprintln!("{file}: no shape inference yet for: {}", ops.join(", "));
    }
    Ok(ExitCode::SUCCESS)
}
