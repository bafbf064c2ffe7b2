//! File helpers shared by the format modules.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;

use crate::{Error, Result};

/// Reads a whole file.
pub(crate) fn read(path: &Path) -> Result<Bytes> {
    fs::read(path).map(Bytes::from).map_err(Error::io(path))
}

/// Writes `path` through a temporary file in the same directory, renamed into place only once
/// `write` succeeded and the data is synced, so a failure never leaves a half-written file.
pub(crate) fn write_atomic(
    path: &Path,
    write: impl FnOnce(&mut BufWriter<&mut File>) -> std::io::Result<()>,
) -> Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let file_name = path.file_name().ok_or_else(|| Error::Io {
        path: path.to_owned(),
        error: std::io::Error::new(std::io::ErrorKind::InvalidInput, "not a file path"),
    })?;
    let tmp = path.with_file_name(format!(
        ".{}.tmp-{}-{}",
        file_name.to_string_lossy(),
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = File::create(&tmp)?;
        let mut out = BufWriter::new(&mut file);
        write(&mut out)?;
        out.flush()?;
        drop(out);
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result.map_err(Error::io(path))
}

/// Writes `bytes` to `path` atomically (temp file in the same directory, then rename).
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    write_atomic(path, |out| out.write_all(bytes))
}
