//! `onnx-doctor verify MODEL [--dim NAME=N1,N2,...]... [--backends native] [--seed S]
//! [--format human|json]`
//!
//! Checks that the model's dynamic axes really are dynamic: for every symbolic dim of the graph
//! inputs, runs the model at several sizes (seeded random inputs), one dim varied at a time with
//! the others at their first size, then all at their last size. Each run must succeed and every
//! output dim the model declares must follow: a fixed dim keeps its value, a dim named after an
//! input symbol equals that symbol's size. When a size fails, the report names the node that
//! failed and the constants shape inference finds baking an export-time size (rule ODT033).
//! With `--backends native,ort` the peers run the same inputs and must agree with the native
//! engine.
//! Exit 1 when any run fails.

use crate::format::Format;
use anyhow::{bail, Context, Result};
use engine::{Capture, EngineError, Session, Value};
use onnx_ir::{Dim, ElemType, Model, ValueType};
use serde_json::json;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The .onnx file.
    pub model: PathBuf,
    /// Sizes to try for a symbolic dim: NAME=N1,N2,... (repeatable). Default 1,2,7.
    #[arg(long = "dim", value_name = "NAME=N1,N2,...", value_parser = parse_sizes)]
    pub dim: Vec<(String, Vec<usize>)>,
    /// Backends to run on; with more than one, their outputs must also agree (rtol 1e-3,
    /// atol 1e-4) with the first's. ort and tract need the cargo features of the same names.
    #[arg(
        long = "backends",
        value_delimiter = ',',
        value_enum,
        default_value = "native"
    )]
    pub backends: Vec<crate::verbs::bench::BackendArg>,
    /// Seed of the random inputs.
    #[arg(long = "seed", default_value_t = 0)]
    pub seed: u64,
    #[arg(long = "format", value_enum, default_value_t)]
    pub format: Format,
}

const DEFAULT_SIZES: &[usize] = &[1, 2, 7];

fn parse_sizes(s: &str) -> Result<(String, Vec<usize>), String> {
    let bad = || format!("expected NAME=N1,N2,... (e.g. batch=1,2,7), got '{s}'");
    let (name, list) = s.split_once('=').ok_or_else(bad)?;
    let sizes = list
        .split(',')
        .map(|v| v.trim().parse::<usize>().map_err(|_| bad()))
        .collect::<Result<Vec<_>, _>>()?;
    if name.is_empty() || sizes.is_empty() {
        return Err(bad());
    }
    Ok((name.to_string(), sizes))
}

/// A peer backend's outputs by name, or why it failed.
type PeerRun = Result<Vec<(String, Value)>, String>;

struct RunReport {
    dims: BTreeMap<String, usize>,
    error: Option<String>,
    node: Option<(String, String)>,
    /// (output, got shape, expected dims as declared with symbols resolved)
    mismatches: Vec<(String, Vec<usize>, Vec<String>)>,
    shapes: Vec<(String, Vec<usize>)>,
    /// Peer backends whose outputs differ from the native engine's.
    disagreements: Vec<String>,
}

pub fn run(args: Args) -> Result<ExitCode> {
    std::panic::set_hook(Box::new(|_| {}));
    let file = args.model.display().to_string();
    let model = Model::load(&args.model)?;
    // Peers (every backend after a leading native one) run the same inputs; native runs through
    // the session below, which names the failing node.
    let mut peers: Vec<Box<dyn engine::backend::Backend>> = Vec::new();
    for b in &args.backends {
        let kind = b.kind();
        if kind == engine::backend::BackendKind::Native {
            continue;
        }
        let backend = engine::backend::open(kind, &args.model, Model::load(&args.model)?, 1)
            .with_context(|| {
                format!("{file}: cannot open the model on backend '{}'", kind.name())
            })?;
        peers.push(backend);
    }
    let session =
        Session::new(model.clone()).with_context(|| format!("{file}: cannot run this model"))?;
    let specs: Vec<_> = session
        .inputs()
        .into_iter()
        .filter(|s| !s.has_initializer)
        .collect();
    // Symbolic dims, in order of first appearance.
    let mut symbols: Vec<String> = Vec::new();
    for s in &specs {
        if let Some(shape) = s.ty.0.shape() {
            for d in shape {
                if let Dim::Sym(n) = d {
                    if !symbols.contains(n) {
                        symbols.push(n.clone());
                    }
                }
            }
        }
    }
    for (n, _) in &args.dim {
        if !symbols.contains(n) {
            bail!(
                "--dim {n}: the model's inputs have no symbolic dim '{n}' (symbolic dims: {})",
                if symbols.is_empty() {
                    "none".to_string()
                } else {
                    symbols.join(", ")
                }
            );
        }
    }
    if symbols.is_empty() {
        bail!("{file}: no graph input has a symbolic dim, so there is nothing to verify (all inputs are fixed-size)");
    }
    let sizes: BTreeMap<&str, Vec<usize>> = symbols
        .iter()
        .map(|s| {
            let v = args
                .dim
                .iter()
                .find(|(n, _)| n == s)
                .map_or(DEFAULT_SIZES.to_vec(), |(_, v)| v.clone());
            (s.as_str(), v)
        })
        .collect();

    // The plan: base, each dim through its sizes, all at their last size.
    let base: BTreeMap<String, usize> = sizes.iter().map(|(k, v)| (k.to_string(), v[0])).collect();
    let mut plan: Vec<BTreeMap<String, usize>> = vec![base.clone()];
    for (k, v) in &sizes {
        for &n in &v[1..] {
            let mut d = base.clone();
            d.insert(k.to_string(), n);
            if !plan.contains(&d) {
                plan.push(d);
            }
        }
    }
    let last: BTreeMap<String, usize> = sizes
        .iter()
        .map(|(k, v)| (k.to_string(), *v.last().unwrap()))
        .collect();
    if !plan.contains(&last) {
        plan.push(last);
    }

    let outputs: Vec<(String, ValueType)> = model
        .graph()
        .output
        .iter()
        .map(|o| {
            (
                o.name().to_string(),
                ValueType::from_proto(o.r#type.as_ref()),
            )
        })
        .collect();
    let mut reports = Vec::new();
    for dims in plan {
        let mut rng = crate::feed::SplitMix(args.seed);
        let mut inputs = Vec::new();
        for s in &specs {
            let ValueType::Tensor {
                elem: ElemType::Known(dt),
                shape: Some(shape),
            } = &s.ty.0
            else {
                bail!("input '{}': verify needs a tensor input with a declared element type and rank, got {}", s.name, s.ty);
            };
            let concrete: Vec<usize> = shape
                .iter()
                .map(|d| match d {
                    Dim::Fixed(n) => *n as usize,
                    Dim::Sym(n) => dims[n],
                    Dim::Unknown => 1,
                })
                .collect();
            let n = concrete.iter().product();
            let t = crate::feed::random_tensor(*dt, concrete, n, &mut rng)
                .with_context(|| format!("input '{}'", s.name))?;
            inputs.push((s.name.clone(), Value::Tensor(t)));
        }
        let mut r = RunReport {
            dims: dims.clone(),
            error: None,
            node: None,
            mismatches: Vec::new(),
            shapes: Vec::new(),
            disagreements: Vec::new(),
        };
        let peer_outputs: Vec<(String, PeerRun)> = peers
            .iter_mut()
            .map(|p| {
                let name = p.name().to_string();
                let out = p
                    .prepare(&inputs)
                    .and_then(|()| p.run(&inputs))
                    .map_err(|e| e.to_string());
                (name, out)
            })
            .collect();
        for (name, out) in &peer_outputs {
            if let Err(e) = out {
                r.error
                    .get_or_insert_with(|| format!("backend {name}: {e}"));
            }
        }
        match session.run(inputs, &Capture::None) {
            Err(e) => {
                if let EngineError::Node { node, op, .. } = &e {
                    r.node = Some((node.clone(), op.clone()));
                }
                r.error = Some(e.to_string());
            }
            Ok(out) => {
                for ((name, v), (_, ty)) in out.outputs.iter().zip(&outputs) {
                    let Value::Tensor(t) = v else { continue };
                    r.shapes.push((name.clone(), t.shape().to_vec()));
                    let Some(declared) = ty.shape() else { continue };
                    let expected: Vec<Option<usize>> = declared
                        .iter()
                        .map(|d| match d {
                            Dim::Fixed(n) => Some(*n as usize),
                            Dim::Sym(s) => dims.get(s).copied(),
                            Dim::Unknown => None,
                        })
                        .collect();
                    let bad = declared.len() != t.rank()
                        || expected
                            .iter()
                            .zip(t.shape())
                            .any(|(e, &g)| e.is_some_and(|e| e != g));
                    if bad {
                        r.mismatches.push((
                            name.clone(),
                            t.shape().to_vec(),
                            declared
                                .iter()
                                .map(|d| match d {
                                    Dim::Sym(s) => match dims.get(s) {
                                        Some(n) => format!("{s}={n}"),
                                        None => s.clone(),
                                    },
                                    other => other.to_string(),
                                })
                                .collect(),
                        ));
                    }
                }
                // Backends must agree with the native engine.
                let tol = engine::compare::Tolerance {
                    rtol: 1e-3,
                    atol: 1e-4,
                };
                for (peer, res) in &peer_outputs {
                    let Ok(theirs) = res else { continue };
                    for (name, v) in &out.outputs {
                        let (Value::Tensor(a), Some((_, Value::Tensor(b)))) =
                            (v, theirs.iter().find(|(n, _)| n == name))
                        else {
                            continue;
                        };
                        match engine::compare::stats(b, a, tol) {
                            Ok(st) if st.out_of_tolerance == 0 => {}
                            Ok(st) => r.disagreements.push(format!(
                                "{peer} disagrees with native on '{name}': {} of {} elements beyond rtol 1e-3 atol 1e-4, max abs err {:.3e}",
                                st.out_of_tolerance, st.elements, st.max_abs
                            )),
                            Err(e) => r.disagreements.push(format!("{peer} on '{name}': {e}")),
                        }
                    }
                }
            }
        }
        reports.push(r);
    }
    let failed = reports
        .iter()
        .filter(|r| r.error.is_some() || !r.mismatches.is_empty() || !r.disagreements.is_empty())
        .count();
    let baked: Vec<diagnostics::Diagnostic> = if failed > 0 {
        analysis::lint(&model, &file, &[])
            .into_iter()
            .map(|f| f.diagnostic)
            .filter(|d| d.code == "ODT033")
            .collect()
    } else {
        Vec::new()
    };

    match args.format {
        Format::Json => {
            let doc = json!({
                "model": file,
                "ok": failed == 0,
                "dims": sizes,
                "runs": reports.iter().map(|r| json!({
                    "dims": r.dims,
                    "ok": r.error.is_none() && r.mismatches.is_empty() && r.disagreements.is_empty(),
                    "disagreements": r.disagreements,
                    "error": r.error,
                    "node": r.node.as_ref().map(|n| &n.0),
                    "op_type": r.node.as_ref().map(|n| &n.1),
                    "outputs": r.shapes.iter().map(|(n, s)| json!({"name": n, "shape": s})).collect::<Vec<_>>(),
                    "mismatches": r.mismatches.iter().map(|(n, g, e)| json!({"output": n, "shape": g, "declared": e})).collect::<Vec<_>>(),
                })).collect::<Vec<_>>(),
                "baked_constants": baked,
            });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        Format::Human => {
            println!("{file}: verifying symbolic dims {}", symbols.join(", "));
            for r in &reports {
                let dims: Vec<String> = r.dims.iter().map(|(k, v)| format!("{k}={v}")).collect();
                let dims = dims.join(" ");
                if let Some(e) = &r.error {
                    println!("  FAIL {dims}: {e}");
                } else if !r.mismatches.is_empty() {
                    for (n, g, e) in &r.mismatches {
                        println!(
                            "  FAIL {dims}: output '{n}' has shape {g:?}, declared [{}]",
                            e.join(", ")
                        );
                    }
                } else if !r.disagreements.is_empty() {
                    for d in &r.disagreements {
                        println!("  FAIL {dims}: {d}");
                    }
                } else {
                    let shapes: Vec<String> =
                        r.shapes.iter().map(|(n, s)| format!("{n} {s:?}")).collect();
                    println!("  ok   {dims}: {}", shapes.join(", "));
                }
            }
            if failed > 0 {
                if baked.is_empty() {
                    println!("\nno constant was found baking an export-time size; the failing node above is where to look");
                } else {
                    println!("\nconstants that bake an export-time size:");
                    for d in &baked {
                        let at = match &d.location {
                            diagnostics::Location::Node { node, op, .. } => {
                                format!("node '{node}' ({op})")
                            }
                            _ => String::new(),
                        };
                        println!("  {at}: {}", d.message);
                        if let Some(h) = &d.help {
                            println!("    fix: {h}");
                        }
                    }
                }
                println!(
                    "\n{failed} of {} runs failed: the dynamic axes do not all work",
                    reports.len()
                );
            } else {
                println!("\nall {} runs passed: the dynamic axes work", reports.len());
            }
        }
    }
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}
