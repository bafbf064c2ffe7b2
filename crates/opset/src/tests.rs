//! Hand-checked lookups (facts verified against onnx 1.23.2) and invariants of the data file.

use super::*;

/// The since_version of the schema in force, or `None`.
fn version(op: &str, opset: i64) -> Option<i64> {
    schema(op, opset).map(|s| s.since_version)
}

fn get(op: &str, opset: i64) -> &'static Schema {
    schema(op, opset).unwrap_or_else(|| panic!("{op} at opset {opset} exists"))
}

#[test]
fn lookup_picks_the_schema_in_force() {
    assert_eq!(version("Resize", 13), Some(13));
    assert_eq!(version("Resize", 12), Some(11));
    assert_eq!(version("Resize", 10), Some(10));
    assert_eq!(version("Resize", 9), None);

    for (opset, expected) in [(1, 1), (5, 1), (6, 6), (7, 7), (12, 7), (13, 13), (14, 14)] {
        assert_eq!(
            version("Add", opset),
            Some(expected),
            "Add at opset {opset}"
        );
    }
    assert_eq!(version("Add", 0), None);
    assert_eq!(version("Add", i64::MAX), Some(14));

    assert_eq!(version("Conv", 10), Some(1));
    assert_eq!(version("Conv", 21), Some(11));
    assert_eq!(version("Conv", 22), Some(22));
    assert_eq!(version("NoSuchOp", 22), None);
}

#[test]
fn ai_onnx_is_the_default_domain() {
    let a = schema_in("ai.onnx", "Add", 14).unwrap();
    let b = schema_in("", "Add", 14).unwrap();
    assert!(std::ptr::eq(a, b));
    assert_eq!(a.domain, "");
    assert_eq!(history("ai.onnx", "Add").len(), 5);
}

#[test]
fn attributes_change_across_versions() {
    let add6 = get("Add", 6);
    assert_eq!(add6.attribute("broadcast").unwrap().ty, AttributeType::Int);
    assert!(get("Add", 14).attributes.is_empty());
    let t = get("Add", 14).type_constraint("T").unwrap();
    assert!(t.allowed_type_strs.iter().any(|t| t == "tensor(bfloat16)"));
}

#[test]
fn lstm_optional_inputs_and_outputs() {
    let lstm = get("LSTM", 22);
    let options: Vec<_> = lstm
        .inputs
        .iter()
        .map(|p| (p.name.as_str(), p.option))
        .collect();
    use Optionality::{Optional, Single};
    assert_eq!(
        options,
        [
            ("X", Single),
            ("W", Single),
            ("R", Single),
            ("B", Optional),
            ("sequence_lens", Optional),
            ("initial_h", Optional),
            ("initial_c", Optional),
            ("P", Optional),
        ]
    );
    assert!(lstm.outputs.iter().all(|p| p.option == Optional));
    assert_eq!((lstm.min_inputs, lstm.max_inputs), (3, Some(8)));
}

#[test]
fn variadic_inputs() {
    let concat = get("Concat", 13);
    let inputs = &concat.inputs[0];
    assert_eq!(inputs.option, Optionality::Variadic);
    assert_eq!(inputs.min_arity, 1);
    assert_eq!(concat.max_inputs, None);
    assert!(concat.attribute("axis").unwrap().required);

    let max = get("Max", 13);
    assert_eq!(max.inputs[0].option, Optionality::Variadic);
    assert!(max.inputs[0].is_homogeneous);

    // If's outputs may differ in type from one another.
    let outputs = &get("If", 21).outputs[0];
    assert_eq!(outputs.option, Optionality::Variadic);
    assert!(!outputs.is_homogeneous);
}

#[test]
fn graph_and_required_attributes() {
    let r#if = get("If", 21);
    for branch in ["then_branch", "else_branch"] {
        let attr = r#if.attribute(branch).unwrap();
        assert_eq!(
            (attr.ty, attr.required),
            (AttributeType::Graph, true),
            "{branch}"
        );
    }
    let to = get("Cast", 21).attribute("to").unwrap();
    assert_eq!(
        (to.ty, to.required, &to.default),
        (AttributeType::Int, true, &None)
    );
}

#[test]
fn attribute_defaults() {
    let alpha = get("LeakyRelu", 16).attribute("alpha").unwrap();
    assert_eq!(alpha.default, Some(AttributeValue::Float(0.01)));
    let mode = get("Resize", 19).attribute("mode").unwrap();
    assert_eq!(mode.default, Some(AttributeValue::String("nearest".into())));
    let lstm = get("LSTM", 22);
    assert_eq!(
        lstm.attribute("direction").unwrap().default,
        Some(AttributeValue::String("forward".into()))
    );
}

#[test]
fn ml_domain() {
    let lc = schema_in(ML_DOMAIN, "LinearClassifier", 5).unwrap();
    assert_eq!(lc.since_version, 1);
    assert!(lc.attribute("coefficients").unwrap().required);
    assert_eq!(
        lc.attribute("post_transform").unwrap().default,
        Some(AttributeValue::String("NONE".into()))
    );
    assert_eq!(lc.outputs[1].type_str, "tensor(float)");
    assert!(
        schema("LinearClassifier", 28).is_none(),
        "not in the default domain"
    );
    assert!(ops(ML_DOMAIN).any(|op| op == "TreeEnsemble"));
}

#[test]
fn static_function_bodies_per_opset() {
    let mvn = get("MeanVarianceNormalization", 13);
    assert!(mvn.function_body(12).is_none());
    let opset_of = |opset| {
        let body = mvn.function_body(opset).unwrap().unwrap();
        assert!(body
            .node
            .iter()
            .any(|n| n.op_type.as_deref() == Some("ReduceMean")));
        body.opset_import[0].version
    };
    assert_eq!(opset_of(13), Some(13));
    assert_eq!(opset_of(17), Some(13));
    assert_eq!(
        opset_of(18),
        Some(18),
        "ReduceMean-18 takes axes as an input"
    );
    assert_eq!(mvn.function_opsets().collect::<Vec<_>>(), [13, 18]);

    // Softplus-1 has a body written against opset 18 only.
    assert!(get("Softplus", 17).function_body(17).is_none());
    assert!(get("Softplus", 18).function_body(18).is_some());
}

#[test]
fn context_dependent_functions_are_flagged_not_stored() {
    let ln = get("LayerNormalization", 17);
    assert!(ln.has_context_dependent_function);
    assert!(!ln.has_function());
    assert!(ln.function_body(17).is_none());
}

#[test]
fn deprecated_schemas_are_returned_flagged() {
    let upsample = get("Upsample", 10);
    assert!(upsample.deprecated);
    assert!(!get("Upsample", 9).deprecated);
    assert!(get("Upsample", 28).deprecated, "deprecated stays in force");
}

#[test]
fn header_and_opsets() {
    assert_eq!(onnx_version(), "1.23.2");
    assert_eq!(released_opset(""), Some(28));
    assert_eq!(released_opset("ai.onnx.ml"), Some(5));
    assert_eq!(latest_opset("ai.onnx"), Some(28));
    assert_eq!(latest_opset(ML_DOMAIN), Some(5));
    assert_eq!(latest_opset("no.such.domain"), None);
}

/// Data-driven: every stored function body decodes, every history strictly increases, and the
/// number of schemas matches what the generator recorded.
#[test]
fn data_invariants() {
    let file: DataFile = serde_json::from_str(DATA).unwrap();
    assert_eq!(all().count(), file.schema_count);
    assert!(domains().any(|d| d == DEFAULT_DOMAIN));
    for domain in domains() {
        assert_eq!(latest_opset(domain), history_max(domain));
        for op in ops(domain) {
            let versions = history(domain, op);
            assert!(!versions.is_empty());
            for pair in versions.windows(2) {
                assert!(
                    pair[0].since_version < pair[1].since_version,
                    "{domain}::{op}: since_versions must strictly increase"
                );
            }
            for s in versions {
                assert_eq!((s.domain.as_str(), s.name.as_str()), (domain, op));
                check_schema(s);
            }
        }
    }
}

fn history_max(domain: &str) -> Option<i64> {
    all()
        .filter(|s| s.domain == domain)
        .map(|s| s.since_version)
        .max()
}

fn check_schema(s: &Schema) {
    let id = format!("{}::{}-{}", s.domain, s.name, s.since_version);
    for opset in s.function_opsets() {
        let body = s.function_body(opset).unwrap();
        assert!(body.is_ok(), "{id}: {body:?}");
    }
    for p in s.inputs.iter().chain(&s.outputs) {
        let literal = p.type_str.contains('(');
        assert!(
            literal || s.type_constraint(&p.type_str).is_some(),
            "{id}: {} has unconstrained type {}",
            p.name,
            p.type_str
        );
    }
    for a in &s.attributes {
        assert!(!(a.required && a.default.is_some()), "{id}: {}", a.name);
    }
}

#[test]
fn hex_bytes() {
    let decode = |s: &str| HexBytes::try_from(s.to_string()).map(|b| b.0);
    assert_eq!(decode("00ff7a"), Ok(vec![0, 255, 0x7a]));
    assert!(decode("abc").is_err());
    assert!(decode("zz").is_err());
}

/// Not an assertion: run `cargo test -p opset --release -- --nocapture parse_time` to measure.
#[test]
fn parse_time() {
    let start = std::time::Instant::now();
    let registry = Registry::parse(DATA).unwrap();
    let elapsed = start.elapsed();
    let count: usize = registry
        .domains
        .values()
        .flat_map(|ops| ops.values())
        .map(Vec::len)
        .sum();
    println!(
        "parsed {count} schemas ({} KiB) in {elapsed:?}",
        DATA.len() / 1024
    );
}
