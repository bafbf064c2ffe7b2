//! `.npy` files ([format spec](https://numpy.org/doc/stable/reference/generated/numpy.lib.format.html)).
//!
//! Reading accepts format versions 1.0, 2.0 and 3.0, C or Fortran order (Fortran data is
//! transposed into row-major order) and little- or big-endian data (big-endian is byte-swapped).
//! Little-endian C-order data of types at least a byte wide is not copied: the tensor is a view
//! of the input [`Bytes`].
//!
//! Types numpy lacks: `ml_dtypes` saves bfloat16, the float8/6/4 formats and the 2- and 4-bit
//! integers as raw void (`'<V2'`, `'<V1'`; float8e5m2 even as `'<f1'`), one element per 1 or 2
//! bytes, which does not say which type it was. [`read`] refuses those with an error pointing to
//! [`read_as`], which takes the type explicitly and reinterprets the element bytes as that type
//! (any item of the right size is accepted, e.g. bfloat16 bits saved as `'<u2'`). [`write()`]
//! writes those types the same way (`'<V2'` / `'<V1'`, sub-byte types one code per byte, as
//! `ml_dtypes` does), so numpy reads them with `np.load(f).view(ml_dtypes.bfloat16)`.
//! Strings (`'<U'`, `'|S'`, pickled `'|O'`) are not supported either way.

use std::borrow::Cow;
use std::io::Write;
use std::path::Path;

use bytes::Bytes;

use crate::tensor::element_count;
use crate::{fsutil, DataType, Error, Result, Tensor};

const MAGIC: &[u8] = b"\x93NUMPY";

/// Reads a `.npy` file of a type numpy knows (see the [module docs](self) for the others).
pub fn read(path: impl AsRef<Path>) -> Result<Tensor> {
    let path = path.as_ref();
    decode(fsutil::read(path)?, None).map_err(|e| e.in_file(path))
}

/// Reads a `.npy` file whose elements are `dtype`, whatever numpy type the header names, as
/// long as the item size matches (`ml_dtypes` types saved as void, or bit patterns saved as
/// unsigned integers).
pub fn read_as(path: impl AsRef<Path>, dtype: DataType) -> Result<Tensor> {
    let path = path.as_ref();
    decode(fsutil::read(path)?, Some(dtype)).map_err(|e| e.in_file(path))
}

/// Writes `tensor` as a version 1.0 (2.0 if the header needs it) `.npy` file, atomically.
pub fn write(path: impl AsRef<Path>, tensor: &Tensor) -> Result<()> {
    let path = path.as_ref();
    let (header, data) = encode_parts(tensor).map_err(|e| e.in_file(path))?;
    fsutil::write_atomic(path, |out| {
        out.write_all(&header)?;
        out.write_all(&data)
    })
}

/// Decodes a `.npy` image; `dtype` overrides the header's type as in [`read_as`].
pub fn decode(file: Bytes, dtype: Option<DataType>) -> Result<Tensor> {
    let (header, data_start) = split_header(&file)?;
    let header = parse_header(&header)?;
    let item = header.item_size;
    let dtype = match dtype {
        Some(t) if t.npy_item_size() == Some(item) && header.kind != Kind::Text => t,
        Some(t) => {
            return Err(Error::NpyUnsupported(format!(
                "descr '{}' cannot be read as {t}, whose items are {} bytes",
                header.descr,
                t.npy_item_size()
                    .map_or("variable".into(), |s| s.to_string()),
            )))
        }
        None => header.dtype()?,
    };

    let data = file.slice(data_start..);
    let n = element_count(dtype, &header.shape)?;
    let needed = (n as u64).checked_mul(item as u64);
    if needed != Some(data.len() as u64) {
        return Err(Error::DataLength {
            field: ".npy data",
            dtype,
            shape: header.shape,
            expected: needed.unwrap_or(u64::MAX),
            actual: data.len() as u64,
            unit: "bytes",
        });
    }

    let swap = header.big_endian && item > 1;
    let transpose = header.fortran_order && header.shape.len() > 1;
    let width = dtype.bit_width().unwrap_or(8);
    if !swap && !transpose && width >= 8 {
        return Tensor::from_bytes(dtype, header.shape, data);
    }
    let mut bytes = data.to_vec();
    if swap {
        // Complex numbers swap each part.
        let part = if dtype.is_complex() { item / 2 } else { item };
        bytes.chunks_exact_mut(part).for_each(<[u8]>::reverse);
    }
    if transpose {
        bytes = fortran_to_c(&bytes, &header.shape, item);
    }
    if width < 8 {
        return Tensor::from_codes(dtype, header.shape, &bytes);
    }
    Tensor::from_bytes(dtype, header.shape, bytes.into())
}

/// Encodes `tensor` as a `.npy` image.
pub fn encode(tensor: &Tensor) -> Result<Vec<u8>> {
    let (mut header, data) = encode_parts(tensor)?;
    header.extend_from_slice(&data);
    Ok(header)
}

/// The header (magic to newline) and the data of `tensor` as a `.npy` image.
pub(crate) fn encode_parts(tensor: &Tensor) -> Result<(Vec<u8>, Cow<'_, [u8]>)> {
    let dtype = tensor.dtype();
    let (descr, bytes) = match (dtype.npy_descr(), dtype.npy_item_size(), tensor.bytes()) {
        (Some(descr), _, Some(bytes)) => (descr, bytes),
        (None, Some(2), Some(bytes)) => ("<V2", bytes),
        (None, Some(1), Some(bytes)) => ("<V1", bytes),
        _ => {
            return Err(Error::NpyUnsupported(format!(
                "{dtype} tensors cannot be written to .npy"
            )))
        }
    };
    let data = if dtype.is_packed() {
        Cow::Owned(tensor.codes()?)
    } else {
        Cow::Borrowed(bytes.as_ref())
    };
    let shape = match tensor.shape() {
        [d] => format!("({d},)"),
        dims => {
            let dims: Vec<String> = dims.iter().map(usize::to_string).collect();
            format!("({})", dims.join(", "))
        }
    };
    let dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}");
    // Pad with spaces and a newline so the data starts at a multiple of 64, as numpy does.
    let padded = |prefix: usize| (prefix + dict.len() + 1).next_multiple_of(64);
    let (version, prefix) = if padded(10) - 10 <= usize::from(u16::MAX) {
        (1, 10)
    } else {
        (2, 12)
    };
    let total = padded(prefix);
    let header_len = total - prefix;
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(MAGIC);
    out.extend_from_slice(&[version, 0]);
    if version == 1 {
        out.extend_from_slice(&(header_len as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&(header_len as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out.resize(total - 1, b' ');
    out.push(b'\n');
    Ok((out, data))
}

/// Returns the header dictionary text and the offset of the data.
fn split_header(file: &[u8]) -> Result<(String, usize)> {
    let truncated = || Error::Npy("file is truncated inside the header".into());
    if !file.starts_with(MAGIC) {
        return Err(Error::Npy("missing the \\x93NUMPY magic string".into()));
    }
    let version = file.get(6..8).ok_or_else(truncated)?;
    let (len_bytes, start) = match version[0] {
        1 => (2, 10),
        2 | 3 => (4, 12),
        _ => {
            return Err(Error::NpyUnsupported(format!(
                "format version {}.{} (expected 1.0, 2.0 or 3.0)",
                version[0], version[1]
            )))
        }
    };
    let len = file.get(8..8 + len_bytes).ok_or_else(truncated)?;
    let len = len
        .iter()
        .rev()
        .fold(0usize, |acc, &b| acc << 8 | usize::from(b));
    let text = file.get(start..start + len).ok_or_else(truncated)?;
    let text = if version[0] == 3 {
        std::str::from_utf8(text)
            .map_err(|_| Error::Npy("header is not UTF-8".into()))?
            .to_owned()
    } else {
        text.iter().map(|&b| char::from(b)).collect() // latin-1
    };
    Ok((text, start + len))
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Bool,
    Int,
    Uint,
    Float,
    Complex,
    Void,
    Text,
}

#[derive(Debug)]
struct Header {
    descr: String,
    kind: Kind,
    item_size: usize,
    big_endian: bool,
    fortran_order: bool,
    shape: Vec<usize>,
}

impl Header {
    /// The ONNX type numpy's type corresponds to.
    fn dtype(&self) -> Result<DataType> {
        use DataType::*;
        Ok(match (self.kind, self.item_size) {
            (Kind::Bool, 1) => Bool,
            (Kind::Int, 1) => Int8,
            (Kind::Int, 2) => Int16,
            (Kind::Int, 4) => Int32,
            (Kind::Int, 8) => Int64,
            (Kind::Uint, 1) => Uint8,
            (Kind::Uint, 2) => Uint16,
            (Kind::Uint, 4) => Uint32,
            (Kind::Uint, 8) => Uint64,
            (Kind::Float, 2) => Float16,
            (Kind::Float, 4) => Float,
            (Kind::Float, 8) => Double,
            (Kind::Complex, 8) => Complex64,
            (Kind::Complex, 16) => Complex128,
            (Kind::Void, _) | (Kind::Float, 1) => {
                return Err(Error::NpyUnsupported(format!(
                    "descr '{}' is raw bytes (how ml_dtypes saves bfloat16, float8 and \
                     sub-byte types) and does not say which type; use tensor::npy::read_as \
                     with the intended type",
                    self.descr
                )))
            }
            (Kind::Text, _) => {
                return Err(Error::NpyUnsupported(format!(
                    "descr '{}': string and object arrays are not supported",
                    self.descr
                )))
            }
            _ => {
                return Err(Error::NpyUnsupported(format!(
                    "descr '{}' has no ONNX element type",
                    self.descr
                )))
            }
        })
    }
}

fn parse_header(text: &str) -> Result<Header> {
    let bad = |what: &str| Error::Npy(format!("header {what}: {text:?}"));
    let Lit::Dict(entries) = Parser::new(text).parse_all().map_err(|e| bad(&e))? else {
        return Err(bad("is not a dictionary"));
    };
    let mut keys: Vec<&str> = entries.iter().map(|(k, _)| k.as_str()).collect();
    keys.sort_unstable();
    if keys != ["descr", "fortran_order", "shape"] {
        return Err(bad(
            "must have exactly the keys 'descr', 'fortran_order', 'shape'",
        ));
    }
    let get = |key: &str| entries.iter().find(|(k, _)| k == key).map(|(_, v)| v);
    let Some(Lit::Str(descr)) = get("descr") else {
        return Err(Error::NpyUnsupported(format!(
            "structured dtypes are not supported: {text:?}"
        )));
    };
    let Some(&Lit::Bool(fortran_order)) = get("fortran_order") else {
        return Err(bad("has a 'fortran_order' that is not True or False"));
    };
    let Some(Lit::Tuple(dims)) = get("shape") else {
        return Err(bad("has a 'shape' that is not a tuple"));
    };
    let shape = dims
        .iter()
        .enumerate()
        .map(|(index, d)| match d {
            Lit::Int(d) => usize::try_from(*d).map_err(|_| Error::DimTooLarge { index, dim: *d }),
            _ => Err(bad(
                "has a 'shape' entry that is not a non-negative integer",
            )),
        })
        .collect::<Result<Vec<_>>>()?;

    let bad_descr = || Error::NpyUnsupported(format!("descr '{descr}'"));
    let mut chars = descr.chars();
    let order = chars.next().ok_or_else(bad_descr)?;
    let kind = match chars.next().ok_or_else(bad_descr)? {
        'b' => Kind::Bool,
        'i' => Kind::Int,
        'u' => Kind::Uint,
        'f' => Kind::Float,
        'c' => Kind::Complex,
        'V' => Kind::Void,
        'U' | 'S' | 'O' | 'a' => Kind::Text,
        _ => return Err(bad_descr()),
    };
    let item_size: usize = match chars.as_str() {
        "" if kind == Kind::Text => 0,
        size => size.parse().map_err(|_| bad_descr())?,
    };
    let big_endian = match order {
        '<' | '|' | '=' => false,
        '>' => true,
        _ => return Err(bad_descr()),
    };
    Ok(Header {
        descr: descr.clone(),
        kind,
        item_size,
        big_endian,
        fortran_order,
        shape,
    })
}

/// Reorders column-major `data` of `shape` (items of `item` bytes) into row-major order.
fn fortran_to_c(data: &[u8], shape: &[usize], item: usize) -> Vec<u8> {
    // Column-major strides, in items.
    let mut strides = Vec::with_capacity(shape.len());
    let mut stride = 1;
    for &d in shape {
        strides.push(stride);
        stride *= d;
    }
    let mut out = Vec::with_capacity(data.len());
    let mut index = vec![0usize; shape.len()];
    for _ in 0..data.len() / item {
        let src: usize = index
            .iter()
            .zip(&strides)
            .map(|(i, s)| i * s)
            .sum::<usize>()
            * item;
        out.extend_from_slice(&data[src..src + item]);
        // Advance the row-major odometer.
        for (i, &d) in index.iter_mut().zip(shape).rev() {
            *i += 1;
            if *i < d {
                break;
            }
            *i = 0;
        }
    }
    out
}

/// The Python literals a `.npy` header uses.
#[derive(Debug, PartialEq)]
enum Lit {
    Str(String),
    Int(u64),
    Bool(bool),
    Tuple(Vec<Lit>),
    List(Vec<Lit>),
    Dict(Vec<(String, Lit)>),
}

/// A small recursive-descent parser for the header's Python dictionary literal.
struct Parser<'a> {
    rest: &'a str,
    depth: usize,
}

impl<'a> Parser<'a> {
    fn new(text: &'a str) -> Self {
        Parser {
            rest: text,
            depth: 0,
        }
    }

    fn parse_all(mut self) -> Result<Lit, String> {
        let lit = self.value()?;
        self.skip_ws();
        match self.rest {
            "" => Ok(lit),
            rest => Err(format!("has unexpected text {rest:?}")),
        }
    }

    fn skip_ws(&mut self) {
        self.rest = self.rest.trim_start();
    }

    fn eat(&mut self, token: &str) -> bool {
        self.skip_ws();
        match self.rest.strip_prefix(token) {
            Some(rest) => {
                self.rest = rest;
                true
            }
            None => false,
        }
    }

    fn value(&mut self) -> Result<Lit, String> {
        self.depth += 1;
        if self.depth > 32 {
            return Err("is nested too deeply".into());
        }
        self.skip_ws();
        let lit = if self.eat("{") {
            let mut entries = Vec::new();
            for item in self.items("}")? {
                match item {
                    (Lit::Str(k), Some(v)) => entries.push((k, v)),
                    _ => return Err("has a dictionary entry that is not 'key': value".into()),
                }
            }
            Lit::Dict(entries)
        } else if self.eat("(") {
            Lit::Tuple(self.plain_items(")")?)
        } else if self.eat("[") {
            Lit::List(self.plain_items("]")?)
        } else if self.eat("True") {
            Lit::Bool(true)
        } else if self.eat("False") {
            Lit::Bool(false)
        } else if self.rest.starts_with(['\'', '"']) {
            self.string()?
        } else {
            self.int()?
        };
        self.depth -= 1;
        Ok(lit)
    }

    /// Comma-separated items up to `close`, each `value` or `value: value`.
    fn items(&mut self, close: &str) -> Result<Vec<(Lit, Option<Lit>)>, String> {
        let mut items = Vec::new();
        while !self.eat(close) {
            let key = self.value()?;
            let value = if self.eat(":") {
                Some(self.value()?)
            } else {
                None
            };
            items.push((key, value));
            if !self.eat(",") {
                if self.eat(close) {
                    break;
                }
                return Err(format!("is missing a ',' or '{close}'"));
            }
        }
        Ok(items)
    }

    fn plain_items(&mut self, close: &str) -> Result<Vec<Lit>, String> {
        self.items(close)?
            .into_iter()
            .map(|(v, extra)| match extra {
                None => Ok(v),
                Some(_) => Err("has a ':' outside a dictionary".into()),
            })
            .collect()
    }

    fn string(&mut self) -> Result<Lit, String> {
        let quote = &self.rest[..1];
        let body = &self.rest[1..];
        let end = body.find(quote).ok_or("has an unterminated string")?;
        if body[..end].contains('\\') {
            return Err("has an escaped string".into());
        }
        self.rest = &body[end + 1..];
        Ok(Lit::Str(body[..end].to_owned()))
    }

    fn int(&mut self) -> Result<Lit, String> {
        let end = self
            .rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(self.rest.len());
        let value = self.rest[..end]
            .parse()
            .map_err(|_| format!("has an unexpected token at {:?}", self.rest))?;
        self.rest = &self.rest[end..];
        // Python 2 wrote longs as `3L`.
        self.rest = self.rest.strip_prefix('L').unwrap_or(self.rest);
        Ok(Lit::Int(value))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn npy(dict: &str, data: &[u8]) -> Bytes {
        let mut out = MAGIC.to_vec();
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        out.extend_from_slice(dict.as_bytes());
        out.extend_from_slice(data);
        out.into()
    }

    fn err(file: Bytes) -> String {
        decode(file, None).unwrap_err().to_string()
    }

    #[test]
    fn round_trips_every_writable_type() {
        for dtype in DataType::ALL {
            if dtype == DataType::String {
                continue;
            }
            let n = 7;
            let len = dtype.byte_len(n).unwrap() as usize;
            let bytes: Vec<u8> = (0..len as u8).map(|b| b.wrapping_mul(37)).collect();
            let mut t = Tensor::from_bytes(dtype, vec![7], bytes.into()).unwrap();
            if dtype.is_packed() {
                // Normalise the padding bits.
                t = Tensor::from_codes(dtype, vec![7], &t.codes().unwrap()).unwrap();
            }
            let file = Bytes::from(encode(&t).unwrap());
            let override_ = dtype.npy_descr().is_none().then_some(dtype);
            assert_eq!(decode(file, override_).unwrap(), t, "{dtype}");
        }
    }

    #[test]
    fn header_is_padded_like_numpy() {
        let t = Tensor::from_vec(vec![2, 3], vec![0f32; 6]).unwrap();
        let file = encode(&t).unwrap();
        assert_eq!(file.len(), 128 + 24);
        assert!(file.starts_with(b"\x93NUMPY\x01\x00\x76\x00{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }   "));
        assert_eq!(file[127], b'\n');
        let scalar = encode(&Tensor::scalar(1i64)).unwrap();
        assert!(String::from_utf8_lossy(&scalar).contains("'shape': (), }"));
    }

    #[test]
    fn strings_are_rejected() {
        let s = Tensor::from_strings(vec![1], vec![Bytes::from_static(b"a")]).unwrap();
        assert!(encode(&s)
            .unwrap_err()
            .to_string()
            .contains("string tensors cannot"));
        let e = err(npy(
            "{'descr': '<U1', 'fortran_order': False, 'shape': (1,), }",
            &[0; 4],
        ));
        assert!(
            e.contains("string and object arrays are not supported"),
            "{e}"
        );
        let e = err(npy(
            "{'descr': '|O', 'fortran_order': False, 'shape': (1,), }",
            &[0; 8],
        ));
        assert!(e.contains("not supported"), "{e}");
    }

    #[test]
    fn void_needs_an_explicit_type() {
        let file = npy(
            "{'descr': '<V2', 'fortran_order': False, 'shape': (1,), }",
            &[0, 0x40],
        );
        assert!(err(file.clone()).contains("use tensor::npy::read_as"));
        let t = decode(file.clone(), Some(DataType::Bfloat16)).unwrap();
        assert_eq!(
            t.to_vec::<half::bf16>().unwrap(),
            [half::bf16::from_f32(2.0)]
        );
        let e = decode(file, Some(DataType::Float)).unwrap_err().to_string();
        assert!(
            e.contains("cannot be read as float, whose items are 4 bytes"),
            "{e}"
        );
    }

    #[test]
    fn malformed_files_are_errors() {
        let good = encode(&Tensor::from_vec(vec![3], vec![1i32, 2, 3]).unwrap()).unwrap();
        // Every truncation fails cleanly.
        for len in 0..good.len() {
            assert!(
                decode(Bytes::copy_from_slice(&good[..len]), None).is_err(),
                "len {len}"
            );
        }
        let cases = [
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), }",
                "needs 4",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904,), }",
                "too large",
            ),
            (
                "{'descr': '|u1', 'fortran_order': False, 'shape': (4611686018427387904,), }",
                "needs 4611686018427387904",
            ),
            (
                "{'descr': '|u1', 'fortran_order': False, 'shape': (99999999999999999999,), }",
                "unexpected token",
            ),
            (
                "{'descr': '|u1', 'fortran_order': False, 'shape': (-1,), }",
                "unexpected token",
            ),
            (
                "{'descr': '|u1', 'fortran_order': False, 'shape': (4294967296, 4294967296), }",
                "too large",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, }",
                "exactly the keys",
            ),
            (
                "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }",
                "structured",
            ),
            (
                "{'descr': '<f4', 'fortran_order': 0, 'shape': (1,), }",
                "fortran_order",
            ),
            (
                "{'descr': '<x4', 'fortran_order': False, 'shape': (1,), }",
                "descr '<x4'",
            ),
            (
                "{'descr': '<f16', 'fortran_order': False, 'shape': (1,), }",
                "no ONNX element type",
            ),
            (
                "{'descr': '<f4', 'fortran_order': False, 'shape': (1,) ",
                "missing a ','",
            ),
            ("{'descr: '<f4'}", "missing"),
            (&"[".repeat(100), "nested too deeply"),
        ];
        for (dict, expected) in cases {
            let e = err(npy(dict, &[0; 3]));
            assert!(e.contains(expected), "{dict}: {e}");
        }
        let mut v4 = good.clone();
        v4[6] = 4;
        assert!(err(v4.into()).contains("format version 4.0"));
        assert!(err(Bytes::from_static(b"PK\x03\x04")).contains("magic"));
    }

    #[test]
    fn big_endian_and_fortran_order() {
        let dict = "{'descr': '>i2', 'fortran_order': True, 'shape': (2, 3), }";
        // Column-major 0..6 of a 2x3 array: [[0, 2, 4], [1, 3, 5]].
        let data: Vec<u8> = (0..6i16).flat_map(i16::to_be_bytes).collect();
        let t = decode(npy(dict, &data), None).unwrap();
        assert_eq!(t.shape(), [2, 3]);
        assert_eq!(t.to_vec::<i16>().unwrap(), [0, 2, 4, 1, 3, 5]);
        let dict = "{'descr': '>c8', 'fortran_order': False, 'shape': (1,), }";
        let data = [1f32.to_be_bytes(), 2f32.to_be_bytes()].concat();
        let t = decode(npy(dict, &data), None).unwrap();
        let c = t.to_vec::<crate::Complex<f32>>().unwrap();
        assert_eq!((c[0].re, c[0].im), (1.0, 2.0));
    }

    #[test]
    fn little_endian_c_order_is_zero_copy() {
        let file = Bytes::from(encode(&Tensor::from_vec(vec![2], vec![1u64, 2]).unwrap()).unwrap());
        let t = decode(file.clone(), None).unwrap();
        assert_eq!(t.bytes().unwrap().as_ptr(), file[128..].as_ptr());
    }
}
