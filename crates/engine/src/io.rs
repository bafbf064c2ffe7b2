//! Reading and writing runtime values as ONNX protobuf files (`TensorProto`, `SequenceProto`,
//! `OptionalProto`), the layout of ONNX test data (`input_0.pb`, `output_0.pb`, ...).

use crate::Value;
use onnx_ir::ValueType;
use onnx_proto::{Message, OptionalProto, SequenceProto, TensorProto};
use std::path::Path;
use tensor::{DataType, Tensor};

/// `SequenceProto.DataType` / `OptionalProto.DataType` codes.
const ELEM_TENSOR: i32 = 1;
const ELEM_SEQUENCE: i32 = 3;
const ELEM_OPTIONAL: i32 = 5;

/// Decodes a `.pb` file holding a value of the declared type `ty` (a `TensorProto` unless the
/// type is a sequence or optional).
pub fn read_pb(path: &Path, ty: &ValueType) -> Result<Value, String> {
    let bytes = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let bytes = bytes::Bytes::from(bytes);
    let fail = |what: &str, e: String| format!("{}: not a valid {what}: {e}", path.display());
    match ty {
        ValueType::Sequence(_) => {
            let s =
                SequenceProto::decode(bytes).map_err(|e| fail("SequenceProto", e.to_string()))?;
            sequence_from_proto(&s).map_err(|e| fail("SequenceProto", e))
        }
        ValueType::Optional(_) => {
            let o =
                OptionalProto::decode(bytes).map_err(|e| fail("OptionalProto", e.to_string()))?;
            optional_from_proto(&o).map_err(|e| fail("OptionalProto", e))
        }
        _ => {
            let (_, t) =
                tensor::pb::decode(bytes).map_err(|e| fail("TensorProto", e.to_string()))?;
            Ok(Value::Tensor(t))
        }
    }
}

fn tensor_from(t: &TensorProto) -> Result<Tensor, String> {
    Tensor::from_proto(t).map_err(|e| e.to_string())
}

fn sequence_from_proto(s: &SequenceProto) -> Result<Value, String> {
    let items = s
        .tensor_values
        .iter()
        .map(tensor_from)
        .collect::<Result<Vec<_>, _>>()?;
    if !s.sequence_values.is_empty() || !s.map_values.is_empty() || !s.optional_values.is_empty() {
        return Err("only sequences of tensors are supported".into());
    }
    let elem_type = items.first().map_or(DataType::Float, |t| t.dtype());
    Ok(Value::Sequence { elem_type, items })
}

fn optional_from_proto(o: &OptionalProto) -> Result<Value, String> {
    if let Some(t) = &o.tensor_value {
        return Ok(Value::Optional(Some(Box::new(Value::Tensor(tensor_from(
            t,
        )?)))));
    }
    if let Some(s) = &o.sequence_value {
        return Ok(Value::Optional(Some(Box::new(sequence_from_proto(s)?))));
    }
    Ok(Value::Optional(None))
}

fn sequence_to_proto(name: &str, elem_type: DataType, items: &[Tensor]) -> SequenceProto {
    let _ = elem_type;
    SequenceProto {
        name: Some(name.to_string()),
        elem_type: Some(ELEM_TENSOR),
        tensor_values: items.iter().map(|t| t.to_proto("")).collect(),
        ..Default::default()
    }
}

/// Encodes `v` as the protobuf message its kind calls for, named `name`.
pub fn encode_pb(v: &Value, name: &str) -> Vec<u8> {
    match v {
        Value::Tensor(t) => t.to_proto(name).encode_to_vec(),
        Value::Sequence { elem_type, items } => {
            sequence_to_proto(name, *elem_type, items).encode_to_vec()
        }
        Value::Optional(inner) => {
            let mut o = OptionalProto {
                name: Some(name.to_string()),
                ..Default::default()
            };
            match inner.as_deref() {
                None => {}
                Some(Value::Tensor(t)) => {
                    o.elem_type = Some(ELEM_TENSOR);
                    o.tensor_value = Some(t.to_proto(""));
                }
                Some(Value::Sequence { elem_type, items }) => {
                    o.elem_type = Some(ELEM_SEQUENCE);
                    o.sequence_value = Some(sequence_to_proto("", *elem_type, items));
                }
                Some(Value::Optional(_)) => {
                    o.elem_type = Some(ELEM_OPTIONAL);
                }
            }
            o.encode_to_vec()
        }
    }
}

/// Writes `v` to `path` as a `.pb` file (atomically).
pub fn write_pb(path: &Path, v: &Value, name: &str) -> Result<(), String> {
    tensor::write_file(path, &encode_pb(v, name)).map_err(|e| e.to_string())
}

/// Reads `input_<i>.pb` files of an ONNX test-data directory, the i-th bound to the i-th of
/// `specs` (graph inputs without initializers first, as [`crate::Session::inputs`] orders them).
pub fn read_input_dir(
    dir: &Path,
    specs: &[crate::InputSpec],
) -> Result<Vec<(String, Value)>, String> {
    if !dir.is_dir() {
        return Err(format!("{}: not a directory", dir.display()));
    }
    let mut out = Vec::new();
    for (i, spec) in specs.iter().enumerate() {
        let path = dir.join(format!("input_{i}.pb"));
        if path.exists() {
            let v =
                read_pb(&path, &spec.ty.0).map_err(|e| format!("input '{}': {e}", spec.name))?;
            out.push((spec.name.clone(), v));
        }
    }
    if dir.join(format!("input_{}.pb", specs.len())).exists() {
        return Err(format!(
            "{}: holds more input files than the model has inputs ({})",
            dir.display(),
            specs.len()
        ));
    }
    Ok(out)
}

/// Reads the `output_<i>.pb` files of a test-data directory for outputs of the declared types.
pub fn read_output_dir(
    dir: &Path,
    outputs: &[(String, ValueType)],
) -> Result<Vec<Option<Value>>, String> {
    outputs
        .iter()
        .enumerate()
        .map(|(i, (_, ty))| {
            let p = dir.join(format!("output_{i}.pb"));
            if p.exists() {
                read_pb(&p, ty).map(Some)
            } else {
                Ok(None)
            }
        })
        .collect()
}
