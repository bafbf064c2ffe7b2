//! `onnx-doctor inspect MODEL [--format human|json]`
//!
//! What the model is: IR version, producer, opset imports, graph inputs and outputs with dtypes and
//! dims (symbolic names kept), op histogram, node / initializer / parameter counts and bytes,
//! metadata_props, external data. Counts are of the main graph; nodes inside subgraphs
//! (If/Loop/Scan bodies) are counted apart in `nodes_in_subgraphs`.

use crate::format::Format;
use anyhow::Result;
use onnx_ir::{Dim, Model, ValueType};
use onnx_proto::{GraphProto, TensorProto, ValueInfoProto};
use serde::Serialize;
use std::collections::{BTreeMap, HashSet};
use std::fmt::Write as _;
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(clap::Args)]
pub struct Args {
    /// The .onnx file.
    pub model: PathBuf,
    #[arg(long, value_enum, default_value_t)]
    pub format: Format,
}

pub fn run(args: Args) -> Result<ExitCode> {
    let model = Model::load(&args.model)?;
    let report = Report::of(&model, &args.model.display().to_string());
    match args.format {
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
        Format::Human => print!("{}", report.human()),
    }
    Ok(ExitCode::SUCCESS)
}

/// The JSON schema of `inspect --format json` (documented in docs/cli.md).
#[derive(Serialize)]
pub struct Report {
    pub file: String,
    pub ir_version: Option<i64>,
    pub producer: Producer,
    pub model_version: Option<i64>,
    pub domain: Option<String>,
    /// domain → version; the default domain is written `ai.onnx`.
    pub opsets: BTreeMap<String, i64>,
    pub graph_name: String,
    pub inputs: Vec<Value>,
    pub outputs: Vec<Value>,
    pub nodes: usize,
    pub nodes_in_subgraphs: usize,
    pub initializers: usize,
    pub sparse_initializers: usize,
    pub parameters: u64,
    pub parameter_bytes: u64,
    /// op → count over the main graph's nodes; ops of other domains are written `domain::Op`.
    pub ops: BTreeMap<String, usize>,
    pub functions: Vec<String>,
    pub metadata_props: BTreeMap<String, String>,
    pub external_data: ExternalData,
}

#[derive(Serialize)]
pub struct Producer {
    pub name: String,
    pub version: String,
}

#[derive(Serialize)]
pub struct Value {
    pub name: String,
    pub dtype: String,
    /// Ints for fixed dims, strings for symbolic ones, null for unknown; null if the rank is unknown.
    pub shape: Option<Vec<serde_json::Value>>,
    /// True for a graph input that also has an initializer (a default, overridable value).
    pub initializer: bool,
}

#[derive(Serialize)]
pub struct ExternalData {
    pub used: bool,
    pub files: Vec<ExternalFile>,
}

#[derive(Serialize)]
pub struct ExternalFile {
    pub location: String,
    pub tensors: usize,
    pub bytes: u64,
}

fn domain_name(d: &str) -> &str {
    if d.is_empty() {
        "ai.onnx"
    } else {
        d
    }
}

/// Number of elements of an initializer (a scalar has 1); saturates instead of overflowing.
fn element_count(t: &TensorProto) -> u64 {
    t.dims
        .iter()
        .fold(1u64, |acc, &d| acc.saturating_mul(d.max(0) as u64))
}

fn tensor_bytes(t: &TensorProto) -> u64 {
    match tensor::DataType::from_onnx(t.data_type()) {
        Some(tensor::DataType::String) => t.string_data.iter().map(|s| s.len() as u64).sum(),
        Some(dt) => dt.byte_len(element_count(t)).unwrap_or(u64::MAX),
        None => 0,
    }
}

fn value(v: &ValueInfoProto, initialized: &HashSet<&str>) -> Value {
    let ty = ValueType::from_proto(v.r#type.as_ref());
    Value {
        name: v.name().to_string(),
        dtype: ty.type_name(),
        shape: ty.shape().map(|dims| {
            dims.iter()
                .map(|d| match d {
                    Dim::Fixed(n) => (*n).into(),
                    Dim::Sym(s) => s.clone().into(),
                    Dim::Unknown => serde_json::Value::Null,
                })
                .collect()
        }),
        initializer: initialized.contains(v.name()),
    }
}

fn subgraph_nodes(g: &GraphProto) -> usize {
    g.node
        .iter()
        .flat_map(|n| &n.attribute)
        .flat_map(|a| a.g.iter().chain(&a.graphs))
        .map(|sub| sub.node.len() + subgraph_nodes(sub))
        .sum()
}

impl Report {
    pub fn of(model: &Model, file: &str) -> Report {
        let p = &model.proto;
        let g = model.graph();
        let initialized: HashSet<&str> = g.initializer.iter().map(|t| t.name()).collect();
        let mut ops = BTreeMap::new();
        for n in &g.node {
            let key = match n.domain() {
                "" | "ai.onnx" => n.op_type().to_string(),
                d => format!("{d}::{}", n.op_type()),
            };
            *ops.entry(key).or_insert(0) += 1;
        }
        let mut files: BTreeMap<&str, (usize, u64)> = BTreeMap::new();
        for e in &model.external {
            let f = files.entry(&e.location).or_default();
            f.0 += 1;
            f.1 += e.length;
        }
        Report {
            file: file.to_string(),
            ir_version: p.ir_version,
            producer: Producer {
                name: p.producer_name().to_string(),
                version: p.producer_version().to_string(),
            },
            model_version: p.model_version,
            domain: p.domain.clone().filter(|d| !d.is_empty()),
            opsets: p
                .opset_import
                .iter()
                .map(|o| (domain_name(o.domain()).to_string(), o.version()))
                .collect(),
            graph_name: g.name().to_string(),
            inputs: g.input.iter().map(|v| value(v, &initialized)).collect(),
            outputs: g.output.iter().map(|v| value(v, &HashSet::new())).collect(),
            nodes: g.node.len(),
            nodes_in_subgraphs: subgraph_nodes(g),
            initializers: g.initializer.len(),
            sparse_initializers: g.sparse_initializer.len(),
            parameters: g
                .initializer
                .iter()
                .map(element_count)
                .fold(0, u64::saturating_add),
            parameter_bytes: g
                .initializer
                .iter()
                .map(tensor_bytes)
                .fold(0, u64::saturating_add),
            ops,
            functions: p
                .functions
                .iter()
                .map(|f| format!("{}::{}", domain_name(f.domain()), f.name()))
                .collect(),
            metadata_props: p
                .metadata_props
                .iter()
                .map(|e| (e.key().to_string(), e.value().to_string()))
                .collect(),
            external_data: ExternalData {
                used: !model.external.is_empty(),
                files: files
                    .into_iter()
                    .map(|(location, (tensors, bytes))| ExternalFile {
                        location: location.to_string(),
                        tensors,
                        bytes,
                    })
                    .collect(),
            },
        }
    }

    pub fn human(&self) -> String {
        let mut s = String::new();
        let w = &mut s;
        let _ = writeln!(w, "{}", self.file);
        let ir = self
            .ir_version
            .map_or("not set".to_string(), |v| v.to_string());
        let _ = writeln!(w, "  ir_version   {ir}");
        let producer = format!("{} {}", self.producer.name, self.producer.version);
        let producer = producer.trim();
        let _ = writeln!(
            w,
            "  producer     {}",
            if producer.is_empty() {
                "not set"
            } else {
                producer
            }
        );
        let opsets: Vec<String> = self
            .opsets
            .iter()
            .map(|(d, v)| format!("{d} {v}"))
            .collect();
        let _ = writeln!(w, "  opsets       {}", opsets.join(", "));
        let sub = if self.nodes_in_subgraphs > 0 {
            format!(" (+{} in subgraphs)", self.nodes_in_subgraphs)
        } else {
            String::new()
        };
        let _ = writeln!(
            w,
            "  graph        '{}': {} nodes{sub}, {} initializers, {} parameters ({})",
            self.graph_name,
            self.nodes,
            self.initializers,
            group_digits(self.parameters),
            human_bytes(self.parameter_bytes)
        );
        if self.sparse_initializers > 0 {
            let _ = writeln!(
                w,
                "  sparse       {} sparse initializers",
                self.sparse_initializers
            );
        }
        if self.external_data.used {
            for f in &self.external_data.files {
                let _ = writeln!(
                    w,
                    "  external     {}: {} tensors, {}",
                    f.location,
                    f.tensors,
                    human_bytes(f.bytes)
                );
            }
        } else {
            let _ = writeln!(w, "  external     none (all data inside the .onnx file)");
        }
        let real: Vec<&Value> = self.inputs.iter().filter(|v| !v.initializer).collect();
        section(w, "inputs", &real);
        let shadowed = self.inputs.len() - real.len();
        if shadowed > 0 {
            let _ = writeln!(w, "  (+{shadowed} graph inputs that are initializers)");
        }
        section(w, "outputs", &self.outputs.iter().collect::<Vec<_>>());
        let mut ops: Vec<(&String, &usize)> = self.ops.iter().collect();
        ops.sort_by(|a, b| b.1.cmp(a.1).then(a.0.cmp(b.0)));
        let _ = writeln!(w, "\nops ({} kinds, {} nodes)", ops.len(), self.nodes);
        let width = ops.iter().map(|(o, _)| o.len()).max().unwrap_or(0);
        for (op, n) in ops {
            let _ = writeln!(w, "  {op:<width$}  {n}");
        }
        if !self.functions.is_empty() {
            let _ = writeln!(w, "\nfunctions ({})", self.functions.len());
            for f in &self.functions {
                let _ = writeln!(w, "  {f}");
            }
        }
        if !self.metadata_props.is_empty() {
            let _ = writeln!(w, "\nmetadata_props");
            for (k, v) in &self.metadata_props {
                let _ = writeln!(w, "  {k}: {v}");
            }
        }
        s
    }
}

fn section(w: &mut String, title: &str, values: &[&Value]) {
    let _ = writeln!(w, "\n{title} ({})", values.len());
    let width = values.iter().map(|v| v.name.len()).max().unwrap_or(0);
    for v in values {
        let shape = match &v.shape {
            None if v.dtype.starts_with("seq")
                || v.dtype.starts_with("map")
                || v.dtype.starts_with("optional") =>
            {
                String::new()
            }
            None => "[rank unknown]".into(),
            Some(dims) => {
                let dims: Vec<String> = dims
                    .iter()
                    .map(|d| match d {
                        serde_json::Value::String(s) => s.clone(),
                        serde_json::Value::Null => "?".into(),
                        other => other.to_string(),
                    })
                    .collect();
                format!("[{}]", dims.join(","))
            }
        };
        let _ = writeln!(w, "  {:<width$}  {}{shape}", v.name, v.dtype);
    }
}

fn group_digits(n: u64) -> String {
    let s = n.to_string();
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn human_bytes(n: u64) -> String {
    const UNITS: [&str; 5] = ["B", "KiB", "MiB", "GiB", "TiB"];
    let mut v = n as f64;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    if unit == 0 {
        format!("{n} B")
    } else {
        format!("{v:.1} {}", UNITS[unit])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_and_bytes() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(1234567), "1,234,567");
        assert_eq!(human_bytes(512), "512 B");
        assert_eq!(human_bytes(46_827_520), "44.7 MiB");
    }
}
