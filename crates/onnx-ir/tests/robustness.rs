//! No input file, however malformed, makes loading panic or allocate without bound: truncated,
//! bit-flipped and random files, and tensors with absurd dims, all give typed errors.

mod common;

use bytes::Bytes;
use onnx_ir::Model;
use onnx_proto::{GraphProto, Message, ModelProto, TensorProto};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::Path;

/// xorshift64*: deterministic, so a failure is reproducible from the printed case number.
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

fn seeds() -> Vec<Vec<u8>> {
    let root = common::workspace();
    let mut v = vec![std::fs::read(root.join("examples/tiny_cnn.onnx")).unwrap()];
    // Seeds with subgraphs, sequences, strings and sparse tensors, so mutations reach those decoders.
    for case in [
        "test_if_seq",
        "test_loop11",
        "test_scan9_sum",
        "test_string_concat",
        "test_constant",
        "test_sequence_map_identity_1_sequence",
    ] {
        if let Ok(b) = std::fs::read(root.join("corpus/node").join(case).join("model.onnx")) {
            v.push(b);
        }
    }
    v
}

fn load(bytes: Vec<u8>, case: usize) -> Result<(), String> {
    let name = format!("case{case}.onnx");
    let result = catch_unwind(AssertUnwindSafe(|| {
        Model::from_bytes(Bytes::from(bytes), Path::new(&name), None)
    }));
    match result {
        Err(_) => panic!("case {case}: loading panicked"),
        Ok(Ok(_)) => Ok(()),
        Ok(Err(e)) => {
            let msg = e.to_string();
            assert!(
                msg.starts_with(&name),
                "case {case}: error does not name the file: {msg}"
            );
            assert!(
                !msg.contains('\n'),
                "case {case}: error is not one line: {msg}"
            );
            Err(msg)
        }
    }
}

#[test]
fn truncated_bit_flipped_and_random_files_give_typed_errors() {
    let seeds = seeds();
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let (mut cases, mut errors) = (0, 0);
    for (s, seed) in seeds.iter().enumerate() {
        // Every truncation point of the small seeds is cheap; sample the rest.
        for i in 0..400 {
            let cut = if seed.len() <= 400 {
                i.min(seed.len() - 1)
            } else {
                rng.below(seed.len())
            };
            errors += load(seed[..cut].to_vec(), cases).is_err() as usize;
            cases += 1;
        }
        for _ in 0..400 {
            let mut b = seed.clone();
            for _ in 0..1 + rng.below(8) {
                let at = rng.below(b.len());
                b[at] ^= 1 << rng.below(8);
            }
            errors += load(b, cases).is_err() as usize;
            cases += 1;
        }
        let _ = s;
    }
    for _ in 0..400 {
        let len = rng.below(4096);
        let b: Vec<u8> = (0..len).map(|_| rng.next() as u8).collect();
        errors += load(b, cases).is_err() as usize;
        cases += 1;
    }
    assert!(cases >= 1000, "only {cases} cases");
    println!(
        "{cases} mutated files: {errors} rejected with typed errors, the rest still valid models"
    );
    assert!(
        errors > cases / 3,
        "suspiciously few rejections: {errors} of {cases}"
    );
}

fn model_with(tensor: TensorProto) -> Vec<u8> {
    ModelProto {
        ir_version: Some(10),
        graph: Some(GraphProto {
            name: Some("g".into()),
            initializer: vec![tensor],
            ..Default::default()
        }),
        ..Default::default()
    }
    .encode_to_vec()
}

#[test]
fn absurd_dims_are_refused_without_allocating() {
    let cases: Vec<(&str, Vec<i64>)> = vec![
        ("huge", vec![1 << 62]),
        ("overflow", vec![1 << 40, 1 << 40]),
        ("negative", vec![-1]),
        ("negative-large", vec![i64::MIN]),
    ];
    for (name, dims) in cases {
        for raw in [true, false] {
            let mut t = TensorProto {
                name: Some(name.into()),
                dims: dims.clone(),
                data_type: Some(1),
                ..Default::default()
            };
            if raw {
                t.raw_data = Some(Bytes::from_static(&[0, 0, 128, 63]));
            } else {
                t.float_data = vec![1.0];
            }
            let err = load(model_with(t), 0).expect_err(name);
            assert!(err.contains(name), "{err}");
        }
    }
}

#[test]
fn missing_graph_and_empty_input_are_errors() {
    let e = load(
        ModelProto {
            ir_version: Some(9),
            ..Default::default()
        }
        .encode_to_vec(),
        7,
    )
    .unwrap_err();
    assert!(e.contains("no graph"), "{e}");
    let e = load(Vec::new(), 8).unwrap_err();
    assert!(e.contains("no graph"), "{e}");
}
