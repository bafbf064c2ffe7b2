//! Visiting every `TensorProto` a model holds: initializers, sparse initializers, tensor-valued
//! attributes, and the same inside subgraphs, model-local functions and training info.

use onnx_proto::{
    AttributeProto, GraphProto, ModelProto, NodeProto, SparseTensorProto, TensorProto,
};

/// Where a tensor sits in the model, for error messages ("initializer of graph 'main'",
/// "attribute 'value' of node 'Constant_3'").
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TensorSite {
    Initializer { graph: String },
    SparseInitializer { graph: String },
    Attribute { node: String, attribute: String },
    SparseAttribute { node: String, attribute: String },
}

impl std::fmt::Display for TensorSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TensorSite::Initializer { graph } => write!(f, "initializer of graph '{graph}'"),
            TensorSite::SparseInitializer { graph } => {
                write!(f, "sparse initializer of graph '{graph}'")
            }
            TensorSite::Attribute { node, attribute } => {
                write!(f, "attribute '{attribute}' of node '{node}'")
            }
            TensorSite::SparseAttribute { node, attribute } => {
                write!(f, "sparse tensor attribute '{attribute}' of node '{node}'")
            }
        }
    }
}

/// Calls `f` on every tensor of the model, depth first, stopping at the first error.
pub fn for_each_tensor_mut<E>(
    model: &mut ModelProto,
    f: &mut impl FnMut(&mut TensorProto, &TensorSite) -> Result<(), E>,
) -> Result<(), E> {
    walk(model, true, f)
}

/// Like [`for_each_tensor_mut`], but only the tensors that onnx itself moves to and from external
/// data: dense initializers and tensor attributes of the graph, its subgraphs and the functions;
/// not sparse tensors, not training info.
pub fn for_each_dense_tensor_mut<E>(
    model: &mut ModelProto,
    f: &mut impl FnMut(&mut TensorProto, &TensorSite) -> Result<(), E>,
) -> Result<(), E> {
    walk(model, false, &mut |t, site| match site {
        TensorSite::SparseInitializer { .. } | TensorSite::SparseAttribute { .. } => Ok(()),
        _ => f(t, site),
    })
}

fn walk<E>(
    model: &mut ModelProto,
    training_info: bool,
    f: &mut impl FnMut(&mut TensorProto, &TensorSite) -> Result<(), E>,
) -> Result<(), E> {
    if let Some(g) = model.graph.as_mut() {
        graph(g, f)?;
    }
    for func in &mut model.functions {
        nodes(&mut func.node, f)?;
    }
    if !training_info {
        return Ok(());
    }
    for info in &mut model.training_info {
        if let Some(g) = info.initialization.as_mut() {
            graph(g, f)?;
        }
        if let Some(g) = info.algorithm.as_mut() {
            graph(g, f)?;
        }
    }
    Ok(())
}

fn graph<E>(
    g: &mut GraphProto,
    f: &mut impl FnMut(&mut TensorProto, &TensorSite) -> Result<(), E>,
) -> Result<(), E> {
    let name = g.name().to_string();
    let site = TensorSite::Initializer {
        graph: name.clone(),
    };
    for t in &mut g.initializer {
        f(t, &site)?;
    }
    let site = TensorSite::SparseInitializer { graph: name };
    for s in &mut g.sparse_initializer {
        sparse(s, &site, f)?;
    }
    nodes(&mut g.node, f)
}

fn nodes<E>(
    nodes: &mut [NodeProto],
    f: &mut impl FnMut(&mut TensorProto, &TensorSite) -> Result<(), E>,
) -> Result<(), E> {
    for n in nodes {
        let node = n.name().to_string();
        for a in &mut n.attribute {
            attribute(a, &node, f)?;
        }
    }
    Ok(())
}

fn attribute<E>(
    a: &mut AttributeProto,
    node: &str,
    f: &mut impl FnMut(&mut TensorProto, &TensorSite) -> Result<(), E>,
) -> Result<(), E> {
    let site = TensorSite::Attribute {
        node: node.to_string(),
        attribute: a.name().to_string(),
    };
    if let Some(t) = a.t.as_mut() {
        f(t, &site)?;
    }
    for t in &mut a.tensors {
        f(t, &site)?;
    }
    let site = TensorSite::SparseAttribute {
        node: node.to_string(),
        attribute: a.name().to_string(),
    };
    if let Some(s) = a.sparse_tensor.as_mut() {
        sparse(s, &site, f)?;
    }
    for s in &mut a.sparse_tensors {
        sparse(s, &site, f)?;
    }
    if let Some(g) = a.g.as_mut() {
        graph(g, f)?;
    }
    for g in &mut a.graphs {
        graph(g, f)?;
    }
    Ok(())
}

fn sparse<E>(
    s: &mut SparseTensorProto,
    site: &TensorSite,
    f: &mut impl FnMut(&mut TensorProto, &TensorSite) -> Result<(), E>,
) -> Result<(), E> {
    if let Some(t) = s.values.as_mut() {
        f(t, site)?;
    }
    if let Some(t) = s.indices.as_mut() {
        f(t, site)?;
    }
    Ok(())
}
