//! Saving: the model file, and external data when asked for or when the protobuf limit demands it.

use crate::error::{io, Error, Result};
use crate::walk::for_each_dense_tensor_mut;
use crate::Model;
use onnx_proto::{tensor_proto::DataLocation, Message, StringStringEntryProto};
use std::io::Write;
use std::path::{Path, PathBuf};

/// A serialized protobuf message may not exceed 2 GiB − 1 bytes.
pub const PROTOBUF_LIMIT: u64 = (1 << 31) - 1;

/// When tensors go to an external data file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ExternalPolicy {
    /// External if the loaded model used external data, or if the file would pass the protobuf limit.
    #[default]
    Auto,
    /// Every tensor of at least `threshold` bytes goes external.
    Always,
    /// Everything inline; saving fails past the protobuf limit.
    Never,
}

#[derive(Debug, Clone)]
pub struct SaveOptions {
    pub external: ExternalPolicy,
    /// Tensors smaller than this many bytes stay inline (onnx's default is 1024).
    pub threshold: u64,
    /// File name of the external data, relative to the model; default `<model file name>.data`.
    pub data_file: Option<String>,
}

impl Default for SaveOptions {
    fn default() -> Self {
        SaveOptions {
            external: ExternalPolicy::Auto,
            threshold: 1024,
            data_file: None,
        }
    }
}

/// What a save wrote.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SaveReport {
    pub model_bytes: u64,
    /// The external data file and how many tensors / bytes went there, if any.
    pub external: Option<(PathBuf, usize, u64)>,
}

/// Offsets of external tensors are aligned so each can be mapped and read as its element type;
/// big tensors on page boundaries, as onnx does.
fn alignment(len: u64) -> u64 {
    if len >= 1 << 20 {
        4096
    } else {
        64
    }
}

pub(crate) fn save(model: &Model, path: &Path, options: &SaveOptions) -> Result<SaveReport> {
    let err = |reason: String| Error::Save {
        path: path.into(),
        reason,
    };
    let file_name = path
        .file_name()
        .and_then(|n| n.to_str())
        .ok_or_else(|| err("the output path has no file name".into()))?;
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let externalize = match options.external {
        ExternalPolicy::Always => true,
        ExternalPolicy::Never => false,
        ExternalPolicy::Auto => {
            !model.external.is_empty() || model.proto.encoded_len() as u64 > PROTOBUF_LIMIT
        }
    };
    let mut proto = model.proto.clone();
    let mut external = None;
    let mut data_tmp = None;
    if externalize {
        let data_name = options
            .data_file
            .clone()
            .unwrap_or_else(|| format!("{file_name}.data"));
        let data_path = crate::external::confine_new(&dir, &data_name).map_err(err)?;
        let tmp = tmp_path(&data_path);
        let file = std::fs::File::create(&tmp).map_err(io(&tmp))?;
        let mut out = std::io::BufWriter::new(file);
        let (mut offset, mut count) = (0u64, 0usize);
        let written = for_each_dense_tensor_mut(&mut proto, &mut |t, _| {
            let Some(raw) = t.raw_data.as_ref() else {
                return Ok(());
            };
            let len = raw.len() as u64;
            if len < options.threshold {
                return Ok(());
            }
            let pad = offset.next_multiple_of(alignment(len)) - offset;
            out.write_all(&vec![0u8; pad as usize])?;
            out.write_all(raw)?;
            offset += pad;
            t.raw_data = None;
            t.data_location = Some(DataLocation::External as i32);
            t.external_data = vec![
                entry("location", &data_name),
                entry("offset", &offset.to_string()),
                entry("length", &len.to_string()),
            ];
            offset += len;
            count += 1;
            Ok::<_, std::io::Error>(())
        })
        .and_then(|_| out.flush())
        .and_then(|_| out.get_ref().sync_all());
        if let Err(e) = written {
            std::fs::remove_file(&tmp).ok();
            return Err(Error::Io {
                path: tmp,
                source: e,
            });
        }
        if count > 0 {
            external = Some((data_path.clone(), count, offset));
            data_tmp = Some((tmp, data_path));
        } else {
            std::fs::remove_file(&tmp).ok();
        }
    }
    let len = proto.encoded_len() as u64;
    if len > PROTOBUF_LIMIT {
        if let Some((tmp, _)) = &data_tmp {
            std::fs::remove_file(tmp).ok();
        }
        return Err(err(format!(
            "the model would be {len} bytes, over the 2 GiB protobuf limit{}",
            if externalize {
                " even with tensors moved to external data"
            } else {
                "; save with external data"
            }
        )));
    }
    let bytes = proto.encode_to_vec();
    let tmp = tmp_path(path);
    let written = std::fs::write(&tmp, &bytes).and_then(|_| std::fs::File::open(&tmp)?.sync_all());
    if let Err(e) = written {
        std::fs::remove_file(&tmp).ok();
        if let Some((t, _)) = &data_tmp {
            std::fs::remove_file(t).ok();
        }
        return Err(Error::Io {
            path: tmp,
            source: e,
        });
    }
    if let Some((t, final_path)) = &data_tmp {
        std::fs::rename(t, final_path).map_err(io(final_path))?;
    }
    std::fs::rename(&tmp, path).map_err(io(path))?;
    Ok(SaveReport {
        model_bytes: len,
        external,
    })
}

fn entry(key: &str, value: &str) -> StringStringEntryProto {
    StringStringEntryProto {
        key: Some(key.into()),
        value: Some(value.into()),
    }
}

fn tmp_path(path: &Path) -> PathBuf {
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    path.with_file_name(format!(".{name}.tmp-{}", std::process::id()))
}
