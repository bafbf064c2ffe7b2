//! External data: tensors whose bytes live in a separate file next to the model
//! (`data_location: EXTERNAL`, `external_data` entries `location`, `offset`, `length`).
//!
//! On load, every external tensor is resolved to a zero-copy slice of a memory map of its file and
//! put in `raw_data`; what was external is remembered in [`ExternalTensor`] records. A location must
//! stay inside the model's directory: absolute paths, and relative paths that leave the directory
//! (`../x`, or a symlink pointing outside), are refused.

use crate::error::{Error, Result};
use crate::walk::{for_each_tensor_mut, TensorSite};
use bytes::Bytes;
use onnx_proto::{tensor_proto::DataLocation, ModelProto, TensorProto};
use std::collections::HashMap;
use std::path::{Component, Path, PathBuf};

/// One tensor that the loaded model kept in an external file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalTensor {
    pub tensor: String,
    pub location: String,
    pub offset: u64,
    pub length: u64,
}

/// The parsed `external_data` entries of one tensor.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExternalDataInfo {
    pub location: String,
    pub offset: u64,
    pub length: Option<u64>,
}

impl ExternalDataInfo {
    /// Reads `location`, `offset` and `length` from `tensor.external_data`.
    pub fn parse(tensor: &TensorProto) -> std::result::Result<Self, String> {
        let mut location = None;
        let mut offset = 0u64;
        let mut length = None;
        for entry in &tensor.external_data {
            let value = entry.value();
            let number = || {
                value.parse::<u64>().map_err(|_| {
                    format!(
                        "'{}' must be a non-negative integer, got '{value}'",
                        entry.key()
                    )
                })
            };
            match entry.key() {
                "location" => location = Some(value.to_string()),
                "offset" => offset = number()?,
                "length" => length = Some(number()?),
                _ => {} // "checksum" and unknown keys carry nothing we need, as in onnx
            }
        }
        let location =
            location.ok_or("data_location is EXTERNAL but no 'location' entry is given")?;
        if location.is_empty() {
            return Err("'location' is empty".into());
        }
        Ok(ExternalDataInfo {
            location,
            offset,
            length,
        })
    }
}

/// Resolves `location` against `base_dir`, refusing anything that leaves it.
pub fn confine(base_dir: &Path, location: &str) -> std::result::Result<PathBuf, String> {
    let rel = Path::new(location);
    if rel.is_absolute() || rel.has_root() {
        return Err(format!(
            "location '{location}' is an absolute path; external data must be given relative to the model's directory"
        ));
    }
    if rel.components().any(|c| matches!(c, Component::Prefix(_))) {
        return Err(format!("location '{location}' has a drive prefix; it must be relative to the model's directory"));
    }
    let joined = base_dir.join(rel);
    let base = base_dir.canonicalize().map_err(|e| {
        format!(
            "cannot resolve the model's directory {}: {e}",
            base_dir.display()
        )
    })?;
    let real = joined
        .canonicalize()
        .map_err(|e| format!("file '{location}' not found in {} ({e})", base.display()))?;
    if !real.starts_with(&base) {
        return Err(format!(
            "location '{location}' resolves to {}, outside the model's directory {}; \
             external data must live in the model's directory or below it",
            real.display(),
            base.display()
        ));
    }
    Ok(real)
}

/// Maps each external file once.
#[derive(Default)]
struct MappedFiles {
    files: HashMap<PathBuf, Bytes>,
}

impl MappedFiles {
    fn get(&mut self, path: &Path) -> std::io::Result<Bytes> {
        if let Some(b) = self.files.get(path) {
            return Ok(b.clone());
        }
        let bytes = map_file(path)?;
        self.files.insert(path.to_path_buf(), bytes.clone());
        Ok(bytes)
    }
}

/// Memory-maps a whole file as `Bytes` (an empty file gives empty `Bytes`).
pub fn map_file(path: &Path) -> std::io::Result<Bytes> {
    let file = std::fs::File::open(path)?;
    let len = file.metadata()?.len();
    if len == 0 {
        return Ok(Bytes::new());
    }
    // SAFETY: the map is read-only. Like every tool that maps model files (onnxruntime, tract),
    // we rely on the file not being truncated by another process while it is mapped.
    let map = unsafe { memmap2::Mmap::map(&file)? };
    // Decoding jumps over tensor data; without this hint the kernel reads ahead around every
    // page touched and pulls most of a big file into memory.
    #[cfg(unix)]
    map.advise(memmap2::Advice::Random)?;
    Ok(Bytes::from_owner(map))
}

/// Replaces every external reference in `model` by the mapped bytes; returns what was external.
/// `model_path` names the model file in errors; `base_dir` is where locations are resolved.
pub(crate) fn resolve(
    model: &mut ModelProto,
    model_path: &Path,
    base_dir: Option<&Path>,
) -> Result<Vec<ExternalTensor>> {
    let mut files = MappedFiles::default();
    let mut found = Vec::new();
    for_each_tensor_mut(model, &mut |t: &mut TensorProto, _site: &TensorSite| {
        if t.data_location != Some(DataLocation::External as i32) {
            return Ok(());
        }
        let err = |reason: String| Error::ExternalData {
            path: model_path.to_path_buf(),
            tensor: t.name().to_string(),
            reason,
        };
        let info = ExternalDataInfo::parse(t).map_err(err)?;
        let base = base_dir.ok_or_else(|| {
            err("the model was not read from a file, so its external data cannot be located".into())
        })?;
        let path = confine(base, &info.location).map_err(err)?;
        let data = files
            .get(&path)
            .map_err(|e| err(format!("cannot map '{}': {e}", path.display())))?;
        let file_len = data.len() as u64;
        if info.offset > file_len {
            return Err(err(format!(
                "offset {} is past the end of '{}' ({file_len} bytes)",
                info.offset, info.location
            )));
        }
        let length = info.length.unwrap_or(file_len - info.offset);
        let end = info
            .offset
            .checked_add(length)
            .filter(|&e| e <= file_len)
            .ok_or_else(|| {
                err(format!(
                    "offset {} + length {length} is past the end of '{}' ({file_len} bytes)",
                    info.offset, info.location
                ))
            })?;
        t.raw_data = Some(data.slice(info.offset as usize..end as usize));
        t.data_location = None;
        t.external_data.clear();
        found.push(ExternalTensor {
            tensor: t.name().to_string(),
            location: info.location,
            offset: info.offset,
            length,
        });
        Ok(())
    })?;
    Ok(found)
}

/// Like [`confine`], for a file about to be written: the location must be a plain relative path
/// without `..`, so the file lands in `base_dir` or below.
pub(crate) fn confine_new(base_dir: &Path, location: &str) -> std::result::Result<PathBuf, String> {
    let rel = Path::new(location);
    let plain = !location.is_empty()
        && rel
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir));
    if !plain {
        return Err(format!(
            "external data file name '{location}' must be a relative path inside the model's directory"
        ));
    }
    Ok(base_dir.join(rel))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn confine_refuses_escapes() {
        let dir = tempfile::tempdir().unwrap();
        let inner = dir.path().join("m");
        std::fs::create_dir(&inner).unwrap();
        std::fs::write(dir.path().join("x"), b"1234").unwrap();
        std::fs::write(inner.join("w.bin"), b"1234").unwrap();
        assert!(confine(&inner, "w.bin").is_ok());
        assert!(confine(&inner, "./w.bin").is_ok());
        let e = confine(&inner, "../x").unwrap_err();
        assert!(e.contains("outside the model's directory"), "{e}");
        let abs = dir.path().join("x");
        let e = confine(&inner, abs.to_str().unwrap()).unwrap_err();
        assert!(e.contains("absolute path"), "{e}");
        let e = confine(&inner, "missing.bin").unwrap_err();
        assert!(e.contains("not found"), "{e}");
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(dir.path().join("x"), inner.join("link")).unwrap();
            let e = confine(&inner, "link").unwrap_err();
            assert!(e.contains("outside"), "{e}");
        }
    }
}
