//! The ONNX operator schema registry: for every (domain, op, since_version) that the `onnx`
//! package defines, the op's formal inputs and outputs (single, optional, variadic), attributes
//! (type, required, default), type constraints and, where onnx defines one, its function body.
//!
//! # Where the data comes from
//!
//! `data/schemas.json` is generated from `onnx.defs.get_all_schemas_with_history()` of the
//! installed `onnx` Python package (the version is recorded in the file, see [`onnx_version`]) and
//! committed. Regenerate it after upgrading onnx with
//!
//! ```text
//! python3 scripts/gen_opset_schemas.py
//! ```
//!
//! The file is embedded in the binary and parsed once, on first use (about 4 ms in a release
//! build, 781 KiB of JSON, 659 schemas for onnx 1.23.2). The `conformance` test compares the
//! parsed registry against the installed onnx.
//!
//! # Lookups
//!
//! An op's schema "at opset N" is the one with the largest `since_version <= N`:
//! `schema("Resize", 12)` is Resize-11, `schema("Resize", 9)` is `None` (Resize starts at 10).
//! Deprecated schemas are returned like any other, with [`Schema::deprecated`] set, so callers can
//! refuse them by name.
//!
//! **Architecture Invariant:** this crate knows what ops *look like*, never how they compute:
//! no kernels, no shape inference, no backends. It depends on nothing but the protobuf types.

mod schema;

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde::Deserialize;

pub use schema::{
    AttributeSchema, AttributeType, AttributeValue, Determinism, Differentiation, FormalParameter,
    FunctionBodyError, HexBytes, Optionality, Schema, SupportLevel, TypeConstraint,
};

/// The default (ai.onnx) domain as schemas spell it.
pub const DEFAULT_DOMAIN: &str = "";
/// The classical machine-learning domain.
pub const ML_DOMAIN: &str = "ai.onnx.ml";

const DATA: &str = include_str!("../data/schemas.json");

/// The schema of default-domain `op` in force at `opset` (`None` if the op does not exist yet
/// at that opset, or at all).
pub fn schema(op: &str, opset: i64) -> Option<&'static Schema> {
    schema_in(DEFAULT_DOMAIN, op, opset)
}

/// The schema of `domain`'s `op` in force at `opset`; `"ai.onnx"` means the default domain.
pub fn schema_in(domain: &str, op: &str, opset: i64) -> Option<&'static Schema> {
    let versions = history(domain, op);
    let in_force = versions.partition_point(|s| s.since_version <= opset);
    in_force.checked_sub(1).map(|i| &versions[i])
}

/// Every version of an op, sorted by `since_version` (empty for an unknown op).
pub fn history(domain: &str, op: &str) -> &'static [Schema] {
    registry()
        .domains
        .get(canonical_domain(domain))
        .and_then(|ops| ops.get(op))
        .map_or(&[], Vec::as_slice)
}

/// The names of the ops a domain defines, sorted.
pub fn ops(domain: &str) -> impl Iterator<Item = &'static str> {
    registry()
        .domains
        .get(canonical_domain(domain))
        .into_iter()
        .flat_map(|ops| ops.keys().map(String::as_str))
}

/// The domains with schemas, sorted (the default domain is `""`).
pub fn domains() -> impl Iterator<Item = &'static str> {
    registry().domains.keys().map(String::as_str)
}

/// Every schema of every domain and version.
pub fn all() -> impl Iterator<Item = &'static Schema> {
    registry()
        .domains
        .values()
        .flat_map(|ops| ops.values().flatten())
}

/// The highest `since_version` of any op in `domain`, i.e. the newest opset the data describes.
pub fn latest_opset(domain: &str) -> Option<i64> {
    registry()
        .domains
        .get(canonical_domain(domain))?
        .values()
        .filter_map(|versions| versions.last())
        .map(|s| s.since_version)
        .max()
}

/// The opset version the onnx package declares as released for `domain`
/// (`onnx.defs.onnx_opset_version()` / `onnx_ml_opset_version()`); recorded for the default and
/// ML domains only.
pub fn released_opset(domain: &str) -> Option<i64> {
    registry()
        .released_opsets
        .get(canonical_domain(domain))
        .copied()
}

/// The version of the `onnx` package the data was generated from.
pub fn onnx_version() -> &'static str {
    &registry().onnx_version
}

fn canonical_domain(domain: &str) -> &str {
    match domain {
        "ai.onnx" => DEFAULT_DOMAIN,
        other => other,
    }
}

/// The data file's layout: a header, then every schema sorted by (domain, name, since_version).
#[derive(Deserialize)]
struct DataFile {
    onnx_version: String,
    released_opsets: BTreeMap<String, i64>,
    /// The number of schemas the generator wrote, to check nothing was lost.
    schema_count: usize,
    schemas: Vec<Schema>,
}

struct Registry {
    onnx_version: String,
    released_opsets: BTreeMap<String, i64>,
    /// domain → op → versions in file order (ascending since_version).
    domains: BTreeMap<String, BTreeMap<String, Vec<Schema>>>,
}

impl Registry {
    fn parse(json: &str) -> serde_json::Result<Self> {
        let file: DataFile = serde_json::from_str(json)?;
        if file.schemas.len() != file.schema_count {
            return Err(serde::de::Error::custom(format!(
                "the header promises {} schemas, the file holds {}",
                file.schema_count,
                file.schemas.len()
            )));
        }
        let mut domains: BTreeMap<String, BTreeMap<String, Vec<Schema>>> = BTreeMap::new();
        for schema in file.schemas {
            domains
                .entry(schema.domain.clone())
                .or_default()
                .entry(schema.name.clone())
                .or_default()
                .push(schema);
        }
        Ok(Registry {
            onnx_version: file.onnx_version,
            released_opsets: file.released_opsets,
            domains,
        })
    }
}

fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        Registry::parse(DATA).expect("the embedded data/schemas.json parses (checked by tests)")
    })
}

#[cfg(test)]
mod tests;
