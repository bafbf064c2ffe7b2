//! In-process conformance runner for kernel work (the CI gate is `crates/cli/tests/conformance.rs`,
//! which runs the real binary): `cargo run -p engine --example node_tests -- [SUBSTR ...]`
//! runs the node-corpus cases whose names contain any SUBSTR (all without arguments) and prints
//! each failure with its reason, then a count. Set `NODE_TESTS_DIR` to use another corpus dir.

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
        match std::panic::catch_unwind(|| engine::conformance::run_case(d).0) {
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
