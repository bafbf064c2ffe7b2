//! Running a graph: node order, value lifetimes, dispatch to kernels and functions, subgraphs.

use crate::{function, norm_domain, Capture, EngineError, RunOutput, Session, Value};
use onnx_proto::{FunctionProto, GraphProto, NodeProto};
use ops::exec::{KResult, KernelError, RunCx, Subgraphs};
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tensor::Tensor;

/// The values visible while running one graph: its own, then its enclosing graphs'.
pub(crate) struct Env<'p> {
    pub values: HashMap<String, Value>,
    /// Values shared by every run (the main graph's initializers), looked up after `values`.
    pub base: Option<&'p HashMap<String, Value>>,
    pub parent: Option<&'p Env<'p>>,
    /// Names bound to nothing: a function's formal inputs the caller omitted.
    pub absent: HashSet<String>,
}

impl Env<'_> {
    pub fn get(&self, name: &str) -> Option<&Value> {
        match self.values.get(name) {
            Some(v) => Some(v),
            None => match self.base.and_then(|b| b.get(name)) {
                Some(v) => Some(v),
                None => self.parent.and_then(|p| p.get(name)),
            },
        }
    }
}

/// The main graph's run plan, computed once per session: node order and, per step, the values
/// read for the last time there (freed after the step unless they are graph outputs).
pub(crate) struct Plan {
    pub order: Vec<usize>,
    pub frees: Vec<Vec<String>>,
    /// Elementwise chains folded into the node that produces their input (`fuse.rs`).
    pub fusions: crate::fuse::Fusions,
    /// Per node: which inputs are the same on every run (initializers, or values of nodes
    /// that read only such values)...
    pub constant: Vec<Vec<bool>>,
    /// ... and what its kernel derived from them on the first run.
    pub states: Vec<ops::exec::NodeState>,
    /// Per node: whether it reads only initializers and the values of such nodes, and
    /// computes the same values on every run (no random ops, no subgraphs, standard domains).
    pub foldable: Vec<bool>,
    /// The values of the foldable nodes, computed on the first run that folds.
    pub folded: std::sync::OnceLock<Folded>,
}

/// The main graph's constant part, computed once: the values of the foldable nodes that ran
/// without error, and which nodes those were (a node that fails is left to run, and to report
/// its error, on every run).
pub(crate) struct Folded {
    pub values: Env<'static>,
    pub nodes: Vec<bool>,
}

/// Ops whose values differ from run to run, so never folded.
const NONDETERMINISTIC: &[&str] = &[
    "RandomNormal",
    "RandomNormalLike",
    "RandomUniform",
    "RandomUniformLike",
    "Multinomial",
    "Bernoulli",
    "Dropout",
];

impl Plan {
    pub fn new(g: &GraphProto, initializers: &HashMap<String, Value>) -> Result<Plan, EngineError> {
        let order = schedule(&g.node, g.name())?;
        let outputs: HashSet<&str> = g.output.iter().map(|o| o.name()).collect();
        let mut last_use: HashMap<String, usize> = HashMap::new();
        for (step, &i) in order.iter().enumerate() {
            let mut reads = Vec::new();
            names_read(&g.node[i], &mut reads);
            for r in reads {
                last_use.insert(r, step);
            }
        }
        let mut frees = vec![Vec::new(); order.len()];
        for (name, step) in last_use {
            if !outputs.contains(name.as_str()) {
                frees[step].push(name);
            }
        }
        let fusions = crate::fuse::plan(g, &order, initializers);
        // An initializer that is also a graph input can be fed a different value per run.
        let inputs: HashSet<&str> = g.input.iter().map(|i| i.name()).collect();
        let mut fixed: HashSet<&str> = initializers
            .keys()
            .map(String::as_str)
            .filter(|n| !inputs.contains(n))
            .collect();
        let mut foldable = vec![false; g.node.len()];
        for &i in &order {
            let n = &g.node[i];
            let standard = matches!(norm_domain(n.domain()), "" | "ai.onnx");
            let fold = standard
                && !NONDETERMINISTIC.contains(&n.op_type())
                && n.attribute
                    .iter()
                    .all(|a| a.g.is_none() && a.graphs.is_empty())
                && n.input
                    .iter()
                    .all(|v| v.is_empty() || fixed.contains(v.as_str()));
            if fold {
                foldable[i] = true;
                fixed.extend(
                    n.output
                        .iter()
                        .filter(|o| !o.is_empty())
                        .map(String::as_str),
                );
            }
        }
        let constant = g
            .node
            .iter()
            .map(|n| n.input.iter().map(|i| fixed.contains(i.as_str())).collect())
            .collect();
        Ok(Plan {
            order,
            frees,
            fusions,
            constant,
            states: g.node.iter().map(|_| Default::default()).collect(),
            foldable,
            folded: std::sync::OnceLock::new(),
        })
    }
}

/// Decoded schema function bodies, keyed by (domain, op, opset).
pub(crate) type SchemaBodies =
    std::sync::Mutex<HashMap<(String, String, i64), Option<Arc<FunctionProto>>>>;

/// What runs a node.
pub(crate) enum Runner {
    Kernel(&'static ops::exec::KernelDef),
    /// A model-local function or the op's schema function body.
    Function(Arc<FunctionProto>),
}

/// The schema function body of `domain::op` at `version`, with the schema's attribute defaults
/// as the function's defaults (attribute references fall back to them when the node omits the
/// attribute); decoded once per session.
fn schema_body(
    session: &Session,
    domain: &str,
    op: &str,
    version: i64,
) -> Option<Arc<FunctionProto>> {
    let key = (domain.to_string(), op.to_string(), version);
    let mut cache = session
        .schema_bodies
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    cache
        .entry(key)
        .or_insert_with(|| {
            let schema = opset::schema_in(domain, op, version)?;
            let Ok(mut body) = schema.function_body(version)? else {
                return None;
            };
            for a in &schema.attributes {
                if let Some(d) = &a.default {
                    if !body.attribute_proto.iter().any(|p| p.name() == a.name) {
                        body.attribute_proto.push(default_attribute(&a.name, d));
                    }
                }
            }
            Some(Arc::new(body))
        })
        .clone()
}

/// Picks what runs `node` under `opsets`: a model-local function, a kernel, or the schema's
/// function body.
pub(crate) fn runner_for(
    session: &Session,
    node: &NodeProto,
    opsets: &HashMap<String, i64>,
) -> Result<Runner, EngineError> {
    let domain = norm_domain(node.domain());
    if let Some(f) = session
        .functions
        .get(domain)
        .and_then(|fs| fs.get(node.op_type()))
    {
        return Ok(Runner::Function(f.clone()));
    }
    let unsupported = |version: i64, detail: String| EngineError::Unsupported {
        node: node_name(node),
        op: node.op_type().to_string(),
        version,
        detail,
    };
    let Some(&version) = opsets.get(domain) else {
        return Err(unsupported(
            0,
            format!(" (the model imports no opset for domain '{domain}')"),
        ));
    };
    if let Some(k) = ops::exec::lookup(domain, node.op_type(), version) {
        return Ok(Runner::Kernel(k));
    }
    if let Some(body) = schema_body(session, domain, node.op_type(), version) {
        return Ok(Runner::Function(body));
    }
    let detail = if domain.is_empty() {
        String::new()
    } else {
        format!(" in domain '{domain}'")
    };
    Err(unsupported(version, detail))
}

/// A schema default as an `AttributeProto`.
fn default_attribute(name: &str, v: &opset::AttributeValue) -> onnx_proto::AttributeProto {
    use onnx_proto::attribute_proto::AttributeType as T;
    use opset::AttributeValue as V;
    let mut a = onnx_proto::AttributeProto {
        name: Some(name.to_string()),
        ..Default::default()
    };
    match v {
        V::Float(f) => {
            a.r#type = Some(T::Float as i32);
            a.f = Some(*f);
        }
        V::Int(i) => {
            a.r#type = Some(T::Int as i32);
            a.i = Some(*i);
        }
        V::String(s) => {
            a.r#type = Some(T::String as i32);
            a.s = Some(bytes::Bytes::from(s.clone().into_bytes()));
        }
        V::Floats(f) => {
            a.r#type = Some(T::Floats as i32);
            a.floats = f.clone();
        }
        V::Ints(i) => {
            a.r#type = Some(T::Ints as i32);
            a.ints = i.clone();
        }
        V::Strings(s) => {
            a.r#type = Some(T::Strings as i32);
            a.strings = s
                .iter()
                .map(|s| bytes::Bytes::from(s.clone().into_bytes()))
                .collect();
        }
        V::Tensor(hex) => {
            a.r#type = Some(T::Tensor as i32);
            a.t = <onnx_proto::TensorProto as onnx_proto::Message>::decode(&hex.0[..]).ok();
        }
    }
    a
}

pub(crate) fn node_name(node: &NodeProto) -> String {
    if node.name().is_empty() {
        format!(
            "{} -> {}",
            node.op_type(),
            node.output.first().map(String::as_str).unwrap_or("?")
        )
    } else {
        node.name().to_string()
    }
}

/// Refuses, before running, any node (in `g`, its subgraphs, and function bodies it calls)
/// that nothing can run.
pub(crate) fn check_runnable(
    session: &Session,
    g: &GraphProto,
    opsets: &HashMap<String, i64>,
) -> Result<(), EngineError> {
    let mut seen = HashSet::new();
    check_nodes(session, &g.node, opsets, &mut seen)
}

fn check_nodes(
    session: &Session,
    nodes: &[NodeProto],
    opsets: &HashMap<String, i64>,
    seen: &mut HashSet<(String, String, i64)>,
) -> Result<(), EngineError> {
    for node in nodes {
        for a in &node.attribute {
            if let Some(g) = &a.g {
                check_nodes(session, &g.node, opsets, seen)?;
            }
            for g in &a.graphs {
                check_nodes(session, &g.node, opsets, seen)?;
            }
        }
        if let Runner::Function(f) = runner_for(session, node, opsets)? {
            let key = (
                node.domain().to_string(),
                node.op_type().to_string(),
                opsets.get(norm_domain(node.domain())).copied().unwrap_or(0),
            );
            if seen.insert(key) {
                let body_opsets = function::opsets_of(&f, opsets);
                check_nodes(session, &f.node, &body_opsets, seen).map_err(|e| match e {
                    EngineError::Unsupported {
                        node: inner,
                        op,
                        version,
                        detail,
                    } => EngineError::Unsupported {
                        node: node_name(node),
                        op,
                        version,
                        detail: format!(
                            "{detail} (in the function body of {}, node '{inner}')",
                            node.op_type()
                        ),
                    },
                    other => other,
                })?;
            }
        }
    }
    Ok(())
}

/// Every value name the nodes (and their subgraphs, recursively) read.
fn names_read(node: &NodeProto, out: &mut Vec<String>) {
    out.extend(node.input.iter().filter(|n| !n.is_empty()).cloned());
    for a in &node.attribute {
        let graphs = a.g.iter().chain(a.graphs.iter());
        for g in graphs {
            for n in &g.node {
                names_read(n, out);
            }
        }
    }
}

/// Node indices in an order where every value is produced before it is read.
pub(crate) fn schedule(nodes: &[NodeProto], graph: &str) -> Result<Vec<usize>, EngineError> {
    let mut producer: HashMap<&str, usize> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        for o in n.output.iter().filter(|o| !o.is_empty()) {
            producer.insert(o, i);
        }
    }
    let deps: Vec<Vec<usize>> = nodes
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let mut reads = Vec::new();
            names_read(n, &mut reads);
            let mut d: Vec<usize> = reads
                .iter()
                .filter_map(|r| producer.get(r.as_str()).copied())
                .filter(|&p| p != i)
                .collect();
            d.sort_unstable();
            d.dedup();
            d
        })
        .collect();
    if deps
        .iter()
        .enumerate()
        .all(|(i, d)| d.iter().all(|&p| p < i))
    {
        return Ok((0..nodes.len()).collect());
    }
    // Kahn's algorithm, stable in the original order.
    let mut indeg: Vec<usize> = deps.iter().map(Vec::len).collect();
    let mut users: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, d) in deps.iter().enumerate() {
        for &p in d {
            users[p].push(i);
        }
    }
    let mut ready: std::collections::BTreeSet<usize> =
        (0..nodes.len()).filter(|&i| indeg[i] == 0).collect();
    let mut order = Vec::with_capacity(nodes.len());
    while let Some(i) = ready.pop_first() {
        order.push(i);
        for &u in &users[i] {
            indeg[u] -= 1;
            if indeg[u] == 0 {
                ready.insert(u);
            }
        }
    }
    if order.len() != nodes.len() {
        let stuck = (0..nodes.len()).find(|i| !order.contains(i)).unwrap_or(0);
        return Err(EngineError::Graph {
            graph: graph.to_string(),
            reason: format!(
                "the nodes form a cycle (node '{}' can never run)",
                node_name(&nodes[stuck])
            ),
        });
    }
    Ok(order)
}

/// Lets a kernel run its node's subgraphs in the current scope.
struct Sub<'a> {
    session: &'a Session,
    env: &'a Env<'a>,
    opsets: &'a HashMap<String, i64>,
}

impl Subgraphs for Sub<'_> {
    fn run(&self, graph: &GraphProto, inputs: Vec<Value>) -> KResult<Vec<Value>> {
        run_graph(self.session, graph, self.opsets, Some(self.env), inputs)
            .map_err(|e| KernelError::Subgraph(format!("in subgraph '{}': {e}", graph.name())))
    }
}

/// Runs one node in `env` and returns its outputs in order (omitted outputs included as `None`).
pub(crate) fn run_node(
    session: &Session,
    node: &NodeProto,
    opsets: &HashMap<String, i64>,
    env: &Env,
) -> Result<Vec<Option<Value>>, EngineError> {
    run_node_with(session, node, opsets, env, &[], None).map(|(outs, _)| outs)
}

/// [`run_node`], asking a kernel to apply `epilogue` to its output; also says how many of its
/// leading steps it applied (the output is then the value after the last of them).
pub(crate) fn run_node_with(
    session: &Session,
    node: &NodeProto,
    opsets: &HashMap<String, i64>,
    env: &Env,
    epilogue: &[ops::exec::EpilogueOp],
    state: Option<(&[bool], &ops::exec::NodeState)>,
) -> Result<(Vec<Option<Value>>, usize), EngineError> {
    let mut applied = 0;
    let fail = |reason: String| EngineError::Node {
        node: node_name(node),
        op: node.op_type().to_string(),
        reason,
    };
    let mut inputs: Vec<Option<&Value>> = Vec::with_capacity(node.input.len());
    for name in &node.input {
        if name.is_empty() {
            inputs.push(None);
        } else {
            match env.get(name) {
                Some(v) => inputs.push(Some(v)),
                None if env.absent.contains(name) => inputs.push(None),
                None => {
                    return Err(fail(format!(
                        "input '{name}' has no value (it is neither a graph input, an initializer, nor produced by an earlier node)"
                    )))
                }
            }
        }
    }
    let runner = runner_for(session, node, opsets)?;
    if let Some(trace) = &session.trace {
        let record = crate::NodeRecord {
            domain: norm_domain(node.domain()).to_string(),
            op: node.op_type().to_string(),
            version: opsets.get(norm_domain(node.domain())).copied().unwrap_or(0),
            input_types: inputs
                .iter()
                .map(|v| v.and_then(Value::as_tensor).map(Tensor::dtype))
                .collect(),
            kernel: matches!(runner, Runner::Kernel(_)),
        };
        trace.lock().unwrap_or_else(|e| e.into_inner()).push(record);
    }
    let outputs: Vec<Value> = match runner {
        Runner::Kernel(k) => {
            let version = opsets.get(norm_domain(node.domain())).copied().unwrap_or(0);
            let sub = Sub {
                session,
                env,
                opsets,
            };
            let mut cx = RunCx::new(node, version, &inputs, &sub).with_epilogue(epilogue);
            if let Some((constant, st)) = state {
                cx = cx.with_state(constant, st);
            }
            let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (k.run)(&cx)));
            applied = cx.epilogue_applied();
            match result {
                Ok(Ok(v)) => v,
                Ok(Err(e)) => return Err(fail(e.to_string())),
                Err(payload) => {
                    let msg = payload
                        .downcast_ref::<String>()
                        .cloned()
                        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                        .unwrap_or_default();
                    return Err(fail(format!("internal error in the kernel (a bug in onnx-doctor, please report it): {msg}")));
                }
            }
        }
        Runner::Function(f) => {
            let given: Vec<Option<Value>> = inputs.iter().map(|v| v.cloned()).collect();
            function::call(session, &f, node, given, opsets)
                .map_err(|e| fail(format!("in its function body: {e}")))?
                .into_iter()
                .map(|v| v.unwrap_or(Value::Optional(None)))
                .collect()
        }
    };
    let mut out = Vec::with_capacity(node.output.len());
    let mut produced = outputs.into_iter();
    for (k, name) in node.output.iter().enumerate() {
        let v = produced.next();
        if name.is_empty() {
            out.push(None);
            continue;
        }
        match v {
            Some(v) => out.push(Some(v)),
            None => {
                return Err(fail(format!(
                    "the kernel produced no value for output {k} ('{name}')"
                )))
            }
        }
    }
    Ok((out, applied))
}

/// Runs `g` with `inputs` bound positionally to its inputs, inside `parent`'s scope.
pub(crate) fn run_graph(
    session: &Session,
    g: &GraphProto,
    opsets: &HashMap<String, i64>,
    parent: Option<&Env>,
    inputs: Vec<Value>,
) -> Result<Vec<Value>, EngineError> {
    let graph_err = |reason: String| EngineError::Graph {
        graph: g.name().to_string(),
        reason,
    };
    if inputs.len() != g.input.len() {
        return Err(graph_err(format!(
            "expects {} inputs, was given {}",
            g.input.len(),
            inputs.len()
        )));
    }
    let mut values = HashMap::new();
    for t in &g.initializer {
        let v = Tensor::from_proto(t).map_err(|e| EngineError::Initializer {
            name: t.name().to_string(),
            reason: e.to_string(),
        })?;
        values.insert(t.name().to_string(), Value::Tensor(v));
    }
    for (i, v) in g.input.iter().zip(inputs) {
        values.insert(i.name().to_string(), v);
    }
    let mut env = Env {
        values,
        base: None,
        parent,
        absent: HashSet::new(),
    };
    let order = schedule(&g.node, g.name())?;
    for i in order {
        let node = &g.node[i];
        let outs = run_node(session, node, opsets, &env)?;
        for (name, v) in node.output.iter().zip(outs) {
            if let Some(v) = v {
                env.values.insert(name.clone(), v);
            }
        }
    }
    g.output
        .iter()
        .map(|o| {
            env.get(o.name())
                .cloned()
                .ok_or_else(|| graph_err(format!("output '{}' is never produced", o.name())))
        })
        .collect()
}

/// The epilogue of `chain` with its operands looked up in `env` (`None` when one is missing or
/// not a tensor: the chain's nodes then run one by one).
fn epilogue_of<'e>(
    chain: &crate::fuse::Chain,
    env: &'e Env,
) -> Option<Vec<ops::exec::EpilogueOp<'e>>> {
    use crate::fuse::Step;
    use ops::exec::EpilogueOp;
    chain
        .steps
        .iter()
        .map(|s| {
            Some(match &s.op {
                Step::Add(t) => EpilogueOp::Add(env.get(t)?.as_tensor()?),
                Step::Mul(t) => EpilogueOp::Mul(env.get(t)?.as_tensor()?),
                Step::Unary(a) => EpilogueOp::Unary(*a),
            })
        })
        .collect()
}

/// Runs the foldable nodes of the main graph once, in plan order, over the initializers.
fn fold_constants(session: &Session, plan: &Plan) -> Folded {
    let g = session.model.graph();
    let mut values = Env {
        values: HashMap::new(),
        base: None,
        parent: None,
        absent: HashSet::new(),
    };
    let mut nodes = vec![false; g.node.len()];
    for &i in plan.order.iter().filter(|&&i| plan.foldable[i]) {
        let node = &g.node[i];
        let ready = node.input.iter().all(|v| {
            v.is_empty() || values.values.contains_key(v) || session.initializers.contains_key(v)
        });
        if !ready {
            continue;
        }
        let env = Env {
            values: HashMap::new(),
            base: Some(&session.initializers),
            parent: Some(&values),
            absent: HashSet::new(),
        };
        let state = Some((plan.constant[i].as_slice(), &plan.states[i]));
        let Ok((outs, _)) = run_node_with(session, node, &session.opsets, &env, &[], state) else {
            continue;
        };
        drop(env);
        let complete = outs.len() == node.output.len()
            && node
                .output
                .iter()
                .zip(&outs)
                .all(|(n, v)| n.is_empty() || v.is_some());
        if !complete {
            continue;
        }
        for (name, v) in node.output.iter().zip(outs) {
            if let Some(v) = v {
                values.values.insert(name.clone(), v);
            }
        }
        nodes[i] = true;
    }
    Folded { values, nodes }
}

/// Runs the main graph, freeing each value after its last use unless it is an output.
pub(crate) fn run_main(
    session: &Session,
    given: HashMap<String, Value>,
    capture: &Capture,
) -> Result<RunOutput, EngineError> {
    let g = session.model.graph();
    let Some(plan) = &session.plan else {
        schedule(&g.node, g.name())?;
        return Err(EngineError::Graph {
            graph: g.name().to_string(),
            reason: "the nodes cannot be ordered".to_string(),
        });
    };
    let mut env = Env {
        values: given,
        base: Some(&session.initializers),
        parent: None,
        absent: HashSet::new(),
    };
    let mut captured = Vec::new();
    // Chains and constants are folded only when nobody looks at the values they skip.
    let fuse = matches!(capture, Capture::None) && session.trace.is_none();
    let constants = fuse.then(|| plan.folded.get_or_init(|| fold_constants(session, plan)));
    if let Some(c) = constants {
        env.parent = Some(&c.values);
    }
    let mut folded = vec![false; if fuse { g.node.len() } else { 0 }];
    for (&i, frees) in plan.order.iter().zip(&plan.frees) {
        let node = &g.node[i];
        if fuse && (folded[i] || constants.is_some_and(|c| c.nodes[i])) {
            for r in frees {
                env.values.remove(r);
            }
            continue;
        }
        let chain = if fuse { plan.fusions.get(&i) } else { None };
        let state = Some((plan.constant[i].as_slice(), &plan.states[i]));
        let ops = chain.and_then(|c| epilogue_of(c, &env)).unwrap_or_default();
        let started = session.profile.as_ref().map(|_| std::time::Instant::now());
        let (outs, applied) = run_node_with(session, node, &session.opsets, &env, &ops, state)?;
        let folded_steps = match chain {
            Some(c) if applied > 0 => &c.steps[..applied.min(c.steps.len())],
            _ => &[][..],
        };
        if let (Some(t), Some(p)) = (started, &session.profile) {
            p.lock()
                .unwrap_or_else(|e| e.into_inner())
                .push(crate::StepTime {
                    node: i,
                    fused: folded_steps
                        .iter()
                        .flat_map(|s| s.nodes.iter().copied())
                        .collect(),
                    seconds: t.elapsed().as_secs_f64(),
                });
        }
        match folded_steps.last() {
            Some(last) => {
                if let Some(Some(v)) = outs.into_iter().next() {
                    env.values.insert(last.output.clone(), v);
                }
                for s in folded_steps {
                    for &t in &s.nodes {
                        folded[t] = true;
                    }
                }
            }
            None => {
                for (name, v) in node.output.iter().zip(outs) {
                    if let Some(v) = v {
                        if capture.wants(name) {
                            captured.push((name.clone(), v.clone()));
                        }
                        env.values.insert(name.clone(), v);
                    }
                }
            }
        }
        for r in frees {
            env.values.remove(r);
        }
    }
    let mut result = Vec::with_capacity(g.output.len());
    for o in &g.output {
        let v = env
            .get(o.name())
            .cloned()
            .ok_or_else(|| EngineError::Graph {
                graph: g.name().to_string(),
                reason: format!("output '{}' is never produced", o.name()),
            })?;
        result.push((o.name().to_string(), v));
    }
    Ok(RunOutput {
        outputs: result,
        captured,
    })
}
