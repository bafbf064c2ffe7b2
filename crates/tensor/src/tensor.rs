//! The [`Tensor`] value and the native element types it can be built from and read as.

use std::fmt;

use bytes::Bytes;
use half::{bf16, f16};

use crate::{pack, DataType, Error, Result};

/// A complex number, real part first: the layout of ONNX `complex64` / `complex128`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
#[repr(C)]
pub struct Complex<T> {
    pub re: T,
    pub im: T,
}

mod sealed {
    pub trait Sealed {}
}

/// A Rust type that natively represents an ONNX element type: `f32`, `f64`, `f16`, `bf16`, the
/// 8- to 64-bit integers, `bool`, `Complex<f32>` and `Complex<f64>`. Sealed.
///
/// The float8/6/4 formats and the 2- and 4-bit integers have no Rust type; read and build them
/// as bit patterns with [`Tensor::codes`] and [`Tensor::from_codes`].
pub trait Element: sealed::Sealed + Copy + Send + Sync + 'static {
    /// The ONNX type this Rust type represents.
    const DTYPE: DataType;
    /// Whether every bit pattern of `size_of::<Self>()` bytes is a valid value (not for `bool`).
    #[doc(hidden)]
    const ANY_BITS_VALID: bool = true;
    /// Decodes one element from exactly `size_of::<Self>()` little-endian bytes.
    #[doc(hidden)]
    fn from_le(bytes: &[u8]) -> Self;
    /// Appends the little-endian encoding of `self`.
    #[doc(hidden)]
    fn extend_le(self, out: &mut Vec<u8>);
}

macro_rules! element {
    ($($t:ty => $dtype:ident),* $(,)?) => {$(
        impl sealed::Sealed for $t {}
        impl Element for $t {
            const DTYPE: DataType = DataType::$dtype;
            fn from_le(bytes: &[u8]) -> Self {
                let mut le = [0u8; size_of::<$t>()];
                le.copy_from_slice(bytes);
                <$t>::from_le_bytes(le)
            }
            fn extend_le(self, out: &mut Vec<u8>) {
                out.extend_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}

element!(
    f32 => Float, f64 => Double, f16 => Float16, bf16 => Bfloat16,
    u8 => Uint8, i8 => Int8, u16 => Uint16, i16 => Int16,
    u32 => Uint32, i32 => Int32, u64 => Uint64, i64 => Int64,
);

impl sealed::Sealed for bool {}
impl Element for bool {
    const DTYPE: DataType = DataType::Bool;
    const ANY_BITS_VALID: bool = false;
    fn from_le(bytes: &[u8]) -> Self {
        bytes[0] != 0
    }
    fn extend_le(self, out: &mut Vec<u8>) {
        out.push(u8::from(self));
    }
}

macro_rules! complex {
    ($($t:ty => $dtype:ident),*) => {$(
        impl sealed::Sealed for Complex<$t> {}
        impl Element for Complex<$t> {
            const DTYPE: DataType = DataType::$dtype;
            fn from_le(bytes: &[u8]) -> Self {
                let (re, im) = bytes.split_at(size_of::<$t>());
                Complex { re: <$t>::from_le(re), im: <$t>::from_le(im) }
            }
            fn extend_le(self, out: &mut Vec<u8>) {
                self.re.extend_le(out);
                self.im.extend_le(out);
            }
        }
    )*};
}

complex!(f32 => Complex64, f64 => Complex128);

/// A vector of elements seen as its little-endian bytes (the host is little-endian wherever
/// this is used), so `Bytes` can own it without a copy.
struct VecBytes<T: 'static>(Vec<T>);

impl<T: 'static> Drop for VecBytes<T> {
    fn drop(&mut self) {
        // float32 buffers go back to the pool of reusable buffers.
        if let Some(v) = (&mut self.0 as &mut dyn std::any::Any).downcast_mut::<Vec<f32>>() {
            crate::reuse::give(std::mem::take(v));
        }
    }
}

impl<T: Copy + Send + 'static> AsRef<[u8]> for VecBytes<T> {
    fn as_ref(&self) -> &[u8] {
        // SAFETY: every `T` used here is a sealed `Element` (or u128): plain data without
        // padding, so its memory is `size_of_val` initialised bytes.
        unsafe {
            std::slice::from_raw_parts(self.0.as_ptr().cast::<u8>(), size_of_val(&self.0[..]))
        }
    }
}

#[derive(Clone, PartialEq)]
enum Storage {
    /// Little-endian elements, sub-byte types packed as in ONNX `raw_data`.
    Bytes(Bytes),
    /// UTF-8 (by convention, not checked) strings.
    Strings(Vec<Bytes>),
}

/// A dense tensor value: element type, shape (row-major) and data.
///
/// Numeric data is kept as little-endian bytes in a [`Bytes`], exactly as ONNX `raw_data` lays
/// it out (sub-byte types packed), so cloning is cheap and a tensor can be a zero-copy view of a
/// memory-mapped initializer. Strings are a `Vec<Bytes>`.
#[derive(Clone, PartialEq)]
pub struct Tensor {
    dtype: DataType,
    shape: Vec<usize>,
    len: usize,
    storage: Storage,
}

/// Number of elements of `shape`, checked: every dim must fit ONNX's `i64` and the product
/// must not overflow.
pub(crate) fn element_count(dtype: DataType, shape: &[usize]) -> Result<usize> {
    let overflow = || Error::ShapeOverflow {
        dtype,
        shape: shape.iter().map(|&d| d as u64).collect(),
    };
    let mut count: u64 = 1;
    for (index, &dim) in shape.iter().enumerate() {
        let dim = dim as u64;
        if dim > i64::MAX as u64 {
            return Err(Error::DimTooLarge { index, dim });
        }
        count = count.checked_mul(dim).ok_or_else(overflow)?;
    }
    // The byte size must be representable too, even before any data is looked at.
    if dtype != DataType::String {
        dtype.byte_len(count).ok_or_else(overflow)?;
    }
    usize::try_from(count).map_err(|_| overflow())
}

impl Tensor {
    /// A numeric tensor over little-endian `data` laid out as ONNX `raw_data` (sub-byte types
    /// packed). Fails if `data` has the wrong length for `shape` or `dtype` is `string`.
    pub fn from_bytes(dtype: DataType, shape: Vec<usize>, data: Bytes) -> Result<Tensor> {
        let len = element_count(dtype, &shape)?;
        let Some(expected) = dtype.byte_len(len as u64) else {
            return Err(Error::TypeMismatch {
                expected: "numeric",
                actual: dtype,
            });
        };
        if data.len() as u64 != expected {
            return Err(Error::DataLength {
                field: "data",
                dtype,
                shape,
                expected,
                actual: data.len() as u64,
                unit: "bytes",
            });
        }
        Ok(Tensor {
            dtype,
            shape,
            len,
            storage: Storage::Bytes(data),
        })
    }

    /// A `string` tensor; `strings` must have one entry per element.
    pub fn from_strings(shape: Vec<usize>, strings: Vec<Bytes>) -> Result<Tensor> {
        let len = element_count(DataType::String, &shape)?;
        if strings.len() != len {
            return Err(Error::DataLength {
                field: "data",
                dtype: DataType::String,
                shape,
                expected: len as u64,
                actual: strings.len() as u64,
                unit: "strings",
            });
        }
        Ok(Tensor {
            dtype: DataType::String,
            shape,
            len,
            storage: Storage::Strings(strings),
        })
    }

    /// A tensor of `T::DTYPE` from row-major `values`, one per element of `shape`. On a
    /// little-endian host the vector becomes the tensor's storage as it is (no copy), so the
    /// data stays aligned for [`as_slice`](Self::as_slice).
    pub fn from_vec<T: Element>(shape: Vec<usize>, values: Vec<T>) -> Result<Tensor> {
        if cfg!(target_endian = "big") {
            return Self::from_slice(shape, &values);
        }
        let len = element_count(T::DTYPE, &shape)?;
        if values.len() != len {
            return Self::from_slice(shape, &values);
        }
        Ok(Tensor {
            dtype: T::DTYPE,
            shape,
            len,
            storage: Storage::Bytes(Bytes::from_owner(VecBytes(values))),
        })
    }

    /// The same tensor with its data copied into freshly allocated (so suitably aligned)
    /// storage when [`as_slice`](Self::as_slice) could not borrow it; a cheap clone otherwise.
    /// Engines call this once on initializers that came from a memory map at odd offsets.
    pub fn aligned(&self) -> Tensor {
        match &self.storage {
            Storage::Bytes(b) if b.as_ptr().align_offset(16) != 0 && !b.is_empty() => {
                let words = b.len().div_ceil(16);
                let mut buf = vec![0u128; words];
                // SAFETY: `buf` holds at least `b.len()` bytes; u128 has no invalid bit patterns.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        b.as_ptr(),
                        buf.as_mut_ptr().cast::<u8>(),
                        b.len(),
                    )
                };
                let n = b.len();
                let bytes = Bytes::from_owner(VecBytes(buf)).slice(0..n);
                Tensor {
                    storage: Storage::Bytes(bytes),
                    ..self.clone()
                }
            }
            _ => self.clone(),
        }
    }

    /// Like [`from_vec`](Self::from_vec), copying from a slice.
    pub fn from_slice<T: Element>(shape: Vec<usize>, values: &[T]) -> Result<Tensor> {
        let len = element_count(T::DTYPE, &shape)?;
        if values.len() != len {
            return Err(Error::DataLength {
                field: "data",
                dtype: T::DTYPE,
                shape,
                expected: len as u64,
                actual: values.len() as u64,
                unit: "elements",
            });
        }
        let mut data = Vec::with_capacity(size_of_val(values));
        for &v in values {
            v.extend_le(&mut data);
        }
        Ok(Tensor {
            dtype: T::DTYPE,
            shape,
            len,
            storage: Storage::Bytes(data.into()),
        })
    }

    /// A rank-0 tensor holding `value`.
    pub fn scalar<T: Element>(value: T) -> Tensor {
        let mut data = Vec::with_capacity(size_of::<T>());
        value.extend_le(&mut data);
        Tensor {
            dtype: T::DTYPE,
            shape: Vec::new(),
            len: 1,
            storage: Storage::Bytes(data.into()),
        }
    }

    /// A tensor of a type at most 8 bits wide (the float8/6/4 formats, the 2-, 4- and 8-bit
    /// integers, bool) from one bit pattern per element; only the low `bit_width` bits of each
    /// code are used (so `ml_dtypes`' one-byte-per-element arrays can be passed as they are).
    pub fn from_codes(dtype: DataType, shape: Vec<usize>, codes: &[u8]) -> Result<Tensor> {
        let width = match dtype.bit_width() {
            Some(w) if w <= 8 => w,
            _ => {
                return Err(Error::TypeMismatch {
                    expected: "type at most 8 bits wide",
                    actual: dtype,
                })
            }
        };
        let len = element_count(dtype, &shape)?;
        if codes.len() != len {
            return Err(Error::DataLength {
                field: "codes",
                dtype,
                shape,
                expected: len as u64,
                actual: codes.len() as u64,
                unit: "elements",
            });
        }
        Ok(Tensor {
            dtype,
            shape,
            len,
            storage: Storage::Bytes(pack::pack(width, codes).into()),
        })
    }

    /// The element type.
    pub fn dtype(&self) -> DataType {
        self.dtype
    }

    /// The dimensions, outermost first.
    pub fn shape(&self) -> &[usize] {
        &self.shape
    }

    /// Number of dimensions.
    pub fn rank(&self) -> usize {
        self.shape.len()
    }

    /// Number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the tensor has no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Bytes of data: the packed little-endian size for numeric types, the sum of the string
    /// lengths for `string`.
    pub fn byte_len(&self) -> usize {
        match &self.storage {
            Storage::Bytes(b) => b.len(),
            Storage::Strings(s) => s.iter().map(Bytes::len).sum(),
        }
    }

    /// The little-endian (packed, for sub-byte types) data; `None` for `string` tensors.
    pub fn bytes(&self) -> Option<&Bytes> {
        match &self.storage {
            Storage::Bytes(b) => Some(b),
            Storage::Strings(_) => None,
        }
    }

    /// The strings of a `string` tensor; `None` otherwise.
    pub fn strings(&self) -> Option<&[Bytes]> {
        match &self.storage {
            Storage::Strings(s) => Some(s),
            Storage::Bytes(_) => None,
        }
    }

    /// The same data with another shape of the same element count (no copy).
    pub fn reshape(&self, shape: Vec<usize>) -> Result<Tensor> {
        let len = element_count(self.dtype, &shape)?;
        if len != self.len {
            return Err(Error::DataLength {
                field: "reshape source",
                dtype: self.dtype,
                shape,
                expected: len as u64,
                actual: self.len as u64,
                unit: "elements",
            });
        }
        Ok(Tensor {
            shape,
            ..self.clone()
        })
    }

    /// The elements as `T`, copied (works whatever the alignment of the underlying bytes).
    pub fn to_vec<T: Element>(&self) -> Result<Vec<T>> {
        if let Some(s) = self.as_slice::<T>() {
            return Ok(s.to_vec());
        }
        let bytes = self.typed_bytes::<T>()?;
        Ok(bytes.chunks_exact(size_of::<T>()).map(T::from_le).collect())
    }

    /// The elements as a borrowed `&[T]`, when the bytes are suitably aligned and the host is
    /// little-endian (and, for `bool`, every byte is 0 or 1). `None` otherwise, including on a
    /// type mismatch; fall back to [`to_vec`](Self::to_vec).
    pub fn as_slice<T: Element>(&self) -> Option<&[T]> {
        let bytes = self.typed_bytes::<T>().ok()?;
        if cfg!(target_endian = "big") || (!T::ANY_BITS_VALID && bytes.iter().any(|&b| b > 1)) {
            return None;
        }
        // SAFETY: `T` is one of the sealed `Element` types: primitive numbers, `half` floats
        // (`repr(transparent)` over `u16`), `bool` (its bytes were just checked to be 0 or 1)
        // and `repr(C)` `Complex` of two equal floats (no padding). Every checked bit pattern is
        // a valid `T`, the host is little-endian like the data, and `align_to` only returns the
        // aligned middle part, which we accept only if it covers everything.
        let (head, body, tail) = unsafe { bytes.align_to::<T>() };
        (head.is_empty() && tail.is_empty()).then_some(body)
    }

    /// One bit pattern per element, for types at most 8 bits wide (unpacking sub-byte types).
    pub fn codes(&self) -> Result<Vec<u8>> {
        match (self.dtype.bit_width(), &self.storage) {
            (Some(w), Storage::Bytes(b)) if w <= 8 => Ok(pack::unpack(w, b, self.len)),
            _ => Err(Error::TypeMismatch {
                expected: "type at most 8 bits wide",
                actual: self.dtype,
            }),
        }
    }

    fn typed_bytes<T: Element>(&self) -> Result<&[u8]> {
        match &self.storage {
            Storage::Bytes(b) if self.dtype == T::DTYPE => Ok(b),
            _ => Err(Error::TypeMismatch {
                expected: T::DTYPE.name(),
                actual: self.dtype,
            }),
        }
    }
}

impl fmt::Debug for Tensor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Tensor")
            .field("dtype", &self.dtype)
            .field("shape", &self.shape)
            .field("byte_len", &self.byte_len())
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn typed_round_trip() {
        let t = Tensor::from_vec(vec![2, 2], vec![1.0f32, -2.5, 3.0, f32::INFINITY]).unwrap();
        assert_eq!(t.len(), 4);
        assert_eq!(t.byte_len(), 16);
        assert_eq!(t.to_vec::<f32>().unwrap(), [1.0, -2.5, 3.0, f32::INFINITY]);
        assert!(t.to_vec::<f64>().is_err());
        assert!(t.as_slice::<i32>().is_none());

        let c = [Complex {
            re: 1.0f64,
            im: -1.0,
        }];
        let t = Tensor::from_slice(vec![1], &c).unwrap();
        assert_eq!(t.dtype(), DataType::Complex128);
        assert_eq!(t.to_vec::<Complex<f64>>().unwrap(), c);

        let t = Tensor::from_vec(vec![3], vec![true, false, true]).unwrap();
        assert_eq!(t.bytes().unwrap().as_ref(), [1, 0, 1]);
        assert_eq!(t.as_slice::<bool>(), Some(&[true, false, true][..]));

        let h = [f16::from_f32(0.5), f16::NEG_INFINITY];
        assert_eq!(
            Tensor::from_slice(vec![2], &h)
                .unwrap()
                .to_vec::<f16>()
                .unwrap(),
            h
        );
        let s = Tensor::scalar(bf16::from_f32(2.0));
        assert_eq!((s.rank(), s.len()), (0, 1));
        assert_eq!(s.bytes().unwrap().as_ref(), [0x00, 0x40]);
    }

    #[test]
    fn unaligned_bytes_are_copied_not_borrowed() {
        let backing = Bytes::from(vec![0u8; 17]);
        let t = Tensor::from_bytes(DataType::Float, vec![4], backing.slice(1..)).unwrap();
        assert!(t.as_slice::<f32>().is_none());
        assert_eq!(t.to_vec::<f32>().unwrap(), [0.0; 4]);
    }

    #[test]
    fn invalid_bools_are_not_borrowed() {
        let t = Tensor::from_bytes(DataType::Bool, vec![2], Bytes::from_static(&[1, 2])).unwrap();
        assert!(t.as_slice::<bool>().is_none());
        assert_eq!(t.to_vec::<bool>().unwrap(), [true, true]);
    }

    #[test]
    fn codes_pack_sub_byte_types() {
        let t = Tensor::from_codes(DataType::Int4, vec![3], &[0xFF, 0x08, 0x07]).unwrap();
        assert_eq!(t.bytes().unwrap().as_ref(), [0x8F, 0x07]);
        assert_eq!(t.codes().unwrap(), [0x0F, 0x08, 0x07]);
        assert!(Tensor::from_codes(DataType::Float, vec![1], &[0]).is_err());
        assert!(Tensor::from_codes(DataType::Uint2, vec![2], &[0]).is_err());
    }

    #[test]
    fn absurd_shapes_are_errors() {
        let huge = 1usize << 62;
        assert!(matches!(
            Tensor::from_bytes(DataType::Float, vec![huge], Bytes::new()),
            Err(Error::ShapeOverflow { .. })
        ));
        assert!(matches!(
            Tensor::from_bytes(DataType::Uint8, vec![huge], Bytes::new()),
            Err(Error::DataLength { .. })
        ));
        assert!(matches!(
            Tensor::from_bytes(DataType::Uint8, vec![1 << 32, 1 << 32], Bytes::new()),
            Err(Error::ShapeOverflow { .. })
        ));
        assert!(matches!(
            Tensor::from_bytes(DataType::Uint8, vec![0, usize::MAX], Bytes::new()),
            Err(Error::DimTooLarge { index: 1, .. })
        ));
        assert!(Tensor::from_vec::<u8>(vec![huge], vec![]).is_err());
        assert!(Tensor::from_strings(vec![huge], vec![]).is_err());
        assert!(Tensor::from_bytes(DataType::String, vec![], Bytes::new()).is_err());
    }

    #[test]
    fn reshape_keeps_data() {
        let t = Tensor::from_vec(vec![2, 3], (0..6).collect::<Vec<i64>>()).unwrap();
        let r = t.reshape(vec![3, 2]).unwrap();
        assert_eq!(r.shape(), [3, 2]);
        assert_eq!(r.bytes().unwrap().as_ptr(), t.bytes().unwrap().as_ptr());
        assert!(t.reshape(vec![4]).is_err());
    }
}
