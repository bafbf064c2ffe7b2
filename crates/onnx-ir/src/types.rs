//! Value types and dims, read from `TypeProto` into something easy to match on and print.

use onnx_proto::{tensor_shape_proto::dimension, type_proto, TensorShapeProto, TypeProto};
use std::fmt;
use tensor::DataType;

/// One dimension of a shape: a fixed size, a symbolic name (`batch`), or unknown.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Dim {
    Fixed(i64),
    Sym(String),
    Unknown,
}

impl fmt::Display for Dim {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Dim::Fixed(n) => write!(f, "{n}"),
            Dim::Sym(s) => write!(f, "{s}"),
            Dim::Unknown => write!(f, "?"),
        }
    }
}

/// Element type as stored in a `TypeProto`: a known ONNX type, or a code we do not know.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ElemType {
    Known(DataType),
    Unknown(i32),
    Unset,
}

impl ElemType {
    pub fn from_code(code: Option<i32>) -> ElemType {
        match code {
            None | Some(0) => ElemType::Unset,
            Some(c) => DataType::from_onnx(c).map_or(ElemType::Unknown(c), ElemType::Known),
        }
    }
}

impl fmt::Display for ElemType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElemType::Known(d) => write!(f, "{}", d.name()),
            ElemType::Unknown(c) => write!(f, "unknown({c})"),
            ElemType::Unset => write!(f, "?"),
        }
    }
}

/// The type of a value: what a graph input, output or value_info declares.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ValueType {
    /// `shape: None` means the rank is unknown.
    Tensor {
        elem: ElemType,
        shape: Option<Vec<Dim>>,
    },
    SparseTensor {
        elem: ElemType,
        shape: Option<Vec<Dim>>,
    },
    Sequence(Box<ValueType>),
    Map {
        key: ElemType,
        value: Box<ValueType>,
    },
    Optional(Box<ValueType>),
    Opaque {
        domain: String,
        name: String,
    },
    /// No type given at all.
    Unset,
}

pub fn dims(shape: &TensorShapeProto) -> Vec<Dim> {
    shape
        .dim
        .iter()
        .map(|d| match &d.value {
            Some(dimension::Value::DimValue(n)) => Dim::Fixed(*n),
            Some(dimension::Value::DimParam(s)) if !s.is_empty() => Dim::Sym(s.clone()),
            _ => Dim::Unknown,
        })
        .collect()
}

impl ValueType {
    pub fn from_proto(t: Option<&TypeProto>) -> ValueType {
        let Some(value) = t.and_then(|t| t.value.as_ref()) else {
            return ValueType::Unset;
        };
        let boxed = |t: &Option<Box<TypeProto>>| Box::new(ValueType::from_proto(t.as_deref()));
        match value {
            type_proto::Value::TensorType(t) => ValueType::Tensor {
                elem: ElemType::from_code(t.elem_type),
                shape: t.shape.as_ref().map(dims),
            },
            type_proto::Value::SparseTensorType(t) => ValueType::SparseTensor {
                elem: ElemType::from_code(t.elem_type),
                shape: t.shape.as_ref().map(dims),
            },
            type_proto::Value::SequenceType(s) => ValueType::Sequence(boxed(&s.elem_type)),
            type_proto::Value::MapType(m) => ValueType::Map {
                key: ElemType::from_code(m.key_type),
                value: boxed(&m.value_type),
            },
            type_proto::Value::OptionalType(o) => ValueType::Optional(boxed(&o.elem_type)),
            type_proto::Value::OpaqueType(o) => ValueType::Opaque {
                domain: o.domain().to_string(),
                name: o.name().to_string(),
            },
        }
    }

    /// The dims of a tensor or sparse tensor type with known rank.
    pub fn shape(&self) -> Option<&[Dim]> {
        match self {
            ValueType::Tensor { shape, .. } | ValueType::SparseTensor { shape, .. } => {
                shape.as_deref()
            }
            _ => None,
        }
    }

    /// The type name without the shape, in ONNX's notation: `float`, `seq(tensor(int64))`,
    /// `map(string,tensor(float))`, `optional(tensor(float))`, `sparse_tensor(float)`.
    pub fn type_name(&self) -> String {
        match self {
            ValueType::Tensor { elem, .. } => elem.to_string(),
            ValueType::SparseTensor { elem, .. } => format!("sparse_tensor({elem})"),
            ValueType::Sequence(t) => format!("seq({})", t.nested_name()),
            ValueType::Map { key, value } => format!("map({key},{})", value.nested_name()),
            ValueType::Optional(t) => format!("optional({})", t.nested_name()),
            ValueType::Opaque { domain, name } => format!("opaque({domain},{name})"),
            ValueType::Unset => "?".into(),
        }
    }

    /// The type as operator schemas spell it: `tensor(float)`, `seq(tensor(int64))`, …
    pub fn onnx_type_string(&self) -> String {
        self.nested_name()
    }

    /// Whether the element type (of a tensor, or inside a sequence/optional/map) is known.
    pub fn is_fully_known(&self) -> bool {
        match self {
            ValueType::Tensor { elem, .. } | ValueType::SparseTensor { elem, .. } => {
                matches!(elem, ElemType::Known(_))
            }
            ValueType::Sequence(t) | ValueType::Optional(t) => t.is_fully_known(),
            ValueType::Map { key, value } => {
                matches!(key, ElemType::Known(_)) && value.is_fully_known()
            }
            ValueType::Opaque { .. } => true,
            ValueType::Unset => false,
        }
    }

    fn nested_name(&self) -> String {
        match self {
            ValueType::Tensor { elem, .. } => format!("tensor({elem})"),
            other => other.type_name(),
        }
    }
}

impl fmt::Display for ValueType {
    /// `float[batch,3,224,224]`, `float[?]` for unknown rank, `seq(tensor(float))`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.type_name())?;
        match self {
            ValueType::Tensor { shape, .. } | ValueType::SparseTensor { shape, .. } => {
                match shape {
                    None => write!(f, "[rank unknown]"),
                    Some(dims) => {
                        let dims: Vec<String> = dims.iter().map(Dim::to_string).collect();
                        write!(f, "[{}]", dims.join(","))
                    }
                }
            }
            _ => Ok(()),
        }
    }
}
