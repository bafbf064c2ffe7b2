//! The model's inputs and the check of a given value against its declared type.

use crate::{EngineError, Value};
use onnx_ir::{Dim, ElemType, ValueType};
use onnx_proto::GraphProto;

/// One graph input as a caller sees it.
#[derive(Debug, Clone)]
pub struct InputSpec {
    pub name: String,
    pub ty: TypeShown,
    /// The input has an initializer of the same name: feeding it is optional.
    pub has_initializer: bool,
}

/// A declared type that prints the ONNX way with its shape: `tensor(float)[batch,3,224,224]`.
#[derive(Debug, Clone)]
pub struct TypeShown(pub ValueType);

impl std::fmt::Display for TypeShown {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}", self.0.onnx_type_string())?;
        if let Some(shape) = self.0.shape() {
            let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
            write!(f, "[{}]", dims.join(","))?;
        }
        Ok(())
    }
}

pub(crate) fn specs(g: &GraphProto) -> Vec<InputSpec> {
    let inits: std::collections::HashSet<&str> = g.initializer.iter().map(|t| t.name()).collect();
    let mut v: Vec<InputSpec> = g
        .input
        .iter()
        .map(|i| InputSpec {
            name: i.name().to_string(),
            ty: TypeShown(ValueType::from_proto(i.r#type.as_ref())),
            has_initializer: inits.contains(i.name()),
        })
        .collect();
    v.sort_by_key(|s| s.has_initializer);
    v
}

/// Checks `v` against the declared type of `spec`: kind, element type, rank and fixed dims.
pub fn check_input(spec: &InputSpec, v: &Value) -> Result<(), EngineError> {
    let fail = |reason: String| EngineError::Input {
        name: spec.name.clone(),
        reason,
    };
    match (&spec.ty.0, v) {
        (ValueType::Tensor { elem, shape }, Value::Tensor(t)) => {
            if let ElemType::Known(d) = elem {
                if *d != t.dtype() {
                    return Err(fail(format!(
                        "expected element type {}, got {} (shape {:?})",
                        d,
                        t.dtype(),
                        t.shape()
                    )));
                }
            }
            if let Some(dims) = shape {
                if dims.len() != t.rank() {
                    return Err(fail(format!(
                        "expected rank {} ({}), got rank {} (shape {:?})",
                        dims.len(),
                        spec.ty,
                        t.rank(),
                        t.shape()
                    )));
                }
                for (i, (d, &n)) in dims.iter().zip(t.shape()).enumerate() {
                    if let Dim::Fixed(f) = d {
                        if *f != n as i64 {
                            return Err(fail(format!(
                                "dim {i} must be {f} ({}), got {n} (shape {:?})",
                                spec.ty,
                                t.shape()
                            )));
                        }
                    }
                }
            }
            Ok(())
        }
        (ValueType::Sequence(_), Value::Sequence { .. })
        | (ValueType::Optional(_), Value::Optional(_))
        | (ValueType::Unset, _) => Ok(()),
        (ValueType::Optional(inner), other) => check_input(
            &InputSpec {
                ty: TypeShown((**inner).clone()),
                ..spec.clone()
            },
            other,
        ),
        (ty, v) => Err(fail(format!(
            "expected {}, got {}",
            ty.onnx_type_string(),
            v.describe()
        ))),
    }
}
