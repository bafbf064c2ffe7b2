//! `.pb` files: one serialized ONNX `TensorProto`, as the ONNX backend test data stores inputs
//! and outputs (`test_data_set_N/input_0.pb`).

use std::path::Path;

use bytes::Bytes;
use onnx_proto::{Message, TensorProto};

use crate::{fsutil, Result, Tensor};

/// Reads a `.pb` file; the tensor's name (which may be empty) comes with it. `raw_data` is a
/// zero-copy view of the file's bytes.
pub fn read(path: impl AsRef<Path>) -> Result<(String, Tensor)> {
    let path = path.as_ref();
    decode(fsutil::read(path)?).map_err(|e| e.in_file(path))
}

/// Decodes a serialized `TensorProto`.
pub fn decode(bytes: Bytes) -> Result<(String, Tensor)> {
    let proto = TensorProto::decode(bytes)?;
    let tensor = Tensor::from_proto(&proto)?;
    Ok((proto.name.unwrap_or_default(), tensor))
}

/// Serializes `tensor` as a `TensorProto` named `name` (see [`Tensor::to_proto`]).
pub fn encode(tensor: &Tensor, name: &str) -> Vec<u8> {
    tensor.to_proto(name).encode_to_vec()
}

/// Writes `tensor` as a `.pb` file, atomically.
pub fn write(path: impl AsRef<Path>, tensor: &Tensor, name: &str) -> Result<()> {
    let bytes = encode(tensor, name);
    fsutil::write_atomic(path.as_ref(), |out| std::io::Write::write_all(out, &bytes))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_rejects_garbage() {
        let t = Tensor::from_vec(vec![2], vec![3u32, 4]).unwrap();
        let image = encode(&t, "x");
        assert_eq!(
            decode(image.clone().into()).unwrap(),
            ("x".to_owned(), t.clone())
        );
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.pb");
        write(&path, &t, "").unwrap();
        assert_eq!(read(&path).unwrap(), (String::new(), t.clone()));
        for len in 1..image.len() {
            assert!(
                decode(Bytes::copy_from_slice(&image[..len])).is_err(),
                "len {len}"
            );
        }
        let e = read(dir.path().join("missing.pb")).unwrap_err().to_string();
        assert!(e.contains("missing.pb: "), "{e}");
        // A dim of 2^62 followed by nothing: an error, not an allocation.
        let mut p = t.to_proto("huge");
        p.dims = vec![1 << 62];
        let e = decode(p.encode_to_vec().into()).unwrap_err().to_string();
        assert!(
            e.starts_with("tensor 'huge': shape [4611686018427387904] of uint32 is too large"),
            "{e}"
        );
    }
}
