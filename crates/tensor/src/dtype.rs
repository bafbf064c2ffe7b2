//! ONNX element types.
//!
//! Codes and names follow `TensorProto.DataType` in
//! [onnx.proto](https://github.com/onnx/onnx/blob/main/onnx/onnx.proto) (IR version 14).

use std::fmt;

/// An ONNX element type (`TensorProto.DataType`, codes 1..=28; `UNDEFINED` is not a type).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(i32)]
pub enum DataType {
    Float = 1,
    Uint8 = 2,
    Int8 = 3,
    Uint16 = 4,
    Int16 = 5,
    Int32 = 6,
    Int64 = 7,
    String = 8,
    Bool = 9,
    Float16 = 10,
    Double = 11,
    Uint32 = 12,
    Uint64 = 13,
    /// Two `f32`, real first.
    Complex64 = 14,
    /// Two `f64`, real first.
    Complex128 = 15,
    Bfloat16 = 16,
    Float8e4m3fn = 17,
    Float8e4m3fnuz = 18,
    Float8e5m2 = 19,
    Float8e5m2fnuz = 20,
    /// 4-bit, packed two per byte, first element in the low nibble.
    Uint4 = 21,
    /// 4-bit two's complement, packed like [`DataType::Uint4`].
    Int4 = 22,
    /// 4-bit float (1 sign, 2 exponent, 1 mantissa), packed like [`DataType::Uint4`].
    Float4e2m1 = 23,
    /// Exponent-only 8-bit scale of the OCP microscaling formats.
    Float8e8m0 = 24,
    /// 2-bit, packed four per byte from the least significant bits.
    Uint2 = 25,
    /// 2-bit two's complement, packed like [`DataType::Uint2`].
    Int2 = 26,
    /// 6-bit float, packed four per three bytes as an LSB-first bit stream.
    Float6e2m3 = 27,
    /// 6-bit float, packed like [`DataType::Float6e2m3`].
    Float6e3m2 = 28,
}

use DataType::*;

impl DataType {
    /// Every element type, in code order.
    pub const ALL: [DataType; 28] = [
        Float,
        Uint8,
        Int8,
        Uint16,
        Int16,
        Int32,
        Int64,
        String,
        Bool,
        Float16,
        Double,
        Uint32,
        Uint64,
        Complex64,
        Complex128,
        Bfloat16,
        Float8e4m3fn,
        Float8e4m3fnuz,
        Float8e5m2,
        Float8e5m2fnuz,
        Uint4,
        Int4,
        Float4e2m1,
        Float8e8m0,
        Uint2,
        Int2,
        Float6e2m3,
        Float6e3m2,
    ];

    /// The type with ONNX code `code`, or `None` for `UNDEFINED` (0) and unknown codes.
    pub fn from_onnx(code: i32) -> Option<DataType> {
        let index = usize::try_from(code).ok()?.checked_sub(1)?;
        Self::ALL.get(index).copied()
    }

    /// The ONNX `TensorProto.DataType` code.
    pub fn onnx_code(self) -> i32 {
        self as i32
    }

    /// ONNX's name for the type, lowercase (`onnx.helper.tensor_dtype_to_string` without the
    /// `TensorProto.` prefix).
    pub fn name(self) -> &'static str {
        match self {
            Float => "float",
            Uint8 => "uint8",
            Int8 => "int8",
            Uint16 => "uint16",
            Int16 => "int16",
            Int32 => "int32",
            Int64 => "int64",
            String => "string",
            Bool => "bool",
            Float16 => "float16",
            Double => "double",
            Uint32 => "uint32",
            Uint64 => "uint64",
            Complex64 => "complex64",
            Complex128 => "complex128",
            Bfloat16 => "bfloat16",
            Float8e4m3fn => "float8e4m3fn",
            Float8e4m3fnuz => "float8e4m3fnuz",
            Float8e5m2 => "float8e5m2",
            Float8e5m2fnuz => "float8e5m2fnuz",
            Uint4 => "uint4",
            Int4 => "int4",
            Float4e2m1 => "float4e2m1",
            Float8e8m0 => "float8e8m0",
            Uint2 => "uint2",
            Int2 => "int2",
            Float6e2m3 => "float6e2m3",
            Float6e3m2 => "float6e3m2",
        }
    }

    /// The type whose [`name`](Self::name) is `name`.
    pub fn from_name(name: &str) -> Option<DataType> {
        Self::ALL.into_iter().find(|t| t.name() == name)
    }

    /// Bits per element (complex counts both parts); `None` for strings.
    pub fn bit_width(self) -> Option<u32> {
        Some(match self {
            String => return None,
            Uint2 | Int2 => 2,
            Uint4 | Int4 | Float4e2m1 => 4,
            Float6e2m3 | Float6e3m2 => 6,
            Uint8 | Int8 | Bool | Float8e4m3fn | Float8e4m3fnuz | Float8e5m2 | Float8e5m2fnuz
            | Float8e8m0 => 8,
            Uint16 | Int16 | Float16 | Bfloat16 => 16,
            Float | Int32 | Uint32 => 32,
            Double | Int64 | Uint64 | Complex64 => 64,
            Complex128 => 128,
        })
    }

    /// Bytes that `num_elements` elements occupy, packed as ONNX `raw_data` packs them
    /// (sub-byte types rounded up to whole bytes); `None` for strings or on overflow.
    pub fn byte_len(self, num_elements: u64) -> Option<u64> {
        let width = u64::from(self.bit_width()?);
        // Every 8 elements take `width` whole bytes; this avoids overflowing a bit count.
        let whole = (num_elements / 8).checked_mul(width)?;
        whole.checked_add((num_elements % 8 * width).div_ceil(8))
    }

    /// Whether elements are narrower than a byte and packed several to a byte.
    pub fn is_packed(self) -> bool {
        self.bit_width().is_some_and(|w| w < 8)
    }

    /// Real floating-point types, including the 16-, 8-, 6- and 4-bit formats.
    pub fn is_float(self) -> bool {
        matches!(
            self,
            Float
                | Double
                | Float16
                | Bfloat16
                | Float8e4m3fn
                | Float8e4m3fnuz
                | Float8e5m2
                | Float8e5m2fnuz
                | Float8e8m0
                | Float4e2m1
                | Float6e2m3
                | Float6e3m2
        )
    }

    /// Integer types (signed and unsigned, any width); `bool` is not an integer.
    pub fn is_int(self) -> bool {
        self.is_signed_int() || self.is_unsigned_int()
    }

    /// Signed integer types.
    pub fn is_signed_int(self) -> bool {
        matches!(self, Int2 | Int4 | Int8 | Int16 | Int32 | Int64)
    }

    /// Unsigned integer types.
    pub fn is_unsigned_int(self) -> bool {
        matches!(self, Uint2 | Uint4 | Uint8 | Uint16 | Uint32 | Uint64)
    }

    /// `complex64` and `complex128`.
    pub fn is_complex(self) -> bool {
        matches!(self, Complex64 | Complex128)
    }

    /// The numpy type string numpy itself writes for this type in a `.npy` header, or `None`
    /// when numpy has no built-in type for it (bfloat16, the float8/6/4 formats, the 2- and
    /// 4-bit integers, strings).
    pub fn npy_descr(self) -> Option<&'static str> {
        Some(match self {
            Float => "<f4",
            Double => "<f8",
            Float16 => "<f2",
            Uint8 => "|u1",
            Int8 => "|i1",
            Uint16 => "<u2",
            Int16 => "<i2",
            Int32 => "<i4",
            Int64 => "<i8",
            Uint32 => "<u4",
            Uint64 => "<u8",
            Bool => "|b1",
            Complex64 => "<c8",
            Complex128 => "<c16",
            _ => return None,
        })
    }

    /// Bytes per element in a `.npy` file: what `ml_dtypes` uses, one byte per element for the
    /// sub-byte types. `None` for strings.
    pub fn npy_item_size(self) -> Option<usize> {
        self.bit_width().map(|w| (w as usize).div_ceil(8))
    }
}

impl fmt::Display for DataType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_match_the_proto_enum() {
        for t in DataType::ALL {
            assert_eq!(DataType::from_onnx(t.onnx_code()), Some(t));
            let proto = onnx_proto::tensor_proto::DataType::try_from(t.onnx_code()).unwrap();
            assert_eq!(proto.as_str_name().to_lowercase(), t.name());
            assert_eq!(DataType::from_name(t.name()), Some(t));
        }
        for code in [0, -1, 29, i32::MAX, i32::MIN] {
            assert_eq!(DataType::from_onnx(code), None);
        }
    }

    #[test]
    fn byte_len_packs_and_checks_overflow() {
        assert_eq!(Int4.byte_len(5), Some(3));
        assert_eq!(Uint2.byte_len(5), Some(2));
        assert_eq!(Float6e2m3.byte_len(5), Some(4));
        assert_eq!(Float6e3m2.byte_len(4), Some(3));
        assert_eq!(Complex128.byte_len(3), Some(48));
        assert_eq!(Float.byte_len(1 << 62), None);
        assert_eq!(Uint8.byte_len(1 << 62), Some(1 << 62));
        assert_eq!(String.byte_len(1), None);
        assert_eq!(Int4.byte_len(u64::MAX), Some(1 << 63));
        assert_eq!(Int16.byte_len(u64::MAX), None);
    }
}
