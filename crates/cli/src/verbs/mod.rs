//! The verb registry: one file per verb, each with `Args` and `run`.

pub mod bench;
pub mod check;
pub mod compare;
pub mod explain;
pub mod inspect;
pub mod lint;
pub mod rule;
pub mod run;
pub mod shapes;
pub mod targets;
pub mod verify;

use std::process::ExitCode;

#[derive(clap::Subcommand)]
pub enum Verb {
    /// Summarise a model: IR version, producer, opsets, inputs/outputs, op histogram, parameters.
    Inspect(inspect::Args),
    /// Lint PyTorch source for ONNX export hazards (rules: docs/rules.md).
    Lint(lint::Args),
    /// Explain an exporter / ONNX Runtime / TensorRT error or traceback, or a lint rule (CODE).
    Explain(explain::Args),
    /// Check a model against the ONNX spec: opsets, operator schemas, attributes, types, graph structure.
    Check(check::Args),
    /// Run a model on the native CPU engine: inputs from .npy/.pb files or random, outputs to .npz or .pb.
    Run(run::Args),
    /// Time a model: load, latency percentiles, throughput, peak RSS; on our engine or, in builds with the feature, onnxruntime or tract.
    Bench(bench::Args),
    /// Compare a model's outputs (and, layer by layer, its intermediates) with a reference or a second model.
    Compare(compare::Args),
    /// Infer every value's type and shape and write them into a copy of the model.
    Shapes(shapes::Args),
    /// Print what a finding code means: ODL (lint), ODT (check --target), ODC (check).
    Rule(rule::Args),
    /// Check that dynamic axes work: run at several sizes of each symbolic dim and name what breaks.
    Verify(verify::Args),
    /// List the deployment target profiles `check --target` uses, with versions and sources.
    Targets(targets::Args),
}

pub fn run(verb: Verb) -> anyhow::Result<ExitCode> {
    match verb {
        Verb::Inspect(args) => inspect::run(args),
        Verb::Lint(args) => lint::run(args),
        Verb::Explain(args) => explain::run(args),
        Verb::Check(args) => check::run(args),
        Verb::Run(args) => run::run(args),
        Verb::Bench(args) => bench::run(args),
        Verb::Compare(args) => compare::run(args),
        Verb::Shapes(args) => shapes::run(args),
        Verb::Rule(args) => rule::run(args),
        Verb::Targets(args) => targets::run(args),
        Verb::Verify(args) => verify::run(args),
    }
}
