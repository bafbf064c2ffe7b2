//! In-process conformance runner for kernel work (the CI gate is `crates/cli/tests/conformance.rs`,
//! which runs the real binary): `cargo run -p engine --example node_tests -- [SUBSTR ...]`
//! runs the node-corpus cases whose names contain any SUBSTR (all without arguments) and prints
//! each failure with its reason, then a count. Set `NODE_TESTS_DIR` to use another corpus dir.

use engine::compare::{compare_value, Tolerance};
use engine::{Capture, Session};
use onnx_ir::{Model, ValueType};
use std::path::Path;

fn run_case(dir: &Path) -> Result<(), String> {
    let model = Model::load(dir.join("model.onnx")).map_err(|e| e.to_string())?;
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
    let session = Session::new(model).map_err(|e| e.to_string())?;
    let mut sets: Vec<_> = std::fs::read_dir(dir)
        .map_err(|e| e.to_string())?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.is_dir())
        .collect();
    sets.sort();
    for set in sets {
        let inputs = engine::io::read_input_dir(&set, &session.inputs())?;
        let want = engine::io::read_output_dir(&set, &outputs)?;
        let got = session
            .run(inputs, &Capture::None)
            .map_err(|e| e.to_string())?;
        for (i, (w, (name, g))) in want.iter().zip(&got.outputs).enumerate() {
            if let Some(w) = w {
                let tol = Tolerance {
                    rtol: 1e-3,
                    atol: 1e-7,
                };
                compare_value(g, w, tol).map_err(|e| format!("output {i} ('{name}'): {e}"))?;
            }
        }
    }
    Ok(())
}

fn main() {
    let filters: Vec<String> = std::env::args().skip(1).collect();
    let root = std::env::var("NODE_TESTS_DIR").unwrap_or_else(|_| "corpus/node".into());
    let mut dirs: Vec<_> = std::fs::read_dir(&root)
        .unwrap_or_else(|e| panic!("{root}: {e} (run scripts/gen_node_corpus.py corpus)"))
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            filters.is_empty() || filters.iter().any(|f| n.contains(f.as_str()))
        })
        .collect();
    dirs.sort();
    std::panic::set_hook(Box::new(|_| {}));
    let (mut pass, mut fail) = (0, 0);
    for d in &dirs {
        let name = d.file_name().unwrap().to_string_lossy();
        match std::panic::catch_unwind(|| run_case(d)) {
            Ok(Ok(())) => pass += 1,
            Ok(Err(e)) => {
                fail += 1;
                println!("FAIL {name}: {e}");
            }
            Err(_) => {
                fail += 1;
                println!("FAIL {name}: panic");
            }
        }
    }
    println!("{pass} passed, {fail} failed of {}", dirs.len());
}
