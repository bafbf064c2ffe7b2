//! `onnx-doctor run MODEL [--input NAME=FILE]... [--input-dir DIR] [--output FILE.npz]
//! [--output-dir DIR] [--capture all|NAME,...] [--random-inputs --dim NAME=N ...] [--format json]`
//!
//! Runs the model on the native engine. Outputs go to an `.npz` keyed by output name, or to a
//! directory of `output_<i>.pb` in graph-output order (each message named after its output), or,
//! without either, are summarised on stdout. `--capture` adds intermediates: to the `.npz` under
//! their value names, and to `DIR/captured/` as `<n>_<value>.pb`.

use crate::feed::{self, InputArgs};
use crate::format::Format;
use anyhow::{bail, Context, Result};
use engine::{Capture, Session, Value};
use onnx_ir::Model;
use serde_json::json;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The .onnx file.
    pub model: PathBuf,
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Write outputs (and captured values) to this .npz, keyed by value name.
    #[arg(long = "output", value_name = "FILE.npz")]
    pub output: Option<PathBuf>,
    /// Write outputs as output_<i>.pb into this directory (created if needed).
    #[arg(long = "output-dir", value_name = "DIR")]
    pub output_dir: Option<PathBuf>,
    /// Also keep intermediate values: `all` or a comma-separated list of value names.
    #[arg(long = "capture", value_name = "all|NAME,...")]
    pub capture: Option<String>,
    #[arg(long = "format", value_enum, default_value_t)]
    pub format: Format,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let model = Model::load(&args.model)?;
    let file = args.model.display().to_string();
    let session = Session::new(model).with_context(|| format!("{file}: cannot run this model"))?;
    let inputs = feed::load(&args.inputs, &session).with_context(|| file.clone())?;
    let capture = match args.capture.as_deref() {
        None => Capture::None,
        Some("all") => Capture::All,
        Some(list) => Capture::Names(
            list.split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(String::from)
                .collect(),
        ),
    };
    // A kernel bug must surface as an error, not as a panic trace.
    std::panic::set_hook(Box::new(|_| {}));
    let start = std::time::Instant::now();
    let result = session
        .run(inputs, &capture)
        .with_context(|| format!("{file}: run failed"))?;
    let elapsed = start.elapsed();
    if let Capture::Names(names) = &capture {
        let g = session.model().graph();
        for n in names {
            let produced = g.node.iter().any(|node| node.output.iter().any(|o| o == n));
            if !produced && !result.captured.iter().any(|(c, _)| c == n) {
                bail!("--capture {n}: no node of the main graph produces a value named '{n}'");
            }
        }
    }

    if let Some(path) = &args.output {
        let mut tensors: Vec<(String, tensor::Tensor)> = Vec::new();
        let mut seen = std::collections::HashSet::new();
        for (name, v) in result.outputs.iter().chain(&result.captured) {
            // A captured graph output is already there.
            if seen.insert(name.as_str()) {
                flatten_for_npz(name, v, &mut tensors);
            }
        }
        tensor::npz::write(path, tensors.iter().map(|(n, t)| (n.as_str(), t)))
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(dir) = &args.output_dir {
        std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        for (i, (name, v)) in result.outputs.iter().enumerate() {
            let p = dir.join(format!("output_{i}.pb"));
            engine::io::write_pb(&p, v, name)
                .map_err(anyhow::Error::msg)
                .with_context(|| format!("writing {}", p.display()))?;
        }
        if !result.captured.is_empty() {
            let cdir = dir.join("captured");
            std::fs::create_dir_all(&cdir)
                .with_context(|| format!("creating {}", cdir.display()))?;
            for (i, (name, v)) in result.captured.iter().enumerate() {
                let p = cdir.join(format!("{i}_{}.pb", sanitize(name)));
                engine::io::write_pb(&p, v, name)
                    .map_err(anyhow::Error::msg)
                    .with_context(|| format!("writing {}", p.display()))?;
            }
        }
    }

    match args.format {
        Format::Json => {
            let doc = json!({
                "model": file,
                "time_ms": elapsed.as_secs_f64() * 1e3,
                "outputs": result.outputs.iter().map(|(n, v)| summary_json(n, v)).collect::<Vec<_>>(),
                "captured": result.captured.iter().map(|(n, v)| summary_json(n, v)).collect::<Vec<_>>(),
            });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        Format::Human => {
            println!("{file}: ran in {:.2} ms", elapsed.as_secs_f64() * 1e3);
            for (n, v) in &result.outputs {
                println!("  {}", summary_line(n, v));
            }
            if !result.captured.is_empty() {
                println!("  captured {} intermediate values", result.captured.len());
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Tensors go in under their name; a sequence's items as `NAME/<i>`; an optional's content
/// under its name (nothing when empty).
fn flatten_for_npz(name: &str, v: &Value, out: &mut Vec<(String, tensor::Tensor)>) {
    match v {
        Value::Tensor(t) => out.push((name.to_string(), t.clone())),
        Value::Sequence { items, .. } => {
            for (i, t) in items.iter().enumerate() {
                out.push((format!("{name}/{i}"), t.clone()));
            }
        }
        Value::Optional(Some(inner)) => flatten_for_npz(name, inner, out),
        Value::Optional(None) => {}
    }
}

/// min / max / mean of a numeric tensor, and its first few elements.
fn stats(t: &tensor::Tensor) -> Option<(f64, f64, f64, Vec<f64>)> {
    let v = ops::exec::util::to_f64s(t).ok()?;
    if v.is_empty() {
        return None;
    }
    let min = v.iter().copied().fold(f64::INFINITY, f64::min);
    let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    Some((min, max, mean, v.iter().take(8).copied().collect()))
}

fn summary_line(name: &str, v: &Value) -> String {
    match v {
        Value::Tensor(t) => {
            let head = format!("{name}: {}{:?}", t.dtype(), t.shape());
            match stats(t) {
                Some((min, max, mean, first)) => format!(
                    "{head} min {min:.6} max {max:.6} mean {mean:.6} first {:?}",
                    first
                ),
                None => head,
            }
        }
        other => format!("{name}: {}", other.describe()),
    }
}

fn summary_json(name: &str, v: &Value) -> serde_json::Value {
    match v {
        Value::Tensor(t) => {
            let mut o = json!({
                "name": name,
                "kind": "tensor",
                "dtype": t.dtype().name(),
                "shape": t.shape(),
            });
            if let Some((min, max, mean, first)) = stats(t) {
                o["min"] = json!(min);
                o["max"] = json!(max);
                o["mean"] = json!(mean);
                o["first"] = json!(first);
            }
            o
        }
        Value::Sequence { elem_type, items } => json!({
            "name": name,
            "kind": "sequence",
            "dtype": elem_type.name(),
            "items": items.iter().map(|t| json!({"dtype": t.dtype().name(), "shape": t.shape()})).collect::<Vec<_>>(),
        }),
        Value::Optional(inner) => json!({
            "name": name,
            "kind": "optional",
            "value": inner.as_deref().map(|v| summary_json(name, v)),
        }),
    }
}
