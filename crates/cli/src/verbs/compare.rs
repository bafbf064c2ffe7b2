//! `onnx-doctor compare MODEL (--reference REF | --against MODEL2) [inputs as for run]
//! [--rtol R] [--atol A] [--tol NAME=R,A]... [--layerwise] [--reinject] [--bisect DIR]
//! [--html FILE] [--format human|json]`
//!
//! Compares MODEL's outputs with a reference: an `.npz` (outputs keyed by output name, inputs
//! keyed `input:NAME`, intermediates keyed by ONNX value name or PyTorch module path) or an ONNX
//! test-data directory; or with a second model run on the same inputs (MODEL is the reference,
//! MODEL2 the candidate). Per output: max abs / rel error, mean, p99, cosine similarity, SQNR and
//! the count of elements out of tolerance. Exit 1 when an output is out of tolerance.
//!
//! `--layerwise` captures every intermediate on both sides and walks the candidate's nodes in
//! run order: the first divergent node is the first whose output is out of tolerance while every
//! activation it reads (not its initializers: those are its own parameters) agrees. `--reinject`
//! also runs each node on the reference's values of its inputs, separating its own error from
//! the error it inherits. `--bisect DIR` writes that node as a standalone model with its input
//! and expected output tensors (ONNX test-data layout), ready for a bug report.

use crate::feed::{self, InputArgs};
use crate::format::Format;
use anyhow::{bail, Context, Result};
use engine::compare::{stats, Stats, Tolerance};
use engine::{Capture, Session, Value};
use onnx_ir::Model;
use onnx_proto::{GraphProto, ModelProto, NodeProto, TensorProto, ValueInfoProto};
use serde_json::json;
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The .onnx file (the reference when --against is given).
    pub model: PathBuf,
    /// Expected values: an .npz (outputs by name, `input:NAME` inputs, intermediates by value
    /// name or module path) or an ONNX test-data directory (input_<i>.pb, output_<i>.pb).
    #[arg(long = "reference", value_name = "REF", conflicts_with = "against")]
    pub reference: Option<PathBuf>,
    /// A second model (simplified, quantized, faulty...) run on the same inputs.
    #[arg(long = "against", value_name = "MODEL2")]
    pub against: Option<PathBuf>,
    /// The same model on two backends, the first as the reference: e.g. `native,ort`
    /// (ort and tract need the cargo features of the same names).
    #[arg(long = "backends", value_delimiter = ',', value_enum, value_name = "A,B",
          conflicts_with_all = ["reference", "against"])]
    pub backends: Vec<crate::verbs::bench::BackendArg>,
    #[command(flatten)]
    pub inputs: InputArgs,
    /// Relative tolerance.
    #[arg(long = "rtol", default_value_t = 1e-3)]
    pub rtol: f64,
    /// Absolute tolerance.
    #[arg(long = "atol", default_value_t = 1e-4)]
    pub atol: f64,
    /// Tolerances for one output: NAME=RTOL,ATOL (repeatable).
    #[arg(long = "tol", value_name = "NAME=RTOL,ATOL", value_parser = parse_tol)]
    pub tol: Vec<(String, Tolerance)>,
    /// Compare every intermediate value and name the first divergent node.
    #[arg(long = "layerwise")]
    pub layerwise: bool,
    /// With --layerwise: run each node on the reference's input values too (its own error).
    #[arg(long = "reinject")]
    pub reinject: bool,
    /// With --layerwise: write the first divergent node as a standalone model + test data here.
    #[arg(long = "bisect", value_name = "DIR")]
    pub bisect: Option<PathBuf>,
    /// Also write a self-contained HTML report (per-node error plot) to this file.
    #[arg(long = "html", value_name = "FILE")]
    pub html: Option<PathBuf>,
    #[arg(long = "format", value_enum, default_value_t)]
    pub format: Format,
}

fn parse_tol(s: &str) -> Result<(String, Tolerance), String> {
    let bad = || format!("expected NAME=RTOL,ATOL (e.g. logits=1e-3,1e-5), got '{s}'");
    let (name, rest) = s.split_once('=').ok_or_else(bad)?;
    let (r, a) = rest.split_once(',').ok_or_else(bad)?;
    Ok((
        name.to_string(),
        Tolerance {
            rtol: r.trim().parse().map_err(|_| bad())?,
            atol: a.trim().parse().map_err(|_| bad())?,
        },
    ))
}

/// One compared value.
pub struct Row {
    pub name: String,
    pub shape: Vec<usize>,
    pub dtype: String,
    pub result: Result<Stats, String>,
    pub tol: Tolerance,
    /// The reference has no value of this name.
    pub missing_reference: bool,
}

impl Row {
    fn ok(&self) -> bool {
        matches!(&self.result, Ok(s) if s.out_of_tolerance == 0)
    }
    fn json(&self) -> serde_json::Value {
        let mut o = json!({
            "name": self.name,
            "shape": self.shape,
            "dtype": self.dtype,
            "rtol": self.tol.rtol,
            "atol": self.tol.atol,
            "ok": self.ok(),
        });
        match &self.result {
            Ok(s) => {
                o["max_abs"] = num(s.max_abs);
                o["max_rel"] = num(s.max_rel);
                o["mean_abs"] = num(s.mean_abs);
                o["p99_abs"] = num(s.p99_abs);
                o["cosine"] = num(s.cosine);
                o["sqnr_db"] = num(s.sqnr_db);
                o["out_of_tolerance"] = json!(s.out_of_tolerance);
                o["elements"] = json!(s.elements);
            }
            Err(e) => o["error"] = json!(e),
        }
        o
    }
}

/// JSON has no infinity: infinite SQNR (identical values) becomes null.
fn num(v: f64) -> serde_json::Value {
    if v.is_finite() {
        json!(v)
    } else {
        serde_json::Value::Null
    }
}

fn compare_values(name: &str, got: &Value, want: &Value, tol: Tolerance) -> Row {
    let (shape, dtype) = match got {
        Value::Tensor(t) => (t.shape().to_vec(), t.dtype().name().to_string()),
        other => (Vec::new(), other.describe()),
    };
    let result = match (got, want) {
        (Value::Tensor(g), Value::Tensor(w)) => {
            if g.dtype() != w.dtype() && !(g.dtype().is_float() && w.dtype().is_float()) {
                Err(format!(
                    "dtype {} but the reference has {}",
                    g.dtype(),
                    w.dtype()
                ))
            } else {
                stats(g, w, tol)
            }
        }
        _ => engine::compare::compare_value(got, want, tol)
            .map(|()| Stats::default())
            .map_err(|e| e.to_string()),
    };
    Row {
        name: name.to_string(),
        shape,
        dtype,
        result,
        tol,
        missing_reference: false,
    }
}

/// One node of the layerwise walk.
pub struct NodeRow {
    pub index: usize,
    pub name: String,
    pub op: String,
    pub output: Row,
    /// Error of the node run on the reference's inputs (`--reinject`).
    pub own: Option<Row>,
    /// Every activation input agrees with the reference (or has no reference value).
    pub inputs_agree: bool,
    /// How the node differs from the reference model's node of the same name.
    pub differences: Vec<String>,
}

/// The reference side of a comparison.
struct Reference {
    /// Graph outputs (and, for --against or --reference, intermediates) by value name.
    values: HashMap<String, Value>,
    /// Inputs stored with the reference.
    inputs: Vec<(String, Value)>,
    /// The reference model, for --against.
    model: Option<Model>,
    label: String,
    /// With --backends: every value the candidate backend produced, by name.
    backend_candidate: Option<HashMap<String, Value>>,
    /// The reference's keys in file order (module paths in forward-hook order).
    keys: Vec<String>,
}

fn load_reference_file(path: &Path, model: &Session) -> Result<Reference> {
    let mut values = HashMap::new();
    let mut inputs = Vec::new();
    let mut keys = Vec::new();
    if path.is_dir() {
        let specs = model.inputs();
        inputs = engine::io::read_input_dir(path, &specs)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("--reference {}", path.display()))?;
        let outs: Vec<(String, onnx_ir::ValueType)> = model
            .model()
            .graph()
            .output
            .iter()
            .map(|o| {
                (
                    o.name().to_string(),
                    onnx_ir::ValueType::from_proto(o.r#type.as_ref()),
                )
            })
            .collect();
        let got = engine::io::read_output_dir(path, &outs)
            .map_err(anyhow::Error::msg)
            .with_context(|| format!("--reference {}", path.display()))?;
        for ((name, _), v) in outs.iter().zip(got) {
            if let Some(v) = v {
                values.insert(name.clone(), v);
            }
        }
    } else {
        let members =
            tensor::npz::read(path).with_context(|| format!("--reference {}", path.display()))?;
        for (k, t) in members {
            keys.push(k.clone());
            if let Some(n) = k.strip_prefix("input:") {
                inputs.push((n.to_string(), Value::Tensor(t)));
            } else {
                values.insert(k, Value::Tensor(t));
            }
        }
    }
    Ok(Reference {
        values,
        inputs,
        model: None,
        label: path.display().to_string(),
        backend_candidate: None,
        keys,
    })
}

/// PyTorch module path → the value its scope's last node produces (`encoder.layer.0.attn` →
/// the last node named `/encoder/layer.0/attn/...`), for references keyed by module path.
fn module_value(g: &GraphProto, order: &[usize], path: &str) -> Option<String> {
    let scope = format!("/{}/", path.replace('.', "/"));
    let dotted = format!("/{path}/");
    order
        .iter()
        .rev()
        .map(|&i| &g.node[i])
        .find(|n| n.name().starts_with(&scope) || n.name().starts_with(&dotted))
        .and_then(|n| n.output.first().cloned())
}

pub fn run(args: Args) -> Result<ExitCode> {
    std::panic::set_hook(Box::new(|_| {}));
    let file = args.model.display().to_string();
    if args.reference.is_none() && args.against.is_none() && args.backends.is_empty() {
        bail!("compare needs --reference REF, --against MODEL2 or --backends A,B");
    }
    if !args.backends.is_empty() && args.backends.len() != 2 {
        bail!("--backends takes two backends, the reference first (e.g. native,ort)");
    }
    if !args.backends.is_empty() && args.reinject {
        bail!("--reinject runs nodes one by one on the native engine: use it with --against or --reference");
    }
    if (args.reinject || args.bisect.is_some()) && !args.layerwise {
        bail!("--reinject and --bisect work with --layerwise");
    }
    let base_tol = Tolerance {
        rtol: args.rtol,
        atol: args.atol,
    };
    let tol_for = |name: &str| {
        args.tol
            .iter()
            .find(|(n, _)| n == name)
            .map_or(base_tol, |(_, t)| *t)
    };
    let model = Model::load(&args.model)?;
    let session = Session::new(model).with_context(|| format!("{file}: cannot run this model"))?;
    let capture = if args.layerwise {
        Capture::All
    } else {
        Capture::None
    };

    // The reference side, and which session is the candidate.
    let (reference, candidate) = match (&args.reference, &args.against) {
        (Some(r), _) => (load_reference_file(r, &session)?, session),
        (None, Some(m2)) => {
            let f2 = m2.display().to_string();
            let model2 = Model::load(m2)?;
            let cand =
                Session::new(model2).with_context(|| format!("{f2}: cannot run this model"))?;
            let inputs = feed::load(&args.inputs.or_random(), &session)?;
            let out = session
                .run(inputs.clone(), &capture)
                .with_context(|| format!("{file}: run failed"))?;
            let mut values: HashMap<String, Value> = out.captured.into_iter().collect();
            values.extend(out.outputs);
            let reference = Reference {
                values,
                inputs,
                model: Some(session.model().clone()),
                label: file.clone(),
                backend_candidate: None,
                keys: Vec::new(),
            };
            (reference, cand)
        }
        (None, None) => {
            let reference = run_backends(&args, &session, args.layerwise)?;
            (reference, session)
        }
    };
    let cand_file = match (&args.against, args.backends.get(1)) {
        (Some(p), _) => p.display().to_string(),
        (None, Some(b)) => format!("{file} on {}", b.kind().name()),
        (None, None) => file.clone(),
    };
    let inputs = feed::load_over(&args.inputs, &candidate, reference.inputs.clone())
        .with_context(|| cand_file.clone())?;
    let out = match &reference.backend_candidate {
        Some(values) => engine::RunOutput {
            outputs: candidate
                .model()
                .graph()
                .output
                .iter()
                .filter_map(|o| {
                    values
                        .get(o.name())
                        .map(|v| (o.name().to_string(), v.clone()))
                })
                .collect(),
            captured: values
                .iter()
                .filter(|(k, _)| {
                    !candidate
                        .model()
                        .graph()
                        .output
                        .iter()
                        .any(|o| o.name() == k.as_str())
                })
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
        },
        None => candidate
            .run(inputs.clone(), &capture)
            .with_context(|| format!("{cand_file}: run failed"))?,
    };

    // Outputs.
    let mut rows = Vec::new();
    for (name, got) in &out.outputs {
        match reference.values.get(name) {
            Some(want) => rows.push(compare_values(name, got, want, tol_for(name))),
            None => rows.push(Row {
                name: name.clone(),
                shape: Vec::new(),
                dtype: String::new(),
                result: Err("the reference has no value of this name".into()),
                tol: tol_for(name),
                missing_reference: true,
            }),
        }
    }
    if rows.iter().all(|r| r.missing_reference) {
        bail!(
            "{}: no output of {cand_file} has a value of the same name in the reference (outputs: {})",
            reference.label,
            out.outputs
                .iter()
                .map(|(n, _)| n.as_str())
                .collect::<Vec<_>>()
                .join(", ")
        );
    }

    // Layerwise.
    let mut nodes: Vec<NodeRow> = Vec::new();
    let mut first: Option<usize> = None;
    if args.layerwise {
        let g = candidate.model().graph();
        let order = candidate.schedule()?;
        let mut got_values: HashMap<&str, &Value> =
            out.captured.iter().map(|(n, v)| (n.as_str(), v)).collect();
        for (n, v) in &out.outputs {
            got_values.insert(n.as_str(), v);
        }
        // Reference intermediates keyed by module path map to the scope's last node output.
        let mut ref_values: HashMap<String, &Value> = reference
            .values
            .iter()
            .map(|(k, v)| (k.clone(), v))
            .collect();
        // In the file's order (forward-hook order: a module after the modules it calls). A
        // module with no node of its own scope was folded by the exporter into the node before
        // it (BatchNorm into Conv): its output is the reference for that node instead.
        let mut previous: Option<String> = None;
        for k in &reference.keys {
            let Some(v) = reference.values.get(k) else {
                continue;
            };
            if got_values.contains_key(k.as_str()) {
                continue;
            }
            match module_value(g, &order, k) {
                Some(value) => {
                    ref_values.insert(value.clone(), v);
                    previous = Some(value);
                }
                None => {
                    if let Some(p) = &previous {
                        let same_shape = match (got_values.get(p.as_str()), v) {
                            (Some(Value::Tensor(a)), Value::Tensor(b)) => a.shape() == b.shape(),
                            _ => false,
                        };
                        if same_shape {
                            ref_values.insert(p.clone(), v);
                        }
                    }
                }
            }
        }
        let initializers: HashSet<&str> = g.initializer.iter().map(|t| t.name()).collect();
        let ref_nodes: HashMap<&str, &NodeProto> = reference
            .model
            .as_ref()
            .map(|m| {
                m.graph()
                    .node
                    .iter()
                    .filter(|n| !n.name().is_empty())
                    .map(|n| (n.name(), n))
                    .collect()
            })
            .unwrap_or_default();
        let mut diverged: HashSet<&str> = HashSet::new();
        for (step, &i) in order.iter().enumerate() {
            let node = &g.node[i];
            let Some(out_name) = node.output.iter().find(|o| {
                ref_values.contains_key(o.as_str()) && got_values.contains_key(o.as_str())
            }) else {
                continue;
            };
            let row = compare_values(
                out_name,
                got_values[out_name.as_str()],
                ref_values[out_name.as_str()],
                tol_for(out_name),
            );
            let inputs_agree = node
                .input
                .iter()
                .filter(|n| !n.is_empty() && !initializers.contains(n.as_str()))
                .all(|n| !diverged.contains(n.as_str()));
            if !row.ok() {
                for o in &node.output {
                    diverged.insert(o);
                }
            }
            let own = if args.reinject {
                let given: Vec<Option<Value>> = node
                    .input
                    .iter()
                    .map(|n| {
                        if n.is_empty() {
                            None
                        } else if initializers.contains(n.as_str()) {
                            got_values
                                .get(n.as_str())
                                .map(|v| (*v).clone())
                                .or_else(|| {
                                    g.initializer
                                        .iter()
                                        .find(|t| t.name() == n)
                                        .and_then(|t| tensor::Tensor::from_proto(t).ok())
                                        .map(Value::Tensor)
                                })
                        } else {
                            ref_values
                                .get(n.as_str())
                                .map(|v| (*v).clone())
                                .or_else(|| {
                                    inputs.iter().find(|(k, _)| k == n).map(|(_, v)| v.clone())
                                })
                        }
                    })
                    .collect();
                let k = node.output.iter().position(|o| o == out_name).unwrap_or(0);
                Some(match candidate.run_one(node, given) {
                    Ok(outs) => match outs.get(k).cloned().flatten() {
                        Some(v) => compare_values(
                            out_name,
                            &v,
                            ref_values[out_name.as_str()],
                            tol_for(out_name),
                        ),
                        None => error_row(out_name, "no value".into(), tol_for(out_name)),
                    },
                    Err(e) => error_row(out_name, e.to_string(), tol_for(out_name)),
                })
            } else {
                None
            };
            let differences = ref_nodes
                .get(node.name())
                .map(|r| {
                    node_differences(
                        r,
                        node,
                        reference.model.as_ref().unwrap(),
                        candidate.model(),
                    )
                })
                .unwrap_or_default();
            if first.is_none() && !row.ok() && inputs_agree {
                first = Some(nodes.len());
            }
            nodes.push(NodeRow {
                index: step,
                name: if node.name().is_empty() {
                    format!("{} -> {out_name}", node.op_type())
                } else {
                    node.name().to_string()
                },
                op: node.op_type().to_string(),
                output: row,
                own,
                inputs_agree,
                differences,
            });
        }
        if first.is_none() {
            first = nodes.iter().position(|n| !n.output.ok());
        }
        if let (Some(dir), Some(f)) = (&args.bisect, first) {
            let node = g
                .node
                .iter()
                .find(|n| {
                    n.name() == nodes[f].name
                        || format!(
                            "{} -> {}",
                            n.op_type(),
                            n.output.first().map_or("", |s| s.as_str())
                        ) == nodes[f].name
                })
                .expect("the divergent node is in the graph");
            bisect(dir, candidate.model(), node, &ref_values, &inputs)
                .with_context(|| format!("--bisect {}", dir.display()))?;
        }
    }

    // Outputs the reference has no value for are reported, not judged.
    let ok = rows.iter().all(|r| r.ok() || r.missing_reference);
    let first_json = first.map(|f| {
        let n = &nodes[f];
        json!({"name": n.name, "op_type": n.op, "output": n.output.name, "index": n.index,
               "differences": n.differences})
    });
    match args.format {
        Format::Json => {
            let doc = json!({
                "model": file,
                "against": args.against.as_ref().map(|p| p.display().to_string()),
                "reference": args.reference.as_ref().map(|p| p.display().to_string()),
                "tolerance": {"rtol": base_tol.rtol, "atol": base_tol.atol},
                "ok": ok,
                "outputs": rows.iter().map(Row::json).collect::<Vec<_>>(),
                "first_divergent_node": first_json,
                "nodes": nodes.iter().map(|n| {
                    let mut o = json!({"index": n.index, "name": n.name, "op_type": n.op,
                        "inputs_agree": n.inputs_agree, "output": n.output.json()});
                    if let Some(own) = &n.own { o["own"] = own.json(); }
                    if !n.differences.is_empty() { o["differences"] = json!(n.differences); }
                    o
                }).collect::<Vec<_>>(),
            });
            println!("{}", serde_json::to_string_pretty(&doc)?);
        }
        Format::Human => print_human(
            &file,
            &reference.label,
            &cand_file,
            &rows,
            &nodes,
            first,
            ok,
        ),
    }
    if let Some(path) = &args.html {
        let html = crate::html::compare_report(&reference.label, &cand_file, &rows, &nodes, first);
        tensor::write_file(path, html.as_bytes())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(if ok {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// Runs the model on both `--backends` (with every intermediate exposed as an output when
/// `layerwise`) and returns the first's values as the reference, the second's as the candidate.
fn run_backends(args: &Args, session: &Session, layerwise: bool) -> Result<Reference> {
    let file = args.model.display().to_string();
    let tmp = tempfile::tempdir().context("creating a temporary directory")?;
    let path = if layerwise {
        let exposed = expose_intermediates(session.model(), &file);
        let p = tmp.path().join("all_outputs.onnx");
        exposed
            .save(&p, &onnx_ir::SaveOptions::default())
            .context("writing the model with every intermediate as an output")?;
        p
    } else {
        args.model.clone()
    };
    let inputs = feed::load(&args.inputs.or_random(), session)?;
    let mut results = Vec::new();
    for b in &args.backends {
        let kind = b.kind();
        let model = Model::load(&path)?;
        let mut backend = engine::backend::open(kind, &path, model, 1).with_context(|| {
            format!("{file}: cannot open the model on backend '{}'", kind.name())
        })?;
        backend
            .prepare(&inputs)
            .with_context(|| format!("{file}: backend '{}'", kind.name()))?;
        let out = backend
            .run(&inputs)
            .with_context(|| format!("{file}: run failed on backend '{}'", kind.name()))?;
        results.push(out.into_iter().collect::<HashMap<String, Value>>());
    }
    let candidate = results.pop().expect("two backends");
    let values = results.pop().expect("two backends");
    Ok(Reference {
        values,
        inputs,
        model: None,
        label: format!("{file} on {}", args.backends[0].kind().name()),
        backend_candidate: Some(candidate),
        keys: Vec::new(),
    })
}

/// The model with every main-graph node output whose type inference knows also declared as a
/// graph output (how Polygraphy marks all outputs), so any backend returns the intermediates.
fn expose_intermediates(model: &Model, file: &str) -> Model {
    let mut m = model.clone();
    let inference = analysis::infer(&m, file, &HashMap::new());
    analysis::apply(&mut m.proto, &inference);
    let Some(g) = m.proto.graph.as_mut() else {
        return m;
    };
    let existing: HashSet<String> = g.output.iter().map(|o| o.name().to_string()).collect();
    let typed: HashMap<String, ValueInfoProto> = g
        .value_info
        .iter()
        .map(|v| (v.name().to_string(), v.clone()))
        .collect();
    let mut extra = Vec::new();
    for n in &g.node {
        for o in n
            .output
            .iter()
            .filter(|o| !o.is_empty() && !existing.contains(o.as_str()))
        {
            if let Some(v) = typed.get(o) {
                extra.push(v.clone());
            }
        }
    }
    g.output.extend(extra);
    m
}

fn error_row(name: &str, e: String, tol: Tolerance) -> Row {
    Row {
        name: name.to_string(),
        shape: Vec::new(),
        dtype: String::new(),
        result: Err(e),
        tol,
        missing_reference: false,
    }
}

/// What differs between a node and the reference model's node of the same name: op, attributes,
/// and initializer inputs.
fn node_differences(r: &NodeProto, c: &NodeProto, rm: &Model, cm: &Model) -> Vec<String> {
    let mut d = Vec::new();
    if r.op_type() != c.op_type() {
        d.push(format!("op {} → {}", r.op_type(), c.op_type()));
    }
    for a in &c.attribute {
        match r.attribute.iter().find(|x| x.name() == a.name()) {
            Some(x) if x == a => {}
            Some(x) => d.push(format!(
                "attribute '{}' {} → {}",
                a.name(),
                show_attr(x),
                show_attr(a)
            )),
            None => d.push(format!("attribute '{}' added ({})", a.name(), show_attr(a))),
        }
    }
    for x in &r.attribute {
        if !c.attribute.iter().any(|a| a.name() == x.name()) {
            d.push(format!("attribute '{}' removed", x.name()));
        }
    }
    let init = |m: &Model, n: &str| -> Option<TensorProto> {
        m.graph()
            .initializer
            .iter()
            .find(|t| t.name() == n)
            .cloned()
    };
    for (i, n) in c.input.iter().enumerate() {
        if let (Some(ci), Some(ri)) = (init(cm, n), r.input.get(i).and_then(|rn| init(rm, rn))) {
            if let (Ok(ct), Ok(rt)) = (
                tensor::Tensor::from_proto(&ci),
                tensor::Tensor::from_proto(&ri),
            ) {
                if ct != rt {
                    let detail = stats(
                        &ct,
                        &rt,
                        Tolerance {
                            rtol: 0.0,
                            atol: 0.0,
                        },
                    )
                    .map(|s| {
                        format!(
                            "max abs diff {:.3e}, {} of {} elements",
                            s.max_abs, s.out_of_tolerance, s.elements
                        )
                    })
                    .unwrap_or_else(|e| e);
                    d.push(format!("initializer '{n}' differs ({detail})"));
                }
            }
        }
    }
    d
}

fn show_attr(a: &onnx_proto::AttributeProto) -> String {
    if a.f.is_some() {
        format!("{}", a.f())
    } else if a.i.is_some() {
        format!("{}", a.i())
    } else if a.s.is_some() {
        format!("'{}'", String::from_utf8_lossy(a.s()))
    } else if !a.ints.is_empty() {
        format!("{:?}", a.ints)
    } else if !a.floats.is_empty() {
        format!("{:?}", a.floats)
    } else {
        "…".to_string()
    }
}

/// Writes `node` as a standalone model with its inputs (reference values) and expected outputs.
fn bisect(
    dir: &Path,
    model: &Model,
    node: &NodeProto,
    reference: &HashMap<String, &Value>,
    graph_inputs: &[(String, Value)],
) -> Result<()> {
    let g = model.graph();
    let mut graph = GraphProto {
        name: Some(format!("bisect_{}", node.name())),
        node: vec![node.clone()],
        ..Default::default()
    };
    let set = dir.join("test_data_set_0");
    std::fs::create_dir_all(&set).with_context(|| format!("creating {}", set.display()))?;
    let mut k = 0;
    for n in node.input.iter().filter(|n| !n.is_empty()) {
        if let Some(t) = g.initializer.iter().find(|t| t.name() == n) {
            graph.initializer.push(t.clone());
            continue;
        }
        let v = reference
            .get(n.as_str())
            .map(|v| (*v).clone())
            .or_else(|| {
                graph_inputs
                    .iter()
                    .find(|(k, _)| k == n)
                    .map(|(_, v)| v.clone())
            })
            .with_context(|| {
                format!(
                    "no reference value for input '{n}' of node '{}'",
                    node.name()
                )
            })?;
        graph.input.push(value_info(n, &v));
        engine::io::write_pb(&set.join(format!("input_{k}.pb")), &v, n)
            .map_err(anyhow::Error::msg)?;
        k += 1;
    }
    let mut o = 0;
    for n in node.output.iter().filter(|n| !n.is_empty()) {
        if let Some(v) = reference.get(n.as_str()) {
            graph.output.push(value_info(n, v));
            engine::io::write_pb(&set.join(format!("output_{o}.pb")), v, n)
                .map_err(anyhow::Error::msg)?;
            o += 1;
        }
    }
    let proto = ModelProto {
        ir_version: model.proto.ir_version,
        opset_import: model.proto.opset_import.clone(),
        producer_name: Some("onnx-doctor compare --bisect".into()),
        functions: model.proto.functions.clone(),
        graph: Some(graph),
        ..Default::default()
    };
    Model::from_proto(proto)
        .save(dir.join("model.onnx"), &onnx_ir::SaveOptions::default())
        .context("writing model.onnx")?;
    Ok(())
}

/// A graph input/output declaring `v`'s type and fixed shape (untyped for non-tensors).
fn value_info(name: &str, v: &Value) -> ValueInfoProto {
    let r#type = match v {
        Value::Tensor(t) => analysis::type_proto(&ops::Ty::tensor(
            Some(t.dtype()),
            Some(
                t.shape()
                    .iter()
                    .map(|&d| ops::infer::fixed(d as i64))
                    .collect(),
            ),
        )),
        _ => None,
    };
    ValueInfoProto {
        name: Some(name.to_string()),
        r#type,
        ..Default::default()
    }
}

fn fmt_stats(r: &Row) -> String {
    match &r.result {
        Ok(s) => format!(
            "{:>10.3e} {:>10.3e} {:>10.3e} {:>9.6} {:>8} {:>7}/{}",
            s.max_abs,
            s.max_rel,
            s.p99_abs,
            s.cosine,
            if s.sqnr_db.is_finite() {
                format!("{:.1}", s.sqnr_db)
            } else {
                "inf".into()
            },
            s.out_of_tolerance,
            s.elements
        ),
        Err(e) => e.clone(),
    }
}

fn print_human(
    file: &str,
    reference: &str,
    candidate: &str,
    rows: &[Row],
    nodes: &[NodeRow],
    first: Option<usize>,
    ok: bool,
) {
    println!("reference: {reference}");
    println!("candidate: {candidate}");
    let _ = file;
    println!(
        "\n  {:<24} {:>10} {:>10} {:>10} {:>9} {:>8} {:>9}",
        "output", "max abs", "max rel", "p99 abs", "cosine", "SQNR dB", "bad/all"
    );
    for r in rows {
        let mark = if r.ok() { "ok " } else { "BAD" };
        println!("{mark} {:<24} {}", r.name, fmt_stats(r));
    }
    if !nodes.is_empty() {
        println!(
            "\n  {:>4} {:<36} {:<14} {:>10} {:>10} {:>10} {:>9} {:>8} {:>9}",
            "#", "node", "op", "max abs", "max rel", "p99 abs", "cosine", "SQNR dB", "bad/all"
        );
        for (i, n) in nodes.iter().enumerate() {
            let mark = if Some(i) == first {
                ">>>"
            } else if n.output.ok() {
                "   "
            } else {
                " ! "
            };
            println!(
                "{mark} {:>4} {:<36} {:<14} {}",
                n.index,
                truncate(&n.name, 36),
                n.op,
                fmt_stats(&n.output)
            );
            if let Some(own) = &n.own {
                println!(
                    "         {:<51} {}",
                    "  own error (reinjected inputs):",
                    fmt_stats(own)
                );
            }
        }
        match first {
            Some(f) => {
                let n = &nodes[f];
                println!(
                    "\nfirst divergent node: '{}' ({}), output '{}'{}",
                    n.name,
                    n.op,
                    n.output.name,
                    if n.inputs_agree {
                        " — its inputs agree with the reference, so the error starts here"
                    } else {
                        ""
                    }
                );
                for d in &n.differences {
                    println!("  differs from the reference model: {d}");
                }
            }
            None => println!("\nno node diverges beyond tolerance"),
        }
    }
    println!(
        "\n{}",
        if ok {
            "outputs match within tolerance"
        } else {
            "outputs differ beyond tolerance"
        }
    );
}

fn truncate(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        let tail: String = s
            .chars()
            .rev()
            .take(n - 1)
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        format!("…{tail}")
    }
}
