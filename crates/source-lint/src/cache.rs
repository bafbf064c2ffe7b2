//! The lint cache: what the first pass learns of each file on its own (its findings, its facts,
//! what it tells the project pass), kept between runs in a cache directory (`.onnx-doctor-cache`
//! by default, like ruff's `.ruff_cache`). A run on an unchanged tree then reads and hashes each
//! file instead of parsing and checking it.
//!
//! An entry is used only for a file of the same path with the same length and modification time
//! (as ruff decides), in a cache written by the same executable (its size and modification
//! time) for the same command-line paths; such a file is not even read unless it has findings
//! to show. A file changed less than two seconds before the run is not stored ("racily clean",
//! as git calls it: a second change within the file system's time resolution would go unseen).
//! The project pass, and the second check of files other files' model code reaches, run on
//! every run from those entries, so findings that depend on other files are recomputed each
//! time. A missing, unreadable or corrupt cache is a miss, never an error, and a cache that
//! cannot be written is left alone: the cache only ever saves time.

use crate::{FileLint, HashMap};
use serde::{Deserialize, Serialize};
use std::hash::{Hash, Hasher as _};
use std::path::{Path, PathBuf};

/// Bumped when what an entry holds changes shape.
const FORMAT: u32 = 3;

/// A file's length and modification time (nanoseconds since the epoch): an entry's key.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(from = "(u64, u64)", into = "(u64, u64)")]
pub(crate) struct Stamp {
    pub len: u64,
    pub modified: u64,
}

impl From<(u64, u64)> for Stamp {
    fn from((len, modified): (u64, u64)) -> Self {
        Stamp { len, modified }
    }
}

impl From<Stamp> for (u64, u64) {
    fn from(s: Stamp) -> Self {
        (s.len, s.modified)
    }
}

impl Stamp {
    /// The stamp of the file at `path`; `None` when it cannot be read (no caching for it).
    pub fn of(path: &Path) -> Option<Stamp> {
        let meta = std::fs::metadata(path).ok()?;
        let modified = meta
            .modified()
            .ok()?
            .duration_since(std::time::UNIX_EPOCH)
            .ok()?;
        Some(Stamp {
            len: meta.len(),
            modified: u64::try_from(modified.as_nanos()).ok()?,
        })
    }
}

/// One file's first-pass result, its second check if it had one (with the digest of what the
/// other files told it), and the stamp of the file they were computed from.
#[derive(Serialize, Deserialize)]
struct Entry<L> {
    stamp: Stamp,
    lint: L,
    #[serde(default = "none", skip_serializing_if = "Option::is_none")]
    second: Option<(u64, L)>,
}

fn none<L>() -> Option<(u64, L)> {
    None
}

/// What a run hands the cache to store for one file.
pub(crate) struct Stored<'a> {
    pub display: &'a str,
    pub stamp: Stamp,
    pub first: &'a FileLint,
    pub second: Option<(u64, &'a FileLint)>,
}

#[derive(Serialize, Deserialize)]
struct CacheFile<K: Eq + std::hash::Hash, L> {
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
            .and_then(|bytes| serde_json::from_slice::<CacheFile<String, FileLint>>(&bytes).ok())
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

    /// The first-pass result of the file `display` if it is unchanged since it was computed.
    pub(crate) fn get(&self, display: &str, stamp: Stamp) -> Option<&FileLint> {
        self.files
            .get(display)
            .filter(|e| e.stamp == stamp)
            .map(|e| &e.lint)
    }

    /// The second check of the file `display` if it is unchanged and other files told it the
    /// same (`digest`) as when it was computed.
    pub(crate) fn get_second(&self, display: &str, stamp: Stamp, digest: u64) -> Option<&FileLint> {
        let e = self.files.get(display).filter(|e| e.stamp == stamp)?;
        e.second
            .as_ref()
            .filter(|(d, _)| *d == digest)
            .map(|(_, l)| l)
    }

    /// How many files the cache holds.
    pub fn len(&self) -> usize {
        self.files.len()
    }

    pub fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Replaces the cache with this run's files when they differ from what it holds (`changed`:
    /// something was computed rather than read from it), and writes it: to a temporary file, then renamed, so a reader
    /// never sees half of it. Older executables' caches of the same paths are removed, and so
    /// is any cache not written for 30 days (paths no longer linted).
    pub(crate) fn store(&mut self, files: Vec<Stored<'_>>, changed: bool) {
        let Some(dir) = &self.dir else { return };
        if !changed && files.len() == self.files.len() {
            return;
        }
        let racy_from = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos().saturating_sub(2_000_000_000));
        let files: HashMap<&str, Entry<&FileLint>> = files
            .into_iter()
            .filter(|f| u128::from(f.stamp.modified) < racy_from)
            .map(|f| {
                let entry = Entry {
                    stamp: f.stamp,
                    lint: f.first,
                    second: f.second,
                };
                (f.display, entry)
            })
            .collect();
        let stored = CacheFile {
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
