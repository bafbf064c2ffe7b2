//! Every finding `check` can report: code, name, severity and what it means, in one table.

use diagnostics::Severity;

macro_rules! codes {
    ($( $variant:ident = $code:literal, $name:literal, $sev:ident, $summary:literal; )*) => {
        /// A kind of finding.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum Code { $( $variant, )* }

        /// All codes, in table order.
        pub const ALL_CODES: &[Code] = &[ $( Code::$variant, )* ];

        impl Code {
            /// The stable code, e.g. `ODC040`.
            pub fn code(self) -> &'static str { match self { $( Code::$variant => $code, )* } }
            /// The kebab-case name of the pattern it flags.
            pub fn name(self) -> &'static str { match self { $( Code::$variant => $name, )* } }
            pub fn severity(self) -> Severity { match self { $( Code::$variant => Severity::$sev, )* } }
            /// One sentence: what is wrong.
            pub fn summary(self) -> &'static str { match self { $( Code::$variant => $summary, )* } }
        }
    };
}

codes! {
    IrVersionMissing = "ODC001", "ir-version-missing", Error, "The model does not set ir_version.";
    IrVersionUnknown = "ODC002", "ir-version-unknown", Error, "ir_version is outside the versions the ONNX spec defines (1 to 14).";
    OpsetImportMissing = "ODC003", "opset-import-missing", Error, "A node uses a domain the model does not import (or IR >= 3 without any opset_import).";
    OpsetImportDuplicate = "ODC004", "opset-import-duplicate", Error, "The same domain is imported twice.";
    OpsetNewerThanKnown = "ODC005", "opset-newer-than-known", Warning, "An imported opset is newer than the schemas this tool knows (onnx 1.23.2).";
    IrTooOldForOpset = "ODC006", "ir-too-old-for-opset", Warning, "ir_version predates the IR version the imported ai.onnx opset was released with.";
    OpUnknown = "ODC010", "op-unknown", Error, "No operator of that name exists in the node's domain.";
    OpNotYetInOpset = "ODC011", "op-not-yet-in-opset", Error, "The operator exists, but only from a later opset than the model imports.";
    OpDeprecated = "ODC012", "op-deprecated", Error, "The operator is deprecated at the imported opset.";
    CustomOpWithoutFunction = "ODC013", "custom-op-without-function", Warning, "A node of a custom domain has no model-local function: only runtimes with that op registered can run it.";
    InputArity = "ODC020", "input-arity", Error, "The node has more or fewer inputs than the schema allows.";
    OutputArity = "ODC021", "output-arity", Error, "The node has more or fewer outputs than the schema allows.";
    RequiredInputMissing = "ODC022", "required-input-missing", Error, "A non-optional input or output is given as the empty name.";
    AttributeUnknown = "ODC030", "attribute-unknown", Error, "The node has an attribute its operator does not define.";
    AttributeWrongType = "ODC031", "attribute-wrong-type", Error, "An attribute's type differs from the schema's, or its value is not in the field its type names.";
    AttributeRequiredMissing = "ODC032", "attribute-required-missing", Error, "A required attribute is missing.";
    AttributeDuplicate = "ODC033", "attribute-duplicate", Error, "The same attribute is given twice.";
    AttributeRefOutsideFunction = "ODC034", "attribute-ref-outside-function", Error, "ref_attr_name is only allowed inside a function body.";
    TypeConstraintViolated = "ODC040", "type-constraint-violated", Error, "A value's type is not allowed by the operator's type constraint, or values bound to one type parameter differ.";
    ElemTypeUnknown = "ODC041", "elem-type-unknown", Error, "A type names an element type code ONNX does not define.";
    GraphIoUntyped = "ODC042", "graph-io-untyped", Error, "A graph input or output has no type.";
    DeclaredTypeContradicted = "ODC045", "declared-type-contradicted", Error, "A value_info or graph output declares an element type that the node computing the value cannot produce from its inputs.";
    DeclaredShapeContradicted = "ODC046", "declared-shape-contradicted", Error, "A value_info or graph output declares a shape that contradicts the shape inferred from the node's inputs.";
    ShapeInferenceFailed = "ODC070", "shape-inference-failed", Error, "Shape inference of a node fails: its inputs' shapes or its attributes are inconsistent, so the node cannot run.";
    InitializerInputMismatch = "ODC043", "initializer-input-mismatch", Error, "An initializer and the graph input of the same name disagree on type or shape.";
    InitializerNotInput = "ODC044", "initializer-not-input", Error, "Before IR version 4 every initializer must also be a graph input.";
    ValueUndefined = "ODC050", "value-undefined", Error, "A node input or graph output names a value nothing defines.";
    NotTopologicallySorted = "ODC051", "not-topologically-sorted", Error, "A node uses a value that a later node produces.";
    Cycle = "ODC052", "cycle", Error, "Nodes depend on each other in a cycle.";
    ValueRedefined = "ODC053", "value-redefined", Error, "A value is defined more than once (ONNX graphs are in single static assignment form).";
    NameEmpty = "ODC054", "name-empty", Error, "A graph input, output or initializer has an empty name.";
    FunctionDuplicate = "ODC060", "function-duplicate", Error, "Two model-local functions have the same domain, name and overload.";
    FunctionOutputUndefined = "ODC061", "function-output-undefined", Error, "A function output is not produced by the function body.";
    NodeNameDuplicate = "ODC100", "node-name-duplicate", Warning, "Two nodes of one graph share a name; tools that address nodes by name get confused.";
    InputUnused = "ODC101", "input-unused", Warning, "A graph input is never used.";
    InitializerUnused = "ODC102", "initializer-unused", Warning, "An initializer is never used: it only makes the file bigger.";
    DeadNode = "ODC103", "dead-node", Warning, "No output of the node reaches a graph output.";
    // Deployment lints (crates/analysis/src/lints/, one file per rule); target rules take their
    // severity per target from the profile (crates/analysis/targets/*.toml).
    TargetOpUnsupported = "ODT001", "target-op-unsupported", Error, "The target backend does not implement the operator, or not at the model's opset; or a custom-domain op has no model-local function, which no backend loads without a plugin.";
    TargetOpsetUnsupported = "ODT002", "target-opset-unsupported", Error, "The model imports an ai.onnx opset outside the range the target's ONNX importer accepts.";
    TargetAttributeUnsupported = "ODT003", "target-attribute-unsupported", Error, "An attribute value the target backend documents as unsupported for that operator.";
    Int64OnTensorrt = "ODT010", "int64-on-tensorrt", Error, "An INT64 initializer or Constant with values outside the INT32 range, on a target that narrows INT64 to INT32 and clamps them (info when only used as a Slice start/end or NonMaxSuppression limit, where the clamp changes nothing).";
    DataDependentShape = "ODT020", "data-dependent-shape", Warning, "An operator whose output shape depends on input values (NonZero, Unique, NonMaxSuppression, Compress, TopK with a computed k).";
    ControlFlow = "ODT021", "control-flow", Warning, "An If, Loop or Scan node: the target must run a subgraph, with restrictions on branch and loop shapes.";
    InitializerAsInput = "ODT030", "initializer-as-input", Warning, "Initializers are also listed as graph inputs (keep_initializers_as_inputs=True), so runtimes treat weights as overridable inputs.";
    TrainingModeExport = "ODT031", "training-mode-export", Warning, "Dropout or BatchNormalization was exported in training mode.";
    MetadataPathLeak = "ODT032", "metadata-path-leak", Warning, "Model or node metadata (e.g. pkg.torch.onnx.stack_trace) contains absolute file paths of the exporting machine.";
    BakedDynamicDim = "ODT033", "baked-dynamic-dim", Warning, "A size computed at export time (a constant Reshape/Expand shape or Range/ConstantOfShape/Slice/Tile size, a constant entry of a computed Reshape shape, a folded arange/zeros tensor) fixes a dimension the graph declares symbolic: the export-time size was baked in.";
    ProtobufSizeLimit = "ODT034", "protobuf-size-limit", Warning, "The serialized ModelProto (without external data) is over 2 GiB (error) or above 90 % of it (info): protobuf cannot load or save it.";
    MixedDtypeOperands = "ODT035", "mixed-dtype-operands", Error, "Operands ONNX binds to one type parameter (arithmetic, comparisons, Where branches, Concat inputs) have different element types.";
    FixedBatchDim = "ODT036", "fixed-batch-dim", Info, "A graph input named as a batch (batch_images, input_batch) has a fixed leading dim: the model only accepts that batch size (no dynamic_axes for it).";
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn codes_and_names_are_unique_and_well_formed() {
        let mut codes = HashSet::new();
        let mut names = HashSet::new();
        for c in ALL_CODES {
            assert!(codes.insert(c.code()), "duplicate code {}", c.code());
            assert!(names.insert(c.name()), "duplicate name {}", c.name());
            assert!(
                (c.code().starts_with("ODC") || c.code().starts_with("ODT")) && c.code().len() == 6
            );
            assert!(c.summary().ends_with('.'));
        }
    }

    /// docs/checks.md is generated from this table: a stale file fails this test.
    #[test]
    fn docs_table_is_current() {
        let mut table = String::from(
            "# `check` findings\n\nGenerated from `crates/analysis/src/codes.rs` (a test fails when this file is stale;\n\
             regenerate with `UPDATE_DOCS=1 cargo test -p analysis docs_table`).\n\n\
             | code | name | severity | meaning |\n|---|---|---|---|\n",
        );
        for c in ALL_CODES {
            table.push_str(&format!(
                "| {} | {} | {} | {} |\n",
                c.code(),
                c.name(),
                c.severity().as_str(),
                c.summary()
            ));
        }
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/checks.md");
        if std::env::var_os("UPDATE_DOCS").is_some() {
            std::fs::write(&path, &table).unwrap();
        }
        let current = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(
            current, table,
            "docs/checks.md is stale: run UPDATE_DOCS=1 cargo test -p analysis docs_table"
        );
    }
}
