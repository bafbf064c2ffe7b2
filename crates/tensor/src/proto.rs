//! Conversion between [`Tensor`] and ONNX `TensorProto`.
//!
//! Follows the field comments of `TensorProto` in
//! [onnx.proto](https://github.com/onnx/onnx/blob/main/onnx/onnx.proto) and the behaviour of
//! `onnx.numpy_helper.to_array` (onnx 1.23.2):
//! - `raw_data`: little-endian, sub-byte types packed (4-bit pairs low nibble first, 2-bit quads
//!   from bit 0, 6-bit quads as a 24-bit LSB-first stream); bool one byte per element.
//! - `float_data`: FLOAT, COMPLEX64 (re, im pairs). `double_data`: DOUBLE, COMPLEX128.
//!   `int64_data`: INT64. `uint64_data`: UINT32, UINT64. `string_data`: STRING.
//! - `int32_data`: everything else, one element per entry (16-bit floats as bit patterns),
//!   except 4-bit types (one packed byte of two elements per entry) and 2-bit types (one packed
//!   byte of four elements per entry); float6 is one 6-bit code per entry, bits 6..31 zero.

use bytes::Bytes;
use onnx_proto::tensor_proto::DataLocation;
use onnx_proto::TensorProto;

use crate::tensor::element_count;
use crate::{pack, DataType, Error, Result, Tensor};

impl Tensor {
    /// Decodes a `TensorProto` holding its data inline (in `raw_data` or a typed field).
    ///
    /// External data (`data_location = EXTERNAL`) is refused: the loader resolves it and calls
    /// [`from_proto_with_raw`](Self::from_proto_with_raw). Errors name the tensor.
    pub fn from_proto(proto: &TensorProto) -> Result<Tensor> {
        let name = proto.name.as_deref().unwrap_or_default();
        if proto.data_location == Some(DataLocation::External as i32) {
            return Err(Error::ExternalData.in_tensor(name));
        }
        let raw = proto.raw_data.clone().filter(|r| !r.is_empty());
        decode(proto, raw).map_err(|e| e.in_tensor(name))
    }

    /// Decodes a `TensorProto` whose data is `raw` (the bytes of its external data, typically
    /// a zero-copy slice of a memory map), laid out as `raw_data` would be.
    pub fn from_proto_with_raw(proto: &TensorProto, raw: Bytes) -> Result<Tensor> {
        let name = proto.name.as_deref().unwrap_or_default();
        let result = if proto.raw_data.as_ref().is_some_and(|r| !r.is_empty()) {
            Err(Error::ConflictingData("raw_data, external data".into()))
        } else {
            decode(proto, Some(raw))
        };
        result.map_err(|e| e.in_tensor(name))
    }

    /// Encodes as a `TensorProto` named `name` (left unset if empty, like
    /// `numpy_helper.from_array`): `raw_data` for every type but `string` (`string_data`).
    pub fn to_proto(&self, name: &str) -> TensorProto {
        let mut proto = TensorProto {
            // `element_count` guarantees every dim fits an i64.
            dims: self.shape().iter().map(|&d| d as i64).collect(),
            data_type: Some(self.dtype().onnx_code()),
            name: (!name.is_empty()).then(|| name.to_owned()),
            ..TensorProto::default()
        };
        match self.strings() {
            Some(strings) => proto.string_data = strings.to_vec(),
            None => proto.raw_data = self.bytes().cloned(),
        }
        proto
    }
}

fn decode(proto: &TensorProto, raw: Option<Bytes>) -> Result<Tensor> {
    if proto.segment.is_some() {
        return Err(Error::Segment);
    }
    let code = proto.data_type.unwrap_or(0);
    let dtype = DataType::from_onnx(code).ok_or(Error::UnknownDataType(code))?;
    let shape = proto
        .dims
        .iter()
        .enumerate()
        .map(|(index, &dim)| usize::try_from(dim).map_err(|_| Error::NegativeDim { index, dim }))
        .collect::<Result<Vec<usize>>>()?;
    let n = element_count(dtype, &shape)?;

    let fields = [
        ("raw_data", raw.as_ref().map_or(0, Bytes::len)),
        ("float_data", proto.float_data.len()),
        ("int32_data", proto.int32_data.len()),
        ("string_data", proto.string_data.len()),
        ("int64_data", proto.int64_data.len()),
        ("double_data", proto.double_data.len()),
        ("uint64_data", proto.uint64_data.len()),
    ];
    let mut present = fields.iter().filter(|(_, len)| *len > 0).map(|(f, _)| *f);
    let field = match (present.next(), present.next()) {
        (Some(a), Some(b)) => {
            let rest: Vec<&str> = present.collect();
            return Err(Error::ConflictingData(
                [&[a, b], &rest[..]].concat().join(", "),
            ));
        }
        (Some(field), None) => field,
        // No data anywhere: fine for an empty tensor, otherwise a length error below.
        (None, _) if raw.is_some() => "raw_data",
        (None, _) => typed_field(dtype),
    };

    if field == "raw_data" {
        let raw = raw.unwrap_or_default();
        if dtype == DataType::String {
            return Err(wrong_field("raw_data", dtype));
        }
        return Tensor::from_bytes(dtype, shape.clone(), raw).map_err(|e| match e {
            Error::DataLength {
                expected, actual, ..
            } => length_error("raw_data", dtype, shape, expected, actual, "bytes"),
            e => e,
        });
    }
    if field != typed_field(dtype) {
        return Err(wrong_field(field, dtype));
    }

    // Check the field's length against the shape before allocating anything from it.
    let width = dtype.bit_width();
    let expected = match (dtype, width) {
        (DataType::Complex64 | DataType::Complex128, _) => n.checked_mul(2),
        (_, Some(4)) => Some(n.div_ceil(2)),
        (_, Some(2)) => Some(n.div_ceil(4)),
        _ => Some(n),
    };
    let actual = fields
        .iter()
        .find(|(f, _)| *f == field)
        .map_or(0, |(_, l)| *l);
    if expected != Some(actual) {
        let expected = expected.map_or(u64::MAX, |e| e as u64);
        return Err(length_error(
            field,
            dtype,
            shape,
            expected,
            actual as u64,
            "entries",
        ));
    }

    use DataType::*;
    let bytes: Vec<u8> = match dtype {
        String => return Tensor::from_strings(shape, proto.string_data.clone()),
        Float | Complex64 => le_bytes(&proto.float_data, |v| v.to_le_bytes()),
        Double | Complex128 => le_bytes(&proto.double_data, |v| v.to_le_bytes()),
        Int64 => le_bytes(&proto.int64_data, |v| v.to_le_bytes()),
        Uint64 => le_bytes(&proto.uint64_data, |v| v.to_le_bytes()),
        Uint32 => {
            let v = narrow(
                &proto.uint64_data,
                "uint64_data",
                dtype,
                "0..=4294967295",
                |v| u32::try_from(v).ok(),
            )?;
            le_bytes(&v, |v| v.to_le_bytes())
        }
        Int32 => le_bytes(&proto.int32_data, |v| v.to_le_bytes()),
        Bool => narrow(&proto.int32_data, "int32_data", dtype, "0 or 1", |v| {
            (v == 0 || v == 1).then_some(v as u8)
        })?,
        Float6e2m3 | Float6e3m2 => {
            let codes = narrow(
                &proto.int32_data,
                "int32_data",
                dtype,
                "a 6-bit code",
                |v| u8::try_from(v).ok().filter(|&c| c < 64),
            )?;
            pack::pack(6, &codes)
        }
        // 16-bit types: the value or its bit pattern, signed or not, like onnx's
        // `astype(uint16)` but refusing values that do not fit 16 bits.
        Uint16 | Int16 | Float16 | Bfloat16 => {
            let v = narrow(&proto.int32_data, "int32_data", dtype, "16 bits", |v| {
                (-0x8000..=0xFFFF).contains(&v).then_some(v as u16)
            })?;
            le_bytes(&v, |v| v.to_le_bytes())
        }
        // 8-bit types, one per entry, and 4- / 2-bit types, one packed byte per entry.
        _ => narrow(&proto.int32_data, "int32_data", dtype, "8 bits", |v| {
            (-0x80..=0xFF).contains(&v).then_some(v as u8)
        })?,
    };
    Tensor::from_bytes(dtype, shape, bytes.into())
}

/// The typed field ONNX stores `dtype` in.
fn typed_field(dtype: DataType) -> &'static str {
    use DataType::*;
    match dtype {
        Float | Complex64 => "float_data",
        Double | Complex128 => "double_data",
        Int64 => "int64_data",
        Uint32 | Uint64 => "uint64_data",
        String => "string_data",
        _ => "int32_data",
    }
}

fn wrong_field(field: &'static str, dtype: DataType) -> Error {
    Error::WrongField {
        field,
        dtype,
        expected: typed_field(dtype),
    }
}

fn length_error(
    field: &'static str,
    dtype: DataType,
    shape: Vec<usize>,
    expected: u64,
    actual: u64,
    unit: &'static str,
) -> Error {
    Error::DataLength {
        field,
        dtype,
        shape,
        expected,
        actual,
        unit,
    }
}

fn le_bytes<T: Copy, const N: usize>(values: &[T], to_le: impl Fn(T) -> [u8; N]) -> Vec<u8> {
    values.iter().flat_map(|&v| to_le(v)).collect()
}

/// Converts each entry with `convert`, failing on the first it rejects.
fn narrow<T: Copy + Into<i128>, U>(
    values: &[T],
    field: &'static str,
    dtype: DataType,
    expected: &'static str,
    convert: impl Fn(T) -> Option<U>,
) -> Result<Vec<U>> {
    values
        .iter()
        .enumerate()
        .map(|(index, &v)| {
            convert(v).ok_or(Error::ValueOutOfRange {
                field,
                index,
                value: v.into(),
                dtype,
                expected,
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn proto(dtype: DataType, dims: &[i64]) -> TensorProto {
        TensorProto {
            name: Some("w".into()),
            dims: dims.to_vec(),
            data_type: Some(dtype.onnx_code()),
            ..TensorProto::default()
        }
    }

    fn err(p: &TensorProto) -> String {
        Tensor::from_proto(p).unwrap_err().to_string()
    }

    #[test]
    fn absurd_dims_are_errors_naming_the_tensor() {
        let mut p = proto(DataType::Float, &[1 << 62]);
        p.raw_data = Some(Bytes::from_static(&[0; 4]));
        assert!(
            err(&p).starts_with("tensor 'w': shape [4611686018427387904] of float is too large")
        );

        let mut p = proto(DataType::Uint8, &[1 << 62]);
        p.int32_data = vec![1];
        assert!(
            err(&p).contains("int32_data holds 1 entries but shape"),
            "{}",
            err(&p)
        );

        let p = proto(DataType::Float, &[2, -1]);
        assert_eq!(err(&p), "tensor 'w': dims[1] = -1 is negative");

        let p = proto(DataType::Uint8, &[1 << 40, 1 << 40]);
        assert!(err(&p).contains("too large"));

        let p = proto(DataType::Complex64, &[1 << 62]);
        assert!(err(&p).contains("too large"));
    }

    #[test]
    fn length_mismatches_are_errors() {
        let mut p = proto(DataType::Int32, &[3]);
        p.raw_data = Some(Bytes::from_static(&[0; 11]));
        assert_eq!(
            err(&p),
            "tensor 'w': raw_data holds 11 bytes but shape [3] of int32 needs 12"
        );
        let p = proto(DataType::Float, &[2]);
        assert!(err(&p).contains("float_data holds 0 entries"));
        let mut p = proto(DataType::Int4, &[3]);
        p.int32_data = vec![0x21];
        assert!(err(&p).contains("needs 2"));
    }

    #[test]
    fn wrong_or_conflicting_fields_are_errors() {
        let mut p = proto(DataType::Int64, &[1]);
        p.int32_data = vec![1];
        assert_eq!(
            err(&p),
            "tensor 'w': int32_data cannot hold int64 data; ONNX stores int64 in int64_data"
        );
        p.int64_data = vec![1];
        assert!(err(&p).contains("more than one field (int32_data, int64_data)"));
        let mut p = proto(DataType::String, &[1]);
        p.raw_data = Some(Bytes::from_static(b"a"));
        assert!(err(&p).contains("raw_data cannot hold string"));
    }

    #[test]
    fn out_of_range_typed_values_are_errors() {
        let mut p = proto(DataType::Bool, &[2]);
        p.int32_data = vec![1, 2];
        assert!(err(&p).contains("int32_data[1] = 2 is out of range for bool"));
        let mut p = proto(DataType::Uint32, &[1]);
        p.uint64_data = vec![1 << 32];
        assert!(err(&p).contains("out of range for uint32"));
        let mut p = proto(DataType::Float6e2m3, &[1]);
        p.int32_data = vec![64];
        assert!(err(&p).contains("out of range"));
        // Sign-extended bit patterns are accepted.
        let mut p = proto(DataType::Float16, &[1]);
        p.int32_data = vec![-1024];
        let t = Tensor::from_proto(&p).unwrap();
        assert_eq!(t.bytes().unwrap().as_ref(), 0xFC00u16.to_le_bytes());
    }

    #[test]
    fn external_data_and_segments() {
        let mut p = proto(DataType::Float, &[1]);
        p.data_location = Some(DataLocation::External as i32);
        assert!(err(&p).contains("must be resolved by the model loader"));
        let t = Tensor::from_proto_with_raw(&p, Bytes::from_static(&[0, 0, 0x80, 0x3F])).unwrap();
        assert_eq!(t.to_vec::<f32>().unwrap(), [1.0]);
        assert!(Tensor::from_proto_with_raw(&p, Bytes::new()).is_err());

        let mut p = proto(DataType::Float, &[0]);
        p.segment = Some(Default::default());
        assert!(err(&p).contains("segment"));
    }

    #[test]
    fn empty_and_scalar_tensors() {
        let t = Tensor::from_proto(&proto(DataType::Float, &[0, 3])).unwrap();
        assert_eq!((t.len(), t.shape()), (0, &[0, 3][..]));
        let t = Tensor::from_proto(&proto(DataType::String, &[0])).unwrap();
        assert_eq!(t.strings().unwrap().len(), 0);
        let mut p = proto(DataType::Int64, &[]);
        p.int64_data = vec![-7];
        assert_eq!(
            Tensor::from_proto(&p).unwrap().to_vec::<i64>().unwrap(),
            [-7]
        );
        assert!(Tensor::from_proto(&proto(DataType::Int64, &[])).is_err());
    }

    #[test]
    fn unknown_data_types_are_errors() {
        for code in [None, Some(0), Some(29), Some(-3)] {
            let mut p = proto(DataType::Float, &[]);
            p.data_type = code;
            assert!(err(&p).contains("is not an ONNX element type"));
        }
    }

    #[test]
    fn to_proto_round_trips() {
        let t = Tensor::from_vec(vec![2], vec![1u16, 2]).unwrap();
        let p = t.to_proto("x");
        assert_eq!(p.raw_data.as_deref(), Some(&[1, 0, 2, 0][..]));
        assert_eq!(Tensor::from_proto(&p).unwrap(), t);
        let s = Tensor::from_strings(vec![1], vec![Bytes::from_static(b"hi")]).unwrap();
        assert_eq!(Tensor::from_proto(&s.to_proto("")).unwrap(), s);
    }
}
