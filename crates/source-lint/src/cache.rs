//! The lint cache: what the first pass learns of each file on its own (its findings, its facts,
//! what it tells the project pass), kept between runs in a cache directory (`.onnx-doctor-cache`
//! by default, like ruff's `.ruff_cache`). A run on an unchanged tree then reads and hashes each
//! file instead of parsing and checking it.
//!
//! An entry is used only for a file of the same path whose text has the same length and hash, in
//! a cache written by the same executable (its size and modification time) for the same
//! command-line paths. The project pass, and the second check of files other files' model code
//! reaches, run on every run from those entries, so findings that depend on other files are
//! recomputed each time. A missing, unreadable or corrupt cache is a miss, never an error, and
//! a cache that cannot be written is left alone: the cache only ever saves time.

use crate::{FileLint, HashMap};
use serde::{Deserialize, Serialize};
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};

/// Bumped when what an entry holds changes shape.
const FORMAT: u32 = 1;

/// One file's first-pass result and the text it was computed from.
#[derive(Serialize, Deserialize)]
pub(crate) struct Entry<L> {
    pub len: u64,
    pub hash: u64,
    pub lint: L,
}

#[derive(Serialize, Deserialize)]
struct Stored<K: Eq + std::hash::Hash, L> {
    format: u32,
    files: HashMap<K, Entry<L>>,
}

/// The cache of one set of command-line paths, opened before a run and stored after it.
pub struct LintCache {
    /// `<cache dir>/lint`, or `None` when this executable cannot be identified (no caching).
    dir: Option<PathBuf>,
    /// A hash of the command-line paths: every executable's cache of them starts with it.
    stem: String,
    /// `<stem>-<executable hash>.json`.
    name: String,
    files: HashMap<String, Entry<FileLint>>,
}

/// The hash of a file's text that an entry must match (with its length).
pub(crate) fn text_hash(bytes: &[u8]) -> u64 {
    let mut h = rustc_hash::FxHasher::default();
    h.write(bytes);
    h.finish()
}

/// This executable's size and modification time, with the crate version and the entry format:
/// a rebuilt binary never reads another build's entries.
fn executable_identity() -> Option<u64> {
    let exe = std::env::current_exe().ok()?;
    let meta = std::fs::metadata(exe).ok()?;
    let modified = meta
        .modified()
        .ok()?
        .duration_since(std::time::UNIX_EPOCH)
        .ok()?;
    let mut h = rustc_hash::FxHasher::default();
    (
        FORMAT,
        env!("CARGO_PKG_VERSION"),
        meta.len(),
        modified.as_nanos(),
    )
        .hash(&mut h);
    Some(h.finish())
}

impl LintCache {
    /// Opens the cache for linting `paths` (as given on the command line) under `cache_dir`.
    /// Never fails: anything unreadable is an empty cache.
    pub fn open(cache_dir: &Path, paths: &[PathBuf]) -> LintCache {
        let mut h = rustc_hash::FxHasher::default();
        for p in paths {
            p.hash(&mut h);
            std::fs::canonicalize(p).ok().hash(&mut h);
        }
        let stem = format!("{:016x}", h.finish());
        let Some(exe) = executable_identity() else {
            return LintCache {
                dir: None,
                name: String::new(),
                stem,
                files: HashMap::default(),
            };
        };
        let dir = cache_dir.join("lint");
        let name = format!("{stem}-{exe:016x}.json");
        let files = std::fs::read(dir.join(&name))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Stored<String, FileLint>>(&bytes).ok())
            .filter(|s| s.format == FORMAT)
            .map(|s| s.files)
            .unwrap_or_default();
        LintCache {
            dir: Some(dir),
            stem,
            name,
            files,
        }
    }

    /// The first-pass result of the file `display` if its text is the one it was computed from.
    pub(crate) fn get(&self, display: &str, len: u64, hash: u64) -> Option<&FileLint> {
        self.files
            .get(display)
            .filter(|e| e.len == len && e.hash == hash)
            .map(|e| &e.lint)
    }

    /// How many files the cache holds.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Replaces the cache with this run's files when they differ from what it holds (`hits` of
    /// them were read from it), and writes it: to a temporary file, then renamed, so a reader
    /// never sees half of it. Older executables' caches of the same paths are removed, and so
    /// is any cache not written for 30 days (paths no longer linted).
    pub(crate) fn store(&mut self, files: HashMap<&str, Entry<&FileLint>>, hits: usize) {
        let Some(dir) = &self.dir else { return };
        if hits == files.len() && files.len() == self.files.len() {
            return;
        }
        let stored = Stored {
            format: FORMAT,
            files,
        };
        let Ok(bytes) = serde_json::to_vec(&stored) else {
            return;
        };
        if write_cache(dir, &self.name, &bytes).is_err() {
            return;
        }
        let month = std::time::Duration::from_secs(30 * 24 * 3600);
        let old = |e: &std::fs::DirEntry| {
            e.metadata()
                .and_then(|m| m.modified())
                .ok()
                .and_then(|t| t.elapsed().ok())
                .is_some_and(|age| age > month)
        };
        if let Ok(entries) = std::fs::read_dir(dir) {
            for e in entries.flatten() {
                let n = e.file_name();
                let n = n.to_string_lossy();
                let superseded = n.starts_with(&format!("{}-", self.stem)) && n != self.name;
                if n.ends_with(".json") && (superseded || old(&e)) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
        self.files.clear();
    }
}

/// Writes `bytes` as `dir/name` through a temporary file; the cache directory gets a
/// `.gitignore` (`*`) and a `CACHEDIR.TAG`, so neither git nor backups pick it up.
fn write_cache(dir: &Path, name: &str, bytes: &[u8]) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    if let Some(root) = dir.parent() {
        let ignore = root.join(".gitignore");
        if !ignore.exists() {
            std::fs::write(ignore, "# Created by onnx-doctor lint.\n*\n")?;
        }
        let tag = root.join("CACHEDIR.TAG");
        if !tag.exists() {
            std::fs::write(
                tag,
                "Signature: 8a477f597d28d172789f06886806bc55\n\
                 # This file is a cache directory tag created by onnx-doctor.\n",
            )?;
        }
    }
    let tmp = dir.join(format!("{name}.{}.tmp", std::process::id()));
    std::fs::write(&tmp, bytes)?;
    std::fs::rename(&tmp, dir.join(name)).inspect_err(|_| {
        let _ = std::fs::remove_file(&tmp);
    })
}
