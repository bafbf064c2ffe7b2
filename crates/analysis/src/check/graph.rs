//! A graph and its subgraphs: scoping (outer-scope values), single assignment, topological order,
//! cycles, graph inputs/outputs, initializers, and the unused-value warnings.

use super::{node, node_label, Cx};
use crate::Code;
use onnx_ir::{Dim, ElemType, ValueType};
use onnx_proto::{GraphProto, NodeProto, TensorProto, ValueInfoProto};
use std::collections::{HashMap, HashSet};

/// The values visible at a point of a graph: this graph's so far, then the enclosing graphs'.
pub(crate) struct Scope<'m, 'p> {
    defined: HashSet<&'m str>,
    types: HashMap<&'m str, ValueType>,
    parent: Option<&'p Scope<'m, 'p>>,
}

impl<'m, 'p> Scope<'m, 'p> {
    pub fn new(parent: Option<&'p Scope<'m, 'p>>) -> Self {
        Scope {
            defined: HashSet::new(),
            types: HashMap::new(),
            parent,
        }
    }

    pub fn is_defined(&self, name: &str) -> bool {
        self.defined.contains(name) || self.parent.is_some_and(|p| p.is_defined(name))
    }

    pub fn define(&mut self, name: &'m str) {
        self.defined.insert(name);
    }

    pub fn type_of(&self, name: &str) -> Option<&ValueType> {
        self.types
            .get(name)
            .or_else(|| self.parent.and_then(|p| p.type_of(name)))
    }
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Main,
    Sub,
}

pub(super) fn check_main(cx: &mut Cx, g: &GraphProto) {
    check_graph(cx, g, None, Kind::Main);
}

/// The subgraphs a node holds (If branches, Loop/Scan bodies).
pub(crate) fn subgraphs(n: &NodeProto) -> impl Iterator<Item = &GraphProto> {
    n.attribute.iter().flat_map(|a| a.g.iter().chain(&a.graphs))
}

/// Names a graph uses but does not define itself: what it reads from enclosing scopes.
pub(crate) fn free_names(g: &GraphProto) -> HashSet<&str> {
    let mut defined: HashSet<&str> = g.input.iter().map(|v| v.name()).collect();
    defined.extend(g.initializer.iter().map(|t| t.name()));
    defined.extend(
        g.sparse_initializer
            .iter()
            .filter_map(|s| s.values.as_ref())
            .map(|t| t.name()),
    );
    defined.extend(g.node.iter().flat_map(|n| &n.output).map(String::as_str));
    let mut free = HashSet::new();
    for n in &g.node {
        for name in uses(n) {
            if !defined.contains(name) {
                free.insert(name);
            }
        }
    }
    free.extend(
        g.output
            .iter()
            .map(|v| v.name())
            .filter(|n| !defined.contains(n)),
    );
    free
}

/// Every value a node reads: its inputs and what its subgraphs read from outside themselves.
pub(crate) fn uses(n: &NodeProto) -> Vec<&str> {
    let mut v: Vec<&str> = n
        .input
        .iter()
        .map(String::as_str)
        .filter(|s| !s.is_empty())
        .collect();
    for g in subgraphs(n) {
        v.extend(free_names(g));
    }
    v
}

fn initializer_type(t: &TensorProto) -> ValueType {
    ValueType::Tensor {
        elem: ElemType::from_code(t.data_type),
        shape: Some(t.dims.iter().map(|&d| Dim::Fixed(d)).collect()),
    }
}

fn check_declared(cx: &mut Cx, v: &ValueInfoProto, what: &str) {
    let t = ValueType::from_proto(v.r#type.as_ref());
    if has_unknown_elem(&t) {
        cx.report(
            Code::ElemTypeUnknown,
            cx.at_value(v.name()),
            format!(
                "{what} '{}' has type {t}, with an element type code ONNX does not define",
                v.name()
            ),
        );
    }
}

fn has_unknown_elem(t: &ValueType) -> bool {
    match t {
        ValueType::Tensor { elem, .. } | ValueType::SparseTensor { elem, .. } => {
            matches!(elem, ElemType::Unknown(_))
        }
        ValueType::Sequence(t) | ValueType::Optional(t) => has_unknown_elem(t),
        ValueType::Map { key, value } => {
            matches!(key, ElemType::Unknown(_)) || has_unknown_elem(value)
        }
        _ => false,
    }
}

fn check_graph<'m>(cx: &mut Cx, g: &'m GraphProto, parent: Option<&Scope<'m, '_>>, kind: Kind) {
    let mut scope = Scope::new(parent);
    for v in g.input.iter().chain(&g.value_info).chain(&g.output) {
        if v.r#type.is_some() {
            scope
                .types
                .insert(v.name(), ValueType::from_proto(v.r#type.as_ref()));
        }
    }
    for v in &g.input {
        check_declared(cx, v, "graph input");
    }
    for v in &g.value_info {
        check_declared(cx, v, "value_info");
    }
    for v in &g.output {
        check_declared(cx, v, "graph output");
    }
    if kind == Kind::Main {
        for (v, what) in g
            .input
            .iter()
            .map(|v| (v, "input"))
            .chain(g.output.iter().map(|v| (v, "output")))
        {
            if v.r#type.is_none() && !v.name().is_empty() {
                cx.report(
                    Code::GraphIoUntyped,
                    cx.at_value(v.name()),
                    format!("graph {what} '{}' has no type", v.name()),
                )
                .help = Some(
                    "every graph input and output of the main graph must declare its type".into(),
                );
            }
        }
    }

    // Graph inputs.
    let inputs: HashMap<&str, &ValueInfoProto> = g.input.iter().map(|v| (v.name(), v)).collect();
    for v in &g.input {
        if v.name().is_empty() {
            cx.report(
                Code::NameEmpty,
                cx.at_model(),
                format!("a graph input of graph '{}' has an empty name", g.name()),
            );
        } else if scope.defined.contains(v.name()) {
            cx.report(
                Code::ValueRedefined,
                cx.at_value(v.name()),
                format!("graph input '{}' is listed more than once", v.name()),
            );
        }
        scope.define(v.name());
    }

    // Initializers.
    let mut initialized: HashSet<&str> = HashSet::new();
    let sparse = g
        .sparse_initializer
        .iter()
        .filter_map(|s| s.values.as_ref());
    for t in g.initializer.iter().chain(sparse) {
        let name = t.name();
        if name.is_empty() {
            cx.report(
                Code::NameEmpty,
                cx.at_model(),
                format!("an initializer of graph '{}' has an empty name", g.name()),
            );
            continue;
        }
        if !initialized.insert(name) {
            cx.report(
                Code::ValueRedefined,
                cx.at_value(name),
                format!("initializer '{name}' is defined more than once"),
            );
        }
        match inputs.get(name) {
            Some(input) => check_initializer_matches_input(cx, t, input),
            None => {
                if cx.ir_version < 4 && kind == Kind::Main {
                    cx.report(Code::InitializerNotInput, cx.at_value(name), format!("initializer '{name}' is not a graph input, which IR version {} requires", cx.ir_version))
                        .help = Some("add it to graph.input, or set ir_version to 4 or later".into());
                }
                scope
                    .types
                    .entry(name)
                    .or_insert_with(|| initializer_type(t));
            }
        }
        scope.define(name);
    }

    // Nodes: order, cycles, single assignment, schemas, subgraphs.
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in g.node.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            producer.entry(o.as_str()).or_insert(i);
        }
    }
    let node_uses: Vec<Vec<&str>> = g.node.iter().map(uses).collect();
    let cyclic = nodes_in_cycles(&node_uses, &producer);
    if !cyclic.is_empty() {
        let mut members: Vec<usize> = cyclic.iter().copied().collect();
        members.sort_unstable();
        let first = members[0];
        let names: Vec<String> = members
            .iter()
            .take(6)
            .map(|&i| format!("'{}' ({})", node_label(&g.node[i], i), g.node[i].op_type()))
            .collect();
        let more = if members.len() > 6 {
            format!(" and {} more", members.len() - 6)
        } else {
            String::new()
        };
        cx.report(
            Code::Cycle,
            cx.at_node(&g.node[first], first),
            format!(
                "nodes {}{more} depend on each other in a cycle",
                names.join(", ")
            ),
        )
        .help = Some(
            "an ONNX graph must be acyclic; loops are expressed with the Loop or Scan op".into(),
        );
    }
    let opsets = cx.opsets.clone();
    for (i, n) in g.node.iter().enumerate() {
        let direct: HashSet<&str> = n.input.iter().map(String::as_str).collect();
        for &name in &node_uses[i] {
            if scope.is_defined(name) {
                continue;
            }
            let what = if direct.contains(name) {
                format!("input '{name}' of node '{}'", node_label(n, i))
            } else {
                format!(
                    "a subgraph of node '{}' reads '{name}', which",
                    node_label(n, i)
                )
            };
            match producer.get(name) {
                Some(&j) if j >= i => {
                    if !cyclic.contains(&i) {
                        cx.report(
                            Code::NotTopologicallySorted,
                            cx.at_node(n, i),
                            format!(
                                "{what} is produced by node '{}' (#{j}), which comes later",
                                node_label(&g.node[j], j)
                            ),
                        )
                        .help = Some(
                            "nodes must be listed in topological order: sort the graph".into(),
                        );
                    }
                }
                _ => {
                    cx.report(
                        Code::ValueUndefined,
                        cx.at_node(n, i),
                        format!("{what} is not defined: no graph input, initializer or earlier node output has that name"),
                    );
                }
            }
        }
        if let Some(schema) = node::check(cx, n, i, &scope, &opsets, None) {
            for (k, t) in node::infer_output_types(n, schema, &scope) {
                let Some(name) = n
                    .output
                    .get(k)
                    .map(String::as_str)
                    .filter(|o| !o.is_empty())
                else {
                    continue;
                };
                match scope.types.get(name) {
                    Some(declared)
                        if declared.is_fully_known()
                            && declared.onnx_type_string() != t.onnx_type_string() =>
                    {
                        cx.report(
                            Code::DeclaredTypeContradicted,
                            cx.at_node(n, i),
                            format!(
                                "output '{name}' of node '{}' ({}) is {} by its inputs, but declared {}",
                                node_label(n, i),
                                n.op_type(),
                                t.onnx_type_string(),
                                declared.onnx_type_string()
                            ),
                        );
                    }
                    Some(_) => {}
                    None => {
                        scope.types.insert(name, t);
                    }
                }
            }
        }
        for sub in subgraphs(n) {
            check_graph(cx, sub, Some(&scope), Kind::Sub);
        }
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            if scope.is_defined(o) {
                cx.report(
                    Code::ValueRedefined,
                    cx.at_node(n, i),
                    format!("node '{}' outputs '{o}', which is already defined (graph input, initializer, earlier node or enclosing graph)", node_label(n, i)),
                )
                .help = Some("every value must be assigned exactly once: rename one of them".into());
            }
            scope.define(o);
        }
    }

    // Graph outputs.
    for v in &g.output {
        if v.name().is_empty() {
            cx.report(
                Code::NameEmpty,
                cx.at_model(),
                format!("a graph output of graph '{}' has an empty name", g.name()),
            );
        } else if !scope.is_defined(v.name()) {
            cx.report(Code::ValueUndefined, cx.at_value(v.name()), format!("graph output '{}' of graph '{}' is not produced by any node, input or initializer", v.name(), g.name()));
        }
    }

    warn_unused(cx, g, kind, &node_uses, &initialized);
}

fn check_initializer_matches_input(cx: &mut Cx, t: &TensorProto, input: &ValueInfoProto) {
    let declared = ValueType::from_proto(input.r#type.as_ref());
    let ValueType::Tensor { elem, shape } = &declared else {
        return;
    };
    let name = t.name();
    if let ElemType::Known(d) = elem {
        if d.onnx_code() != t.data_type() {
            let actual = ElemType::from_code(t.data_type);
            cx.report(Code::InitializerInputMismatch, cx.at_value(name), format!("initializer '{name}' is {actual}, but the graph input of that name is declared {d}"));
            return;
        }
    }
    if let Some(shape) = shape {
        let mismatch = shape.len() != t.dims.len()
            || shape
                .iter()
                .zip(&t.dims)
                .any(|(d, &n)| matches!(d, Dim::Fixed(m) if *m != n));
        if mismatch {
            let declared: Vec<String> = shape.iter().map(Dim::to_string).collect();
            cx.report(
                Code::InitializerInputMismatch,
                cx.at_value(name),
                format!("initializer '{name}' has shape {:?}, but the graph input of that name is declared [{}]", t.dims, declared.join(",")),
            );
        }
    }
}

/// Kahn's algorithm over the producer → consumer edges of one graph; what remains is in (or
/// downstream of) a cycle. Returns the nodes on cycles proper: those that can reach themselves.
fn nodes_in_cycles(node_uses: &[Vec<&str>], producer: &HashMap<&str, usize>) -> HashSet<usize> {
    let n = node_uses.len();
    let mut consumers: Vec<Vec<usize>> = vec![Vec::new(); n];
    let mut indegree = vec![0usize; n];
    for (i, us) in node_uses.iter().enumerate() {
        let mut from: Vec<usize> = us.iter().filter_map(|u| producer.get(u).copied()).collect();
        from.sort_unstable();
        from.dedup();
        for j in from {
            consumers[j].push(i);
            indegree[i] += 1;
        }
    }
    let mut ready: Vec<usize> = (0..n).filter(|&i| indegree[i] == 0).collect();
    let mut done = vec![false; n];
    while let Some(j) = ready.pop() {
        done[j] = true;
        for &i in &consumers[j] {
            indegree[i] -= 1;
            if indegree[i] == 0 {
                ready.push(i);
            }
        }
    }
    // Among the remaining nodes, keep those that also reach nothing-but-remaining in reverse:
    // prune nodes with no remaining consumer repeatedly (they are downstream of a cycle, not on it).
    let mut remaining: HashSet<usize> = (0..n).filter(|&i| !done[i]).collect();
    loop {
        let prune: Vec<usize> = remaining
            .iter()
            .copied()
            .filter(|&j| !consumers[j].iter().any(|i| remaining.contains(i)))
            .collect();
        if prune.is_empty() {
            break;
        }
        for j in prune {
            remaining.remove(&j);
        }
    }
    remaining
}

fn warn_unused(
    cx: &mut Cx,
    g: &GraphProto,
    kind: Kind,
    node_uses: &[Vec<&str>],
    initialized: &HashSet<&str>,
) {
    let outputs: HashSet<&str> = g.output.iter().map(|v| v.name()).collect();
    let used: HashSet<&str> = node_uses
        .iter()
        .flatten()
        .copied()
        .chain(outputs.iter().copied())
        .collect();
    if kind == Kind::Main {
        for v in &g.input {
            if !used.contains(v.name()) && !initialized.contains(v.name()) && !v.name().is_empty() {
                cx.report(
                    Code::InputUnused,
                    cx.at_value(v.name()),
                    format!("graph input '{}' is never used", v.name()),
                )
                .help = Some(
                    "remove it from the graph inputs; callers still have to feed it otherwise"
                        .into(),
                );
            }
        }
    }
    let mut initializers: Vec<&str> = initialized
        .iter()
        .copied()
        .filter(|n| !used.contains(n))
        .collect();
    initializers.sort_unstable();
    for name in initializers {
        cx.report(
            Code::InitializerUnused,
            cx.at_value(name),
            format!("initializer '{name}' is never used"),
        )
        .help = Some("remove it (onnx-doctor simplify will, once it exists; onnxsim does)".into());
    }
    // Liveness backwards from the graph outputs.
    let mut live: HashSet<&str> = outputs;
    let mut dead = Vec::new();
    for (i, n) in g.node.iter().enumerate().rev() {
        if n.output.iter().any(|o| live.contains(o.as_str())) {
            live.extend(node_uses[i].iter().copied());
        } else {
            dead.push(i);
        }
    }
    for i in dead.into_iter().rev() {
        let n = &g.node[i];
        cx.report(
            Code::DeadNode,
            cx.at_node(n, i),
            format!(
                "no output of node '{}' ({}) reaches a graph output",
                node_label(n, i),
                n.op_type()
            ),
        )
        .help = Some("remove the node, or add the output it computes to the graph outputs".into());
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for (i, n) in g.node.iter().enumerate() {
        if n.name().is_empty() {
            continue;
        }
        if let Some(&first) = seen.get(n.name()) {
            cx.report(
                Code::NodeNameDuplicate,
                cx.at_node(n, i),
                format!(
                    "node name '{}' is used by nodes #{first} and #{i}",
                    n.name()
                ),
            );
        } else {
            seen.insert(n.name(), i);
        }
    }
}
