//! The schema types: one [`Schema`] per (domain, op, since_version).
//!
//! Field names and enum spellings match `data/schemas.json` one to one, so the types deserialize
//! with plain `serde` derives.

use onnx_proto::{FunctionProto, Message};
use serde::Deserialize;

/// One operator at one version: the signature in force from `since_version` until the op's next
/// schema (if any).
#[derive(Debug, Clone, Deserialize)]
pub struct Schema {
    /// Operator name, e.g. `"Resize"`.
    pub name: String,
    /// Operator set domain; the default domain (ai.onnx) is `""`.
    pub domain: String,
    /// The opset version this schema was introduced in.
    pub since_version: i64,
    /// A deprecated op: it is still returned by lookups so callers can name it when refusing it.
    pub deprecated: bool,
    pub support_level: SupportLevel,
    pub determinism: Determinism,
    pub min_inputs: usize,
    /// `None` when the number of inputs is unbounded (a variadic last input).
    pub max_inputs: Option<usize>,
    pub min_outputs: usize,
    /// `None` when the number of outputs is unbounded (a variadic last output).
    pub max_outputs: Option<usize>,
    /// Formal inputs in positional order.
    pub inputs: Vec<FormalParameter>,
    /// Formal outputs in positional order.
    pub outputs: Vec<FormalParameter>,
    /// Attributes sorted by name.
    pub attributes: Vec<AttributeSchema>,
    pub type_constraints: Vec<TypeConstraint>,
    /// The op is defined by a function that onnx builds per node (from its attributes and input
    /// types); such bodies cannot be stored, so [`Schema::function_body`] returns `None` for them.
    pub has_context_dependent_function: bool,
    /// Static function bodies: (opset version the body is written against, serialized
    /// `FunctionProto`), sorted by version.
    functions: Vec<(i64, HexBytes)>,
}

impl Schema {
    /// The attribute called `name`, if the op has one.
    pub fn attribute(&self, name: &str) -> Option<&AttributeSchema> {
        self.attributes.iter().find(|a| a.name == name)
    }

    /// The type constraint for a type parameter such as `"T"`.
    pub fn type_constraint(&self, type_param: &str) -> Option<&TypeConstraint> {
        self.type_constraints
            .iter()
            .find(|c| c.type_param_str == type_param)
    }

    /// Whether the op has a static function body for some opset version.
    pub fn has_function(&self) -> bool {
        !self.functions.is_empty()
    }

    /// The opset versions for which a static function body is stored, ascending.
    pub fn function_opsets(&self) -> impl Iterator<Item = i64> + '_ {
        self.functions.iter().map(|(v, _)| *v)
    }

    /// The op's function body as expanded in a model importing the op's domain at `opset`:
    /// the stored body with the largest version `<= opset` (as onnx's `GetFunction` picks it).
    /// `None` when the op has no static body usable at that opset.
    pub fn function_body(&self, opset: i64) -> Option<Result<FunctionProto, FunctionBodyError>> {
        let i = self.functions.partition_point(|(v, _)| *v <= opset);
        let (version, HexBytes(bytes)) = self.functions[..i].last()?;
        Some(
            FunctionProto::decode(bytes.as_slice()).map_err(|source| FunctionBodyError {
                op: self.name.clone(),
                since_version: self.since_version,
                function_opset: *version,
                source,
            }),
        )
    }
}

/// A stored function body that does not decode as a `FunctionProto` (a corrupt data file).
#[derive(Debug, thiserror::Error)]
#[error("function body of {op}-{since_version} (for opset {function_opset}) does not decode; regenerate the data with scripts/gen_opset_schemas.py")]
pub struct FunctionBodyError {
    pub op: String,
    pub since_version: i64,
    pub function_opset: i64,
    #[source]
    pub source: prost::DecodeError,
}

/// A formal input or output of an op.
#[derive(Debug, Clone, Deserialize)]
pub struct FormalParameter {
    pub name: String,
    /// A type parameter (`"T"`, see [`Schema::type_constraint`]) or a literal type such as
    /// `"tensor(int64)"`.
    pub type_str: String,
    pub option: Optionality,
    /// For a variadic parameter: whether all its values must share one type.
    pub is_homogeneous: bool,
    /// For a variadic parameter: the least number of values it takes.
    pub min_arity: usize,
    pub differentiation: Differentiation,
}

/// Whether a formal parameter must be present, may be omitted, or repeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Optionality {
    Single,
    Optional,
    Variadic,
}

/// Whether gradients flow through a formal parameter (for training tools).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Differentiation {
    Unknown,
    Differentiable,
    NonDifferentiable,
}

/// Whether onnx considers the op stable (`Common`) or experimental.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SupportLevel {
    Common,
    Experimental,
}

/// Whether the op gives the same outputs for the same inputs (random ops do not).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
pub enum Determinism {
    Unknown,
    Deterministic,
    NonDeterministic,
}

/// One attribute an op accepts.
#[derive(Debug, Clone, Deserialize)]
pub struct AttributeSchema {
    pub name: String,
    #[serde(rename = "type")]
    pub ty: AttributeType,
    pub required: bool,
    /// The value onnx assumes when the attribute is absent.
    pub default: Option<AttributeValue>,
}

/// The `AttributeProto.AttributeType` an attribute must have, spelled as in ONNX.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AttributeType {
    Float,
    Int,
    String,
    Tensor,
    Graph,
    SparseTensor,
    TypeProto,
    Floats,
    Ints,
    Strings,
    Tensors,
    Graphs,
    SparseTensors,
    TypeProtos,
}

/// A default attribute value. (onnx 1.23.2 only has scalar and list defaults; a `TENSOR` default
/// would be kept as its serialized `TensorProto`.)
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum AttributeValue {
    Float(f32),
    Int(i64),
    String(String),
    Floats(Vec<f32>),
    Ints(Vec<i64>),
    Strings(Vec<String>),
    Tensor(HexBytes),
}

/// The types a type parameter may be bound to, e.g. `T` ∈ {`tensor(float)`, `tensor(double)`}.
#[derive(Debug, Clone, Deserialize)]
pub struct TypeConstraint {
    pub type_param_str: String,
    pub allowed_type_strs: Vec<String>,
}

/// Bytes stored as a hex string in the data file (serialized protobuf messages).
#[derive(Clone, PartialEq, Eq, Deserialize)]
#[serde(try_from = "String")]
pub struct HexBytes(pub Vec<u8>);

impl std::fmt::Debug for HexBytes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HexBytes({} bytes)", self.0.len())
    }
}

impl TryFrom<String> for HexBytes {
    type Error = String;

    fn try_from(hex: String) -> Result<Self, String> {
        fn nibble(c: u8) -> Result<u8, String> {
            match c {
                b'0'..=b'9' => Ok(c - b'0'),
                b'a'..=b'f' => Ok(c - b'a' + 10),
                _ => Err(format!("invalid hex digit {:?}", c as char)),
            }
        }
        let pairs = hex.as_bytes().chunks_exact(2);
        if !pairs.remainder().is_empty() {
            return Err("hex string of odd length".into());
        }
        pairs
            .map(|pair| Ok(nibble(pair[0])? << 4 | nibble(pair[1])?))
            .collect::<Result<_, _>>()
            .map(HexBytes)
    }
}
