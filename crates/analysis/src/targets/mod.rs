//! Deployment target profiles: one data file per backend under `crates/analysis/targets/`, embedded
//! at build time. A profile says which ops the backend accepts (with opset ranges), its dtype limits,
//! attribute restrictions and how it treats hazards (data-dependent shapes, control flow, INT64).
//! Every fact carries the id of a `[[sources]]` entry; a test rejects a fact without one and an op
//! name that is not in the ONNX schemas.

use serde::Deserialize;
use std::collections::BTreeMap;
use std::sync::OnceLock;

const FILES: &[(&str, &str)] = &[
    (
        "onnxruntime-cpu",
        include_str!("../../targets/onnxruntime-cpu.toml"),
    ),
    (
        "tensorrt-8.6",
        include_str!("../../targets/tensorrt-8.6.toml"),
    ),
    (
        "tensorrt-10",
        include_str!("../../targets/tensorrt-10.toml"),
    ),
    ("openvino", include_str!("../../targets/openvino.toml")),
    ("ncnn", include_str!("../../targets/ncnn.toml")),
    ("tract", include_str!("../../targets/tract.toml")),
];

/// Where a fact comes from: a document or source file at a version.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Source {
    pub id: String,
    pub title: String,
    pub url: String,
    pub version: String,
}

/// A group of ops the target accepts in one opset range (inclusive; `until` open when absent).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OpGroup {
    #[serde(default)]
    pub domain: String,
    pub since: Option<i64>,
    pub until: Option<i64>,
    pub ops: Vec<String>,
    pub source: String,
}

/// A limit on one op: an attribute whose values are restricted (`allowed`, compared as text), or a
/// note shown with findings about that op.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Restriction {
    pub op: String,
    pub attribute: Option<String>,
    #[serde(default)]
    pub allowed: Vec<String>,
    pub note: Option<String>,
    pub source: String,
}

/// How the target treats a kind of hazard.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Hazard {
    pub severity: String,
    pub note: String,
    pub source: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Dtypes {
    pub supported: Vec<String>,
    #[serde(default)]
    pub limited: Vec<String>,
    pub note: Option<String>,
    pub source: String,
}

/// What the backend's loader does before it looks kernels up: ops that need no kernel.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Loader {
    /// ai.onnx ops the loader consumes itself (e.g. Constant nodes turned into initializers).
    #[serde(default)]
    pub folds: Vec<String>,
    pub folds_source: Option<String>,
    /// An ai.onnx op without a kernel whose schema has a function body at the model's opset is
    /// expanded into that body.
    #[serde(default)]
    pub inlines_functions: bool,
    pub inlines_functions_source: Option<String>,
}

/// How a backend's loader runs an op it has no kernel for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LoadedAs<'p> {
    /// Consumed at load (the source id says where).
    Folded(&'p str),
    /// Expanded into the schema's function body at load.
    Inlined(&'p str),
}

/// One backend profile, as its data file states it.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub name: String,
    pub backend: String,
    pub version: String,
    pub opset_min: Option<i64>,
    pub opset_max: Option<i64>,
    pub opset_source: Option<String>,
    /// `"cast-to-int32"` (INT64 values are narrowed) or `"native"`; absent when unknown.
    pub int64: Option<String>,
    pub int64_source: Option<String>,
    pub sources: Vec<Source>,
    pub dtypes: Option<Dtypes>,
    #[serde(default)]
    pub hazards: BTreeMap<String, Hazard>,
    #[serde(default)]
    pub ops: Vec<OpGroup>,
    #[serde(default)]
    pub restrictions: Vec<Restriction>,
    #[serde(default)]
    pub loader: Loader,
}

/// Whether a target accepts an op at an opset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support<'p> {
    /// Accepted; the group that says so.
    Yes(&'p OpGroup),
    /// The target knows the op, but not at this opset: the ranges it accepts.
    OutsideRange(Vec<(Option<i64>, Option<i64>)>),
    /// Not in the target's list.
    No,
}

impl Profile {
    /// Does the target accept `op` of `domain` when the model imports `opset` for that domain?
    pub fn support(&self, domain: &str, op: &str, opset: i64) -> Support<'_> {
        let domain = if domain == "ai.onnx" { "" } else { domain };
        let mut ranges = Vec::new();
        for g in &self.ops {
            if g.domain != domain || !g.ops.iter().any(|o| o == op) {
                continue;
            }
            if g.since.is_none_or(|s| opset >= s) && g.until.is_none_or(|u| opset <= u) {
                return Support::Yes(g);
            }
            ranges.push((g.since, g.until));
        }
        if ranges.is_empty() {
            Support::No
        } else {
            Support::OutsideRange(ranges)
        }
    }

    /// Whether the loader runs the ai.onnx `op` without a kernel at `opset` (folded, or inlined
    /// from its schema function body): [`Profile::support`] lists kernels, this the rest.
    pub fn loaded_without_kernel(&self, op: &str, opset: i64) -> Option<LoadedAs<'_>> {
        let l = &self.loader;
        if l.folds.iter().any(|o| o == op) {
            return Some(LoadedAs::Folded(l.folds_source.as_deref().unwrap_or("")));
        }
        if l.inlines_functions {
            let schema = opset::schema(op, opset)?;
            if schema.has_context_dependent_function || schema.function_body(opset).is_some() {
                return Some(LoadedAs::Inlined(
                    l.inlines_functions_source.as_deref().unwrap_or(""),
                ));
            }
        }
        None
    }

    /// The restrictions the profile lists for `op`.
    pub fn restrictions<'a>(&'a self, op: &'a str) -> impl Iterator<Item = &'a Restriction> + 'a {
        self.restrictions.iter().filter(move |r| r.op == op)
    }

    pub fn hazard(&self, kind: &str) -> Option<&Hazard> {
        self.hazards.get(kind)
    }

    pub fn source(&self, id: &str) -> Option<&Source> {
        self.sources.iter().find(|s| s.id == id)
    }

    /// Number of distinct ops the profile accepts.
    pub fn op_count(&self) -> usize {
        let mut names: Vec<(&str, &str)> = self
            .ops
            .iter()
            .flat_map(|g| g.ops.iter().map(move |o| (g.domain.as_str(), o.as_str())))
            .collect();
        names.sort_unstable();
        names.dedup();
        names.len()
    }

    /// True when the target narrows INT64 to INT32.
    pub fn casts_int64(&self) -> bool {
        self.int64.as_deref() == Some("cast-to-int32")
    }
}

/// Every profile, in a fixed order.
pub fn profiles() -> &'static [Profile] {
    static ALL: OnceLock<Vec<Profile>> = OnceLock::new();
    ALL.get_or_init(|| {
        FILES
            .iter()
            .map(|(name, text)| {
                // The files are ours and embedded; the tests parse every one of them.
                toml::from_str(text)
                    .unwrap_or_else(|e| panic!("targets/{name}.toml is malformed: {e}"))
            })
            .collect()
    })
}

/// The profile called `name`.
pub fn profile(name: &str) -> Option<&'static Profile> {
    profiles().iter().find(|p| p.name == name)
}

/// Resolves a `--target` list: comma-separated names, or `all`. Errors name the unknown target.
pub fn resolve(list: &str) -> Result<Vec<&'static Profile>, String> {
    if list.trim() == "all" {
        return Ok(profiles().iter().collect());
    }
    let mut out: Vec<&'static Profile> = Vec::new();
    for name in list.split(',').map(str::trim).filter(|s| !s.is_empty()) {
        let p = profile(name).ok_or_else(|| {
            let known: Vec<&str> = profiles().iter().map(|p| p.name.as_str()).collect();
            format!(
                "unknown target '{name}' (known: {}, or all)",
                known.join(", ")
            )
        })?;
        if !out.iter().any(|q| q.name == p.name) {
            out.push(p);
        }
    }
    if out.is_empty() {
        return Err("--target needs at least one target name, or all".into());
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_profile_parses_and_names_its_file() {
        assert_eq!(profiles().len(), FILES.len());
        for (p, (file, _)) in profiles().iter().zip(FILES) {
            assert_eq!(&p.name, file);
            assert!(!p.sources.is_empty(), "{}: no sources", p.name);
        }
    }

    #[test]
    fn every_fact_names_a_known_source() {
        for p in profiles() {
            let mut ids: Vec<&str> = Vec::new();
            for s in &p.sources {
                assert!(
                    !ids.contains(&s.id.as_str()),
                    "{}: duplicate source {}",
                    p.name,
                    s.id
                );
                assert!(
                    s.url.starts_with("https://"),
                    "{}: {} has no URL",
                    p.name,
                    s.id
                );
                assert!(!s.version.is_empty() && !s.title.is_empty());
                ids.push(&s.id);
            }
            let mut cited: Vec<(&str, String)> = Vec::new();
            for g in &p.ops {
                cited.push((&g.source, format!("ops {:?}", g.ops.first())));
            }
            for r in &p.restrictions {
                cited.push((&r.source, format!("restriction on {}", r.op)));
                assert!(
                    r.note.is_some() || (r.attribute.is_some() && !r.allowed.is_empty()),
                    "{}: restriction on {} says nothing",
                    p.name,
                    r.op
                );
            }
            for (k, h) in &p.hazards {
                cited.push((&h.source, format!("hazard {k}")));
                assert!(matches!(h.severity.as_str(), "info" | "warning" | "error"));
            }
            if let Some(d) = &p.dtypes {
                cited.push((&d.source, "dtypes".into()));
            }
            let l = &p.loader;
            match (l.folds.is_empty(), &l.folds_source) {
                (false, Some(s)) => cited.push((s, "loader folds".into())),
                (true, None) => {}
                _ => panic!("{}: loader folds without a source", p.name),
            }
            match (l.inlines_functions, &l.inlines_functions_source) {
                (true, Some(s)) => cited.push((s, "loader inlines functions".into())),
                (false, None) => {}
                _ => panic!("{}: loader function inlining without a source", p.name),
            }
            for op in &l.folds {
                assert!(
                    !opset::history("", op).is_empty(),
                    "{}: loader folds unknown op {op}",
                    p.name
                );
            }
            match (&p.int64, &p.int64_source) {
                (Some(_), Some(s)) => cited.push((s, "int64".into())),
                (None, None) => {}
                _ => panic!("{}: int64 without a source", p.name),
            }
            match (p.opset_min.or(p.opset_max), &p.opset_source) {
                (Some(_), Some(s)) => cited.push((s, "opset range".into())),
                (None, None) => {}
                _ => panic!("{}: opset range without a source", p.name),
            }
            for (id, what) in cited {
                assert!(
                    ids.contains(&id),
                    "{}: {what} cites unknown source '{id}'",
                    p.name
                );
            }
        }
    }

    #[test]
    fn every_op_exists_in_the_onnx_schemas() {
        for p in profiles() {
            for g in &p.ops {
                assert!(!g.ops.is_empty());
                for op in &g.ops {
                    let history = opset::history(&g.domain, op);
                    assert!(!history.is_empty(), "{}: '{op}' is not an ONNX op", p.name);
                    if let Some(since) = g.since {
                        assert!(
                            history
                                .iter()
                                .any(|s| s.since_version <= g.until.unwrap_or(i64::MAX))
                                && since >= 1,
                            "{}: {op} since {since} predates the op",
                            p.name
                        );
                    }
                }
            }
            for r in &p.restrictions {
                assert!(
                    !opset::history("", &r.op).is_empty(),
                    "{}: restriction on unknown op {}",
                    p.name,
                    r.op
                );
                if let Some(a) = &r.attribute {
                    assert!(
                        opset::history("", &r.op)
                            .iter()
                            .any(|s| s.attribute(a).is_some()),
                        "{}: {} has no attribute {a}",
                        p.name,
                        r.op
                    );
                }
            }
        }
    }

    #[test]
    fn lookups_follow_the_data() {
        let trt = profile("tensorrt-8.6").unwrap();
        assert!(matches!(trt.support("", "NonZero", 13), Support::Yes(_)));
        assert_eq!(trt.support("", "Unique", 13), Support::No);
        assert!(trt.casts_int64());
        let ort = profile("onnxruntime-cpu").unwrap();
        // Upsample's CPU kernels end at opset 9 (the op is deprecated from 10).
        assert!(matches!(ort.support("", "Upsample", 9), Support::Yes(_)));
        assert!(matches!(
            ort.support("", "Upsample", 10),
            Support::OutsideRange(_)
        ));
        assert!(!ort.casts_int64());
        // Constant has no CPU kernel: the graph loader turns it into an initializer.
        assert_eq!(ort.support("", "Constant", 17), Support::No);
        assert!(matches!(
            ort.loaded_without_kernel("Constant", 17),
            Some(LoadedAs::Folded("ort-graph"))
        ));
        // HardSwish has no CPU kernel but a function body: inlined. ImageDecoder has neither.
        assert!(matches!(
            ort.loaded_without_kernel("HardSwish", 17),
            Some(LoadedAs::Inlined(_))
        ));
        assert_eq!(ort.loaded_without_kernel("ImageDecoder", 21), None);
        assert_eq!(trt.loaded_without_kernel("HardSwish", 17), None);
        let ncnn = profile("ncnn").unwrap();
        assert!(matches!(ncnn.support("", "Conv", 13), Support::Yes(_)));
        assert_eq!(ncnn.support("", "NonZero", 13), Support::No);
        let tract = profile("tract").unwrap();
        assert!(matches!(tract.support("", "If", 13), Support::Yes(_)));
        assert_eq!(tract.support("", "Loop", 13), Support::No);
        assert!(resolve("all").unwrap().len() == profiles().len());
        assert_eq!(resolve("tensorrt-10, openvino").unwrap().len(), 2);
        assert!(resolve("tensorrt-7").unwrap_err().contains("tensorrt-7"));
    }
}
