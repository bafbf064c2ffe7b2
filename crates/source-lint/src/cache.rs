//! The lint cache: what each file's checks found, kept between runs in a cache directory
//! (`.onnx-doctor-cache` by default, like ruff's `.ruff_cache`), so a run on an unchanged tree
//! neither parses nor checks anything.
//!
//! Two files per executable and set of command-line paths, under `<cache dir>/lint/`:
//! - `<name>.json`, the index: the last run's files with their length and modification time
//!   (as ruff decides whether a file changed), and its findings after the project pass. A run
//!   on the same files, none changed, takes its findings from there and reads only the files
//!   that have some (for `# noqa` and to show them).
//! - `<name>.files.json`: each file's first check (its findings, its facts, what it tells the
//!   project pass) and, for a file other files' model code reaches, its second check with a
//!   digest of what they told it. Any other run reads it: unchanged files are not read or
//!   parsed, the project pass runs again on their entries, and a second check is redone only
//!   when what the file is told has changed.
//!
//! The name carries the executable's size and modification time, so a rebuilt binary never
//! reads another build's entries. A file changed less than two seconds before the run is not
//! stored ("racily clean", as git calls it: a second change within the file system's time
//! resolution would go unseen). A missing, unreadable or corrupt cache is a miss, never an
//! error, and a cache that cannot be written is left alone: the cache only ever saves time.

use crate::{FileLint, Finding, HashMap};
use serde::{Deserialize, Serialize};
use std::hash::{Hash, Hasher as _};
use std::path::{Path, PathBuf};

/// Bumped when what an entry holds changes shape.
const FORMAT: u32 = 4;

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
    /// The file's findings after the project pass (before noqa and the selection).
    pub findings: &'a [Finding],
}

/// `<name>.files.json`: every file's entry.
#[derive(Serialize, Deserialize)]
struct Files<K: Eq + std::hash::Hash, L> {
    format: u32,
    files: HashMap<K, Entry<L>>,
}

/// `<name>.json`: the last run's files with their stamps, and its findings after the project
/// pass (files without findings left out). A run on the same files, none changed, needs
/// nothing else.
#[derive(Serialize, Deserialize)]
struct Index<K: Eq + std::hash::Hash, F> {
    format: u32,
    stamps: HashMap<K, Stamp>,
    findings: HashMap<K, F>,
}

/// The cache of one set of command-line paths, opened before a run and stored after it.
pub struct LintCache {
    /// `<cache dir>/lint`, or `None` when this executable cannot be identified (no caching).
    dir: Option<PathBuf>,
    /// A hash of the command-line paths: every executable's cache of them starts with it.
    stem: String,
    /// `<stem>-<executable hash>`.
    name: String,
    index: Option<Index<String, Vec<Finding>>>,
    /// Read only when the run is not the last one again ([`LintCache::load_files`]).
    files: HashMap<String, Entry<FileLint>>,
}

/// This executable's size and modification time, with the crate version and the entry format:
/// a rebuilt binary never reads another build's entries.
fn executable_identity() -> Option<u64> {
    let exe = Stamp::of(&std::env::current_exe().ok()?)?;
    let mut h = rustc_hash::FxHasher::default();
    (FORMAT, env!("CARGO_PKG_VERSION"), exe.len, exe.modified).hash(&mut h);
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
                index: None,
                files: HashMap::default(),
            };
        };
        let dir = cache_dir.join("lint");
        let name = format!("{stem}-{exe:016x}");
        let index = std::fs::read(dir.join(format!("{name}.json")))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Index<String, Vec<Finding>>>(&bytes).ok())
            .filter(|i| i.format == FORMAT);
        LintCache {
            dir: Some(dir),
            stem,
            name,
            index,
            files: HashMap::default(),
        }
    }

    /// The last run's findings, by file, when this run lints the same files (by `displays`)
    /// and none has changed since (by `stamps`).
    pub(crate) fn unchanged_run(
        &self,
        displays: &[String],
        stamps: &[Option<Stamp>],
    ) -> Option<&HashMap<String, Vec<Finding>>> {
        let index = self.index.as_ref()?;
        let same = index.stamps.len() == displays.len()
            && displays
                .iter()
                .zip(stamps)
                .all(|(d, s)| s.is_some() && index.stamps.get(d.as_str()) == s.as_ref());
        same.then_some(&index.findings)
    }

    /// Reads every file's entry (for a run that is not the last one again).
    pub(crate) fn load_files(&mut self) {
        let Some(dir) = &self.dir else { return };
        self.files = std::fs::read(dir.join(format!("{}.files.json", self.name)))
            .ok()
            .and_then(|bytes| serde_json::from_slice::<Files<String, FileLint>>(&bytes).ok())
            .filter(|f| f.format == FORMAT)
            .map(|f| f.files)
            .unwrap_or_default();
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

    /// Stores this run: every file's entry (rewritten when something was computed rather than
    /// read from the cache, or the files changed), and the index of stamps and findings (when
    /// `complete`: every file was read). Files changed in the last two seconds are left out,
    /// so the next run computes them again. Each file is written to a temporary file, then
    /// renamed, so a reader never sees half of it. Older executables' caches of the same paths
    /// are removed, and so is any cache not written for 30 days (paths no longer linted).
    pub(crate) fn store(&mut self, files: Vec<Stored<'_>>, changed: bool, complete: bool) {
        let Some(dir) = &self.dir else { return };
        let racy_from = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos().saturating_sub(2_000_000_000));
        let files: Vec<Stored<'_>> = files
            .into_iter()
            .filter(|f| u128::from(f.stamp.modified) < racy_from)
            .collect();
        if changed || files.len() != self.files.len() {
            let entries: HashMap<&str, Entry<&FileLint>> = files
                .iter()
                .map(|f| {
                    let entry = Entry {
                        stamp: f.stamp,
                        lint: f.first,
                        second: f.second,
                    };
                    (f.display, entry)
                })
                .collect();
            let stored = Files {
                format: FORMAT,
                files: entries,
            };
            let Ok(bytes) = serde_json::to_vec(&stored) else {
                return;
            };
            if write_cache(dir, &format!("{}.files.json", self.name), &bytes).is_err() {
                return;
            }
        }
        if complete {
            let index = Index {
                format: FORMAT,
                stamps: files.iter().map(|f| (f.display, f.stamp)).collect(),
                findings: files
                    .iter()
                    .filter(|f| !f.findings.is_empty())
                    .map(|f| (f.display, f.findings))
                    .collect(),
            };
            if let Ok(bytes) = serde_json::to_vec(&index) {
                let _ = write_cache(dir, &format!("{}.json", self.name), &bytes);
            }
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
                let superseded = n.starts_with(&format!("{}-", self.stem))
                    && !n.starts_with(&format!("{}.", self.name));
                if n.ends_with(".json") && (superseded || old(&e)) {
                    let _ = std::fs::remove_file(e.path());
                }
            }
        }
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
