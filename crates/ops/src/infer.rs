//! What shape/type inference of one node sees and produces.
//!
//! An op's `infer` function reads its inputs' types ([`Ty`]), the values of inputs known before
//! running ([`Known`]: initializers, constants, and shape arithmetic such as Shape → Gather →
//! Concat), and its attributes, through [`InferCx`]; it sets its outputs' types and, when it can
//! compute them, their values. It never guesses: an unknown stays unknown (`None`).

use crate::sym::SymDim;
use onnx_ir::{Dim, ElemType, ValueType};
use onnx_proto::{AttributeProto, GraphProto, NodeProto, TensorProto};
use tensor::{DataType, Tensor};

/// One dim: a (possibly symbolic) value, or unknown.
pub type DimOf = Option<SymDim>;
/// A shape of known rank.
pub type Shape = Vec<DimOf>;

/// The type of a value as inference tracks it.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum Ty {
    /// `dtype: None` = element type unknown; `shape: None` = rank unknown.
    Tensor {
        dtype: Option<DataType>,
        shape: Option<Shape>,
    },
    SparseTensor {
        dtype: Option<DataType>,
        shape: Option<Shape>,
    },
    Sequence(Box<Ty>),
    Optional(Box<Ty>),
    Map {
        key: Option<DataType>,
        value: Box<Ty>,
    },
    #[default]
    Unknown,
}

impl Ty {
    pub fn tensor(dtype: Option<DataType>, shape: Option<Shape>) -> Ty {
        Ty::Tensor { dtype, shape }
    }

    pub fn dtype(&self) -> Option<DataType> {
        match self {
            Ty::Tensor { dtype, .. } | Ty::SparseTensor { dtype, .. } => *dtype,
            _ => None,
        }
    }

    pub fn shape(&self) -> Option<&Shape> {
        match self {
            Ty::Tensor { shape, .. } | Ty::SparseTensor { shape, .. } => shape.as_ref(),
            _ => None,
        }
    }

    /// From a declared `ValueType` (graph input, value_info).
    pub fn from_value_type(v: &ValueType) -> Ty {
        let elem = |e: &ElemType| match e {
            ElemType::Known(d) => Some(*d),
            _ => None,
        };
        let shape = |s: &Option<Vec<Dim>>| {
            s.as_ref().map(|dims| {
                dims.iter()
                    .map(|d| match d {
                        Dim::Fixed(n) => Some(SymDim::known(*n)),
                        Dim::Sym(s) => Some(SymDim::sym(s)),
                        Dim::Unknown => None,
                    })
                    .collect()
            })
        };
        match v {
            ValueType::Tensor { elem: e, shape: s } => Ty::Tensor {
                dtype: elem(e),
                shape: shape(s),
            },
            ValueType::SparseTensor { elem: e, shape: s } => Ty::SparseTensor {
                dtype: elem(e),
                shape: shape(s),
            },
            ValueType::Sequence(t) => Ty::Sequence(Box::new(Ty::from_value_type(t))),
            ValueType::Optional(t) => Ty::Optional(Box::new(Ty::from_value_type(t))),
            ValueType::Map { key, value } => Ty::Map {
                key: elem(key),
                value: Box::new(Ty::from_value_type(value)),
            },
            ValueType::Opaque { .. } | ValueType::Unset => Ty::Unknown,
        }
    }
}

/// A value known without running the model.
#[derive(Debug, Clone, PartialEq)]
pub enum Known {
    /// A fully known tensor (initializer, Constant, or computed from other known values).
    Tensor(Tensor),
    /// A rank-0 or rank-1 integer tensor some of whose elements are symbolic or unknown: what
    /// `Shape` of a partly known shape produces, and arithmetic on it keeps.
    Dims { scalar: bool, dims: Shape },
}

/// A value's type and, when known, its contents.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Info {
    pub ty: Ty,
    pub value: Option<Known>,
}

impl Info {
    pub fn of(ty: Ty) -> Info {
        Info { ty, value: None }
    }

    /// A tensor whose contents are known: its type follows from them.
    pub fn known(t: Tensor) -> Info {
        let shape = t
            .shape()
            .iter()
            .map(|&d| Some(SymDim::known(d as i64)))
            .collect();
        Info {
            ty: Ty::tensor(Some(t.dtype()), Some(shape)),
            value: Some(Known::Tensor(t)),
        }
    }

    /// An int64 vector (or scalar) of dims.
    pub fn dims(dims: Shape, scalar: bool) -> Info {
        let shape = if scalar {
            vec![]
        } else {
            vec![Some(SymDim::known(dims.len() as i64))]
        };
        let value = match dims
            .iter()
            .map(|d| d.as_ref().and_then(SymDim::as_known))
            .collect::<Option<Vec<i64>>>()
        {
            Some(ints) => {
                let shape_usize = if scalar { vec![] } else { vec![ints.len()] };
                Known::Tensor(Tensor::from_vec(shape_usize, ints).expect("length matches shape"))
            }
            None => Known::Dims { scalar, dims },
        };
        Info {
            ty: Ty::tensor(Some(DataType::Int64), Some(shape)),
            value: Some(value),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InferError(pub String);

/// `bail!("...")` inside an infer function.
#[macro_export]
macro_rules! bail {
    ($($t:tt)*) => { return Err($crate::infer::InferError(format!($($t)*))) };
}

/// Infers the output types of a subgraph given its input types (for If/Loop/Scan); supplied by
/// the graph-level driver.
pub type SubgraphInfer<'a> = dyn Fn(&GraphProto, &[Ty]) -> Vec<Ty> + 'a;

/// The view of one node during inference.
pub struct InferCx<'a> {
    pub node: &'a NodeProto,
    /// The opset version of the node's domain.
    pub opset: i64,
    /// Per input position: `None` for an omitted optional input ("" name) or an unknown value.
    pub inputs: Vec<Option<&'a Info>>,
    /// Per output position, filled by the op (starts unknown).
    pub outputs: Vec<Info>,
    pub subgraph: Option<&'a SubgraphInfer<'a>>,
}

impl<'a> InferCx<'a> {
    pub fn new(node: &'a NodeProto, opset: i64, inputs: Vec<Option<&'a Info>>) -> Self {
        let outputs = vec![Info::default(); node.output.len()];
        InferCx {
            node,
            opset,
            inputs,
            outputs,
            subgraph: None,
        }
    }

    // ---- attributes ----

    pub fn attr(&self, name: &str) -> Option<&'a AttributeProto> {
        self.node.attribute.iter().find(|a| a.name() == name)
    }
    pub fn attr_i(&self, name: &str) -> Option<i64> {
        self.attr(name).and_then(|a| a.i)
    }
    pub fn attr_f(&self, name: &str) -> Option<f32> {
        self.attr(name).and_then(|a| a.f)
    }
    pub fn attr_ints(&self, name: &str) -> Option<&'a [i64]> {
        self.attr(name).map(|a| a.ints.as_slice())
    }
    pub fn attr_floats(&self, name: &str) -> Option<&'a [f32]> {
        self.attr(name).map(|a| a.floats.as_slice())
    }
    pub fn attr_s(&self, name: &str) -> Option<&'a str> {
        self.attr(name)
            .and_then(|a| a.s.as_deref())
            .and_then(|s| std::str::from_utf8(s).ok())
    }
    pub fn attr_t(&self, name: &str) -> Option<&'a TensorProto> {
        self.attr(name).and_then(|a| a.t.as_ref())
    }
    pub fn attr_g(&self, name: &str) -> Option<&'a GraphProto> {
        self.attr(name).and_then(|a| a.g.as_ref())
    }

    // ---- inputs ----

    pub fn num_inputs(&self) -> usize {
        self.inputs.len()
    }
    /// Whether input `i` is given (not omitted with "").
    pub fn has_input(&self, i: usize) -> bool {
        self.node.input.get(i).is_some_and(|n| !n.is_empty())
    }
    pub fn input(&self, i: usize) -> Option<&'a Info> {
        self.inputs.get(i).copied().flatten()
    }
    pub fn ty(&self, i: usize) -> Option<&'a Ty> {
        self.input(i).map(|x| &x.ty)
    }
    pub fn dtype(&self, i: usize) -> Option<DataType> {
        self.ty(i).and_then(Ty::dtype)
    }
    pub fn shape(&self, i: usize) -> Option<&'a Shape> {
        self.ty(i).and_then(Ty::shape)
    }
    pub fn rank(&self, i: usize) -> Option<usize> {
        self.shape(i).map(Vec::len)
    }
    /// The known tensor value of input `i`.
    pub fn tensor(&self, i: usize) -> Option<&'a Tensor> {
        match self.input(i)?.value.as_ref()? {
            Known::Tensor(t) => Some(t),
            Known::Dims { .. } => None,
        }
    }
    /// Input `i` as dims: an integer tensor of rank ≤ 1 whose elements may be symbolic.
    pub fn dims_value(&self, i: usize) -> Option<Shape> {
        match self.input(i)?.value.as_ref()? {
            Known::Dims { dims, .. } => Some(dims.clone()),
            Known::Tensor(t) if t.shape().len() <= 1 => Some(
                ints_of(t)?
                    .into_iter()
                    .map(|v| Some(SymDim::known(v)))
                    .collect(),
            ),
            Known::Tensor(_) => None,
        }
    }
    /// Input `i` as fully known integers (any rank, flattened).
    pub fn ints(&self, i: usize) -> Option<Vec<i64>> {
        ints_of(self.tensor(i)?)
    }
    /// Input `i` as one known integer (a scalar or a one-element tensor).
    pub fn single_int(&self, i: usize) -> Option<i64> {
        self.ints(i).filter(|v| v.len() == 1).map(|v| v[0])
    }
    /// Input `i` as fully known floats (any rank, flattened).
    pub fn floats(&self, i: usize) -> Option<Vec<f64>> {
        floats_of(self.tensor(i)?)
    }

    // ---- outputs ----

    pub fn set(&mut self, k: usize, ty: Ty) {
        if let Some(o) = self.outputs.get_mut(k) {
            o.ty = ty;
        }
    }
    pub fn set_tensor(&mut self, k: usize, dtype: Option<DataType>, shape: Option<Shape>) {
        self.set(k, Ty::tensor(dtype, shape));
    }
    pub fn set_info(&mut self, k: usize, info: Info) {
        if let Some(o) = self.outputs.get_mut(k) {
            *o = info;
        }
    }
    /// Sets only the known value of output `k` (its type stays as set).
    pub fn set_value(&mut self, k: usize, value: Known) {
        if let Some(o) = self.outputs.get_mut(k) {
            o.value = Some(value);
        }
    }

    /// Output `k` has the same type as input `i`.
    pub fn pass_through(&mut self, i: usize, k: usize) {
        if let Some(t) = self.ty(i).cloned() {
            self.set(k, t);
        }
    }
}

/// A known integer tensor's elements (int8..int64, uint8..uint64, bool), flattened.
pub fn ints_of(t: &Tensor) -> Option<Vec<i64>> {
    Some(match t.dtype() {
        DataType::Int64 => t.to_vec::<i64>().ok()?,
        DataType::Int32 => t.to_vec::<i32>().ok()?.into_iter().map(i64::from).collect(),
        DataType::Int16 => t.to_vec::<i16>().ok()?.into_iter().map(i64::from).collect(),
        DataType::Int8 => t.to_vec::<i8>().ok()?.into_iter().map(i64::from).collect(),
        DataType::Uint8 => t.to_vec::<u8>().ok()?.into_iter().map(i64::from).collect(),
        DataType::Uint16 => t.to_vec::<u16>().ok()?.into_iter().map(i64::from).collect(),
        DataType::Uint32 => t.to_vec::<u32>().ok()?.into_iter().map(i64::from).collect(),
        DataType::Uint64 => t
            .to_vec::<u64>()
            .ok()?
            .into_iter()
            .map(|v| i64::try_from(v).ok())
            .collect::<Option<_>>()?,
        DataType::Bool => t
            .to_vec::<bool>()
            .ok()?
            .into_iter()
            .map(i64::from)
            .collect(),
        _ => return None,
    })
}

/// A known float tensor's elements (float, double, float16, bfloat16), flattened.
pub fn floats_of(t: &Tensor) -> Option<Vec<f64>> {
    Some(match t.dtype() {
        DataType::Float => t.to_vec::<f32>().ok()?.into_iter().map(f64::from).collect(),
        DataType::Double => t.to_vec::<f64>().ok()?,
        DataType::Float16 => t
            .to_vec::<half::f16>()
            .ok()?
            .into_iter()
            .map(f64::from)
            .collect(),
        DataType::Bfloat16 => t
            .to_vec::<half::bf16>()
            .ok()?
            .into_iter()
            .map(f64::from)
            .collect(),
        _ => return None,
    })
}

/// A known dim, if it is a plain number.
pub fn known(d: &DimOf) -> Option<i64> {
    d.as_ref().and_then(SymDim::as_known)
}

/// A fixed dim.
pub fn fixed(n: i64) -> DimOf {
    Some(SymDim::known(n))
}

/// Multidirectional (numpy) broadcasting of two shapes.
pub fn broadcast(a: &Shape, b: &Shape) -> Result<Shape, InferError> {
    let rank = a.len().max(b.len());
    let at = |s: &Shape, i: usize| -> DimOf {
        let off = rank - s.len();
        if i < off {
            fixed(1)
        } else {
            s[i - off].clone()
        }
    };
    let mut out = Vec::with_capacity(rank);
    for i in 0..rank {
        let (x, y) = (at(a, i), at(b, i));
        let d = match (known(&x), known(&y)) {
            (Some(1), _) => y,
            (_, Some(1)) => x,
            (Some(m), Some(n)) if m != n => {
                bail!(
                    "cannot broadcast dim {m} with {n} (shapes {} and {})",
                    show(a),
                    show(b)
                )
            }
            _ if x == y => x,
            (Some(_), None) if y.is_none() => x,
            (None, Some(_)) if x.is_none() => y,
            // Different symbols, or a symbol against a number > 1: one of them must be 1 or they are
            // equal at run time; the result is whichever is not 1, which we cannot tell.
            (Some(n), _) if n > 1 => x,
            (_, Some(n)) if n > 1 => y,
            _ => None,
        };
        out.push(d);
    }
    Ok(out)
}

/// `[batch,3,?]`
pub fn show(s: &Shape) -> String {
    let dims: Vec<String> = s
        .iter()
        .map(|d| d.as_ref().map_or("?".to_string(), SymDim::to_string))
        .collect();
    format!("[{}]", dims.join(","))
}

/// Normalizes a possibly negative axis against `rank`.
pub fn axis(a: i64, rank: usize) -> Result<usize, InferError> {
    let r = rank as i64;
    if a < -r || a >= r.max(1) && !(r == 0 && a == 0) {
        bail!("axis {a} is out of range for rank {rank}");
    }
    Ok(if a < 0 { (a + r) as usize } else { a as usize })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(dims: &[i64]) -> Shape {
        dims.iter()
            .map(|&d| if d < 0 { None } else { fixed(d) })
            .collect()
    }

    #[test]
    fn broadcasting() {
        assert_eq!(
            broadcast(&s(&[2, 1, 4]), &s(&[3, 1])).unwrap(),
            s(&[2, 3, 4])
        );
        assert_eq!(broadcast(&s(&[]), &s(&[5])).unwrap(), s(&[5]));
        assert!(broadcast(&s(&[2]), &s(&[3])).is_err());
        let b = vec![Some(SymDim::sym("batch")), fixed(3)];
        assert_eq!(broadcast(&b, &s(&[1, 3])).unwrap(), b);
        assert_eq!(broadcast(&s(&[-1, 3]), &s(&[4, 3])).unwrap(), s(&[4, 3]));
    }

    #[test]
    fn axes() {
        assert_eq!(axis(-1, 3).unwrap(), 2);
        assert_eq!(axis(0, 0).unwrap(), 0);
        assert!(axis(3, 3).is_err());
        assert!(axis(-4, 3).is_err());
    }
}
