//! Deployment lints: hazards that make a valid model fail, or run differently, on a backend.
//!
//! One file per rule; its `//!` doc comment is its documentation (`## What it does`,
//! `## Why is this bad?`, `## Example`, `## Fix`; a test requires them) and [`RULES`] is the one
//! table that dispatches them. Target rules read the profiles of `crate::targets` and report once
//! per target, with that target's severity; the others report with `target: None`.

mod baked_dynamic_dim;
mod control_flow;
mod data_dependent_shape;
mod fixed_batch_dim;
mod initializer_as_input;
mod int64_on_tensorrt;
mod metadata_path_leak;
mod mixed_dtype_operands;
mod protobuf_size_limit;
mod target_attribute_unsupported;
mod target_op_unsupported;
mod target_opset_unsupported;
mod training_mode_export;

use crate::targets::Profile;
use crate::Code;
use crate::Inference;
use diagnostics::{Diagnostic, Location, Severity};
use onnx_ir::Model;
use onnx_proto::{GraphProto, NodeProto, TensorProto};
use std::cell::OnceCell;
use std::collections::HashMap;

/// A finding and the target it concerns (`None` when it holds for every backend).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    pub target: Option<String>,
    pub diagnostic: Diagnostic,
}

/// A lint rule: its code, whether it needs targets, its documentation and its check.
pub struct Rule {
    pub code: Code,
    /// Runs only when targets are given.
    pub targeted: bool,
    /// The rule's source file; its `//!` lines are the documentation.
    pub source: &'static str,
    run: fn(&Cx, &mut Vec<Finding>),
}

impl Rule {
    /// The rule's documentation: the `//!` lines of its file, without the markers.
    pub fn doc(&self) -> String {
        self.source
            .lines()
            .take_while(|l| l.starts_with("//!"))
            .map(|l| {
                l.trim_start_matches("//!")
                    .strip_prefix(' ')
                    .unwrap_or(l.trim_start_matches("//!"))
            })
            .collect::<Vec<_>>()
            .join("\n")
    }
}

macro_rules! rule {
    ($code:ident, $targeted:expr, $module:ident) => {
        Rule {
            code: Code::$code,
            targeted: $targeted,
            source: include_str!(concat!(stringify!($module), ".rs")),
            run: $module::run,
        }
    };
}

/// Every lint rule, in report order.
pub const RULES: &[Rule] = &[
    rule!(TargetOpsetUnsupported, true, target_opset_unsupported),
    rule!(TargetOpUnsupported, true, target_op_unsupported),
    rule!(
        TargetAttributeUnsupported,
        true,
        target_attribute_unsupported
    ),
    rule!(Int64OnTensorrt, true, int64_on_tensorrt),
    rule!(DataDependentShape, true, data_dependent_shape),
    rule!(ControlFlow, true, control_flow),
    rule!(InitializerAsInput, false, initializer_as_input),
    rule!(TrainingModeExport, false, training_mode_export),
    rule!(MetadataPathLeak, false, metadata_path_leak),
    rule!(BakedDynamicDim, false, baked_dynamic_dim),
    rule!(ProtobufSizeLimit, false, protobuf_size_limit),
    rule!(MixedDtypeOperands, false, mixed_dtype_operands),
    rule!(FixedBatchDim, false, fixed_batch_dim),
];

/// Runs every rule on `model`: the target-independent ones always, the target rules once per
/// profile in `targets`. `file` is the name findings carry.
pub fn lint(model: &Model, file: &str, targets: &[&'static Profile]) -> Vec<Finding> {
    run_rules(&Cx::new(model, file, targets), targets)
}

/// [`lint`] reusing what the spec check already computed: its shape inference and its findings
/// (so rules neither infer again nor report what the check reported).
pub fn lint_with(
    model: &Model,
    file: &str,
    targets: &[&'static Profile],
    inference: &Inference,
    spec: &[Diagnostic],
) -> Vec<Finding> {
    let mut cx = Cx::new(model, file, targets);
    cx.prior = Some((inference, spec));
    run_rules(&cx, targets)
}

fn run_rules(cx: &Cx, targets: &[&'static Profile]) -> Vec<Finding> {
    let mut out = Vec::new();
    for rule in RULES {
        if rule.targeted && targets.is_empty() {
            continue;
        }
        (rule.run)(cx, &mut out);
    }
    out
}

/// What the rules share: the model, every node (subgraphs included) and the known constants.
pub(crate) struct Cx<'m> {
    pub model: &'m Model,
    pub file: &'m str,
    pub targets: &'m [&'static Profile],
    /// The imported ai.onnx opset (1 when the model imports none, as the spec's default).
    pub opset: i64,
    pub nodes: Vec<&'m NodeProto>,
    /// Values whose contents are known without running the model: initializers of every graph
    /// and the outputs of Constant nodes with a `value` tensor.
    pub constants: HashMap<&'m str, &'m TensorProto>,
    /// Shape inference and spec-check findings from the caller, when it already has them.
    prior: Option<(&'m Inference, &'m [Diagnostic])>,
    own_inference: OnceCell<Inference>,
    own_spec: OnceCell<Vec<Diagnostic>>,
}

impl<'m> Cx<'m> {
    pub(crate) fn new(model: &'m Model, file: &'m str, targets: &'m [&'static Profile]) -> Self {
        fn visit<'a>(
            g: &'a GraphProto,
            nodes: &mut Vec<&'a NodeProto>,
            consts: &mut HashMap<&'a str, &'a TensorProto>,
        ) {
            for t in &g.initializer {
                consts.insert(t.name(), t);
            }
            for n in &g.node {
                nodes.push(n);
                if n.op_type() == "Constant" && (n.domain().is_empty() || n.domain() == "ai.onnx") {
                    if let (Some(out), Some(t)) = (
                        n.output.first(),
                        n.attribute
                            .iter()
                            .find(|a| a.name() == "value")
                            .and_then(|a| a.t.as_ref()),
                    ) {
                        consts.insert(out.as_str(), t);
                    }
                }
                for a in &n.attribute {
                    for sub in a.g.iter().chain(a.graphs.iter()) {
                        visit(sub, nodes, consts);
                    }
                }
            }
        }
        let mut nodes = Vec::new();
        let mut constants = HashMap::new();
        visit(model.graph(), &mut nodes, &mut constants);
        Cx {
            model,
            file,
            targets,
            opset: model.opset("").unwrap_or(1),
            nodes,
            constants,
            prior: None,
            own_inference: OnceCell::new(),
            own_spec: OnceCell::new(),
        }
    }

    /// Shape inference of the model (run at most once, with the graph inputs as declared, when
    /// the caller did not pass it).
    pub(crate) fn inference(&self) -> &Inference {
        match self.prior {
            Some((inference, _)) => inference,
            None => self
                .own_inference
                .get_or_init(|| crate::infer(self.model, self.file, &HashMap::new())),
        }
    }

    /// The spec check's findings (computed at most once when the caller did not pass them).
    pub(crate) fn spec(&self) -> &[Diagnostic] {
        match self.prior {
            Some((_, spec)) => spec,
            None => self
                .own_spec
                .get_or_init(|| crate::check_with(self.model, self.file, self.inference())),
        }
    }

    pub fn node_location(&self, n: &NodeProto) -> Location {
        Location::Node {
            file: self.file.to_string(),
            node: n.name().to_string(),
            op: n.op_type().to_string(),
        }
    }

    pub fn value_location(&self, value: &str) -> Location {
        Location::Value {
            file: self.file.to_string(),
            value: value.to_string(),
        }
    }

    pub fn file_location(&self) -> Location {
        Location::File {
            file: self.file.to_string(),
        }
    }
}

/// True for nodes of the default (ai.onnx) domain.
pub(crate) fn default_domain(n: &NodeProto) -> bool {
    n.domain().is_empty() || n.domain() == "ai.onnx"
}

/// The PyTorch module path a node name carries, when the exporter's scoping is visible in it:
/// `/encoder/layer.0/attn/MatMul` → `encoder.layer.0.attn`.
pub fn torch_module_path(node_name: &str) -> Option<String> {
    let rest = node_name.strip_prefix('/')?;
    let parts: Vec<&str> = rest.split('/').collect();
    if parts.len() < 2 || parts.iter().any(|p| p.is_empty()) {
        return None;
    }
    Some(parts[..parts.len() - 1].join("."))
}

/// Where in the PyTorch program a node came from, as far as the model tells.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct TorchSource {
    /// The module path, e.g. `encoder.layer.0.attn`.
    pub module: Option<String>,
    /// The innermost frame of the stack trace outside torch itself, as `file:line`.
    pub location: Option<String>,
}

/// The PyTorch provenance of a node: the module path from the dynamo exporter's
/// `pkg.torch.onnx.name_scopes` metadata (cumulative module paths, root `''` first, the FX node's
/// own name last), else from a TorchScript-scoped node name (`/encoder/layer.0/attn/MatMul`); and
/// the innermost user `file:line` of `pkg.torch.onnx.stack_trace`, skipping frames in torch/.
pub fn torch_source(n: &NodeProto) -> TorchSource {
    let meta = |key: &str| {
        n.metadata_props
            .iter()
            .find(|e| e.key() == key)
            .map(|e| e.value())
    };
    let module = meta("pkg.torch.onnx.name_scopes")
        .and_then(module_from_name_scopes)
        .or_else(|| torch_module_path(n.name()));
    let location = meta("pkg.torch.onnx.stack_trace").and_then(innermost_user_frame);
    TorchSource { module, location }
}

/// `['', 'encoder', 'encoder.layer.0', 'encoder.layer.0.attn', 'matmul']` → `encoder.layer.0.attn`.
/// Scopes that are not cumulative (each entry a single name) are joined with dots.
fn module_from_name_scopes(repr: &str) -> Option<String> {
    let inner = repr.trim().strip_prefix('[')?.strip_suffix(']')?;
    let items: Vec<&str> = inner
        .split(',')
        .map(|s| s.trim().trim_matches(|c| c == '\'' || c == '"'))
        .collect();
    // The last entry names the FX node itself, not a module.
    let scopes: Vec<&str> = items[..items.len().saturating_sub(1)]
        .iter()
        .copied()
        .filter(|s| !s.is_empty())
        .collect();
    let last = scopes.last()?;
    let cumulative = scopes
        .windows(2)
        .all(|w| w[1].starts_with(&format!("{}.", w[0])));
    Some(if cumulative {
        last.to_string()
    } else {
        scopes.join(".")
    })
}

/// The last `File "…", line N` frame of a Python stack trace whose file is not inside torch
/// (a `torch` directory) nor generated (`<eval_with_key>…`), as `file:line`.
fn innermost_user_frame(trace: &str) -> Option<String> {
    let mut found = None;
    for line in trace.lines() {
        let Some(rest) = line.trim_start().strip_prefix("File \"") else {
            continue;
        };
        let Some((file, after)) = rest.split_once('"') else {
            continue;
        };
        let Some(num) = after
            .trim_start_matches(',')
            .trim_start()
            .strip_prefix("line ")
        else {
            continue;
        };
        let num: String = num.chars().take_while(char::is_ascii_digit).collect();
        let in_torch = file.split(['/', '\\']).any(|c| c == "torch");
        if num.is_empty() || in_torch || file.starts_with('<') {
            continue;
        }
        found = Some(format!("{file}:{num}"));
    }
    found
}

/// ` (PyTorch module `encoder.layer.0.attn`, at model.py:12)` from [`torch_source`], else empty.
/// Every node finding's message goes through it.
pub(crate) fn module_suffix(n: &NodeProto) -> String {
    match torch_source(n) {
        TorchSource {
            module: Some(m),
            location: Some(l),
        } => format!(" (PyTorch module `{m}`, at {l})"),
        TorchSource {
            module: Some(m),
            location: None,
        } => format!(" (PyTorch module `{m}`)"),
        TorchSource {
            module: None,
            location: Some(l),
        } => format!(" (PyTorch source at {l})"),
        _ => String::new(),
    }
}

/// The node's display name for messages: its name, or its op and first output when unnamed.
pub(crate) fn node_label(n: &NodeProto) -> String {
    if n.name().is_empty() {
        format!(
            "{} node producing '{}'",
            n.op_type(),
            n.output.first().map(String::as_str).unwrap_or("")
        )
    } else {
        format!("{} node '{}'", n.op_type(), n.name())
    }
}

pub(crate) fn severity(text: &str) -> Severity {
    match text {
        "error" => Severity::Error,
        "info" => Severity::Info,
        _ => Severity::Warning,
    }
}

/// `see: <title> (<url>, <version>)` for a source id of `profile`.
pub(crate) fn cite(profile: &Profile, id: &str) -> String {
    match profile.source(id) {
        Some(s) => format!("source: {} <{}> ({})", s.title, s.url, s.version),
        None => format!("source: {id}"),
    }
}

pub(crate) fn push(
    out: &mut Vec<Finding>,
    target: Option<&Profile>,
    code: Code,
    severity: Severity,
    location: Location,
    message: String,
    help: String,
) {
    let message = match target {
        Some(p) => format!("[{}] {message}", p.name),
        None => message,
    };
    out.push(Finding {
        target: target.map(|p| p.name.clone()),
        diagnostic: Diagnostic::new(code.code(), severity, message, location).with_help(help),
    });
}

#[cfg(test)]
pub(crate) mod fixture {
    //! Tiny models built in the tests.
    use onnx_proto::{
        attribute_proto::AttributeType, tensor_proto::DataType, AttributeProto, GraphProto,
        ModelProto, NodeProto, OperatorSetIdProto, TensorProto,
    };

    pub fn node(op: &str, name: &str, inputs: &[&str], outputs: &[&str]) -> NodeProto {
        NodeProto {
            op_type: Some(op.into()),
            name: Some(name.into()),
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: outputs.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        }
    }

    pub fn attr_s(name: &str, v: &str) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            r#type: Some(AttributeType::String as i32),
            s: Some(v.as_bytes().to_vec().into()),
            ..Default::default()
        }
    }

    pub fn attr_i(name: &str, v: i64) -> AttributeProto {
        AttributeProto {
            name: Some(name.into()),
            r#type: Some(AttributeType::Int as i32),
            i: Some(v),
            ..Default::default()
        }
    }

    pub fn int64(name: &str, values: &[i64]) -> TensorProto {
        TensorProto {
            name: Some(name.into()),
            data_type: Some(DataType::Int64 as i32),
            dims: vec![values.len() as i64],
            int64_data: values.to_vec(),
            ..Default::default()
        }
    }

    pub fn bool_scalar(name: &str, v: bool) -> TensorProto {
        TensorProto {
            name: Some(name.into()),
            data_type: Some(DataType::Bool as i32),
            int32_data: vec![i32::from(v)],
            ..Default::default()
        }
    }

    pub fn model(
        opset: i64,
        nodes: Vec<NodeProto>,
        initializer: Vec<TensorProto>,
    ) -> onnx_ir::Model {
        onnx_ir::Model::from_proto(ModelProto {
            ir_version: Some(8),
            opset_import: vec![OperatorSetIdProto {
                domain: Some(String::new()),
                version: Some(opset),
            }],
            graph: Some(GraphProto {
                name: Some("g".into()),
                node: nodes,
                initializer,
                ..Default::default()
            }),
            ..Default::default()
        })
    }

    /// (target, code, severity, node or value) of each finding.
    pub fn summary(findings: &[super::Finding]) -> Vec<(String, String, String, String)> {
        findings
            .iter()
            .map(|f| {
                let at = match &f.diagnostic.location {
                    diagnostics::Location::Node { node, .. } => node.clone(),
                    diagnostics::Location::Value { value, .. } => value.clone(),
                    _ => String::new(),
                };
                (
                    f.target.clone().unwrap_or_default(),
                    f.diagnostic.code.clone(),
                    f.diagnostic.severity.as_str().to_string(),
                    at,
                )
            })
            .collect()
    }

    pub fn targets(names: &str) -> Vec<&'static crate::targets::Profile> {
        crate::targets::resolve(names).unwrap()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_rule_is_documented_and_in_the_code_table() {
        let mut seen = std::collections::HashSet::new();
        for r in RULES {
            assert!(seen.insert(r.code.code()), "{} twice", r.code.code());
            assert!(r.code.code().starts_with("ODT"));
            let doc = r.doc();
            for section in [
                "## What it does",
                "## Why is this bad?",
                "## Example",
                "## Fix",
            ] {
                assert!(doc.contains(section), "{} lacks {section}", r.code.code());
            }
        }
        let odt = crate::ALL_CODES
            .iter()
            .filter(|c| c.code().starts_with("ODT"))
            .count();
        assert_eq!(odt, RULES.len(), "every ODT code has a rule");
    }

    #[test]
    fn module_paths_come_from_scoped_node_names() {
        assert_eq!(
            torch_module_path("/encoder/layer.0/attn/MatMul").as_deref(),
            Some("encoder.layer.0.attn")
        );
        assert_eq!(torch_module_path("/MatMul"), None);
        assert_eq!(torch_module_path("MatMul_3"), None);
    }

    fn with_meta(name: &str, props: &[(&str, &str)]) -> NodeProto {
        let mut n = fixture::node("MatMul", name, &["a", "b"], &["c"]);
        for (k, v) in props {
            n.metadata_props.push(onnx_proto::StringStringEntryProto {
                key: Some(k.to_string()),
                value: Some(v.to_string()),
            });
        }
        n
    }

    const TRACE: &str = "File \"/home/alice/proj/model.py\", line 40, in forward\n    \
        return self.encoder(x)\n  \
        File \"/usr/lib/python3.11/site-packages/torch/nn/modules/module.py\", line 1747, in _call_impl\n    \
        return forward_call(*args, **kwargs)\n  \
        File \"/home/alice/proj/attn.py\", line 12, in forward\n    \
        return q @ k\n  \
        File \"/usr/lib/python3.11/site-packages/torch/_tensor.py\", line 41, in wrapped\n    \
        return f(*args)";

    #[test]
    fn dynamo_metadata_gives_module_and_innermost_user_frame() {
        let n = with_meta(
            "node_matmul",
            &[
                (
                    "pkg.torch.onnx.name_scopes",
                    "['', 'encoder', 'encoder.layer.0', 'encoder.layer.0.attn', 'matmul']",
                ),
                (
                    "pkg.torch.onnx.class_hierarchy",
                    "['M', 'Encoder', 'Layer', 'Attn', 'aten.matmul.default']",
                ),
                ("pkg.torch.onnx.stack_trace", TRACE),
            ],
        );
        assert_eq!(
            torch_source(&n),
            TorchSource {
                module: Some("encoder.layer.0.attn".into()),
                location: Some("/home/alice/proj/attn.py:12".into()),
            }
        );
        assert_eq!(
            module_suffix(&n),
            " (PyTorch module `encoder.layer.0.attn`, at /home/alice/proj/attn.py:12)"
        );
        // Windows paths, a torch-only trace, a node at the root module.
        let w = with_meta(
            "n",
            &[
                ("pkg.torch.onnx.name_scopes", "['', 'linear']"),
                (
                    "pkg.torch.onnx.stack_trace",
                    "File \"C:\\Users\\bob\\m.py\", line 96, in forward\n  \
                     File \"C:\\py\\site-packages\\torch\\nn\\modules\\linear.py\", line 125, in forward",
                ),
            ],
        );
        assert_eq!(
            module_suffix(&w),
            " (PyTorch source at C:\\Users\\bob\\m.py:96)"
        );
        let t = with_meta(
            "/encoder/MatMul",
            &[(
                "pkg.torch.onnx.stack_trace",
                "File \"/x/torch/_tensor.py\", line 1, in f",
            )],
        );
        assert_eq!(module_suffix(&t), " (PyTorch module `encoder`)");
        assert_eq!(module_suffix(&with_meta("MatMul_3", &[])), "");
    }

    #[test]
    fn node_findings_carry_the_torch_source() {
        let mut n = with_meta(
            "node_dropout",
            &[
                (
                    "pkg.torch.onnx.name_scopes",
                    "['', 'head', 'head.drop', 'dropout']",
                ),
                ("pkg.torch.onnx.stack_trace", TRACE),
            ],
        );
        n.op_type = Some("Dropout".into());
        n.input = vec!["x".into(), "r".into(), "t".into()];
        let m = fixture::model(15, vec![n], vec![fixture::bool_scalar("t", true)]);
        let f = lint(&m, "m.onnx", &[]);
        let d = f
            .iter()
            .find(|f| f.diagnostic.code == "ODT031")
            .expect("ODT031");
        assert!(
            d.diagnostic
                .message
                .contains("PyTorch module `head.drop`, at /home/alice/proj/attn.py:12"),
            "{}",
            d.diagnostic.message
        );
    }
}
