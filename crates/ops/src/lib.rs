//! ONNX operators, one module per family: shape and type inference under `families/`, CPU
//! kernels under `kernels/` (same family names), each with its own registry keyed by
//! (domain, op, inclusive opset range). The two registries are separate because an op's
//! inference often covers versions whose kernels differ (and vice versa).
//!
//! One registry: (domain, op, inclusive opset range) → [`OpDef`]. Ranges of one op never overlap
//! (a test checks), and a version outside every range has no entry: callers must treat such a
//! node as unknown, never fall back to another version.
//!
//! **Architecture Invariant:** an op sees one node and its inputs' types and known values
//! ([`infer::InferCx`]), never the graph as a whole; the graph-level driver lives in `analysis`.

pub mod exec;
pub mod families;
pub mod infer;
pub mod kernels;
pub mod sym;

pub use infer::{InferCx, InferError, Info, Known, Shape, Ty};
pub use sym::SymDim;

use std::collections::HashMap;
use std::sync::OnceLock;

/// Inclusive opset range; `until: None` = still current.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct VersionRange {
    pub since: i64,
    pub until: Option<i64>,
}

impl VersionRange {
    pub fn contains(&self, v: i64) -> bool {
        v >= self.since && self.until.is_none_or(|u| v <= u)
    }

    /// Whether the two ranges share a version.
    pub fn overlaps(&self, other: &VersionRange) -> bool {
        let end = |r: &VersionRange| r.until.unwrap_or(i64::MAX);
        self.since <= end(other) && other.since <= end(self)
    }
}

pub type InferFn = fn(&mut InferCx) -> Result<(), InferError>;

/// One operator over a range of opset versions.
#[derive(Debug, Clone, Copy)]
pub struct OpDef {
    pub domain: &'static str,
    pub name: &'static str,
    pub versions: VersionRange,
    pub infer: InferFn,
}

/// An [`OpDef`] of the default domain valid from opset `since` on.
pub const fn op(name: &'static str, since: i64, infer: InferFn) -> OpDef {
    OpDef {
        domain: "",
        name,
        versions: VersionRange { since, until: None },
        infer,
    }
}

/// An [`OpDef`] of the default domain valid for opsets `since..=until`.
pub const fn op_range(name: &'static str, since: i64, until: i64, infer: InferFn) -> OpDef {
    OpDef {
        domain: "",
        name,
        versions: VersionRange {
            since,
            until: Some(until),
        },
        infer,
    }
}

fn registry() -> &'static HashMap<(&'static str, &'static str), Vec<&'static OpDef>> {
    static REG: OnceLock<HashMap<(&'static str, &'static str), Vec<&'static OpDef>>> =
        OnceLock::new();
    REG.get_or_init(|| {
        let mut m: HashMap<(&str, &str), Vec<&OpDef>> = HashMap::new();
        for def in families::ALL.iter().flat_map(|f| f.iter()) {
            m.entry((def.domain, def.name)).or_default().push(def);
        }
        m
    })
}

/// The op definition in force for `domain`/`name` at `opset` (`"ai.onnx"` = `""`).
pub fn lookup(domain: &str, name: &str, opset: i64) -> Option<&'static OpDef> {
    let domain = if domain == "ai.onnx" { "" } else { domain };
    registry()
        .get(&(domain, name))?
        .iter()
        .copied()
        .find(|d| d.versions.contains(opset))
}

/// Every registered op definition.
pub fn all() -> impl Iterator<Item = &'static OpDef> {
    families::ALL.iter().flat_map(|f| f.iter())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_ranges_never_overlap() {
        for defs in registry().values() {
            for (i, a) in defs.iter().enumerate() {
                for b in &defs[i + 1..] {
                    assert!(
                        !a.versions.overlaps(&b.versions),
                        "{}: overlapping ranges {:?} {:?}",
                        a.name,
                        a.versions,
                        b.versions
                    );
                }
            }
        }
    }

    #[test]
    fn ranges_overlap_when_they_share_a_version() {
        let r = |since, until| VersionRange { since, until };
        assert!(r(1, Some(5)).overlaps(&r(5, None)));
        assert!(!r(1, Some(4)).overlaps(&r(5, None)));
        assert!(r(7, None).overlaps(&r(1, Some(9))));
        assert!(!r(10, None).overlaps(&r(1, Some(9))));
    }

    #[test]
    fn every_registered_op_exists_in_the_schemas() {
        for d in all() {
            let history = opset::history(d.domain, d.name);
            assert!(
                !history.is_empty(),
                "{}::{} is not an ONNX op",
                d.domain,
                d.name
            );
            assert!(
                history
                    .iter()
                    .any(|s| d.versions.contains(s.since_version)
                        || s.since_version <= d.versions.since),
                "{}::{} range {:?} matches no schema version",
                d.domain,
                d.name,
                d.versions
            );
        }
    }
}
