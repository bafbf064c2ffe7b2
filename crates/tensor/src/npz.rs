//! `.npz` archives: a zip of `.npy` members, as `np.savez` (stored) and `np.savez_compressed`
//! (deflated) write them. Keys are member names without the `.npy` suffix.
//!
//! Members are read as [`npy`] reads them; [`read_with`] supplies a type for members
//! saved as raw void by `ml_dtypes`. Writing stores members uncompressed, through a temporary
//! file renamed into place.

use std::io::{Cursor, Read, Seek, Write};
use std::path::Path;

use bytes::Bytes;
use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, ZipArchive, ZipWriter};

use crate::{fsutil, npy, DataType, Error, Result, Tensor};

/// Reads every member of an `.npz` file, in archive order.
pub fn read(path: impl AsRef<Path>) -> Result<Vec<(String, Tensor)>> {
    read_with(path, |_| None)
}

/// Like [`read`], reading the member `key` as `dtype_for(key)` when that is `Some` (see
/// [`npy::read_as`]).
pub fn read_with(
    path: impl AsRef<Path>,
    dtype_for: impl Fn(&str) -> Option<DataType>,
) -> Result<Vec<(String, Tensor)>> {
    let path = path.as_ref();
    decode(fsutil::read(path)?, dtype_for).map_err(|e| e.in_file(path))
}

/// Decodes an in-memory `.npz` image.
pub fn decode(
    archive: Bytes,
    dtype_for: impl Fn(&str) -> Option<DataType>,
) -> Result<Vec<(String, Tensor)>> {
    let mut zip = ZipArchive::new(Cursor::new(archive))?;
    let mut tensors: Vec<(String, Tensor)> = Vec::with_capacity(zip.len().min(1024));
    for index in 0..zip.len() {
        let mut member = zip.by_index(index)?;
        let name = member.name().to_owned();
        let Some(key) = name.strip_suffix(".npy") else {
            return Err(Error::Npz(format!("member '{name}' is not a .npy file")));
        };
        if tensors.iter().any(|(k, _)| k == key) {
            return Err(Error::Npz(format!("member '{name}' appears twice")));
        }
        // The declared size bounds the read, and the buffer grows only with data actually
        // decompressed, never from a size the archive merely claims.
        let mut data = Vec::new();
        let size = member.size();
        (&mut member)
            .take(size)
            .read_to_end(&mut data)
            .map_err(|e| Error::Npz(format!("member '{name}': {e}")))?;
        let tensor = npy::decode(data.into(), dtype_for(key)).map_err(|e| e.in_entry(key))?;
        tensors.push((key.to_owned(), tensor));
    }
    Ok(tensors)
}

/// Writes `tensors` as an uncompressed `.npz` (`np.savez` layout), atomically.
pub fn write<'a>(
    path: impl AsRef<Path>,
    tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>,
) -> Result<()> {
    let path = path.as_ref();
    let tensors: Vec<_> = tensors.into_iter().collect();
    check_keys(&tensors).map_err(|e| e.in_file(path))?;
    // Encode headers first so an unsupported tensor fails before any file is created.
    let parts = tensors
        .iter()
        .map(|&(key, t)| npy::encode_parts(t).map_err(|e| e.in_entry(key)))
        .collect::<Result<Vec<_>>>()
        .map_err(|e| e.in_file(path))?;
    fsutil::write_atomic(path, |out| {
        write_zip(out, tensors.iter().map(|(k, _)| *k).zip(&parts)).map_err(std::io::Error::other)
    })
}

/// Encodes `tensors` as an in-memory uncompressed `.npz` image.
pub fn encode<'a>(tensors: impl IntoIterator<Item = (&'a str, &'a Tensor)>) -> Result<Vec<u8>> {
    let tensors: Vec<_> = tensors.into_iter().collect();
    check_keys(&tensors)?;
    let parts = tensors
        .iter()
        .map(|&(key, t)| npy::encode_parts(t).map_err(|e| e.in_entry(key)))
        .collect::<Result<Vec<_>>>()?;
    let mut out = Cursor::new(Vec::new());
    write_zip(&mut out, tensors.iter().map(|(k, _)| *k).zip(&parts))?;
    Ok(out.into_inner())
}

fn check_keys(tensors: &[(&str, &Tensor)]) -> Result<()> {
    for (i, (key, _)) in tensors.iter().enumerate() {
        if key.is_empty() || tensors[..i].iter().any(|(k, _)| k == key) {
            return Err(Error::Npz(format!("key '{key}' is empty or repeated")));
        }
    }
    Ok(())
}

fn write_zip<'a, W: Write + Seek>(
    out: W,
    members: impl Iterator<Item = (&'a str, &'a (Vec<u8>, std::borrow::Cow<'a, [u8]>))>,
) -> zip::result::ZipResult<()> {
    let mut zip = ZipWriter::new(out);
    for (key, (header, data)) in members {
        let size = (header.len() + data.len()) as u64;
        let options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Stored)
            .large_file(size >= u64::from(u32::MAX));
        zip.start_file(format!("{key}.npy"), options)?;
        zip.write_all(header)?;
        zip.write_all(data)?;
    }
    zip.finish()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_in_memory_and_on_disk() {
        let a = Tensor::from_vec(vec![2], vec![1.5f64, -2.0]).unwrap();
        let b = Tensor::from_codes(DataType::Int4, vec![3], &[1, 15, 8]).unwrap();
        let image = encode([("a", &a), ("b", &b)]).unwrap();
        let back = decode(image.into(), |k| (k == "b").then_some(DataType::Int4)).unwrap();
        assert_eq!(
            back,
            [("a".to_owned(), a.clone()), ("b".to_owned(), b.clone())]
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.npz");
        write(&path, [("a", &a)]).unwrap();
        assert_eq!(read(&path).unwrap(), [("a".to_owned(), a.clone())]);
        // A failed write (a string tensor) leaves the old file and no temporary behind.
        let s = Tensor::from_strings(vec![0], vec![]).unwrap();
        let e = write(&path, [("a", &a), ("s", &s)])
            .unwrap_err()
            .to_string();
        assert!(
            e.ends_with(
                "x.npz: entry 's': unsupported .npy: string tensors cannot be written to .npy"
            ),
            "{e}"
        );
        assert_eq!(read(&path).unwrap().len(), 1);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
        assert!(encode([("a", &a), ("a", &a)]).is_err());
    }

    #[test]
    fn garbage_is_an_error() {
        let a = Tensor::from_vec(vec![3], vec![1i32, 2, 3]).unwrap();
        let image = encode([("a", &a)]).unwrap();
        for len in 0..image.len() {
            assert!(decode(Bytes::copy_from_slice(&image[..len]), |_| None).is_err());
        }
        // Flip each byte in turn: an error or a tensor, never a panic.
        for i in 0..image.len() {
            let mut bad = image.clone();
            bad[i] ^= 0x5A;
            let _ = decode(bad.into(), |_| None);
        }
    }
}
