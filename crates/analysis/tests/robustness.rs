//! The checker and shape inference never panic, whatever a (decodable) model contains: bit-flipped
//! copies of corpus models that still load are checked in-process.

use bytes::Bytes;
use onnx_ir::Model;
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn seeds() -> Vec<PathBuf> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let corpus = root.join("corpus/node");
    assert!(
        corpus.is_dir(),
        "{} is missing: run scripts/gen_node_corpus.py",
        corpus.display()
    );
    let mut v = vec![root.join("examples/tiny_cnn.onnx")];
    let mut all: Vec<PathBuf> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path().join("model.onnx"))
        .collect();
    all.sort();
    // Every 12th case: a spread over all op families, subgraphs and functions.
    v.extend(all.into_iter().step_by(12));
    v
}

#[test]
fn mutated_models_never_panic_the_checker() {
    let mut rng = Rng(0x1234_5678_9abc_def1);
    let (mut loaded, mut total) = (0, 0);
    for path in seeds() {
        let good = std::fs::read(&path).unwrap();
        for _ in 0..25 {
            let mut b = good.clone();
            for _ in 0..1 + rng.next() % 4 {
                let at = (rng.next() as usize) % b.len();
                b[at] ^= 1 << (rng.next() % 8);
            }
            total += 1;
            let Ok(model) = Model::from_bytes(Bytes::from(b), Path::new("mutant.onnx"), None)
            else {
                continue;
            };
            loaded += 1;
            let r = catch_unwind(AssertUnwindSafe(|| {
                analysis::check(&model, "mutant.onnx", &HashMap::new())
            }));
            let findings =
                r.unwrap_or_else(|_| panic!("check panicked on a mutant of {}", path.display()));
            // An op rule that panics is caught by the driver and reported; that is still a bug.
            let internal: Vec<_> = findings
                .iter()
                .filter(|d| d.message.contains("internal error"))
                .collect();
            assert!(
                internal.is_empty(),
                "mutant of {}: {internal:?}",
                path.display()
            );
            let shapes = catch_unwind(AssertUnwindSafe(|| {
                let inference = analysis::infer(&model, "mutant.onnx", &HashMap::new());
                let mut proto = model.proto.clone();
                analysis::apply(&mut proto, &inference);
            }));
            assert!(
                shapes.is_ok(),
                "shapes panicked on a mutant of {}",
                path.display()
            );
        }
    }
    println!("{total} mutants, {loaded} still loaded and were checked without a panic");
    assert!(loaded > 500, "too few loadable mutants: {loaded}");
}
