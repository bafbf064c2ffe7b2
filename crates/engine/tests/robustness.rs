//! No model makes a kernel panic: every node-corpus model, with each of its nodes' int, ints and
//! float attributes perturbed in turn to hostile values (negative, zero, huge, NaN), run on seeded
//! inputs of its declared types. Errors are fine; an "internal error" (a caught kernel panic) is
//! a bug.

use engine::{Capture, Session, Value};
use onnx_ir::{Dim, ElemType, Model, ValueType};
use onnx_proto::attribute_proto::AttributeType;
use std::path::Path;
use tensor::{DataType, Tensor};

struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
}

fn input(ty: &ValueType, rng: &mut Lcg) -> Option<Value> {
    let ValueType::Tensor {
        elem: ElemType::Known(dt),
        shape: Some(shape),
    } = ty
    else {
        return None;
    };
    let dims: Vec<usize> = shape
        .iter()
        .map(|d| match d {
            Dim::Fixed(n) => (*n).clamp(0, 64) as usize,
            _ => 2,
        })
        .collect();
    let n: usize = dims.iter().product();
    if n > 1 << 20 {
        return None;
    }
    let t = match dt {
        DataType::Float => Tensor::from_vec(
            dims,
            (0..n).map(|_| rng.next() as f32 / 2e9 - 1.0).collect(),
        ),
        DataType::Double => Tensor::from_vec(
            dims,
            (0..n).map(|_| rng.next() as f64 / 2e9 - 1.0).collect(),
        ),
        DataType::Int64 => {
            Tensor::from_vec(dims, (0..n).map(|_| (rng.next() % 7) as i64 - 2).collect())
        }
        DataType::Int32 => {
            Tensor::from_vec(dims, (0..n).map(|_| (rng.next() % 7) as i32 - 2).collect())
        }
        DataType::Bool => {
            Tensor::from_vec(dims, (0..n).map(|_| rng.next().is_multiple_of(2)).collect())
        }
        DataType::Uint8 => Tensor::from_vec(dims, (0..n).map(|_| rng.next() as u8).collect()),
        _ => return None,
    };
    t.ok().map(Value::Tensor)
}

const INTS: [i64; 6] = [-3, -1, 0, 2, 1 << 20, -(1 << 40)];
const FLOATS: [f32; 4] = [f32::NAN, -1.0, 0.0, 1e30];

#[test]
fn hostile_attributes_never_panic_a_kernel() {
    let corpus = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../corpus/node");
    assert!(
        corpus.is_dir(),
        "run scripts/gen_node_corpus.py corpus (scripts/test.sh does it)"
    );
    let mut dirs: Vec<_> = std::fs::read_dir(&corpus)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    dirs.sort();
    std::panic::set_hook(Box::new(|_| {}));
    let mut rng = Lcg(7);
    let (mut runs, mut bugs) = (0usize, Vec::new());
    for d in &dirs {
        let Ok(model) = Model::load(d.join("model.onnx")) else {
            continue;
        };
        let n_nodes = model.graph().node.len();
        for i in 0..n_nodes {
            let n_attrs = model.graph().node[i].attribute.len();
            for a in 0..n_attrs {
                let mut m = model.clone();
                let attr = &mut m.proto.graph.as_mut().unwrap().node[i].attribute[a];
                match attr.r#type.and_then(|t| AttributeType::try_from(t).ok()) {
                    Some(AttributeType::Int) => {
                        attr.i = Some(INTS[rng.next() as usize % INTS.len()])
                    }
                    Some(AttributeType::Ints) if !attr.ints.is_empty() => {
                        let k = rng.next() as usize % attr.ints.len();
                        attr.ints[k] = INTS[rng.next() as usize % INTS.len()];
                    }
                    Some(AttributeType::Float) => {
                        attr.f = Some(FLOATS[rng.next() as usize % FLOATS.len()])
                    }
                    _ => continue,
                }
                let Ok(session) = Session::new(m) else {
                    continue;
                };
                let inputs: Option<Vec<(String, Value)>> = session
                    .inputs()
                    .iter()
                    .filter(|s| !s.has_initializer)
                    .map(|s| input(&s.ty.0, &mut rng).map(|v| (s.name.clone(), v)))
                    .collect();
                let Some(inputs) = inputs else { continue };
                runs += 1;
                if let Err(e) = session.run(inputs, &Capture::None) {
                    let e = e.to_string();
                    if e.contains("internal error") {
                        bugs.push(format!(
                            "{}: node {i} attribute {a}: {e}",
                            d.file_name().unwrap().to_string_lossy()
                        ));
                    }
                }
            }
        }
    }
    let _ = std::panic::take_hook();
    println!(
        "{runs} runs with a perturbed attribute, {} kernel panics",
        bugs.len()
    );
    assert!(runs > 1000, "only {runs} runs");
    assert!(
        bugs.is_empty(),
        "{} kernel panics in {runs} runs:\n{}",
        bugs.len(),
        bugs.join("\n")
    );
}
