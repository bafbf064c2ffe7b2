//! Running one ONNX test case (a directory with `model.onnx` and `test_data_set_*/`) in
//! process, for the kernel developers' runner (`examples/node_tests.rs`) and the operator
//! coverage table (`tests/operators_doc.rs`). The CI gate runs the real binary instead
//! (`crates/cli/tests/conformance.rs`).

use crate::compare::{compare_value, Tolerance};
use crate::{Capture, NodeRecord, Session};
use onnx_ir::{Model, ValueType};
use std::path::Path;

/// The backend-test tolerances.
pub const TOLERANCE: Tolerance = Tolerance {
    rtol: 1e-3,
    atol: 1e-7,
};

/// Runs every data set of the case in `dir`; `Err` says why it failed. Also returns the nodes
/// that ran.
pub fn run_case(dir: &Path) -> (Result<(), String>, Vec<NodeRecord>) {
    let model = match Model::load(dir.join("model.onnx")) {
        Ok(m) => m,
        Err(e) => return (Err(e.to_string()), Vec::new()),
    };
    let outputs: Vec<(String, ValueType)> = model
        .graph()
        .output
        .iter()
        .map(|o| {
            (
                o.name().to_string(),
                ValueType::from_proto(o.r#type.as_ref()),
            )
        })
        .collect();
    let mut session = match Session::new(model) {
        Ok(s) => s,
        Err(e) => return (Err(e.to_string()), Vec::new()),
    };
    session.enable_trace();
    let result = run_sets(&session, dir, &outputs);
    (result, session.take_trace())
}

fn run_sets(session: &Session, dir: &Path, outputs: &[(String, ValueType)]) -> Result<(), String> {
    let mut sets: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    sets.sort();
    for set in sets {
        let inputs = crate::io::read_input_dir(&set, &session.inputs())?;
        let want = crate::io::read_output_dir(&set, outputs)?;
        let got = session
            .run(inputs, &Capture::None)
            .map_err(|e| e.to_string())?;
        for (i, (w, (name, g))) in want.iter().zip(&got.outputs).enumerate() {
            if let Some(w) = w {
                compare_value(g, w, TOLERANCE)
                    .map_err(|e| format!("output {i} ('{name}'): {e}"))?;
            }
        }
    }
    Ok(())
}
