//! Fusion planning: which elementwise nodes of the main graph the engine folds into the Conv,
//! MatMul or Gemm that produces their input (see `ops::exec::epilogue`).
//!
//! A chain grows from a head's output while the current value feeds exactly one node (and is
//! not a graph output) and that node is a supported activation, or an Add/Mul whose other
//! operand already exists when the head runs; or while it feeds exactly the five nodes of
//! PyTorch's erf GELU or the two of its SiLU (Sigmoid, Mul). The plan is made once per session; whether a chain is applied is
//! decided per run (never when intermediates are captured or node runs traced, and only when
//! the head's kernel can apply it; otherwise the chain's nodes run one by one as usual).

use crate::Value;
use onnx_proto::{GraphProto, NodeProto};
use ops::exec::Activation;
use std::collections::{HashMap, HashSet};
use tensor::{DataType, Tensor};

/// One step of a chain, with value names resolved at run time.
#[derive(Debug, Clone)]
pub(crate) enum Step {
    Add(String),
    Mul(String),
    Unary(Activation),
}

/// One step of a chain: the nodes it stands for and the value it produces.
#[derive(Debug, Clone)]
pub(crate) struct ChainStep {
    pub op: Step,
    /// The folded nodes (indices into the graph's nodes): one, or five for GELU.
    pub nodes: Vec<usize>,
    /// The value the step's last node produces.
    pub output: String,
}

/// The nodes folded into one head, step by step (a kernel may apply only a prefix).
#[derive(Debug, Clone)]
pub(crate) struct Chain {
    pub steps: Vec<ChainStep>,
}

impl Chain {
    /// Every folded node.
    pub fn nodes(&self) -> impl Iterator<Item = usize> + '_ {
        self.steps.iter().flat_map(|s| s.nodes.iter().copied())
    }
}

/// Chains by head node index.
pub(crate) type Fusions = HashMap<usize, Chain>;

const HEADS: &[&str] = &["Conv", "MatMul", "Gemm"];

fn default_domain(n: &NodeProto) -> bool {
    matches!(n.domain(), "" | "ai.onnx")
}

struct Graph<'g> {
    nodes: &'g [NodeProto],
    /// Consumer nodes of each value (each node once), subgraph reads included.
    consumers: HashMap<&'g str, Vec<usize>>,
    outputs: HashSet<&'g str>,
    /// Step at which each node output is produced.
    produced_at: HashMap<&'g str, usize>,
    step_of: Vec<usize>,
    initializers: &'g HashMap<String, Value>,
    constants: HashMap<&'g str, Tensor>,
}

impl<'g> Graph<'g> {
    fn single_consumer(&self, v: &str) -> Option<usize> {
        if self.outputs.contains(v) {
            return None;
        }
        match self.consumers.get(v).map(Vec::as_slice) {
            Some([n]) => Some(*n),
            _ => None,
        }
    }

    /// A float32 scalar known before running: a one-element initializer or Constant.
    fn scalar(&self, name: &str) -> Option<f32> {
        let t = match self.initializers.get(name) {
            Some(Value::Tensor(t)) => t,
            Some(_) => return None,
            None => self.constants.get(name)?,
        };
        if t.dtype() != DataType::Float || t.len() != 1 {
            return None;
        }
        t.to_vec::<f32>().ok().map(|v| v[0])
    }

    /// Whether `name` exists before the node at `step` runs.
    fn available_before(&self, name: &str, step: usize) -> bool {
        match self.produced_at.get(name) {
            Some(&s) => s < step,
            // A graph input or initializer (a name nothing produces).
            None => !name.is_empty(),
        }
    }

    /// The other operand of a binary node whose operands are `v` and something else.
    fn other_operand<'n>(&self, node: &'n NodeProto, v: &str) -> Option<&'n str> {
        match node.input.as_slice() {
            [a, b] if a == v && b != v => Some(b),
            [a, b] if b == v && a != v => Some(a),
            _ => None,
        }
    }

    fn node(&self, i: usize, op: &str) -> Option<&'g NodeProto> {
        let n = &self.nodes[i];
        (default_domain(n) && n.op_type() == op && n.output.len() == 1).then_some(n)
    }

    /// The two consumer nodes of `v` (not a graph output), the one of type `first` first.
    fn two_consumers(&self, v: &str, first: &str) -> Option<(usize, usize)> {
        if self.outputs.contains(v) {
            return None;
        }
        let [c0, c1] = self.consumers.get(v)?.as_slice() else {
            return None;
        };
        Some(if self.nodes[*c0].op_type() == first {
            (*c0, *c1)
        } else {
            (*c1, *c0)
        })
    }

    /// PyTorch's erf GELU on `v`: Div(v, d) → Erf → Add(·, one) → Mul(v, ·) → Mul(·, half).
    fn gelu(&self, v: &str) -> Option<(Vec<usize>, Activation, String)> {
        let (div_i, mul_i) = self.two_consumers(v, "Div")?;
        let div = self.node(div_i, "Div")?;
        if div.input.first().map(String::as_str) != Some(v) {
            return None;
        }
        let d = self.scalar(div.input.get(1)?)?;
        let erf_i = self.single_consumer(&div.output[0])?;
        let erf = self.node(erf_i, "Erf")?;
        let add_i = self.single_consumer(&erf.output[0])?;
        let add = self.node(add_i, "Add")?;
        let one = self.scalar(self.other_operand(add, &erf.output[0])?)?;
        if self.single_consumer(&add.output[0])? != mul_i {
            return None;
        }
        let mul = self.node(mul_i, "Mul")?;
        if self.other_operand(mul, v)? != add.output[0] {
            return None;
        }
        let half_i = self.single_consumer(&mul.output[0])?;
        let half_node = self.node(half_i, "Mul")?;
        let half = self.scalar(self.other_operand(half_node, &mul.output[0])?)?;
        Some((
            vec![div_i, erf_i, add_i, mul_i, half_i],
            Activation::gelu_erf(d, one, half),
            half_node.output[0].clone(),
        ))
    }

    /// PyTorch's SiLU on `v`: Sigmoid(v) → Mul(v, ·).
    fn silu(&self, v: &str) -> Option<(Vec<usize>, Activation, String)> {
        let (sig_i, mul_i) = self.two_consumers(v, "Sigmoid")?;
        let sig = self.node(sig_i, "Sigmoid")?;
        if sig.input.as_slice() != [v] || self.single_consumer(&sig.output[0])? != mul_i {
            return None;
        }
        let mul = self.node(mul_i, "Mul")?;
        if self.other_operand(mul, v)? != sig.output[0] {
            return None;
        }
        Some((
            vec![sig_i, mul_i],
            Activation::silu(),
            mul.output[0].clone(),
        ))
    }

    fn chain(&self, head: usize, claimed: &HashSet<usize>) -> Option<Chain> {
        let h = &self.nodes[head];
        if !default_domain(h) || !HEADS.contains(&h.op_type()) || h.output.len() != 1 {
            return None;
        }
        let head_step = self.step_of[head];
        let mut v = h.output[0].clone();
        let mut steps = Vec::new();
        loop {
            if let Some((nodes, act, out)) = self.gelu(&v).or_else(|| self.silu(&v)) {
                if nodes.iter().any(|n| claimed.contains(n)) {
                    break;
                }
                steps.push(ChainStep {
                    op: Step::Unary(act),
                    nodes,
                    output: out.clone(),
                });
                v = out;
                continue;
            }
            let Some(n) = self.single_consumer(&v) else {
                break;
            };
            let node = &self.nodes[n];
            if claimed.contains(&n) || !default_domain(node) || node.output.len() != 1 {
                break;
            }
            let op = if let Some(act) = Activation::of_node(node) {
                Step::Unary(act)
            } else if matches!(node.op_type(), "Add" | "Mul") {
                let Some(t) = self.other_operand(node, &v) else {
                    break;
                };
                if !self.available_before(t, head_step) {
                    break;
                }
                if node.op_type() == "Add" {
                    Step::Add(t.to_string())
                } else {
                    Step::Mul(t.to_string())
                }
            } else {
                break;
            };
            v = node.output[0].clone();
            steps.push(ChainStep {
                op,
                nodes: vec![n],
                output: v.clone(),
            });
        }
        (!steps.is_empty()).then_some(Chain { steps })
    }
}

/// The chains of the main graph `g` run in `order`.
pub(crate) fn plan(
    g: &GraphProto,
    order: &[usize],
    initializers: &HashMap<String, Value>,
) -> Fusions {
    let mut consumers: HashMap<&str, Vec<usize>> = HashMap::new();
    for (i, n) in g.node.iter().enumerate() {
        let mut reads = Vec::new();
        reads_of(n, &mut reads);
        for r in reads {
            let c = consumers.entry(r).or_default();
            if c.last() != Some(&i) && !c.contains(&i) {
                c.push(i);
            }
        }
    }
    let mut step_of = vec![usize::MAX; g.node.len()];
    let mut produced_at = HashMap::new();
    for (s, &i) in order.iter().enumerate() {
        step_of[i] = s;
        for o in &g.node[i].output {
            produced_at.insert(o.as_str(), s);
        }
    }
    let constants = g
        .node
        .iter()
        .filter(|n| default_domain(n) && n.op_type() == "Constant" && n.output.len() == 1)
        .filter_map(|n| {
            let a = n.attribute.iter().find(|a| a.name() == "value")?;
            let t = Tensor::from_proto(a.t.as_ref()?).ok()?;
            Some((n.output[0].as_str(), t))
        })
        .collect();
    let graph = Graph {
        nodes: &g.node,
        consumers,
        outputs: g.output.iter().map(|o| o.name()).collect(),
        produced_at,
        step_of,
        initializers,
        constants,
    };
    let mut claimed = HashSet::new();
    let mut fusions = Fusions::new();
    for &i in order {
        if claimed.contains(&i) {
            continue;
        }
        if let Some(chain) = graph.chain(i, &claimed) {
            claimed.extend(chain.nodes());
            fusions.insert(i, chain);
        }
    }
    fusions
}

/// Every value name `node` (and its subgraphs, recursively) reads, borrowed.
fn reads_of<'n>(node: &'n NodeProto, out: &mut Vec<&'n str>) {
    out.extend(
        node.input
            .iter()
            .filter(|n| !n.is_empty())
            .map(String::as_str),
    );
    for a in &node.attribute {
        for g in a.g.iter().chain(a.graphs.iter()) {
            for n in &g.node {
                reads_of(n, out);
            }
        }
    }
}
